"""Lesson 05, exercise 2: the NTM's write, erase then add.

    memory_write(memory (B, N, M), w (B, N), e (B, M), a (B, M)) -> (B, N, M),
        M~(i) = M(i) [1 - w(i) e], then M(i) = M~(i) + w(i) a

The check draws two memories with peaked weightings (B != N, so that e or a used without the rows' axis crashes and
is named), names the mistakes by their values, and otherwise finds which step holds the slip: with a = 0 the write
only erases, with e = 0 it only adds.
"""
import torch

from ... import memory as ref
from ..core import Mistake, Mistakes, exercise, expect_shape
from ..evaluation import Evaluation, call_naming
from ..expectations import explained
from . import inputs
from .batch_axis import lined_up
from .weightings import close, compare


def _parts(w, e, a):
    return w.unsqueeze(-1), e.unsqueeze(-2), a.unsqueeze(-2)                   # (B, N, 1), (B, 1, M), (B, 1, M)


def _written(erase, add):
    """A write M(i) * erase(W, E) + add(W, A), with W = w (B, N, 1), E = e (B, 1, M), A = a (B, 1, M)."""
    def write(memory, w, e, a):
        W, E, A = _parts(w, e, a)
        return memory * erase(W, E) + add(W, A)
    return write


def _add_before_erase(memory, w, e, a):
    W, E, A = _parts(w, e, a)
    return (memory + W * A) * (1 - W * E)


def _e_not_unsqueezed(memory, w, e, a):
    W = w.unsqueeze(-1)
    return memory * (1 - W * e) + W * a.unsqueeze(-2)                          # (B, N, 1) * (B, M): B meets N


def _erase_subtracted(memory, w, e, a):
    W, E, A = _parts(w, e, a)
    return memory - W * E + W * A


_RULE = "M~(i) = M(i) [1 - w(i) e], then M~(i) + w(i) a"
M = Mistakes(
    Mistake("rows_axis", "e or a, (B, M), meets w(i), (B, N, 1), without the rows' axis: broadcasting lines its "
            "batch axis up with the N rows (B = {B}, N = {N}; right only for a batch of one)",
            hint="e.unsqueeze(-2) and a.unsqueeze(-2), (B, 1, M)", shows=_e_not_unsqueezed),
    Mistake("add_before_erase", f"you added before erasing: the erase then wipes part of the new content; {_RULE}",
            shows=_add_before_erase),
    Mistake("erase_ignores_w", "the erase ignores w: every row is erased; e is multiplied by the row's weight, "
            "1 - w(i) e", shows=_written(lambda W, E: 1 - E, lambda W, A: W * A)),
    Mistake("no_erase", f"nothing is erased: you only added w(i) a; {_RULE}",
            shows=_written(lambda W, E: 1, lambda W, A: W * A)),
    Mistake("erase_subtracted", "you subtracted w(i) e instead of multiplying by (1 - w(i) e): the erase is "
            "multiplicative", shows=_erase_subtracted),
    Mistake("add_ignores_w", "the add ignores w: w(i) a is added to row i, not a to every row",
            shows=_written(lambda W, E: 1 - W * E, lambda W, A: A)),
    Mistake("e_a_swapped", "e and a are swapped: e is the erase vector (in 1 - w(i) e), a the add vector (in + w(i) a)",
            shows=lambda memory, w, e, a: ref.memory_write(memory, w, a, e)),
    Mistake("add_subtracted", "you subtracted the add term: the write ADDS w(i) a to each erased row, "
            "M(i) = M~(i) + w(i) a", shows=_written(lambda W, E: 1 - W * E, lambda W, A: -W * A)),
    Mistake("erase_step", "with a = 0 (nothing added) the write only erases, M(i) [1 - w(i) e], and yours does not: "
            "the erase step is wrong; each row is multiplied, element by element, by (1 - w(i) e)",
            hint="memory * (1 - w.unsqueeze(-1) * e.unsqueeze(-2))",
            shows=_written(lambda W, E: 1 - W.sqrt() * E, lambda W, A: W * A)),
    Mistake("add_step", "with e = 0 (nothing erased) the write only adds, M(i) + w(i) a, and yours does not: the add "
            "step is wrong; w(i) a is added to the erased memory", hint="+ w.unsqueeze(-1) * a.unsqueeze(-2)",
            shows=_written(lambda W, E: 1 - W * E, lambda W, A: W ** 2 * A)),
)
_VALUES = ("add_before_erase", "erase_ignores_w", "no_erase", "erase_subtracted", "add_ignores_w", "e_a_swapped")


def _steps(ev: Evaluation, answer, memory, w, e, a):
    """Probes for `explained`: the write with a = 0 must only erase, with e = 0 must only add."""
    W, E, A = _parts(w, e, a)

    def erase():
        out = ev.call(answer, memory.clone(), w, e, torch.zeros_like(a))
        return None if close(out, memory * (1 - W * E)) else M.erase_step

    def add():
        out = ev.call(answer, memory.clone(), w, torch.zeros_like(e), a)
        if close(out, memory - W * A):
            return M.add_subtracted
        return None if close(out, memory + W * A) else M.add_step

    return erase, add


@exercise("memory write: erase then add", reference=ref.memory_write, mistakes=M,
          right=[lambda memory, w, e, a: memory * (1 - torch.einsum("bn,bm->bnm", w, e))
                 + torch.einsum("bn,bm->bnm", w, a),
                 lambda memory, w, e, a: memory * (1 - w[:, :, None] * e[:, None, :]) + w[:, :, None] * a[:, None, :]])
def memory_write(ev: Evaluation, answer):
    """answer(memory (B, N, M), w (B, N), e (B, M), a (B, M)) -> the memory after the write, (B, N, M)."""
    tests = 0
    for seed, (B, N, width) in enumerate([(2, 6, 4), (3, 8, 5)]):
        r = ev.rng(10 + seed)
        memory, w = inputs.memory(r, B, N, width), inputs.weighting(r, B, N, peaked=3.0)
        e, a = inputs.tensor(r.uniform(0, 1, size=(B, width))), inputs.tensor(r.normal(size=(B, width)))
        out = call_naming(ev, [lined_up(B, N, M.rows_axis)], answer, memory.clone(), w, e, a)
        expect_shape(out, (B, N, width), "memory_write(memory, w, e, a)")
        with explained(*_steps(ev, answer, memory, w, e, a)):
            compare(ev, out, ref.memory_write(memory, w, e, a), "memory_write(memory, w, e, a)",
                    mistakes=M.variants(_VALUES, memory, w, e, a))
        tests += 1
    return tests
