"""The grader's side of one notebook: a worker process (worker.py) per notebook, bounded in time, and
every process the grader started ended when it is stopped (Ctrl-C, `kill`).

    graded = grade_notebook(submission, checks, timeout, ...)   # Graded(rows, graded, notes)
    stop_all()                                                   # Ctrl-C: end every worker and kernel now

Each worker runs in a session of its own (a Ctrl-C in the terminal reaches only the grader, which then
ends them all itself: `stop_all`); a worker's kernel runs in a session of its own too, and its sandbox
dies with the worker (bubblewrap's --die-with-parent) and with its kernel's process group (the sandbox's
first process is in it; when it dies, every process of the sandbox does). The temporary folder of a
notebook is removed when its worker has ended, whatever happened.
"""
import contextlib
import errno
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import NamedTuple

from . import sandbox
from .channel import GRACE, STARTUP
from .report import Row

PACKAGE_ROOT = Path(__file__).resolve().parents[3]  # the folder that holds course_utils/ (the grader's copy)
_RUNNING = {}                                        # worker pid -> its temporary folder
_LOCK = threading.Lock()
STOPPING = threading.Event()                         # set by stop_all: no new worker starts


class Graded(NamedTuple):
    rows: list              # [Row] for the lesson's exercises
    graded: bool            # False: the grader itself failed on this notebook
    notes: list             # what happened (a cell interrupted, the notebook cut short, ...)
    peak_mib: int = None    # the worker's peak memory (it keeps nothing of what the notebook prints)
    outputs: list = None    # keep_outputs: what each cell of the notebook showed (bounded; nbgrader's feedback)


class Stopped(Exception):
    """The grader is stopping (Ctrl-C): this notebook was not graded."""


def _kill_group(pid):
    """Kill a process group that this grader started in a new session (a worker, or a kernel)."""
    if pid > 1:  # (never 0: that would be the grader's own group)
        with contextlib.suppress(OSError):
            os.killpg(pid, signal.SIGKILL)


SOCKET_PATH_MAX = 100    # a unix socket's path has at most 107 bytes (Linux): the io folder's sockets must fit


@contextlib.contextmanager
def _io_folder(tmp):
    """The notebook's io folder (its connection file and the judge's unix socket; beside it, `zmq`: the worker's
    links to the kernel's sockets): in its temporary folder, or, where that folder's path is too long for a
    socket (a long TMPDIR), in a short folder of its own under /tmp (closed to others, like the first)."""
    io = tmp / "io"
    if len(str(io / "judge.sock")) <= SOCKET_PATH_MAX or not os.access("/tmp", os.W_OK):
        io.mkdir()
        yield io
        return
    short = Path(tempfile.mkdtemp(prefix="cg-", dir="/tmp"))
    try:
        (short / "io").mkdir()
        yield short / "io"
    finally:
        shutil.rmtree(short, ignore_errors=True)


def _kill_kernel(tmp):
    with contextlib.suppress(OSError, ValueError):
        _kill_group(int((Path(tmp) / "kernel.pid").read_text()))


def stop_all():
    """End every worker, and its kernel and sandbox, now (their temporary folders are then removed by the
    threads that started them)."""
    STOPPING.set()
    with _LOCK:
        running = dict(_RUNNING)
    for pid, tmp in running.items():
        _kill_group(pid)
        _kill_kernel(tmp)


def _not_copied(folder, names):
    """What the copy of a learner's folder leaves out: Jupyter's checkpoints, and what is neither a file, a
    folder nor a link (a named pipe would block the copy, a device or a socket means nothing in the sandbox)."""
    left = set()
    for name in names:
        path = os.path.join(folder, name)
        if name == ".ipynb_checkpoints" or not (os.path.islink(path) or os.path.isdir(path) or os.path.isfile(path)):
            left.add(name)
    return left


def _copy_submission(folder, into):
    """The grader's copy of the learner's folder (bound read-only into the sandbox): links are kept as links
    (never followed), and everything readable by the sandbox's user."""
    shutil.copytree(folder, into, symlinks=True, ignore=_not_copied)
    for root, dirs, files in os.walk(into):
        for name in dirs + files:
            path = os.path.join(root, name)
            if not os.path.islink(path):
                os.chmod(path, os.stat(path).st_mode | (0o555 if os.path.isdir(path) else 0o444))
    os.chmod(into, 0o755)


def _disk_full(error):
    """True when `error` (an OSError, or shutil.Error listing several) says that a disk is full."""
    if isinstance(error, shutil.Error):
        return any("No space left" in str(item) or "quota" in str(item).lower() for item in error.args[0])
    return getattr(error, "errno", None) in (errno.ENOSPC, errno.EDQUOT)


def _read_result(path):
    """The worker's result, or None when it wrote none (or not a whole one: a full disk)."""
    try:
        result = json.loads(Path(path).read_text())
        return result if isinstance(result, dict) and "outcomes" in result else None
    except (OSError, ValueError):
        return None


def grade_notebook(sub, checks, timeout=600, cell_timeout=300, check_timeout=60, kernel="python3", sandboxed=True,
                   grader_root=None, package=None, limits=None, folder=None, skip=(), keep_outputs=False):
    """Graded(rows, graded, notes) for one learner's notebook. grader_root: the folder holding the grader's
    own copy of course_utils (the judge imports the checks from it); package: the folder holding the
    kernel's copy (the same one, unless references are withheld). folder: the learner's folder the notebook runs
    in (default: the notebook's own); skip: indices of cells not run (nbgrader's test cells: the judge grades
    them); keep_outputs: also return what the cells showed (bounded)."""
    def rows(status, message):
        return [Row(sub.learner, sub.lesson, c.exercise, status, message) for c in checks]

    if STOPPING.is_set():
        raise Stopped()
    grader_root, limits = str(grader_root or PACKAGE_ROOT), limits or sandbox.Limits()
    package = str(package or grader_root)
    folder = Path(folder) if folder is not None else sub.path.parent
    with tempfile.TemporaryDirectory(prefix="course-grade-") as tmp, _io_folder(Path(tmp)) as io:
        tmp = Path(tmp)
        spec = {"notebook": str(sub.path), "folder": str(folder), "lesson": sub.lesson, "kernel": kernel,
                "timeout": timeout, "cell_timeout": cell_timeout, "check_timeout": check_timeout,
                "result": str(tmp / "result.json"), "pid_file": str(tmp / "kernel.pid"),
                "io_dir": str(io), "submission": str(tmp / "submission"),
                "package": package, "sandbox": bool(sandboxed), "names": [c.learner_name for c in checks],
                "uid": sandbox.new_uid() if sandboxed else None, "limits": list(limits),
                "data": str(sandbox.data_folder() or "") or None, "skip": sorted(int(i) for i in skip),
                "outputs": str(tmp / "outputs.json") if keep_outputs else None}
        if sandboxed:
            try:
                _copy_submission(folder, tmp / "submission")
            except (OSError, shutil.Error) as error:
                if _disk_full(error):   # (the grader's disk: not the learner's doing)
                    raise
                return Graded(rows("error", f"the learner's folder {folder} could not be copied for grading (into "
                                            f"{tmp / 'submission'}): {_with_path(error)[:300]}"), True, [])
        (tmp / "spec.json").write_text(json.dumps(spec))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [grader_root, os.environ.get("PYTHONPATH")])),
                   PYTHONDONTWRITEBYTECODE="1")
        hard_limit = STARTUP + timeout + GRACE + STARTUP + (check_timeout + 2 * GRACE) * len(checks) + 60 + GRACE + 30
        safe = ["-P"] if sys.version_info >= (3, 11) else []   # (nothing imported from the working folder)
        with open(tmp / "worker.log", "wb") as log, _LOCK:
            if STOPPING.is_set():
                raise Stopped()
            worker = subprocess.Popen([sys.executable, *safe, "-m", "course_utils.checks.grading.worker",
                                       str(tmp / "spec.json")], stdout=log, stderr=subprocess.STDOUT, cwd=tmp,
                                      env=env, start_new_session=True)
            _RUNNING[worker.pid] = tmp
        try:
            try:
                worker.wait(timeout=hard_limit)
            except subprocess.TimeoutExpired:
                _kill_group(worker.pid)
                worker.wait()
        finally:
            with _LOCK:
                _RUNNING.pop(worker.pid, None)
            if worker.returncode != 0:   # the worker could not shut its kernel
                _kill_kernel(tmp)
        if STOPPING.is_set():
            raise Stopped()
        result = _read_result(tmp / "result.json")
        if result is None:
            if worker.returncode == -signal.SIGKILL:
                return Graded(rows("timeout", f"the notebook did not finish within {hard_limit:g} s and was stopped"),
                              True, [])
            tail = (tmp / "worker.log").read_text(errors="replace")[-600:] if (tmp / "worker.log").exists() else ""
            if "No space left" in tail or shutil.disk_usage(tmp).free < (1 << 20):
                tail = f"the disk that holds the grader's temporary folders ({tmp.parent}) is full"
            return Graded(rows("error", f"the grader failed on {sub.path}: its worker (in {tmp}) ended with status "
                                        f"{worker.returncode} and wrote no result: {tail.strip() or 'no words'}"),
                          False, [])
        if os.environ.get("COURSE_GRADER_DEBUG"):
            print((tmp / "worker.log").read_text(errors="replace")[-3000:], file=sys.stderr)
        outputs = None
        if keep_outputs:
            with contextlib.suppress(OSError, ValueError):
                outputs = json.loads((tmp / "outputs.json").read_text())
    return Graded(_rows_of(sub, checks, result), bool(result["graded"]), _notes_of(result), result.get("peak_mib"),
                  outputs)


def _with_path(error):
    """An OSError's words with its path, where Python's leave it out."""
    text = str(error)
    path = getattr(error, "filename", None)
    return text + (f": {path}" if isinstance(error, OSError) and path and str(path) not in text else "")


def _notes_of(result):
    return result["notes"] + [n for n in (result.get("died"), result["cut"]) if n]


def _rows_of(sub, checks, result):
    out = []
    for check in checks:
        status, message = result["outcomes"].get(check.exercise, (None, ""))
        if status is None or (status == "missing" and result["cut"]):
            if result["cut"]:
                status, message = "timeout", f"{check.title}: not graded: {result['cut']}."
            elif result.get("died"):
                status, message = "error", f"{check.title}: not graded: {result['died']}."
            elif result["graded"]:
                status, message = "error", f"{check.title}: not graded: {'; '.join(result['notes'])}."
            else:
                status, message = "error", "; ".join(result["notes"]) or "not graded"
        out.append(Row(sub.learner, sub.lesson, check.exercise, status, message))
    return out
