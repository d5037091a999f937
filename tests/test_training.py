"""The one optimizer step, the schedules, the loss, and the GPU preset's fp16 path exercised on the CPU."""
import math

import pytest
import torch
import torch.nn.functional as F

from course_utils.data.batch import collate
from course_utils.precision import resolve_amp
from course_utils.training import TrainState, label_smoothed_loss, noam_lr, train, train_step, warmup_lr
from course_utils.translation.presets import make_config
from course_utils.translation.step import translation_step
from course_utils.translation.task import setup_state


def test_warmup_then_linear_decay_and_noam():
    assert warmup_lr(50, 0.05, 1e-3, 100, warmup_progress=0.1) == pytest.approx(5e-4)
    assert warmup_lr(100, 0.1, 1e-3, 100, warmup_progress=0.1) == pytest.approx(1e-3)   # the peak, exactly
    assert warmup_lr(550, 0.55, 1e-3, 100, warmup_progress=0.1) == pytest.approx(5e-4)  # half-way down
    assert warmup_lr(1000, 1.0, 1e-3, 100, warmup_progress=0.1) == 0.0
    assert warmup_lr(100, 0.3, 1e-3, 100, "noam") == pytest.approx(1e-3)
    assert warmup_lr(400, 0.3, 1e-3, 100, "noam") == pytest.approx(5e-4)
    lrs = [noam_lr(s, 512, 4000) for s in range(1, 20001, 50)]
    assert max(lrs) == pytest.approx(noam_lr(4000, 512, 4000), rel=1e-3)
    assert noam_lr(4000, 512, 4000) == pytest.approx(512 ** -0.5 * 4000 ** -0.5)
    assert noam_lr(0, 512, 4000) > 0                     # step 0 does not divide by zero
    with pytest.raises(ValueError, match="schedule"):
        warmup_lr(1, 0.0, 1e-3, 10, "cosine")


def test_label_smoothed_loss_equals_torch():
    torch.manual_seed(0)
    logits, target = torch.randn(2, 7, 11), torch.randint(1, 11, (2, 7))
    target[1, 4:] = 0
    for eps in (0.0, 0.1, 0.3):
        expected = F.cross_entropy(logits.transpose(1, 2), target, ignore_index=0, label_smoothing=eps)
        assert label_smoothed_loss(logits, target, eps) == pytest.approx(float(expected), rel=1e-5)
    total = label_smoothed_loss(logits, target, 0.1, reduction="sum")
    assert float(total) == pytest.approx(float(label_smoothed_loss(logits, target, 0.1)) * 11, rel=1e-5)


def test_amp_choices():
    cpu = torch.device("cpu")
    from course_utils.precision import cpu_has_bf16  # bf16 where the CPU has it, else fp32
    assert resolve_amp("auto", cpu) == (torch.bfloat16 if cpu_has_bf16() else None)
    assert resolve_amp("bf16", cpu) == torch.bfloat16 and resolve_amp("off", cpu) is None
    assert resolve_amp("fp16", cpu) == torch.float16
    with pytest.raises(ValueError, match="amp"):
        resolve_amp("int8", cpu)


def tiny_cfg(preset="smoke", **kw):
    return make_config(preset, d_model=32, num_heads=2, num_layers=1, d_ff=64, dropout=0.0, **kw)


def fake_pairs(n=24, vocab=50, seed=0):
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        s = torch.randint(4, vocab, (int(torch.randint(3, 9, (1,), generator=g)),), generator=g).tolist()
        t = torch.randint(4, vocab, (int(torch.randint(3, 9, (1,), generator=g)),), generator=g).tolist()
        out.append((s, t))                       # the target without <bos>/<eos>: collate adds them
    return out


@pytest.mark.parametrize("amp", ["off", "bf16", "fp16"])
def test_translation_step_on_cpu_with_each_precision(amp):
    cfg = tiny_cfg(amp=amp, device="cpu")
    state = setup_state(cfg, vocab_size=50)
    state.total_steps = 100
    assert state.scaler.is_enabled() == (amp == "fp16")
    before = {k: v.clone() for k, v in state.raw_model.state_dict().items()}
    loss = translation_step(state, [collate(fake_pairs()).to(state.device)])
    assert math.isfinite(loss) and state.step == 1 and state.items > 0
    assert any(not torch.equal(before[k], v) for k, v in state.raw_model.state_dict().items())
    assert state.optimizer.param_groups[0]["lr"] == pytest.approx(cfg.lr * 2 / cfg.warmup_steps)   # warming up


def test_accumulated_micro_batches_give_the_big_batch_gradient():
    cfg = tiny_cfg(amp="off", device="cpu", clip_norm=1e9)
    pairs = fake_pairs(16)
    grads = []
    for split in ([pairs], [pairs[:5], pairs[5:]]):
        torch.manual_seed(0)
        state = setup_state(cfg, vocab_size=50)
        state.optimizer.step = lambda *a, **k: None          # keep the gradients, skip the update
        state.optimizer.zero_grad = lambda *a, **k: None
        translation_step(state, [collate(p) for p in split])
        grads.append(torch.cat([p.grad.flatten() for p in state.raw_model.parameters() if p.grad is not None]))
    assert torch.allclose(grads[0], grads[1], atol=1e-6)


def test_the_lessons_loop_is_the_same_step():
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    data = [(torch.randn(8, 3), torch.randn(8, 1)) for _ in range(3)]
    losses = train(model, data, lambda m, b: F.mse_loss(m(b[0]), b[1]), num_steps=7, lr=0.1, progress=False)
    assert len(losses) == 7 and losses[-1] < losses[0] and not model.training


# ---- the gpu preset's mixed precision, fp16 with gradient scaling, run on the CPU ---------------
def gpu_preset_shrunk():
    """The gpu preset's recipe (fp16 + GradScaler, pre-norm, tied embeddings) at a CPU-friendly size."""
    return make_config("gpu", amp="fp16", device="cpu", d_model=64, num_heads=8, num_layers=2, d_ff=256,
                       dropout=0.0)


def test_gpu_preset_fp16_path_scales_steps_and_unscales_before_clipping():
    cfg = gpu_preset_shrunk()
    torch.manual_seed(0)
    state = setup_state(cfg, vocab_size=50)
    state.total_steps = 50
    assert state.amp_dtype == torch.float16 and state.scaler.is_enabled()
    scale = state.scaler.get_scale()
    batch = collate(fake_pairs())
    losses = [translation_step(state, [batch]) for _ in range(4)]
    assert all(math.isfinite(loss) for loss in losses) and state.step == 4
    assert losses[-1] < losses[0]                              # it learns in fp16

    # unscale before clipping: the clipped norm is the TRUE gradient's (<= clip_norm), not the scaled one's
    norms = []
    real_clip = torch.nn.utils.clip_grad_norm_
    def spy(parameters, max_norm, *a, **k):
        parameters = list(parameters)
        norms.append(float(torch.norm(torch.stack([p.grad.detach().norm() for p in parameters if p.grad is not None]))))
        return real_clip(parameters, max_norm, *a, **k)
    torch.nn.utils.clip_grad_norm_ = spy
    try:
        translation_step(state, [batch])
    finally:
        torch.nn.utils.clip_grad_norm_ = real_clip
    assert norms and norms[0] < 1e3 < state.scaler.get_scale(), \
        f"clipping saw a gradient norm of {norms[0]:.3g} with a loss scale of {state.scaler.get_scale():.3g}"
    assert state.scaler.get_scale() <= scale                      # not raised yet (growth after 2000 steps)

    # an overflow (inf in the loss) skips the optimizer step and halves the scale
    weights = {k: v.clone() for k, v in state.raw_model.state_dict().items()}
    scale, step = state.scaler.get_scale(), state.step
    bad = lambda model, b: model(b.src, b.tgt_in).float().sum() * float("inf")   # noqa: E731
    train_step(state, [batch], bad, count=lambda b: b.tgt_tokens)
    assert state.scaler.get_scale() == scale / 2 and state.step == step + 1
    assert all(torch.equal(weights[k], v) for k, v in state.raw_model.state_dict().items()), \
        "a step whose gradients overflowed must leave the weights alone"


def test_train_state_without_scaler_or_schedule():
    model = torch.nn.Linear(2, 2)
    state = TrainState(model, torch.optim.SGD(model.parameters(), lr=0.1))
    loss = train_step(state, [torch.ones(4, 2)], lambda m, b: m(b).sum())
    assert math.isfinite(loss) and state.step == 1
