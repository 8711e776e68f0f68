#!/usr/bin/env bash
# Installs what Specula builds, tests and demos with: the Debian packages below, plus the Node
# test dependencies (node, npm and Chromium as commands; tests/server/node_modules and
# tests/chat/node_modules from their package-lock.json). Does nothing, and never calls apt or
# npm, when everything is present; otherwise runs `apt-get update` once and installs only what
# is missing. Works as root without a terminal; uses sudo when not root.
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(
    build-essential cmake ninja-build clang-format clang libclang-rt-dev
    nlohmann-json3-dev libcpp-httplib-dev libcli11-dev libpcre2-dev
    libgtest-dev libbenchmark-dev python3-numpy tmux haproxy
    libvulkan-dev glslc mesa-vulkan-drivers
)

missing=()
for pkg in "${PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$pkg")
    fi
done
# Checked as commands: a node from another source (e.g. NodeSource, which bundles npm) is fine.
command -v node >/dev/null || missing+=(nodejs)
command -v npm >/dev/null || missing+=(npm)
[ -x /usr/bin/chromium ] || missing+=(chromium)
command -v curl >/dev/null || missing+=(curl)

if [ ${#missing[@]} -gt 0 ]; then
    SUDO=()
    if [ "$(id -u)" -ne 0 ]; then SUDO=(sudo); fi
    export DEBIAN_FRONTEND=noninteractive
    echo "setup: installing ${missing[*]}"
    "${SUDO[@]}" apt-get update
    "${SUDO[@]}" apt-get install -y --no-install-recommends "${missing[@]}"
fi

# The Node tests need their npm packages: `specula serve`'s (tests/server) and the chat
# template engine's comparison with @huggingface/jinja (tests/chat).
for NODE_DIR in tests/server tests/chat; do
    if [ -f "$NODE_DIR/package-lock.json" ] &&
        { [ ! -d "$NODE_DIR/node_modules" ] ||
            [ "$NODE_DIR/package-lock.json" -nt "$NODE_DIR/node_modules" ]; }; then
        echo "setup: npm ci in $NODE_DIR"
        (cd "$NODE_DIR" && npm ci --no-audit --no-fund)
    fi
done

echo "setup: all dependencies are installed"
