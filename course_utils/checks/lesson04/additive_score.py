"""Lesson 04, exercise 2: the additive score without the concatenation.

    additive_score(s (B, d_s), h (B, T, d_h), W_a (d_a, d_s + d_h), v_a (d_a,)) -> v_a^T tanh(W_s s + W_h h_i), (B, T)

W_a = [W_s W_h] is split after its first d_s columns, and W_s s, (B, d_a), is added to W_h h, (B, T, d_a), as
(B, 1, d_a): the same scores as lesson 03's v_a^T tanh(W_a [s; h_i]) without building [s; h_i] for every position.
The check's first configuration has square weights (d_s = d_h = d_a) and B = T, so that weights used without .T and
W_s s added without its T axis still run and are named; then d_s != d_h, where a split at the wrong column
crashes. Last, it measures the largest tensor the answer builds: no (B, T, d_s + d_h) concatenation.
"""
import torch

from ... import scores as ref
from ..core import Mistake, Mistakes, exercise, expect, randn
from ..evaluation import Evaluation
from .scores import batch_mixups, score_tests


def _split(W_a, s):
    """W_s (d_a, d_s), W_h (d_a, d_h): W_a split after its first d_s columns."""
    return W_a[:, :s.shape[-1]], W_a[:, s.shape[-1]:]


def _reference(s, h, W_a, v_a):
    """The exercise's way: W_s s (B, d_a) broadcast over the T rows of W_h h (B, T, d_a)."""
    W_s, W_h = _split(W_a, s)
    return torch.tanh((s @ W_s.T)[:, None, :] + h @ W_h.T) @ v_a


def _inside(s, h, W_a):
    W_s, W_h = _split(W_a, s)
    return (s @ W_s.T)[:, None, :] + h @ W_h.T                              # (B, T, d_a)


def _split_at_d_h(s, h, W_a, v_a):
    W_s, W_h = W_a[:, :h.shape[-1]], W_a[:, h.shape[-1]:]
    return torch.tanh((s @ W_s.T)[:, None, :] + h @ W_h.T) @ v_a


def _blocks_swapped(s, h, W_a, v_a):
    """The concatenation read as [h; s]: the first d_h columns multiply h."""
    W_h, W_s = W_a[:, :h.shape[-1]], W_a[:, h.shape[-1]:]
    return torch.tanh((s @ W_s.T)[:, None, :] + h @ W_h.T) @ v_a


def _untransposed(W_s_too=True, W_h_too=True):
    """W_s and/or W_h multiplied without .T (runs only where d_s = d_a, d_h = d_a)."""
    def additive(s, h, W_a, v_a):
        W_s, W_h = _split(W_a, s)
        return torch.tanh((s @ (W_s if W_s_too else W_s.T))[:, None, :] + h @ (W_h if W_h_too else W_h.T)) @ v_a
    return additive


def _no_t_axis(s, h, W_a, v_a):
    W_s, W_h = _split(W_a, s)
    return torch.tanh(s @ W_s.T + h @ W_h.T) @ v_a                         # (B, d_a) lined up with the T axis


def _tanh_each_term(s, h, W_a, v_a):
    W_s, W_h = _split(W_a, s)
    return (torch.tanh(s @ W_s.T)[:, None, :] + torch.tanh(h @ W_h.T)) @ v_a


_FIRST_D_S = "W_a = [W_s W_h] splits after its first d_s columns: W_s = W_a[:, :d_s], W_h = W_a[:, d_s:]"
M = Mistakes(
    Mistake("no_tanh", "the tanh is missing: e_i = v_a^T tanh(W_s s + W_h h_i)",
            shows=lambda s, h, W_a, v_a: _inside(s, h, W_a) @ v_a),
    Mistake("tanh_after_v", "the tanh is applied after the projection by v_a: e_i = v_a^T tanh(W_s s + W_h h_i), "
            "tanh first", shows=lambda s, h, W_a, v_a: torch.tanh(_inside(s, h, W_a) @ v_a)),
    Mistake("no_v", "v_a is missing: the d_a entries of tanh(W_s s + W_h h_i) are summed, where v_a weights them",
            hint="tanh(...) @ v_a", shows=lambda s, h, W_a, v_a: torch.tanh(_inside(s, h, W_a)).sum(-1)),
    Mistake("tanh_each_term", "the tanh is taken of W_s s and of W_h h_i separately: the tanh is taken of their SUM, "
            "v_a^T tanh(W_s s + W_h h_i)", shows=_tanh_each_term),
    Mistake("blocks_swapped", "the blocks of W_a are swapped: its first d_s columns multiply s, the rest multiply h_i",
            hint=_FIRST_D_S, shows=_blocks_swapped),
    Mistake("weights_untransposed", "W_s and W_h are used without transposing: W_s s for a batch of rows s is s W_sᵀ",
            hint="s @ W_s.T, h @ W_h.T", shows=_untransposed()),
    Mistake("W_h_untransposed", "W_h is used without transposing: W_h h_i for the rows h_i of h is h W_hᵀ (W_h has "
            "shape (d_a, d_h))", hint="h @ W_h.T", shows=_untransposed(W_s_too=False)),
    Mistake("W_s_untransposed", "W_s is used without transposing: W_s s for a batch of rows s is s W_sᵀ (W_s has "
            "shape (d_a, d_s))", hint="s @ W_s.T", shows=_untransposed(W_h_too=False)),
    Mistake("no_t_axis", "W_s s (B, d_a) is added to W_h h (B, T, d_a) without a T axis, so it broadcasts over the "
            "wrong axis: position i gets the s of example i", hint="(s @ W_s.T)[:, None, :], shape (B, 1, d_a)",
            shows=_no_t_axis),
    Mistake("sizes_mixed", "your function works when d_s = d_h but fails when they differ (here d_s = {d_s}, d_h = "
            "{d_h}): d_h is used where d_s belongs, or the reverse", hint=_FIRST_D_S, shows=_split_at_d_h),
    Mistake("concatenated", "the scores are right, but your function builds the concatenation [s; h_i] for every "
            "position (a tensor of shape {shape}, (B, T, d_s + d_h)), which is what this exercise does without: "
            "split W_a = [W_s W_h] and add W_s s, as (B, 1, d_a), to W_h h (B, T, d_a)",
            hint="W_a[:, :d_s] and W_a[:, d_s:]", shows=ref.additive_score),
    *batch_mixups(_reference, "(s @ W_s.T)[:, None, :] + h @ W_h.T"),
)
_VALUES = [m for m in M if m.key not in ("sizes_mixed", "concatenated")]


def _draw(g, B, T, d_s, d_h, d_a):
    s, h = randn(g, B, d_s), randn(g, B, T, d_h)
    return s, h, randn(g, d_a, d_s + d_h, scale=0.7), randn(g, d_a)


def _crash(text, args, passed):
    """A crash where d_s != d_h after configs with d_s = d_h gave the right scores: the two sizes are mixed up."""
    d_s, d_h = args[0].shape[-1], args[1].shape[-1]
    if d_s != d_h and any(p[0].shape[-1] == p[1].shape[-1] for p in passed):
        return M.sizes_mixed.at(d_s=d_s, d_h=d_h)
    return None


def _split_from_the_end(s, h, W_a, v_a):
    """A right answer written another way: W_h as the last d_h columns, F.linear, v_a as a weighted sum."""
    d_h = h.shape[-1]
    u = torch.nn.functional.linear(h, W_a[:, -d_h:]) + torch.nn.functional.linear(s, W_a[:, :-d_h]).unsqueeze(-2)
    return (torch.tanh(u) * v_a).sum(-1)


@exercise("additive score without the concatenation", reference=_reference, mistakes=M, right=[_split_from_the_end])
def additive_score(ev: Evaluation, answer):
    """answer(s, h, W_a (d_a, d_s + d_h), v_a (d_a,)) -> v_a^T tanh(W_s s + W_h h_i), the same as lesson 03."""
    # square weights first (d_s = d_h = d_a), so that W_s and W_h used without .T still run and are named, and
    # B = T, so that W_s s added without its T axis still runs (it broadcasts over the wrong axis) and is named
    tests = score_tests(ev, answer, _reference, [(4, 4, 5, 5, 5), (2, 5, 4, 4, 3), (3, 6, 5, 7, 4), (1, 3, 6, 6, 8)],
                        _draw, lambda *args: M.variants(_VALUES, *args),
                        lambda s, h, W_a, v_a: f"e (d_s={s.shape[-1]}, d_h={h.shape[-1]})", _crash)
    # the point: no (B, T, d_s + d_h) tensor; wide s and h and d_a = 2, so that nothing else comes near that size
    B, T, d_s, d_h = 2, 16, 64, 64
    _, elements, shape = ev.call_measured(answer, *_draw(ev.rng(40), B, T, d_s, d_h, 2))
    expect(elements < B * T * (d_s + d_h), M.concatenated.at(shape=shape))
    return tests + 1
