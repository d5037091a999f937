"""Helpers for the check tests (tests/test_checks_*.py): the learner's unfinished exercise, what a learner
sees when a check meets it, and a check rejecting a planted mistake with the right words.

    from tests.checking import named, not_implemented, prints_not_implemented

    with prints_not_implemented():
        check.softmax(not_implemented)          # the one-line "○ ...: not implemented yet" notice
    named(check.softmax, wrong_softmax, "over the wrong axis")
"""
import contextlib
import io
import re

import pytest

from course_utils.checks.core import ExerciseError


def not_implemented(*args, **kwargs):
    """An exercise the learner has not started: the stub a learner notebook holds, for a function or a
    method (`self` is just one more argument)."""
    raise NotImplementedError()


@contextlib.contextmanager
def prints_not_implemented():
    """The block runs a check on a stub: it must print the one-line notice and raise nothing."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        yield out
    text = out.getvalue()
    assert text.startswith("○") and "not implemented yet" in text and text.count("○") == 1, \
        f"expected the one notice, got {text!r}"


BARE = re.compile(r"wrong values \(largest difference|your answer could not be checked|your function raised")


def named(check, answer, words):
    """`check` rejects `answer` with a message matching `words` (a regular expression) that names the mistake
    (not a bare "wrong values", nor the learner's own exception), and stops the notebook with an
    ExerciseError when run as a learner runs it. Under the `any_seed_offset` fixture, with every offset."""
    outcome = check.evaluate(answer)
    assert outcome.status == "wrong", outcome.message
    assert re.search(words, outcome.message), outcome.message
    assert not BARE.search(outcome.message) or BARE.search(words), f"a bare message: {outcome.message}"
    with pytest.raises(ExerciseError):
        check(answer)


def one_message(text):
    """True when `text` is ONE check message: a first line, then only its continuation lines (a long
    message is wrapped between words; its continuation lines start with spaces)."""
    lines = text.rstrip("\n").split("\n")
    return bool(lines[0].strip()) and not lines[0].startswith(" ") and all(
        line.startswith("  ") and line.strip() for line in lines[1:])
