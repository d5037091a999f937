"""The training pipeline: schedule, loss, precision, accumulation, checkpoints, and the smoke run.

Not run here (no GPU on the test machine): the CUDA branches (bf16/fp16 autocast on a GPU, fused
AdamW, pinned non-blocking copies). What runs instead: CPU autocast to bf16 and to fp16 with an
enabled GradScaler, the same device-move code with device=cpu, and torch.compile (slow test).
"""
import json
import math

import pytest
import torch
import torch.nn.functional as F

from course_utils import translate as tr
from course_utils.tokenization import BOS_ID, EOS_ID, PAD_ID


def test_presets_and_overrides():
    cfg = tr.make_config("cpu", epochs=3, lr=None)
    assert cfg.preset == "cpu" and cfg.epochs == 3 and cfg.lr == tr.PRESETS["cpu"]["lr"]
    assert tr.make_config("gpu").d_model == 512 and tr.make_config("smoke").max_train_pairs <= 1000
    with pytest.raises(ValueError, match="preset"):
        tr.make_config("tpu")
    with pytest.raises(ValueError, match="unknown config field"):
        tr.make_config("cpu", batchsize=3)


def test_schedules():
    cfg = tr.make_config("cpu", lr=1e-3, warmup_steps=100)
    assert tr.lr_at(50, 0.0, cfg) == pytest.approx(5e-4)
    assert tr.lr_at(100, 0.0, cfg) == pytest.approx(1e-3)
    assert tr.lr_at(1000, 0.5, cfg) == pytest.approx(5e-4)
    assert tr.lr_at(1000, 1.0, cfg) == 0.0
    cfg.schedule = "noam"
    assert tr.lr_at(100, 0.3, cfg) == pytest.approx(1e-3) and tr.lr_at(400, 0.3, cfg) == pytest.approx(5e-4)
    # the paper's formula has the same shape: it peaks at step = warmup
    lrs = [tr.noam_lr(s, 512, 4000) for s in range(1, 20001, 50)]
    assert max(lrs) == pytest.approx(tr.noam_lr(4000, 512, 4000), rel=1e-3)
    assert tr.noam_lr(4000, 512, 4000) == pytest.approx(512 ** -0.5 * 4000 ** -0.5)
    assert tr.noam_lr(0, 512, 4000) > 0                     # step 0 does not divide by zero


def test_label_smoothed_loss_matches_torch():
    torch.manual_seed(0)
    logits, target = torch.randn(3, 5, 11), torch.randint(1, 11, (3, 5))
    target[0, 3:] = PAD_ID
    for eps in (0.0, 0.1, 0.3):
        expected = F.cross_entropy(logits.transpose(1, 2), target, ignore_index=PAD_ID, label_smoothing=eps)
        assert tr.label_smoothed_loss(logits, target, eps) == pytest.approx(float(expected), rel=1e-5)
    total = tr.label_smoothed_loss(logits, target, 0.1, reduction="sum")
    assert float(total) == pytest.approx(float(tr.label_smoothed_loss(logits, target, 0.1)) * 13, rel=1e-5)


def test_amp_resolution():
    cpu = torch.device("cpu")
    assert tr.resolve_amp("auto", cpu) == torch.bfloat16
    assert tr.resolve_amp("off", cpu) is None
    assert tr.resolve_amp("fp16", cpu) == torch.float16
    with pytest.raises(ValueError, match="amp"):
        tr.resolve_amp("int8", cpu)


def tiny_cfg(**kw):
    return tr.make_config("smoke", d_model=32, num_heads=2, num_layers=1, d_ff=64, dropout=0.0, **kw)


def fake_pairs(n=24, vocab=50, seed=0):
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        s, t = torch.randint(4, vocab, (int(torch.randint(3, 9, (1,), generator=g)),), generator=g).tolist(), \
            torch.randint(4, vocab, (int(torch.randint(3, 9, (1,), generator=g)),), generator=g).tolist()
        out.append((s, [BOS_ID] + t + [EOS_ID]))
    return out


@pytest.mark.parametrize("amp", ["off", "bf16", "fp16"])
def test_train_step_on_cpu_with_each_precision(amp):
    cfg = tiny_cfg(amp=amp, device="cpu")
    state = tr.setup_state(cfg, vocab_size=50)
    assert state.scaler.is_enabled() == (amp == "fp16")
    before = {k: v.clone() for k, v in state.raw_model.state_dict().items()}
    batch = tr.to_device(tr.collate(fake_pairs()), state.device)
    loss = tr.train_step(state, [batch])
    assert math.isfinite(loss) and state.step == 1 and state.tokens > 0
    assert any(not torch.equal(before[k], v) for k, v in state.raw_model.state_dict().items())
    assert state.optimizer.param_groups[0]["lr"] == pytest.approx(tr.lr_at(2, state.progress(), cfg))


def test_accumulated_micro_batches_give_the_big_batch_gradient():
    cfg = tiny_cfg(amp="off", device="cpu", clip_norm=1e9)
    pairs = fake_pairs(16)
    grads = []
    for split in ([pairs], [pairs[:5], pairs[5:]]):
        torch.manual_seed(0)
        state = tr.setup_state(cfg, vocab_size=50)
        state.optimizer.step = lambda *a, **k: None          # keep the gradients, skip the update
        state.optimizer.zero_grad = lambda *a, **k: None
        tr.train_step(state, [tr.collate(p) for p in split])
        grads.append(torch.cat([p.grad.flatten() for p in state.raw_model.parameters() if p.grad is not None]))
    assert torch.allclose(grads[0], grads[1], atol=1e-6)


def test_atomic_save_keeps_the_old_file_on_failure(tmp_path, monkeypatch):
    path = tmp_path / "checkpoint.pt"
    tr.atomic_save({"a": 1}, path)

    def broken(obj, f):
        open(f, "wb").write(b"half")
        raise OSError("disk full")
    monkeypatch.setattr(torch, "save", broken)
    with pytest.raises(OSError):
        tr.atomic_save({"a": 2}, path)
    monkeypatch.undo()
    assert torch.load(path) == {"a": 1} and [p.name for p in tmp_path.iterdir()] == ["checkpoint.pt"]


def test_average_state_dicts():
    a, b = {"w": torch.ones(2), "n": torch.tensor(3)}, {"w": torch.zeros(2), "n": torch.tensor(3)}
    avg = tr.average_state_dicts([a, b])
    assert torch.equal(avg["w"], torch.full((2,), 0.5)) and avg["n"] == 3


def test_smoke_preset_end_to_end_and_resume(tmp_path):
    """The CLI path CI runs: load -> tokenise -> train -> decode -> BLEU -> report, then --resume."""
    out = tmp_path / "smoke"
    assert tr.main(["--preset", "smoke", "--out", str(out), "--no-progress"]) == 0
    report = json.loads((out / "report.json").read_text())
    for key in ("preset", "device", "epochs", "train_seconds", "tokens_per_second", "bleu_greedy",
                "bleu_beam", "sacrebleu_signature"):
        assert key in report
    assert report["preset"] == "smoke" and report["device"] == "cpu" and report["epochs"] == 2
    assert report["sacrebleu_signature"].startswith("nrefs:1|case:mixed|eff:no|tok:13a")
    assert report["tokens_per_second"] > 0 and 0 <= report["bleu_beam"] <= 100
    for name in ("tokenizer.json", "checkpoint.pt", "model.pt", "history.json", "learning_curves.png"):
        assert (out / name).exists(), name
    assert not [p for p in out.iterdir() if p.name.endswith(".part")]
    # resume: one more epoch on top of the two saved ones
    logs = []
    cfg = tr.make_config("smoke", epochs=3)
    state, data, history = tr.train(cfg, out, resume=True, show_progress=False, log=logs.append)
    assert "resumed" in logs[0] and state.epoch == 3 and history["epoch"] == [1, 2, 3]
    model, tok, cfg2 = tr.load_translator(out / "model.pt")
    assert isinstance(tr.translate_sentences(model, tok, "Ein Hund läuft."), str)


@pytest.mark.slow
def test_gpu_preset_runs_on_cpu(tmp_path):
    """The gpu preset's code path, shrunk to run on a CPU (no GPU here)."""
    assert tr.main(["--preset", "gpu", "--out", str(tmp_path), "--device", "cpu", "--max-train-pairs", "200",
                    "--max-eval-pairs", "10", "--epochs", "1", "--no-progress"]) == 0
    assert json.loads((tmp_path / "report.json").read_text())["preset"] == "gpu"


@pytest.mark.slow
def test_compile_on_cpu():
    cfg = tiny_cfg(amp="bf16", device="cpu", compile=True)
    state = tr.setup_state(cfg, vocab_size=50)
    assert math.isfinite(tr.train_step(state, [tr.collate(fake_pairs())]))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no GPU on this machine: CUDA path not run")
def test_cuda_step():
    cfg = tiny_cfg(amp="auto", device="cuda")
    state = tr.setup_state(cfg, vocab_size=50)
    batch = tr.to_device(tr.collate(fake_pairs()), state.device)
    assert math.isfinite(tr.train_step(state, [batch]))
