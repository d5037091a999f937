"""Typical learner mistakes (and a few differently written right answers) for lesson 07, self-attention.

Exercises, as the checks call them:
    scaled_dot_product_attention   attention(q, k, v, mask=None) -> (out, weights)
    causal_mask                    causal_mask(T) -> (T, T) bool, True on and below the diagonal
    padding_mask                   padding_mask(tokens, pad_id) -> (B, 1, 1, T) bool, True at real tokens
    sliding_window_mask            sliding_window_mask(T, left, right=0) -> (T, T) bool, t-left <= j <= t+right

Masks are boolean, True = may attend. A query whose every key is masked gets zero weights and a zero
output (no NaN).

SLIPS: each answer has exactly one thing wrong, marked with a `# slip:` comment on that line.
CORRECT: right answers written differently from the reference solution.
"""
import math

import numpy as np
import torch

# ---------------------------------------------------------------------------------------------------
# Exercise 1: scaled dot-product attention with an optional mask
# ---------------------------------------------------------------------------------------------------

def attention_no_scale(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1)  # slip: forgets to divide by sqrt(d_k)
    if mask is None:
        weights = scores.softmax(dim=-1)
    else:
        has_key = mask.any(dim=-1, keepdim=True)
        scores = scores.masked_fill(~(mask | ~has_key), float("-inf"))
        weights = scores.softmax(dim=-1) * has_key
    return weights @ v, weights


def attention_scale_by_dk(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / q.size(-1)  # slip: divides by d_k instead of sqrt(d_k)
    if mask is None:
        weights = scores.softmax(dim=-1)
    else:
        has_key = mask.any(dim=-1, keepdim=True)
        scores = scores.masked_fill(~(mask | ~has_key), float("-inf"))
        weights = scores.softmax(dim=-1) * has_key
    return weights @ v, weights


def attention_softmax_over_queries(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        has_key = mask.any(dim=-1, keepdim=True)
        scores = scores.masked_fill(~(mask | ~has_key), float("-inf"))
    weights = scores.softmax(dim=-2)  # slip: softmax over the queries axis instead of the keys
    if mask is not None:
        weights = weights * has_key
    return weights @ v, weights


def attention_transpose_1_2(q, k, v, mask=None):
    scores = q @ k.transpose(1, 2) / math.sqrt(q.size(-1))  # slip: transposes axes 1 and 2, right only for 3-D inputs
    if mask is None:
        weights = scores.softmax(dim=-1)
    else:
        has_key = mask.any(dim=-1, keepdim=True)
        scores = scores.masked_fill(~(mask | ~has_key), float("-inf"))
        weights = scores.softmax(dim=-1) * has_key
    return weights @ v, weights


def attention_mask_inverted(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is None:
        weights = scores.softmax(dim=-1)
    else:
        has_key = mask.any(dim=-1, keepdim=True)
        scores = scores.masked_fill(mask & has_key, float("-inf"))  # slip: hides the True keys (True read as "masked out")
        weights = scores.softmax(dim=-1) * has_key
    return weights @ v, weights


def attention_naive_mask_nan(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is None:
        weights = scores.softmax(dim=-1)
    else:
        scores = scores.masked_fill(~mask, float("-inf"))
        weights = scores.softmax(dim=-1)  # slip: no guard for rows with no allowed key, they give NaN
    return weights @ v, weights


def attention_big_negative_uniform(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is None:
        weights = scores.softmax(dim=-1)
    else:
        scores = scores.masked_fill(~mask, -1e9)  # slip: fills with -1e9 and no guard, a fully masked row gets uniform weights, not zeros
        weights = scores.softmax(dim=-1)
    return weights @ v, weights


def attention_multiply_scores_by_mask(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is None:
        weights = scores.softmax(dim=-1)
    else:
        has_key = mask.any(dim=-1, keepdim=True)
        scores = scores * mask  # slip: multiplies the scores by the mask (masked scores become 0, not -inf)
        weights = scores.softmax(dim=-1) * has_key
    return weights @ v, weights


def attention_mask_after_softmax(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is None:
        weights = scores.softmax(dim=-1)
    else:
        weights = scores.softmax(dim=-1) * mask  # slip: zeroes masked weights after the softmax without renormalising
    return weights @ v, weights


def attention_scales_q_in_place(q, k, v, mask=None):
    q /= math.sqrt(q.size(-1))  # slip: scales the caller's q in place (the input is modified)
    scores = q @ k.transpose(-2, -1)
    if mask is None:
        weights = scores.softmax(dim=-1)
    else:
        has_key = mask.any(dim=-1, keepdim=True)
        scores = scores.masked_fill(~(mask | ~has_key), float("-inf"))
        weights = scores.softmax(dim=-1) * has_key
    return weights @ v, weights


def attention_einsum_where(q, k, v, mask=None):
    """Right: einsum for the scores, torch.where with the dtype's lowest finite value, zeroed empty rows."""
    scores = torch.einsum("...qd,...kd->...qk", q, k) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = torch.where(mask, scores, torch.finfo(scores.dtype).min)
        weights = torch.softmax(scores, dim=-1) * mask.any(-1, keepdim=True)
    else:
        weights = torch.softmax(scores, dim=-1)
    return torch.einsum("...qk,...kd->...qd", weights, v), weights


def attention_explicit_softmax(q, k, v, mask=None):
    """Right: softmax written out (max subtracted over allowed keys), empty rows divided by 1 instead of 0."""
    scores = (q / math.sqrt(q.size(-1))) @ k.mT
    if mask is None:
        mask = torch.ones((), dtype=torch.bool, device=q.device)
    scores = scores.masked_fill(~mask, float("-inf"))
    top = scores.amax(dim=-1, keepdim=True)
    top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
    e = torch.exp(scores - top)
    total = e.sum(dim=-1, keepdim=True)
    weights = e / torch.where(total > 0, total, torch.ones_like(total))
    return weights @ v, weights


def attention_scaled_q_count_keys(q, k, v, mask=None):
    """Right: q scaled first (out of place), rows with a key found by counting allowed keys."""
    q = q * q.size(-1) ** -0.5
    scores = torch.matmul(q, k.transpose(-1, -2))
    if mask is None:
        weights = torch.softmax(scores, dim=-1)
    else:
        allowed = mask | (mask.sum(dim=-1, keepdim=True) == 0)
        weights = torch.softmax(scores.masked_fill(allowed.logical_not(), float("-inf")), dim=-1)
        weights = weights * (mask.sum(dim=-1, keepdim=True) > 0)
    return torch.matmul(weights, v), weights


# ---------------------------------------------------------------------------------------------------
# Exercise 2: the causal mask
# ---------------------------------------------------------------------------------------------------

def causal_mask_upper_triangle(T):
    return torch.triu(torch.ones(T, T, dtype=torch.bool))  # slip: keeps the upper triangle (the future) instead of the lower


def causal_mask_returns_future(T):
    return torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)  # slip: forgets the ~, returns the positions to hide (True = masked)


def causal_mask_no_diagonal(T):
    return torch.tril(torch.ones(T, T, dtype=torch.bool), diagonal=-1)  # slip: diagonal=-1 excludes the position itself


def causal_mask_one_ahead(T):
    return torch.tril(torch.ones(T, T, dtype=torch.bool), diagonal=1)  # slip: diagonal=1 lets each position see one step ahead


def causal_mask_float(T):
    return torch.tril(torch.ones(T, T))  # slip: float 0/1 tensor, not boolean


def causal_mask_additive(T):
    return torch.zeros(T, T).masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1), float("-inf"))  # slip: returns the additive 0/-inf float mask instead of a boolean one


def causal_mask_batch_axes(T):
    return torch.tril(torch.ones(T, T, dtype=torch.bool))[None, None]  # slip: adds batch and head axes, shape (1, 1, T, T) instead of (T, T)


def causal_mask_numpy(T):
    return np.tril(np.ones((T, T), dtype=bool))  # slip: returns a NumPy array, not a torch tensor


def causal_mask_arange(T):
    """Right: compare positions, key j <= query t."""
    return torch.arange(T)[None, :] <= torch.arange(T)[:, None]


def causal_mask_tril_method(T):
    """Right: the tril method on a boolean ones tensor."""
    return torch.ones(T, T, dtype=torch.bool).tril()


def causal_mask_tril_eq(T):
    """Right: float lower triangle turned into booleans."""
    return torch.tril(torch.ones(T, T)) == 1


# ---------------------------------------------------------------------------------------------------
# Exercise 3: the padding mask
# ---------------------------------------------------------------------------------------------------

def padding_mask_inverted(tokens, pad_id):
    return (tokens == pad_id)[:, None, None, :]  # slip: True at the padding, False at real tokens


def padding_mask_no_axes(tokens, pad_id):
    return tokens != pad_id  # slip: returns (B, T), forgets the head and query axes


def padding_mask_hides_queries(tokens, pad_id):
    return (tokens != pad_id)[:, None, :, None]  # slip: shape (B, 1, T, 1), masks the queries instead of the keys


def padding_mask_three_dims(tokens, pad_id):
    return (tokens != pad_id)[:, None, :]  # slip: shape (B, 1, T), no head axis, so B lines up with the heads of (B, h, T, T) scores


def padding_mask_float(tokens, pad_id):
    return (tokens != pad_id).float()[:, None, None, :]  # slip: float 0/1 mask, not boolean


def padding_mask_pad_zero(tokens, pad_id):
    return (tokens != 0)[:, None, None, :]  # slip: hard-codes pad id 0 instead of using pad_id


def padding_mask_greater(tokens, pad_id):
    return (tokens > pad_id)[:, None, None, :]  # slip: assumes the pad id is the smallest id (tokens > pad_id)


def padding_mask_square(tokens, pad_id):
    real = tokens != pad_id
    return real[:, None, :, None] & real[:, None, None, :]  # slip: also hides padded queries, a (B, 1, T, T) mask with fully masked rows


def padding_mask_ne_unsqueeze(tokens, pad_id):
    """Right: ne, then two unsqueezes."""
    return tokens.ne(pad_id).unsqueeze(1).unsqueeze(1)


def padding_mask_view(tokens, pad_id):
    """Right: reshape to (B, 1, 1, T)."""
    B, T = tokens.shape
    return (tokens != pad_id).reshape(B, 1, 1, T)


def padding_mask_not_eq(tokens, pad_id):
    """Right: negate the padding positions, index with None."""
    return ~tokens.eq(pad_id)[:, None, None]


# ---------------------------------------------------------------------------------------------------
# Exercise 4: the sliding-window mask
# ---------------------------------------------------------------------------------------------------

def sliding_window_strict_left(T, left, right=0):
    t = torch.arange(T)[:, None]
    j = torch.arange(T)[None, :]
    return (j > t - left) & (j <= t + right)  # slip: strict > on the left end, one key too few before t


def sliding_window_strict_right(T, left, right=0):
    t = torch.arange(T)[:, None]
    j = torch.arange(T)[None, :]
    return (j >= t - left) & (j < t + right)  # slip: strict < on the right end (with right=0 the query loses itself)


def sliding_window_swapped(T, left, right=0):
    t = torch.arange(T)[:, None]
    j = torch.arange(T)[None, :]
    return (j >= t - right) & (j <= t + left)  # slip: left and right swapped (the band is mirrored)


def sliding_window_symmetric_only(T, left, right=0):
    t = torch.arange(T)[:, None]
    j = torch.arange(T)[None, :]
    return (t - j).abs() <= left  # slip: ignores right, always the symmetric window |t - j| <= left


def sliding_window_always_causal(T, left, right=0):
    t = torch.arange(T)[:, None]
    j = torch.arange(T)[None, :]
    return (j >= t - left) & (j <= t)  # slip: ignores right, always a causal window


def sliding_window_triu_sign(T, left, right=0):
    ones = torch.ones(T, T, dtype=torch.bool)
    return torch.tril(ones, diagonal=right) & torch.triu(ones, diagonal=left)  # slip: triu diagonal=left instead of -left


def sliding_window_float_loop(T, left, right=0):
    m = torch.zeros(T, T)  # slip: float tensor of 0/1, not boolean
    for t in range(T):
        m[t, max(0, t - left): t + right + 1] = 1
    return m


def sliding_window_negative_slice(T, left, right=0):
    m = torch.zeros(T, T, dtype=torch.bool)
    for t in range(T):
        m[t, t - left: t + right + 1] = True  # slip: t - left < 0 becomes a negative index, the first rows come out wrong
    return m


def sliding_window_tril_triu(T, left, right=0):
    """Right: keep j - t <= right (tril) and j - t >= -left (triu)."""
    ones = torch.ones(T, T, dtype=torch.bool)
    return ones.tril(right) & ones.triu(-left)


def sliding_window_loop(T, left, right=0):
    """Right: a loop over the queries with clipped slices."""
    m = torch.zeros(T, T, dtype=torch.bool)
    for t in range(T):
        m[t, max(0, t - left): min(T, t + right + 1)] = True
    return m


def sliding_window_offsets(T, left, right=0):
    """Right: the offset j - t of every entry lies in [-left, right]."""
    offset = torch.arange(T)[None, :] - torch.arange(T)[:, None]
    return (offset >= -left) & (offset <= right)


SLIPS = [
    ("scaled_dot_product_attention", "forgets to divide the scores by sqrt(d_k)", attention_no_scale),
    ("scaled_dot_product_attention", "divides the scores by d_k instead of sqrt(d_k)", attention_scale_by_dk),
    ("scaled_dot_product_attention", "softmax over the queries axis (dim=-2) instead of the keys",
     attention_softmax_over_queries),
    ("scaled_dot_product_attention", "transposes k with transpose(1, 2), right for 3-D inputs only, not for (B, h, T, d)",
     attention_transpose_1_2),
    ("scaled_dot_product_attention", "mask inverted: hides the keys that are True (may attend)", attention_mask_inverted),
    ("scaled_dot_product_attention", "naive masked softmax: a query with no allowed key gets NaN",
     attention_naive_mask_nan),
    ("scaled_dot_product_attention", "fills masked scores with -1e9 without a guard: a fully masked query gets uniform "
     "weights and the mean of the values, not zeros", attention_big_negative_uniform),
    ("scaled_dot_product_attention", "multiplies the scores by the mask instead of setting masked scores to -inf",
     attention_multiply_scores_by_mask),
    ("scaled_dot_product_attention", "zeroes the masked weights after the softmax without renormalising the rows",
     attention_mask_after_softmax),
    ("scaled_dot_product_attention", "divides q in place by sqrt(d_k), modifying the caller's tensor",
     attention_scales_q_in_place),

    ("causal_mask", "uses triu instead of tril: True on and above the diagonal (the future)", causal_mask_upper_triangle),
    ("causal_mask", "returns the positions to hide, triu(diagonal=1) without the ~: convention inverted",
     causal_mask_returns_future),
    ("causal_mask", "tril with diagonal=-1: a position may not attend to itself", causal_mask_no_diagonal),
    ("causal_mask", "tril with diagonal=1: each position also sees the next one", causal_mask_one_ahead),
    ("causal_mask", "returns a float 0/1 tensor instead of a boolean one", causal_mask_float),
    ("causal_mask", "returns the additive 0/-inf float mask instead of the boolean one", causal_mask_additive),
    ("causal_mask", "adds batch and head axes: shape (1, 1, T, T) instead of (T, T)", causal_mask_batch_axes),
    ("causal_mask", "returns a NumPy array instead of a torch tensor", causal_mask_numpy),

    ("padding_mask", "inverted: True at the padding, False at real tokens", padding_mask_inverted),
    ("padding_mask", "returns (B, T) without the head and query axes", padding_mask_no_axes),
    ("padding_mask", "shape (B, 1, T, 1): masks the queries instead of the keys", padding_mask_hides_queries),
    ("padding_mask", "shape (B, 1, T): no head axis, so the batch axis lines up with the heads",
     padding_mask_three_dims),
    ("padding_mask", "returns a float 0/1 mask instead of a boolean one", padding_mask_float),
    ("padding_mask", "hard-codes the pad id 0 instead of using pad_id", padding_mask_pad_zero),
    ("padding_mask", "uses tokens > pad_id, assuming the pad id is the smallest token id", padding_mask_greater),
    ("padding_mask", "also hides the padded queries: a (B, 1, T, T) mask whose padded rows are fully masked",
     padding_mask_square),

    ("sliding_window_mask", "strict inequality on the left end: one key too few before the query",
     sliding_window_strict_left),
    ("sliding_window_mask", "strict inequality on the right end: one key too few after the query, and with right=0 "
     "the query cannot see itself", sliding_window_strict_right),
    ("sliding_window_mask", "left and right swapped: the band is mirrored across the diagonal", sliding_window_swapped),
    ("sliding_window_mask", "ignores right: always the symmetric window |t - j| <= left", sliding_window_symmetric_only),
    ("sliding_window_mask", "ignores right: always a causal window of the left keys and the query itself",
     sliding_window_always_causal),
    ("sliding_window_mask", "triu with diagonal=left instead of -left", sliding_window_triu_sign),
    ("sliding_window_mask", "returns a float 0/1 tensor (built with a loop) instead of a boolean one",
     sliding_window_float_loop),
    ("sliding_window_mask", "loop slice starting at t - left without clipping at 0: negative indices wrap around, "
     "the first rows are wrong", sliding_window_negative_slice),
]

CORRECT = [
    ("scaled_dot_product_attention", "einsum for the products, torch.where with the lowest finite value, empty rows "
     "zeroed by has_key", attention_einsum_where),
    ("scaled_dot_product_attention", "softmax written out with the max over allowed keys, empty rows divided by 1",
     attention_explicit_softmax),
    ("scaled_dot_product_attention", "q scaled first (out of place), rows with a key found by counting allowed keys",
     attention_scaled_q_count_keys),

    ("causal_mask", "compares positions: key j <= query t", causal_mask_arange),
    ("causal_mask", "tril method on a boolean ones tensor", causal_mask_tril_method),
    ("causal_mask", "float lower triangle compared with 1", causal_mask_tril_eq),

    ("padding_mask", "ne, then two unsqueezes", padding_mask_ne_unsqueeze),
    ("padding_mask", "reshape to (B, 1, 1, T)", padding_mask_view),
    ("padding_mask", "negated eq, indexed with None", padding_mask_not_eq),

    ("sliding_window_mask", "tril(right) & triu(-left) of a boolean ones tensor", sliding_window_tril_triu),
    ("sliding_window_mask", "loop over queries with clipped slices", sliding_window_loop),
    ("sliding_window_mask", "offset j - t in [-left, right]", sliding_window_offsets),
]
