"""The grader's command: find the notebooks, grade each in its sandbox, write the CSV, print the table.

    course-grade submissions/alice submissions/bob        # one folder per learner
    course-grade submissions                              # a folder of learner folders
    python -P -m course_utils.checks.grading submissions  # the same (-P: nothing imported from the working folder)
    course-grade alice/03_bahdanau_attention.ipynb        # one notebook (learner: its folder)
    course-grade download --roster roster.csv --canvas canvas.csv --moodle moodle.csv   # a platform's bulk download
    course-grade class --shard 3/8 --out grades-3.csv     # one share of the class; join: --merge grades-*.csv
    options: --out grades.csv  --fresh  --roster FILE  --points FILE  --due TIME  --canvas FILE  --moodle FILE
             --shard K/N  --merge CSV...  --timeout 600  --cell-timeout 300  --check-timeout 60  --jobs 1
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
error (the kernel died, the notebook is a link or could not be read, or the grader failed on it). A notebook
with a timeout is graded again, alone, once the others are (a machine busy with the others costs time, not a
grade). The results
are merged into the CSV (gradebook.py: a row per exercise with its points, and a row per file not graded), with
the class view beside it and the platforms' gradebooks when asked; a table of passed/total per learner and
lesson is printed at the end. Exit status: 0 when every notebook was graded (a crash, a timeout, a
link are grades), 1 when the grader itself failed on a notebook (or could not write the CSV), 2 when an
argument is not a readable lesson notebook or a folder of them, when a path could be taken for an
option, or when no sandbox can start (and --no-sandbox was not given); 130 when stopped (Ctrl-C), with
every process it started ended and its temporary folders removed, and no CSV written.
"""
import argparse
import hashlib
import importlib
import os
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
from .lessons import available_lessons, module_checks  # noqa: F401 - (the package's names)
from .report import OUTCOMES, Row, printable, summary_table
from .submissions import find_submissions

PACKAGE_DIR = Path(__file__).resolve().parents[2]   # course_utils/
GiB = 1 << 30


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


def shard_of(learner, lesson, count):
    """The shard (0 .. count-1) a notebook falls in: a hash of its learner and lesson, the same on every machine."""
    digest = hashlib.sha256(f"{learner}\0{lesson}".encode("utf-8", "surrogateescape")).hexdigest()
    return int(digest[:12], 16) % count


def parse_shard(text):
    """(K, N) of "K/N" (1 <= K <= N), or an argparse error."""
    found = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", str(text))
    if not found or not 1 <= int(found[1]) <= int(found[2]):
        raise argparse.ArgumentTypeError(f"expected K/N with 1 <= K <= N (e.g. 2/8), got {text!r}")
    return int(found[1]), int(found[2])


def _timed_out(rows):
    return any(row.outcome == "timeout" for row in rows)


REGRADED = ("(Graded again, alone, after the others: its first grading ran out of time while {jobs} notebook(s) "
            "were graded at once.)")


def grade(args, out="grades.csv", timeout=600, cell_timeout=300, check_timeout=60, jobs=1, kernel="python3",
          log=print, sandboxed=True, withhold_references=False, limits=None, roster=None, points=None, due=None,
          shard=None, canvas=None, moodle=None, fresh=False, merge_from=()):
    """Grade the notebooks named by `args` (files or folders); merge their rows into the CSV `out`, write the class
    view beside it (and the Canvas / Moodle gradebooks when asked); the exit status.

    roster: roster.Roster (who is who); points: points.Points (default: the course's points.toml); due: a datetime
    (later notebooks are marked late); shard: (K, N), grade only the K-th of N shares of the notebooks; fresh: replace
    `out` instead of merging into it; merge_from: CSVs of other runs (shards) merged in too."""
    from . import gradebook
    from . import roster as rosters

    say = lambda text="": log(printable(text))   # (a name cannot put an escape sequence or a line of its own)
    roster = roster if roster is not None else rosters.Roster()
    if args and sandboxed:
        problem = sandbox.unavailable()
        if problem:
            say(f"error: no sandbox: {problem}. The grader runs learners' code only in a sandbox; to grade "
                "without one (every notebook can then read and change your files, other learners' work and "
                "the package, and use the network), pass --no-sandbox.")
            return 2
    elif args:
        say("warning: --no-sandbox: the notebooks run with your rights (they can read and change your files, other "
            "learners' work and the package, and use the network); the checks still run outside them.")
    try:
        earlier = [] if fresh else gradebook.read(out)
        for other in merge_from:
            if not Path(other).exists():
                raise gradebook.GradebookError(f"{other}: no such file (a shard's results to merge)")
            earlier = gradebook.merge(earlier, gradebook.read(other))
    except gradebook.GradebookError as error:
        say(f"error: {error}; nothing graded")
        return 2
    if points is None:
        from . import points as pointfiles

        try:
            points = pointfiles.load()
        except pointfiles.PointsError as error:
            say(f"error: {error}; nothing graded")
            return 2
    lessons = available_lessons()
    submissions, notes, problems = find_submissions(args, lessons, roster) if args else ([], [], [])
    skipped = [(path, reason) for note in notes for path, reason in getattr(note, "files", ())]
    if shard is not None:
        number, count = shard
        everyone = len(submissions)
        submissions = [sub for sub in submissions if shard_of(sub.learner, sub.lesson, count) == number - 1]
        skipped = skipped if number == 1 else []   # (every shard sees them: the first lists them)
        say(f"shard {number}/{count}: {len(submissions)} of the {everyone} notebooks")
    checks, broken = {}, []
    for lesson in sorted({sub.lesson for sub in submissions}):
        try:
            checks[lesson] = list(module_checks(importlib.import_module(f"course_utils.checks.lesson{lesson}")))
        except Exception as error:  # noqa: BLE001 - a broken installation: say so, grade the other lessons
            say(f"error: the checks of lesson {lesson} cannot be imported ({type(error).__name__}: {error}); "
                "its notebooks are not graded")
            broken += [sub for sub in submissions if sub.lesson == lesson]
    subs = {(sub.learner, sub.lesson): sub for sub in submissions}
    submissions, rows = _readable([sub for sub in submissions if sub.lesson in checks], checks, problems)
    for note in notes:
        say(f"note: {note}")
    for problem in problems:
        say(f"error: {problem}")
    failed, lock, done = list(broken), threading.Lock(), [0]
    graded_at = gradebook.now()

    with tempfile.TemporaryDirectory(prefix="course-grader-") as own:
        root = _snapshot(own)
        packages = {lesson: withhold.kernel_copy(root, lesson, checks[lesson], Path(own) / f"kernel-{lesson}")
                    for lesson in checks} if withhold_references else {}

        def one(sub, again=False):
            began = time.monotonic()
            try:
                got = launch.grade_notebook(sub, checks[sub.lesson], timeout, min(cell_timeout, timeout),
                                            check_timeout, kernel, sandboxed=sandboxed, grader_root=root,
                                            package=packages.get(sub.lesson), limits=limits)
            except launch.Stopped:
                return []
            except Exception as error:  # noqa: BLE001 - e.g. a full disk: this notebook, not the class
                message = (f"the grader failed on {sub.path} (while grading it in {own}): {type(error).__name__}: "
                           f"{launch._with_path(error)}")
                got = launch.Graded([Row(sub.learner, sub.lesson, c.exercise, "error", message)
                                     for c in checks[sub.lesson]], False, [])
            with lock:
                done[0] += 1
                passed = sum(r.outcome == "passed" for r in got.rows)
                count = "again, alone" if again else f"{done[0]}/{len(submissions)}"
                say(f"[{count}] {sub.learner!r} {sub.path.name}: {passed}/{len(got.rows)} passed "
                    f"({time.monotonic() - began:.0f} s)" + "".join(f"; {remark}" for remark in got.notes))
                if not got.graded:
                    failed.append(sub)
                    problem = next((r.message for r in got.rows if r.outcome == "error"), "")
                    say(f"error: {sub.path}: not graded: {problem[:300]}")
            return got.rows

        pool = ThreadPoolExecutor(max(1, jobs))
        try:
            results = list(pool.map(one, submissions))
            pool.shutdown(wait=True)
            # a notebook that ran out of time is graded again, alone, once every other one is done: notebooks graded
            # beside it cost time, not its grade (the message says so; an endless loop is still a timeout)
            late = [index for index, got in enumerate(results) if _timed_out(got)]
            if late:
                say(f"{len(late)} notebook(s) ran out of time: grading them again, one at a time, now that the others "
                    "are done")
            for index in late:
                again = one(submissions[index], again=True)
                if again:
                    results[index] = [row._replace(message=f"{row.message} {REGRADED.format(jobs=max(1, jobs))}")
                                      for row in again]
            for got in results:
                rows += got
        except KeyboardInterrupt:
            signal.signal(signal.SIGINT, signal.SIG_IGN)   # (a second Ctrl-C must not cut the cleaning short)
            say("")
            say("stopped: ending every notebook's kernel and sandbox, removing the temporary folders; "
                "no grades written")
            launch.stop_all()
            pool.shutdown(wait=True, cancel_futures=True)
            return 130
    rows.sort(key=lambda r: (r.learner, r.lesson))  # (stable: each lesson's exercises stay in order)
    new = gradebook.from_rows(rows, subs, points, graded_at, due) + gradebook.not_graded(skipped, graded_at)
    records = gradebook.merge(earlier, new)
    if new or merge_from or not args:
        view = Path(out).with_suffix(".html")
        try:
            gradebook.write(out, records)
            gradebook.write_text(view, gradebook.class_view(records))
            for path, make in ((canvas, gradebook.canvas), (moodle, gradebook.moodle)):
                if path:
                    gradebook.write_text(path, make(records, roster))
        except (OSError, ValueError) as error:   # (ValueError: a text that cannot be written; none should be)
            say(f"error: could not write {getattr(error, 'filename', None) or out}: {error}")
            failed.append(out)
        if rows:
            say()
            for line in summary_table(rows).splitlines():   # (its names are escaped: one_line)
                say(line)
            counts = {o: sum(r.outcome == o for r in rows) for o in OUTCOMES}
            say("outcomes: " + ", ".join(f"{n} {o}" for o, n in counts.items() if n) + f"; written to {out}")
        for line in gradebook.not_graded_lines(new):
            say(line)
        earned, possible = gradebook.totals(records)
        say(f"the class ({len(earned)} learner(s), {gradebook.number_text(possible.get('total', 0))} points each): "
            f"{out}, {view}" + "".join(f", {path}" for path in (canvas, moodle) if path))
    if problems or not (submissions or rows or merge_from or not args):
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
    from . import gradebook
    from . import points as pointfiles
    from . import roster as rosters
    from .worker import skip_slow_imports

    skip_slow_imports()
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = argparse.ArgumentParser(
        prog="course-grade",
        description="Grade learners' notebooks (files NN_*.ipynb, or a platform's bulk download) with the course's "
                    "own checks, each notebook in a sandbox, the checks outside it; merge the results into the "
                    "class's CSV, its class view (.html) and, when asked, the Canvas / Moodle gradebooks. Paths after "
                    "-- are never options.")
    parser.add_argument("paths", nargs="*", metavar="PATH",
                        help="a learner's folder, a folder of learner folders (or of a platform's bulk download), or "
                             "one notebook; none: only merge (--merge) or export (--canvas, --moodle) the CSV")
    parser.add_argument("--out", default="grades.csv",
                        help="the class's CSV: results are merged into it (default: grades.csv; the class view is "
                             "written beside it, .html)")
    parser.add_argument("--fresh", action="store_true", help="replace --out instead of merging into it")
    parser.add_argument("--roster", help="a CSV of the learners: id, name (as the platform has them), folder "
                                         "(docs/instructors.md); a Canvas gradebook export is one")
    parser.add_argument("--points", help="the points file (default: the course's checks/grading/points.toml)")
    parser.add_argument("--due", help="the deadline (ISO 8601, e.g. 2025-05-01T23:59 or ...+02:00): later notebooks "
                                      "are marked late")
    parser.add_argument("--shard", type=parse_shard, metavar="K/N",
                        help="grade only the K-th of N shares of the notebooks (the same share on every machine); "
                             "join the shards' CSVs with --merge")
    parser.add_argument("--merge", nargs="+", default=[], metavar="CSV",
                        help="merge these CSVs (e.g. the shards') into --out")
    parser.add_argument("--canvas", help="also write the Canvas gradebook import (a column per lesson) to this file")
    parser.add_argument("--moodle", help="also write the Moodle grade import (a column per lesson) to this file")
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
    if not (options.paths or options.merge or options.canvas or options.moodle):
        parser.error("nothing to do: name the notebooks or folders to grade (or --merge CSVs, or --canvas / "
                     "--moodle FILE to export --out)")
    try:
        roster = rosters.load(options.roster)
        points = pointfiles.load(options.points)
        due = gradebook.parse_time(options.due) if options.due else None
    except (rosters.RosterError, pointfiles.PointsError) as error:
        print(f"error: {printable(error)}; nothing graded", file=sys.stderr)
        return 2
    except ValueError as error:
        print(f"error: --due {printable(options.due)!r} is not an ISO 8601 time ({error}); nothing graded",
              file=sys.stderr)
        return 2
    limits = sandbox.Limits(processes=options.processes, memory=int(options.memory * GiB))
    if threading.current_thread() is threading.main_thread():   # `kill` stops the grader as Ctrl-C does
        signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        return grade(options.paths, options.out, options.timeout, options.cell_timeout, options.check_timeout,
                     options.jobs, options.kernel, sandboxed=not options.no_sandbox,
                     withhold_references=options.withhold_references, limits=limits, roster=roster, points=points,
                     due=due, shard=options.shard, canvas=options.canvas, moodle=options.moodle, fresh=options.fresh,
                     merge_from=options.merge)
    except KeyboardInterrupt:   # (before or after the notebooks ran: nothing of the grader's is left running)
        launch.stop_all()
        print("\nstopped: no grades written", file=sys.stderr)
        return 130
