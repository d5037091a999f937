"""Speculative decoding (lesson 16; Leviathan et al., ICML 2023; Chen et al. 2023): a small DRAFT model proposes
k tokens, the TARGET model scores all of them in one pass, and a rule of acceptance and rejection keeps the
output distributed EXACTLY as the target's.

    probs = probabilities(logits, temperature)          # softmax(logits / T); one-hot on the argmax at T = 0
    accepted, dist = speculative_accept(p, q, draft, u)  # the rule: the accepted drafts, the next token's distribution
    tokens = speculative_tokens(p, q, draft, u, sample)  # ... and the pass's tokens: accepted + one drawn from dist
    out, stats = speculative_generate(target, draft_model, prompt, 20, k=4, temperature=1.0, generator=g)
    out, stats = plain_generate(target, prompt, 20, temperature=1.0, generator=g)       # one token a pass
    bound = tv_bound(p, trials=10_000, delta=1e-6)      # how far an empirical distribution may fall from p

The rule, for draft tokens x_1..x_k drawn from the draft's q_i and the target's p_i at the same positions:
accept x_i with probability min(1, p_i(x_i) / q_i(x_i)), in order; at the first rejection draw the token from
the RESIDUAL norm(max(0, p_i - q_i)) and stop; if all k are accepted, draw a BONUS token from p_{k+1}, the
target's distribution after the last draft (it came with the verification for free). Every pass of the
target thus yields between 1 and k + 1 tokens. At temperature 0 the p_i and q_i are one-hot and the rule
reduces to: keep the drafts while they equal the target's greedy choice, then take the target's.
"""
import math

import torch

from .serving_model import forward_chunk, new_state, truncate

__all__ = ["probabilities", "sample_from", "speculative_accept", "speculative_tokens", "speculative_generate",
           "plain_generate",
           "tv_bound", "check_same_vocabulary"]


def probabilities(logits, temperature):
    """softmax(logits / T) over the last axis; at T = 0 one-hot on the argmax (greedy decoding)."""
    if temperature == 0:
        return torch.nn.functional.one_hot(logits.argmax(-1), logits.size(-1)).to(logits.dtype)
    return (logits.float() / temperature).softmax(-1)


def sample_from(generator=None):
    """A function dist (V,) -> one token drawn from it (multinomial with `generator`)."""
    def sample(dist):
        return int(torch.multinomial(dist.float(), 1, generator=generator))
    return sample


def speculative_accept(p, q, draft, u):
    """The accept/reject rule. p (k+1, V): the target's distributions at the k draft positions and the one after;
    q (k, V): the draft's; draft (k,): the drafted tokens; u (k,): uniforms in [0, 1).
    Returns (accepted, dist): the accepted drafts (a list of ints), and the distribution (V,) the pass's last token
    is drawn from: the residual norm(max(0, p_i - q_i)) at the first rejection, the bonus p_k when all are accepted."""
    accepted = []
    for i, x in enumerate(draft.tolist()):
        if u[i] < torch.clamp(p[i, x] / q[i, x], max=1.0):        # accept with probability min(1, p/q)
            accepted.append(x)
            continue
        residual = torch.clamp(p[i] - q[i], min=0.0)                 # rejected: draw from norm(max(0, p - q))
        return accepted, residual / residual.sum()
    return accepted, p[len(accepted)]                                 # every draft accepted: the bonus token's


def speculative_tokens(p, q, draft, u, sample):
    """The tokens one pass yields: the accepted drafts, then one token drawn with sample(dist) -> int."""
    accepted, dist = speculative_accept(p, q, draft, u)
    return accepted + [sample(dist)]


def check_same_vocabulary(target, draft):
    """A draft must speak the target's vocabulary: its tokens are the target's ids."""
    if draft.vocab_size != target.vocab_size:
        raise ValueError(f"the draft's vocabulary has {draft.vocab_size} tokens and the target's {target.vocab_size}: "
                         "speculative decoding needs one vocabulary (the same tokenizer) for both")


@torch.no_grad()
def speculative_generate(target, draft, prompt, max_new_tokens, k=4, temperature=1.0, generator=None):
    """Decode `max_new_tokens` tokens after `prompt` (list of ids) with drafts of k tokens. Returns (tokens,
    stats: target_passes, draft_passes, proposed, accepted). Contiguous caches (serving_model.forward_chunk)."""
    check_same_vocabulary(target, draft)
    if k < 1:
        raise ValueError(f"k, the drafted tokens per pass, must be >= 1, got {k}")
    sample = sample_from(generator)
    tokens, out = list(prompt), []
    t_state, d_state = new_state(target), new_state(draft)
    stats = dict(target_passes=0, draft_passes=0, proposed=0, accepted=0)
    while len(out) < max_new_tokens:
        kk = min(k, max_new_tokens - len(out) - 1)       # no draft beyond the tokens still wanted
        drafts, qs = [], []
        for j in range(kk):                               # the draft proposes kk tokens, one pass each
            feed = tokens[d_state.length:] if j == 0 else [drafts[-1]]
            qs.append(probabilities(forward_chunk(draft, d_state, torch.tensor([feed]))[0, -1], temperature))
            drafts.append(sample(qs[-1]))
        n = len(tokens)                                   # the target scores them all in ONE pass
        logits = forward_chunk(target, t_state, torch.tensor([tokens[t_state.length:] + drafts]))[0, -(kk + 1):]
        p = probabilities(logits, temperature)
        if kk:
            new = speculative_tokens(p, torch.stack(qs), torch.tensor(drafts), torch.rand(kk, generator=generator),
                                     sample)
        else:
            new = [sample(p[0])]
        stats["target_passes"] += 1
        stats["draft_passes"] += kk
        stats["proposed"] += kk
        stats["accepted"] += len(new) - 1
        truncate(t_state, n + len(new) - 1)               # the caches keep the accepted drafts, not the rejected
        truncate(d_state, n + len(new) - 1)
        new = new[:max_new_tokens - len(out)]
        out += new
        tokens += new
    return out, stats


@torch.no_grad()
def plain_generate(model, prompt, max_new_tokens, temperature=1.0, generator=None):
    """The target alone, one token per pass, through the same code (forward_chunk): (tokens, stats)."""
    sample = sample_from(generator)
    state, tokens, out = new_state(model), list(prompt), []
    for _ in range(max_new_tokens):
        logits = forward_chunk(model, state, torch.tensor([tokens[state.length:]]))[0, -1]
        out.append(sample(probabilities(logits, temperature)))
        tokens.append(out[-1])
    return out, dict(target_passes=max_new_tokens, draft_passes=0, proposed=0, accepted=0)


def tv_bound(p, trials, delta=1e-6):
    """A bound that the total variation distance between p (V,) and the empirical distribution of `trials`
    independent draws from it exceeds with probability at most `delta`:
        E[TV] <= 1/2 sum_v sqrt(p_v (1 - p_v) / n)      (Jensen: E|p̂_v - p_v| <= sd(p̂_v))
        P(TV >= E[TV] + eps) <= exp(-2 n eps²)          (McDiarmid: one draw moves TV by at most 1/n)
    so TV < 1/2 sum_v sqrt(p_v (1 - p_v) / n) + sqrt(ln(1/delta) / (2 n)) with probability >= 1 - delta."""
    p = torch.as_tensor(p, dtype=torch.float64)
    return float(0.5 * torch.sqrt(p * (1 - p) / trials).sum() + math.sqrt(math.log(1 / delta) / (2 * trials)))
