"""Lesson 09's encoder and decoder layers computed from their parts, right or with a typical mistake, and what the
two layer checks share (lesson09.encoder_layer, lesson09.decoder_layer).

A layer is a list of blocks (sub-layer, its LayerNorm, its dropout), run in order; every block has its Add & Norm,
    pre-norm:   x = x + dropout_k(Sublayer(norm_k(x)))
    post-norm:  x = norm_k(x + dropout_k(Sublayer(x)))
and a mistake (a `kind`) can sit in every block or in one (`kinds`, one per block), in the blocks' order, in which
LayerNorm a block uses, in the masks, or in where dropout is applied (seen in training only).
"""
import copy
import itertools
import re

import numpy as np
import torch

from .core import expect, to_numpy
from .expectations import explained

ENCODER = {"names": ("self-attention", "feed-forward network"),
           "calls": ("self_attn({y}, {y}, {y}, mask)", "ff({y})")}
DECODER = {"names": ("masked self-attention", "cross-attention", "feed-forward network"),
           "calls": ("self_attn({y}, {y}, {y}, tgt_mask)", "cross_attn({y}, memory, memory, memory_mask)", "ff({y})")}
P_DROP = 0.5      # the dropout of the training test (dropout1, dropout2, ...; the attention's and the FFN's stay off)


def _identity(t):
    return t


def _sublayer(x, x0, block, norm_first, kind, first_norm):
    """One block's Add & Norm on x (x0: the layer's input); `kind` plants a typical mistake."""
    sub, norm, drop = block
    if kind == "swapped":
        norm_first = not norm_first
    if kind == "no_drop":
        drop = _identity
    if kind == "no_residual":
        return drop(sub(norm(x))) if norm_first else norm(drop(sub(x)))
    if kind == "norm_output":               # the LayerNorm on the sub-layer's output, inside the residual
        return x + norm(drop(sub(x)))
    if kind == "no_norm":                   # pre-norm: the sub-layer reads x; post-norm: no LayerNorm after the sum
        return x + drop(sub(x))
    if kind == "norm_residual" and norm_first:
        y = norm(x)
        return y + drop(sub(y))
    if kind == "reads_input":               # the sub-layer reads the layer's input, not the updated x
        return x + drop(sub(norm(x0))) if norm_first else norm(x + drop(sub(x0)))
    if kind == "reads_y" and norm_first:    # ... the y = norm1(x) computed for the first sub-layer
        return x + drop(sub(first_norm(x0)))
    if kind == "drop_sum":
        return drop(x + sub(norm(x))) if norm_first else norm(drop(x + sub(x)))
    if kind == "drop_after_norm" and not norm_first:
        return drop(norm(x + sub(x)))
    if kind == "drop_input":
        return x + sub(drop(norm(x))) if norm_first else norm(x + sub(drop(x)))
    return x + drop(sub(norm(x))) if norm_first else norm(x + drop(sub(x)))


def run_layer(x, blocks, norm_first, kinds="ok", order=None):
    """The layer's output: its blocks run in `order` (default: as given), each with its kind (`kinds`: one for
    all, or one per block)."""
    kinds = [kinds] * len(blocks) if isinstance(kinds, str) else kinds
    x0 = x
    for i in order or range(len(blocks)):
        x = _sublayer(x, x0, blocks[i], norm_first, kinds[i], blocks[0][1])
    return x


def encoder_output(layer, x, mask, norm_first, norms=None, **how):
    """The encoder layer `layer` (its modules) on x; `norms`: the LayerNorms of the two blocks (default its own)."""
    n1, n2 = norms or (layer.norm1, layer.norm2)
    blocks = [(lambda y: layer.self_attn(y, y, y, mask), n1, layer.dropout1), (layer.ff, n2, layer.dropout2)]
    return run_layer(x, blocks, norm_first, **how)


def decoder_output(layer, x, memory, tgt_mask, memory_mask, norm_first, norms=None, cross="ok", **how):
    """The decoder layer on x; `cross` plants a mistake in the cross-attention's arguments."""
    n1, n2, n3 = norms or (layer.norm1, layer.norm2, layer.norm3)

    def cross_attention(y):
        if cross == "self_twice":           # keys and values from the decoder instead of the encoder's memory
            return layer.cross_attn(y, y, y, tgt_mask)
        if cross == "memory_normed":
            m = n2(memory)
            return layer.cross_attn(y, m, m, memory_mask)
        attn = layer.self_attn if cross == "self_attn" else layer.cross_attn
        return attn(y, memory, memory, memory_mask)

    blocks = [(lambda y: layer.self_attn(y, y, y, tgt_mask), n1, layer.dropout1), (cross_attention, n2, layer.dropout2),
              (layer.ff, n3, layer.dropout3)]
    return run_layer(x, blocks, norm_first, **how)


# ---------------------------------------------------------------------------------------------
# What a learner reads
# ---------------------------------------------------------------------------------------------
RESIDUAL = ("the residual connection is missing: add the sub-layer's input back, "
            "x + Dropout(Sublayer(...)) (both sub-layers)")
SWAPPED = {True: "this is the post-norm layer, but norm_first=True asks for pre-norm: "
                 "x = x + Dropout(Sublayer(LayerNorm(x)))",
           False: "this is the pre-norm layer, but norm_first=False asks for the paper's post-norm: "
                  "x = LayerNorm(x + Dropout(Sublayer(x)))"}
ONE_NORM = ("one LayerNorm serves every sub-layer: each sub-layer has its own ({norms}, with their own learned "
            "gain and bias)")
NORM_RESIDUAL = ("the residual starts from the normalised x: in pre-norm, y = LayerNorm(x) feeds only the "
                 "sub-layer; add its output to the ORIGINAL x (x = x + Sublayer(y))")
NORM_OUTPUT = {True: "the LayerNorms are applied to the sub-layers' outputs, inside the residuals: in pre-norm they "
                     "normalise each sub-layer's INPUT, x = x + Dropout(Sublayer(LayerNorm(x)))",
               False: "the LayerNorms are applied to the sub-layers' outputs, inside the residuals: in post-norm they "
                      "normalise the SUM, x = LayerNorm(x + Dropout(Sublayer(x)))"}
NO_NORM = {True: "the sub-layers read x without their LayerNorm: in pre-norm, "
                 "x = x + Dropout(Sublayer(LayerNorm(x)))",
           False: "the LayerNorms after the sub-layers are missing: in post-norm, "
                  "x = LayerNorm(x + Dropout(Sublayer(x)))"}


def formula(layer, i, norm_first):
    """Block i's Add & Norm, written out in the exercise's names."""
    k, call = i + 1, layer["calls"][i]
    if norm_first:
        return f"y = norm{k}(x), x = x + dropout{k}({call.format(y='y')})"
    return f"x = norm{k}(x + dropout{k}({call.format(y='x')}))"


def _block_symptom(layer, kind, i, norm_first):
    name, k, how = layer["names"][i], i + 1, formula(layer, i, norm_first)
    earlier = layer["names"][i - 1] if i else ""
    return {
        "no_residual": f"the residual connection around the {name} is missing: add its input x back, {how}",
        "no_norm": (f"the {name} reads x without its LayerNorm norm{k}: in pre-norm, {how}" if norm_first else
                    f"the LayerNorm after the {name} (norm{k}) is missing: in post-norm, {how}"),
        "norm_output": (f"norm{k} is applied to the {name}'s output, inside the residual: "
                        + (f"in post-norm it normalises the SUM x + dropout{k}(...), " if not norm_first else
                           f"in pre-norm it normalises the {name}'s INPUT, ") + how),
        "norm_residual": (f"the residual around the {name} starts from the normalised x: y = norm{k}(x) feeds only "
                          f"the sub-layer; add its output to the ORIGINAL x, {how}"),
        "reads_input": (f"the {name} reads the layer's INPUT instead of the output of the {earlier} block: each "
                        f"sub-layer works on the x the block before it updated, {how}"),
        "swapped": (f"the {name} has the {'post' if norm_first else 'pre'}-norm placement, the other sub-layers the "
                    f"{'pre' if norm_first else 'post'}-norm one: with norm_first={norm_first}, {how}"),
        "no_drop": f"in training the {name}'s output gets no dropout: {how}",
        "drop_sum": (f"dropout{k} is applied to the residual sum: it goes on the {name}'s output alone, before the "
                     f"residual adds it, {how}"),
        "drop_after_norm": f"dropout{k} is applied after the LayerNorm norm{k}: it goes on the {name}'s output, {how}",
        "drop_input": f"dropout{k} is applied to the {name}'s input: it goes on its output, {how}",
    }[kind]


def structure_mistakes(layer, output, norm_first, norms):
    """{symptom: the layer's output with that mistake} for the mistakes of the Add & Norm blocks, their order and
    their LayerNorms; output(**how) computes the layer with a mistake (encoder_output or decoder_output)."""
    n = len(layer["names"])
    mistakes = {RESIDUAL.replace("both", "all three" if n == 3 else "both"): output(kinds="no_residual"),
                SWAPPED[norm_first]: output(kinds="swapped"),
                ONE_NORM.format(norms=", ".join(f"norm{k + 1}" for k in range(n - 1)) + f" and norm{n}"):
                    output(norms=[norms[0]] * n),
                NO_NORM[norm_first]: output(kinds="no_norm"),
                NORM_OUTPUT[norm_first]: output(kinds="norm_output")}
    if norm_first:
        mistakes[NORM_RESIDUAL] = output(kinds="norm_residual")
    for i in range(n):
        for kind in ("no_residual", "no_norm", "norm_output", "norm_residual", "reads_input", "swapped"):
            if (i or kind != "reads_input") and (norm_first or kind != "norm_residual"):
                mistakes[_block_symptom(layer, kind, i, norm_first)] = output(
                    kinds=["ok"] * i + [kind] + ["ok"] * (n - i - 1))
        if i and norm_first:
            mistakes[f"the {layer['names'][i]} reads LayerNorm of the layer's INPUT (the y computed before the "
                     f"{layer['names'][0]}): normalise the updated x again, {formula(layer, i, norm_first)}"] = \
                output(kinds=["ok"] * i + ["reads_y"] + ["ok"] * (n - i - 1))
        for j in range(n):
            if j != i:
                mistakes[f"the {layer['names'][i]} uses norm{j + 1} instead of its own norm{i + 1}: "
                         f"{formula(layer, i, norm_first)}"] = output(norms=[norms[j] if b == i else norms[b]
                                                                             for b in range(n)])
    order_rule = ", ".join(f"{name} (norm{k + 1})" for k, name in enumerate(layer["names"]))
    for order in itertools.permutations(range(n)):
        first = next((p for p, block in enumerate(order) if block != p), None)
        if first is not None:
            yours = ", ".join(layer["names"][block] for block in order)
            before = f"the {layer['names'][order[first]]} runs before the {layer['names'][first]} (your order: {yours}"
            mistakes[f"{before}): the order is {order_rule}"] = output(order=order)
            # the sub-layers swapped, their LayerNorms (and dropouts) left in their places
            mistakes[f"{before}; the LayerNorms in their places): the order is {order_rule}"] = output(
                order=order, norms=[norms[order.index(b)] for b in range(n)])
    return mistakes


def decoder_crashes(T, S):
    """[(regex, message)] for call_naming: the decoder layer's typical crashes when the decoder's length T and the
    memory's length S differ, the queries, keys, values or masks of the attentions mixed up."""
    cross = "cross_attn(y, memory, memory, memory_mask)"

    def scores(match):
        mask, (t_q, t_k) = [int(n) for n in match[1].split(",")], [int(n) for n in match[2].split(",")[-2:]]
        if (t_q, t_k) == (S, T):
            return (f"the cross-attention's queries come from the memory and its keys and values from the decoder "
                    f"(its scores are S x T = {S} x {T}): the decoder's x asks and the encoder's memory "
                    f"answers, {cross}")
        if (t_q, t_k) == (T, T):
            return (f"an attention over the decoder's {T} positions got memory_mask (the source padding, over the "
                    f"memory's {S} positions): the cross-attention's keys and values are the memory, {cross}; "
                    f"the masked self-attention takes tgt_mask, self_attn(y, y, y, tgt_mask)")
        if (t_q, t_k) == (T, S) and mask[-1] == T:
            return (f"the cross-attention got tgt_mask (over the decoder's {T} positions): its mask is memory_mask, "
                    f"{cross}; tgt_mask belongs to the self-attention")
        return None

    length = (f"a tensor of the memory's length S={S} meets one of the decoder's length T={T}: the cross-attention's "
              f"queries (and its residual) are the decoder's x, its keys and values the memory, so its output has "
              f"the decoder's length, {cross}")
    return [(r"mask of shape \(([\d, ]+)\) does not broadcast to the scores' shape \(([\d, ]+)\)", scores),
            (rf"size of tensor a \(({T}|{S})\) must match the size of tensor b \(({S}|{T})\)",
             lambda m: length if m[1] != m[2] else None)]


# ---------------------------------------------------------------------------------------------
# The training test: where dropout1, dropout2, ... are applied
# ---------------------------------------------------------------------------------------------
def seeded(seed, fn, *args, **kwargs):
    """fn(*args, **kwargs) with torch's generator seeded (the same dropout masks), leaving it as it was."""
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return fn(*args, **kwargs)


def _set_dropout(module, n, p):
    for k in range(1, n + 1):
        try:
            getattr(module, f"dropout{k}").p = p
        except AttributeError:
            expect(False, f"your layer has no self.dropout{k}: keep __init__ as given, and apply dropout{k} to the "
                          f"output of sub-layer {k}.")


def dropout_mistakes(layer, output, norm_first, seed):
    """{symptom: the layer's output in training with dropout in the wrong place} (the reference's dropouts on)."""
    n, how = len(layer["names"]), formula(layer, 0, norm_first)
    ks = ", ".join(f"dropout{k + 1}" for k in range(n))
    kinds = ("drop_sum", "drop_input") if norm_first else ("drop_sum", "drop_after_norm", "drop_input")
    everywhere = {
        "no_drop": f"in training your layer applies no dropout: apply {ks} to the sub-layers' outputs, before the "
                   f"residual adds them, {how}",
        "drop_sum": f"dropout is applied to the residual sums: it goes on each sub-layer's output alone, before the "
                    f"residual adds it, {how}",
        "drop_after_norm": f"dropout is applied after the LayerNorms: it goes on each sub-layer's output, {how}",
        "drop_input": f"dropout is applied to the sub-layers' inputs: it goes on their outputs, {how}"}
    mistakes = {everywhere[kind]: seeded(seed, output, kinds=kind) for kind in ("no_drop",) + kinds}
    for i in range(n):
        for kind in ("no_drop",) + kinds:
            mistakes[_block_symptom(layer, kind, i, norm_first)] = seeded(
                seed, output, kinds=["ok"] * i + [kind] + ["ok"] * (n - i - 1))
    return mistakes


def check_dropout(ev, layer, module, reference, args, output, norm_first, seed):
    """In training, with dropout1, dropout2, ... at P_DROP (the attention's and the FFN's own dropout off), the
    learner's layer equals the reference drawing the same masks: each dropout sits on its sub-layer's output."""
    n = len(layer["names"])
    _set_dropout(module, n, P_DROP)
    _set_dropout(reference, n, P_DROP)
    module.train()
    reference.train()
    try:
        out = seeded(seed, ev.call, module, *args)
        expected = seeded(seed, reference, *args)
        ks = ", ".join(f"dropout{k + 1}" for k in range(n))
        hint = (f"your layer is right at evaluation but not in training (with {ks} at p={P_DROP}, the same masks as "
                f"the course's layer): apply each dropout once, to its sub-layer's output, before the residual adds "
                f"it, {formula(layer, 0, norm_first)}")
        with explained(lambda: hint):
            ev.expect_close(out, expected, f"the output in training (norm_first={norm_first}, dropout p={P_DROP})",
                            mistakes=dropout_mistakes(layer, output, norm_first, seed))
    finally:
        _set_dropout(module, n, 0.0)
        _set_dropout(reference, n, 0.0)
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


def wrong_block(ev, layer, module, reference, args, norm_first):
    """The block whose sub-layer's output the slip needs (a message), found by switching each sub-layer off in turn,
    or None."""
    parts = ("self_attn", "cross_attn", "ff") if len(layer["names"]) == 3 else ("self_attn", "ff")
    for i, part in enumerate(parts):
        if _agree(ev, part, module, reference, args):
            return (f"with the {layer['names'][i]} switched off (its last weights at 0) your layer agrees with the "
                    f"course's: the slip is in how the {layer['names'][i]} block computes or uses the sub-layer's "
                    f"output, {formula(layer, i, norm_first)}")
    return None
