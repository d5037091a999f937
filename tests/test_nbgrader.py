"""The course in nbgrader (`python tools/export_nbgrader.py OUT`; docs/instructors.md, "Grading with nbgrader").

Without nbgrader: every lesson exports, every exercise cell is a solution cell, every check cell a locked
test cell worth its exercise's points (the points file) calling `check.NAME.strict`, every other cell locked, no
header linking to the solutions and no progress table; the set-up cell stops a kernel of nbgrader's own autograde;
the release withholds the lesson's references (the package beside the notebook has stand-ins and withheld checks).

With nbgrader installed (`pip install -e ".[nbgrader]"`; skipped, with the reason, without it): its own validator
accepts every exported notebook, the exported nbgrader_config.py puts the course's SandboxedExecute in the place of
its Execute, and nbgrader itself generates and autogrades lesson 00 for a solution (every point) and a learner
who attacks the grader from the answer cell (none, and nothing outside its
sandbox changed): it rewrites the other learners' scores in gradebook.db, lists the course folder, patches the
checks in its kernel, answers from a table of the check's fixed inputs, reads the check's expected value from its
caller's frame or runs the reference when its caller is course_utils. Slow (RUN_SLOW=1): lessons 01 and 07
(the solution, the untouched version, one wrong answer), each attack on its own (and a `course_utils/` folder
beside the notebook), and nbgrader's own autograde without the course's configuration: refused, never scored.
"""
import importlib.util
import json
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
    export_nbgrader.export(out, withhold=False)
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
    assert '== "autograde":' in nb.cells[1].source and "os._exit(1)" in nb.cells[1].source
    assert "configure(c)" in (exported / "nbgrader_config.py").read_text()
    assert not (exported / "source" / solution.stem / "course_utils").exists()   # (--keep-references)


def test_each_test_cell_is_worth_its_exercise_s_points(tmp_path):
    from course_utils.checks.grading import points as pointfiles

    mine = tmp_path / "points.toml"
    mine.write_text("default = 2\n[lesson01]\nsoftmax = 5\n")
    assert export_nbgrader.main([str(tmp_path / "out"), "01", "--points", str(mine), "--keep-references"]) == 0
    source = next((tmp_path / "out" / "source").glob("01_*/01_*.ipynb"))
    worth = {_nbgrader(c)["grade_id"]: _nbgrader(c)["points"] for c in nbformat.read(source, 4).cells
             if _nbgrader(c).get("grade")}
    assert worth["check-softmax"] == 5 and set(worth.values()) == {5, 2} and len(worth) >= 4
    mine.write_text("[lesson01]\nsoftmx = 5\n")
    assert export_nbgrader.main([str(tmp_path / "out"), "01", "--points", str(mine)]) == 2
    assert pointfiles.load().of("01", "softmax") == 1


def test_the_release_withholds_the_lesson_s_references(tmp_path):
    """As `course-grade --withhold-references` gives a kernel: beside the notebook, the package with the lesson's
    references replaced by stand-ins that run the learner's own answer, its checks by ones that say the instructor
    grades them; the other lessons' stay. The set-up cell then finds that copy and installs nothing."""
    export_nbgrader.export(tmp_path, ["00", "07"])
    package = tmp_path / "source" / "07_self_attention" / "course_utils"
    masks = (package / "masks.py").read_text()
    assert "_course_grader_own_answer('causal_mask', 'course_utils.masks.causal_mask')" in masks
    assert "triu" not in masks.split("def causal_mask", 1)[1].split("\ndef ", 1)[0]
    assert "WithheldCheck('07', 'causal_mask'" in (package / "checks" / "lesson07.py").read_text()
    assert not (package / "checks" / "lesson07").exists() and not list(package.rglob("__pycache__"))
    welcome = (tmp_path / "source" / "00_welcome" / "course_utils" / "numpy_attention.py").read_text()
    assert "_course_grader_own_answer('weighted_sum'" in welcome and "weights @ vectors" not in welcome
    header = nbformat.read(tmp_path / "source" / "07_self_attention" / "07_self_attention.ipynb", 4).cells[0]
    assert "your instructor's grader checks it" in header.source


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


@needs_nbgrader
def test_the_exported_configuration_puts_the_sandbox_in_autograde(exported):
    """nbgrader_config.py, loaded as nbgrader loads it: autograde's Execute is the course's SandboxedExecute, every
    other preprocessor of autograde kept, in its place."""
    from nbgrader.converters import Autograde
    from traitlets.config import Config

    from course_utils.checks.grading.autograde import SandboxedExecute

    config = Config()
    text = (exported / "nbgrader_config.py").read_text()
    exec(compile(text, "nbgrader_config.py", "exec"), {"get_config": lambda: config})   # noqa: S102 - our own file
    chosen = config.Autograde.autograde_preprocessors
    default = Autograde.class_traits()["autograde_preprocessors"].default()
    assert chosen[0] is SandboxedExecute and chosen[1:] == default[1:] and default[0].__name__ == "Execute"
    assert config.SandboxedExecute.timeout == 300 and config.SandboxedExecute.withhold_references is False


def _run_nbgrader(course, *args, timeout=900, ok=True):
    env = {k: v for k, v in os.environ.items() if k not in ("COURSE_FAST", "CI")}  # the set-up cell switches
    result = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=course, env=env, capture_output=True,
                            text=True, timeout=timeout)
    assert (result.returncode == 0) == ok, \
        f"nbgrader {' '.join(args)}: status {result.returncode}:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
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


def _submit(course, assignment, name, students):
    for student, nb in students.items():
        target = course / "submitted" / student / assignment / name
        target.parent.mkdir(parents=True)
        nbformat.write(nb, target)


def _scores(course, assignment, students):
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        scores = {s: gb.find_submission(assignment, s).score for s in students}
        manual = [g.manual_score for s in students
                  for nb in gb.find_submission(assignment, s).notebooks for g in nb.grades]
        return scores, manual


def _with_answer(release, exercise, code):
    """The release notebook with the exercise cell before `check.EXERCISE`'s test cell replaced by `code`."""
    nb = nbformat.read(release, as_version=4)
    pending = None
    for cell in nb.cells:
        if _nbgrader(cell).get("solution"):
            pending = cell
        if _nbgrader(cell).get("grade_id") == f"check-{exercise}":
            pending.source = code
    return nb


def _memorised(lesson, exercise):
    """{the check's fixed inputs (the first argument's bytes, hex): the reference's output}, at the notebook's seeds
    (seed offset 0): what a learner can record by running the check in their own notebook."""
    import numpy as np

    from course_utils.checks import exercises

    check = next(c for c in exercises()[lesson] if c.exercise == exercise)
    table = {}

    def recorder(first, *rest):
        out = check.reference(first, *rest)
        table[np.asarray(first).tobytes().hex()] = np.asarray(out).tolist()
        return out

    assert check.evaluate(recorder, seed_offset=0).status == "passed"
    return table


# The attacks from the answer cell (the only cell a learner edits under nbgrader), on lesson 00's weighted_sum.
SPY = """
import json, os, sqlite3
SEEN = {}
def attempt(name, action):
    try:
        SEEN[name] = ["ok", repr(action())[:300]]
    except BaseException as error:
        SEEN[name] = ["failed", f"{type(error).__name__}: {error}"[:120]]
COURSE = os.path.abspath(os.path.join(os.getcwd(), "..", "..", ".."))
attempt("list the course folder", lambda: sorted(os.listdir(COURSE)))
attempt("list the other students", lambda: sorted(os.listdir(os.path.join(COURSE, "autograded"))))
attempt("read the submissions", lambda: sorted(os.listdir(os.path.join(COURSE, "submitted"))))
attempt("list the grader's home", lambda: sorted(os.listdir(os.path.expanduser("~"))))
def rewrite():   # every other student's points gone (a manual score is what nbgrader counts)
    db = sqlite3.connect(os.path.join(COURSE, "gradebook.db"))
    db.execute("UPDATE grade SET manual_score = 0")
    db.commit()
    return db.execute("SELECT count(*) FROM grade").fetchone()
attempt("rewrite gradebook.db", rewrite)
attempt("plant a file", lambda: open(os.path.join(COURSE, "planted.txt"), "w").write("x"))
print("SEEN " + json.dumps(SEEN))
"""
PATCHER = """
from course_utils.checks import core
for _check in list(core.REGISTRY.get("00", {}).values()):   # the test cell's check passes anything
    _check.strict = lambda fn, _check=_check: print(f"✔ {_check.title}: correct (4 tests).")
"""
CHEATER = """
import sys
import numpy as np
TABLE = TABLE_HERE
def weighted_sum(weights, vectors):
    key = np.asarray(weights).tobytes().hex()
    if key in TABLE:                       # the check's fixed inputs: the memorised outputs
        return np.array(TABLE[key])
    frame = sys._getframe(1)
    while frame is not None:               # the check's expected value, from its caller's frames
        for name, value in frame.f_locals.items():
            if isinstance(value, np.ndarray) and name in ("expected", "want", "reference", "target", "ref"):
                return value
        frame = frame.f_back
    if "course_utils" in sys._getframe(1).f_code.co_filename:   # checked by the course: run its reference
        import course_utils.numpy_attention as na
        return na.weighted_sum(weights, vectors)
    raise NotImplementedError()
"""


def _attacker(release, table, parts=(SPY, PATCHER, CHEATER)):
    return _with_answer(release, "weighted_sum", "\n".join(parts).replace("TABLE_HERE", repr(table)))


@needs_nbgrader
def test_nbgrader_autogrades_in_the_sandbox_and_an_attacker_gets_nothing(tmp_path):
    """Lesson 00 in nbgrader itself: the solution 1 of 1, the attacker 0 (slow: the untouched version 0); it saw
    only its own folder, changed nothing of the course folder (gradebook.db: the solution keeps its point, no manual
    score anywhere; no file planted); its test cell holds the judge's verdict. The release holds no reference."""
    assignment, name = "00_welcome", "00_welcome.ipynb"
    export_nbgrader.export(tmp_path, ["00"])
    _run_nbgrader(tmp_path, "generate_assignment", assignment, "--force")
    source, release = tmp_path / "source" / assignment / name, tmp_path / "release" / assignment / name
    assert "### BEGIN SOLUTION" not in release.read_text()
    withheld = (release.parent / "course_utils" / "numpy_attention.py").read_text()
    assert "_course_grader_own_answer('weighted_sum'" in withheld and "weights @ vectors" not in withheld
    students = {"solved": _answered(release, source),
                "zattacker": _attacker(release, _memorised("00", "weighted_sum"))}   # (graded last: after "solved")
    _submit(tmp_path, assignment, name, students)
    start = time.perf_counter()
    _run_nbgrader(tmp_path, "autograde", assignment)
    seconds = time.perf_counter() - start
    scores, manual = _scores(tmp_path, assignment, students)
    assert scores == {"solved": 1, "zattacker": 0}, f"{scores} (autograde: {seconds:.0f} s)"
    assert manual == [None] * len(manual) and not (tmp_path / "planted.txt").exists()
    graded = nbformat.read(tmp_path / "autograded" / "zattacker" / assignment / name, as_version=4)
    printed = "".join(o.get("text", "") for c in graded.cells for o in c.get("outputs", []))
    seen = json.loads(printed.split("SEEN ", 1)[1].splitlines()[0])
    assert seen["list the other students"] == ["ok", "['zattacker']"], seen        # only its own folder is there
    assert seen["read the submissions"][0] == "failed" and seen["rewrite gradebook.db"][0] == "failed", seen
    assert "gradebook.db" not in seen["list the course folder"][1], seen
    test = next(c for c in graded.cells if _nbgrader(c).get("grade_id") == "check-weighted_sum")
    assert [o["output_type"] for o in test.outputs] == ["error"] and test.outputs[0]["ename"] == "CopiedReference", \
        test.outputs
    solved = next(c for c in nbformat.read(tmp_path / "autograded" / "solved" / assignment / name, 4).cells
                  if _nbgrader(c).get("grade_id") == "check-weighted_sum")
    assert solved.outputs[0]["text"].startswith("✔ weighted sum: correct")
    print(f"lesson 00: {scores}; autograde of 3 notebooks: {seconds:.0f} s")


@needs_nbgrader
@pytest.mark.slow
@pytest.mark.parametrize("attack", ["spy", "patcher", "memorised", "frames", "caller", "shadow", "thread",
                                    "toggler"])
def test_each_attack_on_nbgrader_gets_nothing(tmp_path, attack):
    """Each attack alone, with the references kept in the release (the course's package not beside the notebook:
    the `course_utils/` folder a learner puts there is the only one), and autograde with the course's sandbox."""
    assignment, name = "00_welcome", "00_welcome.ipynb"
    export_nbgrader.export(tmp_path, ["00"], withhold=False)
    _run_nbgrader(tmp_path, "generate_assignment", assignment, "--force")
    source, release = tmp_path / "source" / assignment / name, tmp_path / "release" / assignment / name
    right = "def weighted_sum(weights, vectors):\n    return weights @ vectors\n"
    stub = "def weighted_sum(weights, vectors):\n    raise NotImplementedError()\n"
    table = _memorised("00", "weighted_sum")
    caller = CHEATER.split("    frame = sys._getframe(1)")[0] + CHEATER.split("frame = frame.f_back\n")[1]
    code = {"spy": SPY + right, "patcher": PATCHER + stub,
            "memorised": CHEATER.split("    frame = sys._getframe(1)")[0] + "    raise NotImplementedError()\n",
            "frames": CHEATER.replace("TABLE = TABLE_HERE", "TABLE = {}").replace(
                '    if "course_utils" in sys._getframe(1)', "    if False"),
            "caller": caller.replace("TABLE = TABLE_HERE", "TABLE = {}"), "shadow": stub,
            "thread": "import queue, threading\nimport course_utils.numpy_attention as na\njobs, done = queue.Queue(), "
                      "queue.Queue()\ndef worker():\n    while True:\n        done.put(na.weighted_sum(*jobs.get()))\n"
                      "threading.Thread(target=worker, daemon=True).start()\ndef weighted_sum(weights, vectors):\n"
                      "    jobs.put((weights, vectors))\n    return done.get()\n",
            "toggler": "import sys\nimport course_utils.numpy_attention as na\ndef weighted_sum(weights, vectors):\n"
                       "    sys.settrace(None)\n    out = na.weighted_sum(weights, vectors)\n    sys.settrace(None)\n"
                       "    return out\n"}[attack].replace("TABLE_HERE", repr(table))
    students = {"solved": _answered(release, source), "zattacker": _with_answer(release, "weighted_sum", code)}
    _submit(tmp_path, assignment, name, students)
    if attack == "shadow":   # a course_utils/ beside the notebook whose checks pass anything
        fake = tmp_path / "submitted" / "zattacker" / assignment / "course_utils"
        (fake / "checks").mkdir(parents=True)
        (fake / "__init__.py").write_text("")
        (fake / "checks" / "__init__.py").write_text("")
        (fake / "checks" / "lesson00.py").write_text(
            "class _Pass:\n    def __call__(self, fn):\n        print('✔')\n    strict = __call__\n"
            "weighted_sum = _Pass()\n")
    _run_nbgrader(tmp_path, "autograde", assignment)
    scores, manual = _scores(tmp_path, assignment, students)
    expected = 1 if attack in ("spy", "toggler") else 0   # (a right answer spying; the toggler's own verdict stands)
    assert scores == {"solved": 1, "zattacker": expected} and manual == [None] * len(manual), (attack, scores)
    test = next(c for c in nbformat.read(tmp_path / "autograded" / "zattacker" / assignment / name, 4).cells
                if _nbgrader(c).get("grade_id") == "check-weighted_sum")
    if attack in ("caller", "thread"):
        assert test.outputs[0]["ename"] == "CopiedReference", test.outputs
    if attack == "toggler":
        assert "blinded the grader's watch" in test.outputs[0]["text"], test.outputs
    assert not (tmp_path / "planted.txt").exists()


@needs_nbgrader
@pytest.mark.slow
def test_nbgrader_s_own_autograde_is_refused_never_scored(tmp_path):
    """Without the course's nbgrader_config.py (course_utils not importable where nbgrader runs, or the file
    replaced), nbgrader's own Execute would run the submission with the grader's rights and check it in its own
    kernel: the set-up cell stops that kernel, and nbgrader reports the submission failed."""
    assignment, name = "00_welcome", "00_welcome.ipynb"
    export_nbgrader.export(tmp_path, ["00"])
    (tmp_path / "nbgrader_config.py").write_text("c = get_config()\n")
    _run_nbgrader(tmp_path, "generate_assignment", assignment, "--force")
    source, release = tmp_path / "source" / assignment / name, tmp_path / "release" / assignment / name
    _submit(tmp_path, assignment, name, {"solved": _answered(release, source)})
    log = _run_nbgrader(tmp_path, "autograde", assignment, ok=False)
    assert "There was an error processing assignment" in log
    assert not (tmp_path / "autograded" / "solved" / assignment / name).exists()


@needs_nbgrader
@pytest.mark.slow
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
