"""The NTM references in course_utils.memory and the copy task generator."""
import math

import numpy as np
import pytest
import torch

from course_utils import memory as ntm
from course_utils.data.copy_task import CopyTask, copy_batch, output_steps


def dist(*shape, seed=0):
    return torch.softmax(torch.randn(*shape, generator=torch.Generator().manual_seed(seed)), -1)


def test_cosine_matches_torch_and_zero_rows_are_safe():
    memory, k = torch.randn(3, 7, 5), torch.randn(3, 5)
    expected = torch.nn.functional.cosine_similarity(memory, k.unsqueeze(1), dim=-1)
    assert torch.allclose(ntm.cosine_similarity(k, memory), expected, atol=1e-6)
    memory[0, 2] = 0.0
    k.requires_grad_(True)
    out = ntm.cosine_similarity(k, memory)
    assert out[0, 2] == 0 and torch.isfinite(out).all()
    out.sum().backward()
    assert torch.isfinite(k.grad).all()


def test_content_addressing_is_a_distribution_and_beta_focuses():
    memory = torch.randn(2, 6, 4)
    k = memory[:, 3].clone()
    w = ntm.content_addressing(k, torch.full((2, 1), 100.0), memory)
    assert torch.allclose(w.sum(-1), torch.ones(2)) and (w.argmax(-1) == 3).all()
    uniform = ntm.content_addressing(k, torch.zeros(2, 1), memory)
    assert torch.allclose(uniform, torch.full((2, 6), 1 / 6))


def test_interpolate_endpoints():
    w_c, w_prev = dist(2, 5, seed=1), dist(2, 5, seed=2)
    assert torch.allclose(ntm.interpolate(w_c, w_prev, torch.ones(2, 1)), w_c)
    assert torch.allclose(ntm.interpolate(w_c, w_prev, torch.zeros(2, 1)), w_prev)


def test_shift_is_circular_and_matches_the_formula():
    w = torch.zeros(1, 5)
    w[0, 4] = 1.0
    assert torch.equal(ntm.shift(w, torch.tensor([[0.0, 0.0, 1.0]])), torch.tensor([[1.0, 0, 0, 0, 0]]))
    w, s = dist(3, 8, seed=3), dist(3, 5, seed=4)
    out = ntm.shift(w, s)
    N, R = 8, 2
    for i in range(N):  # w_s(i) = sum_k s(k) w(i - k)
        expected = sum(s[:, R + k] * w[:, (i - k) % N] for k in range(-R, R + 1))
        assert torch.allclose(out[:, i], expected, atol=1e-6)
    with pytest.raises(ValueError, match="odd number"):
        ntm.shift(w, torch.ones(3, 4) / 4)


def test_sharpen_properties():
    w, gamma = dist(4, 9, seed=5), 1 + torch.rand(4, 1) * 5
    out = ntm.sharpen(w, gamma)
    assert torch.allclose(out.sum(-1), torch.ones(4)) and torch.equal(out.argmax(-1), w.argmax(-1))
    assert torch.allclose(ntm.sharpen(w, torch.ones(4, 1)), w, atol=1e-6)
    assert (out.max(-1).values >= w.max(-1).values - 1e-6).all()
    zeros = torch.tensor([[0.0, 1.0, 0.0]], requires_grad=True)
    gamma = torch.tensor([[2.0]], requires_grad=True)
    ntm.sharpen(zeros, gamma)[0, 1].backward()
    assert torch.isfinite(gamma.grad).all()


def test_address_runs_all_stages_and_heads_broadcast():
    memory = torch.randn(2, 10, 4)
    w_prev, k = dist(2, 3, 10), torch.randn(2, 3, 4)
    beta, g, gamma = torch.rand(2, 3, 1) * 5, torch.rand(2, 3, 1), 1 + torch.rand(2, 3, 1)
    s = dist(2, 3, 3)
    w, stages = ntm.address(memory.unsqueeze(1), w_prev, k, beta, g, s, gamma, return_stages=True)
    assert w.shape == (2, 3, 10) and list(stages) == ["content", "interpolated", "shifted", "sharpened"]
    for name, stage in stages.items():
        assert torch.allclose(stage.sum(-1), torch.ones(2, 3), atol=1e-5), name
    one = ntm.address(memory, w_prev[:, 1], k[:, 1], beta[:, 1], g[:, 1], s[:, 1], gamma[:, 1])
    assert torch.allclose(one, w[:, 1], atol=1e-6)


def test_read_and_write():
    memory, w = torch.randn(2, 6, 3), dist(2, 6, seed=6)
    assert torch.allclose(ntm.memory_read(memory, w), torch.einsum("bn,bnm->bm", w, memory), atol=1e-6)
    e, a = torch.rand(2, 3), torch.randn(2, 3)
    new = ntm.memory_write(memory, w, e, a)
    for i in range(6):
        expected = memory[:, i] * (1 - w[:, i:i + 1] * e) + w[:, i:i + 1] * a
        assert torch.allclose(new[:, i], expected, atol=1e-6)
    onehot = torch.zeros(2, 6)
    onehot[:, 2] = 1
    replaced = ntm.memory_write(memory, onehot, torch.ones(2, 3), a)
    assert torch.allclose(replaced[:, 2], a) and torch.allclose(replaced[:, 3:], memory[:, 3:])


def test_head_parameters_ranges():
    k, beta, g, s, gamma = ntm.head_parameters(torch.randn(5, 2, 4 + 6) * 10, M=4, num_shifts=3)
    assert k.shape == (5, 2, 4) and s.shape == (5, 2, 3)
    assert (beta >= 0).all() and ((g >= 0) & (g <= 1)).all() and (gamma >= 1).all()
    assert torch.allclose(s.sum(-1), torch.ones(5, 2))
    with pytest.raises(ValueError, match="raw"):
        ntm.head_parameters(torch.randn(5, 9), M=4)


def test_ntm_shapes_weights_and_gradients(one_thread):
    torch.manual_seed(0)
    model = ntm.NTM(input_size=9, output_size=8, controller_size=16, N=12, M=6)
    x, y = copy_batch(3, 4, seed=0)
    logits = model(x)
    assert logits.shape == (3, 9, 8)
    assert model.read_weights.shape == (3, 9, 12) and model.write_weights.shape == (3, 9, 12)
    assert model.attn_weights.shape == (3, 9, 2, 12) and model.memory.shape == (3, 12, 6)
    assert torch.allclose(model.read_weights.sum(-1), torch.ones(3, 9), atol=1e-5)
    cost = ntm.bits_per_sequence(output_steps(logits, 4), y)
    cost.backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)
    assert model.cell.heads.weight.grad.abs().sum() > 0
    with pytest.raises(ValueError, match="NTM expects"):
        model(torch.zeros(3, 5, 7))


def test_bits_per_sequence():
    logits, targets = torch.zeros(4, 3, 8), torch.ones(4, 3, 8)
    assert math.isclose(ntm.bits_per_sequence(logits, targets).item(), 24.0, rel_tol=1e-6)  # 1 bit each


def test_ntm_fits_a_fixed_batch(one_thread):
    torch.manual_seed(0)
    model = ntm.NTM(9, 8, controller_size=16, N=6, M=4)
    opt = torch.optim.Adam(model.parameters(), lr=2e-2)
    x, y = copy_batch(8, 2, seed=0)
    costs = []
    for _ in range(15):
        cost = ntm.bits_per_sequence(output_steps(model(x), 2), y)
        opt.zero_grad()
        cost.backward()
        opt.step()
        costs.append(cost.item())
    assert costs[-1] < 0.8 * costs[0]


def test_copy_batch_layout_and_seeding():
    x, y = copy_batch(5, 3, seed=1)
    assert x.shape == (5, 7, 9) and y.shape == (5, 3, 8)
    assert torch.equal(x[:, :3, :8], y) and torch.equal(x[:, 3:, :8], torch.zeros(5, 4, 8))
    assert torch.equal(x[:, :, 8], torch.tensor([0, 0, 0, 1, 0, 0, 0.0]).expand(5, 7))
    assert torch.equal(copy_batch(5, 3, seed=1)[0], x) and not torch.equal(copy_batch(5, 3, seed=2)[0], x)
    assert set(np.unique(y.numpy())) <= {0.0, 1.0}
    assert output_steps(torch.zeros(5, 7, 8), 3).shape == (5, 3, 8)
    with pytest.raises(ValueError):
        copy_batch(2, 0)


def test_copy_task_lengths():
    task = CopyTask(2, 5, batch_size=3, seed=0)
    lengths = set()
    for _ in range(50):
        x, y, length = next(task)
        assert 2 <= length <= 5 and x.shape == (3, 2 * length + 1, 9) and y.shape == (3, length, 8)
        lengths.add(length)
    assert lengths == {2, 3, 4, 5}
    a, b = CopyTask(1, 20, seed=7), CopyTask(1, 20, seed=7)
    assert all(torch.equal(next(a)[0], next(b)[0]) for _ in range(3))


@pytest.mark.slow
def test_ntm_learns_the_copy_task(one_thread):
    """The lesson's full-mode run: lengths 1-20, batches of 16, Adam 3e-3 (about 30 s of CPU)."""
    torch.manual_seed(0)
    model = ntm.NTM(9, 8, controller_size=100, N=64, M=20)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    task = CopyTask(1, 20, batch_size=16, seed=0)
    costs = []
    while len(costs) * 16 < 30_000 and not (len(costs) >= 32 and np.mean(costs[-32:]) < 0.1):
        x, y, length = next(task)
        cost = ntm.bits_per_sequence(output_steps(model(x), length), y)
        opt.zero_grad()
        cost.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 10.0)
        opt.step()
        costs.append(cost.item())
    assert np.mean(costs[-32:]) < 0.1, f"not learned after {16 * len(costs)} sequences"
    with torch.no_grad():
        x, y = copy_batch(16, 30, seed=3)  # longer than any training sequence
        assert ((output_steps(model(x), 30) > 0).float() != y).float().mean() < 0.01
