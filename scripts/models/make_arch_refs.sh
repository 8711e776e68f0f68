#!/bin/sh
# Builds scripts/models/ref_dump.cpp against ik_llama.cpp's libllama (a CPU build) and writes the
# reference JSON of every GGUF file in tests/data/arch next to it (written by `make_models.py
# arch`) but the MTP sidecars (no main layers: nothing to run).
#   usage: scripts/models/make_arch_refs.sh [IK_LLAMA_SRC] [SHARED_DIR]
# IK_LLAMA_SRC holds include/, ggml/include/ and a CMake build in build/ (llama + ggml targets).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
ik=${1:-/tmp/specula-peers/ik_llama.cpp/src}
shared=${2:-$here/../../../shared}
data=$here/../../tests/data/arch
bin=$(mktemp -d)/ref_dump
g++ -O1 -std=c++17 -I"$ik/include" -I"$ik/ggml/include" "$here/ref_dump.cpp" -o "$bin" \
    -L"$ik/build/src" -L"$ik/build/ggml/src" -lllama -lggml \
    -Wl,-rpath,"$ik/build/src:$ik/build/ggml/src"
for f in "$data"/*.gguf; do
    stem=$(basename "$f" .gguf)
    case $stem in *.sidecar) continue ;; esac
    # gemma4's Q8_0 files (its draft's too) have no reference: ik_llama.cpp's flash-attention path
    # drifts up to 1.5 from a float64 forward on them (its one-row Q8_0 kernels), beyond any
    # tolerance that still tests something; they serve the speculative and batching tests.
    case $stem in rand-gemma4-*Q8_0) continue ;; esac
    # gemma4's graph is right only with flash attention (ik_llama.cpp's README says so too).
    fa=0
    case $stem in rand-gemma4*) fa=1 ;; esac
    # deepseek2's MLA without flash attention drifts 3.4 from a float64 forward (0.015 with it).
    case $stem in rand-deepseek2*) fa=1 ;; esac
    REF_DUMP_FA=$fa "$bin" "$f" "$shared/reference/prompts/general.json" "$stem.gguf" > "$data/$stem.json" 2>/dev/null
    echo "$data/$stem.json"
done
