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
def loss_targets_shifted_only(logits, tokens, pad_id):
    targets = tokens[:, 1:]
    flat = logits.reshape(-1, logits.size(-1))                                    # slip: logits not cut: B*T rows, B*(T-1) targets
    return F.cross_entropy(flat, targets.reshape(-1), ignore_index=pad_id)


def loss_nll_on_logits(logits, tokens, pad_id):
    lg, tg = logits[:, :-1], tokens[:, 1:]
    return F.nll_loss(lg.reshape(-1, lg.size(-1)), tg.reshape(-1), ignore_index=pad_id)   # slip: nll_loss wants log-probabilities


def loss_returns_perplexity(logits, tokens, pad_id):
    lg, tg = logits[:, :-1], tokens[:, 1:]
    loss = F.cross_entropy(lg.reshape(-1, lg.size(-1)), tg.reshape(-1), ignore_index=pad_id)
    return loss.exp()                                                             # slip: the perplexity, not the loss


def loss_u_real_above_pad(logits, tokens, pad_id):
    lg, tg = logits[:, :-1], tokens[:, 1:]
    nll = F.cross_entropy(lg.transpose(1, 2), tg, reduction="none")               # (B, T-1)
    real = tg > pad_id                                                            # slip: right only when pad_id is the smallest id
    return nll[real].mean()


def loss_u_float_targets(logits, tokens, pad_id):
    lg, tg = logits[:, :-1], tokens[:, 1:].float()                                # slip: float targets are read as probabilities
    return F.cross_entropy(lg.reshape(-1, lg.size(-1)), tg.reshape(-1), ignore_index=pad_id)


def loss_u_pads_overwritten(logits, tokens, pad_id):
    targets = tokens[:, 1:]
    targets[targets == pad_id] = -100                                             # slip: a view: writes -100 into the caller's tokens
    lg = logits[:, :-1]
    return F.cross_entropy(lg.reshape(-1, lg.size(-1)), targets.reshape(-1))


def loss_ok_row_sums(logits, tokens, pad_id):
    total, count = logits.new_zeros(()), 0
    for lg, tk in zip(logits, tokens):                          # one sequence at a time: sums and counts
        tg = tk[1:]
        total = total + F.cross_entropy(lg[:-1], tg, ignore_index=pad_id, reduction="sum")
        count = count + (tg != pad_id).sum()
    return total / count


def loss_ok_one_hot(logits, tokens, pad_id):
    lg, tg = logits[:, :-1], tokens[:, 1:]
    real = tg != pad_id
    onehot = F.one_hot(tg.masked_fill(~real, 0), lg.size(-1)).to(lg.dtype)     # pads point at id 0, dropped below
    nll = -(onehot * lg.log_softmax(-1)).sum(-1)                                  # (B, T-1)
    return (nll * real).sum() / real.sum()


# ======================================================================== gpt_block
class _Block(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.0):
        super().__init__()
        self.norm1 = nn.LayerNorm(d_model)
        self.attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.norm2 = nn.LayerNorm(d_model)
        self.ff = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.dropout1, self.dropout2 = nn.Dropout(dropout), nn.Dropout(dropout)


class BlockNoFirstResidual(_Block):
    def forward(self, x, mask):
        y = self.norm1(x)
        x = self.dropout1(self.attn(y, y, y, mask))                               # slip: the attention's residual forgotten
        return x + self.dropout2(self.ff(self.norm2(x)))


class BlockAttnTwoArgs(_Block):
    def forward(self, x, mask):
        y = self.norm1(x)
        x = x + self.dropout1(self.attn(y, mask))                                 # slip: CausalSelfAttention's call; MHA takes (q, k, v, mask)
        return x + self.dropout2(self.ff(self.norm2(x)))


class BlockSecondPostNorm(_Block):
    def forward(self, x, mask):
        y = self.norm1(x)
        x = x + self.dropout1(self.attn(y, y, y, mask))
        return self.norm2(x + self.dropout2(self.ff(x)))                          # slip: second sub-layer post-norm


class BlockUMaskTransposed(_Block):
    def forward(self, x, mask):
        y = self.norm1(x)
        x = x + self.dropout1(self.attn(y, y, y, mask.transpose(-2, -1)))         # slip: (keys, queries): each position sees the future
        return x + self.dropout2(self.ff(self.norm2(x)))


class BlockUFunctionalNormNoAffine(_Block):
    def forward(self, x, mask):
        y = F.layer_norm(x, x.shape[-1:])                                         # slip: norm1's weight and bias never used
        x = x + self.dropout1(self.attn(y, y, y, mask))
        return x + self.dropout2(self.ff(self.norm2(x)))


class BlockUFFNReadsAttention(_Block):
    def forward(self, x, mask):
        y = self.norm1(x)
        a = self.dropout1(self.attn(y, y, y, mask))
        x = x + a
        return x + self.dropout2(self.ff(self.norm2(a)))                          # slip: the FFN reads a (the attention's output), not x


class BlockOkOneDropout(_Block):
    def forward(self, x, mask):
        drop = self.dropout1                                        # both have the same p; nn.Dropout holds no state
        y = self.norm1(x)
        x = x + drop(self.attn(y, y, y, mask))
        return x + drop(self.ff(self.norm2(x)))


class BlockOkFunctionalNorm(_Block):
    def forward(self, x, mask):
        def ln(norm, t):                                            # the LayerNorms written out, with their own parameters
            return F.layer_norm(t, norm.normalized_shape, norm.weight, norm.bias, norm.eps)
        y = ln(self.norm1, x)
        h = x + self.dropout1(self.attn(y, y, y, mask))
        return h + self.dropout2(self.ff(ln(self.norm2, h)))


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


class GPTDividesByScale(_TiedGPT):
    def forward(self, tokens):
        x = self.pos(self.embed(tokens) / math.sqrt(self.d_model))               # slip: divided by sqrt(d_model)
        mask = causal_mask(tokens.size(1), tokens.device)
        for layer in self.layers:
            x = layer(x, mask)
        return self.head(self.norm(x))


class GPTHeadIsEmbedding(_GPT):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.head = self.embed                                                    # slip: the head module replaced by the Embedding

    def forward(self, tokens):
        x = self.pos(self.embed(tokens) * math.sqrt(self.d_model))
        mask = causal_mask(tokens.size(1), tokens.device)
        for layer in self.layers:
            x = layer(x, mask)
        return self.head(self.norm(x))


class GPTReturnsProbabilities(_TiedGPT):
    def forward(self, tokens):
        x = self.pos(self.embed(tokens) * math.sqrt(self.d_model))
        mask = causal_mask(tokens.size(1), tokens.device)
        for layer in self.layers:
            x = layer(x, mask)
        return self.head(self.norm(x)).softmax(-1)                                # slip: probabilities, not logits


class GPTUFirstBlockEveryTime(_TiedGPT):
    def forward(self, tokens):
        x = self.pos(self.embed(tokens) * math.sqrt(self.d_model))
        mask = causal_mask(tokens.size(1), tokens.device)
        for _ in self.layers:
            x = self.layers[0](x, mask)                                           # slip: layers[0] applied N times
        return self.head(self.norm(x))


class GPTUScaleByLength(_TiedGPT):
    def forward(self, tokens):
        x = self.pos(self.embed(tokens) * math.sqrt(tokens.size(-1)))            # slip: tokens.size(-1) is T, not d_model
        mask = causal_mask(tokens.size(1), tokens.device)
        for layer in self.layers:
            x = layer(x, mask)
        return self.head(self.norm(x))


class GPTUNormAtInput(_TiedGPT):
    def forward(self, tokens):
        x = self.norm(self.pos(self.embed(tokens) * math.sqrt(self.d_model)))    # slip: the final LayerNorm at the input
        mask = causal_mask(tokens.size(1), tokens.device)
        for layer in self.layers:
            x = layer(x, mask)
        return self.head(x)


class GPTOkInPlaceScale(_TiedGPT):
    def forward(self, tokens):
        x = self.embed(tokens)
        x.mul_(math.sqrt(self.d_model))                             # in place on the lookup's output: its backward needs ids only
        x = self.pos(x)
        mask = causal_mask(tokens.size(1), tokens.device)
        for i in range(len(self.layers)):
            x = self.layers[i](x, mask)
        return self.head(self.norm(x))


class GPTOkEmbeddingThroughHead(_GPT):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.head.weight = self.embed.weight

    def forward(self, tokens):
        T = tokens.size(1)
        x = F.embedding(tokens, self.head.weight) * math.sqrt(self.d_model)      # tied: the head's matrix is E
        x = self.pos(x)
        mask = causal_mask(T, tokens.device)[None, None]                          # (1, 1, T, T)
        for layer in self.layers:
            x = layer(x, mask)
        return self.norm(x) @ self.embed.weight.T


# ======================================================================== sampling_distribution
def samp_topk_largest_value(logits, temperature=1.0, top_k=None, top_p=None):
    if temperature == 0:
        return F.one_hot(logits.argmax(-1), logits.size(-1)).float()
    z = logits.float() / temperature
    if top_k is not None:
        kth = torch.topk(z, min(top_k, z.size(-1)), dim=-1).values[..., :1]      # slip: the largest value, not the k-th
        z = z.masked_fill(z < kth, float("-inf"))
    probs = z.softmax(-1)
    if top_p is not None and top_p < 1:
        ranked = probs.sort(-1, descending=True).values
        before = (ranked.cumsum(-1) < top_p).sum(-1, keepdim=True)
        last = ranked.gather(-1, before.clamp(max=probs.size(-1) - 1))
        probs = probs.masked_fill(probs < last, 0.0)
    return probs / probs.sum(-1, keepdim=True)


def samp_greedy_returns_ids(logits, temperature=1.0, top_k=None, top_p=None):
    if temperature == 0:
        return logits.argmax(-1)                                                  # slip: the ids (N,), not one-hot rows
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


def samp_renormalise_by_softmax(logits, temperature=1.0, top_k=None, top_p=None):
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
    return probs.softmax(-1)                                                      # slip: softmax of probabilities: zeros get e^0


def samp_topp_one_token_more(logits, temperature=1.0, top_k=None, top_p=None):
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
        last = ranked.gather(-1, (before + 1).clamp(max=probs.size(-1) - 1))    # slip: off by one: the token after the crossing one
        probs = probs.masked_fill(probs < last, 0.0)
    return probs / probs.sum(-1, keepdim=True)


def samp_u_topp_at_one(logits, temperature=1.0, top_k=None, top_p=None):
    if temperature == 0:
        return F.one_hot(logits.argmax(-1), logits.size(-1)).float()
    z = logits.float() / temperature
    if top_k is not None:
        kth = torch.topk(z, min(top_k, z.size(-1)), dim=-1).values[..., -1:]
        z = z.masked_fill(z < kth, float("-inf"))
    probs = z.softmax(-1)
    if top_p is not None:                                                         # slip: runs at p = 1: float cumsum reaches 1 early, the tail is cut
        ranked = probs.sort(-1, descending=True).values
        before = (ranked.cumsum(-1) < top_p).sum(-1, keepdim=True)
        last = ranked.gather(-1, before.clamp(max=probs.size(-1) - 1))
        probs = probs.masked_fill(probs < last, 0.0)
    return probs / probs.sum(-1, keepdim=True)


def samp_u_cumsum_over_rows(logits, temperature=1.0, top_k=None, top_p=None):
    if temperature == 0:
        return F.one_hot(logits.argmax(-1), logits.size(-1)).float()
    z = logits.float() / temperature
    if top_k is not None:
        kth = torch.topk(z, min(top_k, z.size(-1)), dim=-1).values[..., -1:]
        z = z.masked_fill(z < kth, float("-inf"))
    probs = z.softmax(-1)
    if top_p is not None and top_p < 1:
        ranked = probs.sort(-1, descending=True).values
        before = (ranked.cumsum(0) < top_p).sum(-1, keepdim=True)                # slip: cumsum down the rows (right for N = 1)
        last = ranked.gather(-1, before.clamp(max=probs.size(-1) - 1))
        probs = probs.masked_fill(probs < last, 0.0)
    return probs / probs.sum(-1, keepdim=True)


def samp_u_threshold_indexed_by_columns(logits, temperature=1.0, top_k=None, top_p=None):
    if temperature == 0:
        return F.one_hot(logits.argmax(-1), logits.size(-1)).float()
    z = logits.float() / temperature
    if top_k is not None:
        kth = torch.topk(z, min(top_k, z.size(-1)), dim=-1).values[..., -1:]
        z = z.masked_fill(z < kth, float("-inf"))
    probs = z.softmax(-1)
    if top_p is not None and top_p < 1:
        ranked = probs.sort(-1, descending=True).values
        before = (ranked.cumsum(-1) < top_p).sum(-1)                              # (N,)
        last = ranked[:, before.clamp(max=probs.size(-1) - 1)]                   # slip: (N, N), not each row's own: N = 1 only
        probs = probs.masked_fill(probs < last, 0.0)
    return probs / probs.sum(-1, keepdim=True)


def samp_ok_first_reach_argmax(logits, temperature=1.0, top_k=None, top_p=None):
    N, V = logits.shape
    if temperature == 0:
        return torch.zeros(N, V).scatter(-1, logits.argmax(-1, keepdim=True), 1.0)
    z = torch.div(logits.float(), temperature)
    if top_k is not None and top_k < V:
        kth = z.topk(top_k, dim=-1).values.min(-1, keepdim=True).values
        z = torch.where(z >= kth, z, torch.tensor(float("-inf")))
    p = torch.softmax(z, dim=-1)
    if top_p is not None and top_p < 1:
        ranked = p.sort(-1, descending=True).values
        reached = ranked.cumsum(-1) >= top_p                        # monotone: the first True is the crossing token
        first = torch.where(reached.any(-1), reached.int().argmax(-1), V - 1)
        last = ranked[torch.arange(N), first][:, None]
        p = torch.where(p >= last, p, torch.zeros(()))
    return p / p.sum(-1, keepdim=True)


# ======================================================================== cached_attention_step
def step_position_from_len(q, k, v, cache_k, cache_v):
    t = len(cache_k)                                                              # slip: len() is the batch size B
    position = torch.tensor([t])
    q, k = apply_rope(q, position), apply_rope(k, position)
    cache_k = torch.cat([cache_k, k], dim=2)
    cache_v = torch.cat([cache_v, v], dim=2)
    weights = torch.softmax(q @ cache_k.transpose(-2, -1) / math.sqrt(q.size(-1)), dim=-1)
    return weights @ cache_v, cache_k, cache_v


def step_position_0d(q, k, v, cache_k, cache_v):
    t = cache_k.size(2)
    position = torch.tensor(t)                                                    # slip: a 0-d tensor, not shape (1,)
    q, k = apply_rope(q, position), apply_rope(k, position)
    cache_k = torch.cat([cache_k, k], dim=2)
    cache_v = torch.cat([cache_v, v], dim=2)
    weights = torch.softmax(q @ cache_k.transpose(-2, -1) / math.sqrt(q.size(-1)), dim=-1)
    return weights @ cache_v, cache_k, cache_v


def step_softmax_no_dim(q, k, v, cache_k, cache_v):
    t = cache_k.size(2)
    position = torch.tensor([t])
    q, k = apply_rope(q, position), apply_rope(k, position)
    cache_k = torch.cat([cache_k, k], dim=2)
    cache_v = torch.cat([cache_v, v], dim=2)
    weights = F.softmax(q @ cache_k.transpose(-2, -1) / math.sqrt(q.size(-1)))  # slip: no dim: a 4-D tensor's implicit dim is 1 (heads)
    return weights @ cache_v, cache_k, cache_v


def step_scale_after_softmax(q, k, v, cache_k, cache_v):
    t = cache_k.size(2)
    position = torch.tensor([t])
    q, k = apply_rope(q, position), apply_rope(k, position)
    cache_k = torch.cat([cache_k, k], dim=2)
    cache_v = torch.cat([cache_v, v], dim=2)
    weights = torch.softmax(q @ cache_k.transpose(-2, -1), dim=-1) / math.sqrt(q.size(-1))   # slip: 1/sqrt(d) after the softmax
    return weights @ cache_v, cache_k, cache_v


def step_u_key_rotated_twice(q, k, v, cache_k, cache_v):
    t = cache_k.size(2)
    position = torch.tensor([t])
    q, k = apply_rope(q, position), apply_rope(k, position)
    cache_k = torch.cat([cache_k, apply_rope(k, position)], dim=2)               # slip: k rotated a second time (angle 2t)
    cache_v = torch.cat([cache_v, v], dim=2)
    weights = torch.softmax(q @ cache_k.transpose(-2, -1) / math.sqrt(q.size(-1)), dim=-1)
    return weights @ cache_v, cache_k, cache_v


def step_u_out_squeezed(q, k, v, cache_k, cache_v):
    t = cache_k.size(2)
    position = torch.tensor([t])
    q, k = apply_rope(q, position), apply_rope(k, position)
    cache_k = torch.cat([cache_k, k], dim=2)
    cache_v = torch.cat([cache_v, v], dim=2)
    weights = torch.softmax(q @ cache_k.transpose(-2, -1) / math.sqrt(q.size(-1)), dim=-1)
    return (weights @ cache_v).squeeze(2), cache_k, cache_v                       # slip: out (B, h, d): the position axis squeezed away


def step_u_cat_on_heads(q, k, v, cache_k, cache_v):
    t = cache_k.size(2)
    position = torch.tensor([t])
    q, k = apply_rope(q, position), apply_rope(k, position)
    cache_k = torch.cat([cache_k, k], dim=1)                                      # slip: appended along the heads (dim 1)
    cache_v = torch.cat([cache_v, v], dim=1)
    weights = torch.softmax(q @ cache_k.transpose(-2, -1) / math.sqrt(q.size(-1)), dim=-1)
    return weights @ cache_v, cache_k, cache_v


def step_ok_preallocated(q, k, v, cache_k, cache_v):
    B, h, t, d = cache_k.shape
    pos = torch.arange(t, t + 1)
    new_k, new_v = cache_k.new_empty(B, h, t + 1, d), cache_v.new_empty(B, h, t + 1, v.size(-1))
    new_k[:, :, :t], new_k[:, :, t:] = cache_k, apply_rope(k, pos)   # the old cache, then the newest key
    new_v[:, :, :t], new_v[:, :, t:] = cache_v, v
    w = (apply_rope(q, pos) @ new_k.transpose(2, 3) * d ** -0.5).softmax(dim=3)
    return w @ new_v, new_k, new_v


def step_ok_broadcast_sum(q, k, v, cache_k, cache_v):
    pos = torch.tensor([cache_k.shape[2]])
    q = apply_rope(q, pos)
    cache_k = torch.cat([cache_k, apply_rope(k, pos)], dim=2)
    cache_v = torch.cat([cache_v, v], dim=2)
    scores = (q * cache_k).sum(-1) / math.sqrt(q.shape[-1])                    # (B, h, t+1): one query, a dot per key
    w = scores.softmax(-1)
    return (w[..., None] * cache_v).sum(2, keepdim=True), cache_k, cache_v


# ======================================================================== apply_rope
def rope_angle_per_feature(x, positions, base=10000.0):
    d = x.size(-1)
    theta = base ** (-2 * torch.arange(d, dtype=torch.float32) / d)              # slip: d frequencies, not d/2
    angle = positions.float()[:, None] * theta
    cos, sin = angle.cos(), angle.sin()
    x1, x2 = x[..., :d // 2], x[..., d // 2:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


def rope_first_half_plus(x, positions, base=10000.0):
    d = x.size(-1)
    theta = base ** (-2 * torch.arange(d // 2, dtype=torch.float32) / d)
    angle = positions.float()[:, None] * theta
    cos, sin = angle.cos(), angle.sin()
    x1, x2 = x[..., :d // 2], x[..., d // 2:]
    return torch.cat([x1 * cos + x2 * sin, x1 * sin + x2 * cos], dim=-1)        # slip: + in the first half: not a rotation


def rope_i_from_one(x, positions, base=10000.0):
    d = x.size(-1)
    theta = base ** (-2 * torch.arange(1, d // 2 + 1, dtype=torch.float32) / d)  # slip: i counted from 1
    angle = positions.float()[:, None] * theta
    cos, sin = angle.cos(), angle.sin()
    x1, x2 = x[..., :d // 2], x[..., d // 2:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


def rope_u_trig_of_theta(x, positions, base=10000.0):
    d = x.size(-1)
    theta = base ** (-2 * torch.arange(d // 2, dtype=torch.float32) / d)
    angle = positions.float()[:, None] * theta
    cos, sin = theta.cos(), theta.sin()                                           # slip: of theta, not angle: every position at m = 1
    x1, x2 = x[..., :d // 2], x[..., d // 2:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


def rope_u_angles_transposed(x, positions, base=10000.0):
    d = x.size(-1)
    theta = base ** (-2 * torch.arange(d // 2, dtype=torch.float32) / d)
    angle = positions.float() * theta[:, None]                                    # slip: (d/2, T): runs only when T = d/2 (or 1)
    cos, sin = angle.cos(), angle.sin()
    x1, x2 = x[..., :d // 2], x[..., d // 2:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


def rope_u_exponent_over_half(x, positions, base=10000.0):
    d = x.size(-1)
    half = d // 2
    theta = base ** (-2 * torch.arange(half, dtype=torch.float32) / half)        # slip: over d/2, not d
    angle = positions.float()[:, None] * theta
    cos, sin = angle.cos(), angle.sin()
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


def rope_ok_stack_reshape(x, positions, base=10000.0):
    half = x.shape[-1] // 2
    theta = torch.pow(base, -torch.arange(half, dtype=torch.float32) * 2 / x.shape[-1])
    angle = positions[:, None] * theta                           # integer positions promote to float32
    c, s = torch.cos(angle), torch.sin(angle)
    a, b = x[..., :half], x[..., half:]
    out = torch.stack([a * c - b * s, a * s + b * c], dim=-2)    # (..., T, 2, d/2): the halves one after the other
    return out.reshape(out.shape[:-2] + (2 * half,))


# ======================================================================== grouped_query_attention
def gqa_values_not_repeated(q, k, v, mask=None):
    group = q.size(1) // k.size(1)
    k = k.repeat_interleave(group, dim=1)                                         # slip: v left with h_kv heads
    return scaled_dot_product_attention(q, k, v, mask)


def gqa_manual_masked_zero(q, k, v, mask=None):
    group = q.size(1) // k.size(1)
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, 0.0)                                   # slip: a masked score of 0 still gets weight
    return scores.softmax(-1) @ v


def gqa_repeat_interleave_no_dim(q, k, v, mask=None):
    group = q.size(1) // k.size(1)
    k, v = k.repeat_interleave(group), v.repeat_interleave(group)                 # slip: no dim: flattened to 1-D
    return scaled_dot_product_attention(q, k, v, mask)


def gqa_mask_and_causal(q, k, v, mask=None):
    T = q.size(-2)
    group = q.size(1) // k.size(1)
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    mask = causal_mask(T) if mask is None else mask & causal_mask(T)              # slip: causality added to the mask given
    return scaled_dot_product_attention(q, k, v, mask)


def gqa_u_heads_front_no_transpose(q, k, v, mask=None):
    group = q.size(1) // k.size(1)
    k = k.transpose(0, 1).repeat_interleave(group, dim=0).reshape(q.shape[:2] + k.shape[2:])   # slip: (h, B) read as (B, h): B = 1 only
    v = v.transpose(0, 1).repeat_interleave(group, dim=0).reshape(q.shape[:2] + v.shape[2:])
    return scaled_dot_product_attention(q, k, v, mask)


def gqa_u_expand_then_view(q, k, v, mask=None):
    B, h, T, d = q.shape
    h_kv = k.size(1)
    g = h // h_kv
    k = k[:, :, None].expand(B, h_kv, g, k.size(2), d).view(B, h, k.size(2), d)     # slip: view of an expanded tensor (MHA/MQA only)
    v = v[:, :, None].expand(B, h_kv, g, v.size(2), v.size(-1)).view(B, h, v.size(2), v.size(-1))
    return scaled_dot_product_attention(q, k, v, mask)


def gqa_ok_enable_gqa(q, k, v, mask=None):
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)   # torch repeats kv head j // (h / h_kv)


def gqa_ok_fold_heads_into_batch(q, k, v, mask=None):
    B, h_kv, Tk, d = k.shape
    g = q.size(1) // h_kv
    # (B*h_kv, 1, Tk, d) repeated along the new axis: row b*h_kv + j becomes heads j*g ... j*g + g-1 of sequence b
    k = k.reshape(B * h_kv, 1, Tk, d).repeat(1, g, 1, 1).reshape(B, h_kv * g, Tk, d)
    v = v.reshape(B * h_kv, 1, Tk, v.size(-1)).repeat(1, g, 1, 1).reshape(B, h_kv * g, Tk, v.size(-1))
    return scaled_dot_product_attention(q, k, v, mask)


# ======================================================================== lists
SLIPS = [
    ("next_token_loss", "targets shifted, logits not cut (B*T rows vs B*(T-1) targets: error)", loss_targets_shifted_only),
    ("next_token_loss", "F.nll_loss on the raw logits (no log_softmax)", loss_nll_on_logits),
    ("next_token_loss", "returns exp(loss), the perplexity", loss_returns_perplexity),
    ("next_token_loss", "u: real targets taken as ids > pad_id (right only when pad is the smallest id)",
     loss_u_real_above_pad),
    ("next_token_loss", "u: targets cast to float (read as class probabilities: error)", loss_u_float_targets),
    ("next_token_loss", "u: pads overwritten with -100 through a view (the caller's tokens change)",
     loss_u_pads_overwritten),
    ("gpt_block", "first residual forgotten (x = dropout(attn(...)))", BlockNoFirstResidual),
    ("gpt_block", "self.attn(y, mask): the GPT attention's call, MultiHeadAttention needs q, k, v (TypeError)",
     BlockAttnTwoArgs),
    ("gpt_block", "second sub-layer post-norm: norm2(x + FFN(x))", BlockSecondPostNorm),
    ("gpt_block", "u: mask transposed (anti-causal: sees the future)", BlockUMaskTransposed),
    ("gpt_block", "u: F.layer_norm without norm1's weight and bias", BlockUFunctionalNormNoAffine),
    ("gpt_block", "u: FFN reads the attention's output a, not the updated x", BlockUFFNReadsAttention),
    ("gpt", "embedding divided by sqrt(d_model)", GPTDividesByScale),
    ("gpt", "tie by self.head = self.embed (module replaced: Embedding called on floats)", GPTHeadIsEmbedding),
    ("gpt", "returns softmax probabilities, not logits", GPTReturnsProbabilities),
    ("gpt", "u: self.layers[0] applied num_layers times", GPTUFirstBlockEveryTime),
    ("gpt", "u: scaled by sqrt(tokens.size(-1)) (T, not d_model)", GPTUScaleByLength),
    ("gpt", "u: the final LayerNorm applied to the input, none at the end", GPTUNormAtInput),
    ("sampling_distribution", "top-k threshold values[..., :1]: the largest, not the k-th", samp_topk_largest_value),
    ("sampling_distribution", "temperature 0 returns the argmax ids, not one-hot rows", samp_greedy_returns_ids),
    ("sampling_distribution", "renormalised with softmax (zeros become e^0)", samp_renormalise_by_softmax),
    ("sampling_distribution", "top-p off by one: threshold at index before + 1 (one token more)", samp_topp_one_token_more),
    ("sampling_distribution", "u: top-p also run at p = 1 (float cumsum reaches 1 early: the tail is cut)",
     samp_u_topp_at_one),
    ("sampling_distribution", "u: cumsum over dim 0 (the rows) in top-p", samp_u_cumsum_over_rows),
    ("sampling_distribution", "u: threshold ranked[:, before] is (N, N) (works for N = 1 only)",
     samp_u_threshold_indexed_by_columns),
    ("cached_attention_step", "position t = len(cache_k) (the batch size)", step_position_from_len),
    ("cached_attention_step", "position torch.tensor(t): 0-d, apply_rope wants (1,) (error)", step_position_0d),
    ("cached_attention_step", "F.softmax without dim (implicit dim 1: over the heads)", step_softmax_no_dim),
    ("cached_attention_step", "1/sqrt(d) applied after the softmax", step_scale_after_softmax),
    ("cached_attention_step", "u: new key rotated twice (at 2t) before caching", step_u_key_rotated_twice),
    ("cached_attention_step", "u: out squeezed to (B, h, d) (the position axis dropped)", step_u_out_squeezed),
    ("cached_attention_step", "u: caches concatenated along the heads (dim 1): error", step_u_cat_on_heads),
    ("apply_rope", "theta over arange(d), not arange(d/2) (shape error)", rope_angle_per_feature),
    ("apply_rope", "first half x1 cos + x2 sin (sign: not a rotation)", rope_first_half_plus),
    ("apply_rope", "i counted from 1: arange(1, d/2 + 1)", rope_i_from_one),
    ("apply_rope", "u: cos/sin of theta, not of the angle (positions ignored)", rope_u_trig_of_theta),
    ("apply_rope", "u: angles as (d/2, T) (outer product the wrong way round)", rope_u_angles_transposed),
    ("apply_rope", "u: exponent divided by d/2, not d", rope_u_exponent_over_half),
    ("grouped_query_attention", "only k repeated, v left with h_kv heads", gqa_values_not_repeated),
    ("grouped_query_attention", "manual attention: masked scores filled with 0, not -inf", gqa_manual_masked_zero),
    ("grouped_query_attention", "repeat_interleave without dim (flattens: error)", gqa_repeat_interleave_no_dim),
    ("grouped_query_attention", "mask & causal_mask(T): causality added to the given (padding) mask", gqa_mask_and_causal),
    ("grouped_query_attention", "u: heads moved to the front, repeated, reshaped back without transposing (B = 1 only)",
     gqa_u_heads_front_no_transpose),
    ("grouped_query_attention", "u: expand then .view (fails unless h_kv = h or h_kv = 1)", gqa_u_expand_then_view),
]

CORRECT = [
    ("next_token_loss", "loop over sequences: summed losses / counted real targets", loss_ok_row_sums),
    ("next_token_loss", "one-hot targets dotted with log_softmax, pads zeroed by a mask", loss_ok_one_hot),
    ("gpt_block", "one dropout module used for both sub-layers (same p, stateless)", BlockOkOneDropout),
    ("gpt_block", "F.layer_norm with each LayerNorm's own weight, bias and eps", BlockOkFunctionalNorm),
    ("gpt", "embedding scaled in place (mul_), blocks by index", GPTOkInPlaceScale),
    ("gpt", "F.embedding through the tied head weight, (1,1,T,T) mask, LN(x) @ E^T", GPTOkEmbeddingThroughHead),
    ("sampling_distribution", "top-p crossing token as the first True of cumsum >= p (argmax), top-k by min of topk",
     samp_ok_first_reach_argmax),
    ("cached_attention_step", "caches pre-allocated with new_empty and filled by slices", step_ok_preallocated),
    ("cached_attention_step", "scores by broadcast product and sum, values by weighted sum", step_ok_broadcast_sum),
    ("apply_rope", "halves stacked on dim -2 then reshaped (same as cat), integer positions", rope_ok_stack_reshape),
    ("grouped_query_attention", "torch's F.scaled_dot_product_attention(enable_gqa=True)", gqa_ok_enable_gqa),
    ("grouped_query_attention", "kv heads folded into the batch, repeat, reshape back", gqa_ok_fold_heads_into_batch),
]
