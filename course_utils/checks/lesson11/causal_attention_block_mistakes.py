"""The known mistakes of lesson 11's exercise 5, `causal_attention_block` (SNAIL's attention block), each with the
wrong answer that shows it.

`wrong(...)` is the block written with one step changed (every default is the right step); each registry entry's
`shows` is one such answer, and the check computes a mistake's weights or output by running it (M.variants)."""
import math

import torch

from ...masks import causal_mask, masked_softmax
from ..core import Mistake, Mistakes
from . import attention_slips as slips

INF = float("inf")


def _ones(T):
    return torch.ones(T, T, dtype=torch.bool)


def _masked(scores, T):
    return torch.softmax(scores.masked_fill(~causal_mask(T), -INF), dim=-1)


def wrong(keys_from=None, values="v", divisor=lambda s: math.sqrt(s["d_key"]), keys_T=None, mask_size=None,
          mask_dtype=None, weights=_masked, returned=None, read=None, out=None):
    """SNAIL's causal attention block with one step written wrong.

    keys_from(W_q, W_k): the matrices the queries and keys are made with; values: what the values are ("v", "x",
    "W_k", "W_q"); divisor(sizes): what q·k is divided by (sizes: d_key, d_value, T, d_in); keys_T(k): kᵀ;
    mask_size(x): the side of the causal mask (T); mask_dtype: the mask's dtype; weights(scores, T): the weights;
    returned(weights, scores, T): the weights returned; read(weights, v): the read-out; out(x, read, q, v): the
    output."""
    def causal_attention_block(x, W_q, W_k, W_v):
        B, T, d_in = x.shape
        Wq, Wk = (W_q, W_k) if keys_from is None else keys_from(W_q, W_k)
        q, k = x @ Wq, x @ Wk                                                        # (B, T, d_key)
        v = {"v": x @ W_v, "x": x, "W_k": x @ W_k, "W_q": x @ W_q}[values]
        sizes = dict(d_key=W_q.shape[1], d_value=W_v.shape[1], T=T, d_in=d_in)
        scores = q @ (k.transpose(1, 2) if keys_T is None else keys_T(k)) / divisor(sizes)   # (B, T, T)
        if mask_size is not None or mask_dtype is not None:
            mask = causal_mask(T if mask_size is None else mask_size(x))
            mask = mask if mask_dtype is None else mask.to(mask_dtype)
            w = torch.softmax(scores.masked_fill(~mask, -INF), dim=-1)
        else:
            w = weights(scores, T)
        r = w @ v if read is None else read(w, v)                                    # (B, T, d_value)
        o = torch.cat([x, r], -1) if out is None else out(x, r, q, v)
        return o, (w if returned is None else returned(w, scores, T))
    return causal_attention_block


def _uniform(weights, scores, T):
    keep = causal_mask(T).float()
    return (keep / keep.sum(-1, keepdim=True)).expand_as(weights)


def _overflowing(scores, T):
    """A softmax written without its maximum: exp(s) / Σ exp(s)."""
    e = torch.exp(scores).masked_fill(~causal_mask(T), 0)
    return e / e.sum(-1, keepdim=True)


def _raw_scores_returned(x, W_q, W_k, W_v):
    out, _ = wrong()(x, W_q, W_k, W_v)
    raw = (x @ W_q) @ (x @ W_k).transpose(1, 2)                                      # (B, T, T), not scaled
    return out, raw.masked_fill(~causal_mask(x.shape[1]), -INF)


_KEEP = "query t may attend to the keys s <= t, itself included"
_MASK = "scores.masked_fill(~causal_mask(T), float('-inf')) before the softmax"
_CAT = "torch.cat([x, weights @ v], dim=-1)"
M = Mistakes(
    # --- the weights (B, T, T) ---
    Mistake("weights_transposed", "the weights are transposed: row t must be query t's distribution over the keys "
            "s <= t", hint="return the weights as the softmax gives them", shows=wrong(returned=lambda w, s, T:
                                                                                       w.transpose(1, 2))),
    Mistake("mask_inverted", "the mask is inverted: the scores hidden are those of the keys query t MAY attend to "
            "(s <= t), and the last position then has no key at all (NaN)", hint="masked_fill(~mask, ...): hide where "
            "the mask is False", shows=wrong(weights=lambda s, T: torch.softmax(s.masked_fill(causal_mask(T), -INF),
                                                                               -1))),
    Mistake("mask_inverted_guarded", "the mask is inverted: " + _KEEP + ", and the later keys are the ones to hide",
            hint="masked_fill(~mask, ...)", shows=wrong(weights=lambda s, T: masked_softmax(s, ~causal_mask(T)))),
    Mistake("mask_flipped", "the causal mask is flipped: position t attends to itself and the future (s >= t); it "
            "keeps s <= t, on and below the diagonal", hint="torch.tril, not torch.triu",
            shows=wrong(weights=lambda s, T: masked_softmax(s, torch.triu(_ones(T))))),
    Mistake("no_mask", "no causal mask: position t attends to every position, the future included", hint=_MASK,
            shows=wrong(weights=lambda s, T: torch.softmax(s, -1))),
    Mistake("mask_one_ahead", "the mask is off by one: position t also attends to t + 1; " + _KEEP,
            hint="torch.tril(..., diagonal=0)", shows=wrong(weights=lambda s, T: masked_softmax(s, torch.tril(_ones(T),
                                                                                                          1)))),
    Mistake("no_diagonal", "the mask leaves out the diagonal (strictly below it): " + _KEEP + "; row 0 then has no key "
            "at all and gives NaN", hint="torch.tril(..., diagonal=0)",
            shows=wrong(weights=lambda s, T: torch.softmax(s.masked_fill(~torch.tril(_ones(T), -1), -INF), -1))),
    Mistake("no_diagonal_guarded", "the mask leaves out the diagonal (strictly below it): " + _KEEP,
            hint="torch.tril(..., diagonal=0)", shows=wrong(weights=lambda s, T: masked_softmax(s, torch.tril(_ones(T),
                                                                                                             -1)))),
    Mistake("no_diagonal_finite_fill", "the mask leaves out the diagonal (strictly below it): " + _KEEP + "; row 0 has "
            "no key at all, and with a finite fill its weights spread evenly over all T steps, the future included",
            hint="torch.tril(..., diagonal=0)",
            shows=wrong(weights=lambda s, T: torch.softmax(s.masked_fill(~torch.tril(_ones(T), -1), -1e9), -1))),
    Mistake("fill_zero", "masked scores are set to 0 instead of −∞: exp(0) = 1 still gives the future some weight",
            hint=_MASK, shows=wrong(weights=lambda s, T: torch.softmax(s.masked_fill(~causal_mask(T), 0.0), -1))),
    Mistake("fill_plus_inf", "masked scores are set to +∞ instead of −∞: every row with a hidden key gives NaN",
            hint=_MASK, shows=wrong(weights=lambda s, T: torch.softmax(s.masked_fill(~causal_mask(T), INF), -1))),
    Mistake("inf_times_mask", "the additive mask is (mask − 1)·∞, and 0·∞ is NaN at every allowed pair: hidden scores "
            "become −∞ and the others stay as they are", hint=_MASK,
            shows=wrong(weights=lambda s, T: torch.softmax(s + (causal_mask(T).to(s.dtype) - 1) * INF, -1))),
    Mistake("mask_added", "the boolean mask is added to the scores (True counts as 1): nothing is hidden; the scores "
            "where the mask is False become −∞", hint=_MASK,
            shows=wrong(weights=lambda s, T: torch.softmax(s + causal_mask(T), -1))),
    Mistake("mask_after_softmax", "the mask is applied after the softmax: the rows no longer sum to 1; the masked "
            "scores are set to −∞ before the softmax", hint=_MASK,
            shows=wrong(weights=lambda s, T: torch.softmax(s, -1) * causal_mask(T))),
    slips.softmax_over_queries(shows=wrong(weights=lambda s, T: masked_softmax(s, causal_mask(T), dim=1))),
    slips.softmax_batch(shows=wrong(weights=lambda s, T: torch.softmax(s.masked_fill(~causal_mask(T), -INF), 0))),
    slips.by_max(shows=wrong(weights=lambda s, T: slips.divided_by_max(s, causal_mask(T)))),
    slips.no_scale(shows=wrong(divisor=lambda s: 1.0)),
    Mistake("keys_from_W_q", "the queries and the keys are both made with W_q: the keys are x W_k",
            hint="k = x @ W_k", shows=wrong(keys_from=lambda W_q, W_k: (W_q, W_q))),
    Mistake("queries_from_W_k", "the queries and the keys are both made with W_k: the queries are x W_q",
            hint="q = x @ W_q", shows=wrong(keys_from=lambda W_q, W_k: (W_k, W_k))),
    slips.scale_by("scale_by_d_value", "d_value", "the size of a value", shows=wrong(
        divisor=lambda s: math.sqrt(s["d_value"]))),
    slips.scale_by("scale_by_T", "T", "the number of steps", shows=wrong(divisor=lambda s: math.sqrt(s["T"]))),
    slips.scale_by("scale_by_d_in", "d_in", "the size of an input", shows=wrong(
        divisor=lambda s: math.sqrt(s["d_in"]))),
    slips.scale_by_d_key(shows=wrong(divisor=lambda s: s["d_key"])),
    Mistake("scores_returned", "the weights you return are the masked scores q·k/√d_key: the weights are their softmax "
            "over the keys, the ones the read-out is made with", hint="return torch.softmax(scores, dim=-1) after "
            "masking", shows=wrong(returned=lambda w, s, T: s.masked_fill(~causal_mask(T), -INF))),
    Mistake("raw_scores_returned", "the weights you return are the masked scores q·k, not even scaled by 1/√d_key: the "
            "weights are the softmax of the scaled scores over the keys", hint="return torch.softmax(scores, dim=-1)",
            shows=_raw_scores_returned),
    Mistake("weights_uniform", "your output is right, but the weights are uniform over the steps s <= t (1/(t+1) "
            "each), not the attention weights: the weights returned are those the read-out is made with",
            hint="compute them, softmax over s <= t of q_t·k_s/√d_key, then read = weights @ v "
            "(F.scaled_dot_product_attention returns none)", shows=wrong(returned=_uniform)),
    Mistake("weights_not_read_outs", "your output is right, but the weights you return are not those it is made with: "
            "the weights returned are the softmax over s <= t of q_t·k_s/√d_key", hint="compute them, then read = "
            "weights @ v (F.scaled_dot_product_attention returns none)",
            shows=wrong(returned=lambda w, s, T: torch.eye(T).expand_as(w))),
    # --- the output (B, T, d_in + d_value), the weights right ---
    Mistake("no_concat", "the output is the read-out alone: it is [x, read] side by side on the last axis, (B, T, "
            "d_in + d_value)", hint=_CAT, shows=wrong(out=lambda x, r, q, v: r)),
    Mistake("concat_order", "x and the read-out are concatenated in the wrong order: x first", hint=_CAT,
            shows=wrong(out=lambda x, r, q, v: torch.cat([r, x], -1))),
    Mistake("values_are_x", "the read-out mixes x itself, not the values: the values are x W_v",
            hint="v = x @ W_v", shows=wrong(values="x")),
    Mistake("read_transposed_weights", "the read-out mixes the values with the transposed weights: step t's read-out "
            "sums its OWN row of weights times the values, over s <= t", hint="read = weights @ v",
            shows=wrong(read=lambda w, v: w.transpose(1, 2) @ v)),
    Mistake("values_concatenated", "the values themselves are concatenated, not the read-out: the read-out is the "
            "weighted sum of the values of the steps s <= t", hint=_CAT,
            shows=wrong(out=lambda x, r, q, v: torch.cat([x, v], -1))),
    Mistake("values_from_W_k", "the values are made with W_k, not W_v (a copy-pasted line?): W_k only makes the keys "
            "of the scores", hint="v = x @ W_v", shows=wrong(values="W_k")),
    Mistake("values_from_W_q", "the values are made with W_q, not W_v (a copy-pasted line?): W_q only makes the "
            "queries of the scores", hint="v = x @ W_v", shows=wrong(values="W_q")),
    Mistake("output_width", "the output has {width} features, not d_in + d_value = {want}: it is [x, read], x itself "
            "(d_in = {d_in}) first, then the read-out (d_value = {d_value})", hint=_CAT,
            shows=wrong(out=lambda x, r, q, v: torch.cat([q, r], -1))),
    Mistake("output_leaks_future", "the output at steps 0..{t} changed when only the inputs after step {t} changed: "
            "the block looks at the future (the weights are causal, so something else reads later steps); step t's "
            "output is x_t and the read-out of the steps s <= t, nothing later",
            shows=wrong(out=lambda x, r, q, v: torch.cat([x, r], -1) + 0.1 * torch.roll(x, -1, 1).sum(-1, True))),
    # --- crashes ---
    slips.k_T_3d(shows=wrong(keys_T=lambda k: k.T)),
    Mistake("concat_axis", "x and the read-out are concatenated along axis {axis}: they go side by side along the "
            "LAST axis (the features); batch and steps stay as they are", hint=_CAT,
            shows=wrong(out=lambda x, r, q, v: torch.cat([x, r], 1))),
    Mistake("weight_transposed", "a weight matrix is used transposed: W_q and W_k are (d_in, d_key) = ({d_in}, "
            "{d_key}) and W_v is (d_in, d_value) = ({d_in}, {d_value}), each multiplying x as it is",
            hint="q = x @ W_q, k = x @ W_k, v = x @ W_v (no .T)",
            shows=wrong(keys_from=lambda W_q, W_k: (W_q, W_k.T))),
    Mistake("product_shapes", "a matrix product's shapes do not fit: q, k, v are x W_q, x W_k, x W_v, (B, T, ·); the "
            "scores are q kᵀ, (B, T, T), with only the last two axes of k swapped; the read-out is the weights times v",
            hint="q @ k.transpose(1, 2)", shows=wrong(keys_T=lambda k: k)),
    Mistake("mask_not_bool", "the mask holds numbers, not booleans: it is True where query t may attend; a mask of "
            "0.0/1.0 cannot be inverted nor used to fill", hint="causal_mask(T), or torch.tril(torch.ones(T, T, "
            "dtype=torch.bool))", shows=wrong(mask_dtype=torch.float32)),
    Mistake("residual_added", "x ({d_in} features) and the read-out ({d_value}) are added, as in a residual: SNAIL's "
            "block CONCATENATES them, (B, T, d_in + d_value)", hint=_CAT, shows=wrong(out=lambda x, r, q, v: x + r)),
    Mistake("mask_size", "the mask has the wrong size: it is (T, T) = ({T}, {T}), T the number of steps",
            hint="causal_mask(x.shape[1])", shows=wrong(mask_size=lambda x: x.shape[-1])),
    # --- large scores ---
    Mistake("overflow", "with scores near 150 your {what} holds NaN or inf: exp of a large score overflows float32",
            hint="subtract each row's maximum before exp, or torch.softmax", shows=wrong(weights=_overflowing)),
)
WEIGHTS = [M[key] for key in (
    "weights_transposed", "mask_inverted", "mask_inverted_guarded", "mask_flipped", "no_mask", "mask_one_ahead",
    "no_diagonal", "no_diagonal_guarded", "no_diagonal_finite_fill", "fill_zero", "fill_plus_inf", "inf_times_mask",
    "mask_added", "mask_after_softmax", "softmax_over_queries", "softmax_batch", "by_max", "no_scale",
    "keys_from_W_q", "queries_from_W_k", "scale_by_d_value", "scale_by_T", "scale_by_d_in", "scale_by_d_key")]
OUTPUTS = [M[key] for key in ("no_concat", "concat_order", "values_are_x", "read_transposed_weights",
                              "values_concatenated", "values_from_W_k", "values_from_W_q")]
