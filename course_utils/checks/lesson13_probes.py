"""Lesson 13's probes of what an answer does, not only what it returns.

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
"""
import numpy as np
import torch

from .core import to_numpy
from .evaluation import Evaluation


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


def block_ranges(indices, block, T):
    """'queries 0-3 and 8-11' style text for the blocks `indices` of size `block` in 0..T-1."""
    parts = [f"{i * block}-{min((i + 1) * block, T) - 1}" for i in sorted(set(indices))]
    return " and ".join(parts)
