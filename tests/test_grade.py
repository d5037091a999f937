"""The instructor's grader, `python -m course_utils.grade`, on copies of the course's notebooks.

Notebooks are executed for real (fast mode, `--jobs 2`), so these tests are chosen to be few:
- one class of learners (lessons 07 and 08: names the lesson later rebinds to the course's reference,
  a class exercise, a check whose learner name differs from its own): the solutions score full marks,
  the untouched learner notebooks score zero with "not implemented", a planted wrong answer (plus
  checks patched in the kernel) loses exactly that exercise with the check's message, and a check
  cell replaced by `print("✔ ...")` or deleted changes nothing;
- one run with short time limits: an endless loop in an answer, and a cell that ignores interrupts,
  are cut, and the other notebook is graded;
- every lesson's solution and learner notebook (RUN_SLOW=1);
- how files and folders are recognised, and bad arguments, without any kernel.
"""
import csv
import os
import re
import shutil
import textwrap
import time
from pathlib import Path

import nbformat
import pytest

from course_utils import grade as G
from course_utils.checks import core

ROOT = Path(__file__).resolve().parents[1]
OPTIONS = dict(jobs=2, timeout=600, cell_timeout=300, check_timeout=60)


def _lesson_file(folder, lesson):
    return next((ROOT / folder).glob(f"{lesson}_*.ipynb"))


def _copy(folder, lesson, learner_dir):
    learner_dir.mkdir(parents=True, exist_ok=True)
    return Path(shutil.copy(_lesson_file(folder, lesson), learner_dir))


def _edit(path, change):
    nb = nbformat.read(path, as_version=4)
    change(nb)
    nbformat.write(nb, path)


def _answer_cell(nb, name):
    for cell in nb.cells:
        if cell.cell_type == "code" and re.search(rf"^(def|class) {name}\b", cell.source, re.M):
            return cell
    raise AssertionError(f"no cell defines {name}")


def _replace_answer(nb, name, body):
    """Put `body` where the solution of the exercise `name` is (between the nbgrader markers)."""
    cell = _answer_cell(nb, name)
    cell.source, count = re.subn(r"( *)### BEGIN SOLUTION\n.*?### END SOLUTION",
                                 lambda m: textwrap.indent(body, m.group(1)), cell.source, flags=re.S)
    assert count == 1, f"no solution markers in the cell of {name}"


def _check_cell(nb, name):
    return next(c for c in nb.cells if c.cell_type == "code" and re.search(rf"^check\.\w+\({name}\)", c.source, re.M))


def _rows(csv_path):
    with open(csv_path, newline="") as f:
        return list(csv.DictReader(f))


def _by_learner(rows):
    out = {}
    for row in rows:
        out.setdefault(row["learner"], {})[(row["lesson"], row["exercise"])] = (row["outcome"], row["message"])
    return out


WRONG_CAUSAL_MASK = "return torch.tril(torch.ones(T, T, dtype=torch.bool), diagonal=-1)  # forgets the diagonal\n"


@pytest.fixture(scope="module")
def graded_class(tmp_path_factory):
    """One grading run over a class of five learners; (exit status, {learner: {(lesson, exercise): ...}}, log)."""
    klass = tmp_path_factory.mktemp("class")
    for lesson in ("07", "08"):
        _copy("solutions", lesson, klass / "solved")
        _copy("notebooks", lesson, klass / "untouched")

    def plant(nb):  # a wrong causal mask, and the lesson's checks silenced in the kernel
        _replace_answer(nb, "causal_mask", WRONG_CAUSAL_MASK)
        nb.cells.insert(nb.cells.index(_check_cell(nb, "causal_mask")), nbformat.v4.new_code_cell(
            "check.expect = check.expect_close = lambda *args, **kwargs: None   # silence the checks\n"
            "check.causal_mask = lambda fn: print('✔ causal mask: correct.')"))
    _edit(_copy("solutions", "07", klass / "planted"), plant)

    def fake(nb):  # padding_mask left open, its check replaced by a fake tick; the attention check deleted
        _replace_answer(nb, "padding_mask", "raise NotImplementedError()\n")
        _check_cell(nb, "padding_mask").source = 'print("✔ padding mask: correct (3 tests).")'
        nb.cells.remove(_check_cell(nb, "attention"))
    _edit(_copy("solutions", "07", klass / "faker"), fake)

    lines, began = [], time.monotonic()
    status = G.grade([str(klass)], out=str(klass / "grades.csv"), log=lines.append, **OPTIONS)
    print(f"graded the class in {time.monotonic() - began:.0f} s")
    return status, _by_learner(_rows(klass / "grades.csv")), "\n".join(lines)


def test_the_class_is_graded_and_the_table_printed(graded_class):
    status, grades, log = graded_class
    assert status == 0, log
    assert set(grades) == {"solved", "untouched", "planted", "faker"}, log
    assert re.search(r"^learner\s+07\s+08\s+total$", log, re.M), log
    n07, n08 = (len(core.REGISTRY[lesson]) for lesson in ("07", "08"))
    assert re.search(rf"^solved\s+{n07}/{n07}\s+{n08}/{n08}\s+{n07 + n08}/{n07 + n08}", log, re.M), log


def test_solutions_score_full_marks(graded_class):
    _, grades, log = graded_class
    for (lesson, exercise), (outcome, message) in grades["solved"].items():
        assert outcome == "passed", f"{lesson}/{exercise}: {outcome}: {message}"
    assert {lesson for lesson, _ in grades["solved"]} == {"07", "08"}


def test_untouched_learner_notebooks_score_zero_as_not_implemented(graded_class):
    """Even where the lesson later imports the course's reference under the exercise's name (07)."""
    _, grades, _ = graded_class
    assert len(grades["untouched"]) == len(grades["solved"])
    for (lesson, exercise), (outcome, message) in grades["untouched"].items():
        assert outcome == "not implemented" and "not implemented yet" in message, f"{lesson}/{exercise}: {message}"


def test_a_planted_mistake_loses_exactly_that_exercise_with_the_checks_message(graded_class):
    import torch

    _, grades, _ = graded_class
    namespace = {"torch": torch}
    exec("def causal_mask(T):\n" + textwrap.indent(WRONG_CAUSAL_MASK, "    "), namespace)
    expected = core.REGISTRY["07"]["causal_mask"].evaluate(namespace["causal_mask"])
    assert expected.status == "wrong"
    for (_, exercise), (outcome, message) in grades["planted"].items():
        if exercise == "causal_mask":
            assert (outcome, message) == ("wrong", expected.message)
        else:
            assert outcome == "passed", f"{exercise}: {message}"


def test_a_fake_tick_or_a_deleted_check_cell_changes_nothing(graded_class):
    _, grades, _ = graded_class
    outcomes = {exercise: outcome for (_, exercise), (outcome, _) in grades["faker"].items()}
    assert outcomes.pop("padding_mask") == "not implemented"
    assert set(outcomes.values()) == {"passed"}, outcomes   # including the one whose check cell is gone


def test_endless_loops_are_cut_and_the_other_notebooks_graded(tmp_path):
    """A check on an answer that never returns stops at --check-timeout; a cell that ignores the
    interrupt costs its notebook what it did not reach, and its kernel is killed at --timeout."""
    _copy("solutions", "00", tmp_path / "good")
    _edit(_copy("solutions", "00", tmp_path / "check_loops_forever"),
          lambda nb: _replace_answer(nb, "weighted_sum", "while True:\n    pass\n"))

    def stubborn(nb):
        first = next(i for i, c in enumerate(nb.cells) if "import" in c.source and c.cell_type == "code"
                     and "course-setup" not in c.metadata.get("tags", []))
        nb.cells.insert(first + 1, nbformat.v4.new_code_cell(
            "import time\nwhile True:\n    try:\n        time.sleep(0.1)\n    except KeyboardInterrupt:\n        pass"))
    _edit(_copy("solutions", "00", tmp_path / "cell_loops_forever"), stubborn)

    lines, began = [], time.monotonic()  # (the slowest learner's name comes first: it starts first)
    status = G.grade([str(tmp_path)], out=str(tmp_path / "grades.csv"), log=lines.append, jobs=2,
                     timeout=30, cell_timeout=12, check_timeout=5)
    seconds = time.monotonic() - began
    log = "\n".join(lines)
    grades = _by_learner(_rows(tmp_path / "grades.csv"))
    assert status == 0, log
    assert grades["good"][("00", "weighted_sum")][0] == "passed", log
    outcome, message = grades["check_loops_forever"][("00", "weighted_sum")]
    assert outcome == "timeout" and "did not finish within 5 s" in message, message
    outcome, message = grades["cell_loops_forever"][("00", "weighted_sum")]
    assert outcome == "timeout" and "ran out of time (30 s)" in message and "did not stop" in message, message
    assert seconds < 150, f"the run took {seconds:.0f} s\n{log}"


@pytest.mark.multi30k
def test_every_lesson_solutions_full_marks_learner_notebooks_zero(tmp_path):
    """Every lesson: the solutions score full marks, the untouched learner notebooks zero (about 2-5
    minutes on 2 cores, 2 notebooks at a time)."""
    shutil.copytree(ROOT / "solutions", tmp_path / "solutions", ignore=shutil.ignore_patterns(".*"))
    shutil.copytree(ROOT / "notebooks", tmp_path / "notebooks", ignore=shutil.ignore_patterns(".*"))
    lines = []
    status = G.grade([str(tmp_path)], out=str(tmp_path / "grades.csv"), log=lines.append, **OPTIONS)
    grades = _by_learner(_rows(tmp_path / "grades.csv"))
    assert status == 0, "\n".join(lines)
    lessons = G.available_lessons()
    assert {lesson for lesson, _ in grades["solutions"]} == set(lessons)
    for (lesson, exercise), (outcome, message) in grades["solutions"].items():
        assert outcome == "passed", f"{lesson}/{exercise}: {message}"
    for (lesson, exercise), (outcome, message) in grades["notebooks"].items():
        assert outcome == "not implemented", f"{lesson}/{exercise}: {message}"


# ---------------------------------------------------------------------------------------------
# Without a kernel: which files are graded, and what an instructor is told
# ---------------------------------------------------------------------------------------------
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
    _touch(klass / "alice" / "scratch.ipynb")
    _touch(klass / "bob" / "01_attention_from_scratch.ipynb")
    (klass / "carol").mkdir()  # nothing handed in yet
    single = _touch(tmp_path / "dave" / "07_self_attention.ipynb")
    found, notes, problems = G.find_submissions([str(klass), str(single)], lessons)
    assert [(s.learner, s.lesson) for s in found] == [("alice", "00"), ("alice", "03"), ("bob", "01"), ("dave", "07")]
    assert found[1].path == newest and "several notebooks for lesson 03" in notes[0]
    assert not problems
    _touch(klass / "bob" / "old" / "01_attention_from_scratch.ipynb")
    found, notes, _ = G.find_submissions([str(klass / "bob")], lessons)
    assert [(s.learner, s.lesson) for s in found] == [("bob", "01")]
    assert "its sub-folders old are not graded" in notes[0]


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
    assert any("could not read the notebook" in line for line in lines)


def test_summary_table_has_learners_down_lessons_across_and_totals():
    rows = [G.Row("alice", "00", "a", "passed", ""), G.Row("alice", "01", "b", "wrong", ""),
            G.Row("alice", "01", "c", "passed", ""), G.Row("bob", "01", "b", "timeout", "")]
    assert G.summary_table(rows).splitlines() == [
        "learner     00     01    total",
        "alice      1/1    1/2    2/3  ",
        "bob          -    0/1    0/1  ",
    ]
