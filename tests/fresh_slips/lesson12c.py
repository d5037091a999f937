import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from course_utils.attention import MultiHeadAttention, scaled_dot_product_attention
from course_utils.gpt import GPTBlock
from course_utils.masks import causal_mask
from course_utils.positions import LearnedPositionalEncoding
from course_utils.positions import apply_rope as ref_rope
from course_utils.transformer import PositionwiseFeedForward


# ---------------- next_token_loss ----------------
def loss_no_shift(logits, tokens, pad_id):
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), tokens.reshape(-1), ignore_index=pad_id)

def loss_shift_reversed(logits, tokens, pad_id):
    lg, t = logits[:, 1:], tokens[:, :-1]
    return F.cross_entropy(lg.reshape(-1, lg.size(-1)), t.reshape(-1), ignore_index=pad_id)

def loss_pad_counted(logits, tokens, pad_id):
    lg, t = logits[:, :-1], tokens[:, 1:]
    return F.cross_entropy(lg.reshape(-1, lg.size(-1)), t.reshape(-1))

def loss_item(logits, tokens, pad_id):
    lg, t = logits[:, :-1], tokens[:, 1:]
    return F.cross_entropy(lg.reshape(-1, lg.size(-1)), t.reshape(-1), ignore_index=pad_id).item()

def loss_mean_of_means(logits, tokens, pad_id):
    lg, t = logits[:, :-1], tokens[:, 1:]
    per = F.cross_entropy(lg.transpose(1, 2), t, ignore_index=pad_id, reduction="none")   # (B, T-1)
    keep = (t != pad_id).float()
    return ((per * keep).sum(1) / keep.sum(1)).mean()

def loss_ignore_zero(logits, tokens, pad_id):
    lg, t = logits[:, :-1], tokens[:, 1:]
    return F.cross_entropy(lg.reshape(-1, lg.size(-1)), t.reshape(-1), ignore_index=0)

def loss_last_position_kept(logits, tokens, pad_id):   # pads the targets with pad instead of slicing logits... but wrongly: roll
    t = torch.roll(tokens, -1, dims=1)                   # last target wraps around to token 0
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), t.reshape(-1), ignore_index=pad_id)


# ---------------- gpt_block ----------------
class _BlockBase(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.0):
        super().__init__()
        self.norm1 = nn.LayerNorm(d_model)
        self.attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.norm2 = nn.LayerNorm(d_model)
        self.ff = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.dropout1, self.dropout2 = nn.Dropout(dropout), nn.Dropout(dropout)

class BlockPostNorm(_BlockBase):
    def forward(self, x, mask):
        x = self.norm1(x + self.dropout1(self.attn(x, x, x, mask)))
        return self.norm2(x + self.dropout2(self.ff(x)))

class BlockNoMask(_BlockBase):
    def forward(self, x, mask):
        y = self.norm1(x)
        x = x + self.dropout1(self.attn(y, y, y))
        return x + self.dropout2(self.ff(self.norm2(x)))

class BlockNorm1Twice(_BlockBase):
    def forward(self, x, mask):
        y = self.norm1(x)
        x = x + self.dropout1(self.attn(y, y, y, mask))
        return x + self.dropout2(self.ff(self.norm1(x)))

class BlockResidualFromNormed(_BlockBase):
    def forward(self, x, mask):
        x = self.norm1(x)
        x = x + self.dropout1(self.attn(x, x, x, mask))
        return x + self.dropout2(self.ff(self.norm2(x)))

class BlockNoSecondDropout(_BlockBase):
    def forward(self, x, mask):
        y = self.norm1(x)
        x = x + self.dropout1(self.attn(y, y, y, mask))
        return x + self.ff(self.norm2(x))

class BlockFFOnInput(_BlockBase):     # both sub-layers read the block's input (parallel block by accident)
    def forward(self, x, mask):
        y = self.norm1(x)
        a = x + self.dropout1(self.attn(y, y, y, mask))
        return a + self.dropout2(self.ff(self.norm2(x)))


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
        self.tie()
    def tie(self):
        self.head.weight = self.embed.weight
    def embed_tokens(self, tokens):
        return self.pos(self.embed(tokens) * math.sqrt(self.d_model))
    def mask(self, tokens):
        return causal_mask(tokens.size(1), tokens.device)
    def forward(self, tokens):
        x = self.embed_tokens(tokens)
        m = self.mask(tokens)
        for layer in self.layers:
            x = layer(x, m)
        return self.head(self.norm(x))

class GPTNoScale(_GPTBase):
    def embed_tokens(self, tokens):
        return self.pos(self.embed(tokens))

class GPTUntiedCopy(_GPTBase):
    def tie(self):
        self.head.weight = nn.Parameter(self.embed.weight.clone())

class GPTMaskInverted(_GPTBase):
    def mask(self, tokens):
        return ~causal_mask(tokens.size(1), tokens.device)

class GPTNoFinalNorm(_GPTBase):
    def forward(self, tokens):
        x = self.embed_tokens(tokens)
        m = self.mask(tokens)
        for layer in self.layers:
            x = layer(x, m)
        return self.head(x)

class GPTScalesPositions(_GPTBase):
    def embed_tokens(self, tokens):
        return self.pos(self.embed(tokens)) * math.sqrt(self.d_model)

class GPTMaskMaxLen(_GPTBase):
    def mask(self, tokens):
        return causal_mask(self.max_len, tokens.device)

class GPTOnlyLastLayer(_GPTBase):   # x not updated: each layer reads the embeddings
    def forward(self, tokens):
        e = self.embed_tokens(tokens)
        m = self.mask(tokens)
        for layer in self.layers:
            x = layer(e, m)
        return self.head(self.norm(x))


# ---------------- sampling_distribution ----------------
def _sample(logits, temperature=1.0, top_k=None, top_p=None, temp_mul=False, ties_split=False,
            no_min=False, top_p_excl=False, no_renorm=False, unsorted=False, p_before_temp=False):
    if temperature == 0:
        if ties_split:
            oh = (logits == logits.amax(-1, keepdim=True)).float()
            return oh / oh.sum(-1, keepdim=True)
        return F.one_hot(logits.argmax(-1), logits.size(-1)).float()
    z = logits.float() * temperature if temp_mul else logits.float() / temperature
    if p_before_temp:
        z_p = logits.float()
    if top_k is not None:
        k = top_k if no_min else min(top_k, z.size(-1))
        kth = torch.topk(z, k, dim=-1).values[..., -1:]
        z = z.masked_fill(z < kth, float("-inf"))
    probs = z.softmax(-1)
    if top_p is not None and top_p < 1:
        src = logits.float().softmax(-1) if p_before_temp else probs
        ranked, idx = src.sort(-1, descending=True)
        if unsorted:
            keep = (ranked.cumsum(-1) - ranked) < top_p       # keep mask in sorted order ...
            probs = probs * keep                             # ... applied to the unsorted probabilities
        else:
            if top_p_excl:
                before = (ranked.cumsum(-1) <= top_p).sum(-1, keepdim=True) - 1
                before = before.clamp(min=0)
            else:
                before = (ranked.cumsum(-1) < top_p).sum(-1, keepdim=True)
            last = ranked.gather(-1, before.clamp(max=src.size(-1) - 1))
            probs = probs.masked_fill(src < last, 0.0)
        if no_renorm:
            return probs
    return probs / probs.sum(-1, keepdim=True)

def samp_temp_multiplied(logits, temperature=1.0, top_k=None, top_p=None):
    return _sample(logits, temperature, top_k, top_p, temp_mul=True)

def samp_top_p_excludes_crossing(logits, temperature=1.0, top_k=None, top_p=None):
    return _sample(logits, temperature, top_k, top_p, top_p_excl=True)

def samp_top_p_on_raw_logits(logits, temperature=1.0, top_k=None, top_p=None):
    return _sample(logits, temperature, top_k, top_p, p_before_temp=True)

def samp_greedy_ties_split(logits, temperature=1.0, top_k=None, top_p=None):
    return _sample(logits, temperature, top_k, top_p, ties_split=True)

def samp_topk_no_min(logits, temperature=1.0, top_k=None, top_p=None):
    return _sample(logits, temperature, top_k, top_p, no_min=True)

def samp_no_renorm_after_top_p(logits, temperature=1.0, top_k=None, top_p=None):
    return _sample(logits, temperature, top_k, top_p, no_renorm=True)

def samp_mask_not_unsorted(logits, temperature=1.0, top_k=None, top_p=None):
    return _sample(logits, temperature, top_k, top_p, unsorted=True)

def samp_topk_scatter_ties(logits, temperature=1.0, top_k=None, top_p=None):   # keeps exactly k, ties cut
    if temperature == 0:
        return F.one_hot(logits.argmax(-1), logits.size(-1)).float()
    z = logits.float() / temperature
    if top_k is not None:
        idx = torch.topk(z, min(top_k, z.size(-1)), dim=-1).indices
        keep = torch.zeros_like(z, dtype=torch.bool).scatter(-1, idx, True)
        z = z.masked_fill(~keep, float("-inf"))
    probs = z.softmax(-1)
    if top_p is not None and top_p < 1:
        ranked = probs.sort(-1, descending=True).values
        before = (ranked.cumsum(-1) < top_p).sum(-1, keepdim=True)
        last = ranked.gather(-1, before.clamp(max=probs.size(-1) - 1))
        probs = probs.masked_fill(probs < last, 0.0)
    return probs / probs.sum(-1, keepdim=True)


# ---------------- cached_attention_step ----------------
def _step(q, k, v, cache_k, cache_v, pos_shift=0, rotate_k=True, k_pos0=False, cat_before=False, scale="d"):
    t = cache_k.size(2)
    position = torch.tensor([t + pos_shift])
    if cat_before:
        cache_k = torch.cat([cache_k, k], dim=2)
        cache_v = torch.cat([cache_v, v], dim=2)
        q, k = ref_rope(q, position), ref_rope(k, position)
    else:
        q = ref_rope(q, position)
        if rotate_k:
            k = ref_rope(k, torch.tensor([0]) if k_pos0 else position)
        cache_k = torch.cat([cache_k, k], dim=2)
        cache_v = torch.cat([cache_v, v], dim=2)
    sc = math.sqrt(q.size(-1)) if scale == "d" else math.sqrt(cache_k.size(2))
    w = torch.softmax(q @ cache_k.transpose(-2, -1) / sc, dim=-1)
    return w @ cache_v, cache_k, cache_v

def step_pos_plus_one(q, k, v, cache_k, cache_v):
    return _step(q, k, v, cache_k, cache_v, pos_shift=1)

def step_k_not_rotated(q, k, v, cache_k, cache_v):
    return _step(q, k, v, cache_k, cache_v, rotate_k=False)

def step_k_at_zero(q, k, v, cache_k, cache_v):
    return _step(q, k, v, cache_k, cache_v, k_pos0=True)

def step_cache_before_rotation(q, k, v, cache_k, cache_v):
    return _step(q, k, v, cache_k, cache_v, cat_before=True)

def step_scale_by_length(q, k, v, cache_k, cache_v):
    return _step(q, k, v, cache_k, cache_v, scale="t")

def step_position_t_minus_one(q, k, v, cache_k, cache_v):   # "t = cache length - 1, the last index"
    t = max(cache_k.size(2) - 1, 0)
    position = torch.tensor([t])
    q, k = ref_rope(q, position), ref_rope(k, position)
    cache_k, cache_v = torch.cat([cache_k, k], 2), torch.cat([cache_v, v], 2)
    w = torch.softmax(q @ cache_k.transpose(-2, -1) / math.sqrt(q.size(-1)), -1)
    return w @ cache_v, cache_k, cache_v


# ---------------- apply_rope ----------------
def _rope(x, positions, base=10000.0, interleaved=False, sign=1, two=2, dtype32=False, intdiv=False,
          ignore_positions=False):
    d = x.size(-1)
    dt = torch.float32 if dtype32 else x.dtype
    if intdiv:
        theta = base ** (-(two * torch.arange(d // 2) // d).to(dt))
    else:
        theta = base ** (-two * torch.arange(d // 2, dtype=dt) / d)
    pos = torch.arange(x.size(-2)) if ignore_positions else positions
    angle = pos.to(dt)[:, None] * theta
    cos, sin = angle.cos(), sign * angle.sin()
    xx = x.to(dt)
    if interleaved:
        x1, x2 = xx[..., 0::2], xx[..., 1::2]
        out = torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1).flatten(-2)
    else:
        x1, x2 = xx[..., :d // 2], xx[..., d // 2:]
        out = torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)
    return out

def rope_interleaved(x, positions, base=10000.0):
    return _rope(x, positions, base, interleaved=True)

def rope_sign_swapped(x, positions, base=10000.0):
    return _rope(x, positions, base, sign=-1)

def rope_theta_missing_2(x, positions, base=10000.0):
    return _rope(x, positions, base, two=1)

def rope_float32(x, positions, base=10000.0):
    return _rope(x, positions, base, dtype32=True)

def rope_integer_division(x, positions, base=10000.0):
    return _rope(x, positions, base, intdiv=True)

def rope_ignores_positions(x, positions, base=10000.0):
    return _rope(x, positions, base, ignore_positions=True)

def rope_default_base_hardcoded(x, positions, base=10000.0):   # base ignored
    return _rope(x, positions, 10000.0)


# ---------------- grouped_query_attention ----------------
def gqa_repeat(q, k, v, mask=None):
    g = q.size(1) // k.size(1)
    return scaled_dot_product_attention(q, k.repeat(1, g, 1, 1), v.repeat(1, g, 1, 1), mask)

def gqa_mask_dropped(q, k, v, mask=None):
    g = q.size(1) // k.size(1)
    return scaled_dot_product_attention(q, k.repeat_interleave(g, 1), v.repeat_interleave(g, 1))

def gqa_view_wrong_split(q, k, v, mask=None):   # q viewed as (B, g, h_kv, T, d): head j -> kv head j % h_kv
    B, h, T, d = q.shape
    h_kv = k.size(1)
    qg = q.view(B, h // h_kv, h_kv, T, d)
    m5 = None if mask is None else torch.broadcast_to(mask, (B, h, T, T)).reshape(B, h // h_kv, h_kv, T, T)
    out = scaled_dot_product_attention(qg, k[:, None], v[:, None], m5)
    return out.reshape(B, h, T, d)

def gqa_k_for_v(q, k, v, mask=None):   # copy-paste: values repeated from k
    g = q.size(1) // k.size(1)
    kk = k.repeat_interleave(g, 1)
    return scaled_dot_product_attention(q, kk, kk, mask)

def gqa_mask_inverted(q, k, v, mask=None):
    g = q.size(1) // k.size(1)
    return scaled_dot_product_attention(q, k.repeat_interleave(g, 1), v.repeat_interleave(g, 1),
                                        None if mask is None else ~mask)


# ---------------- right answers ----------------
def loss_gather(logits, tokens, pad_id):
    logp = logits[:, :-1].log_softmax(-1)
    t = tokens[:, 1:]
    nll = -logp.gather(-1, t.unsqueeze(-1)).squeeze(-1)
    keep = t != pad_id
    return nll[keep].sum() / keep.sum()

def loss_sum_over_count(logits, tokens, pad_id):
    t = tokens[:, 1:].contiguous()
    total = F.cross_entropy(logits[:, :-1].transpose(1, 2), t, ignore_index=pad_id, reduction="sum")
    return total / (t != pad_id).sum()

class BlockSequential(_BlockBase):
    def forward(self, x, mask):
        for norm, drop, f in ((self.norm1, self.dropout1, lambda y: self.attn(y, y, y, mask)),
                              (self.norm2, self.dropout2, self.ff)):
            x = x + drop(f(norm(x)))
        return x

class GPTTiedOtherWay(_GPTBase):
    def tie(self):
        self.embed.weight = self.head.weight

class GPTMaskOnDeviceBool(_GPTBase):
    def mask(self, tokens):
        T = tokens.size(1)
        return torch.ones(T, T, dtype=torch.bool, device=tokens.device).tril()[None, None]

def samp_sort_based(logits, temperature=1.0, top_k=None, top_p=None):
    if temperature == 0:
        return torch.zeros_like(logits, dtype=torch.float).scatter_(-1, logits.argmax(-1, keepdim=True), 1.0)
    z = logits.float() / temperature
    V = z.size(-1)
    if top_k is not None and top_k < V:
        kth = z.sort(-1, descending=True).values[..., top_k - 1:top_k]
        z = torch.where(z >= kth, z, torch.tensor(float("-inf")))
    p = torch.softmax(z, -1)
    if top_p is not None and top_p < 1:
        s = p.sort(-1, descending=True).values
        excl = s.cumsum(-1) - s                      # mass strictly before each ranked token
        thr = torch.where(excl < top_p, s, torch.tensor(float("inf"))).amin(-1, keepdim=True)
        p = torch.where(p >= thr, p, torch.zeros(()))
    return p / p.sum(-1, keepdim=True)

def step_sdpa(q, k, v, cache_k, cache_v):
    pos = torch.full((1,), cache_k.shape[-2], dtype=torch.long)
    cache_k = torch.cat((cache_k, ref_rope(k, pos)), -2)
    cache_v = torch.cat((cache_v, v), -2)
    return scaled_dot_product_attention(ref_rope(q, pos), cache_k, cache_v), cache_k, cache_v

def rope_complex(x, positions, base=10000.0):
    d = x.size(-1)
    z = torch.complex(x[..., :d // 2].double(), x[..., d // 2:].double())
    theta = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    z = z * torch.polar(torch.ones((), dtype=torch.float64), positions.double()[:, None] * theta)
    return torch.cat([z.real, z.imag], -1).to(x.dtype)

def rope_rotate_half(x, positions, base=10000.0):
    d = x.size(-1)
    inv = 1.0 / base ** (torch.arange(0, d, 2, dtype=x.dtype) / d)
    ang = torch.outer(positions.to(x.dtype), inv)
    ang = torch.cat([ang, ang], -1)
    rot = torch.cat([-x[..., d // 2:], x[..., :d // 2]], -1)
    return x * ang.cos() + rot * ang.sin()

def gqa_expand(q, k, v, mask=None):
    B, h, T, d = q.shape
    h_kv = k.size(1)
    kk = k[:, :, None].expand(B, h_kv, h // h_kv, T, d).reshape(B, h, T, d)
    vv = v[:, :, None].expand(B, h_kv, h // h_kv, T, d).reshape(B, h, T, d)
    return scaled_dot_product_attention(q, kk, vv, mask)

def gqa_grouped_view(q, k, v, mask=None):
    B, h, T, d = q.shape
    h_kv = k.size(1)
    qg = q.view(B, h_kv, h // h_kv, T, d)
    m5 = None if mask is None else torch.broadcast_to(mask, (B, h, T, T)).reshape(B, h_kv, h // h_kv, T, T)
    out = scaled_dot_product_attention(qg, k[:, :, None], v[:, :, None], m5)
    return out.reshape(B, h, T, d)


SLIPS = [
    ("next_token_loss", "no shift: logits at t against token t", loss_no_shift),
    ("next_token_loss", "shift reversed: logits[:,1:] vs tokens[:,:-1]", loss_shift_reversed),
    ("next_token_loss", "no ignore_index: padding counted", loss_pad_counted),
    ("next_token_loss", "u: returns .item() (a float)", loss_item),
    ("next_token_loss", "u: mean per sequence, then mean of means", loss_mean_of_means),
    ("next_token_loss", "u: ignore_index=0 hard-coded", loss_ignore_zero),
    ("next_token_loss", "u: targets by torch.roll (last wraps to first token)", loss_last_position_kept),
    ("gpt_block", "post-norm", BlockPostNorm),
    ("gpt_block", "mask not passed to attention", BlockNoMask),
    ("gpt_block", "u: norm1 reused before the FFN", BlockNorm1Twice),
    ("gpt_block", "u: residual from the normalised x", BlockResidualFromNormed),
    ("gpt_block", "u: no dropout on the FFN output", BlockNoSecondDropout),
    ("gpt_block", "u: FFN reads the block input (parallel by accident)", BlockFFOnInput),
    ("gpt", "embedding not scaled by sqrt(d_model)", GPTNoScale),
    ("gpt", "untied: head is a copy of the embedding", GPTUntiedCopy),
    ("gpt", "mask inverted", GPTMaskInverted),
    ("gpt", "no final LayerNorm", GPTNoFinalNorm),
    ("gpt", "u: sqrt(d_model) applied after adding positions", GPTScalesPositions),
    ("gpt", "u: causal_mask(max_len) instead of T", GPTMaskMaxLen),
    ("gpt", "u: every layer reads the embeddings (x not updated)", GPTOnlyLastLayer),
    ("sampling_distribution", "temperature multiplies the logits", samp_temp_multiplied),
    ("sampling_distribution", "top-p excludes the token that crosses p", samp_top_p_excludes_crossing),
    ("sampling_distribution", "top-p on the distribution before temperature/top-k", samp_top_p_on_raw_logits),
    ("sampling_distribution", "u: temperature 0 splits mass over tied maxima", samp_greedy_ties_split),
    ("sampling_distribution", "u: topk(z, top_k) without min(top_k, V)", samp_topk_no_min),
    ("sampling_distribution", "u: no renormalisation after top-p", samp_no_renorm_after_top_p),
    ("sampling_distribution", "u: sorted keep-mask applied to unsorted probs", samp_mask_not_unsorted),
    ("sampling_distribution", "u: top-k via topk indices (ties at k-th cut)", samp_topk_scatter_ties),
    ("cached_attention_step", "rotated at position t+1", step_pos_plus_one),
    ("cached_attention_step", "k not rotated", step_k_not_rotated),
    ("cached_attention_step", "position t-1 (last index of the cache)", step_position_t_minus_one),
    ("cached_attention_step", "u: k rotated at position 0 every step", step_k_at_zero),
    ("cached_attention_step", "u: k appended to the cache before rotating", step_cache_before_rotation),
    ("cached_attention_step", "u: scaled by sqrt(t+1) instead of sqrt(d)", step_scale_by_length),
    ("apply_rope", "neighbour pairs (2i, 2i+1)", rope_interleaved),
    ("apply_rope", "sin sign swapped (rotation by -angle)", rope_sign_swapped),
    ("apply_rope", "theta = base^(-i/d) (factor 2 missing)", rope_theta_missing_2),
    ("apply_rope", "u: computed in float32 (float64 in -> float32 out)", rope_float32),
    ("apply_rope", "u: 2*arange // d integer division (theta = 1)", rope_integer_division),
    ("apply_rope", "u: uses arange(T), ignores positions", rope_ignores_positions),
    ("apply_rope", "u: base argument ignored (10000 hard-coded)", rope_default_base_hardcoded),
    ("grouped_query_attention", "repeat instead of repeat_interleave (j % h_kv)", gqa_repeat),
    ("grouped_query_attention", "u: mask not passed", gqa_mask_dropped),
    ("grouped_query_attention", "u: q viewed as (B, g, h_kv, T, d)", gqa_view_wrong_split),
    ("grouped_query_attention", "u: values repeated from k (copy-paste)", gqa_k_for_v),
    ("grouped_query_attention", "mask polarity inverted", gqa_mask_inverted),
]

CORRECT = [
    ("next_token_loss", "log_softmax + gather + boolean mean", loss_gather),
    ("next_token_loss", "sum reduction / count of real targets", loss_sum_over_count),
    ("gpt_block", "loop over the two sub-layers", BlockSequential),
    ("gpt", "tied the other way (embed.weight = head.weight)", GPTTiedOtherWay),
    ("gpt", "mask built with tril, (1,1,T,T)", GPTMaskOnDeviceBool),
    ("sampling_distribution", "sort-based top-k and exclusive-cumsum top-p", samp_sort_based),
    ("cached_attention_step", "course scaled_dot_product_attention, shape[-2]", step_sdpa),
    ("apply_rope", "complex numbers in float64, cast back", rope_complex),
    ("apply_rope", "rotate_half form (HF style)", rope_rotate_half),
    ("grouped_query_attention", "expand + reshape", gqa_expand),
    ("grouped_query_attention", "q viewed as (B, h_kv, g, T, d), broadcast kv", gqa_grouped_view),
]
