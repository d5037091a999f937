"""Check for lesson 00 (welcome): the warm-up exercise, z = sum_i w_i x_i written without a Python loop.

A designed input: the first test is square (T == d), where the mistakes that pair the weights with the vector's
own axis d (`vectors @ weights`, `weights * vectors` without `[:, None]`) run and are named by their values
(elsewhere they crash). Weights changed before the sum (a softmax, exp, a division, ...) are named by their values
where listed (CHANGED_WEIGHTS), and otherwise by the weights an answer used, recovered from two square inputs
(`weights_used`). The learner's own code, where it can be read (a notebook's function), is read for a
Python loop (`for`, `while`, a comprehension); the grader's proxy of a learner's function has no code to read,
and every input of T >= 1 gives a loop the same values, so there a loop is not seen.
"""
import functools

import numpy as np

from .. import numpy_attention as ref
from .core import ExerciseError, exercise, to_numpy
from .evaluation import Evaluation
from .expectations import explained
from .loops import python_loop  # noqa: F401 - the tests call it from here

WRITE_IT = ("write z = sum_i w_i x_i as one matrix product, `weights @ vectors` (or "
            "`(weights[:, None] * vectors).sum(axis=0)`)")


def mistakes(w, x):
    """{symptom: what that mistake returns} for weights w (T,) and vectors x (T, d)."""
    T, d = x.shape
    found = {
        "the result keeps the sequence axis: sum the weighted vectors over i (axis 0)": w[:, None] * x,
        "you summed over the vector's own axis (d) instead of over the positions i": (w[:, None] * x).sum(axis=1),
        "you took the plain mean of the vectors: multiply each vector by its weight first": x.mean(axis=0),
        "you forgot the weights: the sum of the vectors, unweighted": x.sum(axis=0),
        "z is divided by the sum of the weights (a weighted mean): the weighted sum adds w_i x_i and divides by "
        "nothing; drop the division": (w @ x) / w.sum(),
        "z is divided by T (a mean over the positions i instead of their sum): add the weighted vectors with "
        "`.sum(axis=0)`, not `.mean(axis=0)`": (w @ x) / T,
        "z is a single number: you summed over every axis; sum over the positions i only (`.sum(axis=0)`) so that "
        "z keeps shape (d,)": (w[:, None] * x).sum(),
        "z has shape (1, d): the weights became a (1, T) row; return a vector of shape (d,), `weights @ vectors` "
        "with weights of shape (T,)": (w @ x)[None, :],
    }
    for symptom, changed in CHANGED_WEIGHTS:
        found[f"{symptom}: {USE_AS_GIVEN}"] = changed(w) @ x
    if T == d:      # (elsewhere these crash: the shapes of the weights and of d do not fit)
        along_d = ("the weights are paired with the vector's own axis d, not with the positions i: `vectors @ "
                   "weights` (or `(weights * vectors).sum(axis=1)`) gives sum_j x_ij w_j, and runs only when T == "
                   "d; put the weights first, `weights @ vectors`, so that w_i multiplies the vector x_i")
        last_axis = ("the weights multiply the vector's own axis d, not the positions i: `weights * vectors` "
                     "broadcasts weights (T,) against the LAST axis of vectors (T, d) (it runs only when T == d); "
                     "give them a second axis, `weights[:, None] * vectors`, so that w_i scales the row x_i, then "
                     "sum over axis 0")
        unsummed = ("the result keeps the sequence axis, and the weights multiply the vector's own axis d: "
                    "`weights * vectors` broadcasts weights (T,) against the LAST axis of vectors (T, d); write "
                    "`(weights[:, None] * vectors).sum(axis=0)`, so that w_i scales the row x_i and the rows are added")
        found.update({along_d: x @ w, last_axis: (w * x).sum(axis=0), unsummed: w * x})
    return found


def _softmax(w):
    e = np.exp(w - w.max())
    return e / e.sum()


USE_AS_GIVEN = ("the exercise gives you the weights w_i; use them as they are, `weights @ vectors`, without "
                "normalising or transforming them first")
# the weights changed before the sum (symptom, w -> the weights that mistake uses), named by their values
CHANGED_WEIGHTS = [
    ("the weights went through a softmax before the sum (z = sum_i softmax(w)_i x_i)", _softmax),
    ("the weights went through exp before the sum (z = sum_i exp(w_i) x_i)", np.exp),
    ("the weights were divided by their largest value before the sum", lambda w: w / w.max()),
    ("the weights were squared before the sum", np.square),
    ("the weights are paired with the vectors in reverse order (w_T with x_1)", lambda w: w[::-1]),
]


def weights_used(ev, answer, T):
    """A probe (for `explained`): on two square inputs (T == d, invertible vectors x, x') with the same weights w,
    an answer that is a weighted sum of the vectors with weights w' that depend on w alone gives the same
    w' = solve(x^T, z) twice; when w' is not w (the weights changed before the sum: normalised, a softmax, a
    power, ...), say so, or None."""
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
    how = "an increasing function of w_i: rescaled, normalised, a softmax, a power?" if increasing else "not w_i"
    return (f"z is a weighted sum of the vectors x_i, but with other weights than the given ones ({how}): "
            f"{USE_AS_GIVEN}.")


@exercise("weighted sum", reference=ref.weighted_sum)
def weighted_sum(ev: Evaluation, answer):
    """answer(weights (T,), vectors (T, d)) -> (d,) = sum_i weights[i] * vectors[i], without a Python loop."""
    tests = 0
    for seed, (T, d) in enumerate([(7, 7), (4, 3), (6, 5), (1, 2)]):     # square first: see the module's docstring
        g = ev.rng(seed)
        w, x = g.random(T), g.normal(size=(T, d))
        what = f"weighted_sum(weights {w.shape}, vectors {x.shape})"
        with explained(functools.partial(weights_used, ev, answer, 7)):
            ev.expect_close(ev.call(answer, w, x), ref.weighted_sum(w, x), what, mistakes=mistakes(w, x))
        tests += 1
    loop = python_loop(answer)
    if loop:
        raise ExerciseError(f"your function goes over the vectors in a Python loop ({loop}), and the exercise "
                            f"asks for none: {WRITE_IT}; NumPy then runs the loop in compiled code.")
    return tests
