"""Train the course's Transformer on Multi30k German -> English, decode, and score with sacreBLEU.

    python -m course_utils.translate --preset smoke                      # CI: seconds
    python -m course_utils.translate --preset cpu                        # a 2-core CPU: about 40 minutes
    python -m course_utils.translate --preset gpu                        # a Colab GPU
    python -m course_utils.translate --preset cpu --resume               # go on from the last checkpoint
    torchrun --standalone --nproc_per_node=4 -m course_utils.translate --preset gpu
                                                       # 4 GPUs, DistributedDataParallel (distributed.py)

Runs go to `--out`, by default `runs/<preset>` in the runs folder (config.runs_dir(): $COURSE_RUNS_DIR,
else runs/ at the repository root), the folder lesson 10 looks in too. A run writes tokenizer.json,
checkpoint.pt (to resume; see trainer.py), model.pt (the final weights, possibly averaged),
history.json, learning_curves.png, the test translations, and report.json (preset, steps, epochs,
train_seconds, threads, tokens_per_second, bleu_greedy, bleu_beam, sacrebleu_signature, examples...).

Where each piece lives: presets.py (Config, PRESETS, build_model, load_translator), data/translation.py
(pairs, batches), training.py (the optimizer step, schedules, loss), trainer.py (epochs, checkpoints,
resume), decoding.py (greedy and beam search, BLEU), distributed.py (several processes). This module
is the run itself, its report and the command line.

`cfg.batch_tokens` is the EFFECTIVE batch size: padded tokens per optimizer step, summed over the
`cfg.accum_steps` micro-batches and the `world_size` processes. It does not depend on the number of
processes, and neither does the learning-rate schedule (it counts optimizer steps).
"""
import argparse
import json
import platform
import sys
import time
from pathlib import Path

import torch

from . import distributed
from .config import runs_dir
from .decoding import bleu_on
from .files import atomic_write_text
from .presets import PRESETS, count_parameters, make_config
from .trainer import TrainingStopped, micro_batch_tokens, train

__all__ = ["PRESETS", "make_config", "train", "run", "evaluate_test", "main", "default_out"]


def default_out(preset):
    """Where a preset's run goes unless --out says otherwise: runs/<preset> in the runs folder."""
    return runs_dir() / preset


def evaluate_test(state, data, log=print, show_progress=False):
    """Greedy and beam-search sacreBLEU on test_2016_flickr; returns a dict for the report."""
    cfg, t0 = state.cfg, time.perf_counter()
    greedy, greedy_hyps = bleu_on(state.raw_model, data.tokenizer, data.test_text, state.device,
                                  batch_sentences=cfg.eval_batch_sentences, amp_dtype=state.amp_dtype,
                                  show_progress=show_progress)
    t1 = time.perf_counter()
    beam, beam_hyps = bleu_on(state.raw_model, data.tokenizer, data.test_text, state.device,
                              beam_size=cfg.beam_size, length_penalty=cfg.length_penalty,
                              batch_sentences=max(cfg.eval_batch_sentences // cfg.beam_size, 8),
                              amp_dtype=state.amp_dtype, show_progress=show_progress)
    t2 = time.perf_counter()
    log(f"test_2016_flickr: greedy {greedy}\n                  beam {cfg.beam_size}: {beam}")
    return {"bleu_greedy": round(greedy.score, 2), "bleu_beam": round(beam.score, 2),
            "sacrebleu_signature": beam.signature, "test_sentences": len(data.test_text),
            "greedy_seconds": round(t1 - t0, 1), "beam_seconds": round(t2 - t1, 1),
            "examples": [{"source": de, "reference": en, "greedy": g, "beam": b}
                         for (de, en), g, b in list(zip(data.test_text, greedy_hyps, beam_hyps))[:8]],
            "_hyps": {"greedy": greedy_hyps, "beam": beam_hyps}}


def _device_name(device):
    if device.type == "cuda":
        return torch.cuda.get_device_name(0)
    return platform.processor() or platform.machine()


def run(cfg, out_dir=None, resume=False, show_progress=True, log=print, dist=None, command=None):
    """train + evaluate_test + report.json; returns the report dict (None on ranks other than 0).

    `command`: the command line to record in the report (main passes it; None from Python).
    """
    dist = dist or distributed.Dist()
    out_dir = Path(out_dir) if out_dir is not None else default_out(cfg.preset)
    wall = time.perf_counter()
    state, data, history = train(cfg, out_dir, resume=resume, show_progress=show_progress, log=log, dist=dist)
    if not dist.is_main:
        return None
    results = evaluate_test(state, data, log=log, show_progress=show_progress)
    for name, lines in results.pop("_hyps").items():
        atomic_write_text("\n".join(lines) + "\n", out_dir / f"test_2016_flickr.{name}.en")
    report = {
        "preset": cfg.preset, "device": str(state.device), "device_name": _device_name(state.device),
        "threads": torch.get_num_threads(),
        "amp": str(state.amp_dtype).replace("torch.", "") if state.amp_dtype else "off",
        "compile": cfg.compile, "epochs": state.epoch, "steps": state.step, "total_steps": state.total_steps,
        "train_seconds": round(state.train_seconds, 1),
        "tokens_per_second": round(state.tokens / max(state.train_seconds, 1e-9), 1),
        "tgt_tokens_per_second": round(state.items / max(state.train_seconds, 1e-9), 1),
        "parameters": count_parameters(state.raw_model), "vocab_size": data.tokenizer.vocab_size,
        "train_pairs": len(data.train),
        "world_size": dist.world_size, "global_batch_tokens": cfg.batch_tokens,
        "micro_batch_tokens": micro_batch_tokens(cfg, dist.world_size),
        "accum_steps": cfg.accum_steps, "replica_max_diff": state.replica_max_diff,
        **{k: v for k, v in results.items() if k != "examples"},
        "val_bleu_greedy_per_epoch": [round(b, 2) for b in history["val_bleu"]],
        "val_loss_per_epoch": [round(v, 4) for v in history["val_loss"]],
        "averaging": state.averaging,
        "wall_seconds": round(time.perf_counter() - wall, 1),
        "command": command or f"course_utils.translate.run(make_config({cfg.preset!r}, ...)) from Python",
        "config": cfg.to_dict(), "examples": results["examples"],
        "notes": "train_seconds counts optimizer steps only (validation after each epoch excluded); "
                 "tokens_per_second counts non-pad source + target tokens.",
    }
    atomic_write_text(json.dumps(report, indent=1, ensure_ascii=False), out_dir / "report.json")
    return report


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m course_utils.translate",
                                description="Train a Transformer on Multi30k de->en and report sacreBLEU.")
    p.add_argument("--preset", choices=sorted(PRESETS), default="smoke")
    p.add_argument("--out", help="output folder (checkpoints, report.json); default: runs/<preset> in the "
                                 "runs folder ($COURSE_RUNS_DIR, else runs/ at the repository root)")
    p.add_argument("--resume", action="store_true", help="continue from OUT/checkpoint.pt")
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


def check_batch(cfg, world_size, micro_batch_tokens_arg=None):
    """Set cfg.accum_steps from --micro-batch-tokens; refuse a global batch that cannot be split."""
    if micro_batch_tokens_arg is not None:
        cfg.accum_steps = distributed.accumulation_steps(cfg.batch_tokens, micro_batch_tokens_arg, world_size)
    return micro_batch_tokens(cfg, world_size)


def main(argv=None):
    args = parse_args(argv)
    overrides = {k: v for k, v in vars(args).items()
                 if k not in ("preset", "out", "resume", "no_progress", "micro_batch_tokens")}
    cfg = make_config(args.preset, **overrides)
    if args.micro_batch_tokens is not None and args.accum_steps is not None:
        raise SystemExit("error: give --accum-steps or --micro-batch-tokens, not both")
    out = Path(args.out) if args.out else default_out(cfg.preset)
    try:   # an impossible configuration stops here, with one message, before any training
        dist = distributed.setup(cfg.device)
        micro = check_batch(cfg, dist.world_size, args.micro_batch_tokens)
        dist.print(f"{dist.world_size} process(es), backend {dist.backend or 'none'}: global batch "
                   f"{cfg.batch_tokens} tokens = {micro} per micro-batch x {dist.world_size} process(es) x "
                   f"{cfg.accum_steps} accumulation step(s); the lr schedule counts optimizer steps; "
                   f"output in {out}")
        command = " ".join(["python -m course_utils.translate"] + list(sys.argv[1:] if argv is None else argv))
        report = run(cfg, out, resume=args.resume, show_progress=not args.no_progress and dist.is_main,
                     dist=dist, command=command)
    except distributed.DistributedConfigError as error:
        distributed.report_error(error)
        return 2
    except TrainingStopped as stopped:
        dist.print(stopped, file=sys.stderr)
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
