"""Train lesson 12's language model on Multi30k's English captions and measure it against a bigram.

    python -m course_utils.language_model --preset full                  # the lesson's run (lesson 12 says how long)
    python -m course_utils.language_model --preset mid                   # minutes: recognisable captions
    python -m course_utils.language_model --preset fast                  # seconds
    python -m course_utils.language_model --preset full --resume         # go on from the last checkpoint
    python -m course_utils.language_model --preset full --reference lesson12_full   # + the lesson's reference file

The pipeline's command line (course_utils/pipeline/cli.py: --out, --resume, --overwrite, --threads, --amp,
--time-budget, --reference, one-line errors) with the language model's options (--steps, --batch-size,
--dropout). Runs go to `--out`, by default `runs/language_model-<preset>` in the runs folder.
"""
import sys

from ..pipeline import cli
from .task import LanguageModelTask


def main(argv=None):
    return cli.main(LanguageModelTask, argv)


if __name__ == "__main__":
    sys.exit(main())
