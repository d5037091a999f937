"""Lesson 11's checks at the edges of their inputs: float64 (new tensors take the input's dtype), images that
require gradients (patchify stays in torch), a dilation longer than the sequence (SNAIL's deepest dense blocks),
and scores large enough to overflow a softmax written without its maximum."""
import torch

from ..snail import causal_attention_block as _ref_causal_block
from ..vision import patchify as _ref_patchify
from ..vision import self_attention_2d as _ref_attention_2d
from .core import ExerciseError, expect, expect_returns, randn
from .evaluation import Evaluation

KEEP_DTYPE = ("with float64 inputs your {what} is {dtype}: keep the input's dtype (no dtype=torch.float32, no "
              "torch.zeros(...) without dtype=; make new tensors with x.new_zeros(...) or torch.zeros_like)")
NO_NUMPY = ("patchify fails on images that require gradients: it leaves torch ({error}). Use torch operations only "
            "(reshape, permute), so that it also runs on a GPU and inside autograd")
LONG_DILATION = ("with a dilation d = {d} ≥ T = {T} (SNAIL's deepest dense blocks on short sequences), x_{{t−d}} is 0 "
                 "at every step and your block {what}: build the delayed sequence so that it works for any d, e.g. "
                 "F.pad(x, (0, 0, d, 0))[:, :T] (x[:, :T − d] counts from the end when d > T)")
OVERFLOW = ("with scores near 150 your {what} holds NaN or inf: exp of a large score overflows. "
            "Subtract each row's maximum before exp (torch.softmax does), or use torch.softmax")


MIXED = (r"expected scalar type|same dtype|Float but found Double|Double but found Float",
         "your function mixes float32 and float64 on float64 inputs: keep the input's dtype (no dtype=torch.float32, "
         "no new tensor without dtype=; x.new_zeros(...), torch.zeros_like)")


def _raised(error):
    return "it raised " + str(error).splitlines()[0].removeprefix("your function raised ")[:160]


def _dtype_of(ev, what, got):
    dtype = getattr(got, "dtype", None)
    expect(dtype in (None, torch.float64), KEEP_DTYPE.format(what=what, dtype=dtype))


def attention_2d_in_float64(ev: Evaluation, answer, call):
    g = ev.rng(119)
    x, W_f, W_g, W_h, W_v = (randn(g, *s).double() for s in ((2, 6, 3, 4), (3, 6), (3, 6), (2, 6), (6, 2)))
    expected = _ref_attention_2d(x, W_f, W_g, W_h, W_v)
    o, weights = expect_returns(call(x, W_f, W_g, W_h, W_v), expected, ("o", "weights"))
    for what, got, want in (("weights", weights, expected[1]), ("o", o, expected[0])):
        _dtype_of(ev, what, got)
        ev.expect_close(got, want, f"{what} in float64")


def patchify_edges(ev: Evaluation, answer, call):
    images = randn(ev.rng(148), 2, 3, 4, 6).double()
    out = call(images, 2)
    _dtype_of(ev, "patches", out)
    ev.expect_close(out, _ref_patchify(images, 2), "the patches in float64", atol=0, rtol=0)
    try:
        ev.call(answer, images.clone().requires_grad_(), 2)
    except ExerciseError as error:
        raise ExerciseError(NO_NUMPY.format(error=_raised(error))) from None


def dense_block_long_dilation(ev: Evaluation, answer, call, reference):
    g = ev.rng(127)
    x, W_f, W_g = randn(g, 2, 5, 3), randn(g, 2, 3, 4), randn(g, 2, 3, 4)
    try:
        out = ev.call(answer, x, W_f, W_g, 8)
    except ExerciseError as error:
        raise ExerciseError(LONG_DILATION.format(d=8, T=5, what="raises") + f"\n  ({_raised(error)})") from None
    ev.expect_close(out, reference(x, W_f, W_g, 8), "the block's output with d = 8, T = 5",
                    hint=LONG_DILATION.format(d=8, T=5, what="gives other values"))


def causal_block_large_scores(ev: Evaluation, answer, call):
    """Scores near 150 everywhere (x = c·u + noise, W_q = W_k): exp(150) overflows float32, while the scores of a
    row differ by a few units only, so that any stable way of writing the softmax stays finite."""
    g = ev.rng(138)
    W, W_v, u = randn(g, 4, 3), randn(g, 4, 2), randn(g, 4)
    c = float((150 * 3 ** 0.5 / (u @ W).square().sum()) ** 0.5)
    x = c * u + randn(g, 2, 6, 4, scale=0.05)
    expected = _ref_causal_block(x, W, W, W_v)
    out, weights = expect_returns(call(x, W, W, W_v), expected, ("out", "weights"))
    for what, got, want in (("weights", weights, expected[1]), ("output", out, expected[0])):
        finite = torch.isfinite(torch.as_tensor(got).detach()).all() if hasattr(got, "shape") else True
        expect(bool(finite), OVERFLOW.format(what=what))
        ev.expect_close(got, want, f"the {what} with scores near 150", atol=1e-3, rtol=1e-3)
