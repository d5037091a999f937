"""Multi30k as the lesson-10 Transformer eats it: subword ids, bucketed micro-batches, the course's Batch.

    data = prepare_data(cfg, out_dir)      # tokenizer (trained once, saved in out_dir) + encoded splits
    data.train[i]                          # (src_ids, tgt_ids): the target WITHOUT <bos>/<eos>
    sampler = batch_sampler(data.train, max_tokens=2048, epoch=0, seed=0)
    batch = collate([data.train[i] for i in next(iter(sampler))])     # course_utils.data.batch.Batch
    batch.src (B, S), batch.tgt_in (B, T) = <bos> + target, batch.tgt_out (B, T) = target + <eos>
"""
import dataclasses
from pathlib import Path

from ..data.batch import collate  # noqa: F401 (the course's one collate, used with these pairs)
from ..data.multi30k import load_multi30k
from ..tokenization import SubwordTokenizer, train_bpe
from .batching import BucketBatchSampler


class TokenizerFileError(RuntimeError):
    """A run folder's tokenizer.json cannot be read."""


@dataclasses.dataclass
class TranslationData:
    tokenizer: SubwordTokenizer
    train: list            # [(src_ids, tgt_ids)], targets without <bos>/<eos>
    val: list
    test: list
    val_text: list         # [(german, english)] raw text, for BLEU
    test_text: list


def encode_pairs(tok, pairs, max_tokens=None):
    """[(german, english)] -> [(src_ids, tgt_ids)]; with `max_tokens`, only the pairs whose source and
    decoder input (<bos> + target) both fit in it."""
    src = tok.encode_batch([de for de, _ in pairs])
    tgt = tok.encode_batch([en for _, en in pairs])
    out = list(zip(src, tgt))
    if max_tokens is not None:
        out = [(s, t) for s, t in out if len(s) <= max_tokens and len(t) + 1 <= max_tokens]
    return out


def load_tokenizer(path):
    """The SubwordTokenizer saved at `path`, or a TokenizerFileError that names the file and what to do."""
    try:
        return SubwordTokenizer.load(path)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as error:  # noqa: BLE001 - a damaged file makes tokenizers raise a pyo3 panic
        raise TokenizerFileError(
            f"{path} cannot be read as a tokenizer ({str(error).splitlines()[0][:160]}): the file is damaged. "
            f"If this folder holds a run, its checkpoint keeps a copy of the tokenizer: resume (--resume) "
            f"rewrites the file from it. Otherwise delete {path} (a new tokenizer is trained), or give "
            f"another --out.") from None


def tokenizer_for(cfg, out_dir=None, saved=None, log=print, train_text=None):
    """The run's tokenizer: `saved` (a JSON string kept in a checkpoint), else out_dir/tokenizer.json,
    else one trained on the training sentences (and saved there)."""
    path = Path(out_dir) / "tokenizer.json" if out_dir is not None else None
    if saved is not None:
        tok = SubwordTokenizer.from_str(saved)
        if path is not None and (not path.exists() or _text(path) != saved):
            if path.exists():
                log(f"warning: {path} differs from the checkpoint's tokenizer (damaged?): "
                    "rewritten from the checkpoint")
            tok.save(path)
        return tok
    if path is not None and path.exists():
        return load_tokenizer(path)
    if train_text is None:
        train_text = load_multi30k("train", max_pairs=cfg.max_train_pairs)
    tok = train_bpe((s for pair in train_text for s in pair), vocab_size=cfg.vocab_size)
    if path is not None:
        tok.save(path)
    return tok


def _text(path):
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def prepare_data(cfg, out_dir=None, tokenizer=None, log=print):
    """Load Multi30k, train (or load from out_dir) the joint BPE vocabulary, encode every split.

    Uses cfg.max_train_pairs, cfg.max_eval_pairs, cfg.vocab_size, cfg.max_tokens_per_sentence;
    `tokenizer`: the JSON of a tokenizer to use (a resumed run's, from its checkpoint).
    """
    train_text = load_multi30k("train", max_pairs=cfg.max_train_pairs)
    val_text = load_multi30k("val", max_pairs=cfg.max_eval_pairs)
    test_text = load_multi30k("test_2016_flickr", max_pairs=cfg.max_eval_pairs)
    tok = tokenizer_for(cfg, out_dir, tokenizer, log, train_text)
    return TranslationData(tok, encode_pairs(tok, train_text, cfg.max_tokens_per_sentence),
                           encode_pairs(tok, val_text), encode_pairs(tok, test_text), val_text, test_text)


def example_lengths(pairs):
    """Padded cost of each pair: the longer of source and decoder input (<bos> + target)."""
    return [max(len(s), len(t) + 1) for s, t in pairs]


def batch_sampler(pairs, max_tokens, epoch, seed=0, shuffle=True, world_size=1, rank=0):
    """Length-bucketed micro-batches of `epoch`, at most `max_tokens` padded tokens each; with
    several processes, every process takes every world_size-th batch."""
    sampler = BucketBatchSampler(example_lengths(pairs), max_tokens=max_tokens, shuffle=shuffle, seed=seed,
                                 num_replicas=world_size, rank=rank)
    sampler.set_epoch(epoch)
    return sampler


__all__ = ["TranslationData", "TokenizerFileError", "encode_pairs", "load_tokenizer", "tokenizer_for",
           "prepare_data", "example_lengths", "batch_sampler", "collate"]
