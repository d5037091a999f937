"""The known mistakes of lesson 11's exercise 3, `patchify` (the Vision Transformer's patches), each with the wrong
answer that shows it.

`patches_in_order(images, P, ...)` reads the patches in a given order (the reference, or one of the orders a learner
mixes up); the other wrong answers are written out. The check computes a mistake's patches by running its answer."""
import functools

import numpy as np
import torch

from ...vision import patchify as reference
from ..core import Mistake, Mistakes
from ..torch_errors import FLOAT_SIZE, RESHAPE, VIEW
from .float64 import dtype_changed


def patches_in_order(images, P, patch_order="rows", pixel_order="rows", channels="last"):
    """Patches (B, N, P·P·C) read in a given order: patch_order, pixel_order "rows" (the right one) or "columns";
    channels "last" (the right one), "first" or "middle" (between a pixel's two axes)."""
    B, C, H, W = images.shape
    x = images.reshape(B, C, H // P, P, W // P, P)                     # (B, ch, r, i, c, j)
    grid = (2, 4) if patch_order == "rows" else (4, 2)                 # (r, c) or (c, r)
    pixel = (3, 5) if pixel_order == "rows" else (5, 3)                # (i, j) or (j, i)
    order = {"last": (0, *grid, *pixel, 1), "first": (0, *grid, 1, *pixel),
             "middle": (0, *grid, pixel[0], 1, pixel[1])}[channels]
    return x.permute(*order).reshape(B, (H // P) * (W // P), P * P * C)


def _sizes(images, P):
    B, C, H, W = images.shape
    return B, C, H, W, (H // P) * (W // P), P * P * C                  # ..., N, P·P·C


def _strided(images, P):
    """Each side split as (P, H/P): a "patch" gathers pixels H/P rows and W/P columns apart."""
    B, C, H, W, N, D = _sizes(images, P)
    return images.reshape(B, C, P, H // P, P, W // P).permute(0, 3, 5, 2, 4, 1).reshape(B, N, D)


def _inside_first(images, P):
    B, C, H, W, N, D = _sizes(images, P)
    return images.reshape(B, C, H // P, P, W // P, P).permute(0, 3, 5, 2, 4, 1).reshape(B, N, D)


def _overlapping(images, P):
    """Patch (r, c) cut at row r and column c, not r·P and c·P."""
    B, C, H, W, N, D = _sizes(images, P)
    return torch.stack([images[:, :, r:r + P, c:c + P].permute(0, 2, 3, 1).reshape(B, D)
                        for r in range(H // P) for c in range(W // P)], 1)


def _channels_in_front(images, P):
    """Tensor.unfold on both sides, (B, C, H/P, W/P, P, P), flattened with the channel axis still in front."""
    B, C, H, W, N, D = _sizes(images, P)
    return images.unfold(2, P, P).unfold(3, P, P).reshape(B, N, D)


def _h_w_swapped(images, P):
    B, C, H, W, N, D = _sizes(images, P)
    return images.reshape(B, C, W // P, P, H // P, P).permute(0, 2, 4, 3, 5, 1).reshape(B, N, D)


def _square_only(images, P):
    """The patch-columns counted with H // P too: right on square images only."""
    B, C, H, W, N, D = _sizes(images, P)
    x = images.reshape(B, C, H // P, P, H // P, P).permute(0, 2, 4, 3, 5, 1)
    return x.reshape(B, (H // P) ** 2, D)


def _batch_mixed(images, P):
    """The batch and the channels exchanged in the first reshape: right for one image at a time."""
    B, C, H, W, N, D = _sizes(images, P)
    return images.reshape(C, B, H // P, P, W // P, P).permute(1, 2, 4, 3, 5, 0).reshape(B, N, D)


def _channels_last(images, P):
    """The images read as (B, H, W, C): right for grey images only."""
    B, C, H, W, N, D = _sizes(images, P)
    return images.reshape(B, H // P, P, W // P, P, C).permute(0, 1, 3, 2, 4, 5).reshape(B, N, D)


def _missing_patches(images, P):
    """The patches cut in a loop whose ranges stop one patch early."""
    B, C, H, W, N, D = _sizes(images, P)
    return torch.stack([images[:, :, r:r + P, c:c + P].permute(0, 2, 3, 1).reshape(B, D)
                        for r in range(0, H - P, P) for c in range(0, W, P)], 1)


def _float32(images, P):
    """The patches copied into torch.zeros (float32 whatever the images' dtype)."""
    B, C, H, W, N, D = _sizes(images, P)
    out = torch.zeros(B, N, D)
    out[:] = reference(images, P)
    return out


def _through_numpy(images, P):
    B, C, H, W, N, D = _sizes(images, P)
    x = images.numpy().reshape(B, C, H // P, P, W // P, P).transpose(0, 2, 4, 3, 5, 1)
    return torch.from_numpy(np.ascontiguousarray(x).reshape(B, N, D))


_MIXES = ("a reshape mixes {what}: {layout} taken straight to (B, N, P·P·C) reads runs of consecutive {runs}, not P×P "
          "squares; each side splits into (which patch, where inside it), and the two patch axes come together before "
          "flattening")
_SPLIT = "images.reshape(B, C, H // P, P, W // P, P).permute(0, 2, 4, 3, 5, 1).reshape(B, N, P * P * C)"
M = Mistakes(
    # --- the values ---
    Mistake("column_order", "the patches are read in column order: patch n is the one in patch-row n // (W/P), "
            "patch-column n % (W/P) (left to right, then the next row of patches)",
            hint="the patch-row axis before the patch-column axis: permute(0, 2, 4, 3, 5, 1)",
            shows=functools.partial(patches_in_order, patch_order="columns")),
    Mistake("channels_first", "each patch is flattened channel by channel, (C, P, P) (the order of F.unfold and of "
            "a convolution's weights); the convention here is (P, P, C): pixel by pixel, the C channels of one pixel "
            "side by side", hint="move the channel axis last before flattening: permute(0, 2, 4, 3, 5, 1)",
            shows=functools.partial(patches_in_order, channels="first")),
    Mistake("pixels_by_column", "the pixels inside a patch are read column by column: each patch is flattened row by "
            "row, (i, j, channel) with i the row inside the patch", hint=_SPLIT,
            shows=functools.partial(patches_in_order, pixel_order="columns")),
    Mistake("pixels_by_column_channels_first", "the pixels inside a patch are read column by column and channel by "
            "channel: each patch is flattened as (P, P, C), row by row, the channels last", hint=_SPLIT,
            shows=functools.partial(patches_in_order, pixel_order="columns", channels="first")),
    Mistake("transposed_image", "these are the patches of the transposed image: the patches come column by column, "
            "and so do the pixels inside each. Images are (B, C, H, W), rows first: H splits into (H/P, P) and W into "
            "(W/P, P)", hint="no images.transpose(2, 3)",
            shows=functools.partial(patches_in_order, patch_order="columns", pixel_order="columns")),
    Mistake("strided", "each \"patch\" gathers pixels H/P rows and W/P columns apart, not a P×P square: a side of "
            "length H splits as (H/P, P), which patch first and where inside it second; (P, H/P) interleaves the "
            "patches", hint="reshape(B, C, H // P, P, W // P, P)", shows=_strided),
    Mistake("inside_axes_first", "the axes inside a patch come before the patch axes: (which patch-row, which "
            "patch-column) come first, then (row, column, channel) inside the patch",
            hint="permute(0, 2, 4, 3, 5, 1), not permute(0, 3, 5, 2, 4, 1)", shows=_inside_first),
    Mistake("overlapping", "the patches overlap: patch (r, c) starts at row r·P and column c·P, not at row r and "
            "column c", hint="images[..., r*P:(r+1)*P, c*P:(c+1)*P]", shows=_overlapping),
    Mistake("reshape_bhwc", _MIXES.format(what="rows of different patches", layout="(B, H, W, C)",
                                          runs="pixels along the image's rows"), hint=_SPLIT,
            shows=lambda images, P: images.permute(0, 2, 3, 1).reshape(*_sizes(images, P)[:1], *_sizes(images, P)[4:])),
    Mistake("reshape_bchw", _MIXES.format(what="rows of different patches", layout="(B, C, H, W)",
                                          runs="values along one channel's rows"), hint=_SPLIT,
            shows=lambda images, P: images.reshape(*_sizes(images, P)[:1], *_sizes(images, P)[4:])),
    Mistake("channels_in_front", "a reshape mixes different patches: the grid (B, C, H/P, W/P, P, P) was flattened "
            "with the channel axis still in front, so each row holds pieces of several patches of one channel; the "
            "channel axis goes last, after the pixel axes, before flattening", hint="permute(0, 2, 3, 4, 5, 1) first",
            shows=_channels_in_front),
    Mistake("channel_between_rows", "each patch is flattened in (i, C, j) order (row, channel, column), the channel "
            "axis between a pixel's row and column: it is (P, P, C), the C channels of one pixel side by side",
            hint="move the channel axis last before flattening: permute(0, 2, 4, 3, 5, 1)",
            shows=functools.partial(patches_in_order, channels="middle")),
    Mistake("channel_between_columns", "each patch is flattened in (j, C, i) order (column, channel, row): it is "
            "(P, P, C), row i, column j, then the C channels of that pixel side by side",
            hint="move the channel axis last before flattening: permute(0, 2, 4, 3, 5, 1)",
            shows=functools.partial(patches_in_order, pixel_order="columns", channels="middle")),
    Mistake("h_w_swapped", "H and W are swapped: images are (B, C, H, W), rows first; H (the rows) splits into "
            "(H/P, P) and W (the columns) into (W/P, P)", hint=_SPLIT, shows=_h_w_swapped),
    # --- properties the values fail ---
    Mistake("square_only", "your patchify is right on square images but not on images of H = {H} rows and W = {W} "
            "columns: a size of one side is used for the other; the rows split as (H/P, P) and the columns as "
            "(W/P, P), each with its own size", hint="H // P patch-rows, W // P patch-columns", shows=_square_only),
    Mistake("batch_mixed", "your patchify is right on one image at a time but not on a batch of B = {B}: the images "
            "are mixed; the batch stays the first axis of every reshape and permute, never merged with another",
            hint="(B, C, H/P, P, W/P, P): no reshape(-1, ...) across the batch", shows=_batch_mixed),
    Mistake("channels_mixed", "your patchify is right on a grey image (C = 1) but not with C = {C} channels: the "
            "channels are mixed with the pixels; a reshape does not move an axis, the channels come last by a permute",
            hint="(B, C, H, W) -> (B, H, W, C) with permute(0, 2, 3, 1), before splitting the sides or after",
            shows=_channels_last),
    # --- shapes ---
    Mistake("patches_transposed", "the patches have shape {shape}, expected (B, N, P·P·C) = {expected}: one row per "
            "patch, its P·P·C values along the last axis (the last two axes are swapped)",
            shows=lambda images, P: reference(images, P).transpose(1, 2)),
    Mistake("grid_not_merged", "the patches have shape {shape}: the grid of patches is not merged into one axis; the "
            "result is (B, N, P·P·C) = {expected}, patch n = r·(W/P) + c",
            shows=lambda images, P: reference(images, P).reshape(images.shape[0], images.shape[2] // P, -1,
                                                                 P * P * images.shape[1])),
    Mistake("patch_not_flattened", "the patches have shape {shape}: each patch is flattened into one vector of P·P·C "
            "= {D} values, (B, N, P·P·C) = {expected}",
            shows=lambda images, P: reference(images, P).reshape(*reference(images, P).shape[:2], P, P, -1)),
    Mistake("missing_patches", "there are {got} patches, expected (H/P)·(W/P) = {N}: a row or a column of patches is "
            "missing", hint="range(0, H, P) reaches the last patch; range(0, H - P, P) stops one early",
            shows=_missing_patches),
    Mistake("too_many_patches", "there are {got} patches, expected (H/P)·(W/P) = {N}: the patches do not overlap, "
            "each starts P pixels after the one before it",
            hint="a stride of P: Tensor.unfold(2, P, P), range(0, H, P)",
            shows=lambda images, P: images.unfold(2, P, 1).unfold(3, P, 1).permute(0, 2, 3, 4, 5, 1).reshape(
                images.shape[0], -1, P * P * images.shape[1])),
    Mistake("batch_merged", "the patches have shape {shape}: the batch and the patches share one axis; patchify gets "
            "B = {B} images and returns (B, N, P·P·C) = {expected}", hint="reshape(B, N, P * P * C), not reshape(-1, "
            "P * P * C)", shows=lambda images, P: reference(images, P).reshape(-1, P * P * images.shape[1])),
    Mistake("patch_size_confused", "the patches have shape {shape}, expected (B, N, P·P·C) = {expected}: P = {P} is "
            "the side of a patch in pixels, so an image of {H}×{W} pixels holds (H/P)·(W/P) = {N} patches of P·P·C = "
            "{D} values each", shows=lambda images, P: reference(images, P).reshape(images.shape[0], -1, P * P)),
    Mistake("no_batch_axis", "the patches have shape {shape}: the batch axis is missing; patchify gets B = {B} images "
            "and returns (B, N, P·P·C) = {expected}", shows=lambda images, P: reference(images, P)[0]),
    # --- crashes ---
    Mistake("view_after_transpose", "a view cannot follow a transpose or a permute: the values are no longer laid out "
            "in that order in memory", hint="use .reshape() there (or .contiguous().view())",
            shows=lambda images, P: images.reshape(images.shape[0], images.shape[1], images.shape[2] // P, P, -1, P)
            .permute(0, 2, 4, 3, 5, 1).view(images.shape[0], -1, P * P * images.shape[1])),
    Mistake("size_float", "a size is a float (H / P is one in Python 3, even when P divides H): sizes are ints",
            hint="H // P", shows=lambda images, P: reference(images, P).reshape(
                images.shape[0], images.shape[2] / P * images.shape[3] / P, -1)),
    Mistake("reshape_sizes", "a reshape's sizes do not multiply to the B·C·H·W = {total} values of the images: images "
            "are (B, C, H, W), channels second; they split as (B, C, H/P, P, W/P, P), and the patches are (B, N, "
            "P·P·C) = {expected}, each size from its own axis", hint=_SPLIT,
            shows=lambda images, P: images.reshape(images.shape[0], images.shape[2] // P, P, images.shape[3] // P, P,
                                                   images.shape[1] + 1)),
    # --- float64 and gradients ---
    dtype_changed(shows=_float32),
    Mistake("leaves_torch", "patchify fails on images that require gradients: it leaves torch ({error}); with torch "
            "operations only it also runs on a GPU and inside autograd", hint="reshape and permute, no .numpy()",
            shows=_through_numpy),
    Mistake("grad_cut", "no gradient reaches the images: patchify cuts them from the graph; it is reshapes and "
            "permutes only", hint="no .detach(), .numpy() or .data",
            shows=lambda images, P: reference(images.detach(), P)),
)
VALUES = [M[key] for key in ("column_order", "channels_first", "pixels_by_column", "pixels_by_column_channels_first",
                             "transposed_image", "strided", "inside_axes_first", "overlapping", "reshape_bhwc",
                             "reshape_bchw", "channels_in_front", "channel_between_rows", "channel_between_columns",
                             "h_w_swapped")]


def crashes(B, C, H, W, P):
    """The crashes of the typical slips, named (for crashes.call)."""
    N, D = (H // P) * (W // P), P * P * C
    return [(VIEW, M.view_after_transpose), (FLOAT_SIZE, M.size_float),
            (RESHAPE, M.reshape_sizes.at(total=B * C * H * W, expected=(B, N, D)))]


def shape_symptom(out, B, C, H, W, P):
    """The mistake a known wrong shape of the patches comes from, or None."""
    shape, N, D = tuple(out.shape), (H // P) * (W // P), P * P * C
    fields = dict(shape=shape, expected=(B, N, D), B=B, N=N, D=D, H=H, W=W, P=P)
    if shape == (B, D, N) and N != D:
        return M.patches_transposed.at(**fields)
    if shape[:1] == (B,) and len(shape) > 3 and int(np.prod(shape[1:])) == N * D:
        if shape[1:3] == (H // P, W // P) and int(np.prod(shape[3:])) == D:
            return M.grid_not_merged.at(**fields)
        return M.patch_not_flattened.at(**fields)
    if len(shape) == 3 and shape[0] == B and shape[2] == D and shape[1] < N:
        return M.missing_patches.at(got=shape[1], **fields)
    if len(shape) == 3 and shape[0] == B and shape[2] == D and shape[1] > N:
        return M.too_many_patches.at(got=shape[1], **fields)
    if len(shape) == 3 and shape[0] == B and shape[1] * shape[2] == N * D and shape[1] != N:
        return M.patch_size_confused.at(**fields)
    if shape == (N, D) and B > 1:
        return M.no_batch_axis.at(**fields)
    if shape == (B * N, D) and B > 1:
        return M.batch_merged.at(**fields)
    return None
