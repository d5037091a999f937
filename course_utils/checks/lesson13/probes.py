"""What lesson 13's attention checks (tiled forward, backward, linear) probe: what an answer does, not only what it
returns.

- `largest_tensor(ev, answer, *args, **kwargs)`: the answer's result and the largest tensor it created (its
  storage, in elements, and its shape), measured by `ev.call_measured` where the answer runs (`measure.py`: a
  `TorchFunctionMode` that notes every tensor a torch function or tensor method returns). A T_q x T_k tensor is
  found whatever it is called or however it is built (the scores, P, the whole causal mask, a broadcast
  product). In a notebook and in the tests the answer runs in this process; under the instructor's grader it
  runs in the learner's kernel, which measures the call and sends the measurement back with the result (the
  judge still decides). There the measure runs in the learner's own process, as the grader's copy watch does:
  a notebook that tampers with it (switches torch's function modes off, patches the grader's kernel side, or
  builds the matrix in NumPy or in another thread, where the mode does not look) can fool it.
- `tiles_above_computed(answer, q, k, v, ...)`: which tiles strictly above the diagonal a causal answer
  computed, from its values alone (so it holds under the grader too): the values of one block of keys are
  set to +inf; no query before those keys may see them, so their outputs must stay as they were, but a tile
  that was computed and masked multiplies its weights of 0 by inf, and 0 * inf = NaN shows in those rows.
- `moves_earlier_outputs(...)`: whether outputs before position t change when only keys and values from
  t on change (finite values: a causal answer must not see them at all).
- `forward_part`, `backward_part`, `normalised`: where a slip that no registered mistake explains is: the
  answer right without the causal mask (or without the mask) and wrong with it; the weights of a query not
  summing to 1 (values all 1 must give outputs of 1). Each returns the exercise's registry entry (or None).
- `d_rows(...)`: a backward pass whose dq moves at queries whose dO is 0 (D, or dO, taken from other rows).
- `tail_missing(out, expected)`: a forward pass whose last queries got no output at all (all 0, everything
  before them right): its loop over the blocks of queries stopped early.
- `tiles_skipped(...)`: which tiles on or below the diagonal a causal answer skipped (a wrong causal test): the
  values of one block of keys are changed; the queries that see some of those keys must move, and none of a
  block of them does when their tile was never computed.
"""
import numpy as np
import torch

from ...efficient_attention import tiled_attention
from ..core import to_numpy
from ..evaluation import Evaluation


def largest_tensor(ev: Evaluation, answer, *args, **kwargs):
    """(the answer's result, the elements of the largest tensor it created, that tensor's shape)."""
    return ev.call_measured(answer, *args, **kwargs)


def quadratic_symptom(elements, shape, lead, T_q, T_k, what):
    """A message when the largest tensor holds at least a quarter of the T_q x T_k entries, else None."""
    if elements * 4 < int(np.prod(lead, dtype=np.int64)) * T_q * T_k:
        return None
    return (f"{what} built a tensor of shape {shape}, as large as the {T_q} x {T_k} matrix of every query "
            f"against every key (T_q = {T_q}, T_k = {T_k})")


def _rows_changed(a, b):
    """(rows,) bool: rows of a and b (..., T, d) that differ (NaN against a number counts)."""
    a, b = to_numpy(a).astype(np.float64), to_numpy(b).astype(np.float64)
    same = np.isclose(a, b, atol=1e-5, rtol=1e-4, equal_nan=True)
    return ~same.reshape(-1, a.shape[-2], a.shape[-1]).all(axis=(0, 2))


def tiles_above_computed(answer, q, k, v, block_q, block_k, run):
    """[(query block, key block)] of the tiles strictly above the diagonal that `answer` computed.
    run(answer, q, k, v) -> the tensor (..., T_q, d) whose rows belong to the queries (out, or dq)."""
    T_q, T_k = q.shape[-2], k.shape[-2]
    clean = run(answer, q, k, v)
    computed = []
    for b, j0 in enumerate(range(block_k, T_k, block_k)):
        j1 = min(j0 + block_k, T_k)
        above = [(a, i0) for a, i0 in enumerate(range(0, T_q, block_q)) if min(i0 + block_q, T_q) - 1 < j0]
        if not above:
            continue
        v_inf = v.clone()
        v_inf[..., j0:j1, :] = float("inf")
        changed = _rows_changed(run(answer, q, k, v_inf), clean)
        computed += [(a, b + 1) for a, i0 in above if changed[i0:min(i0 + block_q, T_q)].any()]
    return computed


def moves_earlier_outputs(ev: Evaluation, answer, q, k, v, t, run):
    """Whether the outputs of queries before `t` change when the keys and values from `t` on change."""
    g = ev.rng(250)
    k2, v2 = k.clone(), v.clone()
    k2[..., t:, :] = torch.as_tensor(g.normal(size=k2[..., t:, :].shape), dtype=k.dtype)
    v2[..., t:, :] = torch.as_tensor(g.normal(size=v2[..., t:, :].shape), dtype=v.dtype)
    return bool(_rows_changed(run(answer, q, k, v), run(answer, q, k2, v2))[:t].any())


def tiles_skipped(ev: Evaluation, answer, q, k, v, block_q, block_k, run):
    """[(query block, key block)] of the tiles holding a key that some of their queries may see (j <= i) which
    `answer` never computed: none of those queries' rows of run(answer, q, k, v) moved when the values of that
    block of keys changed."""
    T_q, T_k = q.shape[-2], k.shape[-2]
    clean, g, skipped = run(answer, q, k, v), ev.rng(260), []
    for b, j0 in enumerate(range(0, T_k, block_k)):
        v2 = v.clone()
        v2[..., j0:j0 + block_k, :] = torch.as_tensor(g.normal(size=v2[..., j0:j0 + block_k, :].shape), dtype=v.dtype)
        changed = _rows_changed(run(answer, q, k, v2), clean)
        for a, i0 in enumerate(range(0, T_q, block_q)):
            i1 = min(i0 + block_q, T_q)
            if max(i0, j0) < i1 and not changed[max(i0, j0):i1].any():
                skipped.append((a, b))
    return skipped


def tail_missing(out, expected):
    """'queries 8-10' when the outputs (..., T_q, d_v) are right up to some query t and all 0 from t on where the
    formula's are not, else None."""
    a, e = to_numpy(out).astype(np.float64), to_numpy(expected).astype(np.float64)
    if a.shape != e.shape or not a.ndim >= 2:
        return None
    a, e = a.reshape(-1, *a.shape[-2:]), e.reshape(-1, *e.shape[-2:])
    wrong = ~np.isclose(a, e, atol=1e-5, rtol=1e-4).all(axis=(0, 2))
    if not wrong.any():
        return None
    t, T = int(np.argmax(wrong)), a.shape[-2]
    if t == 0 or not (a[:, t:, :] == 0).all():        # (all 0 from query 0: no query computed, not a loop cut short)
        return None
    return f"query {t}" if t == T - 1 else f"queries {t}-{T - 1}"


def tile_ranges(tiles, block_q, block_k, T_q, T_k):
    """'queries 4-7 with keys 3-5' style text for the tiles [(query block, key block)] (at most three)."""
    return ", ".join(f"queries {a * block_q}-{min((a + 1) * block_q, T_q) - 1} with keys "
                     f"{b * block_k}-{min((b + 1) * block_k, T_k) - 1}" for a, b in tiles[:3])


def block_ranges(indices, block, T):
    """'queries 0-3 and 8-11' style text for the blocks `indices` of size `block` in 0..T-1."""
    parts = [f"{i * block}-{min((i + 1) * block, T) - 1}" for i in sorted(set(indices))]
    return " and ".join(parts)


def _same_values(a, b):
    a = a[0] if isinstance(a, (tuple, list)) else a
    return hasattr(a, "shape") and tuple(a.shape) == tuple(b.shape) and np.allclose(
        to_numpy(a).astype(np.float64), to_numpy(b).astype(np.float64), atol=1e-4, rtol=1e-3, equal_nan=True)


def normalised(ev: Evaluation, answer, args, v_index, empty, mistake, **kwargs):
    """`mistake` (its {queries}: which ones) when the answer, given values that are all 1, does not return 1 (0 for
    the `empty` queries, which see no key), else None."""
    args = list(args)
    args[v_index] = torch.ones_like(args[v_index])
    expected = torch.ones(*args[0].shape[:-1], args[v_index].shape[-1])
    if empty is not None:
        expected = expected * (~empty)[..., None]
    got = ev.call(answer, *args, **kwargs)
    if _same_values(got, expected):
        return None
    got = got[0] if isinstance(got, (tuple, list)) else got
    if not (hasattr(got, "shape") and tuple(got.shape) == tuple(expected.shape)):
        return mistake.at(queries="every query")
    a, e = to_numpy(got).astype(np.float64), to_numpy(expected).astype(np.float64)
    wrong = ~np.isclose(a, e, atol=1e-4, rtol=1e-3, equal_nan=True).reshape(-1, a.shape[-2], a.shape[-1]).all(
        axis=(0, 2))
    rows = np.flatnonzero(wrong).tolist()
    return mistake.at(queries="every query" if len(rows) == len(wrong) else
                      "queries " + ", ".join(map(str, rows[:6])) + (", ..." if len(rows) > 6 else ""))


def forward_part(ev: Evaluation, answer, q, k, v, bq, bk, causal, mask, expected, M):
    """Where a tiled forward pass that no mistake explains goes wrong (M.causal_part, M.mask_part, M.weights_sum),
    or None. expected(causal, mask) -> (out, lse) of the formula."""
    if causal and _same_values(ev.call(answer, q, k, v, bq, bk, causal=False, mask=mask), expected(False, mask)[0]):
        return M.causal_part
    if mask is not None and _same_values(ev.call(answer, q, k, v, bq, bk, causal=causal), expected(causal, None)[0]):
        return M.mask_part
    empty = torch.isneginf(expected(causal, mask)[1])
    return normalised(ev, answer, (q, k, v, bq, bk), 2, empty, M.weights_sum, causal=causal, mask=mask)


def backward_part(ev: Evaluation, answer, inputs, bq, bk, gradients, mistake):
    """`mistake` when a causal backward pass is right without the causal mask, else None. inputs: (q, k, v,
    grad_out); gradients(q, k, v, grad_out, causal) -> (dq, dk, dv) of the formula."""
    q, k, v, grad_out = inputs
    out, lse = tiled_attention(q, k, v, 4, 4, causal=False)
    got = ev.call(answer, q, k, v, out, lse, grad_out, bq, bk, causal=False)
    right = gradients(q, k, v, grad_out, False)
    if isinstance(got, (tuple, list)) and len(got) == 3 and all(_same_values(a, b) for a, b in zip(got, right)):
        return mistake
    return None


def d_rows(ev: Evaluation, answer, qkv, bq, bk, causal, mistake):
    """`mistake` (with the queries) when, given dO zero at every query but one, the answer's dq is not 0 at the
    other queries (each query's dS_i uses its own dO_i and D_i, both 0 there: a D or a dO taken from other rows
    shows), else None."""
    q, k, v = qkv
    out, lse = tiled_attention(q, k, v, 4, 4, causal=causal)
    grad_out, r = torch.zeros_like(out), q.shape[-2] // 2
    grad_out[..., r, :] = torch.as_tensor(ev.rng(270).normal(size=grad_out[..., r, :].shape), dtype=out.dtype)
    got = ev.call(answer, q, k, v, out, lse, grad_out, bq, bk, causal=causal)
    dq = got[0] if isinstance(got, (tuple, list)) and len(got) == 3 else None
    if not (hasattr(dq, "shape") and tuple(dq.shape) == tuple(q.shape)):
        return None
    moved = np.abs(to_numpy(dq).astype(np.float64)).reshape(-1, q.shape[-2], q.shape[-1]).max(axis=(0, 2)) > 1e-6
    moved[r] = False
    rows = np.flatnonzero(moved).tolist()
    return mistake.at(rows=", ".join(map(str, rows[:4])) + (", ..." if len(rows) > 4 else "")) if rows else None
