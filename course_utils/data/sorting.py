"""Sorting as a pointer task (lesson 06): sequences of numbers and the positions that sort them.

An example is a row `x` of floats drawn uniformly from [0, 1) and its target `y = argsort(x)`:
`y[i]` is the *position in the input* of the i-th smallest number, so `x[y]` is sorted.

    data = SortingData(seed=0)                      # training lengths 5..10
    for x, y in data.train_batches(num_steps=100, batch_size=128):
        ...                                         # x: (B, T) float32, y: (B, T) int64
    x_test, y_test = data.test_set(length=10, size=1000)   # fixed, disjoint seed stream

Every batch has one length (drawn from the training lengths), so no padding is needed.
Training and test draws come from different seed streams; `test_set(length)` works for any
length, which is how the lesson measures generalisation to longer sequences (11..20).
"""
import numpy as np
import torch

TRAIN_LENGTHS = tuple(range(5, 11))       # lengths 5..10 for training
LONGER_LENGTHS = tuple(range(11, 21))     # lengths 11..20 for the generalisation test


def sort_targets(x):
    """Pointer targets: positions that sort `x` in increasing order, along the last axis."""
    if isinstance(x, torch.Tensor):
        return torch.argsort(x, dim=-1, stable=True)
    return np.argsort(np.asarray(x), axis=-1, kind="stable")


def make_batch(batch_size, length, generator):
    """`batch_size` sequences of `length` floats in [0, 1) and their targets, as torch tensors.

    generator: a NumPy Generator (np.random.default_rng(seed)); the batch is a function of it.
    """
    if not isinstance(generator, np.random.Generator):
        raise TypeError(f"generator must be a numpy.random.Generator, got {type(generator).__name__}")
    if int(length) < 1 or int(batch_size) < 1:
        raise ValueError(f"batch_size and length must be >= 1, got {batch_size} and {length}")
    x = generator.random((int(batch_size), int(length))).astype(np.float32)   # (B, T)
    y = np.argsort(x, axis=1, kind="stable")                                   # (B, T)
    return torch.from_numpy(x), torch.from_numpy(y).long()


class SortingData:
    """Seeded source of sorting examples: random-length training batches, fixed test sets."""

    def __init__(self, seed=0, train_lengths=TRAIN_LENGTHS):
        self.seed = int(seed)
        self.train_lengths = tuple(int(t) for t in train_lengths)
        if not self.train_lengths or min(self.train_lengths) < 1:
            raise ValueError(f"train_lengths must be positive lengths, got {train_lengths}")

    def train_batches(self, num_steps, batch_size=128):
        """Yield `num_steps` batches (x, y); each batch has a length drawn from train_lengths."""
        generator = np.random.default_rng([self.seed, 0])   # stream 0: training
        for _ in range(int(num_steps)):
            length = self.train_lengths[generator.integers(len(self.train_lengths))]
            yield make_batch(batch_size, length, generator)

    def test_set(self, length, size=1000):
        """A fixed test set of `size` sequences of `length` (same call, same data)."""
        generator = np.random.default_rng([self.seed, 1, int(length)])   # stream 1: testing
        return make_batch(size, length, generator)
