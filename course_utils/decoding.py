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

Beam search keeps the `beam_size` best prefixes by total log-probability
    score(y_1..y_t) = sum_i log p(y_i | y_<i, x)
and ranks finished hypotheses by score / lp(length) with the GNMT length penalty
    lp(L) = ((5 + L) / 6) ** length_penalty      (0 = no penalty; larger favours longer output).
A finished hypothesis stays in its beam, extended by <pad> at log-probability 0, so it competes
with the open ones at its final score. <pad> and <bos> are never generated. In both searches a
sentence that is done (greedy: its <eos>; beam: every beam finished) leaves the batch
(`reorder_decoding_state` keeps the other rows), so later steps cost only the sentences still going.

Decoder-only models (lesson 12) sample their continuation of a prompt, with the same cache protocol
(`start_decoding(prefix)` feeds the prefix, `decode_step` one token):

    probs = sampling_distribution(logits, temperature=0.8, top_k=50, top_p=0.9)   # (N, V), sums to 1
    y = sample_next(logits, temperature=0.8, top_p=0.9)                          # (N,) ids; 0 = greedy
    new = generate(model, prompt, max_new_tokens=30, temperature=0.8, eos_id=2)  # (B, L) ids
"""
import contextlib
from typing import List, NamedTuple

import torch
import torch.nn.functional as F

from .masks import padding_mask


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
# Sampling, and generation with a decoder-only model (lesson 12)
# ---------------------------------------------------------------------------------------------
def _check_sampling(temperature, top_k, top_p):
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or temperature < 0:
        raise ValueError(f"temperature must be a number > 0, or 0 for greedy decoding (the most probable token), "
                         f"got {temperature!r}")
    if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1):
        raise ValueError(f"top_k must be None (no filtering) or an integer >= 1, got {top_k!r}")
    if top_p is not None and (isinstance(top_p, bool) or not isinstance(top_p, (int, float))
                              or not 0 < top_p <= 1):
        raise ValueError(f"top_p must be None (no filtering) or in (0, 1], got {top_p!r}")


def sampling_distribution(logits, temperature=1.0, top_k=None, top_p=None):
    """The distribution the next token is sampled from: (..., V) logits -> (..., V) probabilities (float32).

    1. temperature T: softmax(logits / T); T = 0 is greedy decoding (all mass on the argmax);
    2. top-k: keep the k largest logits (and any tied with the k-th), the others get probability 0;
    3. top-p (nucleus, Holtzman et al. 2020), on the distribution left by 1-2: keep the smallest set of most
       probable tokens whose mass reaches p (the token that crosses p included; tokens tied with the last
       one kept are kept too, so the result does not depend on how a sort orders equal values); p = 1 keeps all;
    then renormalise what is kept to sum to 1.
    """
    _check_sampling(temperature, top_k, top_p)
    logits = logits.float()
    if temperature == 0:                                              # greedy: one-hot on the argmax
        return F.one_hot(logits.argmax(-1), logits.size(-1)).float()
    z = logits / temperature                                          # temperature BEFORE the softmax
    V = z.size(-1)
    if top_k is not None and top_k < V:
        kth = z.topk(top_k, dim=-1).values[..., -1:]                  # (..., 1) the k-th largest logit
        z = z.masked_fill(z < kth, float("-inf"))
    probs = z.softmax(dim=-1)
    if top_p is not None and top_p < 1:
        ranked = probs.sort(dim=-1, descending=True).values           # (..., V) largest first
        before = (ranked.cumsum(-1) < top_p).sum(-1, keepdim=True)    # tokens whose mass so far stays below p
        last = ranked.gather(-1, before.clamp(max=V - 1))             # the token that reaches p
        probs = probs.masked_fill(probs < last, 0.0)
    return probs / probs.sum(-1, keepdim=True)                        # renormalise


def sample_next(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    """One token per row of logits (N, V), drawn from sampling_distribution (argmax when temperature = 0)."""
    probs = sampling_distribution(logits, temperature, top_k, top_p)
    if temperature == 0:
        return probs.argmax(-1)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)   # (N,)


@torch.no_grad()
def generate(model, prompt, max_new_tokens, temperature=1.0, top_k=None, top_p=None, eos_id=None, pad_id=0,
             use_cache=True, generator=None):
    """Continue `prompt` (B, T0) with a decoder-only model (e.g. gpt.GPT): (B, L) new tokens, L <= max_new_tokens.

    Each step samples the next token (sample_next; temperature=0: greedy) and feeds it back. With the cache,
    the prompt's keys and values are computed once and each step runs the layers on ONE position
    (`start_decoding` / `decode_step`, lesson 10's cache); without it every step runs the model again on the
    whole prefix (`model(prefix)[:, -1]`), the reference the cache is tested against. A row that has produced
    `eos_id` is padded with `pad_id`; generation stops when every row has.
    """
    _check_sampling(temperature, top_k, top_p)
    if not torch.is_tensor(prompt) or prompt.dim() != 2 or prompt.size(1) < 1:
        raise ValueError(f"prompt must be a (B, T0) tensor of token ids with T0 >= 1 (e.g. just <bos>), got "
                         f"{tuple(prompt.shape) if torch.is_tensor(prompt) else type(prompt).__name__}")
    context = prompt.size(1) + max_new_tokens - 1                     # the last new token is never fed back
    max_len = getattr(model, "max_len", None)
    if max_len is not None and context > max_len:
        raise ValueError(f"a prompt of {prompt.size(1)} tokens and {max_new_tokens} new ones need a context of "
                         f"{context} positions, longer than the model's (max_len={max_len})")
    B = prompt.size(0)
    out = prompt.new_full((B, max_new_tokens), pad_id)
    done = torch.zeros(B, dtype=torch.bool, device=prompt.device)
    with _evaluating(model):
        state = model.start_decoding(prompt[:, :-1]) if use_cache else None
        y, prefix, steps = prompt[:, -1], prompt, 0
        for t in range(max_new_tokens):
            if use_cache:
                logits, state = model.decode_step(y, state)          # (B, V), one position
            else:
                logits = model(prefix)[:, -1]                         # (B, V), the whole prefix again
            y = sample_next(logits, temperature, top_k, top_p, generator).masked_fill(done, pad_id)
            out[:, t], steps = y, t + 1
            if eos_id is not None:
                done |= y == eos_id
                if bool(done.all()):
                    break
            if not use_cache:
                prefix = torch.cat([prefix, y[:, None]], dim=1)
    return out[:, :steps]
