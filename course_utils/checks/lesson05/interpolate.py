"""Lesson 05, exercise 5: the interpolation gate.

    interpolate(w_c (B, N), w_prev (B, N), g (B, 1)) -> w_g (B, N) = g w_c + (1 - g) w_prev

The check draws gates on both sides of 0.5 (so that a rounded gate is neither weighting), names the mistakes by their
values, and otherwise what the answer breaks: the mix is still a distribution, it mixes w_c and w_prev with another
weight than g, or it misses w_c at g = 1 or w_prev at g = 0. Then the gate's two ends, g = 1 and g = 0.
"""
import numpy as np
import torch

from ... import memory as ref
from ..core import Mistake, Mistakes, exercise, expect, expect_shape, to_numpy
from ..evaluation import Evaluation
from ..expectations import explained
from . import inputs
from .weightings import close, compare, is_distribution

_MIX = "w_g = g w_c + (1 - g) w_prev"
M = Mistakes(
    Mistake("g_reversed", f"g is reversed: g = 1 keeps the content weighting, {_MIX}",
            shows=lambda w_c, w_prev, g: g * w_prev + (1 - g) * w_c),
    Mistake("rounded_gate", f"the gate is rounded to 0 or 1 (w_c where g > 0.5, else w_prev): the interpolation "
            f"MIXES the two, {_MIX}, for every g in [0, 1]",
            shows=lambda w_c, w_prev, g: torch.where(g > 0.5, w_c, w_prev)),
    Mistake("no_complement", "the previous weighting is not multiplied by (1 - g): the result no longer sums to 1",
            shows=lambda w_c, w_prev, g: g * w_c + w_prev),
    Mistake("averaged", f"you averaged w_c and w_prev: the gate g sets the mix, {_MIX}",
            shows=lambda w_c, w_prev, g: (w_c + w_prev) / 2),
    Mistake("prev_ignored", f"w_prev is ignored: you returned the content weighting; it is mixed with the previous "
            f"weighting, {_MIX}", shows=lambda w_c, w_prev, g: w_c),
    Mistake("prev_missing", f"the previous weighting is missing: {_MIX}", shows=lambda w_c, w_prev, g: g * w_c),
    Mistake("sigmoid_g", f"you applied a sigmoid to g: g is already a gate in [0, 1] (the head's sigmoid made it); it "
            f"is used as it is, {_MIX}", shows=lambda w_c, w_prev, g: ref.interpolate(w_c, w_prev, torch.sigmoid(g))),
    Mistake("softmax_mix", "you applied a softmax to the mix: g w_c + (1 - g) w_prev is already a distribution (a mix "
            "of two distributions)", shows=lambda w_c, w_prev, g: torch.softmax(ref.interpolate(w_c, w_prev, g), -1)),
    Mistake("not_distribution", "the interpolated weighting no longer sums to 1: the weights of the two weightings, "
            "g and (1 - g), sum to 1", shows=lambda w_c, w_prev, g: g * w_c + 1 - g * w_prev),
    Mistake("gate_changed", "you mix w_c and w_prev with another weight than g (g' = {used:.3g} where g = {g:.3g}): "
            f"the gate is used as it is, already in [0, 1] (the head's sigmoid made it); {_MIX}",
            shows=lambda w_c, w_prev, g: ref.interpolate(w_c, w_prev, g ** 2)),
    Mistake("gate_ends", "with g = {value:g} the result is not {name} exactly: g is the mixing weight itself, "
            f"{_MIX} (no change of g, no other term)",
            shows=lambda w_c, w_prev, g: ref.interpolate(w_c, w_prev, g.clamp(0.01, 0.99))),
)
_VALUES = ("g_reversed", "rounded_gate", "no_complement", "averaged", "prev_ignored", "prev_missing", "sigmoid_g",
           "softmax_mix")


def _gate_changed(out, w_c, w_prev, g):
    """Probe: the answer is w_prev + g' (w_c - w_prev) with some g' != g (the gate changed before use)."""
    def probe():
        a, d = to_numpy(out).astype(np.float64), to_numpy(w_c - w_prev).astype(np.float64)
        if a.shape != d.shape:
            return None
        rest = a - to_numpy(w_prev)
        used = (rest * d).sum(-1, keepdims=True) / np.maximum((d * d).sum(-1, keepdims=True), 1e-12)
        if not np.allclose(rest, used * d, atol=1e-5) or np.allclose(used, to_numpy(g), atol=1e-4):
            return None
        return M.gate_changed.at(used=float(used[0, 0]), g=float(g[0, 0]))
    return probe


def _gate_ends(ev: Evaluation, answer, w_c, w_prev):
    """Probe: g = 1 must give w_c and g = 0 must give w_prev."""
    def probe():
        for value, expected, name in ((1.0, w_c, "w_c"), (0.0, w_prev, "w_prev")):
            if not close(ev.call(answer, w_c, w_prev, torch.full((w_c.shape[0], 1), value)), expected, atol=1e-6):
                return M.gate_ends.at(value=value, name=name)
        return None
    return probe


@exercise("interpolation with the previous weighting", reference=ref.interpolate, mistakes=M,
          right=[lambda w_c, w_prev, g: torch.lerp(w_prev, w_c, g), lambda w_c, w_prev, g: w_prev + g * (w_c - w_prev)])
def interpolate(ev: Evaluation, answer):
    """answer(w_c (B, N), w_prev (B, N), g (B, 1)) -> w_g (B, N)."""
    tests = 0
    for seed, (B, N) in enumerate([(2, 6), (4, 9)]):
        r = ev.rng(40 + seed)
        w_c, w_prev = inputs.weighting(r, B, N, 2.0), inputs.weighting(r, B, N, 2.0)
        g = inputs.column(r, B, 0.1, 0.4)
        g[1:] += 0.5                        # gates on both sides of 0.5: a rounded gate is neither w_c nor w_prev
        out = ev.call(answer, w_c, w_prev, g)
        expect_shape(out, (B, N), "interpolate(w_c, w_prev, g)")
        with explained(_gate_changed(out, w_c, w_prev, g), _gate_ends(ev, answer, w_c, w_prev)):
            compare(ev, out, ref.interpolate(w_c, w_prev, g), "interpolate(w_c, w_prev, g)",
                    mistakes=M.variants(_VALUES, w_c, w_prev, g), properties=[(is_distribution, M.not_distribution)])
        tests += 1
    w_c, w_prev = inputs.weighting(ev.rng(48), 1, 5), inputs.weighting(ev.rng(49), 1, 5)
    for value, expected, name in ((1.0, w_c, "w_c"), (0.0, w_prev, "w_prev")):
        expect(close(ev.call(answer, w_c, w_prev, torch.full((1, 1), value)), expected, atol=1e-6),
               M.gate_ends.at(value=value, name=name))
    return tests + 1
