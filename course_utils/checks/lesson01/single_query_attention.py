"""Lesson 01, exercise 3: one query against keys and values.

    single_query_attention(q (d_k,), K (T_k, d_k), V (T_k, d_v)) -> (z (d_v,), weights (T_k,)),
    weights = softmax(K q / √d_k), z = weights @ V, with no Python loop

The check compares the weights, then z, on four inputs. The first is square (T_k == d_k: a product that pairs q with
the columns of K runs there, and is named by its values); in the others d_k, d_v and T_k differ, so that a scale by
the wrong size shows. The inputs are drawn until every mistake's weights differ (scale.py). Last, the learner's own
code, where it can be read, is read for a Python loop over the data (loops.py).
"""
import numpy as np

from ... import numpy_attention as ref
from ..core import Mistake, Mistakes, exercise, expect, expect_distribution, expect_returns
from ..evaluation import Evaluation
from ..loops import python_loop
from .scale import scale_mistakes, separable
from .softmax_by_hand import call, fixed_axis


def wrong(divisor=None, after=None, scores=lambda q, K: K @ q, normalise=True, mix=lambda w, K, V: w @ V,
          axis=-1):
    """Single-query attention with one mistake (every default is the right choice): divisor(q, K, V) divides the
    scores (right: √d_k), after(q, K, V) the weights; scores(q, K); normalise: the softmax; mix(w, K, V): z."""
    def single_query_attention(q, K, V):
        s = scores(q, K) / (np.sqrt(q.shape[-1]) if divisor is None else divisor(q, K, V))
        w = ref.softmax(s, axis=axis) if normalise else s
        w = w if after is None else w / after(q, K, V)
        return mix(w, K, V), w
    return single_query_attention


def _loop_over_the_keys(q, K, V):
    """Right values, from a Python loop over the keys (the check reads this code, as it reads a notebook's)."""
    w = ref.softmax(np.array([q @ k for k in K]) / np.sqrt(q.shape[-1]))
    return w @ V, w


M = Mistakes(
    *scale_mistakes(wrong, "softmax(K q / √d_k)",
                    ("scale_by_tk", "the scores are scaled by √T_k, the number of keys", lambda q, K, V: K.shape[0])),
    Mistake("raw_scores", "the weights are the scaled scores themselves: a softmax turns them into weights that sum "
            "to 1", hint="weights = softmax(K @ q / np.sqrt(d_k))", shows=wrong(normalise=False)),
    Mistake("q_at_K", "the scores pair q with the COLUMNS of K (this runs only when T_k == d_k): score i is q·k_i, "
            "the dot product of q with row i of K", hint="K @ q (or q @ K.T)", shows=wrong(scores=lambda q, K: q @ K)),
    Mistake("z_from_keys", "z mixes the keys: the output is the weighted sum of the VALUES", hint="z = weights @ V",
            shows=wrong(mix=lambda w, K, V: w @ K)),
    Mistake("z_keeps_positions", "z keeps the positions: the weighted values must be added up over the keys",
            hint="z = weights @ V", shows=wrong(mix=lambda w, K, V: w[:, None] * V)),
    Mistake("z_plain_mean", "z is the plain mean of the values: it ignores the weights", hint="z = weights @ V",
            shows=wrong(mix=lambda w, K, V: V.mean(axis=0))),
    Mistake("python_loop", "your function goes over the data in a Python loop ({loop}), and the exercise asks for "
            "none: compute every score at once (score i is q·k_i), then z, with one product each; NumPy then runs "
            "the loop in compiled code", hint="scores = K @ q / np.sqrt(d_k); z = weights @ V",
            shows=_loop_over_the_keys),
    fixed_axis(shows=wrong(axis=1)),
)
WEIGHTS = [m for m in M if not m.key.startswith("z_") and m.key not in ("python_loop", "fixed_axis")]
Z_MISTAKES = [M.z_from_keys, M.z_keeps_positions, M.z_plain_mean]


def _einsum(q, K, V):
    w = ref.softmax(np.einsum("td,d->t", K, q) / np.sqrt(len(q)))
    return np.einsum("t,tv->v", w, V), w


def _one_row(q, K, V):
    """Matrix attention with the query as a one-row matrix."""
    Z, w = ref.attention(q[None, :], K, V)
    return Z[0], w[0]


@exercise("single-query attention", reference=ref.single_query_attention, mistakes=M, right=[_einsum, _one_row])
def single_query_attention(ev: Evaluation, answer):
    """answer(q (d_k,), K (T_k, d_k), V (T_k, d_v)) -> (z (d_v,), weights (T_k,))."""
    tests = 0
    for seed, (T, d_k, d_v) in enumerate([(5, 5, 3), (6, 4, 3), (5, 9, 2), (7, 16, 5)]):
        g = ev.rng(seed)
        for _ in range(50):
            q, K, V = g.normal(size=d_k), g.normal(size=(T, d_k)), g.normal(size=(T, d_v))
            z_ref, w_ref = ref.single_query_attention(q, K, V)
            weights_of = M.variants(WEIGHTS, q, K, V, pick=lambda r: r[1])
            if separable(w_ref, weights_of):
                break
        z, weights = expect_returns(call(ev, answer, M, q, K, V), (z_ref, w_ref), ("z", "weights"))
        ev.expect_close(weights, w_ref, f"the weights (T_k={T}, d_k={d_k}, d_v={d_v})", mistakes=weights_of)
        expect_distribution(weights, "the weights")
        ev.expect_close(z, z_ref, f"z (d_v={d_v})",
                        mistakes=M.variants(Z_MISTAKES, q, K, V, pick=lambda r: r[0]))
        tests += 1
    loop = python_loop(answer)
    expect(not loop, M.python_loop.at(loop=loop))
    return tests
