"""How lesson 12's checks run the learner's code: calls whose typical crashes get named (`call_naming`), the
learner's module built with the reference's weights (`build`, after `randomise` gave every LayerNorm and the
position table values of their own), the same dropout masks for both (`seeded`), a perturbation's first
moved position (`first_moved`, `leak_message`) and the tie of the output layer (`tied`)."""
import copy
import re

import numpy as np
import torch
import torch.nn as nn

from .core import ExerciseError, expect, randn, to_numpy
from .evaluation import Evaluation


def call_naming(ev: Evaluation, errors, answer, *args, **kwargs):
    """`ev.call(answer, ...)`, with the crashes listed in `errors` [(regex, message)] named: a typical mistake
    that makes torch raise gets the words of its mistake, with torch's first line after them."""
    try:
        return ev.call(answer, *args, **kwargs)
    except ExerciseError as error:
        text = str(error)
        for pattern, message in errors:
            if re.search(pattern, text):
                raised = text.splitlines()[0].replace("your function raised ", "")
                raise ExerciseError(f"{message} (torch said: {raised[:160]})") from None
        raise


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


def build(ev: Evaluation, cls, reference, *args, dropout=0.0):
    """The learner's module `cls(*args, dropout=dropout)` holding the reference's weights (same attribute names)."""
    module = ev.call(cls, *args, dropout=dropout)
    expect(isinstance(module, nn.Module), f"{cls.__name__}(...) did not build a torch module.")
    try:
        module.load_state_dict(reference.state_dict())
    except (RuntimeError, AttributeError) as error:
        expect(False, f"your module's parameters do not match the reference's names: keep __init__ as given "
                      f"({str(error).splitlines()[0][:160]}).")
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



def tied(ev: Evaluation, module, tokens, logits):
    """The output layer is the embedding's matrix: the same parameter, or a separate `head` the logits never
    use (an answer that multiplies by self.embed.weight itself)."""
    if module.head.weight is module.embed.weight:
        return True
    probe = copy.deepcopy(module)
    with torch.no_grad():
        probe.head.weight.zero_()
        return np.allclose(to_numpy(ev.call(probe, tokens)), to_numpy(logits), atol=1e-6)


def leak_message(changed_at, first_moved, kind="the logits"):
    """What a perturbation of the tokens from position `changed_at` on says when `kind` moved at `first_moved`."""
    if first_moved == changed_at - 1:
        return (f"{kind} at position {first_moved} changed when the token at position {changed_at} changed: "
                "position t sees position t+1. The causal mask is True on and below the diagonal only "
                "(causal_mask(T)).")
    return (f"{kind} at position {first_moved} changed when the tokens from position {changed_at} on changed: "
            "a position sees later ones. Every block needs the causal mask, causal_mask(T).")
