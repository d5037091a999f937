"""Typical learner mistakes (and a few differently written right answers) for lesson 05, the Neural Turing Machine.

Exercises, as the checks call them (signatures as in the lesson):
    memory_read         memory_read(memory, w) -> (B, M); memory (B, N, M), w (B, N)
    memory_write        memory_write(memory, w, e, a) -> (B, N, M); erase, then add
    cosine_similarity   cosine_similarity(k, memory, eps=1e-8) -> (B, N); k.m / (|k| |m| + eps)
    content_addressing  content_addressing(k, beta, memory) -> (B, N); softmax_i(beta * cos), beta (B, 1)
    interpolate         interpolate(w_c, w_prev, g) -> (B, N); g * w_c + (1 - g) * w_prev, g (B, 1)
    shift               shift(w, s) -> (B, N); circular convolution with s over shifts -R..R (any odd 2R+1),
                        s[:, 0] = shift -R; torch.roll(w, k, -1)[:, i] == w[:, (i - k) % N]
    sharpen             sharpen(w, gamma) -> (B, N); w**gamma / sum_j w_j**gamma, gamma (B, 1) >= 1
    head_parameters     head_parameters(raw, M, num_shifts=3) -> (k, beta, g, s, gamma); raw (..., M + 3 + num_shifts)
                        split in the order k, beta, g, s, gamma; none, softplus, sigmoid, softmax, 1 + softplus

SLIPS: each answer has exactly one thing wrong, marked with a `# slip:` comment on that line.
CORRECT: right answers written differently from the reference solution.
"""

import torch
import torch.nn.functional as F

from course_utils import memory as ntm

# ---------------------------------------------------------------------------------------------------
# memory_read
# ---------------------------------------------------------------------------------------------------

def read_w_matmul(memory, w):
    return w @ memory  # slip: w (B, N) @ memory (B, N, M) broadcasts the batch and returns (B, B, M)


def read_sum_over_width(memory, w):
    return (w.unsqueeze(-1) * memory).sum(-1)  # slip: sums over the row width M instead of the rows N


def read_mean_over_rows(memory, w):
    return (w.unsqueeze(-1) * memory).mean(-2)  # slip: mean over the rows instead of the sum (divides by N)


def read_sum_over_batch(memory, w):
    return (w.unsqueeze(-1) * memory).sum(0)  # slip: sums over the batch axis instead of the rows


def read_squeeze_all(memory, w):
    return (w.unsqueeze(1) @ memory).squeeze()  # slip: squeeze() without a dim drops the batch axis when B = 1


def read_no_transpose(memory, w):
    return (memory @ w.unsqueeze(-1)).squeeze(-1)  # slip: memory not transposed: contracts the width M with w (needs N == M)


def read_softmax_w(memory, w):
    w = torch.softmax(w, dim=-1)  # slip: applies a softmax to w, which is already a weighting
    return (w.unsqueeze(-2) @ memory).squeeze(-2)


def read_argmax_row(memory, w):
    rows = w.argmax(dim=-1)  # slip: hard read of the most weighted row only, not the weighted sum
    return memory[torch.arange(memory.shape[0]), rows]


def read_einsum(memory, w):
    return torch.einsum("...n,...nm->...m", w, memory)


def read_broadcast_sum(memory, w):
    return (memory * w[..., None]).sum(dim=-2)


def read_bmm_transposed(memory, w):
    return torch.bmm(memory.transpose(1, 2), w.unsqueeze(2)).squeeze(2)


# ---------------------------------------------------------------------------------------------------
# memory_write
# ---------------------------------------------------------------------------------------------------

def write_add_then_erase(memory, w, e, a):
    w = w.unsqueeze(-1)
    added = memory + w * a.unsqueeze(-2)
    return added * (1 - w * e.unsqueeze(-2))  # slip: adds first, then erases (the add is partly erased)


def write_erase_without_w(memory, w, e, a):
    w = w.unsqueeze(-1)
    erased = memory * (1 - e.unsqueeze(-2))  # slip: erases every row by e, not in proportion to its weight w(i)
    return erased + w * a.unsqueeze(-2)


def write_add_without_w(memory, w, e, a):
    w = w.unsqueeze(-1)
    erased = memory * (1 - w * e.unsqueeze(-2))
    return erased + a.unsqueeze(-2)  # slip: adds a to every row, not weighted by w(i)


def write_subtract_erase(memory, w, e, a):
    w = w.unsqueeze(-1)
    erased = memory - w * e.unsqueeze(-2)  # slip: subtracts w e instead of multiplying by (1 - w e)
    return erased + w * a.unsqueeze(-2)


def write_no_erase(memory, w, e, a):
    w = w.unsqueeze(-1)
    return memory + w * a.unsqueeze(-2)  # slip: forgets the erase step, only adds


def write_ignore_e(memory, w, e, a):
    w = w.unsqueeze(-1)
    erased = memory * (1 - w)  # slip: ignores the erase vector e (erases as if e = 1)
    return erased + w * a.unsqueeze(-2)


def write_in_place(memory, w, e, a):
    w = w.unsqueeze(-1)
    memory.mul_(1 - w * e.unsqueeze(-2))  # slip: erases the caller's memory tensor in place
    return memory.add_(w * a.unsqueeze(-2))


def write_e_not_unsqueezed(memory, w, e, a):
    w = w.unsqueeze(-1)
    erased = memory * (1 - w * e)  # slip: e (B, M) not unsqueezed: lines up with (N, 1), right only if B = 1
    return erased + w * a.unsqueeze(-2)


def write_einsum_outer(memory, w, e, a):
    erase = torch.einsum("...n,...m->...nm", w, e)
    add = torch.einsum("...n,...m->...nm", w, a)
    return memory - memory * erase + add


def write_indexing(memory, w, e, a):
    wi = w[:, :, None]
    return memory * (1 - wi * e[:, None, :]) + wi * a[:, None, :]


# ---------------------------------------------------------------------------------------------------
# cosine_similarity
# ---------------------------------------------------------------------------------------------------

def cos_no_eps(k, memory, eps=1e-8):
    dot = (memory @ k.unsqueeze(-1)).squeeze(-1)
    norms = memory.norm(dim=-1) * k.norm(dim=-1, keepdim=True)
    return dot / norms  # slip: no eps: a zero row (or key) gives 0/0 = NaN


def cos_eps_outside(k, memory, eps=1e-8):
    dot = (memory @ k.unsqueeze(-1)).squeeze(-1)
    norms = memory.norm(dim=-1) * k.norm(dim=-1, keepdim=True)
    return dot / norms + eps  # slip: eps added after the division (precedence): still NaN on a zero row


def cos_eps_num_and_den(k, memory, eps=1e-8):
    dot = (memory @ k.unsqueeze(-1)).squeeze(-1)
    norms = memory.norm(dim=-1) * k.norm(dim=-1, keepdim=True)
    return (dot + eps) / (norms + eps)  # slip: eps also added to the numerator: a zero row gets similarity 1


def cos_no_key_norm(k, memory, eps=1e-8):
    dot = (memory @ k.unsqueeze(-1)).squeeze(-1)
    norms = memory.norm(dim=-1)  # slip: forgets to divide by the key's norm
    return dot / (norms + eps)


def cos_key_norm_whole_batch(k, memory, eps=1e-8):
    dot = (memory @ k.unsqueeze(-1)).squeeze(-1)
    norms = memory.norm(dim=-1) * k.norm()  # slip: k.norm() without dim: the norm of the whole batch of keys
    return dot / (norms + eps)


def cos_squared_norms(k, memory, eps=1e-8):
    dot = (memory @ k.unsqueeze(-1)).squeeze(-1)
    norms = (memory ** 2).sum(-1) * (k ** 2).sum(-1, keepdim=True)  # slip: squared norms (no square root)
    return dot / (norms + eps)


def cos_dot_only(k, memory, eps=1e-8):
    return (memory @ k.unsqueeze(-1)).squeeze(-1)  # slip: plain dot product, not divided by the norms


def cos_k_not_unsqueezed(k, memory, eps=1e-8):
    dot = (k * memory).sum(-1)  # slip: k (B, M) not unsqueezed to (B, 1, M): lines up with the rows, right only if B = 1
    norms = memory.norm(dim=-1) * k.norm(dim=-1, keepdim=True)
    return dot / (norms + eps)


def cos_einsum_sqrt(k, memory, eps=1e-8):
    dot = torch.einsum("...m,...nm->...n", k, memory)
    mem_norm = torch.sqrt((memory * memory).sum(-1))
    key_norm = torch.sqrt((k * k).sum(-1)).unsqueeze(-1)
    return dot / (mem_norm * key_norm + eps)


def cos_vector_norm(k, memory, eps=1e-8):
    kk = k.unsqueeze(-2)                                                  # (B, 1, M)
    dot = (kk * memory).sum(-1)
    denom = torch.linalg.vector_norm(memory, dim=-1) * torch.linalg.vector_norm(kk, dim=-1)
    return dot / (denom + eps)


# ---------------------------------------------------------------------------------------------------
# content_addressing
# ---------------------------------------------------------------------------------------------------

def content_no_beta(k, beta, memory):
    return torch.softmax(ntm.cosine_similarity(k, memory), dim=-1)  # slip: forgets the key strength beta


def content_softmax_batch(k, beta, memory):
    return torch.softmax(beta * ntm.cosine_similarity(k, memory), dim=0)  # slip: softmax over the batch axis, not the rows


def content_divide_beta(k, beta, memory):
    return torch.softmax(ntm.cosine_similarity(k, memory) / beta, dim=-1)  # slip: divides by beta (a temperature) instead of multiplying


def content_add_beta(k, beta, memory):
    return torch.softmax(beta + ntm.cosine_similarity(k, memory), dim=-1)  # slip: adds beta instead of multiplying (no effect)


def content_dot_product(k, beta, memory):
    scores = (memory @ k.unsqueeze(-1)).squeeze(-1)  # slip: dot product instead of the cosine similarity
    return torch.softmax(beta * scores, dim=-1)


def content_normalise_no_exp(k, beta, memory):
    x = beta * ntm.cosine_similarity(k, memory)
    return x / x.sum(-1, keepdim=True)  # slip: divides by the sum instead of a softmax (no exp)


def content_exp_no_normalise(k, beta, memory):
    return torch.exp(beta * ntm.cosine_similarity(k, memory))  # slip: exp without normalising over the rows


def content_softplus_again(k, beta, memory):
    beta = F.softplus(beta)  # slip: applies softplus to beta again (it is already the activated key strength)
    return torch.softmax(beta * ntm.cosine_similarity(k, memory), dim=-1)


def content_log_softmax(k, beta, memory):
    return torch.log_softmax(beta * ntm.cosine_similarity(k, memory), dim=-1)  # slip: log_softmax instead of softmax


def content_manual_softmax_whole_batch(k, beta, memory):
    x = torch.exp(beta * ntm.cosine_similarity(k, memory))
    return x / x.sum()  # slip: normalises by the sum over the whole batch, not over each row's N weights


def content_method_softmax(k, beta, memory):
    return (ntm.cosine_similarity(k, memory) * beta).softmax(dim=-1)


def content_stable_exp(k, beta, memory):
    x = beta * ntm.cosine_similarity(k, memory)
    x = torch.exp(x - x.max(dim=-1, keepdim=True).values)
    return x / x.sum(dim=-1, keepdim=True)


def content_logsumexp(k, beta, memory):
    x = beta * ntm.cosine_similarity(k, memory)
    return torch.exp(x - torch.logsumexp(x, dim=-1, keepdim=True))


# ---------------------------------------------------------------------------------------------------
# interpolate
# ---------------------------------------------------------------------------------------------------

def interp_swapped(w_c, w_prev, g):
    return g * w_prev + (1 - g) * w_c  # slip: gate on the wrong weighting (g = 1 keeps w_prev)


def interp_lerp_wrong_order(w_c, w_prev, g):
    return torch.lerp(w_c, w_prev, g)  # slip: lerp arguments in the wrong order: g = 1 gives w_prev


def interp_no_one_minus(w_c, w_prev, g):
    return g * w_c + w_prev  # slip: forgets the (1 - g) on the previous weighting


def interp_missing_parentheses(w_c, w_prev, g):
    return g * w_c + 1 - g * w_prev  # slip: missing parentheses around (1 - g)


def interp_typo_w_c_twice(w_c, w_prev, g):
    return g * w_c + (1 - g) * w_c  # slip: uses w_c in both terms (returns w_c)


def interp_ignore_gate(w_c, w_prev, g):
    return (w_c + w_prev) / 2  # slip: plain average, ignores the gate g


def interp_hard_gate(w_c, w_prev, g):
    return torch.where(g > 0.5, w_c, w_prev)  # slip: rounds the gate to 0 or 1 instead of mixing


def interp_softmax_after(w_c, w_prev, g):
    return torch.softmax(g * w_c + (1 - g) * w_prev, dim=-1)  # slip: softmax of the mix, which is already a distribution


def interp_in_place(w_c, w_prev, g):
    return w_c.mul_(g).add_((1 - g) * w_prev)  # slip: overwrites the caller's w_c in place


def interp_lerp(w_c, w_prev, g):
    return torch.lerp(w_prev, w_c, g)


def interp_difference(w_c, w_prev, g):
    return w_prev + g * (w_c - w_prev)


def interp_stack(w_c, w_prev, g):
    gates = torch.cat([g, 1 - g], dim=-1).unsqueeze(-1)          # (B, 2, 1)
    return (torch.stack([w_c, w_prev], dim=-2) * gates).sum(-2)


# ---------------------------------------------------------------------------------------------------
# shift
# ---------------------------------------------------------------------------------------------------

def shift_reversed(w, s):
    R = s.shape[-1] // 2
    rolled = torch.stack([torch.roll(w, -k, dims=-1) for k in range(-R, R + 1)], dim=-1)  # slip: rolls by -k: s[:, 0] moves the focus down (direction reversed)
    return (rolled * s.unsqueeze(-2)).sum(-1)


def shift_hardcoded_three(w, s):
    return (s[:, 0:1] * torch.roll(w, -1, dims=-1) + s[:, 1:2] * w  # slip: hard-codes 3 shifts (-1, 0, +1); wrong for 2R+1 = 5
            + s[:, 2:3] * torch.roll(w, 1, dims=-1))


def shift_not_circular(w, s):
    R = s.shape[-1] // 2
    N = w.shape[-1]
    padded = F.pad(w, (R, R))  # slip: pads with zeros instead of wrapping round (not circular)
    rolled = torch.stack([padded[..., R - k:R - k + N] for k in range(-R, R + 1)], dim=-1)
    return (rolled * s.unsqueeze(-2)).sum(-1)


def shift_roll_flat(w, s):
    R = s.shape[-1] // 2
    rolled = torch.stack([torch.roll(w, k) for k in range(-R, R + 1)], dim=-1)  # slip: roll without dims flattens the batch: rows leak between sequences
    return (rolled * s.unsqueeze(-2)).sum(-1)


def shift_roll_batch(w, s):
    R = s.shape[-1] // 2
    rolled = torch.stack([torch.roll(w, k, dims=0) for k in range(-R, R + 1)], dim=-1)  # slip: rolls along the batch axis (dims=0), not the rows
    return (rolled * s.unsqueeze(-2)).sum(-1)


def shift_offsets_from_zero(w, s):
    n = s.shape[-1]
    rolled = torch.stack([torch.roll(w, k, dims=-1) for k in range(n)], dim=-1)  # slip: shifts 0..2R instead of -R..R (off by R)
    return (rolled * s.unsqueeze(-2)).sum(-1)


def shift_softmax_s(w, s):
    R = s.shape[-1] // 2
    s = torch.softmax(s, dim=-1)  # slip: applies a softmax to s, which is already a distribution
    rolled = torch.stack([torch.roll(w, k, dims=-1) for k in range(-R, R + 1)], dim=-1)
    return (rolled * s.unsqueeze(-2)).sum(-1)


def shift_mean_over_shifts(w, s):
    R = s.shape[-1] // 2
    rolled = torch.stack([torch.roll(w, k, dims=-1) for k in range(-R, R + 1)], dim=-1)
    return (rolled * s.unsqueeze(-2)).mean(-1)  # slip: mean over the shifts instead of the sum (divides by 2R+1)


def shift_float32_accumulator(w, s):
    R = s.shape[-1] // 2
    out = torch.zeros(w.shape)  # slip: float32 accumulator whatever the input dtype (float64 is rounded)
    for j, k in enumerate(range(-R, R + 1)):
        out += s[:, j:j + 1] * torch.roll(w, k, dims=-1)
    return out


def shift_gather_index(w, s):
    N, n = w.shape[-1], s.shape[-1]
    R = n // 2
    idx = (torch.arange(N).unsqueeze(1) - torch.arange(-R, R + 1).unsqueeze(0)) % N   # (N, 2R+1): (i - k) mod N
    return (w[..., idx] * s.unsqueeze(-2)).sum(-1)


def shift_loop_accumulate(w, s):
    R = s.shape[-1] // 2
    out = torch.zeros_like(w)
    for j in range(s.shape[-1]):
        out = out + s[..., j:j + 1] * torch.roll(w, j - R, dims=-1)
    return out


def shift_circular_pad_unfold(w, s):
    R = s.shape[-1] // 2
    N = w.shape[-1]
    padded = torch.cat([w[..., N - R:], w, w[..., :R]], dim=-1) if R > 0 else w   # circular padding
    windows = padded.unfold(-1, 2 * R + 1, 1)                                       # (B, N, 2R+1): w(i-R+j)
    return (windows * s.flip(-1).unsqueeze(-2)).sum(-1)


# ---------------------------------------------------------------------------------------------------
# sharpen
# ---------------------------------------------------------------------------------------------------

def sharpen_no_normalise(w, gamma):
    return w ** gamma  # slip: forgets to renormalise after the power


def sharpen_sum_whole_batch(w, gamma):
    w = w ** gamma
    return w / w.sum()  # slip: normalises by the sum over the whole batch, not each row


def sharpen_sum_batch_axis(w, gamma):
    w = w ** gamma
    return w / w.sum(0, keepdim=True)  # slip: sums over the batch axis instead of the rows


def sharpen_no_keepdim(w, gamma):
    w = w ** gamma
    return w / w.sum(-1)  # slip: sum without keepdim: (B,) lines up with the rows, right only if B = 1


def sharpen_softmax_gamma(w, gamma):
    return torch.softmax(gamma * w, dim=-1)  # slip: softmax(gamma * w), as for beta, instead of a power


def sharpen_softmax_of_power(w, gamma):
    return torch.softmax(w ** gamma, dim=-1)  # slip: softmax instead of dividing by the sum


def sharpen_multiply(w, gamma):
    w = gamma * w  # slip: multiplies by gamma instead of raising to the power (renormalising undoes it)
    return w / w.sum(-1, keepdim=True)


def sharpen_inverse_power(w, gamma):
    w = w ** (1 / gamma)  # slip: power 1/gamma flattens the weighting instead of sharpening it
    return w / w.sum(-1, keepdim=True)


def sharpen_in_place(w, gamma):
    w.pow_(gamma)  # slip: raises the caller's tensor to the power in place
    return w / w.sum(-1, keepdim=True)


def sharpen_log_softmax_space(w, gamma):
    return torch.softmax(gamma * torch.log(w), dim=-1)


def sharpen_scaled_by_max(w, gamma):
    w = torch.pow(w / w.amax(dim=-1, keepdim=True), gamma)     # dividing by the max first changes nothing
    return w / w.sum(dim=-1, keepdim=True)


# ---------------------------------------------------------------------------------------------------
# head_parameters
# ---------------------------------------------------------------------------------------------------

def heads_gamma_no_one(raw, M, num_shifts=3):
    k, beta, g, s, gamma = torch.split(raw, [M, 1, 1, num_shifts, 1], dim=-1)
    return k, F.softplus(beta), torch.sigmoid(g), torch.softmax(s, dim=-1), F.softplus(gamma)  # slip: gamma = softplus, without the 1 + (can fall below 1)


def heads_gamma_one_inside(raw, M, num_shifts=3):
    k, beta, g, s, gamma = torch.split(raw, [M, 1, 1, num_shifts, 1], dim=-1)
    return k, F.softplus(beta), torch.sigmoid(g), torch.softmax(s, dim=-1), F.softplus(1 + gamma)  # slip: 1 inside the softplus instead of 1 + softplus


def heads_beta_raw(raw, M, num_shifts=3):
    k, beta, g, s, gamma = torch.split(raw, [M, 1, 1, num_shifts, 1], dim=-1)
    return k, beta, torch.sigmoid(g), torch.softmax(s, dim=-1), 1 + F.softplus(gamma)  # slip: no softplus on beta (can be negative)


def heads_g_tanh(raw, M, num_shifts=3):
    k, beta, g, s, gamma = torch.split(raw, [M, 1, 1, num_shifts, 1], dim=-1)
    return k, F.softplus(beta), torch.tanh(g), torch.softmax(s, dim=-1), 1 + F.softplus(gamma)  # slip: tanh for the gate, range (-1, 1) not [0, 1]


def heads_s_sigmoid(raw, M, num_shifts=3):
    k, beta, g, s, gamma = torch.split(raw, [M, 1, 1, num_shifts, 1], dim=-1)
    return k, F.softplus(beta), torch.sigmoid(g), torch.sigmoid(s), 1 + F.softplus(gamma)  # slip: sigmoid for the shift weighting, which then does not sum to 1


def heads_s_softmax_dim0(raw, M, num_shifts=3):
    k, beta, g, s, gamma = torch.split(raw, [M, 1, 1, num_shifts, 1], dim=-1)
    return k, F.softplus(beta), torch.sigmoid(g), torch.softmax(s, dim=0), 1 + F.softplus(gamma)  # slip: softmax of s over the batch axis, not over the shifts


def heads_split_order(raw, M, num_shifts=3):
    k, beta, g, gamma, s = torch.split(raw, [M, 1, 1, 1, num_shifts], dim=-1)  # slip: splits gamma before s (order k, beta, g, gamma, s)
    return k, F.softplus(beta), torch.sigmoid(g), torch.softmax(s, dim=-1), 1 + F.softplus(gamma)


def heads_hardcoded_three(raw, M, num_shifts=3):
    k, beta, g, s, gamma = torch.split(raw, [M, 1, 1, 3, 1], dim=-1)  # slip: hard-codes 3 shifts, ignores num_shifts
    return k, F.softplus(beta), torch.sigmoid(g), torch.softmax(s, dim=-1), 1 + F.softplus(gamma)


def heads_split_dim1(raw, M, num_shifts=3):
    k, beta, g, s, gamma = torch.split(raw, [M, 1, 1, num_shifts, 1], dim=1)  # slip: splits along dim 1, right only for 2-D raw (not (B, heads, ...))
    return k, F.softplus(beta), torch.sigmoid(g), torch.softmax(s, dim=-1), 1 + F.softplus(gamma)


def heads_slice_off_by_one(raw, M, num_shifts=3):
    k = raw[..., :M]
    beta = F.softplus(raw[..., M:M + 1])
    g = torch.sigmoid(raw[..., M + 1:M + 2])
    s = torch.softmax(raw[..., M + 1:M + 1 + num_shifts], dim=-1)  # slip: s slice starts one too early (overlaps g, misses its last entry)
    gamma = 1 + F.softplus(raw[..., -1:])
    return k, beta, g, s, gamma


def heads_manual_slices(raw, M, num_shifts=3):
    k = raw[..., :M]
    beta = F.softplus(raw[..., M:M + 1])
    g = torch.sigmoid(raw[..., M + 1:M + 2])
    s = F.softmax(raw[..., M + 2:M + 2 + num_shifts], dim=-1)
    gamma = F.softplus(raw[..., M + 2 + num_shifts:]) + 1
    return k, beta, g, s, gamma


def heads_offsets_logaddexp(raw, M, num_shifts=3):
    sizes = [M, 1, 1, num_shifts, 1]
    bounds = [0]
    for size in sizes:
        bounds.append(bounds[-1] + size)
    k, beta, g, s, gamma = (raw[..., lo:hi] for lo, hi in zip(bounds[:-1], bounds[1:]))
    zero = torch.zeros_like(beta)
    s = torch.exp(s - torch.logsumexp(s, dim=-1, keepdim=True))
    return k, torch.logaddexp(beta, zero), torch.sigmoid(g), s, 1 + torch.logaddexp(gamma, zero)


def heads_narrow(raw, M, num_shifts=3):
    k = raw.narrow(-1, 0, M)
    beta, g = raw.narrow(-1, M, 1), raw.narrow(-1, M + 1, 1)
    s = raw.narrow(-1, M + 2, num_shifts)
    gamma = raw.narrow(-1, M + 2 + num_shifts, 1)
    return k, F.softplus(beta), 1 / (1 + torch.exp(-g)), s.softmax(-1), 1.0 + F.softplus(gamma)


# ---------------------------------------------------------------------------------------------------

SLIPS = [
    ("memory_read", "w @ memory: broadcasts the batch dimensions and returns (B, B, M)", read_w_matmul),
    ("memory_read", "sums the weighted memory over the row width M instead of over the rows", read_sum_over_width),
    ("memory_read", "mean over the rows instead of the weighted sum", read_mean_over_rows),
    ("memory_read", "sums over the batch axis instead of the rows", read_sum_over_batch),
    ("memory_read", "squeeze() without a dim: the batch axis disappears when B = 1", read_squeeze_all),
    ("memory_read", "memory @ w.unsqueeze(-1) without transposing the memory (needs N == M, then wrong)",
     read_no_transpose),
    ("memory_read", "applies a softmax to w before reading, though w is already a weighting", read_softmax_w),
    ("memory_read", "reads only the most weighted row (argmax) instead of the weighted sum", read_argmax_row),

    ("memory_write", "adds first, then erases", write_add_then_erase),
    ("memory_write", "erase not weighted by w: every row is erased by e", write_erase_without_w),
    ("memory_write", "add not weighted by w: a is added to every row", write_add_without_w),
    ("memory_write", "subtracts w e from the memory instead of multiplying by (1 - w e)", write_subtract_erase),
    ("memory_write", "forgets the erase step", write_no_erase),
    ("memory_write", "ignores the erase vector e: erases as if e were all ones", write_ignore_e),
    ("memory_write", "modifies the caller's memory in place", write_in_place),
    ("memory_write", "e not unsqueezed in the erase term: right only for a batch of one", write_e_not_unsqueezed),

    ("cosine_similarity", "no eps in the denominator: a zero row gives NaN", cos_no_eps),
    ("cosine_similarity", "eps added after the division (dot / norms + eps): a zero row still gives NaN",
     cos_eps_outside),
    ("cosine_similarity", "eps added to the numerator too: a zero row gets similarity 1", cos_eps_num_and_den),
    ("cosine_similarity", "divides by the rows' norms only, not by the key's norm", cos_no_key_norm),
    ("cosine_similarity", "k.norm() without dim: divides by the norm of the whole batch of keys",
     cos_key_norm_whole_batch),
    ("cosine_similarity", "divides by the squared norms (forgets the square root)", cos_squared_norms),
    ("cosine_similarity", "returns the plain dot product, not normalised", cos_dot_only),
    ("cosine_similarity", "k not unsqueezed before multiplying with the memory: right only for a batch of one",
     cos_k_not_unsqueezed),

    ("content_addressing", "forgets the key strength beta", content_no_beta),
    ("content_addressing", "softmax over the batch axis (dim=0) instead of the rows", content_softmax_batch),
    ("content_addressing", "divides the cosine by beta instead of multiplying", content_divide_beta),
    ("content_addressing", "adds beta to the cosine instead of multiplying (the softmax then ignores it)",
     content_add_beta),
    ("content_addressing", "uses the dot product instead of the cosine similarity", content_dot_product),
    ("content_addressing", "divides beta * cosine by its sum instead of taking a softmax", content_normalise_no_exp),
    ("content_addressing", "exp of beta * cosine without normalising", content_exp_no_normalise),
    ("content_addressing", "applies softplus to beta again", content_softplus_again),
    ("content_addressing", "log_softmax instead of softmax", content_log_softmax),
    ("content_addressing", "written-out softmax normalised over the whole batch, not per row",
     content_manual_softmax_whole_batch),

    ("interpolate", "gate swapped: g weights w_prev and 1 - g weights w_c", interp_swapped),
    ("interpolate", "torch.lerp with its first two arguments swapped", interp_lerp_wrong_order),
    ("interpolate", "forgets the (1 - g) factor on w_prev", interp_no_one_minus),
    ("interpolate", "missing parentheses: g * w_c + 1 - g * w_prev", interp_missing_parentheses),
    ("interpolate", "typo: w_c in both terms, so it returns w_c", interp_typo_w_c_twice),
    ("interpolate", "plain average of w_c and w_prev, ignoring g", interp_ignore_gate),
    ("interpolate", "hard gate: picks w_c if g > 0.5, else w_prev", interp_hard_gate),
    ("interpolate", "applies a softmax to the mix", interp_softmax_after),
    ("interpolate", "modifies the caller's w_c in place", interp_in_place),

    ("shift", "direction reversed: rolls by -k, so weight on +1 moves the focus up", shift_reversed),
    ("shift", "hard-codes three shifts (-1, 0, +1): wrong for 5 or more shifts", shift_hardcoded_three),
    ("shift", "not circular: zero padding, so weight moved past the last row is lost", shift_not_circular),
    ("shift", "torch.roll without dims: rolls the flattened batch, rows leak between sequences", shift_roll_flat),
    ("shift", "rolls along the batch axis (dims=0) instead of the rows", shift_roll_batch),
    ("shift", "shift offsets 0..2R instead of -R..R (off by R)", shift_offsets_from_zero),
    ("shift", "applies a softmax to s, though it is already a distribution", shift_softmax_s),
    ("shift", "mean over the shifts instead of the weighted sum", shift_mean_over_shifts),
    ("shift", "accumulates into torch.zeros(w.shape): float32 whatever the input dtype", shift_float32_accumulator),

    ("sharpen", "forgets to renormalise after the power", sharpen_no_normalise),
    ("sharpen", "divides by the sum over the whole batch (sum() without a dim)", sharpen_sum_whole_batch),
    ("sharpen", "sums over the batch axis (dim 0) instead of the rows", sharpen_sum_batch_axis),
    ("sharpen", "sum without keepdim: right only for a batch of one", sharpen_no_keepdim),
    ("sharpen", "softmax(gamma * w) instead of the power and renormalisation", sharpen_softmax_gamma),
    ("sharpen", "softmax of w ** gamma instead of dividing by the sum", sharpen_softmax_of_power),
    ("sharpen", "multiplies by gamma instead of raising to the power (returns w unchanged)", sharpen_multiply),
    ("sharpen", "raises to the power 1 / gamma (blurs instead of sharpening)", sharpen_inverse_power),
    ("sharpen", "raises the caller's w to the power in place", sharpen_in_place),

    ("head_parameters", "gamma = softplus without the 1 +", heads_gamma_no_one),
    ("head_parameters", "gamma = softplus(1 + raw) instead of 1 + softplus(raw)", heads_gamma_one_inside),
    ("head_parameters", "no softplus on beta", heads_beta_raw),
    ("head_parameters", "tanh instead of sigmoid for the gate g", heads_g_tanh),
    ("head_parameters", "sigmoid instead of softmax for the shift weighting s", heads_s_sigmoid),
    ("head_parameters", "softmax of s over the batch axis (dim=0)", heads_s_softmax_dim0),
    ("head_parameters", "split order k, beta, g, gamma, s instead of k, beta, g, s, gamma", heads_split_order),
    ("head_parameters", "split sizes hard-code 3 shifts, ignoring num_shifts", heads_hardcoded_three),
    ("head_parameters", "splits along dim 1 instead of the last axis: wrong for raw with more than 2 dims",
     heads_split_dim1),
    ("head_parameters", "hand slicing off by one: s starts at g's entry", heads_slice_off_by_one),
]

CORRECT = [
    ("memory_read", "einsum over the rows", read_einsum),
    ("memory_read", "broadcast multiply by w[..., None] and sum over the rows", read_broadcast_sum),
    ("memory_read", "bmm of the transposed memory with w as a column", read_bmm_transposed),

    ("memory_write", "outer products by einsum: memory - memory * (w e^T) + w a^T", write_einsum_outer),
    ("memory_write", "indexing with None instead of unsqueeze, one expression", write_indexing),

    ("cosine_similarity", "einsum dot product, norms as sqrt of sums of squares", cos_einsum_sqrt),
    ("cosine_similarity", "broadcast product with k as (B, 1, M) and torch.linalg.vector_norm", cos_vector_norm),

    ("content_addressing", "softmax method on cosine * beta", content_method_softmax),
    ("content_addressing", "written-out softmax, max subtracted, summed over the rows", content_stable_exp),
    ("content_addressing", "exp(x - logsumexp(x)) over the rows", content_logsumexp),

    ("interpolate", "torch.lerp(w_prev, w_c, g)", interp_lerp),
    ("interpolate", "w_prev + g * (w_c - w_prev)", interp_difference),
    ("interpolate", "stacks the two weightings and sums with the weights (g, 1 - g)", interp_stack),

    ("shift", "gathers w at (i - k) mod N with an index table", shift_gather_index),
    ("shift", "loop accumulating s_k * roll(w, k) in the input's dtype", shift_loop_accumulate),
    ("shift", "circular padding, unfold into windows, flipped s", shift_circular_pad_unfold),

    ("sharpen", "softmax(gamma * log w) (log space; zeros give -inf, then weight 0)", sharpen_log_softmax_space),
    ("sharpen", "divides by the row maximum first (no underflow), then power and renormalise", sharpen_scaled_by_max),

    ("head_parameters", "hand slicing with explicit offsets", heads_manual_slices),
    ("head_parameters", "slices from cumulative offsets, softplus as logaddexp(x, 0), softmax via logsumexp",
     heads_offsets_logaddexp),
    ("head_parameters", "narrow for the slices, sigmoid written out, softmax method", heads_narrow),
]
