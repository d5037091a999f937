"""Lesson 14's attention sinks (course_utils.attention_sinks): the weight on the first position, the cache that
keeps the sinks, and scoring a long text one token at a time."""
import pytest
import torch
import torch.nn.functional as F

from course_utils import attention_sinks as sinks_mod
from course_utils.gpt import GPT


def _gpt(layers=2, positions="rope", seed=0):
    torch.manual_seed(seed)
    return GPT(40, 32, 4, layers, 64, max_len=40, positions=positions, num_kv_heads=2).eval()


def test_first_position_mass_of_uniform_attention():
    T = 6
    uniform = torch.ones(T, T).tril()
    uniform = uniform / uniform.sum(-1, keepdim=True)
    maps = uniform.expand(2, 3, 4, T, T)                           # (N, B, h, T, T)
    mass = sinks_mod.first_position_mass(maps)
    assert mass.shape == (2, 4)
    assert torch.allclose(mass, torch.full((2, 4), sinks_mod.uniform_first_position_mass(T)))
    with pytest.raises(ValueError, match="layers, B, heads"):
        sinks_mod.first_position_mass(uniform)


def test_keep_sinks_and_window():
    k = torch.arange(10.0).view(1, 1, 10, 1).expand(2, 3, 10, 4)
    v = -k
    kk, vv = sinks_mod.keep_sinks_and_window(k, v, 2, 3)
    assert kk[0, 0, :, 0].tolist() == [0, 1, 7, 8, 9] and torch.equal(vv, -kk)
    assert sinks_mod.keep_sinks_and_window(k, v, 0, 4)[0][0, 0, :, 0].tolist() == [6, 7, 8, 9]
    assert sinks_mod.keep_sinks_and_window(k, v, 4, 6)[0] is k                 # t <= sinks + window: unchanged
    with pytest.raises(ValueError, match="window"):
        sinks_mod.keep_sinks_and_window(k, v, 1, 0)


def test_full_cache_equals_the_forward_pass():
    model = _gpt()
    tokens = torch.randint(4, 40, (2, 30))
    logits = model(tokens)
    expected = F.cross_entropy(logits[:, :-1].transpose(1, 2), tokens[:, 1:], reduction="none")
    assert torch.allclose(sinks_mod.stream_nll(model, tokens), expected, atol=1e-4)
    assert torch.allclose(sinks_mod.recompute_nll(model, tokens, window=40), expected, atol=1e-4)


def test_the_sliding_cache_puts_its_keys_at_positions_inside_the_cache():
    """In ONE layer a key depends only on its token and its position: the cache of sinks + window, its keys moved
    down as the window slides, must give what a forward pass over exactly those tokens gives."""
    model = _gpt(layers=1)
    tokens = torch.randint(4, 40, (2, 36))
    s, w = 3, 8
    nll = sinks_mod.stream_nll(model, tokens, sinks=s, window=w)
    for t in range(s + w, 35):
        context = torch.cat([tokens[:, :s], tokens[:, t - w:t + 1]], dim=1)     # the sinks, the window, token t
        expected = F.cross_entropy(model(context)[:, -1], tokens[:, t + 1], reduction="none")
        assert torch.allclose(nll[:, t], expected, atol=1e-4), f"token {t}"


def test_bad_settings_are_named():
    with pytest.raises(ValueError, match="rotary positions"):
        sinks_mod.stream_nll(_gpt(positions="learned"), torch.randint(4, 40, (1, 10)), sinks=1, window=4)
    with pytest.raises(ValueError, match="do not fit this model's max_len"):
        sinks_mod.stream_nll(_gpt(), torch.randint(4, 40, (1, 41)))
    with pytest.raises(ValueError, match="must fit max_len"):
        sinks_mod.stream_nll(_gpt(), torch.randint(4, 40, (1, 10)), sinks=4, window=40)


def test_generation_with_the_sliding_cache():
    out = sinks_mod.stream_generate(_gpt(), torch.randint(4, 40, (1, 5)), 50, sinks=2, window=10,
                                    generator=torch.Generator().manual_seed(0))
    assert out.shape == (1, 50) and ((0 <= out) & (out < 40)).all()
