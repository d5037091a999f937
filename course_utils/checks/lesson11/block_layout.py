"""How lesson 11's check reads and runs SAGAN's block (exercise 2): its layout (four 1×1 convolutions of the
exercise's shapes, no bias, γ a scalar parameter at 0), the crashes of __init__ and forward named, and the block run
with given weights."""
import torch

from ...vision import self_attention_2d as attention
from ..core import expect, expect_shape
from ..torch_errors import BROADCAST, FLOAT_SIZE, GRAD_DTYPE, MODULE_INIT
from .crashes import call
from .self_attention_block_mistakes import M

BUILD = [(MODULE_INIT, M.no_super_init), (FLOAT_SIZE, M.c_bar_float), (GRAD_DTYPE, M.gamma_int)]


def forward_crashes(x):
    """What a slip in forward raises on x (B, C, H, W), named (for crashes.call)."""
    H, W = x.shape[-2:]
    return [
        (r"should have shape \(C_out, \d+\).*got shape \(\d+, \d+, 1, 1\)", M.kernels_not_matrices),
        (r"W(_v)? should have shape", M.matrices_misplaced),
        (BROADCAST, lambda m: M.unpacked_wrong_order if m["dim"] == "3" and {int(m["a"]), int(m["b"])} == {W, H * W}
         else None),                                   # x's W columns against the weights' N = H·W keys
    ]


def block_output(params, x, part=0):
    """o (part 1: the weights) of the block whose state_dict is `params` (f, g, h, v weights (out, in, 1, 1))."""
    return attention(x, *(params[f"{name}.weight"][:, :, 0, 0] for name in "fghv"))[part]


def run(module, params, x, gamma):
    """y of `module` with the weights `params` loaded and γ = `gamma`, without gradients."""
    module.load_state_dict({**params, "gamma": torch.full(module.state_dict()["gamma"].shape, gamma)})
    with torch.no_grad():
        return module(x)


def expect_layout(module, channels, C_bar):
    """The block's parameters are the exercise's: f, g, h (C -> C̄), v (C̄ -> C), no bias, γ a scalar at 0; returns
    {key: shape} of the four weights."""
    state, parameters = module.state_dict(), dict(module.named_parameters())
    down, up = (C_bar, channels, 1, 1), (channels, C_bar, 1, 1)
    expected = {"f.weight": (down, "keys"), "g.weight": (down, "queries"), "h.weight": (down, "values"),
                "v.weight": (up, "the output map")}
    expect("gamma" in state, M.gamma_missing)
    expect("gamma" in parameters, M.gamma_not_parameter)
    for key, (shape, what) in expected.items():
        name = key.split(".")[0]
        fields = dict(name=name, what=what, cin=shape[1], cout=shape[0])
        expect(key in state, (M.no_output_map if name == "v" else M.conv_missing).at(**fields))
        got = tuple(state[key].shape)
        expect(got == shape or name != "h" or got[:2] != (channels, channels),
               M.values_full_width.at(C=channels, C_bar=C_bar, cin=channels, cout=C_bar))
        expect(got == shape, M.conv_shape.at(got=got, shape=shape, **fields))
        expect(f"{name}.bias" not in state, M.conv_bias.at(name=name))
    shared = [name for name in "ghv" if any(state[f"{name}.weight"].data_ptr() == state[f"{other}.weight"].data_ptr()
                                            for other in "fghv"[:"fghv".index(name)])]
    expect(not shared, M.conv_shared.at(name=shared[0] if shared else ""))
    gamma = state["gamma"]
    expect(gamma.numel() == 1, M.gamma_not_scalar.at(shape=tuple(gamma.shape)))
    expect(bool(torch.all(gamma == 0)), M.gamma_not_zero.at(value=f"{gamma.flatten()[0].item():.3g}"))
    return {key: shape for key, (shape, _) in expected.items()}


def forward(ev, module, x):
    """y = module(x), one tensor of x's shape (crashes named)."""
    with torch.no_grad():
        y = call(ev, module, x, errors=forward_crashes(x))
    expect(not isinstance(y, (tuple, list)), M.forward_returns_tuple.at(type=type(y).__name__))
    expect_shape(y, tuple(x.shape), "y")
    return y
