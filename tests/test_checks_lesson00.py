"""Lesson 00: what the weighted-sum check's registry cannot say (its reference, right answers and registered
mistakes are run by tests/test_exercises.py): a loop whose code cannot be read, and a crash shown with the
learner's own line."""
import numpy as np
import pytest

from course_utils.checks import ExerciseError, lesson00
from course_utils.checks.loops import python_loop

check = lesson00.weighted_sum


def test_a_loop_whose_code_cannot_be_read_is_not_seen():
    """As under the grader, whose proxy of a learner's function has no code to read: same values, so it passes."""
    space = {"np": np}
    exec("def weighted_sum(weights, vectors):\n"
         "    return sum(w_i * x_i for w_i, x_i in zip(weights, vectors))\n", space)
    assert python_loop(space["weighted_sum"]) is None
    assert check.evaluate(space["weighted_sum"]).passed


def test_learner_crash_is_reported_with_their_line():
    def crashes(w, x):
        return w @ x.reshape(1, -1)  # shapes do not match

    with pytest.raises(ExerciseError, match="your function raised ValueError") as info:
        check(crashes)
    assert "weighted sum" in str(info.value) and "in your code" in str(info.value)
