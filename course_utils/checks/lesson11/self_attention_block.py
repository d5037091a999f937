"""Lesson 11, exercise 2: SAGAN's block, y = x + γ·o.

    SelfAttention2d(channels): nn.Module with 1×1 convolutions f, g, h (C -> C̄ = max(C // 8, 1)) and v (C̄ -> C), no
    bias, and γ = nn.Parameter(torch.zeros(1)); forward(x (B, C, H, W)) -> y = x + γ·o (B, C, H, W), o from
    self_attention_2d on the four matrices, the weights (B, N, N) kept on self.attn_weights.

The check builds SelfAttention2d(16) and reads its layout (the four convolutions, their shapes, no bias, γ a scalar
parameter at 0), loads random weights and runs it at γ = 0 (y = x) and γ = 0.5, then reads self.attn_weights; then
(block_edges.py) the gradients, γ < 0, and SelfAttention2d(12) and (4), where C̄ = 1.
"""
import torch
import torch.nn as nn

from ...vision import SelfAttention2d
from ..core import exercise, expect, randn, single_threaded
from ..evaluation import Evaluation
from ..expectations import fail
from .block_edges import block_edges
from .block_layout import BUILD, block_output, expect_layout, forward, run
from .crashes import call
from .self_attention_block_mistakes import VALUES, M, wrong


def _from_scratch(channels):
    """The block written out: the attention computed in forward, channels first."""
    class FromScratch(nn.Module):
        def __init__(self, channels):
            super().__init__()
            c = max(channels // 8, 1)
            self.f, self.g = nn.Conv2d(channels, c, 1, bias=False), nn.Conv2d(channels, c, 1, bias=False)
            self.h, self.v = nn.Conv2d(channels, c, 1, bias=False), nn.Conv2d(c, channels, 1, bias=False)
            self.gamma = nn.Parameter(torch.zeros(1))

        def forward(self, x):
            B, C, H, W = x.shape
            k, q, v = self.f(x).flatten(2), self.g(x).flatten(2), self.h(x).flatten(2)     # (B, C̄, N)
            self.attn_weights = torch.softmax(q.transpose(1, 2) @ k / self.f.out_channels ** 0.5, dim=-1)
            return x + self.gamma * self.v((v @ self.attn_weights.transpose(1, 2)).view(B, -1, H, W))
    return FromScratch(channels)


def _gamma_of_shape(shape):
    class Block(SelfAttention2d):
        def __init__(self, channels):
            super().__init__(channels)
            self.gamma = nn.Parameter(torch.zeros(shape))
    return Block


@exercise("SelfAttention2d (γ-residual block)", name="SelfAttention2d", reference=SelfAttention2d, mistakes=M,
          right=[wrong(), _from_scratch, _gamma_of_shape(()), _gamma_of_shape((1, 1, 1, 1))])
@single_threaded
def self_attention_block(ev: Evaluation, cls):
    """cls(channels) -> the block; block(x (B, C, H, W)) -> y (B, C, H, W)."""
    channels = 16
    module = call(ev, cls, channels, errors=BUILD)
    expect(isinstance(module, nn.Module), M.not_module.at(type=type(module).__name__))
    shapes = expect_layout(module, channels, channels // 8)
    g = ev.rng(120)
    params = {key: randn(g, *shape, scale=0.5) for key, shape in shapes.items()}
    x = randn(g, 2, channels, 4, 5)
    o = block_output(params, x)
    for gamma in (0.0, 0.5):
        try:
            module.load_state_dict({**params, "gamma": torch.full(module.state_dict()["gamma"].shape, gamma)})
        except (RuntimeError, KeyError) as error:
            fail(M.state_not_loadable.at(error=str(error).splitlines()[0][:160]))
        y = forward(ev, module, x)
        ev.expect_close(y, x + gamma * o, f"y with γ = {gamma:g}" + (" (at initialisation)" if gamma == 0 else ""),
                        mistakes=M.variants(VALUES, channels, pick=lambda m, gamma=gamma: run(m, params, x, gamma)),
                        atol=1e-4)
    weights = getattr(module, "attn_weights", None)
    expect(weights is not None and tuple(weights.shape) == (2, 20, 20), M.no_attn_weights.at(shape=(2, 20, 20)))
    keep = M.variants([M.attn_weights_transposed], channels, pick=lambda m: (run(m, params, x, 0.5), m.attn_weights)[1])
    ev.expect_close(weights, block_output(params, x, part=1), "self.attn_weights", mistakes=keep, atol=1e-5,
                    hint="Keep the weights self_attention_2d returned in this forward call, as they are.")
    block_edges(ev, cls, module, params, x)
    return 9

