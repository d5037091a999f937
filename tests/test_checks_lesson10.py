"""Lesson 10 checks: the references pass, planted mistakes are named, unstarted work is 'not implemented'."""
import math

import pytest
import torch

from course_utils.checks import lesson10 as check
from course_utils.checks.core import ExerciseError
from course_utils.decoding import beam_step
from course_utils.training import label_smoothed_loss, noam_lr
from tests.checking import not_implemented, prints_not_implemented

pytestmark = pytest.mark.usefixtures("any_seed_offset")   # every test under every seed offset


# ---- noam_lr -----------------------------------------------------------------------------------
def test_noam_reference_passes():
    check.noam_lr(noam_lr)
def test_noam_mistakes():
    def wrong_exponent(step, d_model, warmup_steps):
        return d_model ** -0.5 * min(step ** -0.5, step * warmup_steps ** -0.5)

    def no_scale(step, d_model, warmup_steps):
        return min(step ** -0.5, step * warmup_steps ** -1.5)

    def uses_max(step, d_model, warmup_steps):
        return d_model ** -0.5 * max(step ** -0.5, step * warmup_steps ** -1.5)

    with pytest.raises(ExerciseError, match="exponent -1.5"):
        check.noam_lr(wrong_exponent)
    with pytest.raises(ExerciseError, match="missing the factor d_model"):
        check.noam_lr(no_scale)
    with pytest.raises(ExerciseError, match="use min"):
        check.noam_lr(uses_max)
    with prints_not_implemented():
        check.noam_lr(not_implemented)


# ---- label-smoothed loss -----------------------------------------------------------------------
def test_loss_reference_passes():
    check.label_smoothed_loss(label_smoothed_loss)
def test_loss_mistakes():
    def keeps_padding(logits, target, smoothing, pad_id):
        log_p = torch.log_softmax(logits, -1)
        nll = -log_p.gather(-1, target[..., None])[..., 0]
        return ((1 - smoothing) * nll - smoothing * log_p.mean(-1)).mean()

    def no_smoothing(logits, target, smoothing, pad_id):
        return torch.nn.functional.cross_entropy(logits.transpose(1, 2), target, ignore_index=pad_id)

    def v_minus_one(logits, target, smoothing, pad_id):
        log_p = torch.log_softmax(logits, -1)
        V = logits.size(-1)
        nll = -log_p.gather(-1, target[..., None])[..., 0]
        others = (-log_p.sum(-1) - nll) / (V - 1)
        keep = (target != pad_id).float()
        return (((1 - smoothing) * nll + smoothing * others) * keep).sum() / keep.sum()

    def per_token(logits, target, smoothing, pad_id):
        return torch.nn.functional.cross_entropy(logits.transpose(1, 2), target, ignore_index=pad_id,
                                                 label_smoothing=smoothing, reduction="none")

    with pytest.raises(ExerciseError, match="padding positions are counted"):
        check.label_smoothed_loss(keeps_padding)
    with pytest.raises(ExerciseError, match="plain cross-entropy"):
        check.label_smoothed_loss(no_smoothing)
    with pytest.raises(ExerciseError, match="V - 1 wrong tokens"):
        check.label_smoothed_loss(v_minus_one)
    with pytest.raises(ExerciseError, match="ONE number"):
        check.label_smoothed_loss(per_token)
    with prints_not_implemented():
        check.label_smoothed_loss(not_implemented)


# ---- beam step ---------------------------------------------------------------------------------
def test_beam_step_reference_passes():
    check.beam_step(beam_step)
def test_beam_step_mistakes():
    def forgets_scores(scores, log_probs, beam_size):
        V = log_probs.size(-1)
        top, idx = log_probs.flatten().topk(beam_size)
        return top, idx // V, idx % V

    def best_per_beam(scores, log_probs, beam_size):
        best = (scores[:, None] + log_probs).max(-1)
        return best.values, torch.arange(len(scores)), best.indices

    def swapped(scores, log_probs, beam_size):
        V = log_probs.size(-1)
        top, idx = (scores[:, None] + log_probs).flatten().topk(beam_size)
        return top, idx % V, idx // V

    def lowest(scores, log_probs, beam_size):
        V = log_probs.size(-1)
        top, idx = (scores[:, None] + log_probs).flatten().topk(beam_size, largest=False)
        return top, idx // V, idx % V

    with pytest.raises(ExerciseError, match="previous scores are not added"):
        check.beam_step(forgets_scores)
    with pytest.raises(ExerciseError, match="each beam kept only its own best"):
        check.beam_step(best_per_beam)
    with pytest.raises(ExerciseError, match="origin and token are swapped|wrong order"):
        check.beam_step(swapped)
    with pytest.raises(ExerciseError, match="LOWEST"):
        check.beam_step(lowest)
    with pytest.raises(ExerciseError, match=r"return 3 things, as `return new_scores, origin, token`"):
        check.beam_step(lambda s, lp, k: lp.flatten().topk(k))
    with prints_not_implemented():
        check.beam_step(not_implemented)


def test_reference_noam_is_finite_at_step_zero():
    assert math.isfinite(noam_lr(0, 512, 4000))
