"""The copy task of the Neural Turing Machine paper (Graves et al., 2014), seeded.

A sequence of T random binary vectors of width 8 is shown, followed by a delimiter (a ninth
channel that is 1 only at the delimiter step); then T blank steps during which the model must
write the sequence back. The input has 2T + 1 steps and 9 channels; the target is the T vectors.

    x, y = copy_batch(batch_size=16, length=5, seed=0)   # x (16, 11, 9), y (16, 5, 8)
    logits = model(x)[:, length + 1:]                      # the T output steps, (16, 5, 8)

`CopyTask(min_length, max_length, batch_size, seed)` yields batches of random length, one length
per batch (uniform in [min_length, max_length]).
"""
import numpy as np
import torch

WIDTH = 8


def copy_batch(batch_size, length, width=WIDTH, seed=None, rng=None):
    """One batch of copy sequences of the same length: x (B, 2T+1, width+1), y (B, T, width).

    Pass `seed` (an int) for a repeatable batch, or `rng` (a NumPy Generator) to draw from a stream.
    """
    if length < 1 or batch_size < 1:
        raise ValueError(f"copy_batch needs length >= 1 and batch_size >= 1, got {length}, {batch_size}")
    rng = rng if rng is not None else np.random.default_rng(seed)
    bits = rng.integers(0, 2, size=(batch_size, length, width)).astype(np.float32)
    x = np.zeros((batch_size, 2 * length + 1, width + 1), dtype=np.float32)
    x[:, :length, :width] = bits
    x[:, length, width] = 1.0                      # the delimiter
    return torch.from_numpy(x), torch.from_numpy(bits)


def output_steps(logits, length):
    """The T steps of the model's output (B, 2T+1, width) that should hold the copy."""
    return logits[:, length + 1:]


class CopyTask:
    """An endless stream of copy batches, each of a length drawn uniformly from [min_length, max_length]."""

    def __init__(self, min_length=1, max_length=20, batch_size=16, width=WIDTH, seed=0):
        if not 1 <= min_length <= max_length:
            raise ValueError(f"need 1 <= min_length <= max_length, got {min_length}, {max_length}")
        self.min_length, self.max_length = min_length, max_length
        self.batch_size, self.width = batch_size, width
        self.rng = np.random.default_rng(seed)

    def __iter__(self):
        return self

    def __next__(self):
        """(x, y, length)."""
        length = int(self.rng.integers(self.min_length, self.max_length + 1))
        x, y = copy_batch(self.batch_size, length, self.width, rng=self.rng)
        return x, y, length
