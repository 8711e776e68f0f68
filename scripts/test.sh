#!/usr/bin/env bash
# THE test command. Installs what is missing (setup.sh), builds Release in build/ and runs every
# test, then builds again with AddressSanitizer + UBSan in build-asan/ (no benchmarks) and runs
# every test there too, then builds the libFuzzer targets with clang (build-fuzz/) and runs each
# for SPECULA_FUZZ_SECONDS (30) and a 1-minute, 8-client soak of the server (scripts/fuzz.sh,
# scripts/soak.sh; about 4 minutes more on 2 cores). Exits non-zero on the first failure. Tests find the shared test data in
# ../shared next to the repository, or in $SPECULA_SHARED_DIR.
set -euo pipefail
# A relative SPECULA_SHARED_DIR means relative to where the script was started.
if [ -n "${SPECULA_SHARED_DIR:-}" ]; then
    SPECULA_SHARED_DIR="$(realpath "$SPECULA_SHARED_DIR")"
    export SPECULA_SHARED_DIR
fi
cd "$(dirname "$0")/.."

JOBS="${SPECULA_JOBS:-$(nproc)}"

scripts/setup.sh

# The tests' temporary files (servers' logs, model copies, the Node tests' homes) go to one folder
# per run, removed at the end however the run ends: a crashed test's leftovers do not pile up in
# /tmp run after run (the suite writes ~0.5 GB there per pass).
SPECULA_TEST_TMP="$(mktemp -d "${TMPDIR:-/tmp}/specula-tests.XXXXXX")"
trap 'rm -rf "$SPECULA_TEST_TMP"' EXIT
export TMPDIR="$SPECULA_TEST_TMP" TEST_TMPDIR="$SPECULA_TEST_TMP/"

# Say what a full disk would break mid-build as "No space left on device": the three builds and a
# test pass need about SPECULA_NEED_GB of this filesystem (measured: build/ 0.4 GB, build-asan/
# 5.3 GB, its ~130 test binaries each linking the instrumented libraries; what is built counts).
need_kb=$(( ${SPECULA_NEED_GB:-8} * 1024 * 1024 ))
have_kb=$(df -Pk . | awk 'NR == 2 { print $4 }')
built_kb=$({ du -sk build build-asan build-fuzz 2>/dev/null || true; } | awk '{ s += $1 } END { print s + 0 }')
if [ "$(( have_kb + built_kb ))" -lt "$need_kb" ]; then
    echo "test.sh: $(( have_kb / 1024 )) MiB free on $(df -P . | awk 'NR == 2 { print $6 }');" \
        "the builds and tests need about $(( need_kb / 1024 )) MiB (SPECULA_NEED_GB overrides)" >&2
    exit 1
fi

echo "== Release build (build/)"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build build -j "$JOBS"
ctest --test-dir build --output-on-failure -j "$JOBS"
rm -rf "${SPECULA_TEST_TMP:?}"/*

# The sanitizer build is CPU-only: Mesa's lavapipe (the Vulkan driver CI has) leaks a few
# allocations of its own JIT at exit, which LeakSanitizer cannot attribute; the Vulkan backend is
# tested by the Release pass above. RSS figures mean nothing under ASan (quarantine, shadow
# memory), so the tests that measure RSS (its growth, a peak against the memory plan) run in the
# Release pass only.
echo "== AddressSanitizer + UBSan build (build-asan/, CPU only)"
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSPECULA_SANITIZE=ON \
    -DSPECULA_BUILD_BENCH=OFF -DSPECULA_VULKAN=OFF
cmake --build build-asan -j "$JOBS"
ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}" \
UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}" \
GTEST_FILTER="${GTEST_FILTER:--*RssStaysFlat*:*PeaksWithinThePlan*}" \
    ctest --test-dir build-asan --output-on-failure -j "$JOBS"

echo "== fuzzers (clang, libFuzzer + ASan/UBSan, build-fuzz/), ${SPECULA_FUZZ_SECONDS:-30} s each"
for target in gguf tokenizer chat_template request model_output; do
    timeout 900 scripts/fuzz.sh "$target" "${SPECULA_FUZZ_SECONDS:-30}"
done

echo "== soak: 8 streaming clients for 1 minute against specula serve with a draft model"
timeout 300 scripts/soak.sh 8 1

echo "== all tests passed (Release, ASan/UBSan, fuzzers, soak)"
