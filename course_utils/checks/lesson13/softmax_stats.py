"""What lesson 13's exercises share about the softmax's statistics of a row: m, its maximum, and l = Σ exp(x − m),
its normaliser, computed from the whole row at once (the formula the checks compare with, never the lesson's own
blocked code), and the safe maximum every blocked loop needs (0 where m = −∞, so that exp(−∞ − 0) = 0)."""
import torch

NEG_INF = float("-inf")


def safe(m):
    """m where finite, 0 where −∞ (so that exp(−∞ − safe) = 0, not NaN)."""
    return torch.where(torch.isneginf(m), torch.zeros_like(m), m)


def stats(x):
    """(m, l) of every row of x (..., n), from the whole row at once: m = max, l = Σ exp(x − m)."""
    m = x.amax(dim=-1)
    return m, torch.exp(x - safe(m)[..., None]).sum(dim=-1)
