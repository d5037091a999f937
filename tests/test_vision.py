"""course_utils.vision: SAGAN's self-attention on feature maps, the small CNN, the ViT, the digits; and
course_utils.vision_training: the lesson's loop, its full run and the reference file fast mode shows."""
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

from course_utils import vision_training  # noqa: E402
from course_utils.reference_runs import check as reference_problems  # noqa: E402
from course_utils.reference_runs import reference_run  # noqa: E402
from course_utils.transformer import Encoder  # noqa: E402
from course_utils.vision import (  # noqa: E402
    SelfAttention2d,
    SmallCNN,
    ViT,
    accuracy,
    conv1x1,
    load_digits_split,
    patch_embedding_conv,
    patchify,
    self_attention_2d,
    show_cls_attention,
    show_pixel_attention,
)
from tests.figure_check import figure_problems  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
LESSON = ROOT / "solutions" / "11_attention_beyond_text.ipynb"


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


@pytest.mark.parametrize("channels, P", [(1, 2), (3, 2), (2, 4)])
def test_a_patch_embedding_is_a_strided_convolution(channels, P):
    """patchify followed by the linear layer E == nn.Conv2d(C, d_model, kernel_size=P, stride=P) with E's weights."""
    torch.manual_seed(9)
    linear = nn.Linear(P * P * channels, 5)
    images = torch.randn(3, channels, 2 * P, 3 * P)
    conv = patch_embedding_conv(linear, P, channels)
    assert (conv.kernel_size, conv.stride) == ((P, P), (P, P))
    by_conv = conv(images).flatten(2).transpose(1, 2)                   # (B, d_model, H/P, W/P) -> (B, N, d_model)
    assert torch.allclose(by_conv, linear(patchify(images, P)), atol=1e-5)
    with pytest.raises(ValueError, match="P·P·C"):
        patch_embedding_conv(linear, P + 1, channels)


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
    rows = weights[[1 * 8 + 3, 4 * 8 + 4]]                              # only the chosen pixels' rows (a reference run)
    fig = show_pixel_attention(image, rows, [(1, 3), (4, 4)], title="a digit")
    try:
        assert [im.get_array().tolist() for ax in fig.axes[1:3] for im in ax.images] == \
            [rows[k].reshape(8, 8).tolist() for k in range(2)]
    finally:
        plt.close(fig)


# --- vision_training: the lesson's loop, its full run, the reference file ---------------------------------------
def test_fit_takes_the_steps_and_evaluates_and_batches_are_seeded():
    X, y = torch.randn(20, 1, 8, 8), torch.randint(10, (20,))
    first, again = vision_training.digit_batches(X, y, 4, seed=3), vision_training.digit_batches(X, y, 4, seed=3)
    assert all(torch.equal(a, b) for _ in range(3) for a, b in zip(first(), again()))
    torch.manual_seed(0)
    model = SmallCNN(channels=4, attention=False)
    losses, evaluations = vision_training.fit(model, vision_training.digit_batches(X, y, 4, 0), 5, lr=1e-2,
                                              evaluate=lambda m: 0.5, eval_every=2, progress=False)
    assert len(losses) == 5 and [step for step, _ in evaluations] == [2, 4, 5]


def test_full_run_reports_what_the_lesson_draws():
    settings = {**vision_training.FULL, "steps": 12, "seeds": [0]}
    report = vision_training.full_run(settings, progress=False)
    assert set(report["accuracy"]) == set(vision_training.MODELS) == set(report["curves"]["loss"])
    cls = torch.tensor(report["cls_attention"]["weights"])             # (layers, digits, heads, N + 1)
    vit = settings["vit"]
    assert cls.shape == (vit["num_layers"], 4, vit["num_heads"], 17)
    assert torch.allclose(cls.sum(-1), torch.ones(cls.shape[:-1]), atol=0.01)
    pixels = torch.tensor(report["pixel_attention"]["weights"])        # (digits, pixels, 64)
    assert pixels.shape == (2, 3, 64) and torch.allclose(pixels.sum(-1), torch.ones(2, 3), atol=0.01)
    assert report["curves"]["steps"] == [10]


def _lesson_settings():
    """The lesson's sizes cell and its CNNs, executed in full mode (a fresh Python: COURSE_FAST=0)."""
    cells = {c.get("id"): "".join(c["source"]) for c in json.loads(LESSON.read_text())["cells"]}
    script = (cells["cell-03"] + "\n" + cells["cell-18"].split("for name")[0] + "\nimport json\nprint(json.dumps("
              "dict(channels=channels, batch_size=batch_size, lr=lr, steps=vision_steps, seeds=vision_seeds, "
              "patch_size=patch_size, vit=vit_sizes, cnn_configs=cnn_configs)))")
    env = {**os.environ, "COURSE_FAST": "0", "COURSE_PROGRESS": "off", "MPLBACKEND": "Agg"}
    env.pop("CI", None)
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, cwd=ROOT,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_full_run_is_the_lessons_full_mode():
    lesson = _lesson_settings()
    full = vision_training.FULL
    assert lesson.pop("cnn_configs") == vision_training.cnn_configs(full["channels"])
    assert lesson == {key: full[key] for key in lesson}
    ref = reference_run("lesson11_vision")
    assert ref is not None, "course_utils/reference_runs/lesson11_vision.json is missing: run " \
                            "`python -m course_utils.vision_training --reference lesson11_vision`"
    assert reference_problems(ref) == []
    assert ref["written_by"] == "python -m course_utils.vision_training --reference lesson11_vision"
    assert ref["settings"] == full, "the lesson's sizes changed: run the command again"


def test_reference_file_is_small_and_holds_what_fast_mode_draws():
    ref = reference_run("lesson11_vision")
    path = ROOT / "course_utils" / "reference_runs" / "lesson11_vision.json"
    assert ref is not None and path.stat().st_size < 60_000
    seeds, steps = ref["settings"]["seeds"], ref["settings"]["steps"]
    assert all(list(a) == [str(s) for s in seeds] for a in ref["accuracy"].values())
    assert ref["curves"]["steps"][-1] == steps and all(len(c) == len(ref["curves"]["steps"])
                                                        for c in ref["curves"]["loss"].values())
    assert ref["result"]["mean_accuracy"]["ViT"] > 0.9 and ref["result"]["mean_accuracy"]["CNN"] > 0.8
    cls = ref["cls_attention"]
    assert len(cls["weights"][0]) == len(cls["digits"]) == len(cls["labels"]) == len(cls["predicted"])
    assert sum(p == label for p, label in zip(cls["predicted"], cls["labels"])) >= 3   # a trained ViT
