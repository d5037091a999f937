"""Lesson 01, exercise 4: attention in matrix form.

    attention(Q (T_q, d_k), K (T_k, d_k), V (T_k, d_v)) -> (Z (T_q, d_v), weights (T_q, T_k)),
    weights = softmax(Q Kᵀ / √d_k) over each row, Z = weights @ V, with no Python loop

The check compares the weights, then Z, on three inputs: d_k, d_v, T_q and T_k differ (except T_q = T_k in the
first, where transposed weights still multiply V), so that a scale by the wrong size shows; the inputs are drawn
until every mistake's weights differ (scale.py). Then the learner's own code, where it can be read, is read for a
Python loop (loops.py), and last come scores around 1000, where a softmax without the maximum subtracted overflows.
"""
import numpy as np

from ... import numpy_attention as ref
from ..core import Mistake, Mistakes, exercise, expect, expect_distribution, expect_returns
from ..evaluation import Evaluation
from ..loops import python_loop
from .scale import scale_mistakes, separable
from .softmax_by_hand import no_max_softmax


def wrong(divisor=None, after=None, scores=lambda Q, K: Q @ K.T, weights=None, mix=lambda w, K, V: w @ V,
          returned=lambda w: w):
    """Matrix attention with one mistake (every default is the right choice): divisor(Q, K, V) divides the scores
    (right: √d_k), after(Q, K, V) the weights; scores(Q, K); weights(scores): the softmax over each row; mix(w, K, V):
    Z; returned(w): the weights returned."""
    def attention(Q, K, V):
        s = scores(Q, K) / (np.sqrt(Q.shape[-1]) if divisor is None else divisor(Q, K, V))
        w = ref.softmax(s, axis=-1) if weights is None else weights(s)
        w = w if after is None else w / after(Q, K, V)
        return mix(w, K, V), returned(w)
    return attention


def _loop_over_the_queries(Q, K, V):
    """Right values, one query at a time in a Python loop (the check reads this code, as it reads a notebook's)."""
    rows = [ref.single_query_attention(q, K, V) for q in Q]
    return np.stack([z for z, _ in rows]), np.stack([w for _, w in rows])


M = Mistakes(
    Mistake("softmax_over_queries", "each KEY's weights sum to 1 over the queries: the softmax runs down the "
            "columns; each query (a row) must sum to 1 over the keys", hint="softmax over axis=-1",
            shows=wrong(weights=lambda s: ref.softmax(s, axis=0))),
    Mistake("scores_transposed", "the scores are transposed (K Qᵀ): row t must hold query t's scores over the keys",
            hint="Q @ K.T", shows=wrong(scores=lambda Q, K: K @ Q.T, mix=lambda w, K, V: w.T @ V)),
    Mistake("weights_transposed", "the weights are returned transposed: row t must hold query t's weights over the "
            "keys (queries in rows, keys in columns)", shows=wrong(returned=lambda w: w.T)),
    Mistake("sum_all", "the whole matrix sums to 1: each row (one query) must be normalised over the keys on its own",
            hint="softmax over axis=-1", shows=wrong(weights=lambda s: np.exp(s) / np.exp(s).sum())),
    *scale_mistakes(wrong, "softmax(Q Kᵀ / √d_k)",
                    ("scale_by_length", "the scores are scaled by the square root of a sequence length (the number "
                     "of queries or of keys)", lambda Q, K, V: Q.shape[0])),
    Mistake("Z_from_keys", "Z mixes the keys: the output is a blend of the VALUES", hint="Z = weights @ V",
            shows=wrong(mix=lambda w, K, V: w @ K)),
    Mistake("Z_transposed_weights", "Z uses the transposed weights: row t of Z mixes the values with row t's weights",
            hint="Z = weights @ V", shows=wrong(mix=lambda w, K, V: w.T @ V)),
    Mistake("python_loop", "your function goes over the data in a Python loop ({loop}), and the exercise asks for "
            "the matrix form: all the scores at once, a softmax over each row, then one product with the values, "
            "with no loop over the queries or the keys",
            hint="scores = Q @ K.T / np.sqrt(d_k); softmax over axis=-1; Z = weights @ V",
            shows=_loop_over_the_queries),
    Mistake("no_max", "the weights contain NaN on large scores (around 1000): exp(1000) overflows to inf, and inf / "
            "inf is NaN; subtract each row's maximum before the exp, as in your softmax",
            hint="np.exp(scores - scores.max(axis=-1, keepdims=True)), or ref.softmax(scores)",
            shows=wrong(weights=no_max_softmax)),
)
WEIGHTS = [m for m in M if not m.key.startswith("Z_") and m.key not in ("python_loop", "no_max")]
Z_MISTAKES = [M.Z_from_keys, M.Z_transposed_weights]


def _einsum(Q, K, V):
    w = ref.softmax(np.einsum("qd,kd->qk", Q, K) / np.sqrt(Q.shape[-1]), axis=1)
    return np.einsum("qk,kv->qv", w, V), w


def _transposed_scores(Q, K, V):
    """K Qᵀ with a softmax over axis 0 (the keys), transposed back."""
    w = ref.softmax(K @ Q.T / np.sqrt(Q.shape[-1]), axis=0).T
    return w @ V, w


def _converts_its_arguments(Q, K, V):
    """A loop over the arguments (to convert them) is not a loop over the data."""
    Q, K, V = (np.asarray(a, dtype=np.float64) for a in (Q, K, V))
    return ref.attention(Q, K, V)


@exercise("attention in matrix form", reference=ref.attention, mistakes=M,
          right=[_einsum, _transposed_scores, _converts_its_arguments])
def attention(ev: Evaluation, answer):
    """answer(Q (T_q, d_k), K (T_k, d_k), V (T_k, d_v)) -> (Z (T_q, d_v), weights (T_q, T_k))."""
    tests = 0
    for seed, (T_q, T_k, d_k, d_v) in enumerate([(5, 5, 9, 3), (3, 5, 4, 2), (6, 4, 16, 7)]):
        g = ev.rng(seed)
        for _ in range(50):
            Q, K, V = g.normal(size=(T_q, d_k)) * 2, g.normal(size=(T_k, d_k)) * 2, g.normal(size=(T_k, d_v))
            Z_ref, w_ref = ref.attention(Q, K, V)
            weights_of = M.variants(WEIGHTS, Q, K, V, pick=lambda r: r[1])
            if separable(w_ref, weights_of):
                break
        Z, weights = expect_returns(ev.call(answer, Q, K, V), (Z_ref, w_ref), ("Z", "weights"))
        ev.expect_close(weights, w_ref, f"the weights (T_q={T_q}, T_k={T_k}, d_k={d_k}, d_v={d_v})",
                        mistakes=weights_of)
        expect_distribution(weights, "each row of the weights")
        ev.expect_close(Z, Z_ref, f"Z (T_q={T_q}, d_v={d_v})",
                        mistakes=M.variants(Z_MISTAKES, Q, K, V, pick=lambda r: r[0]))
        tests += 1
    loop = python_loop(answer)
    expect(not loop, M.python_loop.at(loop=loop))
    return tests + _large_scores(ev, answer)


def _large_scores(ev: Evaluation, answer):
    """Scores around 1000 (a shared component of Q and K adds 1000 to every score): a softmax without the maximum
    subtracted overflows (exp(1000) = inf, inf / inf = NaN). Returns the number of tests (1)."""
    g = ev.rng(10)
    T_q, T_k, d_k, d_v = 3, 4, 4, 2
    Q, K, V = g.normal(size=(T_q, d_k)), g.normal(size=(T_k, d_k)), g.normal(size=(T_k, d_v))
    Q[:, 0], K[:, 0] = 40.0, 50.0 + K[:, 0] / 40        # 40 * 50 / sqrt(4) = 1000, and a spread of about 1
    Z_ref, w_ref = ref.attention(Q, K, V)
    Z, weights = expect_returns(ev.call(answer, Q, K, V), (Z_ref, w_ref), ("Z", "weights"))
    ev.expect_close(weights, w_ref, "the weights for large scores (around 1000)",
                    mistakes=M.variants([M.no_max], Q, K, V, pick=lambda r: r[1]))
    ev.expect_close(Z, Z_ref, "Z for large scores (around 1000)")
    return 1
