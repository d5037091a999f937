"""Lesson 12: new slips (one mistake each) and unusual right answers."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from course_utils.attention import MultiHeadAttention, scaled_dot_product_attention
from course_utils.gpt import GPTBlock
from course_utils.masks import causal_mask
from course_utils.positions import LearnedPositionalEncoding
from course_utils.positions import apply_rope as course_apply_rope
from course_utils.transformer import PositionwiseFeedForward

# ---------------------------------------------------------------- next_token_loss


def nl_no_shift(logits, tokens, pad_id):
    # predicts the current token: no shift
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), tokens.reshape(-1), ignore_index=pad_id)


def nl_shift_backwards(logits, tokens, pad_id):
    lg, tg = logits[:, 1:], tokens[:, :-1]                   # slip: shifted the wrong way
    return F.cross_entropy(lg.reshape(-1, lg.size(-1)), tg.reshape(-1), ignore_index=pad_id)


def nl_pads_counted(logits, tokens, pad_id):
    lg, tg = logits[:, :-1], tokens[:, 1:]
    return F.cross_entropy(lg.reshape(-1, lg.size(-1)), tg.reshape(-1))   # slip: no ignore_index


def nl_mean_over_all(logits, tokens, pad_id):
    lg, tg = logits[:, :-1], tokens[:, 1:]
    per = F.cross_entropy(lg.reshape(-1, lg.size(-1)), tg.reshape(-1), reduction="none")
    keep = (tg.reshape(-1) != pad_id).float()
    return (per * keep).sum() / keep.numel()                 # slip: divides by every position, pads included


def nl_item(logits, tokens, pad_id):
    lg, tg = logits[:, :-1], tokens[:, 1:]
    return F.cross_entropy(lg.reshape(-1, lg.size(-1)), tg.reshape(-1), ignore_index=pad_id).item()   # slip


def nl_class_axis(logits, tokens, pad_id):
    # slip: (B, T-1, V) given straight to cross_entropy, which wants the classes on axis 1
    return F.cross_entropy(logits[:, :-1], tokens[:, 1:], ignore_index=pad_id)


def nl_mask_on_inputs(logits, tokens, pad_id):
    lg, tg = logits[:, :-1], tokens[:, 1:]
    per = F.cross_entropy(lg.reshape(-1, lg.size(-1)), tg.reshape(-1), reduction="none")
    keep = (tokens[:, :-1].reshape(-1) != pad_id).float()   # slip: masks by the INPUT token, not the target
    return (per * keep).sum() / keep.sum()


def nl_per_row_mean(logits, tokens, pad_id):
    lg, tg = logits[:, :-1], tokens[:, 1:]
    per = F.cross_entropy(lg.transpose(1, 2), tg, reduction="none")   # (B, T-1)
    keep = (tg != pad_id).float()
    return ((per * keep).sum(1) / keep.sum(1)).mean()       # slip: mean of row means


# ---------------------------------------------------------------- gpt_block


class _Block(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.0):
        super().__init__()
        self.norm1 = nn.LayerNorm(d_model)
        self.attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.norm2 = nn.LayerNorm(d_model)
        self.ff = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.dropout1, self.dropout2 = nn.Dropout(dropout), nn.Dropout(dropout)


class BL_PostNorm(_Block):
    def forward(self, x, mask):
        x = self.norm1(x + self.dropout1(self.attn(x, x, x, mask)))      # slip: post-norm
        return self.norm2(x + self.dropout2(self.ff(x)))


class BL_RawKV(_Block):
    def forward(self, x, mask):
        y = self.norm1(x)
        x = x + self.dropout1(self.attn(y, x, x, mask))                  # slip: keys/values from raw x
        return x + self.dropout2(self.ff(self.norm2(x)))


class BL_NoDropout1(_Block):
    def forward(self, x, mask):
        y = self.norm1(x)
        x = x + self.attn(y, y, y, mask)                                  # slip: no dropout on attention
        return x + self.dropout2(self.ff(self.norm2(x)))


class BL_OneNorm(_Block):
    def forward(self, x, mask):
        y = self.norm1(x)
        x = x + self.dropout1(self.attn(y, y, y, mask))
        return x + self.dropout2(self.ff(self.norm1(x)))                 # slip: norm1 reused


class BL_ResidualFromNorm(_Block):
    def forward(self, x, mask):
        x = self.norm1(x)                                                 # slip: overwrote x with its norm
        x = x + self.dropout1(self.attn(x, x, x, mask))
        return x + self.dropout2(self.ff(self.norm2(x)))


class BL_NoMask(_Block):
    def forward(self, x, mask):
        y = self.norm1(x)
        x = x + self.dropout1(self.attn(y, y, y))                         # slip: mask not passed
        return x + self.dropout2(self.ff(self.norm2(x)))


class BL_Parallel(_Block):
    def forward(self, x, mask):
        y = self.norm1(x)
        a = self.dropout1(self.attn(y, y, y, mask))
        return x + a + self.dropout2(self.ff(self.norm2(x)))             # slip: FFN reads x before attention


class BL_SwappedDropouts(_Block):
    def forward(self, x, mask):
        y = self.norm1(x)
        x = x + self.dropout1(self.attn(y, y, y, mask))
        return x + self.dropout1(self.ff(self.norm2(x)))                 # slip: dropout1 twice (same p) - harmless?


# ---------------------------------------------------------------- gpt


class _GPT(nn.Module):
    def __init__(self, vocab_size, d_model, num_heads, num_layers, d_ff, max_len, dropout=0.0):
        super().__init__()
        self.d_model, self.max_len = d_model, max_len
        self.embed = nn.Embedding(vocab_size, d_model)
        self.pos = LearnedPositionalEncoding(d_model, max_len, dropout)
        self.layers = nn.ModuleList(GPTBlock(d_model, num_heads, d_ff, dropout) for _ in range(num_layers))
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size, bias=False)
        self.tie()

    def tie(self):
        self.head.weight = self.embed.weight

    def forward(self, tokens):
        x = self.pos(self.embed(tokens) * math.sqrt(self.d_model))
        mask = causal_mask(tokens.size(1), tokens.device)
        for layer in self.layers:
            x = layer(x, mask)
        return self.head(self.norm(x))


class G_TieByCopy(_GPT):
    def tie(self):
        self.head.weight = nn.Parameter(self.embed.weight.clone())       # slip: a copy, not the same parameter


class G_TieData(_GPT):
    def tie(self):
        self.head.weight.data = self.embed.weight.data                   # slip: shares storage, two Parameters


class G_NoScale(_GPT):
    def forward(self, tokens):
        x = self.pos(self.embed(tokens))                                  # slip: no sqrt(d_model)
        mask = causal_mask(tokens.size(1), tokens.device)
        for layer in self.layers:
            x = layer(x, mask)
        return self.head(self.norm(x))


class G_ScaleAfterPos(_GPT):
    def forward(self, tokens):
        x = self.pos(self.embed(tokens)) * math.sqrt(self.d_model)       # slip: scales the positions too
        mask = causal_mask(tokens.size(1), tokens.device)
        for layer in self.layers:
            x = layer(x, mask)
        return self.head(self.norm(x))


class G_NoFinalNorm(_GPT):
    def forward(self, tokens):
        x = self.pos(self.embed(tokens) * math.sqrt(self.d_model))
        mask = causal_mask(tokens.size(1), tokens.device)
        for layer in self.layers:
            x = layer(x, mask)
        return self.head(x)                                               # slip: final LayerNorm skipped


class G_AllOnesMask(_GPT):
    def forward(self, tokens):
        x = self.pos(self.embed(tokens) * math.sqrt(self.d_model))
        T = tokens.size(1)
        mask = torch.ones(T, T, dtype=torch.bool)                         # slip: a mask that hides nothing
        for layer in self.layers:
            x = layer(x, mask)
        return self.head(self.norm(x))


class G_OnlyLastLayer(_GPT):
    def forward(self, tokens):
        x0 = self.pos(self.embed(tokens) * math.sqrt(self.d_model))
        mask = causal_mask(tokens.size(1), tokens.device)
        for layer in self.layers:
            x = layer(x0, mask)                                           # slip: each layer reads the embeddings
        return self.head(self.norm(x))


class G_LogitsByEmbedMatmul(_GPT):
    def tie(self):
        pass                                                              # slip: no tie ...

    def forward(self, tokens):
        x = self.pos(self.embed(tokens) * math.sqrt(self.d_model))
        mask = causal_mask(tokens.size(1), tokens.device)
        for layer in self.layers:
            x = layer(x, mask)
        return self.head(self.norm(x))


# ---------------------------------------------------------------- sampling_distribution


def _topp(probs, top_p):
    ranked = probs.sort(-1, descending=True).values
    before = (ranked.cumsum(-1) < top_p).sum(-1, keepdim=True)
    last = ranked.gather(-1, before.clamp(max=probs.size(-1) - 1))
    return probs.masked_fill(probs < last, 0.0)


def sd_temp_multiplies(logits, temperature=1.0, top_k=None, top_p=None):
    if temperature == 0:
        return F.one_hot(logits.argmax(-1), logits.size(-1)).float()
    z = logits.float() * temperature                        # slip: multiplies by τ
    if top_k is not None:
        kth = torch.topk(z, min(top_k, z.size(-1)), dim=-1).values[..., -1:]
        z = z.masked_fill(z < kth, float("-inf"))
    probs = z.softmax(-1)
    if top_p is not None and top_p < 1:
        probs = _topp(probs, top_p)
    return probs / probs.sum(-1, keepdim=True)


def sd_topk_scatter(logits, temperature=1.0, top_k=None, top_p=None):
    if temperature == 0:
        return F.one_hot(logits.argmax(-1), logits.size(-1)).float()
    z = logits.float() / temperature
    if top_k is not None:
        idx = torch.topk(z, min(top_k, z.size(-1)), dim=-1).indices
        keep = torch.zeros_like(z, dtype=torch.bool).scatter(-1, idx, True)   # slip: ties at the k-th dropped
        z = z.masked_fill(~keep, float("-inf"))
    probs = z.softmax(-1)
    if top_p is not None and top_p < 1:
        probs = _topp(probs, top_p)
    return probs / probs.sum(-1, keepdim=True)


def sd_topp_sorted_not_unsorted(logits, temperature=1.0, top_k=None, top_p=None):
    if temperature == 0:
        return F.one_hot(logits.argmax(-1), logits.size(-1)).float()
    z = logits.float() / temperature
    if top_k is not None:
        kth = torch.topk(z, min(top_k, z.size(-1)), dim=-1).values[..., -1:]
        z = z.masked_fill(z < kth, float("-inf"))
    probs = z.softmax(-1)
    if top_p is not None and top_p < 1:
        ranked, order = probs.sort(-1, descending=True)
        drop = (ranked.cumsum(-1) - ranked) >= top_p          # tokens after the one that reaches p
        probs = probs.masked_fill(drop, 0.0)                  # slip: sorted mask applied to unsorted tokens
    return probs / probs.sum(-1, keepdim=True)


def sd_topp_on_raw(logits, temperature=1.0, top_k=None, top_p=None):
    if temperature == 0:
        return F.one_hot(logits.argmax(-1), logits.size(-1)).float()
    z = logits.float() / temperature
    if top_k is not None:
        kth = torch.topk(z, min(top_k, z.size(-1)), dim=-1).values[..., -1:]
        z = z.masked_fill(z < kth, float("-inf"))
    probs = z.softmax(-1)
    if top_p is not None and top_p < 1:
        raw = logits.float().softmax(-1)                      # slip: nucleus chosen on the untempered distribution
        keep = _topp(raw, top_p) > 0
        probs = probs * keep
    return probs / probs.sum(-1, keepdim=True)


def sd_no_renorm(logits, temperature=1.0, top_k=None, top_p=None):
    if temperature == 0:
        return F.one_hot(logits.argmax(-1), logits.size(-1)).float()
    z = logits.float() / temperature
    if top_k is not None:
        kth = torch.topk(z, min(top_k, z.size(-1)), dim=-1).values[..., -1:]
        z = z.masked_fill(z < kth, float("-inf"))
    probs = z.softmax(-1)
    if top_p is not None and top_p < 1:
        probs = _topp(probs, top_p)
    return probs                                              # slip: not renormalised after top-p


def sd_no_greedy_case(logits, temperature=1.0, top_k=None, top_p=None):
    z = logits.float() / max(temperature, 1e-8)               # slip: τ=0 handled by a tiny τ (ties, overflow?)
    if top_k is not None:
        kth = torch.topk(z, min(top_k, z.size(-1)), dim=-1).values[..., -1:]
        z = z.masked_fill(z < kth, float("-inf"))
    probs = z.softmax(-1)
    if top_p is not None and top_p < 1:
        probs = _topp(probs, top_p)
    return probs / probs.sum(-1, keepdim=True)


def sd_topp_ge(logits, temperature=1.0, top_k=None, top_p=None):
    if temperature == 0:
        return F.one_hot(logits.argmax(-1), logits.size(-1)).float()
    z = logits.float() / temperature
    if top_k is not None:
        kth = torch.topk(z, min(top_k, z.size(-1)), dim=-1).values[..., -1:]
        z = z.masked_fill(z < kth, float("-inf"))
    probs = z.softmax(-1)
    if top_p is not None and top_p < 1:
        ranked, order = probs.sort(-1, descending=True)
        keep_sorted = ranked.cumsum(-1) <= top_p             # slip: keeps only the tokens BELOW p (misses the crossing one)
        keep_sorted[..., 0] = True
        keep = torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)
        probs = probs * keep
    return probs / probs.sum(-1, keepdim=True)


def sd_topk_before_temperature_inplace(logits, temperature=1.0, top_k=None, top_p=None):
    if temperature == 0:
        return F.one_hot(logits.argmax(-1), logits.size(-1)).float()
    z = logits
    if top_k is not None:
        kth = torch.topk(z, min(top_k, z.size(-1)), dim=-1).values[..., -1:]
        z[z < kth] = float("-inf")                            # slip: edits the caller's logits in place
    probs = (z / temperature).softmax(-1)
    if top_p is not None and top_p < 1:
        probs = _topp(probs, top_p)
    return probs / probs.sum(-1, keepdim=True)


# ---------------------------------------------------------------- cached_attention_step


def _attend(q, ck, cv):
    w = torch.softmax(q @ ck.transpose(-2, -1) / math.sqrt(q.size(-1)), dim=-1)
    return w @ cv


def ck_position_zero(q, k, v, cache_k, cache_v):
    pos = torch.tensor([0])                                   # slip: every token at position 0
    q, k = course_apply_rope(q, pos), course_apply_rope(k, pos)
    cache_k, cache_v = torch.cat([cache_k, k], 2), torch.cat([cache_v, v], 2)
    return _attend(q, cache_k, cache_v), cache_k, cache_v


def ck_position_plus_one(q, k, v, cache_k, cache_v):
    pos = torch.tensor([cache_k.size(2) + 1])                 # slip: position t+1
    q, k = course_apply_rope(q, pos), course_apply_rope(k, pos)
    cache_k, cache_v = torch.cat([cache_k, k], 2), torch.cat([cache_v, v], 2)
    return _attend(q, cache_k, cache_v), cache_k, cache_v


def ck_q_not_rotated(q, k, v, cache_k, cache_v):
    pos = torch.tensor([cache_k.size(2)])
    k = course_apply_rope(k, pos)                             # slip: the query is not rotated
    cache_k, cache_v = torch.cat([cache_k, k], 2), torch.cat([cache_v, v], 2)
    return _attend(q, cache_k, cache_v), cache_k, cache_v


def ck_v_rotated(q, k, v, cache_k, cache_v):
    pos = torch.tensor([cache_k.size(2)])
    q, k, v = (course_apply_rope(t, pos) for t in (q, k, v))  # slip: values rotated too
    cache_k, cache_v = torch.cat([cache_k, k], 2), torch.cat([cache_v, v], 2)
    return _attend(q, cache_k, cache_v), cache_k, cache_v


def ck_prepend(q, k, v, cache_k, cache_v):
    pos = torch.tensor([cache_k.size(2)])
    q, k = course_apply_rope(q, pos), course_apply_rope(k, pos)
    cache_k, cache_v = torch.cat([k, cache_k], 2), torch.cat([v, cache_v], 2)   # slip: newest first in the cache
    return _attend(q, cache_k, cache_v), cache_k, cache_v


def ck_no_scale(q, k, v, cache_k, cache_v):
    pos = torch.tensor([cache_k.size(2)])
    q, k = course_apply_rope(q, pos), course_apply_rope(k, pos)
    cache_k, cache_v = torch.cat([cache_k, k], 2), torch.cat([cache_v, v], 2)
    w = torch.softmax(q @ cache_k.transpose(-2, -1), dim=-1)  # slip: no 1/sqrt(d)
    return w @ cache_v, cache_k, cache_v


def ck_rerotate_cache(q, k, v, cache_k, cache_v):
    t = cache_k.size(2)
    q = course_apply_rope(q, torch.tensor([t]))
    cache_k = course_apply_rope(torch.cat([cache_k, k], 2), torch.arange(t + 1))   # slip: rotates cached keys again
    cache_v = torch.cat([cache_v, v], 2)
    return _attend(q, cache_k, cache_v), cache_k, cache_v


def ck_unrotated_cache(q, k, v, cache_k, cache_v):
    pos = torch.tensor([cache_k.size(2)])
    qr, kr = course_apply_rope(q, pos), course_apply_rope(k, pos)
    out = _attend(qr, torch.cat([cache_k, kr], 2), torch.cat([cache_v, v], 2))
    return out, torch.cat([cache_k, k], 2), torch.cat([cache_v, v], 2)   # slip: caches the UNrotated key


# ---------------------------------------------------------------- apply_rope


def rp_neighbours(x, positions, base=10000.0):
    d = x.size(-1)
    theta = base ** (-2 * torch.arange(d // 2, dtype=torch.float32) / d)
    a = positions.float()[:, None] * theta
    cos, sin = a.cos(), a.sin()
    x1, x2 = x[..., 0::2], x[..., 1::2]                       # slip: RoFormer pairs (2i, 2i+1)
    out = torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)
    return out.flatten(-2)


def rp_no_two(x, positions, base=10000.0):
    d = x.size(-1)
    theta = base ** (-torch.arange(d // 2, dtype=torch.float32) / d)   # slip: i/d instead of 2i/d
    a = positions.float()[:, None] * theta
    cos, sin = a.cos(), a.sin()
    x1, x2 = x[..., :d // 2], x[..., d // 2:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


def rp_wrong_sign(x, positions, base=10000.0):
    d = x.size(-1)
    theta = base ** (-2 * torch.arange(d // 2, dtype=torch.float32) / d)
    a = positions.float()[:, None] * theta
    cos, sin = a.cos(), a.sin()
    x1, x2 = x[..., :d // 2], x[..., d // 2:]
    return torch.cat([x1 * cos + x2 * sin, -x1 * sin + x2 * cos], dim=-1)   # slip: rotates by -angle


def rp_ignores_positions(x, positions, base=10000.0):
    d, T = x.size(-1), x.size(-2)
    theta = base ** (-2 * torch.arange(d // 2, dtype=torch.float32) / d)
    a = torch.arange(T, dtype=torch.float32)[:, None] * theta   # slip: uses 0..T-1, not the positions given
    cos, sin = a.cos(), a.sin()
    x1, x2 = x[..., :d // 2], x[..., d // 2:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


def rp_int_division(x, positions, base=10000.0):
    d = x.size(-1)
    theta = base ** (-2 * torch.arange(d // 2) // d).float()   # slip: integer floor division
    a = positions.float()[:, None] * theta
    cos, sin = a.cos(), a.sin()
    x1, x2 = x[..., :d // 2], x[..., d // 2:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


def rp_inplace(x, positions, base=10000.0):
    d = x.size(-1)
    theta = base ** (-2 * torch.arange(d // 2, dtype=torch.float32) / d)
    a = positions.float()[:, None] * theta
    cos, sin = a.cos(), a.sin()
    x1, x2 = x[..., :d // 2].clone(), x[..., d // 2:].clone()
    x[..., :d // 2] = x1 * cos - x2 * sin                      # slip: writes into the caller's tensor
    x[..., d // 2:] = x1 * sin + x2 * cos
    return x


def rp_base_d_model(x, positions, base=10000.0):
    d = x.size(-1)
    theta = 10000.0 ** (-2 * torch.arange(d // 2, dtype=torch.float32) / d)   # slip: ignores `base`
    a = positions.float()[:, None] * theta
    cos, sin = a.cos(), a.sin()
    x1, x2 = x[..., :d // 2], x[..., d // 2:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


# ---------------------------------------------------------------- grouped_query_attention


def gq_repeat(q, k, v, mask=None):
    g = q.size(1) // k.size(1)
    return scaled_dot_product_attention(q, k.repeat(1, g, 1, 1), v.repeat(1, g, 1, 1), mask)   # slip: j % h_kv


def gq_no_mask(q, k, v, mask=None):
    g = q.size(1) // k.size(1)
    return scaled_dot_product_attention(q, k.repeat_interleave(g, 1), v.repeat_interleave(g, 1))   # slip


def gq_mask_inverted(q, k, v, mask=None):
    g = q.size(1) // k.size(1)
    return scaled_dot_product_attention(q, k.repeat_interleave(g, 1), v.repeat_interleave(g, 1),
                                        None if mask is None else ~mask)   # slip: ~mask


def gq_only_k_expanded(q, k, v, mask=None):
    g = q.size(1) // k.size(1)
    k = k.repeat_interleave(g, 1)
    v = v.repeat(1, g, 1, 1)                                   # slip: keys interleaved, values tiled
    return scaled_dot_product_attention(q, k, v, mask)


def gq_own_causal(q, k, v, mask=None):
    g = q.size(1) // k.size(1)
    T = q.size(2)
    return scaled_dot_product_attention(q, k.repeat_interleave(g, 1), v.repeat_interleave(g, 1),
                                        causal_mask(T))        # slip: its own causal mask, ignores the one given


def gq_groups_reshape_wrong(q, k, v, mask=None):
    B, h, T, d = q.shape
    h_kv = k.size(1)
    qg = q.reshape(B, h // h_kv, h_kv, T, d)                   # slip: reshape groups head j with kv head j % h_kv
    s = qg @ k[:, None].transpose(-2, -1) / math.sqrt(d)
    if mask is not None:
        m = torch.broadcast_to(mask, (B, h, T, T)).reshape(B, h // h_kv, h_kv, T, T)
        s = s.masked_fill(~m, float("-inf"))
    return (s.softmax(-1) @ v[:, None]).reshape(B, h, T, d)


# ================================================================ right answers


def ok_nl_manual(logits, tokens, pad_id):
    logp = logits[:, :-1].log_softmax(-1)
    tg = tokens[:, 1:]
    nll = -logp.gather(-1, tg[..., None])[..., 0]
    keep = tg != pad_id
    return nll[keep].mean()


class OK_BlockOneLine(_Block):
    def forward(self, x, mask):
        h = x + self.dropout1(self.attn(*(self.norm1(x),) * 3, mask=mask))
        return h + self.dropout2(self.ff(self.norm2(h)))


class OK_GPT_ReverseTie(_GPT):
    def tie(self):
        self.embed.weight = self.head.weight                  # the other direction: still ONE parameter


class OK_GPT_EmbedMatmul(_GPT):
    def forward(self, tokens):
        x = self.embed(tokens) * math.sqrt(self.d_model)
        x = self.pos(x)
        T = tokens.size(1)
        mask = torch.ones(T, T, dtype=torch.bool).tril()
        for layer in self.layers:
            x = layer(x, mask)
        return self.norm(x) @ self.embed.weight.T


def ok_sd_power(logits, temperature=1.0, top_k=None, top_p=None):
    if temperature == 0:
        out = torch.zeros_like(logits, dtype=torch.float32)
        return out.scatter(-1, logits.argmax(-1, keepdim=True), 1.0)
    p = logits.double().softmax(-1) ** (1.0 / temperature)    # softmax(z)^(1/τ) renormalised = softmax(z/τ)
    p = p / p.sum(-1, keepdim=True)
    if top_k is not None:
        kth = p.topk(min(top_k, p.size(-1)), -1).values[..., -1:]
        p = torch.where(p >= kth, p, 0.0)
        p = p / p.sum(-1, keepdim=True)
    if top_p is not None and top_p < 1:
        ranked = p.sort(-1, descending=True).values
        mass_before = ranked.cumsum(-1) - ranked
        threshold = torch.where(mass_before < top_p, ranked, torch.inf).amin(-1, keepdim=True)
        p = torch.where(p >= threshold, p, 0.0)
    return (p / p.sum(-1, keepdim=True)).float()


def ok_sd_scatter_back(logits, temperature=1.0, top_k=None, top_p=None):
    if temperature == 0:
        return (logits == logits.max(-1, keepdim=True).values).float().cumsum(-1).eq(1).float() * \
            (logits == logits.max(-1, keepdim=True).values).float()
    z = logits.float() / temperature
    if top_k is not None:
        z = torch.where(z >= z.topk(min(top_k, z.size(-1)), -1).values[..., -1:], z, -torch.inf)
    p = z.softmax(-1)
    if top_p is not None and top_p < 1:
        ranked, order = p.sort(-1, descending=True)
        keep_sorted = (ranked.cumsum(-1) - ranked) < top_p
        last_kept = torch.where(keep_sorted, ranked, torch.inf).amin(-1, keepdim=True)
        p = torch.where(p >= last_kept, p, 0.0)
    return p / p.sum(-1, keepdim=True)


def ok_ck_library(q, k, v, cache_k, cache_v):
    t = torch.tensor([cache_k.shape[-2]])
    cache_k = torch.cat((cache_k, course_apply_rope(k, t)), dim=-2)
    cache_v = torch.cat((cache_v, v), dim=-2)
    return scaled_dot_product_attention(course_apply_rope(q, t), cache_k, cache_v), cache_k, cache_v


def ok_rp_complex(x, positions, base=10000.0):
    d = x.size(-1)
    z = torch.complex(x[..., :d // 2].float(), x[..., d // 2:].float())
    theta = 1.0 / base ** (torch.arange(0, d, 2, dtype=torch.float64) / d)
    rot = torch.polar(torch.ones(len(positions), d // 2, dtype=torch.float64),
                      positions.double()[:, None] * theta).to(torch.complex64)
    w = z * rot
    return torch.cat([w.real, w.imag], -1).to(x.dtype)


def ok_rp_matrix(x, positions, base=10000.0):
    d = x.size(-1)
    half = d // 2
    theta = torch.exp(-math.log(base) * 2 * torch.arange(half, dtype=torch.float32) / d)
    a = positions.float()[:, None] * theta
    cos = torch.cat([a.cos(), a.cos()], -1)
    sin = torch.cat([a.sin(), a.sin()], -1)
    rotate_half = torch.cat([-x[..., half:], x[..., :half]], -1)
    return x * cos + rotate_half * sin


def ok_gq_einsum(q, k, v, mask=None):
    B, h, T, d = q.shape
    h_kv = k.size(1)
    qg = q.reshape(B, h_kv, h // h_kv, T, d)                  # consecutive query heads share kv head
    s = torch.einsum("bngtd,bnsd->bngts", qg, k) / math.sqrt(d)
    if mask is not None:
        m = torch.broadcast_to(mask, (B, h, T, k.size(2))).reshape(B, h_kv, h // h_kv, T, k.size(2))
        s = s.masked_fill(~m, float("-inf"))
    return torch.einsum("bngts,bnsd->bngtd", s.softmax(-1), v).reshape(B, h, T, d)


def ok_gq_index(q, k, v, mask=None):
    h, h_kv = q.size(1), k.size(1)
    idx = torch.arange(h) * h_kv // h                          # = j // (h / h_kv)
    return scaled_dot_product_attention(q, k[:, idx], v[:, idx], mask)


SLIPS = [
    ("next_token_loss", "no shift (predicts the current token)", nl_no_shift),
    ("next_token_loss", "shift reversed: logits[:,1:] vs tokens[:,:-1]", nl_shift_backwards),
    ("next_token_loss", "no ignore_index: pads counted", nl_pads_counted),
    ("next_token_loss", "masked sum / all positions (pads in the denominator)", nl_mean_over_all),
    ("next_token_loss", "returns .item() (a float)", nl_item),
    ("next_token_loss", "(B,T-1,V) straight into cross_entropy (class axis)", nl_class_axis),
    ("next_token_loss", "mask by input token instead of target", nl_mask_on_inputs),
    ("next_token_loss", "mean of per-row means", nl_per_row_mean),
    ("gpt_block", "post-norm", BL_PostNorm),
    ("gpt_block", "keys/values from raw x, query normed", BL_RawKV),
    ("gpt_block", "no dropout on the attention output", BL_NoDropout1),
    ("gpt_block", "norm1 reused before FFN", BL_OneNorm),
    ("gpt_block", "x overwritten by norm1(x): residual of normed", BL_ResidualFromNorm),
    ("gpt_block", "mask not passed to attention", BL_NoMask),
    ("gpt_block", "parallel: FFN reads x before attention", BL_Parallel),
    ("gpt", "tie by copy (new Parameter)", G_TieByCopy),
    ("gpt", "tie by .data (two Parameters, shared storage)", G_TieData),
    ("gpt", "no sqrt(d_model) scale", G_NoScale),
    ("gpt", "scale after positions added", G_ScaleAfterPos),
    ("gpt", "no final LayerNorm", G_NoFinalNorm),
    ("gpt", "all-True mask (no causality)", G_AllOnesMask),
    ("gpt", "each layer reads the embeddings (x0)", G_OnlyLastLayer),
    ("gpt", "no tie at all", G_LogitsByEmbedMatmul),
    ("sampling_distribution", "temperature multiplies", sd_temp_multiplies),
    ("sampling_distribution", "top-k by indices: ties at k-th dropped", sd_topk_scatter),
    ("sampling_distribution", "top-p mask in sorted order applied unsorted", sd_topp_sorted_not_unsorted),
    ("sampling_distribution", "top-p chosen on the untempered distribution", sd_topp_on_raw),
    ("sampling_distribution", "no renormalisation after top-p", sd_no_renorm),
    ("sampling_distribution", "τ=0 via tiny τ (no one-hot case)", sd_no_greedy_case),
    ("sampling_distribution", "top-p keeps cumsum <= p (misses crossing token)", sd_topp_ge),
    ("sampling_distribution", "top-k edits the caller's logits in place", sd_topk_before_temperature_inplace),
    ("cached_attention_step", "rotates at position 0", ck_position_zero),
    ("cached_attention_step", "rotates at position t+1", ck_position_plus_one),
    ("cached_attention_step", "query not rotated", ck_q_not_rotated),
    ("cached_attention_step", "values rotated too", ck_v_rotated),
    ("cached_attention_step", "newest prepended to the caches", ck_prepend),
    ("cached_attention_step", "no 1/sqrt(d)", ck_no_scale),
    ("cached_attention_step", "re-rotates the whole cache each step", ck_rerotate_cache),
    ("cached_attention_step", "caches the unrotated key", ck_unrotated_cache),
    ("apply_rope", "neighbour pairs (2i, 2i+1)", rp_neighbours),
    ("apply_rope", "theta = base^(-i/d) (factor 2 lost)", rp_no_two),
    ("apply_rope", "rotation by -angle", rp_wrong_sign),
    ("apply_rope", "uses arange(T), not positions", rp_ignores_positions),
    ("apply_rope", "integer floor division in exponent", rp_int_division),
    ("apply_rope", "in-place write into x", rp_inplace),
    ("apply_rope", "ignores base argument", rp_base_d_model),
    ("grouped_query_attention", "repeat (j % h_kv) instead of repeat_interleave", gq_repeat),
    ("grouped_query_attention", "mask not passed", gq_no_mask),
    ("grouped_query_attention", "mask inverted", gq_mask_inverted),
    ("grouped_query_attention", "k interleaved, v tiled", gq_only_k_expanded),
    ("grouped_query_attention", "own causal mask instead of given", gq_own_causal),
    ("grouped_query_attention", "reshape groups (h/h_kv, h_kv): j % h_kv", gq_groups_reshape_wrong),
]

CORRECT = [
    ("next_token_loss", "log_softmax + gather + boolean mean", ok_nl_manual),
    ("gpt_block", "one-line pre-norm with kwargs mask", OK_BlockOneLine),
    ("gpt", "tie the other way (embed.weight = head.weight)", OK_GPT_ReverseTie),
    ("gpt", "logits = LN(x) @ E^T, tril mask", OK_GPT_EmbedMatmul),
    # (softmax(z) ** (1/τ), renormalised, is exact on paper, but at τ = 0.001 the powers underflow to 0 and the
    #  check says so under some seeds: it is a slip in floating point, not a right answer; left out)
    ("sampling_distribution", "first-argmax one-hot via cumsum; mass-before top-p", ok_sd_scatter_back),
    ("cached_attention_step", "library attention, -2 axis", ok_ck_library),
    ("apply_rope", "complex multiplication (float64 angles)", ok_rp_complex),
    ("apply_rope", "rotate_half formulation", ok_rp_matrix),
    ("grouped_query_attention", "einsum over (h_kv, group)", ok_gq_einsum),
    ("grouped_query_attention", "index kv heads j*h_kv//h", ok_gq_index),
]


# ================================================================ batch 2: less textbook slips


def b2_nl_pad_zero(logits, tokens, pad_id):
    lg, tg = logits[:, :-1], tokens[:, 1:]
    return F.cross_entropy(lg.reshape(-1, lg.size(-1)), tg.reshape(-1), ignore_index=0)   # slip: 0, not pad_id


def b2_nl_sum(logits, tokens, pad_id):
    lg, tg = logits[:, :-1], tokens[:, 1:]
    return F.cross_entropy(lg.reshape(-1, lg.size(-1)), tg.reshape(-1), ignore_index=pad_id,
                           reduction="sum")                  # slip: sum, not mean


def b2_nl_nll_on_probs(logits, tokens, pad_id):
    lg, tg = logits[:, :-1], tokens[:, 1:]
    p = lg.softmax(-1)                                       # slip: probabilities into nll_loss (no log)
    return F.nll_loss(p.reshape(-1, p.size(-1)), tg.reshape(-1), ignore_index=pad_id)


class B2_BL_DropoutOverSum(_Block):
    def forward(self, x, mask):
        y = self.norm1(x)
        x = self.dropout1(x + self.attn(y, y, y, mask))       # slip: dropout on the residual sum
        return x + self.dropout2(self.ff(self.norm2(x)))


class B2_BL_NoSecondResidual(_Block):
    def forward(self, x, mask):
        y = self.norm1(x)
        x = x + self.dropout1(self.attn(y, y, y, mask))
        return self.dropout2(self.ff(self.norm2(x)))          # slip: second residual forgotten


class B2_BL_FFNFirst(_Block):
    def forward(self, x, mask):
        x = x + self.dropout2(self.ff(self.norm2(x)))         # slip: feed-forward before attention
        y = self.norm1(x)
        return x + self.dropout1(self.attn(y, y, y, mask))


class B2_G_Reversed(_GPT):
    def forward(self, tokens):
        x = self.pos(self.embed(tokens) * math.sqrt(self.d_model))
        mask = causal_mask(tokens.size(1), tokens.device)
        for layer in reversed(self.layers):                   # slip: blocks in reverse order
            x = layer(x, mask)
        return self.head(self.norm(x))


class B2_G_FloatMask(_GPT):
    def forward(self, tokens):
        x = self.pos(self.embed(tokens) * math.sqrt(self.d_model))
        T = tokens.size(1)
        mask = torch.tril(torch.ones(T, T))                   # slip: a float 0/1 mask, not bool
        for layer in self.layers:
            x = layer(x, mask)
        return self.head(self.norm(x))


class B2_G_PosTwice(_GPT):
    def forward(self, tokens):
        x = self.pos(self.pos(self.embed(tokens) * math.sqrt(self.d_model)))   # slip: positions added twice
        mask = causal_mask(tokens.size(1), tokens.device)
        for layer in self.layers:
            x = layer(x, mask)
        return self.head(self.norm(x))


class B2_OK_G_MaxLenMask(_GPT):
    def forward(self, tokens):
        T = tokens.size(1)
        x = self.pos(self.embed(tokens) * self.d_model ** 0.5)
        mask = causal_mask(self.max_len)[:T, :T]              # right: slice of the max_len mask
        for layer in self.layers:
            x = layer(x, mask)
        return self.head(self.norm(x))


def b2_sd_long_onehot(logits, temperature=1.0, top_k=None, top_p=None):
    if temperature == 0:
        return F.one_hot(logits.argmax(-1), logits.size(-1))  # slip: int64 one-hot
    z = logits.float() / temperature
    if top_k is not None:
        kth = torch.topk(z, min(top_k, z.size(-1)), dim=-1).values[..., -1:]
        z = z.masked_fill(z < kth, float("-inf"))
    probs = z.softmax(-1)
    if top_p is not None and top_p < 1:
        probs = _topp(probs, top_p)
    return probs / probs.sum(-1, keepdim=True)


def b2_sd_topk_strict(logits, temperature=1.0, top_k=None, top_p=None):
    if temperature == 0:
        return F.one_hot(logits.argmax(-1), logits.size(-1)).float()
    z = logits.float() / temperature
    if top_k is not None:
        kth = torch.topk(z, min(top_k, z.size(-1)), dim=-1).values[..., -1:]
        z = z.masked_fill(z <= kth, float("-inf"))            # slip: <= drops the k-th too (keeps k-1)
    probs = z.softmax(-1)
    if top_p is not None and top_p < 1:
        probs = _topp(probs, top_p)
    return probs / probs.sum(-1, keepdim=True)


def b2_sd_topk_no_min(logits, temperature=1.0, top_k=None, top_p=None):
    if temperature == 0:
        return F.one_hot(logits.argmax(-1), logits.size(-1)).float()
    z = logits.float() / temperature
    if top_k is not None:
        kth = torch.topk(z, top_k, dim=-1).values[..., -1:]   # slip: top_k > V raises
        z = z.masked_fill(z < kth, float("-inf"))
    probs = z.softmax(-1)
    if top_p is not None and top_p < 1:
        probs = _topp(probs, top_p)
    return probs / probs.sum(-1, keepdim=True)


def b2_sd_softmax_dim0(logits, temperature=1.0, top_k=None, top_p=None):
    if temperature == 0:
        return F.one_hot(logits.argmax(-1), logits.size(-1)).float()
    z = logits.float() / temperature
    if top_k is not None:
        kth = torch.topk(z, min(top_k, z.size(-1)), dim=-1).values[..., -1:]
        z = z.masked_fill(z < kth, float("-inf"))
    probs = z.softmax(0)                                      # slip: softmax over the rows
    if top_p is not None and top_p < 1:
        probs = _topp(probs, top_p)
    return probs / probs.sum(-1, keepdim=True)


def b2_sd_topp_ascending(logits, temperature=1.0, top_k=None, top_p=None):
    if temperature == 0:
        return F.one_hot(logits.argmax(-1), logits.size(-1)).float()
    z = logits.float() / temperature
    if top_k is not None:
        kth = torch.topk(z, min(top_k, z.size(-1)), dim=-1).values[..., -1:]
        z = z.masked_fill(z < kth, float("-inf"))
    probs = z.softmax(-1)
    if top_p is not None and top_p < 1:
        ranked, order = probs.sort(-1)                        # slip: ascending sort
        keep_sorted = (ranked.cumsum(-1) - ranked) < top_p
        keep = torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)
        probs = probs * keep
    return probs / probs.sum(-1, keepdim=True)


def b2_ck_softmax_query_axis(q, k, v, cache_k, cache_v):
    pos = torch.tensor([cache_k.size(2)])
    q, k = course_apply_rope(q, pos), course_apply_rope(k, pos)
    cache_k, cache_v = torch.cat([cache_k, k], 2), torch.cat([cache_v, v], 2)
    w = torch.softmax(q @ cache_k.transpose(-2, -1) / math.sqrt(q.size(-1)), dim=-2)   # slip: over the 1 query
    return w @ cache_v, cache_k, cache_v


def b2_ck_int_position(q, k, v, cache_k, cache_v):
    t = cache_k.size(2)
    q, k = course_apply_rope(q, t), course_apply_rope(k, t)   # slip: an int, not a (1,) tensor
    cache_k, cache_v = torch.cat([cache_k, k], 2), torch.cat([cache_v, v], 2)
    return _attend(q, cache_k, cache_v), cache_k, cache_v


def b2_ck_position_from_q(q, k, v, cache_k, cache_v):
    pos = torch.tensor([q.size(2)])                           # slip: q.size(2) = 1, not the cache length
    q, k = course_apply_rope(q, pos), course_apply_rope(k, pos)
    cache_k, cache_v = torch.cat([cache_k, k], 2), torch.cat([cache_v, v], 2)
    return _attend(q, cache_k, cache_v), cache_k, cache_v


def b2_ck_out_from_new_only(q, k, v, cache_k, cache_v):
    pos = torch.tensor([cache_k.size(2)])
    q, k = course_apply_rope(q, pos), course_apply_rope(k, pos)
    out = _attend(q, cache_k, cache_v) if cache_k.size(2) else v   # slip: attends over the OLD cache only
    return out, torch.cat([cache_k, k], 2), torch.cat([cache_v, v], 2)


def b2_rp_halves_swapped_out(x, positions, base=10000.0):
    d = x.size(-1)
    theta = base ** (-2 * torch.arange(d // 2, dtype=torch.float32) / d)
    a = positions.float()[:, None] * theta
    cos, sin = a.cos(), a.sin()
    x1, x2 = x[..., :d // 2], x[..., d // 2:]
    return torch.cat([x1 * sin + x2 * cos, x1 * cos - x2 * sin], dim=-1)   # slip: halves in the wrong order


def b2_rp_cos_sin_swapped(x, positions, base=10000.0):
    d = x.size(-1)
    theta = base ** (-2 * torch.arange(d // 2, dtype=torch.float32) / d)
    a = positions.float()[:, None] * theta
    cos, sin = a.sin(), a.cos()                                # slip: sin and cos swapped
    x1, x2 = x[..., :d // 2], x[..., d // 2:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


def b2_rp_d_from_T(x, positions, base=10000.0):
    d = x.size(-1)
    T = x.size(-2)
    theta = base ** (-2 * torch.arange(d // 2, dtype=torch.float32) / (2 * d))   # slip: /(2d): the "d" of the pair count confused
    a = positions.float()[:, None] * theta
    cos, sin = a.cos(), a.sin()
    x1, x2 = x[..., :d // 2], x[..., d // 2:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


def b2_rp_float32_out(x, positions, base=10000.0):
    d = x.size(-1)
    theta = base ** (-2 * torch.arange(d // 2, dtype=torch.float32) / d)
    a = positions.float()[:, None] * theta
    cos, sin = a.cos(), a.sin()
    x1, x2 = x.float()[..., :d // 2], x.float()[..., d // 2:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)   # dtype: float32 whatever x was (may be fine)


def b2_gq_group_inverted(q, k, v, mask=None):
    g = k.size(1) // q.size(1)                                 # slip: h_kv // h = 0
    return scaled_dot_product_attention(q, k.repeat_interleave(g, 1), v.repeat_interleave(g, 1), mask)


def b2_gq_mask_interleaved(q, k, v, mask=None):
    g = q.size(1) // k.size(1)
    if mask is not None:
        mask = mask.repeat_interleave(g, dim=1)                # slip: "expands" the mask too, along axis 1
    return scaled_dot_product_attention(q, k.repeat_interleave(g, 1), v.repeat_interleave(g, 1), mask)


def b2_gq_manual_no_scale(q, k, v, mask=None):
    g = q.size(1) // k.size(1)
    k, v = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
    s = q @ k.transpose(-2, -1)                                # slip: no 1/sqrt(d)
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return s.softmax(-1) @ v


def b2_gq_kv_sliced(q, k, v, mask=None):
    h, h_kv = q.size(1), k.size(1)
    outs = []
    for j in range(h):
        kv = j // h_kv                                         # slip: j // h_kv instead of j // (h / h_kv)
        outs.append(scaled_dot_product_attention(q[:, j:j + 1], k[:, kv:kv + 1], v[:, kv:kv + 1],
                                                 None if mask is None else mask))
    return torch.cat(outs, 1)


SLIPS += [
    ("next_token_loss", "b2: ignore_index=0 hard-coded", b2_nl_pad_zero),
    ("next_token_loss", "b2: reduction='sum'", b2_nl_sum),
    ("next_token_loss", "b2: nll_loss on probabilities (no log)", b2_nl_nll_on_probs),
    ("gpt_block", "b2: dropout over the residual sum", B2_BL_DropoutOverSum),
    ("gpt_block", "b2: second residual forgotten", B2_BL_NoSecondResidual),
    ("gpt_block", "b2: FFN before attention", B2_BL_FFNFirst),
    ("gpt", "b2: blocks in reverse order", B2_G_Reversed),
    ("gpt", "b2: float 0/1 tril mask", B2_G_FloatMask),
    ("gpt", "b2: positions added twice", B2_G_PosTwice),
    ("sampling_distribution", "b2: int64 one-hot at τ=0", b2_sd_long_onehot),
    ("sampling_distribution", "b2: top-k with <= (keeps k-1)", b2_sd_topk_strict),
    ("sampling_distribution", "b2: topk(k) without min(k, V)", b2_sd_topk_no_min),
    ("sampling_distribution", "b2: softmax over dim 0", b2_sd_softmax_dim0),
    ("sampling_distribution", "b2: top-p on ascending sort", b2_sd_topp_ascending),
    ("cached_attention_step", "b2: softmax over the query axis", b2_ck_softmax_query_axis),
    ("cached_attention_step", "b2: position passed as int", b2_ck_int_position),
    ("cached_attention_step", "b2: position = q.size(2) (=1)", b2_ck_position_from_q),
    ("cached_attention_step", "b2: attends over the old cache only", b2_ck_out_from_new_only),
    ("apply_rope", "b2: output halves in the wrong order", b2_rp_halves_swapped_out),
    ("apply_rope", "b2: sin and cos swapped", b2_rp_cos_sin_swapped),
    ("apply_rope", "b2: exponent over 2d", b2_rp_d_from_T),
    ("apply_rope", "b2: returns float32 whatever x's dtype", b2_rp_float32_out),
    ("grouped_query_attention", "b2: group = h_kv // h (0)", b2_gq_group_inverted),
    ("grouped_query_attention", "b2: mask repeat_interleaved on axis 1", b2_gq_mask_interleaved),
    ("grouped_query_attention", "b2: manual, no 1/sqrt(d)", b2_gq_manual_no_scale),
    ("grouped_query_attention", "b2: loop, kv head j // h_kv", b2_gq_kv_sliced),
]
CORRECT += [
    ("gpt", "b2: causal_mask(max_len)[:T,:T]", B2_OK_G_MaxLenMask),
]
