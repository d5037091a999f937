"""`python -m course_utils.checks.grading ...`: the grader's command (see `command.py`)."""
import sys

from .command import main

sys.exit(main())
