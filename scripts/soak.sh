#!/usr/bin/env bash
# Soak test of `specula serve`:  scripts/soak.sh [CLIENTS=16] [MINUTES=10]
# Starts the built server on a free loopback port with the stories260K target and the llama2xs
# draft (../shared/models/tinystories; --draft 4, --parallel 4), then runs CLIENTS client
# threads for MINUTES minutes, each cycling through greedy streamed, sampled streamed, stopped
# (stop string, not streamed), cancelled (the client hangs up after a few chunks) and malformed
# (bad JSON, text/plain, bad fields) requests. Fails (exit 1) on any failed request, malformed
# SSE, greedy output differing from `specula run --temp 0`, or server RSS growing more than 5%
# between the warm-up (the first fifth of the run, at least 20 s: its highest RSS, sampled every
# second) and the end.
# The server's --cache-ram pool is kept at 1 MiB, which it fills during the warm-up: a pool still
# filling up to a larger bound would be growth by design, not a leak.
# Loopback only; every loop is bounded by the deadline and every socket by a timeout.
# Env: SPECULA_BIN (default build/bin/specula), SPECULA_SHARED_DIR, SOAK_THREADS (server -t, 2).
set -euo pipefail
CLIENTS="${1:-16}"
MINUTES="${2:-10}"
[[ "$CLIENTS" =~ ^[0-9]+$ && "$CLIENTS" -ge 1 && "$CLIENTS" -le 256 ]] ||
    { echo "soak.sh: CLIENTS must be in [1, 256]" >&2; exit 2; }
[[ "$MINUTES" =~ ^[0-9]+([.][0-9]+)?$ ]] || { echo "soak.sh: MINUTES must be a number" >&2; exit 2; }
cd "$(dirname "$0")/.."
SHARED="${SPECULA_SHARED_DIR:-$(pwd)/../shared}"
BIN="${SPECULA_BIN:-build/bin/specula}"
TARGET="$SHARED/models/tinystories/stories260K.gguf"
DRAFT="$SHARED/models/tinystories/llama2xs.gguf"
for f in "$BIN" "$TARGET" "$DRAFT"; do [ -e "$f" ] || { echo "soak.sh: missing $f" >&2; exit 1; }; done

LOG="$(mktemp /tmp/specula-soak-XXXXXX.log)"
"$BIN" serve -m "$TARGET" -md "$DRAFT" --draft 4 --parallel 4 -t "${SOAK_THREADS:-2}" --max-model-len 1024 \
    --cache-ram 1 \
    --host 127.0.0.1 --port 0 >"$LOG" 2>&1 &
SERVER_PID=$!
cleanup() {
    kill "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
}
trap cleanup EXIT
PORT=""
for _ in $(seq 1 600); do
    PORT="$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$LOG" | grep -o '[0-9]*$' || true)"
    [ -n "$PORT" ] && break
    kill -0 "$SERVER_PID" 2>/dev/null || { cat "$LOG"; echo "soak.sh: server exited" >&2; exit 1; }
    sleep 0.1
done
[ -n "$PORT" ] || { echo "soak.sh: server did not start" >&2; exit 1; }

# Greedy references from plain decoding.
REFS="$(mktemp /tmp/specula-soak-refs-XXXXXX.json)"
python3 - "$BIN" "$TARGET" "$REFS" <<'PY'
import json, subprocess, sys
bin_, target, out = sys.argv[1:4]
prompts = ["Once upon a time", "Lily saw a big red", "The little dog", "Tom and Sue went to"]
refs = {}
for p in prompts:
    r = subprocess.run([bin_, "run", "-m", target, "-p", p, "-n", "32", "--temp", "0", "-t", "1"],
                       capture_output=True, timeout=120)
    if r.returncode != 0:
        sys.exit("specula run failed: " + r.stderr.decode(errors="replace"))
    refs[p] = r.stdout.decode("utf-8", errors="surrogateescape")
json.dump(refs, open(out, "w"))
PY

python3 - "$PORT" "$SERVER_PID" "$CLIENTS" "$MINUTES" "$REFS" <<'PY'
import http.client, json, random, socket, sys, threading, time
port, pid, clients, minutes, refs_path = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
refs = json.load(open(refs_path))
prompts = list(refs)
t0 = time.time()
end = t0 + minutes * 60
warm_end = t0 + max(20.0, minutes * 60 / 5)
lock = threading.Lock()
counts, failures = {}, []

def rss_kb():
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0

def fail(kind, msg):
    with lock:
        failures.append(f"{kind}: {msg}")

def count(kind):
    with lock:
        counts[kind] = counts.get(kind, 0) + 1

def conn():
    return http.client.HTTPConnection("127.0.0.1", port, timeout=120)

def post(body, ctype="application/json", path="/v1/completions"):
    c = conn()
    c.request("POST", path, body=body, headers={"Content-Type": ctype})
    return c, c.getresponse()

def read_sse(resp, limit=None):
    """Parses an SSE stream: returns (text, finish_reason, done); raises on a malformed event."""
    text, finish, done, n = "", None, False, 0
    buf = b""
    while True:
        chunk = resp.read1(65536) if hasattr(resp, "read1") else resp.read(65536)
        if not chunk:
            break
        buf += chunk
        while b"\n\n" in buf:
            ev, buf = buf.split(b"\n\n", 1)
            ev = ev.decode("utf-8")
            if ev.startswith(":"):
                continue
            if not ev.startswith("data: "):
                raise ValueError("not an SSE data event: %r" % ev[:200])
            data = ev[6:]
            if data == "[DONE]":
                done = True
                continue
            if done:
                raise ValueError("data after [DONE]")
            j = json.loads(data)
            if "error" in j:
                raise ValueError("error event: %s" % data[:300])
            ch = j["choices"][0]
            text += ch.get("text", "")
            if ch.get("finish_reason") is not None:
                finish = ch["finish_reason"]
            n += 1
            if limit is not None and n >= limit:
                return text, finish, done
    if buf.strip():
        raise ValueError("trailing bytes: %r" % buf[:200])
    return text, finish, done

def greedy(rng):
    p = rng.choice(prompts)
    c, r = post(json.dumps({"prompt": p, "max_tokens": 32, "temperature": 0, "stream": True}))
    if r.status != 200:
        return fail("greedy", "status %d" % r.status)
    text, finish, done = read_sse(r)
    c.close()
    if not done or finish is None:
        return fail("greedy", "stream did not finish")
    if text != refs[p]:
        return fail("greedy", "mismatch for %r: %r vs %r" % (p, text, refs[p]))
    count("greedy")

def sampled(rng):
    body = {"prompt": rng.choice(prompts), "max_tokens": rng.randint(1, 48), "temperature": 0.8,
            "seed": rng.randint(0, 1 << 30), "stream": True}
    c, r = post(json.dumps(body))
    if r.status != 200:
        return fail("sampled", "status %d" % r.status)
    _, finish, done = read_sse(r)
    c.close()
    if not done or finish not in ("stop", "length"):
        return fail("sampled", "bad finish %r done=%r" % (finish, done))
    count("sampled")

def stopped(rng):
    c, r = post(json.dumps({"prompt": rng.choice(prompts), "max_tokens": 48, "temperature": 0,
                            "stop": ["the", "."]}))
    body = r.read()
    c.close()
    if r.status != 200:
        return fail("stopped", "status %d %r" % (r.status, body[:200]))
    j = json.loads(body)
    t = j["choices"][0]["text"]
    if "the" in t or "." in t:
        return fail("stopped", "stop string in text %r" % t)
    count("stopped")

def cancelled(rng):
    c, r = post(json.dumps({"prompt": rng.choice(prompts), "max_tokens": 400, "ignore_eos": True,
                            "temperature": 0.5, "stream": True}))
    if r.status != 200:
        return fail("cancelled", "status %d" % r.status)
    read_sse(r, limit=rng.randint(1, 4))
    c.sock.shutdown(socket.SHUT_RDWR)
    c.close()
    count("cancelled")

def malformed(rng):
    cases = [("{not json", "application/json", 400), ('{"prompt": "x"}', "text/plain", 415),
             ('{"prompt": "x", "max_tokens": -5}', "application/json", 400),
             ('{"prompt": [1, 4294967301]}', "application/json", 400),
             ('{"prompt": "x", "max_tokens": 2147483647}', "application/json", 400),
             ('{"messages": []}', "application/json", 400)]
    body, ctype, want = rng.choice(cases)
    path = "/v1/chat/completions" if "messages" in body else "/v1/completions"
    c, r = post(body, ctype, path)
    data = r.read()
    c.close()
    if r.status != want or "error" not in json.loads(data):
        return fail("malformed", "%r got %d %r, want %d" % (body, r.status, data[:200], want))
    count("malformed")

kinds = [greedy, sampled, stopped, cancelled, malformed]

def client(i):
    rng = random.Random(i)
    k = i
    while time.time() < end:
        f = kinds[k % len(kinds)]
        k += 1
        try:
            f(rng)
        except Exception as e:
            fail(f.__name__, repr(e))

rss_warm = None
rss_series = []  # (seconds, kB) every 30 s, printed at the end to tell a trend from a step
threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(clients)]
for t in threads:
    t.start()
# The allocator keeps what the busiest moment so far needed (freed blocks stay resident), and the
# requests in flight come and go: one sample swings by ~1 MB (4-5%) second to second with no
# growth at all. So the warm-up's figure is the highest of its samples, taken every second.
rss_warm_max = 0
while time.time() < end:
    time.sleep(min(1.0, max(0.0, end - time.time())))
    if rss_warm is None:
        rss_warm_max = max(rss_warm_max, rss_kb())
        if time.time() >= warm_end:
            rss_warm = rss_warm_max
    if not rss_series or time.time() - t0 - rss_series[-1][0] >= 30:
        rss_series.append((round(time.time() - t0), rss_kb()))
for t in threads:
    t.join(timeout=180)
if any(t.is_alive() for t in threads):
    failures.append("a client did not finish within 180 s of the deadline")
time.sleep(1.0)
rss_end = rss_kb()
c = conn(); c.request("GET", "/health"); h = c.getresponse(); h.read()
if h.status != 200:
    failures.append("/health answered %d after the soak" % h.status)
total = sum(counts.values())
growth = (rss_end - rss_warm) / rss_warm * 100 if rss_warm else 0.0
print("soak: %d clients, %.1f min: %d requests ok (%s), %d failed; RSS %d kB at most in the warm-up, %d kB at the end (%+.1f%%)"
      % (clients, minutes, total, ", ".join("%s %d" % kv for kv in sorted(counts.items())),
         len(failures), rss_warm or 0, rss_end, growth))
print("soak: RSS kB by time: " + " ".join("%ds:%d" % x for x in rss_series))
for f in failures[:20]:
    print("  FAIL " + f)
if rss_warm and growth > 5.0:
    failures.append("RSS grew %.1f%%" % growth)
    print("  FAIL RSS grew %.1f%% (> 5%%)" % growth)
if counts.get("greedy", 0) == 0:
    failures.append("no greedy request completed")
sys.exit(1 if failures else 0)
PY
