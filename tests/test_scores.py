"""course_utils.scores: masked softmax, the score functions (against their formulas), the modules."""
import math

import pytest
import torch

from course_utils import scores as S


def randn(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def test_masked_softmax_keeps_true_and_zeros_fully_masked_rows():
    e = randn(3, 5)
    mask = torch.tensor([[1, 1, 0, 1, 0], [0, 0, 0, 0, 0], [1, 1, 1, 1, 1]], dtype=torch.bool)
    w = S.masked_softmax(e, mask)
    assert torch.all(w[~mask] == 0)
    assert torch.allclose(w[0].sum(), torch.tensor(1.0)) and torch.allclose(w[2], torch.softmax(e[2], -1))
    assert torch.all(w[1] == 0)
    assert torch.allclose(w[0, [0, 1, 3]], torch.softmax(e[0, [0, 1, 3]], -1))


def test_masked_softmax_broadcasts_and_has_finite_gradients():
    e = randn(2, 3, 4).requires_grad_()
    mask = torch.tensor([[True, True, False, False], [False] * 4])[:, None, :]  # (2, 1, 4)
    w = S.masked_softmax(e, mask)
    assert w.shape == (2, 3, 4)
    (w * randn(2, 3, 4, seed=1)).sum().backward()
    assert torch.isfinite(e.grad).all()


def test_masked_softmax_rejects_bad_masks():
    with pytest.raises(TypeError, match="bool tensor"):
        S.masked_softmax(randn(2, 3), torch.ones(2, 3))
    with pytest.raises(ValueError, match="broadcast"):
        S.masked_softmax(randn(2, 3), torch.ones(2, 4, dtype=torch.bool))


def test_score_functions_match_their_formulas():
    B, T, d = 2, 5, 4
    s, h = randn(B, d), randn(B, T, d, seed=1)
    W, v = randn(3, 2 * d, seed=2), randn(3, seed=3)
    W_g, W_l = randn(d, d, seed=4), randn(7, d, seed=5)
    for b in range(B):
        for i in range(T):
            dot = s[b] @ h[b, i]
            assert torch.isclose(S.dot_score(s, h)[b, i], dot, atol=1e-5)
            assert torch.isclose(S.scaled_dot_score(s, h)[b, i], dot / math.sqrt(d), atol=1e-5)
            cos = dot / (s[b].norm() * h[b, i].norm())
            assert torch.isclose(S.cosine_score(s, h, beta=3.0)[b, i], 3 * cos, atol=1e-5)
            add = v @ torch.tanh(W @ torch.cat([s[b], h[b, i]]))
            assert torch.isclose(S.additive_score(s, h, W, v)[b, i], add, atol=1e-5)
            assert torch.isclose(S.general_score(s, h, W_g)[b, i], s[b] @ W_g @ h[b, i], atol=1e-5)
            assert torch.isclose(S.location_score(s, W_l, T)[b, i], W_l[i] @ s[b], atol=1e-5)


def test_additive_module_equals_additive_score():
    module = S.AdditiveScore(4, 6, 3)
    s, h = randn(2, 4), randn(2, 5, 6, seed=1)
    expected = S.additive_score(s, h, module.W_a.weight, module.v_a.weight[0])
    assert torch.allclose(module(s, h), expected, atol=1e-6)


@pytest.mark.parametrize("name", S.SCORE_NAMES)
def test_every_score_module_in_attention(name):
    d = 6
    attention = S.Attention(S.make_score(name, d, d, d_attn=5, max_len=10))
    s, h = randn(3, d), randn(3, 7, d, seed=1)
    mask = torch.arange(7)[None, :] < torch.tensor([7, 3, 1])[:, None]
    c, alpha = attention(s, h, mask)
    assert c.shape == (3, d) and alpha.shape == (3, 7)
    assert torch.allclose(alpha.sum(-1), torch.ones(3), atol=1e-5) and torch.all(alpha[~mask] == 0)
    assert torch.allclose(c, torch.einsum("bt,btd->bd", alpha, h), atol=1e-6)
    assert torch.equal(attention.attn_weights, alpha.detach())


def test_size_errors_are_named():
    with pytest.raises(ValueError, match="same size"):
        S.dot_score(randn(2, 3), randn(2, 4, 5))
    with pytest.raises(ValueError, match="at most 4 source positions"):
        S.location_score(randn(2, 3), randn(4, 3), 6)
    with pytest.raises(ValueError, match="unknown score"):
        S.make_score("nope", 3, 3)


def test_local_p_weights_window():
    e = torch.zeros(1, 11)
    w = S.local_p_weights(e, None, torch.tensor([5.0]), D=2)
    assert torch.all(w[0, :3] == 0) and torch.all(w[0, 8:] == 0)
    assert w[0].argmax() == 5 and torch.allclose(w[0, 4], w[0, 6])
    attention = S.LocalPAttention(S.DotScore(), d_s=4, D=2)
    c, alpha = attention(randn(2, 4), randn(2, 9, 4, seed=1), torch.ones(2, 9, dtype=torch.bool))
    assert c.shape == (2, 4) and alpha.shape == (2, 9) and (alpha >= 0).all()


def test_local_p_predicts_the_position_then_weights_the_window():
    s, W_p, v_p = randn(3, 4), randn(5, 4, seed=1), randn(5, seed=2)
    e, last = randn(3, 10, seed=3), torch.tensor([9.0, 6.0, 3.0])      # last position S = length - 1
    mask = torch.arange(10)[None, :] <= last[:, None]
    p, alpha = S.local_p(e, mask, s, W_p, v_p, last, 2)
    assert torch.allclose(p, last * torch.sigmoid(torch.tanh(s @ W_p.T) @ v_p))
    assert torch.all((0 <= p) & (p <= last))
    assert torch.allclose(alpha, S.local_p_weights(e, mask, p, 2))
    outside = ((torch.arange(10)[None, :] - p[:, None]).abs() > 2) | ~mask
    assert torch.all(alpha[outside] == 0) and torch.all(alpha.sum(-1) <= 1 + 1e-6)


def test_reinforce_loss_formula_and_gradient():
    log_alpha = torch.log_softmax(randn(4, 5), -1).requires_grad_()
    sampled = torch.tensor([0, 3, 3, 1])
    reward = torch.tensor([1.0, 0.0, 1.0, 1.0], requires_grad=True)
    baseline = torch.tensor(0.25, requires_grad=True)           # e.g. a learned baseline
    loss = S.reinforce_loss(log_alpha, sampled, reward, baseline)
    expected = -((reward - baseline) * log_alpha[torch.arange(4), sampled]).mean()
    assert loss.shape == () and torch.isclose(loss, expected)
    loss.backward()
    assert reward.grad is None and baseline.grad is None       # (r - b) is a constant
    grad = torch.zeros(4, 5)
    grad[torch.arange(4), sampled] = -(reward.detach() - 0.25) / 4
    assert torch.allclose(log_alpha.grad, grad)
    plain = S.reinforce_loss(log_alpha.detach(), sampled, reward.detach(), 0.25)   # a float baseline works too
    assert torch.isclose(plain, expected.detach())


def test_mismatched_shapes_are_named_not_raw_einsum_errors():
    import pytest
    import torch

    from course_utils import scores

    with pytest.raises(ValueError, match=r"weights \(B, T\) and h \(B, T, d_h\) with the same B and T, got \(2, 5\)"):
        scores.context_vector(torch.ones(2, 5), torch.ones(2, 4, 3))
    with pytest.raises(ValueError, match=r"s \(B, d_s\) and h \(B, T, d_h\) with the same batch size"):
        scores.dot_score(torch.ones(3, 4), torch.ones(2, 5, 4))
