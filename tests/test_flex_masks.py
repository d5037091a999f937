"""The course's masks as FlexAttention's mask_mod / score_mod (course_utils.flex_masks): each describes the very
mask the course builds with its own functions, and flex_attention in eager mode on a CPU gives the course's masked
attention with it; the block mask computes the tiles the lesson's kernel computes."""
import pytest
import torch

from course_utils import efficient_attention as ea
from course_utils import flex_masks as fm
from course_utils.attention import scaled_dot_product_attention
from course_utils.local_attention import attention_with_sink

B, H, T, D = 2, 2, 40, 16


@pytest.fixture(scope="module")
def qkv():
    g = torch.Generator().manual_seed(0)
    return tuple(torch.randn(B, H, T, D, generator=g) for _ in range(3))


@pytest.mark.parametrize("name", list(fm.COURSE_MASKS))
def test_each_mask_mod_is_the_courses_mask_and_flex_attention_equals_the_courses_attention(name, qkv):
    mask_mod, course = fm.COURSE_MASKS[name]
    q, k, v = qkv
    assert torch.equal(fm.dense(mask_mod, B, H, T), torch.broadcast_to(course, (B, H, T, T)))
    out, lse = fm.flex(q, k, v, mask_mod)
    assert torch.allclose(out, scaled_dot_product_attention(q, k, v, course), atol=1e-5)
    assert torch.allclose(lse, ea.tiled_attention(q, k, v, 16, mask=course)[1], atol=1e-5)


def test_a_score_mod_gives_the_same_values_but_skips_no_tile(qkv):
    q, k, v = qkv
    masked, _ = fm.flex(q, k, v, mask_mod=fm.causal)
    scored, _ = fm.flex(q, k, v, score_mod=fm.causal_score)
    assert torch.allclose(masked, scored, atol=1e-6)
    full, partial = fm.computed_tiles(fm.block_mask(fm.causal, 1, 1, 64))
    assert (full, partial) == (6, 4)                    # of the 16 tiles of 16 x 16: 6 below the diagonal, 4 on it


@pytest.mark.parametrize("T_, block, window", [(64, 16, None), (100, 16, None), (128, 16, 24), (96, 32, 8)])
def test_the_block_mask_computes_the_tiles_the_lessons_kernel_computes(T_, block, window):
    mod = fm.causal if window is None else fm.sliding_window(window)
    pattern = ea.block_pattern(T_, T_, block, causal=True, window=None if window is None else (window - 1, 0))
    full, partial = fm.computed_tiles(fm.block_mask(mod, 1, 1, T_, block))
    grid = fm.tile_grid(mod, T_, block)
    assert (int((grid == ea.FULL).sum()), int((grid == ea.PARTIAL).sum())) == (full, partial)
    assert full + partial == int((pattern != ea.SKIP).sum())            # the same tiles computed, the same skipped
    if T_ % block == 0:                                                 # (FlexAttention counts a tile that holds
        assert full == int((pattern == ea.FULL).sum())                  # positions past T as partial)


def test_a_learned_sink_comes_from_flex_attentions_log_sum_exp(qkv):
    q, k, v = qkv
    sink = torch.tensor([0.5, -1.0])
    out, lse = fm.flex(q, k, v, fm.causal)
    expected, _ = attention_with_sink(q, k, v, sink, fm.dense(fm.causal, B, H, T))
    assert torch.allclose(fm.with_sink(out, lse, sink), expected, atol=1e-5)


def test_a_window_of_no_key_is_refused():
    with pytest.raises(ValueError, match="window must be >= 1"):
        fm.sliding_window(0)
