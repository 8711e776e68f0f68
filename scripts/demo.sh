#!/usr/bin/env bash
# THE demo. Installs what is missing, builds `specula`, makes (once) the ~1B-parameter Q8_0
# benchmark target by widening stories260K with ../shared/tools/widen_model.py, then generates a
# TinyStories continuation with it, plainly and then speculatively with stories260K as the draft,
# printing the speed of each (tokens/s, on stderr's stats lines).
#
# Environment: SPECULA_SHARED_DIR (default ../shared), SPECULA_THREADS (default: all cores),
# SPECULA_DEMO_TOKENS (default 128), SPECULA_DEMO_PROMPT.
set -euo pipefail
# A relative SPECULA_SHARED_DIR means relative to where the script was started.
if [ -n "${SPECULA_SHARED_DIR:-}" ]; then
    SPECULA_SHARED_DIR="$(realpath "$SPECULA_SHARED_DIR")"
    export SPECULA_SHARED_DIR
fi
cd "$(dirname "$0")/.."

SHARED="${SPECULA_SHARED_DIR:-../shared}"
SOURCE="$SHARED/models/tinystories/stories260K.gguf"
TARGET="models/w-d2048-f5632-l20-Q8_0.gguf"
DRAFT="$SOURCE"
PROMPT="${SPECULA_DEMO_PROMPT:-Once upon a time, there was a little girl named Lily. She loved to}"
N_TOKENS="${SPECULA_DEMO_TOKENS:-128}"
THREADS="${SPECULA_THREADS:-$(nproc)}"
JOBS="${SPECULA_JOBS:-$(nproc)}"

scripts/setup.sh

echo "== building specula (build/)"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build --target specula -j "$JOBS"
SPECULA=build/bin/specula

# Debian's python3 has numpy (python3-numpy); a pyenv python first in PATH may not.
python_with_numpy() {
    if [ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import numpy' 2>/dev/null; then
        /usr/bin/python3 "$@"
    else
        PYENV_VERSION=system python3 "$@"
    fi
}

if [ ! -s "$TARGET" ]; then
    echo "== making the ~1B Q8_0 target $TARGET from stories260K (about 30 s, once)"
    mkdir -p models
    python_with_numpy "$SHARED/tools/widen_model.py" "$SOURCE" --dim 2048 --ffn 5632 \
        --layers 20 --outtype q8_0 --out "$TARGET.partial"
    mv "$TARGET.partial" "$TARGET"
fi

STATS_DIR="$(mktemp -d)"
trap 'rm -rf "$STATS_DIR"' EXIT

echo "== plain generation: $TARGET, $N_TOKENS tokens, greedy, $THREADS threads"
echo "== prompt: $PROMPT"
"$SPECULA" run -m "$TARGET" -p "$PROMPT" -n "$N_TOKENS" --temp 0 -t "$THREADS" \
    --stats-json "$STATS_DIR/plain.json"
echo

# Speculative decoding: the same generation again with stories260K drafting for the 1B target
# (`run -md`, llama.cpp's option, default draft length). The text is identical, only faster.
echo "== speculative generation: draft $DRAFT"
"$SPECULA" run -m "$TARGET" -md "$DRAFT" -p "$PROMPT" -n "$N_TOKENS" --temp 0 -t "$THREADS" \
    --stats-json "$STATS_DIR/spec.json"
echo

python_with_numpy - "$STATS_DIR/plain.json" "$STATS_DIR/spec.json" <<'PY'
import json, sys
plain, spec = (json.load(open(p)) for p in sys.argv[1:3])
p, s = plain["generation"]["tokens_per_s"], spec["generation"]["tokens_per_s"]
print(f"== plain {p:.1f} tok/s | speculative {s:.1f} tok/s ({s / p:.2f}x) | "
      f"acceptance {100 * spec['acceptance_rate']:.1f}%, "
      f"{spec['mean_acceptance_length']:.2f} tokens per target pass")
PY
