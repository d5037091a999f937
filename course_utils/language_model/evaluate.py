"""Lesson 12's measures: perplexity, and the smoothed bigram it is compared with.

    perplexity(model, windows)                          # exp(mean cross-entropy of the next token)
    bigram = BigramModel.fit(train_stream, vocab_size)  # the baseline, add-α smoothed
    bigram = best_bigram(train_stream, vocab_size, val) # the α that does best on validation
"""
import math

import torch

from ..gpt import next_token_loss
from ..precision import autocast

__all__ = ["BigramModel", "best_bigram", "perplexity"]


class BigramModel:
    """p(next | previous) from counts with add-α smoothing: (count(a, b) + α) / (count(a) + α V)."""

    def __init__(self, counts, alpha):
        self.counts, self.alpha = counts, alpha                       # (V, V) float64
        row = counts.sum(1, keepdim=True)
        self.log_probs = ((counts + alpha) / (row + alpha * counts.size(1))).log()   # (V, V)

    @classmethod
    def fit(cls, stream, vocab_size, alpha=0.01):
        counts = torch.zeros(vocab_size, vocab_size, dtype=torch.float64)
        counts.index_put_((stream[:-1], stream[1:]), torch.ones(stream.numel() - 1, dtype=torch.float64),
                          accumulate=True)
        return cls(counts, alpha)

    def with_alpha(self, alpha):
        return BigramModel(self.counts, alpha)

    def perplexity(self, windows):
        """exp(mean -log p(token t | token t-1)) over the same targets as the GPT's: positions 1..T-1 of each window."""
        prev, nxt = windows[:, :-1].reshape(-1), windows[:, 1:].reshape(-1)
        return math.exp(-float(self.log_probs[prev, nxt].mean()))


def best_bigram(train_stream, vocab_size, val_windows, alphas=(0.003, 0.01, 0.03, 0.1)):
    """The smoothed bigram whose α gives the lowest validation perplexity."""
    return min((BigramModel.fit(train_stream, vocab_size, a) for a in alphas), key=lambda m: m.perplexity(val_windows))


@torch.no_grad()
def perplexity(model, windows, batch_size=64, amp_dtype=None, pad_id=0):
    """exp(mean next-token cross-entropy) of `model` over windows (N, T) (positions 1..T-1 are predicted)."""
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    total, count = 0.0, 0
    try:
        for i in range(0, windows.size(0), batch_size):
            batch = windows[i:i + batch_size].to(device)
            with autocast(device, amp_dtype):
                logits = model(batch)
            targets = int((batch[:, 1:] != pad_id).sum())
            total += float(next_token_loss(logits, batch, pad_id)) * targets
            count += targets
    finally:
        model.train(was_training)
    return math.exp(total / count)
