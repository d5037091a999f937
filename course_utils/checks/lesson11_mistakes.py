"""Lesson 11's typical mistakes, for its checks (lesson11.py): what a wrong answer returns (SAGAN's attention
over the pixels, the ViT's patches), and the PyTorch errors a slip raises, named.

    out = call(ev, answer, x, W, errors=[(regex on PyTorch's message, symptom), ...])   # ev.call, errors named
    mistakes = attention_2d_weight_mistakes(x, W_f, W_g, W_h)     # {symptom: the weights that mistake gives}
"""
import math
import re
import warnings

import torch

from ..masks import masked_softmax
from ..vision import conv1x1
from .core import ExerciseError, randn
from .evaluation import RAISED

VIEW = (r"view size is not compatible",
        "`.view()` cannot follow a transpose or a permute (the values are no longer laid out in that order in "
        "memory): use `.reshape()` there (or `.contiguous().view()`).")
T_3D = ("`.T` on a 3-D tensor reverses all three axes, (B, N, d) -> (d, N, B), instead of transposing each "
        "matrix of the batch: use k.transpose(1, 2) (or k.mT).")

FLOAT_SIZE = (r"tuple of ints, ?but (got|found)[^.]*float|argument 'shape'.*float",
              "a size is a float: H / P is a float in Python 3 even when P divides H; sizes take ints, H // P.")
SOFTMAX_DIM_0 = ("the softmax is over the batch (dim 0): F.softmax without dim= picks dim 0 for a 3-D tensor. "
                 "Say dim=-1, the keys.")


def _reversed_3d(warned):
    return any("x.T" in str(w.message) and "dimension other than 2" in str(w.message) for w in warned)


def transposed_batch(B, d):
    """The error of q @ k.T with k (B, N, d): k.T is (d, N, B), and the batch axes B and d do not broadcast."""
    return (rf"size of tensor a \({B}\) must match the size of tensor b \({d}\) at non-singleton dimension 0", T_3D)


def call(ev, answer, *args, errors=()):
    """`ev.call(answer, *args)`; when the learner's code raises, the first of `errors` ((regex, symptom) pairs;
    a symptom may be a function of the match) that matches PyTorch's message names the mistake instead of
    "your function raised ...", which is kept below it. `.T` on a 3-D tensor is named when PyTorch warns of it
    (it warns once per process: `transposed_batch` names it from the error it causes)."""
    with warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        try:
            return ev.call(answer, *args)
        except ExerciseError as error:
            text = str(error)
            if not text.startswith(RAISED):
                raise
            raised, _, where = text[len(RAISED):].partition("\n")
            symptom = T_3D if _reversed_3d(warned) else None
            for pattern, named in errors if symptom is None else ():
                match = re.search(pattern, raised)
                symptom = (named(match) if callable(named) else named) if match else None
                if symptom:
                    break
            if symptom is None:
                raise
            where = "\n".join(line for line in where.splitlines() if "called with" not in line)
            raise ExerciseError(f"{symptom}\n  (PyTorch: {raised})" + (f"\n{where}" if where.strip() else "")) from None


def concatenated(axis_last, what):
    """The error of torch.cat on the wrong axis (sizes differ on another axis), named; `what` names the pieces."""
    def name(match):
        axis = int(match.group(1))
        if axis == axis_last:
            return None
        return (f"{what} are concatenated along axis {axis}: they go side by side along the LAST axis (the "
                "features), torch.cat([...], dim=-1); every other axis (batch, steps) stays as it is.")
    return r"Sizes of tensors must match except in dimension (\d+)", name


# --- exercise 1: SAGAN's attention over the pixels ---------------------------------------------------
def _pixels(features, scrambled=False):
    """(B, C, H, W) -> (B, N, C), one row per pixel; scrambled: reshaped straight, without the transpose."""
    B, C = features.shape[:2]
    return features.reshape(B, -1, C) if scrambled else features.flatten(2).transpose(1, 2)


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


def divided_by_max(scores, mask=None):
    """exp(s) / max exp(s): a "softmax" normalised by the row's maximum instead of its sum."""
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.exp(scores - scores.amax(-1, keepdim=True))


def _column_major(weights, H, W):
    """Weights (B, N, N) with the pixels numbered column by column (j = c·H + r) instead of row by row."""
    order = torch.arange(H * W).reshape(H, W).T.flatten()                    # row-major index of each j
    return weights[:, order][:, :, order]


def attention_2d_weight_mistakes(x, W_f, W_g, W_h):
    """{symptom: weights (B, N, N)} of the typical mistakes of `self_attention_2d` (the first can be told apart
    only on the weights of a query pixel that attends to itself most: put it first)."""
    B, C, H, W = x.shape
    d_key, C_bar, N = W_f.shape[0], W_h.shape[0], H * W
    k, q = _pixels(conv1x1(x, W_f)), _pixels(conv1x1(x, W_g))                 # (B, N, d_key)
    raw = q @ k.transpose(1, 2)                                               # (B, N, N), not yet scaled
    scores = raw / math.sqrt(d_key)
    scrambled = _pixels(conv1x1(x, W_g), True) @ _pixels(conv1x1(x, W_f), True).transpose(1, 2) / math.sqrt(d_key)
    mistakes = {
        "the scores are divided by √d_key AFTER the softmax: scale q·k before it (the weights then sum to 1).":
            torch.softmax(raw, dim=-1) / math.sqrt(d_key),
        "the weights are transposed: row j of weights is pixel j's distribution over the keys i, α_{j,i} "
        "(weights[b, j, i]); you return its transpose.": torch.softmax(scores, dim=-1).transpose(1, 2),
        "the weights are normalised over the queries (dim 1), not the keys: take the softmax over "
        "the last axis, so that each pixel's row sums to 1.": torch.softmax(scores, dim=1),
        SOFTMAX_DIM_0: torch.softmax(scores, dim=0),
        "queries and keys are swapped: the queries are g(x) = W_g x and the keys f(x) = W_f x.":
            torch.softmax(scores.transpose(1, 2), dim=-1),
        "the queries and the keys come from the same matrix: the queries are g(x) = W_g x, the keys f(x) = W_f x.":
            torch.softmax(k @ k.transpose(1, 2) / math.sqrt(d_key), dim=-1),
        "the queries and the keys come from the same matrix W_g: the queries are g(x) = W_g x, the keys f(x) = "
        "W_f x.": torch.softmax(q @ q.transpose(1, 2) / math.sqrt(d_key), dim=-1),
        "the weights are divided by their largest value, not by their sum: softmax(s)_i = "
        "exp(s_i) / Σ_i' exp(s_i').": divided_by_max(scores),
        "the scores are MULTIPLIED by √d_key: divide them, q·k / math.sqrt(d_key), before the softmax.":
            torch.softmax(raw * math.sqrt(d_key), dim=-1),
        "the diagonal is masked: a pixel may attend to itself too (this is self-attention over all N pixels, no "
        "mask).": torch.softmax(scores.masked_fill(torch.eye(N, dtype=torch.bool), float("-inf")), dim=-1),
        "one softmax runs over all N·N pairs of an image: take it over each query pixel's row, the keys (dim=-1), "
        "so that every row sums to 1.": torch.softmax(scores.flatten(1), dim=-1).view_as(scores),
        "the softmax's stabilising maximum is taken over the queries (dim 1), not over each row's keys: subtract "
        "scores.amax(dim=-1, keepdim=True), one number per row, which leaves the softmax unchanged.":
            torch.exp(scores - scores.amax(1, keepdim=True)) / torch.exp(scores - scores.amax(1, keepdim=True)).sum(
                -1, keepdim=True),
        "the weights are exp(scores), not normalised: divide by their sum over the keys (the softmax).":
            torch.exp(scores),
        "the weights are the scores themselves: apply the softmax over the keys (the last axis).": scores,
        "the scores are not divided by √d_key: scale q·k by 1/math.sqrt(d_key) before the softmax.":
            torch.softmax(raw, dim=-1),
        "the pixels are numbered column by column (pixel (r, c) as j = c·H + r, as after swapping H and W before "
        "flattening): number them row by row, j = r·W + c, which x.flatten(2) gives on the (B, C̄, H, W) map as it "
        "is.": _column_major(torch.softmax(scores, dim=-1), H, W),
        f"the pixels' vectors are scrambled: conv1x1's output (B, C̄, H, W) was reshaped straight to (B, N, C̄), "
        f"which cuts each channel's {N} values into rows instead of gathering the channels of one pixel. Flatten "
        "the pixels first, (B, C̄, N), then transpose to (B, N, C̄).": torch.softmax(scrambled, dim=-1),
    }
    mistakes.update(_wrong_scales(raw, d_key, {"C̄": (C_bar, "the channels of a value"),
                                               "N": (N, "the number of pixels"), "C": (C, "the channels of x")}))
    return mistakes


def attention_2d_output_mistakes(x, weights, W_h, W_v, W_f, W_g):
    """{symptom: o} of the typical mistakes of `self_attention_2d` after the weights, `weights` (B, N, N) right."""
    B, C, H, W = x.shape
    C_bar, N = W_h.shape[0], H * W
    image = lambda read: read.transpose(1, 2).reshape(B, -1, H, W)           # (B, N, c) -> (B, c, H, W)
    read = weights @ _pixels(conv1x1(x, W_h))                                 # (B, N, C̄)
    scores = _pixels(conv1x1(x, W_g)) @ _pixels(conv1x1(x, W_f)).transpose(1, 2) / math.sqrt(W_f.shape[0])
    return {
        "o mixes the values with the SCORES, not the weights: read = weights @ v, with the weights after the "
        "softmax.": conv1x1(image(scores @ _pixels(conv1x1(x, W_h))), W_v),
        f"o has C̄ = {C_bar} channels, not C = {C}: the output map W_v is missing. SAGAN's final form maps "
        "the read-out back to C channels, o = conv1x1(read, W_v).": image(read),
        "o has the right shape but its values are scrambled: weights @ v is (B, N, C̄); transpose it "
        "to (B, C̄, N) before reshaping to (B, C̄, H, W), then apply W_v.": conv1x1(read.reshape(B, C_bar, H, W), W_v),
        f"o is still (B, N, C) = {(B, N, C)}, pixels first: transpose to (B, C, N) and reshape to (B, C, H, W).":
            read @ W_v.T,
        f"o is still (B, N, C̄) = {(B, N, C_bar)}: transpose it to (B, C̄, N), reshape to (B, C̄, H, W), "
        "then apply W_v.": read,
        "o uses the transposed weights: read_j = Σ_i weights[j, i] h_i, i.e. weights @ v.":
            conv1x1(image(weights.transpose(1, 2) @ _pixels(conv1x1(x, W_h))), W_v),
        "o mixes x itself, not the values: the values are h(x) = W_h x (conv1x1(x, W_h)), and W_v maps "
        "their mixture back to C channels.": image(weights @ _pixels(x)),
        "o has the read-out's pixels in the wrong places: (B, C̄, N) reshapes to (B, C̄, H, W), H rows then W "
        "columns (not (B, C̄, W, H)).": conv1x1(read.transpose(1, 2).reshape(B, -1, W, H).transpose(2, 3), W_v),
        f"o has shape (B, C, W, H) = {(B, C, W, H)}, its two sides swapped: the read-out (B, C̄, N) was reshaped to "
        "(B, C̄, W, H), which only a square map forgives; reshape it to (B, C̄, H, W), H rows then W columns.":
            conv1x1(read.transpose(1, 2).reshape(B, -1, W, H), W_v),
        "o includes x: return the attention's output alone, o = conv1x1(read, W_v); the residual x + γ·o is the "
        "block's (exercise 2).": x + conv1x1(image(read), W_v),
    }


def attention_2d_errors(B, d_key, C_bar, C):
    """The PyTorch errors of `self_attention_2d`'s typical slips, named."""
    def conv(match):
        channels, rows = int(match.group(1)), int(match.group(2))
        if channels == d_key != C_bar and rows == C:
            return (f"W_v got a read-out of {d_key} channels, not C̄ = {C_bar}: the values are h(x) = conv1x1(x, W_h), "
                    "not f(x) or g(x) (W_f and W_g make the keys and the queries).")
        return ("a weight matrix was transposed: conv1x1(x, W) takes W as it is given, (C_out, C): W_f, W_g and W_h "
                f"are (C̄, C) = ({d_key}, {C}) and ({C_bar}, {C}) here, W_v is (C, C̄); no .T.")
    return [
        VIEW,
        transposed_batch(B, d_key),
        (r"W should have shape \(C_out, (\d+)\) for x with \d+ channels, got shape \((\d+), (\d+)\)", conv),
        (r"shape '\[\d+, (\d+), \d+, \d+\]' is invalid for input of size",
         lambda m: (f"the read-out was reshaped with C = {C} channels: weights @ v has C̄ = {C_bar} per pixel, so "
                    "reshape it to (B, C̄, H, W), then W_v maps C̄ to C.") if int(m.group(1)) == C != C_bar else None),
        (r"batch2 tensor to be: \[\d+, \d+\] but got|cannot be multiplied",
         "a matrix product has shapes that do not fit: the scores are q @ k.transpose(1, 2), with q and k of "
         "shape (B, N, C̄) (pixels first), and the read-out is weights @ v."),
    ]


# --- exercise 3: the ViT's patches ---------------------------------------------------------------
def patches_in_order(images, P, patch_order="rows", pixel_order="rows", channels="last"):
    """Patches (B, N, P·P·C) read in a given order: the reference, or one of the named mistakes."""
    B, C, H, W = images.shape
    x = images.reshape(B, C, H // P, P, W // P, P)                     # (B, ch, r, i, c, j)
    grid = (2, 4) if patch_order == "rows" else (4, 2)                 # (r, c) or (c, r)
    pixel = (3, 5) if pixel_order == "rows" else (5, 3)                # (i, j) or (j, i)
    order = {"last": (0, *grid, *pixel, 1), "first": (0, *grid, 1, *pixel),
             "middle": (0, *grid, pixel[0], 1, pixel[1])}[channels]        # middle: between a pixel's two axes
    return x.permute(*order).reshape(B, (H // P) * (W // P), P * P * C)


def patch_mistakes(images, P):
    """{symptom: patches} of the typical mistakes of `patchify`."""
    B, C, H, W = images.shape
    N, D = (H // P) * (W // P), P * P * C
    strided = images.reshape(B, C, P, H // P, P, W // P).permute(0, 3, 5, 2, 4, 1).reshape(B, N, D)
    mistakes = {
        "the patches are read in column order: patch n should be the one in patch-row n // (W/P), patch-column "
        "n % (W/P) (row-major: left to right, then the next row of patches).": patches_in_order(images, P, "columns"),
        "each patch is flattened in (C, P, P) order, channel by channel (the order of F.unfold and of "
        "nn.Conv2d's weights); the convention here is (P, P, C): pixel by pixel, the C channels of one pixel "
        "side by side.": patches_in_order(images, P, channels="first"),
        "the pixels inside a patch are read column by column: flatten each patch row by row, (i, j, channel) "
        "with i the row inside the patch.": patches_in_order(images, P, pixel_order="columns"),
        "the pixels inside a patch are read column by column and channel by channel: flatten each patch as "
        "(P, P, C), row by row, the channels last.": patches_in_order(images, P, "rows", "columns", "first"),
        "these are the patches of the transposed image (as after images.transpose(2, 3)): the patches come column "
        "by column, and so do the pixels inside each. images are (B, C, H, W), rows first: split H (the rows) into "
        "(H/P, P) and W (the columns) into (W/P, P), with no transpose.": patches_in_order(images, P, "columns",
                                                                                            "columns"),
        f"each \"patch\" gathers pixels {H // P} rows and {W // P} columns apart, not a P×P square: a side of "
        "length H splits as (H/P, P), which patch first and where inside it second; (P, H/P) interleaves the "
        "patches.": strided,
        "the axes inside a patch come before the patch axes (permute(0, 3, 5, 2, 4, 1)): bring (which patch-row, "
        "which patch-column) first, then (row, column, channel) inside the patch, permute(0, 2, 4, 3, 5, 1).":
            images.reshape(B, C, H // P, P, W // P, P).permute(0, 3, 5, 2, 4, 1).reshape(B, N, D),
        "the patches overlap: patch (r, c) starts at row r·P and column c·P (images[..., r*P:(r+1)*P, c*P:(c+1)*P]), "
        "not at row r and column c.": torch.stack([images[:, :, r:r + P, c:c + P].permute(0, 2, 3, 1).reshape(B, D)
                                                   for r in range(H // P) for c in range(W // P)], 1),
        "a reshape mixes rows of different patches: (B, H, W, C) taken straight to (B, N, P·P·C) reads runs of "
        "consecutive pixels along the image's rows, not P×P squares. Split H and W into (which patch, where "
        "inside it) and bring the two patch axes together before flattening.":
            images.permute(0, 2, 3, 1).reshape(B, N, D),
        "a reshape mixes rows of different patches: (B, C, H, W) taken straight to (B, N, P·P·C) reads runs of "
        "consecutive values along one channel's rows, not P×P squares. Split H and W into (which patch, where "
        "inside it) and bring the two patch axes together before flattening.": images.reshape(B, N, D),
        "a reshape mixes different patches: the grid (B, C, H/P, W/P, P, P) was flattened with the channel "
        "axis still in front, so each row holds pieces of several patches of one channel. The channel axis "
        "goes last, after the pixel axes, before flattening.":
            images.reshape(B, C, H // P, P, W // P, P).permute(0, 1, 2, 4, 3, 5).reshape(B, N, D),
    }
    for pixel_order, axes in (("rows", "(i, C, j) order (row, channel, column)"),
                              ("columns", "(j, C, i) order (column, channel, row)")):
        mistakes[f"each patch is flattened in {axes}, the channel axis between a pixel's row and column: "
                 "flatten it as (P, P, C), row i, column j, then the C channels of that pixel side by side (feature "
                 "(i·P + j)·C + ch): move the channel axis last before flattening."] = patches_in_order(
            images, P, pixel_order=pixel_order, channels="middle")
    if H != W:
        mistakes["H and W are swapped: images are (B, C, H, W), rows first; split H (the rows) into (H/P, P) and "
                 "W (the columns) into (W/P, P)."] = (
            images.reshape(B, C, W // P, P, H // P, P).permute(0, 2, 4, 3, 5, 1).reshape(B, N, D))
    return mistakes


def square_only(ev, answer, reference, B, C, H, W, P):
    """A symptom when `answer`, wrong (or failing) on images of H x W pixels with H ≠ W, is right on square images
    of either side (a size of one side used for the other), else None."""
    if H == W:
        return None
    for side in (H, W):
        images = randn(ev.rng(147), B, C, side, side)
        try:
            out = ev.call(answer, images, P)
        except ExerciseError:
            return None
        if not (hasattr(out, "shape") and tuple(out.shape) == tuple(reference(images, P).shape)
                and torch.equal(torch.as_tensor(out), reference(images, P))):
            return None
    return (f"your patchify is right on square images but not on images of H = {H} rows and W = {W} columns: a "
            "size of one side is used for the other (e.g. H // P where the patch-columns are W // P); split the rows "
            "as (H/P, P) and the columns as (W/P, P), each with its own size.")


def mixed_images_or_channels(ev, answer, reference, images, P):
    """A symptom when `answer` is right on one image at a time but not on the batch (images mixed), or right on
    one channel but not on C > 1 (channels mixed with pixels), else None."""
    def right(x):
        try:
            out = ev.call(answer, x, P)
        except ExerciseError:
            return False
        return hasattr(out, "shape") and tuple(out.shape) == tuple(reference(x, P).shape) and torch.equal(
            torch.as_tensor(out), reference(x, P))
    B, C, H, W = images.shape
    if B > 1 and all(right(images[b:b + 1]) for b in range(B)):
        return (f"your patchify is right on one image at a time but not on a batch of B = {B}: the images are mixed. "
                "Keep the batch as the first axis of every reshape and permute, (B, C, H/P, P, W/P, P), and never "
                "merge it with another axis (reshape(-1, ...) does).")
    if C > 1 and right(images[:, :1]):
        return (f"your patchify is right on a grey image (C = 1) but not with C = {C} channels: the channels are "
                "mixed with the pixels. A reshape does not move an axis: bring the channels last with permute "
                "(B, C, H, W) -> (B, H, W, C) before splitting the rows and columns, or after.")
    return None


def patch_errors(B, C, H, W, P):
    """A reshape that asks for more or fewer values than the images hold, named with the sizes it should use."""
    return [(r"shape '\[[\d, ]+\]' is invalid for input of size (\d+)",
             f"a reshape's sizes do not multiply to the B·C·H·W = {B * C * H * W} values of the images: images are "
             f"(B, C, H, W), channels second; split them as (B, C, H/P, P, W/P, P) and make the patches (B, N, "
             f"P·P·C) = ({B}, {(H // P) * (W // P)}, {P * P * C}), each size from its own axis")]


def patch_shape_symptom(out, B, N, D, H, W, P):
    """A symptom for patches of a known wrong shape, else None."""
    shape = tuple(out.shape)
    if shape == (B, D, N) and N != D:
        return (f"the patches have shape {shape}, expected (B, N, P·P·C) = {(B, N, D)}: one row per patch, with "
                "its P·P·C values along the last axis (the last two axes are swapped).")
    if shape[:1] == (B,) and len(shape) > 3 and math.prod(shape[1:]) == N * D:
        if shape[1:3] == (H // P, W // P) and math.prod(shape[3:]) == D:
            return (f"the patches have shape {shape}: the grid of patches is not merged into one axis; the result "
                    f"is (B, N, P·P·C) = {(B, N, D)}, patch n = r·(W/P) + c.")
        return (f"the patches have shape {shape}: each patch should be flattened into one vector of P·P·C = {D} "
                f"values, (B, N, P·P·C) = {(B, N, D)}.")
    if len(shape) == 3 and shape[0] == B and shape[2] == D and shape[1] < N:
        return (f"there are {shape[1]} patches, expected (H/P)·(W/P) = {H // P}·{W // P} = {N}: a row or a column of "
                "patches is missing (range(0, H − P, P) stops one patch early; range(0, H, P) reaches the last one).")
    if len(shape) == 3 and shape[0] == B and shape[1] * shape[2] == N * D and shape[1] != N:
        return (f"the patches have shape {shape}, expected (B, N, P·P·C) = {(B, N, D)}: P = {P} is the side of a "
                f"patch in pixels, so an image of {H}×{W} pixels holds (H/P)·(W/P) = {N} patches of P·P·C = {D} "
                "values each.")
    if shape == (N, D) and B > 1:
        return (f"the patches have shape {shape}: the batch axis is missing; patchify gets B = {B} images and "
                f"returns (B, N, P·P·C) = {(B, N, D)}.")
    return None
