"""Lesson 15's caption data: lesson 12's (Multi30k's English captions, an English-only BPE, one stream of ids),
prepared once and shared by every caption model of a run.

    tok, train_stream, val_stream = prepare(cfg)
    val = windows(val_stream, 64)                         # (N, 64) consecutive windows

(A task never imports another task: these few lines follow course_utils/language_model/data.py, which lesson 12
explains; the same captions and the same BPE give the same ids.)
"""
import torch

from ..data.multi30k import load_multi30k
from ..tokenization import BOS_ID, EOS_ID, train_bpe

__all__ = ["prepare", "windows"]


def _stream(tok, captions):
    """<bos> caption <eos> <bos> caption <eos> ... as one 1-D tensor of ids."""
    return torch.tensor([i for e in tok.encode_batch(list(captions)) for i in [BOS_ID] + e + [EOS_ID]])


def prepare(cfg):
    """(tokenizer, training stream, validation stream) for cfg.captions training captions (None: all)."""
    train = [en for _, en in load_multi30k("train", max_pairs=cfg.captions)]
    val = [en for _, en in load_multi30k("val")]
    tok = train_bpe(train, vocab_size=cfg.vocab_size)
    return tok, _stream(tok, train), _stream(tok, val)


def windows(stream, context):
    """(N, context) consecutive, non-overlapping windows of `stream` (the incomplete end dropped)."""
    n = (stream.numel() // context) * context
    if n == 0:
        raise ValueError(f"a stream of {stream.numel()} tokens holds no window of {context}")
    return stream[:n].view(-1, context)
