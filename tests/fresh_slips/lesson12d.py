import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from course_utils.attention import MultiHeadAttention, scaled_dot_product_attention
from course_utils.gpt import GPTBlock
from course_utils.masks import causal_mask
from course_utils.positions import LearnedPositionalEncoding, apply_rope
from course_utils.transformer import PositionwiseFeedForward


# ---------------- next_token_loss ----------------
def loss_no_shift(logits, tokens, pad_id):
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), tokens.reshape(-1), ignore_index=pad_id)  # slip


def loss_pad_counted(logits, tokens, pad_id):
    lg, tg = logits[:, :-1], tokens[:, 1:]
    return F.cross_entropy(lg.reshape(-1, lg.size(-1)), tg.reshape(-1))          # slip: no ignore_index


def loss_u_mean_of_rows(logits, tokens, pad_id):
    lg, tg = logits[:, :-1], tokens[:, 1:]
    nll = F.cross_entropy(lg.transpose(1, 2), tg, ignore_index=pad_id, reduction="none")   # (B, T-1)
    real = (tg != pad_id).float()
    return ((nll * real).sum(1) / real.sum(1).clamp(min=1)).mean()                # slip: mean of per-row means


def loss_ok_gather(logits, tokens, pad_id):
    logp = logits[:, :-1].log_softmax(-1)
    tg = tokens[:, 1:]
    nll = -logp.gather(-1, tg.clamp(min=0)[..., None]).squeeze(-1)
    keep = tg != pad_id
    return nll[keep].sum() / keep.sum()


# ---------------- gpt_block ----------------
class _Base(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.0):
        super().__init__()
        self.norm1 = nn.LayerNorm(d_model)
        self.attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.norm2 = nn.LayerNorm(d_model)
        self.ff = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.dropout1, self.dropout2 = nn.Dropout(dropout), nn.Dropout(dropout)


class BlockPostNorm(_Base):
    def forward(self, x, mask):
        x = self.norm1(x + self.dropout1(self.attn(x, x, x, mask)))              # slip: post-norm
        return self.norm2(x + self.dropout2(self.ff(x)))


class BlockUSameNorm(_Base):
    def forward(self, x, mask):
        y = self.norm1(x)
        x = x + self.dropout1(self.attn(y, y, y, mask))
        return x + self.dropout2(self.ff(self.norm1(x)))                         # slip: norm1 again


class BlockUResidualFromNormed(_Base):
    def forward(self, x, mask):
        x = self.norm1(x)                                                        # slip: overwrites x
        x = x + self.dropout1(self.attn(x, x, x, mask))
        return x + self.dropout2(self.ff(self.norm2(x)))


class BlockOk(_Base):
    def forward(self, x, mask):
        h = x + self.dropout1(self.attn(*(self.norm1(x),) * 3, mask=mask))
        return torch.add(h, self.dropout2(self.ff(self.norm2(h))))


# ---------------- gpt ----------------
class _GPTBase(nn.Module):
    def __init__(self, vocab_size, d_model, num_heads, num_layers, d_ff, max_len, dropout=0.0):
        super().__init__()
        self.d_model, self.max_len = d_model, max_len
        self.embed = nn.Embedding(vocab_size, d_model)
        self.pos = LearnedPositionalEncoding(d_model, max_len, dropout)
        self.layers = nn.ModuleList(GPTBlock(d_model, num_heads, d_ff, dropout) for _ in range(num_layers))
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size, bias=False)


class GPTCopyTie(_GPTBase):
    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.head.weight = nn.Parameter(self.embed.weight.detach().clone())      # slip: a copy, not a tie

    def forward(self, tokens):
        x = self.pos(self.embed(tokens) * math.sqrt(self.d_model))
        mask = causal_mask(tokens.size(1))
        for layer in self.layers:
            x = layer(x, mask)
        return self.head(self.norm(x))


class GPTNoScale(_GPTBase):
    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.head.weight = self.embed.weight

    def forward(self, tokens):
        x = self.pos(self.embed(tokens))                                         # slip: no sqrt(d_model)
        mask = causal_mask(tokens.size(1))
        for layer in self.layers:
            x = layer(x, mask)
        return self.head(self.norm(x))


class GPTULoopVar(_GPTBase):
    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.head.weight = self.embed.weight

    def forward(self, tokens):
        x = self.pos(self.embed(tokens) * math.sqrt(self.d_model))
        mask = causal_mask(tokens.size(1))
        for layer in self.layers:
            h = layer(x, mask)                                                   # slip: x never updated
        return self.head(self.norm(h))


class GPTOk(_GPTBase):
    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.embed.weight = self.head.weight                                     # tie the other way round

    def forward(self, tokens):
        T = tokens.size(1)
        x = self.pos(self.embed(tokens) * self.d_model ** 0.5)
        mask = torch.ones(T, T, dtype=torch.bool).tril()[None, None]
        for layer in self.layers:
            x = layer(x, mask)
        return F.linear(self.norm(x), self.embed.weight)


# ---------------- sampling_distribution ----------------
def samp_temp_multiplied(logits, temperature=1.0, top_k=None, top_p=None):
    if temperature == 0:
        return F.one_hot(logits.argmax(-1), logits.size(-1)).float()
    z = logits.float() * temperature                                             # slip: times tau
    if top_k is not None:
        kth = torch.topk(z, min(top_k, z.size(-1)), dim=-1).values[..., -1:]
        z = z.masked_fill(z < kth, float("-inf"))
    probs = z.softmax(-1)
    if top_p is not None and top_p < 1:
        ranked = probs.sort(-1, descending=True).values
        before = (ranked.cumsum(-1) < top_p).sum(-1, keepdim=True)
        last = ranked.gather(-1, before.clamp(max=probs.size(-1) - 1))
        probs = probs.masked_fill(probs < last, 0.0)
    return probs / probs.sum(-1, keepdim=True)


def samp_top_p_excludes_crossing(logits, temperature=1.0, top_k=None, top_p=None):
    if temperature == 0:
        return F.one_hot(logits.argmax(-1), logits.size(-1)).float()
    z = logits.float() / temperature
    if top_k is not None:
        kth = torch.topk(z, min(top_k, z.size(-1)), dim=-1).values[..., -1:]
        z = z.masked_fill(z < kth, float("-inf"))
    probs = z.softmax(-1)
    if top_p is not None and top_p < 1:
        sp, idx = probs.sort(-1, descending=True)
        keep_sorted = sp.cumsum(-1) <= top_p                                     # slip: drops the crossing token
        keep_sorted[..., 0] = True
        keep = torch.zeros_like(keep_sorted).scatter(-1, idx, keep_sorted)
        probs = probs * keep
    return probs / probs.sum(-1, keepdim=True)


def samp_u_topk_no_min(logits, temperature=1.0, top_k=None, top_p=None):
    if temperature == 0:
        return F.one_hot(logits.argmax(-1), logits.size(-1)).float()
    z = logits.float() / temperature
    if top_k is not None:
        kth = torch.topk(z, top_k, dim=-1).values[..., -1:]                     # slip: top_k > V raises
        z = z.masked_fill(z < kth, float("-inf"))
    probs = z.softmax(-1)
    if top_p is not None and top_p < 1:
        ranked = probs.sort(-1, descending=True).values
        before = (ranked.cumsum(-1) < top_p).sum(-1, keepdim=True)
        last = ranked.gather(-1, before.clamp(max=probs.size(-1) - 1))
        probs = probs.masked_fill(probs < last, 0.0)
    return probs / probs.sum(-1, keepdim=True)


def samp_u_greedy_splits_ties(logits, temperature=1.0, top_k=None, top_p=None):
    if temperature == 0:
        top = (logits == logits.amax(-1, keepdim=True)).float()                  # slip: ties share the mass
        return top / top.sum(-1, keepdim=True)
    z = logits.float() / temperature
    if top_k is not None:
        kth = torch.topk(z, min(top_k, z.size(-1)), dim=-1).values[..., -1:]
        z = z.masked_fill(z < kth, float("-inf"))
    probs = z.softmax(-1)
    if top_p is not None and top_p < 1:
        ranked = probs.sort(-1, descending=True).values
        before = (ranked.cumsum(-1) < top_p).sum(-1, keepdim=True)
        last = ranked.gather(-1, before.clamp(max=probs.size(-1) - 1))
        probs = probs.masked_fill(probs < last, 0.0)
    return probs / probs.sum(-1, keepdim=True)


def samp_ok_power(logits, temperature=1.0, top_k=None, top_p=None):
    """temperature applied AFTER the softmax as p^(1/tau), renormalised: the same distribution."""
    if temperature == 0:
        out = torch.zeros_like(logits, dtype=torch.float32)
        return out.scatter_(-1, logits.argmax(-1, keepdim=True), 1.0)
    p = logits.double().softmax(-1) ** (1.0 / temperature)
    p = p / p.sum(-1, keepdim=True)
    if top_k is not None and top_k < p.size(-1):
        kth = p.topk(top_k, -1).values[..., -1:]
        p = torch.where(p >= kth, p, 0.0)
        p = p / p.sum(-1, keepdim=True)
    if top_p is not None:
        sp, _ = p.sort(-1, descending=True)
        mass_before = sp.cumsum(-1) - sp                           # mass of the strictly more probable tokens (sorted)
        kept = mass_before < top_p
        thr = torch.where(kept, sp, torch.inf).amin(-1, keepdim=True)
        p = torch.where(p >= thr, p, 0.0)
    return (p / p.sum(-1, keepdim=True)).float()


# ---------------- cached_attention_step ----------------
def step_pos_plus_one(q, k, v, cache_k, cache_v):
    t = cache_k.size(2)
    pos = torch.tensor([t + 1])                                                  # slip: positions from 1
    q, k = apply_rope(q, pos), apply_rope(k, pos)
    cache_k, cache_v = torch.cat([cache_k, k], 2), torch.cat([cache_v, v], 2)
    w = torch.softmax(q @ cache_k.transpose(-2, -1) / math.sqrt(q.size(-1)), -1)
    return w @ cache_v, cache_k, cache_v


def step_k_not_rotated(q, k, v, cache_k, cache_v):
    t = cache_k.size(2)
    q = apply_rope(q, torch.tensor([t]))                                         # slip: k left unrotated
    cache_k, cache_v = torch.cat([cache_k, k], 2), torch.cat([cache_v, v], 2)
    w = torch.softmax(q @ cache_k.transpose(-2, -1) / math.sqrt(q.size(-1)), -1)
    return w @ cache_v, cache_k, cache_v


def step_u_rotates_v(q, k, v, cache_k, cache_v):
    t = cache_k.size(2)
    pos = torch.tensor([t])
    q, k, v = (apply_rope(z, pos) for z in (q, k, v))                           # slip: v rotated too
    cache_k, cache_v = torch.cat([cache_k, k], 2), torch.cat([cache_v, v], 2)
    w = torch.softmax(q @ cache_k.transpose(-2, -1) / math.sqrt(q.size(-1)), -1)
    return w @ cache_v, cache_k, cache_v


def step_ok_sdpa(q, k, v, cache_k, cache_v):
    pos = torch.arange(cache_k.shape[-2], cache_k.shape[-2] + 1)
    cache_k = torch.cat((cache_k, apply_rope(k, pos)), dim=-2)
    cache_v = torch.cat((cache_v, v), dim=-2)
    return scaled_dot_product_attention(apply_rope(q, pos), cache_k, cache_v), cache_k, cache_v


# ---------------- apply_rope ----------------
def rope_neighbours(x, positions, base=10000.0):
    d = x.size(-1)
    theta = base ** (-2 * torch.arange(d // 2, dtype=torch.float32) / d)
    ang = positions.float()[:, None] * theta
    cos, sin = ang.cos(), ang.sin()
    x1, x2 = x[..., 0::2], x[..., 1::2]                                          # slip: neighbour pairs
    out = torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)
    return out.flatten(-2)


def rope_theta_i_over_d(x, positions, base=10000.0):
    d = x.size(-1)
    theta = base ** (-torch.arange(d // 2, dtype=torch.float32) / d)            # slip: -i/d, not -2i/d
    ang = positions.float()[:, None] * theta
    cos, sin = ang.cos(), ang.sin()
    x1, x2 = x[..., :d // 2], x[..., d // 2:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


def rope_u_integer_division(x, positions, base=10000.0):
    d = x.size(-1)
    theta = base ** (-2 * torch.arange(d // 2) // d)                            # slip: integer floor division
    ang = positions.float()[:, None] * theta
    cos, sin = ang.cos(), ang.sin()
    x1, x2 = x[..., :d // 2], x[..., d // 2:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


def rope_u_sign(x, positions, base=10000.0):
    d = x.size(-1)
    theta = base ** (-2 * torch.arange(d // 2, dtype=torch.float32) / d)
    ang = positions.float()[:, None] * theta
    cos, sin = ang.cos(), ang.sin()
    x1, x2 = x[..., :d // 2], x[..., d // 2:]
    return torch.cat([x1 * cos + x2 * sin, -x1 * sin + x2 * cos], dim=-1)       # slip: rotates by -angle


def rope_ok_complex(x, positions, base=10000.0):
    d = x.size(-1)
    inv = 1.0 / base ** (torch.arange(0, d, 2, dtype=torch.float64) / d)
    ang = positions.double()[:, None] * inv
    z = torch.complex(x[..., :d // 2].double(), x[..., d // 2:].double()) * torch.polar(torch.ones_like(ang), ang)
    return torch.cat([z.real, z.imag], -1).to(x.dtype)


# ---------------- grouped_query_attention ----------------
def gqa_repeat_tiles(q, k, v, mask=None):
    g = q.size(1) // k.size(1)
    k, v = k.repeat(1, g, 1, 1), v.repeat(1, g, 1, 1)                          # slip: head j uses j % h_kv
    return scaled_dot_product_attention(q, k, v, mask)


def gqa_no_mask(q, k, v, mask=None):
    g = q.size(1) // k.size(1)
    k, v = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
    return scaled_dot_product_attention(q, k, v)                                 # slip: mask dropped


def gqa_u_v_from_k(q, k, v, mask=None):
    g = q.size(1) // k.size(1)
    k, v = k.repeat_interleave(g, 1), k.repeat_interleave(g, 1)                # slip: copy-paste, v <- k
    return scaled_dot_product_attention(q, k, v, mask)


def gqa_ok_expand(q, k, v, mask=None):
    B, h, T, d = q.shape
    hk = k.size(1)
    k = k[:, :, None].expand(B, hk, h // hk, *k.shape[2:]).reshape(B, h, *k.shape[2:])
    v = v[:, :, None].expand(B, hk, h // hk, *v.shape[2:]).reshape(B, h, *v.shape[2:])
    s = q @ k.transpose(-1, -2) / d ** 0.5
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    w = s.softmax(-1).nan_to_num(0.0)
    return w @ v


SLIPS = [
    ("next_token_loss", "no shift: logits at t scored against token t", loss_no_shift),
    ("next_token_loss", "u: mean of per-caption means", loss_u_mean_of_rows),
    ("gpt_block", "post-norm", BlockPostNorm),
    ("gpt_block", "u: x overwritten by norm1(x): residual from the normalised x", BlockUResidualFromNormed),
    ("gpt", "output layer a copy of the embedding, not tied", GPTCopyTie),
    ("gpt", "u: loop variable: every block reads the embeddings, last one kept", GPTULoopVar),
    ("sampling_distribution", "temperature multiplied", samp_temp_multiplied),
    ("sampling_distribution", "top-p drops the token that crosses p", samp_top_p_excludes_crossing),
    ("sampling_distribution", "u: topk(z, top_k) without min(top_k, V)", samp_u_topk_no_min),
    ("sampling_distribution", "u: greedy splits the mass among tied maxima", samp_u_greedy_splits_ties),
    ("cached_attention_step", "rope position t+1", step_pos_plus_one),
    ("cached_attention_step", "u: values rotated too", step_u_rotates_v),
    ("apply_rope", "neighbour pairs (2i, 2i+1)", rope_neighbours),
    ("apply_rope", "u: integer floor division in the exponent", rope_u_integer_division),
    ("grouped_query_attention", "repeat instead of repeat_interleave", gqa_repeat_tiles),
    ("grouped_query_attention", "u: values expanded from k (copy-paste)", gqa_u_v_from_k),
]
CORRECT = [
    ("next_token_loss", "log_softmax + gather, boolean mean", loss_ok_gather),
    ("gpt_block", "unpacked norm tuple, torch.add", BlockOk),
    ("gpt", "tie the other way, F.linear, 4-D mask", GPTOk),
    ("cached_attention_step", "course sdpa, arange position", step_ok_sdpa),
    ("apply_rope", "complex polar form in float64", rope_ok_complex),
    ("grouped_query_attention", "expand+reshape, own masked softmax", gqa_ok_expand),
]

# planted as a right answer; at τ = 0.001 the powers of a flat row underflow to 0 (NaN rows): a slip
SLIPS.append(("sampling_distribution", "u: temperature as p^(1/tau) after the softmax (underflows)", samp_ok_power))
