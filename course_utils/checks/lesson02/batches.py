"""What lesson 02's encoder and loss checks share: padded batches of token ids."""
import torch

from ...data.sequences import PAD_ID

VOCAB = 13


def tokens(g, lengths, extra=0, pad_id=PAD_ID):
    """Random ids padded with pad_id to the longest length (+ `extra` columns): (B, S), lengths. With PAD_ID the
    ids are 3..VOCAB-1; with another pad_id they are any id but pad_id, and the first one is 0 (a real token)."""
    S = max(lengths) + extra
    src = torch.full((len(lengths), S), pad_id, dtype=torch.long)
    ids = torch.arange(3, VOCAB) if pad_id == PAD_ID else torch.tensor([i for i in range(VOCAB) if i != pad_id])
    for i, n in enumerate(lengths):
        src[i, :n] = ids[torch.as_tensor(g.integers(0, len(ids), size=n))]
    if pad_id != PAD_ID:
        src[0, 0] = 0
    return src, torch.tensor(lengths)
