"""Lesson 12: learner slips (one thing wrong each) and unusual-but-right answers, written from the notebook's
text and the reference solution only (independent catalogue; different slips from tests/fresh_slips/lesson12*.py).
"u: " in a description marks an unusual slip."""
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
def loss_u_view_sliced(logits, tokens, pad_id):
    lg, tg = logits[:, :-1], tokens[:, 1:]
    return F.cross_entropy(lg.view(-1, lg.size(-1)), tg.view(-1), ignore_index=pad_id)   # slip: .view on a slice (B > 1 fails)


def loss_u_time_major(logits, tokens, pad_id):
    lg, tg = logits[:, :-1], tokens[:, 1:]
    lg = lg.transpose(0, 1).reshape(-1, lg.size(-1))                             # slip: logits time-major, targets batch-major
    return F.cross_entropy(lg, tg.reshape(-1), ignore_index=pad_id)


def loss_double_softmax(logits, tokens, pad_id):
    lg, tg = logits[:, :-1], tokens[:, 1:]
    probs = lg.softmax(-1)                                                        # slip: softmax before cross_entropy
    return F.cross_entropy(probs.reshape(-1, probs.size(-1)), tg.reshape(-1), ignore_index=pad_id)


def loss_u_count_window_tokens(logits, tokens, pad_id):
    lg, tg = logits[:, :-1], tokens[:, 1:]
    total = F.cross_entropy(lg.reshape(-1, lg.size(-1)), tg.reshape(-1), ignore_index=pad_id, reduction="sum")
    return total / (tokens != pad_id).sum()                                       # slip: counts every real token, position 0 too


def loss_pad_id_positional(logits, tokens, pad_id):
    lg, tg = logits[:, :-1], tokens[:, 1:]
    return F.cross_entropy(lg.reshape(-1, lg.size(-1)), tg.reshape(-1), pad_id)  # slip: 3rd positional arg is `weight`


def loss_shift_on_batch_axis(logits, tokens, pad_id):
    lg, tg = logits[:-1], tokens[1:]                                              # slip: sliced the batch axis, not time
    return F.cross_entropy(lg.reshape(-1, lg.size(-1)), tg.reshape(-1), ignore_index=pad_id)


def loss_ok_logsumexp(logits, tokens, pad_id):
    lg, tg = logits[:, :-1], tokens[:, 1:]
    real = tg != pad_id
    picked = lg.gather(-1, torch.where(real, tg, 0)[..., None]).squeeze(-1)      # z of the next token
    nll = lg.logsumexp(-1) - picked                                               # -log softmax, written out
    return nll.masked_select(real).sum() / real.sum()


def loss_ok_log_softmax_first(logits, tokens, pad_id):
    T = logits.size(1)
    logp = logits.narrow(1, 0, T - 1).log_softmax(-1)       # log_softmax of log-probabilities changes nothing
    return F.cross_entropy(logp.flatten(0, 1), tokens.narrow(1, 1, T - 1).flatten(), ignore_index=pad_id)


# ======================================================================== gpt_block
class _Block(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.0):
        super().__init__()
        self.norm1 = nn.LayerNorm(d_model)
        self.attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.norm2 = nn.LayerNorm(d_model)
        self.ff = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.dropout1, self.dropout2 = nn.Dropout(dropout), nn.Dropout(dropout)


class BlockUInPlaceResidual(_Block):
    def forward(self, x, mask):
        y = self.norm1(x)
        x += self.dropout1(self.attn(y, y, y, mask))                              # slip: in place: the caller's x changes
        return x + self.dropout2(self.ff(self.norm2(x)))


class BlockUSecondResidualFromInput(_Block):
    def forward(self, x, mask):
        y = self.norm1(x)
        h = x + self.dropout1(self.attn(y, y, y, mask))
        return x + self.dropout2(self.ff(self.norm2(h)))                          # slip: residual from x, not h


class BlockUReturnsAttentionHalf(_Block):
    def forward(self, x, mask):
        y = self.norm1(x)
        h = x + self.dropout1(self.attn(y, y, y, mask))
        out = h + self.dropout2(self.ff(self.norm2(h)))
        return h                                                                  # slip: returns h, not out


class BlockUDropoutBeforeFFN(_Block):
    def forward(self, x, mask):
        y = self.norm1(x)
        x = x + self.dropout1(self.attn(y, y, y, mask))
        return x + self.ff(self.dropout2(self.norm2(x)))                          # slip: dropout on the FFN's input


class BlockUNormOnOutput(_Block):
    def forward(self, x, mask):
        x = x + self.norm1(self.dropout1(self.attn(x, x, x, mask)))               # slip: LayerNorm on the output, not the input
        return x + self.dropout2(self.ff(self.norm2(x)))


class BlockNormsSwapped(_Block):
    def forward(self, x, mask):
        y = self.norm2(x)                                                         # slip: norm2 before the attention
        x = x + self.dropout1(self.attn(y, y, y, mask))
        return x + self.dropout2(self.ff(self.norm1(x)))


class BlockURawQuery(_Block):
    def forward(self, x, mask):
        y = self.norm1(x)
        x = x + self.dropout1(self.attn(x, y, y, mask))                           # slip: query from the raw x
        return x + self.dropout2(self.ff(self.norm2(x)))


class BlockOkSeparateInputs(_Block):
    def forward(self, x, mask):
        T = x.size(1)
        q_in, kv_in = self.norm1(x), self.norm1(x)                  # two equal tensors: attn projects them apart
        a = self.attn(query=q_in, key=kv_in, value=kv_in, mask=mask.reshape(-1, 1, T, T) if mask.dim() == 2 else mask)
        x = self.dropout1(a).add(x)
        return self.dropout2(self.ff(self.norm2(x))).add(x)


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


class GPTUMaskOfBatch(_TiedGPT):
    def forward(self, tokens):
        x = self.pos(self.embed(tokens) * math.sqrt(self.d_model))
        mask = causal_mask(tokens.size(0))                                        # slip: size(0) is B, not T
        for layer in self.layers:
            x = layer(x, mask)
        return self.head(self.norm(x))


class GPTUScaleByVocab(_TiedGPT):
    def forward(self, tokens):
        x = self.pos(self.embed(tokens) * math.sqrt(self.embed.num_embeddings))   # slip: num_embeddings is V, not d_model
        mask = causal_mask(tokens.size(1))
        for layer in self.layers:
            x = layer(x, mask)
        return self.head(self.norm(x))


class GPTUFinalNormEveryBlock(_TiedGPT):
    def forward(self, tokens):
        x = self.pos(self.embed(tokens) * math.sqrt(self.d_model))
        mask = causal_mask(tokens.size(1))
        for layer in self.layers:
            x = self.norm(layer(x, mask))                                         # slip: final LayerNorm after every block
        return self.head(x)


class GPTUTieInForward(_GPT):
    def forward(self, tokens):
        self.head.weight = self.embed.weight                                      # slip: tied in forward, not in __init__
        x = self.pos(self.embed(tokens) * math.sqrt(self.d_model))
        mask = causal_mask(tokens.size(1))
        for layer in self.layers:
            x = layer(x, mask)
        return self.head(self.norm(x))


class GPTUPrecedence(_TiedGPT):
    def forward(self, tokens):
        x = self.pos(self.embed(tokens) * self.d_model ** 1/2)                    # slip: (d_model ** 1) / 2
        mask = causal_mask(tokens.size(1))
        for layer in self.layers:
            x = layer(x, mask)
        return self.head(self.norm(x))


class GPTUSkipsFirstBlock(_TiedGPT):
    def forward(self, tokens):
        x = self.pos(self.embed(tokens) * math.sqrt(self.d_model))
        mask = causal_mask(tokens.size(1))
        for i in range(1, len(self.layers)):                                      # slip: counts blocks from 1
            x = self.layers[i](x, mask)
        return self.head(self.norm(x))


class GPTMaskStrictlyLower(_TiedGPT):
    def forward(self, tokens):
        T = tokens.size(1)
        x = self.pos(self.embed(tokens) * math.sqrt(self.d_model))
        mask = torch.tril(torch.ones(T, T, dtype=torch.bool), diagonal=-1)        # slip: a token cannot see itself
        for layer in self.layers:
            x = layer(x, mask)
        return self.head(self.norm(x))


class GPTNormAfterHead(_TiedGPT):
    def forward(self, tokens):
        x = self.pos(self.embed(tokens) * math.sqrt(self.d_model))
        mask = causal_mask(tokens.size(1))
        for layer in self.layers:
            x = layer(x, mask)
        return self.norm(self.head(x))                                            # slip: output layer, then LayerNorm


class GPTUPositionsByHand(_TiedGPT):
    def forward(self, tokens):
        T = tokens.size(1)
        x = self.embed(tokens) * math.sqrt(self.d_model) + self.pos.pe.weight[:T]  # slip: bypasses self.pos: no dropout
        mask = causal_mask(T)
        for layer in self.layers:
            x = layer(x, mask)
        return self.head(self.norm(x))


class GPTOkRegisterParameter(_GPT):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.head.register_parameter("weight", self.embed.weight)                # the same tie, spelt out

    def forward(self, tokens):
        T = tokens.size(1)
        steps = torch.arange(T, device=tokens.device)
        mask = steps[:, None] >= steps[None, :]                                   # query t sees keys <= t
        x = self.pos(self.embed(tokens).mul(self.d_model ** 0.5))
        for layer in self.layers:
            x = layer(x, mask)
        return self.head(self.norm(x))


class GPTOkEinsumHead(_TiedGPT):
    def forward(self, tokens):
        x = self.pos(math.sqrt(self.d_model) * self.embed.weight[tokens])         # indexing the table = the embedding
        mask = causal_mask(tokens.size(1), tokens.device)[None, None]
        for layer in self.layers:
            x = layer(x, mask)
        return torch.einsum("btd,vd->btv", self.norm(x), self.head.weight)


# ======================================================================== sampling_distribution
def samp_u_topk_zero_fill(logits, temperature=1.0, top_k=None, top_p=None):
    if temperature == 0:
        return F.one_hot(logits.argmax(-1), logits.size(-1)).float()
    z = logits.float() / temperature
    if top_k is not None:
        kth = torch.topk(z, min(top_k, z.size(-1)), dim=-1).values[..., -1:]
        z = z.masked_fill(z < kth, 0.0)                                           # slip: logit 0, not -inf
    probs = z.softmax(-1)
    if top_p is not None and top_p < 1:
        ranked = probs.sort(-1, descending=True).values
        before = (ranked.cumsum(-1) < top_p).sum(-1, keepdim=True)
        last = ranked.gather(-1, before.clamp(max=probs.size(-1) - 1))
        probs = probs.masked_fill(probs < last, 0.0)
    return probs / probs.sum(-1, keepdim=True)


def samp_u_kth_no_keepdim(logits, temperature=1.0, top_k=None, top_p=None):
    if temperature == 0:
        return F.one_hot(logits.argmax(-1), logits.size(-1)).float()
    z = logits.float() / temperature
    if top_k is not None:
        kth = torch.topk(z, min(top_k, z.size(-1)), dim=-1).values[:, -1]        # slip: (N,) broadcasts along V
        z = z.masked_fill(z < kth, float("-inf"))
    probs = z.softmax(-1)
    if top_p is not None and top_p < 1:
        ranked = probs.sort(-1, descending=True).values
        before = (ranked.cumsum(-1) < top_p).sum(-1, keepdim=True)
        last = ranked.gather(-1, before.clamp(max=probs.size(-1) - 1))
        probs = probs.masked_fill(probs < last, 0.0)
    return probs / probs.sum(-1, keepdim=True)


def samp_u_cumsum_unsorted(logits, temperature=1.0, top_k=None, top_p=None):
    if temperature == 0:
        return F.one_hot(logits.argmax(-1), logits.size(-1)).float()
    z = logits.float() / temperature
    if top_k is not None:
        kth = torch.topk(z, min(top_k, z.size(-1)), dim=-1).values[..., -1:]
        z = z.masked_fill(z < kth, float("-inf"))
    probs = z.softmax(-1)
    if top_p is not None and top_p < 1:
        ranked = probs.sort(-1, descending=True).values
        before = (probs.cumsum(-1) < top_p).sum(-1, keepdim=True)                # slip: cumsum of probs, not ranked
        last = ranked.gather(-1, before.clamp(max=probs.size(-1) - 1))
        probs = probs.masked_fill(probs < last, 0.0)
    return probs / probs.sum(-1, keepdim=True)


def samp_u_topp_threshold_on_logits(logits, temperature=1.0, top_k=None, top_p=None):
    if temperature == 0:
        return F.one_hot(logits.argmax(-1), logits.size(-1)).float()
    z = logits.float() / temperature
    if top_k is not None:
        kth = torch.topk(z, min(top_k, z.size(-1)), dim=-1).values[..., -1:]
        z = z.masked_fill(z < kth, float("-inf"))
    probs = z.softmax(-1)
    if top_p is not None and top_p < 1:
        ranked = probs.sort(-1, descending=True).values
        before = (ranked.cumsum(-1) < top_p).sum(-1, keepdim=True)
        last = ranked.gather(-1, before.clamp(max=probs.size(-1) - 1))
        probs = probs.masked_fill(z < last, 0.0)                                  # slip: a probability compared with logits
    return probs / probs.sum(-1, keepdim=True)


def samp_greedy_argmax_dim0(logits, temperature=1.0, top_k=None, top_p=None):
    if temperature == 0:
        return F.one_hot(logits.argmax(0), logits.size(-1)).float()              # slip: argmax over the rows
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


def samp_renorm_whole_batch(logits, temperature=1.0, top_k=None, top_p=None):
    if temperature == 0:
        return F.one_hot(logits.argmax(-1), logits.size(-1)).float()
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
    return probs / probs.sum()                                                    # slip: sum of the whole batch


def samp_topp_before_topk(logits, temperature=1.0, top_k=None, top_p=None):
    if temperature == 0:
        return F.one_hot(logits.argmax(-1), logits.size(-1)).float()
    z = logits.float() / temperature
    probs = z.softmax(-1)
    if top_p is not None and top_p < 1:                                           # slip: top-p first, on the untruncated distribution
        ranked = probs.sort(-1, descending=True).values
        before = (ranked.cumsum(-1) < top_p).sum(-1, keepdim=True)
        last = ranked.gather(-1, before.clamp(max=probs.size(-1) - 1))
        probs = probs.masked_fill(probs < last, 0.0)
    if top_k is not None:
        kth = torch.topk(probs, min(top_k, probs.size(-1)), dim=-1).values[..., -1:]
        probs = probs.masked_fill(probs < kth, 0.0)
    return probs / probs.sum(-1, keepdim=True)


def samp_u_kthvalue(logits, temperature=1.0, top_k=None, top_p=None):
    if temperature == 0:
        return F.one_hot(logits.argmax(-1), logits.size(-1)).float()
    z = logits.float() / temperature
    if top_k is not None:
        kth = torch.kthvalue(z, min(top_k, z.size(-1)), dim=-1, keepdim=True).values   # slip: k-th SMALLEST
        z = z.masked_fill(z < kth, float("-inf"))
    probs = z.softmax(-1)
    if top_p is not None and top_p < 1:
        ranked = probs.sort(-1, descending=True).values
        before = (ranked.cumsum(-1) < top_p).sum(-1, keepdim=True)
        last = ranked.gather(-1, before.clamp(max=probs.size(-1) - 1))
        probs = probs.masked_fill(probs < last, 0.0)
    return probs / probs.sum(-1, keepdim=True)


def samp_ok_pairwise_mass(logits, temperature=1.0, top_k=None, top_p=None):
    N, V = logits.shape
    if temperature == 0:
        return torch.zeros(N, V).scatter_(-1, logits.argmax(-1, keepdim=True), 1.0)
    z = logits.float() / temperature
    if top_k is not None and top_k < V:
        kth = z.sort(-1, descending=True).values[:, top_k - 1:top_k]
        z = torch.where(z >= kth, z, torch.full_like(z, float("-inf")))
    p = z.softmax(-1)
    if top_p is not None and top_p < 1:
        # for each token, the mass of the tokens strictly more probable than it: kept while that is below p
        above = (p[:, None, :] * (p[:, None, :] > p[:, :, None])).sum(-1)        # (N, V)
        p = torch.where(above < top_p, p, torch.zeros_like(p))
    return p / p.sum(-1, keepdim=True)


def samp_ok_probs_searchsorted(logits, temperature=1.0, top_k=None, top_p=None):
    V = logits.size(-1)
    if temperature == 0:
        return F.one_hot(logits.argmax(-1), V).to(torch.float32)
    p = torch.softmax(logits.float() / temperature, dim=-1)
    if top_k is not None:                                    # softmax keeps the order: cut the probabilities
        kth = p.topk(min(top_k, V), dim=-1).values[:, -1:]
        p = torch.where(p >= kth, p, 0.0)
        p = p / p.sum(-1, keepdim=True)
    if top_p is not None and top_p < 1:
        ranked = p.sort(-1, descending=True).values
        cum = ranked.cumsum(-1).contiguous()
        n = torch.searchsorted(cum, torch.full((p.size(0), 1), top_p, dtype=cum.dtype))   # how many stay below p
        last = ranked.gather(-1, n.clamp(max=V - 1))
        p = torch.where(p >= last, p, 0.0)
    return p / p.sum(-1, keepdim=True)


# ======================================================================== cached_attention_step
def step_cat_features(q, k, v, cache_k, cache_v):
    t = cache_k.size(2)
    position = torch.tensor([t])
    q, k = apply_rope(q, position), apply_rope(k, position)
    cache_k = torch.cat([cache_k, k], dim=-1)                                     # slip: appended along the features
    cache_v = torch.cat([cache_v, v], dim=-1)
    weights = torch.softmax(q @ cache_k.transpose(-2, -1) / math.sqrt(q.size(-1)), dim=-1)
    return weights @ cache_v, cache_k, cache_v


def step_u_position_from_d(q, k, v, cache_k, cache_v):
    t = cache_k.size(-1)                                                          # slip: size(-1) is d, not the length
    position = torch.tensor([t])
    q, k = apply_rope(q, position), apply_rope(k, position)
    cache_k = torch.cat([cache_k, k], dim=2)
    cache_v = torch.cat([cache_v, v], dim=2)
    weights = torch.softmax(q @ cache_k.transpose(-2, -1) / math.sqrt(q.size(-1)), dim=-1)
    return weights @ cache_v, cache_k, cache_v


def step_u_values_onto_key_cache(q, k, v, cache_k, cache_v):
    t = cache_k.size(2)
    position = torch.tensor([t])
    q, k = apply_rope(q, position), apply_rope(k, position)
    cache_k = torch.cat([cache_k, k], dim=2)
    cache_v = torch.cat([cache_k, v], dim=2)                                      # slip: copy-paste, cache_k
    weights = torch.softmax(q @ cache_k.transpose(-2, -1) / math.sqrt(q.size(-1)), dim=-1)
    return weights @ cache_v, cache_k, cache_v


def step_u_returns_key_cache_twice(q, k, v, cache_k, cache_v):
    t = cache_k.size(2)
    position = torch.tensor([t])
    q, k = apply_rope(q, position), apply_rope(k, position)
    cache_k = torch.cat([cache_k, k], dim=2)
    cache_v = torch.cat([cache_v, v], dim=2)
    weights = torch.softmax(q @ cache_k.transpose(-2, -1) / math.sqrt(q.size(-1)), dim=-1)
    return weights @ cache_v, cache_k, cache_k                                    # slip: cache_k returned as the value cache


def step_u_reshape_not_transpose(q, k, v, cache_k, cache_v):
    t = cache_k.size(2)
    position = torch.tensor([t])
    q, k = apply_rope(q, position), apply_rope(k, position)
    cache_k = torch.cat([cache_k, k], dim=2)
    cache_v = torch.cat([cache_v, v], dim=2)
    B, h, n, d = cache_k.shape
    weights = torch.softmax(q @ cache_k.reshape(B, h, d, n) / math.sqrt(d), dim=-1)   # slip: reshape is not K^T
    return weights @ cache_v, cache_k, cache_v


def step_weights_times_keys(q, k, v, cache_k, cache_v):
    t = cache_k.size(2)
    position = torch.tensor([t])
    q, k = apply_rope(q, position), apply_rope(k, position)
    cache_k = torch.cat([cache_k, k], dim=2)
    cache_v = torch.cat([cache_v, v], dim=2)
    weights = torch.softmax(q @ cache_k.transpose(-2, -1) / math.sqrt(q.size(-1)), dim=-1)
    return weights @ cache_k, cache_k, cache_v                                    # slip: keys, not values


def step_u_causal_mask_anyway(q, k, v, cache_k, cache_v):
    t = cache_k.size(2)
    position = torch.tensor([t])
    q, k = apply_rope(q, position), apply_rope(k, position)
    cache_k = torch.cat([cache_k, k], dim=2)
    cache_v = torch.cat([cache_v, v], dim=2)
    scores = q @ cache_k.transpose(-2, -1) / math.sqrt(q.size(-1))               # (B, h, 1, t+1)
    scores = scores.masked_fill(~causal_mask(t + 1), float("-inf"))             # slip: a (t+1, t+1) mask: t+1 rows out
    return torch.softmax(scores, dim=-1) @ cache_v, cache_k, cache_v


def step_ok_einsum(q, k, v, cache_k, cache_v):
    pos = torch.full((1,), cache_k.shape[-2], dtype=torch.long)
    cache_k = torch.cat((cache_k, apply_rope(k, pos)), dim=-2)
    cache_v = torch.cat((cache_v, v), dim=-2)
    s = torch.einsum("bhqd,bhkd->bhqk", apply_rope(q, pos), cache_k) * q.shape[-1] ** -0.5
    return torch.einsum("bhqk,bhkd->bhqd", s.softmax(-1), cache_v), cache_k, cache_v


def step_ok_rotate_together(q, k, v, cache_k, cache_v):
    t = cache_k.size(2)
    q, k = apply_rope(torch.cat([q, k], dim=0), torch.tensor([t])).chunk(2, dim=0)   # one call for both
    cache_k, cache_v = torch.cat([cache_k, k], 2), torch.cat([cache_v, v], 2)
    w = (q @ cache_k.mT / math.sqrt(q.size(-1))).softmax(-1)
    return w @ cache_v, cache_k, cache_v


# ======================================================================== apply_rope
def rope_u_interleaved_output(x, positions, base=10000.0):
    d = x.size(-1)
    theta = base ** (-2 * torch.arange(d // 2, dtype=torch.float32) / d)
    angle = positions.float()[:, None] * theta
    cos, sin = angle.cos(), angle.sin()
    x1, x2 = x[..., :d // 2], x[..., d // 2:]
    return torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).flatten(-2)   # slip: pairs written side by side


def rope_u_precedence(x, positions, base=10000.0):
    d = x.size(-1)
    i = torch.arange(d // 2, dtype=torch.float32)
    theta = 1 / base ** 2 * i / d                                                 # slip: (1 / base^2) * i / d
    angle = positions.float()[:, None] * theta
    cos, sin = angle.cos(), angle.sin()
    x1, x2 = x[..., :d // 2], x[..., d // 2:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


def rope_u_positions_row(x, positions, base=10000.0):
    d = x.size(-1)
    theta = base ** (-2 * torch.arange(d // 2, dtype=torch.float32) / d)
    angle = positions.float()[None, :] * theta                                    # slip: (1, T) * (d/2,): only T = 1 fits
    cos, sin = angle.cos(), angle.sin()
    x1, x2 = x[..., :d // 2], x[..., d // 2:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


def rope_u_d_from_length(x, positions, base=10000.0):
    d = x.size(-2)                                                                # slip: size(-2) is T, not d
    theta = base ** (-2 * torch.arange(d // 2, dtype=torch.float32) / d)
    angle = positions.float()[:, None] * theta
    cos, sin = angle.cos(), angle.sin()
    x1, x2 = x[..., :d // 2], x[..., d // 2:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


def rope_second_half_unrotated(x, positions, base=10000.0):
    d = x.size(-1)
    theta = base ** (-2 * torch.arange(d // 2, dtype=torch.float32) / d)
    angle = positions.float()[:, None] * theta
    cos, sin = angle.cos(), angle.sin()
    x1, x2 = x[..., :d // 2], x[..., d // 2:]
    return torch.cat([x1 * cos - x2 * sin, x2], dim=-1)                           # slip: second half kept as it was


def rope_cat_without_dim(x, positions, base=10000.0):
    d = x.size(-1)
    theta = base ** (-2 * torch.arange(d // 2, dtype=torch.float32) / d)
    angle = positions.float()[:, None] * theta
    cos, sin = angle.cos(), angle.sin()
    x1, x2 = x[..., :d // 2], x[..., d // 2:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos])                  # slip: no dim=-1: joined on dim 0


def rope_ok_rotation_matrix(x, positions, base=10000.0):
    d = x.size(-1)
    h = d // 2
    theta = base ** (-torch.arange(0, d, 2, dtype=torch.float32) / d)
    angle = positions.to(torch.float32)[:, None] * theta                          # (T, d/2)
    c, s = angle.cos(), angle.sin()
    R = torch.stack([torch.stack([c, -s], -1), torch.stack([s, c], -1)], -2)      # (T, d/2, 2, 2)
    pairs = torch.stack([x[..., :h], x[..., h:]], -1)                             # (..., T, d/2, 2)
    out = torch.einsum("thij,...thj->...thi", R.to(x.dtype), pairs)
    return torch.cat([out[..., 0], out[..., 1]], dim=-1)


def rope_ok_outer_addcmul(x, positions, base=10000.0):
    d = x.shape[-1]
    theta = base ** (-torch.arange(0, d, 2, dtype=torch.float32) / d)            # 2i for i < d/2
    angle = torch.outer(positions.to(torch.float32), theta)                       # (T, d/2)
    cos, sin = angle.cos(), angle.sin()
    a, b = x.chunk(2, dim=-1)
    return torch.cat([torch.addcmul(a * cos, b, sin, value=-1), torch.addcmul(b * cos, a, sin)], dim=-1)


# ======================================================================== grouped_query_attention
def gqa_u_interleave_time(q, k, v, mask=None):
    group = q.size(1) // k.size(1)
    k, v = k.repeat_interleave(group, dim=2), v.repeat_interleave(group, dim=2)   # slip: dim 2 is time, not heads
    return scaled_dot_product_attention(q, k, v, mask)


def gqa_float_group(q, k, v, mask=None):
    group = q.size(1) / k.size(1)                                                 # slip: / gives a float
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    return scaled_dot_product_attention(q, k, v, mask)


def gqa_u_expand_heads(q, k, v, mask=None):
    h = q.size(1)
    k, v = k.expand(-1, h, -1, -1), v.expand(-1, h, -1, -1)                       # slip: expand works for h_kv = 1 only
    return scaled_dot_product_attention(q, k, v, mask)


def gqa_u_mask_transposed(q, k, v, mask=None):
    group = q.size(1) // k.size(1)
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    return scaled_dot_product_attention(q, k, v, None if mask is None else mask.transpose(-2, -1))   # slip: (keys, queries)


def gqa_u_group_from_batch(q, k, v, mask=None):
    group = q.size(0) // k.size(0)                                               # slip: axis 0 (batch): group = 1
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    return scaled_dot_product_attention(q, k, v, mask)


def gqa_u_grouped_output_transposed(q, k, v, mask=None):
    B, h, T, d = q.shape
    h_kv, Tk = k.size(1), k.size(2)
    g = h // h_kv
    s = q.view(B, h_kv, g, T, d) @ k[:, :, None].transpose(-2, -1) / math.sqrt(d)   # (B, h_kv, g, T, Tk)
    if mask is not None:
        s = s.masked_fill(~torch.broadcast_to(mask, (B, h, T, Tk)).reshape(B, h_kv, g, T, Tk), float("-inf"))
    out = torch.nan_to_num(s.softmax(-1)) @ v[:, :, None]                         # (B, h_kv, g, T, d)
    return out.transpose(1, 2).reshape(B, h, T, d)                                # slip: heads flattened as (g, h_kv)


def gqa_scale_by_length(q, k, v, mask=None):
    group = q.size(1) // k.size(1)
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    s = q @ k.transpose(-2, -1) / math.sqrt(k.size(-2))                           # slip: sqrt(T), not sqrt(d)
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return torch.nan_to_num(s.softmax(-1)) @ v


def gqa_ok_loop_over_kv_heads(q, k, v, mask=None):
    h, h_kv = q.size(1), k.size(1)
    g = h // h_kv
    outs = []
    for j in range(h_kv):                                   # kv head j serves query heads j*g ... j*g + g - 1
        m = mask
        if m is not None and m.dim() >= 3 and m.size(-3) > 1:
            m = m[..., j * g:(j + 1) * g, :, :]
        outs.append(scaled_dot_product_attention(q[:, j * g:(j + 1) * g], k[:, j:j + 1], v[:, j:j + 1], m))
    return torch.cat(outs, dim=1)


def gqa_ok_queries_stacked_in_time(q, k, v, mask=None):
    B, h, T, d = q.shape
    h_kv, Tk = k.size(1), k.size(2)
    qs = q.reshape(B, h_kv, (h // h_kv) * T, d)             # a group's queries one after the other
    m = None if mask is None else torch.broadcast_to(mask, (B, h, T, Tk)).reshape(B, h_kv, (h // h_kv) * T, Tk)
    return scaled_dot_product_attention(qs, k, v, m).reshape(B, h, T, v.size(-1))


# ======================================================================== lists
SLIPS = [
    ("next_token_loss", "u: .view on the sliced logits/targets (fails for B > 1)", loss_u_view_sliced),
    ("next_token_loss", "u: logits flattened time-major, targets batch-major (right only for B = 1)", loss_u_time_major),
    ("next_token_loss", "softmax before cross_entropy (double softmax)", loss_double_softmax),
    ("next_token_loss", "u: summed loss / every real token of the window (position 0 counted)", loss_u_count_window_tokens),
    ("next_token_loss", "pad_id passed positionally: lands on `weight` (TypeError)", loss_pad_id_positional),
    ("next_token_loss", "shift applied to the batch axis (logits[:-1], tokens[1:])", loss_shift_on_batch_axis),
    ("gpt_block", "u: first residual with += (in place: the caller's x is changed)", BlockUInPlaceResidual),
    ("gpt_block", "u: second residual added to the block input x, not to h", BlockUSecondResidualFromInput),
    ("gpt_block", "u: returns h (after attention), not the output after the FFN", BlockUReturnsAttentionHalf),
    ("gpt_block", "u: dropout on the FFN's input instead of its output", BlockUDropoutBeforeFFN),
    ("gpt_block", "u: LayerNorm on the attention's output (inside the residual), not its input", BlockUNormOnOutput),
    ("gpt_block", "the two LayerNorms swapped (norm2 before attention)", BlockNormsSwapped),
    ("gpt_block", "u: query from the raw x, keys/values normalised", BlockURawQuery),
    ("gpt", "u: causal_mask(tokens.size(0)) (the batch size, not T)", GPTUMaskOfBatch),
    ("gpt", "u: scaled by sqrt(embed.num_embeddings) (V, not d_model)", GPTUScaleByVocab),
    ("gpt", "u: final LayerNorm applied after every block", GPTUFinalNormEveryBlock),
    ("gpt", "u: tie written in forward (untied after __init__)", GPTUTieInForward),
    ("gpt", "u: d_model ** 1/2 (precedence: d_model / 2)", GPTUPrecedence),
    ("gpt", "u: blocks looped from index 1 (first block skipped)", GPTUSkipsFirstBlock),
    ("gpt", "tril(diagonal=-1) mask: a token cannot see itself", GPTMaskStrictlyLower),
    ("gpt", "final LayerNorm after the output layer", GPTNormAfterHead),
    ("gpt", "u: positions added from pos.pe by hand (the positions' dropout skipped)", GPTUPositionsByHand),
    ("sampling_distribution", "u: top-k fills the cut logits with 0, not -inf", samp_u_topk_zero_fill),
    ("sampling_distribution", "u: k-th value without keepdim (broadcasts along V; right only for N = 1)",
     samp_u_kth_no_keepdim),
    ("sampling_distribution", "u: top-p count from the cumsum of the unsorted probs (wrong variable)",
     samp_u_cumsum_unsorted),
    ("sampling_distribution", "u: top-p threshold (a probability) compared with the logits", samp_u_topp_threshold_on_logits),
    ("sampling_distribution", "temperature 0: argmax over dim 0 (the rows)", samp_greedy_argmax_dim0),
    ("sampling_distribution", "renormalised by the whole batch's sum (no dim)", samp_renorm_whole_batch),
    ("sampling_distribution", "top-p before top-k (order swapped)", samp_topp_before_topk),
    ("sampling_distribution", "u: torch.kthvalue (the k-th smallest) as the top-k threshold", samp_u_kthvalue),
    ("cached_attention_step", "caches concatenated along the features (dim -1)", step_cat_features),
    ("cached_attention_step", "u: position t = cache_k.size(-1) (d, not the length)", step_u_position_from_d),
    ("cached_attention_step", "u: value cache built from cache_k (copy-paste)", step_u_values_onto_key_cache),
    ("cached_attention_step", "u: returns cache_k as both caches", step_u_returns_key_cache_twice),
    ("cached_attention_step", "u: K^T by reshape, not transpose (right at t = 0 only)", step_u_reshape_not_transpose),
    ("cached_attention_step", "weights multiply the keys, not the values", step_weights_times_keys),
    ("cached_attention_step", "u: a causal mask of t+1 applied anyway (t+1 output rows)", step_u_causal_mask_anyway),
    ("apply_rope", "u: rotated pairs stacked and flattened (output interleaved)", rope_u_interleaved_output),
    ("apply_rope", "u: theta = 1 / base ** 2 * i / d (precedence)", rope_u_precedence),
    ("apply_rope", "u: positions[None, :] * theta (works only for T = 1)", rope_u_positions_row),
    ("apply_rope", "u: d = x.size(-2) (T, not d)", rope_u_d_from_length),
    ("apply_rope", "second half left unrotated", rope_second_half_unrotated),
    ("apply_rope", "torch.cat without dim=-1 (halves joined on dim 0)", rope_cat_without_dim),
    ("grouped_query_attention", "u: repeat_interleave on dim 2 (time, not heads)", gqa_u_interleave_time),
    ("grouped_query_attention", "group = h / h_kv, a float (repeat_interleave fails)", gqa_float_group),
    ("grouped_query_attention", "u: k.expand to h heads (works only for h_kv = 1)", gqa_u_expand_heads),
    ("grouped_query_attention", "u: mask transposed (keys and queries swapped)", gqa_u_mask_transposed),
    ("grouped_query_attention", "u: group from size(0) (batch): 1, right only for MHA/MQA by broadcasting",
     gqa_u_group_from_batch),
    ("grouped_query_attention", "u: grouped view right, output heads flattened as (g, h_kv)", gqa_u_grouped_output_transposed),
    ("grouped_query_attention", "manual attention scaled by sqrt(T), not sqrt(d)", gqa_scale_by_length),
]

CORRECT = [
    ("next_token_loss", "logsumexp minus the gathered logit, masked_select mean", loss_ok_logsumexp),
    ("next_token_loss", "log_softmax first, then cross_entropy (idempotent); narrow/flatten", loss_ok_log_softmax_first),
    ("gpt_block", "two separate normed tensors (3 projections), keyword args, 4-D mask, .add", BlockOkSeparateInputs),
    ("gpt", "tie by register_parameter, arange-comparison mask", GPTOkRegisterParameter),
    ("gpt", "embedding by table indexing, einsum output layer", GPTOkEinsumHead),
    ("sampling_distribution", "pairwise 'mass strictly more probable' top-p, sort top-k, scatter one-hot",
     samp_ok_pairwise_mass),
    ("sampling_distribution", "top-k on probabilities renormalised, top-p by searchsorted", samp_ok_probs_searchsorted),
    ("cached_attention_step", "einsum, torch.full position", step_ok_einsum),
    ("cached_attention_step", "q and k rotated in one call (cat on dim 0, chunk)", step_ok_rotate_together),
    ("apply_rope", "2x2 rotation matrices through einsum", rope_ok_rotation_matrix),
    ("apply_rope", "torch.outer angles, chunk, addcmul", rope_ok_outer_addcmul),
    ("grouped_query_attention", "loop over kv heads, each broadcast over its group", gqa_ok_loop_over_kv_heads),
    ("grouped_query_attention", "a group's queries stacked along time: (B, h_kv, g*T, d)", gqa_ok_queries_stacked_in_time),
]
