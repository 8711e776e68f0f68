#!/usr/bin/env bash
# A busy machine (issue 28): tokens/s of the tiny speculative pair (stories260K drafting for
# llama2xs, the README's first command) and of a ~1B target decoding plainly, on a quiet machine,
# then beside two busy loops, then beside two C++ compile jobs, with -t set to every core. Prints
# each configuration's tok/s and its share of the quiet figure (the goal: >= 30%).
#
# usage: scripts/bench_busy.sh [SPECULA] [TARGET_1B.gguf]
#   SPECULA     default build/bin/specula
#   TARGET_1B   default $PEERS_DIR/models/w-d2048-f5632-l20-q8_0.gguf (../shared/peers/compare.py
#               writes it; any ~1B GGUF does)
# SPECULA_SHARED_DIR (default ../shared) holds the tiny pair.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
spec=${1:-$here/build/bin/specula}
big=${2:-${PEERS_DIR:-/tmp/specula-peers}/models/w-d2048-f5632-l20-q8_0.gguf}
shared=${SPECULA_SHARED_DIR:-$here/../shared}
tiny=(-m "$shared/models/tinystories/llama2xs.gguf" -md "$shared/models/tinystories/stories260K.gguf"
      --draft 4 -n 200 --ignore-eos)
plain=(-m "$big" -n 48 --ignore-eos)
t=$(nproc)
for f in "$spec" "$big" "${tiny[1]}" "${tiny[3]}"; do
    [ -e "$f" ] || { echo "bench_busy.sh: $f is missing" >&2; exit 1; }
done

# Generation tok/s of one run (the stats line "generated: N tokens, X tok/s").
tps() {
    "$spec" run "$@" -t "$t" -p "Once upon a time" 2>&1 >/dev/null |
        sed -n 's/.*generated: [0-9]* tokens, \([0-9.]*\) tok\/s.*/\1/p'
}
# The median of three runs.
median3() { for _ in 1 2 3; do tps "$@"; done | sort -g | sed -n 2p; }

pids=()
stop_load() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; pids=(); wait 2>/dev/null || true; }
trap stop_load EXIT
loops() { for _ in $(seq "$t"); do (while :; do :; done) & pids+=($!); done; }
compiles() {
    local tmp; tmp=$(mktemp -d)
    for i in $(seq "$t"); do
        (while :; do g++ -std=c++20 -O2 -I"$here/src" -c "$here/src/server/server.cpp" -o "$tmp/$i.o"; done) >/dev/null 2>&1 &
        pids+=($!)
    done
    sleep 2
}

echo "machine: $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1), $t cpus, -t $t"
q_tiny=$(median3 "${tiny[@]}"); q_big=$(median3 "${plain[@]}")
printf '| load | tiny pair tok/s | of quiet | ~1B plain tok/s | of quiet |\n|---|---|---|---|---|\n'
printf '| quiet | %s | 100%% | %s | 100%% |\n' "$q_tiny" "$q_big"
for load in loops compiles; do
    "$load"
    b_tiny=$(median3 "${tiny[@]}"); b_big=$(median3 "${plain[@]}")
    stop_load
    printf '| %s x%d | %s | %.0f%% | %s | %.0f%% |\n' "$load" "$t" "$b_tiny" \
        "$(echo "100 * $b_tiny / $q_tiny" | bc -l)" "$b_big" "$(echo "100 * $b_big / $q_big" | bc -l)"
done
