"""Lesson 05, exercise 6: the circular shift.

    shift(w (B, N), s (B, 2R+1)) -> w_s (B, N), w_s(i) = sum_k s(k) w(i - k), k in -R..R, the row index mod N

s[..., 0] is the weight of shift -R, s[..., R] of no shift. The check draws three weightings with 3 and 5 shifts
(B != N, so that a column of s taken without its axis crashes and is named), names the mistakes by their values (the
weights of s paired with the wrong shifts among them), and otherwise the property a shift breaks: it loses no weight.
Then float64 weightings: the result keeps w's dtype.
"""
import itertools

import torch
import torch.nn.functional as F

from ... import memory as ref
from ..core import Mistake, Mistakes, exercise, expect, expect_shape
from ..evaluation import Evaluation, call_naming
from . import inputs
from .batch_axis import lined_up
from .weightings import compare, is_distribution

_CONV = "w_s(i) = sum_k s(k) w(i - k)"


def _rolled(w, s, dims=-1, shifts=None):
    """The copies of w rolled by each shift (-R..R unless given), (B, N, 2R+1); dims=None rolls the flattened w."""
    R = s.shape[-1] // 2
    shifts = range(-R, R + 1) if shifts is None else shifts
    return torch.stack([torch.roll(w, k, dims=dims) if dims is not None else torch.roll(w, k) for k in shifts], -1)


def _zero_padded(w, s):
    R, N = s.shape[-1] // 2, w.shape[-1]
    padded = F.pad(w, (R, R))
    return sum(s[..., R + k:R + k + 1] * padded[..., R - k:R - k + N] for k in range(-R, R + 1))


def _column_without_axis(w, s):
    R = s.shape[-1] // 2
    return sum(s[:, j] * torch.roll(w, k, dims=-1) for j, k in enumerate(range(-R, R + 1)))   # (B,) meets N


def _into_zeros(w, s):
    R = s.shape[-1] // 2
    out = torch.zeros(w.shape)                                                 # float32, whatever w's dtype
    for j, k in enumerate(range(-R, R + 1)):
        out += s[:, j:j + 1] * torch.roll(w, k, dims=-1)
    return out


def _paired(order):
    """The shift with the weights of s in another `order` (the weight s[..., order[j]] for shift j - R)."""
    def shift(w, s):
        return ref.shift(w, s[..., list(order)])
    return shift


def _orders(S):
    """The orders of s's entries the pairing family covers: every permutation but the right one, the reversed one
    (the wrong direction) and s rolled by R (s indexed by the shift k): those are mistakes of their own."""
    R, identity = S // 2, tuple(range(S))
    own = {identity, identity[::-1], tuple((j - R) % S for j in range(S))}
    return [order for order in itertools.permutations(range(S)) if order not in own]


M = Mistakes(
    Mistake("rows_axis", "a value per example, (B,), meets the (B, N) weighting: broadcasting lines it up with the N "
            "rows (B = {B}, N = {N}; right only for a batch of one); the weight of each shift keeps its axis, (B, 1)",
            hint="s[:, j:j + 1] or s.unsqueeze(-2)", shows=_column_without_axis),
    Mistake("not_circular", "the shift is not circular: weight shifted past the last row wraps round to row 0",
            hint="torch.roll, not zero padding", shows=_zero_padded),
    Mistake("wrong_direction", "the shift goes the wrong way: s[..., -1] (shift +1) moves weight from row i to row "
            "i + 1", shows=lambda w, s: ref.shift(w, s.flip(-1))),
    Mistake("unweighted", f"the shifted copies are not weighted by s: {_CONV}",
            shows=lambda w, s: _rolled(w, s).mean(-1)),
    Mistake("roll_flattened", "the roll moves weight between the examples of the batch: each weighting is rolled along "
            "its own rows", hint="torch.roll(w, k, dims=-1): without dims= it rolls the flattened batch",
            shows=lambda w, s: (_rolled(w, s, dims=None) * s.unsqueeze(-2)).sum(-1)),
    Mistake("from_zero", "your shifts run 0..2R instead of -R..R: s[..., 0] is the weight of shift -R and s[..., R] of "
            "no shift", hint="roll by k for k in range(-R, R + 1)",
            shows=lambda w, s: (_rolled(w, s, shifts=range(s.shape[-1])) * s.unsqueeze(-2)).sum(-1)),
    Mistake("roll_batch_axis", "the roll runs over the batch axis: it moves the memory rows (the last axis)",
            hint="dims=-1", shows=lambda w, s: (_rolled(w, s, dims=0) * s.unsqueeze(-2)).sum(-1)),
    Mistake("softmax_s", f"you applied a softmax to s: s is already a distribution over the shifts (the head's "
            f"softmax made it); it is used as it is, {_CONV}", shows=lambda w, s: ref.shift(w, torch.softmax(s, -1))),
    Mistake("indexed_by_k", "s is indexed by the shift k: s[..., 0] is the weight of shift -R and s[..., R] of no "
            "shift, so shift k's weight is s[..., k + R] (s[..., k] with a negative k wraps round to the end of s)",
            shows=lambda w, s: ref.shift(w, torch.roll(s, s.shape[-1] // 2, dims=-1))),
    Mistake("pairing", "the weights of s go with the wrong shifts (you used s[..., {order}] for the shifts -R..R): "
            "s[..., j] is the weight of shift j - R (s[..., 0] of -R, s[..., R] of no shift, s[..., 2R] of +R)",
            hint="roll by k = j - R, weighted by s[..., j]", shows=_paired((1, 0, 2))),
    Mistake("not_distribution", "the shifted weighting does not sum to 1: a circular convolution loses no weight",
            shows=lambda w, s: 2 * ref.shift(w, s)),
    Mistake("dtype", "shift(w, s) on float64 weightings returned {dtype}: the result is built like w, so that it keeps "
            "w's dtype and device", hint="torch.zeros_like(w), not torch.zeros(w.shape) (float32 on the CPU)",
            shows=_into_zeros),
)
_VALUES = ("not_circular", "wrong_direction", "unweighted", "roll_flattened", "from_zero", "roll_batch_axis",
           "softmax_s", "indexed_by_k")


def _mistakes(w, s):
    values = M.variants(_VALUES, w, s)
    for order in _orders(s.shape[-1]):
        values[M.pairing.at(order=list(order))] = _paired(order)(w, s)
    return values


def _by_gather(w, s):
    """A right answer written another way: the rows (i - k) mod N gathered with an index matrix."""
    N, R = w.shape[-1], s.shape[-1] // 2
    index = (torch.arange(N)[:, None] - torch.arange(-R, R + 1)[None, :]) % N          # (N, 2R+1)
    return (w[..., index] * s.unsqueeze(-2)).sum(-1)


@exercise("circular shift", reference=ref.shift, mistakes=M, right=[_by_gather])
def shift(ev: Evaluation, answer):
    """answer(w (B, N), s (B, 2R+1)) -> w_s (B, N)."""
    tests = 0
    for seed, (B, N, S) in enumerate([(2, 6, 3), (3, 8, 3), (2, 7, 5)]):
        r = ev.rng(50 + seed)
        w, s = inputs.weighting(r, B, N, 2.0), torch.softmax(inputs.tensor(r.normal(size=(B, S)) * 2), -1)
        out = call_naming(ev, [lined_up(B, N, M.rows_axis)], answer, w, s)
        expect_shape(out, (B, N), "shift(w, s)")
        compare(ev, out, ref.shift(w, s), "shift(w, s)", mistakes=_mistakes(w, s),
                properties=[(is_distribution, M.not_distribution)])
        tests += 1
    r = ev.rng(58)
    w, s = inputs.weighting(r, 2, 6).double(), torch.softmax(inputs.tensor(r.normal(size=(2, 3))), -1).double()
    out = ev.call(answer, w, s)
    dtype = getattr(out, "dtype", type(out).__name__)
    expect(dtype == torch.float64, M.dtype.at(dtype=dtype))
    ev.expect_close(out, ref.shift(w, s), "shift(w, s) on float64 weightings", atol=1e-9)
    return tests + 1

