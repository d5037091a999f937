"""course_utils.circuits (lesson 14): one head's matrices, its OV and QK circuits, K-composition read from the
weights, and activation patching, against the model's own modules."""
import pytest
import torch

from course_utils import circuits
from course_utils.gpt import GPT
from course_utils.induction import AttentionOnly, attention_heads, repeated_sequences


def _model(seed=0, vocab=11, d_model=12, heads=3, kv_heads=None):
    torch.manual_seed(seed)
    model = AttentionOnly(vocab, d_model, heads, num_layers=2, max_len=12).eval()
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 1:
                p.normal_(0, 0.3)
    return model


def test_head_weights_are_what_the_module_computes_for_that_head():
    model = _model()
    attn = model.layers[1].attn
    x = torch.randn(2, 5, 12)
    q, k, v = attn.in_proj(x).split([12, 12, 12], dim=-1)
    b_q, b_k, b_v = attn.in_proj.bias.detach().split([12, 12, 12])
    for head in range(3):
        W_Q, W_K, W_V, W_O = circuits.head_weights(attn, head)
        cols = slice(head * 4, (head + 1) * 4)
        torch.testing.assert_close(x @ W_Q, (q - b_q)[..., cols])
        torch.testing.assert_close(x @ W_K, (k - b_k)[..., cols])
        torch.testing.assert_close(x @ W_V, (v - b_v)[..., cols])
        z = torch.zeros(2, 5, 12)
        z[..., cols] = torch.randn(2, 5, 4)
        torch.testing.assert_close(z[..., cols] @ W_O, attn.out_proj(z) - attn.out_proj.bias.detach())


def test_grouped_query_heads_share_their_key_and_value_matrices():
    torch.manual_seed(0)
    gpt = GPT(17, 16, 4, 1, 32, max_len=8, positions="rope", num_kv_heads=2)
    attn = attention_heads(gpt)[0]
    w = [circuits.head_weights(attn, j) for j in range(4)]
    assert torch.equal(w[0][1], w[1][1]) and torch.equal(w[2][2], w[3][2]) and not torch.equal(w[1][1], w[2][1])
    assert circuits.ov_circuit(gpt, 0, 3).shape == (17, 17)             # a GPT's unembedding is its `head`


def test_the_ov_circuit_is_the_path_from_a_token_through_the_head_to_the_logits():
    model = _model(1)
    attn = model.layers[0].attn
    ov = circuits.ov_circuit(model, 0, 2)
    for a in (0, 5, 10):
        e = model.embed.weight[a].detach()
        v = (attn.in_proj(e) - attn.in_proj.bias)[24 + 8:24 + 12]          # head 2's value, without its bias
        z = torch.zeros(12)
        z[8:12] = v
        written = attn.out_proj(z) - attn.out_proj.bias
        torch.testing.assert_close(ov[a], (model.unembed(written) - model.unembed.bias).detach())


def test_a_copying_head_has_eigenvalue_score_one_and_its_diagonal_on_top():
    torch.manual_seed(0)
    model = AttentionOnly(8, 8, 1, num_layers=1, max_len=8)
    with torch.no_grad():
        model.embed.weight.copy_(torch.eye(8))
        model.unembed.weight.copy_(torch.eye(8))
        model.layers[0].attn.in_proj.weight[16:24] = torch.eye(8)       # W_V = I
        model.layers[0].attn.out_proj.weight.copy_(2 * torch.eye(8))     # W_O = 2 I
    ov = circuits.ov_circuit(model, 0, 0)
    torch.testing.assert_close(ov, 2 * torch.eye(8))
    assert circuits.eigenvalue_score(ov) == pytest.approx(1.0)
    assert circuits.diagonal_top1(ov) == 1.0
    assert circuits.eigenvalue_score(-ov) == pytest.approx(-1.0) and circuits.diagonal_top1(-ov) == 0.0


def test_k_composition_is_the_score_through_what_the_first_layer_head_wrote():
    model = _model(2)
    first, second = attention_heads(model)
    kc = circuits.k_composition(model, 1, 2)
    W_E = model.embed.weight.detach()
    a, c = 3, 7
    _, _, V1, O1 = circuits.head_weights(first, 1)
    W_Q, W_K, _, _ = circuits.head_weights(second, 2)
    written = W_E[c] @ V1 @ O1                                          # what head 1 of layer 0 writes after c
    assert kc[a, c] == pytest.approx(float((W_E[a] @ W_Q) @ (written @ W_K)), rel=1e-5)
    direct = circuits.qk_circuit(model, 1, 2)
    assert direct[a, c] == pytest.approx(float((W_E[a] @ W_Q) @ (W_E[c] @ W_K)), rel=1e-5)


def test_composition_scores_are_zero_for_orthogonal_subspaces_and_bounded():
    A = torch.zeros(6, 6)
    A[:, :3] = torch.randn(6, 3)                                         # writes into features 0..2
    B = torch.zeros(6, 6)
    B[3:] = torch.randn(3, 6)                                            # reads features 3..5
    assert circuits.composition_score(A, B) == pytest.approx(0.0)
    assert 0 < circuits.composition_score(A, A.T) <= 1
    scores = circuits.k_composition_scores(_model(3))
    assert scores.shape == (3, 3) and bool(((scores >= 0) & (scores <= 1)).all())


def test_patching_takes_one_heads_output_from_the_clean_run_and_leaves_the_model_as_it_was():
    model = _model(4).train()
    g = torch.Generator().manual_seed(0)
    clean, corrupted = torch.randint(0, 11, (3, 10), generator=g), torch.randint(0, 11, (3, 10), generator=g)
    with torch.no_grad():
        plain = model(corrupted)
    assert torch.allclose(circuits.patch_head(model, corrupted, corrupted, 1, 0), plain, atol=1e-6)
    patched = circuits.patch_head(model, clean, corrupted, 1, 2)
    assert not torch.allclose(patched, plain, atol=1e-3)
    assert model.training and not any(m._forward_pre_hooks or m._forward_hooks for m in model.modules())
    # the same by hand: layer 1's attention output on the corrupted run, head 2's slice replaced by the clean one
    attn = model.layers[1].attn
    kept = {}
    h = attn.out_proj.register_forward_pre_hook(lambda m, a: kept.update(z=a[0][..., 8:12].clone()))
    with torch.no_grad():
        model(clean)
    h.remove()

    def put(m, a):
        z = a[0].clone()
        z[..., 8:12] = kept["z"]
        return (z,)
    h = attn.out_proj.register_forward_pre_hook(put)
    with torch.no_grad():
        by_hand = model(corrupted)
    h.remove()
    torch.testing.assert_close(patched, by_hand)
    maps = circuits.patched_attention_maps(model, clean, corrupted, 0, 1)
    assert maps.shape == (2, 3, 3, 10, 10) and torch.allclose(maps.sum(-1), torch.ones(2, 3, 3, 10))


def test_patching_effects_are_shares_of_the_gap_and_bad_input_is_named():
    model = _model(5)
    g = torch.Generator().manual_seed(1)
    clean = repeated_sequences(8, 5, 11, g)
    corrupted = torch.cat([torch.randint(0, 11, (8, 5), generator=g), clean[:, 5:]], dim=1)
    effects = circuits.patching_effects(model, clean, corrupted, 5)
    assert effects.shape == (2, 3) and torch.isfinite(effects).all()
    with pytest.raises(ValueError, match="same shape"):
        circuits.patch_head(model, clean, corrupted[:, :-1], 0, 0)
    with pytest.raises(ValueError, match="heads 0 .. 2"):
        circuits.patch_head(model, clean, corrupted, 0, 3)
    with pytest.raises(ValueError, match="layer must be in 0 .. 1"):
        circuits.ov_circuit(model, 2, 0)
