"""How lesson 13's checks name a mistake by its values (shared by the five exercises).

Each exercise's typical mistakes are its loop with one line wrong (a `kind` of the wrong loop in its mistakes
module); a registry entry's `shows` is that loop with its kind, and a few entries have several forms (the same
mistake written two ways, e.g. the factor flipped with or without the safe maximum). `by_values` runs the forms
on the check's inputs and names the entry whose values the answer has, NaN and inf included (a mistake's NaN
falls where the answer's does); where several entries give these very values it names none of them as THE cause
(the key `ambiguous`, expectations.py).
"""
import functools

import numpy as np

from ..core import to_numpy
from ..expectations import _name_one


def same(a, b, atol=1e-5, rtol=1e-4):
    """Equal values, NaN and inf included."""
    if a is None or b is None or not hasattr(a, "shape") or not hasattr(b, "shape"):
        return False
    a, b = to_numpy(a).astype(np.float64), to_numpy(b).astype(np.float64)
    return a.shape == b.shape and np.allclose(a, b, atol=atol, rtol=rtol, equal_nan=True)


def _not_all_nan(values):
    return hasattr(values, "shape") and not bool(np.isnan(to_numpy(values).astype(np.float64)).all())


def _run(function, *args, **kwargs):
    """A mistake's values, or None where it cannot run on these inputs (a shape that does not fit)."""
    try:
        with np.errstate(all="ignore"):
            return function(*args, **kwargs)
    except (RuntimeError, ValueError, IndexError, TypeError):
        return None


class Forms:
    """The wrong loop `wrong(*inputs, kind=...)` of one exercise and the kinds that show each registry key:
    forms[key] -> [kinds] (the key itself when not listed)."""

    def __init__(self, wrong, **kinds):
        self.wrong, self.kinds = wrong, kinds

    def of(self, key):
        return self.kinds.get(key, [key])

    def shows(self, key):
        """The registry entry's wrong answer: the loop with the key's first kind."""
        return functools.partial(self.wrong, kind=self.of(key)[0])

    def values(self, keys, *inputs, pick=None, **kwargs):
        """[(key, values)] of every form of `keys` on these inputs (through `pick`), lazily."""
        for key in keys:
            for kind in self.of(key):
                got = _run(self.wrong, *inputs, kind=kind, **kwargs)
                if got is not None:
                    yield key, (pick(got) if pick else got)


def by_values(actual, expected, M, candidates, what, atol=1e-5, rtol=1e-4, ruled_out=None):
    """Raise the entry of the registry `M` whose values the answer has, when it is not right: `candidates` yields
    (key, values); values, like actual and expected, may be tuples compared whole. Several entries alike give the
    key `ambiguous`, unless the answer's other results rule all but one out (`ruled_out(key)`: True when the answer
    passed a test that this mistake fails)."""
    pack = actual if isinstance(actual, tuple) else (actual,)
    want = expected if isinstance(expected, tuple) else (expected,)
    if all(same(a, e, atol, rtol) for a, e in zip(pack, want)):
        return
    matching = []
    for key, values in candidates:
        got = values if isinstance(values, tuple) else (values,)
        if got[0] is None or len(got) < len(pack) or not any(_not_all_nan(w) for w in got[:len(pack)]):
            continue                       # (values that are NaN everywhere single out no mistake)
        if all(same(a, w, atol, rtol) for a, w in zip(pack, got)):
            if M[key] not in matching:
                matching.append(M[key])
    if len(matching) > 1 and ruled_out is not None:
        matching = [mistake for mistake in matching if not ruled_out(mistake.key)] or matching
    _name_one(what, matching)
