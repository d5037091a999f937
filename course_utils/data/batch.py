"""The course's ONE way to batch sequence pairs: one padding id, one pad function, one batch type.

Lessons 02-04 (the reverse task) and lesson 10 (Multi30k) batch alike:

    batch = collate([(src_ids, tgt_ids), ...])     # a Batch; tgt_ids WITHOUT <bos>/<eos>
    batch.src      (B, S)  source ids, right-padded with PAD_ID
    batch.lengths  (B,)    real source tokens per sentence
    batch.tgt_in   (B, T)  <bos> + target: the decoder's input (teacher forcing)
    batch.tgt_out  (B, T)  target + <eos>: what the decoder must predict
    batch.src_tokens, batch.tgt_tokens            # non-pad tokens (ints), for losses and speeds
    batch = batch.to(device)

    tgt_in   <bos> e j a c g          tgt_out  e j a c g <eos>

The special ids are the same in every lesson: PAD_ID = 0, BOS_ID = 1, EOS_ID = 2 (the subword
tokenizer of lesson 10 adds UNK_ID = 3).
"""
from typing import NamedTuple

import numpy as np
import torch

PAD_ID, BOS_ID, EOS_ID = 0, 1, 2


def pad(seqs, pad_id=PAD_ID):
    """List of 1-D integer sequences -> LongTensor (B, longest length), right-padded with `pad_id`."""
    if len(seqs) == 0:
        raise ValueError("pad() needs at least one sequence")
    out = np.full((len(seqs), max(len(s) for s in seqs)), pad_id, dtype=np.int64)
    for i, s in enumerate(seqs):
        out[i, :len(s)] = s
    return torch.from_numpy(out)


class Batch(NamedTuple):
    src: torch.Tensor      # (B, S) source ids, padded with PAD_ID
    lengths: torch.Tensor  # (B,) number of real source tokens
    tgt_in: torch.Tensor   # (B, T) BOS + target: the decoder's input (teacher forcing)
    tgt_out: torch.Tensor  # (B, T) target + EOS: what the decoder must predict

    @property
    def src_tokens(self):
        """Real (non-pad) source tokens of the batch."""
        return int(self.lengths.sum())

    @property
    def tgt_tokens(self):
        """Real target tokens to predict (<eos> included): what a loss per token divides by."""
        return int((self.tgt_out != PAD_ID).sum())

    def to(self, device):
        non_blocking = torch.device(device).type == "cuda"     # pinned-free copies overlap on a GPU
        return Batch(*(t.to(device, non_blocking=non_blocking) for t in self))


def collate(pairs):
    """List of (source ids, target ids) pairs -> a padded Batch (the target without <bos>/<eos>)."""
    if len(pairs) == 0:
        raise ValueError("collate() needs at least one (source, target) pair")
    srcs, tgts = zip(*pairs)
    return Batch(src=pad(srcs),
                 lengths=torch.tensor([len(s) for s in srcs], dtype=torch.long),
                 tgt_in=pad([np.concatenate([[BOS_ID], t]) for t in tgts]),
                 tgt_out=pad([np.concatenate([t, [EOS_ID]]) for t in tgts]))
