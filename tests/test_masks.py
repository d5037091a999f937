"""The sliding-window mask of lesson 07 (course_utils.masks): a band around the diagonal, the same as
lesson 13's, with clear errors for bad arguments."""
import pytest
import torch

from course_utils import efficient_attention as ea
from course_utils.masks import causal_mask, sliding_window_mask


def test_sliding_window_mask_is_a_band_of_left_and_right_keys():
    assert sliding_window_mask(6, 2, 1).int().tolist() == [[1, 1, 0, 0, 0, 0],   # query 0: keys 0, 1
                                                           [1, 1, 1, 0, 0, 0],
                                                           [1, 1, 1, 1, 0, 0],   # query 2: keys 0 .. 3
                                                           [0, 1, 1, 1, 1, 0],   # query 3: keys 1 .. 4
                                                           [0, 0, 1, 1, 1, 1],
                                                           [0, 0, 0, 1, 1, 1]]
    mask = sliding_window_mask(7, 2, 1)
    assert mask.dtype == torch.bool and mask.shape == (7, 7)
    assert mask.sum(-1).tolist() == [2, 3, 4, 4, 4, 4, 3]                      # ends cut off at 0 and T-1


def test_sliding_window_mask_special_cases():
    t, j = torch.arange(6)[:, None], torch.arange(6)[None, :]
    assert torch.equal(sliding_window_mask(6, 2, 2), (t - j).abs() <= 2)       # symmetric: |t - j| <= w
    assert torch.equal(sliding_window_mask(6, 2), sliding_window_mask(6, 2, 2) & causal_mask(6))  # right=0: causal
    assert torch.equal(sliding_window_mask(6, 5), causal_mask(6))              # as long as T: the causal mask
    assert torch.equal(sliding_window_mask(6, 0), torch.eye(6, dtype=torch.bool))
    assert sliding_window_mask(3, 9, 9).all()


@pytest.mark.parametrize("T, left, right", [(1, 0, 0), (5, 1, 3), (9, 4, 0), (8, 2, 2), (4, 7, 6)])
def test_sliding_window_mask_equals_lesson_13s(T, left, right):
    assert torch.equal(sliding_window_mask(T, left, right), ea.sliding_window_mask(T, left, right))


@pytest.mark.parametrize("args", [(5, -1, 0), (5, 1, -2), (5, 1.5, 0), (5, True, 0), (-1, 1, 1), ("5", 1, 1)])
def test_sliding_window_mask_rejects_bad_arguments(args):
    with pytest.raises(ValueError, match=r"must be an int >= 0 \(query t sees keys t-left \.\. t\+right\)"):
        sliding_window_mask(*args)
