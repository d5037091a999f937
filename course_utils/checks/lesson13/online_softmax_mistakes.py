"""Exercise 1a's known mistakes, as wrong answers with the exercise's signature: `online(blocks, kind)`, the one-pass
loop with one line wrong (`kind="ok"` is the right loop), the answers that skip the point (two passes, the blocks
kept, a block read after it is gone), and slips that make torch raise. The registry that names them is in
online_softmax.py."""
import math

import torch

from .naming import Forms
from .softmax_stats import NEG_INF, safe


def online(blocks, kind="ok"):
    """One pass over `blocks` (each (R, b)): (m, l), right or with one typical mistake."""
    m = ell = None
    for block in blocks:
        if m is None:
            start = 0.0 if kind == "init_zero" else NEG_INF
            m, ell = torch.full(block.shape[:-1], start), torch.zeros(block.shape[:-1])
            m = torch.tensor(NEG_INF) if kind == "m_not_updated" else m       # (a 0-d start, as the lesson allows)
        m_new = torch.maximum(m, block.amax(dim=0 if kind == "max_wrong_axis" else -1))
        if kind == "block_max_only":                   # the running maximum forgotten: m = the block's maximum
            m_new = block.amax(dim=-1)
        guard = kind not in ("no_guard", "no_guard_zeroed")           # (zeroed: NaN turned into 0 at the end)
        ms = safe(m_new) if guard else m_new
        if kind == "clamp_safe":                       # the safe maximum as max(m, 0): every negative one moved
            ms = m_new.clamp(min=0.0)
        if kind == "safe_old":                         # the guard tests the OLD m (−∞ before the first block)
            ms = torch.where(torch.isneginf(m), 0.0, m_new)
        if kind == "safe_block":                       # the guard tests the block's maximum, not m_new
            ms = torch.where(torch.isneginf(block.amax(dim=-1)), 0.0, m_new)
        if kind == "old_max":                          # exp(x_block - m_old): inf at the first block
            p_sum = torch.exp(block - m[..., None]).sum(dim=-1)
        elif kind == "old_max_safe":                   # exp(x_block - m_old), guarded: exp(x_block) at the first
            p_sum = torch.exp(block - safe(m)[..., None]).sum(dim=-1)
        elif kind in ("sum_rows_mean", "sum_all"):     # every term of the block summed (averaged over its rows)
            p_sum = torch.exp(block - ms[..., None]).sum() / (block.shape[0] if kind == "sum_rows_mean" else 1)
        elif kind == "no_shift":                       # l = sum exp(x), not measured from any maximum
            p_sum = torch.exp(block).sum(dim=-1)
        elif kind == "sum_wrong_axis":                 # the block's sum over its rows (dim 0): (b,), broadcast
            p_sum = torch.exp(block - ms[..., None]).sum(dim=0)
        elif kind == "shift_columns":                  # m_new (R,) without its axis: subtracted along the columns
            p_sum = torch.exp(block - ms).sum(dim=-1)
        elif kind in ("block_max", "block_max_no_rescale"):   # measured from the block's own maximum
            p_sum = torch.exp(block - safe(block.amax(dim=-1))[..., None]).sum(dim=-1)
        elif kind == "overflow":                       # exp(x) / exp(m): the maximum taken out after exp overflowed
            p_sum = (torch.exp(block) / torch.exp(ms)[..., None]).sum(dim=-1)
        else:
            p_sum = torch.exp(block - ms[..., None]).sum(dim=-1)
        if kind in ("no_rescale", "no_shift", "block_max_no_rescale"):
            ell = ell + p_sum
        elif kind == "flipped":                        # e^(m_new - m_old): 0 * e^(+inf) = NaN at the start
            ell = ell * torch.exp(m_new - m) + p_sum
        elif kind == "flipped_safe":
            ell = ell * torch.exp(safe(m_new) - safe(m)) + p_sum
        elif kind == "rescale_new":                    # the factor on the new block's sum, not on the old l
            ell = ell + torch.exp(m - ms) * p_sum
        elif kind == "overflow":
            ell = ell * torch.exp(m) / torch.exp(ms) + p_sum
        else:
            ell = ell * torch.exp(m - ms) + p_sum
        if kind not in ("stale_max", "m_not_updated"):
            m = m_new
        if kind == "first_block_only":                 # a return indented into the loop
            break
    if kind == "lse":                                  # the log-sum-exp returned in place of l
        return m, m + torch.log(ell)
    if kind == "empty_row_one":                        # a row with nothing in it given l = 1
        return m, torch.where(torch.isneginf(m), 1.0, ell)
    return m, ell if guard or kind == "no_guard" else torch.nan_to_num(ell)


FORMS = Forms(online, flipped=["flipped_safe"])    # (unguarded, the flipped factor gives NaN everywhere: nan_rows)


def two_loops(blocks):
    """A second loop over the same blocks: the whole row's maximum first, then the normaliser."""
    m = None
    for block in blocks:
        m = block.amax(-1) if m is None else torch.maximum(m, block.amax(-1))
    return m, sum(torch.exp(block - safe(m)[..., None]).sum(-1) for block in blocks)


def cloned_then_second_pass(blocks):
    """Each block copied as it comes (so that it survives), then a second pass over the copies."""
    kept = []
    for block in blocks:
        kept.append(block.clone())
    m = torch.stack([block.amax(-1) for block in kept]).amax(0)
    return m, sum(torch.exp(block - safe(m)[..., None]).sum(-1) for block in kept)


def one_step_late(blocks):
    """Each block used when the NEXT one arrives (the last after the loop): it reads blocks that are gone."""
    m, ell, previous = torch.tensor(NEG_INF), torch.tensor(0.0), None
    for block in blocks:
        if previous is not None:
            m, ell = _update(m, ell, previous)
        previous = block
    return _update(m, ell, previous)


def _update(m, ell, block):
    m_new = torch.maximum(m, block.amax(-1))
    return m_new, ell * torch.exp(m - safe(m_new)) + torch.exp(block - safe(m_new)[..., None]).sum(-1)


def one_maximum_per_block(blocks):
    """block.max() without dim=: one number for the whole block."""
    m, ell = torch.tensor(NEG_INF), torch.tensor(0.0)
    for block in blocks:
        m_new = torch.maximum(m, block.max())
        ell = ell * torch.exp(m - m_new) + torch.exp(block - m_new).sum(-1)
        m = m_new
    return m, ell


def one_wrong_maximum(blocks):
    """Right but for the maximum of row 0 (a slip no listed mistake explains: named by its row)."""
    m, ell = online(blocks)
    return m + 0.5 * (torch.arange(len(m)) == 0), ell


def last_two_maxima(blocks):
    """m = max(the previous block's maximum, this block's): the maxima of earlier blocks forgotten."""
    m, ell, previous = torch.tensor(NEG_INF), torch.tensor(0.0), torch.tensor(NEG_INF)
    for block in blocks:
        m_new = torch.maximum(previous, block.amax(-1))
        ell = ell * torch.exp(m - safe(m_new)) + torch.exp(block - safe(m_new)[..., None]).sum(-1)
        m, previous = m_new, block.amax(-1)
    return m, ell


def m_first_unguarded(blocks):
    """m set to m_new before the factor (which is then 1), and no safe maximum: NaN where m is −∞."""
    m, ell = torch.tensor(NEG_INF), torch.tensor(0.0)
    for block in blocks:
        m = torch.maximum(m, block.amax(-1))
        ell = ell * torch.exp(m - m) + torch.exp(block - m[..., None]).sum(-1)
    return m, ell


def masked_block_resets(blocks):
    """A block of −∞ only taken to empty the row so far: l set to 0 there."""
    m, ell = torch.tensor(NEG_INF), torch.tensor(0.0)
    for block in blocks:
        m_new = torch.maximum(m, block.amax(-1))
        ell = ell * torch.exp(m - safe(m_new)) + torch.exp(block - safe(m_new)[..., None]).sum(-1)
        ell = torch.where(torch.isneginf(block.amax(-1)), 0.0, ell)
        m = m_new
    return m, ell


def crashing(slip):
    """The one-pass loop with a slip that makes torch raise."""
    def answer(blocks):
        m, ell = (float("-inf"), 0.0) if slip == "float_start" else (torch.tensor(NEG_INF), torch.tensor(0.0))
        for block in blocks:
            if slip == "max_namedtuple":
                m_new = torch.maximum(m, block.max(dim=-1))
            elif slip == "python_max":
                m_new = max(m, block.amax(-1))
            else:
                m_new = torch.maximum(m, block.amax(-1))
            shift = safe(m_new)
            if slip == "math_exp":
                ell = ell * math.exp(m - shift) + torch.exp(block - shift[..., None]).sum(-1)
            elif slip == "scalar_inplace":
                ell *= torch.exp(m - shift)
                ell += torch.exp(block - shift[..., None]).sum(-1)
            else:
                ell = ell * torch.exp(m - shift) + torch.exp(block - shift[..., None]).sum(-1)
            m = m_new
        return m, ell
    return answer
