"""Grade learners' notebooks with the course's own checks.

    python -m course_utils.grade submissions/alice submissions/bob   # one folder per learner
    python -m course_utils.grade submissions                         # a folder of learner folders
    python -m course_utils.grade alice/03_bahdanau_attention.ipynb   # one notebook (learner: its folder)
    options: --out grades.csv  --timeout 600  --cell-timeout 300  --check-timeout 60  --jobs 1

A lesson notebook is a file named NN_*.ipynb, NN the lesson. Each one is graded on its own (on Linux
or macOS: the time limits use process groups and SIGALRM):
1. it runs in a fresh kernel, in the notebook's folder, at the tiny sizes (COURSE_FAST=1), on one
   thread, with MPLBACKEND=Agg and no progress file, like "Run All" but going on past cells that
   fail; a cell that runs longer than --cell-timeout is interrupted, and the whole notebook gets
   --timeout seconds (cells left after that are skipped; a kernel that ignores the interrupt is killed);
2. then, in that kernel, every `course_utils` module the notebook imported (or patched) is thrown
   away, the lesson's checks are imported afresh from this package, and each check runs on the
   function or class the learner wrote under the exercise's name (the last one defined in the
   notebook: the lesson rebinding the name to the course's reference later does not count), each
   within --check-timeout seconds. Nothing the notebook printed is read: deleting or editing a check
   cell, or printing a fake ✔, changes nothing.

Outcomes: passed, wrong, not implemented (as the checks say); missing (no function or class of that
name was defined in the notebook); timeout (the check, or the notebook before the exercise's cell
ran, ran out of time); error (the kernel died, or the notebook could not be read or run).
The CSV has one row per exercise: learner, lesson, exercise, outcome, message; a table of passed/total
per learner and lesson is printed at the end. Exit status: 0 when every notebook was graded (one that
crashed or timed out is graded too: it loses what it did not reach), 1 when the grader itself failed
on a notebook (e.g. no kernel could start), 2 when an argument is not a readable lesson notebook or a
folder of them.
"""
import argparse
import csv
import importlib
import io
import pkgutil
import re
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from .grading import OUTCOMES, Row, Submission, grade_notebook

NOTEBOOK_NAME = re.compile(r"^(\d\d)_.*\.ipynb$")


# ---------------------------------------------------------------------------------------------
# Which notebooks: files named NN_*.ipynb, in learner folders
# ---------------------------------------------------------------------------------------------
def _lesson_notebooks(folder, lessons, notes):
    """{lesson: path} for the lesson notebooks directly in `folder` (the newest one if several)."""
    by_lesson = {}
    for path in sorted(folder.glob("*.ipynb")):
        match = NOTEBOOK_NAME.match(path.name)
        if match and match.group(1) in lessons and path.is_file():
            by_lesson.setdefault(match.group(1), []).append(path)
    chosen = {}
    for lesson, paths in sorted(by_lesson.items()):
        chosen[lesson] = max(paths, key=lambda p: p.stat().st_mtime)
        if len(paths) > 1:
            others = ", ".join(p.name for p in paths if p != chosen[lesson])
            notes.append(f"{folder}: several notebooks for lesson {lesson}; grading the newest, "
                         f"{chosen[lesson].name} (not {others}); name a file to grade another one")
    return chosen


def find_submissions(args, lessons):
    """([Submission], notes, problems) for the command-line arguments.

    A folder holding lesson notebooks is one learner's (learner = the folder's name); a folder
    without any, but with sub-folders that hold some, is a class (one learner per sub-folder); a
    file is one notebook (learner = its folder's name)."""
    found, notes, problems = [], [], []
    known = f"NN one of {', '.join(lessons)}"
    for arg in args:
        path = Path(arg)
        if path.is_file():
            match = NOTEBOOK_NAME.match(path.name)
            if match and match.group(1) in lessons:
                found.append(Submission(path.resolve().parent.name, match.group(1), path))
            else:
                problems.append(f"{arg}: not a lesson notebook (expected a file named NN_*.ipynb, {known})")
        elif path.is_dir():
            mine = _lesson_notebooks(path, lessons, notes)
            members = [d for d in sorted(path.iterdir()) if d.is_dir() and not d.name.startswith(".")]
            if mine:
                found += [Submission(path.resolve().name, lesson, p) for lesson, p in mine.items()]
                skipped = [d.name for d in members if _lesson_notebooks(d, lessons, [])]
                if skipped:
                    notes.append(f"{arg}: graded as the notebooks of learner {path.resolve().name!r}; its sub-folders "
                                 f"{', '.join(skipped)} are not graded (name them to grade them)")
                continue
            graded = 0
            for member in members:
                theirs = _lesson_notebooks(member, lessons, notes)
                found += [Submission(member.name, lesson, p) for lesson, p in theirs.items()]
                graded += bool(theirs)
            if not graded:
                problems.append(f"{arg}: no lesson notebooks (NN_*.ipynb, {known}) in it or in its sub-folders")
        else:
            problems.append(f"{arg}: no such file or folder")
    seen = {}
    for sub in found:
        key = (sub.learner, sub.lesson)
        if key in seen and seen[key].resolve() != sub.path.resolve():
            problems.append(f"two notebooks for learner {sub.learner!r}, lesson {sub.lesson}: {seen[key]} and "
                            f"{sub.path} (learners are named after their folders: rename one)")
        seen.setdefault(key, sub.path)
    unique = {(s.learner, s.lesson): s for s in found}
    return sorted(unique.values()), notes, problems


def summary_table(rows):
    """Learners down, lessons across (passed/total), and the total."""
    lessons = sorted({r.lesson for r in rows})
    learners = sorted({r.learner for r in rows})
    cell = {}
    for r in rows:
        done, total = cell.get((r.learner, r.lesson), (0, 0))
        cell[(r.learner, r.lesson)] = (done + (r.outcome == "passed"), total + 1)
    width = max([len("learner")] + [len(learner) for learner in learners])
    lines = [f"{'learner':<{width}}  " + "  ".join(f"{lesson:>5}" for lesson in lessons) + "    total"]
    for learner in learners:
        marks = [cell.get((learner, lesson)) for lesson in lessons]
        done = sum(m[0] for m in marks if m)
        total = sum(m[1] for m in marks if m)
        lines.append(f"{learner:<{width}}  " + "  ".join(f"{(f'{m[0]}/{m[1]}' if m else '-'):>5}" for m in marks)
                     + f"  {done:>3}/{total:<3}")
    return "\n".join(lines)


def write_csv(rows, path):
    from .files import atomic_write_text

    text = io.StringIO()
    writer = csv.writer(text)
    writer.writerow(Row._fields[:3] + ("outcome", "message"))
    writer.writerows(rows)
    atomic_write_text(text.getvalue(), path)


def available_lessons():
    """The lessons that have checks ("00", "01", ...), without importing them."""
    from . import checks

    return sorted(m.name[len("lesson"):] for m in pkgutil.iter_modules(checks.__path__)
                  if re.fullmatch(r"lesson\d\d", m.name))


def module_checks(module):
    """The checks of one lesson's check module, in the lesson's order."""
    from .checks.core import REGISTRY, lesson_of

    return REGISTRY.get(lesson_of(module.__name__), {}).values()


def grade(args, out="grades.csv", timeout=600, cell_timeout=300, check_timeout=60, jobs=1, kernel="python3",
          log=print):
    """Grade the notebooks named by `args` (files or folders); write the CSV; the exit status."""
    import nbformat

    lessons = available_lessons()
    submissions, notes, problems = find_submissions(args, lessons)
    checks, broken = {}, []
    for lesson in sorted({sub.lesson for sub in submissions}):
        try:
            checks[lesson] = list(module_checks(importlib.import_module(f"{__package__}.checks.lesson{lesson}")))
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

    def one(sub):
        began = time.monotonic()
        got, graded, remarks = grade_notebook(sub, checks[sub.lesson], timeout, min(cell_timeout, timeout),
                                              check_timeout, kernel)
        with lock:
            done[0] += 1
            passed = sum(r.outcome == "passed" for r in got)
            log(f"[{done[0]}/{len(submissions)}] {sub.learner} {sub.path.name}: {passed}/{len(got)} passed "
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
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = argparse.ArgumentParser(
        prog="python -m course_utils.grade",
        description="Grade learners' notebooks (files NN_*.ipynb) with the course's own checks.")
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
    options = parser.parse_args(argv)
    return grade(options.paths, options.out, options.timeout, options.cell_timeout, options.check_timeout,
                 options.jobs, options.kernel)


if __name__ == "__main__":
    sys.exit(main())
