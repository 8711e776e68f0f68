#!/usr/bin/env bash
# The GPU check, in one go, on a machine with a Vulkan GPU (issue #14): builds Specula with the
# Vulkan backend (build-gpu/), runs the GPU tests, builds llama.cpp's Vulkan build from
# ../shared/peers (once, in $PEERS_DIR/llama.cpp-vulkan), then prints, for the ~1B Q8_0 and
# Q4_K_M widened targets (../shared/tools/widen_model.py, made once in $PEERS_DIR/models as
# ../shared/peers/compare.py does), everything on the GPU (-ngl 99, -ngld 99):
#   tg (tokens/s, 128 tokens), pp512 (tokens/s), one target pass over 1/5/9 tokens (ms; for
#   llama.cpp from llama-bench's pp1/pp5/pp9) and greedy speculative tokens/s with stories260K
#   as the draft (k = 8, 256 tokens)
# side by side with llama.cpp (ratio > 1: Specula faster; for pass times < 1 is faster).
#
#   scripts/gpu_check.sh            the full check (needs a GPU; ~10 min with the peer build)
#   scripts/gpu_check.sh --tiny     the same steps on small models (llama2xs as the target), the
#                                   peer only if already built: proves the script on lavapipe
#   PEERS_DIR (default /tmp/specula-peers), JOBS (default nproc), REPS (default 3)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
shared=$(cd ../shared && pwd)
peers_dir=${PEERS_DIR:-/tmp/specula-peers}
jobs=${JOBS:-$(nproc)}
reps=${REPS:-3}
tiny=0
[ "${1:-}" = "--tiny" ] && tiny=1
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
say() { echo "gpu_check: $*" >&2; }

# 1. Build and test.
export CMAKE_CXX_COMPILER_LAUNCHER=${CMAKE_CXX_COMPILER_LAUNCHER:-$(command -v ccache || true)}
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DSPECULA_VULKAN=ON \
    -DSPECULA_BUILD_BENCH=OFF >"$out/cmake.log" 2>&1 || { cat "$out/cmake.log"; exit 1; }
cmake --build build-gpu -j "$jobs" >"$out/build.log" 2>&1 || { tail -50 "$out/build.log"; exit 1; }
spec=$root/build-gpu/bin/specula
"$spec" info --devices
say "GPU tests"
ctest --test-dir build-gpu -R 'test_vulkan|test_speculative_greedy|test_server_vulkan|test_cli' -j 2 --output-on-failure

# 2. llama.cpp's Vulkan build (once).
peer_bin=$peers_dir/llama.cpp-vulkan/src/build/bin
if [ ! -x "$peer_bin/llama-bench" ] || [ ! -x "$peer_bin/llama-speculative" ]; then
    if [ $tiny = 1 ]; then
        say "no llama.cpp Vulkan build in $peer_bin: --tiny skips building it"
        peer_bin=""
    else
        tarball=$(ls "$shared"/peers/llama.cpp-*-src.tar.gz | head -1)
        rm -rf "$peers_dir/llama.cpp-vulkan" && mkdir -p "$peers_dir/llama.cpp-vulkan"
        tar xzf "$tarball" -C "$peers_dir/llama.cpp-vulkan"
        say "building llama.cpp with -DGGML_VULKAN=ON (log: $peers_dir/llama.cpp-vulkan/build.log)"
        src=$peers_dir/llama.cpp-vulkan/src
        cmake -S "$src" -B "$src/build" -DCMAKE_BUILD_TYPE=Release -DGGML_VULKAN=ON \
            -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF >"$peers_dir/llama.cpp-vulkan/build.log" 2>&1
        cmake --build "$src/build" -j "$jobs" --target llama-bench llama-speculative \
            >>"$peers_dir/llama.cpp-vulkan/build.log" 2>&1 ||
            { tail -30 "$peers_dir/llama.cpp-vulkan/build.log"; exit 1; }
    fi
fi

# 3. Targets.
draft=$shared/models/tinystories/stories260K.gguf
targets=()
if [ $tiny = 1 ]; then
    targets=("$shared/models/tinystories/llama2xs.gguf")
else
    mkdir -p "$peers_dir/models"
    for t in q8_0 q4_k_m; do
        f=$peers_dir/models/w-d2048-f5632-l20-$t.gguf
        if [ ! -f "$f" ]; then
            say "making $f (once)"
            python3 "$shared/tools/widen_model.py" "$draft" --dim 2048 --ffn 5632 --layers 20 \
                --outtype $t --out "$f.part"
            mv "$f.part" "$f"
        fi
        targets+=("$f")
    done
fi
pp=512 n_tg=128 n_spec=256
[ $tiny = 1 ] && pp=64 n_tg=32 n_spec=64
prompt="Once upon a time, there was a little girl named"

# 4. Measure: Specula then llama.cpp on each target, one table per target.
for model in "${targets[@]}"; do
    name=$(basename "$model" .gguf)
    say "measuring $name"
    "$spec" bench -m "$model" -ngl 99 --no-spec --pp $pp -n $n_tg -r "$reps" --batches 1,5,9 \
        --json "$out/s_bench.json" >/dev/null 2>"$out/s_bench.err" || { cat "$out/s_bench.err"; exit 1; }
    "$spec" run -m "$model" -md "$draft" -ngl 99 -ngld 99 --draft 8 -p "$prompt" -n $n_spec \
        --temp 0 -c 1024 --stats-json "$out/s_spec.json" >/dev/null 2>"$out/s_spec.err" ||
        { cat "$out/s_spec.err"; exit 1; }
    echo '[]' >"$out/l_bench.json"
    echo '' >"$out/l_spec.txt"
    if [ -n "$peer_bin" ]; then
        "$peer_bin/llama-bench" -m "$model" -ngl 99 -r "$reps" -p "$pp,1,5,9" -n $n_tg -o json \
            >"$out/l_bench.json" 2>/dev/null || echo '[]' >"$out/l_bench.json"
        "$peer_bin/llama-speculative" -m "$model" -md "$draft" -ngl 99 -ngld 99 --draft-max 8 \
            --draft-min 0 -p "$prompt" -n $n_spec --temp 0 -c 1024 >"$out/l_spec.txt" 2>&1 || true
    fi
    python3 - "$name" "$pp" "$out" <<'PY'
import json, re, sys
name, pp, d = sys.argv[1], int(sys.argv[2]), sys.argv[3]
th = json.load(open(f"{d}/s_bench.json"))["throughput"]
s = {"tg": th["tg_tokens_per_s"], "pp": th.get("pp_tokens_per_s")}
for p in th["passes"]:
    s[f"pass{p['batch']}"] = p["ms"]
sp = json.load(open(f"{d}/s_spec.json"))
s["spec"] = sp["generation"]["tokens_per_s"]
l = {}
txt = open(f"{d}/l_bench.json").read()
rows = json.loads(txt[txt.index("["):]) if "[" in txt else []
for r in rows:
    if r.get("n_gen"):
        l["tg"] = r["avg_ts"]
    elif r.get("n_prompt") == pp:
        l["pp"] = r["avg_ts"]
    elif r.get("n_prompt"):
        l[f"pass{r['n_prompt']}"] = 1000.0 * r["n_prompt"] / r["avg_ts"]
m = re.search(r"decoded\s+\d+ tokens in\s+[\d.]+ seconds, speed:\s+([\d.]+) t/s", open(f"{d}/l_spec.txt").read())
if m:
    l["spec"] = float(m.group(1))
print(f"\n### {name} (all layers on the GPU; acceptance {100 * sp['acceptance_rate']:.1f}%)\n")
print("| measure | Specula | llama.cpp Vulkan | ratio |")
print("|---|---|---|---|")
for key, label, unit in [("tg", "tg", "tok/s"), ("pp", f"pp{pp}", "tok/s"), ("pass1", "pass 1", "ms"),
                         ("pass5", "pass 5", "ms"), ("pass9", "pass 9", "ms"), ("spec", "spec (stories260K, k=8)", "tok/s")]:
    a, b = s.get(key), l.get(key)
    fa = f"{a:.2f} {unit}" if a else "-"
    fb = f"{b:.2f} {unit}" if b else "-"
    ratio = f"{a / b:.2f}" if a and b else "-"
    print(f"| {label} | {fa} | {fb} | {ratio} |")
if s.get("pass1") and s.get("pass9"):
    print(f"\ntau(9) = pass 9 / pass 1 = {s['pass9'] / s['pass1']:.2f} (goal <= 1.3)")
PY
done
