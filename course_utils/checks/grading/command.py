"""The grader's command: find the notebooks, grade each in its sandbox, write the CSV, print the table.

    python -m course_utils.checks.grading submissions/alice submissions/bob   # one folder per learner
    python -m course_utils.checks.grading submissions                         # a folder of learner folders
    python -m course_utils.checks.grading alice/03_bahdanau_attention.ipynb   # one notebook (learner: its folder)
    options: --out grades.csv  --timeout 600  --cell-timeout 300  --check-timeout 60  --jobs 1  --no-sandbox

Each notebook is graded on its own (Linux; the sandbox needs bubblewrap):
1. it runs in a fresh kernel, in a sandbox (`sandbox.py`: a private copy of its folder, the rest of the
   disk read-only, other learners' folders hidden, no network), at the tiny sizes (COURSE_FAST=1), on
   one thread, like "Run All" but going on past cells that fail; a cell that runs longer than
   --cell-timeout is interrupted, and the whole notebook gets --timeout seconds;
2. then the judge, a process outside the sandbox that imports the checks from the grader's own copy
   of the package (taken when the command starts), runs each check on the learner's function or
   class, which it can only call (with data, from seeds the notebook cannot know) through the kernel
   (`judge.py`); each check gets --check-timeout seconds. Nothing the notebook prints, hooks or
   patches reaches the verdict.

Outcomes: passed, wrong, not implemented (as the checks say); copied (the answer runs the course's own
reference for that exercise, in any form); missing (no function or class of that name was defined in
the notebook); timeout (the check, or the notebook before the exercise's cell ran, ran out of time);
error (the kernel died, or the notebook could not be read or run). The CSV has one row per exercise:
learner, lesson, exercise, outcome, message; a table of passed/total per learner and lesson is printed
at the end. Exit status: 0 when every notebook was graded, 1 when the grader itself failed on a
notebook, 2 when an argument is not a readable lesson notebook or a folder of them, or when no sandbox
can start (and --no-sandbox was not given).
"""
import argparse
import importlib
import pkgutil
import re
import shutil
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from . import sandbox
from .report import OUTCOMES, Row, summary_table, write_csv
from .submissions import find_submissions
from .worker import grade_notebook

PACKAGE_DIR = Path(__file__).resolve().parents[2]   # course_utils/


def available_lessons():
    """The lessons that have checks ("00", "01", ...), without importing them."""
    from ... import checks

    return sorted(m.name[len("lesson"):] for m in pkgutil.iter_modules(checks.__path__)
                  if re.fullmatch(r"lesson\d\d", m.name))


def module_checks(module):
    """The checks of one lesson's check module, in the lesson's order."""
    from ..core import REGISTRY, lesson_of

    return REGISTRY.get(lesson_of(module.__name__), {}).values()


def _snapshot(into):
    """The grader's own copy of course_utils (the judges import the checks from it): what a notebook,
    or anyone, changes in the package while the class is graded does not reach the verdicts."""
    shutil.copytree(PACKAGE_DIR, Path(into) / "course_utils",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "reference_runs"))
    return Path(into)


def _hidden_folders(submissions):
    """The folders a notebook's sandbox hides: where the learners' folders are kept (the parent of each;
    a learner's own folder is then the only one in it)."""
    return sorted({sub.path.resolve().parent.parent for sub in submissions})


def grade(args, out="grades.csv", timeout=600, cell_timeout=300, check_timeout=60, jobs=1, kernel="python3",
          log=print, sandboxed=True):
    """Grade the notebooks named by `args` (files or folders); write the CSV; the exit status."""
    import nbformat

    if sandboxed:
        problem = sandbox.unavailable()
        if problem:
            log(f"error: no sandbox: {problem}. The grader runs learners' code only in a sandbox; to grade "
                "without one (every notebook can then read and change your files, other learners' work and "
                "the package, and use the network), pass --no-sandbox.")
            return 2
    else:
        log("warning: --no-sandbox: the notebooks run with your rights (they can read and change your files, other "
            "learners' work and the package, and use the network); the checks still run outside them.")
    lessons = available_lessons()
    submissions, notes, problems = find_submissions(args, lessons)
    checks, broken = {}, []
    for lesson in sorted({sub.lesson for sub in submissions}):
        try:
            checks[lesson] = list(module_checks(importlib.import_module(f"course_utils.checks.lesson{lesson}")))
        except Exception as error:  # noqa: BLE001 - a broken installation: say so, grade the other lessons
            log(f"error: the checks of lesson {lesson} cannot be imported ({type(error).__name__}: {error}); "
                "its notebooks are not graded")
            broken += [sub for sub in submissions if sub.lesson == lesson]
    submissions = [sub for sub in submissions if sub.lesson in checks]
    rows, readable = [], []
    for sub in submissions:
        try:
            nbformat.read(sub.path, as_version=4)
            readable.append(sub)
        except Exception as error:  # noqa: BLE001 - any file that is not a notebook
            reason = (str(error) or "?").splitlines()[0][:200]
            problem = f"could not read the notebook: {type(error).__name__}: {reason}"
            problems.append(f"{sub.path}: {problem}")
            rows += [Row(sub.learner, sub.lesson, c.exercise, "error", problem) for c in checks[sub.lesson]]
    submissions = readable
    for note in notes:
        log(f"note: {note}")
    for problem in problems:
        log(f"error: {problem}")
    failed, lock, done = list(broken), threading.Lock(), [0]
    hidden = _hidden_folders(submissions)

    with tempfile.TemporaryDirectory(prefix="course-grader-") as own:
        root = _snapshot(own)

        def one(sub):
            began = time.monotonic()
            got, graded, remarks = grade_notebook(sub, checks[sub.lesson], timeout, min(cell_timeout, timeout),
                                                  check_timeout, kernel, sandboxed=sandboxed, hidden=hidden,
                                                  grader_root=root)
            with lock:
                done[0] += 1
                passed = sum(r.outcome == "passed" for r in got)
                log(f"[{done[0]}/{len(submissions)}] {sub.learner!r} {sub.path.name}: {passed}/{len(got)} passed "
                    f"({time.monotonic() - began:.0f} s)" + "".join(f"; {remark}" for remark in remarks))
                if not graded:
                    failed.append(sub)
                    problem = next((r.message for r in got if r.outcome == "error"), "")
                    log(f"error: {sub.path}: not graded: {problem[:300]}")
            return got

        with ThreadPoolExecutor(max(1, jobs)) as pool:
            for got in pool.map(one, submissions):
                rows += got
    rows.sort(key=lambda r: (r.learner, r.lesson))  # (stable: each lesson's exercises stay in order)
    if rows:
        write_csv(rows, out)
        log("")
        log(summary_table(rows))
        counts = {o: sum(r.outcome == o for r in rows) for o in OUTCOMES}
        log("outcomes: " + ", ".join(f"{n} {o}" for o, n in counts.items() if n) + f"; written to {out}")
    if problems or not (submissions or rows):
        return 2
    return 1 if failed else 0


def main(argv=None):
    from .worker import _skip_slow_imports

    _skip_slow_imports()
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = argparse.ArgumentParser(
        prog="python -m course_utils.checks.grading",
        description="Grade learners' notebooks (files NN_*.ipynb) with the course's own checks, each notebook "
                    "in a sandbox, the checks outside it.")
    parser.add_argument("paths", nargs="+", metavar="PATH",
                        help="a learner's folder, a folder of learner folders, or one notebook")
    parser.add_argument("--out", default="grades.csv", help="the CSV to write (default: grades.csv)")
    parser.add_argument("--timeout", type=float, default=600,
                        help="seconds to run one notebook, all its cells together (default: 600)")
    parser.add_argument("--cell-timeout", type=float, default=300,
                        help="seconds before one cell is interrupted (default: 300)")
    parser.add_argument("--check-timeout", type=float, default=60,
                        help="seconds for one exercise's check (default: 60)")
    parser.add_argument("--jobs", type=int, default=1, help="notebooks graded in parallel (default: 1)")
    parser.add_argument("--kernel", default="python3", help="the Jupyter kernel to run them in (default: python3)")
    parser.add_argument("--no-sandbox", action="store_true",
                        help="run the notebooks without the sandbox (only where bubblewrap cannot run, and only "
                             "for notebooks you trust: they can then read and change your files)")
    options = parser.parse_args(argv)
    return grade(options.paths, options.out, options.timeout, options.cell_timeout, options.check_timeout,
                 options.jobs, options.kernel, sandboxed=not options.no_sandbox)
