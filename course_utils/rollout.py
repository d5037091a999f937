"""Attention rollout and the deletion test (lesson 14; Abnar & Zuidema 2020, "Quantifying Attention Flow in
Transformers"), on lesson 11's Vision Transformer.

    R = attention_rollout(maps)                     # maps (N, B, h, T, T) -> (B, T, T): N layers
    maps = vit_attention(vit, images)               # (N, B, h, 1+P, 1+P): every layer, [CLS] first
    scores = patch_scores(vit, images, "rollout")   # (B, P): how much each of the P patches matters
    curve = deletion_curve(vit, images, labels, scores)   # accuracy with the 0, 1, ..., P top-ranked patches erased

A layer's attention A (mean over its heads) mixes the tokens, but the residual connection carries each
token's own state past it too: Abnar & Zuidema model a layer as Ã = 0.5 I + 0.5 A (rows renormalised) and
follow the information from the input up through the stack by multiplying the layers' matrices,

    R = Ã_N Ã_{N-1} ... Ã_1      (N layers; row i of R: how much of token i's final state comes from each input)

The rankings of the deletion test: "raw attention" (the last layer's [CLS] row, mean over heads), "rollout"
([CLS]'s row of R), "input x gradient" (Σ over a patch's pixels of x · ∂logit/∂x for the predicted class: the
first-order estimate of what erasing the patch, setting it to 0, takes from that logit), and "random".
"""
import torch

from .vision import patchify

__all__ = ["attention_rollout", "vit_attention", "patch_scores", "erase_patches", "deletion_curve", "RANKINGS"]

RANKINGS = ("raw attention", "rollout", "input x gradient", "random")


def attention_rollout(maps, residual=0.5):
    """maps (N, B, h, T, T), rows summing to 1 -> R (B, T, T) = Ã_N ... Ã_1, Ã_l = residual·I + (1 - residual)·
    mean over heads of maps[l], each row renormalised to sum to 1."""
    if maps.dim() != 5 or maps.size(-1) != maps.size(-2):
        raise ValueError(f"maps must be (layers, B, heads, T, T), got {tuple(maps.shape)}")
    eye = torch.eye(maps.size(-1), dtype=maps.dtype, device=maps.device)
    rollout = None
    for layer in maps:                                             # layer 1 first: (B, h, T, T)
        a = residual * eye + (1 - residual) * layer.mean(1)         # (B, T, T)
        a = a / a.sum(-1, keepdim=True)
        rollout = a if rollout is None else a @ rollout             # Ã_l (Ã_{l-1} ... Ã_1)
    return rollout


@torch.no_grad()
def vit_attention(vit, images):
    """(N, B, h, 1+P, 1+P): every encoder layer's attention weights on `images` (eval mode; token 0 = [CLS])."""
    was_training = vit.training
    vit.eval()
    vit.store_attention(True)
    try:
        vit(images)
        return torch.stack([layer.self_attn.attn_weights.float() for layer in vit.encoder.layers])
    finally:
        vit.store_attention(False)
        vit.train(was_training)


def _input_x_gradient(vit, images):
    """(B, P): Σ over each patch's pixels of x · ∂(logit of the predicted class)/∂x."""
    was_training = vit.training
    vit.eval()
    x = images.clone().requires_grad_(True)
    logits = vit(x)
    chosen = logits.gather(1, logits.argmax(1, keepdim=True)).sum()
    (grad,) = torch.autograd.grad(chosen, x)
    vit.train(was_training)
    return patchify((x * grad).detach(), vit.patch_size).sum(-1)   # (B, N)


def patch_scores(vit, images, ranking, generator=None):
    """(B, P): each patch's score under `ranking` (one of RANKINGS); the deletion test erases the highest first."""
    if ranking == "raw attention":
        return vit_attention(vit, images)[-1].mean(1)[:, 0, 1:]     # the last layer, [CLS]'s row, the patches
    if ranking == "rollout":
        return attention_rollout(vit_attention(vit, images))[:, 0, 1:]
    if ranking == "input x gradient":
        return _input_x_gradient(vit, images)
    if ranking == "random":
        return torch.rand(images.size(0), vit.num_patches, generator=generator)
    raise ValueError(f"ranking must be one of {RANKINGS}, got {ranking!r}")


def erase_patches(images, patches, patch_size):
    """images (B, C, H, W) with the patches `patches` (B, k) (row-major patch indices) set to 0."""
    B, C, H, W = images.shape
    cols = W // patch_size
    keep = torch.ones(B, H // patch_size, cols, dtype=images.dtype, device=images.device)
    rows = torch.arange(B, device=images.device)[:, None].expand_as(patches)
    keep[rows, patches // cols, patches % cols] = 0
    keep = keep.repeat_interleave(patch_size, 1).repeat_interleave(patch_size, 2)   # (B, H, W)
    return images * keep[:, None]


@torch.no_grad()
def deletion_curve(vit, images, labels, scores):
    """[accuracy with the k highest-scoring patches of each image erased, for k = 0 .. P]."""
    was_training = vit.training
    vit.eval()
    order = scores.argsort(dim=1, descending=True)                 # (B, P): the most important first
    curve = []
    for k in range(order.size(1) + 1):
        erased = erase_patches(images, order[:, :k], vit.patch_size)
        curve.append(float((vit(erased).argmax(-1) == labels).float().mean()))
    vit.train(was_training)
    return curve
