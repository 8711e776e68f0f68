#!/usr/bin/env bash
# Installs the Debian packages Specula builds, tests and demos with. Does nothing (and never calls
# apt) when they are all installed already; otherwise runs `apt-get update` once and installs the
# missing ones. Works as root without a terminal; uses sudo when not root.
set -euo pipefail

PACKAGES=(
    build-essential cmake ninja-build clang-format
    nlohmann-json3-dev libcpp-httplib-dev libcli11-dev libpcre2-dev
    libgtest-dev libbenchmark-dev libomp-dev python3-numpy
)

missing=()
for pkg in "${PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$pkg")
    fi
done

if [ ${#missing[@]} -eq 0 ]; then
    echo "setup: all ${#PACKAGES[@]} packages are installed"
    exit 0
fi

SUDO=()
if [ "$(id -u)" -ne 0 ]; then SUDO=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
echo "setup: installing ${missing[*]}"
"${SUDO[@]}" apt-get update
"${SUDO[@]}" apt-get install -y --no-install-recommends "${missing[@]}"
