"""Exercise 2's known mistakes, as wrong answers with the exercise's signature: `tiled(..., kind)`, the tiled loop
with one line wrong (`kind="ok"` is the right loop, in float32), the lesson's loop as a learner writes it with one
slip that makes torch raise or that a probe finds (`learner(slip)`), and the answers that miss the point (the whole
T_q x T_k scores or causal mask, P returned for the backward pass, square tiles, tiles above the diagonal computed).
The registry that names them is in tiled_attention.py."""
import math

import torch

from ... import efficient_attention as ref
from ...attention import scaled_dot_product_attention
from ...masks import causal_mask
from .naming import Forms
from .softmax_stats import NEG_INF, safe

SCALES = {"scale_d": lambda d: 1 / d, "no_scale": lambda d: 1.0, "scale_times": lambda d: math.sqrt(d),
          "scale_half_d": lambda d: 1 / (2 * d)}


def _skipped(kind, i0, i1, j0, j1):
    """Whether the causal loop skips tile (i0:i1, j0:j1) under mistake `kind` (right: j0 > i1 - 1)."""
    if kind == "causal_ignored":
        return False
    if kind in ("wrong_side", "wrong_side_unmasked"):
        return j1 - 1 < i0                             # the tiles BELOW the diagonal
    if kind == "skip_ge":
        return j0 >= i1 - 1                            # off by one: also the tile whose first key is i1 - 1
    if kind == "skip_diag":
        return j1 > i0                                 # the diagonal tiles skipped along with those above
    if kind == "all_tiles":
        return False
    if kind == "extra_tile":
        return j0 > i1                                 # off by one the other way: one tile too many
    return j0 > i1 - 1


def _causal_keep(kind, i0, i1, j0, j1):
    """The element-wise causal mask of a tile under mistake `kind` (None: not masked)."""
    if kind in ("diag_full", "wrong_side_unmasked", "causal_ignored"):
        return None
    rows, cols = torch.arange(i0, i1)[:, None], torch.arange(j0, j1)[None, :]
    if kind == "local_idx" or (kind == "local_idx_diag" and j1 - 1 > i0):   # (diag: only the tiles it crosses)
        rows, cols = rows - i0, cols - j0
    if kind == "strict_causal":                        # the diagonal left out: j < i
        return cols < rows
    return cols >= rows if kind == "inverted_causal" else cols <= rows


def tiled(q, k, v, block_q, block_k, causal=False, mask=None, kind="ok"):
    """The tiled loop, right or with one typical mistake: (out, lse)."""
    *lead, T_q, d = q.shape
    T_k, d_v = k.shape[-2], v.shape[-1]
    if mask is not None:
        mask = torch.broadcast_to(mask, (*lead, T_q, T_k))
    if kind == "tk_from_q":                            # T_k read from q: only the first T_q keys are read
        k, v, T_k = k[..., :T_q, :], v[..., :T_q, :], min(T_q, T_k)
        mask = None if mask is None else mask[..., :T_k]
    stop_q, stop_k = (T_q - T_q % block_q, T_k - T_k % block_k) if kind == "drop_tail" else (T_q, T_k)
    stop_k = T_k - T_k % block_k if kind == "drop_last_keys" else stop_k
    if kind == "drop_last_q":                          # range(0, T_q - block_q, block_q): the last block missing
        stop_q = T_q - block_q if T_q > block_q else T_q
    scale = SCALES[kind](d) if kind in SCALES else 1 / math.sqrt(d_v if kind == "scale_dv" else d)
    out, lse = torch.zeros(*lead, T_q, d_v), torch.full((*lead, T_q), NEG_INF)
    m = ell = acc = None
    for i0 in range(0, stop_q, block_q):
        i1 = min(i0 + block_q, T_q)
        if kind == "state_outside" and i0:             # the last block's m, l, acc carried on (sliced), not reset
            m, ell, acc = m[..., :i1 - i0], ell[..., :i1 - i0], acc[..., :i1 - i0, :]
        else:
            m, ell = torch.full((*lead, i1 - i0), NEG_INF), torch.zeros(*lead, i1 - i0)
            acc = torch.zeros(*lead, i1 - i0, d_v)
        for j0 in range(0, stop_k, block_k):
            j1 = min(j0 + block_k, T_k)
            if causal and _skipped(kind, i0, i1, j0, j1):
                continue
            s = q[..., i0:i1, :] @ k[..., j0:j1, :].transpose(-2, -1) * scale
            keep = _causal_keep(kind, i0, i1, j0, j1) if causal else None
            if mask is not None and kind != "mask_ignored":
                tile = mask[..., i0:i1, j0:j1]
                tile = ~tile if kind == "inverted_mask" else tile
                keep = tile if keep is None else keep & tile
            if keep is not None:
                s = s.masked_fill(~keep, NEG_INF)
            m_new = torch.maximum(m, s.amax(dim=-1))
            ms = m_new if kind in ("no_guard", "no_safe") else safe(m_new)     # (no_safe: out still guarded)
            p = torch.exp(s - (safe(m) if kind == "p_old_max" else ms)[..., None])   # (old max: before this tile)
            rescale = torch.exp((m_new if kind == "m_first" else m) - ms)     # (m_first: m = m_new too early)
            ell = (ell if kind == "l_not_rescaled" else ell * rescale) + p.sum(dim=-1)
            acc = (acc if kind == "acc_not_rescaled" else acc * rescale[..., None]) + p @ v[..., j0:j1, :]
            if kind in ("divide_inside", "divide_inside_twice"):
                acc = acc / ell[..., None]
            if kind == "divide_inside_reset":              # acc normalised, l set to 1 (its weight forgotten)
                acc = acc / torch.where(ell > 0, ell, 1.0)[..., None]
                ell = torch.where(ell > 0, torch.ones_like(ell), ell)
            m = m if kind == "m_not_updated" else m_new
        seen = ell > 0
        if kind == "divide_inside":
            out[..., i0:i1, :] = acc
        elif kind == "no_guard":
            out[..., i0:i1, :] = acc / ell[..., None]
        else:
            out[..., i0:i1, :] = torch.where(seen[..., None], acc / torch.where(seen, ell, 1.0)[..., None], 0.0)
        log_l = torch.log(ell)
        lse[..., i0:i1] = {"lse_m": m, "lse_log_l": log_l, "lse_l": m + ell, "lse_empty_zero":
                           torch.where(seen, m + log_l, 0.0)}.get(kind, m + log_l)
    return out, lse


FORMS = Forms(tiled, divide_inside=["divide_inside", "divide_inside_twice", "divide_inside_reset"],
              wrong_side=["wrong_side", "wrong_side_unmasked"], local_idx=["local_idx", "local_idx_diag"])


def learner(slip):
    """The lesson's loop as a learner writes it (tensors in q's dtype), with one slip: where the state is made, how
    the causal test or the tile's mask is written, what is sliced."""
    slips = set(slip.split("+"))

    def answer(q, k, v, block_q, block_k, causal=False, mask=None):
        *lead, T_q, d = q.shape
        T_k, d_v = k.shape[-2], v.shape[-1]
        if mask is not None and slip != "mask_query_rows":     # (that slip slices the mask as it is given)
            mask = torch.broadcast_to(mask, (*lead, T_q, T_k))
        out = torch.zeros_like(q) if slip == "out_like_q" else q.new_zeros(*lead, T_q, d_v)
        lse = q.new_zeros(*lead, T_q)
        if slip == "state_once":                                     # made once, the size of a full block
            m, ell, acc = q.new_full((*lead, block_q), NEG_INF), q.new_zeros(*lead, block_q), \
                q.new_zeros(*lead, block_q, d_v)
        for a, i0 in enumerate(range(0, T_q, block_q)):
            i1 = min(i0 + block_q, T_q)
            if slip != "state_once":
                m, ell, acc = q.new_full((*lead, i1 - i0), NEG_INF), q.new_zeros(*lead, i1 - i0), \
                    q.new_zeros(*lead, i1 - i0, d_v)
            for b, j0 in enumerate(range(0, T_k, block_k)):
                j1 = min(j0 + block_k, T_k)
                skip = {"first_query": j0 > i0, "block_index": b > a}.get(slip, j0 > i1 - 1)
                if causal and skip:
                    continue
                s = (q if slip == "q_whole" else q[..., i0:i1, :]) @ k[..., j0:j1, :].transpose(-2, -1) / math.sqrt(d)
                keep = None
                if causal:
                    rows = torch.arange(i0, i0 + block_q if slip == "mask_full_block" else i1)[:, None]
                    cols = torch.arange(j0, j1)[None, :]
                    keep = cols < rows if slip == "strict" else cols <= rows
                    keep = (rows.T <= cols.T) if slip == "keep_transposed" else keep    # (keys x queries)
                if mask is not None:
                    tile = mask[..., j0:j1, i0:i1] if slip == "mask_keys_first" else mask[..., i0:i1, j0:j1]
                    tile = mask[..., i0:i1, :j1 - j0] if slip == "mask_first_keys" else tile
                    tile = mask[..., i0:i1, j0:j1] if slip == "mask_query_rows" else tile
                    keep = tile if keep is None else (keep | tile if slip == "or" else keep & tile)
                if keep is not None:
                    s = s.masked_fill(~keep, NEG_INF)
                m_new = torch.maximum(m, s.amax(-1))
                shift = torch.where(torch.isneginf(m_new), 0.0, m_new)
                p, rescale = torch.exp(s - shift[..., None]), torch.exp(m - shift)
                rescale = torch.exp(shift - m) if "flipped" in slips else rescale     # e^(+∞) at the first tile
                ell = ell * rescale + (p.shape[-1] if slip == "l_counts" else p.sum(-1))
                values = v if slip == "v_whole" else v[..., j0:j0 + block_q, :] if slip == "v_block_q" else \
                    v[..., j0:j1, :]
                acc = (acc * rescale if slip == "no_axis" else acc * rescale[..., None]) + p @ values
                if slip == "normalise_inside":                       # the output kept normalised, l set to 1
                    acc = acc / torch.where(ell > 0, ell, 1.0)[..., None]
                    ell = torch.where(ell > 0, torch.ones_like(ell), ell)
                m = m_new
            seen = ell > 0
            out[..., i0:i1, :] = torch.where(seen[..., None], acc / torch.where(seen, ell, 1.0)[..., None], 0.0)
            if "unguarded" in slips:
                out[..., i0:i1, :] = acc / ell[..., None]
            lse[..., i0:i1] = m + torch.log(ell)
        return out, lse
    return answer


def every_tile(q, k, v, block_q, block_k, causal=False, mask=None):
    """Every tile computed, the causal mask applied element by element: right values, the point missed."""
    return tiled(q, k, v, block_q, block_k, causal, mask, kind="all_tiles")


def whole_scores(q, k, v, block_q, block_k, causal=False, mask=None):
    """Not tiled: the whole T_q x T_k scores, then the softmax statistics."""
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    full = causal_mask(q.shape[-2]) if causal else None
    if mask is not None:
        full = mask if full is None else full & mask
    if full is not None:
        s = s.masked_fill(~full, NEG_INF)
    return scaled_dot_product_attention(q, k, v, full), torch.logsumexp(s, dim=-1)


def returns_p(q, k, v, block_q, block_k, causal=False, mask=None):
    """P kept for the backward pass and returned with out and lse."""
    out, lse = ref.tiled_attention(q, k, v, block_q, block_k, causal=causal, mask=mask)
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    return out, lse, torch.exp(s - lse[..., None])


def peeks(q, k, v, block_q, block_k, causal=False, mask=None):
    """With causal=True the last value leaks into every output (a slip no listed mistake gives)."""
    out, lse = ref.tiled_attention(q, k, v, block_q, block_k, causal=causal, mask=mask)
    return (out + 1e-3 * v[..., -1:, :] if causal else out), lse


def square_tiles(q, k, v, block_q, block_k, causal=False, mask=None):
    """Right values, but the blocks of keys have block_q keys: tiles of block_q x block_q."""
    return ref.tiled_attention(q, k, v, block_q, block_q, causal=causal, mask=mask)


def q_as_out(q, k, v, block_q, block_k, causal=False, mask=None):
    return q, q[..., 0]


def empty_rows_one(q, k, v, block_q, block_k, causal=False, mask=None):
    """Right, but a query with no key allowed gets 1 where its output must be 0."""
    out, lse = ref.tiled_attention(q, k, v, block_q, block_k, causal=causal, mask=mask)
    return torch.where(torch.isneginf(lse)[..., None], 1.0, out), lse


def lse_of_empty_nan(q, k, v, block_q, block_k, causal=False, mask=None):
    """Right out; the log-sum-exp m + log l read as m − m + log(l) + m: NaN where m = −∞."""
    out, lse = ref.tiled_attention(q, k, v, block_q, block_k, causal=causal, mask=mask)
    return out, lse - lse + lse
