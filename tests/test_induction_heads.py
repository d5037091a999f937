"""Lesson 14's attention-only model as the third task of the training pipeline (course_utils.induction_heads):
its command line, what every evaluation records for the phase-change figure, exact resume, and the reference
file the lesson shows in fast mode."""
import json

import pytest
import torch

from course_utils.induction_heads import (
    PRESETS,
    find_phase_change,
    load_induction_model,
    make_config,
    phase_change_step,
    run,
)
from course_utils.induction_heads.__main__ import main
from course_utils.reference_runs import reference_run


def _tiny(**overrides):
    return make_config("fast", **{**dict(steps=20, eval_every=10, eval_sequences=8, snapshot_half=4), **overrides})


def test_a_run_records_what_the_phase_change_figure_needs(tmp_path):
    report = run(_tiny(), tmp_path / "run", show_progress=False, log=lambda *a, **k: None)
    history = json.loads((tmp_path / "run" / "history.json").read_text())
    assert history["eval_step"] == [10, 20] and len(history["icl_score"]) == 2
    layers, heads = PRESETS["fast"].get("num_layers", 2), PRESETS["fast"]["num_heads"]
    assert [len(history["induction_scores"][-1]), len(history["induction_scores"][-1][0])] == [layers, heads]
    assert len(history["loss_per_position"][-1]) == PRESETS["fast"]["length"] - 1
    assert len(history["snapshot_maps"][-1][0][0]) == 8                      # the short [r, r], 2 x 4 tokens
    for key in ("induction_head", "previous_token_head", "ablation_effects", "phase_change_step", "composition",
                "circuits"):
        assert key in report, key
    model, cfg = load_induction_model(tmp_path / "run" / "model.pt")
    assert cfg.steps == 20 and model(torch.zeros(1, 5, dtype=torch.long)).shape == (1, 5, cfg.vocab_size)


def test_resume_gives_the_run_that_never_stopped(tmp_path):
    quiet = dict(show_progress=False, log=lambda *a, **k: None)
    run(_tiny(), tmp_path / "whole", **quiet)
    run(_tiny(steps=10), tmp_path / "halves", **quiet)
    run(_tiny(), tmp_path / "halves", resume=True, **quiet)                # `steps` may grow on resume
    whole = torch.load(tmp_path / "whole" / "model.pt", weights_only=False)["model"]
    halves = torch.load(tmp_path / "halves" / "model.pt", weights_only=False)["model"]
    assert all(torch.equal(whole[k], halves[k]) for k in whole)


def test_the_command_line(tmp_path, capsys):
    out = tmp_path / "cli"
    assert main(["--preset", "fast", "--steps", "10", "--eval-every", "5", "--out", str(out), "--no-progress"]) == 0
    assert json.loads((out / "report.json").read_text())["command"].startswith("python -m course_utils.induction_heads")
    assert main(["--preset", "fast", "--out", str(out)]) == 2                  # a run is kept there
    assert main(["--preset", "fast", "--steps", "0", "--out", str(tmp_path / "bad")]) == 2
    assert "steps must be a whole number >= 1" in capsys.readouterr().err


def test_phase_change_step():
    assert phase_change_step([10, 20, 30, 40], [0.0, -0.1, -3.0, -3.1]) == (25, pytest.approx(-2.9))
    assert phase_change_step([10], [0.0]) == (None, 0.0)


def test_a_run_without_a_phase_change_says_so(tmp_path):
    """The fast preset trains for seconds: no phase change, and the run says so instead of naming a step."""
    said = []
    report = run(_tiny(), tmp_path / "run", show_progress=False, log=lambda *a, **k: said.append(" ".join(map(str, a))))
    assert report["icl_score"] > -1.0 and report["phase_change_step"] is None and report["stripe_step"] is None
    assert any("no phase change in this run" in line for line in said), said
    assert not any("phase change near step" in line for line in said), said


def test_find_phase_change_needs_a_large_and_abrupt_change():
    steps = [20, 40, 60, 80, 100]
    assert find_phase_change(steps, [0.0, -0.1, -3.0, -3.2, -3.3]) == (50, pytest.approx(-2.9))
    assert find_phase_change(steps, [0.13, 0.12, 0.15, 0.1, 0.11]) == (None, 0.0)       # no fall
    assert find_phase_change(steps, [0.0, -0.2, -0.4, -0.6, -0.8]) == (None, 0.0)       # under 1 nat
    drift = [-0.15 * i for i in range(30)]                                              # 4.4 nats, slowly
    assert find_phase_change(list(range(30)), drift) == (None, 0.0)
    assert find_phase_change(steps, [0.1, 0.1, 0.8, 0.9, 0.9], min_change=0.3, direction=1)[0] == 50


def test_the_reference_file_is_the_full_preset_run():
    ref = reference_run("lesson14_induction")
    assert ref is not None, \
        "write it: python -m course_utils.induction_heads --preset full --reference lesson14_induction"
    assert ref["written_by"].startswith("python -m course_utils.induction_heads --preset full")
    assert {k: ref["settings"].get(k) for k in PRESETS["full"]} == PRESETS["full"], \
        "PRESETS['full'] changed: write the reference file again"
    history, report = ref["history"], ref["report"]
    assert history["eval_step"][-1] == PRESETS["full"]["steps"] == report["steps"]
    # what the lesson says of the full run: the phase change, the induction head found by ablation
    assert history["icl_score"][0] > -0.5 > -3.0 > history["icl_score"][-1]
    layer, head = report["induction_head"]
    assert layer == 1 and report["induction_head_effect"] > 1.0 and report["induction_score"] > 0.7
    assert report["previous_token_head"][0] == 0 and report["previous_score"] > 0.5
    assert report["composition"]["keys"] < report["composition"]["none"] - 0.2 < report["composition"]["queries"]
    assert report["phase_change_step"] == find_phase_change(history["eval_step"], history["icl_score"])[0] is not None
    # sections 7 and 8: the induction head copies and reads the previous-token head through its keys
    circuits = report["circuits"]
    (lp, below), (li, top) = report["previous_token_head"], report["induction_head"]
    assert circuits["ov_eigenvalue_score"][li][top] > 0.9 and circuits["ov_diagonal_top1"][li][top] > 0.5
    assert circuits["k_composition_top1"][below] > 0.5 > circuits["direct_qk_top1"]
    assert max(circuits["patching"][li]) > 0.2 > max(circuits["patching"][lp])
    assert abs(report["stripe_step"] - report["phase_change_step"]) <= 2 * PRESETS["full"]["eval_every"]
    assert len(history["snapshots"]["induction"]) == len(history["eval_step"])
