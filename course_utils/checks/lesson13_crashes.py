"""The crashes of lesson 13's typical slips, named: `naming_crashes` wraps a check so that the PyTorch errors of
common slips (a `max` that returns (values, indices), Python's max of tensors) say what to do; `forward_failure`
names the failures of a tiled forward pass (a mask sliced before it was broadcast, running statistics the size of a
full block, a number per query without its last axis, a tile that meets the whole sequence). The PyTorch message is
kept below each symptom."""
import contextlib
import re

from .core import ExerciseError
from .evaluation import RAISED, crashes_named, renamed
from .lesson13_symptoms import TILED

CRASHES = [
    (r"must be Tensor, not torch\.return_types\.(max|min)",
     "`x.max(dim=...)` returns two things, (values, indices), not a tensor: take x.amax(dim=-1) (or "
     "x.max(dim=-1).values)"),
    (r"Boolean value of Tensor with more than one value is ambiguous",
     "Python's max() (or an `if`) compared whole tensors of several values: take the maximum element by element "
     "with torch.maximum(m, x.amax(dim=-1)), and choose per row with torch.where"),
    (r"only one element tensors can be converted to Python scalars",
     "a math function (math.exp, math.log, float()) got a tensor of several values: it takes ONE number; use "
     "torch.exp, torch.log, which work element by element"),
    (r"maximum\(\): argument 'input' \(position 1\) must be Tensor, not float",
     "m (or l) starts as a Python float: torch.maximum takes tensors; start with one per row, "
     "torch.full(block.shape[:-1], float('-inf')) and torch.zeros(block.shape[:-1])"),
    (r"output with shape \[\] doesn't match the broadcast shape",
     "an in-place update (l *= ..., m += ...) of a 0-d start: one number cannot hold a value per row; start m and l "
     "with one per row (torch.full(block.shape[:-1], float('-inf')), torch.zeros(...)) or write l = l * ..."),
    (r"output with shape \[[\d, ]+\] doesn't match the broadcast shape",
     "an in-place update (+=, *=) of a tile got a larger shape than the tile: a number per query (D_i, L_i, m, l or "
     "a rescale factor) has an extra axis, or lines up with the wrong one. Keep each as (..., T_q), e.g. D = "
     "(grad_out * out).sum(dim=-1) without keepdim, slice it [..., i0:i1] and give it one axis, [..., None], "
     "against a tile"),
]
NO_AXIS = ("a number per query (the rescale factor e^(m_old − m_new), or l) multiplies or divides acc (..., block_q, "
           "d_v) without a last axis: give it one, rescale[..., None]")
SLICES = ("a tile of your loop meets the whole sequence (the sizes {a} and {b} do not fit): slice q to the block of "
          "queries, q[..., i0:i1, :], and k and v to the block of keys, [..., j0:j1, :]")
STATE_SIZE = ("m, l and acc are made once, for a full block of {bq} queries: make them afresh for EACH block of "
              "queries, with i1 − i0 rows (the last block is shorter when block_q does not divide T_q)")

WIDE_OUT = ("out (or acc) is made {d_k} wide, as q (torch.zeros_like(q)?): the output has the values' width d_v = "
            "{d_v}; make it q.new_zeros(*q.shape[:-1], v.shape[-1])")
GRAD_WIDTH = ("a gradient has another input's width (d_k = {d_k}, d_v = {d_v}): make each gradient like its own "
              "input, dq = torch.zeros_like(q), dk = torch.zeros_like(k), dv = torch.zeros_like(v)")
STACKED = ("a merged statistic has 2 values, one per PART, where it needs one per row: after torch.stack([m1, m2]) "
           "(2, R) the parts are axis 0, so reduce over dim=0 (or take torch.maximum(m1, m2) element by element)")


def _listed(text, _check):
    """The symptom of the first of CRASHES whose pattern PyTorch's line matches, or None."""
    return next((symptom for pattern, symptom in CRASHES if re.search(pattern, text.partition("\n")[0])), None)


naming_crashes = crashes_named(_listed)   # a check whose learner crashes listed in CRASHES are named


@contextlib.contextmanager
def forward_failure(mask, block_q, T_q, d_v, block_k=None):
    """The tiled forward pass failing on a mask (sliced before it was broadcast, or the wrong way round), or
    without one: with running statistics the size of a full block of queries, or a number per query without its
    last axis, is named."""
    try:
        yield
    except ExerciseError as error:
        text = str(error)
        if not text.startswith(RAISED):
            raise
        wide = re.search(r"expanded size of the tensor \((\d+)\) must match the existing size \((\d+)\)", text)
        if wide and int(wide[2]) == d_v != int(wide[1]):
            raise renamed(error, WIDE_OUT.format(d_k=wide[1], d_v=d_v)) from None
        if mask is not None:
            raise renamed(error, TILED["mask_not_broadcast"].format(shape=tuple(mask.shape))) from None
        sizes = re.search(r"size of tensor a \((\d+)\) must match the size of tensor b \((\d+)\)", text)
        sizes = {int(sizes[1]), int(sizes[2])} if sizes else set()
        if T_q % block_q and sizes == {block_q, T_q % block_q}:
            raise renamed(error, STATE_SIZE.format(bq=block_q)) from None
        if len(sizes) == 2 and d_v in sizes and d_v != block_q and sizes & {block_q, T_q % block_q}:
            raise renamed(error, NO_AXIS) from None
        numbers = [int(n) for n in re.findall(r"\d+", text.partition("\n")[0])]
        if T_q in numbers and {block_q, block_k} & set(numbers) and T_q not in (block_q, block_k):
            raise renamed(error, SLICES.format(a=min(block_q, block_k or block_q), b=T_q)) from None
        if "Expected size for first two dimensions of batch2 tensor" in text:
            raise renamed(error, TILED["k_query_range"] + " (the scores' tile and the values' disagree on the keys)") \
                from None
        raise


@contextlib.contextmanager
def merge_failure():
    """merge_softmax_stats failing because a statistic of the two parts, stacked, was reduced over the rows."""
    try:
        yield
    except ExerciseError as error:
        sizes = re.search(r"size of tensor a \((\d+)\) must match the size of tensor b \((\d+)\)", str(error))
        if str(error).startswith(RAISED) and sizes and 2 in (int(sizes[1]), int(sizes[2])):
            raise renamed(error, STACKED) from None
        raise


@contextlib.contextmanager
def backward_failure(d_k, d_v):
    """The backward pass failing because a gradient was made with another input's shape (dv like q)."""
    try:
        yield
    except ExerciseError as error:
        sizes = re.search(r"size of tensor a \((\d+)\) must match the size of tensor b \((\d+)\)", str(error))
        if str(error).startswith(RAISED) and sizes and {int(sizes[1]), int(sizes[2])} == {d_k, d_v}:
            raise renamed(error, GRAD_WIDTH.format(d_k=d_k, d_v=d_v)) from None
        raise
