"""What lesson 03's encoder-state and decoder-step checks share: padded batches, a padding mask."""
import torch

from ..inputs import randn


def random_mask(g, B, T, lengths=None):
    """Padding mask (B, T): True for the first `length` positions of each row."""
    lengths = lengths if lengths is not None else g.integers(1, T + 1, size=B)
    return torch.arange(T)[None, :] < torch.as_tensor(lengths)[:, None]


def padded(g, lengths, d):
    """Random states (B, S, d) with zeros past each length, as a packed GRU returns them."""
    S = max(lengths)
    x = randn(g, len(lengths), S, d)
    return x * random_mask(g, len(lengths), S, lengths)[..., None]
