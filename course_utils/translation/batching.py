"""Batches for lesson 10: sentences of similar length bucketed together, and the translator's micro-batch.

    sampler = BucketBatchSampler(lengths, max_tokens=4096, shuffle=True, seed=0)
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        for indices in sampler:          # a list of example indices, similar lengths
            batch = collate([pairs[i] for i in indices])     # course_utils.data.batch

How: shuffle the examples, cut them into large pools (`pool_batches` batches' worth), sort each
pool by length, cut it into batches of at most `max_tokens` tokens (padded size: examples x the
longest in the batch), then shuffle the batches. The order changes every epoch (`set_epoch`) yet is
the same for the same (seed, epoch), which is what a resumed or a multi-process run needs:
with `num_replicas`/`rank` each process takes every `num_replicas`-th batch.

In a run (translation/task.py) every bucketed batch of `batch_tokens` padded tokens is ONE optimizer step
(a global batch), split into processes x accumulation steps by the pipeline (pipeline/batches.py);
`micro_batch_tokens(cfg, world_size)` is the nominal size of one part, checked against the longest sentence.
"""
import math

import numpy as np

from ..pipeline.batches import micro_batch_size
from ..pipeline.task import ConfigError


class BucketBatchSampler:
    """Yield lists of indices whose padded size (count x longest) stays under `max_tokens`."""

    def __init__(self, lengths, max_tokens=4096, max_sentences=None, shuffle=True, seed=0,
                 pool_batches=100, num_replicas=1, rank=0):
        self.lengths = np.asarray(lengths, dtype=np.int64)
        if self.lengths.ndim != 1:
            raise ValueError(f"lengths must be a 1-D list of sequence lengths, got shape {self.lengths.shape}")
        if len(self.lengths) and max_tokens < self.lengths.max():
            raise ValueError(f"max_tokens={max_tokens} is smaller than the longest example "
                             f"({self.lengths.max()} tokens): raise max_tokens or drop long examples")
        if not 0 <= rank < num_replicas:
            raise ValueError(f"rank must be in [0, num_replicas), got rank={rank}, num_replicas={num_replicas}")
        self.max_tokens, self.max_sentences = int(max_tokens), max_sentences
        self.shuffle, self.seed, self.epoch = shuffle, seed, 0
        self.pool_batches, self.num_replicas, self.rank = pool_batches, num_replicas, rank

    def set_epoch(self, epoch):
        self.epoch = int(epoch)

    def batches(self):
        """All batches of this epoch (every replica's), in the order they are served."""
        n = len(self.lengths)
        gen = np.random.default_rng([self.seed, self.epoch])
        order = gen.permutation(n) if self.shuffle else np.arange(n)
        pool = max(1, self.pool_batches * self.max_tokens // max(int(self.lengths.mean()) if n else 1, 1))
        batches = []
        for start in range(0, n, pool):
            chunk = order[start:start + pool]
            chunk = chunk[np.argsort(self.lengths[chunk], kind="stable")]
            batch, longest = [], 0
            for i in chunk:
                longest_new = max(longest, self.lengths[i])
                full = (len(batch) + 1) * longest_new > self.max_tokens or (
                    self.max_sentences is not None and len(batch) >= self.max_sentences)
                if batch and full:
                    batches.append(batch)
                    batch, longest_new = [], self.lengths[i]
                batch.append(int(i))
                longest = longest_new
            if batch:
                batches.append(batch)
        if self.shuffle:
            batches = [batches[i] for i in gen.permutation(len(batches))]
        return batches

    def __iter__(self):
        batches = self.batches()
        if self.num_replicas > 1:  # every replica gets the same number of batches
            per = math.ceil(len(batches) / self.num_replicas)
            batches = (batches * 2)[: per * self.num_replicas]
            batches = batches[self.rank::self.num_replicas]
        return iter(batches)

    def __len__(self):
        return math.ceil(len(self.batches()) / self.num_replicas)


def padding_fraction(batches, lengths):
    """Share of padding tokens in `batches` (lists of indices) of sequences with `lengths`."""
    lengths = np.asarray(lengths)
    real = sum(int(lengths[b].sum()) for b in batches)
    padded = sum(len(b) * int(lengths[b].max()) for b in batches)
    return 1.0 - real / max(padded, 1)


def random_batches(n, batch_size, seed=0):
    """Plain shuffled batches (no bucketing), to compare padding against."""
    order = np.random.default_rng(seed).permutation(n)
    return [order[i:i + batch_size].tolist() for i in range(0, n, batch_size)]


def micro_batch_tokens(cfg, world_size):
    """Padded tokens per micro-batch and process: batch_tokens / (world_size x accum_steps), exactly."""
    micro = micro_batch_size(cfg.batch_tokens, world_size, cfg.accum_steps)
    if micro < cfg.max_tokens_per_sentence + 1:
        raise ConfigError(
            f"a micro-batch of {micro} tokens (batch_tokens {cfg.batch_tokens} / ({world_size} processes x "
            f"{cfg.accum_steps} accumulation steps)) cannot hold the longest sentence "
            f"({cfg.max_tokens_per_sentence + 1} tokens): use fewer processes or accumulation steps")
    return micro
