#!/usr/bin/env python3
"""Shared prompt prefixes under load (#40 item 3, docs/server-api.md): starts `specula serve`
with and without prefix caching (vLLM's --no-enable-prefix-caching), sends N concurrent
completions whose prompts share one long prefix (an agent's system prompt and tools) and differ in
their last words, and prints the wall time, each run's prompt tokens evaluated (prompt_tokens_total
less prompt_tokens_cached_total from /metrics), vLLM's prefix_cache_hits / queries (token counts),
the shared-prefix gauges and the load average before and after (the machine may be shared:
indicative only). The prefix is sized in tokens with the server's /tokenize (--prefix-tokens);
a prefix longer than the model's context_length needs -c above it (a warning, not an error: the
engine runs any -c; the outputs of both runs are compared, not judged).

  scripts/bench_prefix_sharing.py -m models/w-d2048-f5632-l20-Q8_0.gguf -n 8 --prefix-tokens 10000
  scripts/bench_prefix_sharing.py -m models/w-d2048-f5632-l20-Q8_0.gguf -n 8 --prefix-words 400

--partial: the first request's prompt is the prefix and a long tail of its own; the N others
arrive once it is done and share only the prefix with it (agents: the same system prompt and
tools, other messages): they read the first rows of its block.
--turn: the first request's prompt is the first half of the prefix; the N others hold all of it
and the second half (a later turn, or tools after a system prompt): one extends its block, the
others read it (--bin of an older build shows the cost without extending).
"""
import argparse
import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SENTENCES = ["Once upon a time there was a little robot who helped everyone.",
             "The robot had a red hat and a big blue box of tools.",
             "Every morning it walked to the park and said hello to the birds.",
             "When a child was sad, the robot told a funny story."]
TAILS = ["One day", "The cat", "A bird", "Mom said", "Tom ran", "The sun", "It was", "They saw"]


def request(port, path, body, timeout=3600):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError as e:
        print(f"{path}: HTTP {e.code}: {e.read().decode()[:400]}", file=sys.stderr)
        raise


def metrics(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        m = re.match(r"^([a-z_:]+)(?:\{[^}]*\})? ([0-9.e+-]+)$", line)
        if m:
            out[m.group(1)] = float(m.group(2))
    return out


def make_prefix(args, port):
    if not args.prefix_tokens:
        return " ".join([SENTENCES[0]] * (args.prefix_words // 11))
    def tokens(k):  # the prefix of k sentences, tokenized
        text = " ".join(SENTENCES[i % len(SENTENCES)] for i in range(k))
        return len(request(port, "/tokenize", {"content": text})["tokens"]), text

    per = tokens(len(SENTENCES))[0] / len(SENTENCES)
    k = max(1, int(args.prefix_tokens / per))
    while tokens(k)[0] < args.prefix_tokens:
        k += 1
    return tokens(k)[1]


def concurrent(port, prompts, max_tokens):
    replies = [None] * len(prompts)

    def one(i):
        t = time.time()
        r = request(port, "/v1/completions",
                    {"prompt": prompts[i], "max_tokens": max_tokens, "temperature": 0})
        replies[i] = (r, time.time() - t)

    ts = [threading.Thread(target=one, args=(i,)) for i in range(len(prompts))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if None in replies:
        sys.exit("a request failed (above)")
    return replies


def run(args, caching, port):
    cmd = [args.bin, "serve", "-m", args.model, "--port", str(port), "-t", str(args.threads),
           "--parallel", str(args.n), "-c", str(args.ctx), "--kv-pool", str(args.n * args.ctx),
           "-ctk", args.kv_type, "-ctv", args.kv_type]
    cmd += ["--prefix-min-tokens", str(args.min_tokens)] if caching else [
        "--no-enable-prefix-caching"]
    srv = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        for line in srv.stderr:
            if "listening" in line:
                break
        threading.Thread(target=lambda: [None for _ in srv.stderr], daemon=True).start()
        prefix = make_prefix(args, port)
        load0 = os.getloadavg()
        t0 = time.time()
        first = None
        if args.partial:  # its own long tail: its block holds more than the others share
            first = concurrent(port, [prefix + " " + " ".join(SENTENCES[::-1] * 2)],
                               args.max_tokens)[0]
        elif args.turn:  # the first half of the prefix: its block holds less than they share
            parts = prefix.split(". ")
            first = concurrent(port, [". ".join(parts[:len(parts) // 2]) + "."],
                               args.max_tokens)[0]
        replies = concurrent(port, [prefix + " " + TAILS[i % len(TAILS)] + f" {i}"
                                    for i in range(args.n)], args.max_tokens)
        wall = time.time() - t0
        m = metrics(port)
        evaluated = m.get("specula:prompt_tokens_total", 0) - m.get(
            "specula:prompt_tokens_cached_total", 0)
        n_prompt = sum(r[0]["usage"]["prompt_tokens"] for r in replies)
        if first:
            n_prompt += first[0]["usage"]["prompt_tokens"]
        texts = [r[0]["choices"][0]["text"] for r in replies]
        return {"prefix_caching": caching, "wall_s": round(wall, 2),
                "mean_latency_s": round(sum(r[1] for r in replies) / args.n, 2),
                "prompt_tokens": n_prompt, "evaluated": int(evaluated),
                "cached": [r[0]["usage"].get("prompt_tokens_details", {}).get("cached_tokens")
                           for r in replies],
                "shared_positions": m.get("specula:prefix_shared_positions"),
                "hits": m.get("vllm:prefix_cache_hits_total"),
                "queries": m.get("vllm:prefix_cache_queries_total"),
                "loadavg_before": [round(x, 2) for x in load0],
                "loadavg_after": [round(x, 2) for x in os.getloadavg()]}, texts
    finally:
        srv.terminate()
        srv.wait()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("-m", "--model", required=True)
    p.add_argument("--bin", default=os.path.join(ROOT, "build/bin/specula"))
    p.add_argument("-n", type=int, default=8)
    p.add_argument("-t", "--threads", type=int, default=2)
    p.add_argument("-c", "--ctx", type=int, default=0,
                   help="per-request context (default: the prefix's tokens + 1024)")
    p.add_argument("--prefix-words", type=int, default=400)
    p.add_argument("--prefix-tokens", type=int, default=0,
                   help="size the shared prefix in tokens instead (/tokenize)")
    p.add_argument("--min-tokens", type=int, default=64, help="--prefix-min-tokens when on")
    p.add_argument("--kv-type", default="f16", help="-ctk / -ctv")
    p.add_argument("--max-tokens", type=int, default=16)
    p.add_argument("--partial", action="store_true")
    p.add_argument("--turn", action="store_true")
    p.add_argument("--only", choices=["on", "off"], help="one run only")
    p.add_argument("--port", type=int, default=18431)
    args = p.parse_args()
    if not args.ctx:
        args.ctx = (args.prefix_tokens or 3 * args.prefix_words) + 1024
    runs = [c for c in (False, True) if args.only in (None, "on" if c else "off")]
    outs = []
    for k, caching in enumerate(runs):
        res, texts = run(args, caching, args.port + k)
        print(json.dumps(res), flush=True)
        outs.append(texts)
    if len(outs) == 2:
        print("outputs identical:", outs[0] == outs[1])
        return 0 if outs[0] == outs[1] else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
