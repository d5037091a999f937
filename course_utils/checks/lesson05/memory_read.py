"""Lesson 05, exercise 1: the NTM's read.

    memory_read(memory (B, N, M), w (B, N)) -> r (B, M), r = sum_i w(i) M(i)

The check draws three memories (the first square, N = M, so that a product with the memory untransposed runs and is
named), tests the result's shape (a batch broadcast, rows not summed, the batch summed), names the mistakes by their
values, and otherwise the property a read breaks: a one-hot weighting reads its row, a weighting of 0.5 on two rows
reads their average. Then a one-hot read, and a batch of one (B = 1).
"""
import numpy as np
import torch
import torch.nn.functional as F

from ... import memory as ref
from ..core import Mistake, Mistakes, exercise, expect, expect_shape, to_numpy
from ..evaluation import Evaluation, call_naming
from ..torch_errors import MATMUL
from . import inputs
from .batch_axis import batch_of_one, squeeze_all
from .weightings import compare

_READ = "r = sum_i w(i) M(i)"
_ROW = "(w.unsqueeze(-2) @ memory).squeeze(-2)"
M = Mistakes(
    Mistake("batch_broadcast", "memory_read returned shape (B, B, M) = {shape}: every weighting is paired with every "
            "example's memory; each example reads its own memory with its own weighting", hint=_ROW,
            shows=lambda memory, w: w @ memory),
    Mistake("not_summed", "memory_read returned shape (B, N, M) = {shape}: the rows are weighted but not summed; "
            f"{_READ} sums over the rows i (axis -2)", shows=lambda memory, w: w.unsqueeze(-1) * memory),
    Mistake("batch_summed", "memory_read returned shape (N, M) = {shape}: the batch axis is gone and the rows' axis "
            f"kept; {_READ} sums the weighted rows over i (axis -2), one read per example, (B, M)",
            shows=lambda memory, w: (w.unsqueeze(-1) * memory).sum(0)),
    Mistake("memory_times_w", "the memory (B, N, M) is multiplied by the weighting w (B, N) as if w were one matrix: "
            f"each example's weighting weights the rows of ITS memory, {_READ}", hint=_ROW,
            shows=lambda memory, w: memory @ w),
    Mistake("untransposed", "the weighting is contracted with the row width M (the columns of the memory), not with "
            "the N rows", hint="memory.transpose(-1, -2) @ w.unsqueeze(-1), or " + _ROW,
            shows=lambda memory, w: (memory @ w.unsqueeze(-1)).squeeze(-1)),
    Mistake("softmax_w", f"you applied a softmax to w before reading: w is already a weighting (>= 0, sums to 1); "
            f"the read uses it as it is, {_READ}", shows=lambda memory, w: ref.memory_read(memory, w.softmax(-1))),
    Mistake("argmax_row", f"you read only the most weighted row (argmax): the read is soft, the sum of EVERY row "
            f"weighted by w(i), {_READ}", shows=lambda memory, w: memory[torch.arange(len(w)), w.argmax(-1)]),
    Mistake("unweighted_sum", f"the rows are summed without being weighted by w: {_READ}",
            shows=lambda memory, w: memory.sum(-2)),
    Mistake("plain_mean", f"you took the plain mean of the rows: each row is weighted by w(i), {_READ}",
            shows=lambda memory, w: memory.mean(-2)),
    Mistake("weighted_mean", f"the weighted rows are averaged (divided by N): r is the weighted SUM, {_READ}",
            shows=lambda memory, w: (w.unsqueeze(-1) * memory).mean(-2)),
    Mistake("summed_columns", "the weighted rows are summed over the columns (the last axis): the read sums them "
            "over the rows i (axis -2)", shows=lambda memory, w: (w.unsqueeze(-1) * memory).sum(-1)),
    Mistake("one_hot_read", "a one-hot weighting on row {i} of example {b} does not read exactly that row of that "
            f"example's memory: {_READ} with w(i) = 1 is M(i)",
            shows=lambda memory, w: ref.memory_read(memory, torch.softmax(3 * w, -1))),
    Mistake("two_rows", "with w = 0.5 on two rows the read is not the average of those two rows: " + _READ + " sums "
            "EVERY row weighted by w(i), linearly", shows=lambda memory, w: ref.memory_read(memory, w ** 2)),
    squeeze_all(lambda memory, w: (w.unsqueeze(1) @ memory).squeeze(), _ROW),
)
_VALUES = ("untransposed", "softmax_w", "argmax_row", "unweighted_sum", "plain_mean", "weighted_mean",
           "summed_columns")


def _properties(ev: Evaluation, answer, memory):
    """(holds, Mistake) pairs of a read on `memory` (B >= 2, N >= 3): a one-hot weighting reads its row, a weighting
    of 0.5 on two rows reads their average (the read is linear in w)."""
    B, N, _ = memory.shape
    rows = torch.arange(B) % N
    one_hot = F.one_hot(rows, N).float()
    two = 0.5 * one_hot + 0.5 * F.one_hot((rows + 1) % N, N).float()
    picked = memory[torch.arange(B), rows]

    def reads(w, expected):
        return lambda _: np.allclose(to_numpy(ev.call(answer, memory, w)), to_numpy(expected), atol=1e-5)

    return [(reads(one_hot, picked), M.one_hot_read.at(i=int(rows[0]), b=0)),
            (reads(two, (picked + memory[torch.arange(B), (rows + 1) % N]) / 2), M.two_rows)]


def _read_by_einsum(memory, w):
    return torch.einsum("bn,bnm->bm", w, memory)


@exercise("memory read r = sum_i w(i) M(i)", reference=ref.memory_read, mistakes=M,
          right=[_read_by_einsum, lambda memory, w: (memory.transpose(-1, -2) @ w.unsqueeze(-1)).squeeze(-1)])
def memory_read(ev: Evaluation, answer):
    """answer(memory (B, N, M), w (B, N)) -> r (B, M)."""
    tests = 0
    for seed, (B, N, width) in enumerate([(2, 7, 7), (2, 6, 4), (3, 10, 5)]):
        r = ev.rng(seed)
        memory, w = inputs.memory(r, B, N, width), inputs.weighting(r, B, N)

        def as_matrix(match, B=B, N=N, width=width):
            sizes = (int(match["r1"]), int(match["c1"]), int(match["r2"]), int(match["c2"]))
            return M.memory_times_w if sizes == (B * N, width, B, N) else None

        out = call_naming(ev, [(MATMUL, as_matrix)], answer, memory, w)
        shape = tuple(getattr(out, "shape", ()))
        for wrong, mistake in (((B, B, width), M.batch_broadcast), ((B, N, width), M.not_summed),
                               ((N, width), M.batch_summed)):
            expect(shape != wrong, mistake.at(shape=wrong))
        expect_shape(out, (B, width), "memory_read(memory, w)")
        compare(ev, out, ref.memory_read(memory, w), "memory_read(memory, w)",
                mistakes=M.variants(_VALUES, memory, w), properties=_properties(ev, answer, memory))
        tests += 1
    # a one-hot weighting reads exactly that row
    memory = inputs.memory(ev.rng(9), 2, 5, 3)
    w = torch.zeros(2, 5)
    w[0, 3], w[1, 0] = 1.0, 1.0
    out = ev.call(answer, memory, w)
    expect_shape(out, (2, 3), "memory_read with one-hot weightings")
    out, expected = to_numpy(out), to_numpy(torch.stack([memory[0, 3], memory[1, 0]]))
    for b, i in ((0, 3), (1, 0)):
        expect(np.allclose(out[b], expected[b]), M.one_hot_read.at(i=i, b=b))
    memory = inputs.memory(ev.rng(8), 1, 5, 3)
    w = inputs.weighting(ev.rng(7), 1, 5)
    batch_of_one(ev, answer, (memory, w), ref.memory_read(memory, w), "memory_read(memory, w)", M.squeeze_all)
    return tests + 2
