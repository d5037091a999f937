"""The translator's loss: of a micro-batch (training), of one optimizer step, and on validation pairs.

    loss = forward_loss(model, batch, label_smoothing)   # summed over the batch's target tokens
    loss = translation_step(state, batches)       # one optimizer step (training.train_step) on Batches
    val_loss, val_nll = evaluate_loss(model, pairs, cfg, device)

(`state` comes from translation.task.setup_state(cfg, vocab_size): the pipeline's RunState.)

The optimizer step itself is the course's ONE step (`course_utils.training.train_step`): this module
only says how a translation batch gives a loss summed over its target tokens, and how many there are.
"""
import torch
import torch.nn.functional as F

from ..data.batch import PAD_ID, collate
from ..precision import autocast
from ..training import train_step
from .data import batch_sampler


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
