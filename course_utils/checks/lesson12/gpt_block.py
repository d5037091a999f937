"""Lesson 12, exercise 2: the decoder block (pre-norm, causal).

    MyGPTBlock(d_model, num_heads, d_ff, dropout) with forward(x (B, T, d_model), mask) -> (B, T, d_model):
        x + Dropout1(Attn(LN1(x), mask)), then x + Dropout2(FFN(LN2(x)))

The check builds the learner's class with the course's GPTBlock's weights (every LayerNorm given a gain and a bias
of its own) and compares the outputs at evaluation and in training (dropout 0.2, the same dropout masks), naming
the mistake whose values the answer gives (block_mistakes.py); where none does, it switches each half off to say
which half holds the slip. At evaluation it also tests causality: outputs before position 4 stay the same when
the inputs from position 4 on change.
"""
import functools
import re

import torch
import torch.nn as nn

from ...attention import MultiHeadAttention
from ...gpt import GPTBlock
from ...masks import causal_mask
from ...transformer import PositionwiseFeedForward
from ..core import exercise, expect_shape, randn, single_threaded
from ..evaluation import Evaluation, call_naming
from ..expectations import explained
from .block_mistakes import TRAINING_ONLY, VALUE_KEYS, M, block_variant
from .modules import agree, build, expect_causal, randomise, seeded

D_MODEL, HEADS, D_FF = 16, 4, 32
# Python's words when the course's MultiHeadAttention (query, key, value, mask) is called as attn(y, mask)
CRASHES = [(re.compile(r"missing 1 required positional argument: 'value'"), M.attn_takes_qkv)]


class _LearnerStyle(nn.Module):
    """The exercise's __init__ (lesson 09's MultiHeadAttention), the forward written with a named y."""

    def __init__(self, d_model, num_heads, d_ff, dropout=0.0):
        super().__init__()
        self.norm1 = nn.LayerNorm(d_model)
        self.attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.norm2 = nn.LayerNorm(d_model)
        self.ff = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.dropout1, self.dropout2 = nn.Dropout(dropout), nn.Dropout(dropout)

    def forward(self, x, mask):
        attended = self.attn(*[self.norm1(x)] * 3, mask)
        h = x + self.dropout1(attended)
        return h + self.dropout2(self.ff(self.norm2(h)))


def wrong_half(ev, module, reference, x, mask, seed):
    """Which half of the learner's block holds the slip, found by switching the other one off (or None)."""
    if agree(ev, ("ff",), module, reference, x, mask, seed=seed):
        return M.slip_in_ff_half
    if agree(ev, ("attn",), module, reference, x, mask, seed=seed):
        return M.slip_in_attention_half
    return None


@exercise("decoder block (pre-norm, causal)", name="MyGPTBlock", reference=GPTBlock, mistakes=M,
          right=[_LearnerStyle])
@single_threaded
def gpt_block(ev: Evaluation, cls):
    """cls(d_model, num_heads, d_ff, dropout) with forward(x (B, T, d_model), mask) -> (B, T, d_model):
    x + Dropout(Attn(LN(x), mask)), then x + Dropout(FFN(LN(x))). Compared with the course's GPTBlock holding
    the same weights, at evaluation and in training (the same dropout masks)."""
    tests = 0
    for seed, dropout in enumerate((0.0, 0.2)):
        torch.manual_seed(seed)
        reference = randomise(ev, GPTBlock(D_MODEL, HEADS, D_FF, dropout=dropout), seed)
        module = build(ev, cls, reference, M, D_MODEL, HEADS, D_FF, dropout=dropout)
        training = dropout > 0
        reference.train(training)
        module.train(training)
        T = 6
        x, mask = randn(ev.rng(seed), 2, T, D_MODEL), causal_mask(T)
        with torch.no_grad():
            out = seeded(seed, call_naming, ev, CRASHES, module, x, mask)
            expect_shape(out, (2, T, D_MODEL), "the block's output")
            expected = seeded(seed, reference, x, mask)
            keys = [k for k in VALUE_KEYS if training or k not in TRAINING_ONLY]
            mistakes = {M[k]: seeded(seed, block_variant, reference, x, mask, k) for k in keys}
            where = "in training, dropout 0.2, the same dropout masks" if training else "at evaluation"
            with explained(functools.partial(wrong_half, ev, module, reference, x, mask, seed)):
                ev.expect_close(out, expected, f"the block's output ({where})", mistakes=mistakes, atol=1e-5)
            if not training:                       # causality: later positions changed, earlier outputs kept
                changed = x.clone()
                changed[:, 4:] += 3.0
                expect_causal(M, "the output", out, call_naming(ev, CRASHES, module, changed, mask), 4)
        tests += 1
    return tests
