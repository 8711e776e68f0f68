#!/usr/bin/env bash
# scripts/cluster.sh -n N --port P [options] -- SERVE_ARGS...
#
# Runs N `specula serve SERVE_ARGS` replicas (the binary from $SPECULA_BIN, default
# build/bin/specula) on this machine, and/or uses replicas already running elsewhere (--replica
# HOST:PORT), behind Debian's HAProxy on port P, in the foreground. SIGTERM or Ctrl-C stops it
# all: HAProxy stops taking connections, each replica drains (what is in flight finishes), then
# everything exits. A local replica that exits while the cluster runs is restarted, with backoff
# (1 s, doubling up to --restart-backoff-max), and each exit and restart is said on stderr.
#
# One memory budget for the host: the local replicas share --host-memory (default MemAvailable):
# each gets `--memory-budget` = its share, which its own memory plan (weights, KV pool, passes,
# --cache-ram) must fit, its KV pool and default prompt cache sized from the share, not from the
# whole host; N x --cache-ram over the budget is refused before anything starts.
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
#     out); a request is retried on another replica (3 tries) only when it never ran: its
#     connection failed, or the replica refused it with 503 (specula answers 503 only for work it
#     did not start: draining, loading, too many connections, a KV pool wait that timed out).
#     Never after an empty response or another 5xx: a request that crashed its replica is not
#     replayed onto the next one (a poison request takes down one replica, which is restarted);
#   * --metrics-port M: HAProxy's Prometheus exporter (per replica and backend counters:
#     requests, errors, retries, health) at http://HOST:M/metrics;
#   * timeouts for long SSE streams (10 minutes of silence), response header X-Specula-Replica.
#
# Bad input: a busy port, a replica that exits (a missing model, ...) or never becomes healthy,
# or an unreachable --replica is named on stderr and the script exits 1, stopping whatever
# it started. Logs: --log-dir (default: a new temporary folder, printed).
set -euo pipefail

usage() {
    cat <<'EOF'
usage: scripts/cluster.sh -n N --port P [options] -- SERVE_ARGS...

  -n N                  local replicas to start (0 with --replica only)
  --port P              HAProxy's port (the one clients use)
  --host ADDR           HAProxy's bind address (default 127.0.0.1; 0.0.0.0 for other machines)
  --replica-port B      first local replica's port (default P+1; replica i listens on B+i-1)
  --replica HOST:PORT   a `specula serve` already running elsewhere (repeatable; --remote is
                        the same)
  --balance MODE        prefix (default), roundrobin or leastconn
  --hash-bytes N        bytes of the prompt's start that are hashed (default 256)
  --replica-slots S     slots each replica has, for --print-config (default: SERVE_ARGS'
                        -np/--parallel, else 1; a running cluster reads each one's /props)
  --start-timeout S     seconds each replica may take to become healthy (default 300)
  --stop-timeout S      seconds to wait for the replicas to drain on stop (default 45)
  --log-dir DIR         replica and HAProxy logs (default: a new temporary folder)
  --host-memory MiB     memory the local replicas share (default: MemAvailable, /proc/meminfo)
  --metrics-port M      serve HAProxy's Prometheus exporter on HOST:M/metrics
  --no-restart          leave a local replica that exits down (default: restart it)
  --restart-backoff-max S  longest wait before restarting a replica (default 30)
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
HOST_MEMORY=""
METRICS_PORT=""
RESTART=1
BACKOFF_MAX=30
SERVE_ARGS=()

is_uint() { [[ "$1" =~ ^[0-9]+$ ]]; }

while [ $# -gt 0 ]; do
    case "$1" in
        -n) N="${2:-}"; shift 2 || die "-n needs a value" ;;
        --port) PORT="${2:-}"; shift 2 || die "--port needs a value" ;;
        --host) HOST="${2:-}"; shift 2 || die "--host needs a value" ;;
        --replica-port) REPLICA_PORT="${2:-}"; shift 2 || die "--replica-port needs a value" ;;
        --remote | --replica) REMOTES+=("${2:-}"); shift 2 || die "$1 needs HOST:PORT" ;;
        --host-memory) HOST_MEMORY="${2:-}"; shift 2 || die "--host-memory needs a value" ;;
        --metrics-port) METRICS_PORT="${2:-}"; shift 2 || die "--metrics-port needs a value" ;;
        --no-restart) RESTART=0; shift ;;
        --restart-backoff-max) BACKOFF_MAX="${2:-}"; shift 2 || die "--restart-backoff-max needs a value" ;;
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
[ -n "$N" ] || { usage >&2; die "give -n N (local replicas) and/or --replica HOST:PORT"; }
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
[ $((N + ${#REMOTES[@]})) -ge 1 ] || die "no replicas: give -n N >= 1 or --replica HOST:PORT"
for r in "${REMOTES[@]}"; do
    [[ "$r" =~ ^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9._-]+):([0-9]+)$ ]] && [ "${BASH_REMATCH[2]}" -le 65535 ] ||
        die "--replica must be HOST:PORT, got '$r'"
done
is_uint "$BACKOFF_MAX" && [ "$BACKOFF_MAX" -ge 1 ] ||
    die "--restart-backoff-max must be whole seconds >= 1, got '$BACKOFF_MAX'"
if [ -n "$METRICS_PORT" ]; then
    is_uint "$METRICS_PORT" && [ "$METRICS_PORT" -ge 1 ] && [ "$METRICS_PORT" -le 65535 ] ||
        die "--metrics-port must be in [1, 65535], got '$METRICS_PORT'"
    [ "$METRICS_PORT" -ne "$PORT" ] || die "--metrics-port must differ from --port ($PORT)"
fi
for a in "${SERVE_ARGS[@]}"; do
    case "$a" in
        --port | --port=* | --host | --host=*)
            die "SERVE_ARGS must not set $a: cluster.sh gives each replica its port" ;;
        --memory-budget | --memory-budget=*)
            die "SERVE_ARGS must not set $a: cluster.sh gives each local replica its share of --host-memory" ;;
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

# One memory budget for the host, checked before anything starts: the local replicas share
# --host-memory (default MemAvailable); each one's plan must fit its share (--memory-budget).
MEMORY_ARGS=()
if [ "$N" -gt 0 ]; then
    if [ -z "$HOST_MEMORY" ]; then
        kb=$(awk '/^MemAvailable:/ { print $2 }' /proc/meminfo 2>/dev/null) || true
        is_uint "${kb:-x}" || die "cannot read MemAvailable from /proc/meminfo; give --host-memory MiB"
        HOST_MEMORY=$((kb / 1024))
        MEMORY_FROM="MemAvailable"
    else
        is_uint "$HOST_MEMORY" && [ "$HOST_MEMORY" -ge 1 ] ||
            die "--host-memory must be a size in MiB >= 1, got '$HOST_MEMORY'"
        MEMORY_FROM="--host-memory"
    fi
    SHARE=$((HOST_MEMORY / N))
    cache_ram=""
    for ((i = 0; i < ${#SERVE_ARGS[@]}; ++i)); do
        case "${SERVE_ARGS[$i]}" in
            --cache-ram) cache_ram="${SERVE_ARGS[$((i + 1))]:-}" ;;
            --cache-ram=*) cache_ram="${SERVE_ARGS[$i]#--cache-ram=}" ;;
        esac
    done
    if [ -n "$cache_ram" ]; then
        if [ "$cache_ram" != -1 ]; then  # -1: what each replica's plan leaves of its share
            is_uint "$cache_ram" || die "--cache-ram in SERVE_ARGS must be -1, 0 or a size in MiB, got '$cache_ram'"
            [ $((N * cache_ram)) -le "$HOST_MEMORY" ] ||
                die "$N local replicas x --cache-ram $cache_ram MiB = $((N * cache_ram)) MiB of prompt cache, more than this host's memory budget of $HOST_MEMORY MiB ($MEMORY_FROM) before any weights or KV; give --cache-ram at most $SHARE MiB, fewer replicas, or --host-memory"
        fi
    fi
    MEMORY_ARGS+=(--memory-budget "$SHARE")
    [ "$PRINT_CONFIG" -eq 1 ] ||
        echo "cluster: memory budget $HOST_MEMORY MiB ($MEMORY_FROM) over $N local replicas: each plans its weights, KV pool and prompt cache within $SHARE MiB (serve --memory-budget $SHARE; without --cache-ram its prompt cache is at most half of what its plan leaves)" >&2
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
    # Retry only what never ran: a failed connection, or a 503 (specula's answer for work it did
    # not start: draining, loading, too many connections, a KV pool wait that timed out). Never
    # an empty response or another 5xx: that request may be what crashed its replica, and a
    # retry would replay it onto the next one.
    retry-on conn-failure 503
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
EOF
    if [ -n "$METRICS_PORT" ]; then
        cat <<EOF

# HAProxy's Prometheus exporter: per replica (server) and backend counters and health.
frontend metrics
    bind ${HOST}:${METRICS_PORT}
    http-request use-service prometheus-exporter if { path /metrics }
    http-request return status 404 content-type text/plain string "only /metrics here"
EOF
    fi
    cat <<EOF

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

PIDS=()      # local replicas' pids, r1.. in order ("" while one waits to be restarted)
HAPROXY_PID=""
STOPPING=0
# The supervisor's state per local replica: when it started (SECONDS), its next backoff (s), how
# often it was restarted, and the pid of the timer (a sleep) that brings it back ("": none).
STARTED_AT=()
BACKOFF=()
RESTARTS=()
TIMERS=()

stop_all() {
    STOPPING=1
    trap '' INT TERM
    local pid
    for pid in "${TIMERS[@]}"; do [ -z "$pid" ] || kill "$pid" 2>/dev/null || true; done
    [ -n "$HAPROXY_PID" ] && kill -USR1 "$HAPROXY_PID" 2>/dev/null || true  # soft stop
    for pid in "${PIDS[@]}"; do [ -z "$pid" ] || kill -TERM "$pid" 2>/dev/null || true; done
    local end=$((SECONDS + STOP_TIMEOUT))
    for pid in "${PIDS[@]}" $HAPROXY_PID; do
        [ -n "$pid" ] || continue
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

# Starts local replica r(i+1) (index i), appending to its log.
start_replica() {
    local i=$1
    "$SPECULA_BIN" serve "${THREAD_ARGS[@]}" "${MEMORY_ARGS[@]}" "${SERVE_ARGS[@]}" \
        --host 127.0.0.1 --port "$((REPLICA_PORT + i))" >>"$LOG_DIR/r$((i + 1)).log" 2>&1 &
    PIDS[i]=$!
    STARTED_AT[i]=$SECONDS
}

for ((i = 0; i < N; ++i)); do
    : >"$LOG_DIR/r$((i + 1)).log"
    start_replica "$i"
    BACKOFF[i]=1
    RESTARTS[i]=0
    TIMERS[i]=""
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

# The supervisor: a local replica that exits (a crash, the OOM killer, a poison request) is said
# and restarted after its backoff: 1 s, doubled at each exit up to --restart-backoff-max, back to
# 1 s once it has run for a minute. HAProxy's health check returns it to the pool when its /health
# says 200. The wait for the backoff is a `sleep` child, so `wait -n` below wakes for it too.
on_replica_exit() {
    local i=$1 pid=$2 status=$3
    local name="r$((i + 1))" ran=$((SECONDS - STARTED_AT[i]))
    PIDS[i]=""
    if [ "$RESTART" -eq 0 ]; then
        echo "cluster: replica $name (pid $pid) exited with status $status; HAProxy routes around it (--no-restart: it stays down)" >&2
        return
    fi
    [ "$ran" -lt 60 ] || BACKOFF[i]=1
    local delay=${BACKOFF[i]}
    BACKOFF[i]=$((delay * 2 > BACKOFF_MAX ? BACKOFF_MAX : delay * 2))
    echo "cluster: replica $name (pid $pid) exited with status $status after ${ran} s; HAProxy routes around it; restarting it in $delay s (restart $((RESTARTS[i] + 1)))" >&2
    sleep "$delay" &
    TIMERS[i]=$!
}

restart_replica() {
    local i=$1
    TIMERS[i]=""
    RESTARTS[i]=$((RESTARTS[i] + 1))
    echo "cluster: --- restart ${RESTARTS[i]} ---" >>"$LOG_DIR/r$((i + 1)).log"
    start_replica "$i"
    echo "cluster: replica r$((i + 1)) restarted: pid ${PIDS[i]} http://127.0.0.1:$((REPLICA_PORT + i)) (restart ${RESTARTS[i]}; HAProxy sends it requests once its /health says 200)" >&2
}

# Foreground: restart local replicas that exit (HAProxy routes around them meanwhile); stop if
# HAProxy exits.
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
            on_replica_exit "$i" "$exited" "$status"
        elif [ "${TIMERS[$i]}" = "$exited" ]; then
            restart_replica "$i"
        fi
    done
done
