"""Checks for lesson 10 (translation on Multi30k): the learning-rate schedule, the label-smoothed
loss, and one step of beam search. Each compares the learner's function with the reference in
course_utils (training.noam_lr, training.label_smoothed_loss, decoding.beam_step); the mistakes they name, the
inputs built to tell them apart and the property probes are in lesson10_mistakes.py."""
import functools

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
from .evaluation import Evaluation, call_naming
from .expectations import explained
from .lesson10_mistakes import (
    LARGE_LOGITS,
    beam_crashes,
    beam_inputs,
    beam_mistakes,
    beam_order,
    beam_probes,
    confident_logits,
    integer_indices,
    loss_inputs,
    loss_mistakes,
    loss_probes,
    noam_mistakes,
    noam_parts,
    plain_number,
)

__all__ = ["noam_lr", "label_smoothed_loss", "beam_step"]

PAD = 5     # a pad id other than 0 (the course's PAD_ID): the learner's function must use its pad_id argument
PAD_IGNORED = (f"with pad_id = {PAD} your loss leaves out the positions holding 0 and counts those holding {PAD}: "
               "the padding id is hard-coded to 0. Build the mask from the argument, (target != pad_id) (or "
               "ignore_index=pad_id), so the function works for any padding id.")


@exercise("learning-rate schedule (noam_lr)", reference=ref_noam, random=False)
def noam_lr(ev: Evaluation, answer):
    tests = 0
    for d_model, warmup in ((512, 4000), (256, 400), (64, 10)):
        steps = [1, 2, warmup // 2, warmup - 1, warmup, warmup + 1, 2 * warmup, 10 * warmup]
        results = [ev.call(answer, s, d_model, warmup) for s in steps]
        plain_number(results[0])
        got = np.array([float(r) for r in results])
        expected = np.array([ref_noam(s, d_model, warmup) for s in steps])
        s = np.array(steps, dtype=float)
        with explained(functools.partial(noam_parts, s, got, expected, warmup)):
            ev.expect_close(got, expected, f"noam_lr(step, d_model={d_model}, warmup_steps={warmup}) for steps "
                            f"{steps}", mistakes=noam_mistakes(s, d_model, warmup), rtol=1e-6, atol=1e-12)
        tests += 1
    peak = int(np.argmax([float(ev.call(answer, st, 256, 400)) for st in range(1, 2000)])) + 1
    expect(peak == 400, f"the schedule should peak at step = warmup_steps = 400, it peaks at step {peak}.")
    return tests + 1


@exercise("label-smoothed loss", reference=ref_loss)
def label_smoothed_loss(ev: Evaluation, answer):
    tests = 0
    for seed, eps in ((0, 0.1), (1, 0.2), (2, 0.0)):
        logits, target = loss_inputs(ev, seed, eps)
        got = ev.call(answer, logits.clone(), target.clone(), eps, 0)
        expected = ref_loss(logits, target, eps, 0)
        expect(torch.is_tensor(got) or np.isscalar(got), "return the loss as a scalar tensor.")
        expect(np.size(got.detach().numpy() if torch.is_tensor(got) else got) == 1,
               f"return ONE number (the mean over the non-padding positions), got shape "
               f"{tuple(got.shape) if torch.is_tensor(got) else np.shape(got)}.")
        with explained(*loss_probes(ev, answer, logits, target, eps)):
            ev.expect_close(got, expected, f"label_smoothed_loss(logits, target, smoothing={eps})",
                            mistakes=loss_mistakes(logits, target, eps), rtol=1e-4, atol=1e-5)
        tests += 1
    logits, target = loss_inputs(ev, 4, 0.1, pad_id=PAD)
    got = ev.call(answer, logits.clone(), target.clone(), 0.1, PAD)
    ev.expect_close(got, ref_loss(logits, target, 0.1, PAD), f"label_smoothed_loss(logits, target, 0.1, pad_id={PAD})",
                    mistakes={PAD_IGNORED: ref_loss(logits, target, 0.1, 0), **loss_mistakes(logits, target, 0.1, PAD)},
                    rtol=1e-4, atol=1e-5)
    logits, target = loss_inputs(ev, 3, 0.1)
    logits = confident_logits(logits, ev.rng(3))
    got = ev.call(answer, logits.clone(), target.clone(), 0.1, 0)
    value = float(got.detach().double()) if torch.is_tensor(got) else float(got)
    expect(np.isfinite(value), LARGE_LOGITS.format(got=value))
    expected = ref_loss(logits, target, 0.1, 0)
    with explained(lambda: LARGE_LOGITS.format(got=f"{value:.6g}, expected {float(expected):.6g}")):
        ev.expect_close(got, expected, "label_smoothed_loss with large logits", rtol=1e-4, atol=1e-4)
    return tests + 2


@exercise("one beam-search step (beam_step)", reference=ref_beam_step)
def beam_step(ev: Evaluation, answer):
    tests = 0
    for seed, beam_size, V in ((0, 3, 7), (1, 4, 5), (2, 2, 11), (3, 4, 4)):
        scores, log_probs = beam_inputs(ev, seed, beam_size, V)
        ref = ref_beam_step(scores, log_probs, beam_size)
        new_scores, origin, token = expect_returns(
            call_naming(ev, beam_crashes(beam_size, V), answer, scores.clone(), log_probs.clone(), beam_size), ref,
            ("new_scores", "origin", "token"))
        for x, what in ((new_scores, "new_scores"), (origin, "origin"), (token, "token")):
            expect_shape(x, (beam_size,), what)
        integer_indices(origin, "origin")
        integer_indices(token, "token")
        got = np.stack([np.asarray(new_scores, dtype=np.float64) if not torch.is_tensor(new_scores)
                        else new_scores.detach().double().numpy(),
                        torch.as_tensor(origin).double().numpy(), torch.as_tensor(token).double().numpy()])
        expected = np.stack([r.double().numpy() for r in ref])
        unsorted = beam_order(ref, new_scores, origin, token)
        expect(unsorted is None, unsorted)
        with explained(*beam_probes(scores, log_probs, beam_size, new_scores, origin, token)):
            ev.expect_close(got, expected, "(new_scores, origin, token) stacked as rows",
                            mistakes=beam_mistakes(scores, log_probs, beam_size), rtol=1e-5, atol=1e-5)
        tests += 1
    return tests
