"""The lessons the grader knows: those with checks, and each lesson's checks in order."""
import pkgutil
import re


def available_lessons():
    """The lessons that have checks ("00", "01", ...), without importing them."""
    from ... import checks

    return sorted(m.name[len("lesson"):] for m in pkgutil.iter_modules(checks.__path__)
                  if re.fullmatch(r"lesson\d\d", m.name))


def module_checks(module):
    """The checks of one lesson's check module, in the lesson's order."""
    from ..core import REGISTRY, lesson_of

    return REGISTRY.get(lesson_of(module.__name__), {}).values()
