"""Decoding an encoder-decoder model: greedy search and beam search.

Both work with any model that has
    memory = model.encode(src, src_mask)           # (B, S, d_model), computed ONCE per batch
    logits = model.decode(tgt_in, memory, src_mask)  # (B, T, V)
(the course's Transformer). Masks are boolean, True = may attend.

    out = greedy_decode(model, src, bos_id, eos_id, pad_id)          # (B, L) ids, no BOS
    hyps = beam_search(model, src, bos_id, eos_id, pad_id, beam_size=5, length_penalty=0.6, n_best=3)
    hyps[b][0].tokens, hyps[b][0].score                             # best hypothesis of sentence b

Beam search keeps the `beam_size` best prefixes by total log-probability
    score(y_1..y_t) = sum_i log p(y_i | y_<i, x)
and ranks finished hypotheses by score / lp(length) with the GNMT length penalty
    lp(L) = ((5 + L) / 6) ** length_penalty      (0 = no penalty; larger favours longer output).
A finished hypothesis stays in its beam, extended by <pad> at log-probability 0, so it competes
with the open ones at its final score. <pad> and <bos> are never generated.
"""
from typing import List, NamedTuple

import torch
import torch.nn.functional as F

from .attention import padding_mask


class Hypothesis(NamedTuple):
    tokens: List[int]      # generated ids, without <bos> and <eos>
    score: float           # log_prob / lp(length): what hypotheses are ranked by
    log_prob: float        # sum of log-probabilities, <eos> included
    length: int            # generated tokens, <eos> included


def default_max_len(src, pad_id, a=1.5, b=10):
    """A length limit for the output: a * (longest source) + b."""
    return int(a * int((src != pad_id).sum(1).max()) + b)


def next_log_probs(model, tokens, memory, src_mask, banned=()):
    """log p(next token | prefix) for every row: (N, V) in float32; `banned` ids get -inf."""
    logits = model.decode(tokens, memory, src_mask)[:, -1].float()     # (N, V)
    log_probs = F.log_softmax(logits, dim=-1)
    if banned:  # after the softmax: scores stay the model's own log-probabilities
        log_probs[:, list(banned)] = float("-inf")
    return log_probs


@torch.no_grad()
def greedy_decode(model, src, bos_id, eos_id, pad_id=0, max_len=None):
    """Most probable token at each step, fed back, until <eos>: (B, L) ids without <bos>.

    After its <eos> a sequence is padded with `pad_id`.
    """
    was_training = model.training
    model.eval()
    max_len = default_max_len(src, pad_id) if max_len is None else max_len
    src_mask = padding_mask(src, pad_id)                              # (B, 1, 1, S)
    memory = model.encode(src, src_mask)                              # (B, S, d_model), once
    ys = torch.full((src.size(0), 1), bos_id, dtype=torch.long, device=src.device)
    done = torch.zeros(src.size(0), dtype=torch.bool, device=src.device)
    for _ in range(max_len):
        log_probs = next_log_probs(model, ys, memory, src_mask, banned=(pad_id, bos_id))
        token = log_probs.argmax(-1).masked_fill(done, pad_id)          # (B,)
        ys = torch.cat([ys, token[:, None]], dim=1)
        done |= token == eos_id
        if done.all():
            break
    model.train(was_training)
    return ys[:, 1:]


def beam_step(scores, log_probs, beam_size):
    """One step of beam search: the `beam_size` best one-token extensions over ALL beams.

    scores:    (..., K)    total log-probability of each of the K current prefixes
    log_probs: (..., K, V) log p(next token | prefix k)
    returns (new_scores (..., beam_size), origin (..., beam_size) = which prefix each extends,
             token (..., beam_size) = the token appended)
    """
    V = log_probs.size(-1)
    total = scores.unsqueeze(-1) + log_probs                           # (..., K, V)
    new_scores, flat = total.flatten(-2).topk(beam_size, dim=-1)       # best over K * V candidates
    return new_scores, flat // V, flat % V


def length_penalty_factor(length, alpha):
    """GNMT length penalty lp(L) = ((5 + L) / 6) ** alpha."""
    return ((5.0 + length) / 6.0) ** alpha


@torch.no_grad()
def beam_search(model, src, bos_id, eos_id, pad_id=0, beam_size=5, max_len=None, length_penalty=0.6,
                n_best=1):
    """Beam search for every sentence of `src` (B, S); returns B lists of `n_best` Hypothesis.

    The encoder runs once; its output is repeated for the beams.
    """
    if n_best > beam_size:
        raise ValueError(f"n_best={n_best} cannot exceed beam_size={beam_size}")
    was_training = model.training
    model.eval()
    B, K = src.size(0), beam_size
    max_len = default_max_len(src, pad_id) if max_len is None else max_len
    src_mask = padding_mask(src, pad_id)
    memory = model.encode(src, src_mask)                               # (B, S, d_model), once
    memory, src_mask = memory.repeat_interleave(K, 0), src_mask.repeat_interleave(K, 0)  # (B*K, ...)
    device = src.device
    tokens = torch.full((B * K, 1), bos_id, dtype=torch.long, device=device)
    scores = torch.full((B, K), float("-inf"), device=device)
    scores[:, 0] = 0.0                                                 # all beams start identical: keep one
    finished = torch.zeros(B * K, dtype=torch.bool, device=device)
    lengths = torch.zeros(B * K, dtype=torch.long, device=device)
    base = (torch.arange(B, device=device) * K)[:, None]               # (B, 1) row offset of each sentence
    for _ in range(max_len):
        log_probs = next_log_probs(model, tokens, memory, src_mask, banned=(pad_id, bos_id))  # (B*K, V)
        log_probs[finished] = float("-inf")                            # a finished beam only pads, at no cost
        log_probs[finished, pad_id] = 0.0
        scores, origin, token = beam_step(scores, log_probs.view(B, K, -1), K)   # (B, K) each
        rows = (base + origin).view(-1)                                # (B*K,) the prefixes extended
        token = token.view(-1)
        lengths = lengths[rows] + (~finished[rows]).long()
        finished = finished[rows] | (token == eos_id)
        tokens = torch.cat([tokens[rows], token[:, None]], dim=1)
        if finished.all():
            break
    model.train(was_training)
    ranked = scores.view(-1) / length_penalty_factor(lengths.float(), length_penalty)
    ranked = ranked.view(B, K)
    results = []
    for b in range(B):
        order = [k for k in ranked[b].argsort(descending=True).tolist() if torch.isfinite(scores[b, k])]
        hyps = []
        for k in order[:n_best]:
            row = b * K + k
            ids = tokens[row, 1:1 + int(lengths[row])].tolist()
            if ids and ids[-1] == eos_id:
                ids = ids[:-1]
            hyps.append(Hypothesis(ids, float(ranked[b, k]), float(scores[b, k]), int(lengths[row])))
        results.append(hyps)
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
