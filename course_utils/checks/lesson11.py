"""Checks for lesson 11 (attention beyond text), in the lesson's order: SAGAN's 1×1-convolution
attention, the γ-residual block, the Vision Transformer's patches, SNAIL's dense block (a gated causal
dilated convolution) and SNAIL's causal attention block. References: course_utils.vision and
course_utils.snail; the typical mistakes and the PyTorch errors they raise: lesson11_mistakes.py,
snail_dense_block.py and snail_causal_block.py."""
import functools
import math

import torch
import torch.nn as nn

from ..snail import causal_attention_block as _ref_causal_block
from ..vision import SelfAttention2d
from ..vision import patchify as _ref_patchify
from ..vision import self_attention_2d as _ref_attention_2d
from .core import (
    ExerciseError,
    ValuesDiffer,
    exercise,
    expect,
    expect_distribution,
    expect_returns,
    expect_shape,
    randn,
    single_threaded,
)
from .evaluation import Evaluation
from .expectations import explained
from .lesson11_edges import (
    MIXED,
    attention_2d_in_float64,
    block_edges,
    causal_block_large_scores,
    dense_block_long_dilation,
    patchify_edges,
)
from .lesson11_mistakes import (
    FLOAT_SIZE,
    VIEW,
    attention_2d_errors,
    attention_2d_output_mistakes,
    attention_2d_weight_mistakes,
    call,
    mixed_images_or_channels,
    patch_errors,
    patch_mistakes,
    patch_shape_symptom,
    square_only,
)
from .snail_causal_block import (
    causal_block_errors,
    causal_weight_mistakes,
    expect_causal_output,
    scores_for_weights,
    wrong_weights_beside_right_output,
)
from .snail_dense_block import (  # noqa: F401 - dense_block_reference: the tests use it
    _dense_mistakes,
    _expect_causal,
    dense_block_errors,
    dense_block_reference,
    expect_any_dtype,
    padded_features,
    steps_symptom,
)


# --- exercise 1: attention over the pixels of a feature map --------------------------------------
@exercise("self_attention_2d (1×1-convolution attention)", reference=_ref_attention_2d)
@single_threaded
def self_attention_2d(ev: Evaluation, answer):
    tests = 0
    # d_key, C̄, C, N = H·W and d_key² all differ, so that dividing by the wrong size shows; C̄ ≠ C, so that
    # a missing W_v shows in the shape
    for seed, (B, C, H, W, d_key, C_bar) in enumerate([(2, 8, 3, 5, 4, 6), (1, 5, 4, 4, 2, 3), (3, 6, 2, 7, 3, 5)]):
        g = ev.rng(110 + seed)
        x, W_f, W_g = randn(g, B, C, H, W), randn(g, d_key, C), randn(g, d_key, C)
        W_h, W_v = randn(g, C_bar, C), randn(g, C, C_bar)
        N = H * W
        ref_o, ref_w = _ref_attention_2d(x, W_f, W_g, W_h, W_v)
        result = call(ev, answer, x, W_f, W_g, W_h, W_v, errors=attention_2d_errors(B, d_key, C_bar, C))
        o, weights = expect_returns(result, (ref_o, ref_w), ("o", "weights"))
        expect_shape(weights, (B, N, N), f"weights (for x of shape {(B, C, H, W)}, N = H·W = {N})")
        ev.expect_close(weights, ref_w, "weights", mistakes=attention_2d_weight_mistakes(x, W_f, W_g, W_h))
        expect_distribution(weights, "weights (each query pixel's row)", axis=-1)
        ev.expect_close(o, ref_o, "o", mistakes=attention_2d_output_mistakes(x, ref_w, W_h, W_v, W_f, W_g))
        tests += 1
    attention_2d_in_float64(ev, answer, functools.partial(call, ev, answer,
                                                          errors=[MIXED] + attention_2d_errors(2, 3, 2, 6)))
    return tests + 1


# --- exercise 2: the block y = x + γ·o -------------------------------------------------------------
def _block_output(params, x, swap=False, part=0):
    """o (part 1: the weights) of SAGAN's block whose state_dict is `params` (f, g, h, v weights (out, in, 1, 1))."""
    W = {name: params[f"{name}.weight"][:, :, 0, 0] for name in "fghv"}
    W_f, W_g = (W["g"], W["f"]) if swap else (W["f"], W["g"])
    return _ref_attention_2d(x, W_f, W_g, W["h"], W["v"])[part]


_BUILD_ERRORS = [   # what a slip in __init__ raises, named
    (r"cannot assign module before Module\.__init__\(\) call|before Module\.__init__\(\) call",
     "the module is set up before nn.Module's own: call super().__init__() first in __init__, then create "
     "the convolutions."),
    (r"must be tuple of ints, but found element of type float|argument 'size'.*float",
     "C̄ = channels / 8 is a float (16 / 8 = 2.0): nn.Conv2d needs an int number of channels, channels // 8."),
    (r"Only Tensors of floating point and complex dtype can require gradients",
     "γ must be a float tensor: nn.Parameter(torch.zeros(1)) (torch.tensor(0) holds an integer)."),
]
_FORWARD_ERRORS = [  # what a slip in forward raises, named
    (r"should have shape \(C_out, \d+\).*got shape \(\d+, \d+, 1, 1\)",
     "self_attention_2d takes the weight MATRICES: self.f.weight is (C̄, C, 1, 1), a convolution's kernel; "
     "self.f.weight[:, :, 0, 0] is the (C̄, C) matrix W_f (the same for g, h and v)."),
    (r"W(_v)? should have shape",
     "the matrices are passed in the wrong order (or one is transposed): self_attention_2d(x, W_f, W_g, W_h, W_v), "
     "with W_f from self.f (keys), W_g from self.g (queries), W_h from self.h (values), W_v from self.v (the output "
     "map), each self.X.weight[:, :, 0, 0] as it is, without .T."),
    (r"size of tensor a \(\d+\) must match the size of tensor b \(\d+\) at non-singleton dimension 3",
     "y = x + γ·o adds x, (B, C, H, W), to a tensor of another shape: self_attention_2d returns (o, weights) in "
     "that order; o has x's shape, the weights are (B, N, N)."),
    VIEW,
]


def _expect_block_layout(module, channels, C_bar):
    """The block's parameters are the exercise's: f, g, h (C -> C̄), v (C̄ -> C), no bias, γ a scalar at 0."""
    state, parameters = module.state_dict(), dict(module.named_parameters())
    down, up = f"nn.Conv2d({channels}, {C_bar}, kernel_size=1", f"nn.Conv2d({C_bar}, {channels}, kernel_size=1"
    expected = {"f.weight": ((C_bar, channels, 1, 1), "keys", down),
                "g.weight": ((C_bar, channels, 1, 1), "queries", down),
                "h.weight": ((C_bar, channels, 1, 1), "values", down),
                "v.weight": ((channels, C_bar, 1, 1), "the output map", up)}
    expect("gamma" in state,
           "γ is missing from the module's parameters: add self.gamma = nn.Parameter(torch.zeros(1)).")
    expect("gamma" in parameters, "self.gamma is not an nn.Parameter: the optimiser would never change it. "
                                  "Use self.gamma = nn.Parameter(torch.zeros(1)).")
    for key, (shape, what, conv) in expected.items():
        name = key.split(".")[0]
        expect(key in state, f"the module has no 1×1 convolution self.{name} ({what}): add self.{name} = {conv}, "
                             "bias=False)." + (" SAGAN's final form (ICML 2019) has a fourth 1×1 convolution v that "
                                               "maps the read-out back to C channels." if name == "v" else ""))
        got = tuple(state[key].shape)
        if got != shape and name == "h" and got[:2] == (channels, channels):
            raise ExerciseError(f"self.h maps {channels} channels to {channels}: in SAGAN's final form the values have "
                                f"C̄ = C/8 = {C_bar} channels (self.h = {conv}, bias=False)), and "
                                "self.v maps them back to C.")
        expect(got == shape, f"self.{name} ({what}) has weight of shape {got}, expected {shape}: use {conv}, "
                             "bias=False).")
        expect(f"{name}.bias" not in state, f"self.{name} has a bias: SAGAN's 1×1 convolutions have none "
                                            "(bias=False).")
    shared = [name for name in "ghv" if any(state[f"{name}.weight"].data_ptr() == state[f"{other}.weight"].data_ptr()
                                            for other in "fghv"[:"fghv".index(name)])]
    expect(not shared, f"self.{shared[0] if shared else ''} shares its weights with another convolution (one nn.Conv2d "
                       "assigned to several names, as self.f = self.g = ...): keys, queries and values each need a "
                       "1×1 convolution of their own; create each with its own nn.Conv2d(...).")
    gamma = state["gamma"]
    expect(gamma.numel() == 1, f"γ is one learned scalar, got a parameter of shape {tuple(gamma.shape)}: "
                               "use self.gamma = nn.Parameter(torch.zeros(1)).")
    expect(bool(torch.all(gamma == 0)),
           f"γ should start at 0 (it starts at {gamma.flatten()[0].item():.3g}): the block must begin "
           "as the identity, y = x, so that the untrained attention adds no noise.")
    return {key: shape for key, (shape, _, _) in expected.items()}


def _forward(ev, module, x):
    with torch.no_grad():
        y = call(ev, module, x, errors=_FORWARD_ERRORS)
    expect(not isinstance(y, (tuple, list)), f"forward returns a {type(y).__name__}: it should return y = x + γ·o "
                                             "only, one tensor (the weights go on self.attn_weights).")
    expect_shape(y, tuple(x.shape), "y")
    return y


@exercise("SelfAttention2d (γ-residual block)", name="SelfAttention2d", reference=SelfAttention2d)
@single_threaded
def self_attention_block(ev: Evaluation, cls):
    channels = 16
    module = call(ev, cls, channels, errors=_BUILD_ERRORS)
    expect(isinstance(module, nn.Module), f"SelfAttention2d({channels}) should be an nn.Module, "
                                          f"got {type(module).__name__}.")
    shapes = _expect_block_layout(module, channels, channels // 8)
    gamma_shape = module.state_dict()["gamma"].shape            # one scalar: (1,), () or (1, 1, 1, 1) all do
    g = ev.rng(120)
    params = {key: randn(g, *shape, scale=0.5) for key, shape in shapes.items()}
    x = randn(g, 2, channels, 4, 5)
    o, o_swapped = _block_output(params, x), _block_output(params, x, swap=True)
    for gamma_value in (0.0, 0.5):
        try:
            module.load_state_dict({**params, "gamma": torch.full(gamma_shape, gamma_value)})
        except (RuntimeError, KeyError) as error:
            first_line = str(error).splitlines()[0][:160]
            raise ExerciseError(f"the module's parameters could not be set: keep self.f, self.g, self.h, self.v and "
                                f"self.gamma as the exercise names them ({first_line}).") from None
        y = _forward(ev, module, x)
        if gamma_value == 0:
            ev.expect_close(y, x, "y at initialisation (γ = 0)", mistakes={
                "y is 0 at initialisation: the residual is missing; return x + self.gamma * o.": torch.zeros_like(x),
                "y = x + o at initialisation: γ is not used; return x + self.gamma * o.": x + o,
                "y = o at initialisation: γ multiplies the wrong term; return x + self.gamma * o.": o,
            }, atol=1e-4)
            continue
        ev.expect_close(y, x + 0.5 * o, "y with γ = 0.5", mistakes={
            "y = γ·o: the residual is missing; return x + self.gamma * o.": 0.5 * o,
            "y = x + o: γ is not used; return x + self.gamma * o.": x + o,
            "y = γ·x + o: γ multiplies the wrong term; return x + self.gamma * o.": 0.5 * x + o,
            "keys and queries are swapped: pass self.f's matrix as W_f (the keys) and self.g's as W_g (the queries).":
                x + 0.5 * o_swapped,
            "self.f's matrix is passed for the queries too: W_g comes from self.g (self.g.weight[:, :, 0, 0]).":
                x + 0.5 * _block_output({**params, "g.weight": params["f.weight"]}, x),
            "y = x + γ·x: o is missing; add the attention output, x + self.gamma * o.": 1.5 * x,
            "y = (1 − γ)·x + γ·o, a gate between x and o: the block is a residual, it keeps all of x and adds γ·o "
            "(at γ = 0.5 half of x is lost); return x + self.gamma * o.": 0.5 * x + 0.5 * o,
            "y = x although γ = 0.5: forward does not use the γ the module holds (a γ made afresh in forward, or 0 "
            "written in?); create self.gamma once, in __init__, and return x + self.gamma * o.": x,
            "y = x + tanh(γ)·o: γ scales o as it is; return x + self.gamma * o.":
                x + math.tanh(0.5) * o,
            "y = x + σ(γ)·o: γ scales o as it is (σ(0) = 0.5 would not start the block as the identity); return "
            "x + self.gamma * o.": x + torch.sigmoid(torch.tensor(0.5)) * o,
        }, atol=1e-4)
    weights = getattr(module, "attn_weights", None)
    expect(weights is not None and tuple(weights.shape) == (2, 20, 20),
           "keep the last attention weights on self.attn_weights, shape (B, N, N) = (2, 20, 20) here, "
           "so that the lesson can plot them.")
    right = _block_output(params, x, part=1)
    ev.expect_close(weights, right, "self.attn_weights", mistakes={
        "self.attn_weights is transposed: keep the weights as self_attention_2d returns them (row j = query pixel j, "
        "a distribution over the keys).": right.transpose(1, 2)}, atol=1e-5,
        hint="Keep the weights self_attention_2d returned in this forward call, as they are.")
    block_edges(ev, cls, module, params, x, dict(layout=_expect_block_layout, build=_BUILD_ERRORS,
                                                   forward=_FORWARD_ERRORS, output=_block_output))
    return 9


# --- exercise 3: the Vision Transformer's patches --------------------------------------------------
@exercise("patchify (the ViT's patches)", reference=_ref_patchify)
@single_threaded
def patchify(ev: Evaluation, answer):
    tests = 0
    # a grid of patches that is not square (row and column order differ, H ≠ W), C > 1 (the channel order
    # shows), then one grey image of square patches like the lesson's digits
    for seed, (B, C, H, W, P) in enumerate([(2, 3, 4, 6, 2), (1, 2, 6, 9, 3), (3, 1, 8, 8, 4)]):
        images = randn(ev.rng(140 + seed), B, C, H, W)
        N, D = (H // P) * (W // P), P * P * C
        square = functools.partial(square_only, ev, answer, _ref_patchify, B, C, H, W, P)
        try:
            out = call(ev, answer, images, P, errors=[VIEW, FLOAT_SIZE, *patch_errors(B, C, H, W, P)])
        except ExerciseError:
            expect(square() is None, square())
            raise
        if hasattr(out, "shape") and tuple(out.shape) != (B, N, D):
            symptom = patch_shape_symptom(out, B, N, D, H, W, P)
            expect(symptom is None, symptom)
        expect_shape(out, (B, N, D), f"the patches of images {(B, C, H, W)} with P = {P} (B, N = (H/P)·(W/P), P·P·C)")
        with explained(square, functools.partial(mixed_images_or_channels, ev, answer, _ref_patchify, images, P)):
            ev.expect_close(out, _ref_patchify(images, P), "the patches", mistakes=patch_mistakes(images, P),
                            atol=0, rtol=0)
        tests += 1
    # the first patch, by hand: its top-left pixel's channels come first
    images = randn(ev.rng(149), 1, 2, 4, 4)
    out = call(ev, answer, images, 2, errors=[VIEW])
    ev.expect_close(out[0, 0, :2], images[0, :, 0, 0], "the first two values of patch 0 (the channels of pixel (0, 0))",
                    atol=0, rtol=0)
    patchify_edges(ev, answer, functools.partial(call, ev, answer, errors=[VIEW, FLOAT_SIZE]))
    return tests + 2


# --- exercise 4: SNAIL's dense block (a gated causal dilated convolution) -------------------------
@exercise("dense_block (SNAIL's gated causal convolution)", reference=dense_block_reference)
@single_threaded
def dense_block(ev: Evaluation, answer):
    tests = 0
    # d_in ≠ filters (a missing concatenation shows in the shape, a concatenation on another axis raises);
    # dilations 4, 2, 1 with T > d
    for seed, (B, T, d_in, filters, d) in enumerate([(2, 11, 3, 5, 4), (1, 9, 4, 2, 2), (3, 6, 5, 3, 1)]):
        g = ev.rng(125 + seed)
        x = randn(g, B, T, d_in)
        W_f, W_g = randn(g, 2, d_in, filters), randn(g, 2, d_in, filters)
        out = call(ev, answer, x, W_f, W_g, d, errors=dense_block_errors(T, d_in, d))
        expect(hasattr(out, "shape"), f"dense_block should return a tensor of shape (B, T, d_in + filters), got "
                                      f"{type(out).__name__}" + (" (did you forget to `return`?)." if out is None
                                                                 else "."))
        if len(out.shape) == 3 and out.shape[1] != T:
            raise ExerciseError(steps_symptom(out.shape[1], T, d))
        expected = dense_block_reference(x, W_f, W_g, d)
        mistakes = _dense_mistakes(x, W_f, W_g, d)
        if tuple(out.shape) != tuple(expected.shape):      # names a missing concatenation, else the shapes
            ev.expect_close(out, expected, f"the block's output (x of shape {(B, T, d_in)}, {filters} filters)",
                            mistakes=mistakes)
        _expect_causal(ev, answer, x, W_f, W_g, d, out, t=T // 2)
        symptom = padded_features(ev, answer, x, W_f, W_g, d, out)
        expect(symptom is None, symptom)
        ev.expect_close(out, expected, "the block's output", mistakes=mistakes)
        tests += 1
    expect_any_dtype(ev, answer)
    dense_block_long_dilation(ev, answer, None, dense_block_reference)
    return tests + 3


# --- exercise 5: SNAIL's causal attention block ----------------------------------------------------
@exercise("causal_attention_block (SNAIL)", reference=_ref_causal_block)
@single_threaded
def causal_attention_block(ev: Evaluation, answer):
    tests = 0
    # d_key, d_value, T, d_in differ (a scale by the wrong size shows, a concatenation on another axis raises);
    # T ≠ d_in + d_value (the two outputs have different shapes, so values returned in the wrong order are named)
    for seed, (B, T, d_in, d_key, d_value) in enumerate([(2, 7, 6, 4, 5), (1, 5, 3, 2, 6), (3, 10, 8, 3, 6)]):
        g = ev.rng(130 + seed)
        x, W_q, W_k, W_v = randn(g, B, T, d_in), randn(g, d_in, d_key), randn(g, d_in, d_key), randn(g, d_in, d_value)
        ref_out, ref_w = _ref_causal_block(x, W_q, W_k, W_v)
        result = call(ev, answer, x, W_q, W_k, W_v, errors=causal_block_errors(B, T, d_in, d_key, d_value))
        out, weights = expect_returns(result, (ref_out, ref_w), ("out", "weights"))
        expect_shape(weights, (B, T, T), "weights")
        symptom = scores_for_weights(weights, x, W_q, W_k)
        expect(symptom is None, symptom)
        try:
            ev.expect_close(weights, ref_w, "weights", mistakes=causal_weight_mistakes(x, W_q, W_k, W_v))
        except ValuesDiffer:                       # no listed mistake: named when the output is right
            if not (hasattr(out, "shape") and tuple(out.shape) == tuple(ref_out.shape)
                    and torch.allclose(torch.as_tensor(out).detach().float(), ref_out, atol=1e-5)):
                raise
            raise ExerciseError(wrong_weights_beside_right_output(weights, T)) from None
        expect_distribution(weights, "weights (each position's row)", axis=-1)
        expect(bool(torch.all(weights.detach()[:, ~torch.tril(torch.ones(T, T, dtype=torch.bool))] == 0)),
               "some position gives weight to a later position: the causal mask is not applied.")
        v = x @ W_v
        mistakes = {
            f"the output should be [x, read] concatenated on the last axis, shape (B, T, d_in + d_value) = "
            f"{(B, T, d_in + d_value)}: return torch.cat([x, weights @ v], dim=-1).": ref_w @ v,
            "x and the read-out are concatenated in the wrong order: torch.cat([x, read], dim=-1).":
                torch.cat([ref_w @ v, x], -1),
            "the read-out mixes x itself, not the values: v = x @ W_v.": torch.cat([x, ref_w @ x], -1),
            "the read-out uses the transposed weights: read_t = Σ_s weights[t, s] v_s, i.e. weights @ v.":
                torch.cat([x, ref_w.transpose(1, 2) @ v], -1),
            "the values themselves are concatenated, not the read-out: read = weights @ v, the weighted sum of the "
            "values of the steps s <= t.": torch.cat([x, v], -1),
        }
        for name, W in (("W_k", W_k), ("W_q", W_q)):       # a copy-pasted line: the values made with another matrix
            mistakes[f"the values are computed with {name}, not W_v (a copy-pasted line?): v = x @ W_v, of d_value = "
                     f"{d_value} features; {name} only makes the {'keys' if name == 'W_k' else 'queries'} of the "
                     "scores."] = torch.cat([x, ref_w @ (x @ W)], -1)
        width = out.shape[-1] if hasattr(out, "shape") and tuple(out.shape[:2]) == (B, T) else d_in + d_value
        expect(width == d_in + d_value or any(tuple(m.shape) == tuple(out.shape) for m in mistakes.values()),
               f"the output has {width} features, not d_in + d_value = {d_in + d_value}: it is [x, read], x itself "
               f"(d_in = {d_in}) first, then the read-out weights @ v (d_value = {d_value}).")
        expect_causal_output(ev, answer, (x, W_q, W_k, W_v), out, t=T // 2, known=mistakes)
        ev.expect_close(out, ref_out, "the block's output", mistakes=mistakes)
        tests += 1
    # causality: changing the future leaves the past unchanged
    g = ev.rng(139)
    x, W_q, W_k, W_v = randn(g, 1, 8, 4), randn(g, 4, 4), randn(g, 4, 4), randn(g, 4, 3)
    t = 3
    changed = x.clone()
    changed[:, t + 1:] = randn(g, 1, 8 - t - 1, 4)
    before, _ = expect_returns(ev.call(answer, x, W_q, W_k, W_v), _ref_causal_block(x, W_q, W_k, W_v),
                               ("out", "weights"))
    after, _ = expect_returns(ev.call(answer, changed, W_q, W_k, W_v), _ref_causal_block(changed, W_q, W_k, W_v),
                              ("out", "weights"))
    expect(torch.allclose(before[:, :t + 1], after[:, :t + 1], atol=1e-5),
           f"the output at positions 0..{t} changed when positions {t + 1}..7 changed: the block looks at the "
           "future; mask the scores of keys s > t with -inf before the softmax.")
    causal_block_large_scores(ev, answer, functools.partial(
        call, ev, answer, errors=causal_block_errors(2, 6, 4, 3, 2)))
    return tests + 2


__all__ = ["self_attention_2d", "self_attention_block", "patchify", "dense_block", "causal_attention_block",
           "dense_block_reference"]
