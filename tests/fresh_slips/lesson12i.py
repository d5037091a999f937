"""Typical learner mistakes (SLIPS) and alternative right answers (CORRECT) for lesson 12,
"A GPT from scratch" (12_gpt_from_scratch.ipynb).

Exercises (the `exercise` key): next_token_loss, gpt_block, gpt, sampling_distribution,
cached_attention_step, apply_rope, grouped_query_attention.

Each answer has the signature of the reference solution:
    next_token_loss(logits, tokens, pad_id) -> scalar tensor
    MyGPTBlock(d_model, num_heads, d_ff, dropout=0.0); forward(x, mask)
    MyGPT(vocab_size, d_model, num_heads, num_layers, d_ff, max_len, dropout=0.0); forward(tokens)
    sampling_distribution(logits, temperature=1.0, top_k=None, top_p=None) -> (N, V) float probabilities
    cached_attention_step(q, k, v, cache_k, cache_v) -> (out, cache_k, cache_v)
    apply_rope(x, positions, base=10000.0)
    grouped_query_attention(q, k, v, mask=None)

Every slip has exactly one thing wrong, marked with a `# slip:` comment on that line.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from course_utils.attention import MultiHeadAttention, scaled_dot_product_attention
from course_utils.gpt import GPTBlock
from course_utils.masks import causal_mask, masked_softmax
from course_utils.positions import LearnedPositionalEncoding
from course_utils.positions import apply_rope as course_apply_rope
from course_utils.transformer import PositionwiseFeedForward

# =====================================================================================================
# Exercise 1: next_token_loss(logits, tokens, pad_id)
# =====================================================================================================

def ntl_correct_transpose(logits, tokens, pad_id):
    """cross_entropy with the class axis second, no flattening."""
    return F.cross_entropy(logits[:, :-1].transpose(1, 2), tokens[:, 1:], ignore_index=pad_id)


def ntl_correct_gather(logits, tokens, pad_id):
    """log_softmax, gather the target's log-probability, mean over the real targets."""
    logp = logits[:, :-1].log_softmax(-1)
    targets = tokens[:, 1:]
    keep = targets != pad_id
    safe = targets.masked_fill(~keep, 0)                             # any valid id where the target is padding
    nll = -logp.gather(-1, safe.unsqueeze(-1)).squeeze(-1)           # (B, T-1)
    return nll[keep].mean()


def ntl_correct_none_reduction(logits, tokens, pad_id):
    """reduction='none', then a masked mean."""
    B, T, V = logits.shape
    targets = tokens[:, 1:].reshape(-1)
    real = targets != pad_id
    losses = F.cross_entropy(logits[:, :-1].reshape(-1, V), targets.masked_fill(~real, 0), reduction="none")
    keep = real.to(losses.dtype)
    return (losses * keep).sum() / keep.sum()


def ntl_slip_no_shift(logits, tokens, pad_id):
    V = logits.size(-1)
    return F.cross_entropy(logits.reshape(-1, V), tokens.reshape(-1), ignore_index=pad_id)  # slip: no shift, position t scored against token t


def ntl_slip_shift_reversed(logits, tokens, pad_id):
    logits, targets = logits[:, 1:], tokens[:, :-1]  # slip: shifted the wrong way (logits 1..T-1 vs tokens 0..T-2)
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1), ignore_index=pad_id)


def ntl_slip_no_ignore(logits, tokens, pad_id):
    logits, targets = logits[:, :-1], tokens[:, 1:]
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))  # slip: padding targets are not ignored


def ntl_slip_pad_mask_on_inputs(logits, tokens, pad_id):
    logp = logits[:, :-1].log_softmax(-1)
    targets = tokens[:, 1:]
    nll = -logp.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    keep = tokens[:, :-1] != pad_id  # slip: padding tested on the input token, not on the target
    return nll[keep].mean()


def ntl_slip_sum(logits, tokens, pad_id):
    logits, targets = logits[:, :-1], tokens[:, 1:]
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1), ignore_index=pad_id,
                           reduction="sum")  # slip: sum instead of the mean over real targets


def ntl_slip_mean_of_sequence_means(logits, tokens, pad_id):
    logp = logits[:, :-1].log_softmax(-1)
    targets = tokens[:, 1:]
    nll = -logp.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    keep = (targets != pad_id).float()
    return ((nll * keep).sum(1) / keep.sum(1)).mean()  # slip: mean per sequence, then mean of the means


def ntl_slip_item(logits, tokens, pad_id):
    logits, targets = logits[:, :-1], tokens[:, 1:]
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1),
                           ignore_index=pad_id).item()  # slip: returns a Python float, not a tensor


def ntl_slip_nll_on_logits(logits, tokens, pad_id):
    logits, targets = logits[:, :-1], tokens[:, 1:]
    return F.nll_loss(logits.reshape(-1, logits.size(-1)), targets.reshape(-1), ignore_index=pad_id)  # slip: nll_loss on raw logits, no log_softmax


def ntl_slip_divide_by_all_positions(logits, tokens, pad_id):
    logp = logits[:, :-1].log_softmax(-1)
    targets = tokens[:, 1:]
    nll = -logp.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    keep = (targets != pad_id).float()
    return (nll * keep).sum() / nll.numel()  # slip: divides by all B*(T-1) positions, padding included


def ntl_slip_log_softmax_time_axis(logits, tokens, pad_id):
    logp = logits[:, :-1].log_softmax(1)  # slip: log_softmax over the time axis instead of the vocabulary
    targets = tokens[:, 1:]
    nll = -logp.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    keep = targets != pad_id
    return nll[keep].mean()


# =====================================================================================================
# Exercise 2: MyGPTBlock (forward(x, mask))
# =====================================================================================================

class _BlockInit(nn.Module):
    """The exercise's __init__, unchanged."""

    def __init__(self, d_model, num_heads, d_ff, dropout=0.0):
        super().__init__()
        self.norm1 = nn.LayerNorm(d_model)
        self.attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.norm2 = nn.LayerNorm(d_model)
        self.ff = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.dropout1, self.dropout2 = nn.Dropout(dropout), nn.Dropout(dropout)


class BlockCorrectSteps(_BlockInit):
    """Residual branches named, the sums written out."""

    def forward(self, x, mask):
        h = self.norm1(x)
        attn_out = self.dropout1(self.attn(h, h, h, mask=mask))
        x1 = x + attn_out
        ff_out = self.dropout2(self.ff(self.norm2(x1)))
        return x1 + ff_out


class BlockCorrectLoop(_BlockInit):
    """The two sub-layers as a loop over (norm, sub-layer, dropout)."""

    def forward(self, x, mask):
        subs = ((self.norm1, lambda y: self.attn(y, y, y, mask), self.dropout1),
                (self.norm2, self.ff, self.dropout2))
        for norm, sub, drop in subs:
            x = x + drop(sub(norm(x)))
        return x


class BlockSlipPostNorm(_BlockInit):
    def forward(self, x, mask):
        x = self.norm1(x + self.dropout1(self.attn(x, x, x, mask)))  # slip: post-norm (LayerNorm after the residual sum)
        return self.norm2(x + self.dropout2(self.ff(x)))


class BlockSlipResidualFromNormed(_BlockInit):
    def forward(self, x, mask):
        y = self.norm1(x)
        x = y + self.dropout1(self.attn(y, y, y, mask))  # slip: residual added to the normalised y, not to x
        return x + self.dropout2(self.ff(self.norm2(x)))


class BlockSlipKeysFromRawX(_BlockInit):
    def forward(self, x, mask):
        y = self.norm1(x)
        x = x + self.dropout1(self.attn(y, x, x, mask))  # slip: keys and values read the un-normalised x
        return x + self.dropout2(self.ff(self.norm2(x)))


class BlockSlipFFNOnOldX(_BlockInit):
    def forward(self, x, mask):
        y = self.norm1(x)
        h = x + self.dropout1(self.attn(y, y, y, mask))
        return h + self.dropout2(self.ff(self.norm2(x)))  # slip: FFN reads the block's input, not the updated x


class BlockSlipNorm1Twice(_BlockInit):
    def forward(self, x, mask):
        y = self.norm1(x)
        x = x + self.dropout1(self.attn(y, y, y, mask))
        return x + self.dropout2(self.ff(self.norm1(x)))  # slip: reuses norm1 for the FFN instead of norm2


class BlockSlipNoDropout(_BlockInit):
    def forward(self, x, mask):
        y = self.norm1(x)
        x = x + self.attn(y, y, y, mask)  # slip: no dropout on the attention output
        return x + self.dropout2(self.ff(self.norm2(x)))


class BlockSlipDropoutAfterSum(_BlockInit):
    def forward(self, x, mask):
        y = self.norm1(x)
        x = self.dropout1(x + self.attn(y, y, y, mask))  # slip: dropout on the residual sum, not on the sub-layer output
        return x + self.dropout2(self.ff(self.norm2(x)))


class BlockSlipNoMask(_BlockInit):
    def forward(self, x, mask):
        y = self.norm1(x)
        x = x + self.dropout1(self.attn(y, y, y))  # slip: the causal mask is not passed
        return x + self.dropout2(self.ff(self.norm2(x)))


class BlockSlipMaskInverted(_BlockInit):
    def forward(self, x, mask):
        y = self.norm1(x)
        x = x + self.dropout1(self.attn(y, y, y, ~mask))  # slip: mask inverted (True read as "masked out")
        return x + self.dropout2(self.ff(self.norm2(x)))


class BlockSlipNoAttnResidual(_BlockInit):
    def forward(self, x, mask):
        y = self.norm1(x)
        x = self.dropout1(self.attn(y, y, y, mask))  # slip: attention residual forgotten (x replaced, not added to)
        return x + self.dropout2(self.ff(self.norm2(x)))


# =====================================================================================================
# Exercise 3: MyGPT (tie in __init__, forward(tokens))
# =====================================================================================================

class _GPTModules(nn.Module):
    """The exercise's __init__ up to the tie; subclasses call self._tie() (the learner's one line)."""

    def __init__(self, vocab_size, d_model, num_heads, num_layers, d_ff, max_len, dropout=0.0):
        super().__init__()
        self.d_model, self.max_len = d_model, max_len
        self.embed = nn.Embedding(vocab_size, d_model)
        self.pos = LearnedPositionalEncoding(d_model, max_len, dropout)
        self.layers = nn.ModuleList(GPTBlock(d_model, num_heads, d_ff, dropout) for _ in range(num_layers))
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size, bias=False)
        self._tie()

    def _tie(self):
        self.head.weight = self.embed.weight

    def forward(self, tokens):
        x = self.pos(self.embed(tokens) * math.sqrt(self.d_model))
        mask = causal_mask(tokens.size(1), tokens.device)
        for layer in self.layers:
            x = layer(x, mask)
        return self.head(self.norm(x))


class GPTCorrectTieOtherWay(_GPTModules):
    """The tie written the other way round: the embedding takes the output layer's parameter (still ONE)."""

    def _tie(self):
        self.embed.weight = self.head.weight

    def forward(self, tokens):
        T = tokens.size(1)
        x = self.embed(tokens) * self.d_model ** 0.5
        x = self.pos(x)
        mask = torch.ones(T, T, dtype=torch.bool, device=tokens.device).tril()
        for layer in self.layers:
            x = layer(x, mask)
        return self.head(self.norm(x))


class GPTCorrectFLinear(_GPTModules):
    """Logits with F.linear on the (tied) embedding matrix; the mask from an index comparison."""

    def forward(self, tokens):
        T = tokens.size(1)
        idx = torch.arange(T, device=tokens.device)
        mask = idx[None, :] <= idx[:, None]                               # (T, T): key j <= query t
        x = self.pos(math.sqrt(self.d_model) * self.embed(tokens))
        for i in range(len(self.layers)):
            x = self.layers[i](x, mask)
        return F.linear(self.norm(x), self.embed.weight)


class GPTSlipTieCopy(_GPTModules):
    def _tie(self):
        self.head.weight = nn.Parameter(self.embed.weight.detach().clone())  # slip: copies the values, two parameters


class GPTSlipUntiedForward(_GPTModules):
    def _tie(self):
        pass  # slip: no tie in __init__ (the forward uses the embedding, self.head stays a separate parameter)

    def forward(self, tokens):
        x = self.pos(self.embed(tokens) * math.sqrt(self.d_model))
        mask = causal_mask(tokens.size(1), tokens.device)
        for layer in self.layers:
            x = layer(x, mask)
        return self.norm(x) @ self.embed.weight.T


class GPTSlipNoScale(_GPTModules):
    def forward(self, tokens):
        x = self.pos(self.embed(tokens))  # slip: embedding not multiplied by sqrt(d_model)
        mask = causal_mask(tokens.size(1), tokens.device)
        for layer in self.layers:
            x = layer(x, mask)
        return self.head(self.norm(x))


class GPTSlipScaleAfterPositions(_GPTModules):
    def forward(self, tokens):
        x = self.pos(self.embed(tokens)) * math.sqrt(self.d_model)  # slip: scales after the positions are added
        mask = causal_mask(tokens.size(1), tokens.device)
        for layer in self.layers:
            x = layer(x, mask)
        return self.head(self.norm(x))


class GPTSlipEmbeddingTwice(_GPTModules):
    def forward(self, tokens):
        e = self.embed(tokens) * math.sqrt(self.d_model)
        x = e + self.pos(e)  # slip: self.pos already returns e + P: the embedding is added twice
        mask = causal_mask(tokens.size(1), tokens.device)
        for layer in self.layers:
            x = layer(x, mask)
        return self.head(self.norm(x))


class GPTSlipNoMask(_GPTModules):
    def forward(self, tokens):
        x = self.pos(self.embed(tokens) * math.sqrt(self.d_model))
        for layer in self.layers:
            x = layer(x, None)  # slip: no causal mask: positions see the future
        return self.head(self.norm(x))


class GPTSlipMaskUpper(_GPTModules):
    def forward(self, tokens):
        x = self.pos(self.embed(tokens) * math.sqrt(self.d_model))
        T = tokens.size(1)
        mask = torch.triu(torch.ones(T, T, dtype=torch.bool, device=tokens.device), diagonal=1)  # slip: True above the diagonal: attends to the future only
        for layer in self.layers:
            x = layer(x, mask)
        return self.head(self.norm(x))


class GPTSlipMaskNoDiagonal(_GPTModules):
    def forward(self, tokens):
        x = self.pos(self.embed(tokens) * math.sqrt(self.d_model))
        T = tokens.size(1)
        mask = torch.tril(torch.ones(T, T, dtype=torch.bool, device=tokens.device), diagonal=-1)  # slip: off by one, a position may not see itself
        for layer in self.layers:
            x = layer(x, mask)
        return self.head(self.norm(x))


class GPTSlipNoFinalNorm(_GPTModules):
    def forward(self, tokens):
        x = self.pos(self.embed(tokens) * math.sqrt(self.d_model))
        mask = causal_mask(tokens.size(1), tokens.device)
        for layer in self.layers:
            x = layer(x, mask)
        return self.head(x)  # slip: final LayerNorm skipped


# =====================================================================================================
# Exercise 4: sampling_distribution(logits, temperature, top_k, top_p)
# =====================================================================================================

def sd_correct_sort_exclusive(logits, temperature=1.0, top_k=None, top_p=None):
    """top-k through sort, top-p through the mass BEFORE each token (exclusive cumsum), threshold compare."""
    V = logits.size(-1)
    if temperature == 0:
        out = torch.zeros(logits.shape, dtype=torch.float32, device=logits.device)
        return out.scatter(-1, logits.argmax(-1, keepdim=True), 1.0)
    z = logits.to(torch.float32) / temperature
    if top_k is not None and top_k < V:
        kth = z.sort(-1, descending=True).values[..., top_k - 1:top_k]
        z = torch.where(z >= kth, z, torch.full_like(z, float("-inf")))
    probs = torch.softmax(z, dim=-1)
    if top_p is not None and top_p < 1:
        ranked = probs.sort(-1, descending=True).values
        mass_before = torch.cat([torch.zeros_like(ranked[..., :1]), ranked.cumsum(-1)[..., :-1]], dim=-1)
        n_keep = (mass_before < top_p).sum(-1, keepdim=True)              # >= 1: the first token is always kept
        threshold = ranked.gather(-1, n_keep - 1)
        probs = torch.where(probs >= threshold, probs, torch.zeros_like(probs))
    return probs / probs.sum(-1, keepdim=True)


def sd_correct_probability_space(logits, temperature=1.0, top_k=None, top_p=None):
    """top-k on the probabilities (softmax is monotone), renormalised before top-p; top-p by a loop over rows."""
    if temperature == 0:
        return F.one_hot(logits.argmax(dim=-1), num_classes=logits.shape[-1]).to(torch.float32)
    probs = F.softmax(logits.float() / temperature, dim=-1)
    if top_k is not None:
        k = min(top_k, probs.size(-1))
        kth = probs.topk(k, dim=-1).values[..., -1:]
        probs = probs * (probs >= kth)
        probs = probs / probs.sum(-1, keepdim=True)
    if top_p is not None and top_p < 1:
        rows = []
        for row in probs:
            ranked = row.sort(descending=True).values
            total, last = 0.0, ranked[-1]
            for value in ranked:
                total = total + value
                if total >= top_p:
                    last = value
                    break
            rows.append(row * (row >= last))
        probs = torch.stack(rows)
    return probs / probs.sum(-1, keepdim=True)


def _sd_base_top_p(probs, top_p):
    ranked = probs.sort(-1, descending=True).values
    before = (ranked.cumsum(-1) < top_p).sum(-1, keepdim=True)
    last = ranked.gather(-1, before.clamp(max=probs.size(-1) - 1))
    return probs.masked_fill(probs < last, 0.0)


def sd_slip_temperature_multiplies(logits, temperature=1.0, top_k=None, top_p=None):
    if temperature == 0:
        return F.one_hot(logits.argmax(-1), logits.size(-1)).float()
    z = logits.float() * temperature  # slip: multiplies the logits by the temperature instead of dividing
    if top_k is not None:
        kth = torch.topk(z, min(top_k, z.size(-1)), dim=-1).values[..., -1:]
        z = z.masked_fill(z < kth, float("-inf"))
    probs = z.softmax(-1)
    if top_p is not None and top_p < 1:
        probs = _sd_base_top_p(probs, top_p)
    return probs / probs.sum(-1, keepdim=True)


def sd_slip_temperature_after_softmax(logits, temperature=1.0, top_k=None, top_p=None):
    if temperature == 0:
        return F.one_hot(logits.argmax(-1), logits.size(-1)).float()
    z = logits.float()
    if top_k is not None:
        kth = torch.topk(z, min(top_k, z.size(-1)), dim=-1).values[..., -1:]
        z = z.masked_fill(z < kth, float("-inf"))
    probs = z.softmax(-1) / temperature  # slip: temperature applied after the softmax (renormalising undoes it)
    if top_p is not None and top_p < 1:
        probs = _sd_base_top_p(probs / probs.sum(-1, keepdim=True), top_p)
    return probs / probs.sum(-1, keepdim=True)


def sd_slip_top_p_excludes_crossing(logits, temperature=1.0, top_k=None, top_p=None):
    if temperature == 0:
        return F.one_hot(logits.argmax(-1), logits.size(-1)).float()
    z = logits.float() / temperature
    if top_k is not None:
        kth = torch.topk(z, min(top_k, z.size(-1)), dim=-1).values[..., -1:]
        z = z.masked_fill(z < kth, float("-inf"))
    probs = z.softmax(-1)
    if top_p is not None and top_p < 1:
        ranked, order = probs.sort(-1, descending=True)
        remove = ranked.cumsum(-1) > top_p  # slip: drops the token that crosses p (no shift by one)
        probs = probs.masked_fill(remove.scatter(-1, order, remove), 0.0)
    return probs / probs.sum(-1, keepdim=True)


def sd_slip_top_p_drops_ties(logits, temperature=1.0, top_k=None, top_p=None):
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
        remove = (cum - ranked) >= top_p  # slip: keeps a prefix of the sort order: tokens tied with the last kept are dropped
        probs = probs.masked_fill(remove.scatter(-1, order, remove), 0.0)
    return probs / probs.sum(-1, keepdim=True)


def sd_slip_top_k_drops_ties(logits, temperature=1.0, top_k=None, top_p=None):
    if temperature == 0:
        return F.one_hot(logits.argmax(-1), logits.size(-1)).float()
    z = logits.float() / temperature
    if top_k is not None:
        idx = torch.topk(z, min(top_k, z.size(-1)), dim=-1).indices
        keep = torch.zeros_like(z, dtype=torch.bool).scatter(-1, idx, True)  # slip: exactly k tokens kept, ties with the k-th dropped
        z = z.masked_fill(~keep, float("-inf"))
    probs = z.softmax(-1)
    if top_p is not None and top_p < 1:
        probs = _sd_base_top_p(probs, top_p)
    return probs / probs.sum(-1, keepdim=True)


def sd_slip_top_k_larger_than_v(logits, temperature=1.0, top_k=None, top_p=None):
    if temperature == 0:
        return F.one_hot(logits.argmax(-1), logits.size(-1)).float()
    z = logits.float() / temperature
    if top_k is not None:
        kth = torch.topk(z, top_k, dim=-1).values[..., -1:]  # slip: top_k not clipped to V (fails when top_k > V)
        z = z.masked_fill(z < kth, float("-inf"))
    probs = z.softmax(-1)
    if top_p is not None and top_p < 1:
        probs = _sd_base_top_p(probs, top_p)
    return probs / probs.sum(-1, keepdim=True)


def sd_slip_greedy_ties_split(logits, temperature=1.0, top_k=None, top_p=None):
    if temperature == 0:
        best = (logits == logits.max(-1, keepdim=True).values).float()  # slip: every tied maximum gets mass, not ONE token
        return best / best.sum(-1, keepdim=True)
    z = logits.float() / temperature
    if top_k is not None:
        kth = torch.topk(z, min(top_k, z.size(-1)), dim=-1).values[..., -1:]
        z = z.masked_fill(z < kth, float("-inf"))
    probs = z.softmax(-1)
    if top_p is not None and top_p < 1:
        probs = _sd_base_top_p(probs, top_p)
    return probs / probs.sum(-1, keepdim=True)


def sd_slip_greedy_long(logits, temperature=1.0, top_k=None, top_p=None):
    if temperature == 0:
        return F.one_hot(logits.argmax(-1), logits.size(-1))  # slip: one-hot left as int64, not floats
    z = logits.float() / temperature
    if top_k is not None:
        kth = torch.topk(z, min(top_k, z.size(-1)), dim=-1).values[..., -1:]
        z = z.masked_fill(z < kth, float("-inf"))
    probs = z.softmax(-1)
    if top_p is not None and top_p < 1:
        probs = _sd_base_top_p(probs, top_p)
    return probs / probs.sum(-1, keepdim=True)


def sd_slip_top_p_on_raw_distribution(logits, temperature=1.0, top_k=None, top_p=None):
    if temperature == 0:
        return F.one_hot(logits.argmax(-1), logits.size(-1)).float()
    z = logits.float() / temperature
    if top_k is not None:
        kth = torch.topk(z, min(top_k, z.size(-1)), dim=-1).values[..., -1:]
        z = z.masked_fill(z < kth, float("-inf"))
    probs = z.softmax(-1)
    if top_p is not None and top_p < 1:
        raw = logits.float().softmax(-1)  # slip: the nucleus is chosen on softmax(logits), before temperature and top-k
        probs = probs * (_sd_base_top_p(raw, top_p) > 0)
    return probs / probs.sum(-1, keepdim=True)


def sd_slip_no_renormalise(logits, temperature=1.0, top_k=None, top_p=None):
    if temperature == 0:
        return F.one_hot(logits.argmax(-1), logits.size(-1)).float()
    z = logits.float() / temperature
    if top_k is not None:
        kth = torch.topk(z, min(top_k, z.size(-1)), dim=-1).values[..., -1:]
        z = z.masked_fill(z < kth, float("-inf"))
    probs = z.softmax(-1)
    if top_p is not None and top_p < 1:
        probs = _sd_base_top_p(probs, top_p)
    return probs  # slip: not renormalised after top-p


# =====================================================================================================
# Exercise 5: cached_attention_step(q, k, v, cache_k, cache_v)
# =====================================================================================================

def cas_correct_course_sdpa(q, k, v, cache_k, cache_v):
    """The course's attention, no mask; position from shape[-2]."""
    pos = torch.full((1,), cache_k.shape[-2], dtype=torch.long, device=q.device)
    q, k = course_apply_rope(q, pos), course_apply_rope(k, pos)
    cache_k, cache_v = torch.cat((cache_k, k), dim=-2), torch.cat((cache_v, v), dim=-2)
    return scaled_dot_product_attention(q, cache_k, cache_v), cache_k, cache_v


def cas_correct_einsum(q, k, v, cache_k, cache_v):
    """Scores with einsum, the scale folded into q."""
    t = cache_k.size(2)
    pos = torch.arange(t, t + 1, device=q.device)
    q = course_apply_rope(q, pos) * q.size(-1) ** -0.5
    k = course_apply_rope(k, pos)
    keys = torch.cat([cache_k, k], dim=2)
    values = torch.cat([cache_v, v], dim=2)
    w = torch.einsum("bhqd,bhkd->bhqk", q, keys).softmax(-1)
    out = torch.einsum("bhqk,bhkd->bhqd", w, values)
    return out, keys, values


def cas_correct_torch_sdpa(q, k, v, cache_k, cache_v):
    """torch's fused attention, no mask."""
    t = cache_k.shape[2]
    position = torch.tensor([t], device=q.device)
    k = course_apply_rope(k, position)
    cache_k = torch.cat([cache_k, k], dim=2)
    cache_v = torch.cat([cache_v, v], dim=2)
    out = F.scaled_dot_product_attention(course_apply_rope(q, position), cache_k, cache_v)
    return out, cache_k, cache_v


def cas_slip_no_rope(q, k, v, cache_k, cache_v):
    cache_k = torch.cat([cache_k, k], dim=2)  # slip: q and k never rotated (no RoPE)
    cache_v = torch.cat([cache_v, v], dim=2)
    weights = torch.softmax(q @ cache_k.transpose(-2, -1) / math.sqrt(q.size(-1)), dim=-1)
    return weights @ cache_v, cache_k, cache_v


def cas_slip_position_plus_one(q, k, v, cache_k, cache_v):
    t = cache_k.size(2)
    position = torch.tensor([t + 1])  # slip: off by one, the newest position is t, not t+1
    q, k = course_apply_rope(q, position), course_apply_rope(k, position)
    cache_k = torch.cat([cache_k, k], dim=2)
    cache_v = torch.cat([cache_v, v], dim=2)
    weights = torch.softmax(q @ cache_k.transpose(-2, -1) / math.sqrt(q.size(-1)), dim=-1)
    return weights @ cache_v, cache_k, cache_v


def cas_slip_position_zero(q, k, v, cache_k, cache_v):
    position = torch.tensor([0])  # slip: rotates at position 0 at every step
    q, k = course_apply_rope(q, position), course_apply_rope(k, position)
    cache_k = torch.cat([cache_k, k], dim=2)
    cache_v = torch.cat([cache_v, v], dim=2)
    weights = torch.softmax(q @ cache_k.transpose(-2, -1) / math.sqrt(q.size(-1)), dim=-1)
    return weights @ cache_v, cache_k, cache_v


def cas_slip_position_from_last_axis(q, k, v, cache_k, cache_v):
    t = cache_k.size(-1)  # slip: reads the position from the feature axis d, not the cache's length
    position = torch.tensor([t])
    q, k = course_apply_rope(q, position), course_apply_rope(k, position)
    cache_k = torch.cat([cache_k, k], dim=2)
    cache_v = torch.cat([cache_v, v], dim=2)
    weights = torch.softmax(q @ cache_k.transpose(-2, -1) / math.sqrt(q.size(-1)), dim=-1)
    return weights @ cache_v, cache_k, cache_v


def cas_slip_only_q_rotated(q, k, v, cache_k, cache_v):
    t = cache_k.size(2)
    position = torch.tensor([t])
    q = course_apply_rope(q, position)  # slip: only the query is rotated, the new key is not
    cache_k = torch.cat([cache_k, k], dim=2)
    cache_v = torch.cat([cache_v, v], dim=2)
    weights = torch.softmax(q @ cache_k.transpose(-2, -1) / math.sqrt(q.size(-1)), dim=-1)
    return weights @ cache_v, cache_k, cache_v


def cas_slip_cache_unrotated_key(q, k, v, cache_k, cache_v):
    t = cache_k.size(2)
    position = torch.tensor([t])
    q, k_rot = course_apply_rope(q, position), course_apply_rope(k, position)
    keys = torch.cat([cache_k, k_rot], dim=2)
    weights = torch.softmax(q @ keys.transpose(-2, -1) / math.sqrt(q.size(-1)), dim=-1)
    cache_k = torch.cat([cache_k, k], dim=2)  # slip: the cache keeps the key BEFORE rotation
    cache_v = torch.cat([cache_v, v], dim=2)
    return weights @ cache_v, cache_k, cache_v


def cas_slip_rotates_values(q, k, v, cache_k, cache_v):
    t = cache_k.size(2)
    position = torch.tensor([t])
    q, k, v = course_apply_rope(q, position), course_apply_rope(k, position), course_apply_rope(v, position)  # slip: values rotated too
    cache_k = torch.cat([cache_k, k], dim=2)
    cache_v = torch.cat([cache_v, v], dim=2)
    weights = torch.softmax(q @ cache_k.transpose(-2, -1) / math.sqrt(q.size(-1)), dim=-1)
    return weights @ cache_v, cache_k, cache_v


def cas_slip_no_scale(q, k, v, cache_k, cache_v):
    t = cache_k.size(2)
    position = torch.tensor([t])
    q, k = course_apply_rope(q, position), course_apply_rope(k, position)
    cache_k = torch.cat([cache_k, k], dim=2)
    cache_v = torch.cat([cache_v, v], dim=2)
    weights = torch.softmax(q @ cache_k.transpose(-2, -1), dim=-1)  # slip: scores not divided by sqrt(d)
    return weights @ cache_v, cache_k, cache_v


def cas_slip_softmax_query_axis(q, k, v, cache_k, cache_v):
    t = cache_k.size(2)
    position = torch.tensor([t])
    q, k = course_apply_rope(q, position), course_apply_rope(k, position)
    cache_k = torch.cat([cache_k, k], dim=2)
    cache_v = torch.cat([cache_v, v], dim=2)
    weights = torch.softmax(q @ cache_k.transpose(-2, -1) / math.sqrt(q.size(-1)), dim=-2)  # slip: softmax over the (single) query axis
    return weights @ cache_v, cache_k, cache_v


def cas_slip_tril_mask(q, k, v, cache_k, cache_v):
    t = cache_k.size(2)
    position = torch.tensor([t])
    q, k = course_apply_rope(q, position), course_apply_rope(k, position)
    cache_k = torch.cat([cache_k, k], dim=2)
    cache_v = torch.cat([cache_v, v], dim=2)
    mask = torch.ones(1, t + 1, dtype=torch.bool).tril()  # slip: a "causal" mask on one query row keeps only key 0
    return scaled_dot_product_attention(q, cache_k, cache_v, mask), cache_k, cache_v


# =====================================================================================================
# Exercise 6: apply_rope(x, positions, base)
# =====================================================================================================

def rope_correct_complex(x, positions, base=10000.0):
    """z_i = x_i + i x_{i+d/2}, multiplied by e^{i m theta_i}."""
    d = x.size(-1)
    half = d // 2
    theta = base ** (-2 * torch.arange(half, dtype=torch.float32, device=x.device) / d)
    angle = positions.to(x.device).float()[:, None] * theta                    # (T, d/2)
    rot = torch.polar(torch.ones_like(angle), angle)
    work = x if x.dtype == torch.float64 else x.float()
    z = torch.complex(work[..., :half], work[..., half:]) * rot
    return torch.cat([z.real, z.imag], dim=-1).to(x.dtype)


def rope_correct_rotate_half(x, positions, base=10000.0):
    """x cos + rotate_half(x) sin, with cos and sin repeated over the two halves (Hugging Face style)."""
    d = x.shape[-1]
    inv_freq = base ** (-torch.arange(0, d, 2, dtype=torch.float32) / d)         # (d/2,): theta_i
    freqs = torch.outer(positions.float(), inv_freq)                              # (T, d/2)
    emb = torch.cat([freqs, freqs], dim=-1)                                       # (T, d)
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    rotated = torch.cat([-x2, x1], dim=-1)
    return (x * emb.cos() + rotated * emb.sin()).to(x.dtype)


def rope_correct_stack(x, positions, base=10000.0):
    """The rotation applied to the two halves from chunk, stacked, then concatenated."""
    d = x.size(-1)
    i = torch.arange(d // 2, dtype=torch.float32)
    theta = torch.pow(base, -(2 * i) / d)
    angle = positions.float().unsqueeze(-1) * theta
    c, s = torch.cos(angle), torch.sin(angle)
    a, b = x.chunk(2, dim=-1)
    out = torch.stack([a * c - b * s, a * s + b * c], dim=0)                        # (2, ..., T, d/2)
    return torch.cat(tuple(out), dim=-1).to(x.dtype)


def rope_slip_neighbours(x, positions, base=10000.0):
    d = x.size(-1)
    theta = base ** (-2 * torch.arange(d // 2, dtype=torch.float32) / d)
    angle = positions.float()[:, None] * theta
    cos, sin = angle.cos(), angle.sin()
    x1, x2 = x[..., 0::2], x[..., 1::2]  # slip: pairs neighbours (2i, 2i+1), not the halves (i, i+d/2)
    out = torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)
    return out.flatten(-2).to(x.dtype)


def rope_slip_missing_two(x, positions, base=10000.0):
    d = x.size(-1)
    theta = base ** (-torch.arange(d // 2, dtype=torch.float32) / d)  # slip: exponent -i/d, the factor 2 missing
    angle = positions.float()[:, None] * theta
    cos, sin = angle.cos(), angle.sin()
    x1, x2 = x[..., :d // 2], x[..., d // 2:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).to(x.dtype)


def rope_slip_double_two(x, positions, base=10000.0):
    d = x.size(-1)
    theta = base ** (-2 * torch.arange(0, d, 2, dtype=torch.float32) / d)  # slip: arange(0, d, 2) AND a factor 2: exponent -4i/d
    angle = positions.float()[:, None] * theta
    cos, sin = angle.cos(), angle.sin()
    x1, x2 = x[..., :d // 2], x[..., d // 2:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).to(x.dtype)


def rope_slip_positive_exponent(x, positions, base=10000.0):
    d = x.size(-1)
    theta = base ** (2 * torch.arange(d // 2, dtype=torch.float32) / d)  # slip: exponent +2i/d, frequencies growing
    angle = positions.float()[:, None] * theta
    cos, sin = angle.cos(), angle.sin()
    x1, x2 = x[..., :d // 2], x[..., d // 2:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).to(x.dtype)


def rope_slip_reversed_rotation(x, positions, base=10000.0):
    d = x.size(-1)
    theta = base ** (-2 * torch.arange(d // 2, dtype=torch.float32) / d)
    angle = positions.float()[:, None] * theta
    cos, sin = angle.cos(), angle.sin()
    x1, x2 = x[..., :d // 2], x[..., d // 2:]
    return torch.cat([x1 * cos + x2 * sin, -x1 * sin + x2 * cos], dim=-1).to(x.dtype)  # slip: sign of sin swapped, rotation by -m*theta


def rope_slip_ignores_positions(x, positions, base=10000.0):
    d = x.size(-1)
    theta = base ** (-2 * torch.arange(d // 2, dtype=torch.float32) / d)
    angle = torch.arange(x.size(-2)).float()[:, None] * theta  # slip: uses 0..T-1, not the positions given
    cos, sin = angle.cos(), angle.sin()
    x1, x2 = x[..., :d // 2], x[..., d // 2:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).to(x.dtype)


def rope_slip_ignores_base(x, positions, base=10000.0):
    d = x.size(-1)
    theta = 10000.0 ** (-2 * torch.arange(d // 2, dtype=torch.float32) / d)  # slip: base hard-coded to 10000
    angle = positions.float()[:, None] * theta
    cos, sin = angle.cos(), angle.sin()
    x1, x2 = x[..., :d // 2], x[..., d // 2:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).to(x.dtype)


def rope_slip_float32_result(x, positions, base=10000.0):
    d = x.size(-1)
    x = x.float()  # slip: casts to float32 and never back: a float64 x gives float32
    theta = base ** (-2 * torch.arange(d // 2, dtype=torch.float32) / d)
    angle = positions.float()[:, None] * theta
    cos, sin = angle.cos(), angle.sin()
    x1, x2 = x[..., :d // 2], x[..., d // 2:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


def rope_slip_in_place(x, positions, base=10000.0):
    d = x.size(-1)
    theta = base ** (-2 * torch.arange(d // 2, dtype=torch.float32) / d)
    angle = positions.float()[:, None] * theta
    cos, sin = angle.cos(), angle.sin()
    x1, x2 = x[..., :d // 2].clone(), x[..., d // 2:].clone()
    x[..., :d // 2], x[..., d // 2:] = x1 * cos - x2 * sin, x1 * sin + x2 * cos  # slip: writes the result into the caller's x
    return x


# =====================================================================================================
# Exercise 7: grouped_query_attention(q, k, v, mask)
# =====================================================================================================

def gqa_correct_expand(q, k, v, mask=None):
    """expand a group axis, then reshape: (B, h_kv, g, T, d) -> (B, h, T, d)."""
    B, h, _, d = q.shape
    h_kv, T_k = k.size(1), k.size(2)
    g = h // h_kv
    k = k[:, :, None].expand(B, h_kv, g, T_k, d).reshape(B, h, T_k, d)
    v = v[:, :, None].expand(B, h_kv, g, T_k, v.size(-1)).reshape(B, h, T_k, v.size(-1))
    return scaled_dot_product_attention(q, k, v, mask)


def gqa_correct_grouped_queries(q, k, v, mask=None):
    """No copy of k, v: the queries grouped as (B, h_kv, g, T, d), the mask brought to the same shape."""
    B, h, T_q, d = q.shape
    h_kv, T_k = k.size(1), k.size(2)
    g = h // h_kv
    qg = q.reshape(B, h_kv, g, T_q, d)
    scores = qg @ k[:, :, None].transpose(-2, -1) / math.sqrt(d)              # (B, h_kv, g, T_q, T_k)
    if mask is not None:
        mask = torch.broadcast_to(mask, (B, h, T_q, T_k)).reshape(B, h_kv, g, T_q, T_k)
    weights = masked_softmax(scores, mask)
    return (weights @ v[:, :, None]).reshape(B, h, T_q, v.size(-1))


def gqa_correct_head_loop(q, k, v, mask=None):
    """One query head at a time, with its key/value head j // g."""
    B, h, T_q, _ = q.shape
    g = h // k.size(1)
    full = None if mask is None else torch.broadcast_to(mask, (B, h, T_q, k.size(2)))
    outs = []
    for j in range(h):
        m = None if full is None else full[:, j]
        outs.append(scaled_dot_product_attention(q[:, j], k[:, j // g], v[:, j // g], m))
    return torch.stack(outs, dim=1)


def gqa_slip_repeat_tiles(q, k, v, mask=None):
    group = q.size(1) // k.size(1)
    k, v = k.repeat(1, group, 1, 1), v.repeat(1, group, 1, 1)  # slip: repeat tiles the heads: query head j gets kv head j % h_kv
    return scaled_dot_product_attention(q, k, v, mask)


def gqa_slip_ignores_mask(q, k, v, mask=None):
    group = q.size(1) // k.size(1)
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    return scaled_dot_product_attention(q, k, v)  # slip: the mask is not passed on


def gqa_slip_own_causal_mask(q, k, v, mask=None):
    group = q.size(1) // k.size(1)
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    return scaled_dot_product_attention(q, k, v, causal_mask(q.size(2)))  # slip: builds a causal mask instead of using the mask given


def gqa_slip_mask_inverted(q, k, v, mask=None):
    group = q.size(1) // k.size(1)
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(mask, float("-inf"))  # slip: fills where mask is True (True means "may attend")
    return scores.softmax(-1) @ v


def gqa_slip_float_mask(q, k, v, mask=None):
    group = q.size(1) // k.size(1)
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    attn_mask = None if mask is None else mask.float()  # slip: a float mask is ADDED to the scores (0/1), it masks nothing
    return F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)


def gqa_slip_no_scale(q, k, v, mask=None):
    group = q.size(1) // k.size(1)
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    scores = q @ k.transpose(-2, -1)  # slip: scores not divided by sqrt(d)
    return masked_softmax(scores, mask) @ v


def gqa_slip_softmax_query_axis(q, k, v, mask=None):
    group = q.size(1) // k.size(1)
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    return masked_softmax(scores, mask, dim=-2) @ v  # slip: softmax over the queries, not the keys


# =====================================================================================================

SLIPS = [
    # next_token_loss
    ("next_token_loss", "no shift: the logits at t are scored against the token at t", ntl_slip_no_shift),
    ("next_token_loss", "shift in the wrong direction: logits 1..T-1 against tokens 0..T-2", ntl_slip_shift_reversed),
    ("next_token_loss", "padding targets are not ignored (no ignore_index)", ntl_slip_no_ignore),
    ("next_token_loss", "padding tested on the input token instead of the target token", ntl_slip_pad_mask_on_inputs),
    ("next_token_loss", "sum over the targets instead of the mean", ntl_slip_sum),
    ("next_token_loss", "mean per sequence, then mean over the batch (not the mean over all real targets)",
     ntl_slip_mean_of_sequence_means),
    ("next_token_loss", "returns a Python float (.item()) instead of a tensor", ntl_slip_item),
    ("next_token_loss", "nll_loss on raw logits, log_softmax forgotten", ntl_slip_nll_on_logits),
    ("next_token_loss", "divides by all B*(T-1) positions, padding included", ntl_slip_divide_by_all_positions),
    ("next_token_loss", "log_softmax over the time axis instead of the vocabulary", ntl_slip_log_softmax_time_axis),
    # gpt_block
    ("gpt_block", "post-norm: LayerNorm after each residual sum instead of before each sub-layer", BlockSlipPostNorm),
    ("gpt_block", "attention residual added to the normalised input instead of x", BlockSlipResidualFromNormed),
    ("gpt_block", "keys and values taken from the un-normalised x (only the query normalised)", BlockSlipKeysFromRawX),
    ("gpt_block", "feed-forward reads the block's input instead of x after the attention", BlockSlipFFNOnOldX),
    ("gpt_block", "the same LayerNorm (norm1) used for both sub-layers", BlockSlipNorm1Twice),
    ("gpt_block", "no dropout on the attention output", BlockSlipNoDropout),
    ("gpt_block", "dropout applied to the residual sum instead of the sub-layer output", BlockSlipDropoutAfterSum),
    ("gpt_block", "the causal mask is not passed to the attention", BlockSlipNoMask),
    ("gpt_block", "mask inverted", BlockSlipMaskInverted),
    ("gpt_block", "no residual around the attention", BlockSlipNoAttnResidual),
    # gpt
    ("gpt", "tie by copying the embedding's values into a new parameter", GPTSlipTieCopy),
    ("gpt", "logits from the embedding matrix in forward, but self.head never tied", GPTSlipUntiedForward),
    ("gpt", "embedding not scaled by sqrt(d_model)", GPTSlipNoScale),
    ("gpt", "sqrt(d_model) applied after the positions are added", GPTSlipScaleAfterPositions),
    ("gpt", "embedding added twice (self.pos already adds its input)", GPTSlipEmbeddingTwice),
    ("gpt", "no causal mask", GPTSlipNoMask),
    ("gpt", "mask True above the diagonal (attends to the future)", GPTSlipMaskUpper),
    ("gpt", "mask off by one: a position cannot attend to itself", GPTSlipMaskNoDiagonal),
    ("gpt", "final LayerNorm skipped", GPTSlipNoFinalNorm),
    # sampling_distribution
    ("sampling_distribution", "temperature multiplies the logits instead of dividing them", sd_slip_temperature_multiplies),
    ("sampling_distribution", "temperature applied to the probabilities after the softmax (no effect)",
     sd_slip_temperature_after_softmax),
    ("sampling_distribution", "top-p drops the token that crosses p", sd_slip_top_p_excludes_crossing),
    ("sampling_distribution", "top-p keeps a prefix of the sort order, dropping tokens tied with the last kept",
     sd_slip_top_p_drops_ties),
    ("sampling_distribution", "top-k keeps exactly k tokens, dropping ties with the k-th", sd_slip_top_k_drops_ties),
    ("sampling_distribution", "top_k not clipped to V: fails when top_k > V", sd_slip_top_k_larger_than_v),
    ("sampling_distribution", "temperature 0 spreads the mass over all tied maxima", sd_slip_greedy_ties_split),
    ("sampling_distribution", "temperature 0 returns an integer one-hot, not floats", sd_slip_greedy_long),
    ("sampling_distribution", "top-p chosen on softmax(logits) before temperature and top-k",
     sd_slip_top_p_on_raw_distribution),
    ("sampling_distribution", "not renormalised after top-p", sd_slip_no_renormalise),
    # cached_attention_step
    ("cached_attention_step", "no rotary positions at all", cas_slip_no_rope),
    ("cached_attention_step", "rotated at position t+1 instead of t", cas_slip_position_plus_one),
    ("cached_attention_step", "rotated at position 0 at every step", cas_slip_position_zero),
    ("cached_attention_step", "position read from the feature axis instead of the cache length",
     cas_slip_position_from_last_axis),
    ("cached_attention_step", "only the query rotated, the new key stored unrotated", cas_slip_only_q_rotated),
    ("cached_attention_step", "the cache stores the key before rotation (used rotated only this step)",
     cas_slip_cache_unrotated_key),
    ("cached_attention_step", "values rotated too", cas_slip_rotates_values),
    ("cached_attention_step", "scores not scaled by 1/sqrt(d)", cas_slip_no_scale),
    ("cached_attention_step", "softmax over the query axis instead of the keys", cas_slip_softmax_query_axis),
    ("cached_attention_step", "a tril mask on the single query row hides every key but the first", cas_slip_tril_mask),
    # apply_rope
    ("apply_rope", "pairs neighbouring features (2i, 2i+1) instead of the halves", rope_slip_neighbours),
    ("apply_rope", "frequency exponent -i/d (factor 2 missing)", rope_slip_missing_two),
    ("apply_rope", "factor 2 counted twice: exponent -4i/d", rope_slip_double_two),
    ("apply_rope", "frequency exponent positive (+2i/d)", rope_slip_positive_exponent),
    ("apply_rope", "rotation in the wrong direction (sign of sin swapped)", rope_slip_reversed_rotation),
    ("apply_rope", "ignores the positions argument and uses 0..T-1", rope_slip_ignores_positions),
    ("apply_rope", "ignores the base argument (always 10000)", rope_slip_ignores_base),
    ("apply_rope", "returns float32 for a float64 input", rope_slip_float32_result),
    ("apply_rope", "writes the rotation into the input tensor in place", rope_slip_in_place),
    # grouped_query_attention
    ("grouped_query_attention", "repeat instead of repeat_interleave: query head j uses kv head j % h_kv",
     gqa_slip_repeat_tiles),
    ("grouped_query_attention", "the mask is not passed on", gqa_slip_ignores_mask),
    ("grouped_query_attention", "builds its own causal mask instead of using the mask given", gqa_slip_own_causal_mask),
    ("grouped_query_attention", "mask inverted in masked_fill", gqa_slip_mask_inverted),
    ("grouped_query_attention", "boolean mask converted to float, so it is added (0/1) instead of masking",
     gqa_slip_float_mask),
    ("grouped_query_attention", "scores not scaled by 1/sqrt(d)", gqa_slip_no_scale),
    ("grouped_query_attention", "softmax over the query axis instead of the keys", gqa_slip_softmax_query_axis),
]

CORRECT = [
    ("next_token_loss", "cross_entropy with the class axis moved to dim 1", ntl_correct_transpose),
    ("next_token_loss", "log_softmax + gather, mean over the non-pad targets", ntl_correct_gather),
    ("next_token_loss", "reduction='none' and a masked mean", ntl_correct_none_reduction),
    ("gpt_block", "named residual branches", BlockCorrectSteps),
    ("gpt_block", "loop over (norm, sub-layer, dropout)", BlockCorrectLoop),
    ("gpt", "tie written as embed.weight = head.weight; mask from ones().tril()", GPTCorrectTieOtherWay),
    ("gpt", "logits with F.linear on the embedding matrix; mask from an index comparison", GPTCorrectFLinear),
    ("sampling_distribution", "sort-based top-k, top-p via exclusive cumsum and a threshold", sd_correct_sort_exclusive),
    ("sampling_distribution", "top-k on probabilities, renormalised, top-p by a loop over rows",
     sd_correct_probability_space),
    ("cached_attention_step", "course's scaled_dot_product_attention without a mask", cas_correct_course_sdpa),
    ("cached_attention_step", "einsum with the scale folded into q", cas_correct_einsum),
    ("cached_attention_step", "torch's F.scaled_dot_product_attention", cas_correct_torch_sdpa),
    ("apply_rope", "complex multiplication", rope_correct_complex),
    ("apply_rope", "rotate_half form with cos/sin repeated", rope_correct_rotate_half),
    ("apply_rope", "chunk, stack of the two rotated halves, torch.pow frequencies", rope_correct_stack),
    ("grouped_query_attention", "expand a group axis and reshape", gqa_correct_expand),
    ("grouped_query_attention", "queries grouped (B, h_kv, g, T, d), no copy of k/v", gqa_correct_grouped_queries),
    ("grouped_query_attention", "loop over query heads", gqa_correct_head_loop),
]
