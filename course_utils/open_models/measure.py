"""Lesson 15's measures of a trained model: perplexity, the largest attention logit, the weight on the first
position and on the learned sinks, and recall accuracy.

    perplexity(model, windows)                       exp(mean next-token cross-entropy) over windows (N, T)
    largest_logits(model, tokens)                    [the largest q.k/sqrt(d) of each attention layer]
    first_position(model, tokens)                    {"first": [...], "sink": [...], "layers": [...]}: per layer
    recall_accuracy(model, tokens, targets)          the share of answers predicted right
"""
import math

import torch
import torch.nn.functional as F

from ..data.associative_recall import IGNORE
from ..gpt import GPT, next_token_loss
from ..masks import causal_mask
from ..open_model import OpenLM

__all__ = ["perplexity", "largest_logits", "first_position", "recall_accuracy"]


@torch.no_grad()
def perplexity(model, windows, batch_size=64):
    """exp(mean next-token cross-entropy) of `model` over windows (N, T) (positions 1 .. T-1 predicted)."""
    was = model.training
    model.eval()
    total = 0.0
    for i in range(0, windows.size(0), batch_size):
        batch = windows[i:i + batch_size]
        total += float(next_token_loss(model(batch), batch, pad_id=-1)) * batch.size(0)
    model.train(was)
    return math.exp(total / windows.size(0))


@torch.no_grad()
def largest_logits(model, tokens):
    """The largest score q.k/sqrt(d_head) each softmax attention layer gives on tokens (B, T) (masked scores
    excluded): [float] per attention layer, in order. Lesson 12's GPT is measured layer by layer."""
    was = model.training
    model.eval()
    try:
        if isinstance(model, OpenLM):
            model.track_logits(True)
            model(tokens)
            found = [mixer.max_logit for _, mixer in model.attention_layers()]
            model.track_logits(False)
            return found
        if not isinstance(model, GPT):
            raise TypeError(f"largest_logits measures an OpenLM or lesson 12's GPT, got {type(model).__name__}")
        T, found = tokens.size(1), []
        x, mask = model.embed_tokens(tokens), causal_mask(tokens.size(1))
        for layer in model.layers:
            q, k, _ = layer.attn.project(layer.norm1(x), torch.arange(T))
            k = k.repeat_interleave(q.size(1) // k.size(1), dim=1)
            scores = (q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))).masked_fill(~mask, float("-inf"))
            found.append(float(scores.amax()))
            x = layer(x, mask)
        return found
    finally:
        model.train(was)


@torch.no_grad()
def first_position(model, tokens):
    """Where the queries 1 .. T-1 of tokens (B, T) put their weight, per softmax attention layer that sees the
    first position (a local layer sees it only from queries closer than its window: it is left out):
    {"layers": [index], "first": [mean weight on key 0], "sink": [mean weight on the learned sink, 0 without]}."""
    was = model.training
    model.eval()
    try:
        model.store_attention(True)
        model(tokens)
        layers = model.attention_layers() if isinstance(model, OpenLM) else \
            [(i, layer.attn) for i, layer in enumerate(model.layers)]
        out = {"layers": [], "first": [], "sink": []}
        for i, attn in layers:
            if getattr(attn, "window", None) is not None and attn.window < tokens.size(1):
                continue
            w = attn.attn_weights.float()                                    # (B, h, T, T)
            out["layers"].append(i)
            out["first"].append(round(float(w[..., 1:, 0].mean()), 4))
            out["sink"].append(round(float(1 - w[..., 1:, :].sum(-1).mean()), 4))
        model.store_attention(False)
        return out
    finally:
        model.train(was)


@torch.no_grad()
def recall_accuracy(model, tokens, targets, batch_size=64):
    """The share of the answers (targets != IGNORE) that the model's most probable next token gets right."""
    was = model.training
    model.eval()
    right = total = 0
    for i in range(0, tokens.size(0), batch_size):
        logits = model(tokens[i:i + batch_size])
        asked = targets[i:i + batch_size] != IGNORE
        right += int((logits.argmax(-1)[asked] == targets[i:i + batch_size][asked]).sum())
        total += int(asked.sum())
    model.train(was)
    return right / max(total, 1)


def recall_loss(model, tokens, targets):
    """Mean cross-entropy of the answers only."""
    logits = model(tokens)
    return F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(), ignore_index=IGNORE)
