"""The pointer network reference (course_utils.pointer) and the sorting data (course_utils.data.sorting)."""
import numpy as np
import pytest
import torch

from course_utils.data.sorting import LONGER_LENGTHS, TRAIN_LENGTHS, SortingData, make_batch, sort_targets
from course_utils.pointer import (
    PointerAttention,
    PointerNetwork,
    accuracy,
    decode_step,
    evaluate,
    masked_log_softmax,
    masked_softmax,
    pointer_scores,
)


# ---------------------------------------------------------------- masked softmax
def test_masked_softmax_is_a_distribution_over_allowed_positions():
    torch.manual_seed(0)
    scores = 5 * torch.randn(4, 7)
    mask = torch.rand(4, 7) < 0.5
    mask[:, 0] = True
    w = masked_softmax(scores, mask)
    assert torch.allclose(w.sum(-1), torch.ones(4))
    assert (w[~mask] == 0).all()
    # equal to a softmax over the allowed entries only
    for b in range(4):
        assert torch.allclose(w[b, mask[b]], torch.softmax(scores[b, mask[b]], -1))


def test_masked_softmax_fully_masked_row_is_zero_not_nan():
    w = masked_softmax(torch.randn(2, 3), torch.tensor([[False] * 3, [True, False, True]]))
    assert torch.isfinite(w).all() and (w[0] == 0).all() and torch.isclose(w[1].sum(), torch.tensor(1.0))


def test_masked_softmax_without_mask_and_log_version():
    scores = torch.randn(3, 5)
    assert torch.allclose(masked_softmax(scores), torch.softmax(scores, -1))
    mask = torch.tensor([[True, True, False, True, False]] * 3)
    assert torch.allclose(masked_log_softmax(scores, mask).exp(), masked_softmax(scores, mask))


def test_masked_softmax_rejects_bad_masks():
    with pytest.raises(TypeError, match="bool"):
        masked_softmax(torch.randn(2, 3), torch.ones(2, 3))
    with pytest.raises(ValueError, match="shape"):
        masked_softmax(torch.randn(2, 3), torch.ones(2, 4, dtype=torch.bool))


# ---------------------------------------------------------------- scores and attention
def test_pointer_scores_matches_the_formula_position_by_position():
    g = torch.Generator().manual_seed(1)
    B, T, d_h, d_s, d_attn = 2, 5, 6, 4, 3
    h, s = torch.randn(B, T, d_h, generator=g), torch.randn(B, d_s, generator=g)
    W_h, W_s = torch.randn(d_h, d_attn, generator=g), torch.randn(d_s, d_attn, generator=g)
    v = torch.randn(d_attn, generator=g)
    e = pointer_scores(h, s, W_h, W_s, v)
    assert e.shape == (B, T)
    for b in range(B):
        for j in range(T):
            expected = v @ torch.tanh(W_h.T @ h[b, j] + W_s.T @ s[b])
            assert torch.isclose(e[b, j], expected, atol=1e-5)
    with pytest.raises(ValueError, match="shape"):
        pointer_scores(h, s[0], W_h, W_s, v)


def test_pointer_attention_keeps_its_weights():
    torch.manual_seed(0)
    attention = PointerAttention(d_h=6, d_s=4, d_attn=5)
    h, s = torch.randn(3, 7, 6), torch.randn(3, 4)
    mask = torch.ones(3, 7, dtype=torch.bool)
    mask[:, 2] = False
    w = attention(h, s, mask)
    assert torch.equal(attention.attn_weights, w.detach())
    assert torch.allclose(w, masked_softmax(attention.scores(h, s), mask))
    assert (w[:, 2] == 0).all()


# ---------------------------------------------------------------- the network
@pytest.mark.parametrize("encoder", ["lstm", "set"])
def test_forward_shapes_masking_and_greedy_agree(encoder):
    torch.manual_seed(0)
    model = PointerNetwork(d_model=16, encoder=encoder).eval()
    x, y = make_batch(4, 6, np.random.default_rng(0))
    log_probs, pointers = model(x, y)
    assert log_probs.shape == (4, 6, 6) and torch.equal(pointers, y)
    # under teacher forcing, the positions chosen before step i are -inf at step i
    for i in range(6):
        assert torch.isinf(log_probs[torch.arange(4)[:, None], i, y[:, :i]]).all()
        assert torch.allclose(log_probs[:, i].exp().sum(-1), torch.ones(4), atol=1e-5)
    greedy, weights = model.greedy(x, return_weights=True)
    assert torch.equal(greedy, model(x)[1])
    assert torch.equal(greedy.sort(-1).values, torch.arange(6).expand(4, 6))   # a permutation
    assert weights.shape == (4, 6, 6) and torch.allclose(weights.sum(-1), torch.ones(4, 6), atol=1e-5)
    assert torch.isfinite(model.loss(x, y))


def test_decode_step_points_with_the_updated_state_and_masks_the_choice():
    torch.manual_seed(0)
    model = PointerNetwork(d_model=8).eval()
    x = torch.rand(3, 5)
    with torch.no_grad():
        h, state = model.encode(x)
        mask = torch.ones(3, 5, dtype=torch.bool)
        mask[0, 1] = False
        weights, j, new_mask, (s, c) = decode_step(model, h, state, model.start_input(3), mask)
        s_expected, _ = model.decoder(model.start_input(3), state)
        assert torch.allclose(s, s_expected)
        assert torch.allclose(weights, masked_softmax(model.pointer.scores(h, s), mask))
    assert torch.equal(j, weights.argmax(-1)) and j[0] != 1
    assert (new_mask.sum(-1) == mask.sum(-1) - 1).all() and not new_mask[torch.arange(3), j].any()


def test_network_rejects_bad_arguments():
    with pytest.raises(ValueError, match="encoder"):
        PointerNetwork(encoder="gru")
    model = PointerNetwork(d_model=8)
    with pytest.raises(ValueError, match="shape"):
        model(torch.rand(5))
    with pytest.raises(ValueError, match="targets"):
        model(torch.rand(2, 5), torch.zeros(2, 4, dtype=torch.long))


def test_accuracy_counts_positions_and_whole_sequences():
    targets = torch.tensor([[0, 1, 2], [2, 1, 0]])
    pointers = torch.tensor([[0, 1, 2], [2, 0, 1]])
    assert accuracy(pointers, targets) == pytest.approx((4 / 6, 0.5))


def test_a_small_network_learns_to_sort_five_numbers():
    torch.manual_seed(0)
    data = SortingData(seed=0, train_lengths=(5,))
    model = PointerNetwork(d_model=32)
    optimizer = torch.optim.Adam(model.parameters(), lr=5e-3)
    for x, y in data.train_batches(60, batch_size=64):     # reaches about 97% in ~2 s
        loss = model.loss(x, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    per_position, _ = evaluate(model, *data.test_set(5, 200))
    assert per_position > 0.85


# ---------------------------------------------------------------- sorting data
def test_targets_sort_the_inputs():
    x, y = make_batch(8, 7, np.random.default_rng(0))
    assert x.shape == y.shape == (8, 7) and x.dtype == torch.float32 and y.dtype == torch.int64
    assert ((0 <= x) & (x < 1)).all()
    sorted_x = x.gather(1, y)
    assert (sorted_x[:, 1:] >= sorted_x[:, :-1]).all()
    assert np.array_equal(sort_targets(x.numpy()), sort_targets(x).numpy())


def test_sorting_data_is_seeded_and_mixes_training_lengths():
    a = list(SortingData(seed=3).train_batches(30, batch_size=4))
    b = list(SortingData(seed=3).train_batches(30, batch_size=4))
    assert all(torch.equal(xa, xb) for (xa, _), (xb, _) in zip(a, b))
    assert {x.shape[1] for x, _ in a} <= set(TRAIN_LENGTHS) and len({x.shape[1] for x, _ in a}) > 2
    assert not torch.equal(SortingData(seed=4).test_set(10, 5)[0], SortingData(seed=3).test_set(10, 5)[0])


def test_test_sets_are_fixed_and_any_length():
    data = SortingData(seed=0)
    assert torch.equal(data.test_set(10, 50)[0], data.test_set(10, 50)[0])
    for length in (LONGER_LENGTHS[0], LONGER_LENGTHS[-1]):
        x, y = data.test_set(length, 3)
        assert x.shape == (3, length)
    x_train = next(iter(data.train_batches(1, 200)))[0]
    assert not torch.equal(x_train, data.test_set(x_train.shape[1], 200)[0])   # separate seed streams


def test_sorting_data_rejects_bad_arguments():
    with pytest.raises(TypeError, match="Generator"):
        make_batch(2, 3, 0)
    with pytest.raises(ValueError, match=">= 1"):
        make_batch(2, 0, np.random.default_rng(0))
    with pytest.raises(ValueError, match="train_lengths"):
        SortingData(train_lengths=())
