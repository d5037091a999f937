"""What three of lesson 11's exercises share: on float64 inputs the answer keeps float64 (a new tensor takes the
input's dtype), and it stays in torch so that gradients reach its inputs."""
from ..core import Mistake, expect
from ..torch_errors import DTYPE_MIX


def dtype_changed(shows):
    return Mistake("dtype_changed", "with float64 inputs your {what} comes back as {dtype}: the result keeps the "
                   "input's dtype, whatever it is", hint="no dtype=torch.float32 and no torch.zeros(...) without "
                   "dtype=; make new tensors with x.new_zeros(...) or torch.zeros_like(x)", shows=shows)


def dtype_mixed(shows):
    return Mistake("dtype_mixed", "your function mixes float32 and float64 on float64 inputs: a tensor it makes is "
                   "float32 whatever the input's dtype", hint="no dtype=torch.float32 and no new tensor without "
                   "dtype=; x.new_zeros(...), torch.zeros_like(x)", shows=shows)


def mixed(M):
    """The crash of a float32 tensor meeting float64 inputs, named (for crashes.call)."""
    return DTYPE_MIX, M.dtype_mixed


def expect_dtype(got, what, M):
    """`got` (a result on float64 inputs) is float64 (or not a tensor: the values' check says what it is)."""
    dtype = getattr(got, "dtype", None)
    expect(dtype is None or str(dtype) == "torch.float64", M.dtype_changed.at(what=what, dtype=dtype))
