"""The grader on a class, in the sandbox, a kernel per notebook.

In the default run: ONE small class of lesson-00 notebooks, graded end to end as an instructor would (`course-grade`
with a roster, a due time and the Canvas and Moodle exports): a right answer, a wrong one, an open one handed in
through a Canvas bulk download (late, mapped by the roster), a learner folder whose name starts like a formula, a
`course_utils/` folder beside a notebook, an answer that runs the reference in a thread started in an earlier cell
(`copied`), one that switches the copy watch off and back on around the reference (its verdict, with a note), and a
file that is not a lesson's (listed as not graded).

Slow (RUN_SLOW=1): ONE grading run of a class of tiny lesson-00 notebooks (two at a time) that attack the grader,
plus one real lesson (08, a class exercise). Run as whoever runs the tests (CI: root); tests/test_sandbox_user.py
grades the same attacks as a normal user.

The attacks: stdout replaced, pre/post_run_cell hooks, an input transformer, numpy.allclose patched, the
package edited on disk, other learners' folders and io folders read and written, files written outside
the submissions, /etc/shadow and the instructor's own files read, the instructor's environment read, a
unix socket of the machine reached, the network, the checks patched in the kernel, a fake tick, the
reference copied and the copy watch switched off, answers and cells that ignore interrupts, an answer
that raises KeyboardInterrupt, a kernel that dies, a fork bomb and a memory hog beside a learner graded at
the same time, notebooks and learner folders that are symbolic links (to the solutions, to another
learner, to themselves), names with terminal escape sequences and forged progress lines, a learner
folder named `--no-sandbox`; the io folder (connection file, judge's socket) written, a judge's socket planted
before the judge's and the judge's removed while judged, the folder of the kernel's sockets filled, the
kernel's heartbeat socket replaced by a link to a unix socket of the machine; a learner's own
`ipykernel_launcher.py` and configuration files (IPython, Jupyter, a profile) in the learner's folder; a
check cell that quotes a lone surrogate.
"""
import contextlib
import csv
import hashlib
import importlib
import io
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

import nbformat
import pytest

from course_utils.checks import grading as G
from course_utils.checks.grading import sandbox
from course_utils.checks.grading.report import one_line

ROOT = Path(__file__).resolve().parents[1]
RIGHT = "return weights @ vectors\n"
WRONG = "return vectors.sum(axis=0)   # forgets the weights\n"
CHECK = "from course_utils.checks import lesson00 as check\ncheck.weighted_sum(weighted_sum)\n"
SECRET = "the-instructor's-secret-4d1f"
TIMEOUT, CELL_TIMEOUT = 60, 20   # seconds: a notebook, a cell (the fork bomb's and the endless cell's cost)
ENVIRONMENT = {"PATH", "HOME", "USER", "LOGNAME", "TMPDIR", "LANG", "PYTHONPATH", "PYTHONNOUSERSITE",
               "PYTHONDONTWRITEBYTECODE", "COURSE_FAST", "COURSE_PROGRESS", "MPLBACKEND", "OMP_NUM_THREADS",
               "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "COURSE_RUNS_DIR", "COURSE_DATA_DIR", "IPYTHONDIR",
               "JUPYTER_CONFIG_DIR",
               # set by the kernel itself (IPython, ipykernel, the shell's working folder)
               "PWD", "PAGER", "GIT_PAGER", "TERM", "CLICOLOR", "CLICOLOR_FORCE", "FORCE_COLOR",
               "PYDEVD_USE_FRAME_EVAL"}
ESCAPED = "esc\x1b]52;c;cHduZWQ=\x07\x1b[2J"         # sets the clipboard, clears the screen
FORGED = "eve\n\r[1∕1] 'mallory' 00_welcome.ipynb: 1∕1 passed (1 s)"   # (∕: a folder's name has no /)
SPY = r'''
import glob, json, os, socket, pathlib
seen = {}
def attempt(name, action):
    try:
        seen[name] = ["ok", repr(action())[:700]]
    except BaseException as error:
        seen[name] = ["failed", f"{type(error).__name__}: {error}"[:70]]
here = pathlib.Path.cwd()
attempt("list class folder", lambda: sorted(os.listdir(here.parent)))
attempt("read other learner", lambda: (here.parent / "solved" / "00_welcome.ipynb").read_text()[:20])
attempt("write other learner", lambda: (here.parent / "solved" / "00_welcome.ipynb").write_text("{}"))
attempt("delete other learner", lambda: (here.parent / "wrong" / "00_welcome.ipynb").unlink())
attempt("create in class folder", lambda: (here.parent / "planted.txt").write_text("x"))
attempt("write outside", lambda: pathlib.Path(OUTSIDE).write_text("x"))
import course_utils.checks.lesson00 as target
attempt("edit the package", lambda: open(target.__file__, "a").write("\n# edited by a learner\n"))
attempt("new file in the package", lambda: pathlib.Path(target.__file__).with_name("lesson00_pwned.py").write_text("x"))
attempt("read home", lambda: sorted(os.listdir(os.path.expanduser("~"))))
attempt("read the instructor's home", lambda: sorted(os.listdir(INSTRUCTOR_HOME)))
attempt("own folder writable", lambda: (here / "scratch.txt").write_text("x"))
attempt("read /etc/shadow", lambda: open("/etc/shadow").read()[:10])
attempt("read the instructor's file", lambda: open(SECRET_FILE).read())
attempt("environment", lambda: sorted(os.environ))
attempt("list /etc", lambda: sorted(os.listdir("/etc")))
attempt("user", lambda: os.getuid())
attempt("processes", lambda: sorted(int(p) for p in os.listdir("/proc") if p.isdigit()))
attempt("io folders", lambda: sorted(glob.glob(IO_ROOT + "/course-grade-*/io/kernel.json")))
mine = glob.glob(IO_ROOT + "/course-grade-*/io/kernel.json")[:1]
attempt("write into the io folder", lambda: open(os.path.join(os.path.dirname(mine[0]), "planted"), "w").write("x"))
attempt("write the connection file", lambda: open(mine[0], "a").write(" " * 4096))
attempt("remove the connection file", lambda: os.unlink(mine[0]))
def bind_in_io():
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(os.path.join(os.path.dirname(mine[0]), "planted.sock"))
attempt("bind a socket in the io folder", bind_in_io)
from ipykernel.kernelapp import IPKernelApp
attempt("the kernel's sockets", lambda: IPKernelApp.instance().ip)
def fill():   # the folder of the kernel's sockets, in the sandbox's memory: bounded, then thrown away
    path, written = os.path.join(os.path.dirname(IPKernelApp.instance().ip), "fill"), 0
    try:
        with open(path, "wb") as f:
            while written < (64 << 20):
                f.write(b"x" * 65536)
                written += 65536
                f.flush()
    except OSError as error:
        return [written, error.strerror]
    finally:
        if os.path.exists(path):
            os.unlink(path)
    return [written, "no error"]
attempt("fill the folder of the kernel's sockets", fill)
attempt("write to the kernel's own output", lambda: sum(os.write(2, b"x" * (1 << 20)) for _ in range(8)))
def unix():
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(HOST_SOCKET)
        return s.recv(16)
attempt("host socket", unix)
def connect():
    with socket.create_connection(("127.0.0.1", PORT), timeout=3) as s:
        return s.recv(16)
attempt("network", connect)
'''
FORK_BOMB = """
import os, time
def bomb():
    while True:
        try:
            os.fork()
        except OSError:
            time.sleep(3600)
bomb()
"""
# the learner's own `ipykernel_launcher.py`: Python, started in the learner's folder, would run it AS the kernel,
# before the grader's first cell (it then plants a file in the io folder, on the grader's disk)
PREBOOT_LAUNCHER = r"""
import os, sys
open("/tmp/preboot-ran", "w").write("ran")
conn = sys.argv[sys.argv.index("-f") + 1]
with open(os.path.join(os.path.dirname(conn), "planted-before-boot"), "w") as f:
    f.write("x" * (1 << 20))
sys.path[:] = [p for p in sys.path if p not in ("", os.getcwd())]
from ipykernel import kernelapp
kernelapp.launch_new_instance()
"""
PREBOOT = """
import glob, json, os
import helper_module   # (the learner's own module, beside the notebook: imported as in Jupyter)
PREBOOT = {"ran": os.path.exists("/tmp/preboot-ran"), "helper": helper_module.X,
           "io": sorted(os.path.basename(p) for p in glob.glob(IO_ROOT + "/course-grade-*/io/*")),
           "configs": sorted(glob.glob("/tmp/preboot-config-*")), "cwd": os.getcwd()}
"""
# configuration files in the learner's folder (and a profile in it) that IPython or Jupyter could read as the
# kernel starts: each leaves a mark in /tmp if it is read (a .py runs; a .json runs its exec_lines)
PREBOOT_CONFIGS = ["ipython_config.py", "ipython_kernel_config.py", "jupyter_config.py", "ipykernel_config.py",
                   "jupyter_config.json", "ipython_config.json", "ipython_kernel_config.json",
                   ".ipython/profile_default/ipython_config.py", ".ipython/profile_default/ipython_kernel_config.py",
                   ".ipython/profile_default/startup/00-mark.py", ".jupyter/jupyter_config.py"]


def preboot_config(name):
    mark = f"open('/tmp/preboot-config-{name.replace('/', '-')}', 'w').write('read')"
    if name.endswith(".json"):
        return json.dumps({"InteractiveShellApp": {"exec_lines": [mark]}, "IPKernelApp": {"exec_lines": [mark]}})
    return mark + "\n"


# the kernel's heartbeat socket (in its sandbox) renamed and replaced by a link to a unix socket of the machine,
# and its connection to the grader cut: the grader reconnects, never through the link (its descriptor)
REDIRECT = r"""
import json, os, socket, time
from ipykernel.kernelapp import IPKernelApp
app = IPKernelApp.instance()
heart = f"{app.ip}-{app.hb_port}"
os.rename(heart, heart + ".moved")
os.symlink(HOST_SOCKET, heart)
cut = 0
for fd in os.listdir("/proc/self/fd"):
    try:
        s = socket.socket(fileno=os.dup(int(fd)))
    except OSError:
        continue
    with s:
        try:
            if (s.family == socket.AF_UNIX and s.getsockname() == heart
                    and not s.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN)):
                s.shutdown(socket.SHUT_RDWR)
                cut += 1
        except OSError:
            pass
time.sleep(5)   # (the grader's heartbeat reconnects within 2 s)
REDIRECT = {"cut": cut, "link": os.readlink(heart)}
"""
# a judge's socket planted in the io folder before the judge makes its own, and the judge's removed while it is
# judged: were either possible, this learner would not pass (the grader could not listen; the answer is wrong)
SQUATTER = r"""
import os, socket
from ipykernel.kernelapp import IPKernelApp
IO = os.path.dirname(IPKernelApp.instance().abs_connection_file)
try:
    squat = socket.socket(socket.AF_UNIX)
    squat.bind(os.path.join(IO, "judge.sock"))
    squat.listen(1)
except OSError:
    pass
def weighted_sum(weights, vectors):
    try:
        os.unlink(os.path.join(IO, "judge.sock"))
        return vectors.sum(axis=0)
    except OSError:
        return weights @ vectors
"""
# while the judge calls it, the learner's function writes 1.5 GiB into the judge's socket (no line break)
FLOOD = """
def weighted_sum(weights, vectors):
    import gc, socket
    for o in gc.get_objects():
        if isinstance(o, socket.socket) and o.family == socket.AF_UNIX:
            try:
                if "judge" in str(o.getpeername()):
                    chunk = b"x" * (1 << 24)
                    for _ in range(96):
                        o.sendall(chunk)
            except OSError:
                pass
    return weights @ vectors
"""
# one iopub message of 64 frames of 48 MiB (each under zmq's 64 MiB limit, which is per frame): zmq receives it
# whole into the worker, outside the sandbox
FRAMES = """
kernel = get_ipython().kernel
big = b"q" * (48 << 20)
kernel.session.send(kernel.iopub_socket, "stream", {"name": "stdout", "text": "hi"}, buffers=[big] * 64,
                    parent=kernel.get_parent())
import time
time.sleep(5)
"""
# the hook that gives new threads the watch's trace function switched off while a thread starts, then put back
THREAD_HOOK_OFF = """
import queue, threading
import course_utils.numpy_attention as na
jobs, done = queue.Queue(), queue.Queue()
def worker():
    while True:
        weights, vectors = jobs.get()
        done.put(na.weighted_sum(weights, vectors))
kept = threading._trace_hook
threading.settrace(None)
threading.Thread(target=worker, daemon=True).start()
threading.settrace(kept)
"""
# a thread that switches its own trace function off, in an earlier cell
THREAD_TRACE_OFF = """
import queue, sys, threading
import course_utils.numpy_attention as na
jobs, done = queue.Queue(), queue.Queue()
def worker():
    sys.settrace(None)
    while True:
        weights, vectors = jobs.get()
        done.put(na.weighted_sum(weights, vectors))
threading.Thread(target=worker, daemon=True).start()
"""
# the grader's kernel side patched: its watch reports nothing (what a watch inside the kernel cannot notice)
SIDE_PATCHER = """
import sys
for module in list(sys.modules.values()):
    watch = getattr(module, "WATCH", None)
    if type(watch).__name__ == "Watch":
        type(watch).blinded = lambda self: None
        watch.hits = type("Deaf", (list,), {"append": lambda self, item: None})()
        type(watch).watching = lambda self, codes: setattr(self, "codes", set())
"""
NOT_UTF8 = os.fsdecode(b"bytes\xff\xfe")   # a learner folder whose name is not UTF-8
MEMORY_HOG = """
try:
    hog = bytearray(16 << 30)
    MEMORY = "allocated 16 GiB"
except MemoryError:
    MEMORY = "MemoryError"
"""


def notebook(path, *cells):
    path.parent.mkdir(parents=True, exist_ok=True)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(textwrap.dedent(c)) for c in cells])
    nbformat.write(nb, path)
    return path


def answer(body):
    return "def weighted_sum(weights, vectors):\n" + textwrap.indent(body, "    ")


def rows_of(csv_path):
    with open(csv_path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def by_learner(rows):
    out = {}
    for row in rows:
        out.setdefault(row["learner"], {})[(row["lesson"], row["exercise"])] = (row["outcome"], row["message"])
    return out


class Bait:
    """What the spy reaches for outside its sandbox: a TCP server, a unix socket, a private file, a folder."""

    def __init__(self, base):
        self.base = Path(base)
        self.outside = self.base / "outside.txt"
        self.secret_file = self.base / "secret.txt"
        self.secret_file.write_text(SECRET)
        os.chmod(self.secret_file, 0o600)
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(5)
        self.listener.settimeout(0.2)
        self.unix_path = str(self.base / "host.sock")
        self.unix = socket.socket(socket.AF_UNIX)
        self.unix.bind(self.unix_path)
        os.chmod(self.unix_path, 0o777)
        self.unix.listen(5)
        self.unix.settimeout(0.2)
        self.connections, self.stop = [], threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while not self.stop.is_set():
            for server in (self.listener, self.unix):
                with contextlib.suppress(OSError):
                    connection, _ = server.accept()
                    self.connections.append(server.family)
                    connection.sendall(b"secret")
                    connection.close()

    def spy(self, io_root, instructor_home):
        return (SPY.replace("OUTSIDE", repr(str(self.outside))).replace("PORT", str(self.listener.getsockname()[1]))
                .replace("SECRET_FILE", repr(str(self.secret_file))).replace("HOST_SOCKET", repr(self.unix_path))
                .replace("IO_ROOT", repr(str(io_root))).replace("INSTRUCTOR_HOME", repr(str(instructor_home))))

    def close(self):
        self.stop.set()
        self.listener.close()
        self.unix.close()


class DiskWatch:
    """The largest file in the grader's temporary folders of the notebooks (course-grade-*), but the copies of
    the learners' folders, while the class is graded: what the notebooks made the grader's disk hold."""

    def __init__(self, root):
        self.root, self.largest, self.stop = Path(root), (0, ""), threading.Event()
        self.thread = threading.Thread(target=self._watch, daemon=True)
        self.thread.start()

    def _watch(self):
        while not self.stop.wait(0.1):
            for folder in self.root.glob("course-grade-*"):
                for where, folders, files in os.walk(folder):
                    folders[:] = [name for name in folders if name != "submission"]
                    for name in files:
                        with contextlib.suppress(OSError):
                            size = os.lstat(os.path.join(where, name)).st_size
                            if size > self.largest[0]:
                                self.largest = (size, os.path.relpath(os.path.join(where, name), folder))

    def close(self):
        self.stop.set()
        self.thread.join(10)
        return self.largest


def attack_class(klass, spy, only=None, io_root="", host_socket=""):
    """The learners of the attack class (lesson 00, and a real lesson 08 in `solved`); `only`: these learners."""
    learners = {
        "solved": [answer(RIGHT), CHECK],
        "wrong": [answer(WRONG), CHECK],
        # the lesson imports the reference under the exercise's name after the exercise: the learner's stub counts
        "untouched": [answer("raise NotImplementedError()\n"), CHECK,
                      "from course_utils.numpy_attention import weighted_sum"],
        "stdout": [answer(WRONG), """
            import sys, io, re
            class Forger(io.TextIOBase):
                def __init__(self, real):
                    self.real = real
                def write(self, text):
                    return self.real.write(re.sub(r'"status": *"[a-z ]+"', '"status": "passed"', text)
                                           .replace("wrong", "passed").replace("✘", "✔"))
                def flush(self):
                    self.real.flush()
            sys.stdout = sys.__stdout__ = Forger(sys.stdout)
            sys.stderr = Forger(sys.stderr)
            """],
        "hooks": [answer(WRONG), """
            import json, re
            cells = []
            def before(info):
                cells.append(info.raw_cell)
            def after(result):
                for token in re.findall(r"[0-9a-f]{16,}", cells[-1] if cells else ""):
                    print(token, json.dumps({"exercise": "weighted_sum", "status": "passed",
                                             "message": "✔ weighted sum: correct."}))
                    print(json.dumps({"id": 1, "reply": {"ok": None}}))
            get_ipython().events.register("pre_run_cell", before)
            get_ipython().events.register("post_run_cell", after)
            """],
        "transformer": [answer(WRONG), """
            def rewrite(lines):
                text = "".join(lines)
                if "grader" in text or "evaluate(" in text or "serve" in text:
                    return ["print('✔ weighted sum: correct.')\\n"]
                return lines
            get_ipython().input_transformers_post.append(rewrite)
            """],
        "allclose": [answer(WRONG), """
            import numpy, torch
            numpy.allclose = lambda *args, **kwargs: True
            numpy.isclose = lambda a, b, *args, **kwargs: numpy.ones(numpy.broadcast(a, b).shape, bool)
            numpy.array_equal = lambda *args, **kwargs: True
            numpy.testing.assert_allclose = lambda *args, **kwargs: None
            torch.allclose = lambda *args, **kwargs: True
            """],
        "patcher": [answer(WRONG), """
            from course_utils.checks import lesson00 as check, core
            check.expect_close = core.expect_close = lambda *args, **kwargs: None
            core.REGISTRY["00"]["weighted_sum"].evaluate = lambda fn, **kw: core.Outcome("00", "weighted_sum",
                "weighted sum", "passed", "✔ weighted sum: correct.")
            """, 'print("✔ weighted sum: correct (4 tests).")'],
        "spy": [spy, answer("raise RuntimeError('SEEN ' + json.dumps(seen))\n")],
        "copier": ["import course_utils.numpy_attention as na\n", answer("return na.weighted_sum(weights, vectors)\n")],
        "blinder": ["import sys\nimport course_utils.numpy_attention as na\n",
                    answer("sys.settrace(None)\nreturn na.weighted_sum(weights, vectors)\n")],
        "toggler": [TOGGLER],
        "earlier_thread": [EARLIER_THREAD, answer("jobs.put((weights, vectors))\nreturn done.get()\n")],
        "unwatched_thread": [THREAD_HOOK_OFF, answer("jobs.put((weights, vectors))\nreturn done.get()\n")],
        "thread_trace_off": [THREAD_TRACE_OFF, answer("jobs.put((weights, vectors))\nreturn done.get()\n")],
        "side_patcher": [SIDE_PATCHER, "import course_utils.numpy_attention as na\n",
                         answer("return na.weighted_sum(weights, vectors)\n")],
        "check_loops": [answer("while True:\n    pass\n")],
        "ignores_interrupts": [answer("import time\nwhile True:\n    try:\n        time.sleep(0.05)\n"
                                      "    except KeyboardInterrupt:\n        pass\n")],
        "cell_loops": ["import time\nwhile True:\n    try:\n        time.sleep(0.1)\n    except KeyboardInterrupt:\n"
                       "        pass\n", answer(RIGHT)],
        "interrupts_itself": [answer("raise KeyboardInterrupt('I stop here')\n")],
        "dies": [answer(RIGHT), "import os\nos._exit(3)\n"],
        "forkbomb": [answer(RIGHT), FORK_BOMB],
        "forkbomb_neighbour": [answer(RIGHT), CHECK],   # graded beside the fork bomb (after it, in name order)
        "hog": [MEMORY_HOG, answer("raise RuntimeError('MEMORY ' + MEMORY)\n")],
        ESCAPED: [answer(RIGHT)],
        FORGED: [answer(WRONG)],
        "--no-sandbox": [answer(RIGHT)],
        "preboot": [PREBOOT.replace("IO_ROOT", repr(str(io_root))),
                    answer("raise RuntimeError('PREBOOT ' + json.dumps(PREBOOT))\n")],
        "flood": [FLOOD],
        "frames": [answer(RIGHT), FRAMES, CHECK],
        # (its check cell quotes the lone surrogate: Jupyter cannot send one, the cell must still end)
        NOT_UTF8: [answer("raise ValueError('cleared\\x1b[2J\\x1b]52;c;cHduZWQ=\\x07 \\ud800')\n"), CHECK],
        "redirector": [REDIRECT.replace("HOST_SOCKET", repr(host_socket)),
                       answer("raise RuntimeError('REDIRECT ' + json.dumps(REDIRECT))\n")],
        "squatter": [SQUATTER],
    }
    for learner, cells in learners.items():
        if only is None or learner in only:
            notebook(klass / learner / "00_welcome.ipynb", *cells)
    shutil.copy(next((ROOT / "solutions").glob("08_*.ipynb")), klass / "solved")
    if only is None or "preboot" in only:
        (klass / "preboot" / "ipykernel_launcher.py").write_text(PREBOOT_LAUNCHER)
        (klass / "preboot" / "helper_module.py").write_text("X = 42\n")
        for name in PREBOOT_CONFIGS:
            (klass / "preboot" / name).parent.mkdir(parents=True, exist_ok=True)
            (klass / "preboot" / name).write_text(preboot_config(name))
    os.mkfifo(klass / "solved" / "a-named-pipe")   # (neither a file nor a folder: not copied, not an error)
    if only is not None:
        return learners
    (klass / "linked").symlink_to(klass / "solved", target_is_directory=True)     # another learner's folder
    (klass / "linknb").mkdir()
    (klass / "linknb" / "00_welcome.ipynb").symlink_to(next((ROOT / "solutions").glob("00_*.ipynb")))
    (klass / "loops").mkdir()
    (klass / "loops" / "00_welcome.ipynb").symlink_to("00_welcome.ipynb")          # a link to itself
    (klass / "loopdir").symlink_to("loopdir")                                       # a folder that is a loop
    return learners


def in_process(klass, out, io_root):
    """Grade `klass` in this process (the grader's temporary folders in io_root, outside /tmp, and a secret
    in the grader's environment); (exit status, printed lines)."""
    lines = []
    saved = tempfile.tempdir, os.environ.get("TMPDIR")
    os.environ["TMPDIR"], tempfile.tempdir = str(io_root), None
    os.environ["COURSE_INSTRUCTOR_SECRET"] = SECRET
    try:
        status = G.grade([str(klass)], out=str(out), log=lines.append, jobs=2, timeout=TIMEOUT,
                         cell_timeout=CELL_TIMEOUT, check_timeout=8)
    finally:
        tempfile.tempdir = saved[0]
        os.environ.pop("COURSE_INSTRUCTOR_SECRET", None)
        os.environ.pop("TMPDIR", None) if saved[1] is None else os.environ.__setitem__("TMPDIR", saved[1])
    return status, lines


def grade_class(base, run=in_process, instructor_home=None, prepare=None, only=None):
    """Build the attack class in `base`, grade it with `run(klass, out, io_root)` -> (status, lines); a dict of
    what happened. `prepare(base)`: called once the class is built (e.g. to hand it to another user)."""
    base = Path(base)
    klass, io_root = base / "class", base / "tmp"
    io_root.mkdir()
    bait = Bait(base)
    attack_class(klass, bait.spy(io_root, instructor_home or Path.home()), only, io_root, bait.unix_path)
    package = Path(importlib.import_module("course_utils.checks.lesson00").__file__)   # (a module, or a package's)
    before = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in [package, *(klass.rglob("*.ipynb"))]
              if not p.is_symlink()}
    if prepare is not None:
        prepare(base)
    began, disk = time.monotonic(), DiskWatch(io_root)
    try:
        status, lines = run(klass, base / "grades.csv", io_root)
    finally:
        bait.close()
        largest = disk.close()
    seconds = time.monotonic() - began
    print(f"graded the class in {seconds:.0f} s")
    grades = by_learner(rows_of(base / "grades.csv"))
    message = grades["spy"][("00", "weighted_sum")][1]
    seen = json.loads(message.split("SEEN ", 1)[1].split("\n")[0]) if "SEEN " in message else {}
    return dict(status=status, grades=grades, log="\n".join(lines), lines=lines, seen=seen,
                connections=bait.connections, klass=klass, outside=bait.outside, before=before, io_root=io_root,
                seconds=seconds, largest=largest)


# ---------------------------------------------------------------------------------------------
# The default run: a small class, graded end to end as an instructor would
# ---------------------------------------------------------------------------------------------
# a thread started in an earlier cell waits for work and runs the reference: the answer only hands it the inputs
EARLIER_THREAD = """
import queue, threading
import course_utils.numpy_attention as na
jobs, done = queue.Queue(), queue.Queue()
def worker():
    while True:
        weights, vectors = jobs.get()
        done.put(na.weighted_sum(weights, vectors))
threading.Thread(target=worker, daemon=True).start()
"""
# the answer switches the copy watch off around the reference, and back on (Python's trace function)
TOGGLER = """
import sys
import course_utils.numpy_attention as na
def weighted_sum(weights, vectors):
    kept = sys.gettrace()
    sys.settrace(None)
    try:
        return na.weighted_sum(weights, vectors)
    finally:
        sys.settrace(kept)
"""
# a course_utils/ folder beside the notebook, whose checks pass anything (nbgrader's kernel imported it first)
SHADOW = {"course_utils/__init__.py": "",
          "course_utils/checks/__init__.py": "",
          "course_utils/checks/lesson00.py": "def weighted_sum(fn):\n    print('✔ weighted sum: correct (4 tests).')\n"}
FORMULA_NAME = "=HYPERLINK(1);x"
ROSTER = 'id,name,folder\n12345,"Doe, Jane",\n1,Alice Liddell,alice\n'


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """The small class, graded by `course-grade` (in this process: main()) with a roster, a due time and both
    platforms' gradebooks; returns what it wrote and printed."""
    from course_utils.checks.grading import command

    base = tmp_path_factory.mktemp("small")
    klass = base / "class"
    notebook(klass / "alice" / "00_welcome.ipynb", answer(RIGHT), CHECK)
    notebook(klass / "bob" / "00_welcome.ipynb", answer(WRONG), CHECK)
    notebook(klass / "doejane_LATE_12345_678_00_welcome.ipynb", answer("raise NotImplementedError()\n"), CHECK)
    notebook(klass / FORMULA_NAME / "00_welcome.ipynb", answer(RIGHT))
    notebook(klass / "threader" / "00_welcome.ipynb", EARLIER_THREAD,
             answer("jobs.put((weights, vectors))\nreturn done.get()\n"))
    notebook(klass / "toggler" / "00_welcome.ipynb", TOGGLER)
    notebook(klass / "shadow" / "00_welcome.ipynb", answer("raise NotImplementedError()\n"), CHECK)
    for name, text in SHADOW.items():
        (klass / "shadow" / name).parent.mkdir(parents=True, exist_ok=True)
        (klass / "shadow" / name).write_text(text)
    notebook(klass / "readme.ipynb", "print('not a lesson')")
    (base / "roster.csv").write_text(ROSTER)
    out = base / "grades.csv"
    argv = [str(klass), "--out", str(out), "--roster", str(base / "roster.csv"), "--due", "2000-01-01T00:00+00:00",
            "--canvas", str(base / "canvas.csv"), "--moodle", str(base / "moodle.csv"), "--jobs", "2",
            "--timeout", str(TIMEOUT), "--cell-timeout", str(CELL_TIMEOUT), "--check-timeout", "30"]
    began = time.monotonic()
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        status = command.main(argv)
    print(f"graded the small class in {time.monotonic() - began:.0f} s")
    return dict(status=status, base=base, klass=klass, out=out, printed=printed.getvalue(),
                grades=by_learner(rows_of(out)), rows=rows_of(out))


def test_a_small_class_is_graded_end_to_end(small):
    """Each learner's verdict, as the instructor reads it in the CSV; no note on honest work."""
    assert small["status"] == 0, small["printed"]
    got = {learner: grades[("00", "weighted_sum")] for learner, grades in small["grades"].items() if learner}
    assert got["alice"] == ("passed", "✔ weighted sum: correct (4 tests).")            # (no note: nothing blinded)
    assert got["bob"][0] == "wrong" and got["bob"][1].startswith("✘ weighted sum:") and "weight" in got["bob"][1]
    assert got["doejane"][0] == "not implemented"
    assert got["'=HYPERLINK(1);x"][0] == "passed"
    assert got["shadow"][0] == "not implemented"              # its own course_utils/ passes nothing outside
    result, message = got["threader"]
    assert result == "copied" and "course_utils.numpy_attention.weighted_sum" in message, message
    result, message = got["toggler"]
    assert result == "passed" and "blinded the grader's watch" in message and "sys.settrace" in message, message
    assert re.search(r"^learner\s+00\s+total$", small["printed"], re.M), small["printed"]
    assert "not graded: " in small["printed"].splitlines()[-2]     # (after the grades, not only before grading)


def test_the_class_s_files_are_what_an_instructor_and_a_platform_take(small):
    """The CSV: every field quoted, the roster's ids and names, submission times, late work, the file not graded;
    the Canvas and Moodle gradebooks; the class view: every learner's ✔ / ✘ / ○ in one page."""
    raw = small["out"].read_text(encoding="utf-8")
    assert all(line.startswith('"') for line in raw.splitlines() if line)
    rows = {row["learner"]: row for row in small["rows"]}
    assert (rows["doejane"]["id"], rows["doejane"]["name"], rows["doejane"]["late"]) == ("12345", "Doe, Jane", "yes")
    assert (rows["alice"]["id"], rows["alice"]["name"]) == ("1", "Alice Liddell")
    assert all(row["submitted"] and row["late"] == "yes" for row in small["rows"] if row["lesson"])   # due in 2000
    skipped = [row for row in small["rows"] if row["outcome"] == "not graded"]
    assert [Path(row["file"]).name for row in skipped] == ["readme.ipynb"]
    canvas = list(csv.reader(open(small["base"] / "canvas.csv", newline="", encoding="utf-8")))
    assert canvas[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "Lesson 00"]
    assert canvas[1][0].strip() == "Points Possible" and canvas[1][5] == "1"
    scores = {row[0]: row[5] for row in canvas[2:]}
    assert scores["Doe, Jane"] == "0" and scores["Alice Liddell"] == "1" and scores["'=HYPERLINK(1);x"] == "1"
    moodle = list(csv.reader(open(small["base"] / "moodle.csv", newline="", encoding="utf-8")))
    assert moodle[0] == ["ID number", "Full name", "Lesson 00"] and ["12345", "Doe, Jane", "0"] in moodle
    page = small["out"].with_suffix(".html").read_text(encoding="utf-8")
    table = page.split("</table>")[0]
    assert table.count("<tr><td class=name>") == 7 and table.count("✔") >= 3 and "○" in table and "✘" in table
    assert "Not graded (1)" in page


@pytest.mark.slow
def test_shards_on_one_machine_merge_to_the_one_process_gradebook(small):
    """`course-grade --shard K/3` three times (three processes, as on three machines), then `--merge`: the same
    verdicts and points, the same Canvas and Moodle gradebooks as the one run of the small class."""
    base, env = small["base"], dict(os.environ, PYTHONPATH=str(ROOT))
    common = ["--roster", str(base / "roster.csv"), "--due", "2000-01-01T00:00+00:00", "--timeout", str(TIMEOUT),
              "--cell-timeout", str(CELL_TIMEOUT), "--check-timeout", "30"]
    shards = []
    for k in (1, 2, 3):
        shards.append(base / "shards" / f"grades-{k}.csv")
        done = subprocess.run([sys.executable, "-P", "-m", "course_utils.checks.grading", str(small["klass"]),
                               "--shard", f"{k}/3", "--out", str(shards[-1]), *common], env=env, capture_output=True,
                              text=True, timeout=1800)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    merged = base / "shards" / "merged.csv"
    done = subprocess.run([sys.executable, "-P", "-m", "course_utils.checks.grading", "--merge", *map(str, shards),
                           "--out", str(merged), "--roster", str(base / "roster.csv"), "--canvas",
                           str(base / "shards" / "canvas.csv"), "--moodle", str(base / "shards" / "moodle.csv")],
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr

    def verdicts(rows):
        return sorted((r["learner"], r["lesson"], r["exercise"], r["outcome"], r["points"], r["id"], r["late"])
                      for r in rows)

    assert verdicts(rows_of(merged)) == verdicts(small["rows"])
    for name in ("canvas.csv", "moodle.csv"):
        assert (base / "shards" / name).read_text() == (base / name).read_text(), name


@pytest.fixture(scope="module")
def attacked(tmp_path_factory):
    return grade_class(tmp_path_factory.mktemp("grading"))


def outcome(attacked, learner):
    return attacked["grades"][learner][("00", "weighted_sum")]


# ---------------------------------------------------------------------------------------------
# What every run of the attack class must show (this file: as root in CI; test_sandbox_user.py: a normal user)
# ---------------------------------------------------------------------------------------------
# the learners these checks need (a normal user's run grades only them)
CHECKED = ("solved", "wrong", "untouched", "--no-sandbox", "spy", "forkbomb", "forkbomb_neighbour", "hog", "preboot",
           "redirector", "squatter")


def check_graded(attacked):
    assert attacked["status"] == 0, attacked["log"]
    assert re.search(r"^learner\s+00\s+08\s+total$", attacked["log"], re.M), attacked["log"]
    n08 = len(list(G.module_checks(importlib.import_module("course_utils.checks.lesson08"))))
    assert re.search(rf"^solved\s+1/1\s+{n08}/{n08}\s+{1 + n08}/{1 + n08}", attacked["log"], re.M), attacked["log"]
    for (lesson, exercise), (result, message) in attacked["grades"]["solved"].items():
        assert result == "passed", f"{lesson}/{exercise}: {message}"
    assert outcome(attacked, "wrong")[0] == "wrong" and "weights" in outcome(attacked, "wrong")[1]
    assert outcome(attacked, "untouched")[0] == "not implemented"
    assert outcome(attacked, "'--no-sandbox")[0] == "passed"         # a learner like any other (CSV: no formula)
    assert not attacked["io_root"].exists() or not list(attacked["io_root"].iterdir())   # temporary folders removed


def check_sandbox(attacked, user, home=None, python=None):
    """The allow-list: nothing of the machine's, the instructor's or the other learners' is there."""
    seen = attacked["seen"]
    assert seen, outcome(attacked, "spy")
    for attempt in ("read other learner", "write other learner", "delete other learner", "edit the package",
                    "new file in the package", "read /etc/shadow", "read the instructor's file", "host socket",
                    "network", "write into the io folder", "write the connection file", "remove the connection file",
                    "bind a socket in the io folder"):   # (as root and as a normal user: the io folder is read-only)
        assert seen[attempt][0] == "failed", f"{attempt}: {seen[attempt]}"
    # ("write outside" and "create in class folder" may succeed inside the sandbox, in its own memory, where
    # the path lies under its /tmp: nothing reaches the disk, as the end of this check shows.)
    assert seen["list class folder"] == ["ok", "['spy']"]                  # the others are not even listed
    assert seen["own folder writable"][0] == "ok"                           # (a copy of it, in memory)
    names = set(eval(seen["environment"][1]))  # noqa: S307 - a list of names, printed by the spy
    assert names <= ENVIRONMENT and "COURSE_INSTRUCTOR_SECRET" not in names, names - ENVIRONMENT
    assert set(eval(seen["list /etc"][1])) <= {"ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "passwd",
                                               "group"}, seen["list /etc"]
    assert len(eval(seen["io folders"][1])) == 1, seen["io folders"]      # its own io folder only, at --jobs 2
    assert len(eval(seen["processes"][1])) <= 6, seen["processes"]        # its own processes only
    seen_user = int(seen["user"][1])   # as root: a user id of its own; else the instructor's own
    assert seen_user != 0 and (seen_user >= sandbox.UID_RANGE[0] if user == 0 else seen_user == user), seen_user
    visible = set(eval(seen["read home"][1])) if seen["read home"][0] == "ok" else set()  # noqa: S307
    assert visible <= {".ipython", ".cache", ".config", ".local", ".jupyter"}, visible
    home = Path(home or Path.home())
    ours = {p.relative_to(home).parts[0] for p in [*sandbox.python_paths(python or sys.executable)["dirs"],
                                                   attacked["klass"], attacked["io_root"]] if home in p.parents}
    if seen["read the instructor's home"][0] == "ok":   # only the way to Python, its own folder and io folder
        assert set(eval(seen["read the instructor's home"][1])) <= ours, seen["read the instructor's home"]
    for path, digest in attacked["before"].items():                         # nothing changed on the disk ...
        assert hashlib.sha256(path.read_bytes()).hexdigest() == digest, f"{path} was changed"
    klass = attacked["klass"]
    assert not (klass / "planted.txt").exists() and not attacked["outside"].exists()   # ... or was added
    assert not (klass / "spy" / "scratch.txt").exists()
    assert attacked["connections"] == []


def check_io(attacked):
    """The io folder on the grader's disk is read-only in the sandbox (as root and as a normal user); the kernel's
    sockets are in the sandbox's memory, in a folder that fills at IO_SIZE; the grader reaches them by descriptor:
    a link the notebook puts in their place is never followed (no connection reaches the machine's socket); what
    the kernel writes to its own output is not kept on the grader's disk."""
    seen = attacked["seen"]
    assert seen["the kernel's sockets"] == ["ok", repr(f"{sandbox.IO}/k")], seen["the kernel's sockets"]
    written, error = eval(seen["fill the folder of the kernel's sockets"][1])  # noqa: S307 - [bytes, strerror]
    assert written <= sandbox.IO_SIZE and error == "No space left on device", (written, error)
    for attempt in ("write into the io folder", "write the connection file", "remove the connection file",
                    "bind a socket in the io folder"):
        assert "Read-only file system" in seen[attempt][1] or "Permission denied" in seen[attempt][1], seen[attempt]
    result, message = outcome(attacked, "redirector")
    assert "REDIRECT " in message, message
    got = json.loads(message.split("REDIRECT ", 1)[1].split("\n")[0])
    assert got["cut"] >= 1 and got["link"].endswith("host.sock"), got     # the attack was made ...
    assert attacked["connections"] == []                                   # ... and reached nothing of the machine
    assert outcome(attacked, "squatter")[0] == "passed", outcome(attacked, "squatter")
    assert attacked["status"] == 0
    # the notebooks wrote 8 MiB to their kernel's own output: none of it reached the grader's disk
    assert seen["write to the kernel's own output"] == ["ok", str(8 << 20)], seen["write to the kernel's own output"]
    assert attacked["largest"][0] < (1 << 20), attacked["largest"]


def check_limits(attacked):
    """A fork bomb and a memory hog are held by their own limits: the learner graded beside them passes."""
    assert outcome(attacked, "forkbomb_neighbour")[0] == "passed", outcome(attacked, "forkbomb_neighbour")
    assert outcome(attacked, "hog")[0] == "wrong" and "MEMORY MemoryError" in outcome(attacked, "hog")[1]
    assert ("00", "weighted_sum") in attacked["grades"]["forkbomb"]


def check_preboot(attacked):
    """The learner's own `ipykernel_launcher.py` does not run and no configuration file of the learner's folder is
    read (the kernel starts in its empty home folder, with -P), so nothing of the learner's runs before the
    grader's first cell; then the notebook runs in its folder, and its own modules import."""
    result, message = outcome(attacked, "preboot")
    assert "PREBOOT " in message, message
    got = json.loads(message.split("PREBOOT ", 1)[1].split("\n")[0])
    assert got["helper"] == 42, got
    assert "planted-before-boot" not in got["io"], got
    assert got["ran"] is False, got                          # (the kernel starts in its empty home folder)
    assert got["configs"] == [], got                         # no configuration file of the learner's folder is read
    assert got["cwd"] == str(attacked["klass"] / "preboot"), got   # the notebook runs in its folder, as in Jupyter


@pytest.mark.slow
def test_the_class_is_graded_and_the_table_printed(attacked):
    check_graded(attacked)


@pytest.mark.slow
def test_the_sandbox_is_an_allow_list(attacked):
    check_sandbox(attacked, user=os.geteuid())


@pytest.mark.slow
def test_a_fork_bomb_and_a_memory_hog_do_not_fail_the_learner_beside_them(attacked):
    check_limits(attacked)


@pytest.mark.slow
@pytest.mark.parametrize("learner", ["stdout", "hooks", "allclose", "patcher"])
def test_what_the_notebook_prints_hooks_or_patches_changes_no_verdict(attacked, learner):
    """sys.stdout replaced, pre/post_run_cell hooks that forge outcome lines, numpy.allclose (and friends)
    patched, the checks patched in the kernel plus a fake tick: the wrong answer stays wrong."""
    assert outcome(attacked, learner) == outcome(attacked, "wrong"), learner


@pytest.mark.slow
def test_an_input_transformer_that_hides_the_grading_cell_gets_nothing(attacked):
    result, message = outcome(attacked, "transformer")
    assert result == "error" and "kept the grader from reaching its answers" in message, message


@pytest.mark.slow
def test_copied_only_where_certain(attacked):
    """Running the reference is `copied`, in a thread started in an earlier cell too; a notebook that blinds the
    watch (its trace function off, even switched back on; a thread started unwatched or that switches its own off)
    keeps the check's verdict, with a note for the instructor (not a claim of copying). What the watch cannot
    notice: the grader's kernel side patched (the check's own verdict, no note: docs/instructors.md says so)."""
    for learner in ("copier", "earlier_thread"):
        result, message = outcome(attacked, learner)
        assert result == "copied" and "course_utils.numpy_attention.weighted_sum" in message, (learner, message)
    for learner, how in (("blinder", "sys.settrace"), ("toggler", "it called sys.settrace while it was checked"),
                         ("unwatched_thread", "ran without the watch's trace function"),
                         ("thread_trace_off", "a thread of the notebook changed Python's trace function")):
        result, message = outcome(attacked, learner)
        assert result == "passed" and "blinded the grader's watch" in message and how in message, (learner, message)
    assert outcome(attacked, "side_patcher") == ("passed", "✔ weighted sum: correct (4 tests)."), \
        outcome(attacked, "side_patcher")


@pytest.mark.slow
def test_endless_answers_and_cells_are_timeouts_and_an_own_interrupt_is_not(attacked):
    """An answer that loops is interrupted; one that ignores the interrupt is a timeout too (its kernel
    is killed); a cell that ignores interrupts costs its notebook what it did not reach. An answer that
    raises KeyboardInterrupt itself is wrong, and says so."""
    result, message = outcome(attacked, "check_loops")
    assert result == "timeout" and "did not finish within 8 s" in message, message
    result, message = outcome(attacked, "ignores_interrupts")
    assert result == "timeout" and "did not finish within 8 s" in message, message
    result, message = outcome(attacked, "cell_loops")
    assert result == "timeout" and f"ran out of time ({TIMEOUT} s)" in message and "did not stop" in message, message
    result, message = outcome(attacked, "interrupts_itself")
    assert result == "wrong" and "KeyboardInterrupt: I stop here" in message, message


@pytest.mark.slow
def test_a_kernel_that_dies_is_a_grade(attacked):
    """`os._exit()` in a cell: `error`, saying where; the class's exit status stays 0 (docs/instructors.md)."""
    result, message = outcome(attacked, "dies")
    assert result == "error" and "the kernel died in cell 2" in message, message
    assert attacked["status"] == 0


@pytest.mark.slow
def test_links_are_never_followed_out_of_a_learners_folder(attacked):
    grades = attacked["grades"]
    for learner in ("linked", "linknb"):
        result, message = grades[learner][("00", "weighted_sum")]
        assert result == "error" and "is a symbolic link" in message, (learner, message)
    assert grades["linked"].keys() == grades["solved"].keys()                # every lesson of the linked folder
    assert "loops" not in grades or grades["loops"][("00", "weighted_sum")][0] == "error"
    assert re.search(r"note: .*loopdir", attacked["log"]), attacked["log"]


@pytest.mark.slow
def test_names_are_printed_safely(attacked):
    """No escape sequence reaches the terminal, and a name cannot forge a line of the grader's."""
    assert not any(char in attacked["log"] for char in "\x1b\x07\r"), repr(attacked["log"][-2000:])
    assert not any(part.startswith("[1∕1]") for line in attacked["lines"] for part in re.split("[\n\r]", line))
    assert attacked["grades"][one_line(ESCAPED)][("00", "weighted_sum")][0] == "passed"
    assert attacked["grades"][one_line(FORGED)][("00", "weighted_sum")][0] == "wrong"


@pytest.mark.slow
def test_no_code_of_the_learners_folder_runs_before_the_grader(attacked):
    check_preboot(attacked)


@pytest.mark.slow
def test_the_io_folder_is_read_only_and_the_kernels_sockets_are_reached_only_by_descriptor(attacked):
    check_io(attacked)


@pytest.mark.slow
def test_what_a_notebook_sends_the_grader_is_bounded(attacked):
    """A learner's function that floods the judge's socket, and a notebook that sends one message of 3 GiB in
    frames each under zmq's limit: `error`, saying so; the worker outside the sandbox keeps neither."""
    result, message = outcome(attacked, "flood")
    assert result == "error" and "a reply over 64 MiB (refused)" in message, message
    result, message = outcome(attacked, "frames")
    assert result == "error" and "sent the grader more than it keeps" in message, message


@pytest.mark.slow
def test_a_name_that_is_not_utf8_and_an_escaped_message_are_written(attacked):
    result, message = attacked["grades"][one_line(NOT_UTF8)][("00", "weighted_sum")]
    assert result == "wrong" and "cleared\\x1b[2J\\x1b]52" in message and "\\ud800" in message, message
    assert "bytes\\xff\\xfe" in attacked["log"]
