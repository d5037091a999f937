"""Multi30k as the lesson-10 Transformer eats it: subword ids, padded batches, bucketed steps.

    data = prepare_data(cfg, out_dir)      # tokenizer (trained once, saved in out_dir) + encoded splits
    data.train[i]                          # (src_ids, tgt_ids), tgt framed by <bos> ... <eos>
    sampler = batch_sampler(data.train, max_tokens=2048, epoch=0, seed=0)
    batch = collate([data.train[i] for i in next(iter(sampler))])
    batch["src"] (B, S), batch["tgt_in"] (B, T), batch["tgt_out"] (B, T), batch["tgt_tokens"]
"""
import dataclasses
import tempfile
from pathlib import Path

import torch

from ..tokenization import PAD_ID, SubwordTokenizer, train_bpe
from .bucketing import BucketBatchSampler, pad_sequences
from .multi30k import load_multi30k


@dataclasses.dataclass
class TranslationData:
    tokenizer: SubwordTokenizer
    train: list            # [(src_ids, tgt_ids)], tgt framed by <bos> ... <eos>
    val: list
    test: list
    val_text: list         # [(german, english)] raw text, for BLEU
    test_text: list


def encode_pairs(tok, pairs, max_tokens=None):
    """[(german, english)] -> [(src_ids, [<bos>] + tgt_ids + [<eos>])], optionally without long pairs."""
    src = tok.encode_batch([de for de, _ in pairs])
    tgt = tok.encode_batch([en for _, en in pairs], bos=True, eos=True)
    out = list(zip(src, tgt))
    if max_tokens is not None:
        out = [(s, t) for s, t in out if len(s) <= max_tokens and len(t) <= max_tokens + 1]
    return out


def prepare_data(cfg, out_dir=None):
    """Load Multi30k, train (or load from out_dir) the joint BPE vocabulary, encode every split.

    Uses cfg.max_train_pairs, cfg.max_eval_pairs, cfg.vocab_size, cfg.max_tokens_per_sentence.
    """
    train_text = load_multi30k("train", max_pairs=cfg.max_train_pairs)
    val_text = load_multi30k("val", max_pairs=cfg.max_eval_pairs)
    test_text = load_multi30k("test_2016_flickr", max_pairs=cfg.max_eval_pairs)
    path = Path(out_dir) / "tokenizer.json" if out_dir is not None else None
    if path is not None and path.exists():
        tok = SubwordTokenizer.load(path)
    else:
        tok = train_bpe((s for pair in train_text for s in pair), vocab_size=cfg.vocab_size)
        if path is not None:
            tok.save(path)
    return TranslationData(tok, encode_pairs(tok, train_text, cfg.max_tokens_per_sentence),
                           encode_pairs(tok, val_text), encode_pairs(tok, test_text), val_text, test_text)


def prepare_data_everywhere(cfg, out_dir, dist):
    """prepare_data on rank 0 (it trains the tokenizer), then on the others with rank 0's tokenizer."""
    data = prepare_data(cfg, out_dir) if dist.is_main else None
    tokenizer = dist.broadcast(data.tokenizer.to_str() if dist.is_main else None)
    if not dist.is_main:
        with tempfile.TemporaryDirectory() as tmp:
            SubwordTokenizer.from_str(tokenizer).save(Path(tmp) / "tokenizer.json")
            data = prepare_data(cfg, tmp)
    return data


def example_lengths(pairs):
    """Padded cost of each pair: the longer of source and decoder input."""
    return [max(len(s), len(t) - 1) for s, t in pairs]


def collate(pairs, pad_id=PAD_ID):
    """[(src_ids, tgt_ids)] -> dict of src (B, S), tgt_in (B, T), tgt_out (B, T) and token counts."""
    src = pad_sequences([s for s, _ in pairs], pad_id)
    tgt = pad_sequences([t for _, t in pairs], pad_id)
    tgt_in, tgt_out = tgt[:, :-1], tgt[:, 1:]
    return {"src": src, "tgt_in": tgt_in, "tgt_out": tgt_out,
            "src_tokens": int((src != pad_id).sum()), "tgt_tokens": int((tgt_out != pad_id).sum())}


def to_device(batch, device):
    non_blocking = torch.device(device).type == "cuda"
    return {k: (v.to(device, non_blocking=non_blocking) if torch.is_tensor(v) else v)
            for k, v in batch.items()}


def batch_sampler(pairs, max_tokens, epoch, seed=0, shuffle=True, world_size=1, rank=0):
    """Length-bucketed micro-batches of `epoch`, at most `max_tokens` padded tokens each; with
    several processes, every process takes every world_size-th batch."""
    sampler = BucketBatchSampler(example_lengths(pairs), max_tokens=max_tokens, shuffle=shuffle, seed=seed,
                                 num_replicas=world_size, rank=rank)
    sampler.set_epoch(epoch)
    return sampler
