"""Self-attention and multi-head attention (lessons 07 and 08).

    scaled_dot_product_attention(q, k, v, mask)   softmax(q kᵀ / √d_k) v, optional boolean mask
    split_heads(x, h) / merge_heads(x)            (B, T, d_model) <-> (B, h, T, d_head)
    MultiHeadAttention(d_model, num_heads)        equal to torch.nn.MultiheadAttention(batch_first=True)
    sinusoidal_positional_encoding, PositionalEncoding, LearnedPositionalEncoding: lesson 08's positions,
                                                  defined in course_utils.positions, importable from here

The options of later lessons live where those lessons look: decoding one token at a time with a
key/value cache (lesson 10) in `course_utils.kv_cache`, which reuses `MultiHeadAttention.attend`; a GPT's
masked self-attention with rotary positions and grouped-query heads (lesson 12) in
`course_utils.gpt_attention`; FlashAttention and the fused kernels (lesson 13) in
`course_utils.efficient_attention`.

Masks (`course_utils.masks`: causal_mask, padding_mask) are boolean, True = may attend (keep), False =
masked out: the convention of `torch.nn.functional.scaled_dot_product_attention`. A query whose every
key is masked gets zero weights and a zero output, never NaN.

Without `need_weights` the attention goes through torch's fused kernel (on a GPU, with a boolean mask,
the memory-efficient one: the flash backend takes no mask; lesson 13 shows which kernel runs), except
on a CPU in bf16/fp16 or for a single query, where the explicit formula is faster; with
`need_weights=True` it is computed step by step and the weights are returned (for plots).
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from .masks import check_mask, masked_softmax
from .positions import (  # noqa: F401 - lesson 08 imports them from here too
    LearnedPositionalEncoding,
    PositionalEncoding,
    sinusoidal_positional_encoding,
)

__all__ = ["scaled_dot_product_attention", "attention_weights", "split_heads", "merge_heads", "MultiHeadAttention",
           "store_attention_weights", "sinusoidal_positional_encoding", "PositionalEncoding",
           "LearnedPositionalEncoding"]

_TORCH_VERSION = tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2])
# From torch 2.5 on, the CPU kernels return zeros (and finite gradients) for fully masked rows
# (the "safe softmax" change, see pytorch/pytorch#141128; checked here on 2.13). Elsewhere we guard.
_CPU_SDPA_HANDLES_EMPTY_ROWS = _TORCH_VERSION >= (2, 5)


def _check_tensors(**named):
    """Each argument is a torch tensor; a NumPy array (or a list) is named, with the fix."""
    for name, x in named.items():
        if not torch.is_tensor(x):
            raise TypeError(f"{name} must be a torch tensor, got {type(x).__name__}: convert it with "
                            f"torch.as_tensor({name}, dtype=torch.float32)")


def _check_num_heads(num_heads, d_model):
    if not isinstance(num_heads, int) or num_heads < 1:
        raise ValueError(f"num_heads must be a positive integer, got {num_heads!r}")
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} must be divisible by num_heads={num_heads}")


def _check_position_mask(mask, B, T_q, T_k):
    """A 2-D mask is (T_q, T_k), the same for every sequence. When the batch size equals T_q, a (B, T_k)
    padding mask has that shape too and would be read as positions: refuse it unless it is a pattern of
    positions (lower-triangular like a causal mask, or symmetric like a window)."""
    if not torch.is_tensor(mask) or mask.dim() != 2:
        return
    if tuple(mask.shape) != (T_q, T_k):
        raise ValueError(f"a 2-D mask must be (T_q, T_k) = ({T_q}, {T_k}), the same for every sequence, got "
                         f"{tuple(mask.shape)}; a padding mask is (B, 1, 1, T_k): padding_mask(tokens, pad_id)")
    square = T_q == T_k
    if B == T_q and B > 1 and not (square and (torch.equal(mask, mask.tril()) or torch.equal(mask, mask.T))):
        raise ValueError(f"a 2-D mask of shape {tuple(mask.shape)} is ambiguous here: the batch size is also "
                         f"{B}. Pass a padding mask as (B, 1, 1, T_k) (padding_mask(tokens, pad_id), or "
                         "mask[:, None, None, :]) and a mask over positions as mask[None, None] (1, 1, T_q, T_k)")


def _check_qkv(q, k, v):
    _check_tensors(q=q, k=k, v=v)
    if q.dim() < 2 or k.dim() != q.dim() or v.dim() != q.dim():
        raise ValueError(f"q, k, v must have the same number of dimensions (B, ..., T, d), got shapes "
                         f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q and k must have the same last size d_k, got {q.shape[-1]} and {k.shape[-1]}")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(f"k and v must have the same length T_k, got {k.shape[-2]} and {v.shape[-2]}")


def attention_weights(q, k, mask=None):
    """softmax(q kᵀ / √d_k) over the keys, masked positions set to 0; rows with no key allowed -> all 0.

    q: (B, ..., T_q, d_k), k: (B, ..., T_k, d_k), mask: bool, broadcastable to (B, ..., T_q, T_k).
    The softmax runs in float32 (also under bf16 autocast); the weights come back in q's dtype.
    """
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (B, ..., T_q, T_k)
    return masked_softmax(scores, mask)


def _fused_kernel_is_slower(q):
    """On a CPU, torch's fused attention kernel (2.13) is slower than the explicit formula in bf16 or
    fp16 (4-6x at Multi30k's lengths, forward and backward, up to T = 256), and for ONE query (a
    decoding step: 2-7x), measured on torch 2.13 at the course's sizes."""
    return q.device.type == "cpu" and (q.dtype in (torch.bfloat16, torch.float16) or q.size(-2) == 1)


def scaled_dot_product_attention(q, k, v, mask=None, dropout_p=0.0, need_weights=False):
    """Attention(Q, K, V) = softmax(Q Kᵀ / √d_k) V.

    q: (B, ..., T_q, d_k), k: (B, ..., T_k, d_k), v: (B, ..., T_k, d_v)
    mask: bool, broadcastable to (B, ..., T_q, T_k); True = may attend, False = masked out.
    dropout_p: dropout on the weights (pass 0.0 at evaluation time).
    Returns out (B, ..., T_q, d_v), or (out, weights (B, ..., T_q, T_k)) when need_weights.
    """
    _check_qkv(q, k, v)
    if need_weights or _fused_kernel_is_slower(q):
        weights = attention_weights(q, k, mask)
        dropped = F.dropout(weights, dropout_p) if dropout_p > 0 else weights
        out = dropped @ v
        return (out, weights) if need_weights else out
    scores_shape = q.shape[:-1] + k.shape[-2:-1]
    mask = check_mask(mask, scores_shape)
    if mask is None or (_CPU_SDPA_HANDLES_EMPTY_ROWS and q.device.type == "cpu"):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p)
    has_key = mask.any(dim=-1, keepdim=True)  # guard fully masked rows on kernels that give NaN there
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask | ~has_key, dropout_p=dropout_p)
    return out * has_key


def split_heads(x, num_heads):
    """(B, T, d_model) -> (B, num_heads, T, d_head): head i gets features i*d_head ... (i+1)*d_head-1."""
    _check_tensors(x=x)
    if x.dim() != 3:
        raise ValueError(f"split_heads takes x of shape (B, T, d_model), got {x.dim()}-D shape {tuple(x.shape)}"
                         + (" (already split into heads?)" if x.dim() == 4 else ""))
    B, T, d_model = x.shape
    _check_num_heads(num_heads, d_model)
    return x.view(B, T, num_heads, d_model // num_heads).transpose(1, 2)


def merge_heads(x):
    """(B, num_heads, T, d_head) -> (B, T, num_heads * d_head): the inverse of split_heads."""
    _check_tensors(x=x)
    if x.dim() != 4:
        raise ValueError(f"merge_heads takes x of shape (B, num_heads, T, d_head), got {x.dim()}-D shape "
                         f"{tuple(x.shape)}" + (" (not split into heads yet?)" if x.dim() == 3 else ""))
    B, h, T, d_head = x.shape
    return x.transpose(1, 2).reshape(B, T, h * d_head)


def projection_rows(linear, start, stop):
    """(weight, bias) of rows start .. stop-1 of a Linear (bias None when it has none): W_Q, W_K or W_V
    out of the stacked [W_Q; W_K; W_V]."""
    return linear.weight[start:stop], None if linear.bias is None else linear.bias[start:stop]


class MultiHeadAttention(nn.Module):
    """h heads of scaled dot-product attention on d_model/h features each, concatenated, then W_O.

    MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W_O,  head_i = Attention(Q W_Q^i, K W_K^i, V W_V^i)

    W_Q, W_K, W_V are stacked in one Linear (`in_proj`, rows [W_Q; W_K; W_V]) as in
    torch.nn.MultiheadAttention, whose weights `load_from_torch` copies; with the same weights
    both give the same outputs. The last weights (B, h, T_q, T_k) are kept on `self.attn_weights`
    when `need_weights=True` or `self.store_weights = True` (that path does not use the fused kernel).
    """

    def __init__(self, d_model, num_heads, dropout=0.0, bias=True):
        super().__init__()
        _check_num_heads(num_heads, d_model)
        self.d_model, self.num_heads, self.d_head = d_model, num_heads, d_model // num_heads
        self.dropout = dropout                                      # on the attention weights, in training
        self.in_proj = nn.Linear(d_model, 3 * d_model, bias=bias)   # [W_Q; W_K; W_V]
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)      # W_O
        self.store_weights, self.attn_weights = False, None        # for plots
        init_like_torch(self)

    def forward(self, query, key, value, mask=None, need_weights=False):
        """query (B, T_q, d_model), key/value (B, T_k, d_model); mask bool, broadcastable to
        (B, h, T_q, T_k) (a (B, T_q, T_k) mask is applied to every head). Returns (B, T_q, d_model)."""
        mask = _check_inputs(query, key, value, mask, self.d_model)
        q, k, v = self.project(query, key, value)                  # each (B, h, T, d_head)
        return self.attend(q, k, v, mask, need_weights)

    def project(self, query, key, value):
        """Q W_Q, K W_K, V W_V, each split into h heads: (B, h, T, d_head)."""
        d = self.d_model
        if query is key and key is value:                          # self-attention: one matrix product
            q, k, v = self.in_proj(query).split([d, d, d], dim=-1)
        elif key is value:                                         # cross-attention: K and V in one
            q = F.linear(query, *projection_rows(self.in_proj, 0, d))
            k, v = F.linear(key, *projection_rows(self.in_proj, d, 3 * d)).chunk(2, dim=-1)
        else:
            q, k, v = (F.linear(x, *projection_rows(self.in_proj, i * d, (i + 1) * d))
                       for i, x in enumerate((query, key, value)))
        return split_heads(q, self.num_heads), split_heads(k, self.num_heads), split_heads(v, self.num_heads)

    def attend(self, q, k, v, mask=None, need_weights=False):
        """Heads q (B, h, T_q, d_head), k and v (B, h, T_k, d_head): attention in every head, the heads
        concatenated, then W_O -> (B, T_q, d_model)."""
        dropout_p = self.dropout if self.training else 0.0
        if need_weights or self.store_weights:                     # step by step, the weights kept
            out, weights = scaled_dot_product_attention(q, k, v, mask, dropout_p, need_weights=True)
            self.attn_weights = weights.detach()                    # (B, h, T_q, T_k)
        else:
            out = scaled_dot_product_attention(q, k, v, mask, dropout_p)
        return self.out_proj(merge_heads(out))                      # (B, T_q, d_model)

    @torch.no_grad()
    def load_from_torch(self, mha):
        """Copy the weights of a torch.nn.MultiheadAttention (same d_model, heads, bias); returns self."""
        if mha.embed_dim != self.d_model or mha.num_heads != self.num_heads:
            raise ValueError(f"torch module has d_model={mha.embed_dim}, num_heads={mha.num_heads}; "
                             f"this one has {self.d_model}, {self.num_heads}")
        if mha.in_proj_weight is None:
            raise ValueError("torch module uses separate q/k/v sizes (kdim/vdim); only the packed form is supported")
        self.in_proj.weight.copy_(mha.in_proj_weight)
        self.out_proj.weight.copy_(mha.out_proj.weight)
        if self.in_proj.bias is not None:
            self.in_proj.bias.copy_(mha.in_proj_bias)
            self.out_proj.bias.copy_(mha.out_proj.bias)
        return self

    def extra_repr(self):
        return f"d_model={self.d_model}, num_heads={self.num_heads}, d_head={self.d_head}, dropout={self.dropout}"


def init_like_torch(attn):
    """The initialisation of torch.nn.MultiheadAttention: W_Q, W_K, W_V Xavier-uniform, biases zero (W_O
    keeps nn.Linear's)."""
    nn.init.xavier_uniform_(attn.in_proj.weight)
    if attn.in_proj.bias is not None:
        nn.init.zeros_(attn.in_proj.bias)
        nn.init.zeros_(attn.out_proj.bias)


def _check_inputs(query, key, value, mask, d_model):
    """Bad input named; returns the mask with a head axis where it had none ((B, T_q, T_k) -> (B, 1, T_q, T_k))."""
    _check_tensors(query=query, key=key, value=value)
    if query.dim() != 3 or query.size(-1) != d_model:
        raise ValueError(f"query must be (B, T_q, d_model={d_model}), got {tuple(query.shape)}")
    if key.dim() != 3 or key.shape != value.shape or key.size(-1) != d_model:
        raise ValueError(f"key and value must both be (B, T_k, d_model={d_model}), got "
                         f"{tuple(key.shape)} and {tuple(value.shape)}")
    _check_position_mask(mask, query.size(0), query.size(1), key.size(1))
    if mask is not None and torch.is_tensor(mask) and mask.dim() == 3:
        mask = mask.unsqueeze(1)                                    # (B, 1, T_q, T_k): the same for all heads
    return mask


def store_attention_weights(model, flag=True):
    """Make every attention module inside `model` (lesson 08's MultiHeadAttention, a GPT's
    CausalSelfAttention: any module with a `store_weights` flag) keep its weights (`attn_weights`) on the
    next forward passes (the slower, explicit path), or stop and forget them; returns `model`. The models'
    own `store_attention` methods (Transformer, GPT, ViT) call this."""
    for module in model.modules():
        if hasattr(module, "store_weights") and hasattr(module, "attn_weights"):
            module.store_weights = flag
            if not flag:
                module.attn_weights = None
    return model
