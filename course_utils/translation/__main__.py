"""Train the course's Transformer on Multi30k German -> English, decode, and score with sacreBLEU.

    python -m course_utils.translation --preset smoke                    # CI: seconds
    python -m course_utils.translation --preset cpu                      # a 2-core CPU: about 40 minutes
    python -m course_utils.translation --preset gpu                      # a Colab GPU
    python -m course_utils.translation --preset cpu --resume             # go on from the last checkpoint
    torchrun --standalone --nproc_per_node=4 -m course_utils.translation --preset gpu
                                                       # 4 GPUs, DistributedDataParallel (pipeline/distributed.py)

The pipeline's command line (course_utils/pipeline/cli.py: --out, --resume, --overwrite, --threads, --amp,
--time-budget, --reference, one-line errors) with the translator's options (translation/task.py). Runs go
to `--out`, by default `runs/<preset>` in the runs folder.

`--batch-tokens` is the GLOBAL batch: padded tokens per optimizer step, summed over the `--accum-steps`
micro-batches and the processes. It does not depend on the number of processes, and neither do the
steps of an epoch nor the learning-rate schedule (it counts optimizer steps).
"""
import sys

from ..pipeline import cli
from .task import TranslationTask

PROG = TranslationTask.command


def main(argv=None):
    return cli.main(TranslationTask, argv)


if __name__ == "__main__":
    sys.exit(main())
