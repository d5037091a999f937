"""Lesson 00, the warm-up exercise: a weighted sum of vectors, written without a Python loop.

    weighted_sum(weights (T,), vectors (T, d)) -> z (d,) = sum_i w_i x_i

The check compares z on four inputs. The first is square (T == d), where the mistakes that pair the weights with
the vector's own axis d run and are named by their values (elsewhere they crash). Weights changed before the sum
are named by their values where registered (a softmax, exp, ...), and otherwise by the weights the answer used,
recovered from two square inputs (`weights_used`). Last, the learner's own code, where it can be read (a
notebook's function), is read for a Python loop (loops.py); the grader's proxy of a learner's function has no
code to read, and a loop gives the right values, so there a loop is not seen.
"""
import functools

import numpy as np

from ... import numpy_attention as ref
from ..core import ExerciseError, Mistake, Mistakes, exercise, expect, to_numpy
from ..evaluation import Evaluation
from ..expectations import explained
from ..loops import python_loop


def _softmax(w):
    e = np.exp(w - w.max())
    return e / e.sum()


def _with_weights(change):
    """The weighted sum with the weights changed by `change` first (w -> the weights that mistake uses)."""
    return lambda weights, vectors: change(weights) @ vectors


def _loop_over_the_vectors(weights, vectors):
    """Right values, from a Python loop (the check reads this code, as it reads a notebook's function)."""
    return sum(w_i * x_i for w_i, x_i in zip(weights, vectors))


_AS_GIVEN = "the exercise gives the weights w_i: use them as they are, without normalising or transforming them"
_AS_GIVEN_HINT = "weights @ vectors, with the weights untouched"
M = Mistakes(
    Mistake("unsummed", "the result keeps the sequence axis: the weighted vectors w_i x_i must be added up over "
            "the positions i", hint="(weights[:, None] * vectors).sum(axis=0)",
            shows=lambda weights, vectors: weights[:, None] * vectors),
    Mistake("sum_over_d", "z is summed over the vector's own axis d instead of over the positions i",
            hint="sum over axis 0, the positions: (weights[:, None] * vectors).sum(axis=0)",
            shows=lambda weights, vectors: (weights[:, None] * vectors).sum(axis=1)),
    Mistake("plain_mean", "z is the plain mean of the vectors: each vector x_i must be multiplied by its weight w_i "
            "first, and the products added", shows=lambda weights, vectors: vectors.mean(axis=0)),
    Mistake("unweighted", "z is the sum of the vectors without their weights: each x_i must be multiplied by its "
            "weight w_i", shows=lambda weights, vectors: vectors.sum(axis=0)),
    Mistake("weighted_mean", "z is divided by the sum of the weights (a weighted mean): the weighted sum adds the "
            "w_i x_i and divides by nothing", hint="drop the division by weights.sum()",
            shows=lambda weights, vectors: (weights @ vectors) / weights.sum()),
    Mistake("mean_over_positions", "z is divided by T, the number of positions: a mean over i, where the exercise "
            "asks for the sum", hint=".sum(axis=0), not .mean(axis=0)",
            shows=lambda weights, vectors: (weights[:, None] * vectors).mean(axis=0)),
    Mistake("single_number", "z is a single number: the sum ran over every axis; sum over the positions i only, so "
            "that z keeps its d components", hint="(weights[:, None] * vectors).sum(axis=0)",
            shows=lambda weights, vectors: (weights[:, None] * vectors).sum()),
    Mistake("row", "z has shape (1, d): the weights became a (1, T) row; z is a vector of shape (d,)",
            hint="keep the weights of shape (T,): weights @ vectors",
            shows=lambda weights, vectors: weights[None, :] @ vectors),
    Mistake("along_d", "the weights are paired with the vector's own axis d, not with the positions i: z_j is "
            "sum_k x_jk w_k, which runs only when T == d; w_i must multiply the whole vector x_i",
            hint="put the weights first: weights @ vectors", shows=lambda weights, vectors: vectors @ weights),
    Mistake("last_axis", "the weights multiply the vector's own axis d, not the positions i: an array of shape (T,) "
            "broadcasts against the LAST axis of one of shape (T, d) (it runs only when T == d), so w_j scales "
            "column j instead of the vector x_j", hint="weights[:, None] * vectors, then .sum(axis=0)",
            shows=lambda weights, vectors: (weights * vectors).sum(axis=0)),
    Mistake("unsummed_last_axis", "the result keeps the sequence axis, and the weights multiply the vector's own "
            "axis d: an array of shape (T,) broadcasts against the LAST axis of one of shape (T, d), so w_j scales "
            "column j; w_i must scale the vector x_i, and the products be added over i",
            hint="(weights[:, None] * vectors).sum(axis=0)", shows=lambda weights, vectors: weights * vectors),
    Mistake("softmax_weights", "the weights went through a softmax before the sum: " + _AS_GIVEN,
            hint=_AS_GIVEN_HINT, shows=_with_weights(_softmax)),
    Mistake("exp_weights", "the weights went through exp before the sum: " + _AS_GIVEN, hint=_AS_GIVEN_HINT,
            shows=_with_weights(np.exp)),
    Mistake("max_weights", "the weights were divided by their largest value before the sum: " + _AS_GIVEN,
            hint=_AS_GIVEN_HINT, shows=_with_weights(lambda w: w / w.max())),
    Mistake("squared_weights", "the weights were squared before the sum: " + _AS_GIVEN, hint=_AS_GIVEN_HINT,
            shows=_with_weights(np.square)),
    Mistake("reversed_weights", "the weights are paired with the vectors in reverse order (w_T with x_1): w_i "
            "belongs to x_i", hint="weights @ vectors, without reversing either",
            shows=_with_weights(lambda w: w[::-1])),
    Mistake("other_weights", "z is a weighted sum of the vectors x_i, but with other weights than the given ones "
            "({how}): " + _AS_GIVEN, hint=_AS_GIVEN_HINT, shows=_with_weights(lambda w: w ** 3)),
    Mistake("python_loop", "your function goes over the vectors in a Python loop ({loop}), and the exercise asks "
            "for none: write the sum as one matrix product, which NumPy runs in compiled code",
            hint="weights @ vectors (or (weights[:, None] * vectors).sum(axis=0))", shows=_loop_over_the_vectors),
)
VALUES = [m for m in M if m.key not in ("other_weights", "python_loop")]   # those named by their values


def weights_used(ev: Evaluation, answer, T):
    """A probe (for `explained`): on two square inputs (T == d, invertible vectors x, x') with the same weights w,
    an answer that is a weighted sum of the vectors with weights w' that depend on w alone gives the same
    w' = solve(x^T, z) twice; when w' is not w (the weights changed before the sum: normalised, a softmax, a
    power, ...), the mistake that says so, or None."""
    g = ev.rng(100)
    w = g.random(T)
    found = []
    for x in (g.normal(size=(T, T)), g.normal(size=(T, T))):
        try:
            z = np.asarray(to_numpy(ev.call(answer, w, x)), dtype=np.float64)
        except (ExerciseError, TypeError, ValueError):
            return None
        if z.shape != (T,) or not np.all(np.isfinite(z)):
            return None
        found.append(np.linalg.solve(x.T, z))
    used = found[0]
    if not np.allclose(found[0], found[1], atol=1e-6, rtol=1e-4) or np.allclose(used, w, atol=1e-6):
        return None
    increasing = np.all(np.diff(used[np.argsort(w)]) >= -1e-9)
    return M.other_weights.at(how="an increasing function of w_i: rescaled, normalised, a softmax, a power?"
                              if increasing else "not w_i")


def _broadcast_sum(weights, vectors):
    return (weights[:, None] * vectors).sum(axis=0)


def _converts_its_arguments(weights, vectors):
    """A loop over the arguments (to convert them) is not a loop over the vectors."""
    weights, vectors = (np.asarray(a, dtype=np.float64) for a in (weights, vectors))
    return weights @ vectors


@exercise("weighted sum", reference=ref.weighted_sum, mistakes=M,
          right=[_broadcast_sum, lambda weights, vectors: vectors.T @ weights,
                 lambda weights, vectors: np.einsum("t,td->d", weights, vectors),
                 lambda weights, vectors: np.dot(weights, vectors), _converts_its_arguments])
def weighted_sum(ev: Evaluation, answer):
    """answer(weights (T,), vectors (T, d)) -> (d,) = sum_i weights[i] * vectors[i], without a Python loop."""
    tests = 0
    for seed, (T, d) in enumerate([(7, 7), (4, 3), (6, 5), (1, 2)]):     # square first: see the module's docstring
        g = ev.rng(seed)
        w, x = g.random(T), g.normal(size=(T, d))
        what = f"weighted_sum(weights {w.shape}, vectors {x.shape})"
        with explained(functools.partial(weights_used, ev, answer, 7)):
            ev.expect_close(ev.call(answer, w, x), ref.weighted_sum(w, x), what, mistakes=M.variants(VALUES, w, x))
        tests += 1
    loop = python_loop(answer)
    expect(not loop, M.python_loop.at(loop=loop))
    return tests
