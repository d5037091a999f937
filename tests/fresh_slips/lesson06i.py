"""Typical learner mistakes (and some correct variants) for lesson 06, pointer networks.

Exercises (check names): pointer_scores, masked_pointer_softmax, decode_step.

Each answer has the signature of the reference solution in solutions/06_pointer_networks.ipynb:
    pointer_scores(h, s, W_h, W_s, v)         h (B, T, d_h), s (B, d_s), W_h (d_h, d_attn),
                                              W_s (d_s, d_attn), v (d_attn,) -> scores (B, T)
    masked_pointer_softmax(scores, mask)      scores (B, T), mask (B, T) bool, True = may be chosen
                                              -> weights (B, T); fully masked row -> zeros
    decode_step(model, h, state, inp, mask)   -> (weights (B, T), j (B,), new_mask (B, T), (s, c))

Every slip has exactly one thing wrong, marked by a `# slip:` comment.
"""
import math

import torch
import torch.nn.functional as F

# ----------------------------------------------------------------------------------------------
# pointer_scores
# ----------------------------------------------------------------------------------------------

def scores_no_unsqueeze(h, s, W_h, W_s, v):
    hidden = torch.tanh(h @ W_h + s @ W_s)   # slip: (B, d_attn) is not unsqueezed, it broadcasts against T instead of B
    return hidden @ v


def scores_no_tanh(h, s, W_h, W_s, v):
    hidden = h @ W_h + (s @ W_s).unsqueeze(1)   # slip: forgets the tanh
    return hidden @ v


def scores_tanh_after_v(h, s, W_h, W_s, v):
    hidden = h @ W_h + (s @ W_s).unsqueeze(1)
    return torch.tanh(hidden @ v)   # slip: tanh applied after the projection by v instead of before


def scores_tanh_separately(h, s, W_h, W_s, v):
    hidden = torch.tanh(h @ W_h) + torch.tanh(s @ W_s).unsqueeze(1)   # slip: tanh of each term separately, not of their sum
    return hidden @ v


def scores_W_h_transposed(h, s, W_h, W_s, v):
    hidden = torch.tanh(h @ W_h.T + (s @ W_s).unsqueeze(1))   # slip: transposes W_h (nn.Linear habit), the lesson's weights act on the right
    return hidden @ v


def scores_softmax(h, s, W_h, W_s, v):
    hidden = torch.tanh(h @ W_h + (s @ W_s).unsqueeze(1))
    return torch.softmax(hidden @ v, dim=-1)   # slip: returns softmax weights, the exercise asks for the scores before any softmax


def scores_keeps_last_axis(h, s, W_h, W_s, v):
    hidden = torch.tanh(h @ W_h + (s @ W_s).unsqueeze(1))
    return hidden @ v.unsqueeze(-1)   # slip: v as a column keeps a trailing axis, (B, T, 1) instead of (B, T)


def scores_weights_swapped(h, s, W_h, W_s, v):
    hidden = torch.tanh(h @ W_s + (s @ W_h).unsqueeze(1))   # slip: W_s applied to h and W_h to s
    return hidden @ v


def scores_scaled(h, s, W_h, W_s, v):
    hidden = torch.tanh(h @ W_h + (s @ W_s).unsqueeze(1))
    return hidden @ v / math.sqrt(v.shape[0])   # slip: divides by sqrt(d_attn), carried over from scaled dot-product attention


def scores_multiplicative(h, s, W_h, W_s, v):
    hidden = torch.tanh(h @ W_h * (s @ W_s).unsqueeze(1))   # slip: multiplies the two projections instead of adding them
    return hidden @ v


def scores_einsum(h, s, W_h, W_s, v):
    keys = torch.einsum("btd,da->bta", h, W_h)
    query = torch.einsum("bd,da->ba", s, W_s)
    return torch.einsum("bta,a->bt", torch.tanh(keys + query[:, None, :]), v)


def scores_mul_sum(h, s, W_h, W_s, v):
    hidden = torch.tanh(torch.matmul(h, W_h) + torch.matmul(s, W_s)[:, None, :])
    return (hidden * v).sum(dim=-1)


def scores_linear(h, s, W_h, W_s, v):
    hidden = torch.tanh(F.linear(h, W_h.T) + F.linear(s, W_s.T).unsqueeze(-2))
    return F.linear(hidden, v.unsqueeze(0)).squeeze(-1)


# ----------------------------------------------------------------------------------------------
# masked_pointer_softmax
# ----------------------------------------------------------------------------------------------

def softmax_mask_inverted(scores, mask):
    weights = torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1)   # slip: mask inverted, blocks the positions that may be chosen
    return weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)


def softmax_fill_zero(scores, mask):
    weights = torch.softmax(scores.masked_fill(~mask, 0.0), dim=-1)   # slip: fills masked scores with 0, and exp(0) = 1 leaks probability to them
    return weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)


def softmax_then_multiply(scores, mask):
    return torch.softmax(scores, dim=-1) * mask   # slip: zeroes the masked weights after the softmax without renormalising


def softmax_nan_rows(scores, mask):
    return torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)   # slip: a fully masked row is all -inf and gives NaN, not zeros


def softmax_manual_no_max(scores, mask):
    e = torch.exp(scores) * mask   # slip: exp without subtracting the row maximum overflows / underflows for scores moved by 200
    total = e.sum(dim=-1, keepdim=True)
    return e / torch.where(total > 0, total, torch.ones_like(total))


def softmax_wrong_axis(scores, mask):
    weights = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=0)   # slip: softmax over the batch axis instead of the positions
    return weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)


def softmax_finite_fill(scores, mask):
    return torch.softmax(scores.masked_fill(~mask, -1e9), dim=-1)   # slip: a finite fill without zeroing fully masked rows, which come out uniform


def softmax_in_place(scores, mask):
    scores.masked_fill_(~mask, float("-inf"))   # slip: fills in place, overwriting the caller's scores
    weights = torch.softmax(scores, dim=-1)
    return weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)


def softmax_denominator_all(scores, mask):
    e = torch.exp(scores - scores.amax(dim=-1, keepdim=True))
    return e * mask / e.sum(dim=-1, keepdim=True)   # slip: the denominator sums over every position, masked ones included


def softmax_log(scores, mask):
    weights = torch.log_softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)   # slip: log-softmax instead of softmax
    return weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)


def softmax_nan_to_num(scores, mask):
    return torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1).nan_to_num(0.0)


def softmax_manual_stable(scores, mask):
    masked = scores.masked_fill(~mask, float("-inf"))
    row_max = masked.amax(dim=-1, keepdim=True)
    row_max = torch.where(torch.isfinite(row_max), row_max, torch.zeros_like(row_max))
    e = torch.exp(masked - row_max)                        # exactly 0 where masked
    total = e.sum(dim=-1, keepdim=True)
    return e / torch.where(total > 0, total, torch.ones_like(total))


def softmax_where(scores, mask):
    weights = F.softmax(torch.where(mask, scores, float("-inf")), dim=-1)
    return torch.where(mask, weights, torch.zeros_like(weights))


# ----------------------------------------------------------------------------------------------
# decode_step
# ----------------------------------------------------------------------------------------------

def step_old_state(model, h, state, inp, mask):
    weights = model.pointer(h, state[0], mask)   # slip: points with the previous state s_{i-1}, before the LSTM update
    s, c = model.decoder(inp, state)
    j = weights.argmax(dim=-1)
    new_mask = mask.clone()
    new_mask[torch.arange(len(j)), j] = False
    return weights, j, new_mask, (s, c)


def step_returns_old_state(model, h, state, inp, mask):
    s, c = model.decoder(inp, state)
    weights = model.pointer(h, s, mask)
    j = weights.argmax(dim=-1)
    new_mask = mask.clone()
    new_mask[torch.arange(len(j)), j] = False
    return weights, j, new_mask, state   # slip: returns the old state instead of the updated (s, c)


def step_mask_in_place(model, h, state, inp, mask):
    s, c = model.decoder(inp, state)
    weights = model.pointer(h, s, mask)
    j = weights.argmax(dim=-1)
    new_mask = mask   # no clone: the caller's mask is changed in place (allowed, see CORRECT)
    new_mask[torch.arange(len(j)), j] = False
    return weights, j, new_mask, (s, c)


def step_sets_true(model, h, state, inp, mask):
    s, c = model.decoder(inp, state)
    weights = model.pointer(h, s, mask)
    j = weights.argmax(dim=-1)
    new_mask = mask.clone()
    new_mask[torch.arange(len(j)), j] = True   # slip: marks the chosen position True (convention inverted), so it stays available
    return weights, j, new_mask, (s, c)


def step_mask_all_rows(model, h, state, inp, mask):
    s, c = model.decoder(inp, state)
    weights = model.pointer(h, s, mask)
    j = weights.argmax(dim=-1)
    new_mask = mask.clone()
    new_mask[:, j] = False   # slip: masks every chosen position in every row, not j[b] in row b
    return weights, j, new_mask, (s, c)


def step_argmax_wrong_axis(model, h, state, inp, mask):
    s, c = model.decoder(inp, state)
    weights = model.pointer(h, s, mask)
    j = weights.argmax(dim=0)   # slip: argmax over the batch instead of the positions
    new_mask = mask.clone()
    new_mask[torch.arange(len(j)), j] = False
    return weights, j, new_mask, (s, c)


def step_no_mask(model, h, state, inp, mask):
    s, c = model.decoder(inp, state)
    weights = model.pointer(h, s)   # slip: points without the mask, so a taken position can be chosen again
    j = weights.argmax(dim=-1)
    new_mask = mask.clone()
    new_mask[torch.arange(len(j)), j] = False
    return weights, j, new_mask, (s, c)


def step_argmax_raw_scores(model, h, state, inp, mask):
    s, c = model.decoder(inp, state)
    weights = model.pointer(h, s, mask)
    j = model.pointer.scores(h, s).argmax(dim=-1)   # slip: argmax of the unmasked scores, which may pick a taken position
    new_mask = mask.clone()
    new_mask[torch.arange(len(j)), j] = False
    return weights, j, new_mask, (s, c)


def step_points_with_cell(model, h, state, inp, mask):
    s, c = model.decoder(inp, state)
    weights = model.pointer(h, c, mask)   # slip: points with the cell state c instead of the hidden state s
    j = weights.argmax(dim=-1)
    new_mask = mask.clone()
    new_mask[torch.arange(len(j)), j] = False
    return weights, j, new_mask, (s, c)


def step_one_hot_without_not(model, h, state, inp, mask):
    s, c = model.decoder(inp, state)
    weights = model.pointer(h, s, mask)
    j = weights.argmax(dim=-1)
    new_mask = mask & F.one_hot(j, mask.shape[-1]).bool()   # slip: forgets the ~, keeps only the chosen position instead of removing it
    return weights, j, new_mask, (s, c)


def step_scatter(model, h, state, inp, mask):
    s, c = model.decoder(inp, state)
    weights = model.pointer(h, s, mask)
    j = torch.max(weights, dim=-1).indices
    new_mask = mask.scatter(1, j.unsqueeze(1), False)
    return weights, j, new_mask, (s, c)


def step_arange_compare(model, h, state, inp, mask):
    new_state = model.decoder(inp, state)
    weights = model.pointer(h, new_state[0], mask=mask)
    j = weights.argmax(-1)
    positions = torch.arange(mask.shape[1], device=mask.device)
    new_mask = mask & (positions.unsqueeze(0) != j.unsqueeze(1))
    return weights, j, new_mask, new_state


# ----------------------------------------------------------------------------------------------

SLIPS = [
    ("pointer_scores", "W_s s is not unsqueezed, so it broadcasts over the wrong axis", scores_no_unsqueeze),
    ("pointer_scores", "forgets the tanh", scores_no_tanh),
    ("pointer_scores", "applies tanh after multiplying by v", scores_tanh_after_v),
    ("pointer_scores", "tanh of each projection separately instead of their sum", scores_tanh_separately),
    ("pointer_scores", "transposes W_h (uses h @ W_h.T)", scores_W_h_transposed),
    ("pointer_scores", "returns the softmax of the scores instead of the raw scores", scores_softmax),
    ("pointer_scores", "multiplies by v as a column, returning (B, T, 1)", scores_keeps_last_axis),
    ("pointer_scores", "W_h and W_s swapped", scores_weights_swapped),
    ("pointer_scores", "divides the scores by sqrt(d_attn)", scores_scaled),
    ("pointer_scores", "multiplies the projections of h and s instead of adding them", scores_multiplicative),

    ("masked_pointer_softmax", "mask inverted: the allowed positions are the ones filled", softmax_mask_inverted),
    ("masked_pointer_softmax", "fills masked scores with 0 instead of -inf", softmax_fill_zero),
    ("masked_pointer_softmax", "multiplies the softmax by the mask without renormalising", softmax_then_multiply),
    ("masked_pointer_softmax", "fully masked rows come out NaN", softmax_nan_rows),
    ("masked_pointer_softmax", "hand-written softmax without subtracting the row maximum", softmax_manual_no_max),
    ("masked_pointer_softmax", "softmax over the batch axis", softmax_wrong_axis),
    ("masked_pointer_softmax", "fills with -1e9 and leaves fully masked rows uniform instead of zero", softmax_finite_fill),
    ("masked_pointer_softmax", "fills the scores in place, modifying the input", softmax_in_place),
    ("masked_pointer_softmax", "the denominator includes the masked positions", softmax_denominator_all),
    ("masked_pointer_softmax", "returns log-softmax instead of softmax", softmax_log),

    ("decode_step", "points with the old decoder state, before the LSTM update", step_old_state),
    ("decode_step", "returns the old state instead of the new (s, c)", step_returns_old_state),
    ("decode_step", "sets the chosen position to True instead of False", step_sets_true),
    ("decode_step", "new_mask[:, j] = False masks all chosen positions in every row", step_mask_all_rows),
    ("decode_step", "argmax over the batch axis instead of the positions", step_argmax_wrong_axis),
    ("decode_step", "calls the pointer without the mask", step_no_mask),
    ("decode_step", "takes the argmax of the unmasked scores", step_argmax_raw_scores),
    ("decode_step", "points with the cell state c instead of the hidden state s", step_points_with_cell),
    ("decode_step", "mask & one_hot(j) without ~: keeps only the chosen position", step_one_hot_without_not),
]

CORRECT = [
    ("pointer_scores", "einsum for every product", scores_einsum),
    ("pointer_scores", "matmul, broadcast with None, multiply by v and sum", scores_mul_sum),
    ("pointer_scores", "F.linear with the transposed weights", scores_linear),

    ("masked_pointer_softmax", "softmax with -inf fill, then nan_to_num for fully masked rows", softmax_nan_to_num),
    ("masked_pointer_softmax", "hand-written softmax, row maximum over the allowed positions, guarded denominator", softmax_manual_stable),
    ("masked_pointer_softmax", "torch.where before and after the softmax", softmax_where),

    ("decode_step", "max(...).indices and scatter of False into the mask", step_scatter),
    ("decode_step", "keeps the state as a tuple, masks with an arange comparison", step_arange_compare),
    # catalogued as a slip at first; the text asks only for the new mask m_(i+1), the caller replaces its mask with
    # it (`w, j, mask, state = decode_step(...)`), and the check lets the step update the mask it is given
    # (as lesson06h's catalogue decided for the same answer)
    ("decode_step", "updates the caller's mask in place (no clone)", step_mask_in_place),
]
