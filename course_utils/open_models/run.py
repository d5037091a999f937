"""Lesson 15's runs: every caption model on the same tokens, every recall model on the same sequences, one after
the other, each a run of the pipeline in its own folder (checkpoints, model.pt, report.json: a run stopped goes on
where it stopped), then one summary of them all, the lesson's reference file.

    summary = run_captions("full", runs_dir() / "open_models-full")       # {model: its report's results, ...}
    summary = run_recall("full", runs_dir() / "open_models-full")
    model = load_model(runs_dir() / "open_models-full" / "mla")           # a trained caption model

CPU time is measured with the wall time: on a machine shared with other jobs the wall time of a run grows with
the load, its CPU time much less (the report says both, and the load before and after).
"""
import json
import time
from pathlib import Path

import torch

from ..config import describe_machine, load_average
from ..pipeline import trainer
from .data import prepare
from .presets import (
    MODELS,
    RECALL_MODELS,
    Config,
    RecallConfig,
    build_model,
    build_recall_model,
    make_config,
    make_recall_config,
)
from .task import CaptionTask, RecallTask

__all__ = ["run_captions", "run_recall", "load_model", "load_recall_model", "summary_of"]
KEEP = ("model", "parameters", "steps", "train_seconds", "tokens_per_second", "val_ppl", "val_ppl_4x", "accuracy",
        "first_position", "first_position_4x", "history", "cpu_seconds")


def _one(task, out_dir, overwrite, show_progress, log):
    cpu, wall = time.process_time(), time.perf_counter()
    report = trainer.run(task, out_dir, resume=not overwrite, overwrite=overwrite, show_progress=show_progress,
                         log=log)
    cpu_file = out_dir / "cpu_seconds.json"        # the CPU time of the training run (kept when a finished run
    if not cpu_file.exists() or overwrite:          # is read back: reading it again costs seconds, not the run)
        cpu_file.write_text(json.dumps({"cpu_seconds": round(time.process_time() - cpu, 1),
                                        "wall_seconds": round(time.perf_counter() - wall, 1)}))
    report.update(json.loads(cpu_file.read_text()))
    return report


def summary_of(reports, preset, cfg):
    """What the lesson reads: each model's figures and curves, the sums of the times, the settings."""
    models = {name: {k: r[k] for k in KEEP if k in r} for name, r in reports.items()}
    return {"preset": preset, "settings": cfg.to_dict(), "models": models,
            "train_seconds": round(sum(r["train_seconds"] for r in reports.values()), 1),
            "cpu_seconds": round(sum(r["cpu_seconds"] for r in reports.values()), 1)}


def run_captions(preset="full", folder=None, models=None, overwrite=False, show_progress=True, log=print, data=None,
                 **overrides):
    """Train every caption model of MODELS (or `models`) with the preset's sizes, in folder/<model>. data: the
    (tokenizer, training stream, validation stream) of the preset (default: prepared here)."""
    from ..config import runs_dir

    folder = Path(folder or runs_dir() / f"open_models-{preset}")
    cfg = make_config(preset, **overrides)
    start, load_before = time.perf_counter(), load_average()
    data = prepare(cfg) if data is None else data   # one tokenizer and one stream for every model
    reports = {}
    for name in models or MODELS:
        task = CaptionTask(make_config(preset, model=name, **overrides), data=data)
        reports[name] = _one(task, folder / name, overwrite, show_progress, log)
    out = summary_of(reports, preset, cfg)
    out.update(wall_seconds=round(time.perf_counter() - start, 1), machine=describe_machine("cpu", load_before))
    return out


def run_recall(preset="full", folder=None, models=None, overwrite=False, show_progress=True, log=print, **overrides):
    """Train every recall model of RECALL_MODELS (or `models`), in folder/recall-<model>."""
    from ..config import runs_dir

    folder = Path(folder or runs_dir() / f"open_models-{preset}")
    cfg = make_recall_config(preset, **overrides)
    start, load_before = time.perf_counter(), load_average()
    reports = {name: _one(RecallTask(make_recall_config(preset, model=name, **overrides)), folder / f"recall-{name}",
                          overwrite, show_progress, log) for name in models or RECALL_MODELS}
    out = summary_of(reports, preset, cfg)
    out.update(wall_seconds=round(time.perf_counter() - start, 1), machine=describe_machine("cpu", load_before))
    return out


def load_model(run_dir):
    """(model, cfg, tokenizer) of a caption model trained by run_captions, from its run folder (model.pt)."""
    from ..tokenization import SubwordTokenizer

    saved = torch.load(Path(run_dir) / "model.pt", map_location="cpu", weights_only=False)
    cfg = Config.from_dict(saved["config"])
    tok = SubwordTokenizer.from_str(saved["tokenizer"])
    model = build_model(cfg, tok.vocab_size)
    model.load_state_dict(saved["model"])
    return model.eval(), cfg, tok


def load_recall_model(run_dir):
    saved = torch.load(Path(run_dir) / "model.pt", map_location="cpu", weights_only=False)
    cfg = RecallConfig.from_dict(saved["config"])
    model = build_recall_model(cfg)
    model.load_state_dict(saved["model"])
    return model.eval(), cfg
