"""Lesson 07, exercise 4: the sliding-window mask.

    sliding_window_mask(T, left, right=0) -> (T, T) bool, True where query t may attend to key j: t-left <= j <= t+right

The check draws no random input. Its first window has left != right, both >= 2, so that every mistake below gives
another band; then a window seeing more of the future than of the past, a causal window, a symmetric one, one wider
than T, and T = 1.
"""
import torch

from ... import masks
from ..core import Mistake, Mistakes, exercise, single_threaded
from ..evaluation import Evaluation
from .masks import as_float, expect_bool_tensor, not_bool, not_tensor


def _band(T, low, high, strict_low=False, strict_high=False):
    """(T, T) bool, True where key j lies in t+low .. t+high for query t (row t); strict_*: that end left out."""
    t, j = torch.arange(T)[:, None], torch.arange(T)[None, :]
    above = j > t + low if strict_low else j >= t + low
    below = j < t + high if strict_high else j <= t + high
    return above & below


def _sliced(T, left, right=0):
    """The window written row by row as mask[t, t-left : t+right+1] = True, the start not clipped at 0."""
    mask = torch.zeros(T, T, dtype=torch.bool)
    for t in range(T):
        mask[t, t - left:t + right + 1] = True
    return mask


def _by_difference(T, left, right=0):
    """A right answer written another way: from the offset j - t of each key from its query."""
    offset = torch.arange(T)[None, :] - torch.arange(T)[:, None]             # (T, T): j - t
    return (offset >= -left) & (offset <= right)


M = Mistakes(
    not_tensor(shows=lambda T, left, right=0: masks.sliding_window_mask(T, left, right).numpy()),
    not_bool(shows=lambda T, left, right=0: masks.sliding_window_mask(T, left, right).float()),
    Mistake("hides_all", "the mask hides every key, so no query sees anything: the window runs from key t-left, "
            "BEFORE query t, to key t+right, after it (mind the signs)",
            shows=lambda T, left, right=0: torch.zeros(T, T, dtype=torch.bool)),
    Mistake("mirrored", "the window is mirrored (left and right swapped, or the mask transposed): row t is query t, "
            "`left` counts the keys BEFORE it (t-left .. t-1) and `right` the keys after it",
            shows=lambda T, left, right=0: _band(T, -right, left)),
    Mistake("symmetric", "the window is symmetric, |t - j| <= left: after query t it must stop at t+right (right=0: "
            "no key after t, a causal window)", shows=lambda T, left, right=0: _band(T, -left, left)),
    Mistake("no_future", "the keys after query t are missing: `right` counts the keys after t that it may see, up to "
            "t+right", shows=lambda T, left, right=0: _band(T, -left, 0)),
    Mistake("both_ends", "both ends of the window are missing: keys t-left and t+right are visible too (<=, not <)",
            shows=lambda T, left, right=0: _band(T, -left, right, strict_low=True, strict_high=True)),
    Mistake("first_key", "the first key of the window is missing: key t-left is visible too (t-left <= j, not <)",
            shows=lambda T, left, right=0: _band(T, -left, right, strict_low=True)),
    Mistake("last_key", "the last key of the window is missing: key t+right is visible too (j <= t+right, not <)",
            shows=lambda T, left, right=0: _band(T, -left, right, strict_high=True)),
    Mistake("too_wide", "the window is one key too wide on each side: query t sees keys t-left .. t+right, left + "
            "right + 1 keys in all", shows=lambda T, left, right=0: _band(T, -left - 1, right + 1)),
    Mistake("inverted", "the mask is inverted: True = may attend, so it is True INSIDE the window and False outside",
            shows=lambda T, left, right=0: ~_band(T, -left, right)),
    Mistake("hides_nothing", "the mask is all True, so it hides nothing: query t must not see keys before t-left or "
            "after t+right", shows=lambda T, left, right=0: torch.ones(T, T, dtype=torch.bool)),
    Mistake("no_diagonal", "the diagonal is masked: query t may always attend to itself, key t",
            shows=lambda T, left, right=0: _band(T, -left, right) & ~torch.eye(T, dtype=torch.bool)),
    Mistake("negative_start", "the first rows are wrong: for t < left the slice starts at t - left < 0, and a "
            "negative start counts from the END (the slice is empty or wraps round)",
            hint="start the slice at max(t - left, 0)", shows=_sliced),
)


@exercise("sliding-window mask", reference=masks.sliding_window_mask, mistakes=M, random=False,
          right=[_by_difference])
@single_threaded
def sliding_window_mask(ev: Evaluation, answer):
    """answer(T, left, right=0) -> (T, T) bool, True where query t may attend to key j: t-left <= j <= t+right."""
    tests = 0
    for T, left, right in ((8, 3, 2), (6, 1, 3), (7, 2, 0), (5, 1, 1), (4, 6, 5), (1, 0, 0)):
        what = f"sliding_window_mask({T}, left={left}, right={right})"
        mask = ev.call(answer, T, left, right)
        expect_bool_tensor(mask, what, (T, T), M)
        ev.expect_close(as_float(mask), as_float(masks.sliding_window_mask(T, left, right)), what,
                        mistakes=M.variants([m for m in M if m.key not in ("not_tensor", "not_bool")], T, left, right,
                                            pick=as_float))
        tests += 1
    return tests
