"""Typical learner mistakes (and a few differently written right answers) for lesson 04, the attention zoo.

Exercises, as the checks call them:
    cosine_score       cosine_score(s, h, beta) -> beta * cos(s, h_i), (B, T); s (B, d), h (B, T, d)
    additive_score     additive_score(s, h, W_a, v_a) -> v_a^T tanh(W_s s + W_h h_i), (B, T);
                       W_a (d_a, d_s + d_h) = [W_s W_h], v_a (d_a,)
    location_score     location_score(s, W_a, T) -> (s @ W_a.T)[:, :T], (B, T); W_a (max_len, d_s)
    general_score      general_score(s, h, W_a) -> s^T W_a h_i, (B, T); W_a (d_s, d_h)
    dot_score          dot_score(s, h) -> s^T h_i, (B, T)
    scaled_dot_score   scaled_dot_score(s, h) -> s^T h_i / sqrt(d), (B, T)
    local_p            local_p(e, mask, s, W_p, v_p, S, D) -> p (B,), alpha (B, T);
                       p = S * sigmoid(v_p^T tanh(W_p s)), alpha = softmax over {|i - p| <= D} & mask,
                       times exp(-(i - p)^2 / (2 sigma^2)), sigma = D / 2; p kept real (not rounded)
    reinforce_loss     reinforce_loss(log_alpha, sampled, reward, baseline) -> -mean((r - b).detach() * log_alpha[n, i_n])

Every score is returned before any softmax. Masks are boolean, True = real token.

SLIPS: each answer has exactly one thing wrong, marked with a `# slip:` comment on that line.
CORRECT: right answers written differently from the reference solution.
"""
import math

import torch
import torch.nn.functional as F

from course_utils.masks import masked_softmax

# ---------------------------------------------------------------------------------------------------
# cosine_score(s, h, beta)
# ---------------------------------------------------------------------------------------------------

def cosine_no_s_norm(s, h, beta):
    dot = torch.einsum("bd,btd->bt", s, h)
    return beta * dot / (h.norm(dim=-1) + 1e-8)  # slip: forgets to divide by the norm of s


def cosine_no_h_norm(s, h, beta):
    dot = torch.einsum("bd,btd->bt", s, h)
    return beta * dot / (s.norm(dim=-1, keepdim=True) + 1e-8)  # slip: forgets to divide by the norms of h_i


def cosine_no_beta(s, h, beta):
    dot = torch.einsum("bd,btd->bt", s, h)
    return dot / (s.norm(dim=-1, keepdim=True) * h.norm(dim=-1) + 1e-8)  # slip: drops the key strength beta


def cosine_divide_beta(s, h, beta):
    dot = torch.einsum("bd,btd->bt", s, h)
    return dot / (s.norm(dim=-1, keepdim=True) * h.norm(dim=-1) + 1e-8) / beta  # slip: divides by beta (a temperature) instead of multiplying


def cosine_beta_inside(s, h, beta):
    return F.cosine_similarity((beta * s)[:, None, :], h, dim=-1)  # slip: scales s by beta inside the cosine, where it cancels


def cosine_squared_norms(s, h, beta):
    dot = torch.einsum("bd,btd->bt", s, h)
    return beta * dot / ((s * s).sum(-1, keepdim=True) * (h * h).sum(-1) + 1e-8)  # slip: squared norms (no square root)


def cosine_normalize_h_over_time(s, h, beta):
    s_unit = F.normalize(s, dim=-1)
    h_unit = F.normalize(h, dim=1)  # slip: normalises h along the time axis instead of the feature axis
    return beta * torch.einsum("bd,btd->bt", s_unit, h_unit)


def cosine_whole_tensor_norm(s, h, beta):
    dot = torch.einsum("bd,btd->bt", s, h)
    return beta * dot / (s.norm() * h.norm() + 1e-8)  # slip: norms of the whole tensors instead of per vector


def cosine_default_dim(s, h, beta):
    return beta * F.cosine_similarity(s[:, None, :], h)  # slip: leaves cosine_similarity at its default dim=1 (the time axis)


def cosine_softmax(s, h, beta):
    dot = torch.einsum("bd,btd->bt", s, h)
    e = beta * dot / (s.norm(dim=-1, keepdim=True) * h.norm(dim=-1) + 1e-8)
    return torch.softmax(e, dim=-1)  # slip: returns the softmax weights instead of the scores


# right answers

def cosine_builtin(s, h, beta):
    return beta * F.cosine_similarity(s[:, None, :], h, dim=-1)


def cosine_normalize_first(s, h, beta):
    s_unit = F.normalize(s, dim=-1)                         # (B, d)
    h_unit = F.normalize(h, dim=-1)                         # (B, T, d)
    return beta * (h_unit @ s_unit[:, :, None]).squeeze(-1)


def cosine_explicit_sums(s, h, beta):
    dot = (s[:, None, :] * h).sum(dim=-1)
    norms = (s ** 2).sum(-1, keepdim=True).clamp_min(1e-16).sqrt() * (h ** 2).sum(-1).clamp_min(1e-16).sqrt()
    return beta * dot / norms.clamp_min(1e-8)


# ---------------------------------------------------------------------------------------------------
# additive_score(s, h, W_a, v_a)
# ---------------------------------------------------------------------------------------------------

def additive_split_at_dh(s, h, W_a, v_a):
    d_h = h.shape[-1]
    W_s, W_h = W_a[:, :d_h], W_a[:, d_h:]  # slip: splits the columns of W_a at d_h instead of d_s
    return torch.tanh((s @ W_s.T)[:, None, :] + h @ W_h.T) @ v_a


def additive_halves_swapped(s, h, W_a, v_a):
    d_h = h.shape[-1]
    W_h, W_s = W_a[:, :d_h], W_a[:, d_h:]  # slip: takes the first block of columns for h, as if the concatenation were [h; s]
    return torch.tanh((s @ W_s.T)[:, None, :] + h @ W_h.T) @ v_a


def additive_no_tanh(s, h, W_a, v_a):
    d_s = s.shape[-1]
    W_s, W_h = W_a[:, :d_s], W_a[:, d_s:]
    return ((s @ W_s.T)[:, None, :] + h @ W_h.T) @ v_a  # slip: forgets the tanh


def additive_no_unsqueeze(s, h, W_a, v_a):
    d_s = s.shape[-1]
    W_s, W_h = W_a[:, :d_s], W_a[:, d_s:]
    return torch.tanh(s @ W_s.T + h @ W_h.T) @ v_a  # slip: adds (B, d_a) to (B, T, d_a) without s[:, None]: broadcasts over the wrong axis


def additive_v_inside_tanh(s, h, W_a, v_a):
    d_s = s.shape[-1]
    W_s, W_h = W_a[:, :d_s], W_a[:, d_s:]
    return torch.tanh(((s @ W_s.T)[:, None, :] + h @ W_h.T) @ v_a)  # slip: applies v_a before the tanh


def additive_sum_no_v(s, h, W_a, v_a):
    d_s = s.shape[-1]
    W_s, W_h = W_a[:, :d_s], W_a[:, d_s:]
    return torch.tanh((s @ W_s.T)[:, None, :] + h @ W_h.T).sum(-1)  # slip: sums over d_a instead of the dot product with v_a


def additive_tanh_each_term(s, h, W_a, v_a):
    d_s = s.shape[-1]
    W_s, W_h = W_a[:, :d_s], W_a[:, d_s:]
    return (torch.tanh(s @ W_s.T)[:, None, :] + torch.tanh(h @ W_h.T)) @ v_a  # slip: tanh of each term separately instead of of their sum


def additive_no_transpose_Wh(s, h, W_a, v_a):
    d_s = s.shape[-1]
    W_s, W_h = W_a[:, :d_s], W_a[:, d_s:]
    return torch.tanh((s @ W_s.T)[:, None, :] + h @ W_h) @ v_a  # slip: h @ W_h instead of h @ W_h.T (only runs when d_a == d_h)


def additive_softmax(s, h, W_a, v_a):
    d_s = s.shape[-1]
    W_s, W_h = W_a[:, :d_s], W_a[:, d_s:]
    e = torch.tanh((s @ W_s.T)[:, None, :] + h @ W_h.T) @ v_a
    return torch.softmax(e, dim=-1)  # slip: returns the softmax weights instead of the scores


# right answers

def additive_concat(s, h, W_a, v_a):
    B, T, _ = h.shape
    s_h = torch.cat([s[:, None, :].expand(B, T, s.shape[-1]), h], dim=-1)   # (B, T, d_s + d_h)
    return torch.tanh(F.linear(s_h, W_a)) @ v_a


def additive_einsum(s, h, W_a, v_a):
    d_s = s.shape[-1]
    ws = torch.einsum("ad,bd->ba", W_a[:, :d_s], s)                          # (B, d_a)
    wh = torch.einsum("ad,btd->bta", W_a[:, d_s:], h)                        # (B, T, d_a)
    return torch.einsum("bta,a->bt", torch.tanh(ws.unsqueeze(1) + wh), v_a)


def additive_split_from_end(s, h, W_a, v_a):
    d_h = h.shape[-1]
    W_s, W_h = W_a[:, :-d_h], W_a[:, -d_h:]
    u = F.linear(h, W_h) + F.linear(s, W_s).unsqueeze(-2)
    return (torch.tanh(u) * v_a).sum(-1)


# ---------------------------------------------------------------------------------------------------
# location_score(s, W_a, T)
# ---------------------------------------------------------------------------------------------------

def location_no_slice(s, W_a, T):
    return s @ W_a.T  # slip: returns all max_len positions, never cuts to the first T


def location_last_rows(s, W_a, T):
    return (s @ W_a.T)[:, -T:]  # slip: takes the last T positions instead of the first T


def location_off_by_one(s, W_a, T):
    return (s @ W_a.T)[:, :T - 1]  # slip: off by one, keeps only T - 1 positions


def location_shift_one(s, W_a, T):
    return (s @ W_a.T)[:, 1:T + 1]  # slip: starts at row 1 (positions counted from 1)


def location_slice_batch(s, W_a, T):
    return (s @ W_a.T)[:T]  # slip: slices the batch axis instead of the positions axis


def location_transposed(s, W_a, T):
    return (W_a @ s.T)[:T]  # slip: W_a s for the batch as columns: returns (T, B), transposed


def location_softmax(s, W_a, T):
    return torch.softmax(s @ W_a.T, dim=-1)[:, :T]  # slip: softmax (over all max_len rows) instead of raw scores


def location_scaled(s, W_a, T):
    return (s @ W_a.T)[:, :T] / math.sqrt(s.shape[-1])  # slip: scales by 1/sqrt(d_s) like scaled dot


# right answers

def location_rows_first(s, W_a, T):
    return s @ W_a[:T].T


def location_linear(s, W_a, T):
    return F.linear(s, W_a.narrow(0, 0, T))


def location_einsum(s, W_a, T):
    return torch.einsum("td,bd->bt", W_a[:T], s)


# ---------------------------------------------------------------------------------------------------
# general_score(s, h, W_a)
# ---------------------------------------------------------------------------------------------------

def general_W_transposed(s, h, W_a):
    return torch.einsum("bd,ed,bte->bt", s, W_a, h)  # slip: uses W_a transposed (only runs when d_s == d_h)


def general_no_W(s, h, W_a):
    return torch.einsum("bd,btd->bt", s, h)  # slip: forgets W_a (plain dot product)


def general_scaled(s, h, W_a):
    return torch.einsum("bd,de,bte->bt", s, W_a, h) / math.sqrt(s.shape[-1])  # slip: divides by sqrt(d)


def general_no_unsqueeze(s, h, W_a):
    return (s @ W_a @ h.transpose(1, 2)).squeeze(1)  # slip: no s[:, None]: (B, d_h) @ (B, d_h, T) pairs every s with every h, (B, B, T)


def general_output_transposed(s, h, W_a):
    return torch.einsum("bd,de,bte->tb", s, W_a, h)  # slip: output indices swapped, (T, B)


def general_sum_over_batch(s, h, W_a):
    return torch.einsum("ad,de,bte->bt", s, W_a, h)  # slip: a separate index for s sums s over the batch


def general_first_row_only(s, h, W_a):
    return (h @ (s @ W_a).T)[:, :, 0]  # slip: h @ (s W_a)^T gives (B, T, B); [..., 0] scores every example with s of example 0


def general_softmax(s, h, W_a):
    return torch.softmax(torch.einsum("bd,de,bte->bt", s, W_a, h), dim=-1)  # slip: returns softmax weights instead of scores


# right answers

def general_bmm(s, h, W_a):
    return torch.bmm(h, (s @ W_a).unsqueeze(-1)).squeeze(-1)


def general_map_h_first(s, h, W_a):
    Wh = h @ W_a.T                                          # (B, T, d_s): W_a h_i
    return (Wh * s[:, None, :]).sum(-1)


def general_matmul(s, h, W_a):
    return (s.unsqueeze(1) @ W_a @ h.transpose(-1, -2)).squeeze(1)


# ---------------------------------------------------------------------------------------------------
# dot_score(s, h)
# ---------------------------------------------------------------------------------------------------

def dot_sum_over_time(s, h):
    return (s[:, None, :] * h).sum(1)  # slip: sums over the time axis instead of the feature axis


def dot_mean(s, h):
    return (s[:, None, :] * h).mean(-1)  # slip: mean over the features instead of the sum


def dot_scaled(s, h):
    return torch.einsum("bd,btd->bt", s, h) / math.sqrt(s.shape[-1])  # slip: scales by 1/sqrt(d) (that is scaled dot)


def dot_squeeze_all(s, h):
    return torch.bmm(h, s.unsqueeze(2)).squeeze()  # slip: squeeze() without a dim also drops B = 1 or T = 1


def dot_no_unsqueeze(s, h):
    return (s @ h.transpose(1, 2)).squeeze(1)  # slip: no s[:, None]: every s times every h, (B, B, T)


def dot_first_row_only(s, h):
    return (h @ s.T)[:, :, 0]  # slip: h @ s.T is (B, T, B); [..., 0] uses the s of example 0 for all


def dot_output_transposed(s, h):
    return torch.einsum("bd,btd->tb", s, h)  # slip: output indices swapped, (T, B)


def dot_softmax(s, h):
    return torch.softmax(torch.einsum("bd,btd->bt", s, h), dim=-1)  # slip: returns softmax weights instead of scores


def dot_normalised(s, h):
    return torch.einsum("bd,btd->bt", F.normalize(s, dim=-1), F.normalize(h, dim=-1))  # slip: normalises the vectors (a cosine)


# right answers

def dot_broadcast_sum(s, h):
    return (h * s.unsqueeze(1)).sum(dim=-1)


def dot_bmm(s, h):
    return torch.bmm(h, s[:, :, None])[:, :, 0]


def dot_matmul_row(s, h):
    return (s[:, None, :] @ h.mT).squeeze(-2)


# ---------------------------------------------------------------------------------------------------
# scaled_dot_score(s, h)
# ---------------------------------------------------------------------------------------------------

def scaled_by_d(s, h):
    return torch.einsum("bd,btd->bt", s, h) / s.shape[-1]  # slip: divides by d instead of sqrt(d)


def scaled_precedence(s, h):
    return torch.einsum("bd,btd->bt", s, h) / s.shape[-1] ** 1 / 2  # slip: ** 1 / 2 is d / 2, not sqrt(d) (operator precedence)


def scaled_by_sqrt_T(s, h):
    return torch.einsum("bd,btd->bt", s, h) / math.sqrt(h.shape[1])  # slip: divides by sqrt(T), the number of positions


def scaled_by_sqrt_B(s, h):
    return torch.einsum("bd,btd->bt", s, h) / math.sqrt(s.shape[0])  # slip: divides by sqrt of s.shape[0], the batch size


def scaled_multiply(s, h):
    return torch.einsum("bd,btd->bt", s, h) * math.sqrt(s.shape[-1])  # slip: multiplies by sqrt(d) instead of dividing


def scaled_both_inputs(s, h):
    d = s.shape[-1]
    return torch.einsum("bd,btd->bt", s / math.sqrt(d), h / math.sqrt(d))  # slip: scales both s and h by 1/sqrt(d), so the score by 1/d


def scaled_none(s, h):
    return torch.einsum("bd,btd->bt", s, h)  # slip: forgets the scaling (plain dot)


def scaled_softmax(s, h):
    return torch.softmax(torch.einsum("bd,btd->bt", s, h) / math.sqrt(s.shape[-1]), dim=-1)  # slip: returns softmax weights


def scaled_squeeze_all(s, h):
    return (h @ s.unsqueeze(-1)).squeeze() / math.sqrt(s.shape[-1])  # slip: squeeze() without a dim also drops B = 1 or T = 1


# right answers

def scaled_quarter_power(s, h):
    d = h.shape[-1]
    return ((s / d ** 0.25)[:, None, :] * (h / d ** 0.25)).sum(-1)


def scaled_rsqrt(s, h):
    return torch.bmm(h, s.unsqueeze(-1)).squeeze(-1) * s.size(1) ** -0.5


# ---------------------------------------------------------------------------------------------------
# local_p(e, mask, s, W_p, v_p, S, D)
# ---------------------------------------------------------------------------------------------------

def local_p_rounded(e, mask, s, W_p, v_p, S, D):
    p = torch.round(S * torch.sigmoid(torch.tanh(s @ W_p.T) @ v_p))  # slip: rounds p_t to a whole position
    distance = torch.arange(e.shape[-1]) - p[:, None]
    window = distance.abs() <= D
    sigma = D / 2
    alpha = masked_softmax(e, window & mask) * torch.exp(-distance ** 2 / (2 * sigma ** 2))
    return p, alpha


def local_p_sigma_D(e, mask, s, W_p, v_p, S, D):
    p = S * torch.sigmoid(torch.tanh(s @ W_p.T) @ v_p)
    distance = torch.arange(e.shape[-1]) - p[:, None]
    window = distance.abs() <= D
    sigma = D  # slip: sigma = D instead of D / 2
    alpha = masked_softmax(e, window & mask) * torch.exp(-distance ** 2 / (2 * sigma ** 2))
    return p, alpha


def local_p_no_two(e, mask, s, W_p, v_p, S, D):
    p = S * torch.sigmoid(torch.tanh(s @ W_p.T) @ v_p)
    distance = torch.arange(e.shape[-1]) - p[:, None]
    window = distance.abs() <= D
    sigma = D / 2
    alpha = masked_softmax(e, window & mask) * torch.exp(-distance ** 2 / sigma ** 2)  # slip: forgets the 2 in 2 sigma^2
    return p, alpha


def local_p_strict_window(e, mask, s, W_p, v_p, S, D):
    p = S * torch.sigmoid(torch.tanh(s @ W_p.T) @ v_p)
    distance = torch.arange(e.shape[-1]) - p[:, None]
    window = distance.abs() < D  # slip: strict < drops the window's ends |i - p| = D
    sigma = D / 2
    alpha = masked_softmax(e, window & mask) * torch.exp(-distance ** 2 / (2 * sigma ** 2))
    return p, alpha


def local_p_ignores_mask(e, mask, s, W_p, v_p, S, D):
    p = S * torch.sigmoid(torch.tanh(s @ W_p.T) @ v_p)
    distance = torch.arange(e.shape[-1]) - p[:, None]
    window = distance.abs() <= D
    sigma = D / 2
    alpha = masked_softmax(e, window) * torch.exp(-distance ** 2 / (2 * sigma ** 2))  # slip: ignores the padding mask
    return p, alpha


def local_p_global_softmax(e, mask, s, W_p, v_p, S, D):
    p = S * torch.sigmoid(torch.tanh(s @ W_p.T) @ v_p)
    distance = torch.arange(e.shape[-1]) - p[:, None]
    window = distance.abs() <= D
    sigma = D / 2
    alpha = masked_softmax(e, mask) * window * torch.exp(-distance ** 2 / (2 * sigma ** 2))  # slip: softmax over the whole sentence, then cut to the window
    return p, alpha


def local_p_renormalised(e, mask, s, W_p, v_p, S, D):
    p = S * torch.sigmoid(torch.tanh(s @ W_p.T) @ v_p)
    distance = torch.arange(e.shape[-1]) - p[:, None]
    window = distance.abs() <= D
    sigma = D / 2
    alpha = masked_softmax(e, window & mask) * torch.exp(-distance ** 2 / (2 * sigma ** 2))
    alpha = alpha / alpha.sum(-1, keepdim=True).clamp_min(1e-12)  # slip: renormalises the weights to sum to 1 after the Gaussian
    return p, alpha


def local_p_no_tanh(e, mask, s, W_p, v_p, S, D):
    p = S * torch.sigmoid((s @ W_p.T) @ v_p)  # slip: forgets the tanh in p_t
    distance = torch.arange(e.shape[-1]) - p[:, None]
    window = distance.abs() <= D
    sigma = D / 2
    alpha = masked_softmax(e, window & mask) * torch.exp(-distance ** 2 / (2 * sigma ** 2))
    return p, alpha


def local_p_padded_length(e, mask, s, W_p, v_p, S, D):
    p = (e.shape[-1] - 1) * torch.sigmoid(torch.tanh(s @ W_p.T) @ v_p)  # slip: uses the padded length T - 1 for every row instead of S
    distance = torch.arange(e.shape[-1]) - p[:, None]
    window = distance.abs() <= D
    sigma = D / 2
    alpha = masked_softmax(e, window & mask) * torch.exp(-distance ** 2 / (2 * sigma ** 2))
    return p, alpha


def local_p_positions_from_one(e, mask, s, W_p, v_p, S, D):
    p = S * torch.sigmoid(torch.tanh(s @ W_p.T) @ v_p)
    distance = torch.arange(1, e.shape[-1] + 1) - p[:, None]  # slip: counts positions from 1
    window = distance.abs() <= D
    sigma = D / 2
    alpha = masked_softmax(e, window & mask) * torch.exp(-distance ** 2 / (2 * sigma ** 2))
    return p, alpha


# right answers

def local_p_where_softmax(e, mask, s, W_p, v_p, S, D):
    p = S * torch.sigmoid(torch.tanh(F.linear(s, W_p)) @ v_p)
    i = torch.arange(e.shape[-1], device=e.device, dtype=e.dtype)
    keep = ((i[None, :] - p[:, None]).abs() <= D) & mask
    scores = torch.where(keep, e, torch.full_like(e, float("-inf")))
    weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)           # an empty window -> zeros
    gauss = torch.exp(-2 * (i[None, :] - p[:, None]) ** 2 / D ** 2)   # 2 sigma^2 = D^2 / 2
    return p, weights * gauss


def local_p_explicit_exp(e, mask, s, W_p, v_p, S, D):
    p = torch.sigmoid(torch.einsum("bp,p->b", torch.tanh(torch.einsum("pd,bd->bp", W_p, s)), v_p)) * S
    pos = torch.arange(e.shape[-1], device=e.device).to(e.dtype).expand_as(e)
    dist = pos - p.unsqueeze(-1)
    keep = mask & (dist.abs() <= D)
    top = e.masked_fill(~keep, float("-inf")).amax(-1, keepdim=True).nan_to_num(0.0, neginf=0.0)
    ex = torch.exp((e - top).masked_fill(~keep, float("-inf")))         # 0 outside the window and at padding
    sm = ex / ex.sum(-1, keepdim=True).clamp_min(1e-30)
    sigma = D / 2
    return p, sm * torch.exp(-0.5 * (dist / sigma) ** 2)


# ---------------------------------------------------------------------------------------------------
# reinforce_loss(log_alpha, sampled, reward, baseline)
# ---------------------------------------------------------------------------------------------------

def reinforce_no_detach(log_alpha, sampled, reward, baseline):
    log_p = log_alpha[torch.arange(len(sampled)), sampled]
    advantage = reward - baseline  # slip: forgets .detach(): gradient flows into the reward and the baseline
    return -(advantage * log_p).mean()


def reinforce_no_minus(log_alpha, sampled, reward, baseline):
    log_p = log_alpha[torch.arange(len(sampled)), sampled]
    advantage = (reward - baseline).detach()
    return (advantage * log_p).mean()  # slip: forgets the minus sign (gradient ascent on the loss)


def reinforce_sum(log_alpha, sampled, reward, baseline):
    log_p = log_alpha[torch.arange(len(sampled)), sampled]
    advantage = (reward - baseline).detach()
    return -(advantage * log_p).sum()  # slip: sums over the batch instead of averaging


def reinforce_column_index(log_alpha, sampled, reward, baseline):
    log_p = log_alpha[:, sampled]  # slip: log_alpha[:, sampled] is (B, B): every row at every sampled position
    advantage = (reward - baseline).detach()
    return -(advantage * log_p).mean()


def reinforce_no_baseline(log_alpha, sampled, reward, baseline):
    log_p = log_alpha[torch.arange(len(sampled)), sampled]
    advantage = reward.detach()  # slip: ignores the baseline
    return -(advantage * log_p).mean()


def reinforce_plus_baseline(log_alpha, sampled, reward, baseline):
    log_p = log_alpha[torch.arange(len(sampled)), sampled]
    advantage = (reward + baseline).detach()  # slip: adds the baseline instead of subtracting it
    return -(advantage * log_p).mean()


def reinforce_exp(log_alpha, sampled, reward, baseline):
    log_p = log_alpha.exp()[torch.arange(len(sampled)), sampled]  # slip: uses alpha (exp of log_alpha) instead of log alpha
    advantage = (reward - baseline).detach()
    return -(advantage * log_p).mean()


def reinforce_all_positions(log_alpha, sampled, reward, baseline):
    advantage = (reward - baseline).detach()
    return -(advantage[:, None] * log_alpha).mean()  # slip: averages over all positions instead of the sampled one


def reinforce_baseline_only_detached(log_alpha, sampled, reward, baseline):
    log_p = log_alpha[torch.arange(len(sampled)), sampled]
    advantage = reward - baseline.detach()  # slip: detaches the baseline only; gradient still flows into the reward
    return -(advantage * log_p).mean()


def reinforce_product_of_means(log_alpha, sampled, reward, baseline):
    log_p = log_alpha[torch.arange(len(sampled)), sampled]
    advantage = (reward - baseline).detach()
    return -advantage.mean() * log_p.mean()  # slip: product of the means instead of the mean of the products


# right answers

def reinforce_gather(log_alpha, sampled, reward, baseline):
    log_p = log_alpha.gather(1, sampled.long().unsqueeze(1)).squeeze(1)
    with torch.no_grad():
        advantage = reward - baseline
    return -(advantage * log_p).mean()


def reinforce_nll(log_alpha, sampled, reward, baseline):
    nll = F.nll_loss(log_alpha, sampled.long(), reduction="none")       # -log alpha[n, i_n]
    return (nll * (reward - baseline).detach()).sum() / len(sampled)


def reinforce_one_hot(log_alpha, sampled, reward, baseline):
    one_hot = F.one_hot(sampled.long(), log_alpha.shape[-1]).to(log_alpha.dtype)
    log_p = (one_hot * log_alpha).sum(-1)
    return torch.mean(-(reward - baseline).detach() * log_p)


# ---------------------------------------------------------------------------------------------------

SLIPS = [
    ("cosine_score", "forgets to divide by the norm of s", cosine_no_s_norm),
    ("cosine_score", "forgets to divide by the norms of the h_i", cosine_no_h_norm),
    ("cosine_score", "drops the key strength beta", cosine_no_beta),
    ("cosine_score", "divides by beta instead of multiplying", cosine_divide_beta),
    ("cosine_score", "multiplies s by beta inside the cosine, where it cancels", cosine_beta_inside),
    ("cosine_score", "divides by the squared norms (forgets the square root)", cosine_squared_norms),
    ("cosine_score", "normalises h along the time axis instead of the feature axis", cosine_normalize_h_over_time),
    ("cosine_score", "uses the norms of the whole tensors instead of one norm per vector", cosine_whole_tensor_norm),
    ("cosine_score", "leaves F.cosine_similarity at its default dim=1, the time axis", cosine_default_dim),
    ("cosine_score", "returns the softmax weights instead of the scores", cosine_softmax),

    ("additive_score", "splits the columns of W_a at d_h instead of d_s", additive_split_at_dh),
    ("additive_score", "takes the first block of W_a's columns for h, as if the concatenation were [h; s]",
     additive_halves_swapped),
    ("additive_score", "forgets the tanh", additive_no_tanh),
    ("additive_score", "adds W_s s (B, d_a) to W_h h (B, T, d_a) without s[:, None], broadcasting over the wrong axis",
     additive_no_unsqueeze),
    ("additive_score", "applies v_a before the tanh", additive_v_inside_tanh),
    ("additive_score", "sums over d_a instead of taking the dot product with v_a", additive_sum_no_v),
    ("additive_score", "takes the tanh of each term separately instead of the tanh of their sum", additive_tanh_each_term),
    ("additive_score", "multiplies h by W_h instead of W_h transposed", additive_no_transpose_Wh),
    ("additive_score", "returns the softmax weights instead of the scores", additive_softmax),

    ("location_score", "never cuts the scores to the first T positions", location_no_slice),
    ("location_score", "takes the last T positions instead of the first T", location_last_rows),
    ("location_score", "off by one: keeps T - 1 positions", location_off_by_one),
    ("location_score", "starts at row 1 instead of row 0", location_shift_one),
    ("location_score", "slices the batch axis instead of the positions axis", location_slice_batch),
    ("location_score", "computes W_a s with the batch as columns and returns it transposed, (T, B)", location_transposed),
    ("location_score", "returns the softmax weights (over all max_len rows) instead of the scores", location_softmax),
    ("location_score", "scales the scores by 1/sqrt(d_s)", location_scaled),

    ("general_score", "uses W_a transposed", general_W_transposed),
    ("general_score", "forgets W_a (plain dot product)", general_no_W),
    ("general_score", "divides by sqrt(d)", general_scaled),
    ("general_score", "no s[:, None] in the batched matmul: pairs every s with every h, (B, B, T)", general_no_unsqueeze),
    ("general_score", "output indices swapped, returns (T, B)", general_output_transposed),
    ("general_score", "a separate einsum index for s sums s over the batch", general_sum_over_batch),
    ("general_score", "h @ (s W_a)^T then [..., 0]: scores every example with the s of example 0", general_first_row_only),
    ("general_score", "returns the softmax weights instead of the scores", general_softmax),

    ("dot_score", "sums over the time axis instead of the feature axis", dot_sum_over_time),
    ("dot_score", "takes the mean over the features instead of the sum", dot_mean),
    ("dot_score", "scales by 1/sqrt(d)", dot_scaled),
    ("dot_score", "squeeze() without a dim, which also drops B = 1 or T = 1", dot_squeeze_all),
    ("dot_score", "no s[:, None] in the batched matmul: every s times every h, (B, B, T)", dot_no_unsqueeze),
    ("dot_score", "h @ s.T then [..., 0]: uses the s of example 0 for every example", dot_first_row_only),
    ("dot_score", "output indices swapped, returns (T, B)", dot_output_transposed),
    ("dot_score", "returns the softmax weights instead of the scores", dot_softmax),
    ("dot_score", "normalises s and h first (computes a cosine)", dot_normalised),

    ("scaled_dot_score", "divides by d instead of sqrt(d)", scaled_by_d),
    ("scaled_dot_score", "writes d ** 1 / 2, which is d / 2, not sqrt(d)", scaled_precedence),
    ("scaled_dot_score", "divides by sqrt(T), the number of positions", scaled_by_sqrt_T),
    ("scaled_dot_score", "divides by the square root of s.shape[0], the batch size", scaled_by_sqrt_B),
    ("scaled_dot_score", "multiplies by sqrt(d) instead of dividing", scaled_multiply),
    ("scaled_dot_score", "scales both s and h by 1/sqrt(d), so the score by 1/d", scaled_both_inputs),
    ("scaled_dot_score", "forgets the scaling", scaled_none),
    ("scaled_dot_score", "returns the softmax weights instead of the scores", scaled_softmax),
    ("scaled_dot_score", "squeeze() without a dim, which also drops B = 1 or T = 1", scaled_squeeze_all),

    ("local_p", "rounds p_t to a whole position", local_p_rounded),
    ("local_p", "sigma = D instead of D / 2", local_p_sigma_D),
    ("local_p", "forgets the 2 in the Gaussian's 2 sigma^2", local_p_no_two),
    ("local_p", "strict window |i - p| < D, dropping the ends", local_p_strict_window),
    ("local_p", "ignores the padding mask (softmax over the window only)", local_p_ignores_mask),
    ("local_p", "softmax over the whole sentence, then cut to the window", local_p_global_softmax),
    ("local_p", "renormalises the weights to sum to 1 after the Gaussian", local_p_renormalised),
    ("local_p", "forgets the tanh in p_t", local_p_no_tanh),
    ("local_p", "uses the padded length T - 1 for every row instead of S", local_p_padded_length),
    ("local_p", "counts positions from 1 instead of 0", local_p_positions_from_one),

    ("reinforce_loss", "forgets to detach the advantage", reinforce_no_detach),
    ("reinforce_loss", "forgets the minus sign", reinforce_no_minus),
    ("reinforce_loss", "sums over the batch instead of averaging", reinforce_sum),
    ("reinforce_loss", "indexes log_alpha[:, sampled], a (B, B) block, instead of one entry per row", reinforce_column_index),
    ("reinforce_loss", "ignores the baseline", reinforce_no_baseline),
    ("reinforce_loss", "adds the baseline instead of subtracting it", reinforce_plus_baseline),
    ("reinforce_loss", "uses alpha (exp of log_alpha) instead of log alpha", reinforce_exp),
    ("reinforce_loss", "averages over all positions instead of the sampled one", reinforce_all_positions),
    ("reinforce_loss", "detaches the baseline only, so the gradient still flows into the reward",
     reinforce_baseline_only_detached),
    ("reinforce_loss", "product of the batch means instead of the mean of the products", reinforce_product_of_means),
    ("additive_score", "builds the concatenation [s; h_i] and applies W_a with F.linear", additive_concat),
]

CORRECT = [
    ("cosine_score", "F.cosine_similarity on s[:, None] and h along the last axis", cosine_builtin),
    ("cosine_score", "normalise s and h with F.normalize, then a batched matmul", cosine_normalize_first),
    ("cosine_score", "explicit sums of products and squares, denominator clamped", cosine_explicit_sums),

    ("additive_score", "einsum for both halves and for v_a", additive_einsum),
    ("additive_score", "splits W_a counting d_h from the end, F.linear, elementwise product with v_a", additive_split_from_end),

    ("location_score", "keeps the first T rows of W_a before the product", location_rows_first),
    ("location_score", "F.linear with W_a narrowed to T rows", location_linear),
    ("location_score", "einsum with the first T rows of W_a", location_einsum),

    ("general_score", "bmm of h with (s W_a)[:, :, None]", general_bmm),
    ("general_score", "maps h first (W_a h_i), then a broadcast dot product with s", general_map_h_first),
    ("general_score", "s[:, None] @ W_a @ h^T, squeezed on the right axis", general_matmul),

    ("dot_score", "broadcast product, sum over the last axis", dot_broadcast_sum),
    ("dot_score", "bmm of h with s as a column, indexed on the last axis", dot_bmm),
    ("dot_score", "s as a row times h transposed, squeezed on axis -2", dot_matmul_row),

    ("scaled_dot_score", "scales s and h each by d ** -0.25", scaled_quarter_power),
    ("scaled_dot_score", "bmm, then times d ** -0.5", scaled_rsqrt),

    ("local_p", "torch.where with -inf, NaN rows zeroed, Gaussian written as exp(-2 (i - p)^2 / D^2)",
     local_p_where_softmax),
    ("local_p", "softmax written out (max-shifted, masked exp), Gaussian as exp(-0.5 ((i - p) / sigma)^2)",
     local_p_explicit_exp),

    ("reinforce_loss", "gather for the sampled entries, advantage computed under no_grad", reinforce_gather),
    ("reinforce_loss", "F.nll_loss with reduction='none', weighted by the detached advantage", reinforce_nll),
    ("reinforce_loss", "one-hot of the samples times log_alpha, summed over positions", reinforce_one_hot),
]
