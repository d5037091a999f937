"""What a head score reads: the properties exercise 1's check names where no registered mistake matches.

A score is a mean of attention weights: a linear function of `weights` (B, h, 2L, 2L), one number per sequence
and head. Two probes find where an answer breaks that:

    mixed(ev, answer, w, L, which)      another sequence's or head's score moves when only sequence 0, head 0
                                        changes: (axis name, sequence, head) or None
    entries(ev, answer, L, which)       C (2L, 2L): how much each weight alpha[q, k] counts in the score, read
                                        by handing the answer one weight at a time (a batch of 4L² one-hot maps)
    linear(C, w, got)                   whether the answer's scores on w are C's weighted sums of w's weights
    above_diagonal(C)                   whether the score reads only keys after their query
    describe(C, L)                      "key t - 1 of the queries t = 1 .. 9, each counted 1/9"
"""
import torch

from ...induction import head_scores as reference
from ..errors import ExerciseError
from .properties import ranges


def score(ev, answer, w, L, which):
    """The answer's `which` score (0: previous, 1: induction) on w, as float64, or None where it cannot say."""
    try:
        result = ev.call(answer, w, L)
        return torch.as_tensor(result[which]).detach().double()
    except (ExerciseError, TypeError, IndexError, ValueError, RuntimeError):
        return None


def mixed(ev, answer, w, L, which):
    """(the axis that mixes: "batch" or "heads", the sequence, the head whose score moved) when only sequence 0,
    head 0's weights change (they take those of the last sequence's last head), or None."""
    B, h = w.shape[:2]
    if B * h < 2:
        return None
    changed = w.clone()
    changed[0, 0] = w[-1, -1]
    before, after = score(ev, answer, w, L, which), score(ev, answer, changed, L, which)
    if before is None or after is None or before.shape != (B, h) or after.shape != (B, h):
        return None
    moved = (after - before).abs() > 1e-6
    moved[0, 0] = False
    for b, j in moved.nonzero().tolist():
        return ("batch" if b > 0 else "heads"), b, j
    return None


def entries(ev, answer, L, which):
    """C (2L, 2L) float64: the score of a map whose only weight is 1 at (query q, key k), for every (q, k); None
    where the answer's score is not such a weighted sum (it does not give these values on `check`)."""
    n = 2 * L
    basis = torch.eye(n * n).reshape(n * n, 1, n, n)                 # map i: weight 1 at (i // n, i % n)
    found = score(ev, answer, basis, L, which)
    if found is None or found.numel() != n * n:
        return None
    return found.reshape(n, n)


def linear(C, w, got):
    """Whether the answer's scores `got` (B, h) on w are C's weighted sums of w's weights."""
    return torch.allclose((w.double() * C).sum((-2, -1)), got.double(), atol=1e-5, rtol=1e-4)


def above_diagonal(C):
    """Whether every weight the score reads is a key after its query (where a causal head has none)."""
    nonzero = C.abs() > 1e-9
    return bool(nonzero.any()) and not bool((nonzero & ~torch.ones_like(nonzero).triu(1)).any())


def expected(L, which):
    n = 2 * L
    return reference(torch.eye(n * n).reshape(n * n, 1, n, n), L)[which].double().reshape(n, n)


def _key(d, L):
    """The key at offset d from query t, in the lesson's words."""
    if d == 0:
        return "key t (the query itself)"
    if d > 0:
        return f"key t + {d} (after the query)"
    for back, name in ((L - 1, "t - L + 1"), (L, "t - L"), (L - 2, "t - L + 2")):
        if -d == back and L > 3:
            return f"key {name}"
    return f"key t - {-d}"


def _count(c):
    if abs(c) > 1e-9 and abs(1 / c - round(1 / c)) < 1e-3:
        return "1" if round(1 / c) == 1 else f"1/{round(1 / c)}"
    return f"{c:.3g}"


def describe(C, L):
    """Which weights alpha[q, k] the score reads and how much each counts, in words."""
    nonzero = (C.abs() > 1e-9).nonzero().tolist()
    if not nonzero:
        return "no weight at all (it is 0 whatever the weights)"
    counts = sorted({_count(float(C[q, k])) for q, k in nonzero})
    weighed = f"each counted {counts[0]}" if len(counts) == 1 else f"counted {', '.join(counts[:4])}"
    offsets = sorted({k - q for q, k in nonzero}, reverse=True)
    if len(offsets) > 3:
        queries, keys = {q for q, _ in nonzero}, {k for _, k in nonzero}
        return (f"{len(nonzero)} weights, every key {ranges(keys)} of every query {ranges(queries)} (a block, not "
                f"one key per query), {weighed}")
    parts = [f"{_key(d, L)} of the queries t = {ranges(q for q, k in nonzero if k - q == d)}" for d in offsets]
    return "; ".join(parts) + f", {weighed}"
