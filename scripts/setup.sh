#!/usr/bin/env bash
# Installs the Debian packages Specula builds, tests and demos with. Does nothing (and never calls
# apt) when they are all installed already; otherwise runs `apt-get update` once and installs the
# missing ones. Works as root without a terminal; uses sudo when not root.
set -euo pipefail

PACKAGES=(
    build-essential cmake ninja-build clang-format
    nlohmann-json3-dev libcpp-httplib-dev libcli11-dev libpcre2-dev
    libgtest-dev libbenchmark-dev libomp-dev python3-numpy
    chromium nodejs  # `specula serve` tests: OpenAI Node SDK and the web UI in Chromium
)

missing=()
for pkg in "${PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$pkg")
    fi
done

# npm ships inside some nodejs builds (NodeSource), with which Debian's npm package conflicts.
if ! command -v npm > /dev/null; then missing+=(npm); fi

if [ ${#missing[@]} -eq 0 ]; then
    echo "setup: all ${#PACKAGES[@]} packages are installed"
else
    SUDO=()
    if [ "$(id -u)" -ne 0 ]; then SUDO=(sudo); fi
    export DEBIAN_FRONTEND=noninteractive
    echo "setup: installing ${missing[*]}"
    "${SUDO[@]}" apt-get update
    "${SUDO[@]}" apt-get install -y --no-install-recommends "${missing[@]}"
fi

# npm packages of the server's Node tests (openai, playwright-core), into tests/server/node_modules
# (gitignored) from tests/server/package.json; skipped when they are already there.
SERVER_TESTS="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/tests/server"
if [ -d "$SERVER_TESTS/node_modules/openai" ] && [ -d "$SERVER_TESTS/node_modules/playwright-core" ]; then
    echo "setup: server test npm packages are installed"
else
    echo "setup: npm install in $SERVER_TESTS"
    (cd "$SERVER_TESTS" && npm install --no-audit --no-fund)
fi
