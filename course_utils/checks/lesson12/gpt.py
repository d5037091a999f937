"""Lesson 12, exercise 3: the GPT (embeddings, learned positions, blocks, final LayerNorm, tied output layer).

    MyGPT(vocab_size, d_model, num_heads, num_layers, d_ff, max_len, dropout) with forward(tokens (B, T))
        -> logits (B, T, vocab_size); the output layer tied to the token embedding in __init__

The check builds the learner's class with the weights of the course's GPT with learned positions (ReferenceGPT;
every LayerNorm and the position table given values of their own) and compares the logits for T = 9 and
T = max_len at evaluation and in training (dropout 0.2, the same dropout masks), naming the mistake whose values
the answer gives (gpt_mistakes.py); where none does, it switches every block off to say whether the slip is at
the ends or in the blocks. It tests the tie as the exercise states it (one parameter, made in __init__, used for
the logits) and causality (the logits before position k stay the same when the tokens from k on change).
"""
import functools
import math
import re

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from ...masks import causal_mask
from ...positions import LearnedPositionalEncoding
from ..core import exercise, expect, expect_shape, single_threaded, to_numpy
from ..evaluation import Evaluation, call_naming
from ..expectations import explained
from ..torch_errors import EMBEDDING_INDEX, INDICES_DTYPE, MATMUL, NORMALIZED_SHAPE, NOT_TENSOR, PARAMETER_ASSIGN
from .gpt_mistakes import TRAINING_ONLY, VALUE_KEYS, M, ReferenceGPT, model_variant
from .modules import agree, build, expect_causal, randomise, seeded

D_MODEL, HEADS, D_FF = 16, 4, 32
# the course's own words for a mask that does not fit (masks.check_mask, attention._check_position_mask), and
# Python's for an nn.Sequential given two inputs
_MASK_2D = re.compile(r"a 2-D mask must be \(T_q, T_k\) = \(\d+, \d+\), the same for every sequence, got "
                      r"\((?P<got>[\d, ]+)\)")
_MASK_SHAPE = re.compile(r"mask of shape \((?P<got>[\d, ]+)\) does not broadcast to the scores' shape")
_MASK_DTYPE = re.compile(r"mask must be a bool tensor \(True = may attend, False = masked out\), got (?P<dtype>[\w.]+)")
_SEQUENTIAL = re.compile(r"Sequential\.forward\(\) takes \d+ positional arguments? but \d+ were given")


def _crashes(module, T, V):
    """The learner's typical crashes for tokens (B, T), named where torch's words (and the module) single the slip
    out."""
    def untransposed(match):
        return M.output_untransposed if (int(match["c1"]), int(match["r2"]), int(match["c2"])) == (D_MODEL, V,
                                                                                                  D_MODEL) else None
    return [
        (_MASK_2D, lambda match: M.mask_shape.at(got=f"({match['got']})", T=T)),
        (_MASK_SHAPE, lambda match: M.mask_shape.at(got=f"({match['got']})", T=T)),
        (_MASK_DTYPE, lambda match: M.float_mask.at(dtype=match["dtype"])),
        (MATMUL, untransposed),
        (EMBEDDING_INDEX, M.table_overrun),
        (NOT_TENSOR, lambda match: M.sqrt_of_int if match["op"] == "sqrt" else None),
        (_SEQUENTIAL, M.sequential),
        (INDICES_DTYPE, lambda match: M.head_is_embedding if isinstance(module.head, nn.Embedding) else None),
        (NORMALIZED_SHAPE, lambda match: M.norm_on_logits if int(match["got"].split(",")[-1]) == V else None),
    ]


class _LearnerStyle(nn.Module):
    """The exercise's __init__, tied as it asks; forward multiplies by the embedding's matrix itself."""

    def __init__(self, vocab_size, d_model, num_heads, num_layers, d_ff, max_len, dropout=0.0):
        from ...gpt import GPTBlock

        super().__init__()
        self.d_model, self.max_len = d_model, max_len
        self.embed = nn.Embedding(vocab_size, d_model)
        self.pos = LearnedPositionalEncoding(d_model, max_len, dropout)
        self.layers = nn.ModuleList(GPTBlock(d_model, num_heads, d_ff, dropout) for _ in range(num_layers))
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, tokens):
        x = self.pos(self.embed(tokens) * math.sqrt(self.d_model))
        for layer in self.layers:
            x = layer(x, causal_mask(tokens.size(1)))
        return F.linear(self.norm(x), self.embed.weight)


class _TiedBack(ReferenceGPT):
    """The tie made the other way round: the embedding takes the output layer's parameter."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.head.weight = nn.Parameter(self.head.weight.detach().clone())
        self.embed.weight = self.head.weight


def wrong_part(ev, module, reference, tokens):
    """Where the learner's GPT differs: at its ends, or in how it runs its blocks (with every block off)."""
    return M.slip_in_blocks if agree(ev, ("attn", "ff"), module, reference, tokens) else M.slip_at_ends


def _head_unused(ev, module, tokens, logits):
    """Whether the logits stay the same with the output layer's own weight at 0 (the answer uses E itself)."""
    import copy

    probe = copy.deepcopy(module)
    with torch.no_grad():
        probe.head.weight.zero_()
        return np.allclose(to_numpy(ev.call(probe, tokens)), to_numpy(logits), atol=1e-6)


def _shares_memory(module):
    try:
        return module.head.weight.data_ptr() == module.embed.weight.data_ptr()
    except Exception:  # noqa: BLE001 - a learner's module without these weights: not a shared tensor
        return False


def expect_tied(ev, module, tokens, logits, training, tied_in_init):
    """The output layer of `module` (its logits `logits` for `tokens`) is its embedding's parameter: the logits
    come from E (tested at evaluation, where they are deterministic), the tie is made in __init__ (`tied_in_init`:
    `module.head.weight is module.embed.weight` before the first forward), and self.head is that parameter."""
    same = module.head.weight is module.embed.weight
    if not training and not same and not _head_unused(ev, module, tokens, logits):
        expect(not _shares_memory(module), M.aliased)
        expect(False, M.untied)
    expect(tied_in_init or not same, M.tied_in_forward)
    expect(same, M.head_unused)


@exercise("the GPT: embeddings, positions, blocks, final LayerNorm, tied output", name="MyGPT",
          reference=ReferenceGPT, mistakes=M, right=[_LearnerStyle, _TiedBack])
@single_threaded
def gpt(ev: Evaluation, cls):
    """cls(vocab_size, d_model, num_heads, num_layers, d_ff, max_len, dropout) with forward(tokens (B, T)) ->
    logits (B, T, vocab_size). Compared with the course's GPT (learned positions) holding the same weights."""
    tests = 0
    V, L, max_len = 29, 2, 12
    for seed, (T, dropout) in enumerate(((9, 0.0), (max_len, 0.0), (9, 0.2))):
        torch.manual_seed(seed)
        training = dropout > 0
        reference = randomise(ev, ReferenceGPT(V, D_MODEL, HEADS, L, D_FF, max_len, dropout=dropout), seed,
                              positions=True).train(training)
        module = build(ev, cls, reference, M, V, D_MODEL, HEADS, L, D_FF, max_len, dropout=dropout,
                       crashes=[(PARAMETER_ASSIGN, M.tied_transposed)]).train(training)
        tied_in_init = module.head.weight is module.embed.weight
        tokens = torch.as_tensor(ev.rng(seed).integers(1, V, size=(3, T)))
        crashes = _crashes(module, T, V)
        with torch.no_grad():
            logits = seeded(seed, call_naming, ev, crashes, module, tokens)
            expect_shape(logits, (3, T, V), f"the logits for tokens of shape (3, {T})")
            expected = seeded(seed, reference, tokens)
            keys = [k for k in VALUE_KEYS if training or k not in TRAINING_ONLY]
            mistakes = {M[k]: seeded(seed, model_variant, reference, tokens, k) for k in keys}
            where = ", in training, dropout 0.2, the same dropout masks" if training else ""
            with explained(functools.partial(wrong_part, ev, module, reference, tokens)):
                ev.expect_close(logits, expected, f"the logits (T = {T}, max_len = {max_len}{where})",
                                mistakes=mistakes, atol=1e-4)
            expect_tied(ev, module, tokens, logits, training, tied_in_init)
            for k in () if training else (T - 1, T // 2):   # causality: later tokens changed, earlier logits kept
                changed = tokens.clone()
                changed[:, k:] = (changed[:, k:] + 1) % (V - 1) + 1
                expect_causal(M, "the logits", logits, call_naming(ev, crashes, module, changed), k)
        tests += 1
    return tests
