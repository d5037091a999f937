"""Typical learner mistakes (SLIPS) and alternative right answers (CORRECT) for lesson 04,
the attention zoo.

Exercises and their signatures, as in the lesson:
    cosine_score(s, h, beta) -> (B, T)                   beta * cos(s, h_i)
    additive_score(s, h, W_a, v_a) -> (B, T)             from W_s s and W_h h, broadcast over T
    location_score(s, W_a, T) -> (B, T)                  the first T entries of W_a s
    general_score(s, h, W_a) -> (B, T)                   s^T W_a h_i, W_a (d_s, d_h)
    dot_score(s, h) -> (B, T)                            s^T h_i
    scaled_dot_score(s, h) -> (B, T)                     s^T h_i / sqrt(d)
    local_p(e, mask, s, W_p, v_p, S, D) -> p (B,), alpha (B, T)
    reinforce_loss(log_alpha, sampled, reward, baseline) -> scalar

Each slip has exactly one thing wrong, marked `# slip:` on that line.
"""
import math

import torch
import torch.nn.functional as F

from course_utils.masks import masked_softmax

# =====================================================================================
# cosine_score
# =====================================================================================

def cos_no_beta(s, h, beta):
    dot = torch.einsum("bd,btd->bt", s, h)
    return dot / (s.norm(dim=-1, keepdim=True) * h.norm(dim=-1) + 1e-8)          # slip: beta forgotten


def cos_whole_h_norm(s, h, beta):
    dot = torch.einsum("bd,btd->bt", s, h)
    return beta * dot / (s.norm(dim=-1, keepdim=True) * h.norm() + 1e-8)         # slip: norm of the whole tensor h


def cos_squared_norms(s, h, beta):
    dot = torch.einsum("bd,btd->bt", s, h)
    return beta * dot / ((s * s).sum(-1, keepdim=True) * (h * h).sum(-1) + 1e-8)  # slip: squared norms (no sqrt)


def cos_only_h_normalised(s, h, beta):
    dot = torch.einsum("bd,btd->bt", s, h)
    return beta * dot / (h.norm(dim=-1) + 1e-8)                                  # slip: divides by |h_i| only


def cos_softmax(s, h, beta):
    dot = torch.einsum("bd,btd->bt", s, h)
    return torch.softmax(beta * dot / (s.norm(dim=-1, keepdim=True) * h.norm(dim=-1) + 1e-8), dim=-1)  # slip: returns weights


def cos_mean_not_sum(s, h, beta):
    dot = (s[:, None, :] * h).mean(dim=-1)                                       # slip: mean instead of sum
    return beta * dot / (s.norm(dim=-1, keepdim=True) * h.norm(dim=-1) + 1e-8)


def cos_no_keepdim(s, h, beta):
    dot = torch.einsum("bd,btd->bt", s, h)
    return beta * dot / (s.norm(dim=-1) * h.norm(dim=-1) + 1e-8)                 # slip: |s| (B,) broadcasts against the T axis


def cos_wrong_dim(s, h, beta):
    return beta * F.cosine_similarity(s[:, None, :], h, dim=1)                   # slip: cosine over the positions axis


# --- right answers ---

def cos_ok_builtin(s, h, beta):
    return beta * F.cosine_similarity(s.unsqueeze(1), h, dim=-1)


def cos_ok_normalize(s, h, beta):
    s_unit = F.normalize(s, dim=-1)
    h_unit = F.normalize(h, dim=-1)
    return beta * (h_unit @ s_unit.unsqueeze(-1)).squeeze(-1)


# =====================================================================================
# additive_score (split W_a, no concatenation)
# =====================================================================================

def add_blocks_swapped(s, h, W_a, v_a):
    d_s = s.shape[-1]
    W_h, W_s = W_a[:, :d_s], W_a[:, d_s:]                                        # slip: the two blocks swapped
    return torch.tanh((s @ W_s.T)[:, None, :] + h @ W_h.T) @ v_a


def add_tanh_each_term(s, h, W_a, v_a):
    d_s = s.shape[-1]
    W_s, W_h = W_a[:, :d_s], W_a[:, d_s:]
    return (torch.tanh(s @ W_s.T)[:, None, :] + torch.tanh(h @ W_h.T)) @ v_a     # slip: tanh on each term, not on the sum


def add_no_tanh(s, h, W_a, v_a):
    d_s = s.shape[-1]
    W_s, W_h = W_a[:, :d_s], W_a[:, d_s:]
    return ((s @ W_s.T)[:, None, :] + h @ W_h.T) @ v_a                           # slip: no tanh


def add_tanh_after_v(s, h, W_a, v_a):
    d_s = s.shape[-1]
    W_s, W_h = W_a[:, :d_s], W_a[:, d_s:]
    return torch.tanh(((s @ W_s.T)[:, None, :] + h @ W_h.T) @ v_a)               # slip: tanh after v_a


def add_softmax(s, h, W_a, v_a):
    d_s = s.shape[-1]
    W_s, W_h = W_a[:, :d_s], W_a[:, d_s:]
    return torch.softmax(torch.tanh((s @ W_s.T)[:, None, :] + h @ W_h.T) @ v_a, dim=-1)  # slip: returns weights


def add_keeps_last_dim(s, h, W_a, v_a):
    d_s = s.shape[-1]
    W_s, W_h = W_a[:, :d_s], W_a[:, d_s:]
    return torch.tanh((s @ W_s.T)[:, None, :] + h @ W_h.T) @ v_a[:, None]        # slip: returns (B, T, 1)


def add_sum_wrong_axis(s, h, W_a, v_a):
    d_s = s.shape[-1]
    W_s, W_h = W_a[:, :d_s], W_a[:, d_s:]
    return (torch.tanh((s @ W_s.T)[:, None, :] + h @ W_h.T) * v_a).sum(dim=1)    # slip: sums over positions


# --- right answers ---

def add_concatenates(s, h, W_a, v_a):   # (catalogued as a slip; the same scores, as the reference computes them)
    B, T, _ = h.shape
    s_h = torch.cat([s[:, None, :].expand(B, T, s.shape[-1]), h], dim=-1)        # [s; h_i] for every position (no split)
    return torch.tanh(s_h @ W_a.T) @ v_a


def add_ok_linear(s, h, W_a, v_a):
    d_s = s.shape[1]
    query = F.linear(s, W_a[:, :d_s])                   # (B, d_a)
    keys = F.linear(h, W_a[:, d_s:])                    # (B, T, d_a)
    return F.linear(torch.tanh(keys + query.unsqueeze(1)), v_a[None])[..., 0]


def add_ok_einsum(s, h, W_a, v_a):
    W_s, W_h = torch.split(W_a, [s.shape[-1], h.shape[-1]], dim=1)
    pre = torch.einsum("ad,bd->ba", W_s, s)[:, None] + torch.einsum("ae,bte->bta", W_h, h)
    return torch.einsum("bta,a->bt", torch.tanh(pre), v_a)


# =====================================================================================
# location_score
# =====================================================================================

def loc_last_T(s, W_a, T):
    return (s @ W_a.T)[:, -T:]                                                   # slip: keeps the last T positions


def loc_from_one(s, W_a, T):
    return (s @ W_a.T)[:, 1:T + 1]                                               # slip: positions counted from 1


def loc_one_short(s, W_a, T):
    return (s @ W_a.T)[:, :T - 1]                                                # slip: off by one, T - 1 positions


def loc_not_transposed_back(s, W_a, T):
    return (W_a @ s.T)[:T]                                                       # slip: returns (T, B)


def loc_softmax(s, W_a, T):
    return torch.softmax(s @ W_a.T, dim=-1)[:, :T]                               # slip: returns softmax weights


def loc_sum_wrong_axis(s, W_a, T):
    return (W_a[None] * s[:, None, :]).sum(dim=1)[:, :T]                         # slip: sums over positions, not features


def loc_no_cut(s, W_a, T):
    return s @ W_a.T                                                             # slip: all max_len positions, not the first T


# --- right answers ---

def loc_ok_slice_rows(s, W_a, T):
    return s @ W_a[:T].T


def loc_ok_linear(s, W_a, T):
    return F.linear(s, W_a[:T])


def loc_ok_einsum(s, W_a, T):
    return torch.einsum("bd,td->bt", s, W_a)[:, :T]


# =====================================================================================
# general_score
# =====================================================================================

def gen_W_transposed(s, h, W_a):
    return torch.einsum("bd,ed,bte->bt", s, W_a, h)                              # slip: uses W_a transposed


def gen_softmax(s, h, W_a):
    return torch.softmax(torch.einsum("bd,de,bte->bt", s, W_a, h), dim=-1)       # slip: returns weights


def gen_scaled(s, h, W_a):
    return torch.einsum("bd,de,bte->bt", s, W_a, h) / math.sqrt(s.shape[-1])     # slip: divides by sqrt(d)


def gen_keeps_last_dim(s, h, W_a):
    return torch.bmm(h, (s @ W_a)[:, :, None])                                   # slip: returns (B, T, 1)


def gen_squeeze_all(s, h, W_a):
    return torch.bmm(h, (s @ W_a)[:, :, None]).squeeze()                         # slip: squeeze() drops B or T when 1


def gen_sum_wrong_axis(s, h, W_a):
    return ((s @ W_a)[:, None, :] * h).sum(dim=1)                                # slip: sums over positions


def gen_cross_batch(s, h, W_a):
    return h @ (s @ W_a).T                                                       # slip: (B, T, B), scores against every batch row


# --- right answers ---

def gen_ok_mul_sum(s, h, W_a):
    return ((s @ W_a).unsqueeze(1) * h).sum(-1)


def gen_ok_bmm(s, h, W_a):
    return torch.bmm(h, (s @ W_a).unsqueeze(-1)).squeeze(-1)


def gen_ok_map_h(s, h, W_a):
    return ((h @ W_a.T) * s[:, None, :]).sum(dim=2)      # W_a h_i first, then the dot with s


# =====================================================================================
# dot_score
# =====================================================================================

def dot_cross_batch(s, h):
    return h @ s.T                                                               # slip: (B, T, B), scores against every batch row


def dot_sum_wrong_axis(s, h):
    return (s[:, None, :] * h).sum(dim=1)                                        # slip: sums over positions


def dot_scaled(s, h):
    return torch.einsum("bd,btd->bt", s, h) / math.sqrt(s.shape[-1])             # slip: scaled like scaled dot


def dot_softmax(s, h):
    return torch.softmax(torch.einsum("bd,btd->bt", s, h), dim=-1)               # slip: returns weights


def dot_keeps_last_dim(s, h):
    return torch.bmm(h, s[:, :, None])                                           # slip: returns (B, T, 1)


def dot_squeeze_all(s, h):
    return torch.bmm(h, s[:, :, None]).squeeze()                                 # slip: squeeze() drops B or T when 1


def dot_mean(s, h):
    return (s[:, None, :] * h).mean(dim=-1)                                      # slip: mean over features, not sum


def dot_einsum_letters(s, h):
    return torch.einsum("bd,bte->bt", s, h)                                      # slip: different letters, sums s and h separately


def dot_no_sum(s, h):
    return s[:, None, :] * h                                                     # slip: forgets to sum, returns (B, T, d)


# --- right answers ---

def dot_ok_mul_sum(s, h):
    return (h * s.unsqueeze(1)).sum(-1)


def dot_ok_matmul(s, h):
    return torch.matmul(s.unsqueeze(1), h.transpose(1, 2)).squeeze(1)


def dot_ok_bmm(s, h):
    return torch.bmm(h, s[..., None])[..., 0]


# =====================================================================================
# scaled_dot_score
# =====================================================================================

def sdot_no_scale(s, h):
    return torch.einsum("bd,btd->bt", s, h)                                      # slip: not scaled


def sdot_by_d(s, h):
    return torch.einsum("bd,btd->bt", s, h) / s.shape[-1]                        # slip: divides by d, not sqrt(d)


def sdot_multiplies(s, h):
    return torch.einsum("bd,btd->bt", s, h) * math.sqrt(s.shape[-1])             # slip: multiplies by sqrt(d)


def sdot_sqrt_T(s, h):
    return torch.einsum("bd,btd->bt", s, h) / math.sqrt(h.shape[1])              # slip: sqrt of the number of positions


def sdot_sqrt_B(s, h):
    return torch.einsum("bd,btd->bt", s, h) / math.sqrt(s.shape[0])              # slip: sqrt of the batch size


def sdot_softmax(s, h):
    return torch.softmax(torch.einsum("bd,btd->bt", s, h) / math.sqrt(s.shape[-1]), dim=-1)  # slip: returns weights


def sdot_precedence(s, h):
    return torch.einsum("bd,btd->bt", s, h) / s.shape[-1] ** 1 / 2               # slip: d ** 1 / 2 is d / 2, not sqrt(d)


def sdot_cross_batch(s, h):
    return (h @ s.T) / math.sqrt(s.shape[-1])                                    # slip: (B, T, B), scores against every batch row


# --- right answers ---

def sdot_ok_scale_query(s, h):
    q = s / math.sqrt(s.shape[-1])
    return (h @ q.unsqueeze(-1)).squeeze(-1)


def sdot_ok_power(s, h):
    return (s.unsqueeze(1) * h).sum(-1) * h.shape[-1] ** -0.5


# =====================================================================================
# local_p
# =====================================================================================

def lp_rounds_p(e, mask, s, W_p, v_p, S, D):
    p = torch.round(S * torch.sigmoid(torch.tanh(s @ W_p.T) @ v_p))             # slip: rounds p_t
    distance = torch.arange(e.shape[-1]) - p[:, None]
    window = distance.abs() <= D
    sigma = D / 2
    alpha = masked_softmax(e, window & mask) * torch.exp(-distance ** 2 / (2 * sigma ** 2))
    return p, alpha


def lp_strict_window(e, mask, s, W_p, v_p, S, D):
    p = S * torch.sigmoid(torch.tanh(s @ W_p.T) @ v_p)
    distance = torch.arange(e.shape[-1]) - p[:, None]
    window = distance.abs() < D                                                  # slip: < D, window too narrow
    sigma = D / 2
    alpha = masked_softmax(e, window & mask) * torch.exp(-distance ** 2 / (2 * sigma ** 2))
    return p, alpha


def lp_sigma_D(e, mask, s, W_p, v_p, S, D):
    p = S * torch.sigmoid(torch.tanh(s @ W_p.T) @ v_p)
    distance = torch.arange(e.shape[-1]) - p[:, None]
    window = distance.abs() <= D
    sigma = D                                                                    # slip: sigma = D, not D / 2
    alpha = masked_softmax(e, window & mask) * torch.exp(-distance ** 2 / (2 * sigma ** 2))
    return p, alpha


def lp_no_factor_two(e, mask, s, W_p, v_p, S, D):
    p = S * torch.sigmoid(torch.tanh(s @ W_p.T) @ v_p)
    distance = torch.arange(e.shape[-1]) - p[:, None]
    window = distance.abs() <= D
    sigma = D / 2
    alpha = masked_softmax(e, window & mask) * torch.exp(-distance ** 2 / sigma ** 2)   # slip: no factor 2 in the Gaussian
    return p, alpha


def lp_ignores_mask(e, mask, s, W_p, v_p, S, D):
    p = S * torch.sigmoid(torch.tanh(s @ W_p.T) @ v_p)
    distance = torch.arange(e.shape[-1]) - p[:, None]
    window = distance.abs() <= D
    sigma = D / 2
    alpha = masked_softmax(e, window) * torch.exp(-distance ** 2 / (2 * sigma ** 2))  # slip: padding mask ignored
    return p, alpha


def lp_global_softmax(e, mask, s, W_p, v_p, S, D):
    p = S * torch.sigmoid(torch.tanh(s @ W_p.T) @ v_p)
    distance = torch.arange(e.shape[-1]) - p[:, None]
    window = distance.abs() <= D
    sigma = D / 2
    alpha = masked_softmax(e, mask) * window * torch.exp(-distance ** 2 / (2 * sigma ** 2))  # slip: softmax over all positions, window applied after
    return p, alpha


def lp_no_gaussian(e, mask, s, W_p, v_p, S, D):
    p = S * torch.sigmoid(torch.tanh(s @ W_p.T) @ v_p)
    distance = torch.arange(e.shape[-1]) - p[:, None]
    window = distance.abs() <= D
    alpha = masked_softmax(e, window & mask)                                     # slip: Gaussian forgotten
    return p, alpha


def lp_no_tanh(e, mask, s, W_p, v_p, S, D):
    p = S * torch.sigmoid((s @ W_p.T) @ v_p)                                     # slip: no tanh in p_t
    distance = torch.arange(e.shape[-1]) - p[:, None]
    window = distance.abs() <= D
    sigma = D / 2
    alpha = masked_softmax(e, window & mask) * torch.exp(-distance ** 2 / (2 * sigma ** 2))
    return p, alpha


def lp_renormalised(e, mask, s, W_p, v_p, S, D):
    p = S * torch.sigmoid(torch.tanh(s @ W_p.T) @ v_p)
    distance = torch.arange(e.shape[-1]) - p[:, None]
    window = distance.abs() <= D
    sigma = D / 2
    alpha = masked_softmax(e, window & mask) * torch.exp(-distance ** 2 / (2 * sigma ** 2))
    alpha = alpha / alpha.sum(dim=-1, keepdim=True).clamp_min(1e-12)             # slip: renormalises after the Gaussian
    return p, alpha


def lp_positions_from_one(e, mask, s, W_p, v_p, S, D):
    p = S * torch.sigmoid(torch.tanh(s @ W_p.T) @ v_p)
    distance = torch.arange(1, e.shape[-1] + 1) - p[:, None]                     # slip: positions counted from 1
    window = distance.abs() <= D
    sigma = D / 2
    alpha = masked_softmax(e, window & mask) * torch.exp(-distance ** 2 / (2 * sigma ** 2))
    return p, alpha


# --- right answers ---

def lp_ok_linear(e, mask, s, W_p, v_p, S, D):
    p = S.to(s.dtype) * torch.sigmoid(F.linear(torch.tanh(F.linear(s, W_p)), v_p[None])[:, 0])
    positions = torch.arange(e.shape[1], dtype=e.dtype, device=e.device)
    offset = positions.unsqueeze(0) - p.unsqueeze(1)
    keep = (offset.abs() <= D) & mask
    gauss = torch.exp(-2.0 * offset.pow(2) / D ** 2)     # 2 sigma^2 = D^2 / 2
    return p, masked_softmax(e, keep) * gauss


def lp_ok_manual_softmax(e, mask, s, W_p, v_p, S, D):
    p = S * torch.sigmoid(torch.einsum("a,ba->b", v_p, torch.tanh(torch.einsum("ad,bd->ba", W_p, s))))
    i = torch.arange(e.shape[-1], device=e.device)[None, :]
    dist = i - p[:, None]
    keep = mask & (dist.abs() <= D)
    x = e.masked_fill(~keep, float("-inf"))
    m = x.amax(-1, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    w = torch.exp(x - m)
    z = w.sum(-1, keepdim=True)
    w = w / torch.where(z > 0, z, torch.ones_like(z))
    sigma = D / 2
    return p, w * torch.exp(-(dist ** 2) / (2 * sigma * sigma))


# =====================================================================================
# reinforce_loss
# =====================================================================================

def rl_no_detach(log_alpha, sampled, reward, baseline):
    log_p = log_alpha[torch.arange(len(sampled)), sampled]
    advantage = reward - baseline                                                # slip: advantage not detached
    return -(advantage * log_p).mean()


def rl_wrong_sign(log_alpha, sampled, reward, baseline):
    log_p = log_alpha[torch.arange(len(sampled)), sampled]
    advantage = (reward - baseline).detach()
    return (advantage * log_p).mean()                                            # slip: minus sign forgotten


def rl_sum(log_alpha, sampled, reward, baseline):
    log_p = log_alpha[torch.arange(len(sampled)), sampled]
    advantage = (reward - baseline).detach()
    return -(advantage * log_p).sum()                                            # slip: sum over the batch, not mean


def rl_index_columns(log_alpha, sampled, reward, baseline):
    log_p = log_alpha[:, sampled]                                                # slip: (B, B), every row at every sample
    advantage = (reward - baseline).detach()
    return -(advantage * log_p).mean()


def rl_no_baseline(log_alpha, sampled, reward, baseline):
    log_p = log_alpha[torch.arange(len(sampled)), sampled]
    advantage = reward.detach()                                                  # slip: baseline not subtracted
    return -(advantage * log_p).mean()


def rl_probability(log_alpha, sampled, reward, baseline):
    log_p = log_alpha.exp()[torch.arange(len(sampled)), sampled]                 # slip: uses alpha, not log alpha
    advantage = (reward - baseline).detach()
    return -(advantage * log_p).mean()


def rl_detach_all(log_alpha, sampled, reward, baseline):
    log_p = log_alpha[torch.arange(len(sampled)), sampled]
    advantage = (reward - baseline).detach()
    return -(advantage * log_p).mean().detach()                                  # slip: detaches the loss, no gradient


def rl_all_positions(log_alpha, sampled, reward, baseline):
    advantage = (reward - baseline).detach()
    return -(advantage[:, None] * log_alpha).mean()                              # slip: uses every position, not the sampled one


def rl_gather_no_squeeze(log_alpha, sampled, reward, baseline):
    log_p = log_alpha.gather(1, sampled[:, None])                                # slip: (B, 1) broadcasts with (B,) to (B, B)
    advantage = (reward - baseline).detach()
    return -(advantage * log_p).mean()


def rl_baseline_trained(log_alpha, sampled, reward, baseline):
    log_p = log_alpha[torch.arange(len(sampled)), sampled]
    advantage = reward.detach() - baseline                                       # slip: the baseline is not detached
    return -(advantage * log_p).mean()


# --- right answers ---

def rl_ok_gather(log_alpha, sampled, reward, baseline):
    log_p = log_alpha.gather(1, sampled.long().unsqueeze(1)).squeeze(1)
    advantage = reward.detach() - torch.as_tensor(baseline).detach()
    return -(advantage * log_p).sum() / log_p.shape[0]


def rl_ok_nll(log_alpha, sampled, reward, baseline):
    neg_log_p = F.nll_loss(log_alpha, sampled.long(), reduction="none")           # -log alpha[n, i_n]
    with torch.no_grad():
        advantage = reward - baseline
    return torch.mean(advantage * neg_log_p)


def rl_ok_onehot(log_alpha, sampled, reward, baseline):
    onehot = F.one_hot(sampled.long(), log_alpha.shape[-1]).to(log_alpha.dtype)
    log_p = (onehot * log_alpha).sum(-1)
    return -torch.mean((reward - baseline).detach() * log_p)


# =====================================================================================

SLIPS = [
    ("cosine_score", "forgets to multiply by beta", cos_no_beta),
    ("cosine_score", "divides by the norm of the whole tensor h instead of each h_i", cos_whole_h_norm),
    ("cosine_score", "divides by the squared norms (forgets the square root)", cos_squared_norms),
    ("cosine_score", "divides by the norm of h_i only, not by the norm of s", cos_only_h_normalised),
    ("cosine_score", "applies a softmax and returns weights instead of scores", cos_softmax),
    ("cosine_score", "averages the products instead of summing them in the dot product", cos_mean_not_sum),
    ("cosine_score", "takes the norm of s without keepdim, so it broadcasts against the positions", cos_no_keepdim),
    ("cosine_score", "computes the cosine along the positions axis instead of the features", cos_wrong_dim),

    ("additive_score", "swaps the two blocks of W_a (uses the h block for s and the s block for h)", add_blocks_swapped),
    ("additive_score", "applies tanh to each term separately instead of to their sum", add_tanh_each_term),
    ("additive_score", "forgets the tanh", add_no_tanh),
    ("additive_score", "applies the tanh after multiplying by v_a", add_tanh_after_v),
    ("additive_score", "applies a softmax and returns weights instead of scores", add_softmax),
    ("additive_score", "multiplies by v_a as a column, returning shape (B, T, 1)", add_keeps_last_dim),
    ("additive_score", "sums the v_a product over the positions instead of the hidden units", add_sum_wrong_axis),

    ("location_score", "keeps the last T scores instead of the first T", loc_last_T),
    ("location_score", "counts the positions from 1, taking entries 1 to T", loc_from_one),
    ("location_score", "keeps only T - 1 positions", loc_one_short),
    ("location_score", "computes W_a s as (max_len, B) and returns it as (T, B) without transposing back", loc_not_transposed_back),
    ("location_score", "applies a softmax and returns weights instead of scores", loc_softmax),
    ("location_score", "sums the product over the positions instead of the features", loc_sum_wrong_axis),
    ("location_score", "returns the scores of all max_len positions, not only the first T", loc_no_cut),

    ("general_score", "uses W_a transposed", gen_W_transposed),
    ("general_score", "applies a softmax and returns weights instead of scores", gen_softmax),
    ("general_score", "divides by sqrt(d) as in scaled dot", gen_scaled),
    ("general_score", "returns the bmm result of shape (B, T, 1)", gen_keeps_last_dim),
    ("general_score", "squeezes every size-1 axis, dropping B or T when it is 1", gen_squeeze_all),
    ("general_score", "sums the product over the positions instead of the features", gen_sum_wrong_axis),
    ("general_score", "multiplies h @ (s W_a).T, scoring against every batch row, shape (B, T, B)", gen_cross_batch),

    ("dot_score", "multiplies h @ s.T, scoring against every batch row, shape (B, T, B)", dot_cross_batch),
    ("dot_score", "sums the product over the positions instead of the features", dot_sum_wrong_axis),
    ("dot_score", "divides by sqrt(d) as in scaled dot", dot_scaled),
    ("dot_score", "applies a softmax and returns weights instead of scores", dot_softmax),
    ("dot_score", "returns the bmm result of shape (B, T, 1)", dot_keeps_last_dim),
    ("dot_score", "squeezes every size-1 axis, dropping B or T when it is 1", dot_squeeze_all),
    ("dot_score", "averages the products over the features instead of summing", dot_mean),
    ("dot_score", "uses different einsum letters for the features of s and h", dot_einsum_letters),
    ("dot_score", "forgets to sum the products, returning (B, T, d)", dot_no_sum),

    ("scaled_dot_score", "forgets the scaling", sdot_no_scale),
    ("scaled_dot_score", "divides by d instead of sqrt(d)", sdot_by_d),
    ("scaled_dot_score", "multiplies by sqrt(d) instead of dividing", sdot_multiplies),
    ("scaled_dot_score", "divides by the square root of the number of positions T", sdot_sqrt_T),
    ("scaled_dot_score", "divides by the square root of the batch size", sdot_sqrt_B),
    ("scaled_dot_score", "applies a softmax and returns weights instead of scores", sdot_softmax),
    ("scaled_dot_score", "writes d ** 1 / 2, which is d / 2, for the square root", sdot_precedence),
    ("scaled_dot_score", "multiplies h @ s.T, scoring against every batch row, shape (B, T, B)", sdot_cross_batch),

    ("local_p", "rounds the predicted position p", lp_rounds_p),
    ("local_p", "uses a strict window |i - p| < D", lp_strict_window),
    ("local_p", "uses sigma = D instead of D / 2", lp_sigma_D),
    ("local_p", "forgets the factor 2 in the Gaussian's denominator", lp_no_factor_two),
    ("local_p", "ignores the padding mask (softmax over the window only)", lp_ignores_mask),
    ("local_p", "takes the softmax over all real positions and cuts the window afterwards", lp_global_softmax),
    ("local_p", "forgets to multiply by the Gaussian", lp_no_gaussian),
    ("local_p", "forgets the tanh in the predicted position", lp_no_tanh),
    ("local_p", "renormalises the weights to sum to 1 after the Gaussian", lp_renormalised),
    ("local_p", "counts the positions from 1 instead of 0", lp_positions_from_one),

    ("reinforce_loss", "does not detach the advantage, so gradient flows into the reward and baseline", rl_no_detach),
    ("reinforce_loss", "forgets the minus sign", rl_wrong_sign),
    ("reinforce_loss", "sums over the batch instead of averaging", rl_sum),
    ("reinforce_loss", "indexes log_alpha[:, sampled], taking every sampled position in every row", rl_index_columns),
    ("reinforce_loss", "forgets to subtract the baseline", rl_no_baseline),
    ("reinforce_loss", "uses the probability alpha instead of its log", rl_probability),
    ("reinforce_loss", "detaches the whole loss, so nothing gets a gradient", rl_detach_all),
    ("reinforce_loss", "weights every position's log-probability instead of the sampled one", rl_all_positions),
    ("reinforce_loss", "gathers without squeezing, so (B, 1) times (B,) broadcasts to (B, B)", rl_gather_no_squeeze),
    ("reinforce_loss", "detaches the reward but not the baseline, so a learned baseline gets trained", rl_baseline_trained),
    ("additive_score", "builds the concatenation [s; h_i] for every position as in lesson 03", add_concatenates),
]

CORRECT = [
    ("cosine_score", "torch's cosine_similarity with s unsqueezed, times beta", cos_ok_builtin),
    ("cosine_score", "normalises s and h first, then a batched dot product", cos_ok_normalize),

    ("additive_score", "F.linear with the two column blocks of W_a, then v_a as a linear layer", add_ok_linear),
    ("additive_score", "torch.split of W_a by the sizes of s and h, einsum everywhere", add_ok_einsum),
    # catalogued as a slip, but it gives the scores the exercise asks for: the check's reference
    # (course_utils.scores.additive_score) builds this same concatenation, and lesson04h lists it as right

    ("location_score", "slices the first T rows of W_a before the product", loc_ok_slice_rows),
    ("location_score", "F.linear with the first T rows of W_a", loc_ok_linear),
    ("location_score", "einsum over all rows, then the first T columns", loc_ok_einsum),

    ("general_score", "maps s by W_a, then multiplies with h and sums the features", gen_ok_mul_sum),
    ("general_score", "bmm of h with the mapped s as a column, squeezing the last axis", gen_ok_bmm),
    ("general_score", "maps every h_i by W_a first, then the dot product with s", gen_ok_map_h),

    ("dot_score", "broadcast product and sum over the features", dot_ok_mul_sum),
    ("dot_score", "s as a row times h transposed, squeezing axis 1", dot_ok_matmul),
    ("dot_score", "bmm of h with s as a column, taking the last axis' only entry", dot_ok_bmm),

    ("scaled_dot_score", "scales the query by 1/sqrt(d) before the product", sdot_ok_scale_query),
    ("scaled_dot_score", "multiplies by d ** -0.5", sdot_ok_power),

    ("local_p", "F.linear for p, Gaussian written as exp(-2 (i - p)^2 / D^2)", lp_ok_linear),
    ("local_p", "einsum for p, a hand-written stable masked softmax over the window", lp_ok_manual_softmax),

    ("reinforce_loss", "gather and squeeze, detaches reward and baseline, sum divided by B", rl_ok_gather),
    ("reinforce_loss", "nll_loss without reduction gives -log alpha[sampled], advantage under no_grad", rl_ok_nll),
    ("reinforce_loss", "one-hot of the samples picks the log-weights", rl_ok_onehot),
]
