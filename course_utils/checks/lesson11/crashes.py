"""Lesson 11's crashes, named: a slip that makes torch raise before the check sees a value is told as the slip's
mistake (a registry entry), torch's first line and the learner's lines below it.

    out = call(ev, answer, x, W, errors=[(torch_errors.VIEW, M.view_after_transpose), ...], transposed=M.k_T_3d)

`errors` pairs a pattern (torch_errors.py holds torch's own texts) with a Mistake, a `Mistake.at(...)`, or a function
of the match giving one (or None where the match does not single the slip out)."""
import re
import warnings

from ..core import ExerciseError
from ..evaluation import RAISED, renamed


def _reversed_3d(warned):
    """torch warned that `.T` met a tensor of more than two axes (it warns once per process)."""
    return any("x.T" in str(w.message) and "dimension other than 2" in str(w.message) for w in warned)


def call(ev, answer, *args, errors=(), transposed=None):
    """`ev.call(answer, *args)`, the learner's crash named: `.T` on a 3-D tensor (`transposed`, when torch warned of
    it), else the first of `errors` whose pattern torch's first line matches; other crashes stay as they are."""
    with warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        try:
            return ev.call(answer, *args)
        except ExerciseError as error:
            text = str(error)
            if not text.startswith(RAISED):
                raise
            if transposed is not None and _reversed_3d(warned):
                raise renamed(error, transposed) from None
            raised = text[len(RAISED):].partition("\n")[0]
            for pattern, named in errors:
                match = re.search(pattern, raised)
                symptom = (named(match) if callable(named) else named) if match else None
                if symptom:
                    raise renamed(error, symptom) from None
            raise


def raised(error):
    """The first line of the learner's crash `error`, as "it raised ..." (for a message that names its cause)."""
    return "it raised " + str(error).splitlines()[0].removeprefix(RAISED)[:160]
