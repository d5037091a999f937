"""What single-query attention and its matrix form share: the scale of the scores, √d_k, and its mistakes
(written once, each exercise's wrong answer built from them), and inputs drawn until every mistake's weights are
told apart (a saturated softmax makes a missing scale and a doubled one look alike).

Both exercises take (q or Q, K, V): d_k = q.shape[-1], d_v = V.shape[-1], T_k = K.shape[0]."""
import numpy as np

from ..core import Mistake


def _d_k(q, K, V):
    return q.shape[-1]


def scale_mistakes(wrong, formula, length):
    """The scale's mistakes, as answers `wrong(divisor=..., after=...)` give them: `divisor(q, K, V)` divides the
    scores before the softmax (right: √d_k), `after(q, K, V)` divides the weights after it (right: 1).
    formula: the right weights in the exercise's notation; length: (key, words, the length (q, K, V) -> T) of a
    scale by the square root of a sequence length."""
    key, words, size = length
    late = f"after the softmax, so they no longer sum to 1: the scale divides the scores, before it: {formula}"
    where = "the scale is √d_k, the width of the queries and keys (their last axis)"
    return [
        Mistake("no_scale", "the scores are not scaled: their spread grows with d_k, and the softmax saturates on "
                "the largest", hint="divide the scores by np.sqrt(d_k) before the softmax",
                shows=wrong(divisor=lambda q, K, V: 1.0)),
        Mistake("scale_by_dk", "the scores are divided by d_k: the scale is its square root, √d_k",
                hint="scores / np.sqrt(d_k)", shows=wrong(divisor=_d_k)),
        Mistake("scale_multiplied", "the scores are multiplied by √d_k, where they must be divided by it",
                hint="scores / np.sqrt(d_k)", shows=wrong(divisor=lambda q, K, V: 1 / np.sqrt(_d_k(q, K, V)))),
        Mistake("weights_scaled", f"the weights are divided by √d_k {late}",
                shows=wrong(divisor=lambda q, K, V: 1.0, after=lambda q, K, V: np.sqrt(_d_k(q, K, V)))),
        Mistake("weights_scaled_dk", f"the weights are divided by d_k {late}",
                shows=wrong(divisor=lambda q, K, V: 1.0, after=_d_k)),
        Mistake("scale_by_dv", f"the scores are scaled by √d_v, the width of the values: {where}",
                hint="np.sqrt(d_k), d_k = K.shape[-1], not V.shape[-1]",
                shows=wrong(divisor=lambda q, K, V: np.sqrt(V.shape[-1]))),
        Mistake(key, f"{words}: {where}", hint="np.sqrt(d_k), d_k = K.shape[-1] (the last axis), not K.shape[0]",
                shows=wrong(divisor=lambda q, K, V: np.sqrt(size(q, K, V)))),
    ]


def separable(expected, variants, margin=1e-3):
    """True when the values `variants` ({mistake: values}) give differ from each other and from `expected` by more
    than `margin` (so that each can be named), leaving out those that are right on this input."""
    expected = np.asarray(expected, dtype=np.float64)
    values = [np.asarray(v, dtype=np.float64) for v in variants.values()]
    values = [v for v in values if v.shape != expected.shape or np.nanmax(np.abs(v - expected)) > 1e-9]
    values.append(expected)
    return all(a.shape != b.shape or np.nanmax(np.abs(a - b)) > margin
               for i, a in enumerate(values) for b in values[i + 1:])
