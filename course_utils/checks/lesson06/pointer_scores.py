"""Lesson 06, exercise 1: the pointer's scores (additive attention over the input positions).

    pointer_scores(h (B, T, d_h), s (B, d_s), W_h (d_h, d_attn), W_s (d_s, d_attn), v (d_attn,)) -> e (B, T),
        e_j = v^T tanh(W_h h_j + W_s s), before any softmax; here the weights act on the right: h @ W_h, s @ W_s

The check draws three configurations: the first two with square weights (so that transposed or swapped weights
still run and are named), the second with B = T (so that W_s s added without its positions axis still runs, and is
named by its values), the first with B != T (where it crashes, named by torch's sizes). It names the mistakes by
their values, and otherwise whether each score uses the decoder state of its own example.
"""
import functools

import numpy as np
import torch

from ... import pointer as ref
from ..core import Mistake, Mistakes, exercise, expect_shape, randn, to_numpy
from ..evaluation import Evaluation, call_naming
from ..expectations import explained
from ..torch_errors import BROADCAST

_E = "e_j = v^T tanh(W_h h_j + W_s s)"


def _scores(keys=lambda h, W_h: h @ W_h, query=lambda s, W_s: (s @ W_s).unsqueeze(1), inside=torch.tanh,
            combine=torch.add, outside=lambda x: x):
    """pointer_scores written from its parts (each the right one unless given): keys (B, T, d_attn), query
    (B, 1, d_attn), combined, the tanh inside, v, then what is applied outside."""
    def pointer_scores(h, s, W_h, W_s, v):
        return outside(inside(combine(keys(h, W_h), query(s, W_s))) @ v)
    return pointer_scores


def _tanh_each(h, s, W_h, W_s, v):
    return (torch.tanh(h @ W_h) + torch.tanh(s @ W_s).unsqueeze(1)) @ v


def _repeated_s(h, s, W_h, W_s, v):
    B, T, _ = h.shape
    return torch.tanh(h @ W_h + (s @ W_s).repeat(T, 1).reshape(B, T, -1)) @ v          # examples mixed


M = Mistakes(
    Mistake("not_broadcast", "s is not broadcast over the positions: (B, T, d_attn) + (B, d_attn) lines the batch "
            "axis of s up with the positions axis; W_s s is added to every position of its own example",
            hint="(s @ W_s).unsqueeze(1), (B, 1, d_attn)", shows=_scores(query=lambda s, W_s: s @ W_s)),
    Mistake("softmax", "the scores are a raw score per position, before any softmax: the softmax comes later (with "
            f"the mask), so the answer is {_E} as it is", shows=_scores(outside=lambda e: torch.softmax(e, -1))),
    Mistake("no_tanh", f"tanh is missing: {_E} applies tanh before the projection by v",
            shows=_scores(inside=lambda x: x)),
    Mistake("tanh_after_v", f"tanh is applied after the projection by v: {_E}, tanh first",
            shows=_scores(inside=lambda x: x, outside=torch.tanh)),
    Mistake("no_v", "v is missing: the d_attn entries of tanh(W_h h_j + W_s s) are summed, where v weights them",
            hint="tanh(...) @ v", shows=lambda h, s, W_h, W_s, v: torch.tanh(h @ W_h + (s @ W_s).unsqueeze(1)).sum(-1)),
    Mistake("tanh_each", "tanh is applied to each projection separately, tanh(W_h h_j) + tanh(W_s s): the two terms "
            f"are added first, then one tanh, {_E}", shows=_tanh_each),
    Mistake("tanh_keys_only", f"tanh is applied to W_h h_j only: the two projections are added first, then one tanh "
            f"is applied to the sum, {_E}", shows=_scores(keys=lambda h, W_h: torch.tanh(h @ W_h), inside=lambda x: x)),
    Mistake("tanh_query_only", f"tanh is applied to W_s s only: the two projections are added first, then one tanh "
            f"is applied to the sum, {_E}",
            shows=_scores(query=lambda s, W_s: torch.tanh(s @ W_s).unsqueeze(1), inside=lambda x: x)),
    Mistake("multiplied", f"the projections are multiplied, (W_h h_j) * (W_s s): additive attention ADDS them, {_E}",
            hint="h @ W_h + (s @ W_s).unsqueeze(1)", shows=_scores(combine=torch.mul)),
    Mistake("multiplied_no_tanh", "the projections are multiplied and the tanh is missing, (W_h h_j) * (W_s s): "
            f"additive attention ADDS them and applies tanh, {_E}", hint="torch.tanh(h @ W_h + (s @ W_s).unsqueeze(1))",
            shows=_scores(combine=torch.mul, inside=lambda x: x)),
    Mistake("weights_transposed", "the weights are transposed: here they act on the right, W_h is (d_h, d_attn) and "
            "W_s is (d_s, d_attn)", hint="h @ W_h and s @ W_s",
            shows=_scores(keys=lambda h, W_h: h @ W_h.T, query=lambda s, W_s: (s @ W_s.T).unsqueeze(1))),
    Mistake("W_h_transposed", "W_h is transposed: here weights act on the right (W_h is (d_h, d_attn))",
            hint="h @ W_h", shows=_scores(keys=lambda h, W_h: h @ W_h.T)),
    Mistake("W_s_transposed", "W_s is transposed: here weights act on the right (W_s is (d_s, d_attn))",
            hint="s @ W_s", shows=_scores(query=lambda s, W_s: (s @ W_s.T).unsqueeze(1))),
    Mistake("no_W_s", "W_s is missing: the decoder state s is added as it is; it is projected first, then added over "
            "the positions", hint="(s @ W_s).unsqueeze(1)", shows=_scores(query=lambda s, W_s: s.unsqueeze(1))),
    Mistake("no_W_h", "W_h is missing: the encoder states h_j are added as they are; they are projected first",
            hint="h @ W_h", shows=_scores(keys=lambda h, W_h: h)),
    Mistake("swapped", "W_h and W_s are swapped: W_h multiplies the encoder states h_j, W_s the decoder state s",
            shows=lambda h, s, W_h, W_s, v: ref.pointer_scores(h, s, W_s, W_h, v)),
    Mistake("other_example", "some scores use the decoder state s of ANOTHER example of the batch: W_s s of example "
            "b is added to the T positions of example b only (a repeat, reshape or view of s @ W_s mixes the "
            "examples)", hint="(s @ W_s).unsqueeze(1), which broadcasts over T", shows=_repeated_s),
)
_VALUES = [m for m in M if m.key != "other_example"]


def _other_example(got, h, s, W_h, W_s, v):
    """other_example when every score of `got` (B, T) is the score of its position with the decoder state of some
    example of the batch, and some are not with their own example's (or None)."""
    a = to_numpy(got).astype(np.float64)
    with torch.no_grad():
        candidates = to_numpy(torch.tanh((h @ W_h).unsqueeze(0) + (s @ W_s)[:, None, None, :]) @ v)  # (B', B, T)
    match = np.isclose(candidates, a[None], atol=1e-5, rtol=1e-4)
    own = np.stack([match[b, b] for b in range(a.shape[0])])
    return M.other_example if match.any(axis=0).all() and not own.all() else None


def _batch_meets_positions(B, T):
    """(pattern, symptom) for call_naming: W_s s (B, d_attn) added to (B, T, d_attn) without its positions axis (or
    with it in the wrong place): PyTorch compares its B with the T positions."""
    return BROADCAST, lambda match: M.not_broadcast if {int(match["a"]), int(match["b"])} == {B, T} else None


@exercise("pointer scores", reference=ref.pointer_scores, mistakes=M,
          right=[lambda h, s, W_h, W_s, v: torch.einsum("bta,a->bt", torch.tanh(
                     torch.einsum("btd,da->bta", h, W_h) + torch.einsum("bd,da->ba", s, W_s)[:, None]), v),
                 lambda h, s, W_h, W_s, v: (torch.tanh(torch.nn.functional.linear(h, W_h.T)
                                                       + torch.nn.functional.linear(s, W_s.T)[:, None]) * v).sum(-1)])
def pointer_scores(ev: Evaluation, answer):
    """answer(h (B, T, d_h), s (B, d_s), W_h (d_h, d_attn), W_s (d_s, d_attn), v (d_attn,)) -> e (B, T)."""
    tests = 0
    # (B, T, d_h, d_s, d_attn): square weights so that swapped weights still run; B == T so that
    # forgetting to broadcast s over the positions still runs (and gives wrong numbers)
    for seed, (B, T, d_h, d_s, d_attn) in enumerate([(2, 5, 6, 6, 6), (4, 4, 8, 8, 8), (3, 7, 6, 4, 5)]):
        g = ev.rng(600 + seed)
        h, s = randn(g, B, T, d_h), randn(g, B, d_s)
        W_h, W_s, v = randn(g, d_h, d_attn), randn(g, d_s, d_attn), randn(g, d_attn)
        got = call_naming(ev, [_batch_meets_positions(B, T)], answer, h, s, W_h, W_s, v)
        expect_shape(got, (B, T), "pointer_scores(h, s, W_h, W_s, v)")
        with explained(functools.partial(_other_example, got, h, s, W_h, W_s, v)):
            ev.expect_close(got, ref.pointer_scores(h, s, W_h, W_s, v), "pointer_scores(h, s, W_h, W_s, v)",
                            mistakes=M.variants(_VALUES, h, s, W_h, W_s, v))
        tests += 1
    return tests
