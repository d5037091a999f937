"""What an ablation's rise shows: the properties exercise 2's check names where no registered mistake matches.

Each is a probe for properties.by_property, given the check's cases [(model, tokens, layer, head, L)] and the
answer's rises `got` (one per case):

    positions(M, cases, got)          the rises are the means of the per-position rises over one window of
                                      positions (the same, relative to L, for every case): which one
    removal(M, ev, answer, cases, got, want)
                                      a head that already writes nothing (its columns of W_O zeroed) must get a
                                      rise of 0: the answer's rise for it where it is not (dead_head); else the
                                      case whose rise differs most, the answer's and the right one (rise)
"""
import copy

import torch

from ..errors import ExerciseError
from .ablations import per_position_rise


def _offset(c):
    return "" if c == 0 else f" {'+' if c > 0 else '-'} {abs(c)}"


# a window's first and last position: (c, m) is c + m·L, named in the lesson's words
_FIRSTS = [(0, 0), (1, 0), (-2, 1), (-1, 1), (0, 1), (1, 1), (2, 1)]
_LASTS = [(-2, 1), (-1, 1), (0, 1), (1, 1), (-4, 2), (-3, 2), (-2, 2)]


def _name(c, m):
    return str(c) if m == 0 else ("L" if m == 1 else f"{m}L") + _offset(c)


def positions(M, cases, got, atol=1e-4, rtol=1e-3):
    """A probe: the one window of positions [first .. last] whose mean rise is the answer's in every case."""
    def probe():
        rises = [per_position_rise(model, tokens, layer, head).double() for model, tokens, layer, head, _ in cases]
        found = []
        for first in _FIRSTS:
            for last in _LASTS:
                if (first, last) == ((0, 1), (-2, 2)):                       # the right window
                    continue
                means = []
                for rise, (*_, L) in zip(rises, cases):
                    a, b = first[0] + first[1] * L, last[0] + last[1] * L
                    if not 0 <= a <= b < rise.numel():
                        break
                    means.append(rise[a:b + 1].mean())
                if len(means) == len(cases) and torch.allclose(torch.stack(means), got, atol=atol, rtol=rtol):
                    found.append((_name(*first), _name(*last)))
        return M.positions.at(first=found[0][0], last=found[0][1]) if len(found) == 1 else None
    return probe


def removal(M, ev, answer, cases, got, want):
    """A probe: the answer's rise for the first case's head once that head writes nothing (dead_head) if it is not
    0; where it is 0, the case whose rise differs most (rise)."""
    def probe():
        model, tokens, layer, head, L = cases[0]
        dead = copy.deepcopy(model)
        attn = dead.layers[layer].attn
        with torch.no_grad():
            attn.out_proj.weight[:, head * attn.d_head:(head + 1) * attn.d_head] = 0
        try:
            dead_rise = float(torch.as_tensor(ev.call(answer, dead, tokens, layer, head, L), dtype=torch.float64))
        except (ExerciseError, TypeError, ValueError, RuntimeError):
            return None
        if abs(dead_rise) > 1e-5:
            return M.dead_head.at(layer=layer, head=head, got=dead_rise)
        i = int((got - want).abs().argmax())
        _, _, layer, head, _ = cases[i]
        return M.rise.at(layer=layer, head=head, got=float(got[i]), want=float(want[i]))
    return probe
