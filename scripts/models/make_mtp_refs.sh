#!/bin/sh
# Builds scripts/models/mtp_ref_dump.cpp against ik_llama.cpp's libllama and libcommon (a CPU
# build) and writes the MTP head references of the qwen35 / qwen35moe / glm4moe files with an MTP
# layer in tests/data/arch/mtp: <stem>.k1.json, .k2 and .k3 (tests/model/test_mtp_parity.cpp reads
# them); and Gemma 4's assistant (arch_gemma4_assistant.py's files, as ik_llama.cpp's -md MTP
# companion of rand-gemma4-tok512-d128-l6-F16): the gemma4-assistant file for K = 1, 2, 3, the
# gemma4_mtp one for K = 3 (tests/speculative/test_gemma4_assistant.cpp).
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
# ik_llama.cpp prints a line of its own on stdout while it loads an assistant: the JSON follows.
target=rand-gemma4-tok512-d128-l6-F16
for spec in rand-gemma4-assistant-tok512-d64-l2-F16:1 rand-gemma4-assistant-tok512-d64-l2-F16:2 \
    rand-gemma4-assistant-tok512-d64-l2-F16:3 rand-gemma4-mtp-tok512-d64-l2-F16:3; do
    stem=${spec%:*}
    k=${spec#*:}
    "$bin" "$data/$target.gguf" "$shared/reference/prompts/general.json" "$k" "$data/$stem.gguf" \
        2>/dev/null | sed -n '/^{"format"/,$p' > "$data/mtp/$stem.k$k.json"
    echo "$data/mtp/$stem.k$k.json"
done
