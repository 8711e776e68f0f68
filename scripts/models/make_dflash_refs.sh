#!/bin/sh
# Builds scripts/models/dflash_ref_dump.cpp against ik_llama.cpp's libllama and libcommon (a CPU
# build) and writes the DFlash references of tests/data/dflash (scripts/models/dflash_draft.py's
# files): <draft stem>.k<K>.json for K = 7 (the whole block) and 3 (tests/speculative/test_dflash.cpp
# reads them).
#   usage: scripts/models/make_dflash_refs.sh [IK_LLAMA_SRC] [SHARED_DIR]
# IK_LLAMA_SRC holds include/, src/, common/, ggml/include/ and a CMake build in build/ (llama,
# ggml and common targets).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
ik=${1:-/tmp/specula-peers/ik_llama.cpp/src}
shared=${2:-$here/../../../shared}
data=$here/../../tests/data/dflash
bin=$(mktemp -d)/dflash_ref_dump
g++ -O1 -std=c++17 -I"$ik/include" -I"$ik/ggml/include" -I"$ik/common" -I"$ik/src" \
    "$here/dflash_ref_dump.cpp" -o "$bin" "$ik/build/common/libcommon.a" \
    -L"$ik/build/src" -L"$ik/build/ggml/src" -lllama -lggml -lpthread \
    -Wl,-rpath,"$ik/build/src:$ik/build/ggml/src"
target=$data/rand-qwen3-tok512-d128-l4-F16.gguf
stem=rand-dflash-qwen3-tok512-d128-l2-b8-F16
for k in 7 3; do
    "$bin" "$target" "$data/$stem.gguf" "$shared/reference/prompts/general.json" "$k" \
        > "$data/$stem.k$k.json" 2>"$data/.dflash_ref_dump.log" || {
        echo "dflash_ref_dump failed (K=$k): see $data/.dflash_ref_dump.log"; exit 1; }
    echo "$data/$stem.k$k.json"
done
rm -f "$data/.dflash_ref_dump.log"
