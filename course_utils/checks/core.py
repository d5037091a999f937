"""The framework every exercise check uses.

A check is a function decorated with `@exercise("title")` that receives the learner's function,
calls it through `call(...)` on seeded random inputs, and asserts with the `expect_*` helpers.
It prints one line with a tick on success; on failure it raises `ExerciseError` naming the
exercise and the symptom; on a function that still raises `NotImplementedError` it raises
`ExerciseNotImplemented`, shown in Jupyter as one line, without a traceback into this package.

    @exercise("softmax")
    def softmax(fn):
        x = random_array(rng(0), 4, 7)
        expect_close(call(fn, x), reference(x), "softmax(x)",
                     mistakes={"softmax over the wrong axis: normalise over the last axis (keys)":
                               reference(x, axis=0)})
        return 1          # number of tests run (optional)
"""
import functools
import os
import traceback

import numpy as np

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class ExerciseError(AssertionError):
    """A learner's answer is wrong; the message says what to look at."""


class ExerciseNotImplemented(NotImplementedError):
    """The learner's function still raises NotImplementedError."""


class _LearnerNotImplemented(Exception):
    pass


def exercise(title):
    """Turn `check(fn, *args)` into an exercise check for the exercise named `title`."""

    def decorate(check):
        @functools.wraps(check)
        def run(fn, *args, **kwargs):
            if not callable(fn):
                raise ExerciseError(f"✘ {title}: expected your function (or module class), "
                                    f"got {type(fn).__name__}: pass the name without calling it.")
            try:
                count = check(fn, *args, **kwargs)
            except _LearnerNotImplemented:
                raise ExerciseNotImplemented(
                    f"✘ {title}: not implemented yet. Replace `raise NotImplementedError()` in the "
                    "exercise cell with your code, run that cell, then run this check again.") from None
            except ExerciseError as error:
                raise ExerciseError(f"✘ {title}: {error}") from error.__cause__
            tests = f" ({count} tests)" if isinstance(count, int) and count > 1 else ""
            print(f"✔ {title}: correct{tests}.")
            return True

        run.title = title
        return run

    return decorate


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


def to_numpy(x):
    """NumPy copy of an array, a torch tensor (any device, with grad) or a number."""
    if hasattr(x, "detach"):
        x = x.detach().float().cpu().numpy() if x.dtype.is_floating_point else x.detach().cpu().numpy()
    return np.asarray(x)


def rng(seed=0):
    """A seeded NumPy random generator: every check uses its own, so checks are repeatable."""
    return np.random.default_rng(seed)


def expect(condition, symptom):
    """Fail with `symptom` unless `condition` holds."""
    if not condition:
        raise ExerciseError(symptom)


def expect_type(x, types, what):
    expect(isinstance(x, types),
           f"{what} should be a {' or '.join(t.__name__ for t in np.atleast_1d(types))}, "
           f"got {type(x).__name__}.")


def expect_shape(x, shape, what):
    """`x` has `shape` (None in `shape` matches any size)."""
    if not hasattr(x, "shape"):
        raise ExerciseError(f"{what} should be an array of shape {tuple(shape)}, got {type(x).__name__}"
                            + (" (did you forget to `return` it?)" if x is None else "."))
    got = tuple(x.shape)
    ok = len(got) == len(shape) and all(e is None or e == g for e, g in zip(shape, got))
    expect(ok, f"{what} has shape {got}, expected {tuple(shape)}.")


def expect_finite(x, what, hint=""):
    a = to_numpy(x)
    expect(np.all(np.isfinite(a)), f"{what} contains NaN or inf.{(' ' + hint) if hint else ''}")


def _close(a, b, atol, rtol):
    return a.shape == b.shape and np.allclose(a, b, atol=atol, rtol=rtol, equal_nan=False)


def expect_close(actual, expected, what, mistakes=None, atol=1e-5, rtol=1e-4, hint=""):
    """`actual` equals `expected`; otherwise name the first known mistake it matches.

    mistakes: {symptom: what that mistake would have produced}. A learner whose output matches
    one of them is told that symptom instead of a bare "values differ".
    """
    if actual is None:
        raise ExerciseError(f"{what} is None: did you forget to `return` the result?")
    a, e = to_numpy(actual), to_numpy(expected)
    if a.shape != e.shape:
        for symptom, wrong in (mistakes or {}).items():
            if _close(a, to_numpy(wrong).astype(a.dtype, copy=False), atol, rtol):
                raise ExerciseError(symptom)
        raise ExerciseError(f"{what} has shape {a.shape}, expected {e.shape}.")
    if not np.all(np.isfinite(a)) and np.all(np.isfinite(e)):
        for symptom, wrong in (mistakes or {}).items():
            if not np.all(np.isfinite(to_numpy(wrong))):
                raise ExerciseError(symptom)
        raise ExerciseError(f"{what} contains NaN or inf where the expected values are finite.")
    if _close(a, e, atol, rtol):
        return
    for symptom, wrong in (mistakes or {}).items():
        if _close(a, to_numpy(wrong), atol, rtol):
            raise ExerciseError(symptom)
    diff = np.abs(a.astype(np.float64) - e.astype(np.float64))
    where = np.unravel_index(np.argmax(diff), diff.shape) if diff.ndim else ()
    raise ExerciseError(f"{what} differs from the expected values (largest difference {diff.max():.3g} "
                        f"at index {tuple(int(i) for i in where)}: got {a[where]:.4g}, expected {e[where]:.4g})."
                        + (f" {hint}" if hint else ""))


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
        raise ExerciseError(f"{what} do not sum to 1 over axis {axis} (sums range from "
                            f"{sums.min():.3g} to {sums.max():.3g}).{hint}")


def _show_one_line(shell, etype, value, tb, tb_offset=None):
    """IPython: show exercise errors as their message only, not a traceback into this package."""
    shell._showtraceback(etype, value, [f"\x1b[0;31m{value}\x1b[0m"])


def _install_ipython_handler():
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is not None:
        shell.set_custom_exc((ExerciseError, ExerciseNotImplemented), _show_one_line)


_install_ipython_handler()
