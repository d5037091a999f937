"""Lesson 10's corpus translation and its score: German sentences in, English text and sacreBLEU out.

    translate_sentences(model, tok, ["Ein Hund rennt."], beam_size=5)    # text in, text out
    translate_ids(model, src_ids, beam_size=5)           # id lists in, n_best id lists out per sentence
    result, hyps = bleu_on(model, tok, [(german, english), ...])         # corpus BLEU of the translations
    result = corpus_bleu(hypotheses, references)    # lists of strings, one reference each
    result.score, result.signature                  # 38.1, 'nrefs:1|case:mixed|eff:no|tok:13a|...'

Sentences are decoded in batches of similar length with the course's one greedy search and one beam
search (course_utils.decoding), optionally under autocast (course_utils.precision).

sacreBLEU tokenises both sides itself (the '13a' tokeniser, the WMT standard), so the inputs must
be plain text as a reader would see it: no subword pieces, no lower-casing. The signature names
every setting, which is what makes two BLEU scores comparable.
"""
from dataclasses import dataclass

import sacrebleu
import torch
from tqdm.auto import tqdm

from ..data.batch import BOS_ID, EOS_ID, PAD_ID, pad
from ..decoding import beam_search, greedy_decode, strip_after_eos
from ..precision import autocast


@torch.no_grad()
def translate_ids(model, src_ids, device=None, beam_size=1, length_penalty=0.6, n_best=1,
                  batch_sentences=128, amp_dtype=None, show_progress=False, use_cache=True,
                  pad_id=PAD_ID, bos_id=BOS_ID, eos_id=EOS_ID):
    """Decode lists of source ids; returns, per sentence, a list of n_best output id lists
    (greedy when beam_size == 1 and n_best == 1). Sentences are batched by length."""
    device = device or next(model.parameters()).device
    order = sorted(range(len(src_ids)), key=lambda i: len(src_ids[i]))
    out = [None] * len(src_ids)
    chunks = [order[i:i + batch_sentences] for i in range(0, len(order), batch_sentences)]
    for chunk in tqdm(chunks, desc="decoding", disable=not show_progress, leave=False):
        src = pad([src_ids[i] for i in chunk], pad_id).to(device)
        with autocast(device, amp_dtype):
            if beam_size == 1 and n_best == 1:
                ys = greedy_decode(model, src, bos_id, eos_id, pad_id, use_cache=use_cache)
                results = [[strip_after_eos(row, eos_id, pad_id)] for row in ys.tolist()]
            else:
                hyps = beam_search(model, src, bos_id, eos_id, pad_id, beam_size=beam_size,
                                   length_penalty=length_penalty, n_best=n_best, use_cache=use_cache)
                results = [[h.tokens for h in sentence] for sentence in hyps]
        for i, result in zip(chunk, results):
            out[i] = result
    return out


def translate_sentences(model, tok, sentences, device=None, beam_size=1, length_penalty=0.6,
                        n_best=1, batch_sentences=128, amp_dtype=None, show_progress=False, use_cache=True):
    """German sentences -> English strings (n_best > 1: lists of strings); `tok` a SubwordTokenizer."""
    single = isinstance(sentences, str)
    sentences = [sentences] if single else list(sentences)
    ids = translate_ids(model, tok.encode_batch(sentences), device, beam_size, length_penalty, n_best,
                        batch_sentences, amp_dtype, show_progress, use_cache,
                        pad_id=tok.pad_id, bos_id=tok.bos_id, eos_id=tok.eos_id)
    texts = [[tok.decode(h) for h in hyps] for hyps in ids]
    texts = [t[0] for t in texts] if n_best == 1 else texts
    return texts[0] if single else texts


def bleu_on(model, tok, text_pairs, device=None, beam_size=1, length_penalty=0.6, batch_sentences=128,
            amp_dtype=None, show_progress=False):
    """sacreBLEU of the model's translations of [(german, english)]; returns (BleuResult, hypotheses)."""
    hyps = translate_sentences(model, tok, [de for de, _ in text_pairs], device, beam_size,
                               length_penalty, 1, batch_sentences, amp_dtype, show_progress)
    return corpus_bleu(hyps, [en for _, en in text_pairs]), hyps


@dataclass
class BleuResult:
    score: float
    signature: str
    precisions: list
    brevity_penalty: float
    sys_len: int
    ref_len: int

    def __str__(self):
        return f"BLEU = {self.score:.2f} ({self.signature})"


def corpus_bleu(hypotheses, references, lowercase=False, tokenize="13a"):
    """sacreBLEU corpus BLEU of `hypotheses` against one reference each (cased by default)."""
    hypotheses, references = list(hypotheses), list(references)
    if len(hypotheses) != len(references):
        raise ValueError(f"got {len(hypotheses)} hypotheses but {len(references)} references: "
                         "they must be aligned one to one")
    if not all(isinstance(h, str) for h in hypotheses + references):
        raise TypeError("hypotheses and references must be strings (decode the token ids first)")
    bleu = sacrebleu.metrics.BLEU(lowercase=lowercase, tokenize=tokenize)
    result = bleu.corpus_score(hypotheses, [references])
    return BleuResult(score=float(result.score), signature=str(bleu.get_signature()),
                      precisions=[float(p) for p in result.precisions], brevity_penalty=float(result.bp),
                      sys_len=int(result.sys_len), ref_len=int(result.ref_len))


def sentence_bleu(hypothesis, reference):
    """sacreBLEU sentence BLEU (smoothed); for examples only, BLEU is a corpus measure."""
    return float(sacrebleu.sentence_bleu(hypothesis, [reference]).score)
