"""Typical learner answers for lesson 09 (the Transformer, assembled).

Exercises (the `exercise` key): feed_forward, encoder_layer, decoder_layer, transformer_forward.

Every answer is what a learner would hand to the lesson's check:
  feed_forward         an nn.Module class MyFeedForward(d_model, d_ff, dropout=0.1) with W_1, b_1, W_2, b_2,
                       dropout; forward(x) -> (B, T, d_model)
  encoder_layer        an nn.Module class MyEncoderLayer(d_model, num_heads, d_ff, dropout=0.1, norm_first=True);
                       forward(x, mask=None)
  decoder_layer        an nn.Module class MyDecoderLayer(d_model, num_heads, d_ff, dropout=0.1, norm_first=True);
                       forward(x, memory, tgt_mask=None, memory_mask=None)
  transformer_forward  a function transformer_forward(model, src, tgt_in) -> logits (B, T, tgt_vocab_size)

SLIPS holds answers with exactly one typical mistake each (marked `# slip:`), CORRECT holds right answers
written differently from the reference solution.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from course_utils.attention import MultiHeadAttention
from course_utils.masks import causal_mask, padding_mask
from course_utils.transformer import PositionwiseFeedForward

PAD = 0   # the notebook's global padding id


# ================================================================================================
# Exercise 1: the position-wise feed-forward network
# ================================================================================================
class _FeedForwardBase(nn.Module):
    """The exercise's __init__, unchanged."""

    def __init__(self, d_model, d_ff, dropout=0.1):
        super().__init__()
        self.W_1 = nn.Parameter(torch.randn(d_model, d_ff) / math.sqrt(d_model))   # (d_model, d_ff)
        self.b_1 = nn.Parameter(torch.zeros(d_ff))                                 # (d_ff,)
        self.W_2 = nn.Parameter(torch.randn(d_ff, d_model) / math.sqrt(d_ff))      # (d_ff, d_model)
        self.b_2 = nn.Parameter(torch.zeros(d_model))                              # (d_model,)
        self.dropout = nn.Dropout(dropout)


class FFNoDropout(_FeedForwardBase):
    def forward(self, x):
        hidden = torch.relu(x @ self.W_1 + self.b_1)   # slip: no dropout on the hidden layer
        return hidden @ self.W_2 + self.b_2


class FFDropoutOnOutput(_FeedForwardBase):
    def forward(self, x):
        hidden = torch.relu(x @ self.W_1 + self.b_1)
        return self.dropout(hidden @ self.W_2 + self.b_2)   # slip: dropout on the output instead of the hidden layer


class FFFunctionalDropoutAlwaysOn(_FeedForwardBase):
    def forward(self, x):
        hidden = F.dropout(torch.relu(x @ self.W_1 + self.b_1), self.dropout.p)   # slip: F.dropout without training=self.training stays on after eval()
        return hidden @ self.W_2 + self.b_2


class FFNoFirstBias(_FeedForwardBase):
    def forward(self, x):
        hidden = self.dropout(torch.relu(x @ self.W_1))   # slip: b_1 forgotten
        return hidden @ self.W_2 + self.b_2


class FFNoSecondBias(_FeedForwardBase):
    def forward(self, x):
        hidden = self.dropout(torch.relu(x @ self.W_1 + self.b_1))
        return hidden @ self.W_2   # slip: b_2 forgotten


class FFNoReLU(_FeedForwardBase):
    def forward(self, x):
        hidden = self.dropout(x @ self.W_1 + self.b_1)   # slip: no ReLU, the network is linear
        return hidden @ self.W_2 + self.b_2


class FFGelu(_FeedForwardBase):
    def forward(self, x):
        hidden = self.dropout(F.gelu(x @ self.W_1 + self.b_1))   # slip: GELU instead of the formula's max(0, .)
        return hidden @ self.W_2 + self.b_2


class FFBiasAfterReLU(_FeedForwardBase):
    def forward(self, x):
        hidden = self.dropout(torch.relu(x @ self.W_1) + self.b_1)   # slip: b_1 added after the ReLU
        return hidden @ self.W_2 + self.b_2


class FFReLUOnOutput(_FeedForwardBase):
    def forward(self, x):
        hidden = self.dropout(torch.relu(x @ self.W_1 + self.b_1))
        return torch.relu(hidden @ self.W_2 + self.b_2)   # slip: a second ReLU on the output


class FFWithResidual(_FeedForwardBase):
    def forward(self, x):
        hidden = self.dropout(torch.relu(x @ self.W_1 + self.b_1))
        return x + hidden @ self.W_2 + self.b_2   # slip: adds the residual inside the FFN


# ---- right answers -----------------------------------------------------------------------------
class FFEinsumClamp(_FeedForwardBase):
    def forward(self, x):
        hidden = (torch.einsum("...d,df->...f", x, self.W_1) + self.b_1).clamp(min=0)
        hidden = self.dropout(hidden)
        return torch.einsum("...f,fd->...d", hidden, self.W_2) + self.b_2


class FFAddmmFlat(_FeedForwardBase):
    def forward(self, x):
        flat = x.reshape(-1, x.size(-1))                                   # (B*T, d_model): positions alone
        hidden = self.dropout(F.relu(torch.addmm(self.b_1, flat, self.W_1)))
        out = torch.addmm(self.b_2, hidden, self.W_2)
        return out.reshape(*x.shape[:-1], out.size(-1))


class FFDropoutBeforeReLU(_FeedForwardBase):
    def forward(self, x):
        # dropout zeroes and rescales by 1/(1-p) > 0, which commutes with max(0, .)
        hidden = F.relu(self.dropout(F.linear(x, self.W_1.T, self.b_1)))
        return F.linear(hidden, self.W_2.T, self.b_2)


# ================================================================================================
# Exercise 2: the encoder layer
# ================================================================================================
class _EncoderLayerBase(nn.Module):
    """The exercise's __init__, unchanged."""

    def __init__(self, d_model, num_heads, d_ff, dropout=0.1, norm_first=True):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.ff = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.dropout1, self.dropout2 = nn.Dropout(dropout), nn.Dropout(dropout)
        self.norm_first = norm_first


class EncAlwaysPreNorm(_EncoderLayerBase):
    def forward(self, x, mask=None):
        # slip: ignores norm_first, always the pre-norm placement
        y = self.norm1(x)
        x = x + self.dropout1(self.self_attn(y, y, y, mask))
        return x + self.dropout2(self.ff(self.norm2(x)))


class EncResidualFromNormed(_EncoderLayerBase):
    def forward(self, x, mask=None):
        if self.norm_first:
            y = self.norm1(x)
            x = y + self.dropout1(self.self_attn(y, y, y, mask))   # slip: residual adds the normalised y, not x
            return x + self.dropout2(self.ff(self.norm2(x)))
        x = self.norm1(x + self.dropout1(self.self_attn(x, x, x, mask)))
        return self.norm2(x + self.dropout2(self.ff(x)))


class EncNoFFResidual(_EncoderLayerBase):
    def forward(self, x, mask=None):
        if self.norm_first:
            y = self.norm1(x)
            x = x + self.dropout1(self.self_attn(y, y, y, mask))
            return self.dropout2(self.ff(self.norm2(x)))   # slip: no residual around the FFN
        x = self.norm1(x + self.dropout1(self.self_attn(x, x, x, mask)))
        return self.norm2(x + self.dropout2(self.ff(x)))


class EncPostNormMissingSecondNorm(_EncoderLayerBase):
    def forward(self, x, mask=None):
        if self.norm_first:
            y = self.norm1(x)
            x = x + self.dropout1(self.self_attn(y, y, y, mask))
            return x + self.dropout2(self.ff(self.norm2(x)))
        x = self.norm1(x + self.dropout1(self.self_attn(x, x, x, mask)))
        return x + self.dropout2(self.ff(x))   # slip: post-norm without the LayerNorm after the FFN


class EncNoMask(_EncoderLayerBase):
    def forward(self, x, mask=None):
        if self.norm_first:
            y = self.norm1(x)
            x = x + self.dropout1(self.self_attn(y, y, y))   # slip: mask not passed (pre-norm branch)
            return x + self.dropout2(self.ff(self.norm2(x)))
        x = self.norm1(x + self.dropout1(self.self_attn(x, x, x)))   # slip: mask not passed (post-norm branch)
        return self.norm2(x + self.dropout2(self.ff(x)))


class EncInvertedMask(_EncoderLayerBase):
    def forward(self, x, mask=None):
        mask = ~mask   # slip: inverts the mask (reads True as "padding", torch's key_padding_mask convention)
        if self.norm_first:
            y = self.norm1(x)
            x = x + self.dropout1(self.self_attn(y, y, y, mask))
            return x + self.dropout2(self.ff(self.norm2(x)))
        x = self.norm1(x + self.dropout1(self.self_attn(x, x, x, mask)))
        return self.norm2(x + self.dropout2(self.ff(x)))


class EncDropoutOnSum(_EncoderLayerBase):
    def forward(self, x, mask=None):
        if self.norm_first:
            y = self.norm1(x)
            x = self.dropout1(x + self.self_attn(y, y, y, mask))   # slip: dropout on the residual sum, not the sub-layer output
            return x + self.dropout2(self.ff(self.norm2(x)))
        x = self.norm1(x + self.dropout1(self.self_attn(x, x, x, mask)))
        return self.norm2(x + self.dropout2(self.ff(x)))


class EncParallelFF(_EncoderLayerBase):
    def forward(self, x, mask=None):
        if self.norm_first:
            y = self.norm1(x)
            h = x + self.dropout1(self.self_attn(y, y, y, mask))
            return h + self.dropout2(self.ff(self.norm2(x)))   # slip: FFN reads the layer input x, not the attention block's output h
        x = self.norm1(x + self.dropout1(self.self_attn(x, x, x, mask)))
        return self.norm2(x + self.dropout2(self.ff(x)))


class EncNorm1Twice(_EncoderLayerBase):
    def forward(self, x, mask=None):
        if self.norm_first:
            y = self.norm1(x)
            x = x + self.dropout1(self.self_attn(y, y, y, mask))
            return x + self.dropout2(self.ff(self.norm1(x)))   # slip: norm1 reused before the FFN instead of norm2
        x = self.norm1(x + self.dropout1(self.self_attn(x, x, x, mask)))
        return self.norm2(x + self.dropout2(self.ff(x)))


class EncInPlaceResidual(_EncoderLayerBase):
    def forward(self, x, mask=None):
        if self.norm_first:
            y = self.norm1(x)
            x += self.dropout1(self.self_attn(y, y, y, mask))   # slip: in-place residual overwrites the caller's input tensor
            return x + self.dropout2(self.ff(self.norm2(x)))
        x = self.norm1(x + self.dropout1(self.self_attn(x, x, x, mask)))
        return self.norm2(x + self.dropout2(self.ff(x)))


# ---- right answers -----------------------------------------------------------------------------
class EncSublayerHelper(_EncoderLayerBase):
    def _residual(self, x, fn, norm, drop):
        if self.norm_first:
            return x + drop(fn(norm(x)))
        return norm(x + drop(fn(x)))

    def _attend(self, z, mask):
        return self.self_attn(z, z, z, mask=mask)

    def forward(self, x, mask=None):
        x = self._residual(x, lambda z: self._attend(z, mask), self.norm1, self.dropout1)
        return self._residual(x, self.ff, self.norm2, self.dropout2)


class EncFunctionalNorm(_EncoderLayerBase):
    @staticmethod
    def _ln(norm, z):
        return F.layer_norm(z, norm.normalized_shape, norm.weight, norm.bias, norm.eps)

    def forward(self, x, mask=None):
        if not self.norm_first:                                    # post-norm: Add, then Norm
            a = self.self_attn(x, x, x, mask)
            h = self._ln(self.norm1, torch.add(x, self.dropout1(a)))
            f = self.ff(h)
            return self._ln(self.norm2, torch.add(h, self.dropout2(f)))
        n1 = self._ln(self.norm1, x)                               # pre-norm: Norm, sub-layer, Add
        h = torch.add(x, self.dropout1(self.self_attn(n1, n1, n1, mask)))
        n2 = self._ln(self.norm2, h)
        return torch.add(h, self.dropout2(self.ff(n2)))


# ================================================================================================
# Exercise 3: the decoder layer
# ================================================================================================
class _DecoderLayerBase(nn.Module):
    """The exercise's __init__, unchanged."""

    def __init__(self, d_model, num_heads, d_ff, dropout=0.1, norm_first=True):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.cross_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.ff = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.norm1, self.norm2, self.norm3 = nn.LayerNorm(d_model), nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.dropout1, self.dropout2, self.dropout3 = nn.Dropout(dropout), nn.Dropout(dropout), nn.Dropout(dropout)
        self.norm_first = norm_first


class DecNoTgtMask(_DecoderLayerBase):
    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        if self.norm_first:
            y = self.norm1(x)
            x = x + self.dropout1(self.self_attn(y, y, y))   # slip: tgt_mask not passed (pre-norm): the decoder sees the future
            y = self.norm2(x)
            x = x + self.dropout2(self.cross_attn(y, memory, memory, memory_mask))
            return x + self.dropout3(self.ff(self.norm3(x)))
        x = self.norm1(x + self.dropout1(self.self_attn(x, x, x)))   # slip: tgt_mask not passed (post-norm)
        x = self.norm2(x + self.dropout2(self.cross_attn(x, memory, memory, memory_mask)))
        return self.norm3(x + self.dropout3(self.ff(x)))


class DecOwnCausalMask(_DecoderLayerBase):
    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        tgt_mask = causal_mask(x.size(1), x.device)   # slip: builds its own causal mask, dropping the given tgt_mask (target padding)
        if self.norm_first:
            y = self.norm1(x)
            x = x + self.dropout1(self.self_attn(y, y, y, tgt_mask))
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
            x = x + self.dropout2(self.cross_attn(y, memory, memory))   # slip: memory_mask not passed (pre-norm): attends to source padding
            return x + self.dropout3(self.ff(self.norm3(x)))
        x = self.norm1(x + self.dropout1(self.self_attn(x, x, x, tgt_mask)))
        x = self.norm2(x + self.dropout2(self.cross_attn(x, memory, memory)))   # slip: memory_mask not passed (post-norm)
        return self.norm3(x + self.dropout3(self.ff(x)))


class DecCrossQueryUnnormed(_DecoderLayerBase):
    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        if self.norm_first:
            y = self.norm1(x)
            x = x + self.dropout1(self.self_attn(y, y, y, tgt_mask))
            x = x + self.dropout2(self.cross_attn(x, memory, memory, memory_mask))   # slip: pre-norm cross-attention without norm2 on the query
            return x + self.dropout3(self.ff(self.norm3(x)))
        x = self.norm1(x + self.dropout1(self.self_attn(x, x, x, tgt_mask)))
        x = self.norm2(x + self.dropout2(self.cross_attn(x, memory, memory, memory_mask)))
        return self.norm3(x + self.dropout3(self.ff(x)))


class DecNormsMemory(_DecoderLayerBase):
    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        if self.norm_first:
            y = self.norm1(x)
            x = x + self.dropout1(self.self_attn(y, y, y, tgt_mask))
            y, m = self.norm2(x), self.norm2(memory)   # slip: also runs the encoder's memory through norm2
            x = x + self.dropout2(self.cross_attn(y, m, m, memory_mask))
            return x + self.dropout3(self.ff(self.norm3(x)))
        x = self.norm1(x + self.dropout1(self.self_attn(x, x, x, tgt_mask)))
        x = self.norm2(x + self.dropout2(self.cross_attn(x, memory, memory, memory_mask)))
        return self.norm3(x + self.dropout3(self.ff(x)))


class DecAlwaysPreNorm(_DecoderLayerBase):
    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        # slip: ignores norm_first, always the pre-norm placement
        y = self.norm1(x)
        x = x + self.dropout1(self.self_attn(y, y, y, tgt_mask))
        y = self.norm2(x)
        x = x + self.dropout2(self.cross_attn(y, memory, memory, memory_mask))
        return x + self.dropout3(self.ff(self.norm3(x)))


class DecPostNormCrossReadsInput(_DecoderLayerBase):
    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        if self.norm_first:
            y = self.norm1(x)
            h = x + self.dropout1(self.self_attn(y, y, y, tgt_mask))
            y = self.norm2(h)
            h = h + self.dropout2(self.cross_attn(y, memory, memory, memory_mask))
            return h + self.dropout3(self.ff(self.norm3(h)))
        h1 = self.norm1(x + self.dropout1(self.self_attn(x, x, x, tgt_mask)))
        h2 = self.norm2(h1 + self.dropout2(self.cross_attn(x, memory, memory, memory_mask)))   # slip: post-norm cross-attention queries from the layer input x, not h1
        return self.norm3(h2 + self.dropout3(self.ff(h2)))


class DecFFBeforeCross(_DecoderLayerBase):
    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        # slip: the feed-forward sub-layer runs before the cross-attention (sub-layers 2 and 3 swapped)
        if self.norm_first:
            y = self.norm1(x)
            x = x + self.dropout1(self.self_attn(y, y, y, tgt_mask))
            x = x + self.dropout3(self.ff(self.norm3(x)))
            y = self.norm2(x)
            return x + self.dropout2(self.cross_attn(y, memory, memory, memory_mask))
        x = self.norm1(x + self.dropout1(self.self_attn(x, x, x, tgt_mask)))
        x = self.norm3(x + self.dropout3(self.ff(x)))
        return self.norm2(x + self.dropout2(self.cross_attn(x, memory, memory, memory_mask)))


class DecNoCrossResidual(_DecoderLayerBase):
    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        if self.norm_first:
            y = self.norm1(x)
            x = x + self.dropout1(self.self_attn(y, y, y, tgt_mask))
            y = self.norm2(x)
            x = self.dropout2(self.cross_attn(y, memory, memory, memory_mask))   # slip: no residual around the cross-attention
            return x + self.dropout3(self.ff(self.norm3(x)))
        x = self.norm1(x + self.dropout1(self.self_attn(x, x, x, tgt_mask)))
        x = self.norm2(x + self.dropout2(self.cross_attn(x, memory, memory, memory_mask)))
        return self.norm3(x + self.dropout3(self.ff(x)))


class DecSelfAttnForCross(_DecoderLayerBase):
    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        if self.norm_first:
            y = self.norm1(x)
            x = x + self.dropout1(self.self_attn(y, y, y, tgt_mask))
            y = self.norm2(x)
            x = x + self.dropout2(self.self_attn(y, memory, memory, memory_mask))   # slip: copy-paste, self_attn's weights used for the cross-attention (pre-norm)
            return x + self.dropout3(self.ff(self.norm3(x)))
        x = self.norm1(x + self.dropout1(self.self_attn(x, x, x, tgt_mask)))
        x = self.norm2(x + self.dropout2(self.self_attn(x, memory, memory, memory_mask)))   # slip: same copy-paste (post-norm)
        return self.norm3(x + self.dropout3(self.ff(x)))


# ---- right answers -----------------------------------------------------------------------------
class DecSublayerLoop(_DecoderLayerBase):
    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        sublayers = [
            (self.norm1, self.dropout1, lambda z: self.self_attn(z, z, z, tgt_mask)),
            (self.norm2, self.dropout2, lambda z: self.cross_attn(z, memory, memory, memory_mask)),
            (self.norm3, self.dropout3, self.ff),
        ]
        for norm, drop, fn in sublayers:
            x = x + drop(fn(norm(x))) if self.norm_first else norm(x + drop(fn(x)))
        return x


class DecPostFirstKeywords(_DecoderLayerBase):
    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        if not self.norm_first:
            a = self.self_attn(query=x, key=x, value=x, mask=tgt_mask)
            h1 = self.norm1(x + self.dropout1(a))
            c = self.cross_attn(query=h1, key=memory, value=memory, mask=memory_mask)
            h2 = self.norm2(h1 + self.dropout2(c))
            return self.norm3(h2 + self.dropout3(self.ff(h2)))
        n1 = self.norm1(x)
        h1 = x + self.dropout1(self.self_attn(query=n1, key=n1, value=n1, mask=tgt_mask))
        n2 = self.norm2(h1)
        h2 = h1 + self.dropout2(self.cross_attn(query=n2, key=memory, value=memory, mask=memory_mask))
        n3 = self.norm3(h2)
        return h2 + self.dropout3(self.ff(n3))


# ================================================================================================
# Exercise 4: the full forward pass with masks
# ================================================================================================
def tf_no_sqrt_scale(model, src, tgt_in):
    T = tgt_in.size(1)
    src_mask = padding_mask(src, model.pad_id)
    tgt_mask = causal_mask(T, tgt_in.device) & padding_mask(tgt_in, model.pad_id)
    x = model.pos(model.src_embed(src))                     # slip: embeddings not multiplied by sqrt(d_model) (source)
    memory = model.encoder(x, src_mask)
    y = model.pos(model.tgt_embed(tgt_in))                  # slip: embeddings not multiplied by sqrt(d_model) (target)
    s = model.decoder(y, memory, tgt_mask, src_mask)
    return model.generator(s)


def tf_scale_after_positions(model, src, tgt_in):
    T = tgt_in.size(1)
    src_mask = padding_mask(src, model.pad_id)
    tgt_mask = causal_mask(T, tgt_in.device) & padding_mask(tgt_in, model.pad_id)
    x = model.pos(model.src_embed(src)) * math.sqrt(model.d_model)       # slip: scales after adding the positions (source)
    memory = model.encoder(x, src_mask)
    y = model.pos(model.tgt_embed(tgt_in)) * math.sqrt(model.d_model)    # slip: scales after adding the positions (target)
    s = model.decoder(y, memory, tgt_mask, src_mask)
    return model.generator(s)


def tf_no_memory_mask(model, src, tgt_in):
    T = tgt_in.size(1)
    src_mask = padding_mask(src, model.pad_id)
    tgt_mask = causal_mask(T, tgt_in.device) & padding_mask(tgt_in, model.pad_id)
    x = model.pos(model.src_embed(src) * math.sqrt(model.d_model))
    memory = model.encoder(x, src_mask)
    y = model.pos(model.tgt_embed(tgt_in) * math.sqrt(model.d_model))
    s = model.decoder(y, memory, tgt_mask)                  # slip: no memory_mask: cross-attention reads the source padding
    return model.generator(s)


def tf_inverted_src_mask(model, src, tgt_in):
    T = tgt_in.size(1)
    src_mask = (src == model.pad_id)[:, None, None, :]      # slip: True at the padding (torch's key_padding_mask convention)
    tgt_mask = causal_mask(T, tgt_in.device) & padding_mask(tgt_in, model.pad_id)
    x = model.pos(model.src_embed(src) * math.sqrt(model.d_model))
    memory = model.encoder(x, src_mask)
    y = model.pos(model.tgt_embed(tgt_in) * math.sqrt(model.d_model))
    s = model.decoder(y, memory, tgt_mask, src_mask)
    return model.generator(s)


def tf_or_masks(model, src, tgt_in):
    T = tgt_in.size(1)
    src_mask = padding_mask(src, model.pad_id)
    tgt_mask = causal_mask(T, tgt_in.device) | padding_mask(tgt_in, model.pad_id)   # slip: | instead of &: real tokens are visible in the future
    x = model.pos(model.src_embed(src) * math.sqrt(model.d_model))
    memory = model.encoder(x, src_mask)
    y = model.pos(model.tgt_embed(tgt_in) * math.sqrt(model.d_model))
    s = model.decoder(y, memory, tgt_mask, src_mask)
    return model.generator(s)


def tf_causal_off_by_one(model, src, tgt_in):
    T = tgt_in.size(1)
    src_mask = padding_mask(src, model.pad_id)
    causal = torch.tril(torch.ones(T, T, dtype=torch.bool, device=tgt_in.device), diagonal=-1)   # slip: diagonal=-1, a position cannot see itself
    tgt_mask = causal & padding_mask(tgt_in, model.pad_id)
    x = model.pos(model.src_embed(src) * math.sqrt(model.d_model))
    memory = model.encoder(x, src_mask)
    y = model.pos(model.tgt_embed(tgt_in) * math.sqrt(model.d_model))
    s = model.decoder(y, memory, tgt_mask, src_mask)
    return model.generator(s)


def tf_causal_only(model, src, tgt_in):
    T = tgt_in.size(1)
    src_mask = padding_mask(src, model.pad_id)
    tgt_mask = causal_mask(T, tgt_in.device)                # slip: causal mask only, the target padding mask forgotten
    x = model.pos(model.src_embed(src) * math.sqrt(model.d_model))
    memory = model.encoder(x, src_mask)
    y = model.pos(model.tgt_embed(tgt_in) * math.sqrt(model.d_model))
    s = model.decoder(y, memory, tgt_mask, src_mask)
    return model.generator(s)


def tf_shifts_again(model, src, tgt_in):
    tgt_in = tgt_in[:, :-1]                                 # slip: shifts the already shifted decoder input once more
    T = tgt_in.size(1)
    src_mask = padding_mask(src, model.pad_id)
    tgt_mask = causal_mask(T, tgt_in.device) & padding_mask(tgt_in, model.pad_id)
    x = model.pos(model.src_embed(src) * math.sqrt(model.d_model))
    memory = model.encoder(x, src_mask)
    y = model.pos(model.tgt_embed(tgt_in) * math.sqrt(model.d_model))
    s = model.decoder(y, memory, tgt_mask, src_mask)
    return model.generator(s)


def tf_log_softmax(model, src, tgt_in):
    T = tgt_in.size(1)
    src_mask = padding_mask(src, model.pad_id)
    tgt_mask = causal_mask(T, tgt_in.device) & padding_mask(tgt_in, model.pad_id)
    x = model.pos(model.src_embed(src) * math.sqrt(model.d_model))
    memory = model.encoder(x, src_mask)
    y = model.pos(model.tgt_embed(tgt_in) * math.sqrt(model.d_model))
    s = model.decoder(y, memory, tgt_mask, src_mask)
    return F.log_softmax(model.generator(s), dim=-1)        # slip: returns log-probabilities, not the logits


def tf_global_pad(model, src, tgt_in):
    T = tgt_in.size(1)
    src_mask = padding_mask(src, PAD)                       # slip: the notebook's PAD = 0 instead of model.pad_id (source)
    tgt_mask = causal_mask(T, tgt_in.device) & padding_mask(tgt_in, PAD)   # slip: same, target
    x = model.pos(model.src_embed(src) * math.sqrt(model.d_model))
    memory = model.encoder(x, src_mask)
    y = model.pos(model.tgt_embed(tgt_in) * math.sqrt(model.d_model))
    s = model.decoder(y, memory, tgt_mask, src_mask)
    return model.generator(s)


# ---- right answers -----------------------------------------------------------------------------
def tf_manual_masks(model, src, tgt_in):
    B, T = tgt_in.shape
    scale = model.d_model ** 0.5
    src_keep = (src != model.pad_id).unsqueeze(1).unsqueeze(2)                 # (B, 1, 1, S)
    i = torch.arange(T, device=tgt_in.device)
    tgt_keep = (tgt_in != model.pad_id)[:, None, :]                            # (B, 1, T): keys
    tgt_mask = (i[None, :] <= i[:, None])[None] & tgt_keep                     # (B, T, T), one for all heads
    memory = model.encoder(model.pos(scale * model.src_embed(src)), src_keep)
    out = model.decoder(model.pos(scale * model.tgt_embed(tgt_in)), memory, tgt_mask, src_keep)
    return model.generator(out)


def tf_functional_embeddings(model, src, tgt_in):
    T = tgt_in.size(1)
    src_mask = padding_mask(src, model.pad_id)
    causal = torch.ones(T, T, dtype=torch.bool, device=tgt_in.device).tril()
    tgt_mask = causal[None, None] & padding_mask(tgt_in, model.pad_id)
    x = F.embedding(src, model.src_embed.weight) * math.sqrt(model.d_model)
    memory = model.encoder(model.pos(x), mask=src_mask)
    y = F.embedding(tgt_in, model.tgt_embed.weight) * math.sqrt(model.d_model)
    s = model.decoder(model.pos(y), memory, tgt_mask=tgt_mask, memory_mask=src_mask)
    return s @ model.generator.weight.T


def tf_model_embed(model, src, tgt_in):
    src_mask = padding_mask(src, model.pad_id)
    memory = model.encoder(model.embed(src, model.src_embed), src_mask)
    tgt_mask = padding_mask(tgt_in, model.pad_id) & causal_mask(tgt_in.size(1), tgt_in.device)
    return model.generator(model.decoder(model.embed(tgt_in, model.tgt_embed), memory, tgt_mask, src_mask))


# ================================================================================================
SLIPS = [
    ("feed_forward", "No dropout on the hidden layer.", FFNoDropout),
    ("feed_forward", "Dropout applied to the output of the second layer instead of the hidden layer.", FFDropoutOnOutput),
    ("feed_forward", "Uses F.dropout(h, p) without training=self.training, so dropout stays on after model.eval().",
     FFFunctionalDropoutAlwaysOn),
    ("feed_forward", "Forgets the first bias b_1.", FFNoFirstBias),
    ("feed_forward", "Forgets the second bias b_2.", FFNoSecondBias),
    ("feed_forward", "Leaves out the ReLU, so the network is linear.", FFNoReLU),
    ("feed_forward", "Uses GELU instead of the formula's ReLU.", FFGelu),
    ("feed_forward", "Adds b_1 after the ReLU instead of before it.", FFBiasAfterReLU),
    ("feed_forward", "Applies a second ReLU to the output.", FFReLUOnOutput),
    ("feed_forward", "Adds a residual connection (x + FFN(x)) inside the feed-forward network.", FFWithResidual),

    ("encoder_layer", "Ignores norm_first and always uses the pre-norm placement.", EncAlwaysPreNorm),
    ("encoder_layer", "Pre-norm: the residual adds the normalised input instead of the raw input.", EncResidualFromNormed),
    ("encoder_layer", "Pre-norm: no residual connection around the feed-forward network.", EncNoFFResidual),
    ("encoder_layer", "Post-norm: forgets the LayerNorm after the feed-forward sub-layer.", EncPostNormMissingSecondNorm),
    ("encoder_layer", "Does not pass the mask to the self-attention.", EncNoMask),
    ("encoder_layer", "Inverts the mask (treats True as padding).", EncInvertedMask),
    ("encoder_layer", "Pre-norm: applies dropout to the residual sum instead of the attention output.", EncDropoutOnSum),
    ("encoder_layer", "Pre-norm: the feed-forward network reads the layer input instead of the attention block's output.",
     EncParallelFF),
    ("encoder_layer", "Pre-norm: reuses norm1 before the feed-forward network instead of norm2.", EncNorm1Twice),
    ("encoder_layer", "Pre-norm: adds the residual in place (x += ...), overwriting the caller's input tensor.",
     EncInPlaceResidual),

    ("decoder_layer", "Does not pass tgt_mask to the masked self-attention, so the decoder sees the future.", DecNoTgtMask),
    ("decoder_layer", "Replaces the given tgt_mask by its own causal mask, losing the target padding mask.",
     DecOwnCausalMask),
    ("decoder_layer", "Does not pass memory_mask to the cross-attention, so it attends to the source padding.",
     DecNoMemoryMask),
    ("decoder_layer", "Pre-norm: the cross-attention query is the un-normalised x (norm2 skipped).", DecCrossQueryUnnormed),
    ("decoder_layer", "Pre-norm: also runs the encoder memory through norm2 before the cross-attention.", DecNormsMemory),
    ("decoder_layer", "Ignores norm_first and always uses the pre-norm placement.", DecAlwaysPreNorm),
    ("decoder_layer", "Post-norm: the cross-attention queries come from the layer input instead of the self-attention block's output.",
     DecPostNormCrossReadsInput),
    ("decoder_layer", "Runs the feed-forward sub-layer before the cross-attention.", DecFFBeforeCross),
    ("decoder_layer", "Pre-norm: no residual connection around the cross-attention.", DecNoCrossResidual),
    ("decoder_layer", "Uses self_attn (copy-paste) instead of cross_attn for the cross-attention.", DecSelfAttnForCross),

    ("transformer_forward", "Does not multiply the embeddings by sqrt(d_model).", tf_no_sqrt_scale),
    ("transformer_forward", "Multiplies by sqrt(d_model) after adding the positional encoding.", tf_scale_after_positions),
    ("transformer_forward", "Does not pass the source padding mask to the decoder's cross-attention.", tf_no_memory_mask),
    ("transformer_forward", "Source padding mask inverted: True at the padding.", tf_inverted_src_mask),
    ("transformer_forward", "Combines the causal and target padding masks with | instead of &.", tf_or_masks),
    ("transformer_forward", "Causal mask off by one (tril with diagonal=-1): a position cannot attend to itself.",
     tf_causal_off_by_one),
    ("transformer_forward", "Target mask is the causal mask only, without the target padding mask.", tf_causal_only),
    ("transformer_forward", "Shifts the decoder input again (tgt_in[:, :-1]) although it is already shifted.",
     tf_shifts_again),
    ("transformer_forward", "Returns log-softmax probabilities instead of the logits.", tf_log_softmax),
    ("transformer_forward", "Uses the notebook's PAD = 0 instead of model.pad_id for the masks.", tf_global_pad),
]

CORRECT = [
    ("feed_forward", "einsum over the last axis and clamp(min=0) as the ReLU.", FFEinsumClamp),
    ("feed_forward", "Flattens the positions and uses torch.addmm, then restores the shape.", FFAddmmFlat),
    ("feed_forward", "F.linear with the transposed matrices, dropout applied just before the ReLU (it commutes with it).",
     FFDropoutBeforeReLU),

    ("encoder_layer", "A helper that wraps any sub-layer in its Add & Norm for either placement.", EncSublayerHelper),
    ("encoder_layer", "Post-norm branch first, F.layer_norm with the modules' parameters and torch.add.", EncFunctionalNorm),

    ("decoder_layer", "A loop over the three (norm, dropout, sub-layer) triples.", DecSublayerLoop),
    ("decoder_layer", "Post-norm first, named intermediate tensors, attention called with keyword arguments.",
     DecPostFirstKeywords),

    ("transformer_forward", "Masks built by hand with arange comparisons (a (B, T, T) target mask), d_model ** 0.5.",
     tf_manual_masks),
    ("transformer_forward", "F.embedding on the tables' weights and logits as s @ generator.weight.T.",
     tf_functional_embeddings),
    ("transformer_forward", "Uses the model's embed helper (embedding x sqrt(d_model) + positions).", tf_model_embed),
]
