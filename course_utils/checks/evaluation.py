"""One evaluation: a check run on one answer, with everything it knows held in one object.

    ev = Evaluation(reference=ref.softmax, seed_offset=0)
    x = ev.rng(0).normal(size=(4, 6))                 # the check's inputs, from its seeds (+ the grader's offset)
    out = ev.call(answer, x)                              # the learner's function, on copies of the inputs
    ev.expect_close(out, ref.softmax(x), "softmax(x)", mistakes={...})
    ev.modified                                       # the inputs the function changed in place: ["x"]
    out, elements, shape = ev.call_measured(answer, q, k, v)   # the same call, and its largest tensor (measure.py)
    out = call_naming(ev, [(regex, symptom), ...], answer, x)  # the same call, its typical crashes named

A check receives its `Evaluation` as its first argument and passes it along to whatever needs the seeds,
the learner's calls or the reference; nothing is kept anywhere else, so two evaluations (a check run inside
another, or the grader judging several answers) never see each other's inputs, calls or seeds.
"""
import functools
import os
import re
import traceback
from typing import NamedTuple

import numpy as np

from .errors import ExerciseError
from .expectations import expect_close
from .inputs import changed, given
from .mistakes import said
from .probes import reference_symptom

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class LearnerNotImplemented(Exception):
    """The learner's function still raises NotImplementedError: the exercise is not started."""


class Call(NamedTuple):
    answer: object        # the learner's function (or class, or method)
    args: tuple       # the check's arguments, never touched by the learner's code
    kwargs: dict


class Evaluation:
    """The state of one check of one answer: its reference, its seed offset, the calls it made."""

    def __init__(self, reference=None, seed_offset=0):
        self.reference = reference          # a correct answer (for the probes that run it on changed inputs)
        self.seed_offset = int(seed_offset)  # 0 in a notebook; the grader draws one the notebook cannot know
        self.calls = []                     # every Call of the learner's code, in order
        self.modified = []                  # names of the arguments the learner's code changed in place
        self.drew = False                   # whether the check drew random inputs (tests/test_mistakes.py)

    def rng(self, seed=0):
        """A NumPy generator for the check's inputs, seeded by `seed` moved by the evaluation's offset."""
        self.drew = True
        return np.random.default_rng(seed + self.seed_offset)

    @staticmethod
    def fixed(seed=0):
        """A NumPy generator NOT moved by the offset, for what never reaches the learner's code (e.g. the inputs the
        check runs the learner's mask on, through the course's attention)."""
        return np.random.default_rng(seed)

    def call(self, answer, *args, **kwargs):
        """Call the learner's `answer` on copies of the arguments; turn its exceptions into messages a learner can
        act on, and note every argument it changed in place (the check then says so)."""
        return self._call(answer, answer, args, kwargs)

    def call_measured(self, answer, *args, **kwargs):
        """`call`, measured where the learner's code runs: (result, the elements of the largest tensor it
        created, that tensor's shape or None) (`measure.py`). A function of this process runs under the
        measure here; the grader's proxy of a function in the learner's kernel (`__call_measured__`) has the
        kernel measure the call and send the measurement back with the result."""
        measure = getattr(type(answer), "__call_measured__", None)   # (type: a proxy forwards every attribute)
        if measure is None:   # a function of this process (torch is imported only by the checks that measure)
            from .measure import measured as measure
        return self._call(answer, functools.partial(measure, answer), args, kwargs)

    def _call(self, answer, run, args, kwargs):
        """run(*copies of args, **copies of kwargs), the call of `answer` that `call` and `call_measured` make."""
        args_given, kwargs_given = given(args, kwargs)
        self.calls.append(Call(answer, args, kwargs))
        try:
            return run(*args_given, **kwargs_given)
        except NotImplementedError:
            raise LearnerNotImplemented() from None
        except ExerciseError:
            raise
        except SystemExit as error:
            raise ExerciseError(f"your function called exit() (SystemExit: {error.code}): return the result "
                                "instead of stopping Python.", key="exit") from None
        except Exception as error:  # the learner's code crashed: show where, in their code
            where = _learner_frames(error.__traceback__) or getattr(error, "learner_where", "")  # (the grader's)
            shapes = ", ".join(describe(a) for a in args)
            raise ExerciseError(
                f"your function raised {type(error).__name__}: {error}\n"
                f"  called with: {shapes}\n" + (f"  in your code:\n{where}" if where else ""), key="crash") from None
        finally:
            self.modified.extend(changed(answer, (args, kwargs), (args_given, kwargs_given)))

    def expect_close(self, actual, expected, what, mistakes=None, atol=1e-5, rtol=1e-4, hint=""):
        """`expectations.expect_close`, which may also run this evaluation's reference on the inputs of the
        learner's last call, changed (two arguments swapped, one set to zeros or ones), to name a mistake."""
        return expect_close(actual, expected, what, mistakes=mistakes, atol=atol, rtol=rtol, hint=hint,
                            probe=self.probe_reference)

    def probe_reference(self, actual, expected, what, atol, rtol):
        """The mistake found by running the reference on the last call's inputs, changed (or None)."""
        last = self.calls[-1] if self.calls else None
        return reference_symptom(actual, expected, what, atol, rtol, self.reference, last)


def _learner_frames(tb):
    """The traceback lines that belong to the learner's code, not to this package."""
    frames = [f for f in traceback.extract_tb(tb) if not os.path.abspath(f.filename).startswith(_PACKAGE_DIR)]
    return "".join(traceback.format_list(frames[-3:]))


def describe(x):
    """A short description of an argument: shape and dtype for arrays, repr for the rest."""
    if hasattr(x, "shape") and hasattr(x, "dtype"):
        return f"{type(x).__name__} of shape {tuple(x.shape)} ({x.dtype})"
    text = repr(x)
    return text if len(text) < 40 else text[:37] + "..."


RAISED = "your function raised "


def call_naming(ev: Evaluation, errors, answer, *args, **kwargs):
    """`ev.call(answer, ...)`, with the crashes listed in `errors` named: a typical mistake that makes torch (or
    NumPy) raise gets the words of its mistake, torch's first line after them. `errors` is [(regex searched in
    the error and the learner's lines (torch_errors.py holds torch's own texts), a Mistake, a Said or words, or a
    function of the match giving one or None)]."""
    try:
        return ev.call(answer, *args, **kwargs)
    except ExerciseError as error:
        text = str(error)
        if not text.startswith(RAISED):
            raise
        for pattern, message in errors:
            match = re.search(pattern, text)
            message = message(match) if match and callable(message) else message
            if match and message:
                raised = text[len(RAISED):].partition("\n")[0]
                s = said(message)
                raise ExerciseError(f"{s.says} (torch said: {raised[:200]})", key=s.key, hint=s.hint) from None
        raise


def renamed(error, symptom):
    """The learner's crash `error` told as the `symptom` of its slip, PyTorch's line and the learner's lines below."""
    raised, _, rest = str(error)[len(RAISED):].partition("\n")
    where = "\n".join(line for line in rest.splitlines() if "called with" not in line)
    s = said(symptom)
    return ExerciseError(f"{s.says}\n  (PyTorch: {raised[:200]})" + (f"\n{where}" if where.strip() else ""),
                         key=s.key, hint=s.hint)


def crashes_named(symptom_of):
    """A decorator: `check(ev, answer)` whose learner's crashes get the symptom `symptom_of(error text, the check's
    name)` gives (or stay as they are where it gives None)."""
    def wrap(check):
        @functools.wraps(check)
        def run(ev, answer):
            try:
                return check(ev, answer)
            except ExerciseError as error:
                symptom = symptom_of(str(error), check.__name__) if str(error).startswith(RAISED) else None
                if symptom:
                    raise renamed(error, symptom) from None
                raise
        return run
    return wrap
