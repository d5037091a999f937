"""SAGAN's block (lesson 11, exercise 2) beyond its values: the gradient reaches γ, the four convolutions and x
through o; a γ below 0 is used as it is; SelfAttention2d(12) and (4), where C̄ = max(C // 8, 1) = 1, work (no axis of
size 1 lost, no convolution of 0 channels)."""
import torch

from ...vision import SelfAttention2d
from ..core import ExerciseError, expect, randn
from ..evaluation import Evaluation
from .block_layout import BUILD, block_output, expect_layout, forward_crashes, run
from .crashes import call, raised
from .self_attention_block_mistakes import M


def _grad_x(module, params, x, gamma=0.5):
    """The gradient of sum(module(x)) with respect to x, the weights `params` loaded and γ = `gamma`."""
    module.load_state_dict({**params, "gamma": torch.full(module.state_dict()["gamma"].shape, gamma)})
    x = x.detach().clone().requires_grad_()
    module(x).sum().backward()
    return x.grad


def block_edges(ev: Evaluation, cls, module, params, x):
    """`module`: the learner's SelfAttention2d(16) with `params` loaded and γ = 0.5; x: its input (B, 16, H, W)."""
    x = x.clone().requires_grad_()
    module.zero_grad()
    call(ev, module, x, errors=forward_crashes(x)).sum().backward()
    grads = {key: p.grad for key, p in module.named_parameters()}
    expect(grads["gamma"] is not None and float(grads["gamma"].abs().sum()) > 0, M.gamma_no_grad)
    cut = [key.split(".")[0] for key in params if grads.get(key) is None or not float(grads[key].abs().sum()) > 0]
    expect(not cut, M.o_detached.at(names=", self.".join(cut)))
    ev.expect_close(x.grad, _grad_x(SelfAttention2d(x.shape[1]), params, x), "the gradient with respect to x (γ = 0.5)",
                    atol=1e-4, mistakes=M.variants([M.x_detached], x.shape[1], pick=lambda m: _grad_x(m, params, x)))
    x = x.detach()
    y = run(module, params, x, -0.5)
    ev.expect_close(y, run(SelfAttention2d(x.shape[1]), params, x, -0.5), "y with γ = −0.5", atol=1e-4,
                    mistakes=M.variants([M.gamma_clamped], x.shape[1], pick=lambda m: run(m, params, x, -0.5)))
    for channels in (12, 4):
        _expect_c_bar_one(ev, cls, channels)


def _expect_c_bar_one(ev: Evaluation, cls, channels):
    """SelfAttention2d(channels), C̄ = max(channels // 8, 1) = 1: no convolution of 0 channels, the layout of C̄ = 1, and
    y right at γ = 0.5."""
    c_bar = f"C̄ = max({channels} // 8, 1) = 1"
    try:
        module = call(ev, cls, channels, errors=BUILD)
        empty = [f"self.{key.split('.')[0]}" for key, t in module.state_dict().items()
                 if key.endswith("weight") and 0 in tuple(t.shape)]
        expect(not empty, M.c_bar_zero.at(C=channels, what=", ".join(empty)))
        shapes = expect_layout(module, channels, 1)
    except ExerciseError as error:
        if getattr(error, "key", "") == "c_bar_zero":
            raise
        raise ExerciseError(f"with channels = {channels} ({c_bar}): {error}", key=getattr(error, "key", ""),
                            hint=getattr(error, "hint", "")) from None
    g = ev.rng(121)
    params = {key: randn(g, *shape, scale=0.5) for key, shape in shapes.items()}
    x = randn(g, 2, channels, 3, 3)
    try:
        module.load_state_dict({**params, "gamma": torch.full(module.state_dict()["gamma"].shape, 0.5)})
        with torch.no_grad():
            y = ev.call(module, x)
    except ExerciseError as error:
        small = M.small_c_bar.at(C=channels, what="raises")
        raise ExerciseError(f"{small.says}\n  ({raised(error)})", key=small.key, hint=small.hint) from None
    got = tuple(y.shape) if hasattr(y, "shape") else type(y).__name__
    expect(got == tuple(x.shape), M.small_c_bar.at(C=channels, what=f"returns {got} for x of shape {tuple(x.shape)}"))
    right = x + 0.5 * block_output(params, x)
    try:
        ev.expect_close(y, right, f"y of SelfAttention2d({channels}) ({c_bar}, γ = 0.5)", atol=1e-4)
    except ExerciseError as error:
        if getattr(error, "key", "") != "values":
            raise
        expect(False, M.small_c_bar.at(C=channels, what="gives other values"))
