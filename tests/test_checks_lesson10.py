"""Lesson 10 checks: the references pass, planted mistakes are named, unstarted work is 'not implemented'."""
import math

import numpy as np
import pytest
import torch

from course_utils.checks import lesson10 as check
from course_utils.checks.core import ExerciseError
from course_utils.decoding import beam_step
from course_utils.training import label_smoothed_loss, noam_lr
from tests.checking import named, not_implemented, prints_not_implemented

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


# ---- the families named since the fresh slips of tests/fresh_slips/lesson10h.py -------------------
def _noam(warm=lambda s, w: s * w ** -1.5, decay=lambda s: s ** -0.5, d=lambda d: d ** -0.5):
    def answer(step, d_model, warmup_steps):
        return d(d_model) * min(decay(step), warm(step, warmup_steps))
    return answer


def test_noam_named_families():
    named(check.noam_lr, _noam(decay=lambda s: s ** -1 / 2), r"`step \*\* -1/2` is `\(step \*\* -1\) / 2`")
    named(check.noam_lr, _noam(warm=lambda s, w: s * w ** -3 / 2), r"`warmup_steps \*\* -3/2`")
    named(check.noam_lr, _noam(d=lambda d: d ** -1 / 2), r"`d_model \*\* -1/2`")
    named(check.noam_lr, _noam(warm=lambda s, w: s / w), r"warm-up part is step / warmup_steps")

    def linear_to_peak(step, d_model, warmup_steps):
        return d_model ** -0.5 * (step / warmup_steps if step < warmup_steps else step ** -0.5)

    def linear_to_peak_inclusive(step, d_model, warmup_steps):
        return d_model ** -0.5 * (step / warmup_steps if step <= warmup_steps else step ** -0.5)

    def wrong_peak(step, d_model, warmup_steps):
        return 0.5 * noam_lr(step, d_model, warmup_steps) if step == warmup_steps else noam_lr(step, d_model,
                                                                                               warmup_steps)

    named(check.noam_lr, linear_to_peak, r"rises linearly to d_model\^-0.5 .* drops suddenly")
    named(check.noam_lr, linear_to_peak_inclusive, r"after the peak your rate is right, but during warm-up")
    named(check.noam_lr, _noam(warm=lambda s, w: s * w ** -1.25), r"but during warm-up it is not")
    named(check.noam_lr, _noam(decay=lambda s: s ** -0.6), r"during warm-up your rate is right, but after the peak")
    named(check.noam_lr, wrong_peak, r"far from the peak your rate is right, but not near step = warmup_steps")


def test_noam_returns_a_plain_number():
    named(check.noam_lr, lambda step, d, w: torch.tensor(noam_lr(step, d, w)), r"returned a torch.Tensor .* plain")
    named(check.noam_lr, lambda step, d, w: np.float32(noam_lr(step, d, w)), r"returned a numpy.float32 .* plain")


def _smoothed(log_p=lambda z: torch.log_softmax(z, -1), mix=lambda nll, uni, eps, V: (1 - eps) * nll + eps * uni,
              reduce=lambda loss, keep: (loss * keep).sum() / keep.sum()):
    def answer(logits, target, smoothing, pad_id):
        lp = log_p(logits)
        nll = -lp.gather(-1, target[..., None])[..., 0]
        uniform = -lp.mean(-1)
        return reduce(mix(nll, uniform, smoothing, logits.size(-1)), (target != pad_id).float())
    return answer


def test_loss_named_families():
    named(check.label_smoothed_loss, _smoothed(log_p=lambda z: z), r"logits are used as log-probabilities")
    named(check.label_smoothed_loss, _smoothed(log_p=lambda z: torch.softmax(z, -1)), r"probabilities are used")
    named(check.label_smoothed_loss, _smoothed(mix=lambda n, u, e, V: (1 - e) * n + e * V * u),
          r"smoothing term sums -log p\(v\) over the vocabulary")
    named(check.label_smoothed_loss, _smoothed(mix=lambda n, u, e, V: e * n + (1 - e) * u), r"weights are swapped")
    named(check.label_smoothed_loss, _smoothed(reduce=lambda loss, keep: ((loss * keep).sum(1) / keep.sum(1)).mean()),
          r"averaged per sentence")

    def smoothing_counts_padding(logits, target, smoothing, pad_id):
        lp = torch.log_softmax(logits, -1)
        keep = (target != pad_id).float()
        nll = -lp.gather(-1, target[..., None])[..., 0]
        return (1 - smoothing) * (nll * keep).sum() / keep.sum() - smoothing * lp.mean(-1).mean()

    named(check.label_smoothed_loss, smoothing_counts_padding, r"smoothing term also counts the padding")


def test_loss_property_probes():
    named(check.label_smoothed_loss, _smoothed(log_p=torch.nn.functional.logsigmoid),
          r"changes when a constant is added to all the logits")
    named(check.label_smoothed_loss, _smoothed(mix=lambda n, u, e, V: (1 - e) * n + e * u * (1 + e)),
          r"with smoothing = 0 your loss is the right cross-entropy")
    named(check.label_smoothed_loss, _smoothed(reduce=lambda loss, keep: (loss * keep).sum() / (
        keep.sum() + (1 - keep).sum() / 2)), r"right when no position is padding")


def test_loss_stays_finite_for_large_logits():
    log_of_softmax = _smoothed(log_p=lambda z: torch.softmax(z, -1).log())
    clamped = _smoothed(log_p=lambda z: torch.softmax(z, -1).clamp(min=1e-30).log())
    named(check.label_smoothed_loss, log_of_softmax, r"one logit 200 above the others .* (nan|inf):.*torch.log_softmax")
    named(check.label_smoothed_loss, clamped, r"one logit 200 above the others .* expected .*torch.log_softmax")


def _beam(combine=lambda s, lp: s[:, None] + lp, decode=lambda idx, K, V: (idx // V, idx % V),
          out=lambda top, idx, s, lp: top):
    def answer(scores, log_probs, beam_size):
        K, V = log_probs.shape
        top, idx = combine(scores, log_probs).flatten().topk(beam_size)
        return (out(top, idx, scores, log_probs), *decode(idx, K, V))
    return answer


def test_beam_step_named_families():
    def per_beam_lists(scores, log_probs, beam_size):
        top, tok = (scores[:, None] + log_probs).topk(beam_size, dim=-1)
        origin = torch.arange(len(scores))[:, None].expand_as(tok)
        return top.flatten()[:beam_size], origin.flatten()[:beam_size], tok.flatten()[:beam_size]

    named(check.beam_step, per_beam_lists, r"each beam's best tokens in beam order, not ranked across beams")
    named(check.beam_step, _beam(decode=lambda idx, K, V: (idx // K, idx % K)), r"decoded with the number of beams K")
    named(check.beam_step, _beam(decode=lambda idx, K, V: (idx / V, idx % V)), r"origin holds fractions .* // V")
    named(check.beam_step, _beam(decode=lambda idx, K, V: ((idx // V).float(), idx % V)),
          r"origin has dtype torch.float32: return integer indices")
    named(check.beam_step, _beam(combine=lambda s, lp: s[:, None] * lp), r"multiplied by the token's log-probability")
    named(check.beam_step, _beam(out=lambda top, idx, s, lp: lp.flatten()[idx]), r"only the new token's log-prob")

    def unsorted(scores, log_probs, beam_size):
        top, origin, token = beam_step(scores, log_probs, beam_size)
        order = torch.arange(beam_size).roll(1)
        order[[0, 1]] = order[[1, 0]]
        return top[order], origin[order], token[order]

    named(check.beam_step, unsorted, r"not best first")


def test_beam_step_property_probes():
    named(check.beam_step, _beam(decode=lambda idx, K, V: (idx // V, (idx + 1) % V)),
          r"origin and token do not point at them")
    named(check.beam_step, _beam(out=lambda top, idx, s, lp: s[idx // lp.size(-1)]),
          r"origin and token are right, but new_scores are not the candidates' running totals")

    def ranks_by_log_probs(scores, log_probs, beam_size):
        V = log_probs.size(-1)
        _, idx = log_probs.flatten().topk(beam_size)
        return (scores[:, None] + log_probs).flatten()[idx], idx // V, idx % V

    # (on some inputs its choice is each beam's best token, a mistake the check lists)
    named(check.beam_step, ranks_by_log_probs,
          r"not the beam_size best of all K x V candidates|each beam kept only its own best token")


# ---- the families named since the fresh slips of tests/fresh_slips/lesson10i.py -------------------
def test_noam_grouped_warmup_power():
    named(check.noam_lr, _noam(warm=lambda s, w: (s * w) ** -1.5), r"\(step \* warmup_steps\)\^-1.5: only warmup_steps")


def test_loss_divided_by_a_size_of_the_batch():
    named(check.label_smoothed_loss, _smoothed(reduce=lambda loss, keep: (loss * keep).sum() / keep.size(0)),
          r"divided by the number of sentences B")
    named(check.label_smoothed_loss, _smoothed(reduce=lambda loss, keep: (loss * keep).sum() / keep.size(1)),
          r"divided by the sentence length T")


def test_loss_uses_its_pad_id():
    def hard_coded(logits, target, smoothing, pad_id):
        return label_smoothed_loss(logits, target, smoothing, 0)

    def ignore_zero(logits, target, smoothing, pad_id):
        return torch.nn.functional.cross_entropy(logits.transpose(1, 2), target, ignore_index=0,
                                                 label_smoothing=smoothing)

    named(check.label_smoothed_loss, hard_coded, r"with pad_id = 5 .* hard-coded to 0")
    named(check.label_smoothed_loss, ignore_zero, r"with pad_id = 5 .* hard-coded to 0")


def test_beam_step_scores_without_a_token_axis():
    without = r"scores \(K,\) was added to log_probs \(K, V\) without"
    named(check.beam_step, _beam(combine=lambda s, lp: s + lp), without)

    def row_when_square(scores, log_probs, beam_size):      # (the same slip where K == V broadcasts silently)
        K, V = log_probs.shape
        return _beam(combine=lambda s, lp: s + lp)(scores, log_probs, beam_size) if K == V else beam_step(
            scores, log_probs, beam_size)

    named(check.beam_step, row_when_square, without)
