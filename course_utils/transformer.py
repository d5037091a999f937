"""The Transformer of "Attention Is All You Need" (lesson 09), the model lesson 10 trains.

    model = Transformer(src_vocab_size, tgt_vocab_size, d_model=512, num_heads=8, num_layers=6)
    tgt_in, tgt_out = shift_tokens(tgt)          # tgt = [BOS, y_1, ..., y_n, EOS, PAD, ...]
    logits = model(src, tgt_in)                  # (B, T, tgt_vocab_size)
    loss = F.cross_entropy(logits.transpose(1, 2), tgt_out, ignore_index=pad_id, label_smoothing=0.1)
    hyp = decoding.greedy_decode(model, src, bos_id, eos_id, pad_id)   # course_utils.decoding

The decoder input is the target shifted right: it starts with BOS and stops one token before the
end, so that position t predicts token t+1 of the target; the CALLER builds it (`shift_tokens`).
`encode` makes the source padding mask, `decode` the causal mask combined with the target padding
mask; attention goes through `attention.scaled_dot_product_attention` (torch's fused kernel, or the
explicit formula where that is faster on a CPU). For plots:

    model.store_attention(True); model(src, tgt_in); maps = model.attention_maps()
    maps["decoder_cross"]  # (num_layers, B, num_heads, T, S)

Decoding one token at a time (the protocol of course_utils.decoding) keeps every decoder layer's keys
and values (a key/value cache, `course_utils.kv_cache`), so that step t runs the layers on ONE position:

    state = model.start_decoding(src)                  # encoder once; cross-attention K, V once
    logits, state = model.decode_step(y_prev, state)   # y_prev (N,) -> (N, V)
    state = model.reorder_decoding_state(state, rows)  # beams: index_select on the batch axis
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from .attention import MultiHeadAttention, PositionalEncoding, store_attention_weights
from .kv_cache import DecodingState, attend_cached, extend_cache, project_kv
from .masks import causal_mask, padding_mask

__all__ = ["PositionwiseFeedForward", "EncoderLayer", "DecoderLayer", "Encoder", "Decoder",
           "Transformer", "DecodingState", "shift_tokens"]


class PositionwiseFeedForward(nn.Module):
    """FFN(x) = max(0, x W_1 + b_1) W_2 + b_2, applied to every position alone (with dropout inside)."""

    def __init__(self, d_model, d_ff, dropout=0.0):
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):  # (B, T, d_model) -> (B, T, d_model)
        return self.linear2(self.dropout(F.relu(self.linear1(x), inplace=True)))  # in place: one tensor fewer


class EncoderLayer(nn.Module):
    """Self-attention then feed-forward, each wrapped in a residual connection and layer norm.

    post-norm (paper):   x = LayerNorm(x + Dropout(Sublayer(x)))
    pre-norm (modern):   x = x + Dropout(Sublayer(LayerNorm(x)))
    """

    def __init__(self, d_model, num_heads, d_ff, dropout=0.1, norm_first=True):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.ff = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.dropout1, self.dropout2 = nn.Dropout(dropout), nn.Dropout(dropout)
        self.norm_first = norm_first

    def forward(self, x, mask=None):
        """x: (B, S, d_model); mask: bool, broadcastable to (B, h, S, S), e.g. padding_mask(src)."""
        if self.norm_first:
            y = self.norm1(x)
            x = x + self.dropout1(self.self_attn(y, y, y, mask))
            return x + self.dropout2(self.ff(self.norm2(x)))
        x = self.norm1(x + self.dropout1(self.self_attn(x, x, x, mask)))
        return self.norm2(x + self.dropout2(self.ff(x)))


class DecoderLayer(nn.Module):
    """Masked self-attention, cross-attention over the encoder's memory, feed-forward; each with Add & Norm.

    In the cross-attention the queries come from the decoder and the keys and values from `memory`.
    """

    def __init__(self, d_model, num_heads, d_ff, dropout=0.1, norm_first=True):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.cross_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.ff = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.norm1, self.norm2, self.norm3 = (nn.LayerNorm(d_model) for _ in range(3))
        self.dropout1, self.dropout2, self.dropout3 = (nn.Dropout(dropout) for _ in range(3))
        self.norm_first = norm_first

    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        """x: (B, T, d_model), memory: (B, S, d_model); tgt_mask broadcastable to (B, h, T, T)
        (causal & target padding), memory_mask to (B, h, T, S) (source padding)."""
        if self.norm_first:
            y = self.norm1(x)
            x = x + self.dropout1(self.self_attn(y, y, y, tgt_mask))
            y = self.norm2(x)
            x = x + self.dropout2(self.cross_attn(y, memory, memory, memory_mask))
            return x + self.dropout3(self.ff(self.norm3(x)))
        x = self.norm1(x + self.dropout1(self.self_attn(x, x, x, tgt_mask)))
        x = self.norm2(x + self.dropout2(self.cross_attn(x, memory, memory, memory_mask)))
        return self.norm3(x + self.dropout3(self.ff(x)))

    def step(self, x, self_kv, self_mask, cross_kv, memory_mask):
        """`forward` for the newest position alone, with a key/value cache (lesson 10).

        x: (N, 1, d_model); self_kv: (K, V) of the earlier positions, each (N, h, t, d_head), or None;
        self_mask: broadcastable to (N, h, 1, t+1) or None; cross_kv: (K, V) of the memory, each
        (N, h, S, d_head); memory_mask: broadcastable to (N, h, 1, S). Returns (x, self_kv with t+1).
        """
        if self.norm_first:
            out, self_kv = extend_cache(self.self_attn, self.norm1(x), self_kv, self_mask)
            x = x + self.dropout1(out)
            x = x + self.dropout2(attend_cached(self.cross_attn, self.norm2(x), *cross_kv, memory_mask))
            return x + self.dropout3(self.ff(self.norm3(x))), self_kv
        out, self_kv = extend_cache(self.self_attn, x, self_kv, self_mask)
        x = self.norm1(x + self.dropout1(out))
        x = self.norm2(x + self.dropout2(attend_cached(self.cross_attn, x, *cross_kv, memory_mask)))
        return self.norm3(x + self.dropout3(self.ff(x))), self_kv


class Encoder(nn.Module):
    """A stack of encoder layers (plus a final LayerNorm in the pre-norm variant)."""

    def __init__(self, num_layers, d_model, num_heads, d_ff, dropout=0.1, norm_first=True):
        super().__init__()
        self.layers = nn.ModuleList(EncoderLayer(d_model, num_heads, d_ff, dropout, norm_first)
                                    for _ in range(num_layers))
        self.norm = nn.LayerNorm(d_model) if norm_first else nn.Identity()

    def forward(self, x, mask=None):
        for layer in self.layers:
            x = layer(x, mask)
        return self.norm(x)


class Decoder(nn.Module):
    """A stack of decoder layers (plus a final LayerNorm in the pre-norm variant)."""

    def __init__(self, num_layers, d_model, num_heads, d_ff, dropout=0.1, norm_first=True):
        super().__init__()
        self.layers = nn.ModuleList(DecoderLayer(d_model, num_heads, d_ff, dropout, norm_first)
                                    for _ in range(num_layers))
        self.norm = nn.LayerNorm(d_model) if norm_first else nn.Identity()

    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        for layer in self.layers:
            x = layer(x, memory, tgt_mask, memory_mask)
        return self.norm(x)


class Transformer(nn.Module):
    """Encoder-decoder Transformer: embeddings × √d_model + sinusoidal positions, encoder and decoder
    stacks, and an output projection tied to the target embedding (tie_embeddings=True).

    share_src_tgt_embeddings=True uses one embedding table for both languages (a joint vocabulary;
    needs src_vocab_size == tgt_vocab_size). norm_first=False gives the paper's post-norm layers.
    """

    def __init__(self, src_vocab_size, tgt_vocab_size, d_model=512, num_heads=8, num_layers=6,
                 d_ff=2048, dropout=0.1, max_len=512, norm_first=True, tie_embeddings=True,
                 share_src_tgt_embeddings=False, pad_id=0, num_encoder_layers=None,
                 num_decoder_layers=None):
        super().__init__()
        if share_src_tgt_embeddings and src_vocab_size != tgt_vocab_size:
            raise ValueError(f"share_src_tgt_embeddings needs one vocabulary, got sizes "
                             f"{src_vocab_size} and {tgt_vocab_size}")
        self.d_model, self.pad_id = d_model, pad_id
        self.tgt_embed = nn.Embedding(tgt_vocab_size, d_model, padding_idx=pad_id)
        self.src_embed = (self.tgt_embed if share_src_tgt_embeddings
                          else nn.Embedding(src_vocab_size, d_model, padding_idx=pad_id))
        self.pos = PositionalEncoding(d_model, max_len, dropout)
        self.encoder = Encoder(num_layers if num_encoder_layers is None else num_encoder_layers,
                               d_model, num_heads, d_ff, dropout, norm_first)
        self.decoder = Decoder(num_layers if num_decoder_layers is None else num_decoder_layers,
                               d_model, num_heads, d_ff, dropout, norm_first)
        self.generator = nn.Linear(d_model, tgt_vocab_size, bias=False)  # logits = s W_E^T
        self._reset_parameters()
        if tie_embeddings:
            self.generator.weight = self.tgt_embed.weight

    def _reset_parameters(self):
        for name, p in self.named_parameters():
            if p.dim() > 1 and "embed" not in name:
                nn.init.xavier_uniform_(p)
        # N(0, 1/d_model): × √d_model gives unit scale; a list, not a set: the same order in every process
        for embed in dict.fromkeys([self.src_embed, self.tgt_embed]):
            nn.init.normal_(embed.weight, std=self.d_model ** -0.5)
            with torch.no_grad():
                embed.weight[self.pad_id].zero_()

    def embed(self, tokens, table, offset=0):
        """tokens (B, T) -> (B, T, d_model); offset = the position of the first token (decoding step t)."""
        return self.pos(table(tokens) * math.sqrt(self.d_model), offset)

    def encode(self, src, src_mask=None):
        """src (B, S) token ids -> memory (B, S, d_model). src_mask defaults to padding_mask(src, pad_id)."""
        if src_mask is None:
            src_mask = padding_mask(src, self.pad_id)
        return self.encoder(self.embed(src, self.src_embed), src_mask)

    def decode(self, tgt_in, memory, src_mask=None, positions=None):
        """tgt_in (B, T) shifted-right target, memory (B, S, d_model) -> logits (B, T, tgt_vocab_size).

        Builds the causal & target-padding mask inside. Pass the same src_mask as to `encode`
        (padding_mask(src, pad_id)); with None every memory position is attended to.
        positions: optional bool (B, T): the logits at these positions only, (n, V) (see forward).
        """
        T = tgt_in.size(1)
        tgt_mask = causal_mask(T, tgt_in.device) & padding_mask(tgt_in, self.pad_id)  # (B, 1, T, T)
        s = self.decoder(self.embed(tgt_in, self.tgt_embed), memory, tgt_mask, src_mask)
        return self.generator(s if positions is None else s[positions])

    def forward(self, src, tgt_in, positions=None):
        """src (B, S), tgt_in (B, T) (the target shifted right, starting with BOS) -> logits (B, T, V).

        positions: optional bool (B, T) -> logits (n, V) at its n True positions only. Training passes
        tgt_out != pad_id: the output layer (the largest matrix product) then skips the padding.
        """
        src_mask = padding_mask(src, self.pad_id)
        return self.decode(tgt_in, self.encode(src, src_mask), src_mask, positions)

    # ---- decoding one token at a time, with a key/value cache (lesson 10) ---------------------
    def start_decoding(self, src, pad_id=None):
        """Run the encoder ONCE on src (B, S) and project every layer's cross-attention K, V: the
        state that `decode_step` extends (see DecodingState, and course_utils.decoding)."""
        pad_id = self.pad_id if pad_id is None else pad_id
        src_mask = padding_mask(src, pad_id)                                   # (B, 1, 1, S)
        memory = self.encode(src, src_mask)                                    # (B, S, d_model)
        cross_kv = [project_kv(layer.cross_attn, memory) for layer in self.decoder.layers]
        return DecodingState(cross_kv, src_mask, pad_id)

    def decode_step(self, y_prev, state):
        """The token each row fed last, y_prev (N,), -> logits of the next one (N, V), and the state
        with y_prev's keys and values added. Equal to decode(prefix, memory)[:, -1] without re-running
        the prefix: step t costs the work of ONE position (plus attention over the t cached ones)."""
        t = state.length
        x = self.embed(y_prev[:, None], self.tgt_embed, offset=t)               # (N, 1, d_model)
        self_mask = state.feed(y_prev)                                         # (N, 1, 1, t+1) or None
        for i, layer in enumerate(self.decoder.layers):
            x, state.self_kv[i] = layer.step(x, state.self_kv[i], self_mask, state.cross_kv[i],
                                             state.memory_mask)
        logits = self.generator(self.decoder.norm(x))[:, 0]                    # (N, V)
        last = self.decoder.layers[-1].cross_attn if len(self.decoder.layers) else None
        if last is not None and last.store_weights:                            # store_attention(True)
            state.attn_weights = last.attn_weights[:, :, 0].mean(1)            # (N, S), mean over heads
        return logits, state

    def reorder_decoding_state(self, state, rows):
        """Keep row rows[i] of the state as row i (rows (N',) on the batch axis): repeat a sentence for
        its beams, follow the beams that beam search kept. Returns the state."""
        return state.reorder(rows)

    # ---- attention maps for plots -------------------------------------------------------------
    def store_attention(self, flag=True):
        """Keep every attention module's weights on the next forward passes (slower path); returns self."""
        return store_attention_weights(self, flag)

    def attention_maps(self):
        """Weights of the last forward with store_attention(True), stacked over layers:
        {"encoder_self": (L, B, h, S, S), "decoder_self": (L, B, h, T, T), "decoder_cross": (L, B, h, T, S)}."""
        def stack(modules, name):
            weights = [module.attn_weights for module in modules]
            if any(w is None for w in weights):
                raise RuntimeError(f"no {name} weights stored: call model.store_attention(True), then run "
                                   "a forward pass (model(src, tgt_in)) first")
            return torch.stack(weights)
        return {"encoder_self": stack([layer.self_attn for layer in self.encoder.layers], "encoder self-attention"),
                "decoder_self": stack([layer.self_attn for layer in self.decoder.layers], "decoder self-attention"),
                "decoder_cross": stack([layer.cross_attn for layer in self.decoder.layers], "cross-attention")}


def shift_tokens(tgt):
    """tgt (B, T+1) = [BOS, y_1, ..., EOS, PAD...] -> (decoder input tgt[:, :-1], target tgt[:, 1:])."""
    return tgt[:, :-1], tgt[:, 1:]
