"""Typical learner mistakes (SLIPS) and alternative right answers (CORRECT) for lesson 03,
Bahdanau (additive) attention.

Exercises and their signatures, as in the lesson:
    bidirectional_states(h_fwd, h_bwd, lengths) -> h (B, S, 2d), final (B, 2d)
    additive_score(s, h, W_a, v_a) -> e (B, T)
    masked_softmax(scores, mask) -> weights (..., T)     mask bool, True = keep, broadcastable
    context_vector(weights, h) -> c (B, d_h)
    attention_decoder_step(decoder, y_prev, s_prev, h, mask) -> logits (B, V), s (B, d_hidden), alpha (B, S)

Each slip has exactly one thing wrong, marked `# slip:` on that line.
"""

import torch
import torch.nn.functional as F

# =====================================================================================
# bidirectional_states
# =====================================================================================

def bidir_fwd_last_padded(h_fwd, h_bwd, lengths):
    h = torch.cat([h_fwd, h_bwd], dim=-1)
    last = h_fwd[:, -1]                                              # slip: last padded position, not lengths - 1
    first = h_bwd[:, 0]
    return h, torch.cat([last, first], dim=-1)


def bidir_bwd_at_last_token(h_fwd, h_bwd, lengths):
    h = torch.cat([h_fwd, h_bwd], dim=-1)
    idx = torch.arange(h_fwd.shape[0])
    last = h_fwd[idx, lengths - 1]
    first = h_bwd[idx, lengths - 1]                                  # slip: backward final taken at the last token
    return h, torch.cat([last, first], dim=-1)


def bidir_bwd_at_end(h_fwd, h_bwd, lengths):
    h = torch.cat([h_fwd, h_bwd], dim=-1)
    last = h_fwd[torch.arange(h_fwd.shape[0]), lengths - 1]
    first = h_bwd[:, -1]                                             # slip: backward final taken at the last padded position
    return h, torch.cat([last, first], dim=-1)


def bidir_off_by_one(h_fwd, h_bwd, lengths):
    h = torch.cat([h_fwd, h_bwd], dim=-1)
    last = h_fwd[torch.arange(h_fwd.shape[0]), lengths]              # slip: lengths instead of lengths - 1
    first = h_bwd[:, 0]
    return h, torch.cat([last, first], dim=-1)


def bidir_h_order_swapped(h_fwd, h_bwd, lengths):
    h = torch.cat([h_bwd, h_fwd], dim=-1)                            # slip: backward half first
    last = h_fwd[torch.arange(h_fwd.shape[0]), lengths - 1]
    first = h_bwd[:, 0]
    return h, torch.cat([last, first], dim=-1)


def bidir_final_order_swapped(h_fwd, h_bwd, lengths):
    h = torch.cat([h_fwd, h_bwd], dim=-1)
    last = h_fwd[torch.arange(h_fwd.shape[0]), lengths - 1]
    first = h_bwd[:, 0]
    return h, torch.cat([first, last], dim=-1)                       # slip: [backward; forward] in the final state


def bidir_cat_time_axis(h_fwd, h_bwd, lengths):
    h = torch.cat([h_fwd, h_bwd], dim=1)                             # slip: concatenated along positions
    last = h_fwd[torch.arange(h_fwd.shape[0]), lengths - 1]
    first = h_bwd[:, 0]
    return h, torch.cat([last, first], dim=-1)


def bidir_stack_interleaved(h_fwd, h_bwd, lengths):
    B, S, d = h_fwd.shape
    h = torch.stack([h_fwd, h_bwd], dim=-1).reshape(B, S, 2 * d)     # slip: stack+reshape interleaves the features
    last = h_fwd[torch.arange(B), lengths - 1]
    first = h_bwd[:, 0]
    return h, torch.cat([last, first], dim=-1)


def bidir_final_both_at_last(h_fwd, h_bwd, lengths):
    h = torch.cat([h_fwd, h_bwd], dim=-1)
    final = h[torch.arange(h.shape[0]), lengths - 1]                 # slip: both directions at the last token
    return h, final


def bidir_flip_backward(h_fwd, h_bwd, lengths):
    h_bwd = h_bwd.flip(1)                                            # slip: assumes backward states are stored reversed
    h = torch.cat([h_fwd, h_bwd], dim=-1)
    last = h_fwd[torch.arange(h_fwd.shape[0]), lengths - 1]
    first = h_bwd[:, 0]
    return h, torch.cat([last, first], dim=-1)


# --- right answers ---

def bidir_ok_gather(h_fwd, h_bwd, lengths):
    B, S, d = h_fwd.shape
    index = (lengths.long() - 1).to(h_fwd.device).view(B, 1, 1).expand(B, 1, d)
    last = h_fwd.gather(1, index).squeeze(1)
    h = torch.concat((h_fwd, h_bwd), dim=2)
    return h, torch.hstack([last, h_bwd[:, 0, :]])


def bidir_ok_loop(h_fwd, h_bwd, lengths):
    rows = []
    for b in range(h_fwd.shape[0]):
        n = int(lengths[b])
        rows.append(torch.cat([h_fwd[b, n - 1], h_bwd[b, 0]]))
    return torch.cat((h_fwd, h_bwd), -1), torch.stack(rows)


def bidir_ok_onehot(h_fwd, h_bwd, lengths):
    S = h_fwd.shape[1]
    pick = F.one_hot(lengths.long() - 1, S).to(h_fwd.dtype)         # (B, S), 1 at the last real token
    last = torch.einsum("bs,bsd->bd", pick, h_fwd)
    return torch.cat([h_fwd, h_bwd], -1), torch.cat([last, h_bwd.select(1, 0)], -1)


# =====================================================================================
# additive_score
# =====================================================================================

def add_order_swapped(s, h, W_a, v_a):
    B, T, _ = h.shape
    s_h = torch.cat([h, s[:, None, :].expand(B, T, s.shape[-1])], dim=-1)   # slip: [h; s] instead of [s; h]
    return torch.tanh(s_h @ W_a.T) @ v_a


def add_no_tanh(s, h, W_a, v_a):
    B, T, _ = h.shape
    s_h = torch.cat([s[:, None, :].expand(B, T, s.shape[-1]), h], dim=-1)
    return (s_h @ W_a.T) @ v_a                                       # slip: no tanh


def add_tanh_after_v(s, h, W_a, v_a):
    B, T, _ = h.shape
    s_h = torch.cat([s[:, None, :].expand(B, T, s.shape[-1]), h], dim=-1)
    return torch.tanh((s_h @ W_a.T) @ v_a)                           # slip: tanh applied after v_a


def add_relu(s, h, W_a, v_a):
    B, T, _ = h.shape
    s_h = torch.cat([s[:, None, :].expand(B, T, s.shape[-1]), h], dim=-1)
    return torch.relu(s_h @ W_a.T) @ v_a                             # slip: relu instead of tanh


def add_softmax(s, h, W_a, v_a):
    B, T, _ = h.shape
    s_h = torch.cat([s[:, None, :].expand(B, T, s.shape[-1]), h], dim=-1)
    return torch.softmax(torch.tanh(s_h @ W_a.T) @ v_a, dim=-1)      # slip: returns weights, not scores


def add_repeat_mixes_batch(s, h, W_a, v_a):
    B, T, _ = h.shape
    s_rep = s.repeat(T, 1).reshape(B, T, s.shape[-1])                # slip: repeat(T, 1) then reshape mixes batch rows
    s_h = torch.cat([s_rep, h], dim=-1)
    return torch.tanh(s_h @ W_a.T) @ v_a


def add_keeps_last_dim(s, h, W_a, v_a):
    B, T, _ = h.shape
    s_h = torch.cat([s[:, None, :].expand(B, T, s.shape[-1]), h], dim=-1)
    return torch.tanh(s_h @ W_a.T) @ v_a[:, None]                    # slip: returns (B, T, 1)


def add_sum_wrong_axis(s, h, W_a, v_a):
    B, T, _ = h.shape
    s_h = torch.cat([s[:, None, :].expand(B, T, s.shape[-1]), h], dim=-1)
    return (torch.tanh(s_h @ W_a.T) * v_a).sum(dim=1)                # slip: sums over positions, not over d_a


# --- right answers ---

def add_ok_split(s, h, W_a, v_a):
    d_s = s.shape[-1]
    pre = F.linear(s, W_a[:, :d_s]).unsqueeze(1) + F.linear(h, W_a[:, d_s:])   # W_s s + W_h h_i
    return torch.tanh(pre) @ v_a


def add_ok_einsum(s, h, W_a, v_a):
    T = h.shape[1]
    s_h = torch.cat([s.unsqueeze(1).repeat(1, T, 1), h], dim=2)
    hidden = torch.tanh(torch.einsum("ak,btk->bta", W_a, s_h))
    return torch.einsum("bta,a->bt", hidden, v_a)


# =====================================================================================
# masked_softmax
# =====================================================================================

def ms_inverted(scores, mask):
    mask = ~mask                                                     # slip: reads True as "masked out"
    scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    return torch.softmax(scores, dim=-1) * mask


def ms_neg_inf_nan(scores, mask):
    scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=-1)                             # slip: all-masked rows become NaN (-inf everywhere)


def ms_no_zero_rows(scores, mask):
    scores = scores.masked_fill(~mask, -1e9)
    return torch.softmax(scores, dim=-1)                             # slip: all-masked rows get uniform weights, not zeros


def ms_multiply_scores(scores, mask):
    return torch.softmax(scores * mask, dim=-1)                      # slip: zeroes the scores instead of masking them


def ms_mask_after_no_renorm(scores, mask):
    return torch.softmax(scores, dim=-1) * mask                      # slip: masks after the softmax, rows no longer sum to 1


def ms_renorm_nan(scores, mask):
    w = torch.softmax(scores, dim=-1) * mask
    return w / w.sum(dim=-1, keepdim=True)                           # slip: 0/0 = NaN on all-masked rows


def ms_wrong_axis(scores, mask):
    scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    return torch.softmax(scores, dim=0) * mask                       # slip: softmax over the first axis


def ms_no_max_subtraction(scores, mask):
    e = torch.exp(scores) * mask                                     # slip: no max subtracted, exp overflows
    return e / e.sum(dim=-1, keepdim=True).clamp_min(1e-30)


def ms_no_broadcast(scores, mask):
    mask = mask.reshape(scores.shape)                                # slip: assumes the mask has the scores' shape
    scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    return torch.softmax(scores, dim=-1) * mask


def ms_in_place(scores, mask):
    scores.masked_fill_(~mask, torch.finfo(scores.dtype).min)        # slip: edits the caller's scores in place
    return torch.softmax(scores, dim=-1) * mask


# --- right answers ---

def ms_ok_manual(scores, mask):
    x = scores.masked_fill(~mask, float("-inf"))
    m = x.amax(dim=-1, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))       # all-masked rows: no shift
    e = torch.exp(x - m)
    z = e.sum(dim=-1, keepdim=True)
    return e / torch.where(z > 0, z, torch.ones_like(z))


def ms_ok_where(scores, mask):
    any_kept = mask.any(dim=-1, keepdim=True)
    x = scores.masked_fill(~mask & any_kept, float("-inf"))          # fully masked rows left finite...
    w = torch.softmax(x, dim=-1)
    return torch.where(any_kept, w, torch.zeros_like(w))             # ...and zeroed here


def ms_ok_masked_fill(scores, mask):
    w = F.softmax(scores.masked_fill(mask.logical_not(), torch.finfo(scores.dtype).min), dim=-1)
    w = w.masked_fill(mask.logical_not(), 0.0)
    return w


# =====================================================================================
# context_vector
# =====================================================================================

def cv_sum_wrong_axis(weights, h):
    return (weights[..., None] * h).sum(dim=-1)                      # slip: sums over features, not positions


def cv_mean(weights, h):
    return (weights[..., None] * h).mean(dim=1)                      # slip: mean instead of sum


def cv_renormalise(weights, h):
    weights = weights / weights.sum(dim=-1, keepdim=True)            # slip: renormalises, NaN for all-zero rows
    return (weights[..., None] * h).sum(dim=1)


def cv_matmul_broadcast(weights, h):
    return weights @ h                                               # slip: (B, T) @ (B, T, d) broadcasts to (B, B, d)


def cv_einsum_letters(weights, h):
    return torch.einsum("bt,bsd->bd", weights, h)                    # slip: two position indices sum separately


def cv_squeeze_all(weights, h):
    return torch.bmm(weights.unsqueeze(1), h).squeeze()              # slip: squeeze() drops the batch axis when B == 1


def cv_softmax_again(weights, h):
    weights = torch.softmax(weights, dim=-1)                         # slip: applies a softmax to the weights again
    return (weights[..., None] * h).sum(dim=1)


def cv_reshape_not_transpose(weights, h):
    B, T, d = h.shape
    return (h.reshape(B, d, T) @ weights[..., None])[..., 0]         # slip: reshape instead of transpose


def cv_keeps_middle_axis(weights, h):
    return torch.bmm(weights.unsqueeze(1), h)                        # slip: returns (B, 1, d_h)


# --- right answers ---

def cv_ok_bmm(weights, h):
    return torch.bmm(weights.unsqueeze(1), h).squeeze(1)


def cv_ok_transpose(weights, h):
    return (h.transpose(1, 2) @ weights.unsqueeze(-1))[..., 0]


def cv_ok_mul_sum(weights, h):
    return torch.sum(h * weights.unsqueeze(2), dim=-2)


# =====================================================================================
# attention_decoder_step
# =====================================================================================

def dec_out_order_swapped(decoder, y_prev, s_prev, h, mask):
    c, alpha = decoder.attention(s_prev, h, mask)
    x = decoder.embedding(y_prev)
    s = decoder.gru(torch.cat([x, c], dim=-1), s_prev)
    return decoder.out(torch.cat([c, s], dim=-1)), s, alpha          # slip: [c; s] instead of [s; c]


def dec_returns_old_state(decoder, y_prev, s_prev, h, mask):
    c, alpha = decoder.attention(s_prev, h, mask)
    x = decoder.embedding(y_prev)
    s = decoder.gru(torch.cat([x, c], dim=-1), s_prev)
    return decoder.out(torch.cat([s, c], dim=-1)), s_prev, alpha     # slip: returns the previous state


def dec_predicts_from_old_state(decoder, y_prev, s_prev, h, mask):
    c, alpha = decoder.attention(s_prev, h, mask)
    x = decoder.embedding(y_prev)
    s = decoder.gru(torch.cat([x, c], dim=-1), s_prev)
    return decoder.out(torch.cat([s_prev, c], dim=-1)), s, alpha     # slip: predicts from s_{t-1}, not s_t


def dec_mask_inverted(decoder, y_prev, s_prev, h, mask):
    c, alpha = decoder.attention(s_prev, h, ~mask)                   # slip: mask inverted (attends to padding)
    x = decoder.embedding(y_prev)
    s = decoder.gru(torch.cat([x, c], dim=-1), s_prev)
    return decoder.out(torch.cat([s, c], dim=-1)), s, alpha


def dec_no_mask(decoder, y_prev, s_prev, h, mask):
    c, alpha = decoder.attention(s_prev, h)                          # slip: mask not passed, padding gets weight
    x = decoder.embedding(y_prev)
    s = decoder.gru(torch.cat([x, c], dim=-1), s_prev)
    return decoder.out(torch.cat([s, c], dim=-1)), s, alpha


def dec_reattend_new_state(decoder, y_prev, s_prev, h, mask):
    c, alpha = decoder.attention(s_prev, h, mask)
    x = decoder.embedding(y_prev)
    s = decoder.gru(torch.cat([x, c], dim=-1), s_prev)
    c, alpha = decoder.attention(s, h, mask)                         # slip: reads a second context with s_t for the output
    return decoder.out(torch.cat([s, c], dim=-1)), s, alpha


def dec_returns_probabilities(decoder, y_prev, s_prev, h, mask):
    c, alpha = decoder.attention(s_prev, h, mask)
    x = decoder.embedding(y_prev)
    s = decoder.gru(torch.cat([x, c], dim=-1), s_prev)
    return torch.softmax(decoder.out(torch.cat([s, c], dim=-1)), dim=-1), s, alpha   # slip: softmax on the logits


def dec_extra_tanh(decoder, y_prev, s_prev, h, mask):
    c, alpha = decoder.attention(s_prev, h, mask)
    x = decoder.embedding(y_prev)
    s = torch.tanh(decoder.gru(torch.cat([x, c], dim=-1), s_prev))   # slip: extra tanh on the GRU's new state
    return decoder.out(torch.cat([s, c], dim=-1)), s, alpha


# --- right answers ---

def dec_ok_embed_first(decoder, y_prev, s_prev, h, mask):
    emb = decoder.embedding(y_prev)
    context, weights = decoder.attention(s_prev, h, mask)
    new_s = decoder.gru(torch.hstack([emb, context]), s_prev)
    logits = decoder.out(torch.hstack([new_s, context]))
    return logits, new_s, weights


def dec_ok_keywords(decoder, y_prev, s_prev, h, mask):
    out = decoder.attention(s_prev, h, mask)
    c, alpha = out[0], out[1]
    gru_in = torch.cat((decoder.embedding(y_prev), c), 1)
    s = decoder.gru(gru_in, s_prev)
    return decoder.out(torch.cat((s, c), 1)), s, alpha


# =====================================================================================

SLIPS = [
    ("bidirectional_states", "takes the forward final state at the last padded position instead of the last real token", bidir_fwd_last_padded),
    ("bidirectional_states", "takes the backward final state at the last real token instead of the first position", bidir_bwd_at_last_token),
    ("bidirectional_states", "takes the backward final state at the last padded position", bidir_bwd_at_end),
    ("bidirectional_states", "indexes the forward final state at lengths instead of lengths - 1", bidir_off_by_one),
    ("bidirectional_states", "puts the backward states before the forward ones in h", bidir_h_order_swapped),
    ("bidirectional_states", "puts the backward final state before the forward one", bidir_final_order_swapped),
    ("bidirectional_states", "concatenates the two directions along the position axis instead of the features", bidir_cat_time_axis),
    ("bidirectional_states", "stacks and reshapes the two directions, which interleaves their features", bidir_stack_interleaved),
    ("bidirectional_states", "takes both directions' final state at the last real token", bidir_final_both_at_last),
    ("bidirectional_states", "flips the backward states along the positions, thinking they are stored reversed", bidir_flip_backward),

    ("additive_score", "concatenates [h; s] instead of [s; h]", add_order_swapped),
    ("additive_score", "forgets the tanh", add_no_tanh),
    ("additive_score", "applies the tanh after multiplying by v_a", add_tanh_after_v),
    ("additive_score", "uses relu instead of tanh", add_relu),
    ("additive_score", "applies a softmax and returns weights instead of scores", add_softmax),
    ("additive_score", "repeats s with repeat(T, 1) and reshapes, which mixes up the batch rows", add_repeat_mixes_batch),
    ("additive_score", "multiplies by v_a as a column, returning shape (B, T, 1)", add_keeps_last_dim),
    ("additive_score", "sums the v_a product over the positions instead of the hidden units", add_sum_wrong_axis),

    ("masked_softmax", "inverts the mask, masking the real tokens", ms_inverted),
    ("masked_softmax", "fills with -inf, so a row with no real position gives NaN", ms_neg_inf_nan),
    ("masked_softmax", "fills with a large negative number but does not zero rows with no real position (uniform weights)", ms_no_zero_rows),
    ("masked_softmax", "multiplies the scores by the mask instead of masking them out", ms_multiply_scores),
    ("masked_softmax", "applies the mask after the softmax without renormalising", ms_mask_after_no_renorm),
    ("masked_softmax", "masks after the softmax and renormalises, dividing 0 by 0 on rows with no real position", ms_renorm_nan),
    ("masked_softmax", "takes the softmax over the first axis instead of the last", ms_wrong_axis),
    ("masked_softmax", "writes the softmax by hand without subtracting the maximum, so large scores overflow", ms_no_max_subtraction),
    ("masked_softmax", "reshapes the mask to the scores' shape, so a broadcasting mask fails", ms_no_broadcast),
    ("masked_softmax", "fills the masked scores in place, modifying the caller's tensor", ms_in_place),

    ("context_vector", "sums over the feature axis instead of the positions", cv_sum_wrong_axis),
    ("context_vector", "averages over the positions instead of summing", cv_mean),
    ("context_vector", "renormalises the weights, giving NaN for an all-zero row", cv_renormalise),
    ("context_vector", "multiplies weights @ h directly, which broadcasts to (B, B, d_h)", cv_matmul_broadcast),
    ("context_vector", "uses different einsum letters for the positions of weights and h", cv_einsum_letters),
    ("context_vector", "squeezes every size-1 axis, dropping the batch axis when B is 1", cv_squeeze_all),
    ("context_vector", "applies a softmax to the weights again", cv_softmax_again),
    ("context_vector", "reshapes h to (B, d_h, T) instead of transposing it", cv_reshape_not_transpose),
    ("context_vector", "returns the bmm result of shape (B, 1, d_h) without removing the middle axis", cv_keeps_middle_axis),

    ("attention_decoder_step", "feeds the output layer [c; s] instead of [s; c]", dec_out_order_swapped),
    ("attention_decoder_step", "returns the previous state instead of the new one", dec_returns_old_state),
    ("attention_decoder_step", "predicts the logits from the previous state instead of the new one", dec_predicts_from_old_state),
    ("attention_decoder_step", "passes the inverted mask to the attention", dec_mask_inverted),
    ("attention_decoder_step", "does not pass the mask to the attention, so padding gets weight", dec_no_mask),
    ("attention_decoder_step", "attends again with the new state for the prediction and returns those weights", dec_reattend_new_state),
    ("attention_decoder_step", "returns softmax probabilities instead of logits", dec_returns_probabilities),
    ("attention_decoder_step", "applies an extra tanh to the GRU's new state", dec_extra_tanh),
]

CORRECT = [
    ("bidirectional_states", "gathers the last real forward state with gather, concatenates with torch.concat and hstack", bidir_ok_gather),
    ("bidirectional_states", "loops over the batch to build the final states", bidir_ok_loop),
    ("bidirectional_states", "picks the last real forward state with a one-hot einsum", bidir_ok_onehot),

    ("additive_score", "splits W_a into the s and h blocks and adds W_s s and W_h h_i", add_ok_split),
    ("additive_score", "repeat along positions and einsum for W_a and v_a", add_ok_einsum),

    ("masked_softmax", "stable softmax by hand: -inf fill, subtract a finite row max, divide by a safe sum", ms_ok_manual),
    ("masked_softmax", "fills -inf only in rows with a kept position, then zeroes fully masked rows with where", ms_ok_where),
    ("masked_softmax", "fills the dtype's minimum, softmax, then sets the masked weights to 0 with masked_fill", ms_ok_masked_fill),

    ("context_vector", "batched matmul of (B, 1, T) weights with h, squeezing axis 1", cv_ok_bmm),
    ("context_vector", "h transposed to (B, d_h, T) times the weights as a column", cv_ok_transpose),
    ("context_vector", "weights unsqueezed on axis 2, times h, summed over axis -2", cv_ok_mul_sum),

    ("attention_decoder_step", "embeds first, uses hstack for both concatenations", dec_ok_embed_first),
    ("attention_decoder_step", "indexes the attention output and concatenates on axis 1", dec_ok_keywords),
]
