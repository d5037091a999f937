"""Decoding an encoder-decoder model: greedy search and beam search, for every model of the course.

A model is decoded one token at a time through three methods (the decoding protocol):

    state = model.start_decoding(src, pad_id)          # runs the encoder ONCE; src (B, S) ids
    logits, state = model.decode_step(y_prev, state)   # y_prev (N,) ids -> next-token logits (N, V)
    state = model.reorder_decoding_state(state, rows)  # keep / repeat rows (N',) of the batch (beams)

The RNNs of lessons 02-04 carry their hidden state; the Transformer carries its encoder memory and a
key/value cache (lesson 10). A Transformer can also be decoded WITHOUT the cache (`use_cache=False`):
then every step runs the decoder again over the whole prefix, `model.decode(prefix, memory, mask)`;
slower, simple, and the reference the cache is tested against. If the state has an `attn_weights`
attribute ((N, S), the last step's attention over the source), greedy search can return it.

    tokens = greedy_decode(model, src, bos_id, eos_id, pad_id)     # (B, L) ids, no <bos>, <pad> after <eos>
    hyps = beam_search(model, src, bos_id, eos_id, pad_id, beam_size=5, length_penalty=0.6, n_best=3)
    hyps[b][0].tokens, hyps[b][0].score                            # best hypothesis of sentence b
    translate_sentences(model, tok, ["Ein Hund rennt."], beam_size=5)   # text in, text out

Beam search keeps the `beam_size` best prefixes by total log-probability
    score(y_1..y_t) = sum_i log p(y_i | y_<i, x)
and ranks finished hypotheses by score / lp(length) with the GNMT length penalty
    lp(L) = ((5 + L) / 6) ** length_penalty      (0 = no penalty; larger favours longer output).
A finished hypothesis stays in its beam, extended by <pad> at log-probability 0, so it competes
with the open ones at its final score. <pad> and <bos> are never generated. In both searches a
sentence that is done (greedy: its <eos>; beam: every beam finished) leaves the batch
(`reorder_decoding_state` keeps the other rows), so later steps cost only the sentences still going.
"""
import contextlib
from typing import List, NamedTuple

import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from .attention import padding_mask
from .data.bucketing import pad_sequences
from .metrics import corpus_bleu


class Hypothesis(NamedTuple):
    tokens: List[int]      # generated ids, without <bos> and <eos>
    score: float           # log_prob / lp(length): what hypotheses are ranked by
    log_prob: float        # sum of log-probabilities, <eos> included
    length: int            # generated tokens, <eos> included


def default_max_len(src, pad_id, a=1.5, b=10):
    """A length limit for the output: a * (longest source) + b."""
    return int(a * int((src != pad_id).sum(1).max()) + b)


class _PrefixState:
    """Decoding without a cache: the encoder memory and the whole prefix, run again at every step."""

    def __init__(self, model, src, pad_id):
        self.mask = padding_mask(src, pad_id)                          # (B, 1, 1, S)
        self.memory = model.encode(src, self.mask)                     # (B, S, d_model), once
        self.prefix = None                                             # (N, t) ids so far

    def step(self, model, y_prev):
        y_prev = y_prev[:, None]
        self.prefix = y_prev if self.prefix is None else torch.cat([self.prefix, y_prev], dim=1)
        return model.decode(self.prefix, self.memory, self.mask)[:, -1]   # (N, V)

    def reorder(self, rows):
        self.mask, self.memory = self.mask[rows], self.memory[rows]
        self.prefix = None if self.prefix is None else self.prefix[rows]
        return self


class _Decoder:
    """One interface over the protocol (cached) and the prefix path (uncached)."""

    def __init__(self, model, src, pad_id, use_cache):
        self.model = model
        self.cached = use_cache and hasattr(model, "decode_step")
        if not self.cached and not hasattr(model, "decode"):
            raise TypeError(f"{type(model).__name__} cannot be decoded: it needs start_decoding / decode_step "
                            "/ reorder_decoding_state (see course_utils.decoding), or encode / decode")
        self.state = model.start_decoding(src, pad_id) if self.cached else _PrefixState(model, src, pad_id)

    def log_probs(self, y_prev, banned=()):
        """log p(next token | prefix) for every row: (N, V) in float32; `banned` ids get -inf."""
        if self.cached:
            logits, self.state = self.model.decode_step(y_prev, self.state)
        else:
            logits = self.state.step(self.model, y_prev)
        log_probs = F.log_softmax(logits.float(), dim=-1)
        if banned:  # after the softmax: scores stay the model's own log-probabilities
            log_probs[:, list(banned)] = float("-inf")
        return log_probs

    def reorder(self, rows):
        if self.cached:
            self.state = self.model.reorder_decoding_state(self.state, rows)
        else:
            self.state.reorder(rows)

    @property
    def attn_weights(self):
        return getattr(self.state, "attn_weights", None)


@contextlib.contextmanager
def _evaluating(model):
    was_training = model.training
    model.eval()
    try:
        yield
    finally:
        model.train(was_training)


@torch.no_grad()
def greedy_decode(model, src, bos_id, eos_id, pad_id=0, max_len=None, use_cache=True, return_weights=False):
    """Most probable token at each step, fed back, until every sentence has produced <eos>.

    src (B, S) -> tokens (B, L) without <bos>, L <= max_len; after its <eos> a sentence is padded
    with `pad_id`. With return_weights, also the attention over the source at each step (B, L, S)
    (zeros after a sentence's <eos>; None when the model does not keep it). A sentence that has
    produced its <eos> leaves the batch: the steps after it cost only the sentences still going.
    """
    max_len = default_max_len(src, pad_id) if max_len is None else max_len
    B = src.size(0)
    with _evaluating(model):
        decoder = _Decoder(model, src, pad_id, use_cache)
        rows = torch.arange(B, device=src.device)                          # (n,) sentence of each row
        y = torch.full((B,), bos_id, dtype=torch.long, device=src.device)
        tokens = src.new_full((B, max_len), pad_id)
        weights, steps = None, 0
        for t in range(max_len):
            y = decoder.log_probs(y, banned=(pad_id, bos_id)).argmax(-1)       # (n,)
            tokens[rows, t] = y
            if return_weights and decoder.attn_weights is not None:
                w = decoder.attn_weights                                   # (n, S)
                if weights is None:
                    weights = w.new_zeros((B, max_len, w.size(-1)))
                weights[rows, t] = w
            steps = t + 1
            going = y != eos_id
            if not going.any():
                break
            if not going.all():                                            # finished sentences leave
                keep = going.nonzero().squeeze(1)
                decoder.reorder(keep)
                rows, y = rows[keep], y[keep]
        tokens = tokens[:, :steps]
    if not return_weights:
        return tokens
    return tokens, (weights[:, :steps] if weights is not None else None)


def beam_step(scores, log_probs, beam_size):
    """One step of beam search: the `beam_size` best one-token extensions over ALL beams.

    scores:    (..., n)    total log-probability of each of the n current prefixes
    log_probs: (..., n, V) log p(next token | prefix)
    returns (new_scores (..., beam_size), origin (..., beam_size) = which prefix each extends,
             token (..., beam_size) = the token appended)
    """
    V = log_probs.size(-1)
    total = scores.unsqueeze(-1) + log_probs                           # (..., n, V)
    new_scores, flat = total.flatten(-2).topk(beam_size, dim=-1)       # best over n * V candidates
    return new_scores, flat // V, flat % V


def length_penalty_factor(length, alpha):
    """GNMT length penalty lp(L) = ((5 + L) / 6) ** alpha."""
    return ((5.0 + length) / 6.0) ** alpha


def _hypotheses(scores, lengths, tokens, eos_id, length_penalty, n_best):
    """The n_best finished hypotheses of ONE sentence, from its beams' scores (k,), lengths (k,) and
    tokens (k, 1 + t) (<bos> first), ranked by score / lp(length)."""
    ranked = scores / length_penalty_factor(lengths.float(), length_penalty)
    hyps = []
    for j in [j for j in ranked.argsort(descending=True).tolist() if torch.isfinite(scores[j])][:n_best]:
        ids = tokens[j, 1:1 + int(lengths[j])].tolist()
        if ids and ids[-1] == eos_id:
            ids = ids[:-1]
        hyps.append(Hypothesis(ids, float(ranked[j]), float(scores[j]), int(lengths[j])))
    return hyps


@torch.no_grad()
def beam_search(model, src, bos_id, eos_id, pad_id=0, beam_size=5, max_len=None, length_penalty=0.6,
                n_best=1, use_cache=True):
    """Beam search for every sentence of `src` (B, S); returns B lists of `n_best` Hypothesis.

    The encoder runs once; its output (and, with the cache, every layer's keys and values) is
    repeated for the beams and reordered with them. A sentence whose beams have all finished leaves
    the batch: the steps after it cost only the sentences still going.
    """
    if n_best > beam_size:
        raise ValueError(f"n_best={n_best} cannot exceed beam_size={beam_size}")
    B, k, device = src.size(0), beam_size, src.device
    max_len = default_max_len(src, pad_id) if max_len is None else max_len
    results = [None] * B
    with _evaluating(model):
        decoder = _Decoder(model, src, pad_id, use_cache)
        decoder.reorder(torch.arange(B, device=device).repeat_interleave(k))    # (B * k) rows
        sentences = torch.arange(B, device=device)                     # (b,) sentences still decoding
        y = torch.full((B * k,), bos_id, dtype=torch.long, device=device)
        tokens = y[:, None]                                            # (b * k, 1 + t)
        scores = torch.full((B, k), float("-inf"), device=device)
        scores[:, 0] = 0.0                                             # all beams start identical: keep one
        finished = torch.zeros(B * k, dtype=torch.bool, device=device)
        lengths = torch.zeros(B * k, dtype=torch.long, device=device)
        beam = torch.arange(k, device=device)
        for _ in range(max_len):
            b = sentences.numel()
            log_probs = decoder.log_probs(y, banned=(pad_id, bos_id))    # (b * k, V)
            if finished.any():                                         # a finished beam only pads, at no cost
                log_probs[finished] = float("-inf")
                log_probs[finished, pad_id] = 0.0
            scores, origin, token = beam_step(scores, log_probs.view(b, k, -1), k)
            rows = (torch.arange(b, device=device)[:, None] * k + origin).view(-1)   # (b * k,) prefixes extended
            y = token.view(-1)
            lengths = lengths[rows] + (~finished[rows]).long()
            finished = finished[rows] | (y == eos_id)
            tokens = torch.cat([tokens[rows], y[:, None]], dim=1)
            done = finished.view(b, k).all(1)                          # (b,) every beam finished
            if done.any():
                for i in done.nonzero().flatten().tolist():
                    results[int(sentences[i])] = _hypotheses(scores[i], lengths[i * k:(i + 1) * k],
                                                             tokens[i * k:(i + 1) * k], eos_id, length_penalty,
                                                             n_best)
                if done.all():
                    break
                going = (~done).nonzero().flatten()                    # the other sentences go on
                keep = (going[:, None] * k + beam).view(-1)
                rows, y, lengths, finished, tokens = rows[keep], y[keep], lengths[keep], finished[keep], tokens[keep]
                scores, sentences = scores[going], sentences[going]
            decoder.reorder(rows)
    for i, sentence in enumerate(sentences.tolist()):                  # stopped by max_len
        if results[sentence] is None:
            results[sentence] = _hypotheses(scores[i], lengths[i * k:(i + 1) * k], tokens[i * k:(i + 1) * k],
                                            eos_id, length_penalty, n_best)
    return results


def strip_after_eos(ids, eos_id, pad_id=0):
    """List of generated ids up to (not including) the first <eos>, without padding."""
    ids = [int(i) for i in ids]
    if eos_id in ids:
        ids = ids[: ids.index(eos_id)]
    return [i for i in ids if i != pad_id]


@torch.no_grad()
def sequence_log_prob(model, src, output, bos_id, pad_id=0):
    """Total log-probability of `output` (list of ids, <eos> included) given one source `src` (1, S)."""
    model.eval()
    tgt_in = torch.tensor([[bos_id] + list(output[:-1])], device=src.device)
    src_mask = padding_mask(src, pad_id)
    logits = model.decode(tgt_in, model.encode(src, src_mask), src_mask).float()
    log_probs = F.log_softmax(logits, -1)[0]                           # (T, V)
    return float(log_probs[torch.arange(len(output)), torch.tensor(output)].sum())


# ---------------------------------------------------------------------------------------------
# Text in, text out (lesson 10): batches of sentences of similar length
# ---------------------------------------------------------------------------------------------
def _autocast(device, amp_dtype):
    if amp_dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=torch.device(device).type, dtype=amp_dtype)


@torch.no_grad()
def translate_ids(model, src_ids, device=None, beam_size=1, length_penalty=0.6, n_best=1,
                  batch_sentences=128, amp_dtype=None, show_progress=False, use_cache=True,
                  pad_id=0, bos_id=1, eos_id=2):
    """Decode lists of source ids; returns, per sentence, a list of n_best output id lists
    (greedy when beam_size == 1 and n_best == 1). Sentences are batched by length."""
    device = device or next(model.parameters()).device
    order = sorted(range(len(src_ids)), key=lambda i: len(src_ids[i]))
    out = [None] * len(src_ids)
    chunks = [order[i:i + batch_sentences] for i in range(0, len(order), batch_sentences)]
    for chunk in tqdm(chunks, desc="decoding", disable=not show_progress, leave=False):
        src = pad_sequences([src_ids[i] for i in chunk], pad_id).to(device)
        with _autocast(device, amp_dtype):
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
