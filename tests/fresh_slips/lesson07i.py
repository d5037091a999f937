"""Typical learner answers for lesson 07 (self-attention): slips and right answers.

Exercises (the `exercise` keys of the checks):
    scaled_dot_product_attention   attention(q, k, v, mask=None) -> (out, weights); q, k, v (B, ..., T, d);
                                   mask bool, True = may attend, broadcastable to (B, ..., T_q, T_k);
                                   a query with no allowed key gets zero weights and a zero output (no NaN)
    causal_mask                    causal_mask(T) -> (T, T) bool, True where j <= t
    padding_mask                   padding_mask(tokens, pad_id) -> (B, 1, 1, T) bool, True at real tokens
    sliding_window_mask            sliding_window_mask(T, left, right=0) -> (T, T) bool,
                                   True where t - left <= j <= t + right

SLIPS holds answers with exactly one mistake each (marked `# slip:`); CORRECT holds right answers
written differently from the reference solution.
"""
import math

import numpy as np
import torch

# ---------------------------------------------------------------------------------------------------
# Exercise 1: scaled dot-product attention with an optional mask
# ---------------------------------------------------------------------------------------------------

def attn_no_scale(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1)  # slip: forgets to divide by sqrt(d_k)
    if mask is None:
        weights = scores.softmax(dim=-1)
    else:
        has_key = mask.any(dim=-1, keepdim=True)
        scores = scores.masked_fill(~(mask | ~has_key), float("-inf"))
        weights = scores.softmax(dim=-1) * has_key
    return weights @ v, weights


def attn_scale_by_dk(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / q.size(-1)  # slip: divides by d_k instead of sqrt(d_k)
    if mask is None:
        weights = scores.softmax(dim=-1)
    else:
        has_key = mask.any(dim=-1, keepdim=True)
        scores = scores.masked_fill(~(mask | ~has_key), float("-inf"))
        weights = scores.softmax(dim=-1) * has_key
    return weights @ v, weights


def attn_softmax_over_queries(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        has_key = mask.any(dim=-1, keepdim=True)
        scores = scores.masked_fill(~(mask | ~has_key), float("-inf"))
    weights = scores.softmax(dim=-2)  # slip: softmax over the queries axis instead of the keys
    if mask is not None:
        weights = weights * has_key
    return weights @ v, weights


def attn_transpose_1_2(q, k, v, mask=None):
    scores = q @ k.transpose(1, 2) / math.sqrt(q.size(-1))  # slip: transposes axes 1, 2 (only right for 3-D inputs)
    if mask is None:
        weights = scores.softmax(dim=-1)
    else:
        has_key = mask.any(dim=-1, keepdim=True)
        scores = scores.masked_fill(~(mask | ~has_key), float("-inf"))
        weights = scores.softmax(dim=-1) * has_key
    return weights @ v, weights


def attn_mask_inverted(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is None:
        weights = scores.softmax(dim=-1)
    else:
        mask = ~mask  # slip: reads the mask as True = masked out (PyTorch nn.MultiheadAttention convention)
        has_key = mask.any(dim=-1, keepdim=True)
        scores = scores.masked_fill(~(mask | ~has_key), float("-inf"))
        weights = scores.softmax(dim=-1) * has_key
    return weights @ v, weights


def attn_mask_fill_zero(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is None:
        weights = scores.softmax(dim=-1)
    else:
        has_key = mask.any(dim=-1, keepdim=True)
        scores = scores.masked_fill(~mask, 0.0)  # slip: sets masked scores to 0 instead of -inf
        weights = scores.softmax(dim=-1) * has_key
    return weights @ v, weights


def attn_mask_after_softmax(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    weights = scores.softmax(dim=-1)
    if mask is not None:
        weights = weights * mask  # slip: masks the weights after the softmax, without renormalising
    return weights @ v, weights


def attn_big_negative(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, -1e9)  # slip: -1e9 and no has_key: a fully masked row gets uniform weights
    weights = scores.softmax(dim=-1)
    return weights @ v, weights


def attn_naive_inf(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))  # slip: no guard: a fully masked row gives NaN
    weights = scores.softmax(dim=-1)
    return weights @ v, weights


def attn_inplace_scale(q, k, v, mask=None):
    q /= math.sqrt(q.size(-1))  # slip: scales q in place, changing the caller's tensor
    scores = q @ k.transpose(-2, -1)
    if mask is None:
        weights = scores.softmax(dim=-1)
    else:
        has_key = mask.any(dim=-1, keepdim=True)
        scores = scores.masked_fill(~(mask | ~has_key), float("-inf"))
        weights = scores.softmax(dim=-1) * has_key
    return weights @ v, weights


# right answers

def attn_einsum_finfo(q, k, v, mask=None):
    """einsum, q scaled first, masked scores set to the dtype's lowest finite value, empty rows zeroed."""
    scores = torch.einsum("...qd,...kd->...qk", q * q.size(-1) ** -0.5, k)
    if mask is not None:
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = scores.softmax(dim=-1)
    if mask is not None:
        weights = weights * mask.any(dim=-1, keepdim=True)
    return torch.einsum("...qk,...kd->...qd", weights, v), weights


def attn_where(q, k, v, mask=None):
    """torch.where: -inf where masked, rows with no key set to 0 before the softmax, zeroed after."""
    scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(k.shape[-1])
    if mask is not None:
        has_key = mask.any(dim=-1, keepdim=True)
        scores = torch.where(mask, scores, float("-inf"))
        scores = torch.where(has_key, scores, 0.0)
        weights = torch.where(has_key, torch.softmax(scores, dim=-1), 0.0)
    else:
        weights = torch.softmax(scores, dim=-1)
    return torch.matmul(weights, v), weights


def attn_manual_softmax(q, k, v, mask=None):
    """The softmax written out: subtract the row maximum, exponentiate, zero the masked keys, normalise."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    mask = torch.ones_like(scores, dtype=torch.bool) if mask is None else mask.expand_as(scores)
    row_max = scores.masked_fill(~mask, float("-inf")).amax(dim=-1, keepdim=True)
    has_key = mask.any(dim=-1, keepdim=True)
    row_max = torch.where(has_key, row_max, torch.zeros_like(row_max))
    e = torch.exp(scores - row_max) * mask
    total = e.sum(dim=-1, keepdim=True)
    weights = e / torch.where(has_key, total, torch.ones_like(total))
    return weights @ v, weights


# ---------------------------------------------------------------------------------------------------
# Exercise 2: the causal mask
# ---------------------------------------------------------------------------------------------------

def causal_float(T):
    return torch.tril(torch.ones(T, T))  # slip: a float tensor of 0/1, not bool


def causal_upper(T):
    return torch.triu(torch.ones(T, T, dtype=torch.bool))  # slip: keeps the upper triangle (the future) instead of the lower


def causal_no_diagonal(T):
    return torch.tril(torch.ones(T, T, dtype=torch.bool), diagonal=-1)  # slip: diagonal=-1 drops the diagonal: t cannot see itself


def causal_one_ahead(T):
    return torch.tril(torch.ones(T, T, dtype=torch.bool), diagonal=1)  # slip: diagonal=1 lets t also see t + 1


def causal_inverted(T):
    return torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)  # slip: True = masked (the future), the inverse convention


def causal_additive(T):
    future = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
    return torch.zeros(T, T).masked_fill(future, float("-inf"))  # slip: returns the additive 0/-inf float mask, not bool


def causal_batch_axes(T):
    return torch.tril(torch.ones(T, T, dtype=torch.bool))[None, None]  # slip: adds batch/head axes: (1, 1, T, T) instead of (T, T)


def causal_numpy(T):
    return np.tril(np.ones((T, T), dtype=bool))  # slip: returns a NumPy array, not a torch tensor


def causal_arange_swapped(T):
    i = torch.arange(T)
    return i[:, None] <= i[None, :]  # slip: compares t <= j (rows and columns swapped): the upper triangle


# right answers

def causal_arange(T):
    pos = torch.arange(T)
    return pos[None, :] <= pos[:, None]          # key j <= query t


def causal_tril_bool(T):
    return torch.ones(T, T).tril().bool()


def causal_tril_bool_dtype(T):
    return torch.tril(torch.ones(T, T, dtype=torch.bool))


# ---------------------------------------------------------------------------------------------------
# Exercise 3: the padding mask
# ---------------------------------------------------------------------------------------------------

def pad_inverted(tokens, pad_id):
    return (tokens == pad_id)[:, None, None, :]  # slip: True at padding instead of at real tokens


def pad_three_dims(tokens, pad_id):
    return (tokens != pad_id)[:, None, :]  # slip: shape (B, 1, T), missing the head axis


def pad_no_unsqueeze(tokens, pad_id):
    return tokens != pad_id  # slip: keeps shape (B, T), no axes for heads and queries


def pad_masks_queries(tokens, pad_id):
    return (tokens != pad_id)[:, None, :, None]  # slip: shape (B, 1, T, 1): masks the queries, not the keys


def pad_hardcoded_zero(tokens, pad_id):
    return (tokens != 0)[:, None, None, :]  # slip: ignores pad_id, assumes the padding id is 0


def pad_float(tokens, pad_id):
    return (tokens != pad_id).float()[:, None, None, :]  # slip: float 0/1 mask, not bool


def pad_from_lengths(tokens, pad_id):
    lengths = (tokens != pad_id).sum(dim=1)
    keep = torch.arange(tokens.size(1), device=tokens.device)[None, :] < lengths[:, None]  # slip: assumes the padding is at the end (mask from lengths)
    return keep[:, None, None, :]


def pad_unsqueeze_end(tokens, pad_id):
    return (tokens != pad_id).unsqueeze(-1).unsqueeze(-1)  # slip: unsqueezes at the end: (B, T, 1, 1)


# right answers

def pad_ne_unsqueeze(tokens, pad_id):
    return tokens.ne(pad_id).unsqueeze(1).unsqueeze(2)


def pad_view(tokens, pad_id):
    B, T = tokens.shape
    return ~(tokens == pad_id).view(B, 1, 1, T)


def pad_reshape(tokens, pad_id):
    return torch.ne(tokens, pad_id).reshape(tokens.size(0), 1, 1, -1)


# ---------------------------------------------------------------------------------------------------
# Exercise 4: the sliding-window mask
# ---------------------------------------------------------------------------------------------------

def window_axes_swapped(T, left, right=0):
    t = torch.arange(T)[None, :]  # slip: queries across the columns and keys down the rows: the band is mirrored
    j = torch.arange(T)[:, None]
    return (j >= t - left) & (j <= t + right)


def window_left_strict(T, left, right=0):
    t = torch.arange(T)[:, None]
    j = torch.arange(T)[None, :]
    return (j > t - left) & (j <= t + right)  # slip: strict > on the left: one key too few before t


def window_slice_no_plus_one(T, left, right=0):
    mask = torch.zeros(T, T, dtype=torch.bool)
    for t in range(T):
        mask[t, max(0, t - left):t + right] = True  # slip: slice end t + right excludes key t + right (and t itself when right = 0)
    return mask


def window_negative_start(T, left, right=0):
    mask = torch.zeros(T, T, dtype=torch.bool)
    for t in range(T):
        mask[t, t - left:t + right + 1] = True  # slip: no max(0, ...): a negative start wraps around (empty rows near the start)
    return mask


def window_triu_sign(T, left, right=0):
    ones = torch.ones(T, T, dtype=torch.bool)
    return torch.triu(ones, diagonal=left) & torch.tril(ones, diagonal=right)  # slip: diagonal=left instead of -left


def window_symmetric_abs(T, left, right=0):
    t = torch.arange(T)[:, None]
    j = torch.arange(T)[None, :]
    return (t - j).abs() <= left  # slip: |t - j| <= left: ignores right, uses left on both sides


def window_ignores_right(T, left, right=0):
    t = torch.arange(T)[:, None]
    j = torch.arange(T)[None, :]
    return (j >= t - left) & (j <= t)  # slip: ignores right: always a causal window


def window_float(T, left, right=0):
    ones = torch.ones(T, T)
    return torch.triu(ones, diagonal=-left) * torch.tril(ones, diagonal=right)  # slip: float 0/1 mask, not bool


# right answers

def window_triu_tril(T, left, right=0):
    return torch.ones(T, T, dtype=torch.bool).triu(-left).tril(right)


def window_offset(T, left, right=0):
    pos = torch.arange(T)
    offset = pos[None, :] - pos[:, None]                 # j - t
    return (offset >= -left) & (offset <= right)


def window_loop(T, left, right=0):
    mask = torch.zeros(T, T, dtype=torch.bool)
    for t in range(T):
        mask[t, max(0, t - left):min(T, t + right + 1)] = True
    return mask


# ---------------------------------------------------------------------------------------------------

SLIPS = [
    ("scaled_dot_product_attention", "no scaling: the scores are not divided by sqrt(d_k)", attn_no_scale),
    ("scaled_dot_product_attention", "divides the scores by d_k instead of sqrt(d_k)", attn_scale_by_dk),
    ("scaled_dot_product_attention", "softmax over the queries axis (dim=-2) instead of the keys", attn_softmax_over_queries),
    ("scaled_dot_product_attention", "transposes k with transpose(1, 2): wrong when there are more than three axes (heads)", attn_transpose_1_2),
    ("scaled_dot_product_attention", "mask read inverted: True taken as masked out", attn_mask_inverted),
    ("scaled_dot_product_attention", "masked scores set to 0 instead of -inf, so masked keys still get weight", attn_mask_fill_zero),
    ("scaled_dot_product_attention", "mask applied to the weights after the softmax, rows not renormalised", attn_mask_after_softmax),
    ("scaled_dot_product_attention", "masked scores set to -1e9 with no special case: a query with no key gets uniform weights, not zeros", attn_big_negative),
    ("scaled_dot_product_attention", "masked scores set to -inf with no guard: a query with no key gives NaN", attn_naive_inf),
    ("scaled_dot_product_attention", "scales q in place (q /= sqrt(d)), modifying the caller's input", attn_inplace_scale),
    ("causal_mask", "returns a float 0/1 tensor instead of bool", causal_float),
    ("causal_mask", "keeps the upper triangle (the future) instead of the lower", causal_upper),
    ("causal_mask", "excludes the diagonal: a position cannot attend to itself", causal_no_diagonal),
    ("causal_mask", "off by one: each position also sees the next one", causal_one_ahead),
    ("causal_mask", "inverted convention: True marks the hidden future positions", causal_inverted),
    ("causal_mask", "returns the additive float mask (0 / -inf) instead of a bool mask", causal_additive),
    ("causal_mask", "adds batch and head axes: shape (1, 1, T, T) instead of (T, T)", causal_batch_axes),
    ("causal_mask", "returns a NumPy array instead of a torch tensor", causal_numpy),
    ("causal_mask", "compares positions the wrong way round (t <= j): the upper triangle", causal_arange_swapped),
    ("padding_mask", "inverted: True at padding tokens", pad_inverted),
    ("padding_mask", "shape (B, 1, T): one axis missing", pad_three_dims),
    ("padding_mask", "shape (B, T): no broadcasting axes added", pad_no_unsqueeze),
    ("padding_mask", "shape (B, 1, T, 1): masks the padded queries instead of the keys", pad_masks_queries),
    ("padding_mask", "ignores pad_id and compares with 0", pad_hardcoded_zero),
    ("padding_mask", "returns a float 0/1 mask instead of bool", pad_float),
    ("padding_mask", "builds the mask from sequence lengths, assuming all padding is at the end", pad_from_lengths),
    ("padding_mask", "unsqueezes at the end: shape (B, T, 1, 1)", pad_unsqueeze_end),
    ("sliding_window_mask", "query and key axes swapped: the band is mirrored (left and right exchanged)", window_axes_swapped),
    ("sliding_window_mask", "strict inequality on the left end: one key too few before t", window_left_strict),
    ("sliding_window_mask", "loop slice end t + right without + 1: the last key is dropped (t itself when right = 0)", window_slice_no_plus_one),
    ("sliding_window_mask", "loop slice starts at t - left without clamping at 0: negative starts wrap around", window_negative_start),
    ("sliding_window_mask", "triu with diagonal=left instead of -left", window_triu_sign),
    ("sliding_window_mask", "symmetric |t - j| <= left: the right argument is ignored", window_symmetric_abs),
    ("sliding_window_mask", "ignores right: always a causal window", window_ignores_right),
    ("sliding_window_mask", "returns a float 0/1 mask instead of bool", window_float),
]

CORRECT = [
    ("scaled_dot_product_attention", "einsum, q scaled first, masked scores set to the dtype's lowest value, empty rows zeroed after", attn_einsum_finfo),
    ("scaled_dot_product_attention", "torch.where for the -inf fill, the empty rows and their zero weights", attn_where),
    ("scaled_dot_product_attention", "softmax written out with the row maximum, masked exponentials zeroed", attn_manual_softmax),
    ("causal_mask", "compares key and query positions with arange", causal_arange),
    ("causal_mask", "tril of a float ones matrix, converted to bool", causal_tril_bool),
    ("causal_mask", "tril of a bool ones matrix", causal_tril_bool_dtype),
    ("padding_mask", "ne and two unsqueeze", pad_ne_unsqueeze),
    ("padding_mask", "negation of (tokens == pad_id), then view(B, 1, 1, T)", pad_view),
    ("padding_mask", "torch.ne then reshape(B, 1, 1, -1)", pad_reshape),
    ("sliding_window_mask", "triu(-left) then tril(right) of a bool ones matrix", window_triu_tril),
    ("sliding_window_mask", "offset j - t between -left and right", window_offset),
    ("sliding_window_mask", "a loop filling clamped slices row by row", window_loop),
]
