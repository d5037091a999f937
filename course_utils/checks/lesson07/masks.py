"""What lesson 07's three mask exercises share: a mask must be a boolean torch tensor (True = may attend), and
in use it must hide what it says it hides."""
import numpy as np
import torch

from ... import attention as ref
from ..core import Mistake, expect, expect_shape, randn, to_numpy


def not_tensor(shows):
    return Mistake("not_tensor", "{what} is a NumPy array, not a torch tensor: masked_fill and the attention "
                   "functions take a torch boolean tensor",
                   hint="build it with torch (torch.ones(..., dtype=torch.bool), comparisons of torch.arange)",
                   shows=shows)


def not_bool(shows):
    return Mistake("not_bool", "{what} has dtype {dtype}; a mask is boolean (True = may attend)",
                   hint="compare (which gives a bool tensor), or pass dtype=torch.bool", shows=shows)


def expect_bool_tensor(mask, what, shape, M):
    """`mask` is a torch tensor of `shape` (None: any) and dtype bool."""
    expect(not isinstance(mask, np.ndarray), M.not_tensor.at(what=what))
    if shape is not None:
        expect_shape(mask, shape, what)
    dtype = getattr(mask, "dtype", type(mask).__name__)
    expect(str(dtype).endswith("bool"), M.not_bool.at(what=what, dtype=dtype))


def as_float(mask):
    return to_numpy(mask).astype(float)


def outputs_kept(ev, mask, x, changed, kept):
    """Whether the attention outputs at `kept` stay the same when the positions `changed` of x move (True/False)."""
    y = x.clone()
    y[..., changed, :] += 5.0
    a = ref.scaled_dot_product_attention(x, x, x, mask)
    b = ref.scaled_dot_product_attention(y, y, y, mask)
    return torch.allclose(a[..., kept, :], b[..., kept, :], atol=1e-5)


__all__ = ["as_float", "expect_bool_tensor", "not_bool", "not_tensor", "outputs_kept", "randn"]
