"""Exercise checks, one module per lesson: `from course_utils.checks import lesson01 as check`.

Each check passes the reference solution, rejects typical mistakes with a message that names the
symptom, and says "not implemented yet" (one line) for a function that still raises
NotImplementedError. The framework is in `core`.
"""
from .core import (ExerciseError, ExerciseNotImplemented, call, exercise, expect, expect_close,
                   expect_distribution, expect_finite, expect_shape, rng, to_numpy)

__all__ = ["ExerciseError", "ExerciseNotImplemented", "call", "exercise", "expect", "expect_close",
           "expect_distribution", "expect_finite", "expect_shape", "rng", "to_numpy"]
