"""Learner-style wrong answers (and correct-but-unusual ones) for lesson 12, written from the notebook text only."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from course_utils.attention import MultiHeadAttention, scaled_dot_product_attention
from course_utils.gpt import GPTBlock
from course_utils.masks import causal_mask
from course_utils.positions import LearnedPositionalEncoding
from course_utils.positions import apply_rope as course_rope
from course_utils.transformer import PositionwiseFeedForward

SLIPS, CORRECT = [], []


def slip(exercise, name):
    def deco(fn):
        SLIPS.append((exercise, name, fn))
        return fn
    return deco


def correct(exercise, name):
    def deco(fn):
        CORRECT.append((exercise, name, fn))
        return fn
    return deco


# ---------------------------------------------------------------- Exercise 1: next_token_loss
def _flat_ce(logits, targets, **kw):
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1), **kw)


slip("next_token_loss", "no shift: each position scored against its own token")(
    lambda logits, tokens, pad_id: _flat_ce(logits, tokens, ignore_index=pad_id))
slip("next_token_loss", "shift the wrong way: logits[:, 1:] vs tokens[:, :-1]")(
    lambda logits, tokens, pad_id: _flat_ce(logits[:, 1:], tokens[:, :-1], ignore_index=pad_id))
slip("next_token_loss", "forgot ignore_index: pads count")(
    lambda logits, tokens, pad_id: _flat_ce(logits[:, :-1], tokens[:, 1:]))
slip("next_token_loss", "reduction='sum'")(
    lambda logits, tokens, pad_id: _flat_ce(logits[:, :-1], tokens[:, 1:], ignore_index=pad_id, reduction="sum"))
slip("next_token_loss", "returns .item() (a Python float)")(
    lambda logits, tokens, pad_id: _flat_ce(logits[:, :-1], tokens[:, 1:], ignore_index=pad_id).item())


@slip("next_token_loss", "mean per sequence, then mean over the batch")
def ntl_per_row(logits, tokens, pad_id):
    losses = F.cross_entropy(logits[:, :-1].transpose(1, 2), tokens[:, 1:], reduction="none")   # (B, T-1)
    keep = (tokens[:, 1:] != pad_id).float()
    return ((losses * keep).sum(1) / keep.sum(1).clamp(min=1)).mean()


@slip("next_token_loss", "pad mask taken on the inputs tokens[:, :-1], not the targets")
def ntl_mask_inputs(logits, tokens, pad_id):
    losses = F.cross_entropy(logits[:, :-1].transpose(1, 2), tokens[:, 1:], reduction="none")
    keep = (tokens[:, :-1] != pad_id).float()
    return (losses * keep).sum() / keep.sum()


@slip("next_token_loss", "log_softmax over dim=1 (the time axis)")
def ntl_wrong_dim(logits, tokens, pad_id):
    logp = F.log_softmax(logits[:, :-1], dim=1)
    targets = tokens[:, 1:]
    nll = -logp.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    keep = targets != pad_id
    return nll[keep].mean()


@slip("next_token_loss", "divides by every target, pads included")
def ntl_divide_all(logits, tokens, pad_id):
    losses = F.cross_entropy(logits[:, :-1].transpose(1, 2), tokens[:, 1:], reduction="none")
    keep = (tokens[:, 1:] != pad_id).float()
    return (losses * keep).sum() / losses.numel()


@correct("next_token_loss", "log_softmax + gather + boolean mask")
def ntl_manual(logits, tokens, pad_id):
    logp = torch.log_softmax(logits[:, :-1].float(), dim=-1)
    targets = tokens[:, 1:]
    nll = -logp.gather(-1, targets.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    keep = targets != pad_id
    return nll[keep].sum() / keep.sum()


@correct("next_token_loss", "cross_entropy on (B, V, T-1) layout")
def ntl_bvt(logits, tokens, pad_id):
    return F.cross_entropy(logits[:, :-1].permute(0, 2, 1), tokens[:, 1:], ignore_index=pad_id)


@correct("next_token_loss", "nll_loss on masked rows")
def ntl_nll(logits, tokens, pad_id):
    lg, tg = logits[:, :-1].flatten(0, 1), tokens[:, 1:].flatten()
    keep = tg != pad_id
    return F.nll_loss(F.log_softmax(lg[keep], -1), tg[keep])


# ---------------------------------------------------------------- Exercise 2: MyGPTBlock
class _BlockBase(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.0):
        super().__init__()
        self.norm1 = nn.LayerNorm(d_model)
        self.attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.norm2 = nn.LayerNorm(d_model)
        self.ff = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.dropout1, self.dropout2 = nn.Dropout(dropout), nn.Dropout(dropout)


@slip("gpt_block", "post-norm")
class PostNorm(_BlockBase):
    def forward(self, x, mask):
        x = self.norm1(x + self.dropout1(self.attn(x, x, x, mask)))
        return self.norm2(x + self.dropout2(self.ff(x)))


@slip("gpt_block", "norm1 used for both sub-layers")
class SharedNorm(_BlockBase):
    def forward(self, x, mask):
        y = self.norm1(x)
        x = x + self.dropout1(self.attn(y, y, y, mask))
        return x + self.dropout2(self.ff(self.norm1(x)))


@slip("gpt_block", "no residual around the feed-forward network")
class NoFFResidual(_BlockBase):
    def forward(self, x, mask):
        y = self.norm1(x)
        x = x + self.dropout1(self.attn(y, y, y, mask))
        return self.dropout2(self.ff(self.norm2(x)))


@slip("gpt_block", "feed-forward reads x without norm2")
class NoNorm2(_BlockBase):
    def forward(self, x, mask):
        y = self.norm1(x)
        x = x + self.dropout1(self.attn(y, y, y, mask))
        return x + self.dropout2(self.ff(x))


@slip("gpt_block", "mask not passed")
class NoMask(_BlockBase):
    def forward(self, x, mask):
        y = self.norm1(x)
        x = x + self.dropout1(self.attn(y, y, y, None))
        return x + self.dropout2(self.ff(self.norm2(x)))


@slip("gpt_block", "residual added to the normalised y")
class ResidualOnY(_BlockBase):
    def forward(self, x, mask):
        y = self.norm1(x)
        x = y + self.dropout1(self.attn(y, y, y, mask))
        z = self.norm2(x)
        return z + self.dropout2(self.ff(z))


@slip("gpt_block", "dropout applied after the residual sum")
class DropoutAfterAdd(_BlockBase):
    def forward(self, x, mask):
        y = self.norm1(x)
        x = self.dropout1(x + self.attn(y, y, y, mask))
        return self.dropout2(x + self.ff(self.norm2(x)))


@slip("gpt_block", "parallel block: both sub-layers read the input")
class Parallel(_BlockBase):
    def forward(self, x, mask):
        y = self.norm1(x)
        return x + self.dropout1(self.attn(y, y, y, mask)) + self.dropout2(self.ff(self.norm2(x)))


@slip("gpt_block", "keys and values from the un-normalised x")
class KVFromX(_BlockBase):
    def forward(self, x, mask):
        y = self.norm1(x)
        x = x + self.dropout1(self.attn(y, x, x, mask))
        return x + self.dropout2(self.ff(self.norm2(x)))


@slip("gpt_block", "no dropout on the sub-layer outputs")
class NoDropout(_BlockBase):
    def forward(self, x, mask):
        y = self.norm1(x)
        x = x + self.attn(y, y, y, mask)
        return x + self.ff(self.norm2(x))


@correct("gpt_block", "keyword arguments and new names")
class Keywords(_BlockBase):
    def forward(self, x, mask):
        normed = self.norm1(x)
        h = x + self.dropout1(self.attn(query=normed, key=normed, value=normed, mask=mask))
        out = h + self.dropout2(self.ff(self.norm2(h)))
        return out


@correct("gpt_block", "in-place-free, x.add")
class AddMethod(_BlockBase):
    def forward(self, x, mask):
        y = self.norm1(x)
        x = x.add(self.dropout1(self.attn(y, y, y, mask)))
        return x.add(self.dropout2(self.ff(self.norm2(x))))


# ---------------------------------------------------------------- Exercise 3: MyGPT
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

    def forward(self, tokens):
        x = self.pos(self.embed(tokens) * math.sqrt(self.d_model))
        mask = causal_mask(tokens.size(1), tokens.device)
        for layer in self.layers:
            x = layer(x, mask)
        return self.head(self.norm(x))


@slip("gpt", "tie by copying the values (.data = clone)")
class TieCopy(_GPTBase):
    def tie(self):
        self.head.weight.data = self.embed.weight.data.clone()


@slip("gpt", "tie by a new Parameter of the embedding's values")
class TieNewParam(_GPTBase):
    def tie(self):
        self.head.weight = nn.Parameter(self.embed.weight.clone())


@slip("gpt", "no tie at all")
class NoTie(_GPTBase):
    def tie(self):
        pass


@slip("gpt", "embedding not scaled by sqrt(d_model)")
class NoScale(_GPTBase):
    def forward(self, tokens):
        x = self.pos(self.embed(tokens))
        mask = causal_mask(tokens.size(1), tokens.device)
        for layer in self.layers:
            x = layer(x, mask)
        return self.head(self.norm(x))


@slip("gpt", "embedding scaled by d_model (no sqrt)")
class ScaleD(_GPTBase):
    def forward(self, tokens):
        x = self.pos(self.embed(tokens) * self.d_model)
        mask = causal_mask(tokens.size(1), tokens.device)
        for layer in self.layers:
            x = layer(x, mask)
        return self.head(self.norm(x))


@slip("gpt", "scale applied after the positions are added")
class ScaleAfterPos(_GPTBase):
    def forward(self, tokens):
        x = self.pos(self.embed(tokens)) * math.sqrt(self.d_model)
        mask = causal_mask(tokens.size(1), tokens.device)
        for layer in self.layers:
            x = layer(x, mask)
        return self.head(self.norm(x))


@slip("gpt", "forgot the final LayerNorm")
class NoFinalNorm(_GPTBase):
    def forward(self, tokens):
        x = self.pos(self.embed(tokens) * math.sqrt(self.d_model))
        mask = causal_mask(tokens.size(1), tokens.device)
        for layer in self.layers:
            x = layer(x, mask)
        return self.head(x)


@slip("gpt", "no mask given to the blocks")
class NoMaskGPT(_GPTBase):
    def forward(self, tokens):
        x = self.pos(self.embed(tokens) * math.sqrt(self.d_model))
        for layer in self.layers:
            x = layer(x, None)
        return self.head(self.norm(x))


@slip("gpt", "mask of max_len, not T")
class MaskMaxLen(_GPTBase):
    def forward(self, tokens):
        x = self.pos(self.embed(tokens) * math.sqrt(self.d_model))
        mask = causal_mask(self.max_len, tokens.device)
        for layer in self.layers:
            x = layer(x, mask)
        return self.head(self.norm(x))


@slip("gpt", "only the last block applied (x = layer(...) outside the loop)")
class LastLayerOnly(_GPTBase):
    def forward(self, tokens):
        x = self.pos(self.embed(tokens) * math.sqrt(self.d_model))
        mask = causal_mask(tokens.size(1), tokens.device)
        for layer in self.layers:
            y = layer(x, mask)
        return self.head(self.norm(y))


@slip("gpt", "mask inverted (~causal_mask)")
class MaskInverted(_GPTBase):
    def forward(self, tokens):
        x = self.pos(self.embed(tokens) * math.sqrt(self.d_model))
        mask = ~causal_mask(tokens.size(1), tokens.device)
        for layer in self.layers:
            x = layer(x, mask)
        return self.head(self.norm(x))


@correct("gpt", "tie the other way: embed.weight = head.weight")
class TieReverse(_GPTBase):
    def tie(self):
        self.embed.weight = self.head.weight


@correct("gpt", "F.linear with the embedding, tril mask")
class LinearTril(_GPTBase):
    def forward(self, tokens):
        T = tokens.shape[1]
        x = self.embed(tokens) * self.d_model ** 0.5
        x = self.pos(x)
        mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
        for layer in self.layers:
            x = layer(x, mask)
        return F.linear(self.norm(x), self.embed.weight)


# ---------------------------------------------------------------- Exercise 4: sampling_distribution
def _topk_keep_ties(z, k):
    kth = torch.topk(z, min(k, z.size(-1)), dim=-1).values[..., -1:]
    return z.masked_fill(z < kth, float("-inf"))


def _top_p(probs, p):
    ranked = probs.sort(-1, descending=True).values
    before = (ranked.cumsum(-1) < p).sum(-1, keepdim=True)
    last = ranked.gather(-1, before.clamp(max=probs.size(-1) - 1))
    return probs.masked_fill(probs < last, 0.0)


@slip("sampling_distribution", "temperature applied to the probabilities (no effect after renormalising)")
def sd_temp_probs(logits, temperature=1.0, top_k=None, top_p=None):
    if temperature == 0:
        return F.one_hot(logits.argmax(-1), logits.size(-1)).float()
    z = logits.float()
    if top_k is not None:
        z = _topk_keep_ties(z, top_k)
    probs = z.softmax(-1) / temperature
    probs = probs / probs.sum(-1, keepdim=True)
    if top_p is not None and top_p < 1:
        probs = _top_p(probs, top_p)
    return probs / probs.sum(-1, keepdim=True)


def _sd(logits, temperature=1.0, top_k=None, top_p=None, temp_mult=False, kstrict=False, kscatter=False,
        p_exclusive=False, p_on_raw=False, p_scatter=False, renorm=True, zero_guard=True, p_unnormalised=False):
    if temperature == 0 and zero_guard:
        return F.one_hot(logits.argmax(-1), logits.size(-1)).float()
    z = logits.float() * temperature if temp_mult else logits.float() / temperature
    if top_k is not None:
        if kscatter:
            idx = torch.topk(z, min(top_k, z.size(-1)), dim=-1).indices
            keep = torch.zeros_like(z, dtype=torch.bool).scatter(-1, idx, True)
            z = z.masked_fill(~keep, float("-inf"))
        elif kstrict:
            kth = torch.topk(z, min(top_k, z.size(-1)), dim=-1).values[..., -1:]
            z = z.masked_fill(z <= kth, float("-inf"))
        else:
            z = _topk_keep_ties(z, top_k)
    probs = z.softmax(-1)
    if top_p is not None and top_p < 1:
        base = logits.float().softmax(-1) if p_on_raw else probs
        if p_unnormalised:
            full = (logits.float() / temperature).softmax(-1)
            base = full * (probs > 0)
        if p_scatter:
            ranked, idx = base.sort(-1, descending=True)
            before = ranked.cumsum(-1) - ranked
            keep_sorted = before < top_p
            keep = torch.zeros_like(keep_sorted).scatter(-1, idx, keep_sorted)
            probs = probs * keep
        elif p_exclusive:
            ranked, idx = base.sort(-1, descending=True)
            keep_sorted = ranked.cumsum(-1) < top_p
            keep_sorted[..., 0] = True
            keep = torch.zeros_like(keep_sorted).scatter(-1, idx, keep_sorted)
            probs = probs * keep
        else:
            ranked = base.sort(-1, descending=True).values
            before = (ranked.cumsum(-1) < top_p).sum(-1, keepdim=True)
            last = ranked.gather(-1, before.clamp(max=probs.size(-1) - 1))
            probs = probs.masked_fill(base < last, 0.0)
    return probs / probs.sum(-1, keepdim=True) if renorm else probs


slip("sampling_distribution", "temperature multiplies the logits")(lambda *a, **k: _sd(*a, **k, temp_mult=True))
slip("sampling_distribution", "top-k keeps z > k-th (drops the k-th: k-1 kept)")(lambda *a, **k: _sd(*a, **k, kstrict=True))
slip("sampling_distribution", "top-k by indices (ties dropped arbitrarily)")(lambda *a, **k: _sd(*a, **k, kscatter=True))
slip("sampling_distribution", "top-p excludes the token that crosses p")(lambda *a, **k: _sd(*a, **k, p_exclusive=True))
slip("sampling_distribution", "top-p computed on the raw logits' distribution")(lambda *a, **k: _sd(*a, **k, p_on_raw=True))
slip("sampling_distribution", "top-p by sorted indices (ties at the edge dropped)")(lambda *a, **k: _sd(*a, **k, p_scatter=True))
slip("sampling_distribution", "no renormalisation after top-p")(lambda *a, **k: _sd(*a, **k, renorm=False))
slip("sampling_distribution", "temperature 0 not handled (divides by 0)")(lambda *a, **k: _sd(*a, **k, zero_guard=False))
slip("sampling_distribution", "top-p on top-k's probabilities not renormalised")(lambda *a, **k: _sd(*a, **k, p_unnormalised=True))


# Planted as right; wrong at top_p = 1 on a large vocabulary, which the lesson says keeps every token: the float
# cumulative sum reaches 1 before the last tokens and drops them (found by the sixth catalogue's fixes).
@slip("sampling_distribution", "threshold loop over rows: top-p run at p = 1 too, small tokens dropped")
def sd_rows(logits, temperature=1.0, top_k=None, top_p=None):
    out = []
    for row in logits.float():
        if temperature == 0:
            p = torch.zeros_like(row)
            p[row.argmax()] = 1.0
            out.append(p)
            continue
        p = torch.softmax(row / temperature, 0)
        if top_k is not None:
            kth = p.sort(descending=True).values[min(top_k, p.numel()) - 1]
            p = torch.where(p >= kth, p, torch.zeros_like(p))
            p = p / p.sum()
        if top_p is not None:
            ranked = p.sort(descending=True).values
            total, last = 0.0, ranked[0]
            for value in ranked:
                last = value
                total += value.item()
                if total >= top_p:
                    break
            p = torch.where(p >= last, p, torch.zeros_like(p))
        out.append(p / p.sum())
    return torch.stack(out)


@slip("sampling_distribution", "'mass before the token < p' mask: top-p run at p = 1 too, small tokens dropped")
def sd_mass_before(logits, temperature=1.0, top_k=None, top_p=None):
    if temperature == 0:
        return torch.zeros_like(logits, dtype=torch.float).scatter(-1, logits.argmax(-1, keepdim=True), 1.0)
    z = logits / temperature
    if top_k:
        z = torch.where(z >= z.topk(min(top_k, z.shape[-1]), -1).values[..., -1:], z, torch.tensor(-math.inf))
    probs = F.softmax(z, -1)
    if top_p is not None:
        ranked = probs.sort(-1, descending=True).values
        before = ranked.cumsum(-1) - ranked
        kept = ranked.masked_fill(before >= top_p, float("inf"))
        threshold = kept.min(-1, keepdim=True).values
        probs = probs * (probs >= threshold)
    return probs / probs.sum(-1, keepdim=True)


# ---------------------------------------------------------------- Exercise 5: cached_attention_step
def _cas(q, k, v, cache_k, cache_v, pos=lambda t: t, rot_q=True, rot_v=False, scale=True, rerotate=False,
         softmax_dim=-1, update=True):
    t = cache_k.size(2)
    position = torch.tensor([pos(t)])
    if rot_q:
        q = course_rope(q, position)
    k_rot = course_rope(k, position)
    if rot_v:
        v = course_rope(v, position)
    if rerotate:
        new_k = torch.cat([cache_k, k], dim=2)
        keys = course_rope(new_k, torch.arange(t + 1))
        new_k_cache = keys
    else:
        new_k_cache = torch.cat([cache_k, k_rot], dim=2)
        keys = new_k_cache
    new_v = torch.cat([cache_v, v], dim=2)
    s = q @ keys.transpose(-2, -1)
    if scale:
        s = s / math.sqrt(q.size(-1))
    out = torch.softmax(s, dim=softmax_dim) @ new_v
    if not update:
        return out, cache_k, cache_v
    return out, new_k_cache, new_v


slip("cached_attention_step", "rotated at position 0 every step")(lambda *a: _cas(*a, pos=lambda t: 0))
slip("cached_attention_step", "rotated at t + 1 (the new length)")(lambda *a: _cas(*a, pos=lambda t: t + 1))
slip("cached_attention_step", "rotated at t - 1")(lambda *a: _cas(*a, pos=lambda t: max(t - 1, 0)))
slip("cached_attention_step", "q not rotated")(lambda *a: _cas(*a, rot_q=False))
slip("cached_attention_step", "v rotated too")(lambda *a: _cas(*a, rot_v=True))
slip("cached_attention_step", "no 1/sqrt(d)")(lambda *a: _cas(*a, scale=False))
slip("cached_attention_step", "cached keys rotated again at every step")(lambda *a: _cas(*a, rerotate=True))
slip("cached_attention_step", "softmax over the single query (dim=-2)")(lambda *a: _cas(*a, softmax_dim=-2))
slip("cached_attention_step", "returns the old caches")(lambda *a: _cas(*a, update=False))


@correct("cached_attention_step", "course's scaled_dot_product_attention, torch.full position")
def cas_sdpa(q, k, v, cache_k, cache_v):
    t = cache_k.shape[-2]
    pos = torch.full((1,), t, dtype=torch.long)
    cache_k = torch.cat((cache_k, course_rope(k, pos)), -2)
    cache_v = torch.cat((cache_v, v), -2)
    return scaled_dot_product_attention(course_rope(q, pos), cache_k, cache_v), cache_k, cache_v


@correct("cached_attention_step", "F.scaled_dot_product_attention")
def cas_torch(q, k, v, cache_k, cache_v):
    position = torch.tensor([cache_k.size(2)])
    cache_k = torch.cat([cache_k, course_rope(k, position)], dim=2)
    cache_v = torch.cat([cache_v, v], dim=2)
    return F.scaled_dot_product_attention(course_rope(q, position), cache_k, cache_v), cache_k, cache_v


# ---------------------------------------------------------------- Exercise 6: apply_rope
def _rope(x, positions, base=10000.0, interleaved=False, exponent=lambda i, d: -2 * i / d, sign=1, second="ok",
          ignore_base=False, pos_shift=0, own_positions=False):
    d = x.size(-1)
    i = torch.arange(d // 2, dtype=torch.float32)
    b = 10000.0 if ignore_base else base
    theta = b ** exponent(i, d)
    pos = torch.arange(x.size(-2)) if own_positions else positions
    angle = (pos.float() + pos_shift)[:, None] * theta * sign
    cos, sin = angle.cos(), angle.sin()
    if interleaved:
        x1, x2 = x[..., 0::2], x[..., 1::2]
        y1, y2 = x1 * cos - x2 * sin, x1 * sin + x2 * cos
        return torch.stack([y1, y2], dim=-1).flatten(-2)
    x1, x2 = x[..., :d // 2], x[..., d // 2:]
    y2 = x1 * sin + x2 * cos if second == "ok" else x2 * cos - x1 * sin
    return torch.cat([x1 * cos - x2 * sin, y2], dim=-1)


slip("apply_rope", "pairs neighbours (2i, 2i+1): RoFormer's convention")(lambda *a: _rope(*a, interleaved=True))
slip("apply_rope", "theta = base^(-i/d) (the 2 forgotten)")(lambda *a: _rope(*a, exponent=lambda i, d: -i / d))
slip("apply_rope", "rotates by -angle")(lambda *a: _rope(*a, sign=-1))
slip("apply_rope", "base ignored (10000 hard-coded)")(lambda *a: _rope(*a, ignore_base=True))
slip("apply_rope", "second half: x2 cos - x1 sin (sign slip)")(lambda *a: _rope(*a, second="bad"))
slip("apply_rope", "theta = base^(+2i/d)")(lambda *a: _rope(*a, exponent=lambda i, d: 2 * i / d))
slip("apply_rope", "positions counted from 1")(lambda *a: _rope(*a, pos_shift=1))
slip("apply_rope", "arange(T) instead of the given positions")(lambda *a: _rope(*a, own_positions=True))
slip("apply_rope", "theta = base^(-2i/(d-2)) (linspace to 1)")(
    lambda *a: _rope(*a, exponent=lambda i, d: -2 * i / max(d - 2, 1)))

correct("apply_rope", "theta from arange(0, d, 2) / d")(
    lambda *a: _rope(*a, exponent=lambda i, d: -torch.arange(0, d, 2, dtype=torch.float32) / d))


@correct("apply_rope", "complex form")
def rope_complex(x, positions, base=10000.0):
    d = x.size(-1)
    theta = torch.exp(-math.log(base) * torch.arange(0, d // 2, dtype=torch.float64) * 2 / d)
    angle = positions.to(torch.float64)[:, None] * theta
    z = torch.complex(x[..., :d // 2].double(), x[..., d // 2:].double()) * torch.polar(torch.ones_like(angle), angle)
    return torch.cat([z.real, z.imag], dim=-1).to(x.dtype)


@correct("apply_rope", "rotate_half form")
def rope_rotate_half(x, positions, base=10000.0):
    d = x.shape[-1]
    inv_freq = 1.0 / (base ** (torch.arange(0, d, 2).float() / d))
    freqs = torch.outer(positions.float(), inv_freq)
    emb = torch.cat([freqs, freqs], dim=-1)
    rotated = torch.cat([-x[..., d // 2:], x[..., :d // 2]], dim=-1)
    return x * emb.cos() + rotated * emb.sin()


# ---------------------------------------------------------------- Exercise 7: grouped_query_attention
@slip("grouped_query_attention", "repeat (tiles): head j uses kv head j % h_kv")
def gqa_repeat(q, k, v, mask=None):
    g = q.size(1) // k.size(1)
    return scaled_dot_product_attention(q, k.repeat(1, g, 1, 1), v.repeat(1, g, 1, 1), mask)


@slip("grouped_query_attention", "group size = h_kv instead of h / h_kv")
def gqa_group_hkv(q, k, v, mask=None):
    g = k.size(1)
    return scaled_dot_product_attention(q, k.repeat_interleave(g, 1), v.repeat_interleave(g, 1), mask)


@slip("grouped_query_attention", "mask ignored")
def gqa_nomask(q, k, v, mask=None):
    g = q.size(1) // k.size(1)
    return scaled_dot_product_attention(q, k.repeat_interleave(g, 1), v.repeat_interleave(g, 1))


@slip("grouped_query_attention", "expand over a leading group axis (same as repeat)")
def gqa_expand_wrong(q, k, v, mask=None):
    B, h_kv, T, d = k.shape
    g = q.size(1) // h_kv
    k = k[:, None].expand(B, g, h_kv, T, d).reshape(B, g * h_kv, T, d)
    v = v[:, None].expand(B, g, h_kv, T, d).reshape(B, g * h_kv, T, d)
    return scaled_dot_product_attention(q, k, v, mask)


def _manual(q, k, v, mask, scale=True, invert=False, dim=-1):
    s = q @ k.transpose(-2, -1)
    if scale:
        s = s / math.sqrt(q.size(-1))
    if mask is not None:
        s = s.masked_fill(mask if invert else ~mask, float("-inf"))
    return torch.softmax(s, dim=dim) @ v


def _gqa_manual(q, k, v, mask=None, **kw):
    g = q.size(1) // k.size(1)
    return _manual(q, k.repeat_interleave(g, 1), v.repeat_interleave(g, 1), mask, **kw)


slip("grouped_query_attention", "manual attention without 1/sqrt(d)")(lambda q, k, v, mask=None: _gqa_manual(q, k, v, mask, scale=False))
slip("grouped_query_attention", "manual attention, mask inverted")(lambda q, k, v, mask=None: _gqa_manual(q, k, v, mask, invert=True))
slip("grouped_query_attention", "manual attention, softmax over the queries")(lambda q, k, v, mask=None: _gqa_manual(q, k, v, mask, dim=-2))


@slip("grouped_query_attention", "kv head chosen by j // h_kv")
def gqa_div_hkv(q, k, v, mask=None):
    h, h_kv = q.size(1), k.size(1)
    idx = torch.tensor([min(j // h_kv, h_kv - 1) for j in range(h)])
    return scaled_dot_product_attention(q, k[:, idx], v[:, idx], mask)


@correct("grouped_query_attention", "expand over a group axis after the kv axis")
def gqa_expand(q, k, v, mask=None):
    B, h_kv, T, d = k.shape
    g = q.size(1) // h_kv
    k = k[:, :, None].expand(B, h_kv, g, T, d).reshape(B, h_kv * g, T, d)
    v = v[:, :, None].expand(B, h_kv, g, T, d).reshape(B, h_kv * g, T, d)
    return scaled_dot_product_attention(q, k, v, mask)


@correct("grouped_query_attention", "query heads grouped: q.view(B, h_kv, g, T, d)")
def gqa_grouped_q(q, k, v, mask=None):
    B, h, T, d = q.shape
    h_kv = k.size(1)
    qg = q.view(B, h_kv, h // h_kv, T, d)
    s = qg @ k[:, :, None].transpose(-2, -1) / math.sqrt(d)                   # (B, h_kv, g, T, T_k)
    if mask is not None:
        m = torch.broadcast_to(mask, (B, h, T, k.size(2))).reshape(B, h_kv, h // h_kv, T, k.size(2))
        s = s.masked_fill(~m, float("-inf"))
    w = torch.softmax(s, -1)
    w = torch.nan_to_num(w)
    return (w @ v[:, :, None]).reshape(B, h, T, v.size(-1))


@correct("grouped_query_attention", "index_select with j // group")
def gqa_index(q, k, v, mask=None):
    group = q.shape[1] // k.shape[1]
    idx = torch.arange(q.shape[1]) // group
    return scaled_dot_product_attention(q, k.index_select(1, idx), v.index_select(1, idx), mask)
