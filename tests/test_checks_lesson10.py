"""Lesson 10's references: a property the checks do not test. (Every check's reference, right answers and registered
mistakes are run by tests/test_exercises.py, from the checks' registries.)"""
import math

from course_utils.training import noam_lr


def test_reference_noam_is_finite_at_step_zero():
    assert math.isfinite(noam_lr(0, 512, 4000))
