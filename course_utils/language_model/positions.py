"""Lesson 12's position experiment (section 8): small GPTs identical but for their positions (learned,
sinusoidal, rotary), trained at a context T on the main run's tokens, measured at T and at 2T.

    results, seconds = compare_positions(train_stream, val_stream, vocab_size, POSITION_EXPERIMENT["full"])
    python -m course_utils.language_model.positions --reference lesson12_positions   # the lesson's reference file

Each model trains with the pipeline, in memory (task.train_language_model's way: no run folder: a minute each).
"""
import argparse
import sys
import time

import torch

from ..config import describe_machine, load_average
from ..gpt import POSITIONS
from ..pipeline import trainer
from ..pipeline.report import command_line
from .data import eval_windows, prepare
from .evaluate import perplexity
from .presets import POSITION_EXPERIMENT, Config, make_config
from .task import AMP_NAMES, LanguageModelTask

COMMAND = "python -m course_utils.language_model.positions"


def compare_positions(train_stream, val_stream, vocab_size, sizes, amp_dtype=None, seed=0, show_progress=True):
    """Train one small GPT per kind of positions ("learned", "sinusoidal", "rope") with `sizes`
    (POSITION_EXPERIMENT); returns {positions: (validation PPL at sizes["context"], at twice it)} and
    {positions: training seconds}."""
    results, seconds = {}, {}
    for positions in POSITIONS:
        cfg = Config(preset=None, vocab_size=vocab_size, positions=positions, amp=AMP_NAMES[amp_dtype], seed=seed,
                     **sizes)
        task = LanguageModelTask(cfg, data=(None, train_stream, None))
        state, _, _ = trainer.train(task, None, show_progress=show_progress, log=lambda *a, **k: None)
        model = state.raw_model.eval()
        results[positions] = tuple(perplexity(model, eval_windows(val_stream, T), amp_dtype=amp_dtype)
                                   for T in (sizes["context"], 2 * sizes["context"]))
        seconds[positions] = state.train_seconds
    return results, seconds


def run_positions(preset="full", amp_dtype=torch.bfloat16, seed=0, show_progress=True):
    """The experiment on the tokens of lesson 12's `preset` with POSITION_EXPERIMENT[preset]. Returns a dict."""
    start = time.time()
    tok, train_stream, val_stream = prepare(make_config(preset))
    sizes = POSITION_EXPERIMENT[preset]
    results, seconds = compare_positions(train_stream, val_stream, tok.vocab_size, sizes, amp_dtype, seed,
                                         show_progress)
    return dict(preset=preset, sizes=sizes, vocab_size=tok.vocab_size, seed=seed,
                val_ppl={k: round(a, 2) for k, (a, _) in results.items()},
                val_ppl_2x={k: round(b, 2) for k, (_, b) in results.items()},
                train_seconds={k: round(v, 1) for k, v in seconds.items()},
                wall_seconds=round(time.time() - start, 1), amp=AMP_NAMES[amp_dtype])


def main(argv=None):
    from .. import reference_runs

    p = argparse.ArgumentParser(prog=COMMAND, description="Lesson 12's position experiment: learned, sinusoidal "
                                "and rotary positions trained at T, measured at T and 2T.")
    p.add_argument("--preset", choices=list(POSITION_EXPERIMENT), default="full")
    p.add_argument("--threads", type=int)
    p.add_argument("--amp", choices=["bf16", "off"], default="bf16")
    p.add_argument("--reference", metavar="NAME", help="also write the reference file NAME.json into the package")
    p.add_argument("--no-progress", action="store_true")
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    load_before = load_average()
    report = run_positions(args.preset, torch.bfloat16 if args.amp == "bf16" else None,
                           show_progress=not args.no_progress)
    machine = describe_machine("cpu", load_before)
    print({k: report[k] for k in ("val_ppl", "val_ppl_2x", "train_seconds")})
    if args.reference:
        path = reference_runs.write(
            args.reference, written_by=command_line(COMMAND, sys.argv[1:] if argv is None else argv),
            what=f"section 8's experiment on the {args.preset} preset's tokens", settings=report["sizes"],
            result={k: report[k] for k in ("val_ppl", "val_ppl_2x")}, machine=machine,
            **{k: report[k] for k in ("preset", "vocab_size", "seed", "amp", "train_seconds", "wall_seconds")})
        print(f"written: {path.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
