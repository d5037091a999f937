"""The grader as a process among others: Ctrl-C ends everything it started, a full disk costs one learner
its grade and no more, it never runs code from the folder it is started in, and what a notebook prints
never piles up in it. Every test grades in the sandbox; those that run kernels are slow (RUN_SLOW=1: the default
run grades one small class end to end, tests/test_grade_class.py)."""
import csv
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from course_utils.checks import grading as G
from course_utils.checks.grading import launch
from tests.test_grade_class import CHECK, RIGHT, WRONG, answer, notebook

ROOT = Path(__file__).resolve().parents[1]
LESSON00 = "course_utils.checks.lesson00"


def _env(**extra):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TMPDIR")}
    return dict(env, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1", **extra)


def _descendants(pid):
    """Every process under `pid` (the pids, as this process sees them)."""
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                parent = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _alive(pid):
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


BACKGROUND = """
import os, subprocess, time
subprocess.Popen(["sleep", "1000"])                  # a child of the kernel
if os.fork() == 0:                                    # a daemon: its own session, its parent gone
    os.setsid()
    if os.fork() == 0:
        time.sleep(1000)
    os._exit(0)
time.sleep(1000)
"""


def _ctrl_c_as_in_a_terminal():
    """The grader's Ctrl-C as in a terminal: a test worker (pytest-xdist's) ignores SIGINT, and a program started
    with SIGINT ignored keeps ignoring it (as under nohup); the grader is started with the default."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.slow
def test_ctrl_c_ends_every_process_and_removes_every_temporary_folder(tmp_path):
    klass, tmpdir = tmp_path / "class", tmp_path / "tmp"
    tmpdir.mkdir()
    for learner in ("alice", "bob"):
        notebook(klass / learner / "00_welcome.ipynb", answer(RIGHT), BACKGROUND)
    grader = subprocess.Popen([sys.executable, "-P", "-m", "course_utils.checks.grading", str(klass), "--out",
                               str(tmp_path / "g.csv"), "--jobs", "2"], env=_env(TMPDIR=str(tmpdir)),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
                              preexec_fn=_ctrl_c_as_in_a_terminal)
    try:
        deadline = time.monotonic() + 240
        while len(list(tmpdir.glob("course-grade-*/kernel.pid"))) < 2 and time.monotonic() < deadline:
            time.sleep(0.5)
        assert len(list(tmpdir.glob("course-grade-*/kernel.pid"))) == 2, "the kernels did not start"
        time.sleep(12)    # (the cells have started their processes)
        started = _descendants(grader.pid)
        assert len(started) >= 10, started     # 2 x (worker, sh/bwrap, sandbox init, kernel, sleep, daemon, ...)
        os.killpg(grader.pid, signal.SIGINT)   # what a terminal does on Ctrl-C
        output, _ = grader.communicate(timeout=240)   # (2 busy cores: the kernels take a while to end)
    finally:
        if grader.poll() is None:
            os.killpg(grader.pid, signal.SIGKILL)
    assert grader.returncode == 130, output
    assert "stopped" in output and "Traceback" not in output, output
    time.sleep(1)
    assert not [pid for pid in started if _alive(pid)], output
    assert not list(tmpdir.iterdir()) and not (tmp_path / "g.csv").exists()


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root, to mount a small file system to fill")
def test_a_full_disk_costs_the_learner_graded_then_their_grade_and_no_more(tmp_path, monkeypatch):
    """The grader's temporary folders on a small file system, filled while alice is graded and emptied
    once her row is written: alice gets `error` (the disk is full), bob his grade, the CSV is written."""
    disk = tmp_path / "disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(disk)], check=True)
    try:
        klass = tmp_path / "class"
        notebook(klass / "alice" / "00_welcome.ipynb", answer(RIGHT), "import time\ntime.sleep(20)\n")
        notebook(klass / "bob" / "00_welcome.ipynb", answer(RIGHT), CHECK)
        monkeypatch.setenv("TMPDIR", str(disk))
        monkeypatch.setattr(tempfile, "tempdir", None)
        filler = disk / "filler"

        def fill():
            deadline = time.monotonic() + 240
            while not list(disk.glob("course-grade-*/kernel.pid")) and time.monotonic() < deadline:
                time.sleep(0.2)
            with open(filler, "wb") as f, pytest.raises(OSError):
                while True:
                    f.write(b"\0" * (1 << 20))
                    f.flush()

        def log(line):
            lines.append(line)
            if line.startswith("[1/2]"):
                filler.unlink()

        lines, thread = [], threading.Thread(target=fill, daemon=True)
        thread.start()
        status = G.grade([str(klass)], out=str(tmp_path / "g.csv"), log=log, jobs=1)
        thread.join(10)
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)
    with open(tmp_path / "g.csv", newline="", encoding="utf-8") as f:
        rows = {r["learner"]: (r["outcome"], r["message"]) for r in csv.DictReader(f)}
    text = "\n".join(lines)
    assert rows["alice"][0] == "error" and "full" in rows["alice"][1], text
    assert rows["bob"][0] == "passed", text
    assert status == 1 and "Traceback" not in text, text


PLANTED = """
import pathlib
pathlib.Path(MARKER).write_text("the learner's course_utils was imported by the grader")
"""


@pytest.mark.slow
def test_the_grader_never_runs_code_from_the_folder_it_is_started_in(tmp_path):
    """Started inside a learner's folder that holds a `course_utils` package of its own, as the docs say
    (`course-grade .`, or `python -P -m course_utils.checks.grading .`): the package is never imported,
    the learner's wrong answer is graded wrong."""
    learner = tmp_path / "mallory"
    marker = tmp_path / "imported.txt"
    notebook(learner / "00_welcome.ipynb", answer(WRONG))
    fake = learner / "course_utils"
    for package in (fake, fake / "checks", fake / "checks" / "grading"):
        package.mkdir(parents=True, exist_ok=True)
        (package / "__init__.py").write_text(PLANTED.replace("MARKER", repr(str(marker))))
    (fake / "checks" / "grading" / "__main__.py").write_text("print('✔ everything passed'); raise SystemExit(0)\n")
    env = {k: v for k, v in _env().items() if k != "PYTHONPATH"}   # (an instructor's shell: no PYTHONPATH)
    script = Path(sys.executable).with_name("course-grade")
    commands = [[sys.executable, "-P", "-m", "course_utils.checks.grading"]]
    commands += [[str(script)]] if script.exists() else []
    for command in commands:
        out = tmp_path / "g.csv"
        done = subprocess.run([*command, ".", "--out", str(out)], cwd=learner, env=env, capture_output=True,
                              text=True, timeout=600)
        assert done.returncode == 0, done.stdout + done.stderr
        assert not marker.exists(), command
        with open(out, newline="", encoding="utf-8") as f:
            (row,) = list(csv.DictReader(f))
        assert row["outcome"] == "wrong", (command, row)


@pytest.mark.slow
def test_what_a_notebook_prints_never_piles_up_in_the_grader(tmp_path):
    """A cell that prints 1 GiB: the worker keeps none of it (its peak memory grows by far less)."""
    import importlib

    checks = list(G.module_checks(importlib.import_module(LESSON00)))
    quiet = notebook(tmp_path / "quiet" / "00_welcome.ipynb", answer(RIGHT))
    loud = notebook(tmp_path / "loud" / "00_welcome.ipynb", answer(RIGHT),
                    "chunk = 'x' * (4 << 20)\nfor _ in range(256):\n    print(chunk)\n")
    peaks = {}
    for path in (quiet, loud):
        sub = G.Submission(path.parent.name, "00", path)
        got = launch.grade_notebook(sub, checks, timeout=300, cell_timeout=280)
        assert [r.outcome for r in got.rows] == ["passed"], got
        peaks[path.parent.name] = got.peak_mib
    assert peaks["loud"] < peaks["quiet"] + 256, peaks   # (1 GiB printed; before, the worker grew by 1.6 GB)


@pytest.mark.slow
def test_withheld_references_never_enter_the_sandbox_and_the_solutions_still_pass(tmp_path):
    """--withhold-references: the kernel's copy of the package has no code of the lesson's references (a
    notebook that prints the reference's source gets the stand-in), and the solutions still score full marks."""
    klass = tmp_path / "class"
    (klass / "solved").mkdir(parents=True)
    for lesson in ("00", "01"):
        notebook_path = next((ROOT / "solutions").glob(f"{lesson}_*.ipynb"))
        (klass / "solved" / notebook_path.name).write_bytes(notebook_path.read_bytes())
    notebook(klass / "reader" / "00_welcome.ipynb", "import inspect, course_utils.numpy_attention as na\n",
             answer("raise RuntimeError('SOURCE ' + inspect.getsource(na.weighted_sum))\n"))
    lines = []
    status = G.grade([str(klass)], out=str(tmp_path / "g.csv"), log=lines.append, jobs=2, withhold_references=True)
    with open(tmp_path / "g.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert status == 0, "\n".join(lines)
    assert all(r["outcome"] == "passed" for r in rows if r["learner"] == "solved"), rows
    (reader,) = [r["message"] for r in rows if r["learner"] == "reader"]
    assert "SOURCE def weighted_sum(*args, **kwargs)" in reader and "weights @ vectors" not in reader, reader


def test_a_long_temporary_folder_keeps_the_sockets_short(tmp_path):
    """A unix socket's path has at most 107 bytes: under a long TMPDIR the io folder (the kernel's and the
    judge's sockets) goes to a short folder of its own, removed afterwards."""
    from course_utils.checks.grading.launch import SOCKET_PATH_MAX, _io_folder

    deep = tmp_path / ("x" * 120)
    deep.mkdir()
    with _io_folder(deep) as io:
        assert io.is_dir() and len(str(io / "judge.sock")) <= SOCKET_PATH_MAX
    assert not io.exists()
    with _io_folder(tmp_path) as io:          # a short one: inside the notebook's temporary folder
        assert io == tmp_path / "io" or len(str(tmp_path / "io" / "judge.sock")) > SOCKET_PATH_MAX
