"""The expectations a check asserts: shapes, values, returned tuples, distributions.

Each raises `ExerciseError` with a message that names the symptom; `expect_close` also names the
mistakes the check lists and those any exercise can make (`probes.py`).
"""
import contextlib
import itertools

import numpy as np

from ..tensors import to_numpy
from .errors import ExerciseError, ValuesDiffer
from .mistakes import Said, said
from .probes import _close, generic_symptom

BARE = "wrong values (largest difference"          # the start of the message no symptom explains


def fail(symptom, key=None, error=ExerciseError, extra=""):
    """Raise `error` naming `symptom` (a registered Mistake, a Said, or words) under its key (or `key`)."""
    s = said(symptom)
    raise error(s.says + extra, key=key if key is not None else s.key, hint=s.hint)


def expect(condition, symptom):
    """Fail with `symptom` (a registered Mistake, `mistake.at(...)`, or words) unless `condition` holds."""
    if not condition:
        fail(symptom)


def expect_array(x, shape, what):
    """`x` is an array (not None, not a list or a number): the first thing `expect_shape` tests, for checks that name
    a wrong shape by their own mistakes."""
    if not hasattr(x, "shape"):
        raise ExerciseError(f"{what} should be an array of shape {tuple(shape)}, got {type(x).__name__}"
                            + (" (did you forget to `return` it?)" if x is None else "."),
                            key="none" if x is None else "not_array")


def expect_shape(x, shape, what):
    """`x` has `shape` (None in `shape` matches any size)."""
    expect_array(x, shape, what)
    got = tuple(x.shape)
    ok = len(got) == len(shape) and all(e is None or e == g for e, g in zip(shape, got))
    if not ok and len(got) == len(shape) >= 2 and got == tuple(shape)[:-2] + tuple(shape)[-2:][::-1]:
        raise ExerciseError(f"{what} has shape {got}, expected {tuple(shape)}: the last two axes are swapped "
                            "(a transposed matrix?).", key="shape.transposed")
    expect(ok, Said("shape", f"{what} has shape {got}, expected {tuple(shape)}.{shape_hint(got, shape)}"))


def shape_hint(got, shape):
    """What a wrong shape most often comes from, as a sentence (with a leading space), or "": one axis of another
    size (off by one, or reduced along the wrong axis), an axis of size 1 dropped or added."""
    got, shape = tuple(got), tuple(shape)
    if len(got) == len(shape):
        wrong = [i for i, (g, e) in enumerate(zip(got, shape)) if e is not None and g != e]
        if len(wrong) == 1:
            return (f" Only axis {wrong[0]} is wrong ({got[wrong[0]]}, expected {shape[wrong[0]]}): a slice or a "
                    "range off by one, or a sum, a mean or a concatenation along another axis than the one meant?")
        return ""
    for i in range(len(shape) + 1):          # got is shape with one axis of size 1 inserted at i
        if len(got) == len(shape) + 1 and got[i] == 1 and _fits(got[:i] + got[i + 1:], shape):
            return (f" It has an extra axis of size 1 (axis {i}): keepdim=True, an unsqueeze or a (n, 1) column "
                    "left in? Remove it (squeeze with that axis named).")
    for i in range(len(got) + 1):            # shape has an axis of size 1 at i that got lost
        if len(shape) == len(got) + 1 and shape[i] == 1 and _fits(got, shape[:i] + shape[i + 1:]):
            return (f" The axis of size 1 at position {i} is missing: squeeze() without an axis drops EVERY axis of "
                    "size 1 (the batch too when B = 1); name the axis, or keep it with keepdim=True.")
    return ""


def _fits(got, shape):
    return len(got) == len(shape) and all(e is None or e == g for e, g in zip(shape, got))


def expect_finite(x, what, hint=""):
    a = to_numpy(x)
    expect(np.all(np.isfinite(a)), Said("not_finite", f"{what} contains NaN or inf.{(' ' + hint) if hint else ''}"))


def expect_close(actual, expected, what, mistakes=None, atol=1e-5, rtol=1e-4, hint="", probe=None):
    """`actual` equals `expected`; otherwise name the first known mistake it matches.

    mistakes: {symptom: what that mistake would have produced}. A learner whose output matches
    one of them is told that symptom instead of a bare "wrong values". Mistakes any exercise can
    make (`probes.py`: a transposed matrix, a wrong sign, a constant factor, a missing normalisation,
    an off-by-one shift, a neighbouring function, a wrong order, a wrong dtype, two arguments' roles
    exchanged, a forgotten term) are recognised without being listed.
    probe: a last resort, `probe(actual, expected, what, atol, rtol)` -> a symptom or None (an evaluation's
    `probe_reference`, which runs the exercise's reference on the learner's inputs, changed).
    """
    if actual is None:
        raise ExerciseError(f"{what} is None: did you forget to `return` the result?", key="none")
    dtype = getattr(actual, "dtype", None)
    a, e = to_numpy(actual), to_numpy(expected)
    if a.shape != e.shape:
        _name_one(what, [symptom for symptom, wrong in (mistakes or {}).items()
                         if _close(a, to_numpy(wrong).astype(a.dtype, copy=False), atol, rtol)])
        fail(generic_symptom(a, e, what, atol, rtol, dtype)
             or Said("shape", f"{what} has shape {a.shape}, expected {e.shape}.{shape_hint(a.shape, e.shape)}"))
    if not np.all(np.isfinite(a)) and np.all(np.isfinite(e)):
        finite = np.isfinite(a)
        candidates = [(symptom, to_numpy(wrong)) for symptom, wrong in (mistakes or {}).items()]
        candidates = [(symptom, w) for symptom, w in candidates if w.shape == a.shape and not np.all(np.isfinite(w))]
        _name_one(what, [symptom for symptom, wrong in candidates   # the mistake whose NaN/inf fall where the
                         if np.array_equal(np.isfinite(wrong), finite)     # answer's do, and its finite values
                         and np.allclose(a[finite], wrong[finite], atol=atol, rtol=rtol)])
        _name_one(what, [symptom for symptom, wrong in candidates if np.array_equal(np.isfinite(wrong), finite)])
        with np.errstate(all="ignore"):
            log_e = np.log(e.astype(np.float64))               # log(0) = -inf where the answer has its -inf
        if np.array_equal(np.isfinite(log_e), finite) and np.allclose(a[finite], log_e[finite], atol=atol, rtol=rtol):
            raise ExerciseError(f"{what} is the log of the expected values: drop the `log` (or use the function "
                                "itself, not its log).", key="neighbour")
        raise ExerciseError(f"{what} contains NaN or inf where the expected values are finite.", key="not_finite")
    if _close(a, e, atol, rtol):
        return
    _name_one(what, [symptom for symptom, wrong in (mistakes or {}).items() if _close(a, to_numpy(wrong), atol, rtol)])
    with np.errstate(all="ignore"):                             # (the probes' arithmetic on inf: not the answer's)
        symptom = generic_symptom(a, e, what, atol, rtol, dtype) or (probe(a, e, what, atol, rtol) if probe else None)
    if symptom:
        fail(symptom, error=ValuesDiffer, extra=f" {hint}" if hint else "")
    with np.errstate(invalid="ignore"):                        # (inf - inf: equal infinities differ by 0)
        diff = np.abs(a.astype(np.float64) - e.astype(np.float64))
    diff = np.where((a == e) | (np.isnan(a) & np.isnan(e)), 0.0, np.nan_to_num(diff, nan=np.inf))
    where = np.unravel_index(np.argmax(diff), diff.shape) if diff.ndim else ()
    raise ValuesDiffer(f"{what}: {BARE} {diff.max():.3g} at index "
                       f"{tuple(int(i) for i in where)}: got {a[where]:.4g}, expected {e[where]:.4g})."
                       + (f" {hint}" if hint else ""), key="values")


def _name_one(what, matching):
    """Name the mistake the answer's values match, if the evidence singles one out. Where several mistakes give these
    very values on this input, no one of them is named as THE cause: the message says what each would be."""
    found = list({said(s).key or said(s).says: s for s in matching}.values())
    if len(found) == 1:
        fail(found[0])
    if found:
        raise ExerciseError(f"{what} is what each of these mistakes gives on this input; it cannot tell which is "
                            "yours: " + "; or ".join(said(s).says.rstrip(".") for s in found) + ".", key="ambiguous")


@contextlib.contextmanager
def explained(*probes):
    """Inside: a bare "wrong values" (a ValuesDiffer no symptom explains) is replaced by the message of the first
    probe that finds one (a probe: () -> a symptom, or None), e.g. a test of a property the answer misses."""
    try:
        yield
    except ValuesDiffer as error:
        if BARE in str(error):
            for probe in probes:
                symptom = probe()
                if symptom:
                    s = said(symptom)
                    raise ExerciseError(s.says, key=s.key, hint=s.hint) from None
        raise


def _same(a, b, atol=1e-5, rtol=1e-4):
    try:
        return _close(to_numpy(a), to_numpy(b), atol, rtol)
    except (TypeError, ValueError):
        return False


def _shape(x):
    return tuple(x.shape) if hasattr(x, "shape") else None


def expect_returns(result, expected, names):
    """`result` is the tuple `names` (e.g. ("c", "alpha")) in that order; returns it.

    Recognises, for any exercise that returns several values: one value instead of several, the
    wrong number of them, and the right values in another order (tried against `expected`, the
    reference's values, by value and then by shape).
    """
    names = tuple(names)
    order = ", ".join(names)
    if result is None:
        raise ExerciseError(f"your function returned nothing: end it with `return {order}`.", key="none")
    if not isinstance(result, (tuple, list)):
        raise ExerciseError(f"return {len(names)} things, as `return {order}` (got one "
                            f"{type(result).__name__}).", key="count")
    if len(result) != len(names):
        raise ExerciseError(f"return {len(names)} things, as `return {order}` (got {len(result)}).", key="count")
    identity = tuple(range(len(names)))
    for test in (_same, lambda a, b: _shape(a) is not None and _shape(a) == _shape(b)):
        if all(test(r, e) for r, e in zip(result, expected)):
            break
        for perm in itertools.permutations(identity):
            if perm != identity and all(test(result[i], expected[j]) for i, j in enumerate(perm)):
                got = ", ".join(names[j] for j in perm)
                raise ExerciseError(f"the values are returned in the wrong order: you return ({got}); "
                                    f"the exercise asks for `return {order}`.", key="order")
    return tuple(result)


def expect_distribution(weights, what="weights", axis=-1, atol=1e-5):
    """Every slice along `axis` is a probability distribution: finite, >= 0, sums to 1."""
    w = to_numpy(weights).astype(np.float64)
    expect(np.all(np.isfinite(w)), Said("distribution.not_finite", f"{what} contain NaN or inf: subtract the "
                                        "maximum before `exp`, and guard rows where every position is masked."))
    expect(np.all(w >= -atol), Said("distribution.negative", f"{what} have negative entries: weights must come out "
                                    "of a softmax (or another normalisation of non-negative numbers)."))
    sums = w.sum(axis=axis)
    if not np.allclose(sums, 1.0, atol=max(atol, 1e-4)):
        other = [ax for ax in range(w.ndim) if ax != axis % w.ndim]
        hint = ""
        if other and np.allclose(w.sum(axis=other[-1]), 1.0, atol=1e-4):
            hint = " They sum to 1 over another axis: did you normalise over the wrong axis?"
        elif np.allclose(w.max(axis=axis), 1.0, atol=1e-4):
            hint = " Their largest value is 1: did you divide by the maximum instead of the sum?"
        raise ExerciseError(f"{what} do not sum to 1 over axis {axis} (sums range from "
                            f"{sums.min():.3g} to {sums.max():.3g}).{hint}", key="distribution.sums")
