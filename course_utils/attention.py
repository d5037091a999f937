"""Self-attention, multi-head attention and positional encodings (lessons 07 and 08).

    scaled_dot_product_attention(q, k, v, mask)   softmax(q kᵀ / √d_k) v, optional boolean mask
    MultiHeadAttention(d_model, num_heads)        equal to torch.nn.MultiheadAttention(batch_first=True)
    sinusoidal_positional_encoding, PositionalEncoding, LearnedPositionalEncoding, apply_rope:
                                                  defined in course_utils.positions, importable from here
    apply_rope(x, positions)                      rotary positions (RoPE, lesson 12): pairs of features rotated
    grouped_query_attention(q, k, v, mask)        h query heads share h_kv key/value heads (lesson 12)

MultiHeadAttention takes two options of lesson 12, both off by default (then it is lesson 08's module):
`num_kv_heads` (grouped-query attention; 1 = multi-query) and `rope=True` (rotary positions on the
queries and keys of a self-attention).

Masks (`course_utils.masks`: causal_mask, padding_mask) are boolean, True = may attend (keep), False =
masked out: the convention of `torch.nn.functional.scaled_dot_product_attention`. A query whose every
key is masked gets zero weights and a zero output, never NaN.

Without `need_weights` the attention goes through torch's fused kernel (on a GPU, with a boolean mask,
the memory-efficient one: the flash backend takes no mask; lesson 13 shows which kernel runs), except
on a CPU in bf16/fp16 or for a single query, where the explicit formula is faster; with
`need_weights=True` it is computed step by step and the weights are returned (for plots). For
decoding one token at a time, MultiHeadAttention keeps keys and values between steps (`project_kv`,
`attend_cached`, `extend_cache`: a key/value cache, lesson 10).
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from .masks import check_mask, masked_softmax
from .positions import (  # noqa: F401 - lessons 08 and 12 import them from here too
    LearnedPositionalEncoding,
    PositionalEncoding,
    apply_rope,
    rope_angles,
    sinusoidal_positional_encoding,
)

__all__ = ["scaled_dot_product_attention", "attention_weights", "split_heads", "merge_heads", "MultiHeadAttention",
           "sinusoidal_positional_encoding", "PositionalEncoding", "LearnedPositionalEncoding",
           "rope_angles", "apply_rope", "repeat_kv_heads", "grouped_query_attention", "store_attention_weights"]

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


def _rows(bias, start, stop):
    """bias[start:stop], or None for a layer without bias."""
    return None if bias is None else bias[start:stop]


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


# ---- lesson 12: grouped-query attention (rotary positions: course_utils.positions) ----------------
def repeat_kv_heads(x, num_heads):
    """(B, h_kv, T, d) -> (B, num_heads, T, d): query head j uses key/value head j // (num_heads / h_kv)."""
    h_kv = x.size(1)
    if num_heads % h_kv:
        raise ValueError(f"num_heads={num_heads} must be a multiple of the key/value heads h_kv={h_kv}")
    return x if h_kv == num_heads else x.repeat_interleave(num_heads // h_kv, dim=1)


def grouped_query_attention(q, k, v, mask=None, dropout_p=0.0, need_weights=False):
    """Attention of h query heads q (B, h, T_q, d) over h_kv key/value heads k, v (B, h_kv, T_k, d):
    group g = h / h_kv consecutive query heads share one key/value head (h_kv = h: multi-head attention,
    h_kv = 1: multi-query attention). Returns (B, h, T_q, d) (and the weights (B, h, T_q, T_k))."""
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        raise ValueError(f"q, k, v must be (B, heads, T, d_head), got shapes {tuple(q.shape)}, {tuple(k.shape)}, "
                         f"{tuple(v.shape)}")
    if k.size(1) != v.size(1) or q.size(1) % k.size(1):
        raise ValueError(f"the {q.size(1)} query heads must be a multiple of the key/value heads; got "
                         f"{k.size(1)} key and {v.size(1)} value heads")
    k, v = repeat_kv_heads(k, q.size(1)), repeat_kv_heads(v, q.size(1))  # (B, h, T_k, d)
    return scaled_dot_product_attention(q, k, v, mask, dropout_p, need_weights)


class MultiHeadAttention(nn.Module):
    """h heads of scaled dot-product attention on d_model/h features each, concatenated, then W_O.

    MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W_O,  head_i = Attention(Q W_Q^i, K W_K^i, V W_V^i)

    W_Q, W_K, W_V are stacked in one Linear (`in_proj`, rows [W_Q; W_K; W_V]) as in
    torch.nn.MultiheadAttention, whose weights `load_from_torch` copies; with the same weights
    both give the same outputs. The last weights (B, h, T_q, T_k) are kept on `self.attn_weights`
    when `need_weights=True` or `self.store_weights = True` (that path does not use the fused kernel).

    Lesson 12's options (off by default):
    num_kv_heads  h_kv key/value heads, each shared by h / h_kv query heads (grouped-query attention;
                  1 = multi-query): W_K, W_V have h_kv * d_head rows, the cache holds h_kv heads.
    rope          rotate the queries and keys by their positions (apply_rope; self-attention only):
                  0 .. T-1 in `forward`, t for the newest position in `extend_cache`.
    """

    def __init__(self, d_model, num_heads, dropout=0.0, bias=True, num_kv_heads=None, rope=False,
                 rope_base=10000.0):
        super().__init__()
        _check_num_heads(num_heads, d_model)
        num_kv_heads = num_heads if num_kv_heads is None else num_kv_heads
        if num_kv_heads < 1 or num_heads % num_kv_heads:
            raise ValueError(f"num_heads={num_heads} must be divisible by num_kv_heads={num_kv_heads} (each "
                             "key/value head serves the same number of query heads)")
        self.d_model, self.num_heads, self.d_head = d_model, num_heads, d_model // num_heads
        if rope and self.d_head % 2:
            raise ValueError(f"rope rotates pairs of features: d_head = d_model / num_heads must be even, got "
                             f"{self.d_head}")
        self.num_kv_heads, self.rope, self.rope_base = num_kv_heads, rope, rope_base
        self.d_kv = num_kv_heads * self.d_head                       # rows of W_K and of W_V
        self.dropout = dropout
        self.in_proj = nn.Linear(d_model, d_model + 2 * self.d_kv, bias=bias)  # [W_Q; W_K; W_V]
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)     # W_O
        self.store_weights = False
        self.attn_weights = None
        self._reset_parameters()

    def _reset_parameters(self):  # the initialisation of torch.nn.MultiheadAttention
        nn.init.xavier_uniform_(self.in_proj.weight)
        if self.in_proj.bias is not None:
            nn.init.zeros_(self.in_proj.bias)
            nn.init.zeros_(self.out_proj.bias)

    def _project(self, query, key, value):
        w, b = self.in_proj.weight, self.in_proj.bias
        if query is key and key is value:                           # self-attention: one matmul
            return F.linear(query, w, b).split([self.d_model, self.d_kv, self.d_kv], dim=-1)
        w_q, w_kv = w.split([self.d_model, 2 * self.d_kv])
        b_q, b_kv = b.split([self.d_model, 2 * self.d_kv]) if b is not None else (None, None)
        q = F.linear(query, w_q, b_q)
        if key is value:                                            # cross-attention: K, V together
            return (q,) + tuple(F.linear(key, w_kv, b_kv).chunk(2, dim=-1))
        w_k, w_v = w_kv.chunk(2)
        b_k, b_v = b_kv.chunk(2) if b_kv is not None else (None, None)
        return q, F.linear(key, w_k, b_k), F.linear(value, w_v, b_v)

    def forward(self, query, key, value, mask=None, need_weights=False):
        """query (B, T_q, d_model), key/value (B, T_k, d_model); mask bool, broadcastable to
        (B, h, T_q, T_k) (a (B, T_q, T_k) mask is applied to every head). Returns (B, T_q, d_model)."""
        _check_tensors(query=query, key=key, value=value)
        if query.dim() != 3 or query.size(-1) != self.d_model:
            raise ValueError(f"query must be (B, T_q, d_model={self.d_model}), got {tuple(query.shape)}")
        if key.dim() != 3 or key.shape != value.shape or key.size(-1) != self.d_model:
            raise ValueError(f"key and value must both be (B, T_k, d_model={self.d_model}), got "
                             f"{tuple(key.shape)} and {tuple(value.shape)}")
        _check_position_mask(mask, query.size(0), query.size(1), key.size(1))
        if mask is not None and torch.is_tensor(mask) and mask.dim() == 3:
            mask = mask.unsqueeze(1)                                 # (B, 1, T_q, T_k): same for all heads
        if self.rope and not (query is key and key is value):
            raise ValueError("rope=True is for self-attention (query, key and value the same tensor): rotary "
                             "positions compare the positions of one sequence")
        q, k, v = self._project(query, key, value)                  # (B, T, d_model), k, v (B, T, h_kv d_head)
        q = split_heads(q, self.num_heads)                          # (B, h, T, d_head)
        k, v = split_heads(k, self.num_kv_heads), split_heads(v, self.num_kv_heads)  # (B, h_kv, T, d_head)
        if self.rope:
            positions = torch.arange(q.size(2), device=q.device)
            q, k = apply_rope(q, positions, self.rope_base), apply_rope(k, positions, self.rope_base)
        return self._attend(q, k, v, mask, need_weights)

    def _attend(self, q, k, v, mask=None, need_weights=False):
        """Projected heads q (B, h, T_q, d_head), k and v (B, h_kv, T_k, d_head) -> (B, T_q, d_model) after W_O."""
        dropout_p = self.dropout if self.training else 0.0
        group = self.num_heads // self.num_kv_heads
        if group > 1 and q.size(2) == 1 and not (need_weights or self.store_weights or dropout_p) and (
                mask is None or (mask.dim() == 4 and mask.size(1) == 1)):
            # one decoding step of grouped-query attention: the g query heads of a group become g queries
            # of their shared key/value head, (B, h, 1, d) -> (B, h_kv, g, d); the cache is never copied
            B, _, _, d_head = q.shape
            out = scaled_dot_product_attention(q.reshape(B, self.num_kv_heads, group, d_head), k, v, mask)
            return self.out_proj(merge_heads(out.reshape(B, self.num_heads, 1, d_head)))   # (B, 1, d_model)
        if group > 1:                                               # grouped-query: share the K, V heads
            k, v = repeat_kv_heads(k, self.num_heads), repeat_kv_heads(v, self.num_heads)
        if need_weights or self.store_weights:
            out, weights = scaled_dot_product_attention(q, k, v, mask, dropout_p, need_weights=True)
            self.attn_weights = weights.detach()                    # (B, h, T_q, T_k)
        else:
            out = scaled_dot_product_attention(q, k, v, mask, dropout_p)
        return self.out_proj(merge_heads(out))                      # (B, T_q, d_model)

    # ---- incremental decoding (lesson 10): keys and values kept between steps ------------------
    # At decoding step t a decoder needs the attention of ONE new query. Its keys and values are
    # those of the earlier positions, which do not change (the decoder is causal): keep them (a
    # key/value cache) instead of projecting the whole prefix again at every step.
    def project_kv(self, memory):
        """K, V of `memory` (B, T_k, d_model), each (B, h, T_k, d_head): for a cross-attention, computed
        once per sentence and reused at every decoding step."""
        if self.rope:
            raise ValueError("project_kv is for cross-attention, which has no rotary positions (rope=True)")
        w_kv, b_kv = self.in_proj.weight[self.d_model:], _rows(self.in_proj.bias, self.d_model, None)
        k, v = F.linear(memory, w_kv, b_kv).chunk(2, dim=-1)        # each (B, T_k, d_model)
        return split_heads(k, self.num_kv_heads), split_heads(v, self.num_kv_heads)

    def attend_cached(self, query, k, v, mask=None):
        """Queries (B, T_q, d_model) against keys and values already projected (project_kv), each
        (B, h, T_k, d_head); mask broadcastable to (B, h, T_q, T_k). Returns (B, T_q, d_model)."""
        w_q, b_q = self.in_proj.weight[:self.d_model], _rows(self.in_proj.bias, 0, self.d_model)
        q = split_heads(F.linear(query, w_q, b_q), self.num_heads)  # (B, h, T_q, d_head)
        return self._attend(q, k, v, mask)

    def extend_cache(self, x, cache=None, mask=None):
        """Self-attention of the NEWEST position x (B, 1, d_model) over itself and the cached earlier ones.

        cache: (K, V), each (B, h, t, d_head), the keys and values of positions 0..t-1 (None at the
        first step). x's key and value are appended; mask, broadcastable to (B, h, 1, t+1), may hide
        some of the t+1 keys. Returns (out (B, 1, d_model), (K, V) each (B, h, t+1, d_head)).
        With num_kv_heads the cache holds h_kv heads; with rope, x is at position t (the cache's length).
        """
        q, k, v = F.linear(x, self.in_proj.weight, self.in_proj.bias).split([self.d_model, self.d_kv, self.d_kv], -1)
        q = split_heads(q, self.num_heads)                          # (B, h, 1, d_head)
        k, v = split_heads(k, self.num_kv_heads), split_heads(v, self.num_kv_heads)  # (B, h_kv, 1, d_head)
        if self.rope:
            t = torch.tensor([0 if cache is None else cache[0].size(2)], device=x.device)  # x's position
            q, k = apply_rope(q, t, self.rope_base), apply_rope(k, t, self.rope_base)
        if cache is not None:
            k, v = torch.cat([cache[0], k], dim=2), torch.cat([cache[1], v], dim=2)  # (B, h, t+1, d_head)
        return self._attend(q, k, v, mask), (k, v)

    @torch.no_grad()
    def load_from_torch(self, mha):
        """Copy the weights of a torch.nn.MultiheadAttention (same d_model, heads, bias); returns self."""
        if self.num_kv_heads != self.num_heads or self.rope:
            raise ValueError("torch.nn.MultiheadAttention has neither grouped key/value heads nor rotary positions")
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
        extra = (f", num_kv_heads={self.num_kv_heads}" if self.num_kv_heads != self.num_heads else "") + \
            (", rope=True" if self.rope else "")
        return (f"d_model={self.d_model}, num_heads={self.num_heads}, d_head={self.d_head}, "
                f"dropout={self.dropout}") + extra


def store_attention_weights(model, flag=True):
    """Make every MultiHeadAttention inside `model` keep its weights (`attn_weights`) on the next forward
    passes (the slower, explicit path), or stop and forget them; returns `model`. The models' own
    `store_attention` methods (Transformer, GPT, ViT) call this."""
    for module in model.modules():
        if isinstance(module, MultiHeadAttention):
            module.store_weights = flag
            if not flag:
                module.attn_weights = None
    return model
