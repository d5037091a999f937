"""A decoder-only language model, GPT-style (lesson 12), built from the course's own parts.

    model = GPT(vocab_size, d_model=256, num_heads=8, num_layers=6, d_ff=1024, max_len=128,
                positions="rope", num_kv_heads=2)
    logits = model(tokens)                             # tokens (B, T) -> (B, T, V); position t predicts t+1
    loss = next_token_loss(logits, tokens, pad_id)     # cross-entropy of logits[:, :-1] vs tokens[:, 1:]
    out = decoding.generate(model, prompt, 20, temperature=0.8, top_p=0.9)   # sampling, with a K/V cache

From lesson 09's encoder-decoder only the decoder stays, without its cross-attention: each layer is
masked (causal) self-attention and the feed-forward network, pre-norm, with one LayerNorm after the
last layer and the output layer tied to the token embedding. The attention is lesson 08's multi-head
attention as self-attention, `gpt_attention.CausalSelfAttention` (with lesson 12's options `num_kv_heads`
and `rope`), the feed-forward network lesson 09's `transformer.PositionwiseFeedForward` (ReLU, as in the
original Transformer; GPT-2 uses GELU, Llama SwiGLU), the mask `masks.causal_mask`. The token embedding is
multiplied by √d_model, as in lesson 09 (GPT-2 does not scale it, and initialises it with a smaller spread).
Lesson 12's exercises build `GPTBlock` and `GPT` and compare them with these.

positions: "learned" (a trained table, GPT-2), "sinusoidal" (lesson 08's), or "rope" (rotary positions
inside every attention, Llama): the first two add a vector to the token embedding, RoPE adds nothing and
rotates the queries and keys instead. The model's context is `max_len` positions; a longer input is an error.

Generation goes through the decoding protocol of `course_utils.decoding` with a key/value cache, as lesson
10's translator (`CausalSelfAttention.extend_cache`): `start_decoding(prefix)` feeds the prefix,
`decode_step(y_prev, state)` feeds one token and returns the next token's logits.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from .attention import store_attention_weights
from .gpt_attention import CausalSelfAttention
from .masks import causal_mask
from .positions import LearnedPositionalEncoding, PositionalEncoding
from .transformer import PositionwiseFeedForward

__all__ = ["GPT", "GPTBlock", "GPTState", "next_token_loss", "POSITIONS", "kv_cache_bytes"]

POSITIONS = ("learned", "sinusoidal", "rope")


def next_token_loss(logits, tokens, pad_id=0):
    """Mean cross-entropy of the next-token predictions over the real (non-padding) targets.

    logits (B, T, V) = model(tokens), tokens (B, T): position t predicts token t+1, so the logits at
    positions 0..T-2 are compared with the tokens at 1..T-1 (the last position has no next token).
    """
    if logits.dim() != 3 or tokens.dim() != 2 or logits.shape[:2] != tokens.shape:
        raise ValueError(f"logits must be (B, T, V) and tokens (B, T) with the same B, T; got "
                         f"{tuple(logits.shape)} and {tuple(tokens.shape)}")
    logits, targets = logits[:, :-1], tokens[:, 1:]                      # (B, T-1, V), (B, T-1)
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)).float(), targets.reshape(-1), ignore_index=pad_id)


class GPTBlock(nn.Module):
    """One decoder-only layer, pre-norm: x + Attn(LN(x)) with the causal mask, then x + FFN(LN(x))."""

    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, num_kv_heads=None, rope=False):
        super().__init__()
        self.norm1 = nn.LayerNorm(d_model)
        self.attn = CausalSelfAttention(d_model, num_heads, dropout, num_kv_heads=num_kv_heads, rope=rope)
        self.norm2 = nn.LayerNorm(d_model)
        self.ff = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.dropout1, self.dropout2 = nn.Dropout(dropout), nn.Dropout(dropout)

    def forward(self, x, mask):
        """x (B, T, d_model), mask broadcastable to (B, h, T, T) (the causal mask) -> (B, T, d_model)."""
        y = self.norm1(x)
        x = x + self.dropout1(self.attn(y, mask))
        return x + self.dropout2(self.ff(self.norm2(x)))

    def step(self, x, kv=None):
        """`forward` for the newest position x (N, 1, d_model) alone; kv = (K, V) of the earlier positions
        (each (N, h_kv, t, d_head), None at the first). No mask: the newest position may see every cached
        one. Returns (x, kv with t+1 positions)."""
        out, kv = self.attn.extend_cache(self.norm1(x), kv)
        x = x + self.dropout1(out)
        return x + self.dropout2(self.ff(self.norm2(x))), kv


class GPT(nn.Module):
    """Token embedding (× √d_model) [+ positions], a stack of GPTBlocks, a final LayerNorm, and an output
    layer tied to the embedding: logits (B, T, V) for tokens (B, T), T <= max_len."""

    def __init__(self, vocab_size, d_model=256, num_heads=8, num_layers=6, d_ff=1024, max_len=128,
                 dropout=0.0, positions="rope", num_kv_heads=None, pad_id=0, tie_embeddings=True):
        super().__init__()
        if positions not in POSITIONS:
            raise ValueError(f"positions must be one of {POSITIONS}, got {positions!r}")
        self.vocab_size, self.d_model, self.max_len, self.pad_id = vocab_size, d_model, max_len, pad_id
        self.positions, self.num_layers = positions, num_layers
        self.embed = nn.Embedding(vocab_size, d_model)
        if positions == "learned":
            self.pos = LearnedPositionalEncoding(d_model, max_len, dropout)
        elif positions == "sinusoidal":
            self.pos = PositionalEncoding(d_model, max_len, dropout)
        else:
            self.pos = None
            self.drop = nn.Dropout(dropout)
        self.layers = nn.ModuleList(GPTBlock(d_model, num_heads, d_ff, dropout, num_kv_heads, positions == "rope")
                                    for _ in range(num_layers))
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size, bias=False)          # logits = s E^T when tied
        nn.init.normal_(self.embed.weight, std=d_model ** -0.5)         # × √d_model gives unit scale
        if tie_embeddings:
            self.head.weight = self.embed.weight

    @property
    def num_heads(self):
        return self.layers[0].attn.num_heads if self.num_layers else 0

    @property
    def num_kv_heads(self):
        return self.layers[0].attn.num_kv_heads if self.num_layers else 0

    def embed_tokens(self, tokens, offset=0):
        """tokens (B, T) at positions offset .. offset+T-1 -> (B, T, d_model)."""
        T = offset + tokens.size(1)
        if T > self.max_len:
            raise ValueError(f"a context of {T} tokens is longer than the model's, max_len={self.max_len}: "
                             f"shorten the input (keep its last {self.max_len} tokens) or build a GPT with a "
                             "larger max_len")
        x = self.embed(tokens) * math.sqrt(self.d_model)                # (B, T, d_model)
        return self.drop(x) if self.pos is None else self.pos(x, offset)

    def forward(self, tokens):
        """tokens (B, T) -> logits (B, T, V). Padding at the END of a row needs no mask: with the causal
        mask no real position sees it (the loss ignores it as a target)."""
        if tokens.dim() != 2:
            raise ValueError(f"tokens must be (B, T) ids, got shape {tuple(tokens.shape)}")
        x = self.embed_tokens(tokens)
        mask = causal_mask(tokens.size(1), tokens.device)               # (T, T)
        for layer in self.layers:
            x = layer(x, mask)
        return self.head(self.norm(x))                                  # (B, T, V)

    # ---- generation one token at a time, with a key/value cache (course_utils.decoding) ---------
    def start_decoding(self, prefix, pad_id=None):
        """A state holding the keys and values of `prefix` (B, t0) (t0 may be 0): the tokens before
        the one `decode_step` feeds next. The prefix goes through `decode_step` one position at a time."""
        state = GPTState(self.num_layers)
        for t in range(prefix.size(1)):
            _, state = self.decode_step(prefix[:, t], state)
        return state

    def decode_step(self, y_prev, state):
        """Feed y_prev (N,) at position t = state.length; returns the logits of the next token (N, V) and
        the state with one position more in every layer's cache. Equal to model(prefix)[:, -1]."""
        x = self.embed_tokens(y_prev[:, None], offset=state.length)     # (N, 1, d_model)
        for i, layer in enumerate(self.layers):
            x, state.kv[i] = layer.step(x, state.kv[i])
        state.length += 1
        return self.head(self.norm(x))[:, 0], state                     # (N, V)

    def reorder_decoding_state(self, state, rows):
        return state.reorder(rows)

    # ---- attention maps for plots -------------------------------------------------------------
    def store_attention(self, flag=True):
        """Keep every layer's attention weights on the next forward passes (slower path); returns self."""
        return store_attention_weights(self, flag)

    def attention_maps(self):
        """(L, B, h, T, T): the weights of the last forward pass made with store_attention(True)."""
        weights = [layer.attn.attn_weights for layer in self.layers]
        if any(w is None for w in weights):
            raise RuntimeError("no weights stored: call model.store_attention(True), then model(tokens)")
        return torch.stack(weights)

    def extra_repr(self):
        return f"positions={self.positions!r}, max_len={self.max_len}"


class GPTState:
    """The key/value cache of a GPT: kv[l] = (K, V) of layer l, each (N, h_kv, t, d_head), and t = length."""

    def __init__(self, num_layers):
        self.kv = [None] * num_layers
        self.length = 0

    def reorder(self, rows):
        """Row i becomes former row rows[i] (rows (N',) long) in every layer's cache."""
        self.kv = [None if kv is None else (kv[0].index_select(0, rows), kv[1].index_select(0, rows))
                   for kv in self.kv]
        return self

    def memory_bytes(self):
        return sum(t.numel() * t.element_size() for kv in self.kv if kv is not None for t in kv)


def kv_cache_bytes(num_layers, num_kv_heads, d_head, tokens=1, bytes_per_number=2):
    """Bytes of a key/value cache: 2 (K and V) × layers × key/value heads × d_head × tokens × bytes."""
    return 2 * num_layers * num_kv_heads * d_head * tokens * bytes_per_number
