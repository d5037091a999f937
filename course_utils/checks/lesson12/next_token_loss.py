"""Lesson 12, exercise 1: the next-token targets and the loss.

    next_token_loss(logits (B, T, V), tokens (B, T), pad_id) -> a scalar tensor: the mean cross-entropy of
        logits[:, :-1] against tokens[:, 1:] over the targets that are not padding

The check compares the loss with the course's (gpt.next_token_loss) on three random batches whose rows end in
padding of two lengths (pad ids 0 and 3; with pad id 3, token 0 is a real token), names the mistake whose values
the answer gives (loss_mistakes.py), and tests that the loss is one number that gradients reach, and that it
stays finite with confident logits (one logit 120 above the others).
"""
import numpy as np
import torch
import torch.nn.functional as F

from ...gpt import next_token_loss as ref_loss
from ..core import exercise, expect, randn, single_threaded, to_numpy
from ..evaluation import Evaluation, call_naming
from ..mistakes import Said
from .loss_mistakes import CRASHES, VALUE_KEYS, M


def _manual(logits, tokens, pad_id):
    """log_softmax, gather and a boolean mask of the real targets."""
    targets = tokens[:, 1:]
    nll = -logits[:, :-1].log_softmax(-1).gather(-1, targets[..., None])[..., 0]
    return nll[targets != pad_id].mean()


def _weighted(logits, tokens, pad_id):
    """The per-target losses, weighted by a float mask of the real targets."""
    losses = F.cross_entropy(logits[:, :-1].transpose(1, 2), tokens[:, 1:], reduction="none")   # (B, T-1)
    real = (tokens[:, 1:] != pad_id).float()
    return (losses * real).sum() / real.sum()


@exercise("next-token targets and the loss", reference=ref_loss, mistakes=M, right=[_manual, _weighted])
@single_threaded
def next_token_loss(ev: Evaluation, answer):
    """answer(logits (B, T, V), tokens (B, T), pad_id) -> the mean cross-entropy of logits[:, :-1] against
    tokens[:, 1:] over the targets that are not padding."""
    tests = 0
    for seed, (B, T, V, pad_id) in enumerate([(3, 7, 11, 0), (2, 9, 6, 0), (4, 5, 13, 3)]):
        g = ev.rng(seed)
        logits = randn(g, B, T, V, scale=2.0).requires_grad_()             # the loss must reach them
        tokens = torch.as_tensor(g.integers(0, V, size=(B, T)))
        tokens[tokens == pad_id] = (pad_id + 1) % V                       # padding only where we put it
        tokens[0, T - 2:] = pad_id                                         # rows end in padding, of two lengths
        tokens[B - 1, T - 3:] = pad_id
        if pad_id:
            tokens[:, 1] = 0                                               # token 0 is a real token here
        got = call_naming(ev, CRASHES, answer, logits, tokens, pad_id)
        expect(got is not None, Said("none", "your function returned nothing: end it with `return loss`."))
        expect(np.size(to_numpy(got)) == 1, M.not_scalar.at(shape=tuple(np.shape(to_numpy(got)))))
        expected = ref_loss(logits, tokens, pad_id)
        ev.expect_close(np.reshape(to_numpy(got), ()), expected, f"the loss (B={B}, T={T}, V={V}, pad_id={pad_id})",
                        mistakes=M.variants(VALUE_KEYS, logits, tokens, pad_id),
                        atol=2e-6, rtol=1e-6)   # tight: some mistakes differ by 1e-4
        expect(isinstance(got, torch.Tensor) and got.requires_grad, M.no_grad)
        tests += 1
    return tests + _confident(ev, answer)


def _confident(ev: Evaluation, answer):
    """The loss with confident logits (gaps near 120): log(softmax) underflows to log 0 there."""
    g = ev.rng(9)
    logits = randn(g, 2, 5, 7)
    tokens = torch.as_tensor(g.integers(1, 7, size=(2, 5)))
    logits = logits + 120.0 * F.one_hot(tokens.roll(1, 1), 7)             # sure of the wrong token
    got = call_naming(ev, CRASHES, answer, logits, tokens, 0)
    expect(bool(np.isfinite(to_numpy(got)).all()), M.not_finite_confident)
    ev.expect_close(got, ref_loss(logits, tokens, 0), "the loss with confident logits", atol=1e-3, rtol=1e-5)
    return 1
