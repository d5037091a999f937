"""Lesson 13, exercise 1b: merging the softmax statistics of two parts of a row.

    merge_softmax_stats(m1 (R,), l1 (R,), m2 (R,), l2 (R,)) -> (m (R,), l (R,))

m = max(m1, m2), l = l1·e^(m1 − m) + l2·e^(m2 − m); an empty part has m = −∞, l = 0, and two empty parts give
(−∞, 0), no NaN. The check splits seven rows of 9 entries at every point (random; its first 5 entries −∞; some −∞
entries; −∞ everywhere; sorted both ways, so that at every split one part holds the maximum and the other does not;
a row below 0, where only −∞ may be moved by the safe maximum), the splits with an empty part last, and compares
m and l with those of the whole row.
"""
import functools
import math

import numpy as np
import torch

from ... import efficient_attention as ref
from ..core import Mistake, Mistakes, exercise, expect, expect_returns, expect_shape, randn, single_threaded, to_numpy
from ..evaluation import Evaluation, call_naming
from ..expectations import explained
from ..torch_errors import BROADCAST
from .crashes import naming_crashes
from .naming import Forms, by_values, same
from .softmax_stats import NEG_INF, safe, stats


def merge(m1, l1, m2, l2, kind="ok"):
    """The merge, right or with one typical mistake."""
    m = torch.maximum(m1, m2)
    ms = m if kind == "no_guard" else m.clamp(min=0.0) if kind == "clamp_safe" else safe(m)
    if kind == "no_rescale":
        return m, l1 + l2
    if kind == "flipped":
        return m, l1 * torch.exp(m - m1) + l2 * torch.exp(m - m2)
    if kind == "flipped_safe":
        return m, l1 * torch.exp(ms - safe(m1)) + l2 * torch.exp(ms - safe(m2))
    if kind == "first_max":
        return m1, l1 + l2 * torch.exp(m2 - safe(m1))
    if kind == "one_rescaled":                         # l2 added as it is
        return m, l1 * torch.exp(m1 - ms) + l2
    if kind == "other_rescaled":                       # l1 added as it is
        return m, l1 + l2 * torch.exp(m2 - ms)
    if kind == "to_min":                               # both moved to the SMALLER maximum
        low = safe(torch.minimum(m1, m2))
        return m, l1 * torch.exp(m1 - low) + l2 * torch.exp(m2 - low)
    if kind == "from_m1":                              # l2 moved to m1 (not to m), l1 kept as it is
        return m, l1 + l2 * torch.exp(m2 - safe(m1))
    if kind == "from_m2":                              # l1 moved to m2 (not to m), l2 kept as it is
        return m, l1 * torch.exp(m1 - safe(m2)) + l2
    if kind == "lse":                                  # the merged log-sum-exp returned in place of l
        return m, torch.logaddexp(m1 + torch.log(l1), m2 + torch.log(l2))
    if kind == "l1_twice":                             # copy-paste: l1 in both terms
        return m, l1 * torch.exp(m1 - ms) + l1 * torch.exp(m2 - ms)
    if kind == "product":
        return m, (l1 * torch.exp(m1 - ms)) * (l2 * torch.exp(m2 - ms))
    if kind in ("same_factor_m1", "same_factor_m2"):   # copy-paste: one part's factor used for both
        factor = torch.exp((m1 if kind == "same_factor_m1" else m2) - ms)
        return m, l1 * factor + l2 * factor
    if kind == "safe_in_m":                            # the safe maximum written into m itself
        return ms, l1 * torch.exp(m1 - ms) + l2 * torch.exp(m2 - ms)
    if kind == "one_empty":                            # the safe maximum tests m1, not m
        shift = torch.where(torch.isneginf(m1), 0.0, m)
        return m, l1 * torch.exp(m1 - shift) + l2 * torch.exp(m2 - shift)
    if kind == "half_flipped":                         # the second factor's exponent flipped: 0·e^(+∞) where l2 = 0
        return m, l1 * torch.exp(m1 - ms) + l2 * torch.exp(ms - m2)
    if kind == "stacked":                              # the two parts stacked (2, R), reduced over the rows
        both = torch.stack([m1, m2])
        m = both.amax(dim=-1)
        return m, l1 * torch.exp(m1 - safe(m)) + l2 * torch.exp(m2 - safe(m))
    return m, l1 * torch.exp(m1 - ms) + l2 * torch.exp(m2 - ms)


FORMS = Forms(merge, flipped=["flipped", "flipped_safe"], one_rescaled=["one_rescaled", "other_rescaled"],
              from_other=["from_m1", "from_m2"], same_factor=["same_factor_m1", "same_factor_m2"])


def _python_max(m1, l1, m2, l2):
    m = max(m1, m2)
    return m, l1 * torch.exp(m1 - safe(m)) + l2 * torch.exp(m2 - safe(m))


def _math_exp(m1, l1, m2, l2):
    m = torch.maximum(m1, m2)
    return m, l1 * math.exp(m1 - safe(m)) + l2 * math.exp(m2 - safe(m))


_COMMON = "l = l1·e^(m1 − m) + l2·e^(m2 − m), with m = max(m1, m2)"
_SAFE = "torch.where(torch.isneginf(m), 0.0, m)"
M = Mistakes(
    Mistake("first_max", "m is the maximum of ONE part: the merged maximum is the larger of the two, max(m1, m2), "
            "row by row", hint="torch.maximum(m1, m2)", shows=FORMS.shows("first_max")),
    Mistake("max_rows", "m is not max(m1, m2) in {rows}: the merged maximum is the larger of the two parts' maxima "
            "(−∞ where both parts are empty)", hint="torch.maximum(m1, m2), element by element",
            shows=FORMS.shows("safe_in_m")),
    Mistake("no_rescale", "l = l1 + l2 adds normalisers measured from different maxima: each moves to the common "
            "maximum first, " + _COMMON, shows=FORMS.shows("no_rescale")),
    Mistake("flipped", "the normalisers are rescaled by e^(m − m1) and e^(m − m2): the factors are e^(m1 − m) and "
            "e^(m2 − m), both ≤ 1", shows=FORMS.shows("flipped")),
    Mistake("one_rescaled", "only one of the two normalisers is rescaled: both were measured from their own maximum, "
            "so both move to the common one, " + _COMMON, shows=FORMS.shows("one_rescaled")),
    Mistake("to_min", "the normalisers are moved to the SMALLER maximum, min(m1, m2): the common maximum is the "
            "larger, and both move to it (factors ≤ 1), " + _COMMON, shows=FORMS.shows("to_min")),
    Mistake("from_other", "one normaliser is moved to the OTHER part's maximum, l2·e^(m2 − m1) (or l1·e^(m1 − m2)), "
            "not to the merged one: where the other maximum is the smaller, that factor exceeds 1 and the other "
            "normaliser is never rescaled; both move to m, " + _COMMON, shows=FORMS.shows("from_other")),
    Mistake("same_factor", "both normalisers are rescaled by the same factor (e^(m1 − m) for both, or e^(m2 − m): a "
            "copy-paste?): each moves from its OWN maximum, " + _COMMON, shows=FORMS.shows("same_factor")),
    Mistake("l1_twice", "l1 appears in both terms (a copy-paste?): the second term holds the second part's "
            "normaliser l2, " + _COMMON, shows=FORMS.shows("l1_twice")),
    Mistake("product", "the two rescaled normalisers are multiplied: they are sums of exponentials over two parts of "
            "a row, so they ADD, " + _COMMON, shows=FORMS.shows("product")),
    Mistake("lse", "l is the merged log-sum-exp, m + log l: the exercise returns the normaliser itself, " + _COMMON,
            shows=FORMS.shows("lse")),
    Mistake("clamp_safe", "l is measured from max(m, 0), not from m, in the row whose maximum is negative: the safe "
            "maximum replaces only −∞ by 0 (moving every negative maximum up to 0 shifts that row too)",
            hint=_SAFE + ", not m.clamp(min=0)", shows=FORMS.shows("clamp_safe")),
    Mistake("no_guard", "l is NaN where both parts are empty (m1 = m2 = −∞): there m = −∞, and exp(−∞ − (−∞)) is NaN; "
            "a 'safe' maximum, 0 where m = −∞, gives exp(−∞ − 0) = 0, so that two empty parts give l = 0",
            hint="shift = " + _SAFE + "; l1 * exp(m1 - shift) + l2 * exp(m2 - shift)",
            shows=FORMS.shows("no_guard")),
    Mistake("nan_rows", "l is NaN in {rows}: a normaliser is a sum of exponentials, never NaN; NaN comes from "
            "exp(−∞ − (−∞)) where the merged maximum is −∞ (a safe maximum, 0 there, avoids it) or from 0·∞",
            hint="shift = " + _SAFE, shows=FORMS.shows("half_flipped")),
    Mistake("one_empty", "l is wrong only where one part is empty (m = −∞, l = 0): merging with an empty part gives "
            "the other part back unchanged; the common maximum is then the other part's m, and only where BOTH are "
            "−∞ does the safe maximum replace it by 0", shows=FORMS.shows("one_empty")),
    Mistake("stacked", "a merged statistic has 2 values, one per PART, where it needs one per row: with the two "
            "parts stacked, the parts are the first axis and the rows the second, and the maximum runs over the "
            "parts", hint="torch.stack([m1, m2]).amax(dim=0), or torch.maximum(m1, m2)",
            shows=FORMS.shows("stacked")),
    Mistake("python_max", "Python's max() compared whole tensors of several values: the maximum is taken element by "
            "element, one per row", hint="torch.maximum(m1, m2)", shows=_python_max),
    Mistake("math_function", "a function of Python's math module got a tensor of several values: it takes ONE "
            "number; torch's functions work element by element", hint="torch.exp, not math.exp", shows=_math_exp),
)
_L_KEYS = ("no_rescale", "flipped", "no_guard", "one_rescaled", "to_min", "from_other", "same_factor", "lse",
           "product", "l1_twice", "clamp_safe")
ROWS = ("random", "its first 5 entries −∞", "with −∞ entries", "−∞ everywhere", "sorted in descending order",
        "sorted in ascending order", "below 0")


def _rows(wrong):
    return "; ".join(f"row {r} ({ROWS[r]})" for r in wrong) if len(wrong) < len(ROWS) else "every row"


def _wrong_rows(got, expected):
    g, e = to_numpy(got).astype(np.float64), to_numpy(expected).astype(np.float64)
    return np.flatnonzero(~np.isclose(g, e, atol=1e-5, rtol=1e-4, equal_nan=True)).tolist()


def _max_rows(got, expected):
    return M.max_rows.at(rows=_rows(_wrong_rows(got, expected)))


def _one_empty(got, expected, m1, m2):
    """M.one_empty when only rows with ONE part empty (m = −∞, l = 0) are wrong; else None."""
    wrong = ~np.isclose(to_numpy(got), to_numpy(expected), atol=1e-5, rtol=1e-4)
    one_empty = np.isneginf(to_numpy(m1)) != np.isneginf(to_numpy(m2))
    return M.one_empty if wrong.any() and not (wrong & ~one_empty).any() else None


def _logaddexp(m1, l1, m2, l2):
    """A right answer: the merged log-sum-exp, l = exp(lse − m), its NaN (two empty parts) cleaned."""
    m = torch.maximum(m1, m2)
    return m, torch.nan_to_num(torch.exp(torch.logaddexp(m1 + torch.log(l1), m2 + torch.log(l2)) - m))


@exercise("merging two partial softmax statistics", name="merge_softmax_stats", reference=ref.merge_softmax_stats,
          mistakes=M, right=[_logaddexp])
@single_threaded
@naming_crashes(M)
def merge_softmax_stats(ev: Evaluation, answer):
    """answer(m1, l1, m2, l2) -> (m, l) of the whole row, for every split point of some rows."""
    g = ev.rng(20)
    x = randn(g, 4, 9, scale=3.0)
    x[1, :5] = NEG_INF                               # a left part (up to split 5) with nothing in it
    x[2, torch.as_tensor(g.random(9) < 0.5)] = NEG_INF
    x[3] = NEG_INF                                   # both parts empty
    # the row's maximum first, then last: at every split one part holds the maximum and the other does not; a row
    # below 0 last (the safe maximum moves −∞ only)
    x = torch.cat([x, x[:1].sort(-1, descending=True).values, x[:1].sort(-1).values, -x[:1].abs() - 1])
    m_true, l_true = stats(x)
    (R, n), tests = x.shape, 0
    empty = (torch.full((R,), NEG_INF), torch.zeros(R))
    # the splits with an empty part (0 and n) last: a slip that shows only there (a guard) is told from the others
    for split in sorted(range(n + 1), key=lambda split: split in (0, n)):
        m1, l1 = stats(x[:, :split]) if split else empty
        m2, l2 = stats(x[:, split:]) if split < n else empty
        crashes = [(BROADCAST, lambda found: M.stacked if "2" in (found["a"], found["b"]) else None)]
        m, ell = expect_returns(call_naming(ev, crashes, answer, m1, l1, m2, l2), (m_true, l_true), ("m", "l"))
        expect_shape(m, (R,), "m")
        expect_shape(ell, (R,), "l")
        inputs, what = (m1, l1, m2, l2), f"(split after {split} of {n} entries)"
        by_values(m, m_true, M, FORMS.values(["first_max"], *inputs, pick=lambda r: r[0]), f"m {what}")
        expect(not (same(m, m1) or same(m, m2)) or same(m, m_true), M.first_max)
        with explained(functools.partial(_max_rows, m, m_true)):
            ev.expect_close(m, m_true, f"m {what}")
        by_values(ell, l_true, M, FORMS.values(_L_KEYS, *inputs, pick=lambda r: r[1]), f"l {what}")
        nan = np.flatnonzero(np.isnan(to_numpy(ell))).tolist()
        expect(not nan, M.nan_rows.at(rows=_rows(nan)))
        with explained(functools.partial(_one_empty, ell, l_true, m1, m2)):
            ev.expect_close(ell, l_true, f"l {what}")
        tests += 1
    return tests
