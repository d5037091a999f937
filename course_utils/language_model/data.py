"""Lesson 12's data: Multi30k's English captions as one stream of subword ids, and windows of it.

    tok, train_stream, val_stream = prepare(cfg)        # an English-only BPE and the two streams
    stream = caption_stream(tok, captions)              # 1-D ids: <bos> caption <eos> <bos> caption <eos> ...
    val = eval_windows(val_stream, context)             # (N, context) non-overlapping windows
    batch = random_windows(stream, context, 32, gen)    # (32, context) windows at random offsets (training)
"""
import torch

from ..data.multi30k import load_multi30k
from ..tokenization import SubwordTokenizer, train_bpe

__all__ = ["caption_stream", "eval_windows", "random_windows", "window_starts", "prepare", "captions"]


def caption_stream(tok, captions, bos_id=1, eos_id=2):
    """One long 1-D tensor of ids: every caption framed as <bos> ... <eos>, one after the other."""
    ids = [i for e in tok.encode_batch(list(captions)) for i in [bos_id] + e + [eos_id]]
    return torch.tensor(ids, dtype=torch.long)


def eval_windows(stream, context):
    """(N, context) consecutive, non-overlapping windows of `stream` (the incomplete end is dropped)."""
    n = (stream.numel() // context) * context
    if n == 0:
        raise ValueError(f"a stream of {stream.numel()} tokens holds no window of {context}")
    return stream[:n].view(-1, context)


def window_starts(stream_length, context, batch_size, generator):
    """(batch_size,) random offsets of windows of `context` tokens in a stream of `stream_length` (one draw)."""
    return torch.randint(0, stream_length - context + 1, (batch_size,), generator=generator)


def random_windows(stream, context, batch_size, generator):
    """(batch_size, context) windows of `stream` starting at random offsets (nanoGPT's batches)."""
    starts = window_starts(stream.numel(), context, batch_size, generator)
    return torch.stack([stream[s:s + context] for s in starts.tolist()])


def captions(cfg):
    """The English side of Multi30k: (training captions, cfg.captions of them or all; validation captions)."""
    return ([en for _, en in load_multi30k("train", max_pairs=cfg.captions)],
            [en for _, en in load_multi30k("val")])


def prepare(cfg, tokenizer=None):
    """The data of `cfg`: an English-only BPE trained on the training captions (or `tokenizer`, the JSON of a
    saved one), and the training and validation captions as streams of ids. Returns (tok, train, val)."""
    train_text, val_text = captions(cfg)
    tok = SubwordTokenizer.from_str(tokenizer) if tokenizer else train_bpe(train_text, vocab_size=cfg.vocab_size)
    return tok, caption_stream(tok, train_text), caption_stream(tok, val_text)
