"""Checks for lesson 11 (attention beyond text), in the lesson's order: SAGAN's 1×1-convolution
attention, the γ-residual block, the Vision Transformer's patches, SNAIL's dense block (a gated causal
dilated convolution) and SNAIL's causal attention block. References: course_utils.vision and
course_utils.snail."""
import math

import torch
import torch.nn as nn

from ..masks import causal_mask, masked_softmax
from ..snail import causal_attention_block as _ref_causal_block
from ..vision import SelfAttention2d, conv1x1
from ..vision import patchify as _ref_patchify
from ..vision import self_attention_2d as _ref_attention_2d
from .core import (
    ExerciseError,
    exercise,
    expect,
    expect_distribution,
    expect_returns,
    expect_shape,
    randn,
    single_threaded,
)
from .evaluation import Evaluation
from .snail_dense_block import (  # noqa: F401 - dense_block_reference: the tests use it
    _dense_mistakes,
    _expect_causal,
    _future_mistakes,
    dense_block_reference,
)


def _divided_by_max(scores, mask=None):
    """exp(s) / max exp(s): a "softmax" normalised by the row's maximum instead of its sum."""
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.exp(scores - scores.amax(-1, keepdim=True))


def _wrong_scales(raw, d_key, sizes, mask=None):
    """{symptom: weights} for scores q·k divided by the wrong size; sizes = {name: (size, what it is)}."""
    mistakes = {}
    for name, (size, what) in sizes.items():
        if size != d_key:
            mistakes.setdefault(f"the scores are divided by √{name} ({what}), not by √d_key (the size of a query "
                                "and a key): use math.sqrt(d_key), e.g. math.sqrt(k.size(-1)).",
                                masked_softmax(raw / math.sqrt(size), mask))
    mistakes["the scores are divided by d_key, not by its square root √d_key."] = masked_softmax(raw / d_key, mask)
    return mistakes


def _image(read, B, H, W):
    """(B, N, C) -> (B, C, H, W), pixels row-major."""
    return read.transpose(1, 2).reshape(B, -1, H, W)


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
        o, weights = expect_returns(ev.call(answer, x, W_f, W_g, W_h, W_v), (ref_o, ref_w), ("o", "weights"))
        expect_shape(weights, (B, N, N), f"weights (for x of shape {(B, C, H, W)}, N = H·W = {N})")
        k = conv1x1(x, W_f).flatten(2).transpose(1, 2)              # (B, N, d_key)
        q = conv1x1(x, W_g).flatten(2).transpose(1, 2)              # (B, N, d_key)
        v = conv1x1(x, W_h).flatten(2).transpose(1, 2)              # (B, N, C̄)
        raw = q @ k.transpose(1, 2)                                 # (B, N, N), not yet scaled
        scores = raw / math.sqrt(d_key)
        mistakes = {
            "the weights are normalised over the queries (dim 1), not the keys: take the softmax over "
            "the last axis, so that each pixel's row sums to 1.": torch.softmax(scores, dim=1),
            "queries and keys are swapped: the queries are g(x) = W_g x and the keys f(x) = W_f x.":
                torch.softmax(scores.transpose(1, 2), dim=-1),
            "the weights are divided by their largest value, not by their sum: softmax(s)_i = "
            "exp(s_i) / Σ_i' exp(s_i').": _divided_by_max(scores),
            "the weights are the scores themselves: apply the softmax over the keys (the last axis).": scores,
            "the scores are not divided by √d_key: scale q·k by 1/math.sqrt(d_key) before the softmax.":
                torch.softmax(raw, dim=-1),
        }
        mistakes.update(_wrong_scales(raw, d_key, {"C̄": (C_bar, "the channels of a value"), "N": (N, "the number "
                                                   "of pixels"), "C": (C, "the channels of x")}))
        ev.expect_close(weights, ref_w, "weights", mistakes=mistakes)
        expect_distribution(weights, "weights (each query pixel's row)", axis=-1)
        read = ref_w @ v                                            # (B, N, C̄)
        ev.expect_close(o, ref_o, "o", mistakes={
            f"o has C̄ = {C_bar} channels, not C = {C}: the output map W_v is missing. SAGAN's final form maps "
            "the read-out back to C channels, o = conv1x1(read, W_v).": _image(read, B, H, W),
            "o has the right shape but its values are scrambled: weights @ v is (B, N, C̄); transpose it "
            "to (B, C̄, N) before reshaping to (B, C̄, H, W), then apply W_v.":
                conv1x1(read.reshape(B, C_bar, H, W), W_v),
            f"o is still (B, N, C) = {(B, N, C)}, pixels first: transpose to (B, C, N) and reshape to (B, C, H, W).":
                read @ W_v.T,
            f"o is still (B, N, C̄) = {(B, N, C_bar)}: transpose it to (B, C̄, N), reshape to (B, C̄, H, W), "
            "then apply W_v.": read,
            "o uses the transposed weights: read_j = Σ_i weights[j, i] h_i, i.e. weights @ v.":
                conv1x1(_image(ref_w.transpose(1, 2) @ v, B, H, W), W_v),
            "o mixes x itself, not the values: the values are h(x) = W_h x (conv1x1(x, W_h)), and W_v maps "
            "their mixture back to C channels.": _image(ref_w @ x.flatten(2).transpose(1, 2), B, H, W),
        })
        tests += 1
    return tests


# --- exercise 2: the block y = x + γ·o -------------------------------------------------------------
def _block_output(params, x, swap=False):
    """o of SAGAN's block whose state_dict is `params` (f, g, h, v weights (out, in, 1, 1))."""
    W = {name: params[f"{name}.weight"][:, :, 0, 0] for name in "fghv"}
    W_f, W_g = (W["g"], W["f"]) if swap else (W["f"], W["g"])
    return _ref_attention_2d(x, W_f, W_g, W["h"], W["v"])[0]


@exercise("SelfAttention2d (γ-residual block)", name="SelfAttention2d", reference=SelfAttention2d)
@single_threaded
def self_attention_block(ev: Evaluation, cls):
    channels = 16
    C_bar = channels // 8
    module = ev.call(cls, channels)
    expect(isinstance(module, nn.Module), f"SelfAttention2d({channels}) should be an nn.Module, "
                                          f"got {type(module).__name__}.")
    state = module.state_dict()
    parameters = dict(module.named_parameters())
    down, up = f"nn.Conv2d({channels}, {C_bar}, kernel_size=1)", f"nn.Conv2d({C_bar}, {channels}, kernel_size=1)"
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
        expect(key in state, f"the module has no 1×1 convolution self.{name} ({what}): add self.{name} = {conv[:-1]}, "
                             "bias=False)." + (" SAGAN's final form (ICML 2019) has a fourth 1×1 convolution v that "
                                               "maps the read-out back to C channels." if name == "v" else ""))
        got = tuple(state[key].shape)
        if got != shape and name == "h" and got[:2] == (channels, channels):
            raise ExerciseError(f"self.h maps {channels} channels to {channels}: in SAGAN's final form the values have "
                                f"C̄ = C/8 = {C_bar} channels (self.h = {conv[:-1]}, bias=False)), and "
                                "self.v maps them back to C.")
        expect(got == shape, f"self.{name} ({what}) has weight of shape {got}, expected {shape}: use {conv[:-1]}, "
                             "bias=False).")
        expect(f"{name}.bias" not in state, f"self.{name} has a bias: SAGAN's 1×1 convolutions have none "
                                            "(bias=False).")
    gamma = state["gamma"]
    expect(gamma.numel() == 1, f"γ is one learned scalar, got a parameter of shape {tuple(gamma.shape)}: "
                               "use self.gamma = nn.Parameter(torch.zeros(1)).")
    expect(bool(torch.all(gamma == 0)),
           f"γ should start at 0 (it starts at {gamma.flatten()[0].item():.3g}): the block must begin "
           "as the identity, y = x, so that the untrained attention adds no noise.")
    g = ev.rng(120)
    params = {key: randn(g, *shape, scale=0.5) for key, (shape, _, _) in expected.items()}
    x = randn(g, 2, channels, 4, 5)
    o, o_swapped = _block_output(params, x), _block_output(params, x, swap=True)
    for gamma_value in (0.0, 0.5):
        try:
            module.load_state_dict({**params, "gamma": torch.full((1,), gamma_value)})
        except (RuntimeError, KeyError) as error:
            first_line = str(error).splitlines()[0][:160]
            raise ExerciseError(f"the module's parameters could not be set: keep self.f, self.g, self.h, self.v and "
                                f"self.gamma as the exercise names them ({first_line}).") from None
        with torch.no_grad():
            y = ev.call(module, x)
        expect_shape(y, tuple(x.shape), "y")
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
            "y = x + γ·x: o is missing; add the attention output, x + self.gamma * o.": 1.5 * x,
        }, atol=1e-4)
    weights = getattr(module, "attn_weights", None)
    expect(weights is not None and tuple(weights.shape) == (2, 20, 20),
           "keep the last attention weights on self.attn_weights, shape (B, N, N) = (2, 20, 20) here, "
           "so that the lesson can plot them.")
    module.zero_grad()
    ev.call(module, x).sum().backward()
    grad = dict(module.named_parameters())["gamma"].grad
    expect(grad is not None and float(grad.abs().sum()) > 0,
           "no gradient reaches γ: compute y = x + self.gamma * o with torch operations (no .item(), no .detach()).")
    return 6


# --- exercise 3: the Vision Transformer's patches --------------------------------------------------
def _patches(images, P, patch_order="rows", pixel_order="rows", channels="last"):
    """Patches (B, N, P·P·C) read in a given order: the reference, or one of the named mistakes."""
    B, C, H, W = images.shape
    x = images.reshape(B, C, H // P, P, W // P, P)                     # (B, ch, r, i, c, j)
    grid = (2, 4) if patch_order == "rows" else (4, 2)                 # (r, c) or (c, r)
    pixel = (3, 5) if pixel_order == "rows" else (5, 3)                # (i, j) or (j, i)
    order = (0, *grid, *pixel, 1) if channels == "last" else (0, *grid, 1, *pixel)
    return x.permute(*order).reshape(B, (H // P) * (W // P), P * P * C)


@exercise("patchify (the ViT's patches)", reference=_ref_patchify)
@single_threaded
def patchify(ev: Evaluation, answer):
    tests = 0
    # a grid of patches that is not square (row and column order differ), C > 1 (the channel order shows),
    # then one grey image of square patches like the lesson's digits
    for seed, (B, C, H, W, P) in enumerate([(2, 3, 4, 6, 2), (1, 2, 6, 9, 3), (3, 1, 8, 8, 4)]):
        images = randn(ev.rng(140 + seed), B, C, H, W)
        N, D = (H // P) * (W // P), P * P * C
        out = ev.call(answer, images, P)
        expected = _ref_patchify(images, P)
        if hasattr(out, "shape") and tuple(out.shape) == (B, N, D):
            pass
        elif hasattr(out, "shape") and len(out.shape) == 3 and tuple(out.shape) == (B, D, N) and N != D:
            raise ExerciseError(f"the patches have shape {tuple(out.shape)}, expected (B, N, P·P·C) = {(B, N, D)}: "
                                "one row per patch, with its P·P·C values along the last axis (the last two axes "
                                "are swapped).")
        else:
            expect_shape(out, (B, N, D), f"the patches of images {(B, C, H, W)} with P = {P} (B, N = (H/P)·(W/P), "
                                          "P·P·C)")
        flat_hwc = images.permute(0, 2, 3, 1)                          # (B, H, W, C)
        mistakes = {
            "the patches are read in column order: patch n should be the one in patch-row n // (W/P), patch-column "
            "n % (W/P) (row-major, left to right, then the next row of patches); keep the patch-row axis before the "
            "patch-column axis when you permute.": _patches(images, P, patch_order="columns"),
            "each patch is flattened in (C, P, P) order, channel by channel (the order of F.unfold and of "
            "nn.Conv2d's weights); the convention here is (P, P, C): pixel by pixel, the C channels of one pixel "
            "side by side. Put the channel axis last before flattening.": _patches(images, P, channels="first"),
            "the pixels inside a patch are read column by column: flatten each patch row by row, (i, j, channel) "
            "with i the row inside the patch.": _patches(images, P, pixel_order="columns"),
            "the pixels inside a patch are read column by column and channel by channel: flatten each patch as "
            "(P, P, C), row by row, the channels last.": _patches(images, P, pixel_order="columns", channels="first"),
            "a reshape mixes rows of different patches: (B, H, W, C) reshaped straight to (B, N, P·P·C) takes "
            "P·P·C consecutive values along the image's rows, not a P×P square. Split H and W first: reshape to "
            "(B, C, H/P, P, W/P, P), permute to (B, H/P, W/P, P, P, C), then flatten.":
                flat_hwc.reshape(B, N, D),
            "a reshape mixes rows of different patches: (B, C, H, W) reshaped straight to (B, N, P·P·C) takes runs "
            "of consecutive values along one channel's rows, not a P×P square. Split H and W first: reshape to "
            "(B, C, H/P, P, W/P, P), permute to (B, H/P, W/P, P, P, C), then flatten.":
                images.reshape(B, N, D),
            "a reshape mixes different patches: (B, C, H/P, W/P, P, P) was reshaped to (B, N, P·P·C) with the "
            "channel axis still in front, so each row holds pieces of several patches of one channel. Move the "
            "channels last first: permute to (B, H/P, W/P, P, P, C), then flatten.":
                images.reshape(B, C, H // P, P, W // P, P).permute(0, 1, 2, 4, 3, 5).reshape(B, N, D),
        }
        ev.expect_close(out, expected, "the patches", mistakes=mistakes, atol=0, rtol=0)
        tests += 1
    # the first patch, by hand: its top-left pixel's channels come first
    images = randn(ev.rng(149), 1, 2, 4, 4)
    out = ev.call(answer, images, 2)
    ev.expect_close(out[0, 0, :2], images[0, :, 0, 0], "the first two values of patch 0 (the channels of pixel (0, 0))",
                    atol=0, rtol=0)
    return tests + 1


# --- exercise 3: SNAIL's dense block (a gated causal dilated convolution) -------------------------
@exercise("dense_block (SNAIL's gated causal convolution)", reference=dense_block_reference)
@single_threaded
def dense_block(ev: Evaluation, answer):
    tests = 0
    # d_in ≠ filters (a missing concatenation shows in the shape); dilations 4, 2, 1 with T > d
    for seed, (B, T, d_in, filters, d) in enumerate([(2, 11, 3, 5, 4), (1, 9, 4, 2, 2), (3, 6, 5, 3, 1)]):
        g = ev.rng(125 + seed)
        x = randn(g, B, T, d_in)
        W_f, W_g = randn(g, 2, d_in, filters), randn(g, 2, d_in, filters)
        try:
            out = ev.call(answer, x, W_f, W_g, d)
        except ExerciseError as error:
            if "Sizes of tensors must match" not in str(error):
                raise
            raise ExerciseError(f"x and the new features could not be concatenated: they have different numbers "
                                f"of steps. The convolution must keep all T steps: pad x with d = {d} zeros on the "
                                f"left (and only on the left) before it.\n  {error}") from None
        expect(hasattr(out, "shape"), f"dense_block should return a tensor of shape (B, T, d_in + filters), got "
                                      f"{type(out).__name__}" + (" (did you forget to `return`?)." if out is None
                                                                 else "."))
        if len(out.shape) == 3 and out.shape[1] != T:
            expect(out.shape[1] > T, f"the output has {out.shape[1]} steps, not T = {T}: the convolution "
                                     f"dropped d = {d} steps. Pad x with d zeros on the left first, so that every "
                                     "step t has an x_{t−d} (zero when t < d).")
            raise ExerciseError(f"the output has {out.shape[1]} steps, not T = {T}: padding on both sides adds "
                                f"steps. Pad x with d = {d} zeros on the left only.")
        expected = dense_block_reference(x, W_f, W_g, d)
        mistakes = _dense_mistakes(x, W_f, W_g, d)
        if tuple(out.shape) != tuple(expected.shape):      # names a missing concatenation, else the shapes
            ev.expect_close(out, expected, f"the block's output (x of shape {(B, T, d_in)}, {filters} filters)",
                            mistakes=mistakes)
        _expect_causal(ev, answer, x, W_f, W_g, d, out, t=T // 2)
        ev.expect_close(out, expected, "the block's output", mistakes=mistakes)
        tests += 1
    return tests + 1


# --- exercise 4: SNAIL's causal attention block ----------------------------------------------------
@exercise("causal_attention_block (SNAIL)", reference=_ref_causal_block)
@single_threaded
def causal_attention_block(ev: Evaluation, answer):
    tests = 0
    # d_key, d_value, T, d_in differ (a scale by the wrong size shows); T ≠ d_in + d_value (the two outputs
    # have different shapes, so values returned in the wrong order are named)
    for seed, (B, T, d_in, d_key, d_value) in enumerate([(2, 7, 6, 4, 5), (1, 5, 3, 2, 6), (3, 10, 8, 3, 6)]):
        g = ev.rng(130 + seed)
        x, W_q, W_k, W_v = randn(g, B, T, d_in), randn(g, d_in, d_key), randn(g, d_in, d_key), randn(g, d_in, d_value)
        ref_out, ref_w = _ref_causal_block(x, W_q, W_k, W_v)
        out, weights = expect_returns(ev.call(answer, x, W_q, W_k, W_v), (ref_out, ref_w), ("out", "weights"))
        expect_shape(weights, (B, T, T), "weights")
        q, k, v = x @ W_q, x @ W_k, x @ W_v
        raw = q @ k.transpose(1, 2)
        scores = raw / math.sqrt(d_key)
        mask = causal_mask(T)
        ones = torch.ones(T, T, dtype=torch.bool)
        mistakes = {
            "the causal mask is flipped: position t attends to the future (s > t). Keep s <= t, i.e. "
            "True on and below the diagonal.": masked_softmax(scores, ~torch.triu(ones, 1).T),
            "no causal mask: position t attends to every position, the future included.": torch.softmax(scores, -1),
            "the mask is off by one: position t also attends to t + 1. Keep s <= t (torch.tril(..., diagonal=0)).":
                masked_softmax(scores, torch.tril(ones, 1)),
            "the mask leaves out the diagonal: position t may attend to s <= t, itself included (row 0 then has "
            "no key at all and gives NaN).":
                torch.softmax(scores.masked_fill(~torch.tril(ones, -1), float("-inf")), -1),
            "the mask leaves out the diagonal: position t may attend to s <= t, itself included (row 0 then has "
            "no key at all).": masked_softmax(scores, torch.tril(ones, -1)),
            "masked scores were set to 0 instead of -inf: exp(0) = 1 still gives the future some weight.":
                torch.softmax(scores.masked_fill(~mask, 0.0), -1),
            "the mask is applied after the softmax: the rows no longer sum to 1. Set the masked scores to -inf "
            "before the softmax.": torch.softmax(scores, -1) * mask,
            "the softmax is over the queries (dim 1), not the keys: use dim=-1.": masked_softmax(scores, mask, dim=1),
            "the weights are divided by their largest value, not by their sum: softmax(s)_s = "
            "exp(s_s) / Σ_s' exp(s_s').": _divided_by_max(scores, mask),
            "the scores are not divided by √d_key: scale q·k by 1/math.sqrt(d_key) before the softmax.":
                masked_softmax(raw, mask),
        }
        mistakes.update(_wrong_scales(raw, d_key, {"d_value": (d_value, "the size of a value"), "T": (T, "the "
                                                   "number of steps"), "d_in": (d_in, "the size of an input")},
                                      mask))
        ev.expect_close(weights, ref_w, "weights", mistakes=mistakes)
        expect_distribution(weights, "weights (each position's row)", axis=-1)
        expect(bool(torch.all(weights.detach()[:, ~mask] == 0)),
               "some position gives weight to a later position: the causal mask is not applied.")
        read = ref_w @ v
        ev.expect_close(out, ref_out, "the block's output", mistakes={
            f"the output should be [x, read] concatenated on the last axis, shape (B, T, d_in + d_value) = "
            f"{(B, T, d_in + d_value)}: return torch.cat([x, weights @ v], dim=-1).": read,
            "x and the read-out are concatenated in the wrong order: torch.cat([x, read], dim=-1).":
                torch.cat([read, x], -1),
            "the read-out mixes x itself, not the values: v = x @ W_v.": torch.cat([x, ref_w @ x], -1),
            "the read-out uses the transposed weights: read_t = Σ_s weights[t, s] v_s, i.e. weights @ v.":
                torch.cat([x, ref_w.transpose(1, 2) @ v], -1),
        })
        tests += 1
    # causality: changing the future leaves the past unchanged
    g = ev.rng(139)
    x, W_q, W_k, W_v = randn(g, 1, 8, 4), randn(g, 4, 4), randn(g, 4, 4), randn(g, 4, 3)
    t = 3
    changed = x.clone()
    changed[:, t + 1:] = randn(g, 1, 8 - t - 1, 4)
    reference = _ref_causal_block(x, W_q, W_k, W_v)
    before, _ = expect_returns(ev.call(answer, x, W_q, W_k, W_v), reference, ("out", "weights"))
    after, _ = expect_returns(ev.call(answer, changed, W_q, W_k, W_v), _ref_causal_block(changed, W_q, W_k, W_v),
                              ("out", "weights"))
    expect(torch.allclose(before[:, :t + 1], after[:, :t + 1], atol=1e-5),
           f"the output at positions 0..{t} changed when positions {t + 1}..7 changed: the block looks at the "
           "future; mask the scores of keys s > t with -inf before the softmax.")
    return tests + 1


__all__ = ["self_attention_2d", "self_attention_block", "patchify", "dense_block", "causal_attention_block",
           "dense_block_reference"]
