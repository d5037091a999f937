"""Typical learner mistakes (and right answers written differently) for lesson 12, "A GPT from scratch".

Written blind, from the exercise texts and the reference solution only, to measure how well the lesson's
checks name the mistakes learners commonly make. Each slip has exactly one thing wrong, marked `# slip:`.

    SLIPS   = [(exercise, description, answer), ...]
    CORRECT = [(exercise, description, answer), ...]

`answer` is what a learner hands to the exercise's check: a function for next_token_loss,
sampling_distribution, cached_attention_step, apply_rope and grouped_query_attention; an nn.Module class
for gpt_block (MyGPTBlock) and gpt (MyGPT), with the notebook's __init__.
"""
import functools
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from course_utils.attention import MultiHeadAttention, scaled_dot_product_attention
from course_utils.gpt import GPTBlock
from course_utils.masks import causal_mask, masked_softmax
from course_utils.positions import LearnedPositionalEncoding, apply_rope
from course_utils.transformer import PositionwiseFeedForward

# ============================================================================================================
# Exercise 1: next_token_loss(logits, tokens, pad_id)
# ============================================================================================================

def ntl_no_shift(logits, tokens, pad_id):
    V = logits.size(-1)
    return F.cross_entropy(logits.reshape(-1, V), tokens.reshape(-1), ignore_index=pad_id)  # slip: no shift


def ntl_reversed_shift(logits, tokens, pad_id):
    logits, targets = logits[:, 1:], tokens[:, :-1]  # slip: shifted the wrong way
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1), ignore_index=pad_id)


def ntl_no_ignore(logits, tokens, pad_id):
    logits, targets = logits[:, :-1], tokens[:, 1:]
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))  # slip: pad targets counted


def ntl_mask_on_inputs(logits, tokens, pad_id):
    logits, targets = logits[:, :-1], tokens[:, 1:]
    nll = F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1), reduction="none")
    keep = (tokens[:, :-1] != pad_id).reshape(-1)  # slip: padding judged on the input token, not the target
    return nll[keep].mean()


def ntl_mean_of_row_means(logits, tokens, pad_id):
    logits, targets = logits[:, :-1], tokens[:, 1:]
    nll = F.cross_entropy(logits.transpose(1, 2), targets, ignore_index=pad_id, reduction="none")   # (B, T-1)
    keep = (targets != pad_id).float()
    return ((nll * keep).sum(1) / keep.sum(1)).mean()  # slip: mean of per-sequence means, not over all targets


def ntl_sum(logits, tokens, pad_id):
    logits, targets = logits[:, :-1], tokens[:, 1:]
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1), ignore_index=pad_id,
                           reduction="sum")  # slip: sum, not mean


def ntl_item(logits, tokens, pad_id):
    logits, targets = logits[:, :-1], tokens[:, 1:]
    loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1), ignore_index=pad_id)
    return loss.item()  # slip: a Python float, no graph to backpropagate


def ntl_nll_on_logits(logits, tokens, pad_id):
    logits, targets = logits[:, :-1], tokens[:, 1:]
    return F.nll_loss(logits.reshape(-1, logits.size(-1)), targets.reshape(-1), ignore_index=pad_id)  # slip: no log_softmax


def ntl_divide_by_all(logits, tokens, pad_id):
    logp = logits[:, :-1].log_softmax(-1)
    targets = tokens[:, 1:]
    keep = targets != pad_id
    nll = -logp.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    return (nll * keep).sum() / targets.numel()  # slip: divided by every position, padding included


def ntl_log_softmax_time_axis(logits, tokens, pad_id):
    logp = logits[:, :-1].log_softmax(dim=1)  # slip: normalised over time, not over the vocabulary
    targets = tokens[:, 1:]
    keep = targets != pad_id
    nll = -logp.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    return nll[keep].mean()


def ntl_ok_gather(logits, tokens, pad_id):
    targets = tokens[:, 1:]
    keep = targets != pad_id
    logp = torch.log_softmax(logits[:, :-1], dim=-1)                           # (B, T-1, V)
    picked = logp.gather(-1, torch.where(keep, targets, 0).unsqueeze(-1)).squeeze(-1)
    return -torch.where(keep, picked, torch.zeros_like(picked)).sum() / keep.sum()


def ntl_ok_transpose(logits, tokens, pad_id):
    return F.cross_entropy(logits[:, :-1].transpose(1, 2), tokens[:, 1:], ignore_index=pad_id)   # (B, V, T-1)


def ntl_ok_select(logits, tokens, pad_id):
    V = logits.size(-1)
    flat_logits = logits[:, :-1].reshape(-1, V)
    flat_targets = tokens[:, 1:].reshape(-1)
    real = flat_targets != pad_id
    return F.cross_entropy(flat_logits[real], flat_targets[real])


# ============================================================================================================
# Exercise 2: MyGPTBlock (forward(x, mask)), with the notebook's __init__
# ============================================================================================================

class _BlockInit(nn.Module):
    """The notebook's __init__ of MyGPTBlock, unchanged."""

    def __init__(self, d_model, num_heads, d_ff, dropout=0.0):
        super().__init__()
        self.norm1 = nn.LayerNorm(d_model)
        self.attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.norm2 = nn.LayerNorm(d_model)
        self.ff = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.dropout1, self.dropout2 = nn.Dropout(dropout), nn.Dropout(dropout)


class BlockPostNorm(_BlockInit):
    def forward(self, x, mask):
        x = self.norm1(x + self.dropout1(self.attn(x, x, x, mask)))  # slip: post-norm (lesson 09's paper), not pre-norm
        return self.norm2(x + self.dropout2(self.ff(x)))


class BlockResidualFromNorm(_BlockInit):
    def forward(self, x, mask):
        y = self.norm1(x)
        x = y + self.dropout1(self.attn(y, y, y, mask))  # slip: residual adds to the normalised x
        return x + self.dropout2(self.ff(self.norm2(x)))


class BlockSharedNorm(_BlockInit):
    def forward(self, x, mask):
        y = self.norm1(x)
        x = x + self.dropout1(self.attn(y, y, y, mask))
        return x + self.dropout2(self.ff(self.norm1(x)))  # slip: norm1 reused before the feed-forward network


class BlockNoMask(_BlockInit):
    def forward(self, x, mask):
        y = self.norm1(x)
        x = x + self.dropout1(self.attn(y, y, y))  # slip: mask not passed, every position sees the future
        return x + self.dropout2(self.ff(self.norm2(x)))


class BlockInvertedMask(_BlockInit):
    def forward(self, x, mask):
        y = self.norm1(x)
        x = x + self.dropout1(self.attn(y, y, y, ~mask))  # slip: mask inverted (True read as "blocked")
        return x + self.dropout2(self.ff(self.norm2(x)))


class BlockNoFFResidual(_BlockInit):
    def forward(self, x, mask):
        y = self.norm1(x)
        x = x + self.dropout1(self.attn(y, y, y, mask))
        return self.dropout2(self.ff(self.norm2(x)))  # slip: feed-forward output not added to x


class BlockParallel(_BlockInit):
    def forward(self, x, mask):
        y = self.norm1(x)
        attn = self.dropout1(self.attn(y, y, y, mask))
        return x + attn + self.dropout2(self.ff(self.norm2(x)))  # slip: FFN reads the block's input, not x after attention


class BlockNoAttnDropout(_BlockInit):
    def forward(self, x, mask):
        y = self.norm1(x)
        x = x + self.attn(y, y, y, mask)  # slip: dropout1 left out on the attention output
        return x + self.dropout2(self.ff(self.norm2(x)))


class BlockFFFirst(_BlockInit):
    def forward(self, x, mask):
        x = x + self.dropout2(self.ff(self.norm2(x)))  # slip: feed-forward network before the attention
        y = self.norm1(x)
        return x + self.dropout1(self.attn(y, y, y, mask))


class BlockRawKeys(_BlockInit):
    def forward(self, x, mask):
        y = self.norm1(x)
        x = x + self.dropout1(self.attn(y, x, x, mask))  # slip: keys and values from x, not from its LayerNorm
        return x + self.dropout2(self.ff(self.norm2(x)))


class BlockOkLoop(_BlockInit):
    def forward(self, x, mask):
        sublayers = ((self.norm1, lambda h: self.attn(h, h, h, mask), self.dropout1),
                     (self.norm2, self.ff, self.dropout2))
        for norm, sublayer, drop in sublayers:
            x = x + drop(sublayer(norm(x)))
        return x


class BlockOkSeparateCalls(_BlockInit):
    def forward(self, x, mask):
        attended = self.attn(self.norm1(x), self.norm1(x), self.norm1(x), mask=mask)
        h = x + self.dropout1(attended)
        fed = self.ff(self.norm2(h))
        return h + self.dropout2(fed)


# ============================================================================================================
# Exercise 3: MyGPT (tie in __init__, forward(tokens)), with the notebook's __init__
# ============================================================================================================

class _GPTParts(nn.Module):
    """The notebook's __init__ of MyGPT, before the learner's tying line."""

    def __init__(self, vocab_size, d_model, num_heads, num_layers, d_ff, max_len, dropout=0.0):
        super().__init__()
        self.d_model, self.max_len = d_model, max_len
        self.embed = nn.Embedding(vocab_size, d_model)
        self.pos = LearnedPositionalEncoding(d_model, max_len, dropout)
        self.layers = nn.ModuleList(GPTBlock(d_model, num_heads, d_ff, dropout) for _ in range(num_layers))
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size, bias=False)


class _GPTTied(_GPTParts):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.head.weight = self.embed.weight


class GPTTieByCopy(_GPTParts):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.head.weight = nn.Parameter(self.embed.weight.detach().clone())  # slip: a copy, two parameters that train apart

    def forward(self, tokens):
        x = self.pos(self.embed(tokens) * math.sqrt(self.d_model))
        mask = causal_mask(tokens.size(1), tokens.device)
        for layer in self.layers:
            x = layer(x, mask)
        return self.head(self.norm(x))


class GPTNoScale(_GPTTied):
    def forward(self, tokens):
        x = self.pos(self.embed(tokens))  # slip: embedding not multiplied by sqrt(d_model)
        mask = causal_mask(tokens.size(1), tokens.device)
        for layer in self.layers:
            x = layer(x, mask)
        return self.head(self.norm(x))


class GPTScaleAfterPositions(_GPTTied):
    def forward(self, tokens):
        x = self.pos(self.embed(tokens)) * math.sqrt(self.d_model)  # slip: positions scaled too
        mask = causal_mask(tokens.size(1), tokens.device)
        for layer in self.layers:
            x = layer(x, mask)
        return self.head(self.norm(x))


class GPTDivideScale(_GPTTied):
    def forward(self, tokens):
        x = self.pos(self.embed(tokens) / math.sqrt(self.d_model))  # slip: divided by sqrt(d_model)
        mask = causal_mask(tokens.size(1), tokens.device)
        for layer in self.layers:
            x = layer(x, mask)
        return self.head(self.norm(x))


class GPTNoFinalNorm(_GPTTied):
    def forward(self, tokens):
        x = self.pos(self.embed(tokens) * math.sqrt(self.d_model))
        mask = causal_mask(tokens.size(1), tokens.device)
        for layer in self.layers:
            x = layer(x, mask)
        return self.head(x)  # slip: final LayerNorm skipped


class GPTNoMask(_GPTTied):
    def forward(self, tokens):
        x = self.pos(self.embed(tokens) * math.sqrt(self.d_model))
        mask = None  # slip: no causal mask
        for layer in self.layers:
            x = layer(x, mask)
        return self.head(self.norm(x))


class GPTUpperMask(_GPTTied):
    def forward(self, tokens):
        T = tokens.size(1)
        x = self.pos(self.embed(tokens) * math.sqrt(self.d_model))
        mask = torch.triu(torch.ones(T, T, dtype=torch.bool, device=tokens.device))  # slip: upper triangle, sees the future
        for layer in self.layers:
            x = layer(x, mask)
        return self.head(self.norm(x))


class GPTNormEveryLayer(_GPTTied):
    def forward(self, tokens):
        x = self.pos(self.embed(tokens) * math.sqrt(self.d_model))
        mask = causal_mask(tokens.size(1), tokens.device)
        for layer in self.layers:
            x = self.norm(layer(x, mask))  # slip: final LayerNorm applied after every block
        return self.head(x)


class GPTSoftmaxOutput(_GPTTied):
    def forward(self, tokens):
        x = self.pos(self.embed(tokens) * math.sqrt(self.d_model))
        mask = causal_mask(tokens.size(1), tokens.device)
        for layer in self.layers:
            x = layer(x, mask)
        return self.head(self.norm(x)).softmax(-1)  # slip: returns probabilities, not logits


class GPTLayersNotChained(_GPTTied):
    def forward(self, tokens):
        x = self.pos(self.embed(tokens) * math.sqrt(self.d_model))
        mask = causal_mask(tokens.size(1), tokens.device)
        h = x
        for layer in self.layers:
            h = layer(x, mask)  # slip: every block reads the embeddings, only the last one counts
        return self.head(self.norm(h))


class GPTOkTieOtherWay(_GPTParts):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.embed.weight = self.head.weight            # the same single parameter, (V, d_model) either way

    def forward(self, tokens):
        T = tokens.size(1)
        x = self.embed(tokens) * self.d_model ** 0.5
        x = self.pos(x)
        mask = torch.tril(torch.ones(T, T, device=tokens.device)).bool()
        for layer in self.layers:
            x = layer(x, mask)
        return F.linear(self.norm(x), self.embed.weight)


class GPTOkReduce(_GPTTied):
    def forward(self, tokens):
        x = F.embedding(tokens, self.embed.weight) * math.sqrt(self.d_model)
        x = self.pos(x)
        mask = causal_mask(tokens.size(1), tokens.device)
        x = functools.reduce(lambda h, layer: layer(h, mask), self.layers, x)
        return self.norm(x) @ self.head.weight.T


# ============================================================================================================
# Exercise 4: sampling_distribution(logits, temperature=1.0, top_k=None, top_p=None)
# ============================================================================================================

def _top_p_ref(probs, top_p):
    ranked = probs.sort(-1, descending=True).values
    before = (ranked.cumsum(-1) < top_p).sum(-1, keepdim=True)
    last = ranked.gather(-1, before.clamp(max=probs.size(-1) - 1))
    return probs.masked_fill(probs < last, 0.0)


def sd_multiply_temperature(logits, temperature=1.0, top_k=None, top_p=None):
    if temperature == 0:
        return F.one_hot(logits.argmax(-1), logits.size(-1)).float()
    z = logits.float() * temperature  # slip: multiplied by the temperature instead of divided
    if top_k is not None:
        kth = torch.topk(z, min(top_k, z.size(-1)), dim=-1).values[..., -1:]
        z = z.masked_fill(z < kth, float("-inf"))
    probs = z.softmax(-1)
    if top_p is not None and top_p < 1:
        probs = _top_p_ref(probs, top_p)
    return probs / probs.sum(-1, keepdim=True)


def sd_no_greedy_case(logits, temperature=1.0, top_k=None, top_p=None):
    z = logits.float() / temperature  # slip: temperature 0 not special-cased (divides by zero)
    if top_k is not None:
        kth = torch.topk(z, min(top_k, z.size(-1)), dim=-1).values[..., -1:]
        z = z.masked_fill(z < kth, float("-inf"))
    probs = z.softmax(-1)
    if top_p is not None and top_p < 1:
        probs = _top_p_ref(probs, top_p)
    return probs / probs.sum(-1, keepdim=True)


def sd_greedy_shares_ties(logits, temperature=1.0, top_k=None, top_p=None):
    if temperature == 0:
        best = logits == logits.max(-1, keepdim=True).values  # slip: tied maxima share the mass
        return best.float() / best.sum(-1, keepdim=True)
    z = logits.float() / temperature
    if top_k is not None:
        kth = torch.topk(z, min(top_k, z.size(-1)), dim=-1).values[..., -1:]
        z = z.masked_fill(z < kth, float("-inf"))
    probs = z.softmax(-1)
    if top_p is not None and top_p < 1:
        probs = _top_p_ref(probs, top_p)
    return probs / probs.sum(-1, keepdim=True)


def sd_top_k_scatter(logits, temperature=1.0, top_k=None, top_p=None):
    if temperature == 0:
        return F.one_hot(logits.argmax(-1), logits.size(-1)).float()
    z = logits.float() / temperature
    if top_k is not None:
        values, indices = torch.topk(z, min(top_k, z.size(-1)), dim=-1)
        z = torch.full_like(z, float("-inf")).scatter(-1, indices, values)  # slip: exactly k kept, ties with the k-th dropped
    probs = z.softmax(-1)
    if top_p is not None and top_p < 1:
        probs = _top_p_ref(probs, top_p)
    return probs / probs.sum(-1, keepdim=True)


def sd_top_k_larger_than_vocab(logits, temperature=1.0, top_k=None, top_p=None):
    if temperature == 0:
        return F.one_hot(logits.argmax(-1), logits.size(-1)).float()
    z = logits.float() / temperature
    if top_k is not None:
        kth = torch.topk(z, top_k, dim=-1).values[..., -1:]  # slip: top_k > V not clamped (raises)
        z = z.masked_fill(z < kth, float("-inf"))
    probs = z.softmax(-1)
    if top_p is not None and top_p < 1:
        probs = _top_p_ref(probs, top_p)
    return probs / probs.sum(-1, keepdim=True)


def sd_top_k_zero_fill(logits, temperature=1.0, top_k=None, top_p=None):
    if temperature == 0:
        return F.one_hot(logits.argmax(-1), logits.size(-1)).float()
    z = logits.float() / temperature
    if top_k is not None:
        kth = torch.topk(z, min(top_k, z.size(-1)), dim=-1).values[..., -1:]
        z = z.masked_fill(z < kth, 0.0)  # slip: filtered logits set to 0, not -inf: they keep probability
    probs = z.softmax(-1)
    if top_p is not None and top_p < 1:
        probs = _top_p_ref(probs, top_p)
    return probs / probs.sum(-1, keepdim=True)


def sd_top_p_drops_crossing(logits, temperature=1.0, top_k=None, top_p=None):
    if temperature == 0:
        return F.one_hot(logits.argmax(-1), logits.size(-1)).float()
    z = logits.float() / temperature
    if top_k is not None:
        kth = torch.topk(z, min(top_k, z.size(-1)), dim=-1).values[..., -1:]
        z = z.masked_fill(z < kth, float("-inf"))
    probs = z.softmax(-1)
    if top_p is not None and top_p < 1:
        ranked, order = probs.sort(-1, descending=True)
        remove_sorted = ranked.cumsum(-1) > top_p  # slip: the token that crosses p is removed too
        remove = torch.zeros_like(remove_sorted).scatter(-1, order, remove_sorted)
        probs = probs.masked_fill(remove, 0.0)
    return probs / probs.sum(-1, keepdim=True)


def sd_top_p_on_raw_distribution(logits, temperature=1.0, top_k=None, top_p=None):
    if temperature == 0:
        return F.one_hot(logits.argmax(-1), logits.size(-1)).float()
    z = logits.float() / temperature
    if top_k is not None:
        kth = torch.topk(z, min(top_k, z.size(-1)), dim=-1).values[..., -1:]
        z = z.masked_fill(z < kth, float("-inf"))
    probs = z.softmax(-1)
    if top_p is not None and top_p < 1:
        raw = logits.float().softmax(-1)  # slip: nucleus chosen on the model's distribution, before temperature and top-k
        ranked = raw.sort(-1, descending=True).values
        before = (ranked.cumsum(-1) < top_p).sum(-1, keepdim=True)
        last = ranked.gather(-1, before.clamp(max=raw.size(-1) - 1))
        probs = probs.masked_fill(raw < last, 0.0)
    return probs / probs.sum(-1, keepdim=True)


def sd_no_renormalise(logits, temperature=1.0, top_k=None, top_p=None):
    if temperature == 0:
        return F.one_hot(logits.argmax(-1), logits.size(-1)).float()
    z = logits.float() / temperature
    if top_k is not None:
        kth = torch.topk(z, min(top_k, z.size(-1)), dim=-1).values[..., -1:]
        z = z.masked_fill(z < kth, float("-inf"))
    probs = z.softmax(-1)
    if top_p is not None and top_p < 1:
        probs = _top_p_ref(probs, top_p)
    return probs  # slip: not renormalised after top-p


def sd_top_p_ignores_ties(logits, temperature=1.0, top_k=None, top_p=None):
    if temperature == 0:
        return F.one_hot(logits.argmax(-1), logits.size(-1)).float()
    z = logits.float() / temperature
    if top_k is not None:
        kth = torch.topk(z, min(top_k, z.size(-1)), dim=-1).values[..., -1:]
        z = z.masked_fill(z < kth, float("-inf"))
    probs = z.softmax(-1)
    if top_p is not None and top_p < 1:
        ranked, order = probs.sort(-1, descending=True)
        cum = ranked.cumsum(-1)
        mass_before = torch.cat([torch.zeros_like(cum[..., :1]), cum[..., :-1]], dim=-1)
        remove_sorted = mass_before >= top_p  # slip: cut by sorted rank, tokens tied with the last kept one dropped
        remove = torch.zeros_like(remove_sorted).scatter(-1, order, remove_sorted)
        probs = probs.masked_fill(remove, 0.0)
    return probs / probs.sum(-1, keepdim=True)


def sd_ok_searchsorted(logits, temperature=1.0, top_k=None, top_p=None):
    N, V = logits.shape
    if temperature == 0:
        return torch.zeros(N, V).scatter_(-1, logits.argmax(-1, keepdim=True), 1.0)
    z = logits.float() / temperature
    if top_k is not None and top_k < V:
        kth = z.sort(-1, descending=True).values[:, top_k - 1:top_k]
        z = torch.where(z >= kth, z, torch.full_like(z, float("-inf")))
    p = torch.softmax(z, dim=-1)
    if top_p is not None and top_p < 1:
        ranked = p.sort(-1, descending=True).values
        cum = ranked.cumsum(-1).contiguous()
        first = torch.searchsorted(cum, torch.full((N, 1), float(top_p)))   # first rank whose mass reaches p
        threshold = ranked.gather(-1, first.clamp(max=V - 1))
        p = torch.where(p >= threshold, p, torch.zeros_like(p))
    return p / p.sum(dim=-1, keepdim=True)


def sd_ok_kthvalue(logits, temperature=1.0, top_k=None, top_p=None):
    V = logits.size(-1)
    if temperature == 0:
        return F.one_hot(torch.argmax(logits, dim=-1), num_classes=V).to(torch.float32)
    z = logits.to(torch.float32) / temperature
    if top_k is not None:
        k = min(top_k, V)
        kth = torch.kthvalue(z, V - k + 1, dim=-1, keepdim=True).values            # the k-th largest
        z = z.masked_fill(z < kth, -math.inf)
    p = z.softmax(-1)
    if top_p is not None and top_p < 1:
        ranked = p.sort(-1, descending=True).values
        cum = ranked.cumsum(-1)
        mass_before = torch.cat([torch.zeros_like(cum[:, :1]), cum[:, :-1]], dim=-1)
        kept = mass_before < top_p                                                   # in the nucleus, by rank
        smallest_kept = torch.where(kept, ranked, torch.full_like(ranked, math.inf)).min(-1, keepdim=True).values
        p = p * (p >= smallest_kept)                                                 # ties with it kept too
    return p / p.sum(-1, keepdim=True)


# ============================================================================================================
# Exercise 5: cached_attention_step(q, k, v, cache_k, cache_v) -- apply_rope here is the course's
# ============================================================================================================

def cas_position_after_append(q, k, v, cache_k, cache_v):
    cache_v = torch.cat([cache_v, v], dim=2)
    position = torch.tensor([cache_v.size(2)])  # slip: position t+1, the length after appending
    q, k = apply_rope(q, position), apply_rope(k, position)
    cache_k = torch.cat([cache_k, k], dim=2)
    weights = torch.softmax(q @ cache_k.transpose(-2, -1) / math.sqrt(q.size(-1)), dim=-1)
    return weights @ cache_v, cache_k, cache_v


def cas_position_zero(q, k, v, cache_k, cache_v):
    position = torch.tensor([0])  # slip: every new token rotated as if it were first
    q, k = apply_rope(q, position), apply_rope(k, position)
    cache_k = torch.cat([cache_k, k], dim=2)
    cache_v = torch.cat([cache_v, v], dim=2)
    weights = torch.softmax(q @ cache_k.transpose(-2, -1) / math.sqrt(q.size(-1)), dim=-1)
    return weights @ cache_v, cache_k, cache_v


def cas_query_not_rotated(q, k, v, cache_k, cache_v):
    position = torch.tensor([cache_k.size(2)])
    k = apply_rope(k, position)  # slip: only the key rotated, the query left as it is
    cache_k = torch.cat([cache_k, k], dim=2)
    cache_v = torch.cat([cache_v, v], dim=2)
    weights = torch.softmax(q @ cache_k.transpose(-2, -1) / math.sqrt(q.size(-1)), dim=-1)
    return weights @ cache_v, cache_k, cache_v


def cas_value_rotated(q, k, v, cache_k, cache_v):
    position = torch.tensor([cache_k.size(2)])
    q, k, v = apply_rope(q, position), apply_rope(k, position), apply_rope(v, position)  # slip: value rotated too
    cache_k = torch.cat([cache_k, k], dim=2)
    cache_v = torch.cat([cache_v, v], dim=2)
    weights = torch.softmax(q @ cache_k.transpose(-2, -1) / math.sqrt(q.size(-1)), dim=-1)
    return weights @ cache_v, cache_k, cache_v


def cas_rerotates_cache(q, k, v, cache_k, cache_v):
    t = cache_k.size(2)
    q = apply_rope(q, torch.tensor([t]))
    cache_k = apply_rope(torch.cat([cache_k, k], dim=2), torch.arange(t + 1))  # slip: cached keys rotated a second time
    cache_v = torch.cat([cache_v, v], dim=2)
    weights = torch.softmax(q @ cache_k.transpose(-2, -1) / math.sqrt(q.size(-1)), dim=-1)
    return weights @ cache_v, cache_k, cache_v


def cas_caches_unrotated_key(q, k, v, cache_k, cache_v):
    position = torch.tensor([cache_k.size(2)])
    q, k_rot = apply_rope(q, position), apply_rope(k, position)
    keys = torch.cat([cache_k, k_rot], dim=2)
    cache_v = torch.cat([cache_v, v], dim=2)
    weights = torch.softmax(q @ keys.transpose(-2, -1) / math.sqrt(q.size(-1)), dim=-1)
    return weights @ cache_v, torch.cat([cache_k, k], dim=2), cache_v  # slip: the cache keeps the un-rotated key


def cas_no_scale(q, k, v, cache_k, cache_v):
    position = torch.tensor([cache_k.size(2)])
    q, k = apply_rope(q, position), apply_rope(k, position)
    cache_k = torch.cat([cache_k, k], dim=2)
    cache_v = torch.cat([cache_v, v], dim=2)
    weights = torch.softmax(q @ cache_k.transpose(-2, -1), dim=-1)  # slip: no 1/sqrt(d)
    return weights @ cache_v, cache_k, cache_v


def cas_softmax_wrong_axis(q, k, v, cache_k, cache_v):
    position = torch.tensor([cache_k.size(2)])
    q, k = apply_rope(q, position), apply_rope(k, position)
    cache_k = torch.cat([cache_k, k], dim=2)
    cache_v = torch.cat([cache_v, v], dim=2)
    weights = torch.softmax(q @ cache_k.transpose(-2, -1) / math.sqrt(q.size(-1)), dim=-2)  # slip: over the single query
    return weights @ cache_v, cache_k, cache_v


def cas_prepends(q, k, v, cache_k, cache_v):
    position = torch.tensor([cache_k.size(2)])
    q, k = apply_rope(q, position), apply_rope(k, position)
    cache_k = torch.cat([k, cache_k], dim=2)  # slip: newest key put first in the cache
    cache_v = torch.cat([v, cache_v], dim=2)
    weights = torch.softmax(q @ cache_k.transpose(-2, -1) / math.sqrt(q.size(-1)), dim=-1)
    return weights @ cache_v, cache_k, cache_v


def cas_attends_before_append(q, k, v, cache_k, cache_v):
    position = torch.tensor([cache_k.size(2)])
    q, k = apply_rope(q, position), apply_rope(k, position)
    weights = torch.softmax(q @ cache_k.transpose(-2, -1) / math.sqrt(q.size(-1)), dim=-1)
    out = weights @ cache_v  # slip: attends over the old cache only, the new position does not see itself
    return out, torch.cat([cache_k, k], dim=2), torch.cat([cache_v, v], dim=2)


def cas_ok_course_attention(q, k, v, cache_k, cache_v):
    t = cache_v.size(-2)
    where = torch.full((1,), t, dtype=torch.long)
    cache_k = torch.cat((cache_k, apply_rope(k, where)), dim=-2)
    cache_v = torch.cat((cache_v, v), dim=-2)
    out = scaled_dot_product_attention(apply_rope(q, where), cache_k, cache_v)     # no mask: all of it is the past
    return out, cache_k, cache_v


def cas_ok_einsum(q, k, v, cache_k, cache_v):
    t = cache_k.shape[2]
    pos = torch.arange(t, t + 1)
    q_rot = apply_rope(q, pos)
    keys = torch.cat([cache_k, apply_rope(k, pos)], 2)
    values = torch.cat([cache_v, v], 2)
    scores = torch.einsum("bhqd,bhkd->bhqk", q_rot, keys) * q.shape[-1] ** -0.5
    out = torch.einsum("bhqk,bhkd->bhqd", scores.softmax(dim=-1), values)
    return out, keys, values


# ============================================================================================================
# Exercise 6: apply_rope(x, positions, base=10000.0)
# ============================================================================================================

def rope_interleaved_pairs(x, positions, base=10000.0):
    d = x.size(-1)
    theta = base ** (-2 * torch.arange(d // 2, dtype=torch.float32) / d)
    angle = positions.float()[:, None] * theta
    cos, sin = angle.cos(), angle.sin()
    x1, x2 = x[..., 0::2], x[..., 1::2]  # slip: neighbours (2i, 2i+1) paired, not the two halves
    out = torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)
    return out.flatten(-2)


def rope_theta_missing_two(x, positions, base=10000.0):
    d = x.size(-1)
    theta = base ** (-torch.arange(d // 2, dtype=torch.float32) / d)  # slip: exponent -i/d, not -2i/d
    angle = positions.float()[:, None] * theta
    cos, sin = angle.cos(), angle.sin()
    x1, x2 = x[..., :d // 2], x[..., d // 2:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


def rope_theta_double_two(x, positions, base=10000.0):
    d = x.size(-1)
    theta = base ** (-2 * torch.arange(0, d, 2, dtype=torch.float32) / d)  # slip: arange(0, d, 2) AND the factor 2
    angle = positions.float()[:, None] * theta
    cos, sin = angle.cos(), angle.sin()
    x1, x2 = x[..., :d // 2], x[..., d // 2:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


def rope_theta_from_one(x, positions, base=10000.0):
    d = x.size(-1)
    theta = base ** (-2 * torch.arange(1, d // 2 + 1, dtype=torch.float32) / d)  # slip: i runs 1..d/2, not 0..d/2-1
    angle = positions.float()[:, None] * theta
    cos, sin = angle.cos(), angle.sin()
    x1, x2 = x[..., :d // 2], x[..., d // 2:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


def rope_wrong_direction(x, positions, base=10000.0):
    d = x.size(-1)
    theta = base ** (-2 * torch.arange(d // 2, dtype=torch.float32) / d)
    angle = positions.float()[:, None] * theta
    cos, sin = angle.cos(), angle.sin()
    x1, x2 = x[..., :d // 2], x[..., d // 2:]
    return torch.cat([x1 * cos + x2 * sin, -x1 * sin + x2 * cos], dim=-1)  # slip: sin signs swapped, turns by -m*theta


def rope_not_a_rotation(x, positions, base=10000.0):
    d = x.size(-1)
    theta = base ** (-2 * torch.arange(d // 2, dtype=torch.float32) / d)
    angle = positions.float()[:, None] * theta
    cos, sin = angle.cos(), angle.sin()
    x1, x2 = x[..., :d // 2], x[..., d // 2:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos - x1 * sin], dim=-1)  # slip: sign of x1*sin in the second half


def rope_float32_result(x, positions, base=10000.0):
    x = x.float()  # slip: float64 input comes back as float32
    d = x.size(-1)
    theta = base ** (-2 * torch.arange(d // 2, dtype=torch.float32) / d)
    angle = positions.float()[:, None] * theta
    cos, sin = angle.cos(), angle.sin()
    x1, x2 = x[..., :d // 2], x[..., d // 2:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


def rope_ignores_positions(x, positions, base=10000.0):
    d, T = x.size(-1), x.size(-2)
    theta = base ** (-2 * torch.arange(d // 2, dtype=torch.float32) / d)
    angle = torch.arange(T, dtype=torch.float32)[:, None] * theta  # slip: 0..T-1 used, the given positions ignored
    cos, sin = angle.cos(), angle.sin()
    x1, x2 = x[..., :d // 2], x[..., d // 2:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


def rope_in_place(x, positions, base=10000.0):
    d = x.size(-1)
    theta = base ** (-2 * torch.arange(d // 2, dtype=torch.float32) / d)
    angle = positions.float()[:, None] * theta
    cos, sin = angle.cos(), angle.sin()
    x1, x2 = x[..., :d // 2].clone(), x[..., d // 2:].clone()
    x[..., :d // 2] = x1 * cos - x2 * sin  # slip: writes into the caller's tensor
    x[..., d // 2:] = x1 * sin + x2 * cos
    return x


def rope_ok_complex(x, positions, base=10000.0):
    d = x.size(-1)
    i = torch.arange(0, d // 2, dtype=torch.float32)
    angle = torch.outer(positions.to(torch.float32), 1.0 / base ** (2 * i / d))          # (T, d/2)
    z = torch.view_as_complex(torch.stack([x[..., :d // 2], x[..., d // 2:]], dim=-1).contiguous())
    z = z * torch.polar(torch.ones_like(angle), angle)
    return torch.cat([z.real, z.imag], dim=-1).to(x.dtype)


def rope_ok_rotate_half(x, positions, base=10000.0):
    d = x.shape[-1]
    half = d // 2
    inv_freq = torch.exp(-math.log(base) * torch.arange(0, d, 2, dtype=torch.float32) / d)
    angle = positions[:, None].float() * inv_freq[None, :]
    cos = torch.cat([angle.cos(), angle.cos()], dim=-1)
    sin = torch.cat([angle.sin(), angle.sin()], dim=-1)
    rotated_half = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return (x * cos + rotated_half * sin).to(x.dtype)


def rope_ok_matrix(x, positions, base=10000.0):
    d = x.size(-1)
    theta = torch.pow(base, -torch.arange(d // 2, dtype=torch.float32) * 2 / d)
    angle = positions.float().unsqueeze(-1) * theta                                     # (T, d/2)
    c, s = angle.cos(), angle.sin()
    R = torch.stack([torch.stack([c, -s], -1), torch.stack([s, c], -1)], -2)           # (T, d/2, 2, 2)
    pairs = torch.stack([x[..., :d // 2], x[..., d // 2:]], dim=-1)                     # (..., T, d/2, 2)
    turned = (R.to(x.dtype) @ pairs.unsqueeze(-1)).squeeze(-1)
    return torch.cat([turned[..., 0], turned[..., 1]], dim=-1)


# ============================================================================================================
# Exercise 7: grouped_query_attention(q, k, v, mask=None)
# ============================================================================================================

def gqa_repeat_tiles(q, k, v, mask=None):
    group = q.size(1) // k.size(1)
    k, v = k.repeat(1, group, 1, 1), v.repeat(1, group, 1, 1)  # slip: tiles the heads, head j gets j % h_kv
    return scaled_dot_product_attention(q, k, v, mask)


def gqa_ignores_mask(q, k, v, mask=None):
    group = q.size(1) // k.size(1)
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    return scaled_dot_product_attention(q, k, v)  # slip: the mask is not passed on


def gqa_own_causal_mask(q, k, v, mask=None):
    group = q.size(1) // k.size(1)
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    return scaled_dot_product_attention(q, k, v, causal_mask(q.size(2)))  # slip: builds a causal mask, the given one ignored


def gqa_group_major_reshape(q, k, v, mask=None):
    B, h, T, d = q.shape
    h_kv = k.size(1)
    qg = q.reshape(B, h // h_kv, h_kv, T, d).transpose(1, 2)  # slip: heads split as (group, h_kv): head j -> j % h_kv
    m = None if mask is None else mask.expand(B, h, T, k.size(2)).reshape(B, h // h_kv, h_kv, T, -1).transpose(1, 2)
    out = scaled_dot_product_attention(qg, k[:, :, None], v[:, :, None], m)
    return out.transpose(1, 2).reshape(B, h, T, d)


def gqa_no_scale(q, k, v, mask=None):
    group = q.size(1) // k.size(1)
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    scores = q @ k.transpose(-2, -1)  # slip: no 1/sqrt(d)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return scores.softmax(-1) @ v


def gqa_scale_by_d(q, k, v, mask=None):
    group = q.size(1) // k.size(1)
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    scores = q @ k.transpose(-2, -1) / q.size(-1)  # slip: divided by d, not sqrt(d)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return scores.softmax(-1) @ v


def gqa_mask_inverted(q, k, v, mask=None):
    group = q.size(1) // k.size(1)
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(mask, float("-inf"))  # slip: blocks where the mask says "may attend"
    return scores.softmax(-1) @ v


def gqa_mask_fill_zero(q, k, v, mask=None):
    group = q.size(1) // k.size(1)
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, 0.0)  # slip: masked scores set to 0, not -inf
    return scores.softmax(-1) @ v


def gqa_softmax_wrong_axis(q, k, v, mask=None):
    group = q.size(1) // k.size(1)
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return scores.softmax(dim=-2) @ v  # slip: softmax over the queries


def gqa_ok_grouped_queries(q, k, v, mask=None):
    B, h, T, d = q.shape
    h_kv, T_k = k.size(1), k.size(2)
    g = h // h_kv
    qg = q.reshape(B, h_kv, g, T, d)                       # query heads j = h_kv_index * g + r
    m = None if mask is None else mask.expand(B, h, T, T_k).reshape(B, h_kv, g, T, T_k)
    out = scaled_dot_product_attention(qg, k.unsqueeze(2), v.unsqueeze(2), m)   # K/V shared, never copied
    return out.reshape(B, h, T, d)


def gqa_ok_index_select(q, k, v, mask=None):
    h, h_kv = q.size(1), k.size(1)
    which = torch.arange(h, device=q.device) // (h // h_kv)   # key/value head of each query head
    k, v = k.index_select(1, which), v.index_select(1, which)
    scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(q.size(-1))
    return masked_softmax(scores, mask) @ v


# ============================================================================================================

SLIPS = [
    ("next_token_loss", "no shift: the logits at t are scored against the token at t", ntl_no_shift),
    ("next_token_loss", "shift the wrong way: logits[:, 1:] against tokens[:, :-1]", ntl_reversed_shift),
    ("next_token_loss", "padding targets are counted (no ignore_index)", ntl_no_ignore),
    ("next_token_loss", "padding judged on the input token instead of the target token", ntl_mask_on_inputs),
    ("next_token_loss", "mean of per-sequence means instead of the mean over all real targets",
     ntl_mean_of_row_means),
    ("next_token_loss", "sum of the losses instead of their mean", ntl_sum),
    ("next_token_loss", "returns a Python float (.item()) instead of a tensor", ntl_item),
    ("next_token_loss", "nll_loss on raw logits, without log_softmax", ntl_nll_on_logits),
    ("next_token_loss", "divides by every position, padding included, instead of the real targets",
     ntl_divide_by_all),
    ("next_token_loss", "log_softmax over the time axis instead of the vocabulary", ntl_log_softmax_time_axis),

    ("gpt_block", "post-norm instead of pre-norm", BlockPostNorm),
    ("gpt_block", "residual adds to the normalised x instead of x", BlockResidualFromNorm),
    ("gpt_block", "the first LayerNorm reused before the feed-forward network", BlockSharedNorm),
    ("gpt_block", "the mask is not passed to the attention", BlockNoMask),
    ("gpt_block", "the mask is inverted", BlockInvertedMask),
    ("gpt_block", "no residual around the feed-forward network", BlockNoFFResidual),
    ("gpt_block", "parallel block: the feed-forward network reads the block's input, not x after attention",
     BlockParallel),
    ("gpt_block", "no dropout on the attention output", BlockNoAttnDropout),
    ("gpt_block", "feed-forward network before the attention", BlockFFFirst),
    ("gpt_block", "keys and values from x instead of its LayerNorm", BlockRawKeys),

    ("gpt", "output layer tied by copying the values: two parameters", GPTTieByCopy),
    ("gpt", "embedding not multiplied by sqrt(d_model)", GPTNoScale),
    ("gpt", "sqrt(d_model) applied after the positions are added", GPTScaleAfterPositions),
    ("gpt", "embedding divided by sqrt(d_model) instead of multiplied", GPTDivideScale),
    ("gpt", "final LayerNorm skipped", GPTNoFinalNorm),
    ("gpt", "no causal mask", GPTNoMask),
    ("gpt", "upper-triangular mask: positions see the future", GPTUpperMask),
    ("gpt", "final LayerNorm applied after every block", GPTNormEveryLayer),
    ("gpt", "returns softmax probabilities instead of logits", GPTSoftmaxOutput),
    ("gpt", "blocks not chained: every block reads the embeddings", GPTLayersNotChained),

    ("sampling_distribution", "multiplies the logits by the temperature instead of dividing",
     sd_multiply_temperature),
    ("sampling_distribution", "temperature 0 not handled: divides by zero", sd_no_greedy_case),
    ("sampling_distribution", "temperature 0 spreads the mass over tied maxima", sd_greedy_shares_ties),
    ("sampling_distribution", "top-k keeps exactly k tokens, dropping ties with the k-th", sd_top_k_scatter),
    ("sampling_distribution", "top-k larger than the vocabulary not clamped", sd_top_k_larger_than_vocab),
    ("sampling_distribution", "top-k sets filtered logits to 0 instead of -inf", sd_top_k_zero_fill),
    ("sampling_distribution", "top-p drops the token that crosses p", sd_top_p_drops_crossing),
    ("sampling_distribution", "top-p nucleus chosen on the distribution before temperature and top-k",
     sd_top_p_on_raw_distribution),
    ("sampling_distribution", "not renormalised after top-p", sd_no_renormalise),
    ("sampling_distribution", "top-p cuts by sorted rank, dropping tokens tied with the last one kept",
     sd_top_p_ignores_ties),

    ("cached_attention_step", "new query and key rotated at position t+1 instead of t", cas_position_after_append),
    ("cached_attention_step", "new query and key always rotated at position 0", cas_position_zero),
    ("cached_attention_step", "query not rotated", cas_query_not_rotated),
    ("cached_attention_step", "value rotated too", cas_value_rotated),
    ("cached_attention_step", "cached keys rotated a second time", cas_rerotates_cache),
    ("cached_attention_step", "cache stores the un-rotated key", cas_caches_unrotated_key),
    ("cached_attention_step", "no 1/sqrt(d) scaling", cas_no_scale),
    ("cached_attention_step", "softmax over the query axis instead of the keys", cas_softmax_wrong_axis),
    ("cached_attention_step", "new key and value put at the front of the cache", cas_prepends),
    ("cached_attention_step", "attends over the old cache before appending: the new position misses itself",
     cas_attends_before_append),

    ("apply_rope", "pairs neighbouring features (2i, 2i+1) instead of the two halves", rope_interleaved_pairs),
    ("apply_rope", "frequencies base^(-i/d) instead of base^(-2i/d)", rope_theta_missing_two),
    ("apply_rope", "factor 2 counted twice in the frequencies", rope_theta_double_two),
    ("apply_rope", "frequency index starts at 1 instead of 0", rope_theta_from_one),
    ("apply_rope", "rotates the wrong way (sin signs swapped)", rope_wrong_direction),
    ("apply_rope", "wrong sign in the second half: not a rotation", rope_not_a_rotation),
    ("apply_rope", "float64 input returned as float32", rope_float32_result),
    ("apply_rope", "uses 0..T-1 instead of the given positions", rope_ignores_positions),
    ("apply_rope", "writes the result into the input tensor", rope_in_place),

    ("grouped_query_attention", "repeat (tiling) instead of repeat_interleave: query head j gets j % h_kv",
     gqa_repeat_tiles),
    ("grouped_query_attention", "the mask is not used", gqa_ignores_mask),
    ("grouped_query_attention", "builds its own causal mask instead of using the given one", gqa_own_causal_mask),
    ("grouped_query_attention", "query heads grouped as (group, h_kv) instead of (h_kv, group)",
     gqa_group_major_reshape),
    ("grouped_query_attention", "no 1/sqrt(d) scaling", gqa_no_scale),
    ("grouped_query_attention", "scores divided by d instead of sqrt(d)", gqa_scale_by_d),
    ("grouped_query_attention", "mask inverted", gqa_mask_inverted),
    ("grouped_query_attention", "masked scores set to 0 instead of -inf", gqa_mask_fill_zero),
    ("grouped_query_attention", "softmax over the queries instead of the keys", gqa_softmax_wrong_axis),
]

CORRECT = [
    ("next_token_loss", "log_softmax and gather, mean over the real targets", ntl_ok_gather),
    ("next_token_loss", "cross_entropy on (B, V, T-1) logits with ignore_index", ntl_ok_transpose),
    ("next_token_loss", "real targets selected first, then the mean cross-entropy", ntl_ok_select),

    ("gpt_block", "the two sub-layers in one loop", BlockOkLoop),
    ("gpt_block", "LayerNorm called once per attention input, named intermediates", BlockOkSeparateCalls),

    ("gpt", "tied the other way round, F.linear output, tril mask", GPTOkTieOtherWay),
    ("gpt", "F.embedding, functools.reduce over the blocks, matmul with the tied weight", GPTOkReduce),

    ("sampling_distribution", "one-hot by scatter, sort for top-k, searchsorted for top-p", sd_ok_searchsorted),
    ("sampling_distribution", "kthvalue for top-k, exclusive cumsum for the nucleus, ties kept", sd_ok_kthvalue),

    ("cached_attention_step", "the course's scaled_dot_product_attention, no mask", cas_ok_course_attention),
    ("cached_attention_step", "einsum scores and output", cas_ok_einsum),

    ("apply_rope", "complex multiplication", rope_ok_complex),
    ("apply_rope", "rotate_half with duplicated cos and sin", rope_ok_rotate_half),
    ("apply_rope", "explicit 2x2 rotation matrices", rope_ok_matrix),

    ("grouped_query_attention", "query heads grouped per key/value head, nothing copied", gqa_ok_grouped_queries),
    ("grouped_query_attention", "index_select of the key/value heads, masked_softmax", gqa_ok_index_select),
]
