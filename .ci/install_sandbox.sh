#!/usr/bin/env bash
# Install bubblewrap (`bwrap`, Debian package `bubblewrap`): the sandbox the grader runs each learner's
# notebook in (course_utils/checks/grading/sandbox.py). Idempotent: does nothing when bwrap is already
# installed. Exits 0 when bwrap is installed and can start a sandbox, 1 otherwise (the grader then refuses
# to grade unless given --no-sandbox, and its tests fail: they run WITH the sandbox).
set -u

probe() {
    bwrap --ro-bind / / --unshare-all --die-with-parent --dev /dev --proc /proc true 2>&1
}

if ! command -v bwrap >/dev/null 2>&1; then
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "install_sandbox: bwrap is missing and apt-get is not available: install bubblewrap by hand"
        exit 1
    fi
    SUDO=""
    if [ "$(id -u)" != "0" ]; then
        if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
            SUDO="sudo -n"
        else
            echo "install_sandbox: bwrap is missing; not root and no password-less sudo: install bubblewrap by hand"
            exit 1
        fi
    fi
    export DEBIAN_FRONTEND=noninteractive
    log=$(mktemp)
    echo "install_sandbox: installing Debian's bubblewrap (apt-get update && apt-get install bubblewrap) ..."
    if ! { $SUDO apt-get update -qq >"$log" 2>&1 \
           && $SUDO apt-get install -y -qq --no-install-recommends bubblewrap >>"$log" 2>&1; }; then
        echo "install_sandbox: could not install bubblewrap; last lines of apt output:"
        tail -n 5 "$log" | sed 's/^/    /'
        rm -f "$log"
        exit 1
    fi
    rm -f "$log"
fi

if out=$(probe); then
    echo "install_sandbox: $(bwrap --version) installed and able to start a sandbox"
    exit 0
fi
echo "install_sandbox: bwrap is installed but cannot start a sandbox here: $out"
echo "    (unprivileged user namespaces disabled? try: sysctl -w kernel.unprivileged_userns_clone=1)"
exit 1
