"""The grader where most people keep their clone: under the home folder and under /tmp.

A clone of this working tree (every file git tracks or would track, as `git clone` of the committed
tree would give, with this tree's changes) is installed as the README says, in a virtual environment
`.venv` of its own with course_utils installed editable (`pip install -e .`), and graded as the docs say:
`.venv/bin/course-grade` from another folder, with nothing of the test session's environment (no
PYTHONPATH, no COURSE_* setting but the data). To keep it fast and offline, the venv reaches the
course's installed dependencies (torch, Jupyter, ...) through a `.pth` file instead of downloading them
again, and pip installs the clone without its dependencies (`--no-deps`): what the README's
`tools/start.py` does, less the downloads.

Slow (RUN_SLOW=1), all of it: the solution notebooks of the clone under /tmp, graded to full marks; three lessons,
then every lesson, from the clone under the home folder; the learner notebooks, which score nothing.
"""
import csv
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA = os.environ.get("COURSE_DATA_DIR")


def working_tree_files(root=ROOT):
    """The files a clone of `root` holds (tracked or not ignored), as relative paths."""
    try:
        out = subprocess.run(["git", "-C", str(root), "ls-files", "-z", "-co", "--exclude-standard"],
                             capture_output=True, check=True).stdout.decode().split("\0")
        return sorted({p for p in out if p and (root / p).is_file()})
    except (OSError, subprocess.CalledProcessError):   # not a git checkout: everything but the usual clutter
        skip = {".git", ".venv", "runs", "test-artifacts", "__pycache__"}
        return sorted(str(p.relative_to(root)) for p in root.rglob("*")
                      if p.is_file() and not skip & set(p.relative_to(root).parts))


def make_clone(dest, python=None, run=subprocess.run, owner=None, home=None, dependencies=None):
    """A clone of this course at `dest`, installed as the README says (a .venv in it, course_utils editable);
    `python`: the Python that makes the venv (default: this one's base); `run`: how to run a command, and
    `owner`: the user id that owns the clone (e.g. another user's); `dependencies`: where the venv finds the
    course's dependencies (default: this Python's site-packages). Returns the clone's Python."""
    dest = Path(dest)
    for rel in working_tree_files():
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, dest / rel)
    if owner is not None:
        for path in [dest, *dest.rglob("*")]:
            os.chown(path, owner, owner)
    base = python or getattr(sys, "_base_executable", None) or sys.executable
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home or os.environ.get("HOME", dest)),
           "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1", "PIP_NO_CACHE_DIR": "1"}
    done = run([base, "-m", "venv", "--without-pip", str(dest / ".venv")], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    venv_python = dest / ".venv" / "bin" / "python"
    site = run([str(venv_python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], env=env,
               capture_output=True, text=True).stdout.strip()
    ours = dependencies or sysconfig.get_paths()["purelib"]   # the course's dependencies, installed once
    (Path(site) / "course-dependencies.pth").write_text(str(ours) + "\n")
    done = run([str(venv_python), "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "-e", str(dest)],
               env=env, capture_output=True, text=True, cwd=str(dest))
    assert done.returncode == 0, done.stdout + done.stderr
    return venv_python


def grade_env(home, tmpdir=None):
    """The environment an instructor grades in: nothing of the test session's."""
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8", "OMP_NUM_THREADS": "1"}
    if DATA:
        env["COURSE_DATA_DIR"] = DATA
    if tmpdir:
        env["TMPDIR"] = str(tmpdir)
    return env


def grade_solutions(clone, lessons, where, run=subprocess.run, env=None, jobs=2, folder="solutions"):
    """Grade the clone's own notebooks of `lessons` (its solutions, or its `folder`) as a class of one learner,
    with the clone's `course-grade`, from the folder `where`; (exit status, output, {(lesson, exercise):
    (outcome, message)})."""
    learner = Path(where) / "class" / folder
    learner.mkdir(parents=True)
    for notebook in sorted((Path(clone) / folder).glob("[0-9][0-9]_*.ipynb")):
        if notebook.name[:2] in lessons:
            shutil.copy(notebook, learner)
    out = Path(where) / "grades.csv"
    began = time.monotonic()
    done = run([str(Path(clone) / ".venv" / "bin" / "course-grade"), "class", "--out", str(out), "--jobs", str(jobs)],
               cwd=str(where), env=env or grade_env(Path.home()), capture_output=True, text=True)
    print(f"graded {len(lessons)} lessons in {time.monotonic() - began:.0f} s (load {os.getloadavg()[0]:.1f})")
    grades = {}
    if out.exists():
        with open(out, newline="", encoding="utf-8") as f:
            grades = {(r["lesson"], r["exercise"]): (r["outcome"], r["message"]) for r in csv.DictReader(f)}
    return done.returncode, done.stdout + done.stderr, grades


def lessons_with_checks():
    from course_utils.checks.grading import available_lessons

    return sorted({n.name[:2] for n in (ROOT / "solutions").glob("[0-9][0-9]_*.ipynb")} & set(available_lessons()))


def check_full_marks(status, output, grades, lessons):
    assert status == 0, output[-3000:]
    assert {lesson for lesson, _ in grades} == set(lessons), output[-3000:]
    wrong = {key: value for key, value in grades.items() if value[0] != "passed"}
    assert not wrong, "\n".join(f"{lesson}/{exercise}: {o}: {m[:300]}" for (lesson, exercise), (o, m) in wrong.items())


@pytest.fixture
def folder_under(request):
    """A fresh folder under /tmp or under the home folder, removed afterwards."""
    made = []

    def make(parent):
        path = Path(tempfile.mkdtemp(prefix="course-clone-test-", dir=parent))
        made.append(path)
        return path

    yield make
    for path in made:
        shutil.rmtree(path, ignore_errors=True)


@pytest.mark.slow
def test_a_clone_under_tmp_grades_every_solution_to_full_marks(folder_under):
    base = folder_under("/tmp")
    make_clone(base / "attention-course")
    lessons = lessons_with_checks()
    check_full_marks(*grade_solutions(base / "attention-course", lessons, base), lessons)


@pytest.mark.slow
@pytest.mark.parametrize("lessons", [["00", "01", "08"], None],
                         ids=["three lessons", "every lesson"])
def test_a_clone_under_the_home_folder_grades_its_solutions_to_full_marks(folder_under, lessons):
    base = folder_under(Path.home())
    make_clone(base / "attention-course")
    lessons = lessons or lessons_with_checks()
    check_full_marks(*grade_solutions(base / "attention-course", lessons, base), lessons)


@pytest.mark.slow
def test_the_learner_notebooks_score_nothing(folder_under):
    """Every lesson's untouched learner notebook: each exercise `not implemented`, none an error."""
    base = folder_under("/tmp")
    make_clone(base / "attention-course")
    lessons = lessons_with_checks()
    status, output, grades = grade_solutions(base / "attention-course", lessons, base, folder="notebooks")
    assert status == 0 and {lesson for lesson, _ in grades} == set(lessons), output[-3000:]
    for (lesson, exercise), (outcome, message) in grades.items():
        assert outcome == "not implemented", f"{lesson}/{exercise}: {outcome}: {message[:300]}"
