"""Exercise checks, one module per lesson: `from course_utils.checks import lesson01 as check`.

Each check passes the reference solution, rejects typical mistakes with a message that names the
symptom, and prints a one-line "not implemented yet" notice (and lets the notebook go on) for a
function that still raises NotImplementedError. The framework is in `core` (the `Exercise` a notebook
calls) and `evaluation` (the `Evaluation` of one answer, which every check receives); `exercises()`
lists every check of the course, lesson by lesson.
"""
import importlib
import pkgutil

from .core import (
    REGISTRY,
    Exercise,
    ExerciseError,
    Outcome,
    exercise,
    expect,
    expect_close,
    expect_distribution,
    expect_finite,
    expect_returns,
    expect_shape,
)
from .evaluation import Evaluation

__all__ = ["Evaluation", "Exercise", "ExerciseError", "Outcome", "exercise", "expect", "expect_close",
           "expect_distribution", "expect_finite", "expect_returns", "expect_shape", "exercises"]


def exercises():
    """{lesson: [check, ...]} for every lesson of the course, in lesson order (imports every check module)."""
    for info in pkgutil.iter_modules(__path__):
        if info.name.startswith("lesson"):
            importlib.import_module(f"{__name__}.{info.name}")
    return {lesson: list(REGISTRY[lesson].values()) for lesson in sorted(REGISTRY) if lesson.isdigit()}
