"""Lesson 14, exercise 3: a key/value cache that keeps the attention sinks.

    keep_sinks_and_window(k (B, h, t, d_head), v (B, h, t, d_head), sinks, window) -> (k, v): the first `sinks`
        positions followed by the last `window` (positions are axis -2); unchanged when t <= sinks + window

The check cuts seven caches: the first has a different size on every axis (B = 3, h = 5, t = 17, d_head = 7, each
larger than sinks + window), so that a cut along any other axis shows in that axis's size; then plain windows,
sinks wider than the heads axis, caches with nothing to evict, a window of one. Key i holds about i, so that the
check can read which positions an answer kept (cache_positions.py). The lesson's typical cuts are named by their
values, each computed by running its own wrong answer below; where none matches, the check names what the answer
holds: an axis other than the positions that changed size, every position kept, rows of the other tensor, rows
that are no cached row, or the positions kept, against the ones the cache keeps.
"""
import functools

import torch

from ... import attention_sinks as ref
from ..core import Mistake, Mistakes, exercise, expect, expect_returns, randn, single_threaded
from ..evaluation import Evaluation, call_naming
from ..mistakes import GENERIC, Said
from ..torch_errors import CAT, STACK
from . import cache_positions as cache
from .properties import by_property, ranges


def _cut(x, sinks, window, kind):
    """x's positions (axis -2) cut with the mistake `kind`; unchanged when t <= sinks + window, except where
    the kind is that case's mistake."""
    t = x.size(-2)
    first = x[..., :sinks, :]
    last = lambda n: x[..., max(t - n, 0):, :]                                         # noqa: E731
    if t <= sinks + window and kind not in ("no_eviction_case",):
        return x
    return {"plain": lambda: last(window), "plain_total": lambda: last(sinks + window),
            "short": lambda: torch.cat([first, last(window - 1)], -2),
            "long": lambda: torch.cat([first, last(window + 1)], -2),
            "minus_sinks": lambda: torch.cat([first, last(window - sinks)], -2),
            "sinks_after": lambda: torch.cat([last(window), first], -2),
            "oldest": lambda: x[..., :sinks + window, :],
            "no_eviction_case": lambda: torch.cat([first, last(window)], -2),
            "ends_early": lambda: torch.cat([first, x[..., t - window - 1:t - 1, :]], -2),
            }[kind]()


def cut(k, v, sinks, window, kind):
    """keep_sinks_and_window with the mistake `kind` (see _cut), the same for k and v."""
    return _cut(k, sinks, window, kind), _cut(v, sinks, window, kind)


def _wrong(kind):
    return functools.partial(cut, kind=kind)


def _heads_axis(k, v, sinks, window):
    """The cut made along the heads axis (axis 1), t read from the positions axis."""
    t = k.size(-2)
    if t <= sinks + window:
        return k, v
    return tuple(torch.cat([x[:, :sinks], x[:, t - window:]], dim=1) for x in (k, v))


def _joined_along_features(k, v, sinks, window):
    t = k.size(-2)
    if t <= sinks + window:
        return k, v
    return tuple(torch.cat([x[..., :sinks, :], x[..., t - window:, :]], dim=-1) for x in (k, v))


def _stacked(k, v, sinks, window):
    t = k.size(-2)
    if t <= sinks + window:
        return k, v
    return tuple(torch.stack([x[..., :sinks, :], x[..., t - window:, :]], dim=-2) for x in (k, v))


def _values_from_keys(k, v, sinks, window):
    return ref.keep_sinks_and_window(k, k, sinks, window)


def _values_not_cut(k, v, sinks, window):
    return ref.keep_sinks_and_window(k, v, sinks, window)[0], v


def _zeros_for_the_sinks(k, v, sinks, window):
    """A new cache of zeros whose window is filled in, its sinks forgotten."""
    t = k.size(-2)
    if t <= sinks + window:
        return k, v
    out = [x.new_zeros(*x.shape[:-2], sinks + window, x.size(-1)) for x in (k, v)]
    for o, x in zip(out, (k, v)):
        o[..., sinks:, :] = x[..., t - window:, :]
    return tuple(out)


M = Mistakes(
    Mistake("plain", "the first positions (the sinks) are gone: this is a plain sliding window; the cache keeps the "
            "first `sinks` positions AND the last `window`", shows=_wrong("plain")),
    Mistake("plain_total", "the first positions (the sinks) are gone: the cache holds the last sinks + window "
            "positions; it keeps the first `sinks` and the last `window`", shows=_wrong("plain_total")),
    Mistake("window_short", "the window is one position short: the cache keeps the LAST `window` positions, "
            "t - window .. t - 1", shows=_wrong("short")),
    Mistake("window_long", "the window is one position too long: the cache keeps the last `window` positions, "
            "t - window .. t - 1", shows=_wrong("long")),
    Mistake("window_minus_sinks", "the window holds window - sinks positions, as if `window` counted the sinks too: "
            "the cache keeps `sinks` positions AND `window` recent ones, sinks + window in all",
            shows=_wrong("minus_sinks")),
    Mistake("sinks_after", "the sinks come after the window: the positions stay in their order, the sinks first "
            "(the cache's positions 0 .. sinks-1), then the window", shows=_wrong("sinks_after")),
    Mistake("oldest", "the OLDEST positions are kept: the window is the last `window` positions, the newest ones",
            shows=_wrong("oldest")),
    Mistake("no_eviction_case", "positions repeated: when the cache holds no more than sinks + window positions "
            "nothing is evicted; it comes back unchanged", shows=_wrong("no_eviction_case")),
    Mistake("not_cut", "{what} come back with all {t} positions, although t = {t} > sinks + window = {n}: the "
            "cache keeps only the first sinks and the last window positions, the same ones for k and v",
            shows=_values_not_cut),
    Mistake("other", "{what} hold rows of {other} (rows {rows} of the result): k and v are each cut from "
            "themselves, the same positions from both", shows=_values_from_keys),
    Mistake("cut_axis", "{what} come back with shape {got} from a cache of shape {cache}: the {axes} changed "
            "size, where only the positions (axis 2 of (B, heads, t, d_head)) may be cut", shows=_heads_axis),
    Mistake("cat_axis", "the two parts are joined along axis {axis} (the {name}): the sinks and the window are "
            "positions, joined along axis 2 of (B, heads, t, d_head)", hint="torch.cat([...], dim=-2)",
            shows=_joined_along_features),
    Mistake("stacked", "the sinks and the window are stacked on a new axis, which needs parts of one size: they are "
            "positions of one cache, joined end to end along the positions (axis 2 of (B, heads, t, d_head))",
            hint="torch.cat([...], dim=-2)", shows=_stacked),
    Mistake("not_rows", "rows {rows} of {what} are none of the cached positions: the cache keeps rows of k and v "
            "as they are, only fewer of them", shows=_zeros_for_the_sinks),
    Mistake("positions", "{what} hold the positions {got} of the cache; it keeps {want}: the first sinks and the "
            "last window positions, in that order (every one when t <= sinks + window)", shows=_wrong("ends_early")),
)
_BY_VALUES = ["plain", "plain_total", "window_short", "window_long", "window_minus_sinks", "sinks_after", "oldest",
              "no_eviction_case"]
# t, sinks, window (and the sizes of the other axes: B, h, d_head)
CASES = [(17, 2, 6, (3, 5, 7)), (20, 4, 8, (2, 3, 5)), (15, 0, 6, (2, 3, 5)), (13, 2, 10, (2, 3, 5)),
         (10, 4, 8, (2, 3, 5)), (12, 4, 8, (2, 3, 5)), (9, 3, 1, (2, 3, 5)), (7, 2, 8, (2, 3, 5))]


def _crashes(x):
    """The crashes of the typical slips (evaluation.call_naming's errors), for x (B, h, t, d)."""
    def axis(match):
        dim = int(match["dim"]) % x.dim()
        return M.cat_axis.at(axis=dim, name=cache.AXES[dim]) if dim != x.dim() - 2 else None
    return [(CAT, axis), (STACK, M.stacked)]


def _held(got, x, other, what, other_name, t, s, w):
    """A probe: what the answer's `got` holds, against the cache x (B, h, t, d) cut to its first s and last w."""
    def probe():
        if got.dim() != x.dim() or cache.changed_axes(got, x):
            return None
        found = cache.rows(got, x)
        if t > s + w and found == list(range(t)):
            return M.not_cut.at(what=what, t=t, n=s + w)
        missing = [i for i, j in enumerate(found) if j is None]
        from_other = [i for i, j in enumerate(cache.rows(got, other)) if j is not None and found[i] is None]
        if from_other:
            return M.other.at(what=what, other=other_name, rows=ranges(from_other))
        if missing:
            return M.not_rows.at(what=what, rows=ranges(missing))
        return M.positions.at(what=what, got=ranges(found, sort=False), want=ranges(cache.kept(t, s, w), sort=False))
    return probe


def _right_with_an_index(k, v, sinks, window):
    t = k.size(-2)
    if t <= sinks + window:
        return k, v
    keep = torch.cat([torch.arange(sinks), torch.arange(t - window, t)])
    return k[..., keep, :], v[..., keep, :]


@exercise("a key/value cache that keeps the attention sinks", name="keep_sinks_and_window",
          reference=ref.keep_sinks_and_window, mistakes=M, right=[_right_with_an_index])
@single_threaded
def keep_sinks_and_window(ev: Evaluation, answer):
    """answer(k, v (B, h, t, d), sinks, window) -> (k, v): the first `sinks` positions and the last `window`."""
    tests = 0
    for seed, (t, s, w, (B, h, d)) in enumerate(CASES):
        g = ev.rng(seed)
        k = torch.arange(t, dtype=torch.float32)[:, None] + 0.01 * randn(g, B, h, t, d)   # key i holds about i
        v = randn(g, B, h, t, d)
        want = ref.keep_sinks_and_window(k, v, s, w)
        got = expect_returns(call_naming(ev, _crashes(k), answer, k, v, s, w), want, ("k", "v"))
        variants = M.variants(_BY_VALUES, k, v, s, w)
        for i, (x, other, name, other_name) in enumerate(((k, v, "the keys k", "the values v"),
                                                          (v, k, "the values v", "the keys k"))):
            what = f"{name} (t = {t}, sinks = {s}, window = {w})"
            expect(cache.tensor(got[i]), Said("not_array", f"{name} should be a tensor, got {type(got[i]).__name__}."))
            axes = cache.changed_axes(got[i], x) if got[i].dim() == x.dim() else []
            expect(not axes, M.cut_axis.at(what=name, got=tuple(got[i].shape), cache=tuple(x.shape),
                                           axes=" and ".join(f"{n} (axis {a}: {g}, not {c})" for a, n, g, c in axes)))
            with by_property(_held(got[i], x, other, what, other_name, t, s, w), keys=set(GENERIC)):
                ev.expect_close(got[i], want[i], what, mistakes={m: r[i] for m, r in variants.items()})
        tests += 1
    return tests
