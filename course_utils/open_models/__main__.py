"""Train lesson 15's models side by side and write the lesson's reference files.

    python -m course_utils.open_models --experiment captions --preset full --threads 1 --reference lesson15_captions
    python -m course_utils.open_models --experiment recall --preset full --threads 1 --reference lesson15_recall
    python -m course_utils.open_models --experiment captions --models modern,mla     # some of the models only

Each model is a run of the pipeline in OUT/<model> (default OUT: runs/open_models-<preset> in the runs folder): run
the command again and it goes on where it stopped (a finished model is read back); --overwrite trains anew.
--reference NAME also writes course_utils/reference_runs/NAME.json, what the lesson shows in fast mode.
"""
import argparse
import sys

import torch

from ..pipeline.report import command_line
from .presets import MODELS, PRESETS, RECALL_MODELS
from .run import run_captions, run_recall

COMMAND = "python -m course_utils.open_models"


def _result(summary, experiment):
    models = summary["models"]
    if experiment == "recall":
        return {"accuracy": {m: r["accuracy"] for m, r in models.items()}}
    return {"val_ppl": {m: r["val_ppl"] for m, r in models.items()},
            "val_ppl_4x": {m: r["val_ppl_4x"] for m, r in models.items()},
            "parameters": {m: r["parameters"] for m, r in models.items()}}


def main(argv=None):
    from .. import reference_runs

    p = argparse.ArgumentParser(prog=COMMAND, description="Lesson 15's models, trained side by side.")
    p.add_argument("--experiment", choices=["captions", "recall"], default="captions")
    p.add_argument("--preset", choices=list(PRESETS), default="full")
    p.add_argument("--models", help=f"a comma-separated subset (captions: {', '.join(MODELS)}; recall: "
                                    f"{', '.join(RECALL_MODELS)})")
    p.add_argument("--out", help="the folder of the runs (default: runs/open_models-<preset> in the runs folder)")
    p.add_argument("--overwrite", action="store_true", help="train every model anew")
    p.add_argument("--threads", type=int, help="torch threads (default: torch's)")
    p.add_argument("--reference", metavar="NAME", help="also write the reference file NAME.json into the package")
    p.add_argument("--no-progress", action="store_true")
    args = p.parse_args(argv)
    known = RECALL_MODELS if args.experiment == "recall" else MODELS
    models = args.models.split(",") if args.models else None
    unknown = sorted(set(models or ()) - set(known))
    if unknown:
        p.error(f"unknown model(s) {', '.join(unknown)} for --experiment {args.experiment}: {', '.join(known)}")
    if args.threads:
        torch.set_num_threads(args.threads)
    run = run_recall if args.experiment == "recall" else run_captions
    summary = run(args.preset, args.out, models, overwrite=args.overwrite, show_progress=not args.no_progress)
    result = _result(summary, args.experiment)
    print(result)
    print(f"training {summary['train_seconds'] / 60:.1f} min wall, {summary['cpu_seconds'] / 60:.1f} min CPU "
          f"(every model's run); load average {summary['machine']['load_before']} before, "
          f"{summary['machine']['load_after']} after")
    if args.reference:
        written = command_line(COMMAND, sys.argv[1:] if argv is None else argv)
        path = reference_runs.write(
            args.reference, written_by=written, what=f"lesson 15's {args.experiment} models, {args.preset} preset",
            settings=summary["settings"], result=result, machine=summary["machine"],
            **{k: summary[k] for k in ("preset", "models", "train_seconds", "cpu_seconds", "wall_seconds")})
        print(f"written: {path.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
