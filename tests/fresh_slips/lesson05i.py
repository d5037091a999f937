"""Typical learner mistakes (and some correct variants) for lesson 05, the Neural Turing Machine.

Exercises (check names): memory_read, memory_write, cosine_similarity, content_addressing,
interpolate, shift, sharpen, head_parameters.

Each answer has the signature of the reference solution in solutions/05_neural_turing_machine.ipynb:
    memory_read(memory, w)                      memory (B, N, M), w (B, N) -> (B, M)
    memory_write(memory, w, e, a)               -> (B, N, M)
    cosine_similarity(k, memory, eps=1e-8)      k (B, M), memory (B, N, M) -> (B, N)
    content_addressing(k, beta, memory)         beta (B, 1) -> (B, N), uses ntm.cosine_similarity
    interpolate(w_c, w_prev, g)                 g (B, 1) -> (B, N)
    shift(w, s)                                 w (B, N), s (B, 2R+1), shifts -R..R -> (B, N)
    sharpen(w, gamma)                           gamma (B, 1) >= 1 -> (B, N)
    head_parameters(raw, M, num_shifts=3)       -> (k, beta, g, s, gamma)

Every slip has exactly one thing wrong, marked by a `# slip:` comment.
"""
import torch
import torch.nn.functional as F

from course_utils import memory as ntm

# ----------------------------------------------------------------------------------------------
# memory_read
# ----------------------------------------------------------------------------------------------

def memory_read_batch_broadcast(memory, w):
    return w @ memory   # slip: (B, N) @ (B, N, M) broadcasts over the batch and returns (B, B, M)


def memory_read_mean_over_batch_pairs(memory, w):
    return (w @ memory).mean(0)   # slip: collapses the (B, B, M) result by averaging instead of pairing w[b] with memory[b]


def memory_read_sum_wrong_axis(memory, w):
    return (w.unsqueeze(-1) * memory).sum(-1)   # slip: sums over the row width M instead of the rows N


def memory_read_mean_not_sum(memory, w):
    return (w.unsqueeze(-1) * memory).mean(-2)   # slip: averages over the rows, dividing the read by N


def memory_read_softmax_again(memory, w):
    w = torch.softmax(w, dim=-1)   # slip: re-normalises the weighting with a softmax although it is already a distribution
    return (w.unsqueeze(-2) @ memory).squeeze(-2)


def memory_read_squeeze_all(memory, w):
    return (w.unsqueeze(-2) @ memory).squeeze()   # slip: squeeze() without a dim also drops the batch axis when B = 1


def memory_read_argmax(memory, w):
    idx = w.argmax(dim=-1)   # slip: reads only the most weighted row (a hard lookup) instead of the weighted sum
    return memory[torch.arange(memory.shape[0]), idx]


def memory_read_mixes_batches(memory, w):
    return torch.einsum("bn,cnm->bm", w, memory)   # slip: different batch letters sum the memories of all batch elements


def memory_read_einsum(memory, w):
    return torch.einsum("...nm,...n->...m", memory, w)


def memory_read_broadcast_sum(memory, w):
    return (memory * w[..., :, None]).sum(dim=-2)


def memory_read_transposed(memory, w):
    return (memory.transpose(-1, -2) @ w.unsqueeze(-1)).squeeze(-1)


# ----------------------------------------------------------------------------------------------
# memory_write
# ----------------------------------------------------------------------------------------------

def memory_write_add_then_erase(memory, w, e, a):
    w = w.unsqueeze(-1)
    added = memory + w * a.unsqueeze(-2)
    return added * (1 - w * e.unsqueeze(-2))   # slip: adds first and then erases, so the new content is partly erased


def memory_write_erase_ignores_w(memory, w, e, a):
    w = w.unsqueeze(-1)
    erased = memory * (1 - e.unsqueeze(-2))   # slip: the erase vector is applied to every row, not weighted by w(i)
    return erased + w * a.unsqueeze(-2)


def memory_write_add_ignores_w(memory, w, e, a):
    w = w.unsqueeze(-1)
    erased = memory * (1 - w * e.unsqueeze(-2))
    return erased + a.unsqueeze(-2)   # slip: the add vector is added to every row in full, not weighted by w(i)


def memory_write_subtract_erase(memory, w, e, a):
    w = w.unsqueeze(-1)
    erased = memory - w * e.unsqueeze(-2)   # slip: erases by subtracting w*e instead of multiplying by (1 - w*e)
    return erased + w * a.unsqueeze(-2)


def memory_write_ignores_e(memory, w, e, a):
    w = w.unsqueeze(-1)
    erased = memory * (1 - w)   # slip: leaves out the erase vector e (as if e were all ones)
    return erased + w * a.unsqueeze(-2)


def memory_write_adds_to_old_memory(memory, w, e, a):
    w = w.unsqueeze(-1)
    erased = memory * (1 - w * e.unsqueeze(-2))
    return memory + w * a.unsqueeze(-2)   # slip: adds to the old memory, the erased memory is computed but never used


def memory_write_in_place(memory, w, e, a):
    w = w.unsqueeze(-1)
    memory.mul_(1 - w * e.unsqueeze(-2))   # slip: erases in place, changing the caller's memory tensor
    memory.add_(w * a.unsqueeze(-2))
    return memory


def memory_write_subtracts_add(memory, w, e, a):
    w = w.unsqueeze(-1)
    erased = memory * (1 - w * e.unsqueeze(-2))
    return erased - w * a.unsqueeze(-2)   # slip: subtracts the add vector instead of adding it


def memory_write_einsum(memory, w, e, a):
    erase = torch.einsum("...n,...m->...nm", w, e)
    add = torch.einsum("...n,...m->...nm", w, a)
    return memory - memory * erase + add


def memory_write_outer(memory, w, e, a):
    wn = w[..., :, None]
    return memory * (1 - wn * e[..., None, :]) + wn * a[..., None, :]


# ----------------------------------------------------------------------------------------------
# cosine_similarity
# ----------------------------------------------------------------------------------------------

def cosine_no_eps(k, memory, eps=1e-8):
    dot = (memory @ k.unsqueeze(-1)).squeeze(-1)
    norms = memory.norm(dim=-1) * k.norm(dim=-1, keepdim=True)
    return dot / norms   # slip: no eps in the denominator, a zero row (or zero key) gives NaN


def cosine_only_memory_norm(k, memory, eps=1e-8):
    dot = (memory @ k.unsqueeze(-1)).squeeze(-1)
    norms = memory.norm(dim=-1)   # slip: divides by the rows' norms only, forgetting the key's norm
    return dot / (norms + eps)


def cosine_key_norm_whole_batch(k, memory, eps=1e-8):
    dot = (memory @ k.unsqueeze(-1)).squeeze(-1)
    norms = memory.norm(dim=-1) * k.norm()   # slip: k.norm() without dim is the norm of the whole batch of keys
    return dot / (norms + eps)


def cosine_squared_norms(k, memory, eps=1e-8):
    dot = (memory @ k.unsqueeze(-1)).squeeze(-1)
    norms = (memory ** 2).sum(-1) * (k ** 2).sum(-1, keepdim=True)   # slip: squared norms, the square root is missing
    return dot / (norms + eps)


def cosine_batch_broadcast(k, memory, eps=1e-8):
    dot = k @ memory.transpose(-1, -2)   # slip: (B, M) @ (B, M, N) broadcasts over the batch, giving (B, B, N)
    norms = memory.norm(dim=-1) * k.norm(dim=-1, keepdim=True)
    return dot / (norms + eps)


def cosine_sum_of_norms(k, memory, eps=1e-8):
    dot = (memory @ k.unsqueeze(-1)).squeeze(-1)
    norms = memory.norm(dim=-1) + k.norm(dim=-1, keepdim=True)   # slip: adds the two norms instead of multiplying them
    return dot / (norms + eps)


def cosine_eps_in_numerator(k, memory, eps=1e-8):
    dot = (memory @ k.unsqueeze(-1)).squeeze(-1)
    norms = memory.norm(dim=-1) * k.norm(dim=-1, keepdim=True)
    return (dot + eps) / norms   # slip: eps added to the numerator, so a zero row still divides by zero


def cosine_dot_only(k, memory, eps=1e-8):
    return (memory @ k.unsqueeze(-1)).squeeze(-1)   # slip: returns the dot product, without dividing by the norms


def cosine_einsum(k, memory, eps=1e-8):
    dot = torch.einsum("...nm,...m->...n", memory, k)
    norms = torch.linalg.vector_norm(memory, dim=-1) * torch.linalg.vector_norm(k, dim=-1)[..., None]
    return dot / (norms + eps)


def cosine_sqrt_sums(k, memory, eps=1e-8):
    dot = (memory * k.unsqueeze(-2)).sum(-1)
    row_norms = (memory * memory).sum(-1).sqrt()
    key_norm = (k * k).sum(-1, keepdim=True).sqrt()
    return dot / (row_norms * key_norm + eps)


# ----------------------------------------------------------------------------------------------
# content_addressing
# ----------------------------------------------------------------------------------------------

def content_softmax_batch_axis(k, beta, memory):
    return torch.softmax(beta * ntm.cosine_similarity(k, memory), dim=0)   # slip: softmax over the batch instead of the rows


def content_no_beta(k, beta, memory):
    return torch.softmax(ntm.cosine_similarity(k, memory), dim=-1)   # slip: forgets the key strength beta


def content_beta_after_softmax(k, beta, memory):
    return beta * torch.softmax(ntm.cosine_similarity(k, memory), dim=-1)   # slip: multiplies by beta after the softmax


def content_divide_by_beta(k, beta, memory):
    return torch.softmax(ntm.cosine_similarity(k, memory) / beta, dim=-1)   # slip: divides by beta as if it were a temperature


def content_dot_product(k, beta, memory):
    scores = (memory @ k.unsqueeze(-1)).squeeze(-1)   # slip: raw dot product instead of the cosine similarity
    return torch.softmax(beta * scores, dim=-1)


def content_softplus_again(k, beta, memory):
    beta = F.softplus(beta)   # slip: applies the controller's softplus again to a beta that is already >= 0
    return torch.softmax(beta * ntm.cosine_similarity(k, memory), dim=-1)


def content_unstable_softmax(k, beta, memory):
    scores = torch.exp(beta * ntm.cosine_similarity(k, memory))   # slip: hand-written softmax without subtracting the max overflows for large beta
    return scores / scores.sum(-1, keepdim=True)


def content_normalise_by_sum(k, beta, memory):
    scores = beta * ntm.cosine_similarity(k, memory)
    return scores / scores.sum(-1, keepdim=True)   # slip: divides by the sum instead of a softmax (negative weights, no exp)


def content_stable_manual(k, beta, memory):
    scores = beta * ntm.cosine_similarity(k, memory)
    scores = scores - scores.max(dim=-1, keepdim=True).values
    weights = scores.exp()
    return weights / weights.sum(dim=-1, keepdim=True)


def content_log_softmax_exp(k, beta, memory):
    return F.log_softmax(ntm.cosine_similarity(k, memory) * beta, dim=-1).exp()


# ----------------------------------------------------------------------------------------------
# interpolate
# ----------------------------------------------------------------------------------------------

def interpolate_gate_swapped(w_c, w_prev, g):
    return g * w_prev + (1 - g) * w_c   # slip: the gate weights the previous weighting instead of the content weighting


def interpolate_no_one_minus(w_c, w_prev, g):
    return g * w_c + w_prev   # slip: forgets the (1 - g) factor on the previous weighting


def interpolate_precedence(w_c, w_prev, g):
    return g * w_c + 1 - g * w_prev   # slip: missing parentheses, computes g*w_c + 1 - g*w_prev


def interpolate_sigmoid_again(w_c, w_prev, g):
    g = torch.sigmoid(g)   # slip: squashes the gate with a sigmoid again although it is already in [0, 1]
    return g * w_c + (1 - g) * w_prev


def interpolate_average(w_c, w_prev, g):
    return (w_c + w_prev) / 2   # slip: averages the two weightings, ignoring the gate g


def interpolate_w_c_twice(w_c, w_prev, g):
    return g * w_c + (1 - g) * w_c   # slip: uses w_c in both terms, so the previous weighting is never used


def interpolate_in_place(w_c, w_prev, g):
    return w_c.mul_(g).add_((1 - g) * w_prev)   # slip: computes in place, overwriting the caller's content weighting


def interpolate_lerp_swapped(w_c, w_prev, g):
    return torch.lerp(w_c, w_prev, g)   # slip: lerp's start and end are swapped, so g = 1 keeps w_prev


def interpolate_lerp(w_c, w_prev, g):
    return torch.lerp(w_prev, w_c, g)


def interpolate_difference(w_c, w_prev, g):
    return w_prev + g * (w_c - w_prev)


# ----------------------------------------------------------------------------------------------
# shift
# ----------------------------------------------------------------------------------------------

def shift_direction_reversed(w, s):
    R = s.shape[-1] // 2
    rolled = torch.stack([torch.roll(w, -k, dims=-1) for k in range(-R, R + 1)], dim=-1)   # slip: rolls by -k, so shift +1 moves the focus up
    return (rolled * s.unsqueeze(-2)).sum(-1)


def shift_zero_padding(w, s):
    R = s.shape[-1] // 2
    N = w.shape[-1]
    padded = F.pad(w, (R, R))   # slip: zero padding instead of wrapping round, weight shifted past the ends is lost
    rolled = torch.stack([padded[..., R - k:R - k + N] for k in range(-R, R + 1)], dim=-1)
    return (rolled * s.unsqueeze(-2)).sum(-1)


def shift_hardcoded_three(w, s):
    rolled = torch.stack([torch.roll(w, k, dims=-1) for k in (-1, 0, 1)], dim=-1)   # slip: hard-codes the shifts -1, 0, +1
    return (rolled * s[..., :3].unsqueeze(-2)).sum(-1)


def shift_not_centred(w, s):
    rolled = torch.stack([torch.roll(w, k, dims=-1) for k in range(s.shape[-1])], dim=-1)   # slip: shifts 0..2R instead of -R..R
    return (rolled * s.unsqueeze(-2)).sum(-1)


def shift_roll_without_dims(w, s):
    R = s.shape[-1] // 2
    rolled = torch.stack([torch.roll(w, k) for k in range(-R, R + 1)], dim=-1)   # slip: roll without dims flattens the batch, rows spill into the next sequence
    return (rolled * s.unsqueeze(-2)).sum(-1)


def shift_float32_accumulator(w, s):
    R = s.shape[-1] // 2
    out = torch.zeros(w.shape)   # slip: a fresh float32 tensor, so float64 (or GPU) weightings come back as float32 on the CPU
    for j, k in enumerate(range(-R, R + 1)):
        out += s[..., j:j + 1] * torch.roll(w, k, dims=-1)
    return out


def shift_index_by_shift_value(w, s):
    R = s.shape[-1] // 2
    out = torch.zeros_like(w)
    for k in range(-R, R + 1):
        out = out + s[..., k, None] * torch.roll(w, k, dims=-1)   # slip: indexes s by the shift k instead of k + R
    return out


def shift_conv1d_not_flipped(w, s):
    B, N = w.shape
    R = s.shape[-1] // 2
    dtype = torch.promote_types(w.dtype, s.dtype)
    padded = F.pad(w.to(dtype).unsqueeze(0), (R, R), mode="circular")   # (1, B, N + 2R)
    out = F.conv1d(padded, s.to(dtype).unsqueeze(1), groups=B)   # slip: conv1d is a cross-correlation, the kernel s is not flipped
    return out.squeeze(0)


def shift_softmax_again(w, s):
    R = s.shape[-1] // 2
    s = torch.softmax(s, dim=-1)   # slip: applies a softmax to s although it is already a distribution
    rolled = torch.stack([torch.roll(w, k, dims=-1) for k in range(-R, R + 1)], dim=-1)
    return (rolled * s.unsqueeze(-2)).sum(-1)


def shift_gather(w, s):
    N = w.shape[-1]
    R = s.shape[-1] // 2
    i = torch.arange(N, device=w.device)
    ks = torch.arange(-R, R + 1, device=w.device)
    idx = (i[:, None] - ks[None, :]) % N   # (N, 2R+1): row (i - k) mod N
    return (w[..., idx] * s.unsqueeze(-2)).sum(-1)


def shift_conv1d_flipped(w, s):
    B, N = w.shape
    R = s.shape[-1] // 2
    dtype = torch.promote_types(w.dtype, s.dtype)
    padded = F.pad(w.to(dtype).unsqueeze(0), (R, R), mode="circular")   # (1, B, N + 2R)
    return F.conv1d(padded, s.flip(-1).to(dtype).unsqueeze(1), groups=B).squeeze(0)


def shift_loop(w, s):
    R = s.shape[-1] // 2
    out = torch.zeros_like(w)
    for j in range(s.shape[-1]):
        out = out + s[..., j:j + 1] * torch.roll(w, j - R, dims=-1)
    return out


# ----------------------------------------------------------------------------------------------
# sharpen
# ----------------------------------------------------------------------------------------------

def sharpen_no_normalise(w, gamma):
    return w ** gamma   # slip: forgets to renormalise, the weights no longer sum to 1


def sharpen_normalise_batch_axis(w, gamma):
    w = w ** gamma
    return w / w.sum(0, keepdim=True)   # slip: normalises over the batch instead of the rows


def sharpen_multiply(w, gamma):
    w = w * gamma   # slip: multiplies by gamma instead of raising to the power gamma
    return w / w.sum(-1, keepdim=True)


def sharpen_softmax(w, gamma):
    return torch.softmax(gamma * w, dim=-1)   # slip: a softmax of gamma*w instead of w**gamma renormalised


def sharpen_inverse_power(w, gamma):
    w = w ** (1 / gamma)   # slip: raises to 1/gamma, which flattens instead of sharpening
    return w / w.sum(-1, keepdim=True)


def sharpen_normalise_before_power(w, gamma):
    return (w / w.sum(-1, keepdim=True)) ** gamma   # slip: normalises before the power instead of after it


def sharpen_in_place(w, gamma):
    w.pow_(gamma)   # slip: raises to the power in place, overwriting the caller's weighting
    return w / w.sum(-1, keepdim=True)


def sharpen_sum_without_keepdim(w, gamma):
    w = w ** gamma
    return w / w.sum(-1)   # slip: sum without keepdim, (B, N) / (B,) broadcasts against the rows


def sharpen_normalise_by_max(w, gamma):
    w = w ** gamma
    return w / w.max(-1, keepdim=True).values   # slip: divides by the largest weight instead of the sum


def sharpen_log_softmax(w, gamma):
    return torch.softmax(gamma * torch.log(w), dim=-1)


def sharpen_rescale_by_max(w, gamma):
    w = (w / w.amax(dim=-1, keepdim=True)).pow(gamma)   # the largest weight becomes 1 before the power
    return w / w.sum(dim=-1, keepdim=True)


# ----------------------------------------------------------------------------------------------
# head_parameters
# ----------------------------------------------------------------------------------------------

def head_params_order_swapped(raw, M, num_shifts=3):
    k, beta, g, gamma, s = torch.split(raw, [M, 1, 1, 1, num_shifts], dim=-1)   # slip: takes gamma before s, not the order k, beta, g, s, gamma
    return k, F.softplus(beta), torch.sigmoid(g), torch.softmax(s, dim=-1), 1 + F.softplus(gamma)


def head_params_softmax_dim1(raw, M, num_shifts=3):
    k, beta, g, s, gamma = torch.split(raw, [M, 1, 1, num_shifts, 1], dim=-1)
    return k, F.softplus(beta), torch.sigmoid(g), torch.softmax(s, dim=1), 1 + F.softplus(gamma)   # slip: softmax over dim=1, not the last axis (wrong with extra leading dims)


def head_params_gamma_no_one(raw, M, num_shifts=3):
    k, beta, g, s, gamma = torch.split(raw, [M, 1, 1, num_shifts, 1], dim=-1)
    return k, F.softplus(beta), torch.sigmoid(g), torch.softmax(s, dim=-1), F.softplus(gamma)   # slip: gamma = softplus without the 1 +, so it can fall below 1


def head_params_beta_relu(raw, M, num_shifts=3):
    k, beta, g, s, gamma = torch.split(raw, [M, 1, 1, num_shifts, 1], dim=-1)
    return k, torch.relu(beta), torch.sigmoid(g), torch.softmax(s, dim=-1), 1 + F.softplus(gamma)   # slip: relu instead of softplus for beta


def head_params_g_raw(raw, M, num_shifts=3):
    k, beta, g, s, gamma = torch.split(raw, [M, 1, 1, num_shifts, 1], dim=-1)
    return k, F.softplus(beta), g, torch.softmax(s, dim=-1), 1 + F.softplus(gamma)   # slip: no sigmoid on the gate g


def head_params_softplus_of_one_plus(raw, M, num_shifts=3):
    k, beta, g, s, gamma = torch.split(raw, [M, 1, 1, num_shifts, 1], dim=-1)
    return k, F.softplus(beta), torch.sigmoid(g), torch.softmax(s, dim=-1), F.softplus(1 + gamma)   # slip: softplus(1 + gamma) instead of 1 + softplus(gamma)


def head_params_hardcoded_three(raw, M, num_shifts=3):
    k, beta, g, s, gamma = torch.split(raw, [M, 1, 1, 3, 1], dim=-1)   # slip: hard-codes 3 shifts instead of num_shifts
    return k, F.softplus(beta), torch.sigmoid(g), torch.softmax(s, dim=-1), 1 + F.softplus(gamma)


def head_params_beta_loses_axis(raw, M, num_shifts=3):
    k = raw[..., :M]
    beta = raw[..., M]   # slip: integer index drops the last axis, beta is (...,) instead of (..., 1)
    g = raw[..., M + 1:M + 2]
    s = raw[..., M + 2:M + 2 + num_shifts]
    gamma = raw[..., M + 2 + num_shifts:M + 3 + num_shifts]
    return k, F.softplus(beta), torch.sigmoid(g), torch.softmax(s, dim=-1), 1 + F.softplus(gamma)


def head_params_tanh_key(raw, M, num_shifts=3):
    k, beta, g, s, gamma = torch.split(raw, [M, 1, 1, num_shifts, 1], dim=-1)
    return torch.tanh(k), F.softplus(beta), torch.sigmoid(g), torch.softmax(s, dim=-1), 1 + F.softplus(gamma)   # slip: squashes the key with tanh, the key should be left as is


def head_params_exp_beta(raw, M, num_shifts=3):
    k, beta, g, s, gamma = torch.split(raw, [M, 1, 1, num_shifts, 1], dim=-1)
    return k, torch.exp(beta), torch.sigmoid(g), torch.softmax(s, dim=-1), 1 + F.softplus(gamma)   # slip: exp instead of softplus for beta


def head_params_slices(raw, M, num_shifts=3):
    k = raw[..., :M]
    beta = raw[..., M:M + 1]
    g = raw[..., M + 1:M + 2]
    s = raw[..., M + 2:M + 2 + num_shifts]
    gamma = raw[..., -1:]
    return (k, torch.nn.functional.softplus(beta), g.sigmoid(), s.softmax(dim=-1),
            torch.nn.functional.softplus(gamma) + 1)


def head_params_narrow(raw, M, num_shifts=3):
    sizes = [M, 1, 1, num_shifts, 1]
    starts = [sum(sizes[:i]) for i in range(len(sizes))]
    k, beta, g, s, gamma = (raw.narrow(-1, a, n) for a, n in zip(starts, sizes))
    return k, F.softplus(beta), 1 / (1 + torch.exp(-g)), F.softmax(s, dim=-1), 1.0 + F.softplus(gamma)


# ----------------------------------------------------------------------------------------------

SLIPS = [
    ("memory_read", "uses w @ memory, which broadcasts over the batch and returns (B, B, M)", memory_read_batch_broadcast),
    ("memory_read", "averages the (B, B, M) product over the first axis instead of pairing each weighting with its own memory", memory_read_mean_over_batch_pairs),
    ("memory_read", "sums over the row width instead of over the memory rows", memory_read_sum_wrong_axis),
    ("memory_read", "takes the mean over rows instead of the weighted sum", memory_read_mean_not_sum),
    ("memory_read", "applies a softmax to the weighting again before reading", memory_read_softmax_again),
    ("memory_read", "squeeze() without a dim drops the batch axis when B = 1", memory_read_squeeze_all),
    ("memory_read", "reads only the row with the largest weight (hard argmax) instead of the weighted sum", memory_read_argmax),
    ("memory_read", "einsum with different batch letters sums over the memories of all batch elements", memory_read_mixes_batches),

    ("memory_write", "adds first, then erases (wrong order)", memory_write_add_then_erase),
    ("memory_write", "erase not weighted by w: every row is erased", memory_write_erase_ignores_w),
    ("memory_write", "add vector not weighted by w: added in full to every row", memory_write_add_ignores_w),
    ("memory_write", "erases by subtracting w*e instead of multiplying by (1 - w*e)", memory_write_subtract_erase),
    ("memory_write", "leaves out the erase vector e", memory_write_ignores_e),
    ("memory_write", "adds to the old memory instead of the erased memory", memory_write_adds_to_old_memory),
    ("memory_write", "writes in place, modifying the input memory", memory_write_in_place),
    ("memory_write", "subtracts the add vector instead of adding it", memory_write_subtracts_add),

    ("cosine_similarity", "no eps in the denominator: NaN for a zero row or zero key", cosine_no_eps),
    ("cosine_similarity", "divides only by the rows' norms, not by the key's norm", cosine_only_memory_norm),
    ("cosine_similarity", "k.norm() without dim: the norm of the whole batch of keys", cosine_key_norm_whole_batch),
    ("cosine_similarity", "uses squared norms (forgets the square root)", cosine_squared_norms),
    ("cosine_similarity", "k @ memory.transpose broadcasts over the batch and returns (B, B, N)", cosine_batch_broadcast),
    ("cosine_similarity", "adds the two norms instead of multiplying them", cosine_sum_of_norms),
    ("cosine_similarity", "eps added to the numerator instead of the denominator", cosine_eps_in_numerator),
    ("cosine_similarity", "returns the plain dot product without normalising", cosine_dot_only),

    ("content_addressing", "softmax over the batch axis instead of the memory rows", content_softmax_batch_axis),
    ("content_addressing", "forgets the key strength beta", content_no_beta),
    ("content_addressing", "multiplies by beta after the softmax", content_beta_after_softmax),
    ("content_addressing", "divides the cosine by beta (treats it as a temperature)", content_divide_by_beta),
    ("content_addressing", "uses the raw dot product instead of the cosine similarity", content_dot_product),
    ("content_addressing", "applies softplus to beta again", content_softplus_again),
    ("content_addressing", "hand-written softmax without subtracting the max: overflows to NaN for large beta", content_unstable_softmax),
    ("content_addressing", "normalises beta*cosine by its sum instead of a softmax", content_normalise_by_sum),

    ("interpolate", "gate swapped: g weights the previous weighting", interpolate_gate_swapped),
    ("interpolate", "forgets the (1 - g) factor on the previous weighting", interpolate_no_one_minus),
    ("interpolate", "missing parentheses: g*w_c + 1 - g*w_prev", interpolate_precedence),
    ("interpolate", "applies a sigmoid to the gate again", interpolate_sigmoid_again),
    ("interpolate", "plain average of the two weightings, ignoring g", interpolate_average),
    ("interpolate", "uses w_c in both terms (typo), the previous weighting is ignored", interpolate_w_c_twice),
    ("interpolate", "computes in place, overwriting the input w_c", interpolate_in_place),
    ("interpolate", "torch.lerp with start and end swapped", interpolate_lerp_swapped),

    ("shift", "shift direction reversed (rolls by -k)", shift_direction_reversed),
    ("shift", "zero padding instead of circular wrap-around", shift_zero_padding),
    ("shift", "hard-codes three shifts -1, 0, +1 instead of 2R+1", shift_hardcoded_three),
    ("shift", "shifts by 0..2R instead of -R..R (not centred)", shift_not_centred),
    ("shift", "torch.roll without dims rolls the flattened batch, so rows spill between batch elements", shift_roll_without_dims),
    ("shift", "accumulates into a new float32 tensor, losing float64 dtype (and device)", shift_float32_accumulator),
    ("shift", "indexes s by the shift value k instead of k + R", shift_index_by_shift_value),
    ("shift", "uses conv1d (a cross-correlation) without flipping s, which reverses the direction", shift_conv1d_not_flipped),
    ("shift", "applies a softmax to s again", shift_softmax_again),

    ("sharpen", "forgets to renormalise after the power", sharpen_no_normalise),
    ("sharpen", "normalises over the batch axis instead of the rows", sharpen_normalise_batch_axis),
    ("sharpen", "multiplies by gamma instead of raising to the power gamma", sharpen_multiply),
    ("sharpen", "softmax of gamma*w instead of w**gamma renormalised", sharpen_softmax),
    ("sharpen", "raises to 1/gamma instead of gamma", sharpen_inverse_power),
    ("sharpen", "normalises before the power instead of after it", sharpen_normalise_before_power),
    ("sharpen", "raises to the power in place, modifying the input", sharpen_in_place),
    ("sharpen", "sum without keepdim, broadcasts the row sums along the wrong axis", sharpen_sum_without_keepdim),
    ("sharpen", "divides by the max weight instead of the sum", sharpen_normalise_by_max),

    ("head_parameters", "splits in the order k, beta, g, gamma, s (gamma and s swapped)", head_params_order_swapped),
    ("head_parameters", "softmax of s over dim=1 instead of the last axis", head_params_softmax_dim1),
    ("head_parameters", "gamma = softplus without adding 1", head_params_gamma_no_one),
    ("head_parameters", "relu instead of softplus for beta", head_params_beta_relu),
    ("head_parameters", "no sigmoid on the gate g", head_params_g_raw),
    ("head_parameters", "softplus(1 + gamma) instead of 1 + softplus(gamma)", head_params_softplus_of_one_plus),
    ("head_parameters", "hard-codes 3 shifts in the split instead of num_shifts", head_params_hardcoded_three),
    ("head_parameters", "integer indexing drops beta's last axis", head_params_beta_loses_axis),
    ("head_parameters", "applies tanh to the key", head_params_tanh_key),
    ("head_parameters", "exp instead of softplus for beta", head_params_exp_beta),
]

CORRECT = [
    ("memory_read", "einsum over the rows", memory_read_einsum),
    ("memory_read", "broadcast multiply and sum over the rows", memory_read_broadcast_sum),
    ("memory_read", "transposed memory times the weighting as a column", memory_read_transposed),

    ("memory_write", "erase and add matrices as einsum outer products", memory_write_einsum),
    ("memory_write", "indexing with None to broadcast, one expression", memory_write_outer),

    ("cosine_similarity", "einsum dot product and linalg.vector_norm", cosine_einsum),
    ("cosine_similarity", "elementwise sums and square roots", cosine_sqrt_sums),

    ("content_addressing", "softmax written out with the max subtracted", content_stable_manual),
    ("content_addressing", "exp of log_softmax", content_log_softmax_exp),

    ("interpolate", "torch.lerp(w_prev, w_c, g)", interpolate_lerp),
    ("interpolate", "w_prev + g * (w_c - w_prev)", interpolate_difference),

    ("shift", "gathers the rows (i - k) mod N with an index matrix", shift_gather),
    ("shift", "conv1d with circular padding and the kernel flipped", shift_conv1d_flipped),
    ("shift", "loop accumulating rolled copies into zeros_like(w)", shift_loop),

    ("sharpen", "softmax of gamma * log(w)", sharpen_log_softmax),
    ("sharpen", "divides by the largest weight before the power, then renormalises", sharpen_rescale_by_max),

    ("head_parameters", "slices by hand, sigmoid and softmax as tensor methods", head_params_slices),
    ("head_parameters", "narrow with computed offsets, sigmoid written out", head_params_narrow),
]
