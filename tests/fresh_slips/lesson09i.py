"""Typical learner answers for lesson 09 (the Transformer, assembled): slips and right answers.

Exercises: feed_forward (a MyFeedForward class), encoder_layer (a MyEncoderLayer class),
decoder_layer (a MyDecoderLayer class), transformer_forward (a function (model, src, tgt_in) -> logits).

Every class keeps the notebook's own __init__ (inherited from the _*Base classes below, copied from
the exercise cells) and only changes `forward`, as a learner does. Each slip has ONE thing wrong,
marked `# slip:`. SLIPS and CORRECT are lists of (exercise, description, answer).
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from course_utils.attention import MultiHeadAttention
from course_utils.masks import causal_mask, padding_mask
from course_utils.transformer import PositionwiseFeedForward


# ----------------------------------------------------------------------------------------------
# The notebook's __init__ of each exercise (unchanged); learners write forward only.
# ----------------------------------------------------------------------------------------------
class _FeedForwardBase(nn.Module):
    """FFN(x) = max(0, x W_1 + b_1) W_2 + b_2 on every position, with dropout on the hidden layer."""

    def __init__(self, d_model, d_ff, dropout=0.1):
        super().__init__()
        self.W_1 = nn.Parameter(torch.randn(d_model, d_ff) / math.sqrt(d_model))   # (d_model, d_ff)
        self.b_1 = nn.Parameter(torch.zeros(d_ff))                                 # (d_ff,)
        self.W_2 = nn.Parameter(torch.randn(d_ff, d_model) / math.sqrt(d_ff))      # (d_ff, d_model)
        self.b_2 = nn.Parameter(torch.zeros(d_model))                              # (d_model,)
        self.dropout = nn.Dropout(dropout)


class _EncoderLayerBase(nn.Module):
    """Self-attention and feed-forward, each with a residual connection and layer norm."""

    def __init__(self, d_model, num_heads, d_ff, dropout=0.1, norm_first=True):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.ff = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.dropout1, self.dropout2 = nn.Dropout(dropout), nn.Dropout(dropout)
        self.norm_first = norm_first


class _DecoderLayerBase(nn.Module):
    """Masked self-attention, cross-attention over the memory, feed-forward; each with Add & Norm."""

    def __init__(self, d_model, num_heads, d_ff, dropout=0.1, norm_first=True):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.cross_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.ff = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.norm1, self.norm2, self.norm3 = nn.LayerNorm(d_model), nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.dropout1, self.dropout2, self.dropout3 = nn.Dropout(dropout), nn.Dropout(dropout), nn.Dropout(dropout)
        self.norm_first = norm_first


# ==============================================================================================
# Exercise 1: feed_forward
# ==============================================================================================
class FFDropoutOnOutput(_FeedForwardBase):
    def forward(self, x):
        hidden = torch.relu(x @ self.W_1 + self.b_1)
        return self.dropout(hidden @ self.W_2 + self.b_2)  # slip: dropout on the output, not the hidden layer


class FFNoDropout(_FeedForwardBase):
    def forward(self, x):
        hidden = torch.relu(x @ self.W_1 + self.b_1)  # slip: self.dropout never applied
        return hidden @ self.W_2 + self.b_2


class FFFunctionalDropoutAlwaysOn(_FeedForwardBase):
    def forward(self, x):
        hidden = F.dropout(torch.relu(x @ self.W_1 + self.b_1), self.dropout.p)  # slip: F.dropout's training=True default: also active after eval()
        return hidden @ self.W_2 + self.b_2


class FFNoB1(_FeedForwardBase):
    def forward(self, x):
        hidden = self.dropout(torch.relu(x @ self.W_1))  # slip: b_1 forgotten
        return hidden @ self.W_2 + self.b_2


class FFNoB2(_FeedForwardBase):
    def forward(self, x):
        hidden = self.dropout(torch.relu(x @ self.W_1 + self.b_1))
        return hidden @ self.W_2  # slip: b_2 forgotten


class FFReluBeforeBias(_FeedForwardBase):
    def forward(self, x):
        hidden = self.dropout(torch.relu(x @ self.W_1) + self.b_1)  # slip: ReLU applied before adding b_1
        return hidden @ self.W_2 + self.b_2


class FFReluOnOutput(_FeedForwardBase):
    def forward(self, x):
        hidden = self.dropout(torch.relu(x @ self.W_1 + self.b_1))
        return torch.relu(hidden @ self.W_2 + self.b_2)  # slip: a second ReLU on the output


class FFLinearConvention(_FeedForwardBase):
    def forward(self, x):
        hidden = self.dropout(torch.relu(F.linear(x, self.W_1, self.b_1)))  # slip: F.linear multiplies by W_1 transposed (nn.Linear's (out, in) convention)
        return F.linear(hidden, self.W_2, self.b_2)


class FFDropoutOnInput(_FeedForwardBase):
    def forward(self, x):
        hidden = torch.relu(self.dropout(x) @ self.W_1 + self.b_1)  # slip: dropout on the input x, not the hidden layer
        return hidden @ self.W_2 + self.b_2


class FFGelu(_FeedForwardBase):
    def forward(self, x):
        hidden = self.dropout(F.gelu(x @ self.W_1 + self.b_1))  # slip: GELU instead of the formula's max(0, .)
        return hidden @ self.W_2 + self.b_2


# --- right answers ---
class FFDropoutBeforeRelu(_FeedForwardBase):
    """Dropout before the ReLU: relu(mask * z / (1-p)) = mask * relu(z) / (1-p), the same numbers."""

    def forward(self, x):
        pre = x @ self.W_1 + self.b_1
        hidden = torch.relu(self.dropout(pre))
        return hidden @ self.W_2 + self.b_2


class FFEinsumClamp(_FeedForwardBase):
    def forward(self, x):
        hidden = (torch.einsum("...d,df->...f", x, self.W_1) + self.b_1).clamp(min=0)
        hidden = self.dropout(hidden)
        return torch.einsum("...f,fd->...d", hidden, self.W_2) + self.b_2


class FFLinearTransposed(_FeedForwardBase):
    def forward(self, x):
        hidden = self.dropout(F.relu(F.linear(x, self.W_1.t(), self.b_1)))
        return F.linear(hidden, self.W_2.t(), self.b_2)


# ==============================================================================================
# Exercise 2: encoder_layer
# ==============================================================================================
class EncResidualFromNormed(_EncoderLayerBase):
    def forward(self, x, mask=None):
        if self.norm_first:
            y = self.norm1(x)
            x = y + self.dropout1(self.self_attn(y, y, y, mask))  # slip: residual adds the normalised y, not x
            return x + self.dropout2(self.ff(self.norm2(x)))
        x = self.norm1(x + self.dropout1(self.self_attn(x, x, x, mask)))
        return self.norm2(x + self.dropout2(self.ff(x)))


class EncKVNotNormed(_EncoderLayerBase):
    def forward(self, x, mask=None):
        if self.norm_first:
            y = self.norm1(x)
            x = x + self.dropout1(self.self_attn(y, x, x, mask))  # slip: keys and values from un-normalised x
            return x + self.dropout2(self.ff(self.norm2(x)))
        x = self.norm1(x + self.dropout1(self.self_attn(x, x, x, mask)))
        return self.norm2(x + self.dropout2(self.ff(x)))


class EncPostNormInsideResidual(_EncoderLayerBase):
    def forward(self, x, mask=None):
        if self.norm_first:
            y = self.norm1(x)
            x = x + self.dropout1(self.self_attn(y, y, y, mask))
            return x + self.dropout2(self.ff(self.norm2(x)))
        x = x + self.norm1(self.dropout1(self.self_attn(x, x, x, mask)))  # slip: post-norm normalises the sub-layer output, not the sum
        return self.norm2(x + self.dropout2(self.ff(x)))


class EncNoMask(_EncoderLayerBase):
    def forward(self, x, mask=None):
        if self.norm_first:
            y = self.norm1(x)
            x = x + self.dropout1(self.self_attn(y, y, y))  # slip: mask not passed to the attention (pre-norm)
            return x + self.dropout2(self.ff(self.norm2(x)))
        x = self.norm1(x + self.dropout1(self.self_attn(x, x, x, mask)))
        return self.norm2(x + self.dropout2(self.ff(x)))


class EncMaskInverted(_EncoderLayerBase):
    def forward(self, x, mask=None):
        mask = None if mask is None else ~mask  # slip: mask inverted (True read as "masked out")
        if self.norm_first:
            y = self.norm1(x)
            x = x + self.dropout1(self.self_attn(y, y, y, mask))
            return x + self.dropout2(self.ff(self.norm2(x)))
        x = self.norm1(x + self.dropout1(self.self_attn(x, x, x, mask)))
        return self.norm2(x + self.dropout2(self.ff(x)))


class EncAlwaysPreNorm(_EncoderLayerBase):
    def forward(self, x, mask=None):
        y = self.norm1(x)  # slip: norm_first ignored: always pre-norm
        x = x + self.dropout1(self.self_attn(y, y, y, mask))
        return x + self.dropout2(self.ff(self.norm2(x)))


class EncFFReadsLayerInput(_EncoderLayerBase):
    def forward(self, x, mask=None):
        if self.norm_first:
            y = self.norm1(x)
            x = x + self.dropout1(self.self_attn(y, y, y, mask))
            return x + self.dropout2(self.ff(self.norm2(x)))
        h = self.norm1(x + self.dropout1(self.self_attn(x, x, x, mask)))
        return self.norm2(h + self.dropout2(self.ff(x)))  # slip: post-norm FFN reads the layer input x, not h


class EncNoFFResidual(_EncoderLayerBase):
    def forward(self, x, mask=None):
        if self.norm_first:
            y = self.norm1(x)
            x = x + self.dropout1(self.self_attn(y, y, y, mask))
            return self.dropout2(self.ff(self.norm2(x)))  # slip: no residual connection around the FFN (pre-norm)
        x = self.norm1(x + self.dropout1(self.self_attn(x, x, x, mask)))
        return self.norm2(x + self.dropout2(self.ff(x)))


class EncDropoutAfterAdd(_EncoderLayerBase):
    def forward(self, x, mask=None):
        if self.norm_first:
            y = self.norm1(x)
            x = x + self.dropout1(self.self_attn(y, y, y, mask))
            return x + self.dropout2(self.ff(self.norm2(x)))
        x = self.norm1(self.dropout1(x + self.self_attn(x, x, x, mask)))  # slip: dropout on the residual sum, not on the sub-layer output
        return self.norm2(x + self.dropout2(self.ff(x)))


class EncSameNormTwice(_EncoderLayerBase):
    def forward(self, x, mask=None):
        if self.norm_first:
            y = self.norm1(x)
            x = x + self.dropout1(self.self_attn(y, y, y, mask))
            return x + self.dropout2(self.ff(self.norm1(x)))  # slip: norm1 reused before the FFN (norm2 never used)
        x = self.norm1(x + self.dropout1(self.self_attn(x, x, x, mask)))
        return self.norm2(x + self.dropout2(self.ff(x)))


# --- right answers ---
class EncBlockMethods(_EncoderLayerBase):
    """Written like torch.nn.TransformerEncoderLayer: one helper per sub-layer."""

    def _sa_block(self, x, mask):
        return self.dropout1(self.self_attn(x, x, x, mask))

    def _ff_block(self, x):
        return self.dropout2(self.ff(x))

    def forward(self, x, mask=None):
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), mask)
            x = x + self._ff_block(self.norm2(x))
        else:
            x = self.norm1(x + self._sa_block(x, mask))
            x = self.norm2(x + self._ff_block(x))
        return x


class EncSublayerLoop(_EncoderLayerBase):
    """One loop over (norm, dropout, sub-layer), the Add & Norm written once."""

    def forward(self, x, mask=None):
        sublayers = ((self.norm1, self.dropout1, lambda z: self.self_attn(z, z, z, mask)),
                     (self.norm2, self.dropout2, self.ff))
        for norm, drop, sublayer in sublayers:
            if self.norm_first:
                x = x + drop(sublayer(norm(x)))
            else:
                x = norm(x + drop(sublayer(x)))
        return x


# ==============================================================================================
# Exercise 3: decoder_layer
# ==============================================================================================
class DecNoTgtMask(_DecoderLayerBase):
    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        if self.norm_first:
            y = self.norm1(x)
            x = x + self.dropout1(self.self_attn(y, y, y))  # slip: self-attention without tgt_mask (sees the future)
            y = self.norm2(x)
            x = x + self.dropout2(self.cross_attn(y, memory, memory, memory_mask))
            return x + self.dropout3(self.ff(self.norm3(x)))
        x = self.norm1(x + self.dropout1(self.self_attn(x, x, x, tgt_mask)))
        x = self.norm2(x + self.dropout2(self.cross_attn(x, memory, memory, memory_mask)))
        return self.norm3(x + self.dropout3(self.ff(x)))


class DecNoMemoryMask(_DecoderLayerBase):
    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        if self.norm_first:
            y = self.norm1(x)
            x = x + self.dropout1(self.self_attn(y, y, y, tgt_mask))
            y = self.norm2(x)
            x = x + self.dropout2(self.cross_attn(y, memory, memory))  # slip: cross-attention without memory_mask (reads source padding)
            return x + self.dropout3(self.ff(self.norm3(x)))
        x = self.norm1(x + self.dropout1(self.self_attn(x, x, x, tgt_mask)))
        x = self.norm2(x + self.dropout2(self.cross_attn(x, memory, memory, memory_mask)))
        return self.norm3(x + self.dropout3(self.ff(x)))


class DecCrossQueryNotNormed(_DecoderLayerBase):
    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        if self.norm_first:
            y = self.norm1(x)
            x = x + self.dropout1(self.self_attn(y, y, y, tgt_mask))
            x = x + self.dropout2(self.cross_attn(x, memory, memory, memory_mask))  # slip: pre-norm cross-attention query is x, not norm2(x)
            return x + self.dropout3(self.ff(self.norm3(x)))
        x = self.norm1(x + self.dropout1(self.self_attn(x, x, x, tgt_mask)))
        x = self.norm2(x + self.dropout2(self.cross_attn(x, memory, memory, memory_mask)))
        return self.norm3(x + self.dropout3(self.ff(x)))


class DecStaleQuery(_DecoderLayerBase):
    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        if self.norm_first:
            y = self.norm1(x)
            x = x + self.dropout1(self.self_attn(y, y, y, tgt_mask))
            x = x + self.dropout2(self.cross_attn(y, memory, memory, memory_mask))  # slip: reuses y from before the self-attention (norm2 never applied)
            return x + self.dropout3(self.ff(self.norm3(x)))
        x = self.norm1(x + self.dropout1(self.self_attn(x, x, x, tgt_mask)))
        x = self.norm2(x + self.dropout2(self.cross_attn(x, memory, memory, memory_mask)))
        return self.norm3(x + self.dropout3(self.ff(x)))


class DecNormsMemory(_DecoderLayerBase):
    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        if self.norm_first:
            y = self.norm1(x)
            x = x + self.dropout1(self.self_attn(y, y, y, tgt_mask))
            y, m = self.norm2(x), self.norm2(memory)  # slip: the memory is layer-normed too (it is already the encoder's normed output)
            x = x + self.dropout2(self.cross_attn(y, m, m, memory_mask))
            return x + self.dropout3(self.ff(self.norm3(x)))
        x = self.norm1(x + self.dropout1(self.self_attn(x, x, x, tgt_mask)))
        x = self.norm2(x + self.dropout2(self.cross_attn(x, memory, memory, memory_mask)))
        return self.norm3(x + self.dropout3(self.ff(x)))


class DecQueryFromMemory(_DecoderLayerBase):
    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        if self.norm_first:
            y = self.norm1(x)
            x = x + self.dropout1(self.self_attn(y, y, y, tgt_mask))
            y = self.norm2(x)
            x = x + self.dropout2(self.cross_attn(memory, y, y, memory_mask))  # slip: queries from the memory, keys/values from the decoder
            return x + self.dropout3(self.ff(self.norm3(x)))
        x = self.norm1(x + self.dropout1(self.self_attn(x, x, x, tgt_mask)))
        x = self.norm2(x + self.dropout2(self.cross_attn(x, memory, memory, memory_mask)))
        return self.norm3(x + self.dropout3(self.ff(x)))


class DecCrossBeforeSelf(_DecoderLayerBase):
    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        if self.norm_first:
            y = self.norm1(x)
            x = x + self.dropout1(self.cross_attn(y, memory, memory, memory_mask))  # slip: sub-layer order swapped: cross-attention first, then self-attention
            y = self.norm2(x)
            x = x + self.dropout2(self.self_attn(y, y, y, tgt_mask))
            return x + self.dropout3(self.ff(self.norm3(x)))
        x = self.norm1(x + self.dropout1(self.self_attn(x, x, x, tgt_mask)))
        x = self.norm2(x + self.dropout2(self.cross_attn(x, memory, memory, memory_mask)))
        return self.norm3(x + self.dropout3(self.ff(x)))


class DecNoCrossResidual(_DecoderLayerBase):
    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        if self.norm_first:
            y = self.norm1(x)
            x = x + self.dropout1(self.self_attn(y, y, y, tgt_mask))
            y = self.norm2(x)
            x = x + self.dropout2(self.cross_attn(y, memory, memory, memory_mask))
            return x + self.dropout3(self.ff(self.norm3(x)))
        x = self.norm1(x + self.dropout1(self.self_attn(x, x, x, tgt_mask)))
        x = self.norm2(self.dropout2(self.cross_attn(x, memory, memory, memory_mask)))  # slip: post-norm cross-attention has no residual (x + ...)
        return self.norm3(x + self.dropout3(self.ff(x)))


class DecAlwaysPreNorm(_DecoderLayerBase):
    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        y = self.norm1(x)  # slip: norm_first ignored: always pre-norm
        x = x + self.dropout1(self.self_attn(y, y, y, tgt_mask))
        y = self.norm2(x)
        x = x + self.dropout2(self.cross_attn(y, memory, memory, memory_mask))
        return x + self.dropout3(self.ff(self.norm3(x)))


class DecNoDropout3(_DecoderLayerBase):
    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        if self.norm_first:
            y = self.norm1(x)
            x = x + self.dropout1(self.self_attn(y, y, y, tgt_mask))
            y = self.norm2(x)
            x = x + self.dropout2(self.cross_attn(y, memory, memory, memory_mask))
            return x + self.ff(self.norm3(x))  # slip: dropout3 forgotten on the FFN output (pre-norm)
        x = self.norm1(x + self.dropout1(self.self_attn(x, x, x, tgt_mask)))
        x = self.norm2(x + self.dropout2(self.cross_attn(x, memory, memory, memory_mask)))
        return self.norm3(x + self.dropout3(self.ff(x)))


# --- right answers ---
class DecBlockMethods(_DecoderLayerBase):
    """Written like torch.nn.TransformerDecoderLayer: one helper per sub-layer."""

    def _sa_block(self, x, mask):
        return self.dropout1(self.self_attn(x, x, x, mask))

    def _mha_block(self, x, memory, mask):
        return self.dropout2(self.cross_attn(x, memory, memory, mask))

    def _ff_block(self, x):
        return self.dropout3(self.ff(x))

    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), tgt_mask)
            x = x + self._mha_block(self.norm2(x), memory, memory_mask)
            x = x + self._ff_block(self.norm3(x))
        else:
            x = self.norm1(x + self._sa_block(x, tgt_mask))
            x = self.norm2(x + self._mha_block(x, memory, memory_mask))
            x = self.norm3(x + self._ff_block(x))
        return x


class DecSublayerLoop(_DecoderLayerBase):
    """One loop over (norm, dropout, sub-layer)."""

    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        sublayers = ((self.norm1, self.dropout1, lambda z: self.self_attn(z, z, z, tgt_mask)),
                     (self.norm2, self.dropout2, lambda z: self.cross_attn(z, memory, memory, memory_mask)),
                     (self.norm3, self.dropout3, self.ff))
        for norm, drop, sublayer in sublayers:
            x = x + drop(sublayer(norm(x))) if self.norm_first else norm(x + drop(sublayer(x)))
        return x


# ==============================================================================================
# Exercise 4: transformer_forward(model, src, tgt_in) -> logits (B, T, V)
# ==============================================================================================
def tf_no_scale(model, src, tgt_in):
    T = tgt_in.size(1)
    src_mask = padding_mask(src, model.pad_id)
    tgt_mask = causal_mask(T, tgt_in.device) & padding_mask(tgt_in, model.pad_id)
    x = model.pos(model.src_embed(src))  # slip: embeddings not multiplied by sqrt(d_model)
    memory = model.encoder(x, src_mask)
    y = model.pos(model.tgt_embed(tgt_in))
    return model.generator(model.decoder(y, memory, tgt_mask, src_mask))


def tf_divide_scale(model, src, tgt_in):
    T = tgt_in.size(1)
    scale = 1 / math.sqrt(model.d_model)  # slip: embeddings divided by sqrt(d_model) instead of multiplied
    src_mask = padding_mask(src, model.pad_id)
    tgt_mask = causal_mask(T, tgt_in.device) & padding_mask(tgt_in, model.pad_id)
    memory = model.encoder(model.pos(model.src_embed(src) * scale), src_mask)
    y = model.pos(model.tgt_embed(tgt_in) * scale)
    return model.generator(model.decoder(y, memory, tgt_mask, src_mask))


def tf_scale_after_pos(model, src, tgt_in):
    T = tgt_in.size(1)
    scale = math.sqrt(model.d_model)
    src_mask = padding_mask(src, model.pad_id)
    tgt_mask = causal_mask(T, tgt_in.device) & padding_mask(tgt_in, model.pad_id)
    memory = model.encoder(model.pos(model.src_embed(src)) * scale, src_mask)  # slip: scales after adding the positions (positions scaled too)
    y = model.pos(model.tgt_embed(tgt_in)) * scale  # slip: (same) scales after adding the positions
    return model.generator(model.decoder(y, memory, tgt_mask, src_mask))


def tf_no_causal(model, src, tgt_in):
    src_mask = padding_mask(src, model.pad_id)
    tgt_mask = padding_mask(tgt_in, model.pad_id)  # slip: target mask without the causal part (decoder sees the future)
    x = model.pos(model.src_embed(src) * math.sqrt(model.d_model))
    memory = model.encoder(x, src_mask)
    y = model.pos(model.tgt_embed(tgt_in) * math.sqrt(model.d_model))
    return model.generator(model.decoder(y, memory, tgt_mask, src_mask))


def tf_no_tgt_padding(model, src, tgt_in):
    T = tgt_in.size(1)
    src_mask = padding_mask(src, model.pad_id)
    tgt_mask = causal_mask(T, tgt_in.device)  # slip: target mask is causal only, target padding not masked
    x = model.pos(model.src_embed(src) * math.sqrt(model.d_model))
    memory = model.encoder(x, src_mask)
    y = model.pos(model.tgt_embed(tgt_in) * math.sqrt(model.d_model))
    return model.generator(model.decoder(y, memory, tgt_mask, src_mask))


def tf_causal_inverted(model, src, tgt_in):
    T = tgt_in.size(1)
    src_mask = padding_mask(src, model.pad_id)
    future = torch.triu(torch.ones(T, T, dtype=torch.bool, device=tgt_in.device), diagonal=1)  # slip: True above the diagonal (the "blocked" convention): mask inverted
    tgt_mask = future & padding_mask(tgt_in, model.pad_id)
    x = model.pos(model.src_embed(src) * math.sqrt(model.d_model))
    memory = model.encoder(x, src_mask)
    y = model.pos(model.tgt_embed(tgt_in) * math.sqrt(model.d_model))
    return model.generator(model.decoder(y, memory, tgt_mask, src_mask))


def tf_no_memory_mask(model, src, tgt_in):
    T = tgt_in.size(1)
    src_mask = padding_mask(src, model.pad_id)
    tgt_mask = causal_mask(T, tgt_in.device) & padding_mask(tgt_in, model.pad_id)
    x = model.pos(model.src_embed(src) * math.sqrt(model.d_model))
    memory = model.encoder(x, src_mask)
    y = model.pos(model.tgt_embed(tgt_in) * math.sqrt(model.d_model))
    return model.generator(model.decoder(y, memory, tgt_mask))  # slip: no memory_mask: cross-attention reads the source padding


def tf_hardcoded_pad(model, src, tgt_in):
    T = tgt_in.size(1)
    src_mask = padding_mask(src, 0)  # slip: pad id hard-coded to 0 instead of model.pad_id
    tgt_mask = causal_mask(T, tgt_in.device) & padding_mask(tgt_in, 0)
    x = model.pos(model.src_embed(src) * math.sqrt(model.d_model))
    memory = model.encoder(x, src_mask)
    y = model.pos(model.tgt_embed(tgt_in) * math.sqrt(model.d_model))
    return model.generator(model.decoder(y, memory, tgt_mask, src_mask))


def tf_returns_probs(model, src, tgt_in):
    T = tgt_in.size(1)
    src_mask = padding_mask(src, model.pad_id)
    tgt_mask = causal_mask(T, tgt_in.device) & padding_mask(tgt_in, model.pad_id)
    x = model.pos(model.src_embed(src) * math.sqrt(model.d_model))
    memory = model.encoder(x, src_mask)
    y = model.pos(model.tgt_embed(tgt_in) * math.sqrt(model.d_model))
    return model.generator(model.decoder(y, memory, tgt_mask, src_mask)).softmax(-1)  # slip: returns probabilities, not logits


def tf_shifts_again(model, src, tgt_in):
    tgt_in = tgt_in[:, :-1]  # slip: shifts the already shifted-right input once more
    T = tgt_in.size(1)
    src_mask = padding_mask(src, model.pad_id)
    tgt_mask = causal_mask(T, tgt_in.device) & padding_mask(tgt_in, model.pad_id)
    x = model.pos(model.src_embed(src) * math.sqrt(model.d_model))
    memory = model.encoder(x, src_mask)
    y = model.pos(model.tgt_embed(tgt_in) * math.sqrt(model.d_model))
    return model.generator(model.decoder(y, memory, tgt_mask, src_mask))


# --- right answers ---
def tf_masks_by_hand(model, src, tgt_in):
    """Masks written out with comparisons and tril; scale as d_model ** 0.5."""
    B, T = tgt_in.shape
    src_keep = (src != model.pad_id).unsqueeze(1).unsqueeze(2)                  # (B, 1, 1, S)
    lower = torch.ones(T, T, device=tgt_in.device).tril().bool()               # (T, T)
    tgt_mask = lower[None, None] & (tgt_in != model.pad_id)[:, None, None, :]  # (B, 1, T, T)
    scale = model.d_model ** 0.5
    memory = model.encoder(model.pos(scale * model.src_embed(src)), src_keep)
    s = model.decoder(model.pos(scale * model.tgt_embed(tgt_in)), memory, tgt_mask, src_keep)
    return model.generator(s)


def tf_three_d_masks(model, src, tgt_in):
    """(B, T_q, T_k)-shaped masks (MultiHeadAttention adds the head axis), embedding via F.embedding."""
    T = tgt_in.size(1)
    src_mask = (src != model.pad_id)[:, None, :]                                          # (B, 1, S)
    tgt_mask = (torch.arange(T)[None, :] <= torch.arange(T)[:, None]).to(tgt_in.device)  # (T, T)
    tgt_mask = tgt_mask[None] & (tgt_in != model.pad_id)[:, None, :]                      # (B, T, T)
    root_d = math.sqrt(model.d_model)
    src_x = model.pos(F.embedding(src, model.src_embed.weight) * root_d)
    tgt_x = model.pos(F.embedding(tgt_in, model.tgt_embed.weight) * root_d)
    memory = model.encoder(src_x, src_mask)
    return model.generator(model.decoder(tgt_x, memory, tgt_mask, src_mask))


SLIPS = [
    ("feed_forward", "dropout applied to the output of the second layer instead of the hidden layer", FFDropoutOnOutput),
    ("feed_forward", "dropout forgotten", FFNoDropout),
    ("feed_forward", "functional dropout without training=self.training: still active after model.eval()", FFFunctionalDropoutAlwaysOn),
    ("feed_forward", "first bias b_1 forgotten", FFNoB1),
    ("feed_forward", "second bias b_2 forgotten", FFNoB2),
    ("feed_forward", "ReLU applied before adding b_1", FFReluBeforeBias),
    ("feed_forward", "an extra ReLU on the output", FFReluOnOutput),
    ("feed_forward", "F.linear with the (d_model, d_ff) matrices: multiplies by their transposes (shape error unless d_ff == d_model)", FFLinearConvention),
    ("feed_forward", "dropout applied to the input instead of the hidden layer", FFDropoutOnInput),
    ("feed_forward", "GELU instead of ReLU", FFGelu),

    ("encoder_layer", "pre-norm: the residual adds the normalised input instead of the raw input", EncResidualFromNormed),
    ("encoder_layer", "pre-norm: keys and values taken from the un-normalised input, only the query normalised", EncKVNotNormed),
    ("encoder_layer", "post-norm: layer norm applied to the attention output before the residual add, not to the sum", EncPostNormInsideResidual),
    ("encoder_layer", "pre-norm: the padding mask is not passed to the self-attention", EncNoMask),
    ("encoder_layer", "mask inverted (True taken as masked out)", EncMaskInverted),
    ("encoder_layer", "norm_first ignored: always pre-norm, no post-norm branch", EncAlwaysPreNorm),
    ("encoder_layer", "post-norm: the feed-forward reads the layer input instead of the attention sub-layer's output", EncFFReadsLayerInput),
    ("encoder_layer", "pre-norm: no residual connection around the feed-forward", EncNoFFResidual),
    ("encoder_layer", "post-norm: dropout applied to the residual sum instead of the attention output", EncDropoutAfterAdd),
    ("encoder_layer", "pre-norm: norm1 reused before the feed-forward, norm2 never used", EncSameNormTwice),

    ("decoder_layer", "pre-norm: masked self-attention run without tgt_mask (no causal mask)", DecNoTgtMask),
    ("decoder_layer", "pre-norm: cross-attention run without memory_mask", DecNoMemoryMask),
    ("decoder_layer", "pre-norm: cross-attention query is the un-normalised x (norm2 skipped)", DecCrossQueryNotNormed),
    ("decoder_layer", "pre-norm: cross-attention query reuses the normalised input from before the self-attention", DecStaleQuery),
    ("decoder_layer", "pre-norm: the encoder memory is layer-normed too before the cross-attention", DecNormsMemory),
    ("decoder_layer", "cross-attention with queries from the memory and keys/values from the decoder (shape error unless S == T)", DecQueryFromMemory),
    ("decoder_layer", "pre-norm: cross-attention placed before the masked self-attention", DecCrossBeforeSelf),
    ("decoder_layer", "post-norm: no residual connection around the cross-attention", DecNoCrossResidual),
    ("decoder_layer", "norm_first ignored: always pre-norm", DecAlwaysPreNorm),
    ("decoder_layer", "pre-norm: dropout3 forgotten on the feed-forward output", DecNoDropout3),

    ("transformer_forward", "embeddings not multiplied by sqrt(d_model)", tf_no_scale),
    ("transformer_forward", "embeddings divided by sqrt(d_model) instead of multiplied", tf_divide_scale),
    ("transformer_forward", "sqrt(d_model) applied after adding the positional encoding", tf_scale_after_pos),
    ("transformer_forward", "target mask has no causal part (padding only)", tf_no_causal),
    ("transformer_forward", "target mask is causal only, target padding not masked", tf_no_tgt_padding),
    ("transformer_forward", "causal mask built with triu: inverted, the future allowed and the past blocked", tf_causal_inverted),
    ("transformer_forward", "no memory mask given to the decoder: cross-attention attends to source padding", tf_no_memory_mask),
    ("transformer_forward", "pad id hard-coded to 0 instead of model.pad_id", tf_hardcoded_pad),
    ("transformer_forward", "returns softmax probabilities instead of logits", tf_returns_probs),
    ("transformer_forward", "shifts the decoder input again (drops its last position)", tf_shifts_again),
]

CORRECT = [
    ("feed_forward", "dropout applied before the ReLU (same numbers, same dropout mask)", FFDropoutBeforeRelu),
    ("feed_forward", "einsum and clamp(min=0)", FFEinsumClamp),
    ("feed_forward", "F.linear with the transposed matrices", FFLinearTransposed),
    ("encoder_layer", "one helper method per sub-layer, as torch's TransformerEncoderLayer", EncBlockMethods),
    ("encoder_layer", "a loop over (norm, dropout, sub-layer)", EncSublayerLoop),
    ("decoder_layer", "one helper method per sub-layer, as torch's TransformerDecoderLayer", DecBlockMethods),
    ("decoder_layer", "a loop over (norm, dropout, sub-layer)", DecSublayerLoop),
    ("transformer_forward", "masks written by hand with comparisons and tril, scale d_model ** 0.5", tf_masks_by_hand),
    ("transformer_forward", "3-D (B, T_q, T_k) masks and F.embedding", tf_three_d_masks),
]
