"""Typical learner answers for lesson 01 (01_attention_from_scratch.ipynb), NumPy.

Exercises (the `exercise` keys) and their signatures, as in the solution notebook:
    softmax(x)                      -> softmax over the last axis of an array of any shape, stable for large x
    bahdanau_context(e, h)          -> c (d,), alpha (T,)          e (T,), h (T, d)
    single_query_attention(q, K, V) -> z (d_v,), weights (T_k,)    q (d_k,), K (T_k, d_k), V (T_k, d_v), no loops
    attention(Q, K, V)              -> Z (T_q, d_v), weights (T_q, T_k)

SLIPS: one typical mistake each (marked `# slip:`); CORRECT: right answers written differently from
the reference.
"""
import numpy as np
import torch

from course_utils import numpy_attention as ref

# ============================================================================= softmax: slips

def softmax_no_shift(x):
    x = np.asarray(x, dtype=np.float64)
    e = np.exp(x)  # slip: no maximum subtracted, overflows to inf/NaN for large scores
    return e / e.sum(axis=-1, keepdims=True)


def softmax_global_max(x):
    x = np.asarray(x, dtype=np.float64)
    e = np.exp(x - x.max())  # slip: subtracts the maximum of the whole array, not of each row
    return e / e.sum(axis=-1, keepdims=True)


def softmax_axis0(x):
    x = np.asarray(x, dtype=np.float64)
    e = np.exp(x - x.max(axis=0, keepdims=True))
    return e / e.sum(axis=0, keepdims=True)  # slip: normalises over the first axis instead of the last


def softmax_axis1(x):
    x = np.asarray(x, dtype=np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)  # slip: axis=1 hard-coded: right for matrices only, not for 1-D or 3-D


def softmax_sum_no_keepdims(x):
    x = np.asarray(x, dtype=np.float64)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1)  # slip: no keepdims: the row sums broadcast along the wrong axis


def softmax_max_no_keepdims(x):
    x = np.asarray(x, dtype=np.float64)
    e = np.exp(x - x.max(axis=-1))  # slip: no keepdims on the max: row maxima broadcast along the wrong axis
    return e / e.sum(axis=-1, keepdims=True)


def softmax_sum_all(x):
    x = np.asarray(x, dtype=np.float64)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum()  # slip: divides by the sum of the whole array, not of each row


def softmax_unshifted_denominator(x):
    x = np.asarray(x, dtype=np.float64)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / np.exp(x).sum(axis=-1, keepdims=True)  # slip: shifted numerator, unshifted denominator


def softmax_in_place(x):
    x = np.asarray(x)
    x -= x.max(axis=-1, keepdims=True)  # slip: subtracts the max in place, changing the caller's array
    e = np.exp(x)
    return e / e.sum(axis=-1, keepdims=True)


# ============================================================================= softmax: correct

def softmax_logsumexp(x):
    x = np.asarray(x, dtype=np.float64)
    m = x.max(axis=-1, keepdims=True)
    lse = m + np.log(np.exp(x - m).sum(axis=-1, keepdims=True))
    return np.exp(x - lse)


def softmax_torch(x):
    t = torch.as_tensor(np.asarray(x, dtype=np.float64))
    return torch.softmax(t, dim=-1).numpy()


def softmax_moveaxis(x):
    x = np.array(x, dtype=np.float64)            # a copy
    x = x - np.max(x, axis=-1)[..., None]
    np.exp(x, out=x)
    x /= np.sum(x, axis=-1)[..., None]
    return x


# ============================================================================= bahdanau_context: slips

def bc_unstable(e, h):
    alpha = np.exp(e) / np.exp(e).sum()  # slip: softmax without subtracting the max, overflows for e ~ 1000
    return alpha @ h, alpha


def bc_swapped_return(e, h):
    alpha = ref.softmax(e)
    c = alpha @ h
    return alpha, c  # slip: returns (alpha, c) instead of (c, alpha)


def bc_scores_not_weights(e, h):
    alpha = ref.softmax(e)
    c = e @ h  # slip: weights the encoder states with the raw scores e instead of alpha
    return c, alpha


def bc_no_sum(e, h):
    alpha = ref.softmax(e)
    c = alpha[:, None] * h  # slip: weights every h_i but never sums them: (T, d) instead of (d,)
    return c, alpha


def bc_sum_wrong_axis(e, h):
    alpha = ref.softmax(e)
    c = (alpha[:, None] * h).sum(axis=1)  # slip: sums over the d features instead of the T positions
    return c, alpha


def bc_no_exp(e, h):
    alpha = e / e.sum()  # slip: normalises the scores by their sum, without the exponential
    return alpha @ h, alpha


def bc_mean(e, h):
    alpha = ref.softmax(e)
    c = (alpha[:, None] * h).mean(axis=0)  # slip: mean over positions instead of the sum
    return c, alpha


def bc_scaled(e, h):
    alpha = ref.softmax(e / np.sqrt(h.shape[1]))  # slip: divides the scores by sqrt(d), they are already scores
    return alpha @ h, alpha


def bc_uniform_context(e, h):
    alpha = ref.softmax(e)
    c = h.mean(axis=0)  # slip: context is the plain mean of the states, alpha unused
    return c, alpha


# ============================================================================= bahdanau_context: correct

def bc_einsum(e, h):
    e = np.asarray(e, dtype=np.float64)
    w = np.exp(e - e.max())
    alpha = w / w.sum()
    return np.einsum("t,td->d", alpha, h), alpha


def bc_broadcast(e, h):
    alpha = ref.softmax(e)
    return (alpha[:, None] * np.asarray(h)).sum(axis=0), alpha


# ============================================================================= single_query_attention: slips

def sq_no_scale(q, K, V):
    scores = K @ q  # slip: no division by sqrt(d_k)
    weights = ref.softmax(scores)
    return weights @ V, weights


def sq_scale_dk(q, K, V):
    scores = K @ q / q.shape[-1]  # slip: divides by d_k instead of sqrt(d_k)
    weights = ref.softmax(scores)
    return weights @ V, weights


def sq_scale_dv(q, K, V):
    scores = K @ q / np.sqrt(V.shape[-1])  # slip: scales by sqrt(d_v), the values' width
    weights = ref.softmax(scores)
    return weights @ V, weights


def sq_scale_tk(q, K, V):
    scores = K @ q / np.sqrt(K.shape[0])  # slip: scales by sqrt(T_k), the number of keys
    weights = ref.softmax(scores)
    return weights @ V, weights


def sq_multiply_scale(q, K, V):
    scores = K @ q * np.sqrt(q.shape[-1])  # slip: multiplies by sqrt(d_k) instead of dividing
    weights = ref.softmax(scores)
    return weights @ V, weights


def sq_sum_keys(q, K, V):
    scores = K @ q / np.sqrt(q.shape[-1])
    weights = ref.softmax(scores)
    return weights @ K, weights  # slip: weighted sum of the keys instead of the values


def sq_returns_scores(q, K, V):
    scores = K @ q / np.sqrt(q.shape[-1])
    weights = ref.softmax(scores)
    return weights @ V, scores  # slip: returns the scores instead of the softmax weights


def sq_swapped_return(q, K, V):
    scores = K @ q / np.sqrt(q.shape[-1])
    weights = ref.softmax(scores)
    return weights, weights @ V  # slip: returns (weights, z) instead of (z, weights)


def sq_scale_after_softmax(q, K, V):
    weights = ref.softmax(K @ q) / np.sqrt(q.shape[-1])  # slip: scales the weights after the softmax
    return weights @ V, weights


def sq_loop(q, K, V):
    scores = np.array([q @ k for k in K]) / np.sqrt(q.shape[-1])  # slip: Python loop over the keys
    weights = ref.softmax(scores)
    return weights @ V, weights


# ============================================================================= single_query_attention: correct

def sq_einsum(q, K, V):
    q, K, V = (np.asarray(a, dtype=np.float64) for a in (q, K, V))
    scores = np.einsum("d,td->t", q / np.sqrt(len(q)), K)
    weights = ref.softmax(scores)
    return np.einsum("t,tv->v", weights, V), weights


def sq_via_matrix(q, K, V):
    Z, W = ref.attention(np.asarray(q)[None, :], K, V)   # one query as a 1-row matrix
    return Z[0], W[0]


def sq_scale_query(q, K, V):
    q = np.asarray(q, dtype=np.float64)
    s = (q / q.shape[0] ** 0.5) @ np.asarray(K).T
    w = np.exp(s - s.max())
    w = w / w.sum()
    return V.T @ w, w


# ============================================================================= attention: slips

def att_softmax_axis0(Q, K, V):
    scores = Q @ K.T / np.sqrt(Q.shape[-1])
    weights = ref.softmax(scores.T).T  # slip: softmax over the queries (columns sum to 1), not over the keys
    return weights @ V, weights


def att_no_scale(Q, K, V):
    scores = Q @ K.T  # slip: no division by sqrt(d_k)
    weights = ref.softmax(scores)
    return weights @ V, weights


def att_scale_dv(Q, K, V):
    scores = Q @ K.T / np.sqrt(V.shape[-1])  # slip: scales by sqrt(d_v) instead of sqrt(d_k)
    weights = ref.softmax(scores)
    return weights @ V, weights


def att_scale_dk(Q, K, V):
    scores = Q @ K.T / Q.shape[-1]  # slip: divides by d_k instead of sqrt(d_k)
    weights = ref.softmax(scores)
    return weights @ V, weights


def att_transposed_scores(Q, K, V):
    scores = K @ Q.T / np.sqrt(Q.shape[-1])  # slip: K Q^T, the scores transposed (keys as rows)
    weights = ref.softmax(scores)
    return weights @ V, weights


def att_sum_keys(Q, K, V):
    scores = Q @ K.T / np.sqrt(Q.shape[-1])
    weights = ref.softmax(scores)
    return weights @ K, weights  # slip: mixes the keys instead of the values


def att_swapped_return(Q, K, V):
    scores = Q @ K.T / np.sqrt(Q.shape[-1])
    weights = ref.softmax(scores)
    return weights, weights @ V  # slip: returns (weights, Z) instead of (Z, weights)


def att_unstable_softmax(Q, K, V):
    scores = Q @ K.T / np.sqrt(Q.shape[-1])
    weights = np.exp(scores) / np.exp(scores).sum(axis=-1, keepdims=True)  # slip: softmax without the max shift
    return weights @ V, weights


def att_scale_after_softmax(Q, K, V):
    weights = ref.softmax(Q @ K.T) / np.sqrt(Q.shape[-1])  # slip: scales after the softmax
    return weights @ V, weights


def att_loop_queries(Q, K, V):
    rows = [ref.single_query_attention(q, K, V) for q in Q]  # slip: Python loop over the queries, not the matrix form
    return np.stack([z for z, _ in rows]), np.stack([w for _, w in rows])


# ============================================================================= attention: correct

def att_einsum(Q, K, V):
    Q, K, V = (np.asarray(a, dtype=np.float64) for a in (Q, K, V))
    scores = np.einsum("qd,kd->qk", Q, K) / np.sqrt(K.shape[1])
    weights = softmax_logsumexp(scores)
    return np.einsum("qk,kv->qv", weights, V), weights


def att_scaled_queries(Q, K, V):
    Q = np.asarray(Q, dtype=np.float64)
    scores = (Q / np.sqrt(Q.shape[1])) @ np.asarray(K).T
    scores = scores - scores.max(axis=1, keepdims=True)
    w = np.exp(scores)
    w /= w.sum(axis=1, keepdims=True)
    return w @ V, w


def att_torch(Q, K, V):
    Qt, Kt, Vt = (torch.as_tensor(np.asarray(a, dtype=np.float64)) for a in (Q, K, V))
    w = torch.softmax(Qt @ Kt.T / Qt.shape[-1] ** 0.5, dim=-1)
    return (w @ Vt).numpy(), w.numpy()


SLIPS = [
    ("softmax", "exponentiates without subtracting the maximum (overflows on large inputs)", softmax_no_shift),
    ("softmax", "subtracts the maximum of the whole array instead of each row's maximum", softmax_global_max),
    ("softmax", "normalises over the first axis instead of the last", softmax_axis0),
    ("softmax", "hard-codes axis=1, which is the last axis only for matrices", softmax_axis1),
    ("softmax", "forgets keepdims=True on the sum, so the division broadcasts wrongly", softmax_sum_no_keepdims),
    ("softmax", "forgets keepdims=True on the maximum, so the subtraction broadcasts wrongly",
     softmax_max_no_keepdims),
    ("softmax", "divides by the total of the whole array instead of each row's total", softmax_sum_all),
    ("softmax", "subtracts the max in the numerator but not in the denominator", softmax_unshifted_denominator),
    ("softmax", "subtracts the max in place, modifying the input array", softmax_in_place),

    ("bahdanau_context", "softmax without subtracting the maximum (overflows for scores around 1000)", bc_unstable),
    ("bahdanau_context", "returns the weights first and the context second", bc_swapped_return),
    ("bahdanau_context", "weights the states with the raw scores instead of the softmax weights",
     bc_scores_not_weights),
    ("bahdanau_context", "multiplies the states by their weights but does not sum them", bc_no_sum),
    ("bahdanau_context", "sums the weighted states over the feature axis instead of the positions",
     bc_sum_wrong_axis),
    ("bahdanau_context", "normalises the scores by their sum without exponentiating", bc_no_exp),
    ("bahdanau_context", "averages the weighted states instead of summing them", bc_mean),
    ("bahdanau_context", "divides the scores by sqrt(d) before the softmax", bc_scaled),
    ("bahdanau_context", "uses the plain average of the states as the context", bc_uniform_context),

    ("single_query_attention", "no scaling by sqrt(d_k)", sq_no_scale),
    ("single_query_attention", "divides the scores by d_k instead of sqrt(d_k)", sq_scale_dk),
    ("single_query_attention", "scales by the square root of the values' width d_v", sq_scale_dv),
    ("single_query_attention", "scales by the square root of the number of keys", sq_scale_tk),
    ("single_query_attention", "multiplies the scores by sqrt(d_k) instead of dividing", sq_multiply_scale),
    ("single_query_attention", "returns the weighted sum of the keys instead of the values", sq_sum_keys),
    ("single_query_attention", "returns the scaled scores instead of the softmax weights", sq_returns_scores),
    ("single_query_attention", "returns (weights, z) instead of (z, weights)", sq_swapped_return),
    ("single_query_attention", "applies the scaling after the softmax", sq_scale_after_softmax),
    ("single_query_attention", "computes the scores with a Python loop over the keys", sq_loop),

    ("attention", "softmax over the queries (axis 0) instead of over the keys", att_softmax_axis0),
    ("attention", "no scaling by sqrt(d_k)", att_no_scale),
    ("attention", "scales by sqrt(d_v) instead of sqrt(d_k)", att_scale_dv),
    ("attention", "divides by d_k instead of sqrt(d_k)", att_scale_dk),
    ("attention", "computes K Q^T (scores transposed) instead of Q K^T", att_transposed_scores),
    ("attention", "mixes the keys instead of the values", att_sum_keys),
    ("attention", "returns (weights, Z) instead of (Z, weights)", att_swapped_return),
    ("attention", "softmax without subtracting the row maximum (overflows on large scores)", att_unstable_softmax),
    ("attention", "applies the scaling after the softmax", att_scale_after_softmax),
    ("attention", "loops over the queries calling single-query attention instead of the matrix form",
     att_loop_queries),
]

CORRECT = [
    ("softmax", "exp(x - logsumexp(x)) with a max-shifted log-sum-exp", softmax_logsumexp),
    ("softmax", "torch.softmax on a float64 tensor, converted back to NumPy", softmax_torch),
    ("softmax", "indexing with [..., None] instead of keepdims, on a copy with in-place ops", softmax_moveaxis),

    ("bahdanau_context", "own stable softmax, einsum for the context", bc_einsum),
    ("bahdanau_context", "broadcast the weights and sum over positions", bc_broadcast),

    ("single_query_attention", "einsum for the scores and the output", sq_einsum),
    ("single_query_attention", "reuses matrix attention with the query as a one-row matrix", sq_via_matrix),
    ("single_query_attention", "scales the query first, own stable softmax, V^T w", sq_scale_query),

    ("attention", "einsum with a log-sum-exp softmax", att_einsum),
    ("attention", "scales the queries first, row-wise stable softmax", att_scaled_queries),
    ("attention", "torch in float64, converted back to NumPy", att_torch),
]
