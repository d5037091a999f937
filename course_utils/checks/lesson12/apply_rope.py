"""Lesson 12, exercise 6: rotary position embedding (RoPE).

    apply_rope(x (..., T, d), positions (T,), base=10000.0) -> x rotated, in x's dtype: the pair
        (x_i, x_{i+d/2}) of row t turned by the angle positions[t] θ_i, θ_i = base^(-2i/d)

The check compares the rotation with the complex form (rope_forms.rope_complex) for 4-D and 2-D inputs, any
positions in any order and two bases, names the mistake whose values the answer gives, tests that norms are kept,
reads the frequencies off unit vectors and tests that q_m · k_n depends on m - n only where no mistake matches,
and that a float64 x comes back in float64.
"""
import functools

import numpy as np
import torch

from ...positions import apply_rope as ref_apply_rope
from ..core import Mistake, Mistakes, exercise, expect, expect_shape, randn, single_threaded, to_numpy
from ..evaluation import Evaluation, call_naming
from ..expectations import explained
from ..torch_errors import BROADCAST
from .rope_forms import rope_complex, rope_variant


def _rope(kind):
    return functools.partial(rope_variant, kind=kind)


def _broken(how):
    """A rotation whose sizes do not line up, by `how`."""
    def answer(x, positions, base=10000.0):
        d = x.size(-2) if how == "d_from_T" else x.size(-1)
        i = torch.arange(d if how == "theta_d" else d // 2)
        theta = base ** (-2 * i.float() / d)
        angle = positions.float() * theta if how == "no_outer" else positions.float()[:, None] * theta
        x1, x2 = x[..., :d // 2], x[..., d // 2:]
        return torch.cat([x1 * angle.cos() - x2 * angle.sin(), x1 * angle.sin() + x2 * angle.cos()], -1)
    return answer


def _variant(kind, says, hint=""):
    return Mistake(kind, says, hint=hint, shows=_rope(kind))


_HALVES = "x1, x2 = x[..., :d // 2], x[..., d // 2:]; torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1)"
_THETA = "theta = base ** (-2 * torch.arange(d // 2).float() / d)"
_POSITIONS = "angle = positions.float()[:, None] * theta"

M = Mistakes(
    _variant("interleaved", "the pairs are neighbours (2i, 2i+1): this lesson pairs the two HALVES, feature i with "
             "feature i + d/2 (the GPT-NeoX / Hugging Face Llama convention; the RoFormer paper's neighbours are the "
             "other one)", _HALVES),
    _variant("angle_sign", "the angle has the wrong sign: the pair (x_i, x_(i+d/2)) becomes (x_i cos mθ_i - x_(i+d/2) "
             "sin mθ_i, x_i sin mθ_i + x_(i+d/2) cos mθ_i), a rotation by +m θ_i", _HALVES),
    _variant("sin_cos", "sin and cos are swapped: the first half becomes x_i cos mθ_i - x_(i+d/2) sin mθ_i, the "
             "second x_i sin mθ_i + x_(i+d/2) cos mθ_i", _HALVES),
    _variant("neighbours_halves", "the pairs are read as neighbours (2i, 2i+1) but written back as halves: this "
             "lesson pairs feature i with feature i + d/2 both ways", _HALVES),
    _variant("stacked", "the rotated values are written pair by pair (interleaved): this lesson keeps the HALVES, the "
             "rotated x_i first, then the rotated x_(i+d/2)", _HALVES),
    _variant("halves_swapped", "the two rotated halves are put back in the wrong order: the rotated x_i go first, "
             "then the rotated x_(i+d/2)", _HALVES),
    _variant("pos_plus_one", "the positions are off by one: row t is rotated by positions[t] θ_i itself, not "
             "(positions[t] + 1) θ_i", _POSITIONS),
    _variant("arange", "the positions are ignored (0, 1, ..., T-1 used instead): row t is rotated by positions[t] "
             "θ_i, the positions the function is given (a cached step gives one position, t)", _POSITIONS),
    _variant("arange1", "the positions are ignored (1, 2, ..., T used instead): row t is rotated by positions[t] "
             "θ_i, the positions the function is given", _POSITIONS),
    _variant("freq_int", "the exponent -2i/d is computed with integers (a floor division rounds it down to 0 or -1): "
             "it is a float", _THETA),
    _variant("base_ignored", "the base argument is ignored (10000 used): θ_i = base^(-2i/d) with the base you are "
             "given", _THETA),
    _variant("freq_no_two", "the frequencies are off: θ_i = base^(-2i/d) for i = 0 .. d/2-1 (yours are "
             "base^(-i/d))", _THETA),
    _variant("freq_sign", "the frequencies are off: θ_i = base^(-2i/d), a NEGATIVE exponent (the first pair turns "
             "fastest, the last slowest)", _THETA),
    _variant("freq_full", "the frequencies are off: θ_i = base^(-2i/d) with d the full feature size, not d/2",
             _THETA),
    _variant("degrees", "the angles are taken as degrees: m θ_i is in radians, as cos and sin take them"),
    Mistake("norm_changed", "the rotation changed the vectors' norms: each pair (x_i, x_(i+d/2)) is rotated, "
            "(a cos - b sin, a sin + b cos), and a rotation keeps lengths", hint=_HALVES, shows=_rope("scaled")),
    Mistake("frequencies", "the frequencies are off: from one position to the next, pair i turns by θ_i = "
            "base^(-2i/d) (d = {d}, base = {base:g}: θ = {want}), yours by {got}", hint=_THETA + ", in floats",
            shows=_rope("freq_shifted")),
    Mistake("not_relative", "q_m · k_n depends on m - n only, and yours does not: for m - n = 3 it is {dots}; the "
            "angle of pair i grows linearly with the position, m θ_i", hint=_POSITIONS, shows=_rope("power")),
    Mistake("no_outer", "the positions (T,) and the frequencies θ (d/2,) do not broadcast: the angles are a (T, d/2) "
            "table, one angle per position and pair", hint=_POSITIONS + " (an outer product)",
            shows=_broken("no_outer")),
    Mistake("halves_not_d", "x is not split into halves of d/2 = {half} features, or θ has not d/2 values: d is the "
            "head's size, the LAST axis of x (the one before it is T, the number of positions)", hint="d = x.size(-1)",
            shows=_broken("d_from_T")),
    Mistake("angles_meet_d", "the angles and the features do not line up ({d} and {half} met): cos and sin have one "
            "column per PAIR, d/2 = {half} (θ_i for i = 0 .. d/2-1), and each half of x, split along the LAST axis, "
            "has d/2 features too", hint=_THETA + "; " + _HALVES, shows=_broken("theta_d")),
    Mistake("dtype_changed", "x is float64 and your rotated x is {dtype}: the rotated x comes back in x's own dtype, "
            "so that a model in float64 or bfloat16 gets its dtype back",
            hint="compute in float32 if you like, then .to(x.dtype)",
            shows=lambda x, positions, base=10000.0: ref_apply_rope(x.float(), positions, base)),
)
VALUE_KEYS = [m.key for m in M if isinstance(m.shows, functools.partial) and m.shows.keywords["kind"] == m.key]


def crashes(T, d):
    """The crashes of apply_rope's typical slips, for x (..., T, d), named where the sizes single the slip out."""
    def sizes(match):
        got = {int(match["a"]), int(match["b"])}
        if got == {T, d // 2} and T != d // 2:
            return M.no_outer
        if len(got) == 2 and (sum(got) == d or d // 2 in got and (got - {d // 2}).pop() == T // 2):
            return M.halves_not_d.at(half=d // 2)
        if got == {d // 2, d}:
            return M.angles_meet_d.at(d=d, half=d // 2)
        return None
    return [(BROADCAST, sizes)]


def rope_frequencies(ev, answer, d, base):
    """M.frequencies when `answer` turns each pair (x_i, x_{i+d/2}) in its own plane, but by another angle per
    position than θ_i = base^(-2i/d) (read off unit vectors e_i at position 1), else None."""
    half = d // 2
    out = call_naming(ev, crashes(half, d), answer, torch.eye(d)[:half], torch.ones(half, dtype=torch.long), base)
    if not hasattr(out, "shape") or tuple(out.shape) != (half, d):
        return None
    out, i = torch.as_tensor(to_numpy(out)).double(), torch.arange(half)
    cos, sin = out[i, i], out[i, i + half]
    rest = out.clone()
    rest[i, i], rest[i, i + half] = 0.0, 0.0
    if rest.abs().max() > 1e-4 or not torch.allclose(cos ** 2 + sin ** 2, torch.ones(half).double(), atol=1e-4):
        return None                                            # not a rotation of each pair: another slip
    got, want = torch.atan2(sin, cos), base ** (-2 * i.double() / d)
    if torch.allclose(got, want, atol=1e-4):
        return None

    def shown(t):
        return ", ".join(f"{v:.4g}" for v in t[:4].tolist()) + (", ..." if half > 4 else "")
    return M.frequencies.at(d=d, base=base, want=shown(want), got=shown(got))


def relative(ev, answer):
    """M.not_relative when q_m · k_n, for m - n = 3 at three places, is not one number, else None."""
    g = ev.rng(7)
    q, k = randn(g, 1, 8), randn(g, 1, 8)
    dots = []
    for m, n in ((5, 2), (13, 10), (3, 0)):
        qm = torch.as_tensor(to_numpy(call_naming(ev, crashes(1, 8), answer, q, torch.tensor([m]), 10000.0)))
        kn = torch.as_tensor(to_numpy(call_naming(ev, crashes(1, 8), answer, k, torch.tensor([n]), 10000.0)))
        dots.append(float((qm * kn).sum()))
    if np.allclose(dots, dots[0], atol=1e-4):
        return None
    return M.not_relative.at(dots=", ".join(f"{x:.4f}" for x in dots))


def _rotate_half(x, positions, base=10000.0):
    """The rotate-half form: x cos + rotate_half(x) sin, the angles repeated over both halves."""
    d = x.shape[-1]
    freqs = torch.outer(positions.float(), 1.0 / base ** (torch.arange(0, d, 2).float() / d))
    emb = torch.cat([freqs, freqs], -1)
    return x * emb.cos() + torch.cat([-x[..., d // 2:], x[..., :d // 2]], -1) * emb.sin()


@exercise("rotary position embedding (RoPE)", reference=ref_apply_rope, mistakes=M,
          right=[_rotate_half, lambda x, positions, base=10000.0: rope_complex(x, positions, base).to(x.dtype)])
@single_threaded
def apply_rope(ev: Evaluation, answer):
    """answer(x (..., T, d), positions (T,), base) -> x rotated: pair (x_i, x_{i+d/2}) by angle positions[t] θ_i."""
    tests = 0
    for seed, (shape, base) in enumerate([((2, 3, 5, 8), 10000.0), ((4, 6), 10000.0), ((1, 2, 7, 12), 500.0)]):
        g = ev.rng(seed)
        x = randn(g, *shape)
        T = shape[-2]
        positions = torch.as_tensor(g.permutation(np.arange(3, 3 + 2 * T))[:T])   # any positions, any order
        got = call_naming(ev, crashes(T, shape[-1]), answer, x, positions, base)
        expect_shape(got, tuple(shape), "the rotated x")
        expected = rope_complex(x, positions, base)
        mistakes = M.variants(VALUE_KEYS, x, positions, base)
        norms = np.linalg.norm(to_numpy(got).astype(np.float64), axis=-1)
        if not any(np.allclose(to_numpy(got), to_numpy(m), atol=1e-4) for m in mistakes.values()):
            expect(np.allclose(norms, np.linalg.norm(to_numpy(x).astype(np.float64), axis=-1), atol=1e-4),
                   M.norm_changed)
        with explained(functools.partial(rope_frequencies, ev, answer, shape[-1], base),
                       functools.partial(relative, ev, answer)):
            ev.expect_close(got, expected, f"the rotated x (shape {shape}, base {base})", mistakes=mistakes,
                            atol=1e-4, rtol=1e-4)
        tests += 1
    x, positions = randn(ev.rng(8), 2, 5, 8).double(), torch.arange(5)     # x in float64 keeps its dtype
    got = call_naming(ev, crashes(5, 8), answer, x, positions, 10000.0)
    expect_shape(got, (2, 5, 8), "the rotated x (float64)")
    dtype = getattr(got, "dtype", type(got).__name__)              # (to_numpy gives float32)
    expect(str(dtype) in ("torch.float64", "float64"), M.dtype_changed.at(dtype=dtype))
    ev.expect_close(got, rope_complex(x, positions, 10000.0), "the rotated x (float64)", atol=1e-4, rtol=1e-4)
    return tests + 1
