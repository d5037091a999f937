"""What a cut cache holds: the properties exercise 3's check names where no registered mistake matches.

The check's keys hold their position (key i is about i, plus a little noise), so every row of an answer can be
traced back to the cached row it copies:

    changed_axes(got, x, want)     the axes other than the positions whose size differs from the cache's:
                                   [(axis, name, size in the answer, size in the cache)]
    rows(got, x)                   for each row (axis -2) of `got`, the position of `x` it copies, or None
    kept(t, sinks, window)         the positions the cache must keep, in order
"""
import torch

AXES = ("batch", "heads", "positions", "features")      # k, v (B, h, t, d_head)


def changed_axes(got, x):
    """[(axis, name, size in got, size in x)] for the axes other than the positions (axis 2) that differ."""
    return [(axis, AXES[axis], got.shape[axis], x.shape[axis]) for axis in (0, 1, 3)
            if got.shape[axis] != x.shape[axis]]


def rows(got, x, atol=1e-6):
    """For each row i of got (..., n, d) (axis -2), the position j of x (..., t, d) whose row it is, in every
    sequence and head, or None (got and x alike on the other axes)."""
    if got.shape[:-2] != x.shape[:-2] or got.shape[-1] != x.shape[-1] or got.size(-2) == 0:
        return [None] * (got.size(-2) if got.dim() >= 2 else 0)
    diff = (got.detach().float().unsqueeze(-2) - x.float().unsqueeze(-3)).abs()     # (..., n, t, d)
    same = diff.amax(-1).flatten(0, -3).amax(0) < atol                               # (n, t)
    return [int(row.nonzero()[0]) if row.any() else None for row in same]


def kept(t, sinks, window):
    """The positions the cache keeps: every one when t <= sinks + window, else the first `sinks` and the last
    `window`."""
    if t <= sinks + window:
        return list(range(t))
    return list(range(sinks)) + list(range(t - window, t))


def tensor(x):
    return isinstance(x, torch.Tensor)
