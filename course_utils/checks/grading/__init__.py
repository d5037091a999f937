"""The instructor's grader: each learner's notebook runs in a sandbox, the checks run outside it.

    course-grade submissions --out grades.csv --jobs 2      # = python -P -m course_utils.checks.grading ...

- `command.py`      the command: finds the notebooks, grades them (a timed-out one again, alone, at the end; a
                    share of them: --shard), merges the results into the CSV, prints the table;
- `submissions.py`  which notebooks are graded (a platform's bulk download too), and every one that is not, with
                    the reason (links: never followed);
- `roster.py`       who is who on a learning platform: the roster file, the names of a bulk download's files;
- `points.py`       points per exercise, from `points.toml` (one file an instructor edits);
- `gradebook.py`    the class's results: the CSV (merged run after run), the class view, Canvas's and Moodle's imports;
- `autograde.py`    nbgrader's autograde in the sandbox, the checks outside the kernel (nbgrader_config.py);
- `launch.py`       one worker process per notebook, bounded in time; Ctrl-C ends every process it started;
- `worker.py`       one notebook: its kernel in the sandbox, its cells, then the judge (the worker process);
- `sandbox.py`      the sandbox (bubblewrap): an allow-list of what the notebook may read, write and reach;
- `confine.py`      the first program inside it: limits, an unprivileged user, the learner's files;
- `withhold.py`     private answers: the kernel's copy of the package without the lesson's references;
- `judge.py`        the checks, run outside the kernel on what the learner's code returns;
- `channel.py`      the judge's end of the socket the kernel connects to (deadlines, interrupts; the timeouts);
- `remote.py`       the learner's functions and objects as the judge sees them (handles, data only);
- `kernel_side.py`  what runs inside the learner's kernel (loaded by path): it computes, it never judges;
- `wire.py`         how values cross between the two: JSON, arrays as .npy, never pickle from the kernel;
- `report.py`       the grader's rows, the table, safe printing.
"""
from .command import grade, main
from .gradebook import write_csv
from .lessons import available_lessons, module_checks
from .report import OUTCOMES, Row, summary_table
from .submissions import NOTEBOOK_NAME, Submission, find_submissions

__all__ = ["OUTCOMES", "NOTEBOOK_NAME", "Row", "Submission", "available_lessons", "find_submissions", "grade", "main",
           "module_checks", "summary_table", "write_csv"]
