"""Induction heads (lesson 14): an attention-only Transformer, repeated random tokens, the scores that find
a head's job, and ablation (Elhage et al. 2021, "A Mathematical Framework for Transformer Circuits";
Olsson et al. 2022, "In-context Learning and Induction Heads").

    model = AttentionOnly(vocab_size=64, d_model=64, num_heads=4, num_layers=2, max_len=64)
    tokens = repeated_sequences(256, half_length=32, vocab_size=64, generator=g)   # (256, 64): [r, r]
    batch = segment_repeats(32, length=64, vocab_size=64, generator=g)             # training: a repeat somewhere
    losses = loss_per_position(model, tokens)          # (T-1,): loss of the token at t+1, predicted at t
    icl_score(losses, half_length)                     # late loss minus early loss (Olsson et al.)
    maps = attention_maps(model, tokens)               # (N, B, h, T, T): N layers, h heads
    prev, ind = head_scores(maps, half_length)         # each (N, B, h): previous-token and induction scores
    with ablate_heads(model, [(1, 2)]): ...            # head 2 of layer 1 (0-based) zeroed
    ablation_effect(model, tokens, layer, head, half_length)   # a float: the second copy's loss increase
    effects = ablation_effects(model, tokens, half_length)   # (N, h): the same for every head

On [r, r] (a random sequence r of L tokens, then r again), the token at t ≥ L is the token at t - L: its
previous occurrence. The token that FOLLOWED that occurrence, at t - L + 1, is the next token. An induction
head at t attends to t - L + 1 (the "induction stripe", L - 1 below the diagonal) and copies it.

Sequences may start with `offset` tokens before the first copy (e.g. lesson 12's <bos>): the scores and
losses then read the positions after them. Layers and heads are counted from 0 in code, as in PyTorch.
"""
import contextlib

import torch
import torch.nn as nn
import torch.nn.functional as F

from .gpt_attention import CausalSelfAttention
from .masks import causal_mask

__all__ = ["AttentionOnly", "repeated_sequences", "segment_repeats", "loss_per_position", "second_copy_loss",
           "icl_score", "attention_maps", "head_scores", "attention_heads", "ablate_heads", "ablation_effect",
           "ablation_effects",
           "composition_test", "POSITIONS"]

POSITIONS = ("learned", "rope")


class AttentionOnlyBlock(nn.Module):
    """One layer: x + Attn(LN(x)), causal; no feed-forward network."""

    def __init__(self, d_model, num_heads, rope):
        super().__init__()
        self.norm = nn.LayerNorm(d_model)
        self.attn = CausalSelfAttention(d_model, num_heads, rope=rope)

    def forward(self, x, mask):                                     # x (B, T, d_model)
        return x + self.attn(self.norm(x), mask)


class AttentionOnly(nn.Module):
    """An attention-only Transformer: token embedding [+ learned positions], `num_layers` blocks of causal
    multi-head attention with a residual connection (pre-norm, no feed-forward network), a final LayerNorm,
    and an unembedding: logits (B, T, V) for tokens (B, T), T <= max_len.

    The residual stream x is the sum of everything written into it: the embedding, then every head's
    output (Elhage et al.): x_L = x_0 + Σ_l Σ_h head_{l,h}(LN(x_{l-1})), logits = LN(x_L) W_U.
    positions: "rope" (rotary, inside every attention; nothing is added to x_0) or "learned" (a table added)."""

    def __init__(self, vocab_size, d_model=64, num_heads=4, num_layers=2, max_len=64, positions="rope"):
        super().__init__()
        if positions not in POSITIONS:
            raise ValueError(f"positions must be one of {POSITIONS}, got {positions!r}")
        self.vocab_size, self.d_model, self.max_len, self.positions = vocab_size, d_model, max_len, positions
        self.embed = nn.Embedding(vocab_size, d_model)
        self.pos = nn.Embedding(max_len, d_model) if positions == "learned" else None
        self.layers = nn.ModuleList(AttentionOnlyBlock(d_model, num_heads, positions == "rope")
                                    for _ in range(num_layers))
        self.norm = nn.LayerNorm(d_model)
        self.unembed = nn.Linear(d_model, vocab_size)

    @property
    def num_layers(self):
        return len(self.layers)

    @property
    def num_heads(self):
        return self.layers[0].attn.num_heads

    def forward(self, tokens):
        """tokens (B, T) -> logits (B, T, V): position t predicts token t+1."""
        if tokens.dim() != 2 or tokens.size(1) > self.max_len:
            raise ValueError(f"tokens must be (B, T) with T <= max_len={self.max_len}, got {tuple(tokens.shape)}")
        x = self.embed(tokens)                                      # (B, T, d_model)
        if self.pos is not None:
            x = x + self.pos(torch.arange(tokens.size(1), device=tokens.device))
        mask = causal_mask(tokens.size(1), tokens.device)           # (T, T)
        for layer in self.layers:
            x = layer(x, mask)
        return self.unembed(self.norm(x))                           # (B, T, V)


# ---- data ---------------------------------------------------------------------------------------------
def repeated_sequences(n, half_length, vocab_size, generator=None, low=0, prefix=()):
    """(n, len(prefix) + 2 half_length): `prefix` (e.g. [BOS_ID]), then random tokens r from [low, vocab_size),
    then r again."""
    r = torch.randint(low, vocab_size, (n, half_length), generator=generator)
    start = torch.tensor(list(prefix), dtype=torch.long).expand(n, len(prefix))
    return torch.cat([start, r, r], dim=1)


def segment_repeats(n, length, vocab_size, generator=None, min_segment=None, max_segment=None):
    """(n, length) random tokens, each row with one segment copied later: a segment of s tokens (s drawn from
    [min_segment, max_segment], default [length/4, length/2]) at a random start a, and its copy right after
    a random gap, at b >= a + s. Where the copy sits changes from row to row, so only the tokens themselves
    tell a model where to copy from: positions alone cannot (the lesson's training data)."""
    min_segment = max(2, length // 4) if min_segment is None else min_segment
    max_segment = length // 2 if max_segment is None else max_segment
    if not 2 <= min_segment <= max_segment <= length // 2:
        raise ValueError(f"segments must have 2 <= min_segment <= max_segment <= length / 2 = {length // 2}, got "
                         f"[{min_segment}, {max_segment}]")
    tokens = torch.randint(0, vocab_size, (n, length), generator=generator)
    draw = lambda lo, hi: int(torch.randint(lo, hi + 1, (1,), generator=generator))   # noqa: E731
    for row in range(n):
        s = draw(min_segment, max_segment)
        a = draw(0, length - 2 * s)
        b = draw(a + s, length - s)
        tokens[row, b:b + s] = tokens[row, a:a + s]
    return tokens


# ---- losses -------------------------------------------------------------------------------------------
@torch.no_grad()
def loss_per_position(model, tokens):
    """(T-1,): the cross-entropy of token t+1 given tokens 0..t, at every t, averaged over the batch."""
    was_training = model.training
    model.eval()
    logits = model(tokens).float()                                  # (B, T, V)
    model.train(was_training)
    losses = F.cross_entropy(logits[:, :-1].transpose(1, 2), tokens[:, 1:], reduction="none")   # (B, T-1)
    return losses.mean(0)


def second_copy_loss(losses, half_length, offset=0):
    """The mean loss on the second copy's tokens after its first, from loss_per_position's (T-1,) losses:
    targets offset + L + 1 .. offset + 2L - 1, predicted at offset + L .. offset + 2L - 2. (The first token of
    the second copy cannot be predicted: nothing says that the repeat starts there.)"""
    return losses[..., offset + half_length:offset + 2 * half_length - 1].mean(-1)


def icl_score(losses, half_length, offset=0):
    """Olsson et al.'s in-context learning score on [r, r]: the loss late in the context (the last token,
    target offset + 2L - 1) minus the loss early in it (target offset + L / 2, in the first copy). Negative
    when the context helps; about 0 when it does not."""
    late = losses[..., offset + 2 * half_length - 2]
    early = losses[..., offset + half_length // 2 - 1]
    return late - early


# ---- attention patterns and scores --------------------------------------------------------------------
def attention_heads(model):
    """The model's attention modules in layer order (each has num_heads, d_head, out_proj): model.layers[l].attn."""
    return [layer.attn for layer in model.layers]


@torch.no_grad()
def attention_maps(model, tokens):
    """(N, B, h, T, T): every layer's attention weights on `tokens` (eval mode)."""
    was_training = model.training
    model.eval()
    modules = attention_heads(model)
    for attn in modules:
        attn.store_weights = True
    try:
        model(tokens)
        return torch.stack([attn.attn_weights.float() for attn in modules])
    finally:
        for attn in modules:
            attn.store_weights, attn.attn_weights = False, None
        model.train(was_training)


def head_scores(weights, half_length, offset=0):
    """weights (..., T, T) on sequences [prefix of `offset`, r, r] -> (previous, induction), each (...):

    previous  = mean over t = 1 .. 2L-1 of weights[t, t-1]          (the token before)
    induction = mean over t = L .. 2L-1 of weights[t, t-L+1]         (the token after the previous occurrence)
    (t counted from the first token of r; the prefix's rows and columns are left out)."""
    L, o = half_length, offset
    w = weights[..., o:o + 2 * L, o:o + 2 * L]                      # (..., 2L, 2L): r, r only
    t = torch.arange(1, 2 * L)
    previous = w[..., t, t - 1].mean(-1)
    t = torch.arange(L, 2 * L)
    induction = w[..., t, t - L + 1].mean(-1)
    return previous, induction


# ---- ablation -----------------------------------------------------------------------------------------
@contextlib.contextmanager
def ablate_heads(model, heads):
    """Inside the block, the heads `heads` [(layer, head), ...] write nothing: each one's slice of W_O's input
    (features head·d_head .. (head+1)·d_head of the concatenated heads) is set to zero by a forward pre-hook
    on its layer's out_proj. Nothing is changed outside the block (the hooks are removed)."""
    modules = attention_heads(model)
    hooks = []
    try:
        for layer, head in heads:
            attn = modules[layer]
            if not 0 <= head < attn.num_heads:
                raise ValueError(f"layer {layer} has heads 0..{attn.num_heads - 1}, got head {head}")
            lo, hi = head * attn.d_head, (head + 1) * attn.d_head

            def zero(module, args, lo=lo, hi=hi):
                z = args[0].clone()                                 # (B, T, h d_head): the heads, concatenated
                z[..., lo:hi] = 0
                return (z,) + tuple(args[1:])

            hooks.append(attn.out_proj.register_forward_pre_hook(zero))
        yield model
    finally:
        for hook in hooks:
            hook.remove()


def ablation_effect(model, tokens, layer, head, half_length, offset=0):
    """How much the loss on the second copy rises when head `head` of layer `layer` writes nothing: the
    second-copy loss with it zeroed minus the loss with every head."""
    clean = second_copy_loss(loss_per_position(model, tokens), half_length, offset)
    with ablate_heads(model, [(layer, head)]):
        ablated = second_copy_loss(loss_per_position(model, tokens), half_length, offset)
    return float(ablated - clean)


def ablation_effects(model, tokens, half_length, offset=0):
    """(N, h): ablation_effect of every head, one at a time."""
    modules = attention_heads(model)
    return torch.tensor([[ablation_effect(model, tokens, layer, head, half_length, offset)
                          for head in range(attn.num_heads)] for layer, attn in enumerate(modules)])


@torch.no_grad()
def composition_test(model, tokens, previous_head, induction_head, half_length):
    """Which input of the induction head (layer 1 of a 2-layer AttentionOnly) needs the previous-token head
    (layer 0)? The induction head's induction score with everything intact ("none"), and when only its queries,
    or only its keys, are computed from a residual stream without the previous-token head's output:
    {"none": s, "queries": s, "keys": s}. K-composition: the score collapses when the keys lose it."""
    if not isinstance(model, AttentionOnly) or model.num_layers != 2:
        raise ValueError("composition_test takes a 2-layer AttentionOnly model")
    model.eval()
    x0 = model.embed(tokens)
    if model.pos is not None:
        x0 = x0 + model.pos(torch.arange(tokens.size(1), device=tokens.device))
    mask = causal_mask(tokens.size(1), tokens.device)
    first, second = model.layers
    clean = first(x0, mask)
    with ablate_heads(model, [(0, previous_head)]):
        ablated = first(x0, mask)
    positions = torch.arange(tokens.size(1), device=tokens.device)
    attn = second.attn
    scores = {}
    for part in ("none", "queries", "keys"):
        q, _, _ = attn.project(second.norm(ablated if part == "queries" else clean), positions)
        _, k, _ = attn.project(second.norm(ablated if part == "keys" else clean), positions)
        _, weights = _weights(q, k)
        scores[part] = float(head_scores(weights[:, induction_head], half_length)[1].mean())
    return scores


def _weights(q, k):
    """Causal softmax(q kᵀ / √d) for q, k (B, h, T, d): (scores, weights)."""
    T = q.size(-2)
    scores = q @ k.transpose(-2, -1) / q.size(-1) ** 0.5
    scores = scores.masked_fill(~causal_mask(T, q.device), float("-inf"))
    return scores, scores.softmax(-1)
