#!/usr/bin/env bash
# Runs one libFuzzer target under ASan + UBSan:  scripts/fuzz.sh TARGET SECONDS [RUNS]
#   TARGET: gguf | tokenizer | chat_template | request | model_output   (fuzz/fuzz_TARGET.cpp)
#   SECONDS: the longest it runs; RUNS (optional): stop after that many executions instead, e.g.
#   `nice -n 19 scripts/fuzz.sh gguf 7200 1000000` for the long run the README documents.
# Builds build-fuzz/ with clang (-DSPECULA_FUZZ=ON) when needed, seeds a corpus from ../shared
# (model and vocabulary files, the vocabularies' test texts) plus a few request bodies and chat
# templates, and fails on any crash, sanitizer report, leak, timeout (10 s per input) or
# out-of-memory (2 GiB). The growing corpus stays in build-fuzz/corpus/TARGET; a failing input is
# saved as build-fuzz/artifacts/TARGET-*. Prints libFuzzer's final stats (execs, coverage).
set -euo pipefail
if [ $# -ne 2 ] && [ $# -ne 3 ]; then
    echo "usage: $0 gguf|tokenizer|chat_template|request|model_output SECONDS [RUNS]" >&2
    exit 2
fi
TARGET="$1"
SECONDS_TO_RUN="$2"
RUNS="${3:--1}"
case "$TARGET" in gguf | tokenizer | chat_template | request | model_output) ;; *)
    echo "fuzz.sh: unknown target '$TARGET'" >&2
    exit 2
    ;;
esac
[[ "$SECONDS_TO_RUN" =~ ^[0-9]+$ ]] && [ "$SECONDS_TO_RUN" -ge 1 ] || {
    echo "fuzz.sh: SECONDS must be a positive integer, got '$SECONDS_TO_RUN'" >&2
    exit 2
}
[[ "$RUNS" =~ ^(-1|[0-9]+)$ ]] || {
    echo "fuzz.sh: RUNS must be a non-negative integer, got '$RUNS'" >&2
    exit 2
}
cd "$(dirname "$0")/.."
SHARED="${SPECULA_SHARED_DIR:-$(pwd)/../shared}"
BUILD=build-fuzz
BIN="$BUILD/bin/fuzz_$TARGET"

if [ ! -f "$BUILD/build.ninja" ]; then
    CXX=clang++ cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DSPECULA_FUZZ=ON -DSPECULA_BUILD_TESTS=OFF -DSPECULA_BUILD_BENCH=OFF >/dev/null
fi
cmake --build "$BUILD" -j "${SPECULA_JOBS:-$(nproc)}" --target "fuzz_$TARGET"

SEEDS="$BUILD/seeds/$TARGET"
CORPUS="$BUILD/corpus/$TARGET"
mkdir -p "$SEEDS" "$CORPUS" "$BUILD/artifacts"
case "$TARGET" in
gguf)
    # Whole tiny models of a few KB (F32, tied F16, Q8_0; they reach Model::load at thousands of
    # inputs a second) and the first 64 KiB of every shared model and vocabulary (the headers).
    PY=python3
    if [ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import numpy' 2>/dev/null; then
        PY=/usr/bin/python3  # Debian's, which has numpy (setup.sh); a pyenv one may not
    fi
    "$PY" fuzz/make_tiny_models.py "$SHARED/tools/widen_model.py" \
        "$SHARED/models/tinystories/stories260K.gguf" "$SEEDS"
    for f in "$SHARED"/models/*/*.gguf "$SHARED"/vocab/*.gguf; do
        head -c 65536 "$f" >"$SEEDS/head-$(basename "$f")"
    done
    MAX_LEN=65536
    ;;
tokenizer)
    # The vocabularies' test texts, one seed each, prefixed by (vocabulary index, flags).
    python3 - "$SHARED/vocab" "$SEEDS" <<'PY'
import os, sys
src, out = sys.argv[1], sys.argv[2]
vocabs = sorted(f for f in os.listdir(src) if f.endswith(".gguf"))
for i, v in enumerate(vocabs):
    path = os.path.join(src, v + ".inp")
    if not os.path.exists(path):
        continue
    texts = open(path, "rb").read().split(b"\n__ggml_vocab_test__\n")
    for k, t in enumerate(texts):
        with open(os.path.join(out, f"{i:02d}-{k:03d}"), "wb") as f:
            f.write(bytes([i, 3]) + t)
PY
    MAX_LEN=4096
    ;;
chat_template)
    i=0
    for t in '<|im_start|>' '[INST]' '<|start_header_id|>' '<start_of_turn>' '<|user|>' \
        '[INST] <<SYS>>' ''; do
        printf '%s\0\001hello\0\000be brief\0\002hi there\0\001more' "$t" >"$SEEDS/t$i"
        i=$((i + 1))
    done
    # fuzz/seeds/chat_template: hostile templates (deep nesting, range past 2^53, huge strings
    # and lists, quadratic searches, runaway loops and recursion), each ended by a limit.
    cp fuzz/seeds/chat_template/* "$SEEDS/"
    MAX_LEN=4096
    ;;
request)
    i=0
    for b in '{"prompt": "Lily saw", "max_tokens": 8, "temperature": 0}' \
        '{"prompt": [1, 2, 4294967301], "stream": true, "stop": ["a", "b"]}' \
        '{"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]}' \
        '{"prompt": "x", "n": 1, "seed": -1, "top_k": 40, "top_p": 0.9, "min_p": 0.05}' \
        '{"prompt": "x", "speculative": {"num_speculative_tokens": 4}, "max_completion_tokens": 2147483647}' \
        '{"model": "m", "prompt": ["one"], "ignore_eos": true}'; do
        printf '%s' "$b" >"$SEEDS/r$i"
        i=$((i + 1))
    done
    MAX_LEN=4096
    ;;
model_output)
    # fuzz/seeds/model_output: replies in every format (byte 0: format and mode, byte 1: cuts).
    cp fuzz/seeds/model_output/* "$SEEDS/"
    MAX_LEN=2048
    ;;
esac

echo "== fuzz_$TARGET for ${SECONDS_TO_RUN}s (seeds: $(ls "$SEEDS" | wc -l), corpus: $(ls "$CORPUS" | wc -l))"
ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}" \
UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}" \
SPECULA_SHARED_DIR="$SHARED" \
    "$BIN" -max_total_time="$SECONDS_TO_RUN" -runs="$RUNS" -timeout=10 -rss_limit_mb=2048 -max_len="$MAX_LEN" \
    -print_final_stats=1 -artifact_prefix="$BUILD/artifacts/$TARGET-" "$CORPUS" "$SEEDS"
