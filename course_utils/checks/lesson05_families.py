"""Lesson 05's slips named by a family rather than one listed value (lesson05.py uses them):

- `write_steps(...)`: probes of a write with nothing added (a = 0) and with nothing erased (e = 0): which of the
  two steps, erase or add, holds the slip;
- `scale_free(...)`: a cosine does not change when k or a row is scaled (any wrong denominator breaks that);
- `large_beta(...)`: content addressing with a key strength whose exp overflows float32 (a softmax written out
  without subtracting the maximum);
- `gate_changed(...)`, `gate_ends(...)`: an interpolation that mixes w_c and w_prev with another weight than g (a
  sigmoid applied again, a power, ...), or misses w_c at g = 1 and w_prev at g = 0;
- `shift_pairings(...)`: a shift whose weights s(k) are paired with the wrong shifts (s indexed by k instead of
  k + R, or any other permutation of s).
"""
import itertools

import numpy as np
import torch

from .. import memory as ref
from .core import expect, to_numpy
from .evaluation import Evaluation


def _close(a, b, atol=1e-5):
    a = to_numpy(a)
    return a.shape == tuple(b.shape) and bool(np.allclose(a, to_numpy(b), atol=atol, rtol=1e-4))


# ---------------------------------------------------------------- memory_write: which step holds the slip
def write_steps(ev: Evaluation, answer, memory, w, e, a):
    """Probes for `explained`: the write with a = 0 must only erase, with e = 0 must only add."""
    W, E, A = w.unsqueeze(-1), e.unsqueeze(-2), a.unsqueeze(-2)

    def erase():
        out = ev.call(answer, memory.clone(), w, e, torch.zeros_like(a))
        if not _close(out, memory * (1 - W * E)):
            return ("with a = 0 (nothing added) the write should only erase, M(i) [1 - w(i) e], and yours does "
                    "not: the erase step is wrong. Multiply each row, element by element, by (1 - w(i) e), "
                    "with w.unsqueeze(-1) (B, N, 1) and e.unsqueeze(-2) (B, 1, M).")
        return None

    def add():
        out = ev.call(answer, memory.clone(), w, torch.zeros_like(e), a)
        if _close(out, memory - W * A):
            return ("you subtracted the add term: the write ADDS w(i) a to each erased row, "
                    "M(i) = M~(i) + w(i) a.")
        if not _close(out, memory + W * A):
            return ("with e = 0 (nothing erased) the write should only add, M(i) + w(i) a, and yours does not: "
                    "the add step is wrong. Add w(i) a to the erased memory, M~ + w.unsqueeze(-1) * "
                    "a.unsqueeze(-2).")
        return None

    return erase, add


# ---------------------------------------------------------------- cosine_similarity: only the directions count
def scale_free(ev: Evaluation, answer, k, memory):
    """(holds, symptom): the cosine of 4 k with 0.5 M(i) is the cosine of k with M(i)."""
    def holds(out):
        return _close(ev.call(answer, k * 4, memory * 0.5), to_numpy(out), atol=1e-4)

    return (holds, "your similarity changed when the key was scaled by 4 and the memory by 0.5: a cosine depends "
                   "only on the directions of k and M(i). Divide the dot product by the PRODUCT of the two norms, "
                   "k.M(i) / (|k| |M(i)| + eps).")


def norms_added(k, memory, eps=1e-8):
    """The cosine with the two norms added, not multiplied."""
    dot = (memory @ k.unsqueeze(-1)).squeeze(-1)
    return dot / (memory.norm(dim=-1) + k.norm(dim=-1, keepdim=True) + eps)


# ---------------------------------------------------------------- content_addressing: a large beta
def large_beta(ev: Evaluation, answer, memory):
    """A key strength beta = 1000 on a key that matches row 2 (cosine 1): exp(beta K) overflows float32."""
    B = memory.shape[0]
    k, beta = memory[:, 2] * 3, torch.full((B, 1), 1000.0)
    out = ev.call(answer, k, beta, memory)
    expect(np.all(np.isfinite(to_numpy(out))),
           "with a large key strength (beta = 1000) your weighting contains NaN or inf: exp(beta K) overflows "
           "float32 (exp(89) is already inf), and inf / inf is NaN. Use torch.softmax, or subtract the largest "
           "beta K(k, M(j)) before the exp: softmax(x - max x) = softmax(x).")
    ev.expect_close(out, ref.content_addressing(k, beta, memory), "content_addressing with beta = 1000")


# ---------------------------------------------------------------- interpolate: the gate used as it is
def gate_changed(ev: Evaluation, out, w_c, w_prev, g):
    """Probe: the answer is w_prev + g' (w_c - w_prev) with some g' != g (the gate changed before use)."""
    def probe():
        a, d = to_numpy(out).astype(np.float64), to_numpy(w_c - w_prev).astype(np.float64)
        if a.shape != d.shape:
            return None
        rest = a - to_numpy(w_prev)
        used = (rest * d).sum(-1, keepdims=True) / np.maximum((d * d).sum(-1, keepdims=True), 1e-12)
        if not np.allclose(rest, used * d, atol=1e-5) or np.allclose(used, to_numpy(g), atol=1e-4):
            return None
        return (f"you mix w_c and w_prev with another weight than g (g' = {used[0, 0]:.3g} where g = "
                f"{float(g[0, 0]):.3g}): use the gate as it is, it is already in [0, 1] (the head's sigmoid made "
                "it); w_g = g w_c + (1 - g) w_prev.")
    return probe


def gate_ends(ev: Evaluation, answer, w_c, w_prev):
    """Probe: g = 1 must give w_c and g = 0 must give w_prev."""
    def probe():
        B = w_c.shape[0]
        for value, expected, name in ((1.0, w_c, "w_c"), (0.0, w_prev, "w_prev")):
            if not _close(ev.call(answer, w_c, w_prev, torch.full((B, 1), value)), expected, atol=1e-6):
                return (f"with g = {value:g} the result should be {name} exactly, and yours is not: use g as the "
                        "mixing weight itself, w_g = g w_c + (1 - g) w_prev (no change of g, no other term).")
        return None
    return probe


# ---------------------------------------------------------------- shift: which weight goes with which shift
def shift_pairings(w, s):
    """{symptom: the shift with the weights of s paired with the wrong shifts}: s indexed by k instead of k + R,
    then every other order of s's entries (s is small: 3 or 5 shifts)."""
    S = s.shape[-1]
    R = S // 2
    out = {"you indexed s by the shift k: s[..., 0] is the weight of shift -R and s[..., R] of no shift, so shift k's "
           "weight is s[..., k + R] (s[..., k] with a negative k wraps round to the end of s).":
           ref.shift(w, torch.roll(s, R, dims=-1))}
    for order in itertools.permutations(range(S)):
        if list(order) != list(range(S)) and list(order) != list(range(S))[::-1]:
            out[f"the weights of s go with the wrong shifts (you used s[..., {list(order)}] for the shifts -R..R): "
                f"s[..., j] is the weight of shift j - R (s[..., 0] of -R, s[..., R] of no shift, s[..., 2R] of "
                "+R); roll by k = j - R, weighted by s[..., j]."] = ref.shift(w, s[..., list(order)])
    return out
