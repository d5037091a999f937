"""Lesson 09, exercise 1: the position-wise feed-forward network.

    MyFeedForward(d_model, d_ff, dropout): parameters W_1 (d_model, d_ff), b_1 (d_ff,), W_2 (d_ff, d_model),
    b_2 (d_model,) and self.dropout (given); forward(x (B, T, d_model)) -> (B, T, d_model),
        FFN(x) = max(0, x W_1 + b_1) W_2 + b_2, dropout on the hidden layer.

The check loads random parameters into the learner's module and compares it with the course's
PositionwiseFeedForward holding the same weights: first with d_ff = d_model (where the layers in the wrong order or
a transposed matrix give values to name), then d_ff != d_model. At evaluation: the output does not change from call
to call (dropout off), each position's output depends on that position alone, and the values; in training: the
same dropout masks as the reference's nn.Dropout, on the hidden layer.
"""
import functools
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from ... import transformer as ref
from ..core import Mistake, Mistakes, exercise, expect, expect_shape, randn, single_threaded, to_numpy
from ..evaluation import Evaluation, call_naming
from ..expectations import explained
from ..torch_errors import MATMUL


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
ACTIVATIONS = {"GELU": F.gelu, "GELU (tanh approximation)": lambda t: F.gelu(t, approximate="tanh"), "SiLU": F.silu,
               "tanh": torch.tanh, "sigmoid": torch.sigmoid, "LeakyReLU": F.leaky_relu, "ELU": F.elu,
               "softplus": F.softplus}


def ffn(p, x, kind="ok", drop=None):
    """FFN(x) from the parameters p, with or without the typical slip `kind`; `drop` is the dropout to apply (None at
    evaluation). The one definition of every slip of the computation."""
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
    hidden = inp @ W_1 + (0 if kind in ("no_b_1", "bias_after_relu") else b_1)                  # (B, T, d_ff)
    hidden = hidden if kind == "no_relu" else ACTIVATIONS.get(kind, torch.relu)(hidden)
    hidden = hidden + b_1 if kind == "bias_after_relu" else hidden
    hidden = hidden if kind in ("dropout_input", "dropout_output", "no_dropout") else drop(hidden)
    out = hidden @ W_2 + (0 if kind == "no_b_2" else b_2)                                       # (B, T, d_model)
    out = torch.relu(out) if kind == "relu_twice" else out
    out = x + out if kind == "residual" else out
    return drop(out) if kind == "dropout_output" else out


def _answer(kind):
    """The exercise's class with the slip `kind` of `ffn`."""
    def forward(self, x):
        return ffn(dict(self.named_parameters()), x, kind, self.dropout if self.training else None)
    return type(f"FeedForward_{kind}", (FeedForward,), {"forward": forward})


def _forward(forward):
    return type("LearnersFeedForward", (FeedForward,), {"forward": forward})


class _RenamedParameters(FeedForward):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.W1 = self.W_1
        del self.W_1


class _NotAModule:
    def __init__(self, d_model, d_ff, dropout=0.1):
        self.inner = FeedForward(d_model, d_ff, dropout)

    def __call__(self, x):
        return self.inner(x)


def _linear_when_rectangular(self, x):
    """F.linear with the (d_model, d_ff) matrices: right where they are square (W and Wᵀ have one shape)."""
    if self.W_1.shape[0] == self.W_1.shape[1]:
        return FeedForward.forward(self, x)
    return F.linear(self.dropout(torch.relu(F.linear(x, self.W_1, self.b_1))), self.W_2, self.b_2)


def _mixes_positions(self, x):
    B, T, d_model = x.shape
    return FeedForward.forward(self, x.reshape(B, d_model, T).transpose(1, 2))


_FORMULA = "FFN(x) = max(0, x W_1 + b_1) W_2 + b_2"
M = Mistakes(
    Mistake("not_module", "your class is not an nn.Module", hint="keep `class ...(nn.Module)` as given",
            shows=_NotAModule),
    Mistake("params_changed", "your module's parameters are not W_1 (d_model, d_ff), b_1, W_2 (d_ff, d_model) and "
            "b_2 as __init__ gives them: the check loads its own values into them ({error})",
            hint="keep __init__ as given", shows=_RenamedParameters),
    Mistake("dropout_at_eval", "at evaluation your output changes from call to call: dropout is still active in eval "
            "mode", hint="self.dropout (an nn.Dropout switches off in eval mode), or "
            "F.dropout(..., training=self.training)",
            shows=_forward(lambda self, x: F.dropout(torch.relu(x @ self.W_1 + self.b_1), self.dropout.p) @ self.W_2
                           + self.b_2)),
    Mistake("not_position_wise", "the output at position {t} changed when only position 2 of the input changed: the "
            "FFN acts on every position ALONE, on the last axis (no reshape or transpose that mixes the positions)",
            shows=_forward(_mixes_positions)),
    Mistake("relu_twice", f"the ReLU is applied after the second layer too: {_FORMULA} has one ReLU, between the two "
            "layers", shows=_answer("relu_twice")),
    Mistake("no_relu", "the ReLU is missing: max(0, x W_1 + b_1) between the two layers", hint="torch.relu",
            shows=_answer("no_relu")),
    Mistake("no_b_1", "the bias b_1 is missing: the hidden layer is max(0, x W_1 + b_1)", shows=_answer("no_b_1")),
    Mistake("no_b_2", f"the bias b_2 is missing: {_FORMULA}", shows=_answer("no_b_2")),
    Mistake("bias_after_relu", "b_1 is added after the ReLU: it goes inside, max(0, x W_1 + b_1)",
            shows=_answer("bias_after_relu")),
    Mistake("residual", f"the output adds the input x back (a residual connection): the FFN is {_FORMULA} alone; the "
            "layer that uses it adds the residual around it", shows=_answer("residual")),
    Mistake("not_relu", "the hidden layer uses {name} instead of the formula's ReLU, max(0, x W_1 + b_1)",
            hint="torch.relu, F.relu or .clamp(min=0)", shows=_answer("GELU")),
    Mistake("layers_swapped", "the two layers are in the wrong order: first x W_1 + b_1 (d_model -> d_ff), the ReLU, "
            "then W_2 and b_2 (d_ff -> d_model)", shows=_answer("order")),
    Mistake("W_1_transposed", "W_1 is transposed: it is stored as (d_model, d_ff), so x W_1 takes it as it is",
            hint="x @ self.W_1 (the .T belongs to nn.Linear's (out, in) weights)", shows=_answer("W_1.T")),
    Mistake("W_2_transposed", "W_2 is transposed: it is stored as (d_ff, d_model), so the hidden layer times W_2 takes "
            "it as it is", hint="hidden @ self.W_2", shows=_answer("W_2.T")),
    Mistake("both_transposed", "W_1 and W_2 are both transposed: they are stored (d_model, d_ff) and (d_ff, d_model), "
            "the shapes x W_1 and the hidden layer times W_2 take as they are",
            hint="x @ self.W_1 + self.b_1 (F.linear(x, W, b) computes x Wᵀ + b, for nn.Linear's (out, in) weights)",
            shows=_answer("both.T")),
    Mistake("matmul_shapes", "a matrix product has mismatched shapes (here d_ff ≠ d_model): W_1 is (d_model, d_ff) "
            "and W_2 (d_ff, d_model), each multiplied as it is stored",
            hint="x @ self.W_1 + self.b_1 and hidden @ self.W_2 + self.b_2, no .T (F.linear(x, W, b) computes "
            "x Wᵀ + b, for nn.Linear's (out, in) weights)", shows=_forward(_linear_when_rectangular)),
    Mistake("no_dropout", "in training the output has no dropout: dropout goes on the hidden layer, "
            "max(0, x W_1 + b_1), before W_2", hint="self.dropout(hidden)", shows=_answer("no_dropout")),
    Mistake("dropout_on_output", "dropout is applied to the output: it goes between the two layers, on "
            "max(0, x W_1 + b_1)", shows=_answer("dropout_output")),
    Mistake("dropout_on_input", "dropout is applied to the input: it goes between the two layers, on "
            "max(0, x W_1 + b_1)", shows=_answer("dropout_input")),
    Mistake("dropout_elsewhere", "your network is right at evaluation but not in training (dropout p={p}, the same "
            "masks as the course's nn.Dropout): dropout is applied once, to the hidden layer max(0, x W_1 + b_1)",
            hint="self.dropout(torch.relu(x @ self.W_1 + self.b_1)) @ self.W_2 + self.b_2",
            shows=_forward(lambda self, x: self.dropout(self.dropout(torch.relu(x @ self.W_1 + self.b_1))) @ self.W_2
                           + self.b_2)),
)
_EVAL = ["relu_twice", "no_relu", "no_b_1", "no_b_2", "bias_after_relu", "residual"]
_SQUARE = {"layers_swapped": "order", "W_1_transposed": "W_1.T", "W_2_transposed": "W_2.T", "both_transposed": "both.T"}
_TRAINING = {"dropout_on_output": "dropout_output", "dropout_on_input": "dropout_input"}


def _seeded(seed, answer, *args):
    """answer(*args) with the global random generator seeded (dropout masks), leaving the generator as it was."""
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return answer(*args)


def _einsum_ffn(self, x):
    hidden = torch.einsum("btd,df->btf", x, self.W_1).add(self.b_1).clamp(min=0)
    return torch.einsum("btf,fd->btd", self.dropout(hidden), self.W_2) + self.b_2


@exercise("position-wise feed-forward network", name="MyFeedForward", reference=FeedForward, mistakes=M,
          right=[_forward(_einsum_ffn)])
@single_threaded
def feed_forward(ev: Evaluation, cls):
    """cls(d_model, d_ff, dropout) with parameters W_1 (d_model, d_ff), b_1, W_2 (d_ff, d_model), b_2 and
    self.dropout; forward(x (B, T, d_model)) -> (B, T, d_model)."""
    tests = 0
    # d_ff == d_model first: there the two layers in the wrong order, or a transposed W_1, give values to name
    for seed, (B, T, d_model, d_ff) in enumerate([(2, 5, 8, 8), (3, 4, 6, 16)]):
        p_drop = 0.5
        module = ev.call(cls, d_model, d_ff, dropout=p_drop)
        expect(isinstance(module, nn.Module), M.not_module)
        g = ev.rng(seed)
        params = {"W_1": randn(g, d_model, d_ff, scale=d_model ** -0.5), "b_1": randn(g, d_ff, scale=0.5),
                  "W_2": randn(g, d_ff, d_model, scale=d_ff ** -0.5), "b_2": randn(g, d_model, scale=0.5)}
        try:
            module.load_state_dict(params)
        except (RuntimeError, AttributeError) as error:
            expect(False, M.params_changed.at(error=str(error).splitlines()[0][:160]))
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
            out = _seeded(0, call_naming, ev, [(MATMUL, M.matmul_shapes)], module, x)
            expect_shape(out, (B, T, d_model), "the output")
            again = _seeded(1, ev.call, module, x)
            expect(np.allclose(to_numpy(out), to_numpy(again), atol=1e-6), M.dropout_at_eval)
            # position-wise: changing one position of the input changes that position's output only
            changed = x.clone()
            changed[:, 2] += 1.0
            moved = np.abs(to_numpy(ev.call(module, changed)) - to_numpy(out)).max(axis=(0, 2)) > 1e-5
            moved[2] = False
            expect(not moved.any(), M.not_position_wise.at(t=int(np.argmax(moved))))
            mistakes = {M[key]: ffn(params, x, key) for key in _EVAL}
            mistakes.update({M.not_relu.at(name=name): ffn(params, x, name) for name in ACTIVATIONS})
            if d_model == d_ff:
                mistakes.update({M[key]: ffn(params, x, kind) for key, kind in _SQUARE.items()})
            ev.expect_close(out, reference(x), f"the output at evaluation (d_model={d_model}, d_ff={d_ff})",
                            mistakes=mistakes)
            # training: dropout between the two layers, with the same masks as the reference's nn.Dropout
            module.train()
            reference.train()
            out = _seeded(seed, ev.call, module, x)
            drop = nn.Dropout(p_drop)
            mistakes = {M.no_dropout: ffn(params, x, "no_dropout")}
            mistakes.update({M[key]: _seeded(seed, ffn, params, x, kind, drop) for key, kind in _TRAINING.items()})
            with explained(functools.partial(M.dropout_elsewhere.at, p=p_drop)):
                ev.expect_close(out, _seeded(seed, reference, x), f"the output in training (dropout p={p_drop})",
                                mistakes=mistakes)
        tests += 1
    return tests
