"""Checks for lesson 04: the attention zoo, one check per score function, then local-p attention and
the REINFORCE loss of hard attention.

Every score function maps s (B, d_s) and h (B, T, d_h) to scores e (B, T), before any softmax.
Sizes are chosen so that the likely mistakes give different numbers (d != T, d_s != d_h, ...).
"""
import math

import numpy as np
import torch

from .. import scores as ref
from .core import (
    ExerciseError,
    ValuesDiffer,
    exercise,
    expect,
    expect_returns,
    expect_shape,
    randn,
    to_numpy,
)
from .evaluation import Evaluation
from .lesson04_mistakes import (
    RAISED,
    SIZES_MIXED,
    additive_mistakes,
    batch_mixups,
    broadcast_crash,
    cosine_norm_mistakes,
    position_mistakes,
    reinforce_mistakes,
    renamed,
    separate_sums,
    weight_mistakes,
)


def _score_tests(ev: Evaluation, answer, reference, configs, draw, mistakes, what, crashed=None):
    """The loop of every score check: for each config, draw the score function's inputs from the config's
    seed, call the learner's function on them, and compare its scores e (B, T) with the reference's, naming
    the exercise's typical mistakes. draw(g, *config) -> the arguments; mistakes(*arguments) -> {symptom:
    scores}; what(*arguments) -> how the message names the scores; crashed(text, passed, *arguments) -> the
    symptom of a crash (`text`, its message) on these arguments after the earlier configs `passed` (their
    arguments), or None. Returns the number of tests."""
    passed = []
    for seed, config in enumerate(configs):
        args = draw(ev.rng(seed), *config)
        expected = reference(*args)                                          # (B, T)
        try:
            e = ev.call(answer, *args)                   # (a wrong shape is named by a mistake, or as a shape)
        except ExerciseError as error:
            symptom = crashed(str(error), passed, *args) if crashed and str(error).startswith(RAISED) else None
            if symptom:
                raise renamed(error, symptom) from None
            raise
        found = mistakes(*args)
        if expected.shape[0] == expected.shape[1]:
            found[f"{what(*args)} is transposed: (T, B) where (B, T) was asked; keep the batch axis first"] = \
                expected.T
        ev.expect_close(e, expected, what(*args), mistakes=found)
        passed.append(args)
    return len(configs)


def _dot(s, h):
    return torch.einsum("bd,btd->bt", s, h)


@exercise("cosine score (Graves)", reference=ref.cosine_score)
def cosine_score(ev: Evaluation, answer):
    """answer(s (B, d), h (B, T, d), beta) -> beta * cos(s, h_i), (B, T)."""
    def draw(g, B, T, d, beta):
        return randn(g, B, d, scale=2.0), randn(g, B, T, d, scale=2.0), beta

    def mistakes(s, h, beta):
        norm_s, norm_h = s.norm(dim=-1, keepdim=True), h.norm(dim=-1)
        found = {
            "the scores are plain dot products: divide s·h_i by |s| |h_i| (cosine similarity)":
                beta * _dot(s, h),
            "only h_i is normalised: divide s·h_i by BOTH norms, |s| and |h_i|": beta * _dot(s, h) / norm_h,
            "only s is normalised: divide s·h_i by BOTH norms, |s| and |h_i|": beta * _dot(s, h) / norm_s,
            "the norms are not square-rooted: |s| = sqrt(sum_k s_k^2), not the sum of squares":
                beta * _dot(s, h) / (norm_s ** 2 * norm_h ** 2),
        }
        if beta != 1.0:
            found["beta is missing: multiply the cosine by the key strength beta"] = ref.cosine_score(s, h, 1.0)
            found["the cosine is divided by beta: beta is a strength, multiply by it"] = \
                ref.cosine_score(s, h, 1.0) / beta
        found |= separate_sums(lambda dot: beta * dot / (norm_s * norm_h), s, h)
        return found | cosine_norm_mistakes(s, h, beta) | batch_mixups(lambda s2: ref.cosine_score(s2, h, beta), s)

    # B, T and d differ in every config, so that a crash of a norm without keepdim says which axes met
    return _score_tests(ev, answer, ref.cosine_score, [(2, 5, 4, 1.0), (3, 4, 6, 5.0), (1, 7, 3, 2.5)], draw,
                        mistakes, lambda s, h, beta: f"e (d={s.shape[-1]}, beta={beta})",
                        lambda text, passed, s, h, beta: broadcast_crash(text, *h.shape))


def _split_additive(s, h, W_a, v_a):
    """The exercise's way: W_a = [W_s W_h], W_s s (B, d_a) broadcast over the T rows of W_h h (B, T, d_a)."""
    d_s = s.shape[-1]
    return torch.tanh((s @ W_a[:, :d_s].T)[:, None, :] + h @ W_a[:, d_s:].T) @ v_a


CONCATENATED = ("the scores are right, but your function builds the concatenation [s; h_i] for every position (a "
                "tensor of shape {shape}, (B, T, d_s + d_h)), which is what this exercise does without: split W_a = "
                "[W_s W_h] (W_a[:, :d_s] and W_a[:, d_s:]) and add W_s s, as (B, 1, d_a), to W_h h (B, T, d_a)")


@exercise("additive score without the concatenation", reference=_split_additive)
def additive_score(ev: Evaluation, answer):
    """answer(s, h, W_a (d_a, d_s + d_h), v_a (d_a,)) -> v_a^T tanh(W_s s + W_h h_i), the same as lesson 03."""
    def draw(g, B, T, d_s, d_h, d_a):
        s, h = randn(g, B, d_s), randn(g, B, T, d_h)
        return s, h, randn(g, d_a, d_s + d_h, scale=0.7), randn(g, d_a)

    def mistakes(s, h, W_a, v_a):
        return additive_mistakes(s, h, W_a, v_a) | batch_mixups(
            lambda s2: ref.additive_score(s2, h, W_a, v_a), s, "(s @ W_s.T)[:, None, :] + h @ W_h.T")

    def crashed(text, passed, s, h, W_a, v_a):
        d_s, d_h = s.shape[-1], h.shape[-1]
        if d_s != d_h and any(p[0].shape[-1] == p[1].shape[-1] for p in passed):
            return SIZES_MIXED.format(d_s=d_s, d_h=d_h)
        return None

    # square weights first (d_s = d_h = d_a), so that W_s and W_h used without .T still run and are named, and
    # B = T, so that W_s s added without its T axis still runs (it broadcasts over the wrong axis) and is named
    tests = _score_tests(ev, answer, ref.additive_score, [(4, 4, 5, 5, 5), (2, 5, 4, 4, 3), (3, 6, 5, 7, 4),
                                                      (1, 3, 6, 6, 8)], draw, mistakes,
                         lambda s, h, W_a, v_a: f"e (d_s={s.shape[-1]}, d_h={h.shape[-1]})", crashed)
    # the point: no (B, T, d_s + d_h) tensor; wide s and h and d_a = 2, so that nothing else comes near that size
    B, T, d_s, d_h = 2, 16, 64, 64
    _, elements, shape = ev.call_measured(answer, *draw(ev.rng(40), B, T, d_s, d_h, 2))
    expect(elements < B * T * (d_s + d_h), CONCATENATED.format(shape=shape))
    return tests + 1


@exercise("location score (Luong)", reference=ref.location_score)
def location_score(ev: Evaluation, answer):
    """answer(s (B, d_s), W_a (max_len, d_s), T) -> the first T entries of W_a s, (B, T)."""
    def draw(g, B, T, d_s, max_len):
        return randn(g, B, d_s), randn(g, max_len, d_s), T

    def mistakes(s, W_a, T):
        full = s @ W_a.T                                                     # (B, max_len)
        found = {
            "you returned weights (a softmax): return the raw scores W_a s; the masked softmax comes later":
                torch.softmax(full[:, :T], -1),
            "you returned weights (a softmax over all max_len positions, then cut to T): return the raw scores "
            "W_a s, first T entries; the masked softmax comes later": torch.softmax(full, -1)[:, :T],
            "the scores keep all max_len positions: keep the first T (one per source position)": full,
            "the products W_a[i, k] s_k are summed over the positions i instead of the features k: "
            "(W_a s)_i = sum_k W_a[i, k] s_k, a sum over the LAST axis (or s @ W_a.T)":
                (s * W_a.sum(0))[:, :T],
            **batch_mixups(lambda s2: ref.location_score(s2, W_a, T), s, "(s @ W_a.T)[:, :T]"),
        }
        if T < W_a.shape[0]:
            found["the scores are the LAST T entries of W_a s: keep the first T (positions 0..T-1)"] = \
                full[:, -T:]
            found["the scores are off by one position: keep entries 0..T-1 of W_a s (`[:, :T]`), "
                  "not 1..T"] = full[:, 1:T + 1]
        return found

    return _score_tests(ev, answer, ref.location_score, [(2, 4, 5, 7), (3, 6, 3, 6), (1, 2, 4, 9)], draw, mistakes,
                        lambda s, W_a, T: f"e (T={T}, max_len={W_a.shape[0]})")


@exercise("general score (Luong)", reference=ref.general_score)
def general_score(ev: Evaluation, answer):
    """answer(s (B, d_s), h (B, T, d_h), W_a (d_s, d_h)) -> s^T W_a h_i, (B, T)."""
    def draw(g, B, T, d_s, d_h):
        s, h = randn(g, B, d_s), randn(g, B, T, d_h)
        return s, h, randn(g, d_s, d_h)

    def mistakes(s, h, W_a):
        found = {}
        if W_a.shape[0] == W_a.shape[1]:
            found["W_a is transposed: the score is s^T W_a h_i, with W_a of shape (d_s, d_h)"] = \
                ref.general_score(s, h, W_a.T)
            found["W_a is missing: the general score is s^T W_a h_i, not the dot product"] = _dot(s, h)
        found |= separate_sums(lambda dot: dot, s @ W_a, h, "'bd,de,btf->bt'", "'bd,de,bte->bt'")
        found |= separate_sums(lambda dot: dot, s, h @ W_a.T, "'bc,de,bte->bt'", "'bd,de,bte->bt'")
        return found | batch_mixups(lambda s2: ref.general_score(s2, h, W_a), s,
                                    "einsum 'bd,de,bte->bt', or `h @ (s @ W_a)[:, :, None]` (a batched matmul)")

    return _score_tests(ev, answer, ref.general_score, [(2, 5, 4, 4), (3, 4, 3, 6), (1, 6, 5, 5)], draw, mistakes,
                        lambda s, h, W_a: f"e (d_s={s.shape[-1]}, d_h={h.shape[-1]})")


def _draw_s_h(g, B, T, d):
    return randn(g, B, d), randn(g, B, T, d)


@exercise("dot score (Luong)", reference=ref.dot_score)
def dot_score(ev: Evaluation, answer):
    """answer(s (B, d), h (B, T, d)) -> s^T h_i, (B, T)."""
    def mistakes(s, h):
        return {
            "the scores are scaled by 1/sqrt(d): that is the scaled dot score; here return s·h_i":
                _dot(s, h) / math.sqrt(s.shape[-1]),
            "the scores are cosine similarities: do not normalise, return s·h_i": ref.cosine_score(s, h),
            "the products are not summed over the features: e_i = sum_k s_k h_ik, shape (B, T)":
                s[:, None, :] * h,
            **batch_mixups(lambda s2: _dot(s2, h), s),
            **separate_sums(lambda dot: dot, s, h),
        }

    return _score_tests(ev, answer, ref.dot_score, [(2, 5, 4), (3, 3, 9), (1, 6, 16)], _draw_s_h, mistakes,
                        lambda s, h: f"e (d={s.shape[-1]})")


@exercise("scaled dot score (Vaswani)", reference=ref.scaled_dot_score)
def scaled_dot_score(ev: Evaluation, answer):
    """answer(s (B, d), h (B, T, d)) -> s^T h_i / sqrt(d), (B, T)."""
    def mistakes(s, h):
        d, T = s.shape[-1], h.shape[1]
        return {
            "the scores are not scaled: divide s·h_i by sqrt(d)": _dot(s, h),
            "the scores are divided by d: divide by sqrt(d), which keeps their variance near 1": _dot(s, h) / d,
            "the scores are divided by sqrt(T): scale by the vector size d (the last axis), "
            "not by the number of positions": _dot(s, h) / math.sqrt(T),
            "the scores are multiplied by sqrt(d): divide by it": _dot(s, h) * math.sqrt(d),
            **batch_mixups(lambda s2: _dot(s2, h) / math.sqrt(d), s),
            **separate_sums(lambda dot: dot / math.sqrt(d), s, h),
        }

    return _score_tests(ev, answer, ref.scaled_dot_score, [(2, 5, 4), (3, 7, 9), (1, 6, 16)], _draw_s_h, mistakes,
                        lambda s, h: f"e (d={s.shape[-1]}, T={h.shape[1]})")


# ---------------------------------------------------------------------------------------------
# Local-p attention (Luong et al. 2015)
# ---------------------------------------------------------------------------------------------
def _reference_local_p(e, mask, s, W_p, v_p, S, D):
    return ref.local_p(e, mask, s, W_p, v_p, S, D)


@exercise("local-p attention: position, window and Gaussian", name="local_p", reference=_reference_local_p)
def local_p(ev: Evaluation, answer):
    """answer(e (B, T), mask (B, T), s (B, d_s), W_p (d_p, d_s), v_p (d_p,), S (B,), D) -> p (B,), alpha (B, T)."""
    tests = 0
    # (B, T, d_s, d_p, D, lengths): several lengths so that the mask matters, d_p == d_s once so that a
    # transposed W_p still runs, D = 1 / 2 / 3 so that sigma = D and sigma = D / 2 differ
    # The first test places p_t (through S) where every window mistake shows, whatever the seeds: fractional
    # parts above and below 0.5 (round vs int), a window that reaches past the padding (mask ignored), and a
    # whole p_t = 5 (its s_t is 0, so sigmoid(0) = 0.5 exactly and S = 10), whose window ends |i - p_t| = D are
    # in the window (a strict < drops them).
    configs = [(4, 12, 4, 4, 2, [12, 8, 4, 11], [3.7, 6.2, 2.8, 5.0]), (3, 12, 5, 5, 2, [12, 9, 6], None),
               (4, 10, 4, 6, 3, [10, 10, 7, 5], None), (2, 9, 6, 3, 1, [9, 4], None)]
    for seed, (B, T, d_s, d_p, D, lengths, p_at) in enumerate(configs):
        g = ev.rng(440 + seed)
        e, s = randn(g, B, T, scale=2.0), randn(g, B, d_s)
        W_p, v_p = randn(g, d_p, d_s), randn(g, d_p, scale=1.5)
        lengths = torch.tensor(lengths)
        mask = torch.arange(T)[None, :] < lengths[:, None]                  # (B, T), True = real token
        S = (lengths - 1).float()                                          # the last position
        if p_at is not None:                                               # S chosen so that p_t = p_at
            p_at = torch.tensor(p_at)
            s[p_at == p_at.round()] = 0.0                                  # a whole p_t, exactly
            S = p_at / torch.sigmoid(torch.tanh(s @ W_p.T) @ v_p)
        p_ref, alpha_ref = ref.local_p(e, mask, s, W_p, v_p, S, D)
        out = ev.call(answer, e.clone(), mask.clone(), s.clone(), W_p.clone(), v_p.clone(), S.clone(), D)
        p, alpha = expect_returns(out, (p_ref, alpha_ref), ("p", "alpha"))
        expect_shape(p, (B,), f"p (B={B})")
        ev.expect_close(p, p_ref, f"p (lengths {lengths.tolist()})", mistakes=position_mistakes(s, W_p, v_p, S, mask))
        expect_shape(alpha, (B, T), f"alpha (B={B}, T={T})")
        try:
            ev.expect_close(alpha, alpha_ref, f"alpha (D={D}, p={[round(x, 2) for x in p_ref.tolist()]})",
                            mistakes=weight_mistakes(e, mask, p_ref, D))
        except ValuesDiffer:
            a = to_numpy(alpha)
            outside = ~(((torch.arange(T)[None, :] - p_ref[:, None]).abs() <= D) & mask).numpy()
            expect(np.all(np.abs(a[outside]) < 1e-6),
                   "positions outside the window [p_t - D, p_t + D], or padded, must get weight 0.")
            expect(np.all(a >= -1e-6), "the weights must be >= 0 (a softmax times a Gaussian).")
            raise
        tests += 1
    return tests


# ---------------------------------------------------------------------------------------------
# Hard attention: the REINFORCE loss
# ---------------------------------------------------------------------------------------------
@exercise("REINFORCE loss for hard attention", reference=ref.reinforce_loss)
def reinforce_loss(ev: Evaluation, answer):
    """answer(log_alpha (B, T), sampled (B,), reward (B,), baseline ()) -> -(r - b) log alpha[sampled], mean."""
    tests = 0
    for seed, (B, T, binary) in enumerate([(5, 6, True), (4, 3, False), (6, 8, True)]):
        g = ev.rng(450 + seed)
        log_alpha = torch.log_softmax(randn(g, B, T, scale=1.5), dim=-1)
        sampled = torch.from_numpy(g.integers(T, size=B))
        reward = torch.tensor([1.0, 0.0] * B)[:B] if binary else randn(g, B)
        reward = reward[torch.from_numpy(g.permutation(B))]
        baseline = torch.tensor(0.35 + 0.1 * seed)
        expected = ref.reinforce_loss(log_alpha, sampled, reward, baseline)
        # a learned baseline (or reward) would carry a gradient: the loss must not send any into them
        la, r, b = (x.clone().requires_grad_() for x in (log_alpha, reward, baseline))
        loss = ev.call(answer, la, sampled.clone(), r, b)
        what = f"the loss (B={B}, T={T})"
        ev.expect_close(loss, expected, what, mistakes=reinforce_mistakes(log_alpha, sampled, reward, baseline))
        expect_shape(loss, (), what)
        expect(getattr(loss, "requires_grad", False),
               "no gradient reaches log_alpha: the loss must be computed from the tensor log_alpha with torch "
               "operations (no `.item()`, `.detach()` or NumPy on it).")
        loss.backward()
        for name, x in (("reward", r), ("baseline", b)):
            expect(x.grad is None or not torch.any(x.grad != 0),
                   f"the gradient flows into the {name}: (r - b) is a constant for REINFORCE (a learned baseline "
                   "would be trained by this loss in the wrong direction); use (reward - baseline).detach().")
        grad = torch.zeros(B, T)
        grad[torch.arange(B), sampled] = -(reward - baseline) / B
        if la.grad is None:
            raise ExerciseError("no gradient reaches log_alpha: did you detach it?")
        ev.expect_close(la.grad, grad, "the gradient of the loss with respect to log_alpha")
        tests += 1
    return tests
