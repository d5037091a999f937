"""Lesson 13's typical mistakes, written out: each exercise's loop with one line wrong (`kind`), so that the
check can name a mistake by its values (and the tests can plant it). `kind="ok"` is the right loop; what the
check says for each kind is in lesson13_symptoms.py.

    online(blocks, kind)                          exercise 1a: (m, l) in one pass over the blocks
    merge(m1, l1, m2, l2, kind)                   exercise 1b: (m, l) of the whole row
    tiled(q, k, v, bq, bk, causal, mask, kind)    exercise 2: (out, lse), tile by tile
    backward(q, k, v, out, lse, dO, bq, bk, causal, kind)   exercise 3: (dq, dk, dv), tile by tile
    linear(q, k, v, kind)                         exercise 4: linear attention
"""
import math

import torch
import torch.nn.functional as F

NEG_INF = float("-inf")


def safe(m):
    """m where finite, 0 where -inf (so that exp(-inf - safe) = 0, not NaN)."""
    return torch.where(torch.isneginf(m), torch.zeros_like(m), m)


# ---------------------------------------------------------------------------------------------
# Exercise 1a: the online softmax
# ---------------------------------------------------------------------------------------------
def online(blocks, kind="ok"):
    """One pass over `blocks` (each (R, b)): (m, l), right or with one typical mistake."""
    m = ell = None
    for block in blocks:
        if m is None:
            start = 0.0 if kind == "init_zero" else NEG_INF
            m, ell = torch.full(block.shape[:-1], start), torch.zeros(block.shape[:-1])
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
        else:
            ell = ell * torch.exp(m - ms) + p_sum
        if kind != "stale_max":
            m = m_new
        if kind == "first_block_only":                 # a return indented into the loop
            break
    if kind == "lse":                                  # the log-sum-exp returned in place of l
        return m, m + torch.log(ell)
    return m, ell if guard or kind == "no_guard" else torch.nan_to_num(ell)


def two_passes(blocks, kind="list"):
    """The answers that skip the point: the whole row's maximum first, then the normaliser."""
    if kind == "two_loops":                            # a second loop over the same blocks
        m = None
        for block in blocks:
            m = block.amax(-1) if m is None else torch.maximum(m, block.amax(-1))
        ell = sum(torch.exp(block - safe(m)[..., None]).sum(-1) for block in blocks)
        return m, ell
    x = torch.cat(list(blocks), dim=-1)                # kind "list": the blocks gathered first
    m = x.amax(-1)
    return m, torch.exp(x - safe(m)[..., None]).sum(-1)


# ---------------------------------------------------------------------------------------------
# Exercise 1b: merging two partial results
# ---------------------------------------------------------------------------------------------
def merge(m1, l1, m2, l2, kind="ok"):
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
    return m, l1 * torch.exp(m1 - ms) + l2 * torch.exp(m2 - ms)


# ---------------------------------------------------------------------------------------------
# Exercise 2: tiled attention, the forward pass
# ---------------------------------------------------------------------------------------------
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
            keys = k[..., i0:i1, :] if kind == "k_query_range" else k[..., j0:j1, :]   # (a slice copied from q's)
            s = q[..., i0:i1, :] @ keys.transpose(-2, -1) * scale
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


# ---------------------------------------------------------------------------------------------
# Exercise 3: the backward pass
# ---------------------------------------------------------------------------------------------
def backward(q, k, v, out, lse, grad_out, block_q, block_k, causal=False, kind="ok"):
    """The tiled backward loop, right or with one typical mistake: (dq, dk, dv)."""
    T_q, T_k, d = q.shape[-2], k.shape[-2], q.shape[-1]
    scale = math.sqrt(d) if kind == "bw_scale_times" else 1 / math.sqrt(d)
    grad_scale = {"no_scale": 1.0, "scale_twice": scale * scale}.get(kind, scale)
    dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    D = (grad_out * (grad_out if kind == "D_dO" else out)).sum(dim=-2 if kind == "D_wrong_axis" else -1)   # (..., T_q)
    if kind == "D_all":                                                       # one number for everything
        D = (grad_out * out).sum().expand(out.shape[:-1])
    if kind == "full_P":                                                      # the whole P at once: T_q x T_k
        s = q @ k.transpose(-2, -1) * scale
        if causal:
            s = s.masked_fill(~torch.ones(T_q, T_k, dtype=torch.bool).tril(), NEG_INF)
        p = torch.exp(s - lse[..., None])
        dp = grad_out @ v.transpose(-2, -1)
        ds = p * (dp - D[..., None])
        return ds @ k * scale, ds.transpose(-2, -1) @ q * scale, p.transpose(-2, -1) @ grad_out
    for i0 in range(0, T_q, block_q):
        i1 = min(i0 + block_q, T_q)
        q_i, do_i = q[..., i0:i1, :], grad_out[..., i0:i1, :]
        for j0 in range(0, T_k - block_k if kind == "keys_short" else T_k, block_k):
            j1 = min(j0 + block_k, T_k)
            if causal and kind != "all_tiles" and j0 > i1 - 1:
                continue
            s = q_i @ k[..., j0:j1, :].transpose(-2, -1) * (1.0 if kind == "p_no_scale" else scale)
            if causal and kind != "no_diag_mask":
                local = i0 if kind == "local_idx" else 0, j0 if kind == "local_idx" else 0
                s = s.masked_fill(torch.arange(j0, j1)[None, :] - local[1] > torch.arange(i0, i1)[:, None] - local[0],
                                  NEG_INF)
            lse_i = lse[..., i0:i1] if kind == "lse_no_axis" else lse[..., i0:i1, None]   # (no axis: over columns)
            lse_i = lse[..., j0:j1, None] if kind == "lse_keys" else lse_i   # (keys: sliced with the key block)
            lse_i = -lse_i if kind == "lse_sign" else lse_i                   # (sign: P = exp(S + L))
            p = torch.softmax(s, dim=-1) if kind == "p_softmax_tile" else torch.exp(s - lse_i)
            dp = do_i @ v[..., j0:j1, :].transpose(-2, -1)
            if kind == "no_D":
                ds = p * dp
            elif kind == "D_tile":                                           # D from this tile only
                ds = p * (dp - (p * dp).sum(dim=-1, keepdim=True))
            else:
                ds = p * (dp - (D[..., i0:i1] if kind == "D_no_axis" else D[..., i0:i1, None]))
            if kind == "D_plus":
                ds = p * (dp + D[..., i0:i1, None])
            if kind == "ds_D_outside":                                       # P·dP − D: D not multiplied by P
                ds = p * dp - D[..., i0:i1, None]
            dv_tile = (p @ do_i) if kind == "dv_no_transpose" else p.transpose(-2, -1) @ do_i
            if kind == "dv_dO_keys":                                          # dO sliced with the KEY block
                dv_tile = p.transpose(-2, -1) @ grad_out[..., j0:j1, :]
            if kind == "dv_from_ds":
                dv_tile = ds.transpose(-2, -1) @ do_i
            if kind == "dv_from_out":
                dv_tile = p.transpose(-2, -1) @ out[..., i0:i1, :]
            dk_tile = (ds @ q_i if kind == "dk_no_transpose" else ds.transpose(-2, -1) @ q_i) * grad_scale
            if kind == "dk_from_dO":
                dk_tile = ds.transpose(-2, -1) @ do_i * grad_scale
            if kind == "dk_scale_twice":
                dk_tile = dk_tile * scale
            dq_tile = ds @ (v if kind == "dq_from_v" else k)[..., j0:j1, :]
            dq_tile = dq_tile * (1.0 if kind == "dq_no_scale" else grad_scale)
            if kind == "overwrite":
                dq[..., i0:i1, :], dk[..., j0:j1, :], dv[..., j0:j1, :] = dq_tile, dk_tile, dv_tile
            elif kind == "overwrite_dq_dk":                                   # dv accumulated, dq and dk not
                dq[..., i0:i1, :], dk[..., j0:j1, :] = dq_tile, dk_tile
                dv[..., j0:j1, :] += dv_tile
            elif kind in ("overwrite_dq", "overwrite_dk", "overwrite_dv"):    # one of them overwritten, the rest not
                dq[..., i0:i1, :] = dq_tile + (0 if kind == "overwrite_dq" else dq[..., i0:i1, :])
                dk[..., j0:j1, :] = dk_tile + (0 if kind == "overwrite_dk" else dk[..., j0:j1, :])
                dv[..., j0:j1, :] = dv_tile + (0 if kind == "overwrite_dv" else dv[..., j0:j1, :])
            else:
                dq[..., i0:i1, :] += dq_tile
                dk[..., j0:j1, :] += dk_tile
                dv[..., (i0 if kind == "dv_query_rows" else j0):(i1 if kind == "dv_query_rows" else j1), :] += dv_tile
    return dq, dk, dv


# ---------------------------------------------------------------------------------------------
# Exercise 4: linear attention
# ---------------------------------------------------------------------------------------------
def phi(x):
    return F.elu(x) + 1


def _identity(x):
    return x


FEATURE_MAPS = {"elu_shifted": lambda x: F.elu(x + 1), "phi_exp": torch.exp, "relu_plus1": lambda x: F.relu(x) + 1,
                "phi_softmax": lambda x: torch.softmax(x, dim=-1), "gelu_plus1": lambda x: F.gelu(x) + 1,
                "softplus": F.softplus}


def quadratic(q, k, v, fq=phi, fk=phi, axis=-1):
    """The kernel's quadratic form, weights normalised over `axis` (-1: over the keys, right)."""
    a = fq(q) @ fk(k).transpose(-2, -1)                   # (..., T_q, T_k)
    return (a / a.sum(dim=axis, keepdim=True)) @ v


def linear(q, k, v, kind="ok"):
    """Linear attention, right or with one typical mistake."""
    if kind == "phi_missing":
        return quadratic(q, k, v, _identity, _identity)
    if kind == "phi_q_only":
        return quadratic(q, k, v, phi, _identity)
    if kind == "phi_k_only":
        return quadratic(q, k, v, _identity, phi)
    if kind == "elu_no_plus1":
        return quadratic(q, k, v, F.elu, F.elu)
    if kind == "relu":
        return quadratic(q, k, v, F.relu, F.relu)
    if kind == "k_no_plus1":                              # the +1 written for q only
        return quadratic(q, k, v, phi, F.elu)
    if kind in FEATURE_MAPS:
        return quadratic(q, k, v, FEATURE_MAPS[kind], FEATURE_MAPS[kind])
    if kind == "causal":                                  # cumulative sums: query t reads keys 0..t only
        a = (phi(q) @ phi(k).transpose(-2, -1)).tril()
        return (a / a.sum(dim=-1, keepdim=True)) @ v
    if kind == "scaled":
        return quadratic(q / math.sqrt(q.shape[-1]), k, v)
    if kind == "softmax":
        return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1) @ v
    if kind == "normalised_over_queries":
        return quadratic(q, k, v, axis=-2)
    phi_q, phi_k = phi(q), phi(k)
    S = (phi_q if kind == "S_from_q" else phi_k).transpose(-2, -1) @ (phi(v) if kind == "phi_v" else v)   # (d_k, d_v)
    if kind == "no_denominator":
        return phi_q @ S
    if kind == "z_scalar":                                # one number for all the queries: Σ_j Σ_c φ(k_j)_c
        return phi_q @ S / phi_k.sum(dim=(-2, -1), keepdim=True)
    z = phi_k.sum(dim=-1 if kind == "z_wrong_axis" else -2)              # (..., d_k) (wrong axis: (..., T_k))
    if kind == "denominator_broadcast":                                   # (..., T_q) divides the columns
        return (phi_q @ S) / (phi_q * z[..., None, :]).sum(dim=-1)
    return (phi_q @ S) / (phi_q @ z[..., None])
