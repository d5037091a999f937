"""Checks for lesson 10 (translation on Multi30k): the learning-rate schedule, the label-smoothed
loss, and one step of beam search. Each compares the learner's function with the reference in
course_utils (training.noam_lr, training.label_smoothed_loss, decoding.beam_step)."""
import numpy as np
import torch

from ..decoding import beam_step as ref_beam_step
from ..training import label_smoothed_loss as ref_loss
from ..training import noam_lr as ref_noam
from .core import (
    exercise,
    expect,
    expect_returns,
    expect_shape,
)
from .evaluation import Evaluation

__all__ = ["noam_lr", "label_smoothed_loss", "beam_step"]


@exercise("learning-rate schedule (noam_lr)", reference=ref_noam)
def noam_lr(ev: Evaluation, answer):
    tests = 0
    for d_model, warmup in ((512, 4000), (256, 400), (64, 10)):
        steps = [1, 2, warmup // 2, warmup - 1, warmup, warmup + 1, 2 * warmup, 10 * warmup]
        got = np.array([float(ev.call(answer, s, d_model, warmup)) for s in steps])
        expected = np.array([ref_noam(s, d_model, warmup) for s in steps])
        s = np.array(steps, dtype=float)
        mistakes = {
            "the warm-up part should grow as step * warmup_steps^-1.5 (exponent -1.5, not -0.5): "
            "at step = warmup_steps both parts of the min must be equal":
                d_model ** -0.5 * np.minimum(s ** -0.5, s * warmup ** -0.5),
            "the learning rate is missing the factor d_model^-0.5 in front":
                np.minimum(s ** -0.5, s * warmup ** -1.5),
            "use min(...), not max(...): the rate grows during warm-up, then decays as 1/sqrt(step)":
                d_model ** -0.5 * np.maximum(s ** -0.5, s * warmup ** -1.5),
            "the decay part should be step^-0.5 (inverse square root), not 1/step":
                d_model ** -0.5 * np.minimum(s ** -1.0, s * warmup ** -1.5),
            "off by one step: steps count from 1, use `step` as it is given (not step + 1 or step - 1)":
                d_model ** -0.5 * np.minimum((s + 1) ** -0.5, (s + 1) * warmup ** -1.5),
            "off by one step: steps count from 1, use `step` as it is given (not step - 1)":
                d_model ** -0.5 * np.minimum(np.maximum(s - 1, 1e-9) ** -0.5, (s - 1) * warmup ** -1.5),
        }
        ev.expect_close(got, expected, f"noam_lr(step, d_model={d_model}, warmup_steps={warmup}) for steps {steps}",
                        mistakes=mistakes, rtol=1e-6, atol=1e-12)
        tests += 1
    peak = int(np.argmax([float(ev.call(answer, st, 256, 400)) for st in range(1, 2000)])) + 1
    expect(peak == 400, f"the schedule should peak at step = warmup_steps = 400, it peaks at step {peak}.")
    return tests + 1


def _loss_inputs(ev: Evaluation, seed, B=3, T=6, V=9, pad_id=0):
    g = ev.rng(seed)
    logits = torch.tensor(g.normal(0, 2, size=(B, T, V)), dtype=torch.float32)
    target = torch.tensor(g.integers(1, V, size=(B, T)))
    target[0, T - 2:] = pad_id
    target[2, 1:] = pad_id
    return logits, target


def _wrong_axis_loss(logits, target, eps, pad_id=0):
    """The loss with log_softmax over the positions (dim 1) instead of the vocabulary."""
    log_p = torch.log_softmax(logits, dim=1)
    nll = -log_p.gather(-1, target[..., None])[..., 0]
    keep = (target != pad_id).float()
    return ((((1 - eps) * nll + eps * -log_p.mean(-1)) * keep).sum() / keep.sum())


@exercise("label-smoothed loss", reference=ref_loss)
def label_smoothed_loss(ev: Evaluation, answer):
    tests = 0
    for seed, eps in ((0, 0.1), (1, 0.2), (2, 0.0)):
        logits, target = _loss_inputs(ev, seed)
        got = ev.call(answer, logits.clone(), target.clone(), eps, 0)
        expected = ref_loss(logits, target, eps, 0)
        expect(torch.is_tensor(got) or np.isscalar(got), "return the loss as a scalar tensor.")
        expect(np.size(got.detach().numpy() if torch.is_tensor(got) else got) == 1,
               f"return ONE number (the mean over the non-padding positions), got shape "
               f"{tuple(got.shape) if torch.is_tensor(got) else np.shape(got)}.")
        log_p = torch.log_softmax(logits, -1)
        V = logits.size(-1)
        nll = -log_p.gather(-1, target[..., None])[..., 0]
        uniform = -log_p.mean(-1)
        keep = (target != 0).float()
        smoothed = (1 - eps) * nll + eps * uniform
        others = (-log_p.sum(-1) - nll) / (V - 1)
        mistakes = {
            "padding positions are counted: multiply by the mask (target != pad_id) and average over the "
            "real tokens only": smoothed.mean(),
            "the sum over real tokens is divided by ALL positions: divide by the number of non-padding "
            "tokens": (smoothed * keep).sum() / keep.numel(),
            "the loss is the plain cross-entropy: mix in ε times the average of -log p over the "
            "vocabulary": (nll * keep).sum() / keep.sum(),
            "the true-token term is not scaled by (1 - ε)": ((nll + eps * uniform) * keep).sum() / keep.sum(),
            "ε is spread over the V - 1 wrong tokens only; this lesson (and PyTorch's label_smoothing) "
            "gives ε/V to EVERY token, the true one included":
                (((1 - eps) * nll + eps * others) * keep).sum() / keep.sum(),
            "the loss is returned as a sum: return the mean over the non-padding tokens":
                (smoothed * keep).sum(),
            "the softmax runs over the wrong axis: log_softmax over the LAST axis (the vocabulary, V)":
                _wrong_axis_loss(logits, target, eps),
        }
        ev.expect_close(got, expected, f"label_smoothed_loss(logits, target, smoothing={eps})",
                        mistakes=mistakes, rtol=1e-4, atol=1e-5)
        tests += 1
    return tests


@exercise("one beam-search step (beam_step)", reference=ref_beam_step)
def beam_step(ev: Evaluation, answer):
    tests = 0
    for seed, beam_size, V in ((0, 3, 7), (1, 4, 5), (2, 2, 11)):
        g = ev.rng(seed)
        scores = torch.tensor(np.sort(g.normal(-3, 1.5, size=beam_size))[::-1].copy(), dtype=torch.float32)
        log_probs = torch.log_softmax(torch.tensor(g.normal(0, 2, size=(beam_size, V)), dtype=torch.float32), -1)
        ref = ref_beam_step(scores, log_probs, beam_size)
        new_scores, origin, token = expect_returns(ev.call(answer, scores.clone(), log_probs.clone(), beam_size), ref,
                                                   ("new_scores", "origin", "token"))
        for x, what in ((new_scores, "new_scores"), (origin, "origin"), (token, "token")):
            expect_shape(x, (beam_size,), what)
        got = np.stack([np.asarray(new_scores, dtype=np.float64) if not torch.is_tensor(new_scores)
                        else new_scores.detach().double().numpy(),
                        torch.as_tensor(origin).double().numpy(), torch.as_tensor(token).double().numpy()])
        expected = np.stack([r.double().numpy() for r in ref])

        def as_out(s, o, t):
            return np.stack([np.asarray(s, np.float64), np.asarray(o, np.float64), np.asarray(t, np.float64)])

        flat_lp = log_probs.flatten()
        top_lp, idx_lp = flat_lp.topk(beam_size)
        per_beam = (scores[:, None] + log_probs).max(-1)
        total = (scores[:, None] + log_probs).flatten()
        top, idx = total.topk(beam_size)
        low, idx_low = total.topk(beam_size, largest=False)
        mistakes = {
            "the previous scores are not added: a candidate's score is scores[k] + log_probs[k, v]":
                as_out(top_lp, idx_lp // V, idx_lp % V),
            "the new scores are only the new token's log-probability: add the prefix score scores[k]":
                as_out(flat_lp[idx], idx // V, idx % V),
            "each beam kept only its own best token: choose the beam_size best candidates over ALL "
            "beam_size x V (prefix, token) pairs, so one good prefix may produce several":
                as_out(per_beam.values, torch.arange(beam_size), per_beam.indices),
            "origin and token are swapped: with the (beam_size, V) scores flattened, origin = index // V and "
            "token = index % V": as_out(top, idx % V, idx // V),
            "these are the LOWEST scores: take the beam_size largest (torch.topk)":
                as_out(low, idx_low // V, idx_low % V),
        }
        ev.expect_close(got, expected, "(new_scores, origin, token) stacked as rows", mistakes=mistakes,
                        rtol=1e-5, atol=1e-5)
        tests += 1
    return tests
