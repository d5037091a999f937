"""Lesson 03, exercise 2: Bahdanau's additive score.

    additive_score(s (B, d_s), h (B, T, d_h), W_a (d_a, d_s + d_h), v_a (d_a,)) -> e (B, T),
    e_i = v_aᵀ tanh(W_a [s; h_i])

The check compares e on three inputs whose d_s, d_h and d_a differ (so that W_a multiplied without its transpose,
or split at the wrong column, crashes and is named by torch's sizes); where no mistake's values match, it moves one
sequence's s (then h) and names scores of another sequence that moved with it (a repeat or a view that mixes the
batch).
"""
import functools

import torch
import torch.nn.functional as F

from ... import scores as ref
from ..core import ExerciseError, Mistake, Mistakes, exercise, randn
from ..evaluation import Evaluation, call_naming
from ..expectations import explained
from ..torch_errors import MATMUL


def _s_h(s, h):
    """[s; h_i] at every position: (B, T, d_s + d_h)."""
    return torch.cat([s[:, None, :].expand(-1, h.shape[1], -1), h], -1)


def wrong(s_h=_s_h, W=lambda W_a: W_a.T, f=torch.tanh, score=lambda hidden, v_a: hidden @ v_a):
    """The additive score with one mistake (every default is the right choice): s_h(s, h) the concatenation; W(W_a)
    what it multiplies; f the nonlinearity; score(hidden (B, T, d_a), v_a)."""
    def additive_score(s, h, W_a, v_a):
        return score(f(s_h(s, h) @ W(W_a)), v_a)
    return additive_score


def _split_at_d_h(s, h, W_a, v_a):
    """W_a split into its two blocks at d_h instead of d_s."""
    d = h.shape[-1]
    return torch.tanh((s @ W_a[:, :d].T)[:, None, :] + h @ W_a[:, d:].T) @ v_a


def _repeat_view(s, h, W_a, v_a):
    B, T, _ = h.shape
    return wrong(s_h=lambda s, h: torch.cat([s.repeat(T, 1).view(B, T, -1), h], -1))(s, h, W_a, v_a)


def _h_mixed(s, h, W_a, v_a):
    B, T, _ = h.shape
    return ref.additive_score(s, h.transpose(0, 1).reshape(B, T, -1), W_a, v_a)


NONLINEARITIES = {"relu": torch.relu, "leaky_relu": F.leaky_relu, "sigmoid": torch.sigmoid, "gelu": F.gelu,
                  "silu": F.silu, "elu": F.elu, "softplus": F.softplus, "softsign": F.softsign,
                  "hardtanh": F.hardtanh}
_FORMULA = "e_i = v_aᵀ tanh(W_a [s; h_i])"
M = Mistakes(
    Mistake("W_a_not_transposed", "W_a is not transposed: W_a (d_a, d_s + d_h) multiplies the column [s; h_i] from "
            "the left, and [s; h_i] is a row of the (B, T, d_s + d_h) concatenation", hint="s_h @ W_a.T",
            shows=wrong(W=lambda W_a: W_a)),
    Mistake("split_at_d_h", "W_a is split at the wrong column: W_a [s; h_i] = W_s s + W_h h_i, where W_s is W_a's "
            "first d_s columns (d_s, the width of s) and W_h its other d_h columns",
            hint="W_a[:, :d_s] and W_a[:, d_s:], d_s = s.shape[-1]",
            shows=_split_at_d_h),
    Mistake("no_tanh", f"the tanh is missing: {_FORMULA}", hint="torch.tanh(s_h @ W_a.T) @ v_a",
            shows=wrong(f=lambda x: x)),
    Mistake("tanh_after", f"the tanh is applied after v_a: {_FORMULA}, the tanh inside",
            hint="torch.tanh(s_h @ W_a.T) @ v_a", shows=wrong(f=lambda x: x, score=lambda x, v_a: torch.tanh(x @ v_a))),
    Mistake("concat_order", "the concatenation is in the wrong order: W_a's columns expect [s; h_i], s first",
            hint="torch.cat([s_rep, h], dim=-1)",
            shows=wrong(s_h=lambda s, h: torch.cat([h, s[:, None, :].expand(-1, h.shape[1], -1)], -1))),
    Mistake("no_v_a", "v_a is missing: the hidden units are summed, where v_a weighs them",
            hint="torch.tanh(...) @ v_a", shows=wrong(score=lambda x, v_a: x.sum(-1))),
    Mistake("keeps_hidden_units", "e keeps the d_a hidden units: v_a turns them into one score per position",
            hint="torch.tanh(...) @ v_a", shows=wrong(score=lambda x, v_a: x)),
    Mistake("softmax_of_scores", "e went through a softmax: the additive score is the raw score e_i; the weights come "
            "later, from the masked softmax", hint="return torch.tanh(s_h @ W_a.T) @ v_a",
            shows=wrong(score=lambda x, v_a: torch.softmax(x @ v_a, -1))),
    *[Mistake(f"nonlinearity_{name}", f"the nonlinearity is {name} instead of tanh: {_FORMULA}", hint="torch.tanh",
              shows=wrong(f=f)) for name, f in NONLINEARITIES.items()],
    Mistake("mixes_batch_s", "the scores of one sequence change when another sequence's s changes: the states of "
            "the batch are mixed before the score; each sequence must meet its own s at every one of its positions",
            hint="s[:, None, :].expand(B, T, d_s) (s.repeat(T, 1).view(B, T, d_s) puts the B states one after "
            "another T times)", shows=_repeat_view),
    Mistake("mixes_batch_h", "the scores of one sequence change when another sequence's h changes: the sequences of "
            "the batch are mixed before the score; each score reads its own sequence's h_i",
            hint="keep h as (B, T, d_h) and work on its last axis (a reshape or a view across the batch mixes the "
            "sequences)", shows=_h_mixed),
)
VALUES = [m for m in M if m.key not in ("W_a_not_transposed", "split_at_d_h", "mixes_batch_s", "mixes_batch_h")]


def matmul_errors(d_s, d_h, d_a):
    """W_a multiplied without its transpose; W_a split into blocks at d_h instead of d_s (torch's sizes)."""
    def named(match):
        cols1, rows2, cols2 = int(match["c1"]), int(match["r2"]), int(match["c2"])
        if (cols1, rows2, cols2) == (d_s + d_h, d_a, d_s + d_h):
            return M.W_a_not_transposed
        if d_s != d_h and cols2 == d_a and {cols1, rows2} == {d_s, d_h}:
            return M.split_at_d_h
        return None
    return [(MATMUL, named)]


def mixes_sequences(ev: Evaluation, answer, s, h, W_a, v_a):
    """A probe: the mistake when the scores of one sequence change with another sequence's s or h (or None)."""
    if s.shape[0] < 2:
        return None
    s_moved, h_moved = s.clone(), h.clone()
    s_moved[-1] += 1.0                                      # only the last sequence's s (or h) changes
    h_moved[-1] += 1.0
    try:
        e = ev.call(answer, s, h, W_a, v_a)
        for mistake, args in ((M.mixes_batch_s, (s_moved, h)), (M.mixes_batch_h, (s, h_moved))):
            moved = ev.call(answer, *args, W_a, v_a)
            if not torch.allclose(torch.as_tensor(moved)[:-1], torch.as_tensor(e)[:-1], atol=1e-5):
                return mistake
    except (ExerciseError, RuntimeError, TypeError, ValueError):
        return None
    return None


def _split(s, h, W_a, v_a):
    """The paper's form, W_s s + W_h h_i (W_a split at d_s), v_a by a sum."""
    d_s = s.shape[-1]
    hidden = torch.tanh((s @ W_a[:, :d_s].T)[:, None, :] + h @ W_a[:, d_s:].T)
    return (hidden * v_a).sum(-1)


def _einsum(s, h, W_a, v_a):
    s_h = torch.cat([s[:, None, :].repeat(1, h.shape[1], 1), h], -1)
    return torch.einsum("bta,a->bt", torch.tanh(torch.einsum("btk,ak->bta", s_h, W_a)), v_a)


@exercise("additive score", reference=ref.additive_score, mistakes=M, right=[_split, _einsum])
def additive_score(ev: Evaluation, answer):
    """answer(s (B, d_s), h (B, T, d_h), W_a (d_a, d_s + d_h), v_a (d_a,)) -> e (B, T)."""
    tests = 0
    for seed, (B, T, d_s, d_h, d_a) in enumerate([(3, 7, 5, 5, 8), (2, 5, 4, 6, 3), (1, 4, 3, 8, 5)]):
        g = ev.rng(seed)
        s, h = randn(g, B, d_s), randn(g, B, T, d_h)
        W_a, v_a = randn(g, d_a, d_s + d_h, scale=0.7), randn(g, d_a)
        e = call_naming(ev, matmul_errors(d_s, d_h, d_a), answer, s, h, W_a, v_a)
        with explained(functools.partial(mixes_sequences, ev, answer, s, h, W_a, v_a)):
            ev.expect_close(e, ref.additive_score(s, h, W_a, v_a), f"e (B={B}, T={T}, d_s={d_s}, d_h={d_h})",
                            mistakes=M.variants(VALUES, s, h, W_a, v_a))
        tests += 1
    return tests
