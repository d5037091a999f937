"""Lesson 14's tests of whether attention explains: attention rollout and the deletion test (course_utils.rollout)
on a Vision Transformer, and counterfactual attention in a translator (course_utils.counterfactual_attention)."""
import pytest
import torch

from course_utils import counterfactual_attention as cf
from course_utils import rollout
from course_utils.transformer import Transformer
from course_utils.vision import ViT


def _softmax_maps(*shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).softmax(-1)


def test_rollout_by_hand():
    maps = _softmax_maps(3, 2, 4, 5, 5)                                      # (N, B, h, T, T)
    tilde = [0.5 * torch.eye(5) + 0.5 * m.mean(1) for m in maps]             # rows already sum to 1
    R = rollout.attention_rollout(maps)
    assert torch.allclose(R, tilde[2] @ tilde[1] @ tilde[0], atol=1e-6)
    assert torch.allclose(R.sum(-1), torch.ones(2, 5), atol=1e-6)
    identity = torch.eye(5).expand(2, 2, 4, 5, 5)
    assert torch.allclose(rollout.attention_rollout(identity), torch.eye(5).expand(2, 5, 5))
    with pytest.raises(ValueError, match="layers, B, heads"):
        rollout.attention_rollout(maps[0])


def _vit():
    torch.manual_seed(0)
    return ViT(8, 2, 10, d_model=16, num_heads=2, num_layers=2, d_ff=32, dropout=0.0)


def test_rankings_and_the_deletion_curve():
    vit = _vit()
    images, labels = torch.rand(6, 1, 8, 8), torch.randint(0, 10, (6,))
    for name in rollout.RANKINGS:
        scores = rollout.patch_scores(vit, images, name, generator=torch.Generator().manual_seed(0))
        assert scores.shape == (6, 16) and torch.isfinite(scores).all(), name
        curve = rollout.deletion_curve(vit, images, labels, scores)
        assert len(curve) == 17 and curve[-1] == curve[-1] and all(0 <= a <= 1 for a in curve)
    maps = rollout.vit_attention(vit, images)
    assert maps.shape == (2, 6, 2, 17, 17) and vit.training is True        # the model's mode is restored
    with pytest.raises(ValueError, match="ranking must be one of"):
        rollout.patch_scores(vit, images, "gradient")


def test_erase_patches_erases_exactly_those():
    images = torch.ones(2, 1, 8, 8)
    erased = rollout.erase_patches(images, torch.tensor([[0, 5], [15, 15]]), 2)
    assert erased[0, 0, :2, :2].sum() == 0 and erased[0, 0, 2:4, 2:4].sum() == 0     # patches 0 and 5
    assert erased[1, 0, 6:, 6:].sum() == 0 and erased.sum() == 2 * 64 - 8 - 4


def _translator():
    torch.manual_seed(0)
    return Transformer(30, 30, 32, 4, 2, 64, dropout=0.0, share_src_tgt_embeddings=True).eval()


def test_counterfactual_weights():
    model = _translator()
    src = torch.randint(3, 30, (3, 7))
    src[0, 4:] = 0                                                          # a padded sentence
    tgt = torch.randint(3, 30, (3, 5))
    attn = model.decoder.layers[1].cross_attn
    for mode in cf.MODES:
        change = cf.output_change(model, src, tgt, 1, mode, torch.Generator().manual_seed(0))
        assert set(change) == {"tvd", "jsd", "argmax_changed"} and change["tvd"].shape == (15,)
        assert ((0 <= change["tvd"]) & (change["tvd"] <= 1)).all()
        assert "attend" not in vars(attn), "the module must be as it was after the block"
    one = torch.randint(3, 30, (2, 1))                                      # one source token: nothing to permute
    assert cf.output_change(model, one, tgt[:2], 0, "permute")["tvd"].max() < 1e-5
    assert cf.output_change(model, one, tgt[:2], 0, "uniform")["tvd"].max() < 1e-5
    with pytest.raises(ValueError, match="mode must be one of"):
        with cf.counterfactual(attn, "shuffle"):
            pass


def test_uniform_weights_average_the_real_source_positions():
    model = _translator()
    attn = model.encoder.layers[0].self_attn
    x = torch.randn(1, 4, 32)
    mask = torch.tensor([[[[True, True, True, False]]]])
    q, k, v = attn.project(x, x, x)
    with cf.counterfactual(attn, "uniform"):
        out = attn(x, x, x, mask)
    expected = attn.out_proj(v[..., :3, :].mean(-2, keepdim=True).expand(1, 4, 4, 8).transpose(1, 2).reshape(1, 4, 32))
    assert torch.allclose(out, expected, atol=1e-5)
