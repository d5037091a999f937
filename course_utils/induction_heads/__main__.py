"""Train lesson 14's attention-only Transformer on repeated random tokens; its induction heads form.

    python -m course_utils.induction_heads --preset full                  # the lesson's run
    python -m course_utils.induction_heads --preset fast                  # seconds
    python -m course_utils.induction_heads --preset full --resume         # go on from the last checkpoint
    python -m course_utils.induction_heads --preset full --reference lesson14_induction   # + the reference file

The pipeline's command line (course_utils/pipeline/cli.py: --out, --resume, --overwrite, --threads, --amp,
--time-budget, --reference, one-line errors) with the task's options (--steps, --eval-every). Runs go to
`--out`, by default `runs/induction_heads-<preset>` in the runs folder.
"""
import sys

from ..pipeline import cli
from .task import InductionTask


def main(argv=None):
    return cli.main(InductionTask, argv)


if __name__ == "__main__":
    sys.exit(main())
