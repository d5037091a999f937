"""Checks for lesson 01: attention from scratch in NumPy (defined in the lesson's order)."""
import numpy as np

from .. import numpy_attention as ref
from .core import exercise, expect_distribution, expect_returns
from .evaluation import Evaluation


def _no_max_softmax(x, axis=-1):
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.exp(np.asarray(x, dtype=np.float64))
        return e / e.sum(axis=axis, keepdims=True)


def _softmax_mistakes(x):
    """{symptom: output} for the softmax mistakes learners make most, on the input x."""
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    mistakes = {
        "you divided by the maximum instead of the sum: the largest weight is 1 and the weights do not "
        "sum to 1; divide by e.sum(axis=-1, keepdims=True)": e / e.max(axis=-1, keepdims=True),
        "the output is not normalised: divide by the sum of the exponentials": np.exp(x),
    }
    if x.ndim >= 2:
        mistakes.update({
            "weights sum to 1 over the wrong axis: take the softmax over the last axis (axis=-1)":
                ref.softmax(x, axis=0),
            "the whole array sums to 1: normalise each row on its own, with a sum over the last axis "
            "(e.sum(axis=-1, keepdims=True))": np.exp(x) / np.exp(x).sum(),
            "you subtracted the maximum over the wrong axis: subtract each row's own maximum, "
            "x.max(axis=-1, keepdims=True) (a number that differs within a row changes the result)":
                _no_max_softmax(x - x.max(axis=0, keepdims=True)),
        })
    if x.ndim == 2 and x.shape[0] == x.shape[1]:
        mistakes["the sum was taken without keepdims=True, so it broadcasts the wrong way: element (i, j) "
                 "is divided by the sum of row j; use e.sum(axis=-1, keepdims=True)"] = e / e.sum(axis=-1)
        mistakes["the maximum was taken without keepdims=True, so it broadcasts the wrong way: element (i, j) "
                 "gets the maximum of row j subtracted; use x.max(axis=-1, keepdims=True)"] = \
            _no_max_softmax(x - x.max(axis=-1))
    return mistakes


@exercise("softmax", reference=ref.softmax)
def softmax(ev: Evaluation, answer):
    """answer(x) -> softmax over the last axis, stable for large inputs."""
    tests = 0
    for seed, shape in enumerate([(5,), (4, 4), (3, 4), (2, 3, 6)]):
        x = ev.rng(seed).normal(size=shape) * 3
        out = ev.call(answer, x)
        ev.expect_close(out, ref.softmax(x), f"softmax(x of shape {shape})", mistakes=_softmax_mistakes(x))
        expect_distribution(out, "softmax outputs")
        tests += 1
    big = np.array([[1000.0, 1001.0, 999.0], [-1000.0, -1000.0, -999.0]])
    ev.expect_close(ev.call(answer, big), ref.softmax(big), "softmax of large scores [1000, 1001, 999]", mistakes={
        "overflow on large scores (exp(1000) = inf gives NaN): subtract the maximum of each row first":
            _no_max_softmax(big),
    })
    return tests + 1


@exercise("Bahdanau-style context vector", reference=ref.bahdanau_context)
def bahdanau_context(ev: Evaluation, answer):
    """answer(e (T,), h (T, d)) -> (c (d,), alpha (T,))."""
    tests = 0
    for seed, (T, d) in enumerate([(5, 4), (3, 6), (8, 2)]):
        g = ev.rng(seed)
        e, h = g.normal(size=T) * 2, g.normal(size=(T, d))
        c_ref, a_ref = ref.bahdanau_context(e, h)
        c, alpha = expect_returns(ev.call(answer, e, h), (c_ref, a_ref), ("c", "alpha"))
        ev.expect_close(alpha, a_ref, "alpha", mistakes={
            "alpha are the raw scores: turn them into weights with a softmax": e,
            "alpha are normalised by their sum, not by a softmax (exponentiate first)": e / e.sum(),
            "alpha are divided by their maximum instead of their sum: they must sum to 1":
                np.exp(e - e.max()),
        })
        expect_distribution(alpha, "alpha")
        ev.expect_close(c, c_ref, "the context c", mistakes={
            "c is summed over the wrong axis: c = sum_i alpha_i h_i is a vector of size d":
                (a_ref[:, None] * h).sum(axis=1),
            "c keeps the positions: sum the weighted states alpha_i h_i over i (axis 0), or write alpha @ h":
                a_ref[:, None] * h,
            "c uses the scores instead of the weights: c = alpha @ h": e @ h,
            "c ignores the weights (a plain mean of the states): c = alpha @ h": h.mean(axis=0),
        })
        tests += 1
    return tests


def _scale_mistakes(scores, d_k, d_v, T_q, T_k, softmax):
    """{symptom: weights} for a softmax of `scores` (the raw dot products) with a wrong scale."""
    where = "the scale is sqrt(d_k), the width of the queries and keys (their last axis)"
    mistakes = {
        "missing scale: the weights are not scaled; divide the scores by sqrt(d_k) before the softmax":
            softmax(scores),
        "the scores are divided by d_k instead of sqrt(d_k)": softmax(scores / d_k),
        "the scores are multiplied by sqrt(d_k): divide them by it": softmax(scores * np.sqrt(d_k)),
        f"the scores are scaled by sqrt(d_v), the width of the values: {where}": softmax(scores / np.sqrt(d_v)),
    }
    if T_q is not None and T_q == T_k:
        mistakes[f"the scores are scaled by sqrt(T), a sequence length (K.shape[0] or Q.shape[0]): {where}"] = \
            softmax(scores / np.sqrt(T_k))
    else:
        mistakes[f"the scores are scaled by sqrt(T_k), the number of keys (K.shape[0]): {where}"] = \
            softmax(scores / np.sqrt(T_k))
        if T_q is not None:
            mistakes[f"the scores are scaled by sqrt(T_q), the number of queries (Q.shape[0]): {where}"] = \
                softmax(scores / np.sqrt(T_q))
    return mistakes


@exercise("single-query attention", reference=ref.single_query_attention)
def single_query_attention(ev: Evaluation, answer):
    """answer(q (d_k,), K (T_k, d_k), V (T_k, d_v)) -> (z (d_v,), weights (T_k,)).

    d_k, d_v and T_k differ in every test, so that a scale by the wrong size shows."""
    tests = 0
    for seed, (T, d_k, d_v) in enumerate([(6, 4, 3), (5, 9, 2), (7, 16, 5)]):
        g = ev.rng(seed)
        q, K, V = g.normal(size=d_k) * 2, g.normal(size=(T, d_k)) * 2, g.normal(size=(T, d_v))
        z_ref, w_ref = ref.single_query_attention(q, K, V)
        z, weights = expect_returns(ev.call(answer, q, K, V), (z_ref, w_ref), ("z", "weights"))
        mistakes = _scale_mistakes(K @ q, d_k, d_v, None, T, ref.softmax)
        mistakes["the weights are the raw scores: apply the softmax to q·k_i / sqrt(d_k)"] = K @ q / np.sqrt(d_k)
        ev.expect_close(weights, w_ref, f"the weights (T_k={T}, d_k={d_k}, d_v={d_v})", mistakes=mistakes)
        expect_distribution(weights, "the weights")
        ev.expect_close(z, z_ref, f"z (d_v={d_v})", mistakes={
            "z mixes the keys: the output is the weighted sum of the VALUES, weights @ V": w_ref @ K,
            "z keeps the positions: sum the weighted values over the keys, weights @ V": w_ref[:, None] * V,
            "z ignores the weights (a plain mean of the values): z = weights @ V": V.mean(axis=0),
        })
        tests += 1
    return tests


@exercise("attention in matrix form", reference=ref.attention)
def attention(ev: Evaluation, answer):
    """answer(Q (T_q, d_k), K (T_k, d_k), V (T_k, d_v)) -> (Z (T_q, d_v), weights (T_q, T_k)).

    d_k, d_v, T_q and T_k differ (except T_q = T_k in the first test, where a transposed weight
    matrix still multiplies V), so that a scale by the wrong size shows."""
    tests = 0
    for seed, (T_q, T_k, d_k, d_v) in enumerate([(5, 5, 9, 3), (3, 5, 4, 2), (6, 4, 16, 7)]):
        g = ev.rng(seed)
        Q, K, V = g.normal(size=(T_q, d_k)) * 2, g.normal(size=(T_k, d_k)) * 2, g.normal(size=(T_k, d_v))
        Z_ref, w_ref = ref.attention(Q, K, V)
        Z, weights = expect_returns(ev.call(answer, Q, K, V), (Z_ref, w_ref), ("Z", "weights"))
        scores = Q @ K.T / np.sqrt(d_k)
        mistakes = {
            "softmax over the wrong axis: each ROW (one query) must sum to 1 over the keys, use axis=-1":
                ref.softmax(scores, axis=0),
            "the weights are transposed: scores are Q K^T (queries in rows), not K Q^T":
                ref.softmax(scores.T, axis=-1),
            "the whole matrix sums to 1: normalise each row (one query) over the keys, axis=-1":
                np.exp(scores) / np.exp(scores).sum(),
        }
        if T_q == T_k:
            mistakes["the weights are transposed: row t must hold query t's weights over the keys "
                     "(queries in rows, keys in columns)"] = w_ref.T
        mistakes.update(_scale_mistakes(Q @ K.T, d_k, d_v, T_q, T_k, lambda s: ref.softmax(s, axis=-1)))
        ev.expect_close(weights, w_ref, f"the weights (T_q={T_q}, T_k={T_k}, d_k={d_k}, d_v={d_v})",
                        mistakes=mistakes)
        expect_distribution(weights, "each row of the weights")
        Z_mistakes = {"Z mixes the keys: the output is weights @ V, a blend of the VALUES": w_ref @ K}
        if T_q == T_k:
            Z_mistakes["Z uses the transposed weights: Z = weights @ V, row t mixes the values with row t's "
                       "weights"] = w_ref.T @ V
        ev.expect_close(Z, Z_ref, f"Z (T_q={T_q}, d_v={d_v})", mistakes=Z_mistakes)
        tests += 1
    return tests
