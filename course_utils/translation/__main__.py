"""Train the course's Transformer on Multi30k German -> English, decode, and score with sacreBLEU.

    python -m course_utils.translation --preset smoke                    # CI: seconds
    python -m course_utils.translation --preset cpu                      # a 2-core CPU: about 40 minutes
    python -m course_utils.translation --preset gpu                      # a Colab GPU
    python -m course_utils.translation --preset cpu --resume             # go on from the last checkpoint
    torchrun --standalone --nproc_per_node=4 -m course_utils.translation --preset gpu
                                                       # 4 GPUs, DistributedDataParallel (distributed.py)

Runs go to `--out`, by default `runs/<preset>` in the runs folder (see run.py). A folder that holds a
run is never replaced silently: go on with it (`--resume`, with the run's own settings), give another
`--out`, or say `--overwrite`. Every argument is checked before any work; a problem (an impossible
setting, missing data, a damaged file) is one line on stderr, `error: ...`, and exit status 2 (1 for
data and files); Ctrl-C saves and exits with 130.

`--batch-tokens` is the EFFECTIVE batch size: padded tokens per optimizer step, summed over the
`--accum-steps` micro-batches and the processes. It does not depend on the number of processes,
and neither does the learning-rate schedule (it counts optimizer steps).
"""
import argparse
import json
import sys
from pathlib import Path

from ..data.multi30k import Multi30kError
from . import distributed
from .batching import accumulation_steps, micro_batch_tokens
from .checkpoints import CheckpointError
from .data import TokenizerFileError
from .presets import PRESETS, ConfigError, check_config, make_config
from .run import default_out, run
from .trainer import TrainingStopped

PROG = "python -m course_utils.translation"


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog=PROG, description="Train a Transformer on Multi30k de->en and report sacreBLEU.")
    p.add_argument("--preset", choices=sorted(PRESETS), default="smoke")
    p.add_argument("--out", help="output folder (checkpoints, report.json); default: runs/<preset> in the "
                                 "runs folder ($COURSE_RUNS_DIR, else runs/ at the repository root)")
    p.add_argument("--resume", action="store_true", help="continue the run kept in OUT (its own settings; "
                                                         "--epochs may grow)")
    p.add_argument("--overwrite", action="store_true", help="replace the run kept in OUT by a new one")
    p.add_argument("--epochs", type=int)
    p.add_argument("--time-budget", type=float, dest="time_budget_minutes",
                   help="a hard cap on the minutes of training (the result then depends on the machine)")
    p.add_argument("--checkpoint-minutes", type=float, help="write a checkpoint this often within an epoch "
                                                              "(default 5; 0 = after every step)")
    p.add_argument("--device", help="cpu, cuda, cuda:1 (default: a GPU when found)")
    p.add_argument("--amp", choices=["auto", "bf16", "fp16", "off"])
    p.add_argument("--compile", action="store_true", default=None, help="torch.compile the model")
    p.add_argument("--max-train-pairs", type=int)
    p.add_argument("--max-eval-pairs", type=int)
    p.add_argument("--batch-tokens", type=int)
    p.add_argument("--accum-steps", type=int, help="micro-batches per process and optimizer step")
    p.add_argument("--micro-batch-tokens", type=int, help="tokens per micro-batch and process: sets "
                   "--accum-steps to batch_tokens / (processes x this), the same global batch for any N")
    p.add_argument("--dropout", type=float)
    p.add_argument("--lr", type=float)
    p.add_argument("--beam-size", type=int)
    p.add_argument("--length-penalty", type=float)
    p.add_argument("--threads", type=int)
    p.add_argument("--seed", type=int)
    p.add_argument("--no-progress", action="store_true")
    return p.parse_args(argv)


def configure(args, world_size):
    """The run's Config from the arguments, checked whole (a ConfigError names every problem)."""
    overrides = {k: v for k, v in vars(args).items()
                 if k not in ("preset", "out", "resume", "overwrite", "no_progress", "micro_batch_tokens")}
    cfg = make_config(args.preset, **overrides)
    if args.micro_batch_tokens is not None and args.accum_steps is not None:
        raise ConfigError("give --accum-steps or --micro-batch-tokens, not both")
    if args.resume and args.overwrite:
        raise ConfigError("give --resume (go on with the run) or --overwrite (replace it), not both")
    if args.micro_batch_tokens is not None:
        if args.micro_batch_tokens < 1:
            raise ConfigError(f"--micro-batch-tokens must be >= 1, got {args.micro_batch_tokens}")
        cfg.accum_steps = accumulation_steps(cfg.batch_tokens, args.micro_batch_tokens, world_size)
    check_config(cfg)
    micro_batch_tokens(cfg, world_size)
    return cfg


def main(argv=None):
    args = parse_args(argv)
    dist = None
    try:   # an impossible configuration, missing data or a damaged file stops here with one message
        dist = distributed.setup(args.device or make_config(args.preset).device)
        cfg = configure(args, dist.world_size)
        out = Path(args.out) if args.out else default_out(cfg.preset)
        dist.print(f"{dist.world_size} process(es), backend {dist.backend or 'none'}: global batch "
                   f"{cfg.batch_tokens} tokens = {micro_batch_tokens(cfg, dist.world_size)} per micro-batch x "
                   f"{dist.world_size} process(es) x {cfg.accum_steps} accumulation step(s); the lr schedule "
                   f"counts optimizer steps; output in {out}")
        command = " ".join([PROG] + list(sys.argv[1:] if argv is None else argv))
        report = run(cfg, out, resume=args.resume, show_progress=not args.no_progress and dist.is_main,
                     dist=dist, command=command, overwrite=args.overwrite)
    except ConfigError as error:
        distributed.report_error(error)
        return 2
    except (Multi30kError, TokenizerFileError, CheckpointError) as error:
        distributed.report_error(error)
        return 1
    except TrainingStopped as stopped:
        if dist is None or dist.is_main:
            print(stopped, file=sys.stderr, flush=True)
        return 130
    finally:
        distributed.cleanup()
    if not dist.is_main:
        return 0
    print(json.dumps({k: report[k] for k in ("preset", "device", "threads", "steps", "epochs", "train_seconds",
                                             "tokens_per_second", "bleu_greedy", "bleu_beam",
                                             "sacrebleu_signature")}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
