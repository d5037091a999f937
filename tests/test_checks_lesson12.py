"""Lesson 12: what the checks' registries cannot say. (Every check's reference, right answers and registered
mistakes are run by tests/test_exercises.py, from the checks' registries.)"""
import torch

from course_utils.checks.lesson12.sampling_distribution import designed_logits
from course_utils.checks.lesson12.sampling_mistakes import sampling_variant
from course_utils.decoding import sampling_distribution


def test_the_reference_keeps_ties_at_the_kth_logit():
    tied = torch.tensor([[3.0, 2.0, 1.0, 1.0, 1.0, 0.0, -1.0]])
    assert (sampling_distribution(tied, top_k=3) > 0).sum() == 5
    assert (sampling_distribution(tied, top_k=2) > 0).sum() == 2


def test_the_reference_filters_nothing_when_top_k_exceeds_the_vocabulary():
    logits = torch.randn(2, 6)
    assert torch.allclose(sampling_distribution(logits, 1.0, 9, None), logits.softmax(-1))


def test_the_sampling_mistakes_a_test_does_not_offer_give_another_ones_values_there():
    """sampling_mistakes._not_offered: without top-k, leaving every filter unrenormalised is leaving top-p's so;
    with both filters on the designed rows, top-p over the least probable gives top-k alone."""
    logits = torch.randn(4, 10, generator=torch.Generator().manual_seed(0)) * 2
    for top_p in (0.3, 0.75, 0.9):
        assert torch.allclose(sampling_variant(logits, 0.7, None, top_p, "no_renorm_filtered"),
                              sampling_variant(logits, 0.7, None, top_p, "no_renorm"))
    rows = designed_logits(0.7)
    assert torch.allclose(sampling_variant(rows, 0.7, 5, 0.8, "p_ascending"),
                          sampling_variant(rows, 0.7, 5, 0.8, "top_p_skipped"))
