"""The grader's command: find the notebooks, grade each in its sandbox, write the CSV, print the table.

    course-grade submissions/alice submissions/bob        # one folder per learner
    course-grade submissions                              # a folder of learner folders
    python -P -m course_utils.checks.grading submissions  # the same (-P: nothing imported from the working folder)
    course-grade alice/03_bahdanau_attention.ipynb        # one notebook (learner: its folder)
    options: --out grades.csv  --timeout 600  --cell-timeout 300  --check-timeout 60  --jobs 1
             --memory 4  --processes 256  --withhold-references  --no-sandbox

Each notebook is graded on its own (Linux; the sandbox needs bubblewrap):
1. it runs in a fresh kernel, in a sandbox (`sandbox.py`: an allow-list: Python, the grader's copy of the
   package, the data, a copy of the learner's own folder, its own sockets; no network; an unprivileged user;
   limits on processes and memory), at the tiny sizes (COURSE_FAST=1), on one thread, like "Run All" but
   going on past cells that fail; a cell that runs longer than --cell-timeout is interrupted, and the whole
   notebook gets --timeout seconds;
2. then the judge, a process outside the sandbox that imports the checks from the grader's own copy
   of the package (taken when the command starts), runs each check on the learner's function or
   class, which it can only call (with data, from seeds the notebook cannot know) through the kernel
   (`judge.py`); each check gets --check-timeout seconds. Nothing the notebook prints, hooks or
   patches reaches the verdict.

Outcomes: passed, wrong, not implemented (as the checks say); copied (while it was checked, the answer ran
the course's own reference for that exercise); missing (no function or class of that name was defined in
the notebook); timeout (the check, or the notebook before the exercise's cell ran, ran out of time);
error (the kernel died, the notebook is a link or could not be read, or the grader failed on it). The CSV
has one row per exercise: learner, lesson, exercise, outcome, message; a table of passed/total per learner
and lesson is printed at the end. Exit status: 0 when every notebook was graded (a crash, a timeout, a
link are grades), 1 when the grader itself failed on a notebook (or could not write the CSV), 2 when an
argument is not a readable lesson notebook or a folder of them, when a path could be taken for an
option, or when no sandbox can start (and --no-sandbox was not given); 130 when stopped (Ctrl-C), with
every process it started ended and its temporary folders removed, and no CSV written.
"""
import argparse
import importlib
import os
import pkgutil
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from . import launch, sandbox, withhold
from .report import OUTCOMES, Row, printable, summary_table, write_csv
from .submissions import find_submissions

PACKAGE_DIR = Path(__file__).resolve().parents[2]   # course_utils/
GiB = 1 << 30


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
    """The grader's own copy of course_utils (the judges import the checks from it, the kernels run it): what
    a notebook, or anyone, changes in the package while the class is graded does not reach the verdicts."""
    shutil.copytree(PACKAGE_DIR, Path(into) / "course_utils", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return Path(into)


def _readable(submissions, checks, problems):
    """(the submissions to run, the rows of those graded without running: links, unreadable files)."""
    import nbformat

    rows, readable = [], []
    for sub in submissions:
        if sub.problem:
            rows += [Row(sub.learner, sub.lesson, c.exercise, "error", f"not graded: {sub.problem}")
                     for c in checks[sub.lesson]]
            continue
        try:
            nbformat.read(sub.path, as_version=4)
            readable.append(sub)
        except Exception as error:  # noqa: BLE001 - any file that is not a notebook
            reason = (str(error) or "?").splitlines()[0][:200]
            problem = f"could not read the notebook: {type(error).__name__}: {reason}"
            problems.append(f"{sub.path}: {problem}")
            rows += [Row(sub.learner, sub.lesson, c.exercise, "error", problem) for c in checks[sub.lesson]]
    return readable, rows


def grade(args, out="grades.csv", timeout=600, cell_timeout=300, check_timeout=60, jobs=1, kernel="python3",
          log=print, sandboxed=True, withhold_references=False, limits=None):
    """Grade the notebooks named by `args` (files or folders); write the CSV; the exit status."""
    say = lambda text="": log(printable(text))   # (a name cannot put an escape sequence or a line of its own)
    if sandboxed:
        problem = sandbox.unavailable()
        if problem:
            say(f"error: no sandbox: {problem}. The grader runs learners' code only in a sandbox; to grade "
                "without one (every notebook can then read and change your files, other learners' work and "
                "the package, and use the network), pass --no-sandbox.")
            return 2
    else:
        say("warning: --no-sandbox: the notebooks run with your rights (they can read and change your files, other "
            "learners' work and the package, and use the network); the checks still run outside them.")
    lessons = available_lessons()
    submissions, notes, problems = find_submissions(args, lessons)
    checks, broken = {}, []
    for lesson in sorted({sub.lesson for sub in submissions}):
        try:
            checks[lesson] = list(module_checks(importlib.import_module(f"course_utils.checks.lesson{lesson}")))
        except Exception as error:  # noqa: BLE001 - a broken installation: say so, grade the other lessons
            say(f"error: the checks of lesson {lesson} cannot be imported ({type(error).__name__}: {error}); "
                "its notebooks are not graded")
            broken += [sub for sub in submissions if sub.lesson == lesson]
    submissions, rows = _readable([sub for sub in submissions if sub.lesson in checks], checks, problems)
    for note in notes:
        say(f"note: {note}")
    for problem in problems:
        say(f"error: {problem}")
    failed, lock, done = list(broken), threading.Lock(), [0]

    with tempfile.TemporaryDirectory(prefix="course-grader-") as own:
        root = _snapshot(own)
        packages = {lesson: withhold.kernel_copy(root, lesson, checks[lesson], Path(own) / f"kernel-{lesson}")
                    for lesson in checks} if withhold_references else {}

        def one(sub):
            began = time.monotonic()
            try:
                got = launch.grade_notebook(sub, checks[sub.lesson], timeout, min(cell_timeout, timeout),
                                            check_timeout, kernel, sandboxed=sandboxed, grader_root=root,
                                            package=packages.get(sub.lesson), limits=limits)
            except launch.Stopped:
                return []
            except Exception as error:  # noqa: BLE001 - e.g. a full disk: this notebook, not the class
                message = f"the grader failed on this notebook: {type(error).__name__}: {error}"
                got = launch.Graded([Row(sub.learner, sub.lesson, c.exercise, "error", message)
                                     for c in checks[sub.lesson]], False, [])
            with lock:
                done[0] += 1
                passed = sum(r.outcome == "passed" for r in got.rows)
                say(f"[{done[0]}/{len(submissions)}] {sub.learner!r} {sub.path.name}: {passed}/{len(got.rows)} passed "
                    f"({time.monotonic() - began:.0f} s)" + "".join(f"; {remark}" for remark in got.notes))
                if not got.graded:
                    failed.append(sub)
                    problem = next((r.message for r in got.rows if r.outcome == "error"), "")
                    say(f"error: {sub.path}: not graded: {problem[:300]}")
            return got.rows

        pool = ThreadPoolExecutor(max(1, jobs))
        try:
            for got in pool.map(one, submissions):
                rows += got
        except KeyboardInterrupt:
            signal.signal(signal.SIGINT, signal.SIG_IGN)   # (a second Ctrl-C must not cut the cleaning short)
            say("")
            say("stopped: ending every notebook's kernel and sandbox, removing the temporary folders; "
                "no grades written")
            launch.stop_all()
            pool.shutdown(wait=True, cancel_futures=True)
            return 130
        pool.shutdown(wait=True)
    rows.sort(key=lambda r: (r.learner, r.lesson))  # (stable: each lesson's exercises stay in order)
    if rows:
        try:
            write_csv(rows, out)
        except (OSError, ValueError) as error:   # (ValueError: a text that cannot be written; none should be)
            say(f"error: could not write {out}: {error}")
            failed.append(out)
        say()
        for line in summary_table(rows).splitlines():   # (its names are escaped: one_line)
            say(line)
        counts = {o: sum(r.outcome == o for r in rows) for o in OUTCOMES}
        say("outcomes: " + ", ".join(f"{n} {o}" for o, n in counts.items() if n) + f"; written to {out}")
    if problems or not (submissions or rows):
        return 2
    return 1 if failed else 0


def _looks_like_an_option(argv):
    """The first argument that is an option here AND names an existing file or folder (`--no-sandbox`, or
    `--timeout=1`, from a shell glob), or None: a path is never taken for an option."""
    for arg in argv:
        if arg == "--":
            return None
        if arg.startswith("-") and (os.path.lexists(arg) or os.path.lexists(arg.split("=", 1)[0])):
            return arg
    return None


def main(argv=None):
    from .worker import skip_slow_imports

    skip_slow_imports()
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = argparse.ArgumentParser(
        prog="course-grade",
        description="Grade learners' notebooks (files NN_*.ipynb) with the course's own checks, each notebook "
                    "in a sandbox, the checks outside it. Paths after -- are never options.")
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
    parser.add_argument("--memory", type=float, default=sandbox.Limits().memory / GiB,
                        help="GiB of memory (address space) for each process of a notebook (default: 4)")
    parser.add_argument("--processes", type=int, default=sandbox.Limits().processes,
                        help="processes and threads a notebook may run at once (default: 256)")
    parser.add_argument("--withhold-references", action="store_true",
                        help="the kernels get no reference of the lesson they are graded on: the lesson goes on "
                             "with the learner's own answers (for private answers; docs/instructors.md)")
    parser.add_argument("--no-sandbox", action="store_true",
                        help="run the notebooks without the sandbox (only where bubblewrap cannot run, and only "
                             "for notebooks you trust: they can then read and change your files)")
    clash = _looks_like_an_option(argv)
    if clash is not None:
        print(f"error: {printable(clash)!r} is an option of the grader AND a file or folder here (a shell glob "
              f"such as * in the class folder?): name it ./{printable(clash)} or put it after --; nothing graded",
              file=sys.stderr)
        return 2
    options = parser.parse_args(argv)
    limits = sandbox.Limits(processes=options.processes, memory=int(options.memory * GiB))
    if threading.current_thread() is threading.main_thread():   # `kill` stops the grader as Ctrl-C does
        signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        return grade(options.paths, options.out, options.timeout, options.cell_timeout, options.check_timeout,
                     options.jobs, options.kernel, sandboxed=not options.no_sandbox,
                     withhold_references=options.withhold_references, limits=limits)
    except KeyboardInterrupt:   # (before or after the notebooks ran: nothing of the grader's is left running)
        launch.stop_all()
        print("\nstopped: no grades written", file=sys.stderr)
        return 130
