"""Lesson 05, exercise 3: the cosine similarity of a key with every memory row.

    cosine_similarity(k (B, M), memory (B, N, M)) -> K (B, N), K(i) = k·M(i) / (|k| |M(i)| + eps)

The check draws two memories with a zero row (so that the eps shows), B != N (so that the key used without the rows'
axis crashes and is named), names the mistakes by their values, and otherwise the property a cosine breaks: it does
not change when k or the rows are scaled, it lies in [-1, 1]. Then a batch of one (B = 1).
"""
import numpy as np

from ... import memory as ref
from ..core import Mistake, Mistakes, exercise, expect_shape, to_numpy
from ..evaluation import Evaluation, call_naming
from . import inputs
from .batch_axis import batch_of_one, lined_up, squeeze_all
from .weightings import close, compare

_COSINE = "k·M(i) / (|k| |M(i)| + eps)"


def _dot(k, memory):
    return (memory @ k.unsqueeze(-1)).squeeze(-1)                              # (B, N)


def _over(denominator):
    """The cosine's dot product divided by denominator(|k| (B, 1), |M(i)| (B, N), k, memory)."""
    def cosine(k, memory, eps=1e-8):
        return _dot(k, memory) / denominator(k.norm(dim=-1, keepdim=True), memory.norm(dim=-1), k, memory)
    return cosine


def _eps_in_numerator(k, memory, eps=1e-6):
    return (_dot(k, memory) + eps) / (memory.norm(dim=-1) * k.norm(dim=-1, keepdim=True) + eps)


def _k_not_unsqueezed(k, memory, eps=1e-8):
    return (k * memory).sum(-1) / (memory.norm(dim=-1) * k.norm(dim=-1, keepdim=True) + eps)   # (B, M) meets N


M = Mistakes(
    Mistake("rows_axis", "the key k, (B, M), or its norm, (B,), meets the memory's (B, N, ...) values without the "
            "rows' axis: broadcasting lines its batch axis up with the N rows (B = {B}, N = {N}; right only for a "
            "batch of one)", hint="k.unsqueeze(-2), (B, 1, M), and k.norm(dim=-1, keepdim=True), (B, 1)",
            shows=_k_not_unsqueezed),
    Mistake("eps_in_numerator", f"a zero memory row gets similarity 1, not 0: eps is in the numerator too (eps / eps "
            f"= 1); it goes in the denominator only, {_COSINE}", shows=_eps_in_numerator),
    Mistake("key_norm_whole", "the key's norm is the norm of the whole batch of keys: each key has its own norm, "
            "|k| (B, 1)", hint="k.norm(dim=-1, keepdim=True)", shows=_over(lambda nk, nm, k, m: nm * k.norm() + 1e-8)),
    Mistake("memory_norm_whole", "the rows' norm is the norm of the whole memory: each row has its own norm, |M(i)| "
            "(B, N)", hint="memory.norm(dim=-1)", shows=_over(lambda nk, nm, k, m: m.norm() * nk + 1e-8)),
    Mistake("no_eps", f"a zero memory row gives NaN or inf (a division by |k| |M(i)| = 0): a small eps goes in the "
            f"denominator, {_COSINE}", shows=_over(lambda nk, nm, k, m: nm * nk)),
    Mistake("norms_added", f"you added the two norms, |k| + |M(i)|: the cosine divides by their PRODUCT, {_COSINE}",
            shows=_over(lambda nk, nm, k, m: nm + nk + 1e-8)),
    Mistake("dot_only", "you returned the dot product k·M(i) without dividing by the norms |k| |M(i)|",
            shows=_over(lambda nk, nm, k, m: 1.0)),
    Mistake("only_memory_norm", "you divided by |M(i)| only: the cosine divides by both norms, |k| |M(i)|",
            shows=_over(lambda nk, nm, k, m: nm + 1e-8)),
    Mistake("only_key_norm", "you divided by |k| only: the cosine divides by both norms, |k| |M(i)|",
            shows=_over(lambda nk, nm, k, m: nk + 1e-8)),
    Mistake("norms_squared", "the norms are not square-rooted: |u| = sqrt(sum_j u_j^2), not the sum of squares",
            shows=_over(lambda nk, nm, k, m: (m ** 2).sum(-1) * (k ** 2).sum(-1, keepdim=True) + 1e-8)),
    Mistake("not_scale_free", "your similarity changed when the key was scaled by 4 and the memory by 0.5: a cosine "
            f"depends only on the directions of k and M(i); the dot product is divided by the PRODUCT of the two "
            f"norms, {_COSINE}", shows=_over(lambda nk, nm, k, m: (nm * nk).sqrt() + 1e-8)),
    Mistake("out_of_range", "some similarities lie outside [-1, 1]: a cosine is the dot product divided by |k| "
            "|M(i)|, between -1 and 1", shows=lambda k, memory: 2 * ref.cosine_similarity(k, memory)),
    squeeze_all(lambda k, memory, eps=1e-8: (memory @ k[:, :, None]).squeeze() / (
        memory.norm(dim=-1) * k.norm(dim=-1, keepdim=True) + eps).squeeze(), "(memory @ k.unsqueeze(-1)).squeeze(-1)"),
)
_VALUES = ("eps_in_numerator", "key_norm_whole", "memory_norm_whole", "no_eps", "norms_added", "dot_only",
           "only_memory_norm", "only_key_norm", "norms_squared")


def _properties(ev: Evaluation, answer, k, memory):
    return [(lambda out: close(ev.call(answer, k * 4, memory * 0.5), to_numpy(out), atol=1e-4), M.not_scale_free),
            (lambda out: bool(np.all(np.abs(to_numpy(out)) <= 1 + 1e-5)), M.out_of_range)]


def _by_sums(k, memory, eps=1e-8):
    """A right answer written another way: element-wise sums and square roots."""
    dot = (k[:, None, :] * memory).sum(-1)
    return dot / ((memory ** 2).sum(-1).sqrt() * (k ** 2).sum(-1, keepdim=True).sqrt() + eps)


@exercise("cosine similarity", reference=ref.cosine_similarity, mistakes=M, right=[_by_sums])
def cosine_similarity(ev: Evaluation, answer):
    """answer(k (B, M), memory (B, N, M)) -> K (B, N)."""
    tests = 0
    for seed, (B, N, width) in enumerate([(2, 6, 4), (3, 9, 5)]):
        r = ev.rng(20 + seed)
        memory, k = inputs.memory(r, B, N, width) * 3, inputs.tensor(r.normal(size=(B, width)))
        memory[0, 1] = 0.0                                   # a zero row
        out = call_naming(ev, [lined_up(B, N, M.rows_axis)], answer, k, memory)
        expect_shape(out, (B, N), "cosine_similarity(k, memory)")
        compare(ev, out, ref.cosine_similarity(k, memory), "cosine_similarity(k, memory)",
                mistakes=M.variants(_VALUES, k, memory), properties=_properties(ev, answer, k, memory))
        tests += 1
    memory, k = inputs.memory(ev.rng(28), 1, 5, 3), inputs.tensor(ev.rng(29).normal(size=(1, 3)))
    batch_of_one(ev, answer, (k, memory), ref.cosine_similarity(k, memory), "cosine_similarity(k, memory)",
                 M.squeeze_all)
    return tests + 1
