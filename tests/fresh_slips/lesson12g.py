"""Lesson 12: learner slips (one thing wrong each) and unusual-but-right answers, written from the notebook's
text and the reference solution only (independent catalogue; slips differ from tests/fresh_slips/lesson12*.py).
"u: " in a description marks an unusual slip."""
import functools
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from course_utils.attention import MultiHeadAttention, scaled_dot_product_attention
from course_utils.gpt import GPTBlock
from course_utils.masks import causal_mask
from course_utils.positions import LearnedPositionalEncoding, apply_rope
from course_utils.transformer import PositionwiseFeedForward


# ======================================================================== next_token_loss
def loss_pad_mask_inverted(logits, tokens, pad_id):
    lg, tg = logits[:, :-1], tokens[:, 1:]
    nll = F.cross_entropy(lg.transpose(1, 2), tg, reduction="none")              # (B, T-1)
    real = tg == pad_id                                                           # slip: == keeps the pads, drops the real targets
    return nll[real].mean()


def loss_last_position_only(logits, tokens, pad_id):
    return F.cross_entropy(logits[:, -2], tokens[:, -1], ignore_index=pad_id)   # slip: only the window's last target scored


def loss_u_reshape_not_transpose(logits, tokens, pad_id):
    lg, tg = logits[:, :-1], tokens[:, 1:]
    B, Tm1, V = lg.shape
    return F.cross_entropy(lg.reshape(B, V, Tm1), tg, ignore_index=pad_id)       # slip: reshape is not a transpose: scrambles V and T


def loss_u_log_of_softmax(logits, tokens, pad_id):
    lg, tg = logits[:, :-1], tokens[:, 1:]
    logp = torch.log(lg.softmax(-1))                                              # slip: softmax underflows to 0 -> log gives -inf
    return F.nll_loss(logp.reshape(-1, logp.size(-1)), tg.reshape(-1), ignore_index=pad_id)


def loss_ok_module_where(logits, tokens, pad_id):
    lg, tg = logits.narrow(1, 0, logits.size(1) - 1), tokens.narrow(1, 1, tokens.size(1) - 1)
    real = tg.ne(pad_id)
    nll = nn.CrossEntropyLoss(reduction="none")(lg.flatten(0, 1), tg.masked_fill(~real, 0).flatten())
    nll = torch.where(real.flatten(), nll, torch.zeros_like(nll))                # pads contribute nothing
    return nll.sum() / real.sum()


# ======================================================================== gpt_block
class _Block(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.0):
        super().__init__()
        self.norm1 = nn.LayerNorm(d_model)
        self.attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.norm2 = nn.LayerNorm(d_model)
        self.ff = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.dropout1, self.dropout2 = nn.Dropout(dropout), nn.Dropout(dropout)


class BlockMaskNegated(_Block):
    def forward(self, x, mask):
        y = self.norm1(x)
        x = x + self.dropout1(self.attn(y, y, y, ~mask))                          # slip: ~mask: True already means "may attend"
        return x + self.dropout2(self.ff(self.norm2(x)))


class BlockAttnWithoutNorm(_Block):
    def forward(self, x, mask):
        x = x + self.dropout1(self.attn(x, x, x, mask))                           # slip: norm1 never applied: attention reads raw x
        return x + self.dropout2(self.ff(self.norm2(x)))


class BlockUDropoutOnAttnInput(_Block):
    def forward(self, x, mask):
        y = self.dropout1(self.norm1(x))                                          # slip: dropout on the attention's input, not its output
        x = x + self.attn(y, y, y, mask)
        return x + self.dropout2(self.ff(self.norm2(x)))


class BlockUSecondStreamNormalised(_Block):
    def forward(self, x, mask):
        y = self.norm1(x)
        x = x + self.dropout1(self.attn(y, y, y, mask))
        x = self.norm2(x)                                                         # slip: x reassigned: second residual from the normalised x
        return x + self.dropout2(self.ff(x))


class BlockOkManualLayerNorm(_Block):
    def forward(self, x, mask):
        def ln(norm, t):                                            # the LayerNorm formula: biased variance, eps inside the root
            mu = t.mean(-1, keepdim=True)
            var = (t - mu).pow(2).mean(-1, keepdim=True)
            return (t - mu) / torch.sqrt(var + norm.eps) * norm.weight + norm.bias
        sublayers = ((self.norm1, lambda t: self.attn(t, t, t, mask), self.dropout1),
                     (self.norm2, self.ff, self.dropout2))
        for norm, f, drop in sublayers:
            x = x + drop(f(ln(norm, x)))
        return x


# ======================================================================== gpt
class _GPT(nn.Module):
    def __init__(self, vocab_size, d_model, num_heads, num_layers, d_ff, max_len, dropout=0.0):
        super().__init__()
        self.d_model, self.max_len = d_model, max_len
        self.embed = nn.Embedding(vocab_size, d_model)
        self.pos = LearnedPositionalEncoding(d_model, max_len, dropout)
        self.layers = nn.ModuleList(GPTBlock(d_model, num_heads, d_ff, dropout) for _ in range(num_layers))
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size, bias=False)


class _TiedGPT(_GPT):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.head.weight = self.embed.weight


class GPTTorchSqrtOfInt(_TiedGPT):
    def forward(self, tokens):
        x = self.pos(self.embed(tokens) * torch.sqrt(self.d_model))              # slip: torch.sqrt of a Python int: TypeError
        mask = causal_mask(tokens.size(1), tokens.device)
        for layer in self.layers:
            x = layer(x, mask)
        return self.head(self.norm(x))


class GPTTriuMask(_TiedGPT):
    def forward(self, tokens):
        x = self.pos(self.embed(tokens) * math.sqrt(self.d_model))
        T = tokens.size(1)
        mask = torch.triu(torch.ones(T, T, dtype=torch.bool))                     # slip: upper triangle: each token sees the future
        for layer in self.layers:
            x = layer(x, mask)
        return self.head(self.norm(x))


class GPTLastPositionOnly(_TiedGPT):
    def forward(self, tokens):
        x = self.pos(self.embed(tokens) * math.sqrt(self.d_model))
        mask = causal_mask(tokens.size(1), tokens.device)
        for layer in self.layers:
            x = layer(x, mask)
        return self.head(self.norm(x[:, -1]))                                     # slip: only the last position's logits (B, V)


class GPTUEmbeddingTwice(_TiedGPT):
    def forward(self, tokens):
        x = self.embed(tokens) * math.sqrt(self.d_model)
        x = x + self.pos(x)                                                       # slip: self.pos already returns x + P: x counted twice
        mask = causal_mask(tokens.size(1), tokens.device)
        for layer in self.layers:
            x = layer(x, mask)
        return self.head(self.norm(x))


class GPTUSequentialTwoArgs(_TiedGPT):
    def forward(self, tokens):
        x = self.pos(self.embed(tokens) * math.sqrt(self.d_model))
        mask = causal_mask(tokens.size(1), tokens.device)
        x = nn.Sequential(*self.layers)(x, mask)                                  # slip: nn.Sequential passes ONE input: TypeError
        return self.head(self.norm(x))


class GPTUTieTransposed(_GPT):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.head.weight = self.embed.weight.T                                    # slip: .T is a plain tensor, not a Parameter: TypeError

    def forward(self, tokens):
        x = self.pos(self.embed(tokens) * math.sqrt(self.d_model))
        mask = causal_mask(tokens.size(1), tokens.device)
        for layer in self.layers:
            x = layer(x, mask)
        return self.head(self.norm(x))


class GPTOkOneHotReduce(_GPT):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.head.weight = self.embed.weight                        # tied: one Parameter

    def forward(self, tokens):
        T = tokens.size(1)
        onehot = F.one_hot(tokens, self.embed.num_embeddings).to(self.embed.weight.dtype)
        x = self.pos((onehot @ self.embed.weight) * self.d_model ** 0.5)   # a one-hot row times E is the lookup
        mask = torch.ones(T, T, dtype=torch.bool, device=tokens.device).tril()
        x = functools.reduce(lambda h, layer: layer(h, mask), self.layers, x)
        return self.head(self.norm(x))


# ======================================================================== sampling_distribution
def _top_p(probs, top_p):
    ranked = probs.sort(-1, descending=True).values
    before = (ranked.cumsum(-1) < top_p).sum(-1, keepdim=True)
    last = ranked.gather(-1, before.clamp(max=probs.size(-1) - 1))
    return probs.masked_fill(probs < last, 0.0)


def samp_topk_sorted_index_k(logits, temperature=1.0, top_k=None, top_p=None):
    if temperature == 0:
        return F.one_hot(logits.argmax(-1), logits.size(-1)).float()
    z = logits.float() / temperature
    if top_k is not None:
        ranked = z.sort(-1, descending=True).values
        kth = ranked[:, min(top_k, z.size(-1) - 1)].unsqueeze(-1)                 # slip: index k is the (k+1)-th largest: k+1 kept
        z = z.masked_fill(z < kth, float("-inf"))
    probs = z.softmax(-1)
    if top_p is not None and top_p < 1:
        probs = _top_p(probs, top_p)
    return probs / probs.sum(-1, keepdim=True)


def samp_topk_elif_topp(logits, temperature=1.0, top_k=None, top_p=None):
    if temperature == 0:
        return F.one_hot(logits.argmax(-1), logits.size(-1)).float()
    z = logits.float() / temperature
    if top_k is not None:
        kth = torch.topk(z, min(top_k, z.size(-1)), dim=-1).values[..., -1:]
        z = z.masked_fill(z < kth, float("-inf"))
        probs = z.softmax(-1)
    elif top_p is not None and top_p < 1:                                         # slip: elif: top-p skipped whenever top-k is given
        probs = _top_p(z.softmax(-1), top_p)
    else:
        probs = z.softmax(-1)
    return probs / probs.sum(-1, keepdim=True)


def samp_greedy_max_tuple(logits, temperature=1.0, top_k=None, top_p=None):
    if temperature == 0:
        return F.one_hot(logits.max(-1), logits.size(-1)).float()                 # slip: max(-1) is (values, indices): TypeError
    z = logits.float() / temperature
    if top_k is not None:
        kth = torch.topk(z, min(top_k, z.size(-1)), dim=-1).values[..., -1:]
        z = z.masked_fill(z < kth, float("-inf"))
    probs = z.softmax(-1)
    if top_p is not None and top_p < 1:
        probs = _top_p(probs, top_p)
    return probs / probs.sum(-1, keepdim=True)


def samp_u_temperature_in_place(logits, temperature=1.0, top_k=None, top_p=None):
    if temperature == 0:
        return F.one_hot(logits.argmax(-1), logits.size(-1)).float()
    z = logits.float()
    z /= temperature                                                              # slip: .float() of float32 is no copy: the caller's logits are divided
    if top_k is not None:
        kth = torch.topk(z, min(top_k, z.size(-1)), dim=-1).values[..., -1:]
        z = z.masked_fill(z < kth, float("-inf"))
    probs = z.softmax(-1)
    if top_p is not None and top_p < 1:
        probs = _top_p(probs, top_p)
    return probs / probs.sum(-1, keepdim=True)


def samp_u_before_counted_over_batch(logits, temperature=1.0, top_k=None, top_p=None):
    if temperature == 0:
        return F.one_hot(logits.argmax(-1), logits.size(-1)).float()
    z = logits.float() / temperature
    if top_k is not None:
        kth = torch.topk(z, min(top_k, z.size(-1)), dim=-1).values[..., -1:]
        z = z.masked_fill(z < kth, float("-inf"))
    probs = z.softmax(-1)
    if top_p is not None and top_p < 1:
        ranked = probs.sort(-1, descending=True).values
        before = (ranked.cumsum(-1) < top_p).sum()                                # slip: no dim: counted over the whole batch
        last = ranked[:, min(int(before), probs.size(-1) - 1)].unsqueeze(-1)
        probs = probs.masked_fill(probs < last, 0.0)
    return probs / probs.sum(-1, keepdim=True)


def samp_u_sort_indices_as_probs(logits, temperature=1.0, top_k=None, top_p=None):
    if temperature == 0:
        return F.one_hot(logits.argmax(-1), logits.size(-1)).float()
    z = logits.float() / temperature
    if top_k is not None:
        kth = torch.topk(z, min(top_k, z.size(-1)), dim=-1).values[..., -1:]
        z = z.masked_fill(z < kth, float("-inf"))
    probs = z.softmax(-1)
    if top_p is not None and top_p < 1:
        _, ranked = probs.sort(-1, descending=True)                               # slip: the ids (indices), not the sorted probabilities
        before = (ranked.cumsum(-1) < top_p).sum(-1, keepdim=True)
        last = probs.sort(-1, descending=True).values.gather(-1, before.clamp(max=probs.size(-1) - 1))
        probs = probs.masked_fill(probs < last, 0.0)
    return probs / probs.sum(-1, keepdim=True)


def samp_ok_topk_before_temperature(logits, temperature=1.0, top_k=None, top_p=None):
    V = logits.size(-1)
    if not temperature:
        return torch.zeros(logits.shape, dtype=torch.float32).scatter_(-1, logits.argmax(-1, keepdim=True), 1.0)
    z = logits.float()
    if top_k is not None and top_k < V:                             # top-k on the raw logits: dividing by tau > 0 keeps the order
        kth = z.sort(-1, descending=True).values[:, top_k - 1:top_k]
        z = torch.where(z >= kth, z, torch.full_like(z, float("-inf")))
    probs = torch.softmax(z / temperature, dim=-1)
    if top_p is not None and top_p < 1:
        ranked = probs.sort(-1, descending=True).values
        reach = ranked.cumsum(-1) >= top_p                          # first sorted position whose cumulative mass reaches p
        first = torch.where(reach.any(-1), reach.int().argmax(-1), torch.full_like(reach[:, 0], V - 1, dtype=torch.long))
        last = ranked.gather(-1, first.unsqueeze(-1))
        probs = probs * (probs >= last)
    return probs / probs.sum(-1, keepdim=True)


# ======================================================================== cached_attention_step
def step_transpose_wrong_axes(q, k, v, cache_k, cache_v):
    t = cache_k.size(2)
    position = torch.tensor([t])
    q, k = apply_rope(q, position), apply_rope(k, position)
    cache_k = torch.cat([cache_k, k], dim=2)
    cache_v = torch.cat([cache_v, v], dim=2)
    weights = torch.softmax(q @ cache_k.transpose(1, 2) / math.sqrt(q.size(-1)), dim=-1)   # slip: swaps heads and time, not the last two axes
    return weights @ cache_v, cache_k, cache_v


def step_scale_multiplied(q, k, v, cache_k, cache_v):
    t = cache_k.size(2)
    position = torch.tensor([t])
    q, k = apply_rope(q, position), apply_rope(k, position)
    cache_k = torch.cat([cache_k, k], dim=2)
    cache_v = torch.cat([cache_v, v], dim=2)
    weights = torch.softmax(q @ cache_k.transpose(-2, -1) * math.sqrt(q.size(-1)), dim=-1)  # slip: times sqrt(d), not divided
    return weights @ cache_v, cache_k, cache_v


def step_u_query_at_zero(q, k, v, cache_k, cache_v):
    t = cache_k.size(2)
    q = apply_rope(q, torch.tensor([0]))                                          # slip: the query at position 0, the key at t
    k = apply_rope(k, torch.tensor([t]))
    cache_k = torch.cat([cache_k, k], dim=2)
    cache_v = torch.cat([cache_v, v], dim=2)
    weights = torch.softmax(q @ cache_k.transpose(-2, -1) / math.sqrt(q.size(-1)), dim=-1)
    return weights @ cache_v, cache_k, cache_v


def step_u_positions_arange(q, k, v, cache_k, cache_v):
    t = cache_k.size(2)
    positions = torch.arange(t + 1)                                               # slip: every cached position: q and k broadcast to t+1 rows
    q, k = apply_rope(q, positions), apply_rope(k, positions)[:, :, -1:]
    cache_k = torch.cat([cache_k, k], dim=2)
    cache_v = torch.cat([cache_v, v], dim=2)
    weights = torch.softmax(q @ cache_k.transpose(-2, -1) / math.sqrt(q.size(-1)), dim=-1)
    return weights @ cache_v, cache_k, cache_v


def step_u_torch_sdpa_is_causal(q, k, v, cache_k, cache_v):
    t = cache_k.size(2)
    position = torch.tensor([t])
    q, k = apply_rope(q, position), apply_rope(k, position)
    cache_k = torch.cat([cache_k, k], dim=2)
    cache_v = torch.cat([cache_v, v], dim=2)
    out = F.scaled_dot_product_attention(q, cache_k, cache_v, is_causal=True)     # slip: top-left causal mask: the query sees key 0 only
    return out, cache_k, cache_v


def step_ok_bmm(q, k, v, cache_k, cache_v):
    B, h, _, d = q.shape
    t = cache_k.shape[-2]
    pos = torch.arange(t, t + 1)                                    # (1,): the newest position
    q, k = apply_rope(q, pos), apply_rope(k, pos)
    cache_k, cache_v = torch.cat((cache_k, k), -2), torch.cat((cache_v, v), -2)
    qs, ks, vs = q.reshape(B * h, 1, d), cache_k.reshape(B * h, t + 1, d), cache_v.reshape(B * h, t + 1, d)
    w = torch.bmm(qs, ks.transpose(1, 2)).div(d ** 0.5).softmax(-1)
    return torch.bmm(w, vs).view(B, h, 1, d), cache_k, cache_v


# ======================================================================== apply_rope
def rope_chunk_without_dim(x, positions, base=10000.0):
    d = x.size(-1)
    theta = base ** (-2 * torch.arange(d // 2, dtype=torch.float32) / d)
    angle = positions.float()[:, None] * theta
    cos, sin = angle.cos(), angle.sin()
    x1, x2 = x.chunk(2)                                                           # slip: no dim: splits the FIRST axis, not the features
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


def rope_sequential_update(x, positions, base=10000.0):
    d = x.size(-1)
    theta = base ** (-2 * torch.arange(d // 2, dtype=torch.float32) / d)
    angle = positions.float()[:, None] * theta
    cos, sin = angle.cos(), angle.sin()
    x1, x2 = x[..., :d // 2], x[..., d // 2:]
    x1 = x1 * cos - x2 * sin
    x2 = x1 * sin + x2 * cos                                                      # slip: reads the already-rotated x1
    return torch.cat([x1, x2], dim=-1)


def rope_even_arange_and_two(x, positions, base=10000.0):
    d = x.size(-1)
    i = torch.arange(0, d, 2, dtype=torch.float32)                                # 0, 2, 4, ... already 2i
    theta = base ** (-2 * i / d)                                                  # slip: the 2 counted twice: base^(-4i/d)
    angle = positions.float()[:, None] * theta
    cos, sin = angle.cos(), angle.sin()
    x1, x2 = x[..., :d // 2], x[..., d // 2:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


def rope_u_neighbours_in_halves_out(x, positions, base=10000.0):
    d = x.size(-1)
    theta = base ** (-2 * torch.arange(d // 2, dtype=torch.float32) / d)
    angle = positions.float()[:, None] * theta
    cos, sin = angle.cos(), angle.sin()
    x1, x2 = x[..., 0::2], x[..., 1::2]                                           # slip: pairs read as neighbours, written back as halves
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


def rope_u_cos_for_sin(x, positions, base=10000.0):
    d = x.size(-1)
    theta = base ** (-2 * torch.arange(d // 2, dtype=torch.float32) / d)
    angle = positions.float()[:, None] * theta
    cos, sin = angle.cos(), angle.cos()                                           # slip: copy-paste: "sin" is the cosine
    x1, x2 = x[..., :d // 2], x[..., d // 2:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


def rope_ok_exp_log_unbind(x, positions, base=10000.0):
    half = x.shape[-1] // 2
    theta = torch.exp(torch.arange(half, dtype=torch.float64) * (-2.0 * math.log(base) / x.shape[-1]))
    angle = torch.outer(positions.to(torch.float64), theta)         # (T, d/2), in float64
    c, s = angle.cos().to(x.dtype), angle.sin().to(x.dtype)
    a, b = x.unflatten(-1, (2, half)).unbind(-2)                    # the two halves
    return torch.stack((a * c - b * s, a * s + b * c), dim=-2).flatten(-2)


# ======================================================================== grouped_query_attention
def _expand_kv(q, k, v):
    group = q.size(1) // k.size(1)
    return k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)


def gqa_mask_after_softmax(q, k, v, mask=None):
    k, v = _expand_kv(q, k, v)
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.size(-1)), dim=-1)
    if mask is not None:
        weights = weights.masked_fill(~mask, 0.0)                                 # slip: masked after the softmax: rows no longer sum to 1
    return weights @ v


def gqa_softmax_over_heads(q, k, v, mask=None):
    k, v = _expand_kv(q, k, v)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=1) @ v                                       # slip: dim=1 normalises over the heads


def gqa_u_torch_sdpa_float_mask(q, k, v, mask=None):
    k, v = _expand_kv(q, k, v)
    attn_mask = None if mask is None else mask.float()                            # slip: a float mask is ADDED (0/1 bias): nothing is masked
    return F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)


def gqa_u_strided_query_loop(q, k, v, mask=None):
    h_kv = k.size(1)
    outs = [scaled_dot_product_attention(q[:, i::h_kv], k[:, i:i + 1], v[:, i:i + 1], mask)   # slip: strided queries (j % h_kv) ...
            for i in range(h_kv)]
    return torch.cat(outs, dim=1)                                                 # ... and heads written back group by group


def gqa_u_mask_extra_axis(q, k, v, mask=None):
    k, v = _expand_kv(q, k, v)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask.unsqueeze(1), float("-inf"))           # slip: an extra head axis: (T, T) becomes (T, 1, T)
    return scores.softmax(-1) @ v


def gqa_ok_torch_sdpa_bool(q, k, v, mask=None):
    h, h_kv = q.shape[1], k.shape[1]
    idx = torch.div(torch.arange(h), h // h_kv, rounding_mode="floor")            # kv head of each query head
    k, v = k.index_select(1, idx), v.index_select(1, idx)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # bool mask: True = takes part, as in the course


# ======================================================================== lists
SLIPS = [
    ("next_token_loss", "pad mask inverted (== pad_id): the mean over the pads", loss_pad_mask_inverted),
    ("next_token_loss", "only the last target scored (logits[:, -2] vs tokens[:, -1])", loss_last_position_only),
    ("next_token_loss", "u: (B, T-1, V) reshaped to (B, V, T-1) instead of transposed", loss_u_reshape_not_transpose),
    ("next_token_loss", "u: log(softmax) then nll_loss (underflow: inf for confident logits)", loss_u_log_of_softmax),
    ("gpt_block", "mask negated (~mask) inside the block", BlockMaskNegated),
    ("gpt_block", "attention reads the raw x (norm1 never applied)", BlockAttnWithoutNorm),
    ("gpt_block", "u: dropout1 on the attention's input, not its output", BlockUDropoutOnAttnInput),
    ("gpt_block", "u: x = norm2(x) reassigned: second residual from the normalised stream", BlockUSecondStreamNormalised),
    ("gpt", "torch.sqrt(self.d_model) on an int (TypeError)", GPTTorchSqrtOfInt),
    ("gpt", "mask from torch.triu (sees itself and the future)", GPTTriuMask),
    ("gpt", "returns the last position's logits only (B, V)", GPTLastPositionOnly),
    ("gpt", "u: x + self.pos(x) (pos already adds x: embedding counted twice)", GPTUEmbeddingTwice),
    ("gpt", "u: nn.Sequential(*self.layers)(x, mask) (one input only: TypeError)", GPTUSequentialTwoArgs),
    ("gpt", "u: tied with self.embed.weight.T (a tensor, not a Parameter: TypeError)", GPTUTieTransposed),
    ("sampling_distribution", "top-k threshold at sorted index k (keeps k+1)", samp_topk_sorted_index_k),
    ("sampling_distribution", "top-k / top-p as if/elif: top-p skipped when top-k is given", samp_topk_elif_topp),
    ("sampling_distribution", "greedy: F.one_hot(logits.max(-1)) on the (values, indices) tuple (TypeError)",
     samp_greedy_max_tuple),
    ("sampling_distribution", "u: z = logits.float(); z /= tau (no copy: the caller's logits are changed)",
     samp_u_temperature_in_place),
    ("sampling_distribution", "u: top-p count summed over the whole batch (no dim)", samp_u_before_counted_over_batch),
    ("cached_attention_step", "keys transposed on (1, 2), not (-2, -1)", step_transpose_wrong_axes),
    ("cached_attention_step", "scores multiplied by sqrt(d)", step_scale_multiplied),
    ("cached_attention_step", "u: query rotated at position 0, key at t", step_u_query_at_zero),
    ("cached_attention_step", "u: positions arange(t+1): the query broadcast to t+1 rows", step_u_positions_arange),
    ("cached_attention_step", "u: torch sdpa with is_causal=True (top-left: the query sees key 0 only)",
     step_u_torch_sdpa_is_causal),
    ("apply_rope", "x.chunk(2) without dim=-1 (splits the first axis)", rope_chunk_without_dim),
    ("apply_rope", "sequential update: the second half reads the rotated x1", rope_sequential_update),
    ("apply_rope", "arange(0, d, 2) and the factor 2 too (exponent -4i/d)", rope_even_arange_and_two),
    ("apply_rope", "u: pairs read as neighbours, written back as halves", rope_u_neighbours_in_halves_out),
    ("apply_rope", "u: sin = angle.cos() (copy-paste)", rope_u_cos_for_sin),
    ("grouped_query_attention", "manual: mask applied to the weights after the softmax", gqa_mask_after_softmax),
    ("grouped_query_attention", "manual: softmax over dim=1 (the heads)", gqa_softmax_over_heads),
    ("grouped_query_attention", "u: torch sdpa with mask.float() (added as a 0/1 bias: nothing masked)",
     gqa_u_torch_sdpa_float_mask),
    ("grouped_query_attention", "u: loop with strided queries q[:, i::h_kv], outputs concatenated by group",
     gqa_u_strided_query_loop),
    ("grouped_query_attention", "u: mask.unsqueeze(1) (an extra axis: (T, T) -> (T, 1, T))", gqa_u_mask_extra_axis),
    ("sampling_distribution", "u: top-p cumsum over sort's indices, not its values", samp_u_sort_indices_as_probs),
]

CORRECT = [
    ("next_token_loss", "narrow, nn.CrossEntropyLoss(reduction='none'), torch.where, sum / count", loss_ok_module_where),
    ("gpt_block", "LayerNorm formula by hand with each norm's parameters; loop over the two sub-layers",
     BlockOkManualLayerNorm),
    ("gpt", "embedding as one_hot @ E, tril mask, functools.reduce over the blocks", GPTOkOneHotReduce),
    ("sampling_distribution", "top-k on the raw logits before temperature (same order), argmax of cumsum >= p",
     samp_ok_topk_before_temperature),
    ("cached_attention_step", "torch.bmm over B*h flattened heads, arange(t, t+1) position", step_ok_bmm),
    ("apply_rope", "theta by exp(-2i ln(base)/d) in float64, unflatten/unbind halves, stack+flatten", rope_ok_exp_log_unbind),
    ("grouped_query_attention", "index_select kv heads, torch sdpa with the boolean attn_mask", gqa_ok_torch_sdpa_bool),
]
