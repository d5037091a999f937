"""Lesson 05's slips that need more than a listed value: the crashes torch raises for them, a batch of one,
the properties of a read, and the head parameters' slices (lesson05.py uses them).

- `compare(...)`: expect_close, then the properties an answer misses when no listed mistake explains it;
- `call(ev, answer, *args, errors=...)`: `ev.call`, with the typical crashes named; `lined_up(B, N, symptom)` is
  the crash of a value per example, (B,) or (B, M), that broadcasting lined up with the N memory rows (a missing
  unsqueeze, or a sum or norm without keepdim=True), and `split_crash(...)` the crash of a split of the head parameters;
- `batch_of_one(...)`: B = 1, where squeeze() without a dim drops the batch axis too;
- `read_properties(...)`: what a read must do with a one-hot weighting and with a weighting on two rows;
- `head_slices(...)`: each head parameter computed from a slice of raw that starts somewhere else.
"""

import numpy as np
import torch
import torch.nn.functional as F

from .. import memory as ref
from .core import ValuesDiffer, expect, expect_shape, to_numpy
from .evaluation import Evaluation, call_naming

_LINED_UP = r"size of tensor a \((\d+)\) must match the size of tensor b \((\d+)\) at non-singleton dimension 1"


def call(ev: Evaluation, answer, *args, errors=()):
    """`call_naming` with the crashes listed after the inputs, as lesson 05's checks write them."""
    return call_naming(ev, errors, answer, *args)


def compare(ev: Evaluation, actual, expected, what, mistakes=None, properties=(), atol=1e-5):
    """expect_close; when the values differ for no named reason, report a failed property first.

    properties: (holds, symptom) pairs, `holds(actual)` True when the answer has the property.
    """
    try:
        ev.expect_close(actual, expected, what, mistakes=mistakes, atol=atol)
    except ValuesDiffer:
        for holds, symptom in properties:
            expect(holds(actual), symptom)
        raise


def is_distribution(w):
    w = to_numpy(w).astype(np.float64)
    return bool(np.all(np.isfinite(w)) and np.all(w >= -1e-6) and np.allclose(w.sum(-1), 1, atol=1e-4))


def lined_up(B, N, symptom):
    """The crash of a value per example, (B,) or (B, M), multiplied with (B, N) or (B, N, M) values without the
    rows' axis: broadcasting lines its batch axis up with the N rows (B != N), at dimension 1."""
    return (_LINED_UP, lambda match: symptom if {int(match[1]), int(match[2])} == {B, N} else None)


def split_crash(raw_shape, M, S):
    """The crash of torch.split on raw (..., M + 3 + S) along another axis, or with sizes that ignore S."""
    def message(match):
        if int(match[1]) != raw_shape[-1]:
            return (f"you split raw along dim {match[2]}, an axis of size {match[1]}: raw is (..., M + 3 + "
                    f"num_shifts) = {tuple(raw_shape)} (a batch of heads has more than 2 dims); split the LAST "
                    "axis, torch.split(raw, [M, 1, 1, num_shifts, 1], dim=-1).")
        return (f"your split sizes {match[3]} do not add up to raw's last axis, M + 3 + num_shifts = {match[1]} "
                f"(here M = {M}, num_shifts = {S}): s has num_shifts entries, not a fixed 3; use the sizes "
                "[M, 1, 1, num_shifts, 1].")
    return (r"split_with_sizes expects split_sizes to sum exactly to (\d+) \(input tensor's size at dimension "
            r"(-?\d+)\), but got split_sizes=(\[[\d, ]*\])", message)


def batch_of_one(ev: Evaluation, answer, args, expected, what, squeeze):
    """The answer on a batch of one (B = 1): squeeze() without a dim drops the batch axis too."""
    out = ev.call(answer, *args)
    shape, want = tuple(getattr(out, "shape", ())), tuple(expected.shape)
    expect(shape == want or shape != tuple(n for n in want if n != 1),
           f"{what} for a batch of one (B = 1) has shape {shape}, expected {want}: squeeze() without a dim drops "
           f"every axis of size 1, the batch axis too. Name the axis to squeeze: {squeeze}.")
    expect_shape(out, want, f"{what} for a batch of one (B = 1)")
    ev.expect_close(out, expected, f"{what} for a batch of one (B = 1)")


def read_properties(ev: Evaluation, answer, memory):
    """(holds, symptom) pairs of a read on `memory` (B >= 2, N >= 3): a one-hot weighting reads its row, a weighting
    of 0.5 on two rows reads their average (the read is linear in w)."""
    B, N, _ = memory.shape
    rows = torch.arange(B) % N
    one_hot = F.one_hot(rows, N).float()
    two = 0.5 * one_hot + 0.5 * F.one_hot((rows + 1) % N, N).float()

    def reads(w, expected):
        return lambda _: np.allclose(to_numpy(ev.call(answer, memory, w)), to_numpy(expected), atol=1e-5)

    picked = memory[torch.arange(B), rows]
    return [
        (reads(one_hot, picked), "a one-hot weighting w on row i should read exactly row i, M(i): use w as it is "
                                 "(it is already a weighting: no softmax or other change), r = sum_i w(i) M(i)."),
        (reads(two, (picked + memory[torch.arange(B), (rows + 1) % N]) / 2),
         "with w = 0.5 on two rows the read should be the average of those two rows: r = sum_i w(i) M(i) sums "
         "EVERY row weighted by w(i), it does not pick the most weighted one."),
    ]


_NAMES = ("k", "beta", "g", "s", "gamma")
_ACTIVATIONS = (lambda x: x, F.softplus, torch.sigmoid, lambda x: torch.softmax(x, dim=-1),
                lambda x: 1 + F.softplus(x))


def head_slices(raw, M, S, name):
    """{symptom: the head parameter `name` with its activation, on a slice of raw that starts elsewhere}."""
    sizes = ref.head_sizes(M, S)
    i = _NAMES.index(name)
    start, size = sum(sizes[:i]), sizes[i]
    out = {}
    for other in range(raw.shape[-1] - size + 1):
        if other != start:
            out[f"{name} comes from entries {other}..{other + size - 1} of raw's last axis, not {start}.."
                f"{start + size - 1}: raw holds k, beta, g, s, gamma in this order, with sizes [M, 1, 1, "
                f"num_shifts, 1] = {sizes}; split it with torch.split(raw, [M, 1, 1, num_shifts, 1], dim=-1) "
                "(or slice at these offsets)."] = _ACTIVATIONS[i](raw[..., other:other + size])
    return out


def cosine_no_eps(k, memory):
    """The cosine without its eps (NaN on a zero row)."""
    return (memory @ k.unsqueeze(-1)).squeeze(-1) / (memory.norm(dim=-1) * k.norm(dim=-1, keepdim=True))


def shift_zero_padded(w, s):
    """The shift with zero padding, not circular."""
    R = s.shape[-1] // 2
    padded = F.pad(w, (R, R))
    N = w.shape[-1]
    return sum(s[..., R + k:R + k + 1] * padded[..., R - k:R - k + N] for k in range(-R, R + 1))


def rolled(w, s, dims):
    """The 2R+1 copies of w rolled by -R..R, (B, N, 2R+1); dims=None rolls the flattened tensor."""
    R = s.shape[-1] // 2
    return torch.stack([torch.roll(w, k, dims=dims) if dims is not None else torch.roll(w, k)
                        for k in range(-R, R + 1)], dim=-1)


NAMES = _NAMES


def head_mistakes(raw, M, S):
    """{parameter name: {symptom: that parameter with a typical wrong activation}}."""
    k, beta, g, s, gamma = torch.split(raw, ref.head_sizes(M, S), dim=-1)
    return {
        "beta": {"beta must be >= 0: apply softplus to it.": beta,
                 "beta uses exp; the NTM paper uses softplus, log(1 + exp(x)).": beta.exp()},
        "g": {"g must lie in [0, 1]: apply a sigmoid to it.": g,
              "g uses softplus; a gate needs a sigmoid (values in [0, 1]).": F.softplus(g),
              "g uses tanh, whose values lie in (-1, 1): a gate needs a sigmoid, values in [0, 1].": torch.tanh(g)},
        "s": {"s must be a distribution over the shifts: apply a softmax over the last axis.": s,
              "s uses a sigmoid; the shift weights need a softmax so they sum to 1.": torch.sigmoid(s),
              **{f"s: softmax over the wrong axis (dim={d}, where s has {s.dim()} axes): normalise over the "
                 "shifts, the LAST axis, dim=-1 (raw can have several leading axes, e.g. a batch of heads "
                 "(B, H, M + 3 + num_shifts), so dim=1 is not always the last).": torch.softmax(s, dim=d)
                 for d in range(s.dim() - 1)}},
        "gamma": {"gamma must be >= 1: use 1 + softplus, not softplus alone.": F.softplus(gamma),
                  "gamma uses 1 + exp; the NTM uses 1 + softplus.": 1 + gamma.exp(),
                  "gamma has no activation: use 1 + softplus so that gamma >= 1.": gamma,
                  "gamma = softplus(1 + x) puts the 1 inside the softplus (and can fall below 1): add it outside, "
                  "gamma = 1 + softplus(x).": F.softplus(1 + gamma)},
        "k": {"the key k should be used as it is (no activation).": torch.tanh(k)},
    }


# every activation a head parameter may get by mistake, and what the table of the lesson asks for
_SOFTMAX = "a softmax over the last axis"
_COMMON = {"no activation": lambda x: x, "relu": torch.relu, "abs": torch.abs, "exp": torch.exp,
           "square": torch.square, "sigmoid": torch.sigmoid, "tanh": torch.tanh, "softplus": F.softplus,
           "1 + relu": lambda x: 1 + torch.relu(x), "1 + exp": lambda x: 1 + torch.exp(x),
           "1 + sigmoid": lambda x: 1 + torch.sigmoid(x), "1 + softplus": lambda x: 1 + F.softplus(x),
           "a clamp to [0, 1]": lambda x: x.clamp(0, 1), _SOFTMAX: lambda x: torch.softmax(x, dim=-1)}
_WANTED = {"k": ("no activation", "the key is any vector of R^M", "use its slice as it is"),
           "beta": ("softplus", "a key strength >= 0, smooth, with a gradient for every raw value",
                    "F.softplus(beta)"),
           "g": ("sigmoid", "a gate in [0, 1], smooth, with a gradient for every raw value", "torch.sigmoid(g)"),
           "s": (_SOFTMAX, "a distribution over the shifts", "torch.softmax(s, dim=-1)"),
           "gamma": ("1 + softplus", "a sharpening exponent >= 1, smooth", "1 + F.softplus(gamma)")}
_WHY = {"relu": ": relu is 0, with no gradient, for every raw value below 0, where the head could never recover",
        "a clamp to [0, 1]": ": a clamp has no gradient outside [0, 1]"}


def signed_scalars(raw, M):
    """raw with beta, g and gamma (entries M, M + 1 and -1 of its last axis) between 1.2 and 2.5 in size, negative in
    every other head and positive in the rest: activations that agree on one sign (relu and none, abs and none)
    differ on the other, and a size above 1 but not far from 0 tells a clamp from relu and relu from softplus."""
    sign = torch.ones(raw.shape[:-1]).flatten()
    sign[::2] = -1
    raw = raw.clone()
    for i in (M, M + 1, raw.shape[-1] - 1):
        raw[..., i] = sign.reshape(raw.shape[:-1]) * (1.2 + 1.3 * torch.sigmoid(raw[..., i]))
    return raw


def head_activations(raw, M, S):
    """{parameter name: {symptom: that parameter with another common activation than the lesson's table's}}."""
    parts = dict(zip(_NAMES, torch.split(raw, ref.head_sizes(M, S), dim=-1)))
    out = {}
    for name, (wanted, why, code) in _WANTED.items():
        single = parts[name].shape[-1] == 1
        out[name] = {}
        for act, fn in _COMMON.items():
            if act != wanted:
                note = ": a softmax over an axis of size 1 is always 1" if act == _SOFTMAX and single else \
                    _WHY.get(act, "")
                out[name][f"{name} uses {act}{note}. The lesson's table asks for {wanted}, {why}; use {code}."] = \
                    fn(parts[name])
    return out
