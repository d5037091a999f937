"""Lesson 11's checks at the edges of their inputs: float64 (new tensors take the input's dtype), images that
require gradients (patchify stays in torch), a dilation longer than the sequence (SNAIL's deepest dense blocks),
and scores large enough to overflow a softmax written without its maximum."""
import torch

from ..snail import causal_attention_block as _ref_causal_block
from ..vision import SelfAttention2d
from ..vision import patchify as _ref_patchify
from ..vision import self_attention_2d as _ref_attention_2d
from .core import ExerciseError, expect, expect_returns, randn
from .evaluation import Evaluation
from .lesson11_mistakes import call

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
    leaves = [t.detach().clone().requires_grad_() for t in (x, W_f, W_g, W_h, W_v)]
    o, _ = expect_returns(call(*leaves), expected, ("o", "weights"))
    o.sum().backward()
    cut = [name for name, t in zip(("W_f", "W_g", "W_h", "W_v"), leaves[1:]) if t.grad is None or not t.grad.any()]
    expect(not cut, f"no gradient reaches {', '.join(cut)} through o: the weights (or a part of o) left the graph "
                    "(.detach(), no_grad); keep every step in torch so that training can learn them")


def patchify_edges(ev: Evaluation, answer, call):
    images = randn(ev.rng(148), 2, 3, 4, 6).double()
    out = call(images, 2)
    _dtype_of(ev, "patches", out)
    ev.expect_close(out, _ref_patchify(images, 2), "the patches in float64", atol=0, rtol=0)
    images = images.clone().requires_grad_()
    try:
        out = ev.call(answer, images, 2)
    except ExerciseError as error:
        raise ExerciseError(NO_NUMPY.format(error=_raised(error))) from None
    expect(getattr(out, "requires_grad", False), "no gradient reaches the images: patchify cuts them from the graph "
                                                 "(.detach(), .numpy() or .data); it is reshapes and permutes only")


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


def block_edges(ev: Evaluation, cls, module, params, x, parts):
    """The γ-residual block beyond its values: gradients reach γ, the convolutions and x through o; γ < 0 is used as
    it is; SelfAttention2d(12) and (4) (C̄ = max(C // 8, 1) = 1) work. `parts`: lesson11's layout check, errors and
    output."""
    x = x.clone().requires_grad_()
    module.zero_grad()
    call(ev, module, x, errors=parts["forward"]).sum().backward()
    grads = {key: p.grad for key, p in module.named_parameters()}
    expect(grads["gamma"] is not None and float(grads["gamma"].abs().sum()) > 0,
           "no gradient reaches γ: compute y = x + self.gamma * o with torch operations (no .item(), no .detach()).")
    cut = [key.split(".")[0] for key in params if grads.get(key) is None or not float(grads[key].abs().sum()) > 0]
    expect(not cut, f"no gradient reaches self.{', self.'.join(cut)} (with γ = 0.5): o is cut from the graph, as under "
                    "torch.no_grad() or by .detach(), so the convolutions would never learn. Detach only the copy "
                    "kept on self.attn_weights.")
    reference, x_ref = SelfAttention2d(x.shape[1]), x.detach().clone().requires_grad_()
    reference.load_state_dict({**params, "gamma": torch.full(reference.gamma.shape, 0.5)})
    reference(x_ref).sum().backward()
    ev.expect_close(x.grad, x_ref.grad, "the gradient with respect to x (γ = 0.5)", atol=1e-4, mistakes={
        "the gradient reaches x only through the residual, not through o: the attention read a detached x "
        "(x.detach(), or no_grad); give it x itself": torch.ones_like(x)},
        hint="The gradient reaches x through o too: no x.detach() (or no_grad) before the attention.")
    module.load_state_dict({**params, "gamma": torch.full(module.state_dict()["gamma"].shape, -0.5)})
    with torch.no_grad():
        y, o = call(ev, module, x.detach(), errors=parts["forward"]), parts["output"](params, x.detach())
    ev.expect_close(y, x.detach() - 0.5 * o, "y with γ = −0.5", atol=1e-4, mistakes={
        "y = x at γ = −0.5: γ is clamped at 0 (or passed through a ReLU); a learned γ may turn negative: use it as "
        "it is, x + self.gamma * o.": x.detach()})
    _expect_one_key_channel(ev, cls, parts)


def _expect_one_key_channel(ev, cls, parts):
    """SelfAttention2d(12) and (4), C̄ = max(C // 8, 1) = 1: squeezed kernels lose the C̄ axis, C/8 rounded up makes
    2, channels // 8 without its floor makes 0 channels for C < 8."""
    for channels in (12, 4):
        _expect_c_bar_one(ev, cls, parts, channels)


ZERO = ("SelfAttention2d({C}) has {what} with 0 channels: C̄ = {C} // 8 = 0 for fewer than 8 channels, so the "
        "attention is empty (its softmax gives NaN). C̄ is channels // 8 but at least 1: c_bar = max(channels // 8, 1)")


def _expect_c_bar_one(ev, cls, parts, channels):
    c_bar = f"C̄ = max({channels} // 8, 1) = 1"
    try:
        module = call(ev, cls, channels, errors=parts["build"])
        empty = [f"self.{key.split('.')[0]}" for key, t in module.state_dict().items()
                 if key.endswith("weight") and 0 in tuple(t.shape)]
        expect(not empty, ZERO.format(C=channels, what=", ".join(empty)))
        shapes = parts["layout"](module, channels, 1)
    except ExerciseError as error:
        if str(error).startswith("SelfAttention2d("):
            raise
        raise ExerciseError(f"with channels = {channels} ({c_bar}): {error}") from None
    g = ev.rng(121)
    params = {key: randn(g, *shape, scale=0.5) for key, shape in shapes.items()}
    x = randn(g, 2, channels, 3, 3)
    lost = (f"SelfAttention2d({channels}), where {c_bar}, {{}} though SelfAttention2d(16) is right: "
            "the C̄ axis is lost when it has size 1, as by .squeeze(), which drops every axis of size 1. Take each "
            "kernel's matrix with self.f.weight[:, :, 0, 0] (or .flatten(1)).")
    try:
        module.load_state_dict({**params, "gamma": torch.full(module.state_dict()["gamma"].shape, 0.5)})
        with torch.no_grad():
            y = ev.call(module, x)
    except ExerciseError as error:
        raise ExerciseError(lost.format("raises") + f"\n  ({_raised(error)})") from None
    expect(hasattr(y, "shape") and tuple(y.shape) == tuple(x.shape), lost.format(
        f"returns {tuple(y.shape) if hasattr(y, 'shape') else type(y).__name__} for x of shape {tuple(x.shape)}"))
    ev.expect_close(y, x + 0.5 * parts["output"](params, x), f"y of SelfAttention2d({channels}) ({c_bar}, γ = 0.5)",
                    atol=1e-4, hint=lost.format("gives other values"))
