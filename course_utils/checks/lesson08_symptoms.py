"""The symptoms of lesson 08's typical slips that a planted variant alone does not name: the PyTorch errors of
common slips (a float size from `/`, a view of a transposed tensor, sizes taken from the notebook's variables, keys
and values of different lengths), the right numbers of x put in the wrong places by a split or a merge, and a
positional encoding that matches a known mistake once float32 rounding of its large angles is allowed for."""
import contextlib
import re

import numpy as np

from .core import ExerciseError, ValuesDiffer, to_numpy
from .evaluation import crashes_named

FLOAT_SIZE = ("a size is a float: a division with `/` (d_model / num_heads = 4.0) gives a float, and view, reshape, "
              "zeros or a slice take whole numbers; use integer division, `d_model // num_heads`")
VIEW_TRANSPOSED = ("`.view` cannot merge or split the axes of a transposed tensor (after `transpose` its memory is no "
                   "longer in order: not contiguous): use `.reshape(...)`, or `.contiguous().view(...)`")
KV_LENGTHS = ("the keys and the values have different lengths: compute the keys from `key` (self.w_k(key)) and the "
              "values from `value` (self.w_v(value)); `query` gives only the queries (in self-attention the three are "
              "the same tensor, so the mistake shows only in cross-attention)")
NOTEBOOK = ", not from the notebook's variables (its d_model = 12, num_heads = 3)"
SIZES = {
    "split_heads": f"take B, T, d_model from x itself (`B, T, d_model = x.shape`){NOTEBOOK}, and d_head = "
                   "d_model // num_heads",
    "merge_heads": f"take B, num_heads, T, d_head from x itself (`B, h, T, d_head = x.shape`){NOTEBOOK}, and "
                   "reshape to (B, T, h * d_head)",
    "multi_head_attention": f"take B and T_q from query, T_k from key{NOTEBOOK}, and the heads from "
                            "self.num_heads and self.d_head",
}


def _crash_symptom(text, exercise):
    first = text.partition("\n")[0]
    if re.search(r"but got float|must be int, not float|ints, not float|'float' object cannot be interpreted as an "
                 r"integer|slice indices must be integers", first):
        return FLOAT_SIZE
    if "view size is not compatible with input tensor's size and stride" in first:
        return VIEW_TRANSPOSED
    if "k and v must have the same length" in first:
        return KV_LENGTHS
    shape = re.search(r"shape '(\[[-\d, ]*\])' is invalid for input of size (\d+)", first)
    if shape:
        how = SIZES.get(exercise, f"take every size from the arguments you are given{NOTEBOOK}")
        return f"the shape {shape[1]} of a view/reshape does not fit the tensor, which holds {shape[2]} numbers: {how}"
    return None


naming_crashes = crashes_named(_crash_symptom)   # a check whose learner's crashes of a known slip are named


@contextlib.contextmanager
def rearranged(out, x, what, how):
    """Inside: values that differ (not a listed mistake) while `out` holds exactly the numbers of `x` (per batch
    element), only elsewhere, are named so, before any generic order ("reversed along axis 2") is."""
    try:
        yield
    except ValuesDiffer:
        a, e = to_numpy(out), to_numpy(x)
        if a.size == e.size and a.shape[0] == e.shape[0] and np.array_equal(
                np.sort(a.reshape(a.shape[0], -1), -1), np.sort(e.reshape(e.shape[0], -1), -1)):
            raise ExerciseError(f"{what} holds the numbers of x, but in the wrong places: a view or reshape never "
                                f"moves numbers between axes, only transpose/permute does; {how}") from None
        raise


def pe_symptom(pe, candidates):
    """The known mistake whose encoding `pe` matches, allowing for float32 rounding of large angles (an angle of
    9000 in float32 is off by about 0.001, so its sine too); `candidates`: [(symptom, encoding, angles)]."""
    a = to_numpy(pe).astype(np.float64)
    for symptom, wrong, angles in candidates:
        wrong, angles = to_numpy(wrong), to_numpy(angles)
        if a.shape == wrong.shape and np.all(np.abs(a - wrong) <= 1e-4 + 4e-6 * np.abs(angles)):
            return symptom
    return None
