"""Temporal convolution and causal attention, as in SNAIL (Mishra et al., 2018; lesson 11).

    block = DenseBlock(d_in=32, filters=16, dilation=2)   # (B, T, 32) -> (B, T, 48): x, then new features
    tc = TCBlock(d_in=32, seq_len=17, filters=16)         # ⌈log2 17⌉ = 5 dense blocks, dilations 1, 2, 4, 8, 16
    attn = AttentionBlock(d_in=32, d_key=16, d_value=16)  # (B, T, 32) -> (B, T, 48); attn.attn_weights (B, T, T)
    model = SNAIL(vocab_size=16, num_classes=16, seq_len=13)             # attention + temporal convolution
    alone = SNAIL(vocab_size=16, num_classes=16, seq_len=13, use_tc=False) # attention alone
    logits = model(tokens)                                # tokens (B, T) int64 -> (B, T, num_classes)
    tokens, targets = make_next_token_batch(64, length=12, vocab_size=16, generator=rng)  # (B, 13), (B,)

Every block is causal (the output at step t depends on inputs 0..t only) and batch-first; every block
*concatenates* its new features to its input, as in the paper, so the width grows block by block.
The task `make_next_token_batch` asks "what came after q?": "s_1 ... s_n q" -> the symbol that
followed q. Attention finds q's earlier occurrence by content; telling which symbol came *right after*
it needs a sense of order, which a convolution has built in and causal attention only indirectly.
"""
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from .attention import scaled_dot_product_attention
from .masks import causal_mask


def causal_attention_block(x, W_q, W_k, W_v):
    """SNAIL's attention block as a function: causal attention, its read-out concatenated to x.

    x: (B, T, d_in); W_q, W_k: (d_in, d_key); W_v: (d_in, d_value), so q = x W_q etc.
    Returns (B, T, d_in + d_value) = [x, weights v] and the weights (B, T, T) (query t, key s).
    """
    if x.dim() != 3:
        raise ValueError(f"x should have shape (B, T, d_in), got shape {tuple(x.shape)}")
    T = x.shape[1]
    q, k, v = x @ W_q, x @ W_k, x @ W_v                          # (B, T, d_key), (B, T, d_key), (B, T, d_value)
    read, weights = scaled_dot_product_attention(q, k, v, mask=causal_mask(T, x.device), need_weights=True)
    return torch.cat([x, read], dim=-1), weights                # (B, T, d_in + d_value), (B, T, T)


class AttentionBlock(nn.Module):
    """Causal single-head attention whose read-out is appended to the input: d_in -> d_in + d_value."""

    def __init__(self, d_in, d_key, d_value):
        super().__init__()
        self.query = nn.Linear(d_in, d_key, bias=False)
        self.key = nn.Linear(d_in, d_key, bias=False)
        self.value = nn.Linear(d_in, d_value, bias=False)
        self.d_out = d_in + d_value
        self.attn_weights = None

    def forward(self, x):                                       # (B, T, d_in)
        out, weights = causal_attention_block(x, self.query.weight.T, self.key.weight.T, self.value.weight.T)
        self.attn_weights = weights.detach()                    # (B, T, T)
        return out                                              # (B, T, d_in + d_value)


class CausalConv1d(nn.Module):
    """A 1-D convolution over time that sees only the present and the past (batch-first, (B, T, C)).

    With kernel size 2 and dilation d, the output at t mixes the inputs at t and t - d: the input is
    padded on the left by d·(kernel_size - 1) zeros, so nothing from the future leaks in.
    """

    def __init__(self, d_in, d_out, kernel_size=2, dilation=1):
        super().__init__()
        self.pad = dilation * (kernel_size - 1)
        self.conv = nn.Conv1d(d_in, d_out, kernel_size, dilation=dilation)

    def forward(self, x):                                       # (B, T, d_in)
        x = F.pad(x.transpose(1, 2), (self.pad, 0))             # (B, d_in, pad + T)
        return self.conv(x).transpose(1, 2)                     # (B, T, d_out)


class DenseBlock(nn.Module):
    """Gated causal dilated convolution, appended to its input: [x, tanh(W_f * x) ⊙ σ(W_g * x)]."""

    def __init__(self, d_in, filters, dilation):
        super().__init__()
        self.conv_f = CausalConv1d(d_in, filters, dilation=dilation)
        self.conv_g = CausalConv1d(d_in, filters, dilation=dilation)
        self.d_out = d_in + filters

    def forward(self, x):                                       # (B, T, d_in)
        activations = torch.tanh(self.conv_f(x)) * torch.sigmoid(self.conv_g(x))   # (B, T, filters)
        return torch.cat([x, activations], dim=-1)              # (B, T, d_in + filters)


def tc_dilations(seq_len, first=1):
    """Dilations of a TC block: ⌈log2 seq_len⌉ dense blocks (at least one), the dilation doubling each time.

    first=1 (the default, as in WaveNet): 1, 2, 4, ..., 2^(n-1), so that step t sees every lag 0..2^n - 1,
    the whole past of a sequence of seq_len <= 2^n steps. first=2 is the paper's pseudocode read literally
    (Mishra et al., 2018, section 3: DenseBlock(inputs, 2^i, D) for i in 1..⌈log2 T⌉): 2, 4, ..., 2^n,
    which with kernel size 2 reaches only the EVEN lags (never step t - 1).
    """
    if int(seq_len) < 1:
        raise ValueError(f"seq_len must be >= 1, got {seq_len}")
    if int(first) < 1:
        raise ValueError(f"the first dilation must be >= 1, got {first}")
    return [int(first) * 2 ** i for i in range(max(1, math.ceil(math.log2(seq_len))))]


def reachable_lags(dilations, kernel_size=2):
    """The lags t - s through which input step s reaches output step t in a stack of causal convolutions
    with these dilations (each mixes x_t with x_{t-d}): the sums of subsets of the dilations."""
    lags = {0}
    for d in dilations:
        lags |= {lag + k * d for lag in lags for k in range(1, kernel_size)}
    return sorted(lags)


class TCBlock(nn.Module):
    """A stack of dense blocks with dilations 1, 2, 4, ... (`tc_dilations`): receptive field 2^n >= seq_len steps."""

    def __init__(self, d_in, seq_len, filters, first_dilation=1):
        super().__init__()
        blocks, d = [], d_in
        for dilation in tc_dilations(seq_len, first_dilation):
            blocks.append(DenseBlock(d, filters, dilation))
            d = blocks[-1].d_out
        self.blocks = nn.Sequential(*blocks)
        self.d_out = d

    def forward(self, x):                                       # (B, T, d_in)
        return self.blocks(x)                                   # (B, T, d_in + n·filters)


class SNAIL(nn.Module):
    """Embedding -> [attention -> TC] × num_tc -> attention -> linear: the layout of the paper's few-shot
    classifier (Mishra et al., 2018, appendix A), with small sizes.

    use_tc=False gives the "attention alone" model: the same attention blocks, one extra attention
    block in place of each TC block, and nothing that knows the order of the steps.
    first_dilation: the TC blocks' first dilation (1; 2 reads the paper's pseudocode literally, `tc_dilations`).
    """

    def __init__(self, vocab_size, num_classes, seq_len, d_model=32, d_key=16, d_value=16, filters=16,
                 num_tc=2, use_tc=True, first_dilation=1):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, d_model)
        blocks, d = [], d_model
        for _ in range(num_tc):
            blocks.append(AttentionBlock(d, d_key, d_value))
            d = blocks[-1].d_out
            blocks.append(TCBlock(d, seq_len, filters, first_dilation) if use_tc else AttentionBlock(d, d_key, d_value))
            d = blocks[-1].d_out
        blocks.append(AttentionBlock(d, d_key, d_value))
        self.blocks = nn.Sequential(*blocks)
        self.out = nn.Linear(blocks[-1].d_out, num_classes)

    @property
    def attention_blocks(self):
        return [b for b in self.blocks if isinstance(b, AttentionBlock)]

    def forward(self, tokens):                                  # (B, T) int64
        if tokens.dim() != 2 or tokens.dtype != torch.long:
            raise ValueError(f"tokens should be a (B, T) int64 tensor, got {tuple(tokens.shape)} {tokens.dtype}")
        return self.out(self.blocks(self.embedding(tokens)))    # (B, T, num_classes)


def make_next_token_batch(batch_size, length, vocab_size, generator):
    """"What came after q?": tokens "s_1 ... s_n q" (B, n+1) and targets (B,) = the symbol after q.

    s_1..s_n are n = `length` distinct symbols out of `vocab_size` (a random arrangement); the query q
    is one of s_1..s_{n-1}, uniformly, so the answer is the symbol that followed q's first occurrence.
    Finding q again is a content look-up (attention); knowing what came *right after* it needs order.
    """
    if not isinstance(generator, np.random.Generator):
        raise TypeError(f"generator must be a numpy.random.Generator, got {type(generator).__name__}")
    if not 2 <= int(length) <= int(vocab_size):
        raise ValueError(f"length must be between 2 and vocab_size ({vocab_size}): the symbols are "
                         f"distinct; got length={length}")
    symbols = np.argsort(generator.random((batch_size, vocab_size)), axis=1)[:, :length]   # (B, n)
    where = generator.integers(length - 1, size=batch_size)                                # (B,)
    rows = np.arange(batch_size)
    tokens = np.concatenate([symbols, symbols[rows, where][:, None]], axis=1)             # (B, n+1)
    return torch.from_numpy(tokens.astype(np.int64)), torch.from_numpy(symbols[rows, where + 1].astype(np.int64))
