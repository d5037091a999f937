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
    ExerciseError,
    exercise,
    expect,
    expect_distribution,
    expect_finite,
    expect_returns,
    expect_shape,
    to_numpy,
)
from .evaluation import Evaluation
from .expectations import explained
from .lesson05_families import gate_changed, gate_ends, large_beta, norms_added, scale_free, shift_pairings, write_steps
from .lesson05_mistakes import (
    NAMES,
    batch_of_one,
    call,
    compare,
    cosine_no_eps,
    head_activations,
    head_mistakes,
    head_slices,
    is_distribution,
    lined_up,
    read_properties,
    rolled,
    shift_zero_padded,
    signed_scalars,
    split_crash,
)


# ---------------------------------------------------------------- random inputs
def _t(a):
    return torch.as_tensor(np.asarray(a, dtype=np.float32))


def _memory(r, B, N, M):
    return _t(r.normal(size=(B, N, M)))


def _weighting(r, B, N, peaked=1.0):
    return torch.softmax(_t(r.normal(size=(B, N)) * peaked), dim=-1)


def _column(r, B, low, high):
    return _t(r.uniform(low, high, size=(B, 1)))


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
        expect(getattr(out, "shape", None) != (N, M),
               f"memory_read returned shape (N, M) = {(N, M)}: you summed over the batch axis (0); sum the weighted "
               "rows over i, axis -2.")
        expect_shape(out, (B, M), "memory_read(memory, w)")
        weighted = w.unsqueeze(-1) * memory                                 # (B, N, M)
        untransposed = {} if N != M else {      # (a square memory first: with N != M, memory @ w crashes)
            "you multiplied memory @ w.unsqueeze(-1): that contracts w with the row width M (the columns), not the "
            "rows. Transpose the memory, memory.transpose(-1, -2) @ w.unsqueeze(-1), or make w a row, "
            "(w.unsqueeze(-2) @ memory).squeeze(-2).": (memory @ w.unsqueeze(-1)).squeeze(-1)}
        compare(ev, out, ref.memory_read(memory, w), "memory_read(memory, w)", mistakes={**untransposed,
            "you applied a softmax to w before reading: w is already a weighting (>= 0, sums to 1); read with it "
            "as it is, r = sum_i w(i) M(i).": ref.memory_read(memory, torch.softmax(w, -1)),
            "you read only the most weighted row (argmax): the read is soft, the sum of EVERY row weighted by "
            "w(i), r = sum_i w(i) M(i).": memory[torch.arange(B), w.argmax(-1)],
            "you summed the rows without weighting them by w: r = sum_i w(i) M(i).":
                memory.sum(-2),
            "you took the plain mean of the rows: weight each row by w(i) instead.":
                memory.mean(-2),
            "you averaged the weighted rows (divided by N): r is the weighted SUM, sum_i w(i) M(i).":
                weighted.mean(-2),
            "you summed over the columns (the last axis): sum the weighted rows over i (axis -2).":
                weighted.sum(-1),
        }, properties=read_properties(ev, answer, memory))
        tests += 1
    # a one-hot weighting reads exactly that row
    memory = _memory(ev.rng(9), 2, 5, 3)
    w = torch.zeros(2, 5)
    w[0, 3], w[1, 0] = 1.0, 1.0
    out = to_numpy(ev.call(answer, memory, w))
    expect(np.allclose(out, to_numpy(torch.stack([memory[0, 3], memory[1, 0]]))),
           "a one-hot weighting on row i should read exactly row i of the memory.")
    memory = _memory(ev.rng(8), 1, 5, 3)
    w = _weighting(ev.rng(7), 1, 5)
    batch_of_one(ev, answer, (memory, w), ref.memory_read(memory, w), "memory_read(memory, w)",
                 "(w.unsqueeze(-2) @ memory).squeeze(-2)")
    return tests + 2


@exercise("memory write: erase then add", reference=ref.memory_write)
def memory_write(ev: Evaluation, answer):
    tests = 0
    for seed, (B, N, M) in enumerate([(2, 6, 4), (3, 8, 5)]):
        r = ev.rng(10 + seed)
        memory, w = _memory(r, B, N, M), _weighting(r, B, N, peaked=3.0)
        e, a = _t(r.uniform(0, 1, size=(B, M))), _t(r.normal(size=(B, M)))
        W, E, A = w.unsqueeze(-1), e.unsqueeze(-2), a.unsqueeze(-2)
        out = call(ev, answer, memory.clone(), w, e, a, errors=[lined_up(
            B, N, "e or a, (B, M), is multiplied with w.unsqueeze(-1), (B, N, 1), without the rows' axis: "
                  "broadcasting lines its batch axis up with the N rows (right only for a batch of one). "
                  "Unsqueeze them, e.unsqueeze(-2) and a.unsqueeze(-2), (B, 1, M).")])
        expect_shape(out, (B, N, M), "memory_write(memory, w, e, a)")
        with explained(*write_steps(ev, answer, memory, w, e, a)):
            compare(ev, out, ref.memory_write(memory, w, e, a), "memory_write(memory, w, e, a)", mistakes={
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
@exercise("cosine similarity", reference=ref.cosine_similarity)
def cosine_similarity(ev: Evaluation, answer):
    tests = 0
    for seed, (B, N, M) in enumerate([(2, 6, 4), (3, 9, 5)]):
        r = ev.rng(20 + seed)
        memory, k = _memory(r, B, N, M) * 3, _t(r.normal(size=(B, M)))
        memory[0, 1] = 0.0                                   # a zero row
        out = call(ev, answer, k, memory, errors=[lined_up(
            B, N, "the key k, (B, M), or its norm, (B,), meets the memory's (B, N, ...) values without the rows' "
                  "axis: broadcasting lines its batch axis up with the N rows (right only for a batch of one). "
                  "Multiply with k.unsqueeze(-2), (B, 1, M), and divide by k.norm(dim=-1, keepdim=True), (B, 1).")])
        expect_shape(out, (B, N), "cosine_similarity(k, memory)")
        dot = (memory @ k.unsqueeze(-1)).squeeze(-1)
        expected = ref.cosine_similarity(k, memory)
        compare(ev, out, expected, "cosine_similarity(k, memory)", mistakes={
            "a zero memory row gets similarity 1, not 0: eps is in the numerator too (eps / eps = 1). Add it to "
            "the denominator only, k.M(i) / (|k| |M(i)| + eps).":
                torch.where(memory.norm(dim=-1) == 0, torch.ones(()), expected),
            "k.norm() without a dim is the norm of the whole batch of keys: take each key's norm, "
            "k.norm(dim=-1, keepdim=True), (B, 1).": dot / (memory.norm(dim=-1) * k.norm() + 1e-8),
            "memory.norm() without a dim is the norm of the whole memory: take each row's norm, "
            "memory.norm(dim=-1), (B, N).": dot / (memory.norm() * k.norm(dim=-1, keepdim=True) + 1e-8),
            "a zero memory row gives NaN: add a small eps to the denominator, "
            "k.M(i) / (|k| |M(i)| + eps).": cosine_no_eps(k, memory),
            "you added the two norms, |k| + |M(i)|: the cosine divides by their PRODUCT, k.M(i) / (|k| |M(i)| + eps).":
                norms_added(k, memory),
            "you returned the dot product k.M(i) without dividing by the norms |k| |M(i)|.":
                (memory @ k.unsqueeze(-1)).squeeze(-1),
            "you divided by |M(i)| only: divide by both norms, |k| |M(i)|.":
                (memory @ k.unsqueeze(-1)).squeeze(-1) / (memory.norm(dim=-1) + 1e-8),
            "you divided by |k| only: divide by both norms, |k| |M(i)|.":
                (memory @ k.unsqueeze(-1)).squeeze(-1) / (k.norm(dim=-1, keepdim=True) + 1e-8),
            "the norms are not square-rooted: |u| = sqrt(sum_j u_j^2), not the sum of squares.":
                (memory @ k.unsqueeze(-1)).squeeze(-1)
                / ((memory ** 2).sum(-1) * (k ** 2).sum(-1, keepdim=True) + 1e-8),
        }, properties=[scale_free(ev, answer, k, memory), (lambda out: np.all(np.abs(to_numpy(out)) <= 1 + 1e-5),
                        "cosine similarities must lie in [-1, 1]: divide by |k| |M(i)|.")])
        tests += 1
    zero = ev.call(answer, torch.ones(1, 3), torch.zeros(1, 4, 3))
    expect_finite(zero, "cosine_similarity with an all-zero memory",
                  "Add a small eps to the denominator so that zero rows give 0.")
    expect(np.allclose(to_numpy(zero), 0, atol=1e-5), "a zero memory row should have cosine similarity 0.")
    memory, k = _memory(ev.rng(28), 1, 5, 3), _t(ev.rng(29).normal(size=(1, 3)))
    batch_of_one(ev, answer, (k, memory), ref.cosine_similarity(k, memory), "cosine_similarity(k, memory)",
                 "(memory @ k.unsqueeze(-1)).squeeze(-1)")
    return tests + 2


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
        compare(ev, out, ref.content_addressing(k, beta, memory), "content_addressing(k, beta, memory)", mistakes={
            "the key strength beta is missing: softmax(beta * cosine), not softmax(cosine).":
                torch.softmax(K, -1),
            "you divided by beta: beta is a strength (multiply), not a temperature.":
                torch.softmax(K / beta, -1),
            "softmax over the wrong axis: the weighting is a distribution over memory rows (last axis).":
                torch.softmax(beta * K, 0),
            "you used the dot product k.M(i) instead of the cosine similarity: the key strength beta multiplies "
            "K(k, M(i)), the dot product divided by |k| |M(i)| (use `ntm.cosine_similarity`).":
                torch.softmax(beta * (memory @ k.unsqueeze(-1)).squeeze(-1), -1),
            "you applied softplus to beta: beta is already the key strength (>= 0, the head's softplus made it); "
            "use it as it is, softmax(beta * K(k, M(i))).": torch.softmax(F.softplus(beta) * K, -1),
            "you normalised beta * cosine by its sum without exp: use a softmax.":
                beta * K / (beta * K).sum(-1, keepdim=True),
            "you divided by the largest exp instead of the sum: a softmax divides exp(beta K(k, M(i))) by "
            "sum_j exp(beta K(k, M(j))).": torch.exp(beta * K - (beta * K).amax(-1, keepdim=True)),
            "a zero memory row gives NaN: compute the cosine with `ntm.cosine_similarity` "
            "(its eps keeps zero rows at 0).": torch.softmax(beta * cosine_no_eps(k, memory), -1),
        }, properties=[(is_distribution,
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
    large_beta(ev, answer, _memory(ev.rng(39), 2, 5, 4))
    return tests + 3


@exercise("interpolation with the previous weighting", reference=ref.interpolate)
def interpolate(ev: Evaluation, answer):
    tests = 0
    for seed, (B, N) in enumerate([(2, 6), (4, 9)]):
        r = ev.rng(40 + seed)
        w_c, w_prev = _weighting(r, B, N, 2.0), _weighting(r, B, N, 2.0)
        g = _column(r, B, 0.1, 0.4)
        g[1:] += 0.5                        # gates on both sides of 0.5: a rounded gate is neither w_c nor w_prev
        out = ev.call(answer, w_c, w_prev, g)
        expect_shape(out, (B, N), "interpolate(w_c, w_prev, g)")
        with explained(gate_changed(ev, out, w_c, w_prev, g), gate_ends(ev, answer, w_c, w_prev)):
            compare(ev, out, ref.interpolate(w_c, w_prev, g), "interpolate(w_c, w_prev, g)", mistakes={
                "g is reversed: g = 1 should keep the content weighting, w_g = g w_c + (1 - g) w_prev.":
                    g * w_prev + (1 - g) * w_c,
                "the gate is rounded to 0 or 1 (w_c where g > 0.5, else w_prev): the interpolation MIXES the two, "
                "w_g = g w_c + (1 - g) w_prev, for every g in [0, 1].": torch.where(g > 0.5, w_c, w_prev),
                "the previous weighting is not multiplied by (1 - g): the result no longer sums to 1.":
                    g * w_c + w_prev,
                "you averaged w_c and w_prev: the gate g sets the mix, g w_c + (1 - g) w_prev.":
                    (w_c + w_prev) / 2,
                "w_prev is ignored: you returned the content weighting; mix it with the previous weighting, "
                "g w_c + (1 - g) w_prev.": w_c,
                "the previous weighting is missing: w_g = g w_c + (1 - g) w_prev.": g * w_c,
                "you applied a sigmoid to g: g is already a gate in [0, 1] (the head's sigmoid made it); use it as "
                "it is, w_g = g w_c + (1 - g) w_prev.": ref.interpolate(w_c, w_prev, torch.sigmoid(g)),
                "you applied a softmax to the mix: g w_c + (1 - g) w_prev is already a distribution (a mix of two "
                "distributions); return it as it is.": torch.softmax(ref.interpolate(w_c, w_prev, g), -1),
            }, properties=[(is_distribution,
                            "the interpolated weighting must still sum to 1: use weights g and (1 - g).")])
        tests += 1
    w_c, w_prev = _weighting(ev.rng(48), 1, 5), _weighting(ev.rng(49), 1, 5)
    expect(np.allclose(to_numpy(ev.call(answer, w_c, w_prev, torch.ones(1, 1))), to_numpy(w_c), atol=1e-6),
           "with g = 1 the result should be the content weighting w_c.")
    expect(np.allclose(to_numpy(ev.call(answer, w_c, w_prev, torch.zeros(1, 1))), to_numpy(w_prev), atol=1e-6),
           "with g = 0 the result should be the previous weighting w_prev.")
    return tests + 2


@exercise("circular shift", reference=ref.shift)
def shift(ev: Evaluation, answer):
    tests = 0
    for seed, (B, N, S) in enumerate([(2, 6, 3), (3, 8, 3), (2, 7, 5)]):
        r = ev.rng(50 + seed)
        w = _weighting(r, B, N, 2.0)
        s = torch.softmax(_t(r.normal(size=(B, S)) * 2), -1)
        out = call(ev, answer, w, s, errors=[lined_up(
            B, N, "a value per example of shape (B,) (a column s[:, j] taken without keeping its axis?) meets "
                  "the (B, N) weighting: broadcasting lines it up with the N rows. Keep the axis, s[:, j:j + 1] "
                  "or s.unsqueeze(-2), so that it is (B, 1).")])
        expect_shape(out, (B, N), "shift(w, s)")
        compare(ev, out, ref.shift(w, s), "shift(w, s)", mistakes={
            "the shift is not circular: weight shifted past the last row must wrap round to row 0 "
            "(use torch.roll, not zero padding).": shift_zero_padded(w, s),
            "the shift goes the wrong way: s[..., -1] (shift +1) should move weight from row i to "
            "row i + 1.": ref.shift(w, s.flip(-1)),
            "the shifted copies are not weighted by s: w_s(i) = sum_k s(k) w(i - k).":
                rolled(w, s, dims=-1).mean(-1),
            "torch.roll without dims= rolls the flattened batch, so weight moves between examples: pass "
            "dims=-1.": rolled(w, s, dims=None).mul(s.unsqueeze(-2)).sum(-1),
            "your shifts run 0..2R instead of -R..R: s[..., 0] is the weight of shift -R and s[..., R] of no "
            "shift; roll by k for k in range(-R, R + 1).": torch.stack(
                [torch.roll(w, k, dims=-1) for k in range(S)], -1).mul(s.unsqueeze(-2)).sum(-1),
            "torch.roll over the wrong axis: roll the memory rows (dims=-1), not the batch.":
                rolled(w, s, dims=0).mul(s.unsqueeze(-2)).sum(-1),
            "you applied a softmax to s: s is already a distribution over the shifts (the head's softmax made "
            "it); use it as it is, w_s(i) = sum_k s(k) w(i - k).": ref.shift(w, torch.softmax(s, -1)),
            **shift_pairings(w, s),
        }, properties=[(is_distribution,
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
    r = ev.rng(58)
    w, s = _weighting(r, 2, 6).double(), torch.softmax(_t(r.normal(size=(2, 3))), -1).double()
    out = ev.call(answer, w, s)
    expect(getattr(out, "dtype", None) == torch.float64,
           f"shift(w, s) on float64 weightings returned {getattr(out, 'dtype', type(out).__name__)}: build the "
           "result like w (torch.zeros_like(w), not torch.zeros(w.shape), which is float32 on the CPU), so that it "
           "keeps w's dtype and device.")
    ev.expect_close(out, ref.shift(w, s), "shift(w, s) on float64 weightings", atol=1e-9)
    return tests + 3


@exercise("sharpening", reference=ref.sharpen)
def sharpen(ev: Evaluation, answer):
    tests = 0
    for seed, (B, N) in enumerate([(2, 6), (3, 10)]):
        r = ev.rng(60 + seed)
        w = _weighting(r, B, N, 1.5)
        gamma = _column(r, B, 1.0, 5.0)
        out = call(ev, answer, w, gamma, errors=[lined_up(
            B, N, "a value per example of shape (B,) (the sum w.sum(-1) without keepdim=True, or a squeezed "
                  "gamma?) divides the (B, N) weighting: broadcasting lines it up with the N rows (right only "
                  "for a batch of one). Keep the axis: w.sum(-1, keepdim=True), (B, 1).")])
        expect_shape(out, (B, N), "sharpen(w, gamma)")
        compare(ev, out, ref.sharpen(w, gamma), "sharpen(w, gamma)", mistakes={
            "the sharpened weights are not renormalised: divide w**gamma by its sum over rows.": w ** gamma,
            "you multiplied by gamma instead of raising to the power gamma: w(i)**gamma.":
                ref.sharpen(w * gamma, torch.ones_like(gamma)),
            "you renormalised over the wrong axis: the sum runs over memory rows (last axis).":
                w ** gamma / (w ** gamma).sum(0, keepdim=True),
            "you divided by the largest w(j)**gamma instead of the sum: renormalise by sum_j w(j)**gamma.":
                w ** gamma / (w ** gamma).amax(-1, keepdim=True),
            "you took softmax(gamma * w): sharpening raises each weight to the power gamma, "
            "w(i)**gamma / sum_j w(j)**gamma.": torch.softmax(gamma * w, -1),
            "you took the softmax of w**gamma: renormalise by dividing by the sum, w(i)**gamma / sum_j "
            "w(j)**gamma (a softmax exponentiates the weights again).": torch.softmax(w ** gamma, -1),
            "you raised w to the power 1 / gamma, which flattens the weighting: sharpening raises it to the power "
            "gamma >= 1, w(i)**gamma / sum_j w(j)**gamma.": ref.sharpen(w, 1 / gamma),
        }, properties=[(is_distribution,
                        "the sharpened weighting must sum to 1: divide by sum_j w(j)**gamma."),
                       (lambda out, w=w: np.all(to_numpy(out).max(-1) >= to_numpy(w).max(-1) - 1e-6),
                        "sharpening lowered the largest weight: with gamma >= 1 the largest weight can only grow; "
                        "raise each weight to the power gamma, w(i)**gamma / sum_j w(j)**gamma.")])
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
    tests = 0
    # a second num_shifts (its sizes must follow it), and raw of a batch of heads (B, H, ...) as the NTM cell gives it
    for seed, (lead, M, S) in enumerate([((2,), 5, 3), ((4,), 4, 5), ((2, 2), 5, 3)]):
        raw = signed_scalars(_t(ev.rng(70 + seed).normal(size=(*lead, M + 3 + S)) * 3), M)
        out = call(ev, answer, raw, M, S, errors=[split_crash(raw.shape, M, S)])
        expected = ref.head_parameters(raw, M, S)
        out = expect_returns(out, expected, NAMES)
        for name, got, exp in zip(NAMES, out, expected):
            if name == "s" and getattr(got, "shape", (0,))[-1:] == (3,) != tuple(exp.shape[-1:]):
                raise ExerciseError(f"s has 3 entries where num_shifts = {S}: its size is num_shifts, not a fixed "
                                    "3; split raw with the sizes [M, 1, 1, num_shifts, 1].")
            expect_shape(got, tuple(exp.shape), name)
            ev.expect_close(got, exp, name, mistakes={**head_mistakes(raw, M, S)[name], **head_slices(raw, M, S, name),
                                                      **head_activations(raw, M, S)[name]})
        tests += 1
    return tests
