"""Typical learner mistakes (and a few differently written right answers) for lesson 06, pointer networks.

Exercises, as the checks call them:
    pointer_scores           pointer_scores(h, s, W_h, W_s, v) -> (B, T) scores, before any softmax;
                             h (B, T, d_h), s (B, d_s), W_h (d_h, d_attn), W_s (d_s, d_attn), v (d_attn,),
                             weights act on the right (h @ W_h), W_s s is broadcast over the T positions.
    masked_pointer_softmax   masked_pointer_softmax(scores, mask) -> (B, T); softmax over the last axis where
                             mask is True (True = may still be chosen); masked positions exactly 0; a fully
                             masked row gives zeros, not NaN.
    decode_step              decode_step(model, h, state, inp, mask) -> (weights, j, new_mask, (s, c)):
                             (s, c) = model.decoder(inp, state); weights = model.pointer(h, s, mask) with the
                             NEW s; j = argmax over positions (B,); new_mask = mask with j set to False.
    ref                      listed by the brief, but the lesson's text has no exercise of that name; no
                             entries are given for it (see the report).

SLIPS: each answer has exactly one thing wrong, marked with a `# slip:` comment on that line.
CORRECT: right answers written differently from the reference solution.
"""
import math

import torch
import torch.nn.functional as F

# ---------------------------------------------------------------------------------------------------
# Exercise 1: additive pointer scores e_j = v^T tanh(W_h h_j + W_s s)
# ---------------------------------------------------------------------------------------------------

def scores_no_unsqueeze(h, s, W_h, W_s, v):
    hidden = torch.tanh(h @ W_h + s @ W_s)  # slip: adds (B, d_attn) to (B, T, d_attn) without unsqueeze(1): aligns the batch axis with T
    return hidden @ v


def scores_no_tanh(h, s, W_h, W_s, v):
    hidden = h @ W_h + (s @ W_s).unsqueeze(1)  # slip: forgets the tanh
    return hidden @ v


def scores_tanh_after_v(h, s, W_h, W_s, v):
    hidden = h @ W_h + (s @ W_s).unsqueeze(1)
    return torch.tanh(hidden @ v)  # slip: applies tanh after the product with v instead of before


def scores_weights_transposed(h, s, W_h, W_s, v):
    hidden = torch.tanh(h @ W_h.T + (s @ W_s.T).unsqueeze(1))  # slip: uses the weights transposed (nn.Linear habit), W^T instead of W
    return hidden @ v


def scores_softmaxed(h, s, W_h, W_s, v):
    hidden = torch.tanh(h @ W_h + (s @ W_s).unsqueeze(1))
    return torch.softmax(hidden @ v, dim=-1)  # slip: returns softmax weights instead of the raw scores


def scores_sum_wrong_axis(h, s, W_h, W_s, v):
    hidden = torch.tanh(h @ W_h + (s @ W_s).unsqueeze(1))
    return (hidden * v).sum(dim=1)  # slip: sums over the positions axis instead of the d_attn axis


def scores_no_v(h, s, W_h, W_s, v):
    hidden = torch.tanh(h @ W_h + (s @ W_s).unsqueeze(1))
    return hidden.sum(dim=-1)  # slip: sums the hidden units without weighting them by v


def scores_s_not_projected(h, s, W_h, W_s, v):
    hidden = torch.tanh(h @ W_h + s.unsqueeze(1))  # slip: adds s itself, forgets to project it with W_s
    return hidden @ v


def scores_repeat_wrong_axis(h, s, W_h, W_s, v):
    B, T, _ = h.shape
    proj_s = (s @ W_s).repeat(T, 1).reshape(B, T, -1)  # slip: repeats along the batch axis then reshapes, mixes up the batch elements
    hidden = torch.tanh(h @ W_h + proj_s)
    return hidden @ v


def scores_scaled(h, s, W_h, W_s, v):
    hidden = torch.tanh(h @ W_h + (s @ W_s).unsqueeze(1))
    return hidden @ v / math.sqrt(v.shape[0])  # slip: divides by sqrt(d_attn), carried over from dot-product attention


# right answers

def scores_einsum(h, s, W_h, W_s, v):
    hidden = torch.tanh(torch.einsum("btd,da->bta", h, W_h) + torch.einsum("bd,da->ba", s, W_s)[:, None, :])
    return torch.einsum("bta,a->bt", hidden, v)


def scores_linear_sum(h, s, W_h, W_s, v):
    proj_h = F.linear(h, W_h.T)                    # (B, T, d_attn)
    proj_s = F.linear(s, W_s.T).unsqueeze(1).expand_as(proj_h)
    return (torch.tanh(proj_h + proj_s) * v).sum(dim=-1)


def scores_matmul_unsqueeze_v(h, s, W_h, W_s, v):
    hidden = torch.tanh(torch.matmul(h, W_h) + torch.matmul(s, W_s)[:, None])
    return torch.matmul(hidden, v.unsqueeze(-1)).squeeze(-1)


# ---------------------------------------------------------------------------------------------------
# Exercise 2: masked softmax over positions
# ---------------------------------------------------------------------------------------------------

def msm_fill_zero(scores, mask):
    weights = torch.softmax(scores.masked_fill(~mask, 0.0), dim=-1)  # slip: fills masked scores with 0 instead of -inf
    return weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)


def msm_mask_inverted(scores, mask):
    weights = torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1)  # slip: mask inverted, hides the positions that may be chosen
    return weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)


def msm_wrong_dim(scores, mask):
    weights = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=0)  # slip: softmax over the batch axis instead of the positions
    return weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)


def msm_nan_rows(scores, mask):
    return torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)  # slip: no guard, a fully masked row gives NaN


def msm_big_negative(scores, mask):
    return torch.softmax(scores.masked_fill(~mask, -1e9), dim=-1)  # slip: -1e9 and no guard, a fully masked row gets uniform weights, not zeros


def msm_multiply_after(scores, mask):
    return torch.softmax(scores, dim=-1) * mask  # slip: zeroes masked weights after the softmax without renormalising


def msm_in_place(scores, mask):
    scores.masked_fill_(~mask, float("-inf"))  # slip: fills the caller's scores in place
    weights = torch.softmax(scores, dim=-1)
    return weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)


def msm_guard_wrong_axis(scores, mask):
    weights = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
    return weights.masked_fill(~mask.any(dim=0, keepdim=True), 0.0)  # slip: looks for fully masked rows along the batch axis


def msm_exp_no_max(scores, mask):
    e = torch.where(mask, scores.exp(), torch.zeros_like(scores))  # slip: exp without subtracting the max, overflows for large scores
    return e / e.sum(dim=-1, keepdim=True).clamp_min(1e-30)


def msm_renorm_wrong_axis(scores, mask):
    e = torch.softmax(scores, dim=-1) * mask
    return e / e.sum(dim=0, keepdim=True).clamp_min(1e-30)  # slip: renormalises over the batch axis instead of the positions


# right answers

def msm_nan_to_num(scores, mask):
    weights = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
    return torch.nan_to_num(weights, nan=0.0)


def msm_explicit(scores, mask):
    masked = torch.where(mask, scores, torch.full_like(scores, float("-inf")))
    top = masked.amax(dim=-1, keepdim=True)
    top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
    e = torch.where(mask, torch.exp(scores - top), torch.zeros_like(scores))
    total = e.sum(dim=-1, keepdim=True)
    return e / torch.where(total > 0, total, torch.ones_like(total))


def msm_where_rows(scores, mask):
    has_any = mask.any(dim=-1, keepdim=True)
    safe = scores.masked_fill(~mask & has_any, float("-inf"))   # fully masked rows stay finite
    return torch.where(has_any, safe.softmax(dim=-1), torch.zeros_like(scores))


# ---------------------------------------------------------------------------------------------------
# Exercise 3: one greedy decoding step
# ---------------------------------------------------------------------------------------------------

def step_old_state(model, h, state, inp, mask):
    s, c = model.decoder(inp, state)
    weights = model.pointer(h, state[0], mask)  # slip: points with the old decoder state instead of the new s
    j = weights.argmax(dim=-1)
    new_mask = mask.clone()
    new_mask[torch.arange(len(j)), j] = False
    return weights, j, new_mask, (s, c)


def step_argmax_wrong_dim(model, h, state, inp, mask):
    s, c = model.decoder(inp, state)
    weights = model.pointer(h, s, mask)
    j = weights.argmax(dim=0)  # slip: argmax over the batch axis instead of the positions
    new_mask = mask.clone()
    new_mask[torch.arange(len(j)), j] = False
    return weights, j, new_mask, (s, c)


def step_column_mask(model, h, state, inp, mask):
    s, c = model.decoder(inp, state)
    weights = model.pointer(h, s, mask)
    j = weights.argmax(dim=-1)
    new_mask = mask.clone()
    new_mask[:, j] = False  # slip: masks every chosen position in every batch row, not j[b] in row b
    return weights, j, new_mask, (s, c)


def step_forgets_old_mask(model, h, state, inp, mask):
    s, c = model.decoder(inp, state)
    weights = model.pointer(h, s, mask)
    j = weights.argmax(dim=-1)
    new_mask = ~F.one_hot(j, mask.shape[-1]).bool()  # slip: masks only the new choice, forgets the positions taken before
    return weights, j, new_mask, (s, c)


def step_no_mask_to_pointer(model, h, state, inp, mask):
    s, c = model.decoder(inp, state)
    weights = model.pointer(h, s)  # slip: does not pass the mask to the pointer, taken positions can be chosen again
    j = weights.argmax(dim=-1)
    new_mask = mask.clone()
    new_mask[torch.arange(len(j)), j] = False
    return weights, j, new_mask, (s, c)


def step_mask_set_true(model, h, state, inp, mask):
    s, c = model.decoder(inp, state)
    weights = model.pointer(h, s, mask)
    j = weights.argmax(dim=-1)
    new_mask = mask.clone()
    new_mask[torch.arange(len(j)), j] = True  # slip: sets the chosen position to True (convention inverted), the mask never changes
    return weights, j, new_mask, (s, c)


def step_returns_old_state(model, h, state, inp, mask):
    s, c = model.decoder(inp, state)
    weights = model.pointer(h, s, mask)
    j = weights.argmax(dim=-1)
    new_mask = mask.clone()
    new_mask[torch.arange(len(j)), j] = False
    return weights, j, new_mask, state  # slip: returns the old state instead of the new (s, c)


def step_no_state(model, h, state, inp, mask):
    s, c = model.decoder(inp)  # slip: calls the LSTM cell without the state, it starts from zeros every step
    weights = model.pointer(h, s, mask)
    j = weights.argmax(dim=-1)
    new_mask = mask.clone()
    new_mask[torch.arange(len(j)), j] = False
    return weights, j, new_mask, (s, c)


def step_keepdim(model, h, state, inp, mask):
    s, c = model.decoder(inp, state)
    weights = model.pointer(h, s, mask)
    j = weights.argmax(dim=-1, keepdim=True)  # slip: keeps the last axis, j is (B, 1) instead of (B,)
    new_mask = mask.scatter(1, j, False)
    return weights, j, new_mask, (s, c)


# right answers

def step_scatter(model, h, state, inp, mask):
    s, c = model.decoder(inp, state)
    weights = model.pointer(h, s, mask)
    j = torch.argmax(weights, dim=1)
    new_mask = mask.scatter(1, j.unsqueeze(1), False)
    return weights, j, new_mask, (s, c)


def step_arange_compare(model, h, state, inp, mask):
    new_state = model.decoder(inp, state)
    weights = model.pointer(h, new_state[0], mask)
    j = weights.max(dim=-1).indices
    positions = torch.arange(mask.shape[1], device=mask.device)
    new_mask = mask & (positions[None, :] != j[:, None])
    return weights, j, new_mask, tuple(new_state)


def step_mask_in_place(model, h, state, inp, mask):
    s, c = model.decoder(inp, state)
    weights = model.pointer(h, s, mask)
    j = weights.argmax(dim=-1)
    mask[torch.arange(len(j)), j] = False  # the step may update the mask it is given (the caller replaces it)
    return weights, j, mask, (s, c)


SLIPS = [
    ("pointer_scores", "adds s @ W_s of shape (B, d_attn) to (B, T, d_attn) without unsqueeze(1): broadcasting "
     "aligns the batch axis with the positions (raises unless B == T or B == 1)", scores_no_unsqueeze),
    ("pointer_scores", "forgets the tanh", scores_no_tanh),
    ("pointer_scores", "applies tanh after the product with v instead of inside", scores_tanh_after_v),
    ("pointer_scores", "uses the weight matrices transposed (h @ W_h.T), as with nn.Linear weights", scores_weights_transposed),
    ("pointer_scores", "returns the softmax of the scores instead of the raw scores", scores_softmaxed),
    ("pointer_scores", "sums over the positions axis instead of the d_attn axis after multiplying by v", scores_sum_wrong_axis),
    ("pointer_scores", "sums the tanh units without weighting them by v", scores_no_v),
    ("pointer_scores", "adds the decoder state s unprojected, forgets W_s", scores_s_not_projected),
    ("pointer_scores", "repeats W_s s along the wrong axis before reshaping to (B, T, d_attn), mixing batch elements",
     scores_repeat_wrong_axis),
    ("pointer_scores", "divides the scores by sqrt(d_attn), as in dot-product attention", scores_scaled),

    ("masked_pointer_softmax", "fills masked scores with 0 instead of -inf", msm_fill_zero),
    ("masked_pointer_softmax", "mask inverted: hides the positions that may still be chosen", msm_mask_inverted),
    ("masked_pointer_softmax", "softmax over the batch axis (dim=0) instead of the positions", msm_wrong_dim),
    ("masked_pointer_softmax", "no guard for a fully masked row, which comes out NaN", msm_nan_rows),
    ("masked_pointer_softmax", "fills with -1e9 and has no guard: a fully masked row gets uniform weights, not zeros",
     msm_big_negative),
    ("masked_pointer_softmax", "softmax over all positions, then zeroes the masked weights without renormalising",
     msm_multiply_after),
    ("masked_pointer_softmax", "fills the input scores in place (masked_fill_), changing the caller's tensor", msm_in_place),
    ("masked_pointer_softmax", "looks for fully masked rows with any over the batch axis instead of the positions",
     msm_guard_wrong_axis),
    ("masked_pointer_softmax", "softmax written out without subtracting the max: large scores overflow to inf/NaN",
     msm_exp_no_max),
    ("masked_pointer_softmax", "renormalises the masked weights over the batch axis instead of the positions",
     msm_renorm_wrong_axis),

    ("decode_step", "points with the old decoder state instead of the new one", step_old_state),
    ("decode_step", "argmax over the batch axis instead of the positions", step_argmax_wrong_dim),
    ("decode_step", "new_mask[:, j] = False: masks every chosen position in every row", step_column_mask),
    ("decode_step", "new mask marks only the new choice, forgetting the positions taken before", step_forgets_old_mask),
    ("decode_step", "does not pass the mask to the pointer, so taken positions can be chosen again", step_no_mask_to_pointer),
    ("decode_step", "sets the chosen position to True in the new mask (convention inverted)", step_mask_set_true),
    ("decode_step", "returns the old decoder state instead of the new (s, c)", step_returns_old_state),
    ("decode_step", "calls the LSTM cell without the state, so it restarts from zeros every step", step_no_state),
    ("decode_step", "argmax with keepdim=True: j has shape (B, 1) instead of (B,)", step_keepdim),
]

CORRECT = [
    ("pointer_scores", "einsum for the three products", scores_einsum),
    ("pointer_scores", "F.linear with the transposed weights, W_s s expanded over T, weighted sum with v",
     scores_linear_sum),
    ("pointer_scores", "torch.matmul, v as a column then squeezed", scores_matmul_unsqueeze_v),

    ("masked_pointer_softmax", "softmax with -inf, then NaN of fully masked rows turned into 0 by nan_to_num",
     msm_nan_to_num),
    ("masked_pointer_softmax", "softmax written out: max over allowed positions subtracted, exp where allowed, "
     "empty rows divided by 1", msm_explicit),
    ("masked_pointer_softmax", "fully masked rows left finite, then replaced by zeros with torch.where", msm_where_rows),

    ("decode_step", "argmax over dim 1, mask updated with scatter (out of place)", step_scatter),
    ("decode_step", "max().indices, new mask by comparing an arange of positions with j", step_arange_compare),
    # catalogued as a slip at first; the text asks only for the new mask m_(i+1), the caller replaces its mask with
    # it (`w, j, mask, state = decode_step(...)`), and the check lets the step update the mask it is given
    ("decode_step", "edits the mask it is given in place and returns it", step_mask_in_place),
]
