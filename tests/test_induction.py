"""Lesson 14's references for induction heads (course_utils.induction): the attention-only model, the data, the
scores, the losses, ablation and the composition test."""
import copy

import pytest
import torch

from course_utils import induction
from course_utils.gpt import GPT


def _model(positions="rope", seed=0, layers=2):
    torch.manual_seed(seed)
    return induction.AttentionOnly(vocab_size=13, d_model=16, num_heads=2, num_layers=layers, max_len=20,
                                   positions=positions).eval()


@pytest.mark.parametrize("positions", induction.POSITIONS)
def test_model_shapes_and_causality(positions):
    model = _model(positions)
    tokens = torch.randint(0, 13, (3, 10))
    logits = model(tokens)
    assert logits.shape == (3, 10, 13)
    changed = tokens.clone()
    changed[:, 7:] = (changed[:, 7:] + 1) % 13
    assert torch.allclose(model(changed)[:, :7], logits[:, :7], atol=1e-6), "a later token changed an earlier output"


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="positions must be one of"):
        induction.AttentionOnly(10, positions="sinusoidal")
    with pytest.raises(ValueError, match="max_len=20"):
        _model()(torch.zeros(1, 21, dtype=torch.long))


def test_repeated_sequences_repeat_after_the_prefix():
    x = induction.repeated_sequences(4, 5, 9, torch.Generator().manual_seed(0), low=3, prefix=[1])
    assert x.shape == (4, 11) and (x[:, 0] == 1).all()
    assert torch.equal(x[:, 1:6], x[:, 6:]) and (x[:, 1:] >= 3).all()


def test_segment_repeats_hold_one_copied_segment_somewhere():
    g = torch.Generator().manual_seed(1)
    x = induction.segment_repeats(20, 24, 50, g)
    assert x.shape == (20, 24)
    starts = set()
    for row in x.tolist():
        found = [(a, b) for s in (6,) for a in range(24 - s) for b in range(a + s, 24 - s + 1)
                 if row[a:a + s] == row[b:b + s]]
        assert found, f"no repeated segment of 6 tokens in {row}"
        starts.add(found[0][1])
    assert len(starts) > 3, "the copy should sit at different places"
    with pytest.raises(ValueError, match="min_segment"):
        induction.segment_repeats(2, 10, 5, g, min_segment=8)


def _stripes(L):
    """(1, 2, 2L, 2L): head 0 attends to the token before (0 to itself), head 1 on the induction stripe."""
    w = torch.zeros(1, 2, 2 * L, 2 * L)
    w[0, 0, 0, 0] = 1
    t = torch.arange(1, 2 * L)
    w[0, 0, t, t - 1] = 1
    w[0, 1, torch.arange(L), torch.arange(L)] = 1
    t = torch.arange(L, 2 * L)
    w[0, 1, t, t - L + 1] = 1
    return w


def test_scores_of_perfect_heads():
    previous, ind = induction.head_scores(_stripes(5), 5)
    assert torch.allclose(previous, torch.tensor([[1.0, 0.0]])) and torch.allclose(ind, torch.tensor([[0.0, 1.0]]))
    padded = torch.zeros(1, 2, 11, 11)                  # one token before the repeat: offset 1
    padded[..., 1:, 1:] = _stripes(5)
    assert torch.allclose(torch.stack(induction.head_scores(padded, 5, offset=1)),
                          torch.stack(induction.head_scores(_stripes(5), 5)))


def test_losses_per_position_and_what_is_read_from_them():
    model = _model()
    tokens = induction.repeated_sequences(4, 6, 13, torch.Generator().manual_seed(2))
    losses = induction.loss_per_position(model, tokens)
    logits = model(tokens)
    manual = torch.nn.functional.cross_entropy(logits[:, :-1].transpose(1, 2), tokens[:, 1:], reduction="none")
    assert losses.shape == (11,) and torch.allclose(losses, manual.mean(0), atol=1e-6)
    fake = torch.arange(11.0)                           # the loss at position t is t
    assert induction.second_copy_loss(fake, 6) == torch.arange(6.0, 11.0).mean()        # targets 7 .. 11
    assert induction.icl_score(fake, 6) == 10 - 2       # the last target (position 10) minus position L/2 - 1
    assert induction.second_copy_loss(torch.arange(12.0), 6, offset=1) == torch.arange(7.0, 12.0).mean()


def test_ablating_a_head_is_zeroing_its_columns_of_w_o_and_leaves_the_model_as_it_was():
    model = _model()
    tokens = induction.repeated_sequences(3, 6, 13, torch.Generator().manual_seed(3))
    before = copy.deepcopy(model.state_dict())
    copied = copy.deepcopy(model)
    with torch.no_grad():
        copied.layers[1].attn.out_proj.weight[:, 8:16] = 0          # head 1 of layer 1 (d_head 8)
    with induction.ablate_heads(model, [(1, 1)]):
        assert torch.allclose(model(tokens), copied(tokens), atol=1e-6)
    assert torch.allclose(model(tokens), _model()(tokens))
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())
    assert not any(m._forward_pre_hooks for m in model.modules()), "a hook was left behind"
    effect = induction.ablation_effect(model, tokens, 1, 1, 6)
    effects = induction.ablation_effects(model, tokens, 6)
    assert effects.shape == (2, 2) and effects[1, 1] == pytest.approx(effect)
    with pytest.raises(ValueError, match="heads 0..1"):
        with induction.ablate_heads(model, [(0, 2)]):
            pass


def test_attention_maps_of_a_gpt_too():
    torch.manual_seed(0)
    gpt = GPT(20, 16, 4, 2, 32, max_len=16, num_kv_heads=2).eval()
    maps = induction.attention_maps(gpt, torch.randint(0, 20, (2, 9)))
    assert maps.shape == (2, 2, 4, 9, 9) and torch.allclose(maps.sum(-1), torch.ones(2, 2, 4, 9), atol=1e-5)
    assert all(layer.attn.attn_weights is None and not layer.attn.store_weights for layer in gpt.layers)
    effects = induction.ablation_effects(gpt, induction.repeated_sequences(2, 4, 20, prefix=[1]), 4, offset=1)
    assert effects.shape == (2, 4)


def test_composition_test_reads_the_layers_it_names():
    model = _model()
    tokens = induction.repeated_sequences(3, 6, 13, torch.Generator().manual_seed(4))
    scores = induction.composition_test(model, tokens, previous_head=0, induction_head=1, half_length=6)
    assert set(scores) == {"none", "queries", "keys"}
    maps = induction.attention_maps(model, tokens)
    assert scores["none"] == pytest.approx(float(induction.head_scores(maps[1, :, 1], 6)[1].mean()), abs=1e-5)
    with pytest.raises(ValueError, match="2-layer"):
        induction.composition_test(_model(layers=1), tokens, 0, 0, 6)
