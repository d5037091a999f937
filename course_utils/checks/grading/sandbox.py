"""The sandbox a learner's notebook runs in while it is graded (bubblewrap, `bwrap`, on Linux): an ALLOW-list.

    problem = sandbox.unavailable()             # None, or why no sandbox can start here
    argv = sandbox.start(box) + sandbox.wrap(kernel_argv, box)   # the kernel, started inside the sandbox `box`

The kernel sees a file system made of these, and of nothing else:
- read-only: the system's programs and libraries (/usr, /bin, /lib...), four files of /etc (the dynamic
  linker's cache and its configuration, the time zone) and a passwd/group naming only the sandbox's
  user; the kernel's Python (its prefix, its base prefix, every folder of its default sys.path; an
  installed course_utils there is hidden); the grader's copy of course_utils (on PYTHONPATH); the
  data (COURSE_DATA_DIR's multi30k/, or the Multi30k cache); the learner's submitted folder, at
  SUBMISSION (a copy the grader made; `confine.py` copies it into the learner's folder); its own io folder
  on the grader's disk (`Sandbox.io_dir`: its connection file, and later the judge's socket, which it
  connects to: a read-only folder still lets it connect);
- writable, in memory and bounded in size (`Limits.scratch`, `Limits.tmp`, IO_SIZE): the learner's folder, at
  its own path (the notebook's working folder), a home folder (HOME, where the kernel starts), /tmp,
  /dev/shm, and IO, where the kernel makes its sockets (the connection file names them there);
- its own /dev (null, zero, random, urandom, tty...) and /proc (it sees only its own processes);
- nothing else: the folders that hold these are bubblewrap's own, read-only.
So a notebook writes nothing on the grader's disk: not in its io folder (as root or as a normal user), not
anywhere else. The grader reaches the kernel's sockets from outside through the sandbox's root
(/proc/<pid>/root: `open_io`), once the kernel has made them and before any of the notebook's code runs, and
holds each by a descriptor (`pin_socket`): what the notebook later renames, removes or links there (a link to
a socket of the machine) changes nothing of where the grader connects.
It has no network (a network namespace with loopback only), its own PIDs, IPC and host name, the short
environment of `environment()` (none of the instructor's variables), and it dies with the grader. It
runs as an unprivileged user: when the grader runs as root, a user id of its own for each notebook
(`Sandbox.uid`, from a range no account uses: two notebooks graded side by side never share one);
otherwise as the instructor's user, in a user namespace of its own. Each notebook may run at most
`Limits.processes` processes and threads, each with at most `Limits.memory` bytes of address space and
no file larger than `Limits.scratch` (`confine.py` sets them). So nothing else is there to read: no other
learner's work or io folder (each sandbox binds only its own), no file of the instructor's, no
/etc/shadow, no socket of the machine's. Nothing of the learner's folder runs before the grader's first cell:
the kernel starts in the empty HOME, with `-P` (Python 3.11 and later: `kernel_argv`), and with IPython's and
Jupyter's configuration folders in HOME too; the grader's first cell moves it into the learner's folder.

What it does NOT stop: using its share of the CPU within the grader's time limits; reading what is bound
read-only, which includes the course package with its references (`--withhold-references` takes them
out: withhold.py).
"""
import contextlib
import json
import os
import secrets
import select
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple, Optional

BWRAP = "bwrap"
PROBE = ["--ro-bind", "/", "/", "--unshare-all", "--die-with-parent", "--dev", "/dev", "--proc", "/proc", "true"]
SUBMISSION = "/course-grader/submission"    # where the learner's submitted folder is bound, read-only
HOME = "/home/learner"                      # the sandbox's home folder (empty, in memory)
UID_RANGE = (1 << 30, 1 << 28)              # as root: a notebook's user id is drawn from [start, start + size)
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
ETC = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime")
IO = "/course-grader/io"                    # the kernel's sockets: a small folder in the sandbox's memory
MiB = 1 << 20
IO_SIZE = MiB                               # bytes the kernel may write there (its sockets take none)


class Limits(NamedTuple):
    processes: int = 256          # processes and threads, per notebook
    memory: int = 4096 * MiB      # address space, per process (RLIMIT_AS)
    scratch: int = 512 * MiB      # the learner's folder (in memory), and the largest file it may write
    tmp: int = 256 * MiB          # /tmp and /dev/shm, each (in memory)


class Sandbox(NamedTuple):
    folder: Path                  # the learner's folder, as the notebook knows it (its working folder)
    submission: Path              # the grader's copy of the submitted folder (bound read-only at SUBMISSION)
    package: Path                 # the folder that holds the kernel's copy of course_utils
    io_dir: Path                  # on the grader's disk: the connection file and the judge's socket (read-only)
    etc_dir: Path                 # the sandbox's passwd and group
    uid: Optional[int] = None     # as root: the unprivileged user (and group) id the kernel runs as
    limits: Limits = Limits()
    info_file: Optional[Path] = None   # where bubblewrap reports its child's pid and namespaces (`start`)


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
    if not _supports("--perms"):
        return "this bubblewrap is too old (the grader needs 0.5 or later; Debian 12 and Ubuntu 22.04 have it)"
    return _unreachable(path)


def _unreachable(path):
    """None when this process can reach a sandbox's root from outside, as the grader reaches the kernel's sockets
    (/proc/<pid>/root of bubblewrap's child, `open_io`); otherwise a sentence saying why not."""
    read, write = os.pipe()
    try:
        probe = subprocess.Popen([path, "--info-fd", str(write), *PROBE[:-1], "cat"], stdin=subprocess.PIPE,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, pass_fds=(write,))
    except OSError as error:
        os.close(read)
        return f"bubblewrap could not start: {error}"
    finally:
        os.close(write)
    try:
        report, until = b"", time.monotonic() + 30
        while (info := _parsed(report)) is None and time.monotonic() < until:
            if select.select([read], [], [], max(0.0, until - time.monotonic()))[0]:
                chunk = os.read(read, 4096)
                if not chunk:
                    break
                report += chunk
        if info is None:
            return "bubblewrap did not report its sandbox's process (--info-fd)"
        try:
            os.close(os.open(f"/proc/{int(info['child-pid'])}/root", os.O_PATH | os.O_DIRECTORY))
        except OSError as error:
            return (f"the grader cannot reach its sandbox's files from outside (/proc/PID/root: {error.strerror}), "
                    "which it needs to reach the kernel's sockets (does a security module forbid it?)")
        return None
    finally:
        os.close(read)
        with contextlib.suppress(OSError):
            probe.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            probe.wait(30)
        if probe.poll() is None:
            probe.kill()
            probe.wait()


def _parsed(report):
    try:
        info = json.loads(report)
    except ValueError:
        return None
    return info if isinstance(info, dict) and "child-pid" in info else None


_OPTIONS = {}


def _supports(option):
    """True when this bubblewrap knows `option` (--size: 0.7; --disable-userns: 0.8)."""
    if "help" not in _OPTIONS:
        try:
            _OPTIONS["help"] = subprocess.run([shutil.which(BWRAP) or BWRAP, "--help"], capture_output=True,
                                              text=True, timeout=30).stdout
        except (OSError, subprocess.TimeoutExpired):
            _OPTIONS["help"] = ""
    return option in _OPTIONS["help"]


def _sized(size):
    """`--size N` before a --tmpfs where bubblewrap can bound it (0.7 and later; before, it is unbounded)."""
    return ["--size", str(size)] if _supports("--size") else []


def new_uid():
    """As root: an unused user id for one notebook's sandbox (none when the grader is not root)."""
    if os.geteuid() != 0:
        return None
    return UID_RANGE[0] + secrets.randbelow(UID_RANGE[1])


_PYTHONS = {}


def python_paths(executable):
    """{"dirs": [...], "hide": [...], "version": (3, 11)} for the Python `executable`: the folders it reads
    (prefix, base prefix, the folder of its real binary, its default sys.path), the course_utils packages
    installed among them (hidden in the sandbox: the kernel imports the grader's copy), and its version."""
    if executable not in _PYTHONS:
        probe = ("import importlib.util, json, os, sys\n"
                 "spec = importlib.util.find_spec('course_utils')\n"
                 "print(json.dumps({'dirs': [sys.prefix, sys.base_prefix, os.path.dirname(os.path.realpath("
                 "sys.executable))] + sys.path, 'hide': list(spec.submodule_search_locations or []) if spec else [], "
                 "'version': list(sys.version_info[:2])}))")
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONNOUSERSITE": "1", "HOME": HOME}
        out = subprocess.run([executable, "-c", probe], capture_output=True, text=True, timeout=120, env=env,
                             cwd="/")
        if out.returncode != 0:
            raise RuntimeError(f"could not ask {executable} for its folders: {out.stderr.strip()[-300:]}")
        found = json.loads(out.stdout.strip().splitlines()[-1])
        dirs = {Path(p).resolve() for p in found["dirs"] if p and Path(p).is_dir()}
        dirs = {p for p in dirs if p != Path("/") and not (p / "course_utils" / "__init__.py").is_file()}
        _PYTHONS[executable] = {"dirs": _outermost(dirs), "hide": sorted({Path(p).resolve() for p in found["hide"]}),
                                "version": tuple(found["version"])}
    return _PYTHONS[executable]


def _outermost(paths):
    """The paths not inside another one of them, shortest first."""
    kept = []
    for path in sorted(paths, key=lambda p: (len(p.parts), str(p))):
        if not any(_inside(path, other) for other in kept):
            kept.append(path)
    return kept


def _inside(path, folder):
    try:
        Path(path).relative_to(folder)
        return True
    except ValueError:
        return False


def data_folder(environ=None):
    """The Multi30k folder the lessons read (COURSE_DATA_DIR/multi30k, else the cache), or None."""
    env = os.environ if environ is None else environ
    if env.get("COURSE_DATA_DIR"):
        folder = Path(env["COURSE_DATA_DIR"]).expanduser() / "multi30k"
    else:
        folder = Path(env.get("COURSE_CACHE_DIR") or Path.home() / ".cache" / "course_utils").expanduser() / "multi30k"
    return folder.resolve() if folder.is_dir() else None


def environment(box, data=None):
    """The kernel's whole environment: nothing of the instructor's."""
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": HOME, "USER": "learner", "LOGNAME": "learner",
           "TMPDIR": "/tmp", "LANG": "C.UTF-8", "PYTHONPATH": str(box.package), "PYTHONNOUSERSITE": "1",
           "IPYTHONDIR": f"{HOME}/.ipython", "JUPYTER_CONFIG_DIR": f"{HOME}/.jupyter",   # (empty: in memory)
           "PYTHONDONTWRITEBYTECODE": "1", "COURSE_FAST": "1", "COURSE_PROGRESS": "off", "MPLBACKEND": "Agg",
           "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
           "COURSE_RUNS_DIR": "/tmp/course-runs"}
    if data is not None:
        env["COURSE_DATA_DIR"] = str(Path(data).parent)
    return env


def write_accounts(box):
    """The sandbox's /etc/passwd and /etc/group: its one user (and root, whom some tools look up)."""
    uid = box.uid if box.uid is not None else os.getuid()
    box.etc_dir.mkdir(parents=True, exist_ok=True)
    (box.etc_dir / "passwd").write_text(f"root:x:0:0:root:/root:/usr/sbin/nologin\n"
                                        f"learner:x:{uid}:{uid}:learner:{HOME}:/usr/sbin/nologin\n")
    (box.etc_dir / "group").write_text(f"root:x:0:\nlearner:x:{uid}:\n")


def _system_args():
    args = ["--perms", "0755", "--dir", "/etc"]
    for path in SYSTEM:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    for path in ETC:
        if os.path.exists(path):
            args += ["--ro-bind", os.path.realpath(path), path]
    return args


def kernel_argv(argv):
    """The kernel's command with `-P` (Python 3.11 and later) where it is `python -m ...`: started in the
    learner's folder, Python would otherwise import from that folder first, so a learner's own
    `ipykernel_launcher.py` would run as the kernel, before the grader's first cell. (That cell puts the
    folder back on sys.path, where the notebook's own imports expect it.)"""
    argv = list(argv)
    if len(argv) > 2 and argv[1] == "-m" and python_paths(argv[0]).get("version", (0, 0)) >= (3, 11):
        return [argv[0], "-P", *argv[1:]]
    return argv


def start(box):
    """What runs bubblewrap: a shell that ignores SIGINT (bwrap must not die of the kernel's interrupts) and
    opens `box.info_file` as descriptor 3, where bwrap reports its child (`--info-fd 3`: `read_info`, `open_io`)."""
    return ["/bin/sh", "-c", 'trap "" INT; info=$1; shift; exec "$@" 3>"$info"', "sh", str(box.info_file)]


def wrap(argv, box, confine_argv=None, data=None):
    """The command that runs `argv` (the kernel) inside the sandbox `box`; `confine_argv`: the command that
    sets the limits, becomes the sandbox's user, copies the submission in and then runs `argv`."""
    limits, python = box.limits, python_paths(argv[0])
    args = [shutil.which(BWRAP) or BWRAP, "--die-with-parent", "--clearenv", "--hostname", "sandbox"]
    args += ["--info-fd", "3"] if box.info_file is not None else []
    if box.uid is not None:   # root: no user namespace; the kernel gives up root for box.uid (confine.py)
        args += ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try",
                 "--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    else:
        args += ["--unshare-all", "--unshare-user"] + (["--disable-userns"] if _supports("--disable-userns") else [])
    for name, value in environment(box, data).items():
        args += ["--setenv", name, value]
    args += _system_args()
    args += ["--ro-bind", str(box.etc_dir / "passwd"), "/etc/passwd", "--ro-bind", str(box.etc_dir / "group"),
             "/etc/group", "--dev", "/dev", "--proc", "/proc"]
    for path, size in (("/tmp", limits.tmp), ("/dev/shm", limits.tmp), (HOME, limits.tmp)):
        args += ["--perms", "1777", *_sized(size), "--tmpfs", path]
    system = [Path(p).resolve() for p in SYSTEM if os.path.isdir(p) and not os.path.islink(p)]
    package = Path(box.package).resolve()
    binds = [("--ro-bind", path, path) for path in python["dirs"] if not any(_inside(path, s) for s in system)]
    binds += [("--ro-bind", package / "course_utils", package / "course_utils")]
    binds += [("--ro-bind", Path(data), Path(data))] if data is not None else []
    binds += [("--ro-bind", box.submission, Path(SUBMISSION))]
    bound = [path for _, _, path in binds]
    bound.append(Path(box.io_dir))
    targets = bound + [Path(box.folder), Path(IO)]
    parents = {parent for path in targets for parent in path.parents
               if not any(_inside(parent, b) for b in bound + system)}
    for parent in sorted(parents - {Path("/"), Path("/tmp"), Path(HOME), Path("/dev"), Path("/etc")},
                         key=lambda p: (len(p.parts), str(p))):
        args += ["--perms", "0755", "--dir", str(parent)]   # (bwrap would make them 0700: closed to the kernel's user)
    for kind, source, path in binds:
        args += [kind, str(source), str(path)]
    for path in python["hide"]:   # an installed course_utils (site-packages): the kernel uses the grader's copy
        if path != package / "course_utils" and any(_inside(path, source) for _, source, _ in binds):
            args += [*_sized(MiB), "--tmpfs", str(path)]
    args += ["--perms", "0777", *_sized(limits.scratch), "--tmpfs", str(box.folder),
             "--perms", "0777", *_sized(IO_SIZE), "--tmpfs", IO, "--ro-bind", str(box.io_dir), str(box.io_dir),
             "--remount-ro", "/", "--chdir", HOME]
    return args + list(confine_argv or []) + list(argv)


# ---------------------------------------------------------------------------------------------
# The grader's way to the kernel's sockets: through the sandbox's root, never through a name the notebook chose
# ---------------------------------------------------------------------------------------------
def read_info(info_file):
    """bubblewrap's report of its child ({"child-pid": ..., "mnt-namespace": ...}), None until it is whole."""
    try:
        info = json.loads(Path(info_file).read_text())
    except (OSError, ValueError):
        return None
    return info if isinstance(info, dict) and "child-pid" in info and "mnt-namespace" in info else None


def open_io(info):
    """An O_PATH descriptor of the sandbox's folder IO, reached through /proc/<child-pid>/root (as root, and as a
    normal user: the sandbox's user namespace is the instructor's), or None while the sandbox is not made yet.
    The process must still be the sandbox's first (its mount namespace is the one bubblewrap reported), and IO
    a file system of its own (the sandbox's, in memory); every step is a folder, never a link."""
    pid = int(info["child-pid"])
    opened = []
    try:
        opened.append(os.open(f"/proc/{pid}/root", os.O_PATH | os.O_DIRECTORY))
        if os.stat(f"/proc/{pid}/ns/mnt").st_ino != int(info["mnt-namespace"]):
            raise RuntimeError("the sandbox ended before its kernel could be reached")
        for part in Path(IO).parts[1:]:
            opened.append(os.open(part, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=opened[-1]))
    except FileNotFoundError:   # (not yet: bubblewrap has not made the sandbox's root)
        for fd in opened:
            os.close(fd)
        return None
    except BaseException:
        for fd in opened:
            os.close(fd)
        raise
    io = opened.pop()
    mounted = os.fstat(io).st_dev != os.fstat(opened[-1]).st_dev
    for fd in opened:
        os.close(fd)
    if not mounted:
        os.close(io)
        raise RuntimeError(f"{IO} is not the sandbox's own folder")
    return io


def pin_socket(io, name):
    """An O_PATH descriptor of the unix socket `name` in the sandbox's folder IO (the descriptor `io`), or None
    while there is none. Connecting to /proc/self/fd/<it> reaches that very socket, whatever the notebook
    renames, removes or links there later (a link is refused: one to an absolute path would be followed in the
    grader's own root, to any socket of the machine)."""
    try:
        fd = os.open(name, os.O_PATH | os.O_NOFOLLOW, dir_fd=io)
    except FileNotFoundError:
        return None
    if not stat.S_ISSOCK(os.fstat(fd).st_mode):
        os.close(fd)
        raise RuntimeError(f"{IO}/{name} in the sandbox is not a socket")
    return fd
