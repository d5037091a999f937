"""Typical learner mistakes (and a few differently written right answers) for lesson 08, multi-head
attention and positional encoding.

Exercises, as the checks call them:
    split_heads            split_heads(x, num_heads): (B, T, d_model) -> (B, num_heads, T, d_head),
                           head i taking the contiguous features i*d_head .. (i+1)*d_head - 1
    merge_heads            merge_heads(x): (B, num_heads, T, d_head) -> (B, T, num_heads * d_head), the inverse
    multi_head_attention   an nn.Module class MyMultiHeadAttention(d_model, num_heads) with layers w_q, w_k, w_v,
                           w_o (nn.Linear(d_model, d_model)); forward(query, key, value, mask=None) ->
                           (B, T_q, d_model), per-head weights (B, num_heads, T_q, T_k) kept on
                           self.attn_weights; mask bool, True = may attend, broadcast over the heads
    positional_encoding    positional_encoding(max_len, d_model) -> (max_len, d_model) float32, interleaved:
                           PE[pos, 2i] = sin(pos / 10000^(2i/d)), PE[pos, 2i+1] = cos(pos / 10000^(2i/d))

SLIPS: each answer has exactly one thing wrong, marked with a `# slip:` comment on that line.
CORRECT: right answers written differently from the reference solution.
"""
import math

import numpy as np
import torch
import torch.nn as nn

from course_utils.attention import merge_heads as ref_merge_heads
from course_utils.attention import scaled_dot_product_attention
from course_utils.attention import split_heads as ref_split_heads

# The notebook's globals (its running example), which some slips read by mistake.
B, T, d_model, num_heads = 2, 5, 12, 3


# ---------------------------------------------------------------------------------------------------
# Exercise 1a: split_heads
# ---------------------------------------------------------------------------------------------------

def split_heads_no_transpose(x, num_heads):
    B, T, d_model = x.shape
    return x.view(B, T, num_heads, d_model // num_heads)  # slip: forgets to move the head axis forward


def split_heads_view_only(x, num_heads):
    B, T, d_model = x.shape
    return x.view(B, num_heads, T, d_model // num_heads)  # slip: reshapes straight to (B, h, T, d_head), no transpose


def split_heads_transpose_then_reshape(x, num_heads):
    B, T, d_model = x.shape
    return x.transpose(1, 2).reshape(B, num_heads, T, d_model // num_heads)  # slip: transposes before reshaping


def split_heads_strided(x, num_heads):
    B, T, d_model = x.shape
    return x.view(B, T, d_model // num_heads, num_heads).permute(0, 3, 1, 2)  # slip: head i gets features i, i+h, ...


def split_heads_swapped_sizes(x, num_heads):
    B, T, d_model = x.shape
    return x.view(B, T, d_model // num_heads, num_heads).transpose(1, 2)  # slip: h and d_head swapped in the view


def split_heads_keys_layout(x, num_heads):
    B, T, d_model = x.shape
    return x.view(B, T, num_heads, d_model // num_heads).permute(0, 2, 3, 1)  # slip: (B, h, d_head, T), time last


def split_heads_float_division(x, num_heads):
    B, T, d_model = x.shape
    return x.view(B, T, num_heads, d_model / num_heads).transpose(1, 2)  # slip: d_model / num_heads is a float


def split_heads_global_d_model(x, num_heads):
    B, T, _ = x.shape
    return x.view(B, T, num_heads, d_model // num_heads).transpose(1, 2)  # slip: uses the notebook's global d_model


def split_heads_cat_chunks(x, num_heads):
    return torch.cat(x.chunk(num_heads, dim=-1), dim=1)  # slip: cat instead of stack: (B, h*T, d_head), no head axis


def split_heads_chunk_stack(x, num_heads):
    return torch.stack(x.chunk(num_heads, dim=-1), dim=1)


def split_heads_unflatten_permute(x, num_heads):
    return x.unflatten(-1, (num_heads, -1)).permute(0, 2, 1, 3)


def split_heads_reshape_swapaxes(x, num_heads):
    b, t, d = x.size()
    return x.reshape(b, t, num_heads, d // num_heads).swapaxes(1, 2).contiguous()


# ---------------------------------------------------------------------------------------------------
# Exercise 1b: merge_heads
# ---------------------------------------------------------------------------------------------------

def merge_heads_view_after_transpose(x):
    B, h, T, d_head = x.shape
    return x.transpose(1, 2).view(B, T, h * d_head)  # slip: view on the non-contiguous transpose (no reshape/contiguous)


def merge_heads_no_transpose(x):
    B, h, T, d_head = x.shape
    return x.reshape(B, T, h * d_head)  # slip: reshapes without moving the head axis back


def merge_heads_strided(x):
    B, h, T, d_head = x.shape
    return x.permute(0, 2, 3, 1).reshape(B, T, h * d_head)  # slip: features ordered dimension-major, heads interleaved


def merge_heads_sum(x):
    return x.sum(dim=1)  # slip: adds the heads instead of concatenating them


def merge_heads_cat_time(x):
    return torch.cat(x.unbind(dim=1), dim=1)  # slip: concatenates along time: (B, h*T, d_head)


def merge_heads_wrong_unpack(x):
    B, T, h, d_head = x.shape  # slip: unpacks the shape in the split-before-transpose order (B, T, h, d_head)
    return x.transpose(1, 2).reshape(B, T, h * d_head)


def merge_heads_last_axes(x):
    B, h, T, d_head = x.shape
    return x.transpose(-1, -2).reshape(B, T, h * d_head)  # slip: transposes the last two axes, not heads and time


def merge_heads_global_num_heads(x):
    B, _, T, d_head = x.shape
    return x.transpose(1, 2).reshape(B, T, num_heads * d_head)  # slip: uses the notebook's global num_heads


def merge_heads_permute_flatten(x):
    return x.permute(0, 2, 1, 3).flatten(start_dim=2)


def merge_heads_cat_unbind(x):
    return torch.cat(x.unbind(dim=1), dim=-1)


def merge_heads_contiguous_view(x):
    b = x.size(0)
    t = x.size(2)
    return x.transpose(1, 2).contiguous().view(b, t, -1)


# ---------------------------------------------------------------------------------------------------
# Exercise 2: multi-head attention
# ---------------------------------------------------------------------------------------------------

class _MHABase(nn.Module):
    """The given part of the exercise (the __init__ of the notebook), shared by the answers below."""

    def __init__(self, d_model, num_heads):
        super().__init__()
        assert d_model % num_heads == 0, "d_model must be divisible by num_heads"
        self.num_heads, self.d_head = num_heads, d_model // num_heads
        self.w_q = nn.Linear(d_model, d_model)   # W_Q^1 ... W_Q^h side by side
        self.w_k = nn.Linear(d_model, d_model)
        self.w_v = nn.Linear(d_model, d_model)
        self.w_o = nn.Linear(d_model, d_model)   # W_O
        self.attn_weights = None


class MHANoOutputProjection(_MHABase):
    def forward(self, query, key, value, mask=None):
        q = ref_split_heads(self.w_q(query), self.num_heads)
        k = ref_split_heads(self.w_k(key), self.num_heads)
        v = ref_split_heads(self.w_v(value), self.num_heads)
        out, self.attn_weights = scaled_dot_product_attention(q, k, v, mask, need_weights=True)
        return ref_merge_heads(out)  # slip: forgets W_O after merging the heads


class MHAKeysFromQuery(_MHABase):
    def forward(self, query, key, value, mask=None):
        q = ref_split_heads(self.w_q(query), self.num_heads)
        k = ref_split_heads(self.w_k(query), self.num_heads)  # slip: projects the query as keys (self-attention only)
        v = ref_split_heads(self.w_v(value), self.num_heads)
        out, self.attn_weights = scaled_dot_product_attention(q, k, v, mask, need_weights=True)
        return self.w_o(ref_merge_heads(out))


class MHAValueWithWk(_MHABase):
    def forward(self, query, key, value, mask=None):
        q = ref_split_heads(self.w_q(query), self.num_heads)
        k = ref_split_heads(self.w_k(key), self.num_heads)
        v = ref_split_heads(self.w_k(value), self.num_heads)  # slip: copy-paste, the values go through w_k
        out, self.attn_weights = scaled_dot_product_attention(q, k, v, mask, need_weights=True)
        return self.w_o(ref_merge_heads(out))


class MHASingleHead(_MHABase):
    def forward(self, query, key, value, mask=None):
        q, k, v = self.w_q(query), self.w_k(key), self.w_v(value)  # slip: never splits the heads: one full-width head
        out, self.attn_weights = scaled_dot_product_attention(q, k, v, mask, need_weights=True)
        return self.w_o(out)


class MHASplitWithoutTranspose(_MHABase):
    def forward(self, query, key, value, mask=None):
        B, T_q, d_model = query.shape
        T_k = key.size(1)
        q = self.w_q(query).reshape(B, self.num_heads, T_q, self.d_head)  # slip: reshape to (B, h, T, d_head), no transpose
        k = self.w_k(key).reshape(B, self.num_heads, T_k, self.d_head)
        v = self.w_v(value).reshape(B, self.num_heads, T_k, self.d_head)
        out, self.attn_weights = scaled_dot_product_attention(q, k, v, mask, need_weights=True)
        return self.w_o(out.reshape(B, T_q, d_model))


class MHAMaskInverted(_MHABase):
    def forward(self, query, key, value, mask=None):
        q = ref_split_heads(self.w_q(query), self.num_heads)
        k = ref_split_heads(self.w_k(key), self.num_heads)
        v = ref_split_heads(self.w_v(value), self.num_heads)
        if mask is not None:
            mask = ~mask  # slip: inverts the mask (PyTorch's True = hide convention)
        out, self.attn_weights = scaled_dot_product_attention(q, k, v, mask, need_weights=True)
        return self.w_o(ref_merge_heads(out))


class MHAAveragedWeights(_MHABase):
    def forward(self, query, key, value, mask=None):
        q = ref_split_heads(self.w_q(query), self.num_heads)
        k = ref_split_heads(self.w_k(key), self.num_heads)
        v = ref_split_heads(self.w_v(value), self.num_heads)
        out, weights = scaled_dot_product_attention(q, k, v, mask, need_weights=True)
        self.attn_weights = weights.mean(dim=1)  # slip: keeps the weights averaged over the heads, (B, T_q, T_k)
        return self.w_o(ref_merge_heads(out))


class MHADoubleScaling(_MHABase):
    def forward(self, query, key, value, mask=None):
        q = ref_split_heads(self.w_q(query), self.num_heads) / math.sqrt(self.d_head)  # slip: scales q, and sdpa scales again
        k = ref_split_heads(self.w_k(key), self.num_heads)
        v = ref_split_heads(self.w_v(value), self.num_heads)
        out, self.attn_weights = scaled_dot_product_attention(q, k, v, mask, need_weights=True)
        return self.w_o(ref_merge_heads(out))


class MHAScaleByDModel(_MHABase):
    def forward(self, query, key, value, mask=None):
        q = ref_split_heads(self.w_q(query), self.num_heads)
        k = ref_split_heads(self.w_k(key), self.num_heads)
        v = ref_split_heads(self.w_v(value), self.num_heads)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.num_heads * self.d_head)  # slip: sqrt(d_model), not sqrt(d_head)
        if mask is not None:
            has_key = mask.any(dim=-1, keepdim=True)
            scores = scores.masked_fill(~(mask | ~has_key), float("-inf"))
            weights = scores.softmax(dim=-1) * has_key
        else:
            weights = scores.softmax(dim=-1)
        self.attn_weights = weights
        return self.w_o(ref_merge_heads(weights @ v))


class MHAHeadsAndDheadSwapped(_MHABase):
    def forward(self, query, key, value, mask=None):
        q = ref_split_heads(self.w_q(query), self.d_head)  # slip: splits into d_head heads of num_heads features
        k = ref_split_heads(self.w_k(key), self.d_head)
        v = ref_split_heads(self.w_v(value), self.d_head)
        out, self.attn_weights = scaled_dot_product_attention(q, k, v, mask, need_weights=True)
        return self.w_o(ref_merge_heads(out))


class MHAChunkStack(_MHABase):
    """Own split (chunk + stack) and merge (unbind + cat), the course's attention."""

    def forward(self, query, key, value, mask=None):
        def split(t):
            return torch.stack(t.chunk(self.num_heads, dim=-1), dim=1)

        q, k, v = split(self.w_q(query)), split(self.w_k(key)), split(self.w_v(value))
        out, weights = scaled_dot_product_attention(q, k, v, mask=mask, need_weights=True)
        self.attn_weights = weights
        return self.w_o(torch.cat(out.unbind(dim=1), dim=-1))


class MHAEinsumOwnAttention(_MHABase):
    """Attention written out with einsum; fully masked queries get zero weights, as in lesson 07."""

    def forward(self, query, key, value, mask=None):
        b, t_q, d = query.shape
        t_k = key.size(1)
        q = self.w_q(query).view(b, t_q, self.num_heads, self.d_head)
        k = self.w_k(key).view(b, t_k, self.num_heads, self.d_head)
        v = self.w_v(value).view(b, t_k, self.num_heads, self.d_head)
        scores = torch.einsum("bqhd,bkhd->bhqk", q, k) * self.d_head ** -0.5
        if mask is not None:
            mask = torch.broadcast_to(mask, scores.shape)
            scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
            weights = scores.softmax(dim=-1) * mask.any(dim=-1, keepdim=True)
        else:
            weights = scores.softmax(dim=-1)
        self.attn_weights = weights
        out = torch.einsum("bhqk,bkhd->bqhd", weights, v).reshape(b, t_q, d)
        return self.w_o(out)


class MHAPerHeadLoop(_MHABase):
    """One head at a time with the head's rows of each projection, outputs concatenated, then W_O."""

    def forward(self, query, key, value, mask=None):
        q_all, k_all, v_all = self.w_q(query), self.w_k(key), self.w_v(value)
        b, t_q, t_k = query.size(0), query.size(1), key.size(1)
        if mask is not None:
            mask = torch.broadcast_to(mask, (b, self.num_heads, t_q, t_k))
        outs, weights = [], []
        for i in range(self.num_heads):
            cols = slice(i * self.d_head, (i + 1) * self.d_head)
            o, w = scaled_dot_product_attention(q_all[..., cols], k_all[..., cols], v_all[..., cols],
                                                None if mask is None else mask[:, i], need_weights=True)
            outs.append(o)
            weights.append(w)
        self.attn_weights = torch.stack(weights, dim=1)
        return self.w_o(torch.cat(outs, dim=-1))


# ---------------------------------------------------------------------------------------------------
# Exercise 3: the sinusoidal positional encoding (interleaved)
# ---------------------------------------------------------------------------------------------------

def _angles(max_len, d_model):
    pos = torch.arange(max_len, dtype=torch.float32)[:, None]
    two_i = torch.arange(0, d_model, 2, dtype=torch.float32)
    return pos / 10000.0 ** (two_i / d_model)


def pe_sin_cos_swapped(max_len, d_model):
    angle = _angles(max_len, d_model)
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2] = torch.cos(angle)  # slip: cosines in the even columns, sines in the odd ones
    pe[:, 1::2] = torch.sin(angle)
    return pe


def pe_concatenated(max_len, d_model):
    angle = _angles(max_len, d_model)
    return torch.cat([torch.sin(angle), torch.cos(angle)], dim=-1)  # slip: [sin | cos] layout, not interleaved


def pe_exponent_i(max_len, d_model):
    pos = torch.arange(max_len, dtype=torch.float32)[:, None]
    i = torch.arange(d_model // 2, dtype=torch.float32)
    angle = pos / 10000.0 ** (i / d_model)  # slip: exponent i/d instead of 2i/d
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle)
    return pe


def pe_exponent_per_column(max_len, d_model):
    pos = torch.arange(max_len, dtype=torch.float32)[:, None]
    j = torch.arange(d_model, dtype=torch.float32)
    angle = pos / 10000.0 ** (j / d_model)  # slip: exponent j/d of the column: the cosine 2i+1 gets its own frequency
    pe = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle[:, 1::2])
    return pe


def pe_exp_log_sign(max_len, d_model):
    pos = torch.arange(max_len, dtype=torch.float32)[:, None]
    div_term = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * (math.log(10000.0) / d_model))  # slip: no minus sign
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2] = torch.sin(pos * div_term)
    pe[:, 1::2] = torch.cos(pos * div_term)
    return pe


def pe_positions_from_one(max_len, d_model):
    pos = torch.arange(1, max_len + 1, dtype=torch.float32)[:, None]  # slip: positions start at 1
    two_i = torch.arange(0, d_model, 2, dtype=torch.float32)
    angle = pos / 10000.0 ** (two_i / d_model)
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle)
    return pe


def pe_loop_double_index(max_len, d_model):
    pe = torch.zeros(max_len, d_model)
    for pos in range(max_len):
        for i in range(0, d_model, 2):
            angle = pos / 10000 ** ((2 * i) / d_model)  # slip: i already steps by 2, so 2*i doubles the exponent
            pe[pos, i] = math.sin(angle)
            pe[pos, i + 1] = math.cos(angle)
    return pe


def pe_numpy_float64(max_len, d_model):
    pos = np.arange(max_len)[:, None]
    two_i = np.arange(0, d_model, 2)
    angle = pos / 10000.0 ** (two_i / d_model)
    pe = np.zeros((max_len, d_model))
    pe[:, 0::2] = np.sin(angle)
    pe[:, 1::2] = np.cos(angle)
    return torch.from_numpy(pe)  # slip: returns float64 (NumPy's default), not float32


def pe_transposed(max_len, d_model):
    pos = torch.arange(max_len, dtype=torch.float32)[None, :]
    two_i = torch.arange(0, d_model, 2, dtype=torch.float32)[:, None]
    angle = pos / 10000.0 ** (two_i / d_model)
    pe = torch.zeros(d_model, max_len)  # slip: builds (d_model, max_len), dimensions in the rows
    pe[0::2] = torch.sin(angle)
    pe[1::2] = torch.cos(angle)
    return pe


def pe_batch_axis(max_len, d_model):
    angle = _angles(max_len, d_model)
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle)
    return pe.unsqueeze(0)  # slip: adds a batch axis as in the PositionalEncoding buffer: (1, max_len, d_model)


def pe_stack_flatten(max_len, d_model):
    pos = torch.arange(max_len, dtype=torch.float32).unsqueeze(1)
    freq_exp = torch.arange(0, d_model, 2, dtype=torch.float32) / d_model
    angle = pos / torch.pow(10000.0, freq_exp)
    return torch.stack([angle.sin(), angle.cos()], dim=-1).reshape(max_len, d_model)


def pe_exp_log(max_len, d_model):
    position = torch.arange(max_len).float().unsqueeze(1)
    div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term)
    return pe


def pe_column_loop(max_len, d_model):
    pos = torch.arange(max_len, dtype=torch.float32)
    pe = torch.empty(max_len, d_model)
    for i in range(d_model // 2):
        angle = pos / 10000.0 ** (2 * i / d_model)
        pe[:, 2 * i] = torch.sin(angle)
        pe[:, 2 * i + 1] = torch.cos(angle)
    return pe


SLIPS = [
    ("split_heads", "reshapes to (B, T, h, d_head) but forgets to move the head axis forward", split_heads_no_transpose),
    ("split_heads", "views straight to (B, h, T, d_head) without a transpose: heads cut across positions",
     split_heads_view_only),
    ("split_heads", "transposes (B, T, d) to (B, d, T) first, then reshapes to (B, h, T, d_head)",
     split_heads_transpose_then_reshape),
    ("split_heads", "views as (B, T, d_head, h): head i gets the strided features i, i+h, i+2h, ... instead of a "
     "contiguous block", split_heads_strided),
    ("split_heads", "swaps h and d_head in the view: shape (B, d_head, T, h)", split_heads_swapped_sizes),
    ("split_heads", "permutes to (B, h, d_head, T), time last", split_heads_keys_layout),
    ("split_heads", "computes d_head with / instead of //: a float size, view raises", split_heads_float_division),
    ("split_heads", "reads d_model from the notebook's globals instead of x.shape", split_heads_global_d_model),
    ("split_heads", "chunks the features and concatenates on axis 1 instead of stacking: (B, h*T, d_head)",
     split_heads_cat_chunks),

    ("merge_heads", "view after transpose without contiguous: raises on the non-contiguous tensor",
     merge_heads_view_after_transpose),
    ("merge_heads", "reshapes to (B, T, h*d_head) without moving the head axis back", merge_heads_no_transpose),
    ("merge_heads", "permutes to (B, T, d_head, h) before flattening: features interleaved across heads",
     merge_heads_strided),
    ("merge_heads", "sums the heads instead of concatenating them: (B, T, d_head)", merge_heads_sum),
    ("merge_heads", "concatenates the heads along time: (B, h*T, d_head)", merge_heads_cat_time),
    ("merge_heads", "unpacks x.shape as (B, T, h, d_head): T and h swapped in the output shape",
     merge_heads_wrong_unpack),
    ("merge_heads", "transposes the last two axes instead of heads and time", merge_heads_last_axes),
    ("merge_heads", "uses the notebook's global num_heads instead of x's head count", merge_heads_global_num_heads),

    ("multi_head_attention", "forgets the output projection W_O", MHANoOutputProjection),
    ("multi_head_attention", "computes the keys from the query: right only for self-attention", MHAKeysFromQuery),
    ("multi_head_attention", "projects the values with w_k instead of w_v", MHAValueWithWk),
    ("multi_head_attention", "never splits the heads: one attention over all d_model features", MHASingleHead),
    ("multi_head_attention", "splits the heads with a reshape to (B, h, T, d_head) and merges with a reshape, "
     "no transposes", MHASplitWithoutTranspose),
    ("multi_head_attention", "inverts the mask before the attention (PyTorch's True = hidden convention)",
     MHAMaskInverted),
    ("multi_head_attention", "keeps the weights averaged over the heads, (B, T_q, T_k), on attn_weights",
     MHAAveragedWeights),
    ("multi_head_attention", "divides q by sqrt(d_head) before the attention, which scales again", MHADoubleScaling),
    ("multi_head_attention", "writes the attention out and divides the scores by sqrt(d_model) instead of "
     "sqrt(d_head)", MHAScaleByDModel),
    ("multi_head_attention", "passes d_head as the number of heads to split_heads", MHAHeadsAndDheadSwapped),

    ("positional_encoding", "sin and cos swapped: cosines in the even columns", pe_sin_cos_swapped),
    ("positional_encoding", "concatenated [sin | cos] layout instead of interleaved", pe_concatenated),
    ("positional_encoding", "exponent i/d_model instead of 2i/d_model", pe_exponent_i),
    ("positional_encoding", "exponent uses the column index j for every column: the cosine of pair i uses "
     "(2i+1)/d_model", pe_exponent_per_column),
    ("positional_encoding", "exp(2i log(10000)/d) without the minus sign: multiplies the position by "
     "10000^(2i/d) instead of dividing", pe_exp_log_sign),
    ("positional_encoding", "positions counted from 1 instead of 0", pe_positions_from_one),
    ("positional_encoding", "loop with i stepping by 2 and the exponent 2*i/d: the exponent is doubled",
     pe_loop_double_index),
    ("positional_encoding", "built with NumPy and returned as float64", pe_numpy_float64),
    ("positional_encoding", "returns the (d_model, max_len) transpose", pe_transposed),
    ("positional_encoding", "returns (1, max_len, d_model) with a batch axis", pe_batch_axis),
]

CORRECT = [
    ("split_heads", "chunk the features into h blocks and stack them on axis 1", split_heads_chunk_stack),
    ("split_heads", "unflatten the last axis into (h, d_head), then permute", split_heads_unflatten_permute),
    ("split_heads", "reshape, swapaxes, contiguous", split_heads_reshape_swapaxes),

    ("merge_heads", "permute back, flatten the last two axes", merge_heads_permute_flatten),
    ("merge_heads", "unbind the heads and concatenate them on the features", merge_heads_cat_unbind),
    ("merge_heads", "transpose, contiguous, view with -1", merge_heads_contiguous_view),

    ("multi_head_attention", "own split (chunk/stack) and merge (unbind/cat) around the course's attention",
     MHAChunkStack),
    ("multi_head_attention", "attention written with einsum on (B, T, h, d_head), fully masked queries zeroed",
     MHAEinsumOwnAttention),
    ("multi_head_attention", "a loop over the heads on column slices of the projections, weights stacked",
     MHAPerHeadLoop),

    ("positional_encoding", "stack sin and cos on a last axis and flatten it: interleaved", pe_stack_flatten),
    ("positional_encoding", "the PyTorch tutorial's exp(-2i log(10000)/d) frequencies", pe_exp_log),
    ("positional_encoding", "loop over the column pairs", pe_column_loop),
]
