"""The framework every exercise check uses.

A check is a function decorated with `@exercise(title)` that receives the learner's function,
calls it through `call(...)` on seeded random inputs, and asserts with the `expect_*` helpers:

>>> import numpy as np
>>> from course_utils.checks.core import call, exercise, expect_close, rng
>>> @exercise("double", reference=lambda x: 2 * x)
... def double(fn):
...     x = rng(0).normal(size=3)
...     expect_close(call(fn, x), 2 * x, "double(x)", mistakes={"you returned x itself": x})
...     return 1                  # number of tests run (optional)
>>> double(lambda x: x + x)
✔ double: correct.
>>> double(lambda x: x)
Traceback (most recent call last):
...
course_utils.checks.core.ExerciseError: ✘ double: you returned x itself
>>> def stub(x):
...     raise NotImplementedError()
>>> double(stub)
○ double: not implemented yet. Replace `raise NotImplementedError()` in the exercise cell with your
code, run that cell, then run this check again.

What a learner sees:
- right: one line with ✔, and nothing else (the check returns None, so no stray output);
- wrong: `ExerciseError`, shown in Jupyter as one red line naming the exercise and the symptom;
- not started (the function still raises NotImplementedError): one line with ○, and the notebook
  goes on, so that "Run All" always reaches the end of a lesson.
Every outcome is recorded in the learner's progress file (`record.py`). `check.evaluate(fn)` gives
the outcome without printing, raising or recording (the grader and the tests use it).
"""
import contextlib
import functools
import itertools
import os
import re
import sys
import traceback
from typing import NamedTuple

import numpy as np

from ..tensors import to_numpy
from . import record

PASSED, WRONG, NOT_IMPLEMENTED = record.STATUSES
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# lesson ("01") -> {check name: check}, in the order the checks are defined (= the lesson's order)
REGISTRY = {}


class ExerciseError(AssertionError):
    """A learner's answer is wrong; the message says what to look at."""


class ValuesDiffer(ExerciseError):
    """The answer has the right shape but not the right values, and no mistake listed by the check
    explains it (the message may still name a mistake any exercise can make)."""


class _LearnerNotImplemented(Exception):
    pass


class Outcome(NamedTuple):
    lesson: str           # "05"
    exercise: str         # the check's name, e.g. "shift"
    title: str            # what the learner reads, e.g. "circular shift"
    status: str           # "passed" | "wrong" | "not implemented"
    message: str          # the one line the learner sees
    tests: int = 0        # number of tests the check ran (when it passed)

    @property
    def passed(self):
        return self.status == PASSED


def lesson_of(module_name):
    """'course_utils.checks.lesson05' -> '05'."""
    match = re.search(r"lesson(\d+)$", module_name)
    return match.group(1) if match else module_name


def exercise(title, name=None, reference=None):
    """Turn `check(fn, *args)` into the check of the exercise named `title`.

    name:      what the learner's function or class is called in the notebook (default: the
               check's own name); the grader looks it up there.
    reference: a correct answer with the exercise's signature; the tests pass it to the check.
    """

    def decorate(check):
        lesson = lesson_of(check.__module__)

        def outcome(status, message, tests=0):
            return Outcome(lesson, check.__name__, title, status, message, tests)

        def evaluate(fn, *args, **kwargs):
            """The Outcome of checking `fn`, without printing, raising or recording it."""
            if not callable(fn):
                return outcome(WRONG, f"✘ {title}: expected your function (or class), got "
                                      f"{type(fn).__name__}: pass its name without calling it.")
            try:
                with _own_random_state():
                    count = check(fn, *args, **kwargs)
            except _LearnerNotImplemented:
                return outcome(NOT_IMPLEMENTED, f"○ {title}: not implemented yet. Replace "
                                                "`raise NotImplementedError()` in the exercise cell with your "
                                                "code, run that cell, then run this check again.")
            except ExerciseError as error:
                return outcome(WRONG, f"✘ {title}: {error}")
            except Exception as error:  # noqa: BLE001 - e.g. an answer of a type the check cannot use
                return outcome(WRONG, f"✘ {title}: your answer could not be checked ({type(error).__name__}: "
                                      f"{error}). Does it return what the exercise asks for?")
            tests = count if isinstance(count, int) and count > 0 else 1
            return outcome(PASSED, f"✔ {title}: correct" + (f" ({tests} tests)." if tests > 1 else "."), tests)

        @functools.wraps(check)
        def run(fn, *args, **kwargs):
            result = evaluate(fn, *args, **kwargs)
            record.record(lesson, check.__name__, title, result.status, result.message)
            if result.status == WRONG:
                _install_ipython_handler()
                raise ExerciseError(result.message)
            print(result.message)

        run.title, run.lesson, run.exercise = title, lesson, check.__name__
        run.learner_name = name or check.__name__
        run.reference, run.evaluate = reference, evaluate
        REGISTRY.setdefault(lesson, {})[check.__name__] = run
        return run

    return decorate


def _own_random_state():
    """A check draws its own random numbers: torch's global generator (which a check moves when it
    builds layers) comes back as it was, so the cells after a check give the same numbers whether the
    check passed or not. (NumPy's global generator is never used: checks draw from `rng(seed)`.)"""
    torch = sys.modules.get("torch")          # lessons without torch do not import it for this
    return torch.random.fork_rng(devices=[]) if torch is not None else contextlib.nullcontext()


def _learner_frames(tb):
    """The traceback lines that belong to the learner's code, not to this package."""
    frames = [f for f in traceback.extract_tb(tb) if not os.path.abspath(f.filename).startswith(_PACKAGE_DIR)]
    return "".join(traceback.format_list(frames[-3:]))


def call(fn, *args, **kwargs):
    """Call the learner's `fn`; turn its exceptions into messages a learner can act on."""
    try:
        return fn(*args, **kwargs)
    except NotImplementedError:
        raise _LearnerNotImplemented() from None
    except ExerciseError:
        raise
    except Exception as error:  # the learner's code crashed: show where, in their code
        where = _learner_frames(error.__traceback__)
        shapes = ", ".join(describe(a) for a in args)
        raise ExerciseError(
            f"your function raised {type(error).__name__}: {error}\n"
            f"  called with: {shapes}\n" + (f"  in your code:\n{where}" if where else "")) from None


def describe(x):
    """A short description of an argument: shape and dtype for arrays, repr for the rest."""
    if hasattr(x, "shape") and hasattr(x, "dtype"):
        return f"{type(x).__name__} of shape {tuple(x.shape)} ({x.dtype})"
    text = repr(x)
    return text if len(text) < 40 else text[:37] + "..."


# ---------------------------------------------------------------------------------------------
# Inputs: seeded, so that a check gives the same verdict every time
# ---------------------------------------------------------------------------------------------
def rng(seed=0):
    """A seeded NumPy random generator: every check uses its own, so checks are repeatable."""
    return np.random.default_rng(seed)


def randn(generator, *shape, scale=1.0):
    """A float32 torch tensor of normal samples drawn from the NumPy `generator`."""
    import torch

    return torch.as_tensor(generator.normal(size=shape) * scale, dtype=torch.float32)


def single_threaded(check):
    """Run a check on one thread: its tensors are tiny, and on a shared machine extra threads only
    wait for each other (a check can get ten times slower)."""

    @functools.wraps(check)
    def run(*args, **kwargs):
        import torch

        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            return check(*args, **kwargs)
        finally:
            torch.set_num_threads(threads)

    return run


# ---------------------------------------------------------------------------------------------
# Expectations
# ---------------------------------------------------------------------------------------------
def expect(condition, symptom):
    """Fail with `symptom` unless `condition` holds."""
    if not condition:
        raise ExerciseError(symptom)


def expect_shape(x, shape, what):
    """`x` has `shape` (None in `shape` matches any size)."""
    if not hasattr(x, "shape"):
        raise ExerciseError(f"{what} should be an array of shape {tuple(shape)}, got {type(x).__name__}"
                            + (" (did you forget to `return` it?)" if x is None else "."))
    got = tuple(x.shape)
    ok = len(got) == len(shape) and all(e is None or e == g for e, g in zip(shape, got))
    if not ok and len(got) == len(shape) >= 2 and got == tuple(shape)[:-2] + tuple(shape)[-2:][::-1]:
        raise ExerciseError(f"{what} has shape {got}, expected {tuple(shape)}: the last two axes are swapped "
                            "(a transposed matrix?).")
    expect(ok, f"{what} has shape {got}, expected {tuple(shape)}.")


def expect_finite(x, what, hint=""):
    a = to_numpy(x)
    expect(np.all(np.isfinite(a)), f"{what} contains NaN or inf.{(' ' + hint) if hint else ''}")


def _close(a, b, atol, rtol):
    return a.shape == b.shape and np.allclose(a, b, atol=atol, rtol=rtol, equal_nan=False)


def _generic_symptom(a, e, what, atol, rtol):
    """Name a mistake that any exercise can make, from the answer `a` and the expected `e` alone."""
    if a.ndim >= 2 and a.shape[:-2] + a.shape[-2:][::-1] == e.shape and a.shape != e.shape:
        if _close(np.swapaxes(a, -1, -2), e, atol, rtol):
            return f"{what} is transposed: its last two axes are swapped (shape {a.shape}, expected {e.shape})."
    if a.shape != e.shape:
        return None
    if _close(-a, e, atol, rtol) and np.abs(e).max() > atol:
        return f"{what} has the wrong sign: every value is the negative of the expected one."
    flat_a, flat_e = a.astype(np.float64).ravel(), e.astype(np.float64).ravel()
    big = np.abs(flat_e) > 1e-6
    if big.sum() >= 2:
        ratios = flat_a[big] / flat_e[big]
        c = float(np.median(ratios))
        if abs(c) > 1e-9 and not np.isclose(c, 1.0, rtol=1e-3) and _close(a, c * e, atol, rtol):
            return (f"{what} is off by a constant factor: every value is {c:.4g} times the expected one "
                    "(a missing or extra scale, e.g. a square root, a division by the length or by the size "
                    "of a vector?).")
    if a.ndim >= 1 and a.shape[-1] > 1:
        sums = a.astype(np.float64).sum(-1, keepdims=True)
        if np.all(np.abs(sums) > 1e-9) and _close(a / sums, e, atol, rtol) and not _close(sums, np.ones_like(sums),
                                                                                        1e-4, 1e-4):
            return (f"{what} is not normalised: it is proportional to the expected values along the last "
                    "axis; divide by the sum over that axis.")
    for axis in range(a.ndim):
        if a.shape[axis] < 3:
            continue
        for step in (1, -1):
            if _close(np.roll(a, step, axis=axis), e, atol, rtol):
                return (f"{what} is shifted by one position along axis {axis} (an off-by-one index or "
                        "slice?).")
    return None


def expect_close(actual, expected, what, mistakes=None, atol=1e-5, rtol=1e-4, hint=""):
    """`actual` equals `expected`; otherwise name the first known mistake it matches.

    mistakes: {symptom: what that mistake would have produced}. A learner whose output matches
    one of them is told that symptom instead of a bare "wrong values". Mistakes any exercise can
    make (a transposed matrix, a wrong sign, a constant factor, a missing normalisation, an
    off-by-one shift) are recognised without being listed.
    """
    if actual is None:
        raise ExerciseError(f"{what} is None: did you forget to `return` the result?")
    a, e = to_numpy(actual), to_numpy(expected)
    if a.shape != e.shape:
        for symptom, wrong in (mistakes or {}).items():
            if _close(a, to_numpy(wrong).astype(a.dtype, copy=False), atol, rtol):
                raise ExerciseError(symptom)
        raise ExerciseError(_generic_symptom(a, e, what, atol, rtol)
                            or f"{what} has shape {a.shape}, expected {e.shape}.")
    if not np.all(np.isfinite(a)) and np.all(np.isfinite(e)):
        finite = np.isfinite(a)
        candidates = [(symptom, to_numpy(wrong)) for symptom, wrong in (mistakes or {}).items()]
        candidates = [(symptom, w) for symptom, w in candidates if w.shape == a.shape and not np.all(np.isfinite(w))]
        for symptom, wrong in candidates:   # the mistake whose NaN/inf fall where the answer's do
            if np.array_equal(np.isfinite(wrong), finite) and np.allclose(a[finite], wrong[finite], atol=atol,
                                                                           rtol=rtol):
                raise ExerciseError(symptom)
        for symptom, wrong in candidates:
            if np.array_equal(np.isfinite(wrong), finite):
                raise ExerciseError(symptom)
        if candidates:
            raise ExerciseError(candidates[0][0])
        raise ExerciseError(f"{what} contains NaN or inf where the expected values are finite.")
    if _close(a, e, atol, rtol):
        return
    for symptom, wrong in (mistakes or {}).items():
        if _close(a, to_numpy(wrong), atol, rtol):
            raise ExerciseError(symptom)
    symptom = _generic_symptom(a, e, what, atol, rtol)
    if symptom:
        raise ValuesDiffer(symptom + (f" {hint}" if hint else ""))
    diff = np.abs(a.astype(np.float64) - e.astype(np.float64))
    where = np.unravel_index(np.argmax(diff), diff.shape) if diff.ndim else ()
    raise ValuesDiffer(f"{what}: wrong values (largest difference {diff.max():.3g} at index "
                       f"{tuple(int(i) for i in where)}: got {a[where]:.4g}, expected {e[where]:.4g})."
                       + (f" {hint}" if hint else ""))


def _same(a, b, atol=1e-5, rtol=1e-4):
    try:
        return _close(to_numpy(a), to_numpy(b), atol, rtol)
    except (TypeError, ValueError):
        return False


def _shape(x):
    return tuple(x.shape) if hasattr(x, "shape") else None


def expect_returns(result, expected, names):
    """`result` is the tuple `names` (e.g. ("c", "alpha")) in that order; returns it.

    Recognises, for any exercise that returns several values: one value instead of several, the
    wrong number of them, and the right values in another order (tried against `expected`, the
    reference's values, by value and then by shape).
    """
    names = tuple(names)
    order = ", ".join(names)
    if result is None:
        raise ExerciseError(f"your function returned nothing: end it with `return {order}`.")
    if not isinstance(result, (tuple, list)):
        raise ExerciseError(f"return {len(names)} things, as `return {order}` (got one "
                            f"{type(result).__name__}).")
    if len(result) != len(names):
        raise ExerciseError(f"return {len(names)} things, as `return {order}` (got {len(result)}).")
    identity = tuple(range(len(names)))
    for test in (_same, lambda a, b: _shape(a) is not None and _shape(a) == _shape(b)):
        if all(test(r, e) for r, e in zip(result, expected)):
            break
        for perm in itertools.permutations(identity):
            if perm != identity and all(test(result[i], expected[j]) for i, j in enumerate(perm)):
                got = ", ".join(names[j] for j in perm)
                raise ExerciseError(f"the values are returned in the wrong order: you return ({got}); "
                                    f"the exercise asks for `return {order}`.")
    return tuple(result)


def expect_distribution(weights, what="weights", axis=-1, atol=1e-5):
    """Every slice along `axis` is a probability distribution: finite, >= 0, sums to 1."""
    w = to_numpy(weights).astype(np.float64)
    expect(np.all(np.isfinite(w)), f"{what} contain NaN or inf: subtract the maximum before `exp`, "
                                   "and guard rows where every position is masked.")
    expect(np.all(w >= -atol), f"{what} have negative entries: weights must come out of a softmax "
                               "(or another normalisation of non-negative numbers).")
    sums = w.sum(axis=axis)
    if not np.allclose(sums, 1.0, atol=max(atol, 1e-4)):
        other = [ax for ax in range(w.ndim) if ax != axis % w.ndim]
        hint = ""
        if other and np.allclose(w.sum(axis=other[-1]), 1.0, atol=1e-4):
            hint = " They sum to 1 over another axis: did you normalise over the wrong axis?"
        elif np.allclose(w.max(axis=axis), 1.0, atol=1e-4):
            hint = " Their largest value is 1: did you divide by the maximum instead of the sum?"
        raise ExerciseError(f"{what} do not sum to 1 over axis {axis} (sums range from "
                            f"{sums.min():.3g} to {sums.max():.3g}).{hint}")


# ---------------------------------------------------------------------------------------------
# Jupyter: a wrong answer shows as its one-line message, not as a traceback into this package
# ---------------------------------------------------------------------------------------------
def _show_one_line(shell, etype, value, tb, tb_offset=None):
    shell._showtraceback(etype, value, [f"\x1b[0;31m{value}\x1b[0m"])


def _install_ipython_handler():
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is not None:
        shell.set_custom_exc((ExerciseError,), _show_one_line)
