"""The instructor's grader, `course-grade`: what can be tested without a sandboxed kernel.

- without any kernel: the encoding between judge and kernel, which files are graded (and every one
  that is not, with the reason; links never followed), the CSV (no formulas, no broken rows), safe
  printing, paths never taken for options, refusing to grade without a sandbox, withheld references;
- the judge and the kernel side in this process, over their real socket (no Jupyter): every check of
  every lesson passes its reference through the protocol (functions, classes, course models handed
  to the learner, backward() through a returned tensor), rejects a wrong answer, and a copy of the
  reference in any form is `copied`.
The sandboxed runs: test_grade_class.py (a class of attacks, as the test's user), test_sandbox_user.py (the
same as a normal user), test_grade_process.py (Ctrl-C, a full disk, the working folder, big outputs),
test_grade_clone.py (clones under /tmp and the home folder grade the solutions to full marks),
test_grade_probes.py (lesson 13's "nothing T_q x T_k", measured in the learner's kernel).
"""
import contextlib
import csv
import functools
import inspect
import io
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from course_utils import numpy_attention
from course_utils.checks import exercises
from course_utils.checks import grading as G
from course_utils.checks.grading import channel as channels
from course_utils.checks.grading import judge, kernel_side, sandbox, wire

ROOT = Path(__file__).resolve().parents[1]
RIGHT = "return weights @ vectors\n"
WRONG = "return vectors.sum(axis=0)   # forgets the weights\n"


def _rows(csv_path):
    with open(csv_path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def _by_learner(rows):
    out = {}
    for row in rows:
        out.setdefault(row["learner"], {})[(row["lesson"], row["exercise"])] = (row["outcome"], row["message"])
    return out


# ---------------------------------------------------------------------------------------------
# Without a kernel
# ---------------------------------------------------------------------------------------------
def test_values_cross_as_data_and_come_back_equal():
    value = {"a": (np.arange(6, dtype=np.int16).reshape(2, 3), [1.5, float("nan"), float("-inf")], None),
             "t": torch.randn(2, 3), "b": torch.tensor([True, False]), "h": torch.randn(3).bfloat16(),
             "s": torch.Size([2, 3]), "d": torch.float64, "x": np.float32(2.5), 3: "three", "z": torch.tensor(1.0),
             "slice": slice(1, None, 2), "bytes": b"\x00\x01"}
    back = wire.loads(wire.dumps(value))
    assert back.keys() == value.keys()
    assert isinstance(back["a"], tuple) and np.array_equal(back["a"][0], value["a"][0])
    assert back["a"][0].dtype == np.int16 and np.isnan(back["a"][1][1]) and back["a"][1][2] == float("-inf")
    assert torch.equal(back["t"], value["t"]) and back["b"].dtype == torch.bool
    assert back["h"].dtype == torch.bfloat16 and torch.equal(back["h"], value["h"])   # (as float32 + its dtype)
    assert back["s"] == torch.Size([2, 3]) and back["d"] is torch.float64 and back["z"].shape == ()
    assert isinstance(back["x"], np.float32) and back["slice"] == slice(1, None, 2) and back["bytes"] == b"\x00\x01"


def test_the_judge_refuses_anything_but_data():
    """No pickle from the kernel, no object arrays, nothing untagged: a reply is data or an error."""
    import base64
    import pickle

    evil = {wire.TAG: "pickle", "v": base64.b64encode(pickle.dumps(print)).decode()}
    with pytest.raises(wire.WireError, match="pickled object"):
        wire.from_plain(evil, lambda kind, item: pytest.fail("resolved"))
    buffer = io.BytesIO()
    np.save(buffer, np.array([object()], dtype=object), allow_pickle=True)
    objects = {wire.TAG: "ndarray", "npy": base64.b64encode(buffer.getvalue()).decode()}
    with pytest.raises(wire.WireError):
        wire.from_plain(objects, None)
    for bad in ('{"x": 1}', '{"$": "tensor", "dtype": "not_a_dtype", "npy": ""}', "[1, 2", '{"$": "eval"}'):
        with pytest.raises(wire.WireError):
            wire.loads(bad)
    with pytest.raises(wire.WireError, match="not data"):
        wire.dumps(object())


def test_the_csv_never_holds_a_formula_or_a_broken_row(tmp_path):
    rows = [G.Row("=1+2", "00", "weighted_sum", "passed", "✔"), G.Row("eve\nmallory,x", "00", "weighted_sum",
                                                                       "wrong", "@SUM(A1)\nsecond line"),
            G.Row("+cmd|' /C calc'!A0", "00", "weighted_sum", "error", "-2+3")]
    G.write_csv(rows, tmp_path / "g.csv")
    text = (tmp_path / "g.csv").read_text(encoding="utf-8")
    got = _rows(tmp_path / "g.csv")
    assert [r["learner"] for r in got] == ["'=1+2", "eve\\nmallory,x", "'+cmd|' /C calc'!A0"]
    assert [r["message"] for r in got] == ["✔", "'@SUM(A1)\nsecond line", "'-2+3"]
    assert not any(line.startswith(("=", "+", "-", "@")) for line in text.splitlines())
    table = G.summary_table(rows).splitlines()
    assert len(table) == 4 and any(line.startswith("eve\\nmallory,x") for line in table)


def _touch(path, age=0.0):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{}")
    if age:
        stamp = time.time() - age
        os.utime(path, (stamp, stamp))
    return path


def test_folders_of_learners_and_single_notebooks_are_recognised(tmp_path):
    lessons = G.available_lessons()
    klass = tmp_path / "class"
    _touch(klass / "alice" / "00_welcome.ipynb")
    _touch(klass / "alice" / "03_bahdanau_attention.ipynb", age=100)
    newest = _touch(klass / "alice" / "03_bahdanau_attention-Copy1.ipynb")
    _touch(klass / "bob" / "01_attention_from_scratch.ipynb")
    (klass / "carol").mkdir()  # nothing handed in yet
    single = _touch(tmp_path / "dave" / "07_self_attention.ipynb")
    found, notes, problems = G.find_submissions([str(klass), str(single)], lessons)
    assert [(s.learner, s.lesson) for s in found] == [("alice", "00"), ("alice", "03"), ("bob", "01"), ("dave", "07")]
    assert found[1].path == newest and "several notebooks for lesson 03" in notes[0]
    assert not problems


def test_every_notebook_not_graded_is_named_with_the_reason(tmp_path):
    """A hidden learner folder, a notebook in a sub-folder, odd names, a lesson without checks: each one
    is named in a note (none is skipped silently); `00_Welcome.IPYNB` is a lesson notebook."""
    lessons = G.available_lessons()
    klass = tmp_path / "class"
    upper = _touch(klass / "alice" / "00_Welcome.IPYNB")
    _touch(klass / "alice" / "old" / "01_attention_from_scratch.ipynb")
    _touch(klass / "alice" / "scratch.ipynb")
    _touch(klass / "alice" / "99_extra.ipynb")
    _touch(klass / "alice" / ".ipynb_checkpoints" / "00_welcome-checkpoint.ipynb")
    _touch(klass / ".bob" / "00_welcome.ipynb")
    _touch(klass / "notes.ipynb")
    found, notes, problems = G.find_submissions([str(klass)], lessons)
    assert [(s.learner, s.lesson, s.path) for s in found] == [("alice", "00", upper)] and not problems
    text = "\n".join(notes)
    expected = {os.path.join(".bob", "00_welcome.ipynb"): "hidden folder '.bob'",
                os.path.join("alice", ".ipynb_checkpoints", "00_welcome-checkpoint.ipynb"): "hidden folder",
                os.path.join("alice", "old", "01_attention_from_scratch.ipynb"): "in a sub-folder",
                os.path.join("alice", "scratch.ipynb"): "not named NN_*.ipynb",
                os.path.join("alice", "99_extra.ipynb"): "lesson 99 has no checks",
                "notes.ipynb": "in a sub-folder, not directly in a learner's folder"}
    for name, reason in expected.items():
        line = next((n for n in notes if re.search(rf"[:,] {re.escape(name)}(,|$)", n)), None)
        assert line is not None and reason in line, f"{name}: {reason}\n{text}"


def test_arguments_that_are_not_lesson_notebooks_exit_2(tmp_path):
    lessons = G.available_lessons()
    other = _touch(tmp_path / "alice" / "scratch.ipynb")
    unknown = _touch(tmp_path / "alice" / "99_extra.ipynb")
    (tmp_path / "empty").mkdir()
    _, _, problems = G.find_submissions([str(other), str(unknown), str(tmp_path / "empty"),
                                         str(tmp_path / "nowhere")], lessons)
    assert [p.split(": ", 1)[1] for p in problems] == [
        f"not a lesson notebook (expected a file named NN_*.ipynb, NN one of {', '.join(lessons)})"] * 2 + [
        f"no lesson notebooks (NN_*.ipynb, NN one of {', '.join(lessons)}) in it or in its sub-folders",
        "no such file or folder"]
    lines = []
    assert G.grade([str(other)], out=str(tmp_path / "g.csv"), log=lines.append) == 2
    assert not (tmp_path / "g.csv").exists() and "not a lesson notebook" in lines[-1]


def test_an_unreadable_notebook_is_reported_and_exits_2(tmp_path):
    (tmp_path / "erin").mkdir()
    (tmp_path / "erin" / "00_welcome.ipynb").write_text("this is not JSON")
    lines = []
    assert G.grade([str(tmp_path / "erin")], out=str(tmp_path / "g.csv"), log=lines.append) == 2
    rows = _rows(tmp_path / "g.csv")
    assert [(r["learner"], r["lesson"], r["exercise"], r["outcome"]) for r in rows] == [
        ("erin", "00", "weighted_sum", "error")]
    assert rows[0]["message"].startswith("could not read the notebook")


def test_without_a_sandbox_the_grader_refuses_unless_told(tmp_path, monkeypatch):
    (tmp_path / "erin").mkdir()
    (tmp_path / "erin" / "00_welcome.ipynb").write_text("this is not JSON")   # (never reaches a kernel)
    monkeypatch.setattr(sandbox, "unavailable", lambda: "bubblewrap (`bwrap`) is not installed")
    lines = []
    assert G.grade([str(tmp_path / "erin")], out=str(tmp_path / "g.csv"), log=lines.append) == 2
    assert "no sandbox: bubblewrap (`bwrap`) is not installed" in lines[0] and "--no-sandbox" in lines[0]
    assert not (tmp_path / "g.csv").exists()
    lines = []
    assert G.grade([str(tmp_path / "erin")], out=str(tmp_path / "g.csv"), log=lines.append, sandboxed=False) == 2
    assert lines[0].startswith("warning: --no-sandbox") and (tmp_path / "g.csv").exists()


def test_the_sandbox_starts_here():
    """CI installs bubblewrap (.ci/install_sandbox.sh): the grader's tests run WITH the sandbox."""
    assert sandbox.unavailable() is None


def test_a_sandbox_the_grader_cannot_reach_from_outside_is_no_sandbox(monkeypatch):
    """The grader reaches the kernel's sockets through /proc/<pid>/root of the sandbox: where it cannot (e.g. a
    security module forbids it), it refuses to grade, saying why."""
    real = os.open

    def refused(path, *args, **kwargs):
        if str(path).startswith("/proc/") and str(path).endswith("/root"):
            raise PermissionError(13, "Permission denied")
        return real(path, *args, **kwargs)

    monkeypatch.setattr(sandbox.os, "open", refused)
    problem = sandbox.unavailable()
    assert problem and "cannot reach its sandbox's files from outside" in problem, problem
    monkeypatch.undo()
    assert sandbox.unavailable() is None


def test_the_io_folder_is_bound_read_only_and_the_kernel_starts_in_its_home(tmp_path):
    """The sandbox binds its io folder (connection file, judge's socket) read-only, gives the kernel's sockets a
    folder of its own memory (IO, IO_SIZE at most), reports its child's pid (--info-fd 3, opened by `start`) and
    starts the kernel in its empty home folder."""
    box = sandbox.Sandbox(folder=tmp_path / "alice", submission=tmp_path / "submission", package=ROOT,
                          io_dir=tmp_path / "io", etc_dir=tmp_path / "etc", info_file=tmp_path / "bwrap.json")
    argv = sandbox.wrap([sys.executable, "-m", "ipykernel_launcher"], box)
    pairs = list(zip(argv, argv[1:], argv[2:]))
    assert ("--ro-bind", str(box.io_dir), str(box.io_dir)) in pairs
    assert not any(a in ("--bind", "--bind-try") and b == str(box.io_dir) for a, b, _ in pairs)
    at = argv.index(sandbox.IO)
    assert argv[at - 1] == "--tmpfs" and argv[at - 3:at - 1] == ["--size", str(sandbox.IO_SIZE)]
    assert argv[argv.index("--chdir") + 1] == sandbox.HOME and argv[argv.index("--info-fd") + 1] == "3"
    assert sandbox.start(box)[-1] == str(box.info_file) and '3>"$info"' in sandbox.start(box)[2]


def test_a_socket_is_pinned_by_descriptor_and_a_link_in_its_place_is_refused(tmp_path):
    """The grader holds each of the kernel's sockets by an O_PATH descriptor: connecting to /proc/self/fd/N reaches
    that socket after it was renamed and a link put in its place; a link (which, reached through the sandbox's
    root, would be followed in the grader's own root) or a file is refused; a missing one is not there yet."""
    def serve(path):
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(path))
        server.listen(5)
        return server

    kernel, machine = serve(tmp_path / "k-1"), serve(tmp_path / "machine.sock")
    folder = os.open(tmp_path, os.O_PATH | os.O_DIRECTORY)
    try:
        assert sandbox.pin_socket(folder, "k-2") is None
        pinned = sandbox.pin_socket(folder, "k-1")
        os.rename(tmp_path / "k-1", tmp_path / "k-1.moved")
        os.symlink(tmp_path / "machine.sock", tmp_path / "k-1")
        os.symlink(f"/proc/self/fd/{pinned}", tmp_path / "link-k-1")   # (how the worker names it to zmq)
        for path in (f"/proc/self/fd/{pinned}", str(tmp_path / "link-k-1")):
            with socket.socket(socket.AF_UNIX) as client:
                client.connect(path)
            kernel.settimeout(5)
            kernel.accept()[0].close()
        machine.settimeout(0.2)
        with pytest.raises(OSError):
            machine.accept()                    # (nothing reached the machine's socket)
        with pytest.raises(RuntimeError, match="not a socket"):
            sandbox.pin_socket(folder, "k-1")   # the link
        (tmp_path / "k-3").write_text("")
        with pytest.raises(RuntimeError, match="not a socket"):
            sandbox.pin_socket(folder, "k-3")
        os.close(pinned)
    finally:
        os.close(folder)
        kernel.close()
        machine.close()


def test_a_check_quoting_a_lone_surrogate_ends_and_shows_it_in_jupyter(tmp_path):
    """An answer that raises `ValueError("\\ud800")`: the check cell, in a plain kernel (as in JupyterLab), ends
    with the check's message, the surrogate written `\\ud800`. (Jupyter's messages cannot carry a lone surrogate:
    the kernel used to lose the cell's reply, and the cell never ended.)"""
    import nbformat

    from course_utils.notebook_client import SteadyNotebookClient as NotebookClient

    cells = ["def weighted_sum(weights, vectors):\n    raise ValueError('\\ud800')\n",
             "from course_utils.checks import lesson00 as check\ncheck.weighted_sum(weighted_sum)\n",
             "print('after')\n"]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    env = dict(os.environ, COURSE_PROGRESS="off", PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    began = time.monotonic()
    NotebookClient(nb, timeout=60, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(tmp_path)}}).execute(env=env)
    assert time.monotonic() - began < 50
    (error,) = [o for o in nb.cells[1].outputs if o["output_type"] == "error"]
    assert "your function raised ValueError: \\ud800" in error["evalue"], error
    assert [o["text"] for o in nb.cells[2].outputs] == ["after\n"]


def test_the_sandboxs_root_is_reached_only_while_it_is_the_sandboxs():
    """open_io refuses a process that is not the one bubblewrap reported (another mount namespace: its pid was
    reused), and waits (None) while the sandbox's folder IO is not there yet."""
    own = {"child-pid": os.getpid(), "mnt-namespace": os.stat("/proc/self/ns/mnt").st_ino}
    with pytest.raises(RuntimeError, match="ended"):
        sandbox.open_io(dict(own, **{"mnt-namespace": own["mnt-namespace"] + 1}))
    if not os.path.exists(sandbox.IO):
        assert sandbox.open_io(own) is None
    assert sandbox.read_info("/nonexistent/bwrap.json") is None


def test_summary_table_has_learners_down_lessons_across_and_totals():
    rows = [G.Row("alice", "00", "a", "passed", ""), G.Row("alice", "01", "b", "wrong", ""),
            G.Row("alice", "01", "c", "passed", ""), G.Row("bob", "01", "b", "timeout", "")]
    assert G.summary_table(rows).splitlines() == [
        "learner     00     01    total",
        "alice      1/1    1/2    2/3  ",
        "bob          -    0/1    0/1  ",
    ]


# ---------------------------------------------------------------------------------------------
# The judge and the kernel side, in this process, over their socket
# ---------------------------------------------------------------------------------------------
@contextlib.contextmanager
def _served(defined, user_ns=None):
    """A judge's channel to a kernel side serving `defined` (the notebook's answers) from a thread."""
    with tempfile.TemporaryDirectory() as io_dir:
        channel = channels.Channel.listen(io_dir, kill=lambda: None)
        server = kernel_side.Server(defined, dict(defined) if user_ns is None else user_ns)
        thread = threading.Thread(target=server.serve, args=(channel.path, channel.token), daemon=True)
        thread.start()
        assert channel.accept(30)
        try:
            yield channel
        finally:
            channel.close()
            thread.join(30)


def _perturbed(value):
    """A wrong answer's output: every number moved, every mask flipped."""
    if isinstance(value, (tuple, list)):
        return type(value)(_perturbed(v) for v in value)
    if isinstance(value, torch.Tensor):
        if value.dtype == torch.bool:
            return ~value
        return value * 1.5 + 0.25 if value.is_floating_point() else value + 1
    if isinstance(value, np.ndarray):
        return ~value if value.dtype == bool else value * 1.5 + 0.25
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value * 1.5 + 0.25
    return value


def _wrong(reference):
    if inspect.isclass(reference):
        class Wrong(reference):
            def forward(self, *args, **kwargs):
                return _perturbed(super().forward(*args, **kwargs))
        return Wrong
    return lambda *args, **kwargs: _perturbed(reference(*args, **kwargs))


def _stub(*args, **kwargs):
    raise NotImplementedError()


KINDS = {"reference": (lambda r: r, "passed"), "wrong": (lambda r: _wrong(r), "wrong"),
         "stub": (lambda r: _stub, "not implemented")}


@pytest.mark.parametrize(("lessons", "kinds"), [
    (None, ("reference",)), (("01", "08"), ("wrong", "stub")),
    pytest.param(None, ("wrong", "stub"), marks=pytest.mark.slow)],
    ids=["every reference", "functions and a class wrong", "every lesson wrong"])
def test_every_check_works_through_the_judge_and_the_kernel_side(lessons, kinds):
    """Each lesson's references pass, stubs are `not implemented`, and a wrong answer is `wrong`: the
    checks only ever reach the learner's code through the channel (functions, classes and their
    methods, course models handed to the learner, backward() through what it returned, the source text of
    a function whose code a check reads). (One fixed seed offset: a check may, rarely, draw inputs its own
    tolerances do not cover.) Default run: every exercise's reference (an exercise whose check cannot work
    outside the learner's kernel would be wrong for every learner), and wrong answers and stubs for lessons
    01 and 08 (functions; a class); wrong answers and stubs of every lesson are the slow test."""
    problems = []
    for lesson, checks in exercises().items():
        if lessons is not None and lesson not in lessons:
            continue
        for kind in kinds:
            make, expected = KINDS[kind]
            answers = {c.learner_name: make(c.reference) for c in checks}
            with _served(answers) as channel:
                outcomes = judge.judge(channel, checks, check_timeout=120, offset=1000, watch=False)
            problems += [f"{lesson}/{exercise} ({kind}): {status}: {message[:300]}"
                         for exercise, (status, message) in outcomes.items() if status != expected]
    assert not problems, "\n".join(problems)


def test_the_inputs_come_from_seeds_the_notebook_cannot_know():
    """A table of answers recorded from the reference at the notebook's seeds fails at the judge's."""
    seen = {}

    def record(weights, vectors):
        seen.setdefault("calls", []).append(weights.tobytes())
        return weights @ vectors

    checks = exercises()["00"]
    with _served({"weighted_sum": record}) as channel:
        assert judge.judge(channel, checks, 60)["weighted_sum"][0] == "passed"
    with _served({"weighted_sum": record}) as channel:
        judge.judge(channel, checks, 60)
    first, second = seen["calls"][:4], seen["calls"][4:]
    assert len(second) == 4 and not set(first) & set(second)          # two gradings, two sets of inputs
    at_notebook_seeds = {np.random.default_rng(seed).random(T).tobytes() for seed, T in enumerate([4, 6, 1, 7])}
    assert not at_notebook_seeds & set(first + second)                # neither is the notebook's


def test_an_answer_that_runs_the_reference_is_copied_in_every_form(tmp_path):
    """Policy: an answer that runs the package's reference for its exercise earns nothing, however it
    reaches it; a name bound straight to the course's object is not an answer at all (`missing`)."""
    ref = numpy_attention.weighted_sum
    source = Path(numpy_attention.__file__)
    reloaded = {}
    exec(compile(source.read_text(), str(source), "exec"), reloaded)  # a fresh copy of the module

    def in_a_thread(weights, vectors):
        out = {}
        worker = threading.Thread(target=lambda: out.setdefault("z", ref(weights, vectors)))
        worker.start()
        worker.join()
        return out["z"]

    def swallowed(weights, vectors):
        try:
            ref(weights[:1], vectors[:1])
        except BaseException:  # noqa: BLE001 - hides nothing from the watch
            pass
        return weights @ vectors

    alias = ref
    forms = {
        "wrapper": lambda weights, vectors: ref(weights, vectors),
        "partial": functools.partial(ref),
        "alias": lambda weights, vectors: alias(weights, vectors),
        "module attribute": lambda weights, vectors: sys.modules["course_utils.numpy_attention"].weighted_sum(
            weights, vectors),
        "reloaded module": lambda weights, vectors: reloaded["weighted_sum"](weights, vectors),
        "thread": in_a_thread,
        "called and caught": swallowed,
    }
    checks = exercises()["00"]
    for form, answer in forms.items():
        with _served({"weighted_sum": answer}) as channel:
            status, message = judge.judge(channel, checks, 60)["weighted_sum"]
        assert status == "copied", f"{form}: {status}: {message}"
        assert "course_utils.numpy_attention.weighted_sum" in message and "earns nothing" in message
    with _served({}, {"weighted_sum": ref}) as channel:   # `from course_utils.numpy_attention import weighted_sum`
        status, message = judge.judge(channel, checks, 60)["weighted_sum"]
    assert status == "missing" and "course's reference imported from course_utils.numpy_attention" in message
    with _served({"weighted_sum": lambda weights, vectors: weights @ vectors}) as channel:
        assert judge.judge(channel, checks, 60)["weighted_sum"][0] == "passed"


def test_an_input_changed_in_place_in_the_kernel_is_seen_by_the_check():
    def scaled_in_place(weights, vectors):
        weights *= 2
        return weights @ vectors / 2

    with _served({"weighted_sum": scaled_in_place}) as channel:
        status, message = judge.judge(channel, exercises()["00"], 60)["weighted_sum"]
    assert status == "wrong" and "changed its input `weights` in place" in message, message


def test_nothing_the_kernel_sends_is_trusted():
    """Whatever the kernel's side replies (a forged verdict, a pickle, garbage), the judge only reads data."""
    checks = exercises()["00"]

    class Forger(kernel_side.Server):
        def reply(self, request):
            if request.get("op") == "call":
                return json.dumps({"ok": {wire.TAG: "pickle", "v": "gASVAAAAAAAAAAA="}, "status": "passed",
                                   "outcome": ["passed", "✔ weighted sum: correct."]})
            return super().reply(request)

    with tempfile.TemporaryDirectory() as io_dir:
        channel = channels.Channel.listen(io_dir, kill=lambda: None)
        server = Forger({"weighted_sum": lambda w, v: w @ v}, {})
        thread = threading.Thread(target=server.serve, args=(channel.path, channel.token), daemon=True)
        thread.start()
        assert channel.accept(30)
        status, message = judge.judge(channel, checks, 60)["weighted_sum"]
        channel.close()
        thread.join(30)
    assert status == "error" and "not data" in message


def test_a_reply_over_the_limit_is_refused_unkept_and_the_kernel_stopped():
    """A kernel that floods the judge's socket (a learner's function writing into it) cannot make the worker
    grow: past REPLY_LIMIT the judge stops reading, drops what it read and stops the kernel; `error`."""
    checks = exercises()["00"]
    killed = []

    class Flooder(kernel_side.Server):
        def reply(self, request):
            if request.get("op") == "call":
                return "[" + "0," * ((channels.REPLY_LIMIT >> 1) + (1 << 20)) + "0]"
            return super().reply(request)

    with tempfile.TemporaryDirectory() as io_dir:
        channel = channels.Channel.listen(io_dir, kill=lambda: killed.append(True))
        server = Flooder({"weighted_sum": lambda w, v: w @ v}, {})

        def serve():
            with contextlib.suppress(OSError):   # (the judge hangs up on it)
                server.serve(channel.path, channel.token)

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        assert channel.accept(30)
        status, message = judge.judge(channel, checks, 60)["weighted_sum"]
        kept = len(channel.buffer)
        channel.close()
        thread.join(30)
    assert status == "error" and "reply over 64 MiB (refused)" in message and killed, message
    assert kept < (1 << 20)


def test_a_token_line_over_the_limit_is_no_connection():
    with tempfile.TemporaryDirectory() as io_dir:
        channel = channels.Channel.listen(io_dir, kill=lambda: None)

        def flood():
            with socket.socket(socket.AF_UNIX) as s:
                s.connect(channel.path)
                with contextlib.suppress(OSError):
                    s.sendall(b"x" * (channels.REPLY_LIMIT + (2 << 20)))

        thread = threading.Thread(target=flood, daemon=True)
        thread.start()
        assert channel.accept(30) is False
        channel.close()
        thread.join(30)


def test_a_name_that_is_not_utf8_and_a_message_with_escapes_are_written_safely(tmp_path):
    """A learner folder whose name is not UTF-8 (b"\\xff"), and an exception message carrying terminal escapes
    and a lone surrogate: the CSV is written (before: UnicodeEncodeError, no CSV for the class), the printed
    lines carry neither."""
    from course_utils.checks.grading.report import printable

    name = os.fsdecode(b"bad\xff\xfename")
    message = "raised ValueError: \x1b]52;c;cHduZWQ=\x07\x1b[2J \ud800\nline 2"
    rows = [G.Row(name, "00", "weighted_sum", "wrong", message)]
    G.write_csv(rows, tmp_path / "g.csv")
    got = _rows(tmp_path / "g.csv")[0]
    assert got["learner"] == "bad\\xff\\xfename"
    assert "\x1b" not in got["message"] and "\x07" not in got["message"] and "\\x1b]52" in got["message"]
    assert "\\ud800" in got["message"] and "\nline 2" in got["message"]   # (line breaks kept)
    shown = printable(f"error: {name}: " + G.summary_table(rows))
    shown.encode("utf-8")   # (no lone surrogate: printing it cannot fail)
    assert "bad\\xff\\xfename" in shown


# ---------------------------------------------------------------------------------------------
# Paths, links and names: whatever a submission is, the class is graded
# ---------------------------------------------------------------------------------------------
def test_a_path_is_never_taken_for_an_option(tmp_path, monkeypatch, capsys):
    """`course-grade *` in a class folder holding a learner folder named --no-sandbox: refused, nothing
    graded, the sandbox never turned off; after `--` it is a path like any other."""
    from course_utils.checks.grading import command

    (tmp_path / "--no-sandbox").mkdir()
    (tmp_path / "alice").mkdir()
    monkeypatch.chdir(tmp_path)
    graded = []
    monkeypatch.setattr(command, "grade", lambda *args, **kwargs: graded.append((args, kwargs)) or 0)
    assert command.main(sorted(os.listdir("."))) == 2
    assert "'--no-sandbox' is an option of the grader AND a file or folder here" in capsys.readouterr().err
    assert not graded
    assert command.main(["--", "--no-sandbox", "alice"]) == 0
    assert graded[0][0][0] == ["--no-sandbox", "alice"] and graded[0][1]["sandboxed"] is True


@pytest.mark.parametrize("name", ["--timeout=1", "--out=stolen.csv", "--jobs=64", "--no-sand"])
def test_a_path_with_an_options_value_is_never_taken_for_an_option(tmp_path, monkeypatch, capsys, name):
    """A learner folder named `--timeout=1` would give every notebook of the class one second (and
    `--out=...` would move the CSV): refused like `--no-sandbox`, with the same advice."""
    from course_utils.checks.grading import command

    (tmp_path / name).mkdir()
    (tmp_path / "alice").mkdir()
    monkeypatch.chdir(tmp_path)
    graded = []
    monkeypatch.setattr(command, "grade", lambda *args, **kwargs: graded.append((args, kwargs)) or 0)
    assert command.main(sorted(os.listdir("."))) == 2
    assert f"{name!r} is an option of the grader AND a file or folder here" in capsys.readouterr().err
    assert not graded
    assert command.main(["--", name, "alice"]) == 0
    args, kwargs = graded[0]
    assert args[:3] == ([name, "alice"], "grades.csv", 600) and kwargs["sandboxed"] is True


def test_links_in_a_class_folder_are_graded_error_and_loops_never_stop_it(tmp_path):
    lessons = G.available_lessons()
    klass = tmp_path / "class"
    alice = _touch(klass / "alice" / "00_welcome.ipynb")
    (klass / "mallory").symlink_to(klass / "alice", target_is_directory=True)
    (klass / "eve").mkdir()
    (klass / "eve" / "00_welcome.ipynb").symlink_to(alice)
    (klass / "eve" / "01_attention_from_scratch.ipynb").symlink_to("01_attention_from_scratch.ipynb")   # a loop
    (klass / "trudy").symlink_to("trudy")                                                                 # a loop
    (klass / "alice" / "sub").symlink_to(klass / "alice", target_is_directory=True)
    found, notes, problems = G.find_submissions([str(klass)], lessons)
    assert not problems
    got = {(s.learner, s.lesson): s.problem for s in found}
    assert got[("alice", "00")] is None
    assert "the learner's folder mallory is a symbolic link" in got[("mallory", "00")]
    assert "the notebook 00_welcome.ipynb is a symbolic link (to " in got[("eve", "00")]
    assert "is a symbolic link (to 01_attention_from_scratch.ipynb)" in got[("eve", "01")]
    assert any("trudy" in note for note in notes) and any("sub" in note for note in notes), notes
    lines = []
    assert G.grade([str(klass / "eve")], out=str(tmp_path / "g.csv"), log=lines.append) == 0   # (no kernel runs)
    rows = _rows(tmp_path / "g.csv")
    assert {r["outcome"] for r in rows} == {"error"} and all("symbolic link" in r["message"] for r in rows)


def test_printed_names_carry_no_control_characters():
    from course_utils.checks.grading.report import printable

    assert printable("a\x1b]52;c;x\x07b\nc\rd\u202ee") == "a\\x1b]52;c;x\\x07b\\x0ac\\x0dd\\u202ee"
    assert printable("élève ∕ 学生") == "élève ∕ 学生"


def test_a_result_file_that_is_empty_or_cut_is_no_result(tmp_path):
    """A full disk leaves an empty or cut result file: the notebook is `error`, never a traceback."""
    from course_utils.checks.grading import launch

    for text in ("", '{"outcomes": {"a": ["pa', "[]"):
        (tmp_path / "result.json").write_text(text)
        assert launch._read_result(tmp_path / "result.json") is None


def test_withheld_references_are_not_in_the_kernels_copy_and_the_lesson_goes_on(tmp_path):
    """--withhold-references: the lesson's references give way to the learner's own answers; its check module
    holds no reference and no mistake; the other lessons' references stay."""
    import importlib

    from course_utils.checks.grading import withhold

    source = tmp_path / "grader"
    shutil.copytree(Path(numpy_attention.__file__).parent, source / "course_utils",
                    ignore=shutil.ignore_patterns("__pycache__"))
    checks = list(G.module_checks(importlib.import_module("course_utils.checks.lesson01")))
    copy = withhold.kernel_copy(source, "01", checks, tmp_path / "kernel")
    text = (copy / "course_utils" / "numpy_attention.py").read_text()
    assert "_course_grader_own_answer('softmax', 'course_utils.numpy_attention.softmax')" in text
    assert "np.exp(" not in text.split("def softmax", 1)[1].split("\ndef ", 1)[0]
    assert "WithheldCheck('01', 'softmax'" in (copy / "course_utils" / "checks" / "lesson01.py").read_text()
    assert (copy / "course_utils" / "scores.py").read_text() == (source / "course_utils" / "scores.py").read_text()
    program = ("import sys, numpy as np\n"
               "import course_utils.numpy_attention as na\n"
               "from course_utils.checks import lesson01 as check\n"
               "try:\n    na.softmax(np.zeros(3))\nexcept NotImplementedError as e:\n    print('NI', e)\n"
               "def softmax(x):\n    return np.full_like(x, 7.0)\n"
               "print('OWN', na.softmax(np.zeros(2)).tolist())\n"
               "check.softmax(softmax)\n")
    out = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, cwd=tmp_path,
                         env=dict(os.environ, PYTHONPATH=str(copy)))
    assert out.returncode == 0, out.stderr
    assert "NI course_utils.numpy_attention.softmax is withheld by your instructor" in out.stdout
    assert "OWN [7.0, 7.0]" in out.stdout and "checked by your instructor's grader" in out.stdout
    # in a kernel (IPython), as a lesson does it: the exercise, then the course's name imported over the learner's
    cells = ["import numpy as np\nfrom course_utils.checks import lesson01 as check",
             "def softmax(x):\n    return np.full_like(x, 7.0)", "check.softmax.strict(softmax)",
             "from course_utils.numpy_attention import softmax", "print('AFTER', softmax(np.zeros(2)).tolist())"]
    program = ("from IPython.core.interactiveshell import InteractiveShell\nshell = InteractiveShell.instance()\n"
               f"for cell in {cells!r}:\n    assert shell.run_cell(cell).success, cell\n")
    out = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, cwd=tmp_path,
                         env=dict(os.environ, PYTHONPATH=str(copy)))
    assert out.returncode == 0 and "AFTER [7.0, 7.0]" in out.stdout, out.stdout + out.stderr


def test_the_grader_cells_are_calls_of_module_code(tmp_path):
    """The grader's two cells only call `kernel_side`, loaded by path (what the linter and these tests see):
    the first keeps what the notebook defines under the exercises' names, the last serves the judge."""
    import ast
    import importlib
    import types

    from course_utils.checks.grading import worker

    class Shell:
        def __init__(self):
            self.user_ns, self.hooks = {}, []
            self.events = types.SimpleNamespace(register=lambda event, hook: self.hooks.append(hook))

    store, shell = "_course_grader_test_store", Shell()
    cell = worker.boot_cell(store, ["weighted_sum"])
    assert len(ast.parse(cell).body) <= 6 and "\n" not in cell.strip()
    try:
        exec(cell, {"get_ipython": lambda: shell})   # noqa: S102 - the grader's own cell
        side = sys.modules[store]
        assert side.__file__ == str(Path(kernel_side.__file__)) and side.wire is not wire   # (its own copy)
        shell.user_ns["weighted_sum"] = types.FunctionType((lambda w, v: w @ v).__code__, {"__name__": "__main__"})
        shell.user_ns["weighted_sum"].__module__ = "__main__"
        for hook in shell.hooks:
            hook(None)
        assert side.defined == {"weighted_sum": shell.user_ns["weighted_sum"]}
        with tempfile.TemporaryDirectory() as io_dir:
            channel = channels.Channel.listen(io_dir, kill=lambda: None)
            serve = worker.serve_cell(store, channel.path, channel.token)
            thread = threading.Thread(target=exec, args=(serve, {"get_ipython": lambda: shell}), daemon=True)
            thread.start()
            assert channel.accept(30)
            checks = list(G.module_checks(importlib.import_module("course_utils.checks.lesson00")))
            assert judge.judge(channel, checks, 60)["weighted_sum"][0] == "passed"
            channel.close()
            thread.join(30)
    finally:
        sys.modules.pop(store, None)
        threading.settrace(None)   # (boot gave this process's new threads the watch; its audit hook stays, idle)
