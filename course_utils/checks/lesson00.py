"""Check for lesson 00 (welcome): the warm-up exercise, z = sum_i w_i x_i written without a Python loop.

A designed input: the first test is square (T == d), where the mistakes that pair the weights with the vector's
own axis d (`vectors @ weights`, `weights * vectors` without `[:, None]`) run and are named by their values
(elsewhere they crash). The learner's own code, where it can be read (a notebook's function), is read for a
Python loop (`for`, `while`, a comprehension); the grader's proxy of a learner's function has no code to read,
and every input of T >= 1 gives a loop the same values, so there a loop is not seen.
"""
import ast
import inspect
import textwrap

from .. import numpy_attention as ref
from .core import ExerciseError, exercise
from .evaluation import Evaluation

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


def python_loop(answer):
    """The first Python loop in `answer`'s own code, as a short text (`for w_i in weights`), or None: none, or
    its code cannot be read (the grader's proxy of a learner's function, a function made by exec)."""
    if not inspect.isfunction(answer):
        return None
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(answer)))
    except (OSError, TypeError, SyntaxError, IndentationError):   # (a lambda's line may not parse on its own)
        return None
    kind = ast.Lambda if answer.__name__ == "<lambda>" else (ast.FunctionDef, ast.AsyncFunctionDef)
    own = [n for n in ast.walk(tree) if isinstance(n, kind) and getattr(n, "name", answer.__name__) == answer.__name__]
    if len(own) != 1:
        return None
    for node in ast.walk(own[0]):
        if isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
            target = node.target.elts if isinstance(node.target, ast.Tuple) else [node.target]
            return f"`for {', '.join(ast.unparse(t) for t in target)} in {ast.unparse(node.iter)}`"
        if isinstance(node, ast.While):
            return f"`while {ast.unparse(node.test)}`"
    return None


@exercise("weighted sum", reference=ref.weighted_sum)
def weighted_sum(ev: Evaluation, answer):
    """answer(weights (T,), vectors (T, d)) -> (d,) = sum_i weights[i] * vectors[i], without a Python loop."""
    tests = 0
    for seed, (T, d) in enumerate([(7, 7), (4, 3), (6, 5), (1, 2)]):     # square first: see the module's docstring
        g = ev.rng(seed)
        w, x = g.random(T), g.normal(size=(T, d))
        what = f"weighted_sum(weights {w.shape}, vectors {x.shape})"
        ev.expect_close(ev.call(answer, w, x), ref.weighted_sum(w, x), what, mistakes=mistakes(w, x))
        tests += 1
    loop = python_loop(answer)
    if loop:
        raise ExerciseError(f"your function goes over the vectors in a Python loop ({loop}), and the exercise "
                            f"asks for none: {WRITE_IT}; NumPy then runs the loop in compiled code.")
    return tests
