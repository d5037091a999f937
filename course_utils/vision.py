"""Self-attention for feature maps, as in SAGAN (lesson 11), and a small CNN that can use it.

    attn = SelfAttention2d(channels=32)            # y = x + γ·o, γ a learned scalar that starts at 0
    y = attn(x)                                    # x, y: (B, C, H, W)
    attn.attn_weights                              # (B, N, N), N = H·W: row i = where pixel i looks
    model = SmallCNN(num_classes=10, channels=16, attention=True)
    logits = model(images)                         # images: (B, 1, H, W) -> (B, num_classes)
    X_train, y_train, X_test, y_test = load_digits_split()   # scikit-learn's 8×8 digits, no download

Notation (Zhang et al., 2019): keys f(x) = W_f x, queries g(x) = W_g x, values h(x) = W_h x, each a
1×1 convolution, i.e. the same matrix applied to the channel vector of every pixel. Unlike the paper,
the scores are divided by √d_key: the attention is the course's `scaled_dot_product_attention`
(course_utils.attention), with pixels for tokens.
"""
import numpy as np
import torch
import torch.nn as nn

from .attention import scaled_dot_product_attention


def conv1x1(x, W):
    """A 1×1 convolution with weight matrix W (C_out, C): the same linear map at every pixel."""
    if x.dim() != 4:
        raise ValueError(f"x should be a feature map of shape (B, C, H, W), got shape {tuple(x.shape)}")
    if W.dim() != 2 or W.shape[1] != x.shape[1]:
        raise ValueError(f"W should have shape (C_out, {x.shape[1]}) for x with {x.shape[1]} channels, "
                         f"got shape {tuple(W.shape)}")
    return torch.einsum("oc,bchw->bohw", W, x)   # (B, C_out, H, W)


def self_attention_2d(x, W_f, W_g, W_h):
    """Attention over all H·W positions of the feature map x (B, C, H, W).

    keys f = W_f x and queries g = W_g x (W_f, W_g: (d_key, C)), values h = W_h x (W_h: (C_v, C)).
    Returns o (B, C_v, H, W) and weights (B, N, N), N = H·W, where weights[b, j, i] is how much
    position j (the query, row-major index j = row·W + col) attends to position i; rows sum to 1.
    """
    if x.dim() != 4:
        raise ValueError(f"x should be a feature map of shape (B, C, H, W), got shape {tuple(x.shape)}")
    B, C, height, width = x.shape
    k = conv1x1(x, W_f).flatten(2).transpose(1, 2)              # (B, N, d_key)
    q = conv1x1(x, W_g).flatten(2).transpose(1, 2)              # (B, N, d_key)
    v = conv1x1(x, W_h).flatten(2).transpose(1, 2)              # (B, N, C_v)
    o, weights = scaled_dot_product_attention(q, k, v, need_weights=True)   # (B, N, C_v), (B, N, N)
    o = o.transpose(1, 2).reshape(B, -1, height, width)         # (B, C_v, H, W)
    return o, weights


class SelfAttention2d(nn.Module):
    """SAGAN's self-attention block: y = x + γ·o, with γ a learned scalar initialised at 0."""

    def __init__(self, channels, d_key=None):
        super().__init__()
        d_key = max(channels // 8, 1) if d_key is None else int(d_key)
        self.f = nn.Conv2d(channels, d_key, kernel_size=1, bias=False)     # keys
        self.g = nn.Conv2d(channels, d_key, kernel_size=1, bias=False)     # queries
        self.h = nn.Conv2d(channels, channels, kernel_size=1, bias=False)  # values
        self.gamma = nn.Parameter(torch.zeros(1))   # 0 at first: the block starts as the identity
        self.attn_weights = None

    def forward(self, x):
        if x.dim() != 4 or x.shape[1] != self.f.in_channels:
            raise ValueError(f"SelfAttention2d expects x of shape (B, {self.f.in_channels}, H, W), "
                             f"got shape {tuple(x.shape)}")
        o, weights = self_attention_2d(x, self.f.weight[:, :, 0, 0], self.g.weight[:, :, 0, 0],
                                       self.h.weight[:, :, 0, 0])
        self.attn_weights = weights.detach()          # (B, N, N)
        return x + self.gamma * o                     # (B, C, H, W)


class SmallCNN(nn.Module):
    """Two 3×3 convolutions, optionally SAGAN self-attention, then average pooling and a linear layer.

    Without attention, each pixel of the last feature map has seen only a 5×5 patch of the input, and
    the average pooling turns the image into a bag of such patches; with attention, every pixel can
    first gather features from the whole image.
    """

    def __init__(self, num_classes=10, channels=16, attention=True, in_channels=1):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, channels, 3, padding=1), nn.ReLU(),
            nn.Conv2d(channels, channels, 3, padding=1), nn.ReLU())
        self.attention = SelfAttention2d(channels) if attention else None
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(channels, num_classes))

    def forward(self, images):                        # (B, in_channels, H, W)
        x = self.features(images)                     # (B, channels, H, W)
        if self.attention is not None:
            x = self.attention(x)                     # (B, channels, H, W)
        return self.head(x)                           # (B, num_classes)


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

    image: (H, W); weights: (N, N) for this image, N = H·W, row j = row·W + col is that pixel's map.
    The maps share one colour scale (the colorbar); the digit's outline is drawn over each of them.
    """
    import matplotlib.pyplot as plt

    from .tensors import to_numpy

    image, w = to_numpy(image).astype(float), to_numpy(weights).astype(float)
    if image.ndim != 2 or w.shape != (image.size, image.size):
        raise ValueError(f"expected image (H, W) and weights (H·W, H·W), got {image.shape} and {w.shape}")
    H, W = image.shape
    maps = [w[r * W + c].reshape(H, W) for r, c in pixels]                 # each (H, W), sums to 1
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
