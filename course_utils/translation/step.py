"""One translation step: the state a run steps, the loss of a micro-batch, and the validation loss.

    state = setup_state(cfg, vocab_size)          # model, AdamW, precision, schedule: a TranslatorState
    loss = translation_step(state, batches)       # one optimizer step (training.train_step) on Batches
    val_loss, val_nll = evaluate_loss(model, pairs, cfg, device)

The optimizer step itself is the course's ONE step (`course_utils.training.train_step`): this module
only says how a translation batch gives a loss summed over its target tokens, and how many there are.
"""
import dataclasses

import torch
import torch.nn.functional as F

from ..config import resolve_device
from ..data.batch import PAD_ID, collate
from ..precision import autocast, grad_scaler, resolve_amp
from ..training import TrainState, make_optimizer, train_step, warmup_lr
from .data import batch_sampler
from .presets import build_model


@dataclasses.dataclass
class TranslatorState(TrainState):
    """training.TrainState, plus what a translation run counts and resumes from."""
    cfg: object = None
    epoch: int = 0                  # epochs done
    epoch_step: int = 0             # optimizer steps done in the current epoch
    epoch_losses: list = dataclasses.field(default_factory=list)   # this epoch's step losses so far
    train_seconds: float = 0.0      # time spent in train steps (evaluation excluded)
    tokens: int = 0                 # non-pad source + target tokens trained on (by all processes)
    total_steps: int = None         # optimizer steps of the whole run
    replica_max_diff: float = 0.0   # after training: largest difference between the processes' replicas
    averaging: dict = None          # after training: which weights model.pt holds (see trainer._average)

    def progress(self):
        """Fraction of the run done: steps done, or training time used if a time cap is set and larger."""
        done = self.step / self.total_steps if self.total_steps else 0.0
        if self.cfg.time_budget_minutes:
            done = max(done, self.train_seconds / (60.0 * self.cfg.time_budget_minutes))
        return min(done, 1.0)


def setup_state(cfg, vocab_size, device=None, dist=None, wrap=None):
    """Model, optimizer, scaler and precision on the device: everything train() steps.

    With `dist` (a distributed.Dist of several processes) the stepped model is `wrap(model)`
    (distributed.wrap_model: DDP); a single process never needs either.
    """
    if dist is not None:
        device = dist.device
    device = resolve_device(cfg.device) if device is None else device
    amp_dtype = resolve_amp(cfg.amp, device)
    raw_model = build_model(cfg, vocab_size).to(device)
    model = raw_model if wrap is None else wrap(raw_model)
    if cfg.compile:
        model = torch.compile(model)
    state = TranslatorState(model, make_optimizer(raw_model, cfg.lr, cfg.weight_decay, cfg.betas),
                            grad_scaler(device, amp_dtype), device, amp_dtype, cfg.clip_norm, dist=dist, cfg=cfg)
    state.lr_schedule = lambda step: warmup_lr(step, state.progress(), cfg.lr, cfg.warmup_steps, cfg.schedule,
                                               cfg.warmup_steps / state.total_steps if state.total_steps else 0.0)
    state.set_lr()
    return state


def forward_loss(model, batch, label_smoothing):
    """One micro-batch (a Batch) -> label-smoothed loss SUMMED over its target tokens (float32 logits).

    The output layer and the loss run on the real (non-pad) target positions only: no work, and no
    (B, T, V) float copy, for the padding (the README's 1.18x per step, measured by
    `python benchmarks/train_profile.py`, variant "real-token logits").
    """
    keep = batch.tgt_out != PAD_ID                                                 # (B, T)
    logits = model(batch.src, batch.tgt_in, positions=keep)                        # (n, V), n real tokens
    with torch.autocast(logits.device.type, enabled=False):                       # the loss in float32
        return F.cross_entropy(logits.float(), batch.tgt_out[keep], label_smoothing=label_smoothing,
                               reduction="sum")


def translation_step(state, batches):
    """One optimizer step on `batches` (Batches on the device); returns the mean loss per target token."""
    return train_step(state, batches, lambda model, batch: forward_loss(model, batch, state.cfg.label_smoothing),
                      count=lambda batch: batch.tgt_tokens)


@torch.no_grad()
def evaluate_loss(model, pairs, cfg, device, amp_dtype=None):
    """Mean label-smoothed loss and plain cross-entropy per target token on `pairs`."""
    model.eval()
    sampler = batch_sampler(pairs, max(cfg.batch_tokens, 2048), epoch=0, shuffle=False)
    smoothed = plain = tokens = 0.0
    for idx in sampler:
        batch = collate([pairs[i] for i in idx]).to(device)
        with autocast(device, amp_dtype):
            logits = model(batch.src, batch.tgt_in)
        logits = logits.float().transpose(1, 2)
        smoothed += float(F.cross_entropy(logits, batch.tgt_out, ignore_index=PAD_ID,
                                          label_smoothing=cfg.label_smoothing, reduction="sum"))
        plain += float(F.cross_entropy(logits, batch.tgt_out, ignore_index=PAD_ID, reduction="sum"))
        tokens += batch.tgt_tokens
    return smoothed / max(tokens, 1), plain / max(tokens, 1)
