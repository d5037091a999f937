"""The instructor's grader: each learner's notebook runs in a sandbox, the checks run outside it.

    python -m course_utils.checks.grading submissions --out grades.csv --jobs 2

- `command.py`      the command: finds the notebooks, grades them, writes the CSV, prints the table;
- `submissions.py`  which notebooks are graded, and every one that is not, with the reason;
- `worker.py`       one notebook: its kernel in the sandbox, its cells, then the judge (a worker process);
- `sandbox.py`      the sandbox (bubblewrap): what the notebook may read, write and reach;
- `judge.py`        the checks, run outside the kernel on what the learner's code returns;
- `channel.py`      the judge's end of the socket the kernel connects to (deadlines, interrupts);
- `remote.py`       the learner's functions and objects as the judge sees them (handles, data only);
- `kernel_side.py`  what runs inside the learner's kernel: it computes, it never judges;
- `wire.py`         how values cross between the two: JSON, arrays as .npy, never pickle from the kernel;
- `report.py`       the CSV (one row per exercise, every cell text, never a formula) and the table.
"""
from .command import available_lessons, grade, main, module_checks
from .report import OUTCOMES, Row, summary_table, write_csv
from .submissions import NOTEBOOK_NAME, Submission, find_submissions

__all__ = ["OUTCOMES", "NOTEBOOK_NAME", "Row", "Submission", "available_lessons", "find_submissions", "grade", "main",
           "module_checks", "summary_table", "write_csv"]
