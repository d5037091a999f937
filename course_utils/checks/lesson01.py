"""Checks for lesson 01: attention from scratch in NumPy (defined in the lesson's order).

Designed inputs: the first test of `bahdanau_context` (T == d) and of `single_query_attention` (T_k == d_k) is
square, so that a product with the wrong operand order (`h @ alpha`, `q @ K`) runs there and is named by its
values (elsewhere it crashes); the scores of the attention checks are drawn again until every scale mistake
gives weights of its own (a saturated softmax makes a missing and a doubled scale look alike); the softmax
check and Bahdanau's step try large scores, where an exp without the maximum subtracted overflows. A crash on
an axis the input does not have (`axis=1` on a 1-D array) is named. Past the values (lesson01_code.py): Bahdanau's
weights that are a softmax of scaled scores are named with the scale; the two attention exercises read the learner's
code for a Python loop over the data, and the matrix form also tries scores around 1000.
"""
import functools
import re

import numpy as np

from .. import numpy_attention as ref
from .core import ExerciseError, exercise, expect_distribution, expect_returns
from .evaluation import Evaluation
from .expectations import explained
from .lesson01_code import python_loop, scaled_softmax

AXIS_CRASH = re.compile(r"axis (-?\d+) is out of bounds for array of dimension (\d+)|Dimension out of range "
                        r"\(expected to be in range of \[-?\d+, (-?\d+)\], but got (-?\d+)\)")


def call(ev, answer, *args):
    """`ev.call`, with a crash on an axis the input does not have named: a fixed axis (axis=1) where the last
    axis (axis=-1) was asked."""
    try:
        return ev.call(answer, *args)
    except ExerciseError as error:
        found = AXIS_CRASH.search(str(error)) if str(error).startswith("your function raised") else None
        if not found:
            raise
        axis = found[1] if found[1] is not None else found[4]
        shapes = ", ".join(str(tuple(np.shape(a))) for a in args)
        raise ExerciseError(f"your function uses axis={axis}, which an input of shape {shapes} does not have "
                            f"(axis={axis} is the last axis of a {int(axis) + 1}-D array only): take the softmax, its "
                            "max and its sum, over the last axis, axis=-1, which every array has.") from None


def separable(values, margin=1e-3):
    """True when no two of `values` (arrays) are within `margin` of each other (so that each can be named)."""
    values = [np.asarray(v, dtype=np.float64) for v in values]
    return all(a.shape != b.shape or np.nanmax(np.abs(a - b)) > margin
               for i, a in enumerate(values) for b in values[i + 1:])


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
        "x is divided by its maximum instead of having it subtracted: softmax(x) = softmax(x - c) holds for a "
        "constant c SUBTRACTED, not divided; use np.exp(x - x.max(axis=-1, keepdims=True))":
            _no_max_softmax(x / x.max(axis=-1, keepdims=True)),
    }
    for axis in range(1, x.ndim - 1):       # (axis 0: below)
        mistakes[f"weights sum to 1 over axis {axis}, not over the last axis: axis={axis} is the last axis of a "
                 f"{axis + 1}-D array only; take the softmax over axis=-1"] = ref.softmax(x, axis=axis)
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
        out = call(ev, answer, x)
        ev.expect_close(out, ref.softmax(x), f"softmax(x of shape {shape})", mistakes=_softmax_mistakes(x))
        expect_distribution(out, "softmax outputs")
        tests += 1
    big = np.array([[1000.0, 1001.0, 999.0], [-1000.0, -1000.0, -999.0]])
    ev.expect_close(call(ev, answer, big), ref.softmax(big), "softmax of large scores [1000, 1001, 999]", mistakes={
        "overflow on large scores (exp(1000) = inf gives NaN): subtract the maximum of each row first":
            _no_max_softmax(big),
    })
    return tests + 1


def _context_mistakes(e, h, alpha):
    """{symptom: c} for the context mistakes learners make most (the wrong operand order: when T == d)."""
    mistakes = {
        "c is summed over the wrong axis: c = sum_i alpha_i h_i is a vector of size d":
            (alpha[:, None] * h).sum(axis=1),
        "c keeps the positions: sum the weighted states alpha_i h_i over i (axis 0), or write alpha @ h":
            alpha[:, None] * h,
        "c uses the scores instead of the weights: c = alpha @ h": e @ h,
        "c ignores the weights (a plain mean of the states): c = alpha @ h": h.mean(axis=0),
    }
    if h.shape[0] == h.shape[1]:     # (elsewhere these crash: the sizes T and d do not fit)
        mistakes["c = h @ alpha pairs the weights with the state's own axis d, not with the positions i (it runs "
                 "only when T == d): c = sum_i alpha_i h_i is alpha @ h"] = h @ alpha
        mistakes["alpha * h broadcasts alpha (T,) against the LAST axis of h (T, d), so alpha_j scales column j "
                 "(it runs only when T == d): write (alpha[:, None] * h).sum(axis=0), or alpha @ h"] = \
            (alpha * h).sum(axis=0)
    return mistakes


def _alpha_mistakes(e):
    """{symptom: alpha} for the weight mistakes learners make most (a scale of the scores: `scaled_softmax`)."""
    return {
        "alpha are the raw scores: turn them into weights with a softmax": e,
        "alpha are normalised by their sum, not by a softmax (exponentiate first)": e / e.sum(),
        "alpha are divided by their maximum instead of their sum: they must sum to 1": np.exp(e - e.max()),
        "alpha contain NaN on large scores (e around 1000): np.exp(1000) overflows to inf, and inf / inf is "
        "NaN; subtract the maximum before exp, as in your softmax (or call ref.softmax(e))": _no_max_softmax(e),
    }


@exercise("Bahdanau-style context vector", reference=ref.bahdanau_context)
def bahdanau_context(ev: Evaluation, answer):
    """answer(e (T,), h (T, d)) -> (c (d,), alpha (T,)); the first test is square (T == d), the last has large
    scores (around 1000)."""
    tests = 0
    for seed, (T, d) in enumerate([(5, 5), (3, 6), (8, 2), (4, 3)]):
        g = ev.rng(seed)
        large = seed == 3
        e, h = g.normal(size=T) * 2 + (1000.0 if large else 0.0), g.normal(size=(T, d))
        c_ref, a_ref = ref.bahdanau_context(e, h)
        c, alpha = expect_returns(call(ev, answer, e, h), (c_ref, a_ref), ("c", "alpha"))
        what = "alpha for large scores (e around 1000)" if large else "alpha"
        with explained(functools.partial(scaled_softmax, alpha, e, what, {"d": d, "T": T})):
            ev.expect_close(alpha, a_ref, what, mistakes=_alpha_mistakes(e))
        expect_distribution(alpha, "alpha")
        ev.expect_close(c, c_ref, "the context c", mistakes=_context_mistakes(e, h, a_ref))
        tests += 1
    return tests


def _scale_mistakes(scores, d_k, d_v, T_q, T_k, softmax, formula):
    """{symptom: weights} for a softmax of `scores` (the raw dot products) with a wrong scale, or scaled after the
    softmax (`formula`: the right one, in the exercise's notation); none that gives the right weights here."""
    where = "the scale is sqrt(d_k), the width of the queries and keys (their last axis)"
    after = f"after the softmax, so they no longer sum to 1: scale the scores before it, {formula}"
    mistakes = {
        "missing scale: the weights are not scaled; divide the scores by sqrt(d_k) before the softmax":
            softmax(scores),
        "the scores are divided by d_k instead of sqrt(d_k)": softmax(scores / d_k),
        "the scores are multiplied by sqrt(d_k): divide them by it": softmax(scores * np.sqrt(d_k)),
        f"the weights are divided by sqrt(d_k) {after}": softmax(scores) / np.sqrt(d_k),
        f"the weights are divided by d_k {after}": softmax(scores) / d_k,
    }
    if d_v != d_k:
        mistakes[f"the scores are scaled by sqrt(d_v), the width of the values: {where}"] = \
            softmax(scores / np.sqrt(d_v))
    if T_q is not None and T_q == T_k:
        mistakes[f"the scores are scaled by sqrt(T), a sequence length (K.shape[0] or Q.shape[0]): {where}"] = \
            softmax(scores / np.sqrt(T_k))
    else:
        if T_k != d_k:
            mistakes[f"the scores are scaled by sqrt(T_k), the number of keys (K.shape[0]): {where}"] = \
                softmax(scores / np.sqrt(T_k))
        if T_q is not None:
            mistakes[f"the scores are scaled by sqrt(T_q), the number of queries (Q.shape[0]): {where}"] = \
                softmax(scores / np.sqrt(T_q))
    return mistakes


def _single_query_mistakes(q, K, d_v):
    """{symptom: weights} for one query: the scale mistakes, the raw scores, and (when T_k == d_k) q @ K."""
    T, d_k = K.shape
    mistakes = _scale_mistakes(K @ q, d_k, d_v, None, T, ref.softmax, "softmax(K q / sqrt(d_k))")
    mistakes["the weights are the raw scores: apply the softmax to q·k_i / sqrt(d_k)"] = K @ q / np.sqrt(d_k)
    if T == d_k:        # (elsewhere q @ K crashes)
        mistakes["the scores are q @ K, which pairs q with the COLUMNS of K (it runs only when T_k == d_k): "
                 "score i is q·k_i, the dot product of q with row i of K: K @ q (or q @ K.T)"] = \
            ref.softmax(q @ K / np.sqrt(d_k))
    return mistakes


@exercise("single-query attention", reference=ref.single_query_attention)
def single_query_attention(ev: Evaluation, answer):
    """answer(q (d_k,), K (T_k, d_k), V (T_k, d_v)) -> (z (d_v,), weights (T_k,)).

    The first test is square (T_k == d_k: a forgotten transpose runs there); in the others d_k, d_v and T_k
    differ, so that a scale by the wrong size shows. The inputs are drawn until every mistake's weights differ."""
    tests = 0
    for seed, (T, d_k, d_v) in enumerate([(5, 5, 3), (6, 4, 3), (5, 9, 2), (7, 16, 5)]):
        g = ev.rng(seed)
        for _ in range(50):
            q, K, V = g.normal(size=d_k), g.normal(size=(T, d_k)), g.normal(size=(T, d_v))
            z_ref, w_ref = ref.single_query_attention(q, K, V)
            mistakes = _single_query_mistakes(q, K, d_v)
            if separable([w_ref, *mistakes.values()]):
                break
        z, weights = expect_returns(call(ev, answer, q, K, V), (z_ref, w_ref), ("z", "weights"))
        ev.expect_close(weights, w_ref, f"the weights (T_k={T}, d_k={d_k}, d_v={d_v})", mistakes=mistakes)
        expect_distribution(weights, "the weights")
        ev.expect_close(z, z_ref, f"z (d_v={d_v})", mistakes={
            "z mixes the keys: the output is the weighted sum of the VALUES, weights @ V": w_ref @ K,
            "z keeps the positions: sum the weighted values over the keys, weights @ V": w_ref[:, None] * V,
            "z ignores the weights (a plain mean of the values): z = weights @ V": V.mean(axis=0),
        })
        tests += 1
    loop = python_loop(answer)
    if loop:
        raise ExerciseError(f"your function goes over the data in a Python loop ({loop}), and the exercise asks for "
                            "none: compute every score at once, K @ q / sqrt(d_k) (score i is q·k_i), then "
                            "z = weights @ V; NumPy then runs the loop in compiled code.")
    return tests


def _attention_mistakes(Q, K, d_v, w_ref):
    """{symptom: weights} for the matrix form: the wrong axis or orientation, and the scale mistakes."""
    (T_q, d_k), T_k = Q.shape, K.shape[0]
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
    mistakes.update(_scale_mistakes(Q @ K.T, d_k, d_v, T_q, T_k, lambda s: ref.softmax(s, axis=-1),
                                    "softmax(Q K^T / sqrt(d_k))"))
    return mistakes


@exercise("attention in matrix form", reference=ref.attention)
def attention(ev: Evaluation, answer):
    """answer(Q (T_q, d_k), K (T_k, d_k), V (T_k, d_v)) -> (Z (T_q, d_v), weights (T_q, T_k)).

    d_k, d_v, T_q and T_k differ (except T_q = T_k in the first test, where a transposed weight
    matrix still multiplies V), so that a scale by the wrong size shows. The inputs are drawn until every
    mistake's weights differ."""
    tests = 0
    for seed, (T_q, T_k, d_k, d_v) in enumerate([(5, 5, 9, 3), (3, 5, 4, 2), (6, 4, 16, 7)]):
        g = ev.rng(seed)
        for _ in range(50):
            Q, K, V = g.normal(size=(T_q, d_k)) * 2, g.normal(size=(T_k, d_k)) * 2, g.normal(size=(T_k, d_v))
            Z_ref, w_ref = ref.attention(Q, K, V)
            mistakes = _attention_mistakes(Q, K, d_v, w_ref)
            if separable([w_ref, *mistakes.values()]):
                break
        Z, weights = expect_returns(call(ev, answer, Q, K, V), (Z_ref, w_ref), ("Z", "weights"))
        ev.expect_close(weights, w_ref, f"the weights (T_q={T_q}, T_k={T_k}, d_k={d_k}, d_v={d_v})",
                        mistakes=mistakes)
        expect_distribution(weights, "each row of the weights")
        Z_mistakes = {"Z mixes the keys: the output is weights @ V, a blend of the VALUES": w_ref @ K}
        if T_q == T_k:
            Z_mistakes["Z uses the transposed weights: Z = weights @ V, row t mixes the values with row t's "
                       "weights"] = w_ref.T @ V
        ev.expect_close(Z, Z_ref, f"Z (T_q={T_q}, d_v={d_v})", mistakes=Z_mistakes)
        tests += 1
    loop = python_loop(answer)
    if loop:
        raise ExerciseError(f"your function goes over the data in a Python loop ({loop}), and the exercise asks for "
                            "the matrix form: all the scores at once, Q @ K.T / sqrt(d_k), a softmax over each row "
                            "(axis=-1), then Z = weights @ V, with no loop over the queries or the keys.")
    return tests + _large_scores(ev, answer)


def _large_scores(ev, answer):
    """Scores around 1000 (a shared component of Q and K adds 1000 to every score): a softmax without the maximum
    subtracted overflows (exp(1000) = inf, inf / inf = NaN). Returns the number of tests (1)."""
    g = ev.rng(10)
    T_q, T_k, d_k, d_v = 3, 4, 4, 2
    Q, K, V = g.normal(size=(T_q, d_k)), g.normal(size=(T_k, d_k)), g.normal(size=(T_k, d_v))
    Q[:, 0], K[:, 0] = 40.0, 50.0 + K[:, 0] / 40        # 40 * 50 / sqrt(4) = 1000, and a spread of about 1
    Z_ref, w_ref = ref.attention(Q, K, V)
    Z, weights = expect_returns(call(ev, answer, Q, K, V), (Z_ref, w_ref), ("Z", "weights"))
    ev.expect_close(weights, w_ref, "the weights for large scores (around 1000)", mistakes={
        "the weights contain NaN on large scores (around 1000): np.exp(1000) overflows to inf, and inf / inf is "
        "NaN; subtract each row's maximum before exp, as in your softmax (or call ref.softmax(scores))":
            _no_max_softmax(Q @ K.T / np.sqrt(d_k)),
    })
    ev.expect_close(Z, Z_ref, "Z for large scores (around 1000)")
    return 1
