"""The framework every exercise check uses.

A check is a function `check(ev, answer)` decorated with `@exercise(title, reference=...)`. It receives `ev`, the
`Evaluation` of this one answer (evaluation.py), and the learner's function `answer`; it draws its inputs from
`ev.rng(seed)`, calls the learner through `ev.call(answer, ...)`, and asserts with `ev.expect_close` and the
`expect_*` helpers:

>>> from course_utils.checks.core import exercise, expect_close
>>> @exercise("double", reference=lambda x: 2 * x)
... def double(ev, answer):
...     x = ev.rng(0).normal(size=3)
...     ev.expect_close(ev.call(answer, x), 2 * x, "double(x)", mistakes={"you returned x itself": x})
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

What a learner sees (`double(answer)`, i.e. `Exercise.__call__`):
- right: one line with ✔, and nothing else (the check returns None, so no stray output);
- wrong: `ExerciseError`, shown in Jupyter as one red line naming the exercise and the symptom;
- not started (the function still raises NotImplementedError): one line with ○, and the notebook
  goes on, so that "Run All" always reaches the end of a lesson.
Every outcome is recorded in the learner's progress file (`record.py`). `double.evaluate(answer, seed_offset=0)`
gives the outcome without printing, raising or recording (the grader and the tests use it);
`double.strict(answer)` raises for an unfinished answer too (an autograder's test cell: tools/export_nbgrader.py).
"""
import contextlib
import re
import sys
import textwrap
import warnings
from typing import NamedTuple

from ..tensors import to_numpy  # noqa: F401 - the checks import it from here
from . import record
from .errors import ExerciseError, ValuesDiffer  # noqa: F401 - the checks import them from here
from .evaluation import Evaluation, LearnerNotImplemented
from .expectations import (  # noqa: F401 - the checks import them from here
    expect,
    expect_array,
    expect_close,
    expect_distribution,
    expect_finite,
    expect_returns,
    expect_shape,
)
from .inputs import randn  # noqa: F401 - the checks import it from here
from .mistakes import Mistake, Mistakes  # noqa: F401 - the checks import them from here

PASSED, WRONG, NOT_IMPLEMENTED = record.STATUSES

# lesson ("01") -> {check name: Exercise}, in the order the checks are defined (= the lesson's order)
REGISTRY = {}


class Outcome(NamedTuple):
    lesson: str           # "05"
    exercise: str         # the check's name, e.g. "shift"
    title: str            # what the learner reads, e.g. "circular shift"
    status: str           # "passed" | "wrong" | "not implemented"
    message: str          # the one line the learner sees
    tests: int = 0        # number of tests the check ran (when it passed)
    key: str = ""         # the mistake named (mistakes.py): a key of the exercise's registry or of GENERIC
    hint: str = ""        # its code-level hint, shown only when the learner asks (Exercise.hint)

    @property
    def passed(self):
        return self.status == PASSED


def lesson_of(module_name):
    """'course_utils.checks.lesson05' or 'course_utils.checks.lesson05.shift' -> '05'."""
    found = re.search(r"(?:^|\.)lesson(\d\d)(?:\.|$)", module_name)
    return found[1] if found else module_name


class Exercise:
    """The check of one exercise, as the notebook calls it: `check.softmax(softmax)`.

    title:      what the learner reads ("softmax").
    learner_name: what the learner's function or class is called in the notebook; the grader looks it up there.
    reference:  a correct answer with the exercise's signature; the tests pass it to the check.
    may_change: the names of the arguments the exercise lets the learner's function change in place (any other
                argument changed in place is a wrong answer, whatever the function returns).
    mistakes:   the exercise's registry of known mistakes (mistakes.Mistakes): each names a key, the words the learner
                reads, the hint, and the wrong answer that shows it (tests/test_mistakes.py runs every one).
    right:      right answers written other ways than the reference; each must pass.
    random:     whether the check draws random inputs (`ev.rng`): only those run under several seed offsets in the
                tests (the grader always moves the seeds); tests/test_mistakes.py holds the check to it.
    """

    def __init__(self, check, title, learner_name, reference, may_change, mistakes=None, right=(), random=True):
        self.check, self.title, self.learner_name = check, title, learner_name
        self.reference, self.may_change = reference, tuple(may_change)
        self.mistakes, self.right, self.random = mistakes if mistakes is not None else Mistakes(), tuple(right), random
        self.lesson, self.exercise = lesson_of(check.__module__), check.__name__
        self.__name__, self.__doc__, self.__wrapped__ = check.__name__, check.__doc__, check
        self.last = None            # the last outcome a notebook saw (for `hint()`)

    def __repr__(self):
        return f"<check of lesson {self.lesson}: {self.title}>"

    def __call__(self, answer):
        """Check the learner's `answer` as a notebook does: print ✔ or ○, or raise the ✘ message; record it."""
        outcome = self.last = self.evaluate(answer)
        record.record(self.lesson, self.exercise, self.title, outcome.status, outcome.message)
        if outcome.status == WRONG:
            _install_ipython_handler()
            raise ExerciseError(_sendable(outcome.message + self._hint_offer(outcome)), key=outcome.key)
        print(wrap(_sendable(outcome.message)))

    def _hint_offer(self, outcome):
        return (f"\n  (Stuck? `check.{self.exercise}.hint()` shows a hint in code; the progress table will mark "
                "the exercise as solved with it.)") if outcome.hint else ""

    def hint(self):
        """Print the code-level hint for the last wrong answer this check saw, and note in the progress file that the
        hint was shown (the table marks the exercise ✔ʰ once solved)."""
        last = self.last
        if last is None or last.status != WRONG:
            print(f"{self.title}: no hint yet: hints belong to a wrong answer; run the check on your answer first.")
            return
        if not last.hint:
            print(f"{self.title}: this message has no hint in code: what it names is the whole clue.")
            return
        record.record(self.lesson, self.exercise, self.title, None, last.message)
        print(wrap(f"hint for {self.title}: {last.hint}"))

    def strict(self, answer):
        """Like calling the check, but an unfinished answer fails too (an autograder's test cell)."""
        outcome = self.evaluate(answer)
        if not outcome.passed:
            _install_ipython_handler()
            raise ExerciseError(_sendable(outcome.message), key=outcome.key)
        print(wrap(_sendable(outcome.message)))

    def evaluate(self, answer, seed_offset=0):
        """The Outcome of checking `answer` on inputs drawn from the check's seeds + `seed_offset`, without
        printing, raising or recording it."""
        return self.evaluation(answer, seed_offset)[0]

    def evaluation(self, answer, seed_offset=0):
        """(the Outcome, the Evaluation that made it): `evaluate`, with what the check did (ev.drew: whether it
        drew random inputs)."""
        ev = Evaluation(self.reference, seed_offset)
        if not callable(answer):
            return self._outcome(WRONG, f"✘ {self.title}: expected your function (or class), got "
                                        f"{type(answer).__name__}: pass its name without calling it.",
                                 key="not_callable"), ev
        return self._run(ev, answer), ev

    def _run(self, ev, answer):
        with _own_random_state(), warnings.catch_warnings(record=True) as warned:
            warnings.simplefilter("always")
            try:
                count = self.check(ev, answer)
                problem, key, hint = None, "", ""
            except LearnerNotImplemented:
                return self._outcome(NOT_IMPLEMENTED, f"○ {self.title}: not implemented yet. Replace "
                                                      "`raise NotImplementedError()` in the exercise cell with "
                                                      "your code, run that cell, then run this check again.")
            except ExerciseError as error:
                problem, key, hint = str(error), getattr(error, "key", ""), getattr(error, "hint", "")
            except Exception as error:  # noqa: BLE001 - e.g. an answer of a type the check cannot use
                problem, key, hint = (f"your answer could not be checked ({type(error).__name__}: {error}). Does it "
                                      "return what the exercise asks for?"), "unchecked", ""
        modified = [n for n in dict.fromkeys(ev.modified) if n not in self.may_change]
        if modified:
            names = ", ".join(f"`{n}`" for n in modified)
            # (a bare difference after an in-place edit is its consequence: the edit is the mistake to name)
            also = f" Then: {problem}" if problem and "wrong values (largest difference" not in problem else ""
            return self._outcome(WRONG, f"✘ {self.title}: your function changed its input {names} in place "
                                        "(e.g. `x /= s` or `x.pow_(2)`): compute on a new array instead, e.g. "
                                        f"`x = x / s`; the caller's values must stay as they were.{also}",
                                 key="in_place")
        if problem is not None:
            return self._outcome(WRONG, f"✘ {self.title}: {problem}" + _warning_note(warned), key=key, hint=hint)
        tests = count if isinstance(count, int) and count > 0 else 1
        return self._outcome(PASSED, f"✔ {self.title}: correct" + (f" ({tests} tests)." if tests > 1 else "."),
                             tests)

    def _outcome(self, status, message, tests=0, key="", hint=""):
        return Outcome(self.lesson, self.exercise, self.title, status, message, tests, key, hint)


def exercise(title, name=None, reference=None, may_change=(), mistakes=None, right=(), random=True):
    """Turn `check(ev, answer)` into the `Exercise` named `title`, registered under its lesson (see Exercise)."""

    def decorate(check):
        ex = Exercise(check, title, name or check.__name__, reference, may_change, mistakes, right, random)
        REGISTRY.setdefault(ex.lesson, {})[ex.exercise] = ex
        return ex

    return decorate


def _own_random_state():
    """A check draws its own random numbers: torch's global generator (which a check moves when it
    builds layers) comes back as it was, so the cells after a check give the same numbers whether the
    check passed or not. (NumPy's global generator is never used: checks draw from `ev.rng(seed)`.)"""
    torch = sys.modules.get("torch")          # lessons without torch do not import it for this
    return torch.random.fork_rng(devices=[]) if torch is not None else contextlib.nullcontext()


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


def single_threaded(check):
    """Run a check on one thread: its tensors are tiny, and on a shared machine extra threads only
    wait for each other (a check can get ten times slower)."""

    def run(ev, answer):
        import torch

        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            return check(ev, answer)
        finally:
            torch.set_num_threads(threads)

    run.__name__, run.__doc__, run.__module__ = check.__name__, check.__doc__, check.__module__
    return run


# ---------------------------------------------------------------------------------------------
# Jupyter: a wrong answer shows as its one-line message, not as a traceback into this package
# ---------------------------------------------------------------------------------------------
def _show_one_line(shell, etype, value, tb, tb_offset=None):
    shell._showtraceback(etype, value, [f"\x1b[0;31m{wrap(str(value))}\x1b[0m"])


def _sendable(message):
    """`message` as Jupyter can send it: a lone surrogate (a learner's exception can carry one, e.g.
    `raise ValueError("\\ud800")`) written as its escape, `\\ud800`. Jupyter's messages cannot carry one: the
    kernel would lose the check cell's reply (its error would name it), and the cell would never end."""
    return message.encode("utf-8", "backslashreplace").decode("utf-8")


def _install_ipython_handler():
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is not None:
        shell.set_custom_exc((ExerciseError,), _show_one_line)
