#!/usr/bin/env bash
# Install Debian's Chromium for the browser tests (tests/browser/) (headless JupyterLab + ipywidgets check).
# Idempotent: does nothing when /usr/bin/chromium is already there. Never downloads a browser of its
# own (no `playwright install`): Playwright drives this system Chromium.
# Always exits 0: if Chromium cannot be installed, the browser test skips and says why.
set -u

CHROMIUM=/usr/bin/chromium

if [ -x "$CHROMIUM" ]; then
    echo "install_browser: $("$CHROMIUM" --version 2>/dev/null || echo chromium) already installed"
    exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
    echo "install_browser: apt-get not found; not installing chromium (the browser tests (tests/browser/) will skip)"
    exit 0
fi

SUDO=""
if [ "$(id -u)" != "0" ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        SUDO="sudo -n"
    else
        echo "install_browser: not root and no password-less sudo; not installing chromium" \
             "(the browser tests (tests/browser/) will skip)"
        exit 0
    fi
fi

export DEBIAN_FRONTEND=noninteractive
log=$(mktemp)
echo "install_browser: installing Debian's chromium (apt-get update && apt-get install chromium) ..."
if $SUDO apt-get update -qq >"$log" 2>&1 \
   && $SUDO apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >>"$log" 2>&1; then
    echo "install_browser: $("$CHROMIUM" --version 2>/dev/null || echo chromium) installed"
else
    echo "install_browser: could not install chromium (the browser tests (tests/browser/) will skip); last lines of apt output:"
    tail -n 5 "$log" | sed 's/^/    /'
fi
rm -f "$log"
exit 0
