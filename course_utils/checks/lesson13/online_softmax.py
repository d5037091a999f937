"""Lesson 13, exercise 1a: the online softmax.

    online_softmax(blocks) -> (m (R,), l (R,))

`blocks` hands out the blocks of columns (R, b) of R rows one at a time and once; in ONE loop the answer keeps m,
the running maximum of each row, and l = Σ exp(x − m), rescaled by e^(m_old − m_new) when a block raises the
maximum. A row of −∞ only gives m = −∞, l = 0 (no NaN).

The check tests the point first, as a property (stream.py): over 64 blocks, what the answer keeps must not grow
with the number of blocks, and a second pass over the blocks is refused. Then it compares m and l with the whole
rows' maximum and normaliser for block sizes from 1 to more than n, on six rows (random; ascending, so that the
maximum grows at every block; with −∞ entries and a block of them after finite ones; a first block of −∞ and a
negative maximum; −∞ everywhere; descending, the maximum in the first block), handed out through `column_blocks` (a
block read after its turn is NaN); and on scores around 100, where exp(x) overflows float32. The wrong answers
are in online_softmax_mistakes.py.
"""
import functools
import re

import numpy as np
import torch

from ... import efficient_attention as ref
from ..block_stream import OneAtATime
from ..core import (
    ExerciseError,
    Mistake,
    Mistakes,
    exercise,
    expect,
    expect_returns,
    expect_shape,
    randn,
    single_threaded,
    to_numpy,
)
from ..evaluation import Evaluation
from ..expectations import explained, fail
from .crashes import naming_crashes
from .naming import by_values, same
from .online_softmax_mistakes import (
    FORMS,
    cloned_then_second_pass,
    crashing,
    last_two_maxima,
    m_first_unguarded,
    masked_block_resets,
    one_maximum_per_block,
    one_step_late,
    one_wrong_maximum,
    two_loops,
)
from .softmax_stats import NEG_INF, stats

_RESCALE = "l = l·e^(m_old − m_new) + Σ exp(x_block − m_new)"
_SAFE = "torch.where(torch.isneginf(m_new), 0.0, m_new)"
_NAN = ("exp(−∞ − (−∞)) is NaN where the maximum so far is −∞ (a row of −∞ only, or its first block): a 'safe' "
        "maximum, 0 where it is −∞, gives exp(−∞ − 0) = 0 instead")
_NAN_SOURCES = ("NaN comes from exp(−∞ − (−∞)), where the maximum so far is −∞ (a safe maximum, 0 there, avoids "
                "it), or from 0·∞ (a factor e^(m_new − m_old), which is +∞ while m_old = −∞, or an l started at −∞)")
M = Mistakes(
    # the point of the exercise: one pass, state that does not grow
    Mistake("state_grows", "what your function keeps grows with the number of blocks: it held {numbers} more numbers "
            "after the last {blocks} blocks of {rows} rows than before them, so it keeps something for every block "
            "(the blocks themselves, copies of them, or numbers per block), as a second pass over the row would "
            "need. ONE pass keeps m and l, one number each per row, whatever the number of blocks: it updates them "
            "from each block as it arrives and lets the block go",
            hint="no list, .clone() or torch.cat of the blocks: one `for block in blocks:` loop that "
            "updates m and l and keeps nothing else", shows=cloned_then_second_pass),
    Mistake("two_loops", "your function went over the blocks a second time (a second loop, or a peek before the "
            "loop): the online softmax reads them in ONE pass, updating m and l from each block as it arrives",
            hint="one `for block in blocks:` loop; when a block raises the maximum, rescale l by e^(m_old − m_new)",
            shows=two_loops),
    Mistake("read_after_gone", "m or l came out NaN because a block was read after the next one had arrived (a block "
            "is gone once passed), and your function is right when it may keep every block: it reads a block after "
            "its turn. The online softmax reads each block once, while it is the current one",
            shows=one_step_late),
    # m
    Mistake("max_all", "m is a single number, not one per row: each ROW has its own maximum, over the block's "
            "columns", hint="block.amax(dim=-1)", shows=one_maximum_per_block),
    Mistake("m_not_updated", "m is still its start, a single −∞: it is never updated from the blocks; after each "
            "block m becomes m_new = max(m, max of the block), one value per row", hint="m = m_new at the end of "
            "the loop's body", shows=FORMS.shows("m_not_updated")),
    Mistake("max_wrong_axis", "m has one value per COLUMN of a block: each row's maximum runs over the block's "
            "columns, the last axis", hint="block.amax(dim=-1)", shows=FORMS.shows("max_wrong_axis")),
    Mistake("stale_max", "m is not the running maximum: it is never updated after a block, so each rescaling uses a "
            "stale m; after each block m becomes m_new = max(m, max of the block)", shows=FORMS.shows("stale_max")),
    Mistake("init_zero", "m starts at 0: it starts at −∞ (a row whose entries are all negative has a negative "
            "maximum, and a row with nothing allowed keeps m = −∞)", hint="torch.full(rows, float('-inf'))",
            shows=FORMS.shows("init_zero")),
    Mistake("block_max_only", "m is the maximum of the LAST block only (the running maximum is forgotten): it must "
            "end as the maximum of the whole row, even when that lies in an earlier block, m_new = max(m, max of the "
            "block)", hint="m_new = torch.maximum(m, block.amax(dim=-1))", shows=FORMS.shows("block_max_only")),
    Mistake("forgets_max", "m ends below the row's maximum in the row whose maximum lies in its first block (sorted "
            "in descending order), and is right in the row whose maximum comes last: m forgets the maxima of "
            "earlier blocks; the running maximum carries every block's", hint="m = torch.maximum(m, "
            "block.amax(dim=-1)) at every block", shows=last_two_maxima),
    Mistake("max_row", "m is wrong in row {row} ({holds}): got {got}, expected {expected}; m must end as the maximum "
            "of the row, max(m, max of the block) at every block", shows=one_wrong_maximum),
    Mistake("first_block_only", "m and l are those of the FIRST block only: the function returned after one block "
            "(a return inside the loop?); every block goes through the loop, and the result comes after it",
            shows=FORMS.shows("first_block_only")),
    # l
    Mistake("no_guard", "NaN where a whole block is −∞ (a masked row, or its first block): there m_new = −∞, and "
            + _NAN, hint="shift = " + _SAFE + "; exp(block − shift[..., None])", shows=FORMS.shows("no_guard")),
    Mistake("no_guard_zeroed", "l is NaN where a whole block is −∞ and the NaN is turned into 0 afterwards, which "
            "loses the rest of the row: " + _NAN, hint="shift = " + _SAFE + " inside the loop, no nan_to_num",
            shows=FORMS.shows("no_guard_zeroed")),
    Mistake("nan_rows", "l is NaN in {rows}: a normaliser is a sum of exponentials, never NaN; " + _NAN_SOURCES,
            hint="shift = " + _SAFE + "; l = l * exp(m - shift) + exp(block - shift[..., None]).sum(-1)",
            shows=m_first_unguarded),
    Mistake("no_rescale", "l is too large: when a block raises the maximum, the old normaliser (a sum measured from "
            "the old maximum) must be rescaled, " + _RESCALE, shows=FORMS.shows("no_rescale")),
    Mistake("flipped", "l is rescaled by e^(m_new − m_old): the factor is e^(m_old − m_new) ≤ 1, since the old terms "
            "exp(x − m_old) become exp(x − m_new) = exp(x − m_old)·e^(m_old − m_new)", shows=FORMS.shows("flipped")),
    Mistake("old_max", "l is inf or NaN: the block's terms are measured from the OLD maximum, exp(x − m_old) (−∞ "
            "before the first block); they are measured from the new one, exp(x_block − m_new)",
            shows=FORMS.shows("old_max")),
    Mistake("old_max_safe", "each block's terms are measured from the PREVIOUS maximum, exp(x_block − m_old), while "
            "the old l is rescaled to the new one: both are measured from the maximum after this block, " + _RESCALE,
            shows=FORMS.shows("old_max_safe")),
    Mistake("no_shift", "l is Σ exp(x), not measured from the maximum: l = Σ exp(x − m), rescaled by "
            "e^(m_old − m_new) when the maximum grows (the exp of a large score overflows)",
            shows=FORMS.shows("no_shift")),
    Mistake("overflow", "with scores around 100, l is {what}: exp(x) overflows float32 beyond x ≈ 88, so the maximum "
            "must be subtracted INSIDE the exponential, exp(x − m) (exp(x) / exp(m) overflows first, then divides "
            "inf by inf)", hint="torch.exp(block - shift[..., None]) and torch.exp(m - shift)",
            shows=FORMS.shows("overflow")),
    Mistake("sum_wrong_axis", "l sums the exponentials over the wrong axis: each row's l adds up the block's "
            "COLUMNS, one number per row", hint=".sum(dim=-1)", shows=FORMS.shows("sum_wrong_axis")),
    Mistake("sum_rows_mean", "l adds the same number to every row: the block's terms are summed over ALL its rows "
            "and averaged; each row's l adds up its OWN terms, over the block's columns", hint=".sum(dim=-1)",
            shows=FORMS.shows("sum_rows_mean")),
    Mistake("sum_all", "l adds the same number to every row: every term of the block is summed, all its rows "
            "together; each row's l adds up its OWN terms, over the block's columns",
            hint=".sum(dim=-1), not .sum()", shows=FORMS.shows("sum_all")),
    Mistake("shift_columns", "the running maximum is subtracted along the block's COLUMNS: m_new has one value per "
            "row, and without an axis of its own it lines up with the block's columns",
            hint="exp(block - m_new[..., None])", shows=FORMS.shows("shift_columns")),
    Mistake("block_max", "each block's terms are measured from the block's OWN maximum: they are measured from the "
            "running maximum after this block, the one the old l is rescaled to, " + _RESCALE,
            shows=FORMS.shows("block_max")),
    Mistake("block_max_no_rescale", "l adds sums measured from different maxima: each block's Σ exp(x − max of the "
            "block) is added as it is; every term is measured from the running maximum, " + _RESCALE,
            shows=FORMS.shows("block_max_no_rescale")),
    Mistake("rescale_new", "the factor e^(m_old − m_new) multiplies the NEW block's sum: it belongs to the OLD l, "
            "measured from the old maximum, " + _RESCALE, shows=FORMS.shows("rescale_new")),
    Mistake("clamp_safe", "l is measured from max(m, 0), not from m, in the rows whose maximum is negative: the safe "
            "maximum replaces only −∞ by 0 (moving every negative maximum up to 0 shifts those rows too)",
            hint=_SAFE + ", not m_new.clamp(min=0)", shows=FORMS.shows("clamp_safe")),
    Mistake("safe_block", "the safe maximum tests the BLOCK's maximum, not m_new: after finite blocks, a block of −∞ "
            "has m_new finite, and your l is measured from 0 there", hint=_SAFE, shows=FORMS.shows("safe_block")),
    Mistake("safe_old", "the safe maximum tests the OLD m (−∞ before the first block), so the first block is "
            "measured from 0: it tests the new maximum, m_new", hint=_SAFE, shows=FORMS.shows("safe_old")),
    Mistake("lse", "l is the log-sum-exp m + log l: the exercise returns the normaliser itself, l = Σ exp(x − m) "
            "(0 for a row of −∞ only); the log-sum-exp L = m + log l is what the tiled forward pass returns later",
            shows=FORMS.shows("lse")),
    Mistake("masked_blocks", "l is wrong only in the rows that hold a whole block of −∞ (row 2 ends with one, row 3 "
            "starts with one): such a block adds nothing to the row, and leaves m and l as they were (its terms are "
            "0; measured from the running maximum, made safe only where that maximum is −∞)", hint=_SAFE,
            shows=masked_block_resets),
    Mistake("empty_row", "l is wrong only in the row that is −∞ everywhere: that row ends with m = −∞ and l = 0 (a "
            "sum of nothing), no NaN", shows=FORMS.shows("empty_row_one")),
    # crashes of typical slips (torch's words, torch_errors.py)
    Mistake("max_namedtuple", "x.max(dim=...) returns two things, the values and their indices, not a tensor",
            hint="x.amax(dim=-1), or x.max(dim=-1).values", shows=crashing("max_namedtuple")),
    Mistake("python_max", "Python's max() (or an `if`) compared whole tensors of several values: the maximum is "
            "taken element by element, one per row", hint="torch.maximum(m, block.amax(dim=-1)); torch.where to "
            "choose per row", shows=crashing("python_max")),
    Mistake("math_function", "a function of Python's math module got a tensor of several values: it takes ONE "
            "number; torch's functions work element by element", hint="torch.exp, torch.log, not math.exp",
            shows=crashing("math_exp")),
    Mistake("float_start", "m (or l) starts as a Python number, and torch.maximum takes tensors: they start as "
            "tensors, one value per row (or 0-d, broadcast to the rows)",
            hint="torch.full(block.shape[:-1], float('-inf')), torch.zeros(block.shape[:-1])",
            shows=crashing("float_start")),
    Mistake("scalar_inplace", "an in-place update of a 0-d start (l *= ..., m += ...): one number cannot hold a "
            "value per row; the running statistics start with one value per row, or each update makes a new tensor",
            hint="l = l * ... + ..., or torch.zeros(block.shape[:-1])", shows=crashing("scalar_inplace")),
)
M_KINDS = ("max_wrong_axis", "stale_max", "no_guard", "init_zero", "block_max_only", "first_block_only")
L_KINDS = ("no_rescale", "flipped", "stale_max", "no_guard", "old_max", "no_shift", "max_wrong_axis", "init_zero",
           "sum_wrong_axis", "no_guard_zeroed", "block_max", "block_max_no_rescale", "lse", "old_max_safe",
           "sum_rows_mean", "sum_all", "shift_columns", "clamp_safe", "rescale_new", "safe_block",
           "first_block_only", "safe_old")
ROWS = ("random entries", "sorted in ascending order: its maximum in the last block", "with −∞ entries",
        "its first 4 entries −∞, the others negative", "−∞ everywhere: m = −∞",
        "sorted in descending order: its maximum in the first block")


def inputs(ev: Evaluation, seed):
    """Rows (6, 12), as ROWS says (a block of −∞ after finite ones in row 2, for blocks of up to 4)."""
    g = ev.rng(seed)
    x = randn(g, 6, 12, scale=3.0)
    x[1] = torch.sort(x[1]).values
    x[2, torch.as_tensor(g.random(12) < 0.4)] = NEG_INF
    x[2, -4:] = NEG_INF
    x[2, int(g.integers(8))] = 0.5
    x[3] = -x[3].abs() - 0.5                           # its maximum negative: m must start at −∞, not at 0
    x[3, :4] = NEG_INF
    x[4, :] = NEG_INF
    x[5] = torch.sort(x[5], descending=True).values
    return x


def blocks(x, block):
    """The blocks of x as a list (kept, unlike column_blocks'): what the mistakes run on."""
    return [x[..., j0:j0 + block].clone() for j0 in range(0, x.shape[-1], block)]


def _one_pass(ev: Evaluation, answer):
    """The point, as a property: over 64 blocks of 2 columns, what the answer keeps does not grow (counted from block
    16), and the blocks are read in one pass. Under a grader that withholds this lesson's checks from the learner's
    kernel (`--withhold-references`), the stream cannot be made there: the values' tests below still find a second
    pass over blocks that are gone (read_after_gone), not copies kept."""
    stream = OneAtATime(randn(ev.rng(30), 6, 128, scale=3.0), 2, 16)
    try:
        ev.call(answer, stream)
        grew = stream.grew
    except ExerciseError as error:        # (another crash: the tests below name it where it shows)
        text = str(error)
        if "BlocksReadTwice" in text:
            fail(M.two_loops)
        found = re.search(r"BlocksKept: what your function keeps grew by (\d+) numbers over the last (\d+) blocks",
                          text)
        grew = (int(found[1]), int(found[2])) if found else stream.grew
    except BaseException as error:        # noqa: BLE001 - only the one below; CheckTimeout, KernelGone go on
        if type(error).__name__ == "GraderFault" and "course_utils.checks.lesson13" in str(error):
            return   # a grader's kernel without this lesson's checks (--withhold-references) cannot make the stream
        raise
    finally:
        stream.close()
    if grew:
        fail(M.state_grows.at(numbers=grew[0], blocks=grew[1], rows=6))


def _max_rows(got, expected):
    """What the rows say about a wrong m: a maximum of earlier blocks forgotten, else the first wrong row."""
    g, e = to_numpy(got).astype(np.float64), to_numpy(expected).astype(np.float64)
    wrong = np.flatnonzero(~np.isclose(g, e, atol=1e-5, rtol=1e-4))
    if not wrong.size:
        return None
    if 5 in wrong and 1 not in wrong and g[5] < e[5]:
        return M.forgets_max
    r = int(wrong[0])
    return M.max_row.at(row=r, holds=ROWS[r], got=f"{g[r]:.4g}", expected=f"{e[r]:.4g}")


def _l_rows(got, expected):
    """What the rows say about a wrong l, when only some of them are wrong (rows 2 and 3 hold blocks of −∞, row 4 is
    −∞ everywhere); else None."""
    wrong = set(np.flatnonzero(~np.isclose(to_numpy(got), to_numpy(expected), atol=1e-5, rtol=1e-4)).tolist())
    if wrong and wrong <= {2, 3}:                  # (−∞ blocks after finite ones in row 2, a first one in row 3)
        return M.masked_blocks
    return M.empty_row if wrong == {4} else None


def _rows_text(rows):
    return "every row" if len(rows) == len(ROWS) else "; ".join(f"row {r} ({ROWS[r]})" for r in rows)


def _large_scores(ev: Evaluation, answer):
    """Rows of scores near 100 (blocks of 4): m and l stay finite and right."""
    x = randn(ev.rng(40), 3, 12, scale=3.0) + 100.0
    expected = stats(x)
    m, ell = expect_returns(ev.call(answer, ref.column_blocks(x, 4)), expected, ("m", "l"))
    got = to_numpy(ell).astype(np.float64)
    expect(np.isfinite(got).all(), M.overflow.at(what="NaN" if np.isnan(got).any() else "inf"))
    ev.expect_close(m, expected[0], "m, with scores around 100")
    ev.expect_close(ell, expected[1], "l, with scores around 100")


def _first_block(blocks):
    """A right answer: m and l made from the first block, its NaN cleaned with nan_to_num."""
    m = ell = None
    for block in blocks:
        if m is None:
            m = block.amax(-1)
            ell = torch.nan_to_num(torch.exp(block - m[..., None])).sum(-1)
            continue
        m_new = torch.maximum(m, block.amax(-1))
        fresh = torch.nan_to_num(torch.exp(block - m_new[..., None])).sum(-1)
        ell = torch.nan_to_num(ell * torch.exp(m - m_new)) + fresh
        m = m_new
    return m, ell


def _merged(blocks):
    """A right answer: 0-d starting values, each block's statistics merged in with merge_softmax_stats."""
    m, ell = torch.tensor(NEG_INF), torch.tensor(0.0)
    for block in blocks:
        m_b = block.amax(-1)
        shift = torch.where(torch.isneginf(m_b), 0.0, m_b)
        m, ell = ref.merge_softmax_stats(m, ell, m_b, torch.exp(block - shift[..., None]).sum(-1))
    return m, ell


def _logaddexp(blocks):
    """A right answer: a running log-sum-exp, l = exp(lse − m) at the end."""
    lse, m = torch.tensor(NEG_INF), torch.tensor(NEG_INF)
    for block in blocks:
        lse, m = torch.logaddexp(lse, torch.logsumexp(block, -1)), torch.maximum(m, block.amax(-1))
    return m, torch.nan_to_num(torch.exp(lse - torch.where(torch.isneginf(m), 0.0, m)))


@exercise("the online softmax", name="online_softmax", reference=ref.online_softmax, mistakes=M,
          right=[_first_block, _merged, _logaddexp])
@single_threaded
@naming_crashes(M)
def online_softmax(ev: Evaluation, answer):
    """answer(blocks) -> (m (R,), l (R,)) in one pass over the blocks (R, b), handed out one at a time and once."""
    _one_pass(ev, answer)
    tests = 1
    for seed, block in enumerate((6, 3, 1, 4, 7, 12, 16)):   # 6 first: blocks (6, 6), where dim 0 and -1 agree
        x = inputs(ev, seed)
        expected = stats(x)
        m, ell = expect_returns(ev.call(answer, ref.column_blocks(x, block)), expected, ("m", "l"))
        if not (same(m, expected[0]) and same(ell, expected[1])):       # right when it may keep every block?
            kept = expect_returns(ev.call(answer, blocks(x, block)), expected, ("m", "l"))
            expect(not all(same(a, e) for a, e in zip(kept, expected)), M.read_after_gone)
            m, ell = kept
        expect(not (hasattr(m, "shape") and tuple(m.shape) == (block,) != (6,)), M.max_wrong_axis)
        if hasattr(m, "shape") and tuple(m.shape) == ():
            fail(M.m_not_updated if same(m, torch.tensor(NEG_INF)) else M.max_all)
        expect_shape(m, (6,), "m")
        expect_shape(ell, (6,), "l")
        kept = blocks(x, block)
        by_values(m, expected[0], M, FORMS.values(M_KINDS, kept, pick=lambda r: r[0]), "m")
        with explained(functools.partial(_max_rows, m, expected[0])):       # (not a NaN from −∞ − (−∞))
            ev.expect_close(m, expected[0], f"m, the maximum of each row (block_size={block})")
        by_values(ell, expected[1], M, FORMS.values(L_KINDS, kept, pick=lambda r: r[1]), "l")
        nan = np.flatnonzero(np.isnan(to_numpy(ell)).reshape(-1)).tolist()
        expect(not nan, M.nan_rows.at(rows=_rows_text(nan)))
        with explained(functools.partial(_l_rows, ell, expected[1])):
            ev.expect_close(ell, expected[1], f"l, the normaliser Σ exp(x − m) of each row (block_size={block})")
        tests += 1
    _large_scores(ev, answer)
    return tests + 1
