"""A whole run: train, then decode test_2016_flickr greedily and with beam search, and write report.json.

    report = run(make_config("cpu"), "runs/cpu", resume=True)      # the command line's run, from Python

A run writes tokenizer.json, checkpoint.pt (to resume; see trainer.py), model.pt (the final
weights, possibly averaged), history.json, learning_curves.png, the test translations, and
report.json (preset, steps, epochs, train_seconds, threads, tokens_per_second, bleu_greedy,
bleu_beam, sacrebleu_signature, examples...). Runs go to `default_out(preset)` unless told otherwise:
runs/<preset> in the runs folder (config.runs_dir(): $COURSE_RUNS_DIR, else runs/ at the repository
root), the folder lesson 10 looks in too.
"""
import json
import platform
import time
from pathlib import Path

import torch

from ..config import runs_dir
from ..files import atomic_write_text
from .batching import micro_batch_tokens
from .decode import bleu_on
from .presets import count_parameters
from .trainer import train


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


def run(cfg, out_dir=None, resume=False, show_progress=True, log=print, dist=None, command=None,
        overwrite=False):
    """train + evaluate_test + report.json; returns the report dict (None on ranks other than 0).

    `command`: the command line to record in the report (the command line passes it; None from Python).
    `overwrite`: replace a run kept in `out_dir` (without it, and without `resume`, that is refused).
    """
    world_size = dist.world_size if dist is not None else 1
    out_dir = Path(out_dir) if out_dir is not None else default_out(cfg.preset)
    wall = time.perf_counter()
    state, data, history = train(cfg, out_dir, resume=resume, show_progress=show_progress, log=log, dist=dist,
                                 overwrite=overwrite)
    if dist is not None and not dist.is_main:
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
        "world_size": world_size, "global_batch_tokens": cfg.batch_tokens,
        "micro_batch_tokens": micro_batch_tokens(cfg, world_size),
        "accum_steps": cfg.accum_steps, "replica_max_diff": state.replica_max_diff,
        **{k: v for k, v in results.items() if k != "examples"},
        "val_bleu_greedy_per_epoch": [round(b, 2) for b in history["val_bleu"]],
        "val_loss_per_epoch": [round(v, 4) for v in history["val_loss"]],
        "averaging": state.averaging,
        "wall_seconds": round(time.perf_counter() - wall, 1),
        "command": command or f"course_utils.translation.run.run(make_config({cfg.preset!r}, ...)) from Python",
        "config": cfg.to_dict(), "examples": results["examples"],
        "notes": "train_seconds counts optimizer steps only (validation after each epoch excluded); "
                 "tokens_per_second counts non-pad source + target tokens.",
    }
    atomic_write_text(json.dumps(report, indent=1, ensure_ascii=False), out_dir / "report.json")
    return report
