"""Lesson 01, exercise 2: Bahdanau's context vector from alignment scores.

    bahdanau_context(e (T,), h (T, d)) -> (c (d,), alpha (T,)),  alpha = softmax(e), c = sum_i alpha_i h_i

The check compares alpha, then c, on four inputs: the first is square (T == d), where the products that pair the
weights with the state's own axis d run and are named by their values (elsewhere they crash); the last has large
scores (around 1000), where a softmax without the maximum subtracted overflows. Weights that are a softmax of the
scores multiplied by a constant are named with that constant (`scaled_scores`).
"""
import functools

import numpy as np

from ... import numpy_attention as ref
from ..core import Mistake, Mistakes, exercise, expect_distribution, expect_returns, to_numpy
from ..evaluation import Evaluation
from ..expectations import explained
from .softmax_by_hand import call, fixed_axis, no_max_softmax


def with_alpha(weights):
    """A wrong answer whose alpha is weights(e) (and c = alpha @ h)."""
    def bahdanau_context(e, h):
        alpha = weights(e, h)
        return alpha @ h, alpha
    return bahdanau_context


def with_c(context):
    """A wrong answer whose c is context(e, h, alpha) (alpha right)."""
    def bahdanau_context(e, h):
        alpha = ref.softmax(e)
        return context(e, h, alpha), alpha
    return bahdanau_context


M = Mistakes(
    Mistake("raw_scores", "alpha are the raw scores e: a softmax turns them into weights that sum to 1",
            hint="alpha = ref.softmax(e)", shows=with_alpha(lambda e, h: e)),
    Mistake("sum_normalised", "alpha are the scores divided by their sum, not a softmax: exponentiate them first",
            hint="alpha = np.exp(e - e.max()); alpha = alpha / alpha.sum()",
            shows=with_alpha(lambda e, h: e / e.sum())),
    Mistake("by_max", "alpha are exp(e) divided by their maximum instead of their sum: the weights must sum to 1",
            hint="divide by the sum of the exponentials", shows=with_alpha(lambda e, h: np.exp(e - e.max()))),
    Mistake("no_max", "alpha contain NaN on large scores (e around 1000): exp(1000) overflows to inf, and inf / inf "
            "is NaN; subtract the maximum before the exp, as in your softmax",
            hint="np.exp(e - e.max()), or call ref.softmax(e)", shows=with_alpha(lambda e, h: no_max_softmax(e))),
    Mistake("scaled_scores", "{what} is the softmax of the scores multiplied by a constant ({c}): the scores were "
            "scaled before the softmax; Bahdanau's weights take the scores e as they come, alpha = softmax(e) (a "
            "score function may scale its own scores, as √d_k does in section 5; this step does not)",
            hint="alpha = ref.softmax(e), without dividing e", shows=with_alpha(lambda e, h: ref.softmax(e / 3.0))),
    Mistake("c_wrong_axis", "c is summed over the state's own axis d instead of over the positions i: c = sum_i "
            "alpha_i h_i is a vector of size d", hint="(alpha[:, None] * h).sum(axis=0), or alpha @ h",
            shows=with_c(lambda e, h, alpha: (alpha[:, None] * h).sum(axis=1))),
    Mistake("c_keeps_positions", "c keeps the positions: the weighted states alpha_i h_i must be added up over i",
            hint="(alpha[:, None] * h).sum(axis=0), or alpha @ h",
            shows=with_c(lambda e, h, alpha: alpha[:, None] * h)),
    Mistake("c_from_scores", "c mixes the states with the raw scores e instead of the weights alpha",
            hint="c = alpha @ h", shows=with_c(lambda e, h, alpha: e @ h)),
    Mistake("c_plain_mean", "c is the plain mean of the states: it ignores the weights; c = sum_i alpha_i h_i",
            hint="c = alpha @ h", shows=with_c(lambda e, h, alpha: h.mean(axis=0))),
    Mistake("c_mean", "c is divided by T: the weighted states alpha_i h_i are averaged over the positions, where c "
            "is their sum (the weights already sum to 1)", hint=".sum(axis=0), not .mean(axis=0)",
            shows=with_c(lambda e, h, alpha: (alpha[:, None] * h).mean(axis=0))),
    Mistake("c_along_d", "c pairs the weights with the state's own axis d, not with the positions i (this runs only "
            "when T == d): c = sum_i alpha_i h_i", hint="alpha @ h, not h @ alpha",
            shows=with_c(lambda e, h, alpha: h @ alpha)),
    Mistake("c_last_axis", "the weights scale the state's own axis d, not the positions i: an array of shape (T,) "
            "broadcasts against the LAST axis of one of shape (T, d) (this runs only when T == d), so alpha_j "
            "scales column j instead of the state h_j", hint="(alpha[:, None] * h).sum(axis=0), or alpha @ h",
            shows=with_c(lambda e, h, alpha: (alpha * h).sum(axis=0))),
    fixed_axis(shows=with_alpha(lambda e, h: ref.softmax(e, axis=1))),
)
ALPHA = [M.raw_scores, M.sum_normalised, M.by_max, M.no_max]
CONTEXT = [m for m in M if m.key.startswith("c_")]


def scaled_scores(alpha, e, what, sizes):
    """A probe: `alpha` is softmax(c * e) for a constant c != 1 (the scores scaled before the softmax): the mistake
    naming c (and which size it is 1/sqrt of, from `sizes`, {name: size}), or None."""
    a, e = np.asarray(to_numpy(alpha), dtype=np.float64), np.asarray(e, dtype=np.float64)
    if a.shape != e.shape or a.ndim != 1 or a.size < 2 or not np.all(np.isfinite(a)) or not np.all(a > 0) \
            or not np.isclose(a.sum(), 1.0, atol=1e-4):
        return None
    x, y = e - e.mean(), np.log(a) - np.log(a).mean()
    if np.abs(x).max() < 1e-9:
        return None
    c = float(x @ y / (x @ x))
    if np.isclose(c, 1.0, rtol=1e-3) or not np.allclose(y, c * x, atol=1e-4, rtol=1e-3):
        return None
    names = [label for n, size in sizes.items()
             for label, v in ((f"1/√{n}", 1 / np.sqrt(size)), (f"1/{n}", 1 / size), (f"√{n}", np.sqrt(size)))
             if np.isclose(c, v, rtol=1e-3)]
    return M.scaled_scores.at(what=what, c=f"{c:.3g}" + (f" = {' = '.join(dict.fromkeys(names))}" if names else ""))


def _einsum(e, h):
    alpha = np.exp(e - e.max())
    alpha = alpha / alpha.sum()
    return np.einsum("t,td->d", alpha, h), alpha


@exercise("Bahdanau-style context vector", reference=ref.bahdanau_context, mistakes=M,
          right=[_einsum, with_c(lambda e, h, alpha: (alpha[:, None] * h).sum(axis=0))])
def bahdanau_context(ev: Evaluation, answer):
    """answer(e (T,), h (T, d)) -> (c (d,), alpha (T,)); the first test is square (T == d), the last has large
    scores (around 1000)."""
    tests = 0
    for seed, (T, d) in enumerate([(5, 5), (3, 6), (8, 2), (4, 3)]):
        g = ev.rng(seed)
        large = seed == 3
        e, h = g.normal(size=T) * 2 + (1000.0 if large else 0.0), g.normal(size=(T, d))
        c_ref, a_ref = ref.bahdanau_context(e, h)
        c, alpha = expect_returns(call(ev, answer, M, e, h), (c_ref, a_ref), ("c", "alpha"))
        what = "alpha for large scores (e around 1000)" if large else "alpha"
        with explained(functools.partial(scaled_scores, alpha, e, what, {"d": d, "T": T})):
            ev.expect_close(alpha, a_ref, what, mistakes=M.variants(ALPHA, e, h, pick=lambda r: r[1]))
        expect_distribution(alpha, "alpha")
        ev.expect_close(c, c_ref, "the context c", mistakes=M.variants(CONTEXT, e, h, pick=lambda r: r[0]))
        tests += 1
    return tests
