"""Lesson 05, exercise 8: a head's parameters and their activations.

    head_parameters(raw (..., M + 3 + num_shifts), M, num_shifts) -> k (..., M), beta (..., 1), g (..., 1),
        s (..., num_shifts), gamma (..., 1)

raw holds k, beta, g, s, gamma in this order, with sizes [M, 1, 1, num_shifts, 1]; the activations are the lesson's
table's: k as it is, beta = softplus, g = sigmoid, s = a softmax over the shifts, gamma = 1 + softplus. The check draws
three raws, the second with num_shifts = 5 (the sizes must follow it) and the third a batch of heads (B, H, ...),
with beta, g and gamma of both signs (so that every common activation gives other values), and names the mistakes:
a split along another axis or with sizes that ignore num_shifts, a parameter from the wrong slice of raw, another
activation than the table's, s normalised over another axis.
"""
import torch
import torch.nn.functional as F

from ... import memory as ref
from ..core import Mistake, Mistakes, exercise, expect, expect_returns, expect_shape
from ..evaluation import Evaluation, call_naming
from ..torch_errors import SPLIT_SIZES
from . import inputs
from .head_activations import NAMES, WANTED, others, signed_scalars, why, wrong_heads

_SIZES = "[M, 1, 1, num_shifts, 1]"
_SPLIT = f"torch.split(raw, {_SIZES}, dim=-1)"


def _split(dim=-1, sizes=None):
    """head_parameters with raw split along `dim`, with `sizes(M, num_shifts)` (the right ones if None)."""
    def head_parameters(raw, M, num_shifts=3):
        split = sizes(M, num_shifts) if sizes else ref.head_sizes(M, num_shifts)
        k, beta, g, s, gamma = torch.split(raw, split, dim=dim)
        return k, F.softplus(beta), torch.sigmoid(g), torch.softmax(s, -1), 1 + F.softplus(gamma)
    return head_parameters


def _s_of_three(raw, M, num_shifts=3):
    """s sliced by hand as 3 entries, whatever num_shifts."""
    k, beta, g, _, gamma = ref.head_parameters(raw, M, num_shifts)
    return k, beta, g, torch.softmax(raw[..., M + 2:M + 5], -1), gamma


def _s_from_g(raw, M, num_shifts=3):
    """s sliced by hand one entry too early, from g's entry."""
    return wrong_heads(name="s", start=M + 1)(raw, M, num_shifts)


def _activation(name, act):
    wanted, gives, code = WANTED[name]
    return Mistake(f"{name}_activation", name + " uses {act}{why}. The lesson's table asks for " + f"{wanted}, {gives}",
                   hint=code, shows=wrong_heads(name=name, act=act))


M = Mistakes(
    Mistake("split_axis", "you split raw along dim {dim}, an axis of size {size}: raw is (..., M + 3 + num_shifts) = "
            "{shape} (a batch of heads has more than 2 axes); the split runs along the LAST axis", hint=_SPLIT,
            shows=_split(dim=1)),
    Mistake("split_sizes", "your split sizes {sizes} do not add up to raw's last axis, M + 3 + num_shifts = {total} "
            "(here M = {M}, num_shifts = {S}): s has num_shifts entries, not a fixed 3", hint=_SPLIT,
            shows=_split(sizes=lambda M, S: [M, 1, 1, 3, 1])),
    Mistake("s_fixed_three", "s has 3 entries where num_shifts = {S}: its size is num_shifts, not a fixed 3",
            hint=f"split raw with the sizes {_SIZES}", shows=_s_of_three),
    Mistake("slice_offset", "{name} comes from entries {other}..{other_end} of raw's last axis, not {start}..{end}: "
            "raw holds k, beta, g, s, gamma in this order, with sizes " + _SIZES + " = {sizes}",
            hint=f"{_SPLIT} (or slice at these offsets)", shows=_s_from_g),
    Mistake("s_wrong_axis", "s: the softmax runs over axis {d}, where s has {n} axes: it normalises over the shifts, "
            "the LAST axis (raw can have several leading axes, e.g. a batch of heads (B, H, M + 3 + num_shifts))",
            hint="torch.softmax(s, dim=-1)", shows=wrong_heads(s_dim=0)),
    Mistake("gamma_one_inside", "gamma = softplus(1 + x) puts the 1 inside the softplus (and can fall below 1): it "
            "goes outside, gamma = 1 + softplus(x)", shows=wrong_heads(name="gamma", act="softplus(1 + x)")),
    _activation("k", "tanh"),
    _activation("beta", "no activation"),
    _activation("g", "tanh"),
    _activation("s", "sigmoid"),
    _activation("gamma", "softplus"),
)


def _split_crash(raw, width, S):
    """(pattern, symptom) for call_naming: torch.split along another axis, or with sizes that ignore num_shifts."""
    def symptom(match):
        if int(match["total"]) != raw.shape[-1]:
            return M.split_axis.at(dim=match["dim"], size=match["total"], shape=tuple(raw.shape))
        return M.split_sizes.at(sizes=f"[{match['sizes']}]", total=match["total"], M=width, S=S)
    return SPLIT_SIZES, symptom


def _mistakes(raw, M_, S, i, name):
    """{Said: the values of `name`} for every slip of `name`: another activation, another slice, another axis."""
    sizes = ref.head_sizes(M_, S)
    start, size = sum(sizes[:i]), sizes[i]
    found = {M[f"{name}_activation"].at(act=act, why=why(name, act, size == 1)): wrong_heads(name=name, act=act)
             for act in others(name)}
    if name == "gamma":
        found[M.gamma_one_inside] = wrong_heads(name="gamma", act="softplus(1 + x)")
    for other in range(raw.shape[-1] - size + 1):
        if other != start:
            found[M.slice_offset.at(name=name, other=other, other_end=other + size - 1, start=start,
                                    end=start + size - 1, sizes=sizes)] = wrong_heads(name=name, start=other)
    if name == "s":
        for d in range(raw.dim() - 1):
            found[M.s_wrong_axis.at(d=d, n=raw.dim())] = wrong_heads(s_dim=d)
    return {mistake: wrong(raw, M_, S)[i] for mistake, wrong in found.items()}


def _by_narrow(raw, M, num_shifts=3):
    """A right answer written another way: narrow at computed offsets, the sigmoid written out."""
    k, beta, g = raw.narrow(-1, 0, M), raw.narrow(-1, M, 1), raw.narrow(-1, M + 1, 1)
    s, gamma = raw.narrow(-1, M + 2, num_shifts), raw.narrow(-1, M + 2 + num_shifts, 1)
    return k, F.softplus(beta), 1 / (1 + torch.exp(-g)), s.softmax(-1), 1 + F.softplus(gamma)


@exercise("head parameters and their activations", reference=ref.head_parameters, mistakes=M, right=[_by_narrow])
def head_parameters(ev: Evaluation, answer):
    """answer(raw (..., M + 3 + num_shifts), M, num_shifts) -> (k, beta, g, s, gamma)."""
    tests = 0
    # a second num_shifts (its sizes must follow it), and raw of a batch of heads (B, H, ...) as the NTM cell gives it
    for seed, (lead, width, S) in enumerate([((2,), 5, 3), ((4,), 4, 5), ((2, 2), 5, 3)]):
        raw = signed_scalars(inputs.tensor(ev.rng(70 + seed).normal(size=(*lead, width + 3 + S)) * 3), width)
        expected = ref.head_parameters(raw, width, S)
        out = expect_returns(call_naming(ev, [_split_crash(raw, width, S)], answer, raw, width, S), expected, NAMES)
        for i, (name, got, exp) in enumerate(zip(NAMES, out, expected)):
            if name == "s":
                three = getattr(got, "shape", (0,))[-1:] == (3,) != tuple(exp.shape[-1:])
                expect(not three, M.s_fixed_three.at(S=S))
            expect_shape(got, tuple(exp.shape), name)
            ev.expect_close(got, exp, name, mistakes=_mistakes(raw, width, S, i, name))
        tests += 1
    return tests
