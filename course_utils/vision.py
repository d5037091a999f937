"""Attention over images (lesson 11): SAGAN's self-attention in a CNN, and the Vision Transformer.

    attn = SelfAttention2d(channels=32)            # y = x + γ·o, γ a learned scalar that starts at 0
    y = attn(x)                                    # x, y: (B, C, H, W)
    attn.attn_weights                              # (B, N, N), N = H·W: row j = where pixel j looks
    model = SmallCNN(num_classes=10, channels=16, attention=True)
    logits = model(images)                         # images: (B, 1, H, W) -> (B, num_classes)
    patches = patchify(images, patch_size=2)       # (B, C, H, W) -> (B, N, P·P·C), N = (H/P)·(W/P)
    conv = patch_embedding_conv(vit.patch_embed, patch_size=2)   # the same map as a strided nn.Conv2d
    vit = ViT(image_size=8, patch_size=2, num_classes=10)   # patches + [CLS] + positions -> lesson 09's encoder
    X_train, y_train, X_test, y_test = load_digits_split()   # scikit-learn's 8×8 digits, no download

SAGAN (Zhang et al., ICML 2019, section 3): keys f(x) = W_f x, queries g(x) = W_g x, values
h(x) = W_h x, and an output map v(·) = W_v ·, each a 1×1 convolution (the same matrix applied to the
channel vector of every pixel); W_f, W_g, W_h are (C̄, C) and W_v is (C, C̄), with C̄ = C/8 in the paper.
o_j = W_v Σ_i α_{j,i} h(x_i), y = x + γ·o. Unlike the paper, the scores are divided by √d_key: the
attention is the course's `scaled_dot_product_attention` (course_utils.attention), with pixels for tokens.

ViT (Dosovitskiy et al., ICLR 2021): the image is cut into P×P patches, each flattened (in (P, P, C)
order) and mapped by one linear layer E to d_model; a learned [CLS] vector is put first, learned
positions are added, and the encoder of lesson 09 (`course_utils.transformer.Encoder`, pre-norm, with
its final LayerNorm) runs over the N + 1 tokens; a linear layer on the [CLS] output gives the logits.
"""
import numpy as np
import torch
import torch.nn as nn

from .attention import (
    LearnedPositionalEncoding,
    MultiHeadAttention,
    scaled_dot_product_attention,
    store_attention_weights,
)
from .transformer import Encoder


def conv1x1(x, W):
    """A 1×1 convolution with weight matrix W (C_out, C): the same linear map at every pixel."""
    if x.dim() != 4:
        raise ValueError(f"x should be a feature map of shape (B, C, H, W), got shape {tuple(x.shape)}")
    if W.dim() != 2 or W.shape[1] != x.shape[1]:
        raise ValueError(f"W should have shape (C_out, {x.shape[1]}) for x with {x.shape[1]} channels, "
                         f"got shape {tuple(W.shape)}")
    return torch.einsum("oc,bchw->bohw", W, x)   # (B, C_out, H, W)


def self_attention_2d(x, W_f, W_g, W_h, W_v):
    """SAGAN's attention over all H·W positions of the feature map x (B, C, H, W).

    keys f = W_f x and queries g = W_g x (W_f, W_g: (d_key, C)), values h = W_h x (W_h: (C̄, C)), and
    the output map W_v (C_out, C̄) applied to each position's read-out: o_j = W_v Σ_i α_{j,i} h(x_i).
    Returns o (B, C_out, H, W) and weights (B, N, N), N = H·W, where weights[b, j, i] is how much
    position j (the query, row-major index j = row·W + col) attends to position i; rows sum to 1.
    """
    if x.dim() != 4:
        raise ValueError(f"x should be a feature map of shape (B, C, H, W), got shape {tuple(x.shape)}")
    if W_v.dim() != 2 or W_v.shape[1] != W_h.shape[0]:
        raise ValueError(f"W_v should have shape (C_out, {W_h.shape[0]}): it maps the C̄ = {W_h.shape[0]} "
                         f"channels of the values back, got shape {tuple(W_v.shape)}")
    B, C, height, width = x.shape
    k = conv1x1(x, W_f).flatten(2).transpose(1, 2)              # (B, N, d_key)
    q = conv1x1(x, W_g).flatten(2).transpose(1, 2)              # (B, N, d_key)
    v = conv1x1(x, W_h).flatten(2).transpose(1, 2)              # (B, N, C̄)
    read, weights = scaled_dot_product_attention(q, k, v, need_weights=True)   # (B, N, C̄), (B, N, N)
    read = read.transpose(1, 2).reshape(B, -1, height, width)   # (B, C̄, H, W)
    return conv1x1(read, W_v), weights                          # (B, C_out, H, W), (B, N, N)


class SelfAttention2d(nn.Module):
    """SAGAN's self-attention block: y = x + γ·o, o_j = W_v Σ_i α_{j,i} W_h x_i, γ learned, initialised at 0.

    f, g (keys, queries): C -> d_key; h (values): C -> d_value; v (output): d_value -> C; all 1×1
    convolutions without bias. The paper uses d_key = d_value = C̄ = C/8 (the default here).
    """

    def __init__(self, channels, d_key=None, d_value=None):
        super().__init__()
        d_key = max(channels // 8, 1) if d_key is None else int(d_key)
        d_value = max(channels // 8, 1) if d_value is None else int(d_value)
        self.f = nn.Conv2d(channels, d_key, kernel_size=1, bias=False)     # keys
        self.g = nn.Conv2d(channels, d_key, kernel_size=1, bias=False)     # queries
        self.h = nn.Conv2d(channels, d_value, kernel_size=1, bias=False)   # values
        self.v = nn.Conv2d(d_value, channels, kernel_size=1, bias=False)   # output: back to C channels
        self.gamma = nn.Parameter(torch.zeros(1))   # 0 at first: the block starts as the identity
        self.attn_weights = None

    def forward(self, x):
        if x.dim() != 4 or x.shape[1] != self.f.in_channels:
            raise ValueError(f"SelfAttention2d expects x of shape (B, {self.f.in_channels}, H, W), "
                             f"got shape {tuple(x.shape)}")
        o, weights = self_attention_2d(x, self.f.weight[:, :, 0, 0], self.g.weight[:, :, 0, 0],
                                       self.h.weight[:, :, 0, 0], self.v.weight[:, :, 0, 0])
        self.attn_weights = weights.detach()          # (B, N, N)
        return x + self.gamma * o                     # (B, C, H, W)


class SmallCNN(nn.Module):
    """Two 3×3 convolutions, optionally SAGAN self-attention, then average pooling and a linear layer.

    d_value: the channels of the attention's values (default C/8, the paper's C̄; the authors' code uses C/2).

    Without attention, each pixel of the last feature map has seen only a 5×5 patch of the input, and
    the average pooling turns the image into a bag of such patches; with attention, every pixel can
    first gather features from the whole image.
    """

    def __init__(self, num_classes=10, channels=16, attention=True, in_channels=1, d_value=None):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, channels, 3, padding=1), nn.ReLU(),
            nn.Conv2d(channels, channels, 3, padding=1), nn.ReLU())
        self.attention = SelfAttention2d(channels, d_value=d_value) if attention else None
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(channels, num_classes))

    def forward(self, images):                        # (B, in_channels, H, W)
        x = self.features(images)                     # (B, channels, H, W)
        if self.attention is not None:
            x = self.attention(x)                     # (B, channels, H, W)
        return self.head(x)                           # (B, num_classes)


def _pair(size, what):
    """An int or a pair (H, W) -> (H, W), positive ints."""
    pair = (size, size) if isinstance(size, (int, np.integer)) else tuple(size)
    if len(pair) != 2 or not all(isinstance(n, (int, np.integer)) and n > 0 for n in pair):
        raise ValueError(f"{what} should be a positive int or a pair (H, W) of them, got {size!r}")
    return int(pair[0]), int(pair[1])


def _check_patches(height, width, patch_size):
    if not isinstance(patch_size, (int, np.integer)) or patch_size < 1:
        raise ValueError(f"patch_size should be a positive int, got {patch_size!r}")
    if height % patch_size or width % patch_size:
        raise ValueError(f"an image of {height}×{width} pixels cannot be cut into {patch_size}×{patch_size} "
                         f"patches: both sides must be multiples of the patch size (pad or crop the images, or "
                         f"choose a patch size that divides {height} and {width})")


def patchify(images, patch_size):
    """Cut images (B, C, H, W) into P×P patches: (B, N, P·P·C), N = (H/P)·(W/P).

    Patches in row-major order: patch n = r·(W/P) + c covers rows r·P..r·P+P-1 and columns c·P..c·P+P-1.
    Within a patch, features in (P, P, C) order, channels fastest: feature (i·P + j)·C + ch is the
    pixel at row i, column j of the patch, channel ch (the ViT paper's x_p ∈ R^{N×(P²·C)}).
    """
    if not torch.is_tensor(images) or images.dim() != 4:
        raise ValueError(f"images should be a tensor of shape (B, C, H, W), got "
                         f"{tuple(images.shape) if torch.is_tensor(images) else type(images).__name__}")
    B, C, H, W = images.shape
    P = patch_size
    _check_patches(H, W, P)
    x = images.reshape(B, C, H // P, P, W // P, P)          # (B, C, H/P, P, W/P, P): (ch, r, i, c, j)
    x = x.permute(0, 2, 4, 3, 5, 1)                          # (B, H/P, W/P, P, P, C): (r, c, i, j, ch)
    return x.reshape(B, (H // P) * (W // P), P * P * C)      # (B, N, P·P·C)


def patch_embedding_conv(linear, patch_size, in_channels=1):
    """The patch embedding `linear` (nn.Linear(P·P·C, d_model) on patchify's (P, P, C)-ordered patches) as the
    convolution it is: nn.Conv2d(C, d_model, kernel_size=P, stride=P) with the same weights, so that
    conv(images).flatten(2).transpose(1, 2) == linear(patchify(images, P)), both (B, N, d_model)."""
    P, C = int(patch_size), int(in_channels)
    if linear.in_features != P * P * C:
        raise ValueError(f"the patch embedding takes {linear.in_features} features, not P·P·C = {P * P * C} "
                         f"(patch_size={P}, in_channels={C})")
    conv = nn.Conv2d(C, linear.out_features, kernel_size=P, stride=P, bias=linear.bias is not None)
    with torch.no_grad():
        conv.weight.copy_(linear.weight.reshape(-1, P, P, C).permute(0, 3, 1, 2))   # (d_model, C, P, P)
        if linear.bias is not None:
            conv.bias.copy_(linear.bias)
    return conv


class ViT(nn.Module):
    """The Vision Transformer: patches as tokens, a learned [CLS] token, learned positions, lesson 09's encoder.

    z_0 = [x_cls; x_p^1 E; ...; x_p^N E] + E_pos   (B, N + 1, d_model)
    z_L = Encoder(z_0)                              (pre-norm layers, then a final LayerNorm)
    logits = z_L[:, 0] W_head + b_head              the classifier reads the [CLS] position only
    """

    def __init__(self, image_size, patch_size, num_classes, in_channels=1, d_model=64, num_heads=4,
                 num_layers=3, d_ff=128, dropout=0.1):
        super().__init__()
        height, width = _pair(image_size, "image_size")
        _check_patches(height, width, patch_size)
        self.image_size, self.patch_size, self.in_channels = (height, width), int(patch_size), int(in_channels)
        self.grid = (height // patch_size, width // patch_size)        # patches per column, per row
        self.num_patches = self.grid[0] * self.grid[1]                  # N
        self.patch_embed = nn.Linear(patch_size * patch_size * in_channels, d_model)   # E
        self.cls_token = nn.Parameter(torch.zeros(1, 1, d_model))      # x_cls, learned
        nn.init.normal_(self.cls_token, std=0.02)
        self.pos = LearnedPositionalEncoding(d_model, max_len=self.num_patches + 1, dropout=dropout)  # E_pos
        self.encoder = Encoder(num_layers, d_model, num_heads, d_ff, dropout, norm_first=True)
        self.head = nn.Linear(d_model, num_classes)

    def embed(self, images):
        """images (B, C, H, W) -> z_0 (B, N + 1, d_model): [CLS], then the embedded patches, plus positions."""
        expected = (self.in_channels, *self.image_size)
        if images.dim() != 4 or tuple(images.shape[1:]) != expected:
            raise ValueError(f"this ViT expects images of shape (B, {expected[0]}, {expected[1]}, {expected[2]}), "
                             f"got {tuple(images.shape)}")
        tokens = self.patch_embed(patchify(images, self.patch_size))         # (B, N, d_model)
        cls = self.cls_token.expand(images.shape[0], -1, -1)                  # (B, 1, d_model)
        return self.pos(torch.cat([cls, tokens], dim=1))                      # (B, N + 1, d_model)

    def forward(self, images):                                                # (B, C, H, W)
        return self.head(self.encoder(self.embed(images))[:, 0])              # (B, num_classes)

    def store_attention(self, flag=True):
        """Keep every layer's attention weights on the next forward passes; returns self."""
        return store_attention_weights(self, flag)

    @torch.no_grad()
    def cls_attention(self, images):
        """Where the [CLS] query looks in every layer: (num_layers, B, num_heads, N + 1), key 0 = [CLS] itself,
        keys 1..N = the patches in row-major order. Runs a forward pass in eval mode (model's mode restored)."""
        was_training, stored = self.training, [m.store_weights for m in self.encoder.modules()
                                               if isinstance(m, MultiHeadAttention)]
        self.eval()
        self.store_attention(True)
        try:
            self(images)
            return torch.stack([layer.self_attn.attn_weights[:, :, 0] for layer in self.encoder.layers])
        finally:
            for module, flag in zip((m for m in self.encoder.modules() if isinstance(m, MultiHeadAttention)),
                                    stored):
                module.store_weights = flag
            self.train(was_training)


def show_cls_attention(images, maps, patch_size, labels=None, predictions=None, title=None):
    """Each image, then where its [CLS] token looks in each layer (mean over heads), as a map over the patches.

    images: (K, H, W); maps: (num_layers, K, N) or (num_layers, K, N + 1) (key 0 = [CLS] is then dropped),
    N = (H/P)·(W/P) patches in row-major order. One colour scale for all maps (the colorbar): the weight
    a patch gets from [CLS]; what the maps do not sum to went to [CLS] itself.
    """
    import matplotlib.pyplot as plt

    from .tensors import to_numpy

    images, maps = to_numpy(images).astype(float), to_numpy(maps).astype(float)
    if images.ndim != 3 or maps.ndim != 3 or maps.shape[1] != images.shape[0]:
        raise ValueError(f"expected images (K, H, W) and maps (num_layers, K, N), got {images.shape} and {maps.shape}")
    K, H, W = images.shape
    rows, cols = H // patch_size, W // patch_size
    if maps.shape[2] == rows * cols + 1:
        maps = maps[:, :, 1:]
    if maps.shape[2] != rows * cols:
        raise ValueError(f"maps should have N = {rows * cols} patches ({rows}×{cols} of {patch_size}×{patch_size} "
                         f"pixels), got {maps.shape[2]}")
    L = maps.shape[0]
    fig, axes = plt.subplots(K, L + 1, figsize=(2.0 * (L + 1) + 1.0, 2.3 * K + 0.6), squeeze=False)
    fig.subplots_adjust(hspace=0.55, wspace=0.35)
    vmax = maps.max()
    level = 0.5 * (images.min() + images.max())
    for k in range(K):
        ax = axes[k, 0]
        ax.imshow(images[k], cmap="gray_r")
        text = "input" + (f", label {labels[k]}" if labels is not None else "")
        text += f"\npredicted {predictions[k]}" if predictions is not None else ""
        ax.set_title(text, fontsize=8)
        ax.axis("off")                                                   # a picture: no axes needed
        for layer in range(L):
            ax = axes[k, layer + 1]
            shown = ax.imshow(maps[layer, k].reshape(rows, cols), cmap="viridis", vmin=0.0, vmax=vmax,
                              extent=(-0.5, W - 0.5, H - 0.5, -0.5))    # each patch covers its P×P pixels
            if images[k].min() < level < images[k].max():               # the digit's outline, for orientation
                ax.contour(images[k], levels=[level], colors="white", linewidths=0.8)
            ax.set_title(f"layer {layer + 1}: [CLS] looks at", fontsize=8)
            ax.set_xticks(range(0, W, patch_size))
            ax.set_yticks(range(0, H, patch_size))
            ax.tick_params(labelsize=7)
            if k == K - 1:
                ax.set_xlabel("column", fontsize=8)
            if layer == 0:
                ax.set_ylabel("row", fontsize=8)
    fig.colorbar(shown, ax=axes[:, 1:].ravel().tolist(), shrink=0.6, label="attention weight from [CLS]")
    if title:
        fig.suptitle(title, fontsize=10)
    return fig


def load_digits_split(test_fraction=0.25, seed=0):
    """scikit-learn's 1,797 handwritten digits (8×8, shipped with the package: no download).

    Returns X_train, y_train, X_test, y_test: images (N, 1, 8, 8) float32 in [0, 1], labels int64;
    a seeded, stratified split.
    """
    try:
        from sklearn.datasets import load_digits
    except ImportError as error:  # pragma: no cover - scikit-learn is a course dependency
        raise ImportError("lesson 11 needs scikit-learn for its digits: pip install scikit-learn") from error
    digits = load_digits()
    images = (digits.images / 16.0).astype(np.float32)[:, None]          # (N, 1, 8, 8)
    labels = digits.target.astype(np.int64)
    generator = np.random.default_rng(seed)
    test = np.zeros(len(labels), dtype=bool)
    for c in np.unique(labels):                                          # stratified
        idx = np.flatnonzero(labels == c)
        test[generator.choice(idx, size=int(round(test_fraction * len(idx))), replace=False)] = True
    as_tensors = lambda m: (torch.from_numpy(images[m]), torch.from_numpy(labels[m]))
    return (*as_tensors(~test), *as_tensors(test))


@torch.no_grad()
def accuracy(model, X, y, batch_size=512):
    """Fraction of `X` that `model` classifies as `y` (model put in eval mode, then back)."""
    was_training = model.training
    model.eval()
    correct = sum((model(X[i:i + batch_size]).argmax(-1) == y[i:i + batch_size]).sum().item()
                  for i in range(0, len(X), batch_size))
    model.train(was_training)
    return correct / len(X)


def show_pixel_attention(image, weights, pixels, title=None):
    """The image, then for each chosen pixel (row, col) its attention map over the image (pixel boxed in red).

    image: (H, W); weights: (N, N) for this image, N = H·W, row j = row·W + col is that pixel's map; or only
    the chosen pixels' rows, (len(pixels), N), in their order (a reference run keeps only those).
    The maps share one colour scale (the colorbar); the digit's outline is drawn over each of them.
    """
    import matplotlib.pyplot as plt

    from .tensors import to_numpy

    image, w = to_numpy(image).astype(float), to_numpy(weights).astype(float)
    if image.ndim != 2 or w.shape not in ((image.size, image.size), (len(pixels), image.size)):
        raise ValueError(f"expected image (H, W) and weights (H·W, H·W) or (pixels, H·W), got {image.shape} and "
                         f"{w.shape}")
    H, W = image.shape
    rows = [r * W + c for r, c in pixels] if w.shape[0] == image.size else range(len(pixels))
    maps = [w[j].reshape(H, W) for j in rows]                              # each (H, W), sums to 1
    fig, axes = plt.subplots(1, len(pixels) + 1, figsize=(2.3 * (len(pixels) + 1) + 0.9, 2.7), squeeze=False)
    axes = axes[0]
    axes[0].imshow(image, cmap="gray_r")
    axes[0].set_title("input", fontsize=10)
    axes[0].axis("off")                                                    # a picture: no axes needed
    vmax = max(m.max() for m in maps) if maps else 1.0
    level = 0.5 * (image.min() + image.max())
    for ax, (r, c), m in zip(axes[1:], pixels, maps):
        shown = ax.imshow(m, cmap="viridis", vmin=0.0, vmax=vmax)
        if image.min() < level < image.max():                             # the digit's outline, for orientation
            ax.contour(image, levels=[level], colors="white", linewidths=0.8)
        ax.scatter([c], [r], marker="s", s=90, facecolors="none", edgecolors="red", linewidths=2)
        ax.set_title(f"pixel ({r}, {c}) looks at", fontsize=9)
        ax.set_xticks(range(0, W, 2))
        ax.set_yticks(range(0, H, 2))
        ax.tick_params(labelsize=7)
        ax.set_xlabel("column", fontsize=8)
    if maps:
        axes[1].set_ylabel("row", fontsize=8)
        fig.colorbar(shown, ax=list(axes), shrink=0.85, label="attention weight α")
    if title:
        fig.suptitle(title, fontsize=10)
    return fig
