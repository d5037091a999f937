"""Lesson 15's models as tasks of the training pipeline (course_utils.open_models): the caption models train and
record what the lesson draws, a run goes on where it stopped, the recall models and their data, the command line,
and the reference files the lesson shows in fast mode."""
import json

import pytest
import torch

from course_utils.data.associative_recall import IGNORE, recall_batch, vocab_size
from course_utils.open_models import MODELS, RECALL_MODELS, build_model, load_model, make_config, run_recall
from course_utils.open_models.__main__ import main
from course_utils.open_models.run import run_captions
from course_utils.reference_runs import reference_run

QUIET = dict(show_progress=False, log=lambda *a, **k: None)


def test_the_caption_models_match_in_parameters_and_patterns():
    cfg = make_config("full")
    counts = {name: sum(p.numel() for p in {id(p): p for p in build_model(make_config("full", model=name), 500)
                                             .parameters()}.values()) for name in MODELS}
    assert abs(counts["modern"] - counts["gpt2"]) / counts["gpt2"] < 0.01       # the same parameter count
    local = build_model(make_config("full", model="local"), 500)
    assert [m.window for _, m in local.attention_layers()] == ([cfg.window] * 5 + [None]) * 2
    hybrid = build_model(make_config("full", model="gated_deltanet"), 500)
    assert [i for i, _ in hybrid.attention_layers()] == [3, 7, 11]                 # 3 Gated DeltaNet : 1 global
    assert cfg.d_latent + cfg.d_rope == 2 * cfg.num_kv_heads * cfg.d_model // cfg.num_heads   # equal cache bytes


@pytest.mark.multi30k
def test_caption_runs_record_what_the_lesson_draws_and_resume(tmp_path):
    summary = run_captions("fast", tmp_path, models=["local_sinks", "gpt2"], **QUIET)
    r = summary["models"]["local_sinks"]
    for key in ("val_ppl", "val_ppl_4x", "parameters", "cpu_seconds", "train_seconds"):
        assert key in r, key
    assert r["first_position"]["layers"] == [5, 11] and all(s > 0 for s in r["first_position"]["sink"])
    assert len(r["history"]["max_logit"][-1]) == 12
    assert summary["models"]["gpt2"]["first_position"]["sink"] == [0.0] * 12
    model, cfg, tok = load_model(tmp_path / "local_sinks")
    assert cfg.model == "local_sinks" and model(torch.tensor([[1, 2, 3]])).shape == (1, 3, tok.vocab_size)
    again = run_captions("fast", tmp_path, models=["local_sinks"], **QUIET)            # read back, not trained again
    assert again["models"]["local_sinks"]["val_ppl"] == r["val_ppl"]


def test_recall_data():
    g = torch.Generator().manual_seed(0)
    tokens, targets = recall_batch(3, torch.tensor([2, 3, 4]), 20, num_keys=8, generator=g)
    row, n = tokens[1], 3
    keys, values = row[0:2 * n:2], row[1:2 * n:2]
    store = dict(zip(keys.tolist(), values.tolist()))
    asked = targets[1] != IGNORE
    assert asked.sum() == n and all(store[int(row[t])] == int(targets[1, t]) for t in asked.nonzero()[:, 0])
    assert (tokens[1, 4 * n:] == 0).all() and tokens.max() < vocab_size(8)
    with pytest.raises(ValueError, match="num_pairs"):
        recall_batch(2, 6, 20, num_keys=8)


def test_recall_runs_and_the_command_line(tmp_path, capsys):
    summary = run_recall("fast", tmp_path, models=["softmax"], **QUIET)
    assert set(summary["models"]["softmax"]["accuracy"]) == {"2", "4", "8"}
    assert main(["--experiment", "recall", "--preset", "fast", "--models", "linear", "--out", str(tmp_path),
                 "--no-progress"]) == 0
    assert "accuracy" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["--experiment", "recall", "--models", "modern"])


@pytest.mark.parametrize("name, models", [("lesson15_captions", MODELS), ("lesson15_recall", RECALL_MODELS)])
def test_the_reference_files_hold_every_model(name, models):
    ref = reference_run(name)
    assert ref is not None, f"course_utils/reference_runs/{name}.json is missing: run its command (docs/results.md)"
    assert set(ref["models"]) == set(models) and ref["preset"] == "full"
    settings = make_config("full") if name == "lesson15_captions" else None
    if settings is not None:
        assert ref["settings"]["steps"] == settings.steps and ref["settings"]["d_model"] == settings.d_model
    assert json.dumps(ref["result"])
