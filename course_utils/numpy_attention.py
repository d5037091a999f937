"""Lessons 00–01 in NumPy: weighted sums, softmax, and attention from scratch.

Shapes: a sequence of T vectors is an array (T, d); queries (T_q, d_k), keys (T_k, d_k),
values (T_k, d_v). Weights are distributions over the keys (the last axis).
"""
import numpy as np


def _array(x, name, ndim, shape_text):
    """`x` as a float array of `ndim` dimensions, or a ValueError naming what was expected."""
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != ndim:
        raise ValueError(f"{name} should be {shape_text} ({ndim}-D), got shape {x.shape}")
    return x


def _same(size_a, name_a, size_b, name_b):
    if size_a != size_b:
        raise ValueError(f"{name_a} and {name_b} must match, got {size_a} and {size_b}")


def weighted_sum(weights, vectors):
    """z = sum_i weights[i] * vectors[i]:  (T,), (T, d) -> (d,)."""
    weights = _array(weights, "weights", 1, "(T,)")
    vectors = _array(vectors, "vectors", 2, "(T, d)")
    _same(len(weights), "the number of weights (T)", len(vectors), "the number of vectors")
    return weights @ vectors


def softmax(x, axis=-1):
    """Numerically stable softmax: subtract the maximum before exponentiating."""
    x = np.asarray(x, dtype=np.float64)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def single_query_attention(q, K, V):
    """One query against a database of key-value pairs.

    q: (d_k,), K: (T_k, d_k), V: (T_k, d_v) -> z: (d_v,), weights: (T_k,)
    """
    q, K, V = _array(q, "q", 1, "(d_k,)"), _array(K, "K", 2, "(T_k, d_k)"), _array(V, "V", 2, "(T_k, d_v)")
    _same(q.shape[0], "q's size d_k", K.shape[1], "K's last size")
    _same(K.shape[0], "K's number of keys T_k", V.shape[0], "V's number of values")
    d_k = q.shape[-1]
    scores = K @ q / np.sqrt(d_k)  # (T_k,) one score per key
    weights = softmax(scores)      # (T_k,) a distribution over the keys
    return weights @ V, weights    # (d_v,), (T_k,)


def attention(Q, K, V):
    """Scaled dot-product attention in matrix form: softmax(Q K^T / sqrt(d_k)) V.

    Q: (T_q, d_k), K: (T_k, d_k), V: (T_k, d_v) -> Z: (T_q, d_v), weights: (T_q, T_k)
    Row t of `weights` is how much query t attends to each key; row t of Z is its output.
    """
    Q, K, V = _array(Q, "Q", 2, "(T_q, d_k)"), _array(K, "K", 2, "(T_k, d_k)"), _array(V, "V", 2, "(T_k, d_v)")
    _same(Q.shape[1], "Q's last size d_k", K.shape[1], "K's last size")
    _same(K.shape[0], "K's number of keys T_k", V.shape[0], "V's number of values")
    d_k = Q.shape[-1]
    scores = Q @ K.T / np.sqrt(d_k)  # (T_q, T_k)
    weights = softmax(scores, axis=-1)
    return weights @ V, weights


def bahdanau_context(e, h):
    """Bahdanau's recipe from alignment scores: alpha = softmax(e), c = sum_i alpha_i h_i.

    e: (T,) alignment scores e_{t,i} for one decoder step, h: (T, d) encoder states
    -> c: (d,), alpha: (T,)
    """
    e, h = _array(e, "e", 1, "(T,)"), _array(h, "h", 2, "(T, d)")
    _same(len(e), "the number of scores e (T)", len(h), "the number of encoder states h")
    alpha = softmax(e)
    return alpha @ h, alpha
