"""Mistakes any exercise can make, recognised without the check listing them.

`generic_symptom(a, e)` looks at the answer `a` and the expected `e` alone: a transposed matrix, a wrong
sign, a constant factor, a missing normalisation, a shift by one, a neighbouring function (the log or
the exp of the answer, scores where probabilities were asked, or the reverse), the right values in the
wrong order (reversed, sorted), values off by one (counting from 1), a lower precision or integer dtype.

`reference_symptom(a, e, ..., reference, last_call)` also uses the exercise's reference and the arguments
of the learner's last call (an `evaluation.Call`, which the evaluation passes in): it runs the reference with
two same-shaped arguments swapped (roles or indices exchanged inside a formula) and with one argument set to
zeros or ones (a term of the formula forgotten).
"""
import inspect

import numpy as np

from ..tensors import to_numpy
from .inputs import argument_names
from .mistakes import Said


def _close(a, b, atol, rtol):
    return a.shape == b.shape and np.allclose(a, b, atol=atol, rtol=rtol, equal_nan=False)


def _shape_probes(a, e, what, atol, rtol):
    if a.ndim >= 2 and a.shape[:-2] + a.shape[-2:][::-1] == e.shape and a.shape != e.shape:
        if _close(np.swapaxes(a, -1, -2), e, atol, rtol):
            return Said("transposed", f"{what} is transposed: its last two axes are swapped (shape {a.shape}, "
                        f"expected {e.shape}).")
    return None


def _value_probes(a, e, what, atol, rtol):
    if _close(-a, e, atol, rtol) and np.abs(e).max() > atol:
        return Said("sign", f"{what} has the wrong sign: every value is the negative of the expected one.")
    flat_a, flat_e = a.astype(np.float64).ravel(), e.astype(np.float64).ravel()
    big = np.abs(flat_e) > 1e-6
    if big.sum() >= 2:
        c = float(np.median(flat_a[big] / flat_e[big]))
        if abs(c) > 1e-9 and not np.isclose(c, 1.0, rtol=1e-3) and _close(a, c * e, atol, rtol):
            return Said("factor", f"{what} is off by a constant factor: every value is {c:.4g} times the expected "
                        "one (a missing or extra scale, e.g. a square root, a division by the length or by the size "
                        "of a vector?).")
    if a.ndim >= 1 and a.shape[-1] > 1:
        sums = a.astype(np.float64).sum(-1, keepdims=True)
        if np.all(np.abs(sums) > 1e-9) and _close(a / sums, e, atol, rtol) and not _close(
                sums, np.ones_like(sums), 1e-4, 1e-4):
            return Said("unnormalised", f"{what} is not normalised: it is proportional to the expected values "
                        "along the last axis; divide by the sum over that axis.")
    return None


def _neighbour_probes(a, e, what, atol, rtol):
    """A standard function replaced by its neighbour: log, exp, softmax, log-softmax, square, square root."""
    e64 = e.astype(np.float64)
    with np.errstate(all="ignore"):
        candidates = [
            ("the log of the expected values: drop the `log` (or use the function itself, not its log)",
             np.log(e64) if np.all(e64 > 0) else None),
            ("the exp of the expected values: drop the `exp` (or take the log)", np.exp(e64)),
            ("the square of the expected values (a missing square root?)", e64 ** 2),
            ("the square root of the expected values (a square root too many?)",
             np.sqrt(e64) if np.all(e64 >= 0) else None),
        ]
        if e.ndim >= 1 and e.shape[-1] > 1:
            z = e64 - e64.max(-1, keepdims=True)
            soft = np.exp(z) / np.exp(z).sum(-1, keepdims=True)
            candidates.append(("the softmax of the expected values: return the scores before the softmax",
                               soft))
            if np.all(e64 > 0) and np.allclose(e64.sum(-1), 1.0, atol=1e-4):
                candidates.insert(0, ("the log of the probabilities (a log-softmax) where the probabilities "
                                      "were asked", np.log(e64)))
    for symptom, wrong in candidates:
        if wrong is not None and np.all(np.isfinite(wrong)) and not _close(wrong, e64, atol, rtol) \
                and _close(a, wrong, atol, rtol):
            return Said("neighbour", f"{what} is {symptom}.")
    if e.ndim >= 1 and e.shape[-1] > 1 and np.all(e64 > 0) and np.allclose(e64.sum(-1), 1.0, atol=1e-4):
        with np.errstate(all="ignore"):
            za = a.astype(np.float64) - a.astype(np.float64).max(-1, keepdims=True)
            soft_a = np.exp(za) / np.exp(za).sum(-1, keepdims=True)
        if np.all(np.isfinite(za)) and _close(soft_a, e, atol, rtol):
            return Said("neighbour", f"{what} is the scores before the softmax, not the probabilities: apply the "
                        "softmax.")
    return None


def _order_probes(a, e, what, atol, rtol):
    """The right values, selected or ordered the wrong way; an index off by one."""
    for axis in range(a.ndim):
        n = a.shape[axis]
        if n < 2:
            continue
        if n >= 3:
            for step in (1, -1):
                if _close(np.roll(a, step, axis=axis), e, atol, rtol):
                    return Said("shifted", f"{what} is shifted by one position along axis {axis} (an off-by-one "
                                "index or slice?).")
        tail = [slice(None)] * a.ndim
        head = list(tail)
        tail[axis], head[axis] = slice(1, None), slice(None, -1)
        if n >= 3 and not _close(a, e, atol, rtol):
            for x, y in ((a[tuple(tail)], e[tuple(head)]), (a[tuple(head)], e[tuple(tail)])):
                if _close(x, y, atol, rtol) and not _close(e[tuple(tail)], e[tuple(head)], atol, rtol):
                    return Said("shifted", f"{what} is shifted by one position along axis {axis} (an off-by-one "
                                "index or slice?).")
        if _close(np.flip(a, axis=axis), e, atol, rtol) and not _close(np.flip(e, axis=axis), e, atol, rtol):
            return Said("reversed", f"{what} is in reverse order along axis {axis} (sorted or selected the wrong way "
                        "round?).")
        if _close(np.sort(a, axis=axis), np.sort(e, axis=axis), atol, rtol):
            return Said("permuted", f"{what} holds the right values in the wrong order along axis {axis} (a wrong "
                        "sort order, or positions exchanged?).")
    if e.size and np.all(np.round(e) == e):
        for delta in (1, -1):
            if _close(a, e + delta, atol, rtol):
                return Said("off_by_one", f"{what} is off by one: every value is {delta:+d} from the expected one "
                            f"(counting from {1 if delta > 0 else -1} instead of 0?).")
    return None


def generic_symptom(a, e, what, atol, rtol, dtype=None):
    """Name a mistake any exercise can make, from the answer `a` and the expected `e` alone (or None).

    dtype: the dtype of the learner's result before it was converted for comparison (named when it is an
    integer or a lower-precision type where floats were expected)."""
    symptom = _shape_probes(a, e, what, atol, rtol)
    if symptom or a.shape != e.shape:
        return symptom
    a_kind = getattr(dtype, "is_floating_point", None)
    name = str(dtype).replace("torch.", "") if dtype is not None else ""
    if e.dtype.kind == "f" and (a.dtype.kind in "iub" or a_kind is False):
        return Said("dtype.integer", f"{what} has dtype {name or a.dtype}: expected floating-point values "
                    f"({e.dtype}); an integer result rounds every value (did you start from an integer array, or use "
                    "`//`?).")
    if e.dtype.kind == "f" and name in ("float16", "bfloat16") or a.dtype == np.float16:
        return Said("dtype.low", f"{what} has dtype {name or a.dtype}, which keeps only about 3 significant "
                    "digits: compute in float32 (or the dtype of the inputs).")
    for probe in (_value_probes, _neighbour_probes, _order_probes):
        symptom = probe(a, e, what, atol, rtol)
        if symptom:
            return symptom
    return None


def _leaves(x):
    if isinstance(x, (tuple, list)):
        for item in x:
            yield from _leaves(item)
    elif hasattr(x, "shape"):
        yield to_numpy(x)


def _matches(result, a, e, atol, rtol):
    return any(leaf.shape == a.shape and _close(leaf, a, atol, rtol) and not _close(leaf, e, atol, rtol)
               for leaf in _leaves(result))


def _arrays(args):
    return [i for i, x in enumerate(args) if hasattr(x, "shape") and getattr(x, "ndim", 0) >= 1
            and str(getattr(x, "dtype", "")).replace("torch.", "").startswith(("float", "int"))]


def reference_symptom(a, e, what, atol, rtol, reference, last_call):
    """A mistake found by running the exercise's `reference` on the inputs of the learner's `last_call`
    (an `evaluation.Call`), changed (or None)."""
    if reference is None or inspect.isclass(reference) or last_call is None:
        return None
    args, kwargs = list(last_call.args), last_call.kwargs
    names = argument_names(reference, len(args))
    idx = _arrays(args)

    def run(new_args):
        try:
            with np.errstate(all="ignore"):
                return reference(*new_args, **kwargs)
        except Exception:  # noqa: BLE001 - a probe that does not apply
            return None

    for n, i in enumerate(idx):
        for j in idx[n + 1:]:
            if tuple(args[i].shape) == tuple(args[j].shape):
                swapped = list(args)
                swapped[i], swapped[j] = args[j], args[i]
                if _matches(run(swapped), a, e, atol, rtol):
                    return Said("swapped_args", f"{what} is what the formula gives with `{names[i]}` and "
                                f"`{names[j]}` exchanged: check which of the two goes where.")
    for i in idx:
        for fill, symptom in ((0, "as if `{}` were all zeros: is the term with `{}` missing from your formula?"),
                              (1, "as if `{}` were all ones: did you leave `{}` out of a product?")):
            changed = list(args)
            changed[i] = args[i] * 0 + fill
            if _matches(run(changed), a, e, atol, rtol):
                return Said("missing_term", f"{what} is " + symptom.format(names[i], names[i]))
    return None
