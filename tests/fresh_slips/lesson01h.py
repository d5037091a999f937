"""Typical learner mistakes (and a few differently written right answers) for lesson 01, attention from scratch.

Exercises, as the checks call them (all in NumPy):
    softmax                  softmax(x) -> array of x's shape; stable softmax over the LAST axis of an
                             array of any shape (subtract the maximum first, keepdims=True)
    bahdanau_context         bahdanau_context(e, h) -> (c, alpha); e: (T,), h: (T, d) -> c: (d,), alpha: (T,)
                             alpha = softmax(e), c = sum_i alpha_i h_i; may call ref.softmax
    single_query_attention   single_query_attention(q, K, V) -> (z, weights); q: (d_k,), K: (T_k, d_k),
                             V: (T_k, d_v) -> z: (d_v,), weights: (T_k,); softmax(K q / sqrt(d_k)); no loops
    attention                attention(Q, K, V) -> (Z, weights); Q: (T_q, d_k), K: (T_k, d_k), V: (T_k, d_v)
                             -> Z: (T_q, d_v), weights: (T_q, T_k); softmax(Q K^T / sqrt(d_k)) over each row

`ref` is course_utils.numpy_attention, as in the lesson (its softmax takes an optional `axis`, default -1).

SLIPS: each answer has exactly one thing wrong, marked with a `# slip:` comment on that line.
CORRECT: right answers written differently from the reference solutions.
"""
import math

import numpy as np
import torch

from course_utils import numpy_attention as ref

# ---------------------------------------------------------------------------------------------------
# Exercise 1: softmax over the last axis, numerically stable
# ---------------------------------------------------------------------------------------------------

def softmax_no_max_shift(x):
    x = np.asarray(x, dtype=np.float64)
    e = np.exp(x)  # slip: no maximum subtracted, overflows (inf / inf = NaN) on large scores
    return e / e.sum(axis=-1, keepdims=True)


def softmax_global_max(x):
    x = np.asarray(x, dtype=np.float64)
    e = np.exp(x - x.max())  # slip: subtracts the maximum of the whole array, not of each row (rows far below it underflow to 0/0)
    return e / e.sum(axis=-1, keepdims=True)


def softmax_axis0(x):
    x = np.asarray(x, dtype=np.float64)
    e = np.exp(x - x.max(axis=0, keepdims=True))
    return e / e.sum(axis=0, keepdims=True)  # slip: normalises over the first axis (columns) instead of the last


def softmax_axis1(x):
    x = np.asarray(x, dtype=np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)  # slip: hard-codes axis=1: right for matrices only, not for 1-D or 3-D arrays


def softmax_sum_all(x):
    x = np.asarray(x, dtype=np.float64)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum()  # slip: divides by the sum of the whole array, not of each row


def softmax_sum_no_keepdims(x):
    x = np.asarray(x, dtype=np.float64)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1)  # slip: no keepdims, the row sums broadcast along the last axis (divides columns)


def softmax_max_no_keepdims(x):
    x = np.asarray(x, dtype=np.float64)
    e = np.exp(x - x.max(axis=-1))  # slip: no keepdims, the row maxima broadcast along the last axis
    return e / e.sum(axis=-1, keepdims=True)


def softmax_shift_numerator_only(x):
    x = np.asarray(x, dtype=np.float64)
    m = x.max(axis=-1, keepdims=True)
    return np.exp(x - m) / np.exp(x).sum(axis=-1, keepdims=True)  # slip: maximum subtracted in the numerator only


def softmax_divide_by_max(x):
    x = np.asarray(x, dtype=np.float64)
    e = np.exp(x / x.max(axis=-1, keepdims=True))  # slip: divides by the maximum instead of subtracting it
    return e / e.sum(axis=-1, keepdims=True)


def softmax_in_place(x):
    x = np.asarray(x, dtype=np.float64)
    x -= x.max(axis=-1, keepdims=True)  # slip: shifts the caller's array in place (np.asarray does not copy a float64 array)
    e = np.exp(x)
    return e / e.sum(axis=-1, keepdims=True)


# --- right answers, written differently ------------------------------------------------------------

def softmax_log_sum_exp(x):
    x = np.asarray(x, dtype=np.float64)
    shifted = x - np.max(x, axis=-1, keepdims=True)
    return np.exp(shifted - np.log(np.sum(np.exp(shifted), axis=-1, keepdims=True)))


def softmax_new_axis(x):
    x = np.array(x, dtype=np.float64)  # a copy, so the in-place edits below leave the input alone
    x -= x.max(axis=-1)[..., None]
    np.exp(x, out=x)
    x /= x.sum(axis=-1)[..., None]
    return x


def softmax_torch(x):
    return torch.softmax(torch.as_tensor(np.asarray(x, dtype=np.float64)), dim=-1).numpy()


# ---------------------------------------------------------------------------------------------------
# Exercise 2: Bahdanau's context vector from alignment scores
# ---------------------------------------------------------------------------------------------------

def bahdanau_swapped_outputs(e, h):
    alpha = ref.softmax(e)
    c = alpha @ h
    return alpha, c  # slip: returns (alpha, c) instead of (c, alpha)


def bahdanau_no_softmax(e, h):
    alpha = e  # slip: uses the raw scores as weights, no softmax
    c = alpha @ h
    return c, alpha


def bahdanau_returns_scores(e, h):
    alpha = ref.softmax(e)
    c = alpha @ h
    return c, e  # slip: returns the scores e as the weights instead of alpha


def bahdanau_linear_normalisation(e, h):
    alpha = e / e.sum()  # slip: divides the scores by their sum instead of a softmax
    c = alpha @ h
    return c, alpha


def bahdanau_unstable_softmax(e, h):
    alpha = np.exp(e) / np.exp(e).sum()  # slip: softmax written without subtracting the maximum (NaN on large scores)
    c = alpha @ h
    return c, alpha


def bahdanau_h_times_alpha(e, h):
    alpha = ref.softmax(e)
    c = h @ alpha  # slip: h @ alpha contracts over d, not over T (only runs when T == d)
    return c, alpha


def bahdanau_sum_wrong_axis(e, h):
    alpha = ref.softmax(e)
    c = (alpha[:, None] * h).sum(axis=1)  # slip: sums over d instead of over the positions T, c has shape (T,)
    return c, alpha


def bahdanau_mean(e, h):
    alpha = ref.softmax(e)
    c = (alpha[:, None] * h).mean(axis=0)  # slip: mean over the positions instead of the sum
    return c, alpha


def bahdanau_row_shape(e, h):
    alpha = ref.softmax(e)
    c = alpha[None, :] @ h  # slip: alpha as a (1, T) row, c comes out (1, d) instead of (d,)
    return c, alpha


# --- right answers, written differently ------------------------------------------------------------

def bahdanau_einsum(e, h):
    e = np.asarray(e, dtype=np.float64)
    w = np.exp(e - e.max())
    alpha = w / w.sum()
    return np.einsum("t,td->d", alpha, h), alpha


def bahdanau_broadcast(e, h):
    alpha = ref.softmax(e)
    return (alpha[:, None] * h).sum(axis=0), alpha


def bahdanau_transposed(e, h):
    alpha = ref.softmax(np.asarray(e, dtype=np.float64)[None, :])[0]
    return h.T @ alpha, alpha


# ---------------------------------------------------------------------------------------------------
# Exercise 3: one query against all keys and values
# ---------------------------------------------------------------------------------------------------

def sqa_no_scale(q, K, V):
    scores = K @ q  # slip: no division by sqrt(d_k)
    weights = ref.softmax(scores)
    return weights @ V, weights


def sqa_divide_by_dk(q, K, V):
    scores = K @ q / q.shape[-1]  # slip: divides by d_k instead of sqrt(d_k)
    weights = ref.softmax(scores)
    return weights @ V, weights


def sqa_scale_by_num_keys(q, K, V):
    scores = K @ q / np.sqrt(len(K))  # slip: len(K) is the number of keys T_k, not d_k
    weights = ref.softmax(scores)
    return weights @ V, weights


def sqa_scale_by_dv(q, K, V):
    scores = K @ q / np.sqrt(V.shape[-1])  # slip: scales by sqrt(d_v), the width of the values, not sqrt(d_k)
    weights = ref.softmax(scores)
    return weights @ V, weights


def sqa_multiply_by_sqrt(q, K, V):
    scores = K @ q * np.sqrt(q.shape[-1])  # slip: multiplies by sqrt(d_k) instead of dividing
    weights = ref.softmax(scores)
    return weights @ V, weights


def sqa_scale_after_softmax(q, K, V):
    weights = ref.softmax(K @ q) / np.sqrt(q.shape[-1])  # slip: scales the weights after the softmax, not the scores
    return weights @ V, weights


def sqa_missing_transpose(q, K, V):
    scores = q @ K / np.sqrt(q.shape[-1])  # slip: q @ K instead of q @ K.T (only runs when d_k == T_k)
    weights = ref.softmax(scores)
    return weights @ V, weights


def sqa_sum_of_keys(q, K, V):
    scores = K @ q / np.sqrt(q.shape[-1])
    weights = ref.softmax(scores)
    return weights @ K, weights  # slip: weighted sum of the keys instead of the values


def sqa_returns_scores(q, K, V):
    scores = K @ q / np.sqrt(q.shape[-1])
    weights = ref.softmax(scores)
    return weights @ V, scores  # slip: returns the scaled scores instead of the softmax weights


def sqa_swapped_outputs(q, K, V):
    scores = K @ q / np.sqrt(q.shape[-1])
    weights = ref.softmax(scores)
    return weights, weights @ V  # slip: returns (weights, z) instead of (z, weights)


# --- right answers, written differently ------------------------------------------------------------

def sqa_einsum(q, K, V):
    scores = np.einsum("d,td->t", q, K) / math.sqrt(len(q))
    weights = ref.softmax(scores)
    return np.einsum("t,tv->v", weights, V), weights


def sqa_scaled_query(q, K, V):
    q = np.asarray(q, dtype=np.float64)
    scores = (q / np.sqrt(q.size)) @ K.T
    w = np.exp(scores - scores.max())
    weights = w / w.sum()
    return V.T @ weights, weights


# ---------------------------------------------------------------------------------------------------
# Exercise 4: attention in matrix form
# ---------------------------------------------------------------------------------------------------

def attn_no_scale(Q, K, V):
    scores = Q @ K.T  # slip: no division by sqrt(d_k)
    weights = ref.softmax(scores)
    return weights @ V, weights


def attn_divide_by_dk(Q, K, V):
    scores = Q @ K.T / Q.shape[-1]  # slip: divides by d_k instead of sqrt(d_k)
    weights = ref.softmax(scores)
    return weights @ V, weights


def attn_scale_by_num_queries(Q, K, V):
    scores = Q @ K.T / np.sqrt(Q.shape[0])  # slip: Q.shape[0] is the number of queries T_q, not d_k
    weights = ref.softmax(scores)
    return weights @ V, weights


def attn_multiply_by_sqrt(Q, K, V):
    scores = Q @ K.T * np.sqrt(Q.shape[-1])  # slip: multiplies by sqrt(d_k) instead of dividing
    weights = ref.softmax(scores)
    return weights @ V, weights


def attn_softmax_axis0(Q, K, V):
    scores = Q @ K.T / np.sqrt(Q.shape[-1])
    weights = ref.softmax(scores, axis=0)  # slip: softmax over the queries (columns) instead of over each row
    return weights @ V, weights


def attn_softmax_whole_matrix(Q, K, V):
    scores = Q @ K.T / np.sqrt(Q.shape[-1])
    w = np.exp(scores - scores.max())
    weights = w / w.sum()  # slip: normalises the whole matrix at once instead of each row
    return weights @ V, weights


def attn_scores_transposed(Q, K, V):
    scores = K @ Q.T / np.sqrt(Q.shape[-1])  # slip: K Q^T, the transposed score matrix (T_k, T_q)
    weights = ref.softmax(scores)
    return weights @ V, weights


def attn_weights_transposed(Q, K, V):
    scores = Q @ K.T / np.sqrt(Q.shape[-1])
    weights = ref.softmax(scores)
    return weights.T @ V, weights  # slip: multiplies V by the transposed weights (only runs when T_q == T_k)


def attn_scale_after_softmax(Q, K, V):
    weights = ref.softmax(Q @ K.T) / np.sqrt(Q.shape[-1])  # slip: scales after the softmax, rows no longer sum to 1
    return weights @ V, weights


def attn_swapped_outputs(Q, K, V):
    scores = Q @ K.T / np.sqrt(Q.shape[-1])
    weights = ref.softmax(scores)
    return weights, weights @ V  # slip: returns (weights, Z) instead of (Z, weights)


# --- right answers, written differently ------------------------------------------------------------

def attn_einsum(Q, K, V):
    scores = np.einsum("qd,kd->qk", Q, K) / math.sqrt(Q.shape[1])
    weights = ref.softmax(scores, axis=1)
    return np.einsum("qk,kv->qv", weights, V), weights


def attn_own_softmax(Q, K, V):
    Q = np.asarray(Q, dtype=np.float64)
    scores = (Q / np.sqrt(Q.shape[-1])) @ np.transpose(K)
    w = np.exp(scores - scores.max(axis=1)[:, None])
    weights = w / w.sum(axis=1)[:, None]
    return np.matmul(weights, V), weights


def attn_transposed_product(Q, K, V):
    scores_t = K @ Q.T / np.sqrt(Q.shape[-1])        # (T_k, T_q): column t holds query t's scores
    weights = ref.softmax(scores_t, axis=0).T        # softmax over the keys, back to (T_q, T_k)
    return (V.T @ weights.T).T, weights


SLIPS = [
    ("softmax", "does not subtract the maximum, so large scores overflow to NaN", softmax_no_max_shift),
    ("softmax", "subtracts the maximum of the whole array instead of each row's", softmax_global_max),
    ("softmax", "takes the softmax over the first axis instead of the last", softmax_axis0),
    ("softmax", "hard-codes axis=1, which is the last axis only for matrices", softmax_axis1),
    ("softmax", "divides by the sum of the whole array instead of each row's", softmax_sum_all),
    ("softmax", "forgets keepdims in the sum, so the row sums broadcast the wrong way", softmax_sum_no_keepdims),
    ("softmax", "forgets keepdims in the maximum, so the row maxima broadcast the wrong way",
     softmax_max_no_keepdims),
    ("softmax", "subtracts the maximum in the numerator but not in the denominator",
     softmax_shift_numerator_only),
    ("softmax", "divides by the maximum instead of subtracting it", softmax_divide_by_max),
    ("softmax", "subtracts the maximum from the input array in place", softmax_in_place),

    ("bahdanau_context", "returns (alpha, c) instead of (c, alpha)", bahdanau_swapped_outputs),
    ("bahdanau_context", "uses the raw scores as weights, without a softmax", bahdanau_no_softmax),
    ("bahdanau_context", "returns the scores e as the weights", bahdanau_returns_scores),
    ("bahdanau_context", "normalises the scores by their sum instead of a softmax", bahdanau_linear_normalisation),
    ("bahdanau_context", "writes the softmax without subtracting the maximum", bahdanau_unstable_softmax),
    ("bahdanau_context", "computes h @ alpha instead of alpha @ h", bahdanau_h_times_alpha),
    ("bahdanau_context", "sums the weighted states over the wrong axis", bahdanau_sum_wrong_axis),
    ("bahdanau_context", "averages the weighted states instead of summing them", bahdanau_mean),
    ("bahdanau_context", "returns the context with shape (1, d) instead of (d,)", bahdanau_row_shape),

    ("single_query_attention", "forgets to divide the scores by sqrt(d_k)", sqa_no_scale),
    ("single_query_attention", "divides the scores by d_k instead of sqrt(d_k)", sqa_divide_by_dk),
    ("single_query_attention", "scales by the square root of the number of keys (len(K))", sqa_scale_by_num_keys),
    ("single_query_attention", "scales by sqrt(d_v), the width of the values", sqa_scale_by_dv),
    ("single_query_attention", "multiplies the scores by sqrt(d_k) instead of dividing", sqa_multiply_by_sqrt),
    ("single_query_attention", "divides the weights by sqrt(d_k) after the softmax", sqa_scale_after_softmax),
    ("single_query_attention", "computes q @ K, forgetting the transpose of K", sqa_missing_transpose),
    ("single_query_attention", "returns the weighted sum of the keys instead of the values", sqa_sum_of_keys),
    ("single_query_attention", "returns the scores instead of the softmax weights", sqa_returns_scores),
    ("single_query_attention", "returns (weights, z) instead of (z, weights)", sqa_swapped_outputs),

    ("attention", "forgets to divide the scores by sqrt(d_k)", attn_no_scale),
    ("attention", "divides the scores by d_k instead of sqrt(d_k)", attn_divide_by_dk),
    ("attention", "scales by the square root of the number of queries (Q.shape[0])", attn_scale_by_num_queries),
    ("attention", "multiplies the scores by sqrt(d_k) instead of dividing", attn_multiply_by_sqrt),
    ("attention", "takes the softmax over the queries (axis 0) instead of over each row", attn_softmax_axis0),
    ("attention", "normalises the whole score matrix at once instead of each row", attn_softmax_whole_matrix),
    ("attention", "computes K @ Q.T, the transposed score matrix", attn_scores_transposed),
    ("attention", "multiplies V by the transposed weights", attn_weights_transposed),
    ("attention", "divides the weights by sqrt(d_k) after the softmax", attn_scale_after_softmax),
    ("attention", "returns (weights, Z) instead of (Z, weights)", attn_swapped_outputs),
]

CORRECT = [
    ("softmax", "log-sum-exp form: exp(x - max - log(sum(exp(x - max))))", softmax_log_sum_exp),
    ("softmax", "copy of the input, [..., None] instead of keepdims, in-place exp and division", softmax_new_axis),
    ("softmax", "torch.softmax over the last dimension, converted back to NumPy", softmax_torch),

    ("bahdanau_context", "own stable softmax and einsum", bahdanau_einsum),
    ("bahdanau_context", "broadcast alpha[:, None] * h and sum over the positions", bahdanau_broadcast),
    ("bahdanau_context", "softmax of e as a (1, T) row, context as h.T @ alpha", bahdanau_transposed),

    ("single_query_attention", "einsum for both products, math.sqrt(len(q))", sqa_einsum),
    ("single_query_attention", "query scaled before the product, own stable softmax, V.T @ weights", sqa_scaled_query),

    ("attention", "einsum for both products, ref.softmax with axis=1", attn_einsum),
    ("attention", "queries scaled first, own row softmax with [:, None]", attn_own_softmax),
    ("attention", "works with the transposed scores K Q^T and a softmax over axis 0", attn_transposed_product),
]
