"""Lesson 13, exercise 5: FlashAttention-2's forward pass as a Triton kernel.

    @triton.jit
    def flash_forward_kernel(Q, K, V, O, L, <strides>, H, T, scale, D, BLOCK_Q, BLOCK_K, CAUSAL)

One program per block of BLOCK_Q queries of one (batch, head); a loop over the blocks of keys with the online
softmax (m, l, acc rescaled by e^(m_old − m_new)); with CAUSAL the loop ends at the diagonal; out = acc / l once;
L = m + log l stored (course_utils.triton_kernel is the reference, course_utils.triton_attention the launcher).

The check sends the kernel's source text to Triton's interpreter in a process of its own (one run per check:
course_utils.triton_interpreter), on five fixed float32 cases (triton_probe.CASES: T not a multiple of the blocks,
batch and heads laid out differently in q, k, v, scores growing along the keys, scores far below zero; inputs
drawn from fixed seeds, so `random=False`), and compares the output and L with the lesson's tiled attention
(efficient_attention, in float64). The interpreter tells it every load and store the kernel made: a read or write
past T, a pointer into another (batch, head) or outside every tensor, the tiles of keys each program visited. So
each mistake is named by the property its evidence singles out (running every wrong kernel of the registry in the
interpreter at each check would multiply its time by ten): the memory first, then the values case by case, then
the tiles. Where Triton cannot run (macOS, Windows, no package) the check says so in one line (○) and the lesson
goes on.
"""
import inspect
import math
import re
import textwrap

import numpy as np
import torch

from ... import efficient_attention as ea
from ...triton_attention import triton_status
from ...triton_interpreter import run_kernel
from ...triton_probe import CASES, inputs
from ..core import NOT_IMPLEMENTED, REGISTRY, Exercise, Mistake, Mistakes
from ..evaluation import LearnerNotImplemented
from ..expectations import fail
from ..mistakes import Said
from .triton_forward_kernels import WRONG, KernelSource, exp2_kernel, reference

_RESCALE = "l = l * alpha + tl.sum(p, axis=1) and acc = acc * alpha[:, None] + tl.dot(p, v), alpha = tl.exp(m - m_new)"
M = Mistakes(
    Mistake("unmasked_store", "program {program} wrote {what} at position {t}, past the last position T − 1 = "
            "{last}: the last block of queries holds fewer than BLOCK_Q real rows, and a store must leave the others "
            "alone", hint="tl.store(..., mask=rows[:, None] < T) for the output, mask=rows < T for L",
            shows=WRONG["unmasked_store"]),
    Mistake("unmasked_load", "program {program} read {what} at position {t}, past the last position T − 1 = {last} "
            "(the rows there are not this tensor's: NaN here, anything on a GPU): the last, partial block must be read "
            "with a mask", hint="tl.load(ptrs, mask=cols[:, None] < T, other=0.0), and the scores of keys past T set "
            "to -inf", shows=WRONG["unmasked_load"]),
    Mistake("stride", "program {program} works on batch {b}, head {h}, but read {what} {where}: every tensor has its "
            "own strides (q, k and v are laid out differently here), offset = b·stride_b + h·stride_h + t·stride_t",
            hint="K + b * stride_kb + h * stride_kh + cols[:, None] * stride_kt + dims[None, :]: k's own strides, in "
            "this order", shows=WRONG["stride"]),
    Mistake("no_divide", "in {case}, the output is acc, the unnormalised sum Σ_j e^(s_tj − m_t) v_j: divide it by ℓ_t "
            "once, after the last block of keys", hint="out = acc / l[:, None]", shows=WRONG["no_divide"]),
    Mistake("sum_not_rescaled", "in {case}, out · e^L is right but L is not (rows {rows}): the accumulator is rescaled "
            "when the maximum grows, the running sum ℓ is not", hint=_RESCALE, shows=WRONG["sum_not_rescaled"]),
    Mistake("acc_not_rescaled", "in {case}, L is right but the output is not (rows {rows}, where the maximum grew "
            "after the first block of keys): the accumulator must be rescaled by e^(m_old − m_new) like ℓ",
            hint=_RESCALE, shows=WRONG["acc_not_rescaled"]),
    Mistake("lse_base2", "in {case}, the output is right and L is log2(e) times too large: L is m + log ℓ in base e, "
            "as the lesson's backward pass reads it (an exp2 kernel keeps m in base 2: convert it back)",
            hint="with exp2: tl.store(L + ..., m * 0.6931471805599453 + tl.log(l)); with exp: m + tl.log(l)",
            shows=WRONG["lse_base2"]),
    Mistake("lse", "in {case}, the output is right but L is not (rows {rows}): L_t = m_t + log ℓ_t, one number per "
            "query, what the backward pass needs to recompute each tile's weights", hint="tl.store(L + b * stride_lb + "
            "h * stride_lh + rows, m + tl.log(l), mask=rows < T)", shows=WRONG["lse"]),
    Mistake("diagonal", "with CAUSAL, query t sees the keys after it inside its diagonal tile (its output equals "
            "attention over every key up to the end of its block): the diagonal tile needs the element-wise mask "
            "j ≤ t, positions in the whole sequence", hint="keep = keep & (cols[None, :] <= rows[:, None]), then "
            "s = tl.where(keep, s, float('-inf'))", shows=WRONG["diagonal"]),
    Mistake("no_max", "scores that grow to ~380 give {what}: e^s overflows float32 beyond s ≈ 88; subtract the running "
            "maximum before every exponent", hint="p = tl.exp(s - m_new[:, None]), alpha = tl.exp(m - m_new)",
            shows=WRONG["no_max"]),
    Mistake("mask_after_exp", "with CAUSAL and scores growing along the keys, queries at the start of a diagonal tile "
            "get {what} (rows {rows}) while the same scores without the mask are right: the maximum m came from keys "
            "the query may not see, and every visible e^(s − m) underflowed to 0. Mask the scores (−∞) before the "
            "maximum and the exponent", hint="s = tl.where(keep, s, float('-inf')) before m_new = tl.maximum(...)",
            shows=WRONG["mask_after_exp"]),
    Mistake("max_zero", "rows whose every score is below −100 give {what}, the other cases are right: the running "
            "maximum starts at 0, above every score, so every e^(s − m) underflows to 0. Start it at −∞",
            hint='m = tl.full((BLOCK_Q,), float("-inf"), tl.float32)', shows=WRONG["max_zero"]),
    Mistake("every_tile", "the values are right, but with CAUSAL your {programs} programs visited {visited} tiles of "
            "keys where {needed} hold a visible key: the loop of a block of queries can end at the diagonal (key "
            "blocks after its last query are never loaded), which halves the work of causal attention",
            hint="end = tl.minimum(T, (pid_q + 1) * BLOCK_Q) if CAUSAL; for start in range(0, end, BLOCK_K)",
            shows=WRONG["every_tile"]),
)

_CASE_WORDS = {"random": "the case with normal scores (T = 24, 2 batches x 2 heads)",
               "random_causal": "the causal case (T = 40, BLOCK_K = 8)",
               "growing": "the case with scores growing along the keys",
               "growing_causal": "the causal case with scores growing along the keys",
               "negative": "the case with every score below −100"}


def _source(answer):
    """(source text, kernel name) of an answer; LearnerNotImplemented for an unfinished one."""
    if inspect.isclass(answer) and issubclass(answer, KernelSource):
        try:
            text, name = answer().forward(), answer.name
        except NotImplementedError:
            raise LearnerNotImplemented() from None
    else:
        from ...triton_attention import kernel_source
        try:
            text = kernel_source(answer)             # read where the kernel lives (under the grader: its kernel)
            name = re.findall(r"^def (\w+)\(", text, re.M)[-1]    # (its own def comes after its helpers')
        except (OSError, TypeError, IndexError):
            fail(Said("unchecked", "the check could not read your kernel's source: define it in a cell with "
                      "@triton.jit and pass the function itself, check.flash_forward_kernel(flash_forward_kernel)"))
    body = textwrap.dedent(text)
    if "raise NotImplementedError" in body:
        raise LearnerNotImplemented()
    return text, name


def _expected(case):
    """(out, lse, m) of the lesson's tiled attention on the case, in float64."""
    q, k, v = (x.double() for x in inputs(case))
    out, lse = ea.tiled_attention(q, k, v, 16, causal=case["causal"])
    s = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    if case["causal"]:
        s = s.masked_fill(torch.ones(s.shape[-2:], dtype=torch.bool).triu(1), float("-inf"))
    return out.numpy(), lse.numpy(), s.amax(-1).numpy()


def _close(a, e, atol=1e-4, rtol=1e-4):
    return np.isfinite(a) & (np.abs(a - e) <= atol + rtol * np.abs(e))


def _rows(ok):
    """The first wrong rows (positions) of a (B, H, T) array of row verdicts."""
    bad = sorted(set(np.nonzero(~ok)[-1].tolist()))
    return ", ".join(map(str, bad[:6])) + (", ..." if len(bad) > 6 else "")


def _memory(name, report):
    """The mistakes the loads and stores single out (the interpreter saw every pointer)."""
    T = dict((c["name"], c["T"]) for c in CASES)[name]
    what = {"Q": "q", "K": "k", "V": "v", "O": "the output", "L": "L"}
    named = lambda program: f"(pid_q {program[0]}, pid_bh {program[1]})"   # noqa: E731
    for program, tensor, t in report["pad_writes"]:
        fail(M.unmasked_store.at(program=named(program), what=what[tensor], t=t, last=T - 1))
    if report["input_writes"]:
        fail(Said("in_place", f"your kernel wrote into q, k or v ({report['input_writes']} values): it stores the "
                  "output and L only, through O and L"))
    for program, tensor, t in report["pad_reads"]:
        fail(M.unmasked_load.at(program=named(program), what=what[tensor], t=t, last=T - 1))
    for program, touched in sorted(report["pairs"].items()):
        own = touched.get("Q") or touched.get("O") or set()
        if len(own) != 1:
            continue
        (b, h), = own
        for tensor, pairs in sorted(touched.items()):
            others = sorted(pairs - {(b, h)})
            if others:
                where = "of " + ", ".join(f"batch {ob}, head {oh}" for ob, oh in others[:3])
                fail(M.stride.at(program=named(program), b=b, h=h, what=what[tensor], where=where))
    if report["stray"]:
        fail(M.stride.at(program="(some)", b="b", h="h", what="memory",
                         where=f"outside every tensor ({report['stray']} values, between q, k, v, out and L)"))


def _values(name, report):
    """Name what the output and L of one case break (or return when both are right)."""
    out, lse = report["out"], report["lse"]
    e_out, e_lse, e_m = _expected(next(c for c in CASES if c["name"] == name))
    rows_out, rows_lse = _close(out, e_out).all(-1), _close(lse, e_lse, atol=2e-4, rtol=1e-5)
    if rows_out.all() and rows_lse.all():
        return
    words = _CASE_WORDS[name]
    finite = np.isfinite(out).all() and np.isfinite(lse).all()
    if name == "random_causal" and finite:
        q, k, v = (x.double() for x in inputs(CASES[1]))
        t = torch.arange(q.shape[-2])
        block = (t[None, :] < (t[:, None] // 16 + 1) * 16)               # keys up to the end of the query's block
        if _close(out, ea.tiled_attention(q, k, v, 16, mask=block)[0].numpy()).all():
            fail(M.diagonal)
    if name == "growing" and not finite:
        fail(M.no_max.at(what="NaN or inf"))
    if name == "growing_causal" and not rows_out.all():
        fail(M.mask_after_exp.at(what="NaN or 0" if not finite else "wrong values", rows=_rows(rows_out)))
    if name == "negative" and not rows_out.all():
        fail(M.max_zero.at(what="NaN" if not finite else "wrong values"))
    ell = np.exp(e_lse - e_m)[..., None]
    if rows_lse.all() and _close(out, e_out * ell).all():
        fail(M.no_divide.at(case=words))
    if rows_out.all():
        if _close(lse, e_lse * math.log2(math.e), atol=2e-4, rtol=1e-5).all():
            fail(M.lse_base2.at(case=words))
        fail(M.lse.at(case=words, rows=_rows(rows_lse)))
    if finite and _close(out * np.exp(lse)[..., None], e_out * np.exp(e_lse)[..., None], rtol=1e-3).all():
        fail(M.sum_not_rescaled.at(case=words, rows=_rows(rows_lse)))
    if rows_lse.all():
        fail(M.acc_not_rescaled.at(case=words, rows=_rows(rows_out)))
    bad = ~(rows_out & rows_lse)
    fail(Said("values", f"in {words}, wrong values: the output or L of rows {_rows(~bad)} (largest difference "
              f"{np.nanmax(np.abs(out - e_out)):.3g} in the output, {np.nanmax(np.abs(lse - e_lse)):.3g} in L)"))


def _tiles(name, report):
    """With CAUSAL, the tiles of keys each program loaded past its last query (never needed)."""
    case = next(c for c in CASES if c["name"] == name)
    visited = needed = 0
    for (x, _), tiles in report["ktiles"].items():
        last = min(case["T"], (x + 1) * case["block_q"]) - 1
        visited += len(tiles)
        needed += sum(first <= last for first, _ in tiles)
    if visited > needed:
        fail(M.every_tile.at(programs=len(report["programs"]), visited=visited, needed=needed))


def check_kernel(ev, answer):
    text, name = _source(answer)
    reports = run_kernel(text, name, CASES)
    if "died" in reports:
        fail(Said("crash", f"the interpreter's process died running your kernel ({reports['died']}): a pointer "
                  "reached memory far outside the tensors. Check the masks past T and the strides of each tensor"))
    if "timeout" in reports:
        fail(Said("crash", f"your kernel did not finish in {reports['timeout']} s in the interpreter: does its loop "
                  "over the blocks of keys end (range(0, end, BLOCK_K))?"))
    if "error" in reports:
        fail(Said("crash", f"your kernel could not be defined: {reports['error']}"))
    for case in CASES:
        error = reports[case["name"]].get("error")
        if error:
            fail(Said("crash", f"your kernel raised {error} in {_CASE_WORDS[case['name']]}"))
    for case in CASES:
        _memory(case["name"], reports[case["name"]])
    for case in CASES:
        _values(case["name"], reports[case["name"]])
    for case in CASES:
        if case["causal"]:
            _tiles(case["name"], reports[case["name"]])
    return 2 * len(CASES) + 2


class TritonExercise(Exercise):
    """An exercise whose check needs Triton: where it cannot run, one ○ line says why and what to do."""

    @staticmethod
    def runs_here():
        """(True, "") where the check can run, else (False, why): for a test runner to skip with the reason."""
        return triton_status()

    def evaluation(self, answer, seed_offset=0):
        ok, why = triton_status()
        if not ok:
            from ..evaluation import Evaluation
            outcome = self._outcome(NOT_IMPLEMENTED, f"○ {self.title}: not checked here. {why}")
            return outcome, Evaluation(self.reference)
        return super().evaluation(answer, seed_offset)


check_kernel.__name__ = "flash_forward_kernel"
flash_forward_kernel = TritonExercise(check_kernel, "the forward kernel in Triton", "flash_forward_kernel", reference,
                                      (), M, right=[exp2_kernel], random=False)
REGISTRY.setdefault(flash_forward_kernel.lesson, {})[flash_forward_kernel.exercise] = flash_forward_kernel
