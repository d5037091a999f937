"""The course in nbgrader (`python tools/export_nbgrader.py OUT`; docs/instructors.md, "Grading with nbgrader").

Without nbgrader: every lesson exports, every exercise cell is a solution cell, every check cell a locked
test cell with points calling `check.NAME.strict`, every other cell locked, no header linking to the
solutions and no progress table. With nbgrader installed (`pip install -e ".[nbgrader]"`; skipped, with
the reason, without it): its own validator accepts every exported notebook, and nbgrader itself
generates and autogrades lessons 01 and 07 for three students: the solution (every point), the untouched
learner version (zero) and one wrong answer (every point but that exercise's, which shows the check's
message). The autograder runs without COURSE_FAST: the notebook's set-up cell switches on fast mode.
"""
import importlib.util
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
SOLUTIONS = sorted((ROOT / "solutions").glob("[0-9][0-9]_*.ipynb"))

_spec = importlib.util.spec_from_file_location("export_nbgrader", ROOT / "tools" / "export_nbgrader.py")
export_nbgrader = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(export_nbgrader)

HAVE_NBGRADER = importlib.util.find_spec("nbgrader") is not None
needs_nbgrader = pytest.mark.skipif(not HAVE_NBGRADER, reason='nbgrader is not installed: pip install -e ".[nbgrader]"')

# lesson -> (the exercise answered wrongly, its wrong answer: a typical mistake the check names)
WRONG = {
    "01": ("softmax", "def softmax(x):\n"
                      "    e = np.exp(x - np.max(x))\n"
                      "    return e / e.sum()          # sums over every axis, not over the last one\n"),
    "07": ("causal_mask", "def causal_mask(T):\n"
                          "    return torch.ones(T, T, dtype=torch.bool).triu()   # the future, not the past\n"),
}


def _nbgrader(cell):
    return cell.metadata.get("nbgrader", {})


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    out = tmp_path_factory.mktemp("nbgrader-course")
    before = {p: p.read_bytes() for p in SOLUTIONS}
    export_nbgrader.export(out)
    assert {p: p.read_bytes() for p in SOLUTIONS} == before, "the export changed solutions/"
    return out


@pytest.mark.parametrize("solution", SOLUTIONS, ids=[p.stem for p in SOLUTIONS])
def test_every_cell_has_its_nbgrader_role(exported, solution):
    nb = nbformat.read(exported / "source" / solution.stem / solution.name, as_version=4)
    checks = re.findall(r"^check\.(\w+)\(", "\n".join(c.source for c in nbformat.read(solution, 4).cells
                                                      if c.cell_type == "code"), re.M)
    tests, answers = [], 0
    for cell in nb.cells:
        meta = _nbgrader(cell)
        assert meta.get("schema_version") == 3 and meta.get("grade_id"), \
            f"cell without nbgrader metadata: {cell.source[:60]!r}"
        if "### BEGIN SOLUTION" in cell.source:
            answers += 1
            assert meta["solution"] and not meta["locked"], f"an exercise cell that is not a solution cell: {meta}"
        elif meta["grade"]:
            assert meta["locked"] and meta["points"] == 1 and re.fullmatch(r"check\.\w+\.strict\(\w+\)", cell.source)
            tests.append(meta["grade_id"])
        else:
            assert meta["locked"] and not meta["solution"], f"a lesson cell that is not read-only: {cell.source[:60]!r}"
        assert "../" not in cell.source, f"a relative link that breaks in an nbgrader folder: {cell.source[:80]!r}"
        assert cell.get("id") != "course-progress", "the progress table is for a learner, not for an autograder"
    assert tests == [f"check-{name}" for name in checks], "not every check became a test cell, in order"
    assert answers >= len(checks)
    assert "NBGRADER_EXECUTION" in nb.cells[1].source and "COURSE_FAST" in nb.cells[1].source
    assert (exported / "nbgrader_config.py").is_file()


def test_export_refuses_what_it_cannot_grade(tmp_path):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("def f(x):\n    ### BEGIN SOLUTION\n    return x")])
    with pytest.raises(export_nbgrader.ExportError, match=r"without '### END SOLUTION'"):
        export_nbgrader.export_notebook(nb, "99_test.ipynb")
    nb.cells = [nbformat.v4.new_code_cell("x = 1\ncheck.f(f)")]
    with pytest.raises(export_nbgrader.ExportError, match="only `check.NAME"):
        export_nbgrader.export_notebook(nb, "99_test.ipynb")
    nb.cells = [nbformat.v4.new_code_cell("x = 1")]
    with pytest.raises(export_nbgrader.ExportError, match="no check cell"):
        export_nbgrader.export_notebook(nb, "99_test.ipynb")
    assert export_nbgrader.main([str(tmp_path), "98"]) == 2


@needs_nbgrader
def test_nbgrader_validates_every_exported_notebook(exported):
    from nbgrader.nbgraderformat import MetadataValidator

    for path in sorted((exported / "source").glob("*/*.ipynb")):
        MetadataValidator().validate_nb(nbformat.read(path, as_version=4))


def _run_nbgrader(course, *args, timeout=900):
    env = {k: v for k, v in os.environ.items() if k not in ("COURSE_FAST", "CI")}  # the set-up cell switches
    result = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=course, env=env, capture_output=True,
                            text=True, timeout=timeout)
    assert result.returncode == 0, \
        f"nbgrader {' '.join(args)} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result.stdout + result.stderr


def _answered(release, source, wrong=None):
    """The release notebook with every exercise answered as the source does (markers removed), but the
    exercise checked by `wrong = (check name, answer)` answered with that answer."""
    nb = nbformat.read(release, as_version=4)
    answers = {_nbgrader(c)["grade_id"]: c.source for c in nbformat.read(source, as_version=4).cells}
    pending = None
    for cell in nb.cells:
        meta = _nbgrader(cell)
        if meta.get("solution"):
            markers = (export_nbgrader.BEGIN, export_nbgrader.END)
            cell.source = "\n".join(ln for ln in answers[meta["grade_id"]].splitlines() if ln.strip() not in markers)
            pending = cell
        if wrong and meta.get("grade_id") == f"check-{wrong[0]}":
            pending.source = wrong[1]
    return nb


@needs_nbgrader
@pytest.mark.parametrize("lesson", sorted(WRONG))
def test_nbgrader_generates_and_autogrades(tmp_path, lesson):
    from nbgrader.api import Gradebook

    solution = next(p for p in SOLUTIONS if p.name.startswith(lesson))
    assignment, name = solution.stem, solution.name
    export_nbgrader.export(tmp_path, [lesson])
    _run_nbgrader(tmp_path, "generate_assignment", assignment, "--force")
    source, release = tmp_path / "source" / assignment / name, tmp_path / "release" / assignment / name
    assert "### BEGIN SOLUTION" not in release.read_text() and "raise NotImplementedError()" in release.read_text()
    students = {"solved": _answered(release, source), "untouched": nbformat.read(release, as_version=4),
                "one_wrong": _answered(release, source, WRONG[lesson])}
    for student, nb in students.items():
        target = tmp_path / "submitted" / student / assignment / name
        target.parent.mkdir(parents=True)
        nbformat.write(nb, target)
    start = time.perf_counter()
    _run_nbgrader(tmp_path, "autograde", assignment)
    seconds = time.perf_counter() - start
    with Gradebook(f"sqlite:///{tmp_path / 'gradebook.db'}") as gb:
        scores = {s: gb.find_submission(assignment, s).score for s in students}
        maximum = gb.find_assignment(assignment).max_score
        grades = {g.name: g.score for g in gb.find_submission_notebook(solution.stem, assignment, "one_wrong").grades}
    tests = len(re.findall(r"check\.\w+\.strict", source.read_text()))
    assert maximum == tests >= 3
    assert scores == {"solved": maximum, "untouched": 0, "one_wrong": maximum - 1}, \
        f"lesson {lesson}: points {scores} of {maximum} (autograde took {seconds:.0f} s)"
    assert grades[f"check-{WRONG[lesson][0]}"] == 0
    graded = nbformat.read(tmp_path / "autograded" / "one_wrong" / assignment / name, as_version=4)
    failed = next(c for c in graded.cells if _nbgrader(c).get("grade_id") == f"check-{WRONG[lesson][0]}")
    message = " ".join(o.get("evalue", "") for o in failed.outputs)
    assert message.startswith("✘"), f"the failed test cell does not show the check's message: {failed.outputs}"
    untouched = nbformat.read(tmp_path / "autograded" / "untouched" / assignment / name, as_version=4)
    opened = [o.get("evalue", "") for c in untouched.cells if _nbgrader(c).get("grade") for o in c.outputs]
    assert len(opened) == tests and all("not implemented yet" in m for m in opened), opened
    print(f"lesson {lesson}: {scores} of {maximum}; autograde of 3 notebooks: {seconds:.0f} s")
