"""What exercises 2 and 3 (the decoder block, the GPT: classes) share: the learner's module built and given the
reference's weights (`build`, after `randomise` gave every LayerNorm and the position table values of their own),
the same dropout masks for both (`seeded`), sub-layers switched off to say where a slip is (`agree`), and the
causality test (`first_moved`, `leak`)."""
import copy
import re

import numpy as np
import torch
import torch.nn as nn

from ..core import ExerciseError, Mistake, expect, randn, to_numpy
from ..evaluation import RAISED, Evaluation


class NotAModule:
    """A class written without nn.Module as its base (the `not_module` mistake's wrong answer)."""

    def __init__(self, *args, **kwargs):
        self.args = args


def not_module(shows=NotAModule):
    return Mistake("not_module", "{name}(...) did not build a torch module",
                   hint="subclass nn.Module and call super().__init__() first", shows=shows)


def renamed(shows):
    return Mistake("renamed_parameters", "your module's parameters do not have the names the exercise gives them "
                   "({error}): keep __init__ as given, so that the check can load the course's weights into it",
                   shows=shows)


def randomise(ev: Evaluation, module, seed, positions=False):
    """Every LayerNorm gets a gain and a bias of its own (at initialisation they are 1 and 0, so a norm used in
    the wrong place, or missing, would go unnoticed); with `positions`, the learned position table gets the
    scale of the token embeddings (at initialisation it is 50 times smaller)."""
    g = ev.rng(100 + seed)
    with torch.no_grad():
        for m in module.modules():
            if isinstance(m, nn.LayerNorm):
                m.weight.copy_(1 + randn(g, *m.weight.shape, scale=0.3))
                m.bias.copy_(randn(g, *m.bias.shape, scale=0.3))
        if positions:
            module.pos.pe.weight.copy_(randn(g, *module.pos.pe.weight.shape))
    return module


def build(ev: Evaluation, cls, reference, M, *args, dropout=0.0, crashes=()):
    """The learner's module `cls(*args, dropout=dropout)` holding the reference's weights (same attribute names).
    crashes: [(pattern, mistake)] naming the learner's crashes in __init__."""
    try:
        module = ev.call(cls, *args, dropout=dropout)
    except ExerciseError as error:
        text = str(error)
        for pattern, mistake in crashes:
            if text.startswith(RAISED) and re.search(pattern, text):   # (as evaluation.call_naming says it)
                raised = text[len(RAISED):].partition("\n")[0]
                raise ExerciseError(f"{mistake.says} (torch said: {raised[:200]})", key=mistake.key,
                                    hint=mistake.hint) from None
        raise
    expect(isinstance(module, nn.Module), M.not_module.at(name=getattr(cls, "__name__", "your class")))
    try:
        module.load_state_dict(reference.state_dict())
    except (RuntimeError, AttributeError) as error:
        expect(False, M.renamed_parameters.at(error=str(error).splitlines()[0][:160]))
    return module


def seeded(seed, fn, *args):
    """fn(*args) with torch's generator seeded (the same dropout masks for the learner and the reference)."""
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return fn(*args)


def first_moved(a, b, upto):
    """The first position < upto where outputs a, b (B, T, ...) differ, or None."""
    moved = (torch.as_tensor(to_numpy(a)) - torch.as_tensor(to_numpy(b))).abs().flatten(2).amax(dim=(0, 2))[:upto]
    where = (moved > 1e-5).nonzero()
    return int(where[0]) if len(where) else None


def leak(shows):
    return Mistake("leak", "{what} at position {t} changed when the inputs from position {k} on changed: {sees}; "
                   "every block must hide the later positions, on every call",
                   hint="pass the causal mask, causal_mask(T) with T = the input's length, to every block", shows=shows)


def expect_causal(M, what, before, after, k):
    """`after` (the output for inputs changed from position k on) agrees with `before` at the positions < k."""
    t = first_moved(before, after, k)
    if t is not None:
        sees = "position t sees position t+1" if t == k - 1 else "a position sees later ones"
        expect(False, M.leak.at(what=what, t=t, k=k, sees=sees))


class MasksOnce:
    """A mixin for the `leak` mistake's wrong answer: the causal mask is used on the first call only (state kept
    across calls), so that the values are right and only the causality test finds the slip."""
    calls = 0

    def masked_now(self, mask):
        self.calls += 1
        return mask if self.calls == 1 else None


_LAST = {"attn": r"(^|\.)attn\.out_proj\.", "ff": r"(^|\.)ff\.linear2\."}   # each sub-layer's last Linear


def agree(ev, parts, module, reference, *args, seed=0):
    """Do the learner's module and the reference agree on `args` when the sub-layers `parts` of every block add
    nothing (their last Linear, W_O or W_2, at 0)? The learner's module takes those weights through its own
    load_state_dict (so under the grader too, in the learner's kernel) and gets the reference's back after."""
    state = reference.state_dict()
    off = {key: torch.zeros_like(value) if any(re.search(_LAST[part], key) for part in parts) else value
           for key, value in state.items()}
    ref = copy.deepcopy(reference)
    ref.load_state_dict(off)
    try:
        ev.call(module.load_state_dict, off)
        with torch.no_grad():
            a, b = seeded(seed, ev.call, module, *args), seeded(seed, ref, *args)
    finally:
        ev.call(module.load_state_dict, state)
    return hasattr(a, "shape") and tuple(a.shape) == tuple(b.shape) and np.allclose(to_numpy(a), to_numpy(b),
                                                                                    atol=1e-4)
