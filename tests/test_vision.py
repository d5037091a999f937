"""course_utils.vision: SAGAN's self-attention on feature maps, the small CNN, the digits."""
import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

from course_utils.vision import (  # noqa: E402
    SelfAttention2d,
    SmallCNN,
    accuracy,
    conv1x1,
    load_digits_split,
    self_attention_2d,
    show_pixel_attention,
)
from tests.figure_check import figure_problems  # noqa: E402


def test_conv1x1_is_a_kernel_size_1_convolution():
    torch.manual_seed(0)
    x, conv = torch.randn(2, 5, 3, 4), nn.Conv2d(5, 7, kernel_size=1, bias=False)
    assert torch.allclose(conv1x1(x, conv.weight[:, :, 0, 0]), conv(x), atol=1e-6)


def test_self_attention_2d_matches_a_loop_over_pixels():
    torch.manual_seed(1)
    B, C, H, W, d_key = 2, 6, 3, 4, 3
    x = torch.randn(B, C, H, W)
    W_f, W_g, W_h = torch.randn(d_key, C), torch.randn(d_key, C), torch.randn(C, C)
    o, weights = self_attention_2d(x, W_f, W_g, W_h)
    assert o.shape == (B, C, H, W) and weights.shape == (B, H * W, H * W)
    pixels = [(r, c) for r in range(H) for c in range(W)]            # row-major: j = r·W + c
    for b in range(B):
        for j, (r, c) in enumerate(pixels):
            scores = torch.stack([(W_g @ x[b, :, r, c]) @ (W_f @ x[b, :, rr, cc]) for rr, cc in pixels])
            alpha = torch.softmax(scores / math.sqrt(d_key), dim=0)
            assert torch.allclose(weights[b, j], alpha, atol=1e-5)
            expected = sum(a * (W_h @ x[b, :, rr, cc]) for a, (rr, cc) in zip(alpha, pixels))
            assert torch.allclose(o[b, :, r, c], expected, atol=1e-4)


def test_self_attention_2d_rejects_bad_shapes():
    with pytest.raises(ValueError, match=r"\(B, C, H, W\)"):
        self_attention_2d(torch.randn(3, 4), torch.randn(2, 4), torch.randn(2, 4), torch.randn(4, 4))
    with pytest.raises(ValueError, match="C_out"):
        self_attention_2d(torch.randn(1, 4, 2, 2), torch.randn(2, 5), torch.randn(2, 4), torch.randn(4, 4))


def test_block_is_the_identity_at_initialisation_and_only_gamma_gets_a_gradient():
    torch.manual_seed(2)
    block = SelfAttention2d(16)
    assert isinstance(block.gamma, nn.Parameter) and block.gamma.item() == 0.0
    x = torch.randn(2, 16, 4, 4)
    y = block(x)
    assert torch.equal(y, x)
    assert block.attn_weights.shape == (2, 16, 16)
    assert torch.allclose(block.attn_weights.sum(-1), torch.ones(2, 16))
    (y ** 2).sum().backward()
    assert block.gamma.grad.abs().item() > 0
    for conv in (block.f, block.g, block.h):            # dy/do = γ = 0: nothing reaches f, g, h yet
        assert torch.count_nonzero(conv.weight.grad) == 0


def test_block_adds_gamma_times_o():
    torch.manual_seed(3)
    block = SelfAttention2d(8, d_key=2)
    with torch.no_grad():
        block.gamma.fill_(0.3)
    x = torch.randn(1, 8, 3, 5)
    o, _ = self_attention_2d(x, block.f.weight[:, :, 0, 0], block.g.weight[:, :, 0, 0], block.h.weight[:, :, 0, 0])
    assert torch.allclose(block(x), x + 0.3 * o, atol=1e-6)
    with pytest.raises(ValueError, match=r"\(B, 8, H, W\)"):
        block(torch.randn(1, 4, 3, 3))


@pytest.mark.parametrize("attention", [False, True])
def test_small_cnn_shapes(attention):
    model = SmallCNN(num_classes=10, channels=8, attention=attention)
    assert model(torch.randn(5, 1, 8, 8)).shape == (5, 10)
    assert (model.attention is not None) == attention


def test_digits_split_is_seeded_stratified_and_in_range():
    X_train, y_train, X_test, y_test = load_digits_split()
    assert X_train.shape[1:] == (1, 8, 8) and len(X_train) + len(X_test) == 1797
    assert X_train.dtype == torch.float32 and y_train.dtype == torch.int64
    assert 0.0 <= X_train.min() and X_train.max() <= 1.0
    assert 0.24 < len(X_test) / 1797 < 0.26
    assert set(y_test.tolist()) == set(range(10))
    again = load_digits_split()
    assert torch.equal(again[2], X_test) and torch.equal(again[3], y_test)


def test_accuracy_restores_training_mode():
    model = SmallCNN(channels=4, attention=False)
    X, y = torch.randn(7, 1, 8, 8), torch.zeros(7, dtype=torch.long)
    acc = accuracy(model, X, y, batch_size=3)
    assert 0.0 <= acc <= 1.0 and model.training


def test_pixel_attention_figure_has_labels_and_one_colour_scale():
    torch.manual_seed(7)
    image = torch.rand(8, 8)
    weights = torch.softmax(torch.randn(64, 64), dim=-1)
    fig = show_pixel_attention(image, weights, [(1, 3), (4, 4)], title="a digit")
    try:
        assert figure_problems(fig) == []
        maps = [im for ax in fig.axes[1:3] for im in ax.images]
        assert len(maps) == 2 and all(im.get_clim() == maps[0].get_clim() for im in maps)
        assert maps[0].get_clim()[1] == pytest.approx(max(weights[1 * 8 + 3].max(), weights[4 * 8 + 4].max()).item())
    finally:
        plt.close(fig)
    with pytest.raises(ValueError, match="expected image"):
        show_pixel_attention(image, weights[:10], [(0, 0)])
