"""course_utils.vision: SAGAN's self-attention on feature maps, the small CNN, the ViT, the digits."""
import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

from course_utils.transformer import Encoder  # noqa: E402
from course_utils.vision import (  # noqa: E402
    SelfAttention2d,
    SmallCNN,
    ViT,
    accuracy,
    conv1x1,
    load_digits_split,
    patchify,
    self_attention_2d,
    show_cls_attention,
    show_pixel_attention,
)
from tests.figure_check import figure_problems  # noqa: E402


def test_conv1x1_is_a_kernel_size_1_convolution():
    torch.manual_seed(0)
    x, conv = torch.randn(2, 5, 3, 4), nn.Conv2d(5, 7, kernel_size=1, bias=False)
    assert torch.allclose(conv1x1(x, conv.weight[:, :, 0, 0]), conv(x), atol=1e-6)


def test_self_attention_2d_matches_a_loop_over_pixels():
    torch.manual_seed(1)
    B, C, H, W, d_key, C_bar = 2, 6, 3, 4, 3, 2
    x = torch.randn(B, C, H, W)
    W_f, W_g, W_h, W_v = torch.randn(d_key, C), torch.randn(d_key, C), torch.randn(C_bar, C), torch.randn(C, C_bar)
    o, weights = self_attention_2d(x, W_f, W_g, W_h, W_v)
    assert o.shape == (B, C, H, W) and weights.shape == (B, H * W, H * W)
    pixels = [(r, c) for r in range(H) for c in range(W)]            # row-major: j = r·W + c
    for b in range(B):
        for j, (r, c) in enumerate(pixels):
            scores = torch.stack([(W_g @ x[b, :, r, c]) @ (W_f @ x[b, :, rr, cc]) for rr, cc in pixels])
            alpha = torch.softmax(scores / math.sqrt(d_key), dim=0)
            assert torch.allclose(weights[b, j], alpha, atol=1e-5)
            expected = W_v @ sum(a * (W_h @ x[b, :, rr, cc]) for a, (rr, cc) in zip(alpha, pixels))   # o_j = W_v Σ α h
            assert torch.allclose(o[b, :, r, c], expected, atol=1e-4)


def test_self_attention_2d_rejects_bad_shapes():
    W_v = torch.randn(4, 4)
    with pytest.raises(ValueError, match=r"\(B, C, H, W\)"):
        self_attention_2d(torch.randn(3, 4), torch.randn(2, 4), torch.randn(2, 4), torch.randn(4, 4), W_v)
    with pytest.raises(ValueError, match="C_out"):
        self_attention_2d(torch.randn(1, 4, 2, 2), torch.randn(2, 5), torch.randn(2, 4), torch.randn(4, 4), W_v)
    with pytest.raises(ValueError, match=r"W_v should have shape \(C_out, 2\)"):
        self_attention_2d(torch.randn(1, 4, 2, 2), torch.randn(2, 4), torch.randn(2, 4), torch.randn(2, 4), W_v)


def test_block_is_the_identity_at_initialisation_and_only_gamma_gets_a_gradient():
    torch.manual_seed(2)
    block = SelfAttention2d(16)
    assert isinstance(block.gamma, nn.Parameter) and block.gamma.item() == 0.0
    assert block.h.weight.shape == (2, 16, 1, 1) and block.v.weight.shape == (16, 2, 1, 1)   # the paper's C̄ = C/8
    x = torch.randn(2, 16, 4, 4)
    y = block(x)
    assert torch.equal(y, x)
    assert block.attn_weights.shape == (2, 16, 16)
    assert torch.allclose(block.attn_weights.sum(-1), torch.ones(2, 16))
    (y ** 2).sum().backward()
    assert block.gamma.grad.abs().item() > 0
    for conv in (block.f, block.g, block.h, block.v):   # dy/do = γ = 0: nothing reaches f, g, h, v yet
        assert torch.count_nonzero(conv.weight.grad) == 0


def test_block_adds_gamma_times_o():
    torch.manual_seed(3)
    block = SelfAttention2d(8, d_key=2, d_value=4)
    assert sum(p.numel() for p in block.parameters()) == 2 * 8 * 2 + 2 * 8 * 4 + 1
    with torch.no_grad():
        block.gamma.fill_(0.3)
    x = torch.randn(1, 8, 3, 5)
    o, _ = self_attention_2d(x, *(getattr(block, n).weight[:, :, 0, 0] for n in "fghv"))
    assert torch.allclose(block(x), x + 0.3 * o, atol=1e-6)
    with pytest.raises(ValueError, match=r"\(B, 8, H, W\)"):
        block(torch.randn(1, 4, 3, 3))


def test_patchify_is_row_major_over_patches_and_p_p_c_inside():
    torch.manual_seed(4)
    images = torch.randn(2, 3, 4, 6)
    patches = patchify(images, 2)
    assert patches.shape == (2, 6, 12)
    for n in range(6):
        r, c = divmod(n, 3)                                             # 3 patches per row
        square = images[:, :, 2 * r:2 * r + 2, 2 * c:2 * c + 2]          # (B, C, P, P)
        assert torch.equal(patches[:, n], square.permute(0, 2, 3, 1).reshape(2, -1))   # (P, P, C) order
    assert torch.equal(patches[0, 0, :3], images[0, :, 0, 0])           # pixel (0, 0): its 3 channels first
    assert torch.equal(patchify(images, 1), images.permute(0, 2, 3, 1).reshape(2, 24, 3))


def test_patchify_and_vit_reject_a_size_not_divisible_by_the_patch():
    with pytest.raises(ValueError, match=r"8×6 pixels cannot be cut into 4×4 patches"):
        patchify(torch.randn(1, 1, 8, 6), 4)
    with pytest.raises(ValueError, match=r"cannot be cut into 3×3 patches"):
        ViT(image_size=8, patch_size=3, num_classes=10)
    with pytest.raises(ValueError, match=r"\(B, C, H, W\)"):
        patchify(torch.randn(8, 8), 2)
    with pytest.raises(ValueError, match="image_size"):
        ViT(image_size=(8, 8, 8), patch_size=2, num_classes=10)


def test_vit_is_patches_cls_positions_and_lesson_09s_encoder():
    torch.manual_seed(5)
    model = ViT(image_size=(8, 6), patch_size=2, num_classes=10, in_channels=3, d_model=16, num_heads=2,
                num_layers=2, d_ff=32, dropout=0.0)
    assert isinstance(model.encoder, Encoder) and model.num_patches == 12 and model.grid == (4, 3)
    images = torch.randn(5, 3, 8, 6)
    z0 = model.embed(images)
    assert z0.shape == (5, 13, 16)
    pos = model.pos.pe.weight[:13]
    assert torch.allclose(z0[:, 0], (model.cls_token[0, 0] + pos[0]).expand(5, -1))         # [CLS] first
    assert torch.allclose(z0[:, 1:], model.patch_embed(patchify(images, 2)) + pos[1:], atol=1e-6)
    logits = model(images)
    assert logits.shape == (5, 10)
    assert torch.allclose(logits, model.head(model.encoder(z0)[:, 0]), atol=1e-6)        # the head reads [CLS]
    changed = images.clone()
    changed[0, :, :2, :2] += 1.0                                                         # patch 0 of image 0
    with torch.no_grad():
        assert not torch.allclose(model(changed)[0], logits[0]) and torch.allclose(model(changed)[1:], logits[1:])
    with pytest.raises(ValueError, match=r"\(B, 3, 8, 6\)"):
        model(torch.randn(2, 1, 8, 6))


def test_vit_cls_attention_is_the_cls_row_of_every_layer():
    torch.manual_seed(6)
    model = ViT(image_size=8, patch_size=4, num_classes=3, d_model=8, num_heads=2, num_layers=3, d_ff=16)
    model.train()
    maps = model.cls_attention(torch.randn(4, 1, 8, 8))
    assert maps.shape == (3, 4, 2, 5) and model.training                # (layers, B, heads, N + 1), mode restored
    assert torch.allclose(maps.sum(-1), torch.ones(3, 4, 2), atol=1e-5)
    assert not any(layer.self_attn.store_weights for layer in model.encoder.layers)


def test_cls_attention_figure_has_labels_and_one_colour_scale():
    torch.manual_seed(8)
    maps = torch.softmax(torch.randn(2, 3, 17), dim=-1)                  # (layers, K, N + 1)
    fig = show_cls_attention(torch.rand(3, 8, 8), maps, patch_size=2, labels=[1, 2, 3], predictions=[1, 2, 4],
                             title="where [CLS] looks")
    try:
        assert figure_problems(fig) == []
        clims = {im.get_clim() for ax in fig.axes for im in ax.images if ax.axison}
        assert len(clims) == 1 and clims.pop()[1] == pytest.approx(maps[:, :, 1:].max().item())
    finally:
        plt.close(fig)
    with pytest.raises(ValueError, match="N = 16 patches"):
        show_cls_attention(torch.rand(3, 8, 8), maps[:, :, :10], patch_size=2)


@pytest.mark.parametrize("attention", [False, True])
def test_small_cnn_shapes(attention):
    model = SmallCNN(num_classes=10, channels=8, attention=attention)
    assert model(torch.randn(5, 1, 8, 8)).shape == (5, 10)
    assert (model.attention is not None) == attention
    if attention:
        assert SmallCNN(channels=16, d_value=8).attention.h.out_channels == 8


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
