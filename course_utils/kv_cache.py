"""Decoding one token at a time with a key/value cache (lesson 10), for lesson 08's MultiHeadAttention.

At decoding step t a decoder needs the attention of ONE new query. The keys and values of the earlier
positions do not change (the decoder is causal): keep them, instead of projecting the whole prefix again
at every step. The cross-attention's keys and values, projections of the encoder's memory, are computed
once per sentence.

    k, v = project_kv(attn, memory)                    # cross-attention: K, V of the memory, once
    out = attend_cached(attn, query, k, v, mask)       # ... and the new queries against them
    out, (k, v) = extend_cache(attn, x, (k, v), mask)  # self-attention of the newest position x over the cache
    state = DecodingState(cross_kv, memory_mask, pad_id)   # what the Transformer keeps between steps

Each reuses the module's own weights and `MultiHeadAttention.attend` (attention per head, concatenation,
W_O), so a cached step computes exactly what the full forward pass computes at that position. A GPT's
cached step (lesson 12: rotary positions, grouped-query heads) is `gpt_attention.CausalSelfAttention.extend_cache`.
"""
import torch
import torch.nn.functional as F

from .attention import projection_rows, split_heads

__all__ = ["project_kv", "attend_cached", "extend_cache", "DecodingState"]


def project_kv(attn, memory):
    """K, V of `memory` (B, T_k, d_model), each (B, h, T_k, d_head): for a cross-attention, computed once per
    sentence and reused at every decoding step."""
    k, v = F.linear(memory, *projection_rows(attn.in_proj, attn.d_model, 3 * attn.d_model)).chunk(2, dim=-1)
    return split_heads(k, attn.num_heads), split_heads(v, attn.num_heads)          # each (B, h, T_k, d_head)


def attend_cached(attn, query, k, v, mask=None):
    """Queries (B, T_q, d_model) against keys and values already projected (project_kv), each
    (B, h, T_k, d_head); mask broadcastable to (B, h, T_q, T_k). Returns (B, T_q, d_model)."""
    q = split_heads(F.linear(query, *projection_rows(attn.in_proj, 0, attn.d_model)), attn.num_heads)
    return attn.attend(q, k, v, mask)                                               # (B, T_q, d_model)


def extend_cache(attn, x, cache=None, mask=None):
    """Self-attention of the NEWEST position x (B, 1, d_model) over itself and the cached earlier ones.

    cache: (K, V), each (B, h, t, d_head), the keys and values of positions 0..t-1 (None at the first
    step). x's key and value are appended; mask, broadcastable to (B, h, 1, t+1), may hide some of the
    t+1 keys (e.g. the <pad> a finished beam was fed). Returns (out (B, 1, d_model), (K, V) each
    (B, h, t+1, d_head)). No causal mask: the newest position may see every earlier one.
    """
    q, k, v = attn.project(x, x, x)                                                # each (B, h, 1, d_head)
    if cache is not None:
        k, v = torch.cat([cache[0], k], dim=2), torch.cat([cache[1], v], dim=2)    # (B, h, t+1, d_head)
    return attn.attend(q, k, v, mask), (k, v)


class DecodingState:
    """What the Transformer keeps between decoding steps: its key/value cache.

    For decoder layer l (h heads of d_head = d_model / h features, N rows = sentences or beams):
        self_kv[l]  = (K, V) of the t tokens fed so far, each (N, h, t, d_head); one position more per step
        cross_kv[l] = (K, V) of the encoder memory, each (N, h, S, d_head); computed ONCE per sentence
    plus memory_mask (N, 1, 1, S) (source padding) and `keep` (N, t) (False where <pad> was fed: a
    finished beam; None while every fed token is real).

    Memory: 2 * num_layers * d_model * (t + S) numbers per row: with the cpu preset (3 decoder layers,
    d_model 256) 1,536 numbers per source or output token, 6 KB in float32 and 3 KB under bf16
    autocast (the projections run in bf16); a 20-token sentence decoded to 20 tokens needs 240 KB
    (120 KB in bf16), times the beam size in beam search. Without the cache nothing is kept, but every
    step projects and attends over the whole prefix again.

    Reordering (`reorder`) index_selects every tensor on the batch axis. The cross-attention K, V
    depend only on the source sentence: when the rows still come from the same sentences (beam search
    keeps beams within their sentence), they are left as they are.
    """

    def __init__(self, cross_kv, memory_mask, pad_id):
        self.cross_kv, self.memory_mask, self.pad_id = cross_kv, memory_mask, pad_id
        self.self_kv = [None] * len(cross_kv)
        self.source = torch.arange(memory_mask.size(0), device=memory_mask.device)  # (N,) sentence of each row
        self.keep = None
        self.length = 0                                       # t: tokens fed so far
        self.attn_weights = None                              # (N, S) with model.store_attention(True)

    def feed(self, y_prev):
        """Record the fed tokens y_prev (N,); returns the self-attention mask over the t+1 keys
        (N, 1, 1, t+1), or None when no <pad> was ever fed."""
        real = y_prev != self.pad_id                                   # (N,)
        if self.keep is not None or not bool(real.all()):
            if self.keep is None:
                self.keep = real.new_ones((real.size(0), self.length))
            self.keep = torch.cat([self.keep, real[:, None]], dim=1)   # (N, t+1)
        self.length += 1
        return None if self.keep is None else self.keep[:, None, None, :]

    def reorder(self, rows):
        """Row i becomes former row rows[i], in every tensor (rows (N',) long)."""
        source = self.source.index_select(0, rows)
        if not torch.equal(source, self.source):              # rows now come from other sentences
            self.cross_kv = [(k.index_select(0, rows), v.index_select(0, rows)) for k, v in self.cross_kv]
            self.memory_mask = self.memory_mask.index_select(0, rows)
        self.source = source
        self.self_kv = [None if kv is None else (kv[0].index_select(0, rows), kv[1].index_select(0, rows))
                        for kv in self.self_kv]
        if self.keep is not None:
            self.keep = self.keep.index_select(0, rows)
        if self.attn_weights is not None:
            self.attn_weights = self.attn_weights.index_select(0, rows)
        return self

    def memory_bytes(self):
        """Bytes held by the cache (self- and cross-attention keys and values)."""
        return sum(t.numel() * t.element_size() for kv in self.self_kv + self.cross_kv if kv is not None
                   for t in kv)
