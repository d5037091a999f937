"""The known mistakes of lesson 11's exercise 2, `SelfAttention2d` (SAGAN's block y = x + γ·o), each with the wrong
block that shows it.

`wrong(...)` is the block written with one thing changed (every default is the right choice); each registry entry's
`shows` is one such class, and the check computes a mistake's output by building and running it (M.variants)."""
import torch
import torch.nn as nn

from ...vision import self_attention_2d
from ..core import Mistake, Mistakes

_CONV = "nn.Conv2d({cin}, {cout}, kernel_size=1, bias=False)"


def _matrix(conv):
    return conv.weight[:, :, 0, 0]                                     # (C_out, C_in, 1, 1) -> (C_out, C_in)


def wrong(c_bar=lambda C: max(C // 8, 1), values=None, output=True, bias=False, init_super=True, gamma="parameter",
          gamma_init=0.0, gamma_shape=(1,), gamma_dtype=torch.float32, shared=False, rename=None, extra=False,
          matrix=_matrix, order="fghv", swap=False, queries_from_f=False, unpacked="o, weights", x_in=None,
          no_grad=False, gamma_of=None, residual=None, keep=None, returns="y"):
    """SAGAN's block with one thing written wrong.

    In __init__: c_bar(C), values(C, C̄) (the values' channels), output (self.v made), bias, init_super
    (super().__init__() called), gamma ("parameter", "buffer", "tensor" or None) of gamma_shape, gamma_dtype, starting
    at gamma_init; shared (self.g is self.f), rename ({name: attribute}), extra (one more parameter).
    In forward: matrix(conv) (a conv's matrix), order (of the matrices passed), swap (f and g), queries_from_f,
    unpacked (the order the two results are read in), x_in(x) (what the attention reads), no_grad, gamma_of(γ) (the γ
    used), residual(x, γ, o), keep(weights) (what self.attn_weights holds), returns ("y" or "tuple")."""
    class Block(nn.Module):
        def __init__(self, channels):
            if init_super:
                super().__init__()
            c = c_bar(channels)
            c_v = c if values is None else values(channels, c)
            convs = {"f": nn.Conv2d(channels, c, 1, bias=bias), "g": nn.Conv2d(channels, c, 1, bias=bias),
                     "h": nn.Conv2d(channels, c_v, 1, bias=bias), "v": nn.Conv2d(c_v, channels, 1, bias=bias)}
            if shared:
                convs["g"] = convs["f"]
            if not output:
                del convs["v"]
            for name, conv in convs.items():
                setattr(self, (rename or {}).get(name, name), conv)
            initial = torch.full(gamma_shape, gamma_init, dtype=gamma_dtype)
            if gamma == "parameter":
                self.gamma = nn.Parameter(initial)
            elif gamma == "buffer":
                self.register_buffer("gamma", initial)
            elif gamma == "tensor":
                self.gamma = initial
            if extra:
                self.scale = nn.Parameter(torch.ones(1))
            self.attn_weights = None

        def forward(self, x):
            W = {name: matrix(getattr(self, name)) for name in "fghv"}
            W_f, W_g = (W["g"], W["f"]) if swap else (W["f"], W["f"] if queries_from_f else W["g"])
            matrices = {"fghv": (W_f, W_g, W["h"], W["v"]), "fgvh": (W_f, W_g, W["v"], W["h"])}[order]
            with torch.no_grad() if no_grad else torch.enable_grad():
                result = self_attention_2d(x if x_in is None else x_in(x), *matrices)
            o, weights = result if unpacked == "o, weights" else result[::-1]
            self.attn_weights = weights.detach() if keep is None else keep(weights)
            gamma_ = self.gamma if gamma_of is None else gamma_of(self.gamma)
            y = x + gamma_ * o if residual is None else residual(x, gamma_, o)
            return (y, weights) if returns == "tuple" else y
    return Block


class _NotAModule:
    """The block written as a plain class: no parameters for an optimiser, no train/eval."""

    def __init__(self, channels):
        self.block = wrong()(channels)

    def __call__(self, x):
        return self.block(x)


_MATRICES = "self_attention_2d(x, W_f, W_g, W_h, W_v), each self.X.weight[:, :, 0, 0] as it is (no .T)"
_RESIDUAL = "return x + self.gamma * o"
M = Mistakes(
    # --- __init__ ---
    Mistake("no_super_init", "the module is set up before nn.Module's own set-up: nn.Module's __init__ runs first, "
            "then the block creates its convolutions", hint="super().__init__() as the first line of __init__",
            shows=wrong(init_super=False)),
    Mistake("c_bar_float", "C̄ = C / 8 is a float (16 / 8 = 2.0): a number of channels is an int",
            hint="c_bar = max(channels // 8, 1)", shows=wrong(c_bar=lambda C: C / 8)),
    Mistake("gamma_int", "γ holds an integer: a learned parameter is a float tensor",
            hint="self.gamma = nn.Parameter(torch.zeros(1)) (torch.tensor(0) holds an integer)",
            shows=wrong(gamma_dtype=torch.int64)),
    Mistake("not_module", "SelfAttention2d(16) is a {type}, not an nn.Module: the block is a module, so that its "
            "parameters are learned and it moves with its network", hint="class SelfAttention2d(nn.Module), with "
            "super().__init__() first in __init__", shows=_NotAModule),
    Mistake("gamma_missing", "γ is not among the module's parameters (a plain tensor attribute is not one): the "
            "optimiser would never learn it", hint="self.gamma = nn.Parameter(torch.zeros(1))",
            shows=wrong(gamma="tensor")),
    Mistake("gamma_not_parameter", "γ is a buffer, not a parameter: the optimiser would never change it",
            hint="self.gamma = nn.Parameter(torch.zeros(1))", shows=wrong(gamma="buffer")),
    Mistake("conv_missing", "the module has no 1×1 convolution self.{name} ({what}): the block holds four, self.f "
            "(keys), self.g (queries), self.h (values) and self.v (the output map), under those names",
            hint="self.{name} = " + _CONV, shows=wrong(rename={"f": "key"})),
    Mistake("no_output_map", "the module has no 1×1 convolution self.v: SAGAN's final form (ICML 2019) has a fourth "
            "one, v, that maps the read-out of C̄ channels back to C", hint="self.v = " + _CONV,
            shows=wrong(output=False)),
    Mistake("values_full_width", "self.h maps {C} channels to {C}: in SAGAN's final form the values have C̄ = C/8 = "
            "{C_bar} channels, and self.v maps them back to C", hint="self.h = " + _CONV,
            shows=wrong(values=lambda C, c: C)),
    Mistake("conv_shape", "self.{name} ({what}) has a weight of shape {got}, expected {shape}: it maps {cin} "
            "channels to {cout}", hint="self.{name} = " + _CONV, shows=wrong(values=lambda C, c: 4)),
    Mistake("conv_bias", "self.{name} has a bias: SAGAN's 1×1 convolutions have none", hint="bias=False",
            shows=wrong(bias=True)),
    Mistake("conv_shared", "self.{name} shares its weights with another convolution (one convolution under two "
            "names): keys, queries and values each need a 1×1 convolution of their own",
            hint="one nn.Conv2d(...) per name, not self.f = self.g = nn.Conv2d(...)", shows=wrong(shared=True)),
    Mistake("gamma_not_scalar", "γ is one learned scalar, not a parameter of shape {shape}",
            hint="self.gamma = nn.Parameter(torch.zeros(1))", shows=wrong(gamma_shape=(16,))),
    Mistake("gamma_not_zero", "γ starts at {value}: it starts at 0, so that the block begins as the identity, y = x, "
            "and the untrained attention adds no noise", hint="self.gamma = nn.Parameter(torch.zeros(1))",
            shows=wrong(gamma_init=1.0)),
    Mistake("state_not_loadable", "the module's parameters could not be set ({error}): the block learns self.f, "
            "self.g, self.h, self.v and self.gamma, named as the exercise names them, and nothing else",
            shows=wrong(extra=True)),
    # --- forward: crashes and what it returns ---
    Mistake("kernels_not_matrices", "self_attention_2d takes the weight MATRICES, (C_out, C_in): a 1×1 convolution's "
            "weight is a kernel, (C_out, C_in, 1, 1)", hint="self.f.weight[:, :, 0, 0] (the same for g, h and v)",
            shows=wrong(matrix=lambda conv: conv.weight)),
    Mistake("matrices_misplaced", "self_attention_2d got a matrix that does not fit where it was passed: it takes x, "
            "then the matrices of self.f (keys), self.g (queries), self.h (values) and self.v (the output map), in "
            "that order, each as it is", hint=_MATRICES, shows=wrong(order="fgvh")),
    Mistake("unpacked_wrong_order", "y adds x, (B, C, H, W), to a tensor of another shape: self_attention_2d returns o "
            "then the weights; o has x's shape, the weights are (B, N, N)", hint="o, weights = self_attention_2d(...)",
            shows=wrong(unpacked="weights, o")),
    Mistake("forward_returns_tuple", "forward returns a {type}: it returns y = x + γ·o alone, one tensor (the weights "
            "go on self.attn_weights)", hint=_RESIDUAL, shows=wrong(returns="tuple")),
    # --- forward: y's values ---
    Mistake("no_residual", "y is γ·o (0 at initialisation): the residual x is missing, y = x + γ·o", hint=_RESIDUAL,
            shows=wrong(residual=lambda x, gamma, o: gamma * o)),
    Mistake("gamma_unused", "y = x + o: γ does not scale o (at initialisation the block is not the identity)",
            hint=_RESIDUAL, shows=wrong(residual=lambda x, gamma, o: x + o)),
    Mistake("gamma_on_x", "y = γ·x + o: γ multiplies the wrong term", hint=_RESIDUAL,
            shows=wrong(residual=lambda x, gamma, o: gamma * x + o)),
    Mistake("keys_queries_swapped", "keys and queries are swapped: self.f's matrix makes the keys (W_f) and self.g's "
            "the queries (W_g)", hint=_MATRICES, shows=wrong(swap=True)),
    Mistake("queries_from_f", "self.f's matrix is passed for the queries too: the queries come from self.g",
            hint="W_g = self.g.weight[:, :, 0, 0]", shows=wrong(queries_from_f=True)),
    Mistake("o_missing", "y = x + γ·x: the attention's output o is missing", hint=_RESIDUAL,
            shows=wrong(residual=lambda x, gamma, o: x + gamma * x)),
    Mistake("gated", "y = (1 − γ)·x + γ·o, a gate between x and o: the block is a residual, it keeps all of x and adds "
            "γ·o (at γ = 0.5 half of x is lost)", hint=_RESIDUAL,
            shows=wrong(residual=lambda x, gamma, o: (1 - gamma) * x + gamma * o)),
    Mistake("gamma_not_held", "y = x although γ = 0.5: forward does not use the γ the module holds (a γ made afresh in "
            "forward, or 0 written in)", hint="create self.gamma once, in __init__; " + _RESIDUAL,
            shows=wrong(gamma_of=lambda gamma: torch.zeros(1))),
    Mistake("tanh_gamma", "y = x + tanh(γ)·o: γ scales o as it is", hint=_RESIDUAL, shows=wrong(gamma_of=torch.tanh)),
    Mistake("sigmoid_gamma", "y = x + σ(γ)·o: γ scales o as it is (σ(0) = 0.5 would not start the block as the "
            "identity)", hint=_RESIDUAL, shows=wrong(gamma_of=torch.sigmoid)),
    Mistake("no_attn_weights", "self.attn_weights does not hold the last attention weights, shape (B, N, N) = "
            "{shape} here (the lesson plots them)", hint="self.attn_weights = weights.detach()",
            shows=wrong(keep=lambda weights: None)),
    Mistake("attn_weights_transposed", "self.attn_weights is transposed: the weights are kept as self_attention_2d "
            "returns them (row j = query pixel j, a distribution over the keys)",
            hint="self.attn_weights = weights.detach(), with no transpose",
            shows=wrong(keep=lambda weights: weights.detach().transpose(1, 2))),
    # --- beyond the values (block_edges.py) ---
    Mistake("gamma_no_grad", "no gradient reaches γ: the optimiser could never change it",
            hint="x + self.gamma * o with γ as it is: no .item(), no .detach(), no requires_grad=False",
            shows=wrong(gamma_of=lambda gamma: gamma.item())),
    Mistake("o_detached", "no gradient reaches self.{names} (with γ = 0.5): o is cut from the graph, so the "
            "convolutions would never learn", hint="no torch.no_grad() or .detach() around the attention; detach only "
            "the copy kept on self.attn_weights", shows=wrong(no_grad=True)),
    Mistake("x_detached", "the gradient reaches x only through the residual, not through o: the attention reads x cut "
            "from the graph", hint="self_attention_2d(x, ...) on x itself, not x.detach()",
            shows=wrong(x_in=lambda x: x.detach())),
    Mistake("gamma_clamped", "y = x at γ = −0.5: γ is clamped at 0 (or passed through a ReLU); a learned γ may turn "
            "negative and is used as it is", hint=_RESIDUAL, shows=wrong(gamma_of=lambda gamma: gamma.clamp(min=0))),
    Mistake("c_bar_zero", "SelfAttention2d({C}) has {what} with 0 channels: C̄ = {C} // 8 = 0 for fewer than 8 "
            "channels, and the attention is empty; C̄ is C // 8 but at least 1", hint="c_bar = max(channels // 8, 1)",
            shows=wrong(c_bar=lambda C: C // 8)),
    Mistake("small_c_bar", "SelfAttention2d({C}), where C̄ = max({C} // 8, 1) = 1, {what} though SelfAttention2d(16) "
            "is right: the block must work for C̄ = 1 too", hint="an axis of size 1 lost, as by .squeeze() (it drops "
            "EVERY axis of size 1)? take each matrix with self.f.weight[:, :, 0, 0], or .flatten(1)",
            shows=wrong(matrix=lambda conv: conv.weight.squeeze())),
)
VALUES = [M[key] for key in ("no_residual", "gamma_unused", "gamma_on_x", "keys_queries_swapped", "queries_from_f",
                             "o_missing", "gated", "gamma_not_held", "tanh_gamma", "sigmoid_gamma")]
