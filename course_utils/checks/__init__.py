"""Exercise checks, one module per lesson: `from course_utils.checks import lesson01 as check`.

Each check passes the reference solution, rejects typical mistakes with a message that names the
symptom, and prints a one-line "not implemented yet" notice (and lets the notebook go on) for a
function that still raises NotImplementedError. The framework is in `core`; `exercises()` lists
every check of the course, lesson by lesson.
"""
import importlib
import pkgutil

from .core import (
    REGISTRY,
    ExerciseError,
    Outcome,
    call,
    exercise,
    expect,
    expect_close,
    expect_distribution,
    expect_finite,
    expect_returns,
    expect_shape,
    rng,
)

__all__ = ["ExerciseError", "Outcome", "call", "exercise", "expect", "expect_close", "expect_distribution",
           "expect_finite", "expect_returns", "expect_shape", "rng", "exercises"]


def exercises():
    """{lesson: [check, ...]} for every lesson of the course, in lesson order (imports every check module)."""
    for info in pkgutil.iter_modules(__path__):
        if info.name.startswith("lesson"):
            importlib.import_module(f"{__name__}.{info.name}")
    return {lesson: list(REGISTRY[lesson].values()) for lesson in sorted(REGISTRY) if lesson.isdigit()}
