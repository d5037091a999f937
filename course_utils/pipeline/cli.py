"""The command line every task of the pipeline shares: the same options, checks and errors for each model.

    python -m course_utils.translation --preset cpu              # lesson 10 (translation/__main__.py)
    python -m course_utils.language_model --preset full          # lesson 12 (language_model/__main__.py)
    sys.exit(cli.main(MyTask))                                   # a new task's __main__.py: the same command line

Options every task has: --preset, --out (default: the task's folder in the runs folder), --resume (go on
with the run kept in --out, with its own settings; refused where there is nothing to resume), --overwrite
(replace the run kept there; without it a new run there is refused), --time-budget MINUTES,
--checkpoint-minutes, --device, --amp, --compile, --threads, --seed, --lr, --accum-steps, --reference NAME
(also write the run's reference file NAME.json, which the lesson shows in fast mode), --no-progress; a
task adds its own (Task.add_arguments). Every argument is checked before any work; a problem is one line
on stderr, `error: ...`, with exit status 2 for an impossible setting and 1 for data and files (missing
data, a damaged file, a read-only folder, a full disk); Ctrl-C saves and exits with 130. Several
processes: the same command under torchrun (docs/scaling-out.md).
"""
import argparse
import dataclasses
import json
import sys
from pathlib import Path

from ..files import describe_os_error
from ..precision import AMP_CHOICES
from . import distributed, trainer
from .checkpoints import CheckpointError
from .report import command_line
from .runs import TrainingStopped
from .task import ConfigError


def make_parser(task_cls):
    """The task's argument parser: the options above, then the task's own."""
    p = argparse.ArgumentParser(prog=task_cls.command, description=task_cls.__doc__.strip().splitlines()[0])
    p.add_argument("--preset", choices=sorted(task_cls.presets),
                   default=task_cls.default_preset or next(iter(task_cls.presets), None))
    p.add_argument("--out", help="the run's folder (checkpoints, model.pt, report.json); default: "
                                 f"{task_cls.out_help} in the runs folder ($COURSE_RUNS_DIR, else runs/ at the "
                                 "repository root)")
    p.add_argument("--resume", action="store_true", help="go on with the run kept in OUT (its own settings; "
                                                         "its length may grow)")
    p.add_argument("--overwrite", action="store_true", help="replace the run kept in OUT by a new one")
    p.add_argument("--time-budget", type=float, dest="time_budget_minutes",
                   help="a hard cap on the minutes of training (the result then depends on the machine)")
    p.add_argument("--checkpoint-minutes", type=float, help="write a checkpoint this often within an epoch "
                                                              "(default 5; 0 = after every step)")
    p.add_argument("--device", help="cpu, cuda, cuda:1 (default: a GPU when found)")
    p.add_argument("--amp", choices=list(AMP_CHOICES), help="autocast: auto (bf16 on a CPU), bf16, fp16, off")
    p.add_argument("--compile", action="store_true", default=None, help="torch.compile the model")
    p.add_argument("--threads", type=int, help="torch threads (default: torch's)")
    p.add_argument("--seed", type=int)
    p.add_argument("--lr", type=float, help="peak learning rate")
    p.add_argument("--accum-steps", type=int, help="micro-batches per process and optimizer step")
    p.add_argument("--reference", metavar="NAME", help="also write the run's reference file NAME.json (what the "
                                                       "lesson shows in fast mode) into the package")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    task_cls.add_arguments(p)
    return p


def configure(task_cls, args, world_size):
    """The run's configuration from the arguments: the preset, with every option that names a field."""
    fields = {f.name for f in dataclasses.fields(task_cls.Config)}
    given = {k: v for k, v in vars(args).items() if k in fields and k != "preset" and v is not None}
    cfg = task_cls.make_config(args.preset, **given)
    before = cfg.to_dict()
    task_cls.configure(cfg, args, world_size)
    # --resume: a setting neither given here nor set by the task's own options is the run's own
    cfg.given = frozenset(given) | {k for k, v in cfg.to_dict().items() if before.get(k) != v}
    return cfg


def main(task_cls, argv=None):
    """Run `task_cls` from the command line; returns the exit status (0, 1, 2 or 130)."""
    args = make_parser(task_cls).parse_args(argv)
    dist = None
    try:   # an impossible configuration, missing data or a file problem stops here with one message
        dist = distributed.setup(args.device or task_cls.Config.device)
        task = task_cls(configure(task_cls, args, dist.world_size))
        out = Path(args.out) if args.out else task.default_out()
        dist.print(f"{dist.world_size} process(es), backend {dist.backend or 'none'}; output in {out}")
        command = command_line(task_cls.command, sys.argv[1:] if argv is None else argv)
        report = trainer.run(task, out, resume="required" if args.resume else False, overwrite=args.overwrite,
                             show_progress=not args.no_progress and dist.is_main, dist=dist, command=command,
                             reference=args.reference)
    except ConfigError as error:
        distributed.report_error(error)
        return 2
    except (CheckpointError, *task_cls.data_errors) as error:
        distributed.report_error(error)
        return 1
    except OSError as error:                       # a read-only folder, a full disk: nothing is lost
        distributed.report_error(describe_os_error(error))
        return 1
    except TrainingStopped as stopped:
        if dist is None or dist.is_main:
            print(stopped, file=sys.stderr, flush=True)
        return 130
    finally:
        distributed.cleanup()
    if dist.is_main:
        print(json.dumps({k: report[k] for k in task_cls.summary if k in report}, indent=1))
    return 0
