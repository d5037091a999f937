"""The instructor's grader, `python -m course_utils.checks.grading`: the sandbox, the judge, the attacks.

Three kinds of tests, cheapest first:
- without any kernel: the encoding between judge and kernel, which files are graded (and every one
  that is not, with the reason), the CSV (no formulas, no broken rows), refusing to grade without a
  sandbox;
- the judge and the kernel side in this process, over their real socket (no Jupyter): every check of
  every lesson passes its reference through the protocol (functions, classes, course models handed
  to the learner, backward() through a returned tensor), rejects a wrong answer, and a copy of the
  reference in any form is `copied`;
- ONE grading run, in the sandbox, of a class of tiny lesson-00 notebooks (a kernel each, two at a
  time) that attack the grader: stdout replaced, pre/post_run_cell hooks, an input transformer,
  numpy.allclose patched, the package edited on disk, other learners' folders read and written, files
  written outside the submissions, the network, the checks patched in the kernel, a fake tick, the
  reference copied, answers and cells that ignore interrupts; plus one real lesson (08, a class).
Every lesson's solutions and learner notebooks are graded in full by the slow test (RUN_SLOW=1).
"""
import contextlib
import csv
import functools
import hashlib
import inspect
import io
import json
import os
import re
import shutil
import socket
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

import nbformat
import numpy as np
import pytest
import torch

from course_utils import numpy_attention
from course_utils.checks import core, exercises
from course_utils.checks import grading as G
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
        channel = judge.Channel.listen(io_dir, kill=lambda: None)
        server = kernel_side.Server(defined, dict(defined) if user_ns is None else user_ns)
        thread = threading.Thread(target=server.serve, args=(channel.path, channel.token), daemon=True)
        thread.start()
        assert channel.accept(30)
        try:
            yield channel
        finally:
            channel.close()
            thread.join(30)
            judge.set_seed_offset(0)   # (this process's checks draw from their own seeds again)


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


def test_every_check_works_through_the_judge_and_the_kernel_side():
    """Each lesson's references pass, stubs are `not implemented`, and a wrong answer is `wrong`: the
    checks only ever reach the learner's code through the channel (functions, classes and their
    methods, course models handed to the learner, backward() through what it returned). (One fixed seed
    offset: a check may, rarely, draw inputs its own tolerances do not cover.)"""
    problems = []
    for lesson, checks in exercises().items():
        for kind, make, expected in (("reference", lambda r: r, "passed"), ("wrong", _wrong, "wrong"),
                                     ("stub", lambda r: _stub, "not implemented")):
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
        channel = judge.Channel.listen(io_dir, kill=lambda: None)
        server = Forger({"weighted_sum": lambda w, v: w @ v}, {})
        thread = threading.Thread(target=server.serve, args=(channel.path, channel.token), daemon=True)
        thread.start()
        assert channel.accept(30)
        status, message = judge.judge(channel, checks, 60)["weighted_sum"]
        channel.close()
        thread.join(30)
    assert status == "error" and "not data" in message


# ---------------------------------------------------------------------------------------------
# One grading run, in the sandbox: a class of tiny notebooks that attack the grader
# ---------------------------------------------------------------------------------------------
def _notebook(path, *cells):
    path.parent.mkdir(parents=True, exist_ok=True)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(textwrap.dedent(c)) for c in cells])
    nbformat.write(nb, path)
    return path


def _answer(body):
    return "def weighted_sum(weights, vectors):\n" + textwrap.indent(body, "    ")


CHECK = "from course_utils.checks import lesson00 as check\ncheck.weighted_sum(weighted_sum)\n"
SPY = r'''
import json, os, socket, pathlib, subprocess
seen = {}
def attempt(name, action):
    try:
        seen[name] = ["ok", repr(action())[:200]]
    except BaseException as error:
        seen[name] = ["failed", f"{type(error).__name__}: {error}"[:200]]
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
attempt("own folder writable", lambda: (here / "scratch.txt").write_text("x"))
def connect():
    with socket.create_connection(("127.0.0.1", PORT), timeout=3) as s:
        return s.recv(16)
attempt("network", connect)
'''


@pytest.fixture(scope="module")
def attacked(tmp_path_factory):
    """One grading run over a class of lesson-00 notebooks (and one real lesson); (status, grades, log,
    what the spies saw, the TCP server's connections, the class folder, the outside file)."""
    base = tmp_path_factory.mktemp("grading")
    klass = base / "class"
    outside = base / "outside.txt"
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(5)
    listener.settimeout(0.2)
    port, connections, stop = listener.getsockname()[1], [], threading.Event()

    def serve():
        while not stop.is_set():
            with contextlib.suppress(OSError):
                connection, _ = listener.accept()
                connections.append(connection.getpeername())
                connection.sendall(b"secret")
                connection.close()

    threading.Thread(target=serve, daemon=True).start()
    spy = SPY.replace("OUTSIDE", repr(str(outside))).replace("PORT", str(port))
    learners = {
        "solved": [_answer(RIGHT), CHECK],
        "wrong": [_answer(WRONG), CHECK],
        # the lesson imports the reference under the exercise's name after the exercise: the learner's stub counts
        "untouched": [_answer("raise NotImplementedError()\n"), CHECK,
                      "from course_utils.numpy_attention import weighted_sum"],
        "stdout": [_answer(WRONG), """
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
        "hooks": [_answer(WRONG), """
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
        "transformer": [_answer(WRONG), """
            def rewrite(lines):
                text = "".join(lines)
                if "grader" in text or "evaluate(" in text or "serve(" in text:
                    return ["print('✔ weighted sum: correct.')\\n"]
                return lines
            get_ipython().input_transformers_post.append(rewrite)
            """],
        "allclose": [_answer(WRONG), """
            import numpy, torch
            numpy.allclose = lambda *args, **kwargs: True
            numpy.isclose = lambda a, b, *args, **kwargs: numpy.ones(numpy.broadcast(a, b).shape, bool)
            numpy.array_equal = lambda *args, **kwargs: True
            numpy.testing.assert_allclose = lambda *args, **kwargs: None
            torch.allclose = lambda *args, **kwargs: True
            """],
        "patcher": [_answer(WRONG), """
            from course_utils.checks import lesson00 as check, core
            check.expect_close = core.expect_close = lambda *args, **kwargs: None
            core.REGISTRY["00"]["weighted_sum"].evaluate = lambda fn: core.Outcome("00", "weighted_sum",
                "weighted sum", "passed", "✔ weighted sum: correct.")
            """, 'print("✔ weighted sum: correct (4 tests).")'],
        "spy": [spy, _answer("raise RuntimeError('SEEN ' + json.dumps(seen))\n")],
        "copier": ["import course_utils.numpy_attention as na\n",
                   _answer("return na.weighted_sum(weights, vectors)\n")],
        "check_loops": [_answer("while True:\n    pass\n")],
        "ignores_interrupts": [_answer("import time\nwhile True:\n    try:\n        time.sleep(0.05)\n"
                                       "    except KeyboardInterrupt:\n        pass\n")],
        "cell_loops": ["import time\nwhile True:\n    try:\n        time.sleep(0.1)\n    except KeyboardInterrupt:\n"
                       "        pass\n", _answer(RIGHT)],
    }
    for learner, cells in learners.items():
        _notebook(klass / learner / "00_welcome.ipynb", *cells)
    shutil.copy(next((ROOT / "solutions").glob("08_*.ipynb")), klass / "solved")
    package = Path(core.__file__).with_name("lesson00.py")
    before = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in [package, *(klass.rglob("*.ipynb"))]}
    lines, began = [], time.monotonic()
    try:
        status = G.grade([str(klass)], out=str(base / "grades.csv"), log=lines.append, jobs=2, timeout=90,
                         cell_timeout=30, check_timeout=8)
    finally:
        stop.set()
        listener.close()
        if hashlib.sha256(package.read_bytes()).hexdigest() != before[package]:   # (never leave it edited)
            package.write_text(package.read_text().replace("\n# edited by a learner\n", ""))
        with contextlib.suppress(FileNotFoundError):
            package.with_name("lesson00_pwned.py").unlink()
    print(f"graded the class in {time.monotonic() - began:.0f} s")
    grades = _by_learner(_rows(base / "grades.csv"))
    message = grades["spy"][("00", "weighted_sum")][1]
    seen = json.loads(message.split("SEEN ", 1)[1].split("\n")[0]) if "SEEN " in message else {}
    return dict(status=status, grades=grades, log="\n".join(lines), seen=seen, connections=connections,
                klass=klass, outside=outside, before=before)


def _outcome(attacked, learner):
    return attacked["grades"][learner][("00", "weighted_sum")]


def test_the_class_is_graded_and_the_table_printed(attacked):
    assert attacked["status"] == 0, attacked["log"]
    assert re.search(r"^learner\s+00\s+08\s+total$", attacked["log"], re.M), attacked["log"]
    n08 = len(exercises()["08"])
    assert re.search(rf"^solved\s+1/1\s+{n08}/{n08}\s+{1 + n08}/{1 + n08}", attacked["log"], re.M), attacked["log"]


def test_right_wrong_and_untouched_answers(attacked):
    assert _outcome(attacked, "solved") == ("passed", "✔ weighted sum: correct (4 tests).")
    outcome, message = _outcome(attacked, "wrong")
    assert outcome == "wrong" and "you forgot the weights" in message
    outcome, message = _outcome(attacked, "untouched")
    assert outcome == "not implemented" and "not implemented yet" in message


def test_a_real_lesson_with_a_class_exercise_scores_full_marks(attacked):
    for (lesson, exercise), (outcome, message) in attacked["grades"]["solved"].items():
        assert outcome == "passed", f"{lesson}/{exercise}: {message}"


@pytest.mark.parametrize("learner", ["stdout", "hooks", "allclose", "patcher"])
def test_what_the_notebook_prints_hooks_or_patches_changes_no_verdict(attacked, learner):
    """sys.stdout replaced, pre/post_run_cell hooks that forge outcome lines, numpy.allclose (and friends)
    patched, the checks patched in the kernel plus a fake tick: the wrong answer stays wrong."""
    outcome, message = _outcome(attacked, learner)
    assert (outcome, message) == _outcome(attacked, "wrong"), f"{learner}: {outcome}: {message}"


def test_an_input_transformer_that_hides_the_grading_cell_gets_nothing(attacked):
    outcome, message = _outcome(attacked, "transformer")
    assert outcome == "error" and "kept the grader from reaching its answers" in message, message


def test_the_sandbox_keeps_the_package_other_learners_and_the_disk_safe(attacked):
    seen = attacked["seen"]
    assert seen, _outcome(attacked, "spy")
    for attempt in ("read other learner", "write other learner", "delete other learner", "edit the package",
                    "new file in the package"):
        assert seen[attempt][0] == "failed", f"{attempt}: {seen[attempt]}"
    assert seen["list class folder"] == ["ok", "['spy']"]                  # the others are not even listed
    assert seen["own folder writable"][0] == "ok"                           # (a private copy of it)
    for path, digest in attacked["before"].items():                         # nothing changed on the disk ...
        assert hashlib.sha256(path.read_bytes()).hexdigest() == digest, f"{path} was changed"
    klass = attacked["klass"]
    assert not (klass / "planted.txt").exists() and not attacked["outside"].exists()   # ... or was added
    assert not (klass / "spy" / "scratch.txt").exists()
    assert not Path(core.__file__).with_name("lesson00_pwned.py").exists()
    home = Path.home()   # the home folder: empty, but for Python's own folders bound back (read-only)
    python = {p.relative_to(home).parts[0] for p in sandbox.needed_paths() if home in p.parents}
    visible = set(eval(seen["read home"][1])) if seen["read home"][0] == "ok" else set()  # noqa: S307 - a list of names
    assert visible <= python | {".ipython", ".cache", ".config", ".local"}, visible


def test_the_sandbox_has_no_network(attacked):
    assert attacked["seen"]["network"][0] == "failed", attacked["seen"]["network"]
    assert attacked["connections"] == []


def test_a_copy_of_the_reference_earns_nothing(attacked):
    outcome, message = _outcome(attacked, "copier")
    assert outcome == "copied" and "course_utils.numpy_attention.weighted_sum" in message, message


def test_endless_answers_and_cells_are_timeouts(attacked):
    """An answer that loops is interrupted; one that ignores the interrupt is a timeout too (its kernel
    is killed); a cell that ignores interrupts costs its notebook what it did not reach."""
    outcome, message = _outcome(attacked, "check_loops")
    assert outcome == "timeout" and "did not finish within 8 s" in message, message
    outcome, message = _outcome(attacked, "ignores_interrupts")
    assert outcome == "timeout" and "did not finish within 8 s" in message, message
    outcome, message = _outcome(attacked, "cell_loops")
    assert outcome == "timeout" and "ran out of time (90 s)" in message and "did not stop" in message, message


@pytest.mark.slow
def test_every_lesson_solutions_full_marks_learner_notebooks_zero(tmp_path):
    """Every lesson, in the sandbox: the solutions score full marks, the untouched learner notebooks zero
    (several minutes on 2 cores, 2 notebooks at a time)."""
    shutil.copytree(ROOT / "solutions", tmp_path / "solutions", ignore=shutil.ignore_patterns(".*"))
    shutil.copytree(ROOT / "notebooks", tmp_path / "notebooks", ignore=shutil.ignore_patterns(".*"))
    lines = []
    status = G.grade([str(tmp_path)], out=str(tmp_path / "grades.csv"), log=lines.append, jobs=2)
    grades = _by_learner(_rows(tmp_path / "grades.csv"))
    assert status == 0, "\n".join(lines)
    lessons = {n.name[:2] for n in (ROOT / "solutions").glob("[0-9][0-9]_*.ipynb")} & set(G.available_lessons())
    assert {lesson for lesson, _ in grades["solutions"]} == lessons
    for (lesson, exercise), (outcome, message) in grades["solutions"].items():
        assert outcome == "passed", f"{lesson}/{exercise}: {message}"
    for (lesson, exercise), (outcome, message) in grades["notebooks"].items():
        assert outcome == "not implemented", f"{lesson}/{exercise}: {message}"
