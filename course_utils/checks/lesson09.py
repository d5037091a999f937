"""Checks for lesson 09: the feed-forward network, the encoder layer, the decoder layer and the forward pass."""
import functools
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from .. import transformer as ref
from ..masks import causal_mask, padding_mask
from .core import (
    exercise,
    expect,
    expect_shape,
    randn,
    single_threaded,
    to_numpy,
)
from .evaluation import Evaluation, call_naming
from .expectations import explained
from .lesson09_forward import _forward, forward_mistakes  # noqa: F401 - _forward: the tests plant mistakes with it
from .lesson09_layers import (
    DECODER,
    ENCODER,
    check_dropout,
    decoder_crashes,
    decoder_output,
    encoder_output,
    structure_mistakes,
    wrong_block,
)

D_MODEL, HEADS, D_FF = 16, 4, 32
PAD_ID = 3    # transformer_forward's model: not the notebook's PAD = 0


def _x(ev: Evaluation, seed, *shape):
    return randn(ev.rng(seed), *shape)


# ---------------------------------------------------------------------------------------------
# Exercise 1: the position-wise feed-forward network
# ---------------------------------------------------------------------------------------------
class FeedForward(nn.Module):
    """The answer to the exercise: FFN(x) = max(0, x W_1 + b_1) W_2 + b_2, with the formula's parameters
    (the course's `transformer.PositionwiseFeedForward` keeps them in nn.Linear layers, W_1 = linear1.weight.T)."""

    def __init__(self, d_model, d_ff, dropout=0.1):
        super().__init__()
        self.W_1 = nn.Parameter(torch.randn(d_model, d_ff) / math.sqrt(d_model))   # (d_model, d_ff)
        self.b_1 = nn.Parameter(torch.zeros(d_ff))
        self.W_2 = nn.Parameter(torch.randn(d_ff, d_model) / math.sqrt(d_ff))      # (d_ff, d_model)
        self.b_2 = nn.Parameter(torch.zeros(d_model))
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.dropout(torch.relu(x @ self.W_1 + self.b_1)) @ self.W_2 + self.b_2


# the activations a learner may use instead of the formula's max(0, .)
_ACTIVATIONS = {"GELU": F.gelu, "GELU (tanh approximation)": lambda t: F.gelu(t, approximate="tanh"), "SiLU": F.silu,
                "tanh": torch.tanh, "sigmoid": torch.sigmoid, "LeakyReLU": F.leaky_relu, "ELU": F.elu,
                "softplus": F.softplus}


def _ffn(p, x, kind="ok", drop=None):
    """FFN(x) from the parameters p, with or without a typical mistake; `drop` is the dropout to apply
    (None at evaluation)."""
    W_1, b_1, W_2, b_2 = p["W_1"], p["b_1"], p["W_2"], p["b_2"]
    if kind == "order":
        W_1, b_1, W_2, b_2 = W_2, b_2, W_1, b_1
    if kind == "W_1.T":
        W_1 = W_1.T
    if kind == "W_2.T":
        W_2 = W_2.T
    if kind == "both.T":                        # F.linear(x, W_1, b_1): nn.Linear's (out, in) convention
        W_1, W_2 = W_1.T, W_2.T
    drop = drop or (lambda t: t)
    inp = drop(x) if kind == "dropout_input" else x
    hidden = inp @ W_1 + (0 if kind in ("no_b_1", "bias_after_relu") else b_1)
    hidden = hidden if kind == "no_relu" else _ACTIVATIONS.get(kind, torch.relu)(hidden)
    hidden = hidden + b_1 if kind == "bias_after_relu" else hidden
    hidden = hidden if kind in ("dropout_input", "dropout_output") else drop(hidden)
    out = hidden @ W_2 + (0 if kind == "no_b_2" else b_2)
    out = torch.relu(out) if kind == "relu_twice" else out
    out = x + out if kind == "residual" else out
    return drop(out) if kind == "dropout_output" else out


LINEAR_CONVENTION = ("W_1 and W_2 are both transposed (F.linear(x, W, b) computes x W^T + b, for nn.Linear's "
                     "(out, in) weights): W_1 is stored (d_model, d_ff) and W_2 (d_ff, d_model), so "
                     "x @ self.W_1 + self.b_1 and hidden @ self.W_2 + self.b_2 (or F.linear(x, self.W_1.T, self.b_1))")
# a product of mismatched shapes (d_ff != d_model): the weights multiplied the wrong way round
FFN_CRASHES = [(r"shapes cannot be multiplied",
                "a matrix product has mismatched shapes: W_1 is (d_model, d_ff) and W_2 (d_ff, d_model), so "
                "x @ self.W_1 + self.b_1 and hidden @ self.W_2 + self.b_2 (no .T; F.linear(x, W, b) computes "
                "x W^T + b, for nn.Linear's (out, in) weights)")]


def _seeded(seed, answer, *args):
    """answer(*args) with the global random generator seeded (dropout masks), leaving the generator as it was."""
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return answer(*args)


@exercise("position-wise feed-forward network", name="MyFeedForward", reference=FeedForward)
@single_threaded
def feed_forward(ev: Evaluation, cls):
    """cls(d_model, d_ff, dropout) with parameters W_1 (d_model, d_ff), b_1, W_2 (d_ff, d_model), b_2 and
    self.dropout; forward(x (B, T, d_model)) -> (B, T, d_model). Compared with the course's
    PositionwiseFeedForward holding the same weights, at evaluation and in training (same dropout masks)."""
    tests = 0
    # d_ff == d_model first: there the two layers in the wrong order, or a transposed W_1, give values to name
    for seed, (B, T, d_model, d_ff) in enumerate([(2, 5, 8, 8), (3, 4, 6, 16)]):
        p_drop = 0.5
        module = ev.call(cls, d_model, d_ff, dropout=p_drop)
        expect(isinstance(module, nn.Module), "your class should be an nn.Module (keep `class ...(nn.Module)`).")
        g = ev.rng(seed)
        params = {"W_1": randn(g, d_model, d_ff, scale=d_model ** -0.5), "b_1": randn(g, d_ff, scale=0.5),
                  "W_2": randn(g, d_ff, d_model, scale=d_ff ** -0.5), "b_2": randn(g, d_model, scale=0.5)}
        try:
            module.load_state_dict(params)
        except (RuntimeError, AttributeError) as error:
            expect(False, "your module's parameters should be W_1 (d_model, d_ff), b_1, W_2 (d_ff, d_model) and b_2: "
                          f"keep __init__ as given ({str(error).splitlines()[0][:160]}).")
        reference = ref.PositionwiseFeedForward(d_model, d_ff, p_drop)
        with torch.no_grad():
            reference.linear1.weight.copy_(params["W_1"].T)
            reference.linear1.bias.copy_(params["b_1"])
            reference.linear2.weight.copy_(params["W_2"].T)
            reference.linear2.bias.copy_(params["b_2"])
            x = randn(g, B, T, d_model)
            # evaluation: dropout is off, and the output does not change from call to call
            module.eval()
            reference.eval()
            out = _seeded(0, call_naming, ev, FFN_CRASHES, module, x)
            expect_shape(out, (B, T, d_model), "the output")
            again = _seeded(1, ev.call, module, x)
            expect(np.allclose(to_numpy(out), to_numpy(again), atol=1e-6),
                   "in eval mode your output changes from call to call: dropout is active at evaluation time. "
                   "Use self.dropout (an nn.Dropout switches off after model.eval()), or "
                   "F.dropout(..., training=self.training).")
            # position-wise: changing one position of the input changes that position's output only
            changed = x.clone()
            changed[:, 2] += 1.0
            moved = np.abs(to_numpy(ev.call(module, changed)) - to_numpy(out)).max(axis=(0, 2)) > 1e-5
            moved[2] = False
            expect(not moved.any(), f"the output at position {int(np.argmax(moved))} changed when only position 2 of "
                                    "the input changed: the FFN acts on every position ALONE (x @ W_1 works on the "
                                    "last axis directly; no reshape or transpose that mixes the sequence axis).")
            mistakes = {
                "the ReLU is applied after the second layer too: FFN(x) = max(0, x W_1 + b_1) W_2 + b_2 has "
                "one ReLU, between the two layers": _ffn(params, x, "relu_twice"),
                "the ReLU is missing: max(0, x W_1 + b_1) between the two layers": _ffn(params, x, "no_relu"),
                "the bias b_1 is missing: the hidden layer is max(0, x W_1 + b_1)": _ffn(params, x, "no_b_1"),
                "the bias b_2 is missing: FFN(x) = max(0, x W_1 + b_1) W_2 + b_2": _ffn(params, x, "no_b_2"),
                "b_1 is added after the ReLU: it goes inside, max(0, x W_1 + b_1)": _ffn(params, x, "bias_after_relu"),
                "the output adds the input x back (a residual connection): the FFN is max(0, x W_1 + b_1) W_2 + b_2 "
                "alone; the layer that uses it adds the residual around it": _ffn(params, x, "residual"),
            }
            mistakes.update({f"the hidden layer uses {name} instead of the formula's ReLU: max(0, x W_1 + b_1) "
                             "(torch.relu, F.relu or .clamp(min=0))": _ffn(params, x, name) for name in _ACTIVATIONS})
            if d_model == d_ff:
                mistakes.update({
                    "the two layers are in the wrong order: first x W_1 + b_1 (d_model -> d_ff), the ReLU, then "
                    "W_2 and b_2 (d_ff -> d_model)": _ffn(params, x, "order"),
                    "W_1 is transposed: it is stored as (d_model, d_ff), so x @ self.W_1 (no .T; the .T belongs "
                    "to nn.Linear's (out, in) weights)": _ffn(params, x, "W_1.T"),
                    "W_2 is transposed: it is stored as (d_ff, d_model), so hidden @ self.W_2 (no .T)":
                        _ffn(params, x, "W_2.T"),
                    LINEAR_CONVENTION: _ffn(params, x, "both.T"),
                })
            ev.expect_close(out, reference(x), f"the output at evaluation (d_model={d_model}, d_ff={d_ff})",
                            mistakes=mistakes)
            # training: dropout between the two layers, with the same masks as the reference's nn.Dropout
            module.train()
            reference.train()
            out = _seeded(seed, ev.call, module, x)
            drop = nn.Dropout(p_drop)
            ev.expect_close(out, _seeded(seed, reference, x), f"the output in training (dropout p={p_drop})", mistakes={
                "in training the output has no dropout: apply self.dropout to the hidden layer, "
                "max(0, x W_1 + b_1), before W_2": _ffn(params, x),
                "dropout is applied to the output: it goes between the two layers, on max(0, x W_1 + b_1)":
                    _seeded(seed, _ffn, params, x, "dropout_output", drop),
                "dropout is applied to the input: it goes between the two layers, on max(0, x W_1 + b_1)":
                    _seeded(seed, _ffn, params, x, "dropout_input", drop),
            }, hint="Apply self.dropout once, to the hidden layer max(0, x W_1 + b_1).")
        tests += 1
    return tests


# ---------------------------------------------------------------------------------------------
# Exercises 2-4: the encoder layer, the decoder layer, the forward pass
# ---------------------------------------------------------------------------------------------
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


def _build(ev: Evaluation, cls, reference, norm_first):
    """The learner's layer with the reference layer's weights (same attribute names)."""
    module = ev.call(cls, D_MODEL, HEADS, D_FF, dropout=0.0, norm_first=norm_first)
    try:
        module.load_state_dict(reference.state_dict())
    except (RuntimeError, AttributeError) as error:
        expect(False, f"your layer's parameters do not match the reference's names: keep __init__ as given "
                      f"({str(error).splitlines()[0][:160]}).")
    return module.eval()


def _layers(ev: Evaluation, cls, reference_cls):
    """The set-up of the layer checks, post-norm then pre-norm: yields (seed, norm_first, the reference layer
    with LayerNorms of their own, the learner's layer `cls` with the same weights), both in eval mode."""
    for seed, norm_first in enumerate((False, True)):
        torch.manual_seed(seed)
        reference = reference_cls(D_MODEL, HEADS, D_FF, dropout=0.0, norm_first=norm_first)
        reference = _randomise_norms(ev, reference, seed).eval()
        yield seed, norm_first, reference, _build(ev, cls, reference, norm_first)


def _layer_check(ev, layer, module, reference, args, output, norm_first, seed, mistakes, crashes=()):
    """The learner's layer equals the reference at evaluation (else the listed mistake, or the block that holds the
    slip), then in training with its dropouts on; `crashes`: the typical crashes to name (call_naming)."""
    with torch.no_grad():
        out = call_naming(ev, crashes, module, *args)
        expect_shape(out, tuple(args[0].shape), "the output")
        mistakes.update(structure_mistakes(layer, output, norm_first, _norms(reference, len(layer["names"]))))
        with explained(lambda: wrong_block(ev, layer, module, reference, args, norm_first)):
            ev.expect_close(out, reference(*args), f"the output (norm_first={norm_first})", mistakes=mistakes)
        check_dropout(ev, layer, module, reference, args, output, norm_first, seed)
    return out


def _norms(layer, n):
    return [getattr(layer, f"norm{k + 1}") for k in range(n)]


@exercise("encoder layer", name="MyEncoderLayer", reference=ref.EncoderLayer)
@single_threaded
def encoder_layer(ev: Evaluation, cls):
    """cls(d_model, num_heads, d_ff, dropout, norm_first) with forward(x, mask=None) -> (B, S, d_model)."""
    tests = 0
    for seed, norm_first, reference, module in _layers(ev, cls, ref.EncoderLayer):
        src = torch.tensor([[5, 6, 7, 8, 9, 4], [5, 6, 7, 0, 0, 0]])
        mask = padding_mask(src, 0)
        x = _x(ev, seed, 2, 6, D_MODEL)

        output = functools.partial(encoder_output, reference, x, mask=mask, norm_first=norm_first)
        mistakes = {
            "the padding mask is not passed to the self-attention: self_attn(y, y, y, mask)": output(mask=None),
            "the padding mask is inverted (~mask: True at the padding): the course's masks are True where attention "
            "is ALLOWED; pass the mask as given, self_attn(y, y, y, mask)": output(mask=~mask)}
        _layer_check(ev, ENCODER, module, reference, (x, mask), output, norm_first, seed, mistakes)
        tests += 1
    return tests


@exercise("decoder layer", name="MyDecoderLayer", reference=ref.DecoderLayer)
@single_threaded
def decoder_layer(ev: Evaluation, cls):
    """cls(d_model, num_heads, d_ff, dropout, norm_first) with forward(x, memory, tgt_mask, memory_mask)."""
    tests = 0
    for seed, norm_first, reference, module in _layers(ev, cls, ref.DecoderLayer):
        src = torch.tensor([[5, 6, 7, 8, 9, 4, 3], [5, 6, 7, 0, 0, 0, 0]])
        tgt = torch.tensor([[1, 5, 6, 7, 8], [1, 5, 6, 0, 0]])
        tgt_mask, memory_mask = causal_mask(5) & padding_mask(tgt, 0), padding_mask(src, 0)
        x, memory = _x(ev, seed, 2, 5, D_MODEL), _x(ev, seed + 10, 2, 7, D_MODEL)

        output = functools.partial(decoder_output, reference, x, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                                   norm_first=norm_first)
        mistakes = {
            "the cross-attention takes its keys and values from the decoder: they come from the "
            "encoder, cross_attn(y, memory, memory, memory_mask)": output(cross="self_twice"),
            "the causal mask is not applied in the self-attention: self_attn(y, y, y, tgt_mask)": output(tgt_mask=None),
            "the target padding is not masked in the self-attention: use the tgt_mask you are given (the causal mask "
            "& the target padding mask), not a causal mask of your own": output(tgt_mask=causal_mask(5)),
            "the target mask is inverted (~tgt_mask): the course's masks are True where attention is ALLOWED; pass "
            "tgt_mask as given, self_attn(y, y, y, tgt_mask)": output(tgt_mask=~tgt_mask),
            "the source padding mask is not applied in the cross-attention: "
            "cross_attn(y, memory, memory, memory_mask)": output(memory_mask=None),
            "the source padding mask is inverted (~memory_mask): the course's masks are True where attention is "
            "ALLOWED; pass memory_mask as given, cross_attn(y, memory, memory, memory_mask)":
                output(memory_mask=~memory_mask),
            "the encoder's memory goes through norm2: only the decoder's x is normalised, the keys and values are "
            "the memory as it is, cross_attn(norm2(x), memory, memory, memory_mask)": output(cross="memory_normed"),
            "the cross-attention uses self_attn's weights: call the cross-attention's own module, "
            "self.cross_attn(y, memory, memory, memory_mask)": output(cross="self_attn"),
        }
        args = (x, memory, tgt_mask, memory_mask)
        out = _layer_check(ev, DECODER, module, reference, args, output, norm_first, seed, mistakes,
                           crashes=decoder_crashes(5, 7))
        with torch.no_grad():
            # causality: changing later decoder positions leaves earlier outputs unchanged
            changed = x.clone()
            changed[:, 3:] += 3.0
            out2 = ev.call(module, changed, memory, tgt_mask, memory_mask)
            moved = (to_numpy(out) - to_numpy(out2))[:, :3]
            expect(abs(moved).max() < 1e-5, "the output at positions 0-2 changed when positions 3-4 changed: "
                                            "the decoder's self-attention must be causal (tgt_mask).")
        tests += 1
    return tests


@exercise("Transformer forward pass with masks", reference=lambda model, src, tgt_in: model(src, tgt_in),
          random=False)
@single_threaded
def transformer_forward(ev: Evaluation, answer):
    """answer(model, src (B, S), tgt_in (B, T)) -> logits (B, T, tgt_vocab_size), equal to model(src, tgt_in)."""
    tests = 0
    for seed, norm_first in enumerate((True, False)):
        torch.manual_seed(seed)
        model = ref.Transformer(17, 19, d_model=D_MODEL, num_heads=HEADS, num_layers=2, d_ff=D_FF, dropout=0.0,
                                max_len=16, norm_first=norm_first, pad_id=PAD_ID).eval()
        # the pad id is not the notebook's PAD = 0, and 0, 1, 2 are real tokens here
        src = torch.tensor([[5, 0, 7, 1, 2, 4], [5, 6, 0, PAD_ID, PAD_ID, PAD_ID]])
        tgt_in = torch.tensor([[1, 5, 0, 7, 2], [1, 2, 0, PAD_ID, PAD_ID]])
        with torch.no_grad():
            logits = ev.call(answer, model, src, tgt_in)
            expect_shape(logits, (2, 5, 19), "the logits")
            ev.expect_close(logits, model(src, tgt_in), f"the logits (norm_first={norm_first})",
                            mistakes=forward_mistakes(model, src, tgt_in))
            # causality: later target tokens do not change the earlier logits
            changed = tgt_in.clone()
            changed[0, 3:] = torch.tensor([11, 12])
            later = ev.call(answer, model, src, changed)
            expect(torch.allclose(torch.as_tensor(to_numpy(later))[0, :3], torch.as_tensor(to_numpy(logits))[0, :3],
                                  atol=1e-5),
                   "the logits at positions 0-2 changed when target tokens 3-4 changed: the decoder must be causal.")
        tests += 1
    return tests
