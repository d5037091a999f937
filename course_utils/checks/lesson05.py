"""Checks for lesson 05 (Neural Turing Machine): memory read and write, the four addressing
stages (cosine, content, interpolation, circular shift, sharpening) and the head activations.

Every check compares the learner's function with the reference in `course_utils.memory` on
seeded random torch inputs (float32, batch-first: memory (B, N, M), weightings (B, N)), then
tests properties: weightings are distributions, the shift wraps round, gamma = 1 changes nothing...
"""
import numpy as np
import torch
import torch.nn.functional as F

from .. import memory as ref
from .core import (
    ValuesDiffer,
    exercise,
    expect,
    expect_distribution,
    expect_finite,
    expect_returns,
    expect_shape,
    to_numpy,
)
from .evaluation import Evaluation


# ---------------------------------------------------------------- random inputs
def _t(a):
    return torch.as_tensor(np.asarray(a, dtype=np.float32))


def _memory(r, B, N, M):
    return _t(r.normal(size=(B, N, M)))


def _weighting(r, B, N, peaked=1.0):
    return torch.softmax(_t(r.normal(size=(B, N)) * peaked), dim=-1)


def _column(r, B, low, high):
    return _t(r.uniform(low, high, size=(B, 1)))


def _compare(ev: Evaluation, actual, expected, what, mistakes=None, properties=(), atol=1e-5):
    """expect_close; when the values differ for no named reason, report a failed property first.

    properties: (holds, symptom) pairs, `holds(actual)` True when the answer has the property.
    """
    try:
        ev.expect_close(actual, expected, what, mistakes=mistakes, atol=atol)
    except ValuesDiffer:
        for holds, symptom in properties:
            expect(holds(actual), symptom)
        raise


def _is_distribution(w):
    w = to_numpy(w).astype(np.float64)
    return bool(np.all(np.isfinite(w)) and np.all(w >= -1e-6) and np.allclose(w.sum(-1), 1, atol=1e-4))


# ---------------------------------------------------------------- memory read and write
@exercise("memory read r = sum_i w(i) M(i)", reference=ref.memory_read)
def memory_read(ev: Evaluation, answer):
    tests = 0
    for seed, (B, N, M) in enumerate([(2, 7, 7), (2, 6, 4), (3, 10, 5)]):
        r = ev.rng(seed)
        memory, w = _memory(r, B, N, M), _weighting(r, B, N)
        out = ev.call(answer, memory, w)
        expect(getattr(out, "shape", None) != (B, B, M) or B == 1,
               f"memory_read returned shape (B, B, M) = {(B, B, M)}: `w @ memory` broadcasts the batch. "
               "Make w a row, (w.unsqueeze(-2) @ memory).squeeze(-2), or multiply and sum over rows.")
        expect(getattr(out, "shape", None) != (B, N, M),
               f"memory_read returned shape (B, N, M) = {(B, N, M)}: you weighted the rows but did not sum "
               "them; r = sum_i w(i) M(i) sums over the rows i (axis -2).")
        expect_shape(out, (B, M), "memory_read(memory, w)")
        weighted = w.unsqueeze(-1) * memory                                 # (B, N, M)
        _compare(ev, out, ref.memory_read(memory, w), "memory_read(memory, w)", mistakes={
            "you summed the rows without weighting them by w: r = sum_i w(i) M(i).":
                memory.sum(-2),
            "you took the plain mean of the rows: weight each row by w(i) instead.":
                memory.mean(-2),
            "you averaged the weighted rows (divided by N): r is the weighted SUM, sum_i w(i) M(i).":
                weighted.mean(-2),
            "you summed over the columns (the last axis): sum the weighted rows over i (axis -2).":
                weighted.sum(-1),
        })
        tests += 1
    # a one-hot weighting reads exactly that row
    memory = _memory(ev.rng(9), 2, 5, 3)
    w = torch.zeros(2, 5)
    w[0, 3], w[1, 0] = 1.0, 1.0
    out = to_numpy(ev.call(answer, memory, w))
    expect(np.allclose(out, to_numpy(torch.stack([memory[0, 3], memory[1, 0]]))),
           "a one-hot weighting on row i should read exactly row i of the memory.")
    return tests + 1


@exercise("memory write: erase then add", reference=ref.memory_write)
def memory_write(ev: Evaluation, answer):
    tests = 0
    for seed, (B, N, M) in enumerate([(2, 6, 4), (3, 8, 5)]):
        r = ev.rng(10 + seed)
        memory, w = _memory(r, B, N, M), _weighting(r, B, N, peaked=3.0)
        e, a = _t(r.uniform(0, 1, size=(B, M))), _t(r.normal(size=(B, M)))
        W, E, A = w.unsqueeze(-1), e.unsqueeze(-2), a.unsqueeze(-2)
        out = ev.call(answer, memory.clone(), w, e, a)
        expect_shape(out, (B, N, M), "memory_write(memory, w, e, a)")
        _compare(ev, out, ref.memory_write(memory, w, e, a), "memory_write(memory, w, e, a)", mistakes={
            "you added before erasing: the erase then wipes part of the new content. "
            "Erase first, M~ = M * (1 - w e), then add w a.": (memory + W * A) * (1 - W * E),
            "the erase ignores w: every row is erased. Multiply e by the row's weight, 1 - w(i) e.":
                memory * (1 - E) + W * A,
            "nothing is erased: you only added w(i) a. Multiply by (1 - w(i) e) first.": memory + W * A,
            "you subtracted w e instead of multiplying by (1 - w e): the erase is multiplicative.":
                memory - W * E + W * A,
            "the add ignores w: add w(i) a to row i, not a to every row.": memory * (1 - W * E) + A,
            "e and a are swapped: e is the erase vector (in 1 - w(i) e), a the add vector (in + w(i) a).":
                memory * (1 - W * A) + W * E,
        })
        tests += 1
    # e = 1 with a one-hot w replaces that row by a and leaves the others alone
    memory = _memory(ev.rng(19), 1, 4, 3)
    w = torch.tensor([[0.0, 1.0, 0.0, 0.0]])
    a = torch.tensor([[5.0, -2.0, 0.5]])
    out = to_numpy(ev.call(answer, memory.clone(), w, torch.ones(1, 3), a))
    expect(np.allclose(out[0, 1], to_numpy(a[0])), "with e = 1 and w one-hot on row 1, row 1 should become a.")
    expect(np.allclose(out[0, [0, 2, 3]], to_numpy(memory[0, [0, 2, 3]])),
           "rows with weight 0 should not change.")
    return tests + 1


# ---------------------------------------------------------------- addressing
def _cosine_no_eps(k, memory):
    return (memory @ k.unsqueeze(-1)).squeeze(-1) / (memory.norm(dim=-1) * k.norm(dim=-1, keepdim=True))


@exercise("cosine similarity", reference=ref.cosine_similarity)
def cosine_similarity(ev: Evaluation, answer):
    tests = 0
    for seed, (B, N, M) in enumerate([(2, 6, 4), (3, 9, 5)]):
        r = ev.rng(20 + seed)
        memory, k = _memory(r, B, N, M) * 3, _t(r.normal(size=(B, M)))
        memory[0, 1] = 0.0                                   # a zero row
        out = ev.call(answer, k, memory)
        expect_shape(out, (B, N), "cosine_similarity(k, memory)")
        _compare(ev, out, ref.cosine_similarity(k, memory), "cosine_similarity(k, memory)", mistakes={
            "a zero memory row gives NaN: add a small eps to the denominator, "
            "k.M(i) / (|k| |M(i)| + eps).": _cosine_no_eps(k, memory),
            "you returned the dot product k.M(i) without dividing by the norms |k| |M(i)|.":
                (memory @ k.unsqueeze(-1)).squeeze(-1),
            "you divided by |M(i)| only: divide by both norms, |k| |M(i)|.":
                (memory @ k.unsqueeze(-1)).squeeze(-1) / (memory.norm(dim=-1) + 1e-8),
            "you divided by |k| only: divide by both norms, |k| |M(i)|.":
                (memory @ k.unsqueeze(-1)).squeeze(-1) / (k.norm(dim=-1, keepdim=True) + 1e-8),
            "the norms are not square-rooted: |u| = sqrt(sum_j u_j^2), not the sum of squares.":
                (memory @ k.unsqueeze(-1)).squeeze(-1)
                / ((memory ** 2).sum(-1) * (k ** 2).sum(-1, keepdim=True) + 1e-8),
        }, properties=[(lambda out: np.all(np.abs(to_numpy(out)) <= 1 + 1e-5),
                        "cosine similarities must lie in [-1, 1]: divide by |k| |M(i)|.")])
        tests += 1
    zero = ev.call(answer, torch.ones(1, 3), torch.zeros(1, 4, 3))
    expect_finite(zero, "cosine_similarity with an all-zero memory",
                  "Add a small eps to the denominator so that zero rows give 0.")
    expect(np.allclose(to_numpy(zero), 0, atol=1e-5), "a zero memory row should have cosine similarity 0.")
    return tests + 1


@exercise("content addressing", reference=ref.content_addressing)
def content_addressing(ev: Evaluation, answer):
    tests = 0
    for seed, (B, N, M) in enumerate([(2, 6, 4), (3, 10, 5)]):
        r = ev.rng(30 + seed)
        memory, k = _memory(r, B, N, M), _t(r.normal(size=(B, M)))
        memory[-1, 2] = 0.0                                  # a zero row: the cosine needs its eps
        beta = _column(r, B, 0.5, 8.0)
        K = ref.cosine_similarity(k, memory)
        out = ev.call(answer, k, beta, memory)
        expect_shape(out, (B, N), "content_addressing(k, beta, memory)")
        _compare(ev, out, ref.content_addressing(k, beta, memory), "content_addressing(k, beta, memory)", mistakes={
            "the key strength beta is missing: softmax(beta * cosine), not softmax(cosine).":
                torch.softmax(K, -1),
            "you divided by beta: beta is a strength (multiply), not a temperature.":
                torch.softmax(K / beta, -1),
            "softmax over the wrong axis: the weighting is a distribution over memory rows (last axis).":
                torch.softmax(beta * K, 0),
            "you normalised beta * cosine by its sum without exp: use a softmax.":
                beta * K / (beta * K).sum(-1, keepdim=True),
            "you divided by the largest exp instead of the sum: a softmax divides exp(beta K(k, M(i))) by "
            "sum_j exp(beta K(k, M(j))).": torch.exp(beta * K - (beta * K).amax(-1, keepdim=True)),
            "a zero memory row gives NaN: compute the cosine with `ntm.cosine_similarity` "
            "(its eps keeps zero rows at 0).": torch.softmax(beta * _cosine_no_eps(k, memory), -1),
        }, properties=[(_is_distribution,
                        "the weighting must be a distribution over rows (>= 0, sums to 1): use a softmax.")])
        expect_distribution(out, "content weights")
        tests += 1
    # large beta focuses on the best-matching row; beta = 0 gives a uniform weighting
    memory = _memory(ev.rng(38), 1, 6, 4)
    k = memory[:, 4] * 2
    sharp = to_numpy(ev.call(answer, k, torch.tensor([[50.0]]), memory))
    expect(sharp[0].argmax() == 4 and sharp[0, 4] > 0.5,
           "with a large beta the weight should concentrate on the row most similar to the key.")
    flat = to_numpy(ev.call(answer, k, torch.zeros(1, 1), memory))
    expect(np.allclose(flat, 1 / 6, atol=1e-5), "with beta = 0 the weighting should be uniform.")
    return tests + 2


@exercise("interpolation with the previous weighting", reference=ref.interpolate)
def interpolate(ev: Evaluation, answer):
    tests = 0
    for seed, (B, N) in enumerate([(2, 6), (4, 9)]):
        r = ev.rng(40 + seed)
        w_c, w_prev = _weighting(r, B, N, 2.0), _weighting(r, B, N, 2.0)
        g = _column(r, B, 0.1, 0.9)
        out = ev.call(answer, w_c, w_prev, g)
        expect_shape(out, (B, N), "interpolate(w_c, w_prev, g)")
        _compare(ev, out, ref.interpolate(w_c, w_prev, g), "interpolate(w_c, w_prev, g)", mistakes={
            "g is reversed: g = 1 should keep the content weighting, w_g = g w_c + (1 - g) w_prev.":
                g * w_prev + (1 - g) * w_c,
            "the previous weighting is not multiplied by (1 - g): the result no longer sums to 1.":
                g * w_c + w_prev,
            "you averaged w_c and w_prev: the gate g sets the mix, g w_c + (1 - g) w_prev.":
                (w_c + w_prev) / 2,
            "w_prev is ignored: you returned the content weighting; mix it with the previous weighting, "
            "g w_c + (1 - g) w_prev.": w_c,
            "the previous weighting is missing: w_g = g w_c + (1 - g) w_prev.": g * w_c,
        }, properties=[(_is_distribution,
                        "the interpolated weighting must still sum to 1: use weights g and (1 - g).")])
        tests += 1
    w_c, w_prev = _weighting(ev.rng(48), 1, 5), _weighting(ev.rng(49), 1, 5)
    expect(np.allclose(to_numpy(ev.call(answer, w_c, w_prev, torch.ones(1, 1))), to_numpy(w_c), atol=1e-6),
           "with g = 1 the result should be the content weighting w_c.")
    expect(np.allclose(to_numpy(ev.call(answer, w_c, w_prev, torch.zeros(1, 1))), to_numpy(w_prev), atol=1e-6),
           "with g = 0 the result should be the previous weighting w_prev.")
    return tests + 2


def _shift_zero_padded(w, s):
    R = s.shape[-1] // 2
    padded = F.pad(w, (R, R))
    N = w.shape[-1]
    return sum(s[..., R + k:R + k + 1] * padded[..., R - k:R - k + N] for k in range(-R, R + 1))


def _rolled(w, s, dims):
    """The 2R+1 copies of w rolled by -R..R, (B, N, 2R+1); dims=None rolls the flattened tensor."""
    R = s.shape[-1] // 2
    return torch.stack([torch.roll(w, k, dims=dims) if dims is not None else torch.roll(w, k)
                        for k in range(-R, R + 1)], dim=-1)


@exercise("circular shift", reference=ref.shift)
def shift(ev: Evaluation, answer):
    tests = 0
    for seed, (B, N, S) in enumerate([(2, 6, 3), (3, 8, 3), (2, 7, 5)]):
        r = ev.rng(50 + seed)
        w = _weighting(r, B, N, 2.0)
        s = torch.softmax(_t(r.normal(size=(B, S)) * 2), -1)
        out = ev.call(answer, w, s)
        expect_shape(out, (B, N), "shift(w, s)")
        _compare(ev, out, ref.shift(w, s), "shift(w, s)", mistakes={
            "the shift is not circular: weight shifted past the last row must wrap round to row 0 "
            "(use torch.roll, not zero padding).": _shift_zero_padded(w, s),
            "the shift goes the wrong way: s[..., -1] (shift +1) should move weight from row i to "
            "row i + 1.": ref.shift(w, s.flip(-1)),
            "the shifted copies are not weighted by s: w_s(i) = sum_k s(k) w(i - k).":
                _rolled(w, s, dims=-1).mean(-1),
            "torch.roll without dims= rolls the flattened batch, so weight moves between examples: pass "
            "dims=-1.": _rolled(w, s, dims=None).mul(s.unsqueeze(-2)).sum(-1),
            "torch.roll over the wrong axis: roll the memory rows (dims=-1), not the batch.":
                _rolled(w, s, dims=0).mul(s.unsqueeze(-2)).sum(-1),
        }, properties=[(_is_distribution,
                        "the shifted weighting must still sum to 1: a circular convolution loses no weight.")])
        tests += 1
    # one-hot shifts: +1 moves the last row round to row 0, -1 moves row 0 round to the last
    w = torch.zeros(1, 5)
    w[0, 4] = 1.0
    plus = to_numpy(ev.call(answer, w, torch.tensor([[0.0, 0.0, 1.0]])))
    expect(np.allclose(plus, [[1, 0, 0, 0, 0]], atol=1e-6),
           f"shifting a one-hot on the last row by +1 should wrap it round to row 0, got {plus.round(3)}.")
    w = torch.zeros(1, 5)
    w[0, 0] = 1.0
    minus = to_numpy(ev.call(answer, w, torch.tensor([[1.0, 0.0, 0.0]])))
    expect(np.allclose(minus, [[0, 0, 0, 0, 1]], atol=1e-6),
           f"shifting a one-hot on row 0 by -1 should wrap it round to the last row, got {minus.round(3)}.")
    return tests + 2


@exercise("sharpening", reference=ref.sharpen)
def sharpen(ev: Evaluation, answer):
    tests = 0
    for seed, (B, N) in enumerate([(2, 6), (3, 10)]):
        r = ev.rng(60 + seed)
        w = _weighting(r, B, N, 1.5)
        gamma = _column(r, B, 1.0, 5.0)
        out = ev.call(answer, w, gamma)
        expect_shape(out, (B, N), "sharpen(w, gamma)")
        _compare(ev, out, ref.sharpen(w, gamma), "sharpen(w, gamma)", mistakes={
            "the sharpened weights are not renormalised: divide w**gamma by its sum over rows.": w ** gamma,
            "you multiplied by gamma instead of raising to the power gamma: w(i)**gamma.":
                ref.sharpen(w * gamma, torch.ones_like(gamma)),
            "you renormalised over the wrong axis: the sum runs over memory rows (last axis).":
                w ** gamma / (w ** gamma).sum(0, keepdim=True),
            "you divided by the largest w(j)**gamma instead of the sum: renormalise by sum_j w(j)**gamma.":
                w ** gamma / (w ** gamma).amax(-1, keepdim=True),
            "you took softmax(gamma * w): sharpening raises each weight to the power gamma, "
            "w(i)**gamma / sum_j w(j)**gamma.": torch.softmax(gamma * w, -1),
        }, properties=[(_is_distribution,
                        "the sharpened weighting must sum to 1: divide by sum_j w(j)**gamma.")])
        expect(np.array_equal(to_numpy(out).argmax(-1), to_numpy(w).argmax(-1)),
               "sharpening must keep the most-weighted row (the argmax).")
        tests += 1
    w = _weighting(ev.rng(68), 3, 7)
    same = ev.call(answer, w, torch.ones(3, 1))
    expect(np.allclose(to_numpy(same), to_numpy(w), atol=1e-5), "gamma = 1 should leave the weighting unchanged.")
    return tests + 1


# ---------------------------------------------------------------- head activations
@exercise("head parameters and their activations", reference=ref.head_parameters)
def head_parameters(ev: Evaluation, answer):
    M, S = 5, 3
    tests = 0
    for seed, B in enumerate([2, 4]):
        raw = _t(ev.rng(70 + seed).normal(size=(B, M + 3 + S)) * 3)
        out = ev.call(answer, raw, M, S)
        expected = ref.head_parameters(raw, M, S)
        out = expect_returns(out, expected, ("k", "beta", "g", "s", "gamma"))
        k, beta, g, s, gamma = torch.split(raw, [M, 1, 1, S, 1], dim=-1)
        wrong = {
            "beta": {"beta must be >= 0: apply softplus to it.": beta,
                     "beta uses exp; the NTM paper uses softplus, log(1 + exp(x)).": beta.exp()},
            "g": {"g must lie in [0, 1]: apply a sigmoid to it.": g,
                  "g uses softplus; a gate needs a sigmoid (values in [0, 1]).": F.softplus(g)},
            "s": {"s must be a distribution over the shifts: apply a softmax over the last axis.": s,
                  "s uses a sigmoid; the shift weights need a softmax so they sum to 1.": torch.sigmoid(s),
                  "s: softmax over the wrong axis: normalise over the shifts (the last axis, dim=-1).":
                      torch.softmax(s, dim=0)},
            "gamma": {"gamma must be >= 1: use 1 + softplus, not softplus alone.": F.softplus(gamma),
                      "gamma uses 1 + exp; the NTM uses 1 + softplus.": 1 + gamma.exp(),
                      "gamma has no activation: use 1 + softplus so that gamma >= 1.": gamma},
            "k": {"the key k should be used as it is (no activation).": torch.tanh(k)},
        }
        for name, got, exp in zip(["k", "beta", "g", "s", "gamma"], out, expected):
            expect_shape(got, tuple(exp.shape), name)
            ev.expect_close(got, exp, name, mistakes=wrong[name])
        tests += 1
    return tests
