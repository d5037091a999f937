"""What a softmax written by hand gets wrong, in any of lesson 01's exercises: the maximum not subtracted (exp
overflows on large scores: inf / inf is NaN), and an axis fixed where the last one was asked (axis=1 crashes on
the 1-D inputs of softmax, Bahdanau's step and single-query attention)."""
import numpy as np

from ..core import Mistake
from ..evaluation import Evaluation, call_naming
from ..torch_errors import DIM_RANGE, NUMPY_AXIS


def no_max_softmax(x, axis=-1):
    """exp(x) / sum exp(x), the maximum not subtracted first (NaN where exp overflows)."""
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.exp(np.asarray(x, dtype=np.float64))
        return e / e.sum(axis=axis, keepdims=True)


def fixed_axis(shows):
    """The mistake of a softmax taken over a fixed axis (axis=1) that an input of fewer axes does not have."""
    return Mistake("fixed_axis", "your function takes axis {axis} of a {ndim}-D array, which has no axis {axis} "
                   "(axis {axis} is the last axis of a {last}-D array only): take the softmax, its maximum and its "
                   "sum over the last axis, which every array has", hint="axis=-1", shows=shows)


def call(ev: Evaluation, answer, M, *args):
    """`ev.call(answer, *args)`, with a crash on an axis an input does not have named (M.fixed_axis)."""
    def named(match):
        numpy = "axis" in match.groupdict()
        axis = int(match["axis"] if numpy else match["got"])
        ndim = int(match["ndim"]) if numpy else int(match["high"]) + 1
        return M.fixed_axis.at(axis=axis, ndim=ndim, last=axis + 1) if axis >= ndim else None
    return call_naming(ev, [(NUMPY_AXIS, named), (DIM_RANGE, named)], answer, *args)
