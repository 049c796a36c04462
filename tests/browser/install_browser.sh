#!/usr/bin/env bash
# Install what the browser tier (tests/browser) needs beyond the Python packages: Debian's chromium.
# Playwright (Python, in the dev extra) drives it through executable_path; no browser download.
# Idempotent: does nothing when chromium is already there. Usage: bash tests/browser/install_browser.sh
set -euo pipefail

if command -v chromium >/dev/null 2>&1 || [ -x /usr/bin/chromium ]; then
    echo "chromium present: $(command -v chromium || echo /usr/bin/chromium)"
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "install_browser.sh: no apt-get here; install Chromium with your package manager and set NBKIT_CHROMIUM=/path/to/chromium" >&2
    exit 1
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        SUDO="sudo"
    else
        echo "install_browser.sh: not root and no sudo; run as root: apt-get update && apt-get install -y chromium" >&2
        exit 1
    fi
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update
$SUDO apt-get install -y chromium
echo "chromium installed: $(command -v chromium)"
