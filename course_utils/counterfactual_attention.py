"""Counterfactual attention (lesson 14; Jain & Wallace 2019, "Attention is not Explanation"; Wiegreffe &
Pinter 2019, "Attention is not not Explanation"): change one layer's attention weights and see whether the
output changes.

    with counterfactual(model.decoder.layers[2].cross_attn, "permute", generator=g): logits = model(src, tgt_in)
    change = output_change(model, src, tgt_in, layer=2, mode="permute", generator=g)
    # {"tvd": (n,), "jsd": (n,), "argmax_changed": (n,)} over the n real target positions

Modes (the weights of every head and every query, over the real, unpadded source positions):
    "permute"  the weights shuffled over the source positions (one random permutation per sentence): the
               same numbers, given to other words (Jain & Wallace's permutation);
    "uniform"  every source position gets the same weight (1 / S);
    "zero"     no output at all from the layer's cross-attention (its W_O bias only): how much the layer matters.
The output distributions are compared by the total variation distance, TVD = ½ Σ |p - p'| (Jain & Wallace),
and the Jensen-Shannon divergence (in nats, at most ln 2).
"""
import contextlib

import torch
import torch.nn.functional as F

from .attention import attention_weights, merge_heads

__all__ = ["MODES", "counterfactual", "output_change"]
MODES = ("permute", "uniform", "zero")


def _changed_weights(weights, mask, mode, generator):
    """weights (B, h, T_q, S), mask (B, 1, 1, S) bool (True = a real source position) -> the changed weights."""
    real = mask[:, 0, 0]                                             # (B, S)
    if mode == "uniform":
        return (real / real.sum(-1, keepdim=True))[:, None, None, :].expand_as(weights).to(weights.dtype)
    if mode == "zero":
        return torch.zeros_like(weights)
    out = weights.clone()
    for b in range(weights.size(0)):                                 # one permutation per sentence
        where = real[b].nonzero()[:, 0]                              # (n,) its real positions
        shuffled = where[torch.randperm(len(where), generator=generator)]
        out[b][..., where] = weights[b][..., shuffled]
    return out


@contextlib.contextmanager
def counterfactual(attn, mode, generator=None):
    """Inside the block, the MultiHeadAttention `attn` (a cross-attention) computes its weights as usual, then
    uses the weights changed by `mode` (MODES) to mix its values. Needs a padding mask (B, 1, 1, S)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")

    def attend(q, k, v, mask=None, need_weights=False):
        if mask is None or mask.dim() != 4 or mask.size(1) != 1 or mask.size(2) != 1:
            raise ValueError("counterfactual attention needs the source padding mask (B, 1, 1, S)")
        weights = _changed_weights(attention_weights(q, k, mask), mask, mode, generator)   # (B, h, T_q, S)
        return attn.out_proj(merge_heads(weights @ v))                                     # (B, T_q, d_model)

    attn.attend = attend                                             # this module only, until the block ends
    try:
        yield attn
    finally:
        del attn.attend


@torch.no_grad()
def output_change(model, src, tgt_in, layer, mode, generator=None):
    """How much the next-token distributions of the lesson-10 Transformer `model` change, teacher-forced on
    src (B, S) and tgt_in (B, T), when decoder layer `layer`'s cross-attention is changed by `mode`: per real
    target position (n of them), {"tvd": (n,), "jsd": (n,), "argmax_changed": (n,) bool}."""
    model.eval()
    keep = tgt_in != model.pad_id                                    # (B, T) the real target positions
    p = F.softmax(model(src, tgt_in).float(), -1)[keep]               # (n, V)
    with counterfactual(model.decoder.layers[layer].cross_attn, mode, generator):
        q = F.softmax(model(src, tgt_in).float(), -1)[keep]           # (n, V)
    m = 0.5 * (p + q)
    kl = lambda a, b: (a * (a.clamp_min(1e-12).log() - b.clamp_min(1e-12).log())).sum(-1)   # noqa: E731
    return {"tvd": 0.5 * (p - q).abs().sum(-1), "jsd": 0.5 * kl(p, m) + 0.5 * kl(q, m),
            "argmax_changed": p.argmax(-1) != q.argmax(-1)}

