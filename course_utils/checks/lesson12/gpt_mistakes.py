"""Exercise 3's answer and its known mistakes (the GPT): `ReferenceGPT` is the course's GPT with learned positions
and the exercise's signature; `model_variant(model, tokens, kind)` gives the logits of that model with one typical
mistake, the single definition each registry entry's wrong answer (`wrong_gpt(kind)`) runs; the registry also
holds the crashes torch reports for typical slips and the tie of the output layer."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from ...gpt import GPT
from ...masks import causal_mask
from ..core import Mistake, Mistakes
from .modules import MasksOnce, leak, not_module, renamed


class ReferenceGPT(GPT):
    """The answer to exercise 3: the course's GPT with learned positions (GPT-2's), with the exercise's
    signature. `gpt.GPT` is the same model with a choice of positions and lesson 12's attention options."""

    def __init__(self, vocab_size, d_model, num_heads, num_layers, d_ff, max_len, dropout=0.0):
        super().__init__(vocab_size, d_model, num_heads, num_layers, d_ff, max_len, dropout, positions="learned")


def model_variant(model, tokens, kind):
    """The logits of a learned-positions GPT, from the reference model's modules, with the mistake `kind`."""
    d, T = model.d_model, tokens.size(1)
    e = model.embed(tokens)
    scale = {"no_scale": 1.0, "scale_d": d, "divided": 1 / math.sqrt(d)}.get(kind, math.sqrt(d))
    if kind == "pos_scaled":                     # the positions scaled with the embedding
        x = model.pos(e) * math.sqrt(d)
    elif kind == "no_pos":
        x = e * scale
    elif kind == "pos_twice":
        x = model.pos(model.pos(e * scale))
    elif kind == "pos_no_dropout":               # the table added by hand: the positions' dropout skipped
        x = e * scale + model.pos.pe.weight[:T]
    else:
        x = model.pos(e * scale)
    mask = {"no_mask": None, "sees_next": torch.ones(T, T, dtype=torch.bool).tril(1),
            "inverted": ~causal_mask(T)}.get(kind, causal_mask(T))
    if kind == "norm_before":
        x = model.norm(x)
    layers = {"first_block_only": [model.layers[0]] * len(model.layers), "one_block": list(model.layers)[-1:],
              "first_block_once": list(model.layers)[:1], "blocks_reversed": list(model.layers)[::-1]}.get(
        kind, model.layers)
    if kind == "pos_every_block":
        x = e * scale
    for layer in layers:
        x = layer(model.pos(x) if kind == "pos_every_block" else x, mask)
        x = model.norm(x) if kind == "norm_every_block" and layer is not layers[-1] else x
    if kind not in ("no_final_norm", "norm_before"):
        x = model.norm(x)
    logits = model.head(x)
    return {"softmax": logits.softmax(-1), "log_softmax": logits.log_softmax(-1)}.get(kind, logits)


def wrong_gpt(kind):
    """The GPT class whose forward has the mistake `kind`."""
    return type(f"GPT_{kind}", (ReferenceGPT,), {"forward": lambda self, tokens: model_variant(self, tokens, kind)})


class _Untied(ReferenceGPT):
    """The output layer left a parameter of its own (`how`: a fresh one, a copy of E's values, E's tensor shared
    through .data, the tie made in forward, E used directly in forward)."""
    how = "fresh"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.head.weight = nn.Parameter(self.embed.weight.detach().clone())
        if self.how == "aliased":
            self.head.weight.data = self.embed.weight.data

    def forward(self, tokens):
        if self.how == "in_forward":
            self.head.weight = self.embed.weight
        if self.how == "embed_matrix":
            x = self.embed_tokens(tokens)
            for layer in self.layers:
                x = layer(x, causal_mask(tokens.size(1)))
            return F.linear(self.norm(x), self.embed.weight)
        return super().forward(tokens)


def _untied(how):
    return type(f"Untied_{how}", (_Untied,), {"how": how})


class _Probed(ReferenceGPT):
    """Slips no registered variant gives: the probe says whether they are at the ends or in the blocks."""
    kind = ""

    def forward(self, tokens):
        T = tokens.size(1)
        e = self.embed(tokens) * math.sqrt(self.d_model)
        x = e + self.pos(e) if self.kind == "embedding_twice" else self.pos(e)    # self.pos already returns e + P
        for i, layer in enumerate(self.layers):
            x = layer(x, None if self.kind == "mask_first_block_only" and i > 0 else causal_mask(T))
        return self.head(self.norm(x))


class _MasksOnce(MasksOnce, ReferenceGPT):
    def forward(self, tokens):
        x = self.embed_tokens(tokens)
        mask = self.masked_now(causal_mask(tokens.size(1)))
        for layer in self.layers:
            x = layer(x, mask)
        return self.head(self.norm(x))


class _Crash(ReferenceGPT):
    """Typical slips that make torch raise, by `kind`."""
    kind = ""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.kind == "tied_transposed":
            self.head.weight = self.embed.weight.T
        if self.kind == "head_is_embedding":
            self.head = self.embed

    def forward(self, tokens):
        T = tokens.size(1)
        kind = self.kind
        if kind == "sqrt_of_int":
            x = self.embed(tokens) * torch.sqrt(self.d_model)
        elif kind == "table_overrun":                            # the position table read by the token ids
            x = self.embed(tokens) * math.sqrt(self.d_model) + self.pos.pe(tokens)
        else:
            x = self.embed_tokens(tokens)
        mask = {"mask_shape": causal_mask(self.max_len), "float_mask": torch.ones(T, T).tril()}.get(kind,
                                                                                                causal_mask(T))
        if kind == "sequential":
            x = nn.Sequential(*self.layers)(x, mask)
        else:
            for layer in self.layers:
                x = layer(x, mask)
        if kind == "norm_on_logits":
            return self.norm(self.head(x))
        if kind == "output_untransposed":
            return self.norm(x) @ self.embed.weight
        return self.head(self.norm(x))


class _Renamed(ReferenceGPT):
    """The blocks kept under another name than the exercise's."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.blocks = self.layers
        del self.layers


def _crash(kind):
    return type(f"Crash_{kind}", (_Crash,), {"kind": kind})


def _variant(kind, says, hint=""):
    return Mistake(kind, says, hint=hint, shows=wrong_gpt(kind))


_LOOP = "for layer in self.layers: x = layer(x, mask)"
_LOGITS = "return self.head(self.norm(x))"
TRAINING_ONLY = ("pos_no_dropout",)

M = Mistakes(
    _variant("no_scale", "the token embeddings are not scaled: they are multiplied by √d_model before the "
             "positions are added (as in lesson 09's Transformer)", "self.embed(tokens) * math.sqrt(self.d_model)"),
    _variant("scale_d", "the embeddings are multiplied by d_model: the scale is its square root, √d_model"),
    _variant("divided", "the embeddings are divided by √d_model: they are multiplied by it"),
    _variant("pos_scaled", "the positions are scaled too: the embedding is multiplied by √d_model first, then the "
             "positions are added", "self.pos(self.embed(tokens) * math.sqrt(self.d_model))"),
    _variant("no_pos", "the positions are not added: the learned position vectors P[:T] are added to the scaled "
             "embeddings (without them the model cannot tell the order of the tokens)", "x = self.pos(x)"),
    _variant("pos_twice", "the positions are added twice: the position module adds them once, x + P[:T]"),
    _variant("pos_no_dropout", "the positions' dropout is skipped (in training): the position module adds P[:T] and "
             "then applies dropout; the table added by hand leaves the dropout out",
             "self.pos(x), not x + self.pos.pe.weight[:T]"),
    _variant("no_mask", "the blocks get no causal mask: every position sees the whole window, the future included",
             "causal_mask(T) with T = tokens.size(1), to every block"),
    _variant("sees_next", "the mask lets position t see position t+1: the causal mask is True on and below the "
             "diagonal only", "causal_mask(T)"),
    _variant("inverted", "the mask is inverted: True means MAY attend, on and below the diagonal; yours lets each "
             "position see only the future", "causal_mask(T), not ~causal_mask(T)"),
    _variant("no_final_norm", "the final LayerNorm is missing: it comes after the last block, before the output "
             "layer (GPT-2's final LayerNorm, which pre-norm blocks need: their sum of residuals is never "
             "normalised otherwise)", _LOGITS),
    _variant("norm_before", "the final LayerNorm is applied before the blocks: it comes after the LAST block, just "
             "before the output layer", _LOGITS),
    _variant("first_block_only", "the same block is applied num_layers times: each block of the list has weights "
             "of its own, and they run one after the other", _LOOP),
    _variant("blocks_reversed", "the blocks run in reverse order: the first block of the list runs first, up to the "
             "last", _LOOP),
    _variant("norm_every_block", "the final LayerNorm is applied after EVERY block: the blocks normalise their own "
             "inputs (pre-norm); the final LayerNorm comes once, after the last block", _LOGITS),
    _variant("pos_every_block", "the positions are added before EVERY block: they are added once, to the scaled "
             "embeddings", "x = self.pos(self.embed(tokens) * math.sqrt(self.d_model)), before the loop"),
    _variant("one_block", "only the last block is applied: every block of the list runs, in turn", _LOOP),
    _variant("first_block_once", "only the first block is applied: every block of the list runs, in turn", _LOOP),
    _variant("log_softmax", "you return log-probabilities: return the LOGITS, the output layer's values; the loss "
             "and sampling apply the softmax themselves", _LOGITS),
    _variant("softmax", "you return probabilities: return the LOGITS, the output layer's values; the loss and "
             "sampling apply the softmax themselves", _LOGITS),
    Mistake("tied_transposed", "the output layer's weight was given the embedding matrix transposed, a plain tensor "
            "(a view), not the parameter: a linear layer from d_model to V keeps its weight as (V, d_model), the "
            "embedding's own shape, so the tie takes the embedding's parameter as it is",
            hint="self.head.weight = self.embed.weight",
            shows=_crash("tied_transposed")),
    not_module(),
    renamed(shows=_Renamed),
    Mistake("mask_shape", "the mask the blocks get has shape {got}; the scores of the T = {T} tokens of this batch "
            "need a ({T}, {T}) mask", hint="causal_mask(tokens.size(1)), built for this batch's length, not max_len",
            shows=_crash("mask_shape")),
    Mistake("output_untransposed", "the output layer multiplies by the embedding matrix (V, d_model) as it is: the "
            "logits are x Eᵀ", hint="self.head(x) once tied (or x @ self.embed.weight.T)",
            shows=_crash("output_untransposed")),
    Mistake("table_overrun", "an embedding table was read past its end (an id at least its number of rows): the "
            "position table has max_len rows and is read by POSITION, 0..T-1; the token ids read the token table",
            hint="self.pos(x) adds P[:T]; self.embed(tokens) reads the token ids", shows=_crash("table_overrun")),
    Mistake("sqrt_of_int", "√d_model is a plain number, and torch's square root takes a tensor",
            hint="math.sqrt(self.d_model) (or self.d_model ** 0.5)", shows=_crash("sqrt_of_int")),
    Mistake("sequential", "the blocks run in an nn.Sequential, which passes ONE input from block to block, and each "
            "block also needs the mask", hint=_LOOP, shows=_crash("sequential")),
    Mistake("head_is_embedding", "the output layer looks up ids: it was replaced by the embedding module itself; the "
            "tie shares the WEIGHTS, the output layer stays a linear layer",
            hint="self.head.weight = self.embed.weight",
            shows=_crash("head_is_embedding")),
    Mistake("norm_on_logits", "a LayerNorm got the logits (V values per position, not d_model): the final LayerNorm "
            "comes BEFORE the output layer", hint=_LOGITS, shows=_crash("norm_on_logits")),
    Mistake("float_mask", "the mask is not boolean ({dtype}): a mask is True where a position may attend",
            hint="causal_mask(T) (torch.tril of ones gives floats: compare, or pass dtype=torch.bool)",
            shows=_crash("float_mask")),
    Mistake("untied", "the output layer is a parameter of its own, not the embedding's: the exercise ties them, ONE "
            "parameter for both (two parameters, even with equal values, train apart)",
            hint="self.head.weight = self.embed.weight, in __init__", shows=_untied("fresh")),
    Mistake("aliased", "the output layer's weight shares the embedding's memory (its .data is the embedding's "
            "tensor), but it is still a parameter of its own: the model holds two parameters for one matrix, which "
            "the optimiser keeps apart (each with its own gradient and moment estimates) and which part as soon as "
            "one of them is given a new tensor (as moving the model to another device does). The tie makes them ONE "
            "parameter", hint="self.head.weight = self.embed.weight (the parameter, not its .data)",
            shows=_untied("aliased")),
    Mistake("tied_in_forward", "the output layer is tied in forward, not in __init__: a new model has two matrices "
            "until its first forward call, so an optimiser made before it (as every training loop makes it) trains "
            "the head that forward then throws away; tie once, in __init__",
            hint="self.head.weight = self.embed.weight at the end of __init__", shows=_untied("in_forward")),
    Mistake("head_unused", "the logits use the embedding matrix E, but the output layer is never tied to it in "
            "__init__: it stays a second (vocab_size, d_model) parameter that the model counts, saves and hands to "
            "the optimiser for nothing; tie in __init__ as the exercise asks (the output layer then computes x Eᵀ)",
            hint="self.head.weight = self.embed.weight in __init__", shows=_untied("embed_matrix")),
    Mistake("slip_in_blocks", "the embeddings and the output layer are right (with every block switched off your "
            "logits agree with the course's): the slip is in how the blocks run, each block of the list once, in "
            "order, with the causal mask", hint=_LOOP + " with mask = causal_mask(T)",
            shows=type("Probed_mask_first_block_only", (_Probed,), {"kind": "mask_first_block_only"})),
    Mistake("slip_at_ends", "with every block switched off your logits still differ from the course's: the slip is "
            "at the ends, the input (the scaled embeddings plus the positions, added once by the position module) "
            "or the output (the final LayerNorm, then the output layer)",
            hint="x = self.pos(self.embed(tokens) * math.sqrt(self.d_model)); ...; self.head(self.norm(x))",
            shows=type("Probed_embedding_twice", (_Probed,), {"kind": "embedding_twice"})),
    leak(shows=_MasksOnce),
)
VALUE_KEYS = [m.key for m in M if m.shows is not None and m.shows.__name__ == f"GPT_{m.key}"]
