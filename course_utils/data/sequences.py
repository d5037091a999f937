"""A toy task whose difficulty grows with length: reverse a random token sequence (or copy it).

    source  g c a j e          target  e j a c g

Token ids: PAD_ID = 0, BOS_ID = 1 (start of the decoder input), EOS_ID = 2 (end of the target);
the content tokens are 3, 4, ... and print as letters a, b, c, ...

    task = make_reverse_task(min_len=4, max_len=24, num_tokens=10, seed=0)
    loader = BatchLoader(task.train, batch_size=64)      # re-iterable, reshuffled every epoch
    batch = next(iter(loader))    # Batch(src, lengths, tgt_in, tgt_out), all LongTensors

Batches are the course's one batch type (`course_utils.data.batch`, the same as lesson 10's): every
sequence padded to the longest with PAD_ID, the decoder input the target shifted right behind BOS
(teacher forcing), the decoder output the target followed by EOS:

    tgt_in   <bos> e j a c g          tgt_out  e j a c g <eos>
"""
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from .batch import BOS_ID, EOS_ID, PAD_ID, Batch, collate, pad  # noqa: F401 (the course's one batching)

SPECIALS = ["<pad>", "<bos>", "<eos>"]


class Vocab:
    """Ids <-> strings: the specials, then `num_tokens` letters."""

    def __init__(self, num_tokens):
        if not 1 <= num_tokens <= 26:
            raise ValueError(f"num_tokens must be between 1 and 26 (letters a-z), got {num_tokens}")
        self.itos = SPECIALS + [chr(ord("a") + i) for i in range(num_tokens)]
        self.stoi = {s: i for i, s in enumerate(self.itos)}

    def __len__(self):
        return len(self.itos)

    def decode(self, ids, stop_at_eos=True):
        """Token ids -> list of strings (cut at the first EOS, padding dropped)."""
        out = []
        for i in np.asarray(ids).tolist():
            if stop_at_eos and i == EOS_ID:
                break
            if i != PAD_ID:
                out.append(self.itos[i])
        return out


@dataclass
class SequenceTask:
    """Train and test pairs (source ids, target ids) as NumPy arrays, and the vocabulary."""
    train: list
    test: list
    vocab: Vocab
    min_len: int
    max_len: int
    name: str


def make_reverse_task(num_train=20000, test_per_length=100, min_len=4, max_len=24, num_tokens=10,
                      seed=0, task="reverse"):
    """Random sequences (uniform lengths in [min_len, max_len]) and their reversal (or copy).

    The test set holds `test_per_length` sequences of every length; no test source occurs in the
    training set. The same seed always gives the same data.
    """
    if task not in ("reverse", "copy"):
        raise ValueError(f"task must be 'reverse' or 'copy', got {task!r}")
    if not 1 <= min_len <= max_len:
        raise ValueError(f"need 1 <= min_len <= max_len, got min_len={min_len}, max_len={max_len}")
    vocab = Vocab(num_tokens)
    rng = np.random.default_rng(seed)
    first = len(SPECIALS)

    def sample(length):
        return rng.integers(first, first + num_tokens, size=length)

    target = (lambda x: x[::-1].copy()) if task == "reverse" else (lambda x: x.copy())
    test, seen = [], set()
    for length in range(min_len, max_len + 1):
        for _ in range(test_per_length):
            src = sample(length)
            test.append((src, target(src)))
            seen.add(src.tobytes())
    train = []
    while len(train) < num_train:
        src = sample(int(rng.integers(min_len, max_len + 1)))
        if src.tobytes() not in seen:
            train.append((src, target(src)))
    return SequenceTask(train, test, vocab, min_len, max_len, task)


class BatchLoader:
    """Re-iterable batches of `pairs` on `device`: every pass is one epoch, reshuffled when `shuffle`."""

    def __init__(self, pairs, batch_size=64, shuffle=True, seed=0, device="cpu"):
        if len(pairs) == 0:
            raise ValueError("BatchLoader got no pairs")
        self.pairs, self.batch_size, self.shuffle, self.device = pairs, batch_size, shuffle, device
        self.rng = np.random.default_rng(seed)

    def __len__(self):
        return -(-len(self.pairs) // self.batch_size)

    def __iter__(self):
        order = self.rng.permutation(len(self.pairs)) if self.shuffle else np.arange(len(self.pairs))
        for start in range(0, len(order), self.batch_size):
            yield collate([self.pairs[i] for i in order[start:start + self.batch_size]]).to(self.device)


def by_length(pairs):
    """{length: [pairs of that source length]}, lengths in increasing order."""
    groups = defaultdict(list)
    for src, tgt in pairs:
        groups[len(src)].append((src, tgt))
    return dict(sorted(groups.items()))
