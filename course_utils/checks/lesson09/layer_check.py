"""How the encoder-layer and decoder-layer checks run (encoder_layer.py, decoder_layer.py): the learner's layer gets
the weights of the course's layer (with LayerNorms of their own), post-norm then pre-norm, and must equal it at
evaluation (else a registered slip, or the block that holds it) and in training, with its dropouts on and the same
masks (each dropout on its sub-layer's output)."""
import copy
import re

import numpy as np
import torch
import torch.nn as nn

from ..core import Mistake, expect, expect_shape, randn, to_numpy
from ..evaluation import Evaluation, call_naming
from ..expectations import explained
from .layer_mistakes import dropout_variants, fields, structure_variants

D_MODEL, HEADS, D_FF = 16, 4, 32
P_DROP = 0.5      # the dropout of the training test (dropout1, dropout2, ...; the attention's and the FFN's stay off)


def checking(renamed, dropout_twice, sublayer_changed):
    """The entries of what the check itself needs of the layer (its names as given), and of the properties it looks
    at where no registered slip explains the values; each shown by the exercise's class given."""
    return [
        Mistake("layers_changed", "{what}: the check gives your layer the course's weights, and switches its dropouts "
                "on and off, by the names __init__ gives them", hint="keep __init__ as given", shows=renamed),
        Mistake("dropout_elsewhere", "your layer is right at evaluation but not in training (with {ks} at p={p}, the "
                "same masks as the course's layer): each dropout is applied once, to its sub-layer's output, before "
                "the residual adds it", hint="{how}", shows=dropout_twice),
        Mistake("block_output", "with the {name} switched off (its last weights at 0) your layer agrees with the "
                "course's: the slip is in how the {name} block computes or uses the sub-layer's output", hint="{how}",
                shows=sublayer_changed),
    ]


def x_of(ev: Evaluation, seed, *shape):
    return randn(ev.rng(seed), *shape)


def seeded(seed, fn, *args, **kwargs):
    """fn(*args, **kwargs) with torch's generator seeded (the same dropout masks), leaving it as it was."""
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return fn(*args, **kwargs)


def _randomise_norms(ev: Evaluation, module, seed):
    """Give every LayerNorm a gain and bias of its own (at initialisation they are all 1 and 0, so using
    the wrong one would go unnoticed)."""
    g = ev.rng(seed)
    with torch.no_grad():
        for m in module.modules():
            if isinstance(m, nn.LayerNorm):
                m.weight.copy_(1 + randn(g, *m.weight.shape, scale=0.3))
                m.bias.copy_(randn(g, *m.bias.shape, scale=0.3))
    return module


def layers(ev: Evaluation, cls, reference_cls, M):
    """The set-up of the layer checks, post-norm then pre-norm: yields (seed, norm_first, the reference layer
    with LayerNorms of their own, the learner's layer `cls` with the same weights), both in eval mode."""
    for seed, norm_first in enumerate((False, True)):
        torch.manual_seed(seed)
        reference = reference_cls(D_MODEL, HEADS, D_FF, dropout=0.0, norm_first=norm_first)
        reference = _randomise_norms(ev, reference, seed).eval()
        module = ev.call(cls, D_MODEL, HEADS, D_FF, dropout=0.0, norm_first=norm_first)
        try:
            module.load_state_dict(reference.state_dict())
        except (RuntimeError, AttributeError) as error:
            expect(False, M.layers_changed.at(what="your layer's parameters do not have the names of the course's "
                                                   f"({' '.join(str(error).split())[:200]})"))
        yield seed, norm_first, reference, module.eval()


def layer_check(ev, layer, M, module, reference, args, output, norm_first, seed, mistakes, crashes=(), probes=()):
    """The learner's layer equals the reference at evaluation (else the listed mistake, what a probe finds, or the
    block that holds the slip), then in training with its dropouts on; `crashes`: the typical crashes to name
    (call_naming); `probes`: properties to look at before the blocks (expectations.explained)."""
    with torch.no_grad():
        out = call_naming(ev, crashes, module, *args)
        expect_shape(out, tuple(args[0].shape), "the output")
        norms = [getattr(reference, f"norm{k + 1}") for k in range(len(layer["names"]))]
        mistakes.update(structure_variants(M, layer, output, norm_first, norms))
        with explained(*probes, lambda: _wrong_block(ev, layer, M, module, reference, args, norm_first)):
            ev.expect_close(out, reference(*args), f"the output (norm_first={norm_first})", mistakes=mistakes)
        _check_dropout(ev, layer, M, module, reference, args, output, norm_first, seed)
    return out


def _set_dropout(module, n, p, M):
    for k in range(1, n + 1):
        drop = getattr(module, f"dropout{k}", None)
        expect(drop is not None, M.layers_changed.at(what=f"your layer has no self.dropout{k}"))
        drop.p = p


def _check_dropout(ev, layer, M, module, reference, args, output, norm_first, seed):
    """In training, with dropout1, dropout2, ... at P_DROP (the attention's and the FFN's own dropout off), the
    learner's layer equals the reference drawing the same masks: each dropout sits on its sub-layer's output."""
    n = len(layer["names"])
    _set_dropout(module, n, P_DROP, M)
    _set_dropout(reference, n, P_DROP, M)
    module.train()
    reference.train()
    try:
        out = seeded(seed, ev.call, module, *args)
        expected = seeded(seed, reference, *args)
        with explained(lambda: M.dropout_elsewhere.at(**fields(layer, 0, norm_first, p=P_DROP))):
            ev.expect_close(out, expected, f"the output in training (norm_first={norm_first}, dropout p={P_DROP})",
                            mistakes=dropout_variants(M, layer, output, norm_first,
                                                      lambda fn, **how: seeded(seed, fn, **how)))
    finally:
        _set_dropout(module, n, 0.0, M)
        _set_dropout(reference, n, 0.0, M)
        module.eval()
        reference.eval()


# ---------------------------------------------------------------------------------------------
# Where the slip is, when no listed mistake explains it
# ---------------------------------------------------------------------------------------------
_LAST = {"self_attn": r"^self_attn\.out_proj\.", "cross_attn": r"^cross_attn\.out_proj\.", "ff": r"^ff\.linear2\."}


def _agree(ev, part, module, reference, args):
    """Do the learner's layer and the reference agree when the sub-layer `part` adds nothing (its last Linear, W_O
    or W_2, at 0)? The learner's layer takes those weights through its own load_state_dict and gets them back."""
    state = reference.state_dict()
    off = {key: torch.zeros_like(value) if re.search(_LAST[part], key) else value for key, value in state.items()}
    ref = copy.deepcopy(reference)
    ref.load_state_dict(off)
    try:
        ev.call(module.load_state_dict, off)
        with torch.no_grad():
            a, b = ev.call(module, *args), ref(*args)
    finally:
        ev.call(module.load_state_dict, state)
    return hasattr(a, "shape") and tuple(a.shape) == tuple(b.shape) and np.allclose(to_numpy(a), to_numpy(b),
                                                                                    atol=1e-4)


def _wrong_block(ev, layer, M, module, reference, args, norm_first):
    """M.block_output for the block whose sub-layer's output the slip needs, found by switching each sub-layer off in
    turn, or None."""
    parts = ("self_attn", "cross_attn", "ff") if len(layer["names"]) == 3 else ("self_attn", "ff")
    for i, part in enumerate(parts):
        if _agree(ev, part, module, reference, args):
            return M.block_output.at(**fields(layer, i, norm_first))
    return None
