"""Typical learner mistakes (and a few differently written right answers) for lesson 03, Bahdanau attention.

Exercises, as the checks call them:
    bidirectional_states     bidirectional_states(h_fwd, h_bwd, lengths) -> h (B, S, 2d), final (B, 2d)
                             h_i = [fwd h_i; bwd h_i]; final = [fwd h at token n; bwd h at token 1]
    additive_score           additive_score(s, h, W_a, v_a) -> e (B, T), e_i = v_a^T tanh(W_a [s; h_i])
    masked_softmax           masked_softmax(scores, mask) -> weights (..., T); mask bool, True = keep,
                             broadcastable; a row with no True gives zeros, not NaN
    context_vector           context_vector(weights, h) -> c (B, d_h) = sum_i weights_i h_i
    attention_decoder_step   attention_decoder_step(decoder, y_prev, s_prev, h, mask) -> logits, s, alpha
                             c, alpha = decoder.attention(s_prev, h, mask);
                             s = decoder.gru([embedding(y_prev); c], s_prev); logits = decoder.out([s; c])

SLIPS: each answer has exactly one thing wrong, marked with a `# slip:` comment on that line.
CORRECT: right answers written differently from the reference solution.
"""

import torch

# ---------------------------------------------------------------------------------------------------
# Exercise 1: bidirectional_states
# ---------------------------------------------------------------------------------------------------

def bidir_last_padded_position(h_fwd, h_bwd, lengths):
    h = torch.cat([h_fwd, h_bwd], dim=-1)
    last = h_fwd[:, -1]  # slip: forward final state at the last padded position, not at the last real token
    first = h_bwd[:, 0]
    return h, torch.cat([last, first], dim=-1)


def bidir_lengths_off_by_one(h_fwd, h_bwd, lengths):
    h = torch.cat([h_fwd, h_bwd], dim=-1)
    last = h_fwd[torch.arange(h_fwd.shape[0]), lengths]  # slip: index `lengths` instead of `lengths - 1`
    first = h_bwd[:, 0]
    return h, torch.cat([last, first], dim=-1)


def bidir_backward_at_last_token(h_fwd, h_bwd, lengths):
    h = torch.cat([h_fwd, h_bwd], dim=-1)
    rows = torch.arange(h_fwd.shape[0])
    last = h_fwd[rows, lengths - 1]
    first = h_bwd[rows, lengths - 1]  # slip: backward final state taken at the last real token (where it starts)
    return h, torch.cat([last, first], dim=-1)


def bidir_backward_at_padded_end(h_fwd, h_bwd, lengths):
    h = torch.cat([h_fwd, h_bwd], dim=-1)
    last = h_fwd[torch.arange(h_fwd.shape[0]), lengths - 1]
    first = h_bwd[:, -1]  # slip: backward final state at the last (padded) position instead of position 0
    return h, torch.cat([last, first], dim=-1)


def bidir_h_order_swapped(h_fwd, h_bwd, lengths):
    h = torch.cat([h_bwd, h_fwd], dim=-1)  # slip: backward half first in h
    last = h_fwd[torch.arange(h_fwd.shape[0]), lengths - 1]
    first = h_bwd[:, 0]
    return h, torch.cat([last, first], dim=-1)


def bidir_h_stack_reshape(h_fwd, h_bwd, lengths):
    B, S, d = h_fwd.shape
    h = torch.stack([h_fwd, h_bwd], dim=-1).reshape(B, S, 2 * d)  # slip: interleaves the features of the two directions
    last = h_fwd[torch.arange(B), lengths - 1]
    first = h_bwd[:, 0]
    return h, torch.cat([last, first], dim=-1)


def bidir_h_cat_positions(h_fwd, h_bwd, lengths):
    h = torch.cat([h_fwd, h_bwd], dim=1)  # slip: concatenates along the positions axis, (B, 2S, d)
    last = h_fwd[torch.arange(h_fwd.shape[0]), lengths - 1]
    first = h_bwd[:, 0]
    return h, torch.cat([last, first], dim=-1)


def bidir_h_backward_flipped(h_fwd, h_bwd, lengths):
    h = torch.cat([h_fwd, h_bwd.flip(1)], dim=-1)  # slip: flips the backward states along the positions
    last = h_fwd[torch.arange(h_fwd.shape[0]), lengths - 1]
    first = h_bwd[:, 0]
    return h, torch.cat([last, first], dim=-1)


def bidir_final_order_swapped(h_fwd, h_bwd, lengths):
    h = torch.cat([h_fwd, h_bwd], dim=-1)
    last = h_fwd[torch.arange(h_fwd.shape[0]), lengths - 1]
    first = h_bwd[:, 0]
    return h, torch.cat([first, last], dim=-1)  # slip: final is [backward; forward]


def bidir_final_cat_dim0(h_fwd, h_bwd, lengths):
    h = torch.cat([h_fwd, h_bwd], dim=-1)
    last = h_fwd[torch.arange(h_fwd.shape[0]), lengths - 1]
    first = h_bwd[:, 0]
    return h, torch.cat([last, first], dim=0)  # slip: stacks the two final states along the batch, (2B, d)


# right answers

def bidir_gather_slices(h_fwd, h_bwd, lengths):
    B, S, d = h_fwd.shape
    h = h_fwd.new_empty(B, S, 2 * d)
    h[..., :d] = h_fwd
    h[..., d:] = h_bwd
    index = (lengths.to(h_fwd.device).long() - 1).view(B, 1, 1).expand(B, 1, d)
    last = h_fwd.gather(1, index).squeeze(1)
    final = h_fwd.new_empty(B, 2 * d)
    final[:, :d] = last
    final[:, d:] = h_bwd[:, 0, :]
    return h, final


def bidir_loop(h_fwd, h_bwd, lengths):
    h = torch.concat((h_fwd, h_bwd), dim=2)
    finals = []
    for b in range(h_fwd.shape[0]):
        n = int(lengths[b])
        finals.append(torch.cat([h_fwd[b, n - 1], h_bwd[b, 0]]))
    return h, torch.stack(finals)


def bidir_from_h(h_fwd, h_bwd, lengths):
    d = h_fwd.shape[-1]
    h = torch.cat([h_fwd, h_bwd], dim=-1)
    rows = torch.arange(h.shape[0], device=h.device)
    last = h[rows, lengths.to(h.device) - 1, :d]       # forward half at token n
    first = h[:, 0, d:]                                 # backward half at token 1
    return h, torch.cat([last, first], dim=1)


# ---------------------------------------------------------------------------------------------------
# Exercise 2: additive_score
# ---------------------------------------------------------------------------------------------------

def additive_no_transpose(s, h, W_a, v_a):
    B, T, _ = h.shape
    s_h = torch.cat([s[:, None, :].expand(B, T, s.shape[-1]), h], dim=-1)
    return torch.tanh(s_h @ W_a) @ v_a  # slip: W_a not transposed (only runs when W_a is square)


def additive_order_swapped(s, h, W_a, v_a):
    B, T, _ = h.shape
    s_h = torch.cat([h, s[:, None, :].expand(B, T, s.shape[-1])], dim=-1)  # slip: concatenates [h; s] instead of [s; h]
    return torch.tanh(s_h @ W_a.T) @ v_a


def additive_no_tanh(s, h, W_a, v_a):
    B, T, _ = h.shape
    s_h = torch.cat([s[:, None, :].expand(B, T, s.shape[-1]), h], dim=-1)
    return (s_h @ W_a.T) @ v_a  # slip: forgets the tanh


def additive_tanh_after_v(s, h, W_a, v_a):
    B, T, _ = h.shape
    s_h = torch.cat([s[:, None, :].expand(B, T, s.shape[-1]), h], dim=-1)
    return torch.tanh(s_h @ W_a.T @ v_a)  # slip: tanh applied after v_a instead of before


def additive_returns_softmax(s, h, W_a, v_a):
    B, T, _ = h.shape
    s_h = torch.cat([s[:, None, :].expand(B, T, s.shape[-1]), h], dim=-1)
    return torch.softmax(torch.tanh(s_h @ W_a.T) @ v_a, dim=-1)  # slip: returns softmax weights instead of the scores


def additive_split_wrong_width(s, h, W_a, v_a):
    d_h = h.shape[-1]
    W_s, W_h = W_a[:, :d_h], W_a[:, d_h:]  # slip: splits W_a at d_h instead of d_s
    return torch.tanh((s @ W_s.T)[:, None, :] + h @ W_h.T) @ v_a


def additive_repeat_view(s, h, W_a, v_a):
    B, T, _ = h.shape
    s_rep = s.repeat(T, 1).view(B, T, s.shape[-1])  # slip: repeat(T, 1) + view mixes the rows of different sequences
    s_h = torch.cat([s_rep, h], dim=-1)
    return torch.tanh(s_h @ W_a.T) @ v_a


def additive_sum_wrong_axis(s, h, W_a, v_a):
    B, T, _ = h.shape
    s_h = torch.cat([s[:, None, :].expand(B, T, s.shape[-1]), h], dim=-1)
    return (torch.tanh(s_h @ W_a.T) * v_a).sum(dim=1)  # slip: sums over the positions instead of the hidden units


def additive_keeps_last_axis(s, h, W_a, v_a):
    B, T, _ = h.shape
    s_h = torch.cat([s[:, None, :].expand(B, T, s.shape[-1]), h], dim=-1)
    return torch.tanh(s_h @ W_a.T) @ v_a[:, None]  # slip: v_a as a column, returns (B, T, 1) instead of (B, T)


# right answers

def additive_split_blocks(s, h, W_a, v_a):
    d_s = s.shape[-1]
    W_s, W_h = W_a[:, :d_s], W_a[:, d_s:]          # W_a [s; h_i] = W_s s + W_h h_i (the paper's form)
    hidden = torch.tanh((s @ W_s.T).unsqueeze(1) + h @ W_h.T)
    return (hidden * v_a).sum(-1)


def additive_einsum(s, h, W_a, v_a):
    T = h.shape[1]
    s_h = torch.cat([s.unsqueeze(1).repeat(1, T, 1), h], dim=2)
    hidden = torch.tanh(torch.einsum("btk,ak->bta", s_h, W_a))
    return torch.einsum("bta,a->bt", hidden, v_a)


def additive_linear(s, h, W_a, v_a):
    B, T, d_s = h.shape[0], h.shape[1], s.shape[1]
    s_h = torch.cat([s.reshape(B, 1, d_s).expand(-1, T, -1), h], dim=-1)
    return torch.nn.functional.linear(torch.tanh(torch.nn.functional.linear(s_h, W_a)), v_a[None]).squeeze(-1)


# ---------------------------------------------------------------------------------------------------
# Exercise 3: masked_softmax
# ---------------------------------------------------------------------------------------------------

def softmax_mask_inverted(scores, mask):
    scores = scores.masked_fill(mask, torch.finfo(scores.dtype).min)  # slip: masks the True (keep) positions
    return torch.softmax(scores, dim=-1) * ~mask


def softmax_minus_inf_nan(scores, mask):
    scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=-1)  # slip: a fully masked row is all -inf and gives NaN


def softmax_fill_zero(scores, mask):
    scores = scores.masked_fill(~mask, 0.0)  # slip: fills masked scores with 0 instead of a very negative number
    return torch.softmax(scores, dim=-1) * mask


def softmax_then_mask(scores, mask):
    return torch.softmax(scores, dim=-1) * mask  # slip: zeroes the masked weights after the softmax, no renormalisation


def softmax_dim1(scores, mask):
    scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    return torch.softmax(scores, dim=1) * mask  # slip: softmax over dim 1, the last axis only for 2-D scores


def softmax_empty_row_uniform(scores, mask):
    scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    return torch.softmax(scores, dim=-1)  # slip: a fully masked row gets uniform weights instead of zeros


def softmax_no_max_subtraction(scores, mask):
    e = torch.exp(scores) * mask  # slip: no max subtraction, exp overflows for large scores
    total = e.sum(dim=-1, keepdim=True)
    return e / torch.where(total > 0, total, torch.ones_like(total))


def softmax_renormalise_nan(scores, mask):
    weights = torch.softmax(scores.masked_fill(~mask, torch.finfo(scores.dtype).min), dim=-1) * mask
    return weights / weights.sum(dim=-1, keepdim=True)  # slip: divides by the row sum, 0/0 = NaN on fully masked rows


def softmax_in_place(scores, mask):
    scores.masked_fill_(~mask, torch.finfo(scores.dtype).min)  # slip: overwrites the caller's scores in place
    return torch.softmax(scores, dim=-1) * mask


# right answers

def softmax_inf_nan_to_num(scores, mask):
    weights = torch.softmax(torch.where(mask, scores, torch.tensor(float("-inf"), dtype=scores.dtype)), dim=-1)
    return torch.nan_to_num(weights, nan=0.0)       # fully masked rows: NaN -> 0


def softmax_explicit(scores, mask):
    mask = mask.expand_as(scores)
    row_max = scores.masked_fill(~mask, float("-inf")).amax(dim=-1, keepdim=True)
    row_max = torch.where(torch.isfinite(row_max), row_max, torch.zeros_like(row_max))
    e = torch.where(mask, torch.exp(scores - row_max), torch.zeros_like(scores))
    total = e.sum(dim=-1, keepdim=True)
    return e / torch.where(total > 0, total, torch.ones_like(total))


def softmax_has_any(scores, mask):
    mask = mask.expand_as(scores)
    has_any = mask.any(dim=-1, keepdim=True)
    low = torch.finfo(scores.dtype).min
    weights = torch.where(mask, scores, torch.full_like(scores, low)).softmax(dim=-1)
    return torch.where(mask & has_any, weights, torch.zeros_like(weights))


# ---------------------------------------------------------------------------------------------------
# Exercise 4: context_vector
# ---------------------------------------------------------------------------------------------------

def context_sum_wrong_axis(weights, h):
    return (weights[..., None] * h).sum(dim=-1)  # slip: sums over the features instead of the positions


def context_mean(weights, h):
    return (weights[..., None] * h).mean(dim=1)  # slip: averages over the positions instead of summing


def context_matmul_no_unsqueeze(weights, h):
    return torch.matmul(weights, h)  # slip: (B, T) @ (B, T, d) broadcasts to (B, B, d): every row's weights on every sequence


def context_bmm_squeeze(weights, h):
    return torch.bmm(weights.unsqueeze(1), h).squeeze()  # slip: squeeze() also drops the batch axis when B == 1


def context_einsum_two_indices(weights, h):
    return torch.einsum("bt,bsd->bd", weights, h)  # slip: different letters for the positions: (sum of weights) * (sum of h)


def context_renormalise(weights, h):
    weights = weights / weights.sum(dim=1, keepdim=True)  # slip: renormalises the weights (NaN on all-zero rows, changes unnormalised weights)
    return (weights[..., None] * h).sum(dim=1)


def context_softmax_again(weights, h):
    weights = torch.softmax(weights, dim=-1)  # slip: applies a softmax to the weights again
    return (weights[..., None] * h).sum(dim=1)


def context_in_place(weights, h):
    h *= weights[..., None]  # slip: scales the caller's encoder states in place
    return h.sum(dim=1)


# right answers

def context_bmm(weights, h):
    return torch.bmm(weights.unsqueeze(1), h).squeeze(1)


def context_matmul_transpose(weights, h):
    return (h.transpose(1, 2) @ weights.unsqueeze(-1))[..., 0]


def context_loop(weights, h):
    c = torch.zeros(h.shape[0], h.shape[2], dtype=torch.result_type(weights, h), device=h.device)
    for t in range(h.shape[1]):
        c = c + weights[:, t, None] * h[:, t]
    return c


# ---------------------------------------------------------------------------------------------------
# Exercise 5: attention_decoder_step
# ---------------------------------------------------------------------------------------------------

def step_reattend_with_new_state(decoder, y_prev, s_prev, h, mask):
    c, alpha = decoder.attention(s_prev, h, mask)
    s = decoder.gru(torch.cat([decoder.embedding(y_prev), c], dim=-1), s_prev)
    c, alpha = decoder.attention(s, h, mask)  # slip: reads a new context with s_t for the output (Luong's order)
    return decoder.out(torch.cat([s, c], dim=-1)), s, alpha


def step_gru_input_order(decoder, y_prev, s_prev, h, mask):
    c, alpha = decoder.attention(s_prev, h, mask)
    s = decoder.gru(torch.cat([c, decoder.embedding(y_prev)], dim=-1), s_prev)  # slip: GRU input is [c; E y] instead of [E y; c]
    return decoder.out(torch.cat([s, c], dim=-1)), s, alpha


def step_out_input_order(decoder, y_prev, s_prev, h, mask):
    c, alpha = decoder.attention(s_prev, h, mask)
    s = decoder.gru(torch.cat([decoder.embedding(y_prev), c], dim=-1), s_prev)
    return decoder.out(torch.cat([c, s], dim=-1)), s, alpha  # slip: output layer gets [c; s] instead of [s; c]


def step_out_from_prev_state(decoder, y_prev, s_prev, h, mask):
    c, alpha = decoder.attention(s_prev, h, mask)
    s = decoder.gru(torch.cat([decoder.embedding(y_prev), c], dim=-1), s_prev)
    return decoder.out(torch.cat([s_prev, c], dim=-1)), s, alpha  # slip: predicts from s_{t-1} instead of the new state


def step_returns_prev_state(decoder, y_prev, s_prev, h, mask):
    c, alpha = decoder.attention(s_prev, h, mask)
    s = decoder.gru(torch.cat([decoder.embedding(y_prev), c], dim=-1), s_prev)
    return decoder.out(torch.cat([s, c], dim=-1)), s_prev, alpha  # slip: returns the old state instead of the new one


def step_no_mask(decoder, y_prev, s_prev, h, mask):
    c, alpha = decoder.attention(s_prev, h)  # slip: forgets the mask, attends to padding
    s = decoder.gru(torch.cat([decoder.embedding(y_prev), c], dim=-1), s_prev)
    return decoder.out(torch.cat([s, c], dim=-1)), s, alpha


def step_mask_inverted(decoder, y_prev, s_prev, h, mask):
    c, alpha = decoder.attention(s_prev, h, ~mask)  # slip: inverts the mask (True taken as padding)
    s = decoder.gru(torch.cat([decoder.embedding(y_prev), c], dim=-1), s_prev)
    return decoder.out(torch.cat([s, c], dim=-1)), s, alpha


def step_returns_probabilities(decoder, y_prev, s_prev, h, mask):
    c, alpha = decoder.attention(s_prev, h, mask)
    s = decoder.gru(torch.cat([decoder.embedding(y_prev), c], dim=-1), s_prev)
    return torch.softmax(decoder.out(torch.cat([s, c], dim=-1)), dim=-1), s, alpha  # slip: returns probabilities, not logits


# right answers

def step_embed_first(decoder, y_prev, s_prev, h, mask):
    emb = decoder.embedding(y_prev)
    context, weights = decoder.attention(s_prev, h, mask)
    gru_in = torch.concat((emb, context), dim=1)
    s_new = decoder.gru(gru_in, s_prev)
    logits = decoder.out(torch.concat((s_new, context), dim=1))
    return logits, s_new, weights


def step_split_output_layer(decoder, y_prev, s_prev, h, mask):
    c, alpha = decoder.attention(s_prev, h, mask)
    s = decoder.gru(torch.cat([decoder.embedding(y_prev), c], dim=-1), s_prev)
    W, b = decoder.out.weight, decoder.out.bias
    d = s.shape[-1]
    logits = s @ W[:, :d].T + c @ W[:, d:].T           # W_out [s; c] = W_s s + W_c c
    if b is not None:
        logits = logits + b
    return logits, s, alpha


# ---------------------------------------------------------------------------------------------------

SLIPS = [
    ("bidirectional_states", "forward final state taken at the last padded position h_fwd[:, -1], not at the last "
     "real token", bidir_last_padded_position),
    ("bidirectional_states", "forward final state indexed at lengths instead of lengths - 1 (off by one)",
     bidir_lengths_off_by_one),
    ("bidirectional_states", "backward final state taken at the last real token (lengths - 1) instead of position 0",
     bidir_backward_at_last_token),
    ("bidirectional_states", "backward final state taken at the last padded position instead of position 0",
     bidir_backward_at_padded_end),
    ("bidirectional_states", "h concatenated as [backward; forward]", bidir_h_order_swapped),
    ("bidirectional_states", "h built with stack + reshape, which interleaves the two directions' features",
     bidir_h_stack_reshape),
    ("bidirectional_states", "h concatenated along the positions axis instead of the features",
     bidir_h_cat_positions),
    ("bidirectional_states", "flips the backward states along the positions before concatenating",
     bidir_h_backward_flipped),
    ("bidirectional_states", "final concatenated as [backward; forward]", bidir_final_order_swapped),
    ("bidirectional_states", "final states concatenated along the batch axis (2B, d) instead of the features",
     bidir_final_cat_dim0),

    ("additive_score", "W_a not transposed (s_h @ W_a), runs only when W_a is square", additive_no_transpose),
    ("additive_score", "concatenates [h; s] instead of [s; h]", additive_order_swapped),
    ("additive_score", "forgets the tanh", additive_no_tanh),
    ("additive_score", "applies tanh after v_a instead of before", additive_tanh_after_v),
    ("additive_score", "returns softmax weights instead of the raw scores", additive_returns_softmax),
    ("additive_score", "splits W_a into its two blocks at d_h instead of d_s", additive_split_wrong_width),
    ("additive_score", "repeats s with repeat(T, 1).view(B, T, d_s), mixing the states of different sequences",
     additive_repeat_view),
    ("additive_score", "sums v_a * tanh(...) over the positions instead of the hidden units",
     additive_sum_wrong_axis),
    ("additive_score", "multiplies by v_a as a column and returns (B, T, 1) instead of (B, T)",
     additive_keeps_last_axis),

    ("masked_softmax", "mask inverted: hides the positions that are True (keep)", softmax_mask_inverted),
    ("masked_softmax", "fills with -inf and does not handle fully masked rows: NaN", softmax_minus_inf_nan),
    ("masked_softmax", "fills the masked scores with 0 instead of a very negative number", softmax_fill_zero),
    ("masked_softmax", "plain softmax, then zeroes the masked weights without renormalising", softmax_then_mask),
    ("masked_softmax", "softmax over dim=1 instead of the last axis (wrong for scores with more than 2 axes)",
     softmax_dim1),
    ("masked_softmax", "masks with a very negative number but a fully masked row gets uniform weights instead of zeros",
     softmax_empty_row_uniform),
    ("masked_softmax", "softmax written by hand without subtracting the max: overflows for large scores",
     softmax_no_max_subtraction),
    ("masked_softmax", "renormalises by the row sum after masking: fully masked rows give 0/0 = NaN",
     softmax_renormalise_nan),
    ("masked_softmax", "masked_fill_ in place: changes the caller's scores", softmax_in_place),

    ("context_vector", "sums over the feature axis instead of the positions", context_sum_wrong_axis),
    ("context_vector", "mean over the positions instead of the sum", context_mean),
    ("context_vector", "torch.matmul(weights, h) without unsqueezing the weights: (B, B, d_h)",
     context_matmul_no_unsqueeze),
    ("context_vector", "bmm then squeeze() without an axis: drops the batch axis when B == 1", context_bmm_squeeze),
    ("context_vector", "einsum with different letters for the positions of weights and h", context_einsum_two_indices),
    ("context_vector", "renormalises the weights by their sum before the weighted sum", context_renormalise),
    ("context_vector", "applies a softmax to the weights again", context_softmax_again),
    ("context_vector", "multiplies h in place by the weights (changes the caller's encoder states)",
     context_in_place),

    ("attention_decoder_step", "after the GRU, attends again with the new state and uses that context and those "
     "weights (Luong's order)", step_reattend_with_new_state),
    ("attention_decoder_step", "GRU input concatenated as [context; embedding] instead of [embedding; context]",
     step_gru_input_order),
    ("attention_decoder_step", "output layer input concatenated as [context; state] instead of [state; context]",
     step_out_input_order),
    ("attention_decoder_step", "predicts from the previous state s_prev instead of the new state",
     step_out_from_prev_state),
    ("attention_decoder_step", "returns the previous state instead of the new one", step_returns_prev_state),
    ("attention_decoder_step", "calls the attention without the mask: padding gets weight", step_no_mask),
    ("attention_decoder_step", "passes the inverted mask to the attention", step_mask_inverted),
    ("attention_decoder_step", "returns softmax probabilities instead of logits", step_returns_probabilities),
]

CORRECT = [
    ("bidirectional_states", "h filled by slices of an empty tensor, forward final state picked with gather",
     bidir_gather_slices),
    ("bidirectional_states", "loop over the batch for the final states", bidir_loop),
    ("bidirectional_states", "final states read back out of the concatenated h", bidir_from_h),

    ("additive_score", "the paper's form W_s s + W_h h_i (W_a split at d_s), v_a by a sum", additive_split_blocks),
    ("additive_score", "repeat instead of expand, einsum for both products", additive_einsum),
    ("additive_score", "F.linear for W_a and v_a, squeezed", additive_linear),

    ("masked_softmax", "torch.where with -inf, then NaN of fully masked rows turned into 0", softmax_inf_nan_to_num),
    ("masked_softmax", "softmax written out with the max over kept positions, empty rows divided by 1",
     softmax_explicit),
    ("masked_softmax", "torch.where with the lowest finite value, weights kept only where mask & row has a key",
     softmax_has_any),

    ("context_vector", "bmm of (B, 1, T) and (B, T, d_h), squeeze(1)", context_bmm),
    ("context_vector", "h transposed times the weights as a column", context_matmul_transpose),
    ("context_vector", "loop over the positions", context_loop),

    ("attention_decoder_step", "embedding first, torch.concat, renamed variables", step_embed_first),
    ("attention_decoder_step", "output layer written out as W_s s + W_c c + b", step_split_output_layer),
]
