"""Subword vocabulary for translation: byte-pair encoding (BPE) trained with `tokenizers`.

    tok = train_bpe(texts, vocab_size=8000)     # a few seconds on Multi30k
    ids = tok.encode("Ein Hund rennt.")         # [ids...] without bos/eos
    tok.decode(ids)                             # 'Ein Hund rennt.' (detokenised, cased)
    tok.save(path); tok = SubwordTokenizer.load(path)

Words are split at spaces (kept as the marker '▁' at the start of a word, as in SentencePiece)
and at punctuation, so `decode(encode(text))` gives the text back with single spaces. Special
tokens have fixed ids: PAD_ID = 0, BOS_ID = 1, EOS_ID = 2, UNK_ID = 3.
"""
import json

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

from .data.batch import BOS_ID, EOS_ID, PAD_ID
from .files import atomic_write_text

PAD, BOS, EOS, UNK = "<pad>", "<bos>", "<eos>", "<unk>"
SPECIALS = (PAD, BOS, EOS, UNK)
UNK_ID = 3   # after the course's one set of special ids (course_utils.data.batch)


class SubwordTokenizer:
    """A thin wrapper around a `tokenizers.Tokenizer` with the course's special ids."""

    pad_id, bos_id, eos_id, unk_id = PAD_ID, BOS_ID, EOS_ID, UNK_ID

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        for token, expected in zip(SPECIALS, range(4)):
            if tokenizer.token_to_id(token) != expected:
                raise ValueError(f"the tokenizer must map {token} to id {expected}, "
                                 f"got {tokenizer.token_to_id(token)}")

    @property
    def vocab_size(self):
        return self.tokenizer.get_vocab_size()

    def __len__(self):
        return self.vocab_size

    def encode(self, text, bos=False, eos=False):
        """Token ids of one sentence, optionally framed by <bos> ... <eos>."""
        ids = self.tokenizer.encode(text).ids
        return ([BOS_ID] if bos else []) + ids + ([EOS_ID] if eos else [])

    def encode_batch(self, texts, bos=False, eos=False):
        return [([BOS_ID] if bos else []) + e.ids + ([EOS_ID] if eos else [])
                for e in self.tokenizer.encode_batch(list(texts))]

    def decode(self, ids):
        """Text of a list of ids; stops at the first <eos>, skips <pad>/<bos>."""
        ids = [int(i) for i in ids]
        if EOS_ID in ids:
            ids = ids[: ids.index(EOS_ID)]
        return self.tokenizer.decode([i for i in ids if i not in (PAD_ID, BOS_ID)],
                                     skip_special_tokens=False).strip()

    def decode_batch(self, batch):
        return [self.decode(ids) for ids in batch]

    def tokens(self, text):
        """The subword pieces of `text` (for display)."""
        return self.tokenizer.encode(text).tokens

    def id_to_token(self, i):
        return self.tokenizer.id_to_token(int(i))

    def save(self, path):
        """Write the tokenizer as JSON, atomically."""
        atomic_write_text(self.tokenizer.to_str(), path)

    @classmethod
    def load(cls, path):
        return cls(Tokenizer.from_file(str(path)))

    @classmethod
    def from_str(cls, text):
        return cls(Tokenizer.from_str(text))

    def to_str(self):
        return self.tokenizer.to_str()


def train_bpe(texts, vocab_size=8000, min_frequency=2):
    """Train a BPE vocabulary of about `vocab_size` pieces on an iterable of sentences.

    For a joint German-English vocabulary pass the sentences of both languages.
    """
    tokenizer = Tokenizer(models.BPE(unk_token=UNK))
    tokenizer.normalizer = normalizers.NFC()
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always"),
        pre_tokenizers.Punctuation(behavior="isolated")])
    tokenizer.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=min_frequency,
                                  special_tokens=list(SPECIALS), show_progress=False)
    tokenizer.train_from_iterator(texts, trainer=trainer)
    return SubwordTokenizer(tokenizer)


def vocabulary_summary(tok, texts):
    """Average pieces per sentence and the share of <unk> pieces (for the lesson's table)."""
    encoded = tok.encode_batch(texts)
    pieces = sum(len(e) for e in encoded)
    unk = sum(e.count(UNK_ID) for e in encoded)
    return {"vocab_size": tok.vocab_size, "pieces_per_sentence": pieces / max(len(encoded), 1),
            "unk_rate": unk / max(pieces, 1)}


__all__ = ["SubwordTokenizer", "train_bpe", "vocabulary_summary", "PAD_ID", "BOS_ID", "EOS_ID",
           "UNK_ID", "SPECIALS", "json"]
