"""Multi-query associative recall (MQAR; Arora et al. 2023, "Zoology: Measuring and Improving Recall in Efficient
Language Models"): the task that tells a fixed-size state from attention (lesson 15).

    tokens, targets = recall_batch(32, num_pairs=16, length=128, num_keys=64, generator=g)

A sequence lists N key/value pairs, then asks for every key again, in another order, each time followed by its
value:

    k_1 v_1 k_2 v_2 ... k_N v_N   q_1 a_1 q_2 a_2 ... q_N a_N   <pad> ...

with q_1 .. q_N the N keys shuffled and a_i the value stored under q_i. A model reads it left to right and must
predict a_i at the position of q_i: `targets` holds a_i there and IGNORE (-100) everywhere else, so the loss and
the accuracy count the answers only. Ids: 0 = <pad>, keys 1 .. num_keys, values num_keys + 1 .. 2 num_keys; the N
keys of a sequence are distinct, their values drawn at random (two keys may share a value).
"""
import torch

__all__ = ["recall_batch", "vocab_size", "IGNORE", "PAD"]
IGNORE, PAD = -100, 0


def vocab_size(num_keys):
    """<pad>, the keys and the values."""
    return 1 + 2 * num_keys


def recall_batch(batch_size, num_pairs, length, num_keys, generator=None):
    """(tokens (B, length), targets (B, length)) of `batch_size` sequences; num_pairs: one N for all, or a (B,)
    tensor of them (4 N <= length and N <= num_keys)."""
    pairs = torch.as_tensor(num_pairs).expand(batch_size) if torch.as_tensor(num_pairs).dim() == 0 \
        else torch.as_tensor(num_pairs)
    if pairs.shape != (batch_size,) or int(pairs.max()) * 4 > length or int(pairs.max()) > num_keys or \
            int(pairs.min()) < 1:
        raise ValueError(f"num_pairs must be between 1 and min(num_keys={num_keys}, length/4={length // 4}) (one "
                         f"number, or one per sequence), got {pairs.tolist()}")
    tokens = torch.full((batch_size, length), PAD, dtype=torch.long)
    targets = torch.full((batch_size, length), IGNORE, dtype=torch.long)
    for b, n in enumerate(pairs.tolist()):
        keys = torch.randperm(num_keys, generator=generator)[:n] + 1                       # (n,) distinct
        values = torch.randint(num_keys + 1, 2 * num_keys + 1, (n,), generator=generator)   # (n,)
        order = torch.randperm(n, generator=generator)
        tokens[b, 0:2 * n:2], tokens[b, 1:2 * n:2] = keys, values
        tokens[b, 2 * n:4 * n:2], tokens[b, 2 * n + 1:4 * n:2] = keys[order], values[order]
        targets[b, 2 * n:4 * n:2] = values[order]          # at each query, the value that follows it
    return tokens, targets
