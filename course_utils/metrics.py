"""Corpus BLEU with sacreBLEU: detokenised, cased text in, the score and its signature out.

    result = corpus_bleu(hypotheses, references)    # lists of strings, one reference each
    result.score, result.signature                  # 38.1, 'nrefs:1|case:mixed|eff:no|tok:13a|...'

sacreBLEU tokenises both sides itself (the '13a' tokeniser, the WMT standard), so the inputs must
be plain text as a reader would see it: no subword pieces, no lower-casing. The signature names
every setting, which is what makes two BLEU scores comparable.
"""
from dataclasses import dataclass

import sacrebleu


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
