#!/usr/bin/env bash
# scripts/cluster.sh -n N --port P [options] -- SERVE_ARGS...
#
# Runs N `specula serve SERVE_ARGS` replicas (the binary from $SPECULA_BIN, default
# build/bin/specula) on this machine, and/or uses replicas already running elsewhere (--remote),
# behind Debian's HAProxy on port P, in the foreground. SIGTERM or Ctrl-C stops it all: HAProxy
# stops taking connections, each replica drains (what is in flight finishes), then everything exits.
#
# The generated HAProxy config (print it with --print-config):
#   * prefix affinity: consistent hashing on the start of the request's prompt (the first message
#     of "messages", or the start of "prompt", wherever the key sits in the JSON body), so requests
#     sharing a system prompt - and the turns of one conversation - land on the replica that
#     already holds that prefix in its cache (rendezvous hashing in scripts/cluster_route.lua,
#     which HAProxy runs);
#   * load-aware fallback: a saturated replica (more requests in flight than its /props
#     total_slots) passes the request on to the key's next replica in hash order;
#   * active health checks on GET /health (a loading or draining replica answers 503 and is taken
#     out); a request whose connection failed, that got no response, or that a draining replica
#     refused (503) is retried on another replica (3 tries); a response already started is never
#     retried;
#   * timeouts for long SSE streams (10 minutes of silence), response header X-Specula-Replica.
#
# Bad input: a busy port, a replica that exits (a missing model, ...) or never becomes healthy,
# or an unreachable --remote replica is named on stderr and the script exits 1, stopping whatever
# it started. Logs: --log-dir (default: a new temporary folder, printed).
set -euo pipefail

usage() {
    cat <<'EOF'
usage: scripts/cluster.sh -n N --port P [options] -- SERVE_ARGS...

  -n N                  local replicas to start (0 with --remote only)
  --port P              HAProxy's port (the one clients use)
  --host ADDR           HAProxy's bind address (default 127.0.0.1; 0.0.0.0 for other machines)
  --replica-port B      first local replica's port (default P+1; replica i listens on B+i-1)
  --remote HOST:PORT    a `specula serve` already running elsewhere (repeatable)
  --balance MODE        prefix (default), roundrobin or leastconn
  --hash-bytes N        bytes of the prompt's start that are hashed (default 256)
  --replica-slots S     slots each replica has, for --print-config (default: SERVE_ARGS'
                        -np/--parallel, else 1; a running cluster reads each one's /props)
  --start-timeout S     seconds each replica may take to become healthy (default 300)
  --stop-timeout S      seconds to wait for the replicas to drain on stop (default 45)
  --log-dir DIR         replica and HAProxy logs (default: a new temporary folder)
  --print-config        print the HAProxy config and exit (use it on a balancer machine)
  SERVE_ARGS            `specula serve` arguments for the local replicas (not --port/--host;
                        -t defaults to the hardware threads / N)
EOF
}

die() {
    echo "cluster: error: $*" >&2
    exit 1
}

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
SPECULA_BIN="${SPECULA_BIN:-$ROOT/build/bin/specula}"
N=""
PORT=""
HOST=127.0.0.1
REPLICA_PORT=""
REMOTES=()
BALANCE=prefix
HASH_BYTES=256
REPLICA_SLOTS=""
START_TIMEOUT=300
STOP_TIMEOUT=45
LOG_DIR=""
PRINT_CONFIG=0
SERVE_ARGS=()

is_uint() { [[ "$1" =~ ^[0-9]+$ ]]; }

while [ $# -gt 0 ]; do
    case "$1" in
        -n) N="${2:-}"; shift 2 || die "-n needs a value" ;;
        --port) PORT="${2:-}"; shift 2 || die "--port needs a value" ;;
        --host) HOST="${2:-}"; shift 2 || die "--host needs a value" ;;
        --replica-port) REPLICA_PORT="${2:-}"; shift 2 || die "--replica-port needs a value" ;;
        --remote) REMOTES+=("${2:-}"); shift 2 || die "--remote needs HOST:PORT" ;;
        --balance) BALANCE="${2:-}"; shift 2 || die "--balance needs a value" ;;
        --hash-bytes) HASH_BYTES="${2:-}"; shift 2 || die "--hash-bytes needs a value" ;;
        --replica-slots) REPLICA_SLOTS="${2:-}"; shift 2 || die "--replica-slots needs a value" ;;
        --start-timeout) START_TIMEOUT="${2:-}"; shift 2 || die "--start-timeout needs a value" ;;
        --stop-timeout) STOP_TIMEOUT="${2:-}"; shift 2 || die "--stop-timeout needs a value" ;;
        --log-dir) LOG_DIR="${2:-}"; shift 2 || die "--log-dir needs a value" ;;
        --print-config) PRINT_CONFIG=1; shift ;;
        -h | --help) usage; exit 0 ;;
        --) shift; SERVE_ARGS=("$@"); break ;;
        *) usage >&2; die "unknown option '$1' (SERVE_ARGS go after --)" ;;
    esac
done

[ -n "$N" ] || { [ ${#REMOTES[@]} -gt 0 ] && N=0; } || true
[ -n "$N" ] || { usage >&2; die "give -n N (local replicas) and/or --remote HOST:PORT"; }
is_uint "$N" || die "-n must be a number, got '$N'"
[ "$N" -le 64 ] || die "-n must be at most 64, got $N"
[ -n "$PORT" ] || die "give --port P (HAProxy's port)"
is_uint "$PORT" && [ "$PORT" -ge 1 ] && [ "$PORT" -le 65535 ] ||
    die "--port must be in [1, 65535], got '$PORT'"
REPLICA_PORT="${REPLICA_PORT:-$((PORT + 1))}"
is_uint "$REPLICA_PORT" && [ "$REPLICA_PORT" -ge 1 ] && [ $((REPLICA_PORT + N - 1)) -le 65535 ] ||
    die "--replica-port must leave room for $N ports below 65536, got '$REPLICA_PORT'"
case "$BALANCE" in prefix | roundrobin | leastconn) ;; *)
    die "--balance must be prefix, roundrobin or leastconn, got '$BALANCE'" ;;
esac
is_uint "$HASH_BYTES" && [ "$HASH_BYTES" -ge 16 ] && [ "$HASH_BYTES" -le 16384 ] ||
    die "--hash-bytes must be in [16, 16384], got '$HASH_BYTES'"
if [ -z "$REPLICA_SLOTS" ]; then
    REPLICA_SLOTS=1
    for ((i = 0; i + 1 < ${#SERVE_ARGS[@]}; ++i)); do
        case "${SERVE_ARGS[$i]}" in -np | --parallel | --max-num-seqs) REPLICA_SLOTS="${SERVE_ARGS[$((i + 1))]}" ;; esac
    done
fi
is_uint "$REPLICA_SLOTS" && [ "$REPLICA_SLOTS" -ge 1 ] && [ "$REPLICA_SLOTS" -le 256 ] ||
    die "--replica-slots (or -np in SERVE_ARGS) must be in [1, 256], got '$REPLICA_SLOTS'"
is_uint "$START_TIMEOUT" || die "--start-timeout must be whole seconds, got '$START_TIMEOUT'"
is_uint "$STOP_TIMEOUT" || die "--stop-timeout must be whole seconds, got '$STOP_TIMEOUT'"
[ $((N + ${#REMOTES[@]})) -ge 1 ] || die "no replicas: give -n N >= 1 or --remote HOST:PORT"
for r in "${REMOTES[@]}"; do
    [[ "$r" =~ ^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9._-]+):([0-9]+)$ ]] && [ "${BASH_REMATCH[2]}" -le 65535 ] ||
        die "--remote must be HOST:PORT, got '$r'"
done
for a in "${SERVE_ARGS[@]}"; do
    case "$a" in
        --port | --port=* | --host | --host=*)
            die "SERVE_ARGS must not set $a: cluster.sh gives each replica its port" ;;
    esac
done
if [ "$N" -gt 0 ]; then
    [ ${#SERVE_ARGS[@]} -gt 0 ] || die "give the replicas' \`specula serve\` arguments after --"
    [ -x "$SPECULA_BIN" ] || die "specula binary not found: $SPECULA_BIN (build it, or set SPECULA_BIN)"
fi
if [ "$PRINT_CONFIG" -eq 0 ]; then
    command -v haproxy >/dev/null || die "haproxy not found (Debian: apt-get install haproxy; scripts/setup.sh installs it)"
    command -v curl >/dev/null || die "curl not found (scripts/setup.sh installs it)"
fi

# Local replicas get an even share of the threads unless SERVE_ARGS says -t.
THREAD_ARGS=()
if [ "$N" -gt 0 ]; then
    has_threads=0
    for a in "${SERVE_ARGS[@]}"; do
        case "$a" in -t | --threads | --threads=* | -t[0-9]*) has_threads=1 ;; esac
    done
    if [ "$has_threads" -eq 0 ]; then
        THREAD_ARGS=(-t "$(($(nproc) / N > 0 ? $(nproc) / N : 1))")
    fi
fi

NAMES=()
ADDRS=()
SLOTS=()  # each replica's slots: its HAProxy weight, the capacity cluster_route.lua uses
for ((i = 1; i <= N; ++i)); do
    NAMES+=("r$i")
    ADDRS+=("127.0.0.1:$((REPLICA_PORT + i - 1))")
    SLOTS+=("$REPLICA_SLOTS")
done
for ((i = 0; i < ${#REMOTES[@]}; ++i)); do
    NAMES+=("remote$((i + 1))")
    ADDRS+=("${REMOTES[$i]}")
    SLOTS+=("$REPLICA_SLOTS")
done
LUA="$ROOT/scripts/cluster_route.lua"
[ -f "$LUA" ] || die "missing $LUA (the routing script HAProxy loads)"

# The HAProxy config. The routing key is the first message of "messages" (up to its first '}'),
# else the start of the "prompt" string (up to its first '"'), else the body's start: cut to
# --hash-bytes. It is found wherever the key sits in the body, so "model", "stream" or
# "max_tokens" before it change nothing.
haproxy_config() {
    local raw key_expr
    IFS= read -r raw <<'RAW' || true
req.body,regsub('(?s)^.*?"messages"[[:space:]]*:[[:space:]]*[[][[:space:]]*({[^}]*).*','\1'),regsub('(?s)^.*?"prompt"[[:space:]]*:[[:space:]]*("[^"]*).*','\1'),bytes(0,HASH_BYTES)
RAW
    raw="${raw//HASH_BYTES/$HASH_BYTES}"
    # Written inside the config's double quotes: \ and " escaped.
    key_expr="${raw//\\/\\\\}"
    key_expr="${key_expr//\"/\\\"}"
    cat <<EOF
# Generated by scripts/cluster.sh for specula serve replicas.
global
    maxconn 4096
    # A request must fit in one buffer to be hashed whole and retried (larger ones are hashed on
    # their first 64 KiB and not retried after a 503 or an empty response).
    tune.bufsize 65536
    hard-stop-after ${STOP_TIMEOUT}s
    log stderr format short local0 info
EOF
    [ "$BALANCE" = prefix ] && echo "    lua-load $LUA"
    cat <<EOF

defaults
    mode http
    log global
    option httplog
    option dontlognull
    option http-buffer-request
    option http-no-delay
    # Retry what never started: a failed connection, no response at all (a replica that died
    # with the request), a 503 (a draining or overloaded replica refuses before generating).
    retry-on conn-failure empty-response 503
    retries 3
    option redispatch 1
    timeout connect 5s
    timeout http-request 30s
    timeout queue 60s
    timeout client 10m
    timeout server 10m
    timeout http-keep-alive 10s
    timeout check 5s

frontend specula
    bind ${HOST}:${PORT}
    default_backend replicas

backend replicas
EOF
    case "$BALANCE" in
        prefix)
            # The replica cluster_route.lua picks for the key; leastconn when none is UP, and for
            # a retry that is redispatched to another replica.
            echo "    balance leastconn"
            echo "    http-request set-var(txn.prefix) \"$key_expr\""
            echo "    http-request set-var(txn.replica) lua.specula_replica"
            for name in "${NAMES[@]}"; do
                echo "    use-server $name if { var(txn.replica) -m str $name }"
            done
            ;;
        *) echo "    balance $BALANCE" ;;
    esac
    cat <<EOF
    option httpchk GET /health
    http-check expect status 200
    default-server check inter 1s fall 2 rise 1
    http-response set-header X-Specula-Replica %[srv_name]
EOF
    for ((i = 0; i < ${#NAMES[@]}; ++i)); do
        echo "    server ${NAMES[$i]} ${ADDRS[$i]} weight ${SLOTS[$i]}"
    done
}

if [ "$PRINT_CONFIG" -eq 1 ]; then
    haproxy_config
    exit 0
fi

if [ -z "$LOG_DIR" ]; then
    LOG_DIR="$(mktemp -d "${TMPDIR:-/tmp}/specula-cluster.XXXXXX")"
else
    mkdir -p "$LOG_DIR" || die "cannot create --log-dir $LOG_DIR"
fi

# Something answers on the port: in use.
port_busy() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }
front_check_host="$HOST"
[ "$HOST" = "0.0.0.0" ] && front_check_host=127.0.0.1
port_busy "$front_check_host" "$PORT" && die "port $PORT is in use (something answers on $front_check_host:$PORT); choose another --port"
for ((i = 1; i <= N; ++i)); do
    p=$((REPLICA_PORT + i - 1))
    [ "$p" -ne "$PORT" ] || die "replica r$i's port $p is HAProxy's --port; choose another --replica-port"
    port_busy 127.0.0.1 "$p" && die "port $p (replica r$i) is in use; choose another --replica-port"
done

# Remote replicas must answer now (a loading one answers 503 and is waited for below).
for r in "${REMOTES[@]}"; do
    code=$(curl -s -o /dev/null -w '%{http_code}' --connect-timeout 3 -m 5 "http://$r/health") || true
    [ "$code" != "000" ] || die "remote replica $r is unreachable (no HTTP answer on http://$r/health within 5 s)"
done

PIDS=()      # local replicas' pids, r1.. in order
HAPROXY_PID=""
STOPPING=0

stop_all() {
    STOPPING=1
    trap '' INT TERM
    [ -n "$HAPROXY_PID" ] && kill -USR1 "$HAPROXY_PID" 2>/dev/null || true  # soft stop
    for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    local end=$((SECONDS + STOP_TIMEOUT))
    for pid in "${PIDS[@]}" $HAPROXY_PID; do
        while kill -0 "$pid" 2>/dev/null && [ $SECONDS -lt $end ]; do sleep 0.1; done
        if kill -0 "$pid" 2>/dev/null; then
            echo "cluster: pid $pid did not stop in ${STOP_TIMEOUT} s, killing it" >&2
            kill -KILL "$pid" 2>/dev/null || true
        fi
        wait "$pid" 2>/dev/null || true
    done
}

fail_stop() {
    echo "cluster: error: $*" >&2
    stop_all
    exit 1
}

log_tail() { tail -n 8 "$1" 2>/dev/null | sed 's/^/    /' >&2 || true; }

on_signal() {
    echo "cluster: stopping (HAProxy takes no new connections; replicas drain)" >&2
    stop_all
    echo "cluster: stopped" >&2
    exit 0
}
trap on_signal INT TERM

for ((i = 1; i <= N; ++i)); do
    p=$((REPLICA_PORT + i - 1))
    "$SPECULA_BIN" serve "${THREAD_ARGS[@]}" "${SERVE_ARGS[@]}" --host 127.0.0.1 --port "$p" \
        >"$LOG_DIR/r$i.log" 2>&1 &
    PIDS+=($!)
done

# Wait until every replica answers /health 200.
for ((i = 0; i < ${#NAMES[@]}; ++i)); do
    name=${NAMES[$i]}
    addr=${ADDRS[$i]}
    end=$((SECONDS + START_TIMEOUT))
    code=000
    while :; do
        if [ "$i" -lt "$N" ] && ! kill -0 "${PIDS[$i]}" 2>/dev/null; then
            status=0
            wait "${PIDS[$i]}" || status=$?
            echo "cluster: replica $name (port ${addr##*:}) exited with status $status before it became healthy; its log ($LOG_DIR/$name.log) ends:" >&2
            log_tail "$LOG_DIR/$name.log"
            fail_stop "replica $name failed to start"
        fi
        code=$(curl -s -o /dev/null -w '%{http_code}' --connect-timeout 2 -m 5 "http://$addr/health") || true
        [ "$code" = 200 ] && break
        if [ $SECONDS -ge $end ]; then
            [ "$i" -lt "$N" ] && log_tail "$LOG_DIR/$name.log"
            fail_stop "replica $name ($addr) did not become healthy in $START_TIMEOUT s (GET /health: $([ "$code" = 000 ] && echo "no answer" || echo "HTTP $code"))"
        fi
        sleep 0.1
    done
    slots=$(curl -s -m 5 "http://$addr/props" | grep -o '"total_slots":[0-9]*' | cut -d: -f2) || true
    if is_uint "${slots:-x}" && [ "$slots" -ge 1 ]; then SLOTS[$i]=$((slots > 256 ? 256 : slots)); fi
    if [ "$i" -lt "$N" ]; then
        echo "cluster: replica $name pid ${PIDS[$i]} http://$addr healthy" >&2
    else
        echo "cluster: replica $name http://$addr healthy (remote)" >&2
    fi
done

haproxy_config >"$LOG_DIR/haproxy.cfg"
haproxy -c -q -f "$LOG_DIR/haproxy.cfg" >"$LOG_DIR/haproxy-check.log" 2>&1 || {
    log_tail "$LOG_DIR/haproxy-check.log"
    fail_stop "the generated HAProxy config is invalid ($LOG_DIR/haproxy.cfg)"
}
haproxy -db -f "$LOG_DIR/haproxy.cfg" >"$LOG_DIR/haproxy.log" 2>&1 &
HAPROXY_PID=$!
end=$((SECONDS + 10))
until curl -s -o /dev/null --connect-timeout 1 -m 2 "http://$front_check_host:$PORT/health"; do
    if ! kill -0 "$HAPROXY_PID" 2>/dev/null; then
        log_tail "$LOG_DIR/haproxy.log"
        HAPROXY_PID=""
        fail_stop "HAProxy failed to start on $HOST:$PORT"
    fi
    [ $SECONDS -lt $end ] || fail_stop "HAProxy does not answer on $HOST:$PORT after 10 s"
    sleep 0.1
done
echo "cluster: haproxy pid $HAPROXY_PID http://$HOST:$PORT -> ${#NAMES[@]} replicas ($BALANCE); logs in $LOG_DIR" >&2
echo "cluster: ready" >&2

# Foreground: report replicas that exit (HAProxy routes around them); stop if HAProxy exits.
while :; do
    exited=""
    status=0
    wait -n -p exited || status=$?
    [ "$STOPPING" -eq 0 ] || break
    [ -n "$exited" ] || continue  # a signal woke the wait
    if [ "$exited" = "$HAPROXY_PID" ]; then
        log_tail "$LOG_DIR/haproxy.log"
        HAPROXY_PID=""
        fail_stop "HAProxy exited with status $status"
    fi
    for ((i = 0; i < N; ++i)); do
        if [ "${PIDS[$i]}" = "$exited" ]; then
            echo "cluster: replica r$((i + 1)) (pid $exited) exited with status $status; HAProxy routes around it" >&2
        fi
    done
done
