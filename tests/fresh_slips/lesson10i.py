"""Typical learner answers for lesson 10 (translation on Multi30k): slips and right answers.

Exercises (all plain functions, the notebook's signatures):
    noam_lr(step, d_model, warmup_steps) -> float            (plain Python numbers in and out, step >= 1)
    label_smoothed_loss(logits, target, smoothing, pad_id)   logits (B, T, V), target (B, T) -> 0-d tensor
    beam_step(scores, log_probs, beam_size)                  scores (K,), log_probs (K, V)
        -> (new_scores (beam_size,) best first, origin (beam_size,), token (beam_size,)) integer indices

Each slip has ONE thing wrong, marked `# slip:`. SLIPS and CORRECT are lists of
(exercise, description, answer).
"""
import math

import torch
import torch.nn.functional as F


# ==============================================================================================
# noam_lr
# ==============================================================================================
def noam_no_dmodel(step, d_model, warmup_steps):
    return min(step ** -0.5, step * warmup_steps ** -1.5)  # slip: the d_model ** -0.5 factor forgotten


def noam_dmodel_positive(step, d_model, warmup_steps):
    return d_model ** 0.5 * min(step ** -0.5, step * warmup_steps ** -1.5)  # slip: d_model ** 0.5 instead of ** -0.5


def noam_max(step, d_model, warmup_steps):
    return d_model ** -0.5 * max(step ** -0.5, step * warmup_steps ** -1.5)  # slip: max instead of min


def noam_warmup_exponent(step, d_model, warmup_steps):
    return d_model ** -0.5 * min(step ** -0.5, step * warmup_steps ** -0.5)  # slip: warmup_steps ** -0.5 instead of ** -1.5


def noam_step_exponent_sign(step, d_model, warmup_steps):
    return d_model ** -0.5 * min(step ** 0.5, step * warmup_steps ** -1.5)  # slip: step ** 0.5 instead of ** -0.5 (never decays)


def noam_off_by_one(step, d_model, warmup_steps):
    step = step + 1  # slip: treats step as 0-based and adds 1
    return d_model ** -0.5 * min(step ** -0.5, step * warmup_steps ** -1.5)


def noam_precedence(step, d_model, warmup_steps):
    return d_model ** -0.5 * min(step ** -1/2, step * warmup_steps ** -1.5)  # slip: step ** -1/2 is (step ** -1) / 2, not step ** -0.5


def noam_grouped(step, d_model, warmup_steps):
    return d_model ** -0.5 * min(step ** -0.5, (step * warmup_steps) ** -1.5)  # slip: (step * warmup) ** -1.5 instead of step * warmup ** -1.5


def noam_returns_tensor(step, d_model, warmup_steps):
    step_t = torch.tensor(float(step))
    return d_model ** -0.5 * torch.minimum(step_t ** -0.5, step_t * warmup_steps ** -1.5)  # slip: returns a 0-d tensor, not a plain Python number


# --- right answers ---
def noam_sqrt_form(step, d_model, warmup_steps):
    return min(1 / math.sqrt(step), step / warmup_steps ** 1.5) / math.sqrt(d_model)


def noam_branches(step, d_model, warmup_steps):
    if step < warmup_steps:
        return step / (math.sqrt(d_model) * warmup_steps * math.sqrt(warmup_steps))   # linear warm-up
    return 1.0 / math.sqrt(d_model * step)                                            # inverse square root


# ==============================================================================================
# label_smoothed_loss
# ==============================================================================================
def ls_no_pad_mask(logits, target, smoothing, pad_id):
    log_p = torch.log_softmax(logits, dim=-1)
    nll = -log_p.gather(-1, target.unsqueeze(-1)).squeeze(-1)
    uniform = -log_p.mean(dim=-1)
    loss = (1 - smoothing) * nll + smoothing * uniform
    return loss.mean()  # slip: mean over every position, padding included


def ls_divide_by_batch(logits, target, smoothing, pad_id):
    log_p = torch.log_softmax(logits, dim=-1)
    nll = -log_p.gather(-1, target.unsqueeze(-1)).squeeze(-1)
    uniform = -log_p.mean(dim=-1)
    loss = (1 - smoothing) * nll + smoothing * uniform
    keep = (target != pad_id).float()
    return (loss * keep).sum() / target.size(0)  # slip: divided by the number of sentences, not of real tokens


def ls_divide_by_all_positions(logits, target, smoothing, pad_id):
    log_p = torch.log_softmax(logits, dim=-1)
    nll = -log_p.gather(-1, target.unsqueeze(-1)).squeeze(-1)
    uniform = -log_p.mean(dim=-1)
    loss = (1 - smoothing) * nll + smoothing * uniform
    keep = (target != pad_id).float()
    return (loss * keep).sum() / keep.numel()  # slip: padding zeroed but still counted in the denominator


def ls_other_tokens_only(logits, target, smoothing, pad_id):
    log_p = torch.log_softmax(logits, dim=-1)
    V = logits.size(-1)
    nll = -log_p.gather(-1, target.unsqueeze(-1)).squeeze(-1)
    others = (-log_p.sum(dim=-1) - nll) / (V - 1)  # slip: ε spread over the V-1 other tokens, the true one excluded
    loss = (1 - smoothing) * nll + smoothing * others
    keep = (target != pad_id).float()
    return (loss * keep).sum() / keep.sum()


def ls_log_of_softmax(logits, target, smoothing, pad_id):
    log_p = torch.softmax(logits, dim=-1).log()  # slip: log of softmax, -inf where probabilities underflow
    nll = -log_p.gather(-1, target.unsqueeze(-1)).squeeze(-1)
    uniform = -log_p.mean(dim=-1)
    loss = (1 - smoothing) * nll + smoothing * uniform
    keep = (target != pad_id).float()
    return (loss * keep).sum() / keep.sum()


def ls_uniform_sum(logits, target, smoothing, pad_id):
    log_p = torch.log_softmax(logits, dim=-1)
    nll = -log_p.gather(-1, target.unsqueeze(-1)).squeeze(-1)
    uniform = -log_p.sum(dim=-1)  # slip: sum over the vocabulary instead of the mean (1/V missing)
    loss = (1 - smoothing) * nll + smoothing * uniform
    keep = (target != pad_id).float()
    return (loss * keep).sum() / keep.sum()


def ls_softmax_wrong_axis(logits, target, smoothing, pad_id):
    log_p = torch.log_softmax(logits, dim=1)  # slip: log-softmax over the time axis, not the vocabulary
    nll = -log_p.gather(-1, target.unsqueeze(-1)).squeeze(-1)
    uniform = -log_p.mean(dim=-1)
    loss = (1 - smoothing) * nll + smoothing * uniform
    keep = (target != pad_id).float()
    return (loss * keep).sum() / keep.sum()


def ls_no_one_minus_eps(logits, target, smoothing, pad_id):
    log_p = torch.log_softmax(logits, dim=-1)
    nll = -log_p.gather(-1, target.unsqueeze(-1)).squeeze(-1)
    uniform = -log_p.mean(dim=-1)
    loss = nll + smoothing * uniform  # slip: the true token's term not scaled by (1 - ε)
    keep = (target != pad_id).float()
    return (loss * keep).sum() / keep.sum()


def ls_smoothing_over_padding(logits, target, smoothing, pad_id):
    log_p = torch.log_softmax(logits, dim=-1)
    nll = F.nll_loss(log_p.transpose(1, 2), target, ignore_index=pad_id)
    uniform = -log_p.mean(dim=-1).mean()  # slip: the smoothing term averaged over all positions, padding included
    return (1 - smoothing) * nll + smoothing * uniform


def ls_hardcoded_pad(logits, target, smoothing, pad_id):
    log_p = torch.log_softmax(logits, dim=-1)
    nll = -log_p.gather(-1, target.unsqueeze(-1)).squeeze(-1)
    uniform = -log_p.mean(dim=-1)
    loss = (1 - smoothing) * nll + smoothing * uniform
    keep = (target != 0).float()  # slip: padding id hard-coded to 0 instead of pad_id
    return (loss * keep).sum() / keep.sum()


# --- right answers ---
def ls_cross_entropy(logits, target, smoothing, pad_id):
    V = logits.size(-1)
    return F.cross_entropy(logits.reshape(-1, V), target.reshape(-1), ignore_index=pad_id,
                           label_smoothing=smoothing)


def ls_target_distribution(logits, target, smoothing, pad_id):
    """The smoothed target q written out, cross-entropy -sum q log p, mean over the real tokens."""
    V = logits.size(-1)
    log_p = logits.log_softmax(-1)
    q = torch.full_like(log_p, smoothing / V)
    q.scatter_add_(-1, target.unsqueeze(-1), torch.full_like(log_p[..., :1], 1 - smoothing))
    per_token = -(q * log_p).sum(-1)                       # (B, T)
    return per_token[target != pad_id].mean()


def ls_logsumexp(logits, target, smoothing, pad_id):
    """-log p(v) = logsumexp(z) - z_v; keep only the real tokens first."""
    keep = target != pad_id
    z, y = logits[keep], target[keep]                      # (n, V), (n,)
    lse = torch.logsumexp(z, dim=-1)
    nll = lse - z.gather(1, y[:, None]).squeeze(1)
    uniform = lse - z.mean(dim=-1)
    return ((1 - smoothing) * nll + smoothing * uniform).mean()


# ==============================================================================================
# beam_step
# ==============================================================================================
def beam_scores_ignored(scores, log_probs, beam_size):
    V = log_probs.size(-1)
    new_scores, index = log_probs.flatten().topk(beam_size)  # slip: the prefixes' scores are not added
    return new_scores, index // V, index % V


def beam_origin_token_swapped(scores, log_probs, beam_size):
    V = log_probs.size(-1)
    new_scores, index = (scores.unsqueeze(-1) + log_probs).flatten().topk(beam_size)
    return new_scores, index % V, index // V  # slip: origin and token swapped


def beam_divide_by_beams(scores, log_probs, beam_size):
    K = log_probs.size(0)
    new_scores, index = (scores.unsqueeze(-1) + log_probs).flatten().topk(beam_size)
    return new_scores, index // K, index % K  # slip: flat index split by the number of beams, not the vocabulary size


def beam_true_division(scores, log_probs, beam_size):
    V = log_probs.size(-1)
    new_scores, index = (scores.unsqueeze(-1) + log_probs).flatten().topk(beam_size)
    return new_scores, index / V, index % V  # slip: true division: origin is a float, not an integer index


def beam_smallest(scores, log_probs, beam_size):
    V = log_probs.size(-1)
    new_scores, index = (scores.unsqueeze(-1) + log_probs).flatten().topk(beam_size, largest=False)  # slip: keeps the lowest scores
    return new_scores, index // V, index % V


def beam_best_per_beam(scores, log_probs, beam_size):
    best, token = (scores.unsqueeze(-1) + log_probs).max(dim=-1)  # slip: one extension per beam at most (its best token), then the best beams
    new_scores, origin = best.topk(beam_size)
    return new_scores, origin, token[origin]


def beam_returns_token_logprob(scores, log_probs, beam_size):
    V = log_probs.size(-1)
    _, index = (scores.unsqueeze(-1) + log_probs).flatten().topk(beam_size)
    return log_probs.flatten()[index], index // V, index % V  # slip: returns the token's log-prob, not the prefix's total score


def beam_wrong_broadcast(scores, log_probs, beam_size):
    V = log_probs.size(-1)
    new_scores, index = (scores + log_probs).flatten().topk(beam_size)  # slip: scores (K,) broadcast along the vocabulary axis (no unsqueeze)
    return new_scores, index // V, index % V


def beam_in_place(scores, log_probs, beam_size):
    V = log_probs.size(-1)
    log_probs += scores.unsqueeze(-1)  # slip: adds the scores into the caller's log_probs in place
    new_scores, index = log_probs.flatten().topk(beam_size)
    return new_scores, index // V, index % V


# --- right answers ---
def beam_unravel(scores, log_probs, beam_size):
    candidates = scores[:, None] + log_probs                          # (K, V)
    new_scores, flat = torch.topk(candidates.reshape(-1), beam_size)
    origin, token = torch.unravel_index(flat, candidates.shape)
    return new_scores, origin, token


def beam_two_stage(scores, log_probs, beam_size):
    """The best beam_size tokens of each beam first (enough: no beam can give more survivors), then
    the best beam_size of those K * beam_size."""
    k = min(beam_size, log_probs.size(-1))
    per_beam, per_token = (scores.unsqueeze(1) + log_probs).topk(k, dim=1)   # (K, k)
    new_scores, flat = per_beam.reshape(-1).topk(beam_size)
    origin = torch.div(flat, k, rounding_mode="floor")
    return new_scores, origin, per_token.reshape(-1)[flat]


def beam_batched(scores, log_probs, beam_size):
    """Written for any leading axes (..., K) and (..., K, V)."""
    V = log_probs.shape[-1]
    total = log_probs + scores[..., None]
    new_scores, flat = total.flatten(-2).topk(beam_size, dim=-1)
    return new_scores, torch.div(flat, V, rounding_mode="floor"), torch.remainder(flat, V)


SLIPS = [
    ("noam_lr", "the d_model ** -0.5 factor forgotten", noam_no_dmodel),
    ("noam_lr", "d_model ** 0.5 instead of d_model ** -0.5", noam_dmodel_positive),
    ("noam_lr", "max instead of min of the two branches", noam_max),
    ("noam_lr", "warm-up branch uses warmup_steps ** -0.5 instead of ** -1.5", noam_warmup_exponent),
    ("noam_lr", "decay branch uses step ** 0.5 instead of step ** -0.5", noam_step_exponent_sign),
    ("noam_lr", "adds 1 to the step as if it were 0-based", noam_off_by_one),
    ("noam_lr", "writes step ** -1/2, which Python reads as (step ** -1) / 2", noam_precedence),
    ("noam_lr", "writes (step * warmup_steps) ** -1.5 instead of step * warmup_steps ** -1.5", noam_grouped),
    ("noam_lr", "returns a 0-d torch tensor instead of a plain Python number", noam_returns_tensor),

    ("label_smoothed_loss", "mean over all positions, padding included", ls_no_pad_mask),
    ("label_smoothed_loss", "masked sum divided by the batch size instead of the number of real tokens", ls_divide_by_batch),
    ("label_smoothed_loss", "masked sum divided by all B*T positions, padding counted", ls_divide_by_all_positions),
    ("label_smoothed_loss", "ε spread over the V-1 other tokens instead of all V tokens", ls_other_tokens_only),
    ("label_smoothed_loss", "log of softmax instead of log_softmax: infinite when probabilities underflow", ls_log_of_softmax),
    ("label_smoothed_loss", "smoothing term sums -log p over the vocabulary instead of averaging", ls_uniform_sum),
    ("label_smoothed_loss", "log-softmax over the time axis instead of the vocabulary", ls_softmax_wrong_axis),
    ("label_smoothed_loss", "true-token term not multiplied by (1 - ε)", ls_no_one_minus_eps),
    ("label_smoothed_loss", "padding ignored in the true-token term but not in the smoothing term", ls_smoothing_over_padding),
    ("label_smoothed_loss", "padding id hard-coded to 0", ls_hardcoded_pad),

    ("beam_step", "the current beam scores are not added to the log-probabilities", beam_scores_ignored),
    ("beam_step", "origin and token swapped", beam_origin_token_swapped),
    ("beam_step", "flat index divided by the number of beams instead of the vocabulary size", beam_divide_by_beams),
    ("beam_step", "true division: origin comes out as a float tensor", beam_true_division),
    ("beam_step", "keeps the lowest-scoring candidates", beam_smallest),
    ("beam_step", "takes each beam's best token, then the best beams: at most one survivor per beam (errors when K < beam_size)", beam_best_per_beam),
    ("beam_step", "returns the appended token's log-probability instead of the total score", beam_returns_token_logprob),
    ("beam_step", "scores added without unsqueeze: broadcast along the vocabulary (shape error unless K == V; right only when K == 1)", beam_wrong_broadcast),
    ("beam_step", "adds the scores into log_probs in place, changing the caller's tensor", beam_in_place),
]

CORRECT = [
    ("noam_lr", "1/sqrt forms, divided by sqrt(d_model)", noam_sqrt_form),
    ("noam_lr", "if/else on the warm-up instead of min", noam_branches),
    ("label_smoothed_loss", "F.cross_entropy on flattened positions with ignore_index and label_smoothing", ls_cross_entropy),
    ("label_smoothed_loss", "explicit smoothed target distribution q, -sum q log p, mean over real tokens", ls_target_distribution),
    ("label_smoothed_loss", "logsumexp form on the real tokens only", ls_logsumexp),
    ("beam_step", "topk over the flattened candidates and torch.unravel_index", beam_unravel),
    ("beam_step", "per-beam topk first, then topk over the K * beam_size survivors", beam_two_stage),
    ("beam_step", "batched version with flatten(-2), floor division and remainder", beam_batched),
]
