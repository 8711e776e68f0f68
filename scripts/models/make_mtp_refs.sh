#!/bin/sh
# Builds scripts/models/mtp_ref_dump.cpp against ik_llama.cpp's libllama and libcommon (a CPU
# build) and writes the MTP head references of the qwen35 / qwen35moe / glm4moe files with an MTP
# layer in tests/data/arch/mtp: <stem>.k1.json, .k2 and .k3 (tests/model/test_mtp_parity.cpp reads
# them).
#   usage: scripts/models/make_mtp_refs.sh [IK_LLAMA_SRC] [SHARED_DIR]
# IK_LLAMA_SRC holds include/, src/, common/, ggml/include/ and a CMake build in build/ (llama,
# ggml and common targets).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
ik=${1:-/tmp/specula-peers/ik_llama.cpp/src}
shared=${2:-$here/../../../shared}
data=$here/../../tests/data/arch
bin=$(mktemp -d)/mtp_ref_dump
g++ -O1 -std=c++17 -I"$ik/include" -I"$ik/ggml/include" -I"$ik/common" -I"$ik/src" \
    "$here/mtp_ref_dump.cpp" -o "$bin" "$ik/build/common/libcommon.a" \
    -L"$ik/build/src" -L"$ik/build/ggml/src" -lllama -lggml -lpthread \
    -Wl,-rpath,"$ik/build/src:$ik/build/ggml/src"
for stem in rand-qwen35-mtp1-tok512-d128-l4-F16 rand-qwen35moe-mtp1-e8x2-tok512-d128-l3-F16 \
    rand-glm4moe-mtp1-e8x2-tok512-d128-l3-F16; do
    for k in 1 2 3; do
        "$bin" "$data/$stem.gguf" "$shared/reference/prompts/general.json" "$k" \
            > "$data/mtp/$stem.k$k.json" 2>/dev/null
        echo "$data/mtp/$stem.k$k.json"
    done
done
