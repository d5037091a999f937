"""Positions: the sinusoidal and learned encodings added to embeddings (lesson 08), and rotary
positions that rotate queries and keys (RoPE, lesson 12).

    sinusoidal_positional_encoding(max_len, d_model, interleaved=True)   (max_len, d_model)
    PositionalEncoding / LearnedPositionalEncoding   add positions to embeddings, then dropout
    rope_angles(positions, d_head) / apply_rope(x, positions)           rotate pairs of features
"""

import functools

import torch
import torch.nn as nn


def rope_angles(positions, d_head, base=10000.0):
    """(T, d_head/2) angles m θ_i of rotary positions: θ_i = base^(-2i/d_head), i = 0 .. d_head/2 - 1."""
    if d_head % 2:
        raise ValueError(f"rotary positions rotate pairs of features: d_head must be even, got {d_head}")
    positions = torch.as_tensor(positions)
    if positions.dim() != 1:
        raise ValueError(f"positions must be a 1-D tensor (T,) of integer positions, got shape "
                         f"{tuple(positions.shape)}")
    return positions.to(torch.float32)[:, None] * _rope_frequencies(d_head, base, positions.device)   # (T, d_head/2)


@functools.lru_cache(maxsize=64)
def _rope_frequencies(d_head, base, device):
    """θ_i = base^(-2i/d_head), i = 0 .. d_head/2 - 1: (d_head/2,), from 1 down to ~1/base (computed once
    per size: a decoding step asks for them in every layer)."""
    i = torch.arange(d_head // 2, dtype=torch.float32, device=device)
    return base ** (-2.0 * i / d_head)


def apply_rope(x, positions, base=10000.0):
    """Rotary position embedding (Su et al. 2021) of x (..., T, d_head) at `positions` (T,).

    Feature i is paired with feature i + d_head/2 (the two HALVES, as GPT-NeoX and Llama in Hugging Face;
    the RoFormer paper pairs neighbours 2i, 2i+1: the same rotation with the features permuted), and
    each pair is rotated by the angle m θ_i of its position m:
        (x_i, x_{i+d/2}) -> (x_i cos mθ_i - x_{i+d/2} sin mθ_i,  x_i sin mθ_i + x_{i+d/2} cos mθ_i).
    Computed in float32, returned in x's dtype. Rotations keep norms, and q_m · k_n depends on m - n only.
    """
    d = x.size(-1)
    positions = torch.as_tensor(positions, device=x.device)
    if positions.dim() != 1 or positions.numel() != x.size(-2):
        raise ValueError(f"positions must be (T,) with T = x.size(-2) = {x.size(-2)}, got shape "
                         f"{tuple(positions.shape)}")
    angle = rope_angles(positions, d, base)                              # (T, d/2)
    cos, sin = angle.cos(), angle.sin()
    x1, x2 = x.float()[..., :d // 2], x.float()[..., d // 2:]            # the two halves (..., T, d/2)
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).to(x.dtype)


def sinusoidal_positional_encoding(max_len, d_model, interleaved=True):
    """(max_len, d_model) sinusoidal positions of "Attention Is All You Need".

    PE(pos, 2i) = sin(pos / 10000^(2i/d_model)),  PE(pos, 2i+1) = cos(pos / 10000^(2i/d_model)).
    interleaved=True puts sin and cos in alternate columns (the paper's formula);
    interleaved=False puts all sines first, then all cosines (the same features, permuted).
    """
    if d_model % 2:
        raise ValueError(f"d_model must be even for sin/cos pairs, got {d_model}")
    pos = torch.arange(max_len, dtype=torch.float32)[:, None]             # (max_len, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float32)              # (d_model/2,)
    angle = pos / torch.pow(10000.0, two_i / d_model)                     # (max_len, d_model/2)
    if interleaved:
        pe = torch.zeros(max_len, d_model)
        pe[:, 0::2], pe[:, 1::2] = torch.sin(angle), torch.cos(angle)
        return pe
    return torch.cat([torch.sin(angle), torch.cos(angle)], dim=-1)


class PositionalEncoding(nn.Module):
    """x + PE[offset:offset+T], then dropout. x: (B, T, d_model); offset = the position of x's first
    row (0, or t when decoding step t alone). The table is a buffer (saved, not trained)."""

    def __init__(self, d_model, max_len=5000, dropout=0.0, interleaved=True):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("pe", sinusoidal_positional_encoding(max_len, d_model, interleaved),
                             persistent=False)

    def forward(self, x, offset=0):
        T = offset + x.size(1)
        if T > self.pe.size(0):
            raise ValueError(f"sequence length {T} exceeds max_len={self.pe.size(0)}: build the "
                             "PositionalEncoding with a larger max_len (the sinusoids extend to any length)")
        return self.dropout(x + self.pe[offset:T])


class LearnedPositionalEncoding(nn.Module):
    """x + P[:T] with P a trained (max_len, d_model) table (BERT, GPT-2), then dropout.

    Unlike the sinusoids it cannot represent positions >= max_len that it never saw in training.
    """

    def __init__(self, d_model, max_len=512, dropout=0.0):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.pe = nn.Embedding(max_len, d_model)
        nn.init.normal_(self.pe.weight, std=0.02)

    def forward(self, x, offset=0):
        T = offset + x.size(1)
        if T > self.pe.num_embeddings:
            raise ValueError(f"sequence length {T} exceeds max_len={self.pe.num_embeddings}: a learned "
                             "table has no entry for positions it was not built with")
        return self.dropout(x + self.pe.weight[offset:T])
