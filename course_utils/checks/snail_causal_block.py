"""Lesson 11's SNAIL causal attention block, for its check (lesson11.py): what its typical mistakes return
(the weights of a wrong mask, axis or scale), the symptoms of weights that do not match the read-out, and the
PyTorch errors its slips raise, named."""
import math

import torch

from ..masks import causal_mask, masked_softmax
from .core import expect, randn
from .lesson11_mistakes import SOFTMAX_DIM_0, _wrong_scales, concatenated, divided_by_max, transposed_batch


# --- exercise 5: SNAIL's causal attention block --------------------------------------------------
def causal_weight_mistakes(x, W_q, W_k, W_v):
    """{symptom: weights (B, T, T)} of the typical mistakes of `causal_attention_block`."""
    T, d_in, d_key, d_value = x.shape[1], x.shape[2], W_q.shape[1], W_v.shape[1]
    raw = (x @ W_q) @ (x @ W_k).transpose(1, 2)                  # (B, T, T), not yet scaled
    scores = raw / math.sqrt(d_key)
    mask = causal_mask(T)
    ones = torch.ones(T, T, dtype=torch.bool)
    inf = float("-inf")
    mistakes = {
        "the weights are transposed: row t of weights is query t's distribution over the keys s <= t "
        "(weights[b, t, s]); you return its transpose.": masked_softmax(scores, mask).transpose(1, 2),
        "the mask is inverted: causal_mask(T) is True where query t MAY attend to key s (s <= t); fill the "
        "scores where it is False (~mask) with -inf, not where it is True (the last position then has no key "
        "at all).": torch.softmax(scores.masked_fill(mask, inf), -1),
        "the mask is inverted: causal_mask(T) is True where query t MAY attend to key s (s <= t); keep those "
        "positions and mask the others.": masked_softmax(scores, ~mask),
        "the causal mask is flipped: position t attends to the future (s > t). Keep s <= t, i.e. "
        "True on and below the diagonal.": masked_softmax(scores, ~torch.triu(ones, 1).T),
        "no causal mask: position t attends to every position, the future included.": torch.softmax(scores, -1),
        "the mask is off by one: position t also attends to t + 1. Keep s <= t (torch.tril(..., diagonal=0)).":
            masked_softmax(scores, torch.tril(ones, 1)),
        **{"the mask leaves out the diagonal (torch.tril(..., -1), strictly below): position t may attend to s <= t, "
           f"itself included; row 0 then has no key at all{what}.": weights for what, weights in (
               (" and gives NaN", torch.softmax(scores.masked_fill(~torch.tril(ones, -1), inf), -1)),
               ("", masked_softmax(scores, torch.tril(ones, -1))),
               (", and with a finite fill such as -1e9 its weights spread evenly over all T steps, the future "
                "included", torch.softmax(scores.masked_fill(~torch.tril(ones, -1), -1e9), -1)))},
        "masked scores were set to 0 instead of -inf: exp(0) = 1 still gives the future some weight.":
            torch.softmax(scores.masked_fill(~mask, 0.0), -1),
        "the boolean mask is added to the scores (True counts as 1): nothing is masked. Fill the scores where the "
        "mask is False with -inf, scores.masked_fill(~mask, float('-inf')), then the softmax.":
            torch.softmax(scores + mask, -1),
        "the mask is applied after the softmax: the rows no longer sum to 1. Set the masked scores to -inf "
        "before the softmax.": torch.softmax(scores, -1) * mask,
        "the softmax is over the queries (dim 1), not the keys: use dim=-1.": masked_softmax(scores, mask, dim=1),
        SOFTMAX_DIM_0: torch.softmax(scores.masked_fill(~mask, inf), 0),
        "the weights are divided by their largest value, not by their sum: softmax(s)_s = "
        "exp(s_s) / Σ_s' exp(s_s').": divided_by_max(scores, mask),
        "the scores are not divided by √d_key: scale q·k by 1/math.sqrt(d_key) before the softmax.":
            masked_softmax(raw, mask),
    }
    for name, W in (("W_q", W_q), ("W_k", W_k)):
        mistakes[f"the queries and the keys come from the same matrix {name}: q = x @ W_q and k = x @ W_k, each "
                 "with its own matrix."] = masked_softmax((x @ W) @ (x @ W).transpose(1, 2) / math.sqrt(d_key), mask)
    mistakes.update(_wrong_scales(raw, d_key, {"d_value": (d_value, "the size of a value"),
                                               "T": (T, "the number of steps"), "d_in": (d_in, "the size of an "
                                                                                          "input")}, mask))
    return mistakes


def scores_for_weights(weights, x, W_q, W_k):
    """The symptom when `weights` are the scores q·k/√d_key (or q·k) at every s <= t, whatever fills the later ones
    (-inf, a large negative number): the softmax is missing from what is returned. Else None."""
    got, keep = torch.as_tensor(weights).detach().float(), causal_mask(x.shape[1])
    raw = (x @ W_q) @ (x @ W_k).transpose(1, 2)
    for scores, what in ((raw / math.sqrt(W_q.shape[1]), "q·k/√d_key"), (raw, "q·k, not even scaled by 1/√d_key")):
        if got.shape == scores.shape and torch.allclose(got[:, keep], scores[:, keep], atol=1e-4, rtol=1e-4):
            return (f"the weights you return are the masked scores {what}, not the weights: the weights are their "
                    "softmax over the keys, torch.softmax(scores, dim=-1) after masking; return those (the ones the "
                    "read-out is made with).")
    return None


def wrong_weights_beside_right_output(weights, T):
    """The symptom of `weights` that are wrong beside an output that is right (weights made up beside a read-out
    computed otherwise, e.g. by F.scaled_dot_product_attention, which returns none); uniform ones named."""
    keep = causal_mask(T).float()
    uniform = keep / keep.sum(-1, keepdim=True)
    got = torch.as_tensor(weights).detach().float()
    what = ("the weights are uniform over the steps s <= t (1/(t+1) each), not the attention weights"
            if got.shape[-2:] == uniform.shape and torch.allclose(got, uniform.expand_as(got), atol=1e-5)
            else "the weights you return are wrong")
    return (f"your output is right, but {what}: return the weights your read-out is made with, softmax over s <= t "
            "of q_t·k_s/√d_key (F.scaled_dot_product_attention returns none: compute them, then read = weights @ v).")


def causal_block_errors(B, T, d_in, d_key, d_value):
    """The PyTorch errors of `causal_attention_block`'s typical slips, named."""
    def matmul(match):
        rows, cols = int(match.group(3)), int(match.group(4))           # the second factor's shape
        if (rows, cols) in ((d_key, d_in), (d_value, d_in)):
            return (f"a weight matrix was transposed: W_q and W_k are (d_in, d_key) = ({d_in}, {d_key}) and W_v "
                    f"is (d_in, d_value) = ({d_in}, {d_value}), so q = x @ W_q, k = x @ W_k, v = x @ W_v (no .T).")
        return ("a matrix product has shapes that do not fit: q = x @ W_q, k = x @ W_k, v = x @ W_v with x (B, T, "
                "d_in); the scores are q @ k.transpose(1, 2), (B, T, T); the read-out is weights @ v.")

    def mask_size(match):
        sizes = {int(match.group(1)), int(match.group(2))}
        if T in sizes and len(sizes) == 2:
            return (f"the mask has the wrong size: it must be (T, T) = ({T}, {T}), T = x.shape[1] the number of "
                    "steps (not the size of a vector).")
        return None
    return [
        transposed_batch(B, d_key),
        concatenated(2, "x and the read-out"),
        (r"cannot be multiplied \((\d+)x(\d+) and (\d+)x(\d+)\)", matmul),
        (r"batch2 tensor to be", "the scores are q @ k.transpose(1, 2): transpose the last two axes of k, not "
                                 "the batch."),
        (r"operator\.invert\) is only implemented on integer and Boolean|masked_fill_? only supports boolean",
         "the mask must be boolean (True = may attend): causal_mask(T), or torch.tril(torch.ones(T, T, "
         "dtype=torch.bool)); a mask of 0.0/1.0 cannot be inverted with ~ nor used by masked_fill."),
        (r"size of tensor a \((\d+)\) must match the size of tensor b \((\d+)\) at non-singleton dimension 2",
         lambda m: (f"x ({d_in} features) and the read-out ({d_value}) are added, as in a residual: SNAIL's block "
                    "CONCATENATES them, torch.cat([x, read], dim=-1), (B, T, d_in + d_value).")
         if {int(m.group(1)), int(m.group(2))} == {d_in, d_value} else None),
        (r"size of tensor a \((\d+)\) must match the size of tensor b \((\d+)\)", mask_size),
    ]


def expect_causal_output(ev, answer, args, out, t, known):
    """Changing x after step t leaves the output at steps 0..t unchanged; else name the leak (a mistake of
    `known`, {symptom: output}, that the output matches first)."""
    got = torch.as_tensor(out).detach().float() if hasattr(out, "shape") else None
    for symptom, wrong in known.items():
        expect(got is None or got.shape != wrong.shape or not torch.allclose(got, wrong, atol=1e-5), symptom)
    x = args[0]
    changed = x.clone()
    changed[:, t + 1:] = randn(ev.rng(1300 + x.shape[1]), x.shape[0], x.shape[1] - t - 1, x.shape[2])
    after = ev.call(answer, changed, *args[1:])
    after = after[0] if isinstance(after, (tuple, list)) and len(after) == 2 else after
    if not (hasattr(after, "shape") and hasattr(out, "shape") and tuple(after.shape) == tuple(out.shape)):
        return
    expect(torch.allclose(out[:, :t + 1], after[:, :t + 1], atol=1e-5),
           f"the output at steps 0..{t} changed when only the inputs after step {t} changed: the block looks at "
           "the future (the weights are causal, so something else reads later steps). The read-out of step t is "
           "Σ_{s<=t} weights[t, s] v_s, and x_t itself: nothing from s > t.")
