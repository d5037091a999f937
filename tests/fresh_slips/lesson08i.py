"""Typical learner answers for lesson 08 (multi-head attention, positional encoding): slips and right answers.

Exercises (the `exercise` keys of the checks):
    split_heads            split_heads(x, num_heads): (B, T, d_model) -> (B, num_heads, T, d_head),
                           head i taking the contiguous features i*d_head .. (i+1)*d_head - 1
    merge_heads            merge_heads(x): (B, num_heads, T, d_head) -> (B, T, num_heads * d_head), the inverse
    multi_head_attention   an nn.Module class built as MyMultiHeadAttention(d_model, num_heads), with the given
                           layers w_q, w_k, w_v, w_o (nn.Linear(d_model, d_model), with bias);
                           forward(query, key, value, mask=None) -> (B, T_q, d_model), keeping the per-head
                           weights (B, num_heads, T_q, T_k) on self.attn_weights; mask bool, True = may attend,
                           broadcasting over the heads
    positional_encoding    positional_encoding(max_len, d_model) -> (max_len, d_model) float32, interleaved:
                           PE[pos, 2i] = sin(pos / 10000^(2i/d)), PE[pos, 2i+1] = cos(pos / 10000^(2i/d))

SLIPS holds answers with exactly one mistake each (marked `# slip:`); CORRECT holds right answers
written differently from the reference solution.
"""
import math

import numpy as np
import torch
import torch.nn as nn

from course_utils.attention import merge_heads as ref_merge_heads
from course_utils.attention import scaled_dot_product_attention
from course_utils.attention import split_heads as ref_split_heads
from course_utils.masks import masked_softmax

# ---------------------------------------------------------------------------------------------------
# Exercise 1a: split_heads
# ---------------------------------------------------------------------------------------------------

def split_view_no_transpose(x, num_heads):
    B, T, d_model = x.shape
    return x.view(B, num_heads, T, d_model // num_heads)  # slip: reshapes straight to (B, h, T, d_head), no transpose


def split_no_transpose(x, num_heads):
    B, T, d_model = x.shape
    return x.view(B, T, num_heads, d_model // num_heads)  # slip: forgets the transpose: shape (B, T, h, d_head)


def split_strided_heads(x, num_heads):
    B, T, d_model = x.shape
    return x.view(B, T, d_model // num_heads, num_heads).permute(0, 3, 1, 2)  # slip: (d_head, h) order: head i gets features i, i+h, i+2h, ...


def split_float_division(x, num_heads):
    B, T, d_model = x.shape
    return x.view(B, T, num_heads, d_model / num_heads).transpose(1, 2)  # slip: d_model / num_heads is a float


def split_stack_axis0(x, num_heads):
    return torch.stack(x.chunk(num_heads, dim=-1), dim=0)  # slip: stacks the heads on axis 0: (h, B, T, d_head)


def split_chunk_size(x, num_heads):
    return torch.stack(torch.split(x, num_heads, dim=-1), dim=1)  # slip: torch.split takes a chunk SIZE: d_head pieces of num_heads features


def split_wrong_permute(x, num_heads):
    B, T, d_model = x.shape
    return x.view(B, T, num_heads, d_model // num_heads).permute(0, 2, 3, 1)  # slip: permute gives (B, h, d_head, T)


# right answers

def split_chunk_stack(x, num_heads):
    return torch.stack(x.chunk(num_heads, dim=-1), dim=1)


def split_reshape_permute(x, num_heads):
    B, T, _ = x.shape
    return x.reshape(B, T, num_heads, -1).permute(0, 2, 1, 3)


def split_unflatten(x, num_heads):
    return x.unflatten(-1, (num_heads, -1)).transpose(1, 2)


# ---------------------------------------------------------------------------------------------------
# Exercise 1b: merge_heads
# ---------------------------------------------------------------------------------------------------

def merge_no_transpose(x):
    B, h, T, d_head = x.shape
    return x.reshape(B, T, h * d_head)  # slip: reshapes without moving the head axis back


def merge_view_after_transpose(x):
    B, h, T, d_head = x.shape
    return x.transpose(1, 2).view(B, T, h * d_head)  # slip: view on the non-contiguous transpose (needs reshape or contiguous)


def merge_cat_wrong_dim(x):
    return torch.cat(x.unbind(dim=1), dim=1)  # slip: concatenates the heads along time: (B, h*T, d_head)


def merge_interleaved(x):
    B, h, T, d_head = x.shape
    return x.permute(0, 2, 3, 1).reshape(B, T, h * d_head)  # slip: (T, d_head, h) order: the heads' features interleaved


def merge_flatten_wrong(x):
    return x.transpose(1, 2).flatten(1)  # slip: flattens from axis 1: (B, T*h*d_head)


def merge_shape_unpacked_wrong(x):
    B, T, h, d_head = x.shape  # slip: unpacks the shape as (B, T, h, d_head)
    return x.transpose(1, 2).reshape(B, T, h * d_head)


def merge_sum_heads(x):
    return x.sum(dim=1)  # slip: sums the heads instead of concatenating them


# right answers

def merge_cat_unbind(x):
    return torch.cat(x.unbind(dim=1), dim=-1)


def merge_permute_flatten(x):
    return x.permute(0, 2, 1, 3).flatten(2)


def merge_contiguous_view(x):
    B, h, T, d_head = x.shape
    return x.transpose(1, 2).contiguous().view(B, T, -1)


# ---------------------------------------------------------------------------------------------------
# Exercise 2: multi-head attention (the __init__ is given in the notebook; learners write forward)
# ---------------------------------------------------------------------------------------------------

class _GivenInit(nn.Module):
    """The notebook's given __init__ of MyMultiHeadAttention (unchanged)."""

    def __init__(self, d_model, num_heads):
        super().__init__()
        assert d_model % num_heads == 0, "d_model must be divisible by num_heads"
        self.num_heads, self.d_head = num_heads, d_model // num_heads
        self.w_q = nn.Linear(d_model, d_model)   # W_Q^1 ... W_Q^h side by side
        self.w_k = nn.Linear(d_model, d_model)
        self.w_v = nn.Linear(d_model, d_model)
        self.w_o = nn.Linear(d_model, d_model)   # W_O
        self.attn_weights = None


class MHANoOutProj(_GivenInit):
    def forward(self, query, key, value, mask=None):
        q = ref_split_heads(self.w_q(query), self.num_heads)
        k = ref_split_heads(self.w_k(key), self.num_heads)
        v = ref_split_heads(self.w_v(value), self.num_heads)
        out, self.attn_weights = scaled_dot_product_attention(q, k, v, mask, need_weights=True)
        return ref_merge_heads(out)  # slip: forgets W_O after merging the heads


class MHAValueFromKey(_GivenInit):
    def forward(self, query, key, value, mask=None):
        q = ref_split_heads(self.w_q(query), self.num_heads)
        k = ref_split_heads(self.w_k(key), self.num_heads)
        v = ref_split_heads(self.w_v(key), self.num_heads)  # slip: projects the key instead of the value
        out, self.attn_weights = scaled_dot_product_attention(q, k, v, mask, need_weights=True)
        return self.w_o(ref_merge_heads(out))


class MHASplitNoTranspose(_GivenInit):
    def _split(self, x):
        B, T, d_model = x.shape
        return x.view(B, self.num_heads, T, self.d_head)  # slip: own split: view straight to (B, h, T, d_head), no transpose

    def forward(self, query, key, value, mask=None):
        q, k, v = self._split(self.w_q(query)), self._split(self.w_k(key)), self._split(self.w_v(value))
        out, self.attn_weights = scaled_dot_product_attention(q, k, v, mask, need_weights=True)
        return self.w_o(ref_merge_heads(out))


class MHAMergeNoTranspose(_GivenInit):
    def forward(self, query, key, value, mask=None):
        q = ref_split_heads(self.w_q(query), self.num_heads)
        k = ref_split_heads(self.w_k(key), self.num_heads)
        v = ref_split_heads(self.w_v(value), self.num_heads)
        out, self.attn_weights = scaled_dot_product_attention(q, k, v, mask, need_weights=True)
        B, h, T_q, d_head = out.shape
        return self.w_o(out.reshape(B, T_q, h * d_head))  # slip: merges the heads without transposing back


class MHANoWeightsKept(_GivenInit):
    def forward(self, query, key, value, mask=None):
        q = ref_split_heads(self.w_q(query), self.num_heads)
        k = ref_split_heads(self.w_k(key), self.num_heads)
        v = ref_split_heads(self.w_v(value), self.num_heads)
        out, weights = scaled_dot_product_attention(q, k, v, mask, need_weights=True)  # slip: the weights are not kept on self.attn_weights
        return self.w_o(ref_merge_heads(out))


class MHAWeightsAveraged(_GivenInit):
    def forward(self, query, key, value, mask=None):
        q = ref_split_heads(self.w_q(query), self.num_heads)
        k = ref_split_heads(self.w_k(key), self.num_heads)
        v = ref_split_heads(self.w_v(value), self.num_heads)
        out, weights = scaled_dot_product_attention(q, k, v, mask, need_weights=True)
        self.attn_weights = weights.mean(dim=1)  # slip: keeps the weights averaged over the heads (B, T_q, T_k)
        return self.w_o(ref_merge_heads(out))


class MHAMaskInverted(_GivenInit):
    def forward(self, query, key, value, mask=None):
        q = ref_split_heads(self.w_q(query), self.num_heads)
        k = ref_split_heads(self.w_k(key), self.num_heads)
        v = ref_split_heads(self.w_v(value), self.num_heads)
        if mask is not None:
            mask = ~mask  # slip: inverts the mask (PyTorch's nn.MultiheadAttention convention, True = hide)
        out, self.attn_weights = scaled_dot_product_attention(q, k, v, mask, need_weights=True)
        return self.w_o(ref_merge_heads(out))


class MHAScaleDModel(_GivenInit):
    def forward(self, query, key, value, mask=None):
        q = ref_split_heads(self.w_q(query), self.num_heads)
        k = ref_split_heads(self.w_k(key), self.num_heads)
        v = ref_split_heads(self.w_v(value), self.num_heads)
        d_model = self.num_heads * self.d_head
        scores = q @ k.transpose(-2, -1) / math.sqrt(d_model)  # slip: scales by sqrt(d_model) instead of sqrt(d_head)
        self.attn_weights = masked_softmax(scores, mask)
        return self.w_o(ref_merge_heads(self.attn_weights @ v))


class MHAQueryLength(_GivenInit):
    def forward(self, query, key, value, mask=None):
        B, T, _ = query.shape
        h, d = self.num_heads, self.d_head
        q = self.w_q(query).view(B, T, h, d).transpose(1, 2)
        k = self.w_k(key).view(B, T, h, d).transpose(1, 2)  # slip: uses the query's length T for the keys (and values)
        v = self.w_v(value).view(B, T, h, d).transpose(1, 2)
        out, self.attn_weights = scaled_dot_product_attention(q, k, v, mask, need_weights=True)
        return self.w_o(out.transpose(1, 2).reshape(B, T, h * d))


class MHAResidual(_GivenInit):
    def forward(self, query, key, value, mask=None):
        q = ref_split_heads(self.w_q(query), self.num_heads)
        k = ref_split_heads(self.w_k(key), self.num_heads)
        v = ref_split_heads(self.w_v(value), self.num_heads)
        out, self.attn_weights = scaled_dot_product_attention(q, k, v, mask, need_weights=True)
        return query + self.w_o(ref_merge_heads(out))  # slip: adds a residual connection inside the attention


# right answers

class MHAEinsum(_GivenInit):
    """Own reshapes, einsum scores, the course's masked softmax."""

    def forward(self, query, key, value, mask=None):
        h = self.num_heads
        q = self.w_q(query).unflatten(-1, (h, self.d_head))       # (B, T_q, h, d_head)
        k = self.w_k(key).unflatten(-1, (h, self.d_head))         # (B, T_k, h, d_head)
        v = self.w_v(value).unflatten(-1, (h, self.d_head))
        scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(self.d_head)
        self.attn_weights = masked_softmax(scores, mask)          # (B, h, T_q, T_k)
        out = torch.einsum("bhqk,bkhd->bqhd", self.attn_weights, v)
        return self.w_o(out.flatten(2))


class MHAHeadLoop(_GivenInit):
    """One head at a time on its slice of features, outputs and weights concatenated."""

    def forward(self, query, key, value, mask=None):
        q, k, v = self.w_q(query), self.w_k(key), self.w_v(value)
        outs, weights = [], []
        for i in range(self.num_heads):
            cols = slice(i * self.d_head, (i + 1) * self.d_head)
            o, w = scaled_dot_product_attention(q[:, None, :, cols], k[:, None, :, cols], v[:, None, :, cols],
                                                mask, need_weights=True)      # (B, 1, T_q, d_head), (B, 1, T_q, T_k)
            outs.append(o[:, 0])
            weights.append(w)
        self.attn_weights = torch.cat(weights, dim=1)
        return self.w_o(torch.cat(outs, dim=-1))


class MHAOwnSplitMerge(_GivenInit):
    """Own split (reshape + permute) and merge (permute + flatten) around the course's attention."""

    def forward(self, query, key, value, mask=None):
        def split(x):
            return x.reshape(x.size(0), x.size(1), self.num_heads, self.d_head).permute(0, 2, 1, 3)

        out, weights = scaled_dot_product_attention(split(self.w_q(query)), split(self.w_k(key)),
                                                    split(self.w_v(value)), mask, need_weights=True)
        self.attn_weights = weights
        return self.w_o(out.permute(0, 2, 1, 3).flatten(2))


# ---------------------------------------------------------------------------------------------------
# Exercise 3: the sinusoidal positional encoding
# ---------------------------------------------------------------------------------------------------

def pe_concatenated(max_len, d_model):
    pos = torch.arange(max_len, dtype=torch.float32)[:, None]
    two_i = torch.arange(0, d_model, 2, dtype=torch.float32)
    angle = pos / 10000.0 ** (two_i / d_model)
    return torch.cat([torch.sin(angle), torch.cos(angle)], dim=-1)  # slip: [sin | cos] concatenated, not interleaved


def pe_i_not_2i(max_len, d_model):
    pos = torch.arange(max_len, dtype=torch.float32)[:, None]
    i = torch.arange(d_model // 2, dtype=torch.float32)
    angle = pos / 10000.0 ** (i / d_model)  # slip: exponent i/d instead of 2i/d
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle)
    return pe


def pe_column_exponent(max_len, d_model):
    pos = torch.arange(max_len, dtype=torch.float32)[:, None]
    j = torch.arange(d_model, dtype=torch.float32)
    angle = pos / 10000.0 ** (j / d_model)  # slip: each column uses its own index j: the cosine of pair i gets exponent (2i+1)/d
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2] = torch.sin(angle[:, 0::2])
    pe[:, 1::2] = torch.cos(angle[:, 1::2])
    return pe


def pe_sin_cos_swapped(max_len, d_model):
    pos = torch.arange(max_len, dtype=torch.float32)[:, None]
    two_i = torch.arange(0, d_model, 2, dtype=torch.float32)
    angle = pos / 10000.0 ** (two_i / d_model)
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2], pe[:, 1::2] = torch.cos(angle), torch.sin(angle)  # slip: cosines in the even columns, sines in the odd
    return pe


def pe_exp_sign(max_len, d_model):
    pos = torch.arange(max_len, dtype=torch.float32)[:, None]
    div_term = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * (math.log(10000.0) / d_model))  # slip: missing minus: frequencies 10000^(+2i/d)
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2] = torch.sin(pos * div_term)
    pe[:, 1::2] = torch.cos(pos * div_term)
    return pe


def pe_float64(max_len, d_model):
    pos = np.arange(max_len)[:, None]
    two_i = np.arange(0, d_model, 2)
    angle = pos / 10000.0 ** (two_i / d_model)
    pe = np.zeros((max_len, d_model))
    pe[:, 0::2] = np.sin(angle)
    pe[:, 1::2] = np.cos(angle)
    return torch.from_numpy(pe)  # slip: NumPy's float64 kept: the tensor is float64, not float32


def pe_positions_from_one(max_len, d_model):
    pos = torch.arange(1, max_len + 1, dtype=torch.float32)[:, None]  # slip: positions start at 1 instead of 0
    two_i = torch.arange(0, d_model, 2, dtype=torch.float32)
    angle = pos / 10000.0 ** (two_i / d_model)
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle)
    return pe


def pe_batch_axis(max_len, d_model):
    pos = torch.arange(max_len, dtype=torch.float32)[:, None]
    two_i = torch.arange(0, d_model, 2, dtype=torch.float32)
    angle = pos / 10000.0 ** (two_i / d_model)
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle)
    return pe.unsqueeze(0)  # slip: adds a batch axis: (1, max_len, d_model)


def pe_loop_floor_division(max_len, d_model):
    pe = torch.zeros(max_len, d_model)
    for pos in range(max_len):
        for i in range(0, d_model, 2):
            angle = pos / 10000 ** (i // d_model)  # slip: floor division i // d_model is 0: every pair gets frequency 1
            pe[pos, i] = math.sin(angle)
            pe[pos, i + 1] = math.cos(angle)
    return pe


# right answers

def pe_exp_log(max_len, d_model):
    """The Annotated Transformer's form: frequencies exp(-2i ln(10000)/d)."""
    position = torch.arange(max_len).unsqueeze(1).float()
    div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term)
    return pe


def pe_stack_flatten(max_len, d_model):
    """Sines and cosines stacked on a last axis, then flattened: sin, cos, sin, cos, ..."""
    freq = torch.pow(10000.0, -torch.arange(0, d_model, 2, dtype=torch.float32) / d_model)
    angle = torch.outer(torch.arange(max_len, dtype=torch.float32), freq)      # (max_len, d_model/2)
    return torch.stack([angle.sin(), angle.cos()], dim=-1).flatten(1)


def pe_numpy_cast(max_len, d_model):
    """NumPy in float64, converted to float32 at the end."""
    pos = np.arange(max_len)[:, None]
    j = np.arange(d_model)[None, :]
    angle = pos / np.power(10000.0, (j - j % 2) / d_model)                    # 2i for both columns of a pair
    pe = np.where(j % 2 == 0, np.sin(angle), np.cos(angle))
    return torch.tensor(pe, dtype=torch.float32)


# ---------------------------------------------------------------------------------------------------

SLIPS = [
    ("split_heads", "reshapes straight to (B, h, T, d_head) without the transpose: heads mix positions", split_view_no_transpose),
    ("split_heads", "forgets the transpose: returns (B, T, h, d_head)", split_no_transpose),
    ("split_heads", "reshapes as (d_head, h): each head gets strided features instead of a contiguous block", split_strided_heads),
    ("split_heads", "d_head computed with / (a float), so view fails", split_float_division),
    ("split_heads", "stacks the chunks on axis 0: (h, B, T, d_head)", split_stack_axis0),
    ("split_heads", "torch.split with num_heads as the chunk size instead of the number of chunks", split_chunk_size),
    ("split_heads", "wrong permute: (B, h, d_head, T)", split_wrong_permute),
    ("merge_heads", "reshapes to (B, T, h*d_head) without transposing the head axis back", merge_no_transpose),
    ("merge_heads", "view after transpose (non-contiguous): fails", merge_view_after_transpose),
    ("merge_heads", "concatenates the heads along the time axis", merge_cat_wrong_dim),
    ("merge_heads", "puts d_head before the heads: the heads' features interleaved", merge_interleaved),
    ("merge_heads", "flattens from axis 1: (B, T*h*d_head)", merge_flatten_wrong),
    ("merge_heads", "unpacks the input shape in the wrong order (B, T, h, d_head)", merge_shape_unpacked_wrong),
    ("merge_heads", "sums the heads instead of concatenating them", merge_sum_heads),
    ("multi_head_attention", "forgets the output projection W_O", MHANoOutProj),
    ("multi_head_attention", "values projected from the key instead of the value", MHAValueFromKey),
    ("multi_head_attention", "own split_heads without the transpose", MHASplitNoTranspose),
    ("multi_head_attention", "merges the heads without transposing back", MHAMergeNoTranspose),
    ("multi_head_attention", "does not keep the weights on self.attn_weights", MHANoWeightsKept),
    ("multi_head_attention", "keeps the weights averaged over the heads instead of per head", MHAWeightsAveraged),
    ("multi_head_attention", "inverts the mask (True taken as hidden)", MHAMaskInverted),
    ("multi_head_attention", "scales the scores by sqrt(d_model) instead of sqrt(d_head)", MHAScaleDModel),
    ("multi_head_attention", "reshapes keys and values with the query's length (fails when T_k != T_q)", MHAQueryLength),
    ("multi_head_attention", "adds a residual connection (query + ...) inside the attention", MHAResidual),
    ("positional_encoding", "concatenated [sin | cos] layout instead of interleaved", pe_concatenated),
    ("positional_encoding", "exponent i/d instead of 2i/d", pe_i_not_2i),
    ("positional_encoding", "exponent from each column's own index: the cosine of a pair uses (2i+1)/d", pe_column_exponent),
    ("positional_encoding", "sin and cos swapped: cosines in the even columns", pe_sin_cos_swapped),
    ("positional_encoding", "sign lost in exp(-2i ln(10000)/d): frequencies grow instead of shrink", pe_exp_sign),
    ("positional_encoding", "returns float64 (built with NumPy)", pe_float64),
    ("positional_encoding", "positions start at 1 instead of 0", pe_positions_from_one),
    ("positional_encoding", "adds a batch axis: (1, max_len, d_model)", pe_batch_axis),
    ("positional_encoding", "floor division in the exponent: every pair gets the same frequency", pe_loop_floor_division),
]

CORRECT = [
    ("split_heads", "chunk the features into h blocks and stack them on axis 1", split_chunk_stack),
    ("split_heads", "reshape with -1 and permute(0, 2, 1, 3)", split_reshape_permute),
    ("split_heads", "unflatten the last axis, then transpose", split_unflatten),
    ("merge_heads", "unbind the heads and concatenate them on the last axis", merge_cat_unbind),
    ("merge_heads", "permute(0, 2, 1, 3) then flatten(2)", merge_permute_flatten),
    ("merge_heads", "transpose, contiguous, view", merge_contiguous_view),
    ("multi_head_attention", "unflatten + einsum + the course's masked_softmax", MHAEinsum),
    ("multi_head_attention", "a loop over the heads on feature slices, concatenated", MHAHeadLoop),
    ("multi_head_attention", "own split and merge (reshape/permute) around the course's attention", MHAOwnSplitMerge),
    ("positional_encoding", "exp/log frequencies (Annotated Transformer form)", pe_exp_log),
    ("positional_encoding", "stack sin and cos on a last axis and flatten", pe_stack_flatten),
    ("positional_encoding", "NumPy float64 with 2i = j - j % 2, cast to float32", pe_numpy_cast),
]
