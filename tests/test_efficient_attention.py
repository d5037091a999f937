"""course_utils.efficient_attention and attention_cost: every efficient form equals the formula it replaces."""
import math

import pytest
import torch

from course_utils import efficient_attention as ea
from course_utils.attention import scaled_dot_product_attention
from course_utils.attention_cost import (
    METHODS,
    attention_memory_bytes,
    fitted_slope,
    peak_memory_bytes,
    plain_attention,
    random_qkv,
    run_attention,
    sdpa_backend,
)
from course_utils.masks import causal_mask, masked_softmax

NEG_INF = float("-inf")


def rows(seed=0):
    g = torch.Generator().manual_seed(seed)
    x = 3 * torch.randn(6, 13, generator=g)
    x[1, ::3] = NEG_INF                 # scattered -inf
    x[2, :5] = NEG_INF                  # a first block of -inf
    x[3] = NEG_INF                      # a fully masked row
    x[4] = torch.sort(x[4]).values      # the maximum grows at every block
    return x


def softmax_with_empty_rows(x):
    """The softmax where x is finite; a row of -inf only -> zeros (the course's masked softmax)."""
    return masked_softmax(torch.nan_to_num(x, neginf=0.0), ~torch.isneginf(x))


@pytest.mark.parametrize("block", [1, 2, 5, 13, 40])
def test_online_softmax_gives_the_softmax_for_any_block_size(block):
    x = rows(block)
    m, ell = ea.online_softmax(ea.column_blocks(x, block))
    assert torch.equal(m, x.amax(-1))
    assert not torch.isnan(ell).any() and ell[3] == 0
    torch.testing.assert_close(ea.softmax_from_stats(x, m, ell), softmax_with_empty_rows(x))


def test_online_softmax_handles_leading_axes():
    x = torch.randn(2, 3, 17)
    m, ell = ea.online_softmax(ea.column_blocks(x, 4))
    assert m.shape == ell.shape == (2, 3)
    torch.testing.assert_close(ea.softmax_from_stats(x, m, ell), x.softmax(-1))


@pytest.mark.parametrize("split", range(14))
def test_merging_the_statistics_of_two_parts_gives_those_of_the_whole(split):
    x = rows(7)
    empty = torch.full((6,), NEG_INF), torch.zeros(6)
    m1, l1 = ea.online_softmax(ea.column_blocks(x[:, :split], 3)) if split else empty
    m2, l2 = ea.online_softmax(ea.column_blocks(x[:, split:], 3)) if split < 13 else empty
    m, ell = ea.merge_softmax_stats(m1, l1, m2, l2)
    m_all, l_all = ea.online_softmax(ea.column_blocks(x, 13))
    assert torch.equal(m, m_all)
    torch.testing.assert_close(ell, l_all)


def test_column_blocks_hand_out_each_block_once():
    x = torch.arange(10.0).reshape(2, 5)
    blocks = ea.column_blocks(x, 2)
    assert len(blocks) == 3
    it = iter(blocks)
    first = next(it)
    assert torch.equal(first, x[:, :2])
    second = next(it)
    assert torch.isnan(first).all() and torch.equal(second, x[:, 2:4])     # the previous block is gone
    last = next(it)
    assert last.shape == (2, 1)
    with pytest.raises(StopIteration):
        next(it)
    assert torch.isnan(last).all()
    with pytest.raises(ea.BlocksReadTwice, match="only once"):
        iter(blocks)
    assert torch.equal(x, torch.arange(10.0).reshape(2, 5))                  # the caller's tensor is untouched
    with pytest.raises(ValueError, match="n >= 1 columns"):
        ea.column_blocks(torch.zeros(3, 0), 2)


def test_column_blocks_cross_to_another_process_as_a_pickle():
    """The instructor's grader hands the stream to the learner's kernel pickled: it arrives unread."""
    import pickle

    blocks = pickle.loads(pickle.dumps(ea.column_blocks(rows(1), 4)))
    m, ell = ea.online_softmax(blocks)
    assert torch.equal(m, rows(1).amax(-1))


def qkv(*shape, d_v=None, seed=0):
    g = torch.Generator().manual_seed(seed)
    *lead, T, d = shape
    return (torch.randn(*lead, T, d, generator=g), torch.randn(*lead, T, d, generator=g),
            torch.randn(*lead, T, d_v or d, generator=g))


@pytest.mark.parametrize("block_q, block_k", [(4, 4), (3, 5), (16, 16), (1, 2), (13, 4), (64, 1)])
@pytest.mark.parametrize("causal", [False, True])
def test_tiled_attention_equals_the_reference(block_q, block_k, causal):
    q, k, v = qkv(2, 3, 13, 8, d_v=5)
    out, lse = ea.tiled_attention(q, k, v, block_q, block_k, causal=causal)
    mask = causal_mask(13) if causal else torch.ones(13, 13, dtype=torch.bool)
    expected = scaled_dot_product_attention(q, k, v, mask)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
    scores = (q @ k.transpose(-2, -1) / math.sqrt(8)).masked_fill(~mask, NEG_INF)
    torch.testing.assert_close(lse, torch.logsumexp(scores, dim=-1), atol=1e-5, rtol=1e-5)


def test_tiled_attention_with_padding_and_fully_masked_rows_gives_zeros_not_nan():
    q, k, v = qkv(3, 2, 10, 4)
    lengths = torch.tensor([10, 4, 0])                    # the last sequence is all padding
    mask = (torch.arange(10)[None, :] < lengths[:, None])[:, None, None, :]
    rows_mask = torch.rand(3, 1, 10, 10, generator=torch.Generator().manual_seed(1)) < 0.5
    rows_mask[0, 0, 3] = False
    for m, causal in ((mask, False), (mask, True), (rows_mask, False), (rows_mask, True)):
        out, lse = ea.tiled_attention(q, k, v, 3, 4, causal=causal, mask=m)
        full = m & causal_mask(10) if causal else m
        assert not out.isnan().any() and torch.equal(torch.isneginf(lse), ~full.expand(3, 2, 10, 10).any(-1))
        torch.testing.assert_close(out, scaled_dot_product_attention(q, k, v, full), atol=1e-5, rtol=1e-5)
    assert torch.equal(ea.tiled_attention(q, k, v, 3, 4, mask=mask)[0][2], torch.zeros(2, 10, 4))


def test_tiled_attention_cross_attention_and_lse():
    q, k, v = torch.randn(2, 7, 4), torch.randn(2, 12, 4), torch.randn(2, 12, 6)
    out, lse = ea.tiled_attention(q, k, v, 3, 5)
    torch.testing.assert_close(out, scaled_dot_product_attention(q, k, v), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(lse, torch.logsumexp(q @ k.transpose(-2, -1) / 2.0, dim=-1))


@pytest.mark.parametrize("window, causal", [((3, 0), True), ((2, 2), False), ((0, 0), False), ((5, 1), True)])
def test_sliding_window_tiles_equal_the_masked_reference(window, causal):
    q, k, v = qkv(1, 2, 20, 4)
    mask = ea.sliding_window_mask(20, *window) & (causal_mask(20) if causal else True)
    out = ea.sliding_window_attention(q, k, v, window, 4, 3, causal=causal)
    torch.testing.assert_close(out, scaled_dot_product_attention(q, k, v, mask), atol=1e-5, rtol=1e-5)


def test_sliding_window_mask_is_lesson_04s_local_window():
    mask = ea.sliding_window_mask(6, 2, 1)
    assert mask[3].tolist() == [False, True, True, True, True, False]     # keys 1..4 for query 3
    assert torch.equal(ea.sliding_window_mask(5, 4), causal_mask(5))       # a window as long as T: causal


@pytest.mark.parametrize("causal, window", [(False, None), (True, None), (True, (5, 0)), (False, (3, 3))])
def test_block_pattern_agrees_with_the_element_wise_mask(causal, window):
    T, bq, bk = 23, 4, 6
    mask = torch.ones(T, T, dtype=torch.bool)
    if causal:
        mask &= causal_mask(T)
    if window:
        mask &= ea.sliding_window_mask(T, *window)
    pattern = ea.block_pattern(T, T, bq, bk, causal, window)
    assert pattern.shape == (6, 4)
    for a in range(6):
        for b in range(4):
            tile = mask[a * bq:(a + 1) * bq, b * bk:(b + 1) * bk]
            expected = ea.SKIP if not tile.any() else ea.FULL if tile.all() else ea.PARTIAL
            assert pattern[a, b] == expected, (a, b)


def test_causal_tiles_skip_about_half_and_windows_grow_linearly():
    n = ea.block_pattern(4096, 4096, 256, causal=True)
    assert (n != ea.SKIP).sum() == 16 * 17 // 2
    computed = [int((ea.block_pattern(T, T, 64, causal=True, window=(255, 0)) != ea.SKIP).sum())
                for T in (1024, 2048, 4096)]
    assert computed[2] - computed[1] == 2 * (computed[1] - computed[0])     # linear in T


def test_backward_from_lse_equals_autograd():
    for causal in (False, True):
        q, k, v = (t.requires_grad_() for t in qkv(2, 11, 4, seed=3))
        out = scaled_dot_product_attention(q, k, v, causal_mask(11) if causal else None)
        grad_out = torch.randn_like(out)
        expected = torch.autograd.grad(out, (q, k, v), grad_out)
        with torch.no_grad():
            o, lse = ea.tiled_attention(q, k, v, 4, 3, causal=causal)
            grads = ea.tiled_attention_backward(q, k, v, o, lse, grad_out, 4, 3, causal=causal)
        for g, e in zip(grads, expected):
            torch.testing.assert_close(g, e, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("causal", [False, True])
def test_linear_attention_equals_its_quadratic_form(causal):
    q, k, v = qkv(2, 3, 9, 4, d_v=6)
    linear = ea.causal_linear_attention if causal else ea.linear_attention
    torch.testing.assert_close(linear(q, k, v), ea.kernel_attention(q, k, v, causal))


def test_plain_attention_equals_the_reference():
    q, k, v = qkv(2, 2, 9, 4)
    mask = causal_mask(9)
    torch.testing.assert_close(plain_attention(q, k, v, mask), scaled_dot_product_attention(q, k, v, mask),
                               atol=1e-6, rtol=1e-5)


def test_counted_memory():
    T, d = 4096, 64
    plain = attention_memory_bytes(T, d, "plain")
    tiled = attention_memory_bytes(T, d, "tiled", 256)
    assert plain == (4 * T * d + 2 * T * T) * 4
    assert tiled - 4 * T * d * 4 == attention_memory_bytes(2 * T, d, "tiled", 256) - 8 * T * d * 4
    with pytest.raises(ValueError, match="method"):
        attention_memory_bytes(T, d, "flash")


def test_bad_input_gets_a_clear_error():
    q, k, v = qkv(1, 8, 4)
    for block in (0, -3, 2.5, True):
        with pytest.raises(ValueError, match="block_q must be a positive int"):
            ea.tiled_attention(q, k, v, block)
    with pytest.raises(ValueError, match="block_k must be a positive int"):
        ea.tiled_attention(q, k, v, 4, 0)
    with pytest.raises(ValueError, match="block_size must be a positive int"):
        ea.column_blocks(q, 0)
    with pytest.raises(ValueError, match="same head dimension"):
        ea.tiled_attention(q, torch.randn(1, 8, 5), v, 4)
    with pytest.raises(ValueError, match="same number of keys"):
        ea.tiled_attention(q, k, torch.randn(1, 7, 4), 4)
    with pytest.raises(ValueError, match="does not broadcast"):
        ea.tiled_attention(q, k, v, 4, mask=torch.ones(7, 8, dtype=torch.bool))
    with pytest.raises(TypeError, match="bool"):
        ea.tiled_attention(q, k, v, 4, mask=torch.ones(8, 8))
    with pytest.raises(ValueError, match="window"):
        ea.sliding_window_attention(q, k, v, 3, 4)
    with pytest.raises(ValueError, match="same head dimension"):
        ea.linear_attention(q, torch.randn(1, 8, 5), v)


def test_sdpa_backend_names_a_kernel():
    q, k, v = qkv(1, 2, 16, 8)
    names = {"MATH", "FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION", "OVERRIDEABLE"}
    assert sdpa_backend(q, k, v) in names
    assert sdpa_backend(q, k, v, dropout_p=0.1) in names


@pytest.mark.parametrize("causal, window", [(False, None), (True, None), (True, (3, 0))])
def test_the_three_methods_agree(causal, window):
    q, k, v = random_qkv(40, 8, batch_heads=2)
    outs = [run_attention(m, q, k, v, block=16, causal=causal, window=window) for m in METHODS]
    for out in outs[1:]:
        torch.testing.assert_close(out, outs[0], atol=1e-5, rtol=1e-5)


def test_fitted_slope():
    assert math.isclose(fitted_slope([1, 2, 4], [3, 12, 48]), 2.0)


def test_peak_memory_is_measured_in_a_fresh_process():
    T, d = 2048, 64
    plain, tiled = peak_memory_bytes("plain", T, d), peak_memory_bytes("tiled", T, d, block=128)
    counted = attention_memory_bytes(T, d, "plain")
    assert 0.9 * counted < plain < 1.5 * counted, (plain, counted)   # the two T x T matrices, and the rest
    assert tiled < plain / 3, (tiled, plain)
    with pytest.raises(ValueError, match="method"):
        peak_memory_bytes("flash", 16)


def test_the_tile_widget_greys_out_the_window_slider_outside_the_sliding_window_pattern(capsys):
    """Lesson 13's widget (its cell run here, matplotlib off screen): the window slider means something for
    the sliding-window pattern only, and is disabled for the others."""
    from pathlib import Path

    import matplotlib.pyplot as plt
    import nbformat
    from ipywidgets import Dropdown, IntSlider, SelectionSlider, interact
    from matplotlib.colors import ListedColormap

    notebook = Path(__file__).resolve().parents[1] / "solutions" / "13_attention_at_scale.ipynb"
    source = next(c.source for c in nbformat.read(notebook, as_version=4).cells if c.get("id") == "widget")
    namespace = dict(ea=ea, attention_memory_bytes=attention_memory_bytes, plt=plt, ListedColormap=ListedColormap,
                     IntSlider=IntSlider, SelectionSlider=SelectionSlider, Dropdown=Dropdown, interact=interact)
    exec(compile(source, "lesson 13, widget cell", "exec"), namespace)
    plt.close("all")
    controls = namespace["controls"]
    assert controls["pattern"].value == "causal" and controls["window_keys"].disabled
    controls["pattern"].value = "causal sliding window"
    assert not controls["window_keys"].disabled
    controls["pattern"].value = "full"
    assert controls["window_keys"].disabled and not controls["T"].disabled
