"""Checks for lesson 01: attention from scratch in NumPy."""
import numpy as np

from .. import numpy_attention as ref
from .core import call, exercise, expect, expect_close, expect_distribution, expect_shape, rng


def _no_max_softmax(x, axis=-1):
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.exp(np.asarray(x, dtype=np.float64))
        return e / e.sum(axis=axis, keepdims=True)


@exercise("softmax")
def softmax(fn):
    """fn(x) -> softmax over the last axis, stable for large inputs."""
    tests = 0
    for seed, shape in enumerate([(5,), (3, 4), (2, 3, 6)]):
        x = rng(seed).normal(size=shape) * 3
        out = call(fn, x)
        expect_close(out, ref.softmax(x), f"softmax(x of shape {shape})", mistakes={
            "weights sum to 1 over the wrong axis: take the softmax over the last axis (axis=-1)":
                ref.softmax(x, axis=0),
            "the output is not normalised: divide by the sum of the exponentials": np.exp(x),
        })
        expect_distribution(out, "softmax outputs")
        tests += 1
    big = np.array([[1000.0, 1001.0, 999.0], [-1000.0, -1000.0, -999.0]])
    expect_close(call(fn, big), ref.softmax(big), "softmax of large scores [1000, 1001, 999]", mistakes={
        "overflow on large scores (exp(1000) = inf gives NaN): subtract the maximum of each row first":
            _no_max_softmax(big),
    })
    return tests + 1


@exercise("single-query attention")
def single_query_attention(fn):
    """fn(q (d_k,), K (T_k, d_k), V (T_k, d_v)) -> (z (d_v,), weights (T_k,))."""
    tests = 0
    for seed, (T, d_k, d_v) in enumerate([(4, 3, 3), (6, 8, 2), (5, 16, 4)]):
        g = rng(seed)
        q, K, V = g.normal(size=d_k) * 2, g.normal(size=(T, d_k)) * 2, g.normal(size=(T, d_v))
        result = call(fn, q, K, V)
        expect(isinstance(result, tuple) and len(result) == 2,
               "return two things: the output z and the weights, as `return z, weights`.")
        z, weights = result
        z_ref, w_ref = ref.single_query_attention(q, K, V)
        raw = ref.softmax(K @ q)
        expect_close(weights, w_ref, f"the weights (T_k={T}, d_k={d_k})", mistakes={
            "the weights are not scaled: divide the scores q·k_i by sqrt(d_k) before the softmax": raw,
            "the weights are the raw scores: apply the softmax to q·k_i / sqrt(d_k)": K @ q / np.sqrt(d_k),
        })
        expect_distribution(weights, "the weights")
        expect_shape(z, (d_v,), "z")
        mixed_keys = ({"z mixes the keys: the output is the weighted sum of the VALUES, weights @ V": w_ref @ K}
                      if d_k == d_v else None)
        expect_close(z, z_ref, "z", mistakes=mixed_keys)
        tests += 1
    return tests


@exercise("attention in matrix form")
def attention(fn):
    """fn(Q (T_q, d_k), K (T_k, d_k), V (T_k, d_v)) -> (Z (T_q, d_v), weights (T_q, T_k))."""
    tests = 0
    for seed, (T_q, T_k, d_k, d_v) in enumerate([(4, 4, 3, 3), (3, 5, 8, 2), (6, 6, 16, 4)]):
        g = rng(seed)
        Q, K, V = g.normal(size=(T_q, d_k)) * 2, g.normal(size=(T_k, d_k)) * 2, g.normal(size=(T_k, d_v))
        result = call(fn, Q, K, V)
        expect(isinstance(result, tuple) and len(result) == 2,
               "return two things: the output Z and the weights, as `return Z, weights`.")
        Z, weights = result
        Z_ref, w_ref = ref.attention(Q, K, V)
        scores = Q @ K.T / np.sqrt(d_k)
        expect_close(weights, w_ref, f"the weights (T_q={T_q}, T_k={T_k}, d_k={d_k})", mistakes={
            "softmax over the wrong axis: each ROW (one query) must sum to 1 over the keys, use axis=-1":
                ref.softmax(scores, axis=0),
            "missing scale: divide Q K^T by sqrt(d_k) before the softmax": ref.softmax(Q @ K.T, axis=-1),
            "scaled by d_k instead of sqrt(d_k)": ref.softmax(Q @ K.T / d_k, axis=-1),
            "the weights are transposed: scores are Q K^T (queries in rows), not K Q^T":
                ref.softmax(K @ Q.T / np.sqrt(d_k), axis=-1),
        })
        expect_distribution(weights, "each row of the weights")
        expect_shape(Z, (T_q, d_v), "Z")
        transposed = ({"Z uses the transposed weights: Z = weights @ V, row t mixes the values with row t's "
                       "weights": w_ref.T @ V} if T_q == T_k else None)
        expect_close(Z, Z_ref, "Z", mistakes=transposed)
        tests += 1
    return tests


@exercise("Bahdanau-style context vector")
def bahdanau_context(fn):
    """fn(e (T,), h (T, d)) -> (c (d,), alpha (T,))."""
    tests = 0
    for seed, (T, d) in enumerate([(5, 4), (3, 6), (8, 2)]):
        g = rng(seed)
        e, h = g.normal(size=T) * 2, g.normal(size=(T, d))
        result = call(fn, e, h)
        expect(isinstance(result, tuple) and len(result) == 2,
               "return two things: the context c and the weights alpha, as `return c, alpha`.")
        c, alpha = result
        c_ref, a_ref = ref.bahdanau_context(e, h)
        expect_close(alpha, a_ref, "alpha", mistakes={
            "alpha are the raw scores: turn them into weights with a softmax": e,
            "alpha are normalised by their sum, not by a softmax (exponentiate first)": e / e.sum(),
        })
        expect_distribution(alpha, "alpha")
        expect_close(c, c_ref, "the context c", mistakes={
            "c is summed over the wrong axis: c = sum_i alpha_i h_i is a vector of size d":
                (a_ref[:, None] * h).sum(axis=1),
            "c uses the scores instead of the weights: c = alpha @ h": e @ h,
        })
        tests += 1
    return tests
