"""Lesson 11, exercise 3: the Vision Transformer's patches.

    patchify(images (B, C, H, W), P) -> (B, N, P·P·C),  N = (H/P)·(W/P)

patches in row-major order (patch n = r·(W/P) + c), each flattened in (P, P, C) order (pixel by pixel, the C channels
of one pixel side by side). The check runs a grid of patches that is not square (H ≠ W, so that rows and columns
differ) with C > 1 (the channel order shows), another, then grey square images like the lesson's digits; it names a
known wrong shape, a known wrong order, and an answer right on square images, on one image at a time or on one
channel only; then the first patch by hand, float64 images (the dtype kept) and images that require gradients.
"""
import functools

import torch
import torch.nn.functional as F

from ...vision import patchify as reference
from ..core import ExerciseError, exercise, expect, expect_shape, randn, single_threaded
from ..evaluation import Evaluation
from ..expectations import explained
from .crashes import call, raised
from .float64 import expect_dtype
from .patchify_mistakes import VALUES, M, crashes, shape_symptom


def _square_only(ev: Evaluation, answer, B, C, H, W, P):
    """M.square_only when `answer`, wrong (or failing) on images of H ≠ W, is right on square images of either side."""
    if H == W:
        return None
    for side in (H, W):
        images = randn(ev.rng(147), B, C, side, side)
        if not _right(ev, answer, images, P):
            return None
    return M.square_only.at(H=H, W=W)


def _right(ev: Evaluation, answer, images, P):
    try:
        out = ev.call(answer, images, P)
    except ExerciseError:
        return False
    want = reference(images, P)
    return hasattr(out, "shape") and tuple(out.shape) == tuple(want.shape) and torch.equal(torch.as_tensor(out), want)


def _mixed(ev: Evaluation, answer, images, P):
    """M.batch_mixed when `answer` is right on one image at a time but not on the batch; M.channels_mixed when it is
    right on one channel but not on C > 1; else None."""
    B, C, H, W = images.shape
    if B > 1 and all(_right(ev, answer, images[b:b + 1], P) for b in range(B)):
        return M.batch_mixed.at(B=B)
    if C > 1 and _right(ev, answer, images[:, :1], P):
        return M.channels_mixed.at(C=C)
    return None


def _with_unfold(images, P):
    """F.unfold, then the channels moved last."""
    B, C, H, W = images.shape
    cols = F.unfold(images, kernel_size=P, stride=P)                     # (B, C·P·P, N)
    return cols.view(B, C, P * P, -1).permute(0, 3, 2, 1).reshape(B, -1, P * P * C)


def _with_loops(images, P):
    B, C, H, W = images.shape
    rows = [images[:, :, r:r + P, c:c + P].permute(0, 2, 3, 1).reshape(B, -1)
            for r in range(0, H, P) for c in range(0, W, P)]
    return torch.stack(rows, dim=1)


@exercise("patchify (the ViT's patches)", reference=reference, mistakes=M, right=[_with_unfold, _with_loops])
@single_threaded
def patchify(ev: Evaluation, answer):
    """answer(images (B, C, H, W), P) -> (B, N, P·P·C)."""
    tests = 0
    for seed, (B, C, H, W, P) in enumerate([(2, 3, 4, 6, 2), (1, 2, 6, 9, 3), (3, 1, 8, 8, 4)]):
        images = randn(ev.rng(140 + seed), B, C, H, W)
        N, D = (H // P) * (W // P), P * P * C
        square = functools.partial(_square_only, ev, answer, B, C, H, W, P)
        try:
            out = call(ev, answer, images, P, errors=crashes(B, C, H, W, P))
        except ExerciseError:
            expect(square() is None, square())
            raise
        if hasattr(out, "shape") and tuple(out.shape) != (B, N, D):
            symptom = shape_symptom(out, B, C, H, W, P)
            expect(symptom is None, symptom)
        expect_shape(out, (B, N, D), f"the patches of images {(B, C, H, W)} with P = {P} (B, N = (H/P)·(W/P), P·P·C)")
        with explained(square, functools.partial(_mixed, ev, answer, images, P)):
            ev.expect_close(out, reference(images, P), "the patches", mistakes=M.variants(VALUES, images, P),
                            atol=0, rtol=0)
        tests += 1
    images = randn(ev.rng(149), 1, 2, 4, 4)           # the first patch, by hand: its top-left pixel's channels first
    out = call(ev, answer, images, 2, errors=crashes(1, 2, 4, 4, 2))
    ev.expect_close(out[0, 0, :2], images[0, :, 0, 0], "the first two values of patch 0 (the channels of pixel (0, 0))",
                    atol=0, rtol=0)
    _edges(ev, answer)
    return tests + 2


def _edges(ev: Evaluation, answer):
    """float64 images give float64 patches; images that require gradients get them back through the patches."""
    images = randn(ev.rng(148), 2, 3, 4, 6).double()
    out = call(ev, answer, images, 2, errors=crashes(2, 3, 4, 6, 2))
    expect_dtype(out, "patches", M)
    ev.expect_close(out, reference(images, 2), "the patches in float64", atol=0, rtol=0)
    images = images.clone().requires_grad_()
    try:
        out = ev.call(answer, images, 2)
    except ExerciseError as error:
        expect(False, M.leaves_torch.at(error=raised(error)))
    expect(getattr(out, "requires_grad", False), M.grad_cut)
