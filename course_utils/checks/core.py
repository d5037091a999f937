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
course_utils.checks.errors.ExerciseError: ✘ double: you returned x itself
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
import os
import re
import sys
import textwrap
import traceback
import warnings
from typing import NamedTuple

from ..tensors import to_numpy  # noqa: F401 - the checks import it from here
from . import probes, record
from .errors import ExerciseError, ValuesDiffer  # noqa: F401 - the checks import them from here
from .expectations import (  # noqa: F401 - the checks import them from here
    expect,
    expect_close,
    expect_distribution,
    expect_finite,
    expect_returns,
    expect_shape,
)
from .inputs import changed, given, randn, rng, set_seed_offset  # noqa: F401

PASSED, WRONG, NOT_IMPLEMENTED = record.STATUSES
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# lesson ("01") -> {check name: check}, in the order the checks are defined (= the lesson's order)
REGISTRY = {}


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


def exercise(title, name=None, reference=None, may_change=()):
    """Turn `check(fn, *args)` into the check of the exercise named `title`.

    name:      what the learner's function or class is called in the notebook (default: the
               check's own name); the grader looks it up there.
    reference: a correct answer with the exercise's signature; the tests pass it to the check.
    may_change: the names of the arguments the exercise lets the learner's function change in place
               (any other argument changed in place is a wrong answer, whatever the function returns).
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
            modified = []
            with _own_random_state(), probes.exercise_reference(reference), _learner_inputs(modified), \
                    warnings.catch_warnings(record=True) as warned:
                warnings.simplefilter("always")
                try:
                    count = check(fn, *args, **kwargs)
                    result = None
                except _LearnerNotImplemented:
                    return outcome(NOT_IMPLEMENTED, f"○ {title}: not implemented yet. Replace "
                                                    "`raise NotImplementedError()` in the exercise cell with your "
                                                    "code, run that cell, then run this check again.")
                except ExerciseError as error:
                    result = str(error)
                except Exception as error:  # noqa: BLE001 - e.g. an answer of a type the check cannot use
                    result = (f"your answer could not be checked ({type(error).__name__}: {error}). Does it "
                              "return what the exercise asks for?")
            modified = [n for n in dict.fromkeys(modified) if n not in may_change]
            if modified:
                names = ", ".join(f"`{n}`" for n in modified)
                also = f" Then: {result}" if result else ""
                return outcome(WRONG, f"✘ {title}: your function changed its input {names} in place (e.g. "
                                      f"`x /= s` or `x.pow_(2)`): compute on a new array instead, e.g. "
                                      f"`x = x / s`; the caller's values must stay as they were.{also}")
            if result is not None:
                return outcome(WRONG, f"✘ {title}: {result}" + _warning_note(warned))
            tests = count if isinstance(count, int) and count > 0 else 1
            return outcome(PASSED, f"✔ {title}: correct" + (f" ({tests} tests)." if tests > 1 else "."), tests)

        @functools.wraps(check)
        def run(fn, *args, **kwargs):
            result = evaluate(fn, *args, **kwargs)
            record.record(lesson, check.__name__, title, result.status, result.message)
            if result.status == WRONG:
                _install_ipython_handler()
                raise ExerciseError(result.message)
            print(wrap(result.message))

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


_MODIFIED = [None]   # while a check runs: the list that collects the names of inputs the learner modified


@contextlib.contextmanager
def _learner_inputs(modified):
    saved, _MODIFIED[0] = _MODIFIED[0], modified
    try:
        yield
    finally:
        _MODIFIED[0] = saved


def _warning_note(warned):
    """At most one line about the warnings (e.g. NumPy's overflow) raised while checking a wrong answer."""
    texts = list(dict.fromkeys(str(w.message) for w in warned))
    if not texts:
        return ""
    more = f" and {len(texts) - 1} other warning(s)" if len(texts) > 1 else ""
    return f" (a warning was raised while checking: {texts[0]}{more})"


def wrap(message, width=72):
    """`message` with line breaks between words, so that no frontend (JupyterLab, Colab, a terminal)
    breaks a word in two; continuation lines are indented."""
    lines = []
    for line in message.splitlines() or [""]:
        indent = " " * (len(line) - len(line.lstrip(" "))) + "  "
        lines.append(textwrap.fill(line, width=width, subsequent_indent=indent, break_long_words=False,
                                   break_on_hyphens=False))
    return "\n".join(lines)


def _learner_frames(tb):
    """The traceback lines that belong to the learner's code, not to this package."""
    frames = [f for f in traceback.extract_tb(tb) if not os.path.abspath(f.filename).startswith(_PACKAGE_DIR)]
    return "".join(traceback.format_list(frames[-3:]))


def call(fn, *args, **kwargs):
    """Call the learner's `fn` on copies of the arguments; turn its exceptions into messages a learner can
    act on, and note every argument it changed in place (the check then says so)."""
    args_given, kwargs_given = given(args, kwargs)
    probes.remember_call(fn, args, kwargs)
    try:
        return fn(*args_given, **kwargs_given)
    except NotImplementedError:
        raise _LearnerNotImplemented() from None
    except ExerciseError:
        raise
    except SystemExit as error:
        raise ExerciseError(f"your function called exit() (SystemExit: {error.code}): return the result "
                            "instead of stopping Python.") from None
    except Exception as error:  # the learner's code crashed: show where, in their code
        where = _learner_frames(error.__traceback__) or getattr(error, "learner_where", "")  # (the grader's)
        shapes = ", ".join(describe(a) for a in args)
        raise ExerciseError(
            f"your function raised {type(error).__name__}: {error}\n"
            f"  called with: {shapes}\n" + (f"  in your code:\n{where}" if where else "")) from None
    finally:
        if _MODIFIED[0] is not None:
            _MODIFIED[0].extend(changed(fn, (args, kwargs), (args_given, kwargs_given)))


def describe(x):
    """A short description of an argument: shape and dtype for arrays, repr for the rest."""
    if hasattr(x, "shape") and hasattr(x, "dtype"):
        return f"{type(x).__name__} of shape {tuple(x.shape)} ({x.dtype})"
    text = repr(x)
    return text if len(text) < 40 else text[:37] + "..."


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
# Jupyter: a wrong answer shows as its one-line message, not as a traceback into this package
# ---------------------------------------------------------------------------------------------
def _show_one_line(shell, etype, value, tb, tb_offset=None):
    shell._showtraceback(etype, value, [f"\x1b[0;31m{wrap(str(value))}\x1b[0m"])


def _install_ipython_handler():
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is not None:
        shell.set_custom_exc((ExerciseError,), _show_one_line)
