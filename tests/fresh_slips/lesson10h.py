"""Typical learner answers for lesson 10 (translating German to English on Multi30k).

Exercises (the `exercise` key): noam_lr, label_smoothed_loss, beam_step.

Every answer is what a learner would hand to the lesson's check:
  noam_lr              a function noam_lr(step, d_model, warmup_steps) -> a plain Python float
                       (d_model^-0.5 * min(step^-0.5, step * warmup_steps^-1.5), step = 1, 2, ...)
  label_smoothed_loss  a function label_smoothed_loss(logits (B, T, V), target (B, T), smoothing, pad_id)
                       -> 0-d tensor: mean over non-padding positions of
                       (1 - eps) * (-log p(y)) + eps * mean_v(-log p(v))   (eps spread over ALL V tokens)
  beam_step            a function beam_step(scores (K,), log_probs (K, V), beam_size)
                       -> (new_scores (beam_size,), origin (beam_size,) long, token (beam_size,) long),
                       the beam_size best of the K * V candidates scores[b] + log_probs[b, v], best first

SLIPS holds answers with exactly one typical mistake each (marked `# slip:`), CORRECT holds right answers
written differently from the reference solution.
"""
import math

import torch
import torch.nn.functional as F


# ================================================================================================
# Exercise 1: noam_lr
# ================================================================================================
def noam_warmup_exponent_half(step, d_model, warmup_steps):
    return d_model ** -0.5 * min(step ** -0.5, step * warmup_steps ** -0.5)   # slip: warm-up exponent -0.5 instead of -1.5


def noam_max(step, d_model, warmup_steps):
    return d_model ** -0.5 * max(step ** -0.5, step * warmup_steps ** -1.5)   # slip: max instead of min


def noam_d_model_positive_power(step, d_model, warmup_steps):
    return d_model ** 0.5 * min(step ** -0.5, step * warmup_steps ** -1.5)   # slip: d_model^0.5 (multiplies by sqrt(d_model))


def noam_no_d_model(step, d_model, warmup_steps):
    return min(step ** -0.5, step * warmup_steps ** -1.5)   # slip: forgets the d_model^-0.5 factor


def noam_precedence(step, d_model, warmup_steps):
    return d_model ** -0.5 * min(step ** -1/2, step * warmup_steps ** -1.5)   # slip: step ** -1/2 parses as (step ** -1) / 2


def noam_warmup_normalised(step, d_model, warmup_steps):
    return d_model ** -0.5 * min(step ** -0.5, step / warmup_steps)   # slip: warm-up term step / warmup_steps (reaches 1, not warmup^-0.5)


def noam_zero_based_shift(step, d_model, warmup_steps):
    step = step + 1   # slip: shifts the step by one as for a 0-based LambdaLR counter, though step already starts at 1
    return d_model ** -0.5 * min(step ** -0.5, step * warmup_steps ** -1.5)


def noam_piecewise_linear_warmup(step, d_model, warmup_steps):
    if step < warmup_steps:
        return d_model ** -0.5 * step / warmup_steps   # slip: linear warm-up to d_model^-0.5, not to (d_model * warmup)^-0.5
    return d_model ** -0.5 * step ** -0.5


def noam_returns_tensor(step, d_model, warmup_steps):
    step_t = torch.tensor(float(step))
    return d_model ** -0.5 * torch.minimum(step_t ** -0.5, step_t * warmup_steps ** -1.5)   # slip: returns a float32 tensor, not a plain Python number


# ---- right answers ----
def noam_piecewise(step, d_model, warmup_steps):
    """Two branches: the linear warm-up until the peak, then the inverse square root."""
    if step <= warmup_steps:
        return step * warmup_steps ** -1.5 / math.sqrt(d_model)
    return 1.0 / math.sqrt(step * d_model)


def noam_factored(step, d_model, warmup_steps):
    """The peak rate (d_model * warmup)^-0.5 times min(step / warmup, sqrt(warmup / step))."""
    peak = 1.0 / math.sqrt(d_model * warmup_steps)
    return peak * min(step / warmup_steps, math.sqrt(warmup_steps / step))


def noam_pow(step, d_model, warmup_steps):
    """math.pow throughout, the min written as a conditional expression."""
    decay = math.pow(step, -0.5)
    warm = step * math.pow(warmup_steps, -1.5)
    return math.pow(d_model, -0.5) * (warm if warm < decay else decay)


# ================================================================================================
# Exercise 2: label_smoothed_loss
# ================================================================================================
def ls_excludes_true_token(logits, target, smoothing, pad_id):
    log_p = torch.log_softmax(logits, dim=-1)
    V = logits.size(-1)
    true_lp = log_p.gather(-1, target.unsqueeze(-1)).squeeze(-1)
    nll = -true_lp
    others = -(log_p.sum(dim=-1) - true_lp) / (V - 1)   # slip: spreads eps over the V - 1 other tokens, not all V
    loss = (1 - smoothing) * nll + smoothing * others
    keep = (target != pad_id).float()
    return (loss * keep).sum() / keep.sum()


def ls_includes_padding(logits, target, smoothing, pad_id):
    log_p = torch.log_softmax(logits, dim=-1)
    nll = -log_p.gather(-1, target.unsqueeze(-1)).squeeze(-1)
    uniform = -log_p.mean(dim=-1)
    loss = (1 - smoothing) * nll + smoothing * uniform
    return loss.mean()   # slip: averages over every position, padding included


def ls_softmax_wrong_axis(logits, target, smoothing, pad_id):
    log_p = torch.log_softmax(logits, dim=1)   # slip: log-softmax over the time axis instead of the vocabulary
    nll = -log_p.gather(-1, target.unsqueeze(-1)).squeeze(-1)
    uniform = -log_p.mean(dim=-1)
    loss = (1 - smoothing) * nll + smoothing * uniform
    keep = (target != pad_id).float()
    return (loss * keep).sum() / keep.sum()


def ls_raw_logits(logits, target, smoothing, pad_id):
    log_p = logits   # slip: uses the logits as log-probabilities (no log-softmax)
    nll = -log_p.gather(-1, target.unsqueeze(-1)).squeeze(-1)
    uniform = -log_p.mean(dim=-1)
    loss = (1 - smoothing) * nll + smoothing * uniform
    keep = (target != pad_id).float()
    return (loss * keep).sum() / keep.sum()


def ls_sum_not_mean_over_vocab(logits, target, smoothing, pad_id):
    log_p = torch.log_softmax(logits, dim=-1)
    nll = -log_p.gather(-1, target.unsqueeze(-1)).squeeze(-1)
    uniform = -log_p.sum(dim=-1)   # slip: sums the uniform term over the vocabulary (forgets the 1/V)
    loss = (1 - smoothing) * nll + smoothing * uniform
    keep = (target != pad_id).float()
    return (loss * keep).sum() / keep.sum()


def ls_mean_of_sentence_means(logits, target, smoothing, pad_id):
    log_p = torch.log_softmax(logits, dim=-1)
    nll = -log_p.gather(-1, target.unsqueeze(-1)).squeeze(-1)
    uniform = -log_p.mean(dim=-1)
    loss = (1 - smoothing) * nll + smoothing * uniform
    keep = (target != pad_id).float()
    return ((loss * keep).sum(dim=1) / keep.sum(dim=1)).mean()   # slip: mean of per-sentence means, not the mean over all tokens


def ls_weights_swapped(logits, target, smoothing, pad_id):
    log_p = torch.log_softmax(logits, dim=-1)
    nll = -log_p.gather(-1, target.unsqueeze(-1)).squeeze(-1)
    uniform = -log_p.mean(dim=-1)
    loss = smoothing * nll + (1 - smoothing) * uniform   # slip: eps and 1 - eps swapped
    keep = (target != pad_id).float()
    return (loss * keep).sum() / keep.sum()


def ls_mask_only_nll(logits, target, smoothing, pad_id):
    log_p = torch.log_softmax(logits, dim=-1)
    nll = -log_p.gather(-1, target.unsqueeze(-1)).squeeze(-1)
    uniform = -log_p.mean(dim=-1)
    keep = (target != pad_id).float()
    nll_mean = (nll * keep).sum() / keep.sum()
    return (1 - smoothing) * nll_mean + smoothing * uniform.mean()   # slip: the smoothing term is averaged over padding too


def ls_divide_by_all_positions(logits, target, smoothing, pad_id):
    log_p = torch.log_softmax(logits, dim=-1)
    nll = -log_p.gather(-1, target.unsqueeze(-1)).squeeze(-1)
    uniform = -log_p.mean(dim=-1)
    loss = (1 - smoothing) * nll + smoothing * uniform
    keep = (target != pad_id).float()
    return (loss * keep).mean()   # slip: zeroes the padding but divides by B * T, not by the number of real tokens


def ls_log_of_softmax(logits, target, smoothing, pad_id):
    log_p = torch.softmax(logits, dim=-1).log()   # slip: log(softmax) underflows to -inf for large logits (use log_softmax)
    nll = -log_p.gather(-1, target.unsqueeze(-1)).squeeze(-1)
    uniform = -log_p.mean(dim=-1)
    loss = (1 - smoothing) * nll + smoothing * uniform
    keep = (target != pad_id).float()
    return (loss * keep).sum() / keep.sum()


# ---- right answers ----
def ls_explicit_target_distribution(logits, target, smoothing, pad_id):
    """Builds q = (1 - eps) one-hot + eps / V and takes -sum q log p; boolean indexing for the mask."""
    V = logits.size(-1)
    log_p = F.log_softmax(logits, dim=-1)
    q = torch.full_like(log_p, smoothing / V)
    q = q + (1 - smoothing) * F.one_hot(target, V).to(log_p.dtype)
    per_token = -(q * log_p).sum(dim=-1)                       # (B, T)
    return per_token[target != pad_id].mean()


def ls_torch_cross_entropy(logits, target, smoothing, pad_id):
    """PyTorch's own label_smoothing (spread over all V tokens) with ignore_index for the padding."""
    V = logits.size(-1)
    return F.cross_entropy(logits.reshape(-1, V), target.reshape(-1), ignore_index=pad_id,
                           label_smoothing=smoothing)


def ls_logsumexp(logits, target, smoothing, pad_id):
    """From the log-sum-exp: -log p(y) = lse - z_y and mean_v(-log p(v)) = lse - mean_v z_v."""
    lse = torch.logsumexp(logits, dim=-1)                      # (B, T)
    z_y = logits.gather(-1, target.unsqueeze(-1)).squeeze(-1)  # (B, T)
    loss = lse - (1 - smoothing) * z_y - smoothing * logits.mean(dim=-1)
    mask = target.ne(pad_id)
    return torch.where(mask, loss, torch.zeros_like(loss)).sum() / mask.sum()


# ================================================================================================
# Exercise 3: beam_step
# ================================================================================================
def beam_ignores_scores(scores, log_probs, beam_size):
    V = log_probs.size(-1)
    new_scores, index = log_probs.flatten().topk(beam_size)   # slip: ranks by the new token's log-prob only, forgets the prefix scores
    return new_scores, index // V, index % V


def beam_best_token_per_beam(scores, log_probs, beam_size):
    candidates = scores.unsqueeze(-1) + log_probs
    new_scores, token = candidates.max(dim=-1)   # slip: extends every beam by its own best token instead of the best over all beams
    origin = torch.arange(candidates.size(0))
    return new_scores[:beam_size], origin[:beam_size], token[:beam_size]


def beam_per_beam_topk_not_reranked(scores, log_probs, beam_size):
    candidates = scores.unsqueeze(-1) + log_probs
    top_scores, top_tokens = candidates.topk(beam_size, dim=-1)               # (K, beam_size)
    origin = torch.arange(candidates.size(0)).unsqueeze(-1).expand_as(top_tokens)
    return (top_scores.flatten()[:beam_size], origin.flatten()[:beam_size],
            top_tokens.flatten()[:beam_size])   # slip: keeps the first beam_size of the per-beam lists without ranking them across beams


def beam_origin_token_swapped(scores, log_probs, beam_size):
    V = log_probs.size(-1)
    candidates = scores.unsqueeze(-1) + log_probs
    new_scores, index = candidates.flatten().topk(beam_size)
    return new_scores, index % V, index // V   # slip: origin and token swapped (% and //)


def beam_divides_by_num_beams(scores, log_probs, beam_size):
    K = log_probs.size(0)   # slip: divides the flat index by the number of beams K instead of the vocabulary size V
    candidates = scores.unsqueeze(-1) + log_probs
    new_scores, index = candidates.flatten().topk(beam_size)
    return new_scores, index // K, index % K


def beam_true_division(scores, log_probs, beam_size):
    V = log_probs.size(-1)
    candidates = scores.unsqueeze(-1) + log_probs
    new_scores, index = candidates.flatten().topk(beam_size)
    return new_scores, index / V, index % V   # slip: true division gives a fractional float origin, not the beam index


def beam_ascending(scores, log_probs, beam_size):
    V = log_probs.size(-1)
    candidates = (scores.unsqueeze(-1) + log_probs).flatten()
    index = candidates.argsort()[:beam_size]   # slip: argsort is ascending: keeps the WORST candidates
    return candidates[index], index // V, index % V


def beam_multiplies(scores, log_probs, beam_size):
    V = log_probs.size(-1)
    candidates = scores.unsqueeze(-1) * log_probs   # slip: multiplies the log-probabilities (probabilities multiply, logs add)
    new_scores, index = candidates.flatten().topk(beam_size)
    return new_scores, index // V, index % V


def beam_returns_token_logprob(scores, log_probs, beam_size):
    V = log_probs.size(-1)
    candidates = scores.unsqueeze(-1) + log_probs
    _, index = candidates.flatten().topk(beam_size)
    return log_probs.flatten()[index], index // V, index % V   # slip: returns the new token's log-prob, not the prefix's total score


# ---- right answers ----
def beam_two_stage(scores, log_probs, beam_size):
    """Each beam's best min(beam_size, V) tokens first, then the best beam_size of those K * k candidates."""
    K, V = log_probs.shape
    k = min(beam_size, V)
    local_scores, local_tokens = (scores[:, None] + log_probs).topk(k, dim=-1)      # (K, k)
    best, flat = local_scores.reshape(-1).topk(beam_size)                           # over K * k
    origin = flat // k
    token = local_tokens.reshape(-1)[flat]
    return best, origin, token


def beam_sort_divmod(scores, log_probs, beam_size):
    """Sort all candidates in descending order; torch.div(floor) and remainder for the beam and the token."""
    V = log_probs.shape[-1]
    total = (log_probs + scores.reshape(-1, 1)).reshape(-1)
    order = torch.sort(total, descending=True, stable=True).indices[:beam_size]
    origin = torch.div(order, V, rounding_mode="floor")
    token = torch.remainder(order, V)
    return total[order], origin, token


def beam_unravel(scores, log_probs, beam_size):
    """topk over the flattened candidates, torch.unravel_index for (beam, token)."""
    candidates = scores.view(-1, 1) + log_probs
    values, flat = torch.topk(candidates.reshape(-1), beam_size, largest=True, sorted=True)
    origin, token = torch.unravel_index(flat, candidates.shape)
    return values, origin, token


# ================================================================================================
SLIPS = [
    ("noam_lr", "Warm-up term uses warmup_steps ** -0.5 instead of ** -1.5.", noam_warmup_exponent_half),
    ("noam_lr", "Takes the max of the two terms instead of the min.", noam_max),
    ("noam_lr", "Multiplies by sqrt(d_model) (d_model ** 0.5) instead of dividing by it.", noam_d_model_positive_power),
    ("noam_lr", "Forgets the d_model ** -0.5 factor.", noam_no_d_model),
    ("noam_lr", "Writes step ** -1/2, which Python reads as (step ** -1) / 2.", noam_precedence),
    ("noam_lr", "Warm-up term is step / warmup_steps (normalised to 1 at the peak) instead of step * warmup_steps ** -1.5.",
     noam_warmup_normalised),
    ("noam_lr", "Adds 1 to the step as for a 0-based scheduler counter, though steps start at 1.", noam_zero_based_shift),
    ("noam_lr", "Linear warm-up to d_model ** -0.5 (step / warmup_steps), then the inverse square root: jumps at the peak.",
     noam_piecewise_linear_warmup),
    ("noam_lr", "Computes with torch tensors and returns a float32 0-d tensor instead of a plain Python number.",
     noam_returns_tensor),

    ("label_smoothed_loss", "Spreads the smoothing mass over the V - 1 wrong tokens only (the true token excluded).",
     ls_excludes_true_token),
    ("label_smoothed_loss", "Averages over every position, padding included.", ls_includes_padding),
    ("label_smoothed_loss", "Log-softmax over the time axis (dim=1) instead of the vocabulary.", ls_softmax_wrong_axis),
    ("label_smoothed_loss", "Uses the raw logits as log-probabilities (no log-softmax).", ls_raw_logits),
    ("label_smoothed_loss", "Sums -log p over the vocabulary for the smoothing term instead of averaging it.",
     ls_sum_not_mean_over_vocab),
    ("label_smoothed_loss", "Averages each sentence's loss over its own tokens, then averages the sentences.",
     ls_mean_of_sentence_means),
    ("label_smoothed_loss", "Swaps the weights: eps on the true token's term and 1 - eps on the uniform term.",
     ls_weights_swapped),
    ("label_smoothed_loss", "Masks the padding in the true-token term only; the smoothing term is averaged over all positions.",
     ls_mask_only_nll),
    ("label_smoothed_loss", "Zeroes the padding positions but divides by B * T instead of the number of real tokens.",
     ls_divide_by_all_positions),
    ("label_smoothed_loss", "Takes log(softmax(logits)) instead of log_softmax: -inf and inf/nan for large logits.",
     ls_log_of_softmax),

    ("beam_step", "Ranks the candidates by the new token's log-prob only, without adding the prefix scores.",
     beam_ignores_scores),
    ("beam_step", "Extends every beam by its own best token instead of taking the best beam_size over all beams.",
     beam_best_token_per_beam),
    ("beam_step", "Takes each beam's top tokens and keeps the first beam_size of that list without ranking across beams.",
     beam_per_beam_topk_not_reranked),
    ("beam_step", "Origin and token swapped: index % V as the beam, index // V as the token.", beam_origin_token_swapped),
    ("beam_step", "Decodes the flat index with the number of beams K instead of the vocabulary size V.",
     beam_divides_by_num_beams),
    ("beam_step", "Uses true division index / V: a fractional float origin instead of an integer beam index.",
     beam_true_division),
    ("beam_step", "Sorts ascending (argsort) and keeps the worst candidates.", beam_ascending),
    ("beam_step", "Multiplies the prefix score by the token's log-prob instead of adding them.", beam_multiplies),
    ("beam_step", "Selects correctly but returns the new token's log-prob as the score, not the running total.",
     beam_returns_token_logprob),
]

CORRECT = [
    ("noam_lr", "Two branches: step * warmup^-1.5 / sqrt(d_model) up to the peak, then 1 / sqrt(step * d_model).",
     noam_piecewise),
    ("noam_lr", "The peak rate (d_model * warmup)^-0.5 times min(step / warmup, sqrt(warmup / step)).", noam_factored),
    ("noam_lr", "math.pow for every power and a conditional expression for the min.", noam_pow),

    ("label_smoothed_loss", "Builds the smoothed target distribution q explicitly, -sum q log p, boolean-mask mean.",
     ls_explicit_target_distribution),
    ("label_smoothed_loss", "F.cross_entropy with label_smoothing and ignore_index=pad_id on flattened positions.",
     ls_torch_cross_entropy),
    ("label_smoothed_loss", "Log-sum-exp form: lse - (1 - eps) z_y - eps mean(z), masked with torch.where.", ls_logsumexp),

    ("beam_step", "Each beam's best tokens first, then the best beam_size of those.", beam_two_stage),
    ("beam_step", "Descending sort of all candidates, torch.div(floor) and remainder for beam and token.", beam_sort_divmod),
    ("beam_step", "topk over the flattened candidates, torch.unravel_index for (beam, token).", beam_unravel),
]
