"""The sandbox a learner's notebook runs in while it is graded (bubblewrap, `bwrap`, on Linux).

    problem = sandbox.unavailable()             # None, or why no sandbox can start here
    argv = sandbox.wrap(kernel_argv, Sandbox(...))

What the notebook's kernel sees, and may do:
- the whole file system READ-ONLY (the course package, Python, the data), with these exceptions:
- its own folder is a private COPY, writable (what it writes there is thrown away after grading);
- the folders that hold other learners' submissions (the parent of every graded learner folder) are
  hidden behind an empty, throw-away folder: other learners' work can be neither read nor written;
- the home folder and /tmp are empty throw-away folders (the instructor's files are not readable;
  the Python installation, the package and the data are bound back read-only where they live inside
  a hidden folder);
- no network (a network namespace of its own, loopback only), no other processes (a PID namespace of
  its own), no capabilities, and it dies with the grader.
It talks to the grader only through the kernel's own unix sockets and the grader's socket, both in a
private folder of the grader's (`io_dir`, bound read-write).

What it does NOT stop: using the CPU and memory it is given (the grader's time limits bound the
time; memory is not limited), reading files that every user of the machine may read outside the
hidden folders (e.g. /etc), and code that computes the answer some other way than the learner's own.
"""
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

BWRAP = "bwrap"
PROBE = ["--ro-bind", "/", "/", "--unshare-all", "--die-with-parent", "--dev", "/dev", "--proc", "/proc", "true"]


def unavailable():
    """None when bubblewrap can start a sandbox here; otherwise a sentence saying why not."""
    if not sys.platform.startswith("linux"):
        return f"the sandbox needs Linux (this is {sys.platform})"
    path = shutil.which(BWRAP)
    if path is None:
        return ("bubblewrap (`bwrap`) is not installed: install the Debian/Ubuntu package `bubblewrap` "
                "(`bash .ci/install_sandbox.sh` does it)")
    try:
        probe = subprocess.run([path, *PROBE], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"bubblewrap could not start: {error}"
    if probe.returncode != 0:
        why = probe.stderr.strip()[:200] or probe.returncode
        return (f"bubblewrap cannot create a sandbox on this machine ({why}); "
                "unprivileged user namespaces may be disabled (sysctl kernel.unprivileged_userns_clone=1), "
                "or this is a container without them")
    return None


class Sandbox(NamedTuple):
    folder: Path        # the learner's folder, as the notebook knows it (its working directory)
    copy: Path          # the private copy of it, bound at `folder`
    hidden: tuple       # folders hidden behind empty ones (other learners' submissions)
    io_dir: Path        # the grader's folder for the kernel's sockets and the grading channel


def _inside(path, folder):
    try:
        Path(path).relative_to(folder)
        return True
    except ValueError:
        return False


def needed_paths():
    """What the kernel must read even where it lies inside a hidden folder: Python, its packages,
    the course package and the data (read-only)."""
    from .. import grading

    package_root = Path(grading.__file__).resolve().parents[3]
    paths = {Path(sys.prefix), Path(sys.base_prefix), Path(sys.executable).resolve().parent,
             package_root / "course_utils"}
    for entry in sys.path:
        if entry and Path(entry).is_dir() and "site-packages" in entry:
            paths.add(Path(entry))
    for name in ("COURSE_DATA_DIR",):
        if os.environ.get(name):
            paths.add(Path(os.environ[name]))
    for path in os.environ.get("PYTHONPATH", "").split(os.pathsep):
        if path and Path(path, "course_utils").is_dir():
            paths.add(Path(path) / "course_utils")
    return sorted(p.resolve() for p in paths if p.exists())


def wrap(argv, box):
    """The command that runs `argv` (the kernel) inside the sandbox `box`."""
    home = Path(os.path.expanduser("~")).resolve()
    hidden = sorted({Path(p).resolve() for p in box.hidden} | {home, Path("/tmp")}, key=lambda p: len(p.parts))
    args = [shutil.which(BWRAP) or BWRAP, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
            "--tmpfs", "/dev/shm", "--unshare-all", "--die-with-parent", "--unsetenv", "JPY_PARENT_PID"]
    for folder in hidden:
        if folder == Path("/"):
            continue
        args += ["--tmpfs", str(folder)]
    for path in needed_paths():
        if any(_inside(path, folder) for folder in hidden):
            args += ["--ro-bind", str(path), str(path)]
    args += ["--bind", str(box.io_dir), str(box.io_dir),
             "--bind", str(box.copy), str(box.folder),
             "--setenv", "HOME", str(home), "--setenv", "TMPDIR", "/tmp",
             "--chdir", str(box.folder)]
    return args + list(argv)
