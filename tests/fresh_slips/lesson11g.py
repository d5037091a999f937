"""Lesson 11, independent catalogue (eighth): learner-style wrong answers (one slip each) and correct-but-unusual answers.

Written from the notebook text and the reference solution only, without reading the checks, and avoiding the
slips of the earlier catalogues (tests/fresh_slips/lesson11*.py). Descriptions starting "u: " are unusual slips.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from course_utils.masks import causal_mask
from course_utils.vision import conv1x1
from course_utils.vision import self_attention_2d as reference_self_attention_2d


# ================================================================ Exercise 1: self_attention_2d
def sa_returns_swapped(x, W_f, W_g, W_h, W_v):
    B, C, height, width = x.shape
    k = conv1x1(x, W_f).flatten(2).transpose(1, 2)
    q = conv1x1(x, W_g).flatten(2).transpose(1, 2)
    v = conv1x1(x, W_h).flatten(2).transpose(1, 2)
    scores = q @ k.transpose(1, 2) / math.sqrt(k.size(-1))
    weights = torch.softmax(scores, dim=-1)
    read = (weights @ v).transpose(1, 2).reshape(B, -1, height, width)
    return weights, conv1x1(read, W_v)                           # slip: returns (weights, o), not (o, weights)


def sa_reshape_with_C(x, W_f, W_g, W_h, W_v):
    B, C, height, width = x.shape
    k = conv1x1(x, W_f).flatten(2).transpose(1, 2)
    q = conv1x1(x, W_g).flatten(2).transpose(1, 2)
    v = conv1x1(x, W_h).flatten(2).transpose(1, 2)
    scores = q @ k.transpose(1, 2) / math.sqrt(k.size(-1))
    weights = torch.softmax(scores, dim=-1)
    read = (weights @ v).transpose(1, 2).reshape(B, C, height, width)   # slip: C channels, the values have C̄: raises
    return conv1x1(read, W_v), weights


def sa_scale_from_C(x, W_f, W_g, W_h, W_v):
    B, C, height, width = x.shape
    k = conv1x1(x, W_f).flatten(2).transpose(1, 2)
    q = conv1x1(x, W_g).flatten(2).transpose(1, 2)
    v = conv1x1(x, W_h).flatten(2).transpose(1, 2)
    scores = q @ k.transpose(1, 2) / math.sqrt(C // 8)          # slip: C̄ recomputed as C // 8, not W_f's rows
    weights = torch.softmax(scores, dim=-1)
    read = (weights @ v).transpose(1, 2).reshape(B, -1, height, width)
    return conv1x1(read, W_v), weights


def sa_u_dotT_3d(x, W_f, W_g, W_h, W_v):
    B, C, height, width = x.shape
    k = conv1x1(x, W_f).flatten(2).transpose(1, 2)
    q = conv1x1(x, W_g).flatten(2).transpose(1, 2)
    v = conv1x1(x, W_h).flatten(2).transpose(1, 2)
    scores = q @ k.T / math.sqrt(k.size(-1))                     # slip: .T on a 3-D tensor reverses all axes: (C̄, N, B)
    weights = torch.softmax(scores, dim=-1)
    read = (weights @ v).transpose(1, 2).reshape(B, -1, height, width)
    return conv1x1(read, W_v), weights


def sa_u_detached_weights(x, W_f, W_g, W_h, W_v):
    B, C, height, width = x.shape
    k = conv1x1(x, W_f).flatten(2).transpose(1, 2)
    q = conv1x1(x, W_g).flatten(2).transpose(1, 2)
    v = conv1x1(x, W_h).flatten(2).transpose(1, 2)
    scores = q @ k.transpose(1, 2) / math.sqrt(k.size(-1))
    weights = torch.softmax(scores, dim=-1).detach()             # slip: detached before mixing: no gradient to W_f, W_g
    read = (weights @ v).transpose(1, 2).reshape(B, -1, height, width)
    return conv1x1(read, W_v), weights


def sa_u_no_self(x, W_f, W_g, W_h, W_v):
    B, C, height, width = x.shape
    N = height * width
    k = conv1x1(x, W_f).flatten(2).transpose(1, 2)
    q = conv1x1(x, W_g).flatten(2).transpose(1, 2)
    v = conv1x1(x, W_h).flatten(2).transpose(1, 2)
    scores = q @ k.transpose(1, 2) / math.sqrt(k.size(-1))
    scores = scores.masked_fill(torch.eye(N, dtype=torch.bool), float("-inf"))   # slip: a pixel may not attend to itself
    weights = torch.softmax(scores, dim=-1)
    read = (weights @ v).transpose(1, 2).reshape(B, -1, height, width)
    return conv1x1(read, W_v), weights


def sa_ok_linear_bmm(x, W_f, W_g, W_h, W_v):
    """tokens (B, N, C) first, F.linear projections, bmm, an nn.Softmax module, W_v by F.linear, unflatten back."""
    B, C, height, width = x.shape
    tokens = x.flatten(2).permute(0, 2, 1)                       # (B, N, C)
    q, k, v = F.linear(tokens, W_g), F.linear(tokens, W_f), F.linear(tokens, W_h)
    weights = nn.Softmax(dim=2)(torch.bmm(q, k.permute(0, 2, 1)) * W_f.shape[0] ** -0.5)
    o = F.linear(torch.bmm(weights, v), W_v)                     # (B, N, C)
    return torch.movedim(o, 2, 1).unflatten(2, (height, width)), weights


def sa_ok_transposed_scores(x, W_f, W_g, W_h, W_v):
    """scores built keys-first (k·qᵀ), softmax over dim 1 (the keys there), transposed back with .mT."""
    B, C, height, width = x.shape
    k = conv1x1(x, W_f).flatten(2)                               # (B, C̄, N)
    q = conv1x1(x, W_g).flatten(2)
    v = conv1x1(x, W_h).flatten(2)
    scores_T = k.mT @ q / math.sqrt(W_f.shape[0])                # (B, N_keys, N_queries)
    weights = torch.softmax(scores_T, dim=1).mT                  # (B, N_queries, N_keys)
    read = (v @ weights.mT).reshape(B, -1, height, width)       # (B, C̄, N) -> (B, C̄, H, W)
    return conv1x1(read, W_v), weights


# ================================================================ Exercise 2: SelfAttention2d (self_attention_block)
class BlockSuperLate(nn.Module):
    def __init__(self, channels):
        c_bar = max(channels // 8, 1)
        self.f = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)      # slip: modules assigned before super().__init__(): raises
        self.g = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.h = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.v = nn.Conv2d(c_bar, channels, kernel_size=1, bias=False)
        super().__init__()
        self.gamma = nn.Parameter(torch.zeros(1))

    def forward(self, x):
        o, weights = reference_self_attention_2d(x, self.f.weight[:, :, 0, 0], self.g.weight[:, :, 0, 0],
                                                 self.h.weight[:, :, 0, 0], self.v.weight[:, :, 0, 0])
        self.attn_weights = weights.detach()
        return x + self.gamma * o


class BlockFTwice(nn.Module):
    def __init__(self, channels):
        super().__init__()
        c_bar = max(channels // 8, 1)
        self.f = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.g = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.h = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.v = nn.Conv2d(c_bar, channels, kernel_size=1, bias=False)
        self.gamma = nn.Parameter(torch.zeros(1))

    def forward(self, x):
        o, weights = reference_self_attention_2d(x, self.f.weight[:, :, 0, 0], self.f.weight[:, :, 0, 0],   # slip: f for the queries too, g unused
                                                 self.h.weight[:, :, 0, 0], self.v.weight[:, :, 0, 0])
        self.attn_weights = weights.detach()
        return x + self.gamma * o


class BlockWrongAttrName(nn.Module):
    def __init__(self, channels):
        super().__init__()
        c_bar = max(channels // 8, 1)
        self.f = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.g = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.h = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.v = nn.Conv2d(c_bar, channels, kernel_size=1, bias=False)
        self.gamma = nn.Parameter(torch.zeros(1))

    def forward(self, x):
        o, weights = reference_self_attention_2d(x, self.f.weight[:, :, 0, 0], self.g.weight[:, :, 0, 0],
                                                 self.h.weight[:, :, 0, 0], self.v.weight[:, :, 0, 0])
        self.attention_weights = weights.detach()                # slip: kept as attention_weights, not attn_weights
        return x + self.gamma * o


class BlockUGammaClamped(nn.Module):
    def __init__(self, channels):
        super().__init__()
        c_bar = max(channels // 8, 1)
        self.f = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.g = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.h = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.v = nn.Conv2d(c_bar, channels, kernel_size=1, bias=False)
        self.gamma = nn.Parameter(torch.zeros(1))

    def forward(self, x):
        o, weights = reference_self_attention_2d(x, self.f.weight[:, :, 0, 0], self.g.weight[:, :, 0, 0],
                                                 self.h.weight[:, :, 0, 0], self.v.weight[:, :, 0, 0])
        self.attn_weights = weights.detach()
        return x + self.gamma.clamp(min=0) * o                   # slip: γ kept non-negative: a negative γ acts as 0


class BlockUDetachedInput(nn.Module):
    def __init__(self, channels):
        super().__init__()
        c_bar = max(channels // 8, 1)
        self.f = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.g = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.h = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.v = nn.Conv2d(c_bar, channels, kernel_size=1, bias=False)
        self.gamma = nn.Parameter(torch.zeros(1))

    def forward(self, x):
        o, weights = reference_self_attention_2d(x.detach(), self.f.weight[:, :, 0, 0], self.g.weight[:, :, 0, 0],   # slip: x detached: no gradient to x through o
                                                 self.h.weight[:, :, 0, 0], self.v.weight[:, :, 0, 0])
        self.attn_weights = weights.detach()
        return x + self.gamma * o


class BlockUGammaClassAttr(nn.Module):
    gamma = nn.Parameter(torch.zeros(1))                         # slip: class attribute: not registered, shared by every block

    def __init__(self, channels):
        super().__init__()
        c_bar = max(channels // 8, 1)
        self.f = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.g = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.h = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.v = nn.Conv2d(c_bar, channels, kernel_size=1, bias=False)

    def forward(self, x):
        o, weights = reference_self_attention_2d(x, self.f.weight[:, :, 0, 0], self.g.weight[:, :, 0, 0],
                                                 self.h.weight[:, :, 0, 0], self.v.weight[:, :, 0, 0])
        self.attn_weights = weights.detach()
        return x + self.gamma * o


class BlockOkLerp(nn.Module):
    """weights by reshape(w.shape[:2]), γ = Parameter(torch.tensor([0.])), y = torch.lerp(x, x + o, γ) = x + γ·o."""

    def __init__(self, channels):
        super().__init__()
        c_bar = max(channels // 8, 1)
        self.f = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.g = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.h = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.v = nn.Conv2d(c_bar, channels, kernel_size=1, bias=False)
        self.gamma = nn.Parameter(torch.tensor([0.0]))

    def forward(self, x):
        mats = [m.weight.reshape(m.weight.shape[:2]) for m in (self.f, self.g, self.h, self.v)]
        o, weights = reference_self_attention_2d(x, *mats)
        self.attn_weights = weights.detach()
        return torch.lerp(x, x + o, self.gamma)


# ================================================================ Exercise 3: patchify
def patch_inside_before_which(images, patch_size):
    B, C, H, W = images.shape
    P = patch_size
    x = images.reshape(B, C, H // P, P, W // P, P)
    x = x.permute(0, 3, 5, 2, 4, 1)                              # slip: (P, P, H/P, W/P, C): inside-patch axes first
    return x.reshape(B, (H // P) * (W // P), P * P * C)


def patch_P_times_2(images, patch_size):
    B, C, H, W = images.shape
    P = patch_size
    x = images.reshape(B, C, H // P, P, W // P, P).permute(0, 2, 4, 3, 5, 1)
    return x.reshape(B, (H // P) * (W // P), P * 2 * C)         # slip: P·2 for P²: right only for P = 2


def patch_shape_channels_last(images, patch_size):
    B, H, W, C = images.shape                                    # slip: shape read as (B, H, W, C)
    P = patch_size
    x = images.reshape(B, C, H // P, P, W // P, P).permute(0, 2, 4, 3, 5, 1)
    return x.reshape(B, (H // P) * (W // P), P * P * C)


def patch_u_detached(images, patch_size):
    B, C, H, W = images.shape
    P = patch_size
    x = images.detach().reshape(B, C, H // P, P, W // P, P)      # slip: detached: no gradient flows back to the images
    x = x.permute(0, 2, 4, 3, 5, 1)
    return x.reshape(B, (H // P) * (W // P), P * P * C)


def patch_u_unfold_channels_unmoved(images, patch_size):
    B, C, H, W = images.shape
    P = patch_size
    x = images.unfold(2, P, P).unfold(3, P, P)                   # (B, C, H/P, W/P, P, P)
    return x.reshape(B, (H // P) * (W // P), P * P * C)         # slip: C never moved last: right for C = 1 only


def patch_ok_as_strided(images, patch_size):
    """one as_strided view (B, H/P, W/P, P, P, C) of the contiguous images, then reshape."""
    B, C, H, W = images.shape
    P = patch_size
    x = images.contiguous()
    view = x.as_strided((B, H // P, W // P, P, P, C), (C * H * W, P * W, P, W, 1, H * W))
    return view.reshape(B, -1, P * P * C)


# ================================================================ Exercise 4: dense_block
def dense_roll_zero_batch(x, W_f, W_g, dilation):
    x_past = torch.roll(x, shifts=dilation, dims=1)
    x_past[:dilation] = 0                                        # slip: zeroes the first d sequences, not the first d steps
    filter_ = x @ W_f[0] + x_past @ W_f[1]
    gate = x @ W_g[0] + x_past @ W_g[1]
    return torch.cat([x, torch.tanh(filter_) * torch.sigmoid(gate)], dim=-1)


def dense_copy_no_shift(x, W_f, W_g, dilation):
    x_past = torch.zeros_like(x)
    x_past[:, dilation:] = x[:, dilation:]                       # slip: same steps copied, no shift: x_t, not x_{t-d}
    filter_ = x @ W_f[0] + x_past @ W_f[1]
    gate = x @ W_g[0] + x_past @ W_g[1]
    return torch.cat([x, torch.tanh(filter_) * torch.sigmoid(gate)], dim=-1)


def dense_appends_past(x, W_f, W_g, dilation):
    B, T, d_in = x.shape
    x_past = F.pad(x, (0, 0, dilation, 0))[:, :T]
    filter_ = x @ W_f[0] + x_past @ W_f[1]
    gate = x @ W_g[0] + x_past @ W_g[1]
    return torch.cat([x_past, torch.tanh(filter_) * torch.sigmoid(gate)], dim=-1)   # slip: the delayed x_past appended, not x


def dense_u_sigmoid_sign(x, W_f, W_g, dilation):
    B, T, d_in = x.shape
    x_past = F.pad(x, (0, 0, dilation, 0))[:, :T]
    filter_ = x @ W_f[0] + x_past @ W_f[1]
    gate = x @ W_g[0] + x_past @ W_g[1]
    sigma = 1 / (1 + torch.exp(gate))                            # slip: hand-written σ without the minus: σ(−gate)
    return torch.cat([x, torch.tanh(filter_) * sigma], dim=-1)


def dense_u_einsum_sums_taps(x, W_f, W_g, dilation):
    B, T, d_in = x.shape
    x_past = F.pad(x, (0, 0, dilation, 0))[:, :T]
    filter_ = torch.einsum("btd,kdf->btf", x, W_f)               # slip: k summed: both taps on the present, x_past unused
    gate = torch.einsum("btd,kdf->btf", x, W_g)
    return torch.cat([x, torch.tanh(filter_) * torch.sigmoid(gate)], dim=-1)


def dense_u_interleaved_taps(x, W_f, W_g, dilation):
    B, T, d_in = x.shape
    x_past = F.pad(x, (0, 0, dilation, 0))[:, :T]
    both = torch.cat([x, x_past], dim=-1)                        # (B, T, 2·d_in): [present, past]
    Wf = W_f.transpose(0, 1).reshape(2 * d_in, -1)               # slip: rows interleaved (feature, tap), not [tap 0; tap 1]
    Wg = W_g.transpose(0, 1).reshape(2 * d_in, -1)
    return torch.cat([x, torch.tanh(both @ Wf) * torch.sigmoid(both @ Wg)], dim=-1)


def dense_ok_crop_end_tanh_by_sigmoid(x, W_f, W_g, dilation):
    """pad d on the left and drop the last d steps; tanh(f) written as 2σ(2f) − 1; F.linear for the taps."""
    x_past = F.pad(x, (0, 0, dilation, 0))[:, :-dilation]
    filter_ = F.linear(x, W_f[0].T) + F.linear(x_past, W_f[1].T)
    gate = F.linear(x, W_g[0].T) + F.linear(x_past, W_g[1].T)
    return torch.cat([x, (2 * torch.sigmoid(2 * filter_) - 1) * torch.sigmoid(gate)], dim=-1)


# ================================================================ Exercise 5: causal_attention_block
def cab_mixes_x(x, W_q, W_k, W_v):
    B, T, d_in = x.shape
    q, k = x @ W_q, x @ W_k
    scores = q @ k.transpose(1, 2) / math.sqrt(k.size(-1))
    scores = scores.masked_fill(~causal_mask(T), float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return torch.cat([x, weights @ x], dim=-1), weights          # slip: mixes x itself, W_v never applied


def cab_scale_by_T(x, W_q, W_k, W_v):
    B, T, d_in = x.shape
    q, k, v = x @ W_q, x @ W_k, x @ W_v
    scores = q @ k.transpose(1, 2) / math.sqrt(k.size(1))       # slip: k.size(1) is T, not d_key
    scores = scores.masked_fill(~causal_mask(T), float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return torch.cat([x, weights @ v], dim=-1), weights


def cab_cat_no_dim(x, W_q, W_k, W_v):
    B, T, d_in = x.shape
    q, k, v = x @ W_q, x @ W_k, x @ W_v
    scores = q @ k.transpose(1, 2) / math.sqrt(k.size(-1))
    scores = scores.masked_fill(~causal_mask(T), float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return torch.cat([x, weights @ v]), weights                  # slip: no dim: concatenated along the batch axis (raises)


def cab_u_double_scaled(x, W_q, W_k, W_v):
    B, T, d_in = x.shape
    d_key = W_k.shape[1]
    q, k, v = x @ W_q / math.sqrt(d_key), x @ W_k, x @ W_v       # q pre-scaled ...
    scores = q @ k.transpose(1, 2) / math.sqrt(d_key)           # slip: ... and the scores scaled again: 1/d_key in all
    scores = scores.masked_fill(~causal_mask(T), float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return torch.cat([x, weights @ v], dim=-1), weights


def cab_u_additive_inf_times_mask(x, W_q, W_k, W_v):
    B, T, d_in = x.shape
    q, k, v = x @ W_q, x @ W_k, x @ W_v
    scores = q @ k.transpose(1, 2) / math.sqrt(k.size(-1))
    scores = scores + (causal_mask(T).to(x.dtype) - 1) * float("inf")   # slip: 0·∞ = NaN at every allowed pair
    weights = torch.softmax(scores, dim=-1)
    return torch.cat([x, weights @ v], dim=-1), weights


def cab_u_weights_transposed_mix(x, W_q, W_k, W_v):
    B, T, d_in = x.shape
    q, k, v = x @ W_q, x @ W_k, x @ W_v
    scores = q @ k.transpose(1, 2) / math.sqrt(k.size(-1))
    scores = scores.masked_fill(~causal_mask(T), float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return torch.cat([x, weights.transpose(1, 2) @ v], dim=-1), weights   # slip: αᵀ mixes: step s reads later steps


def cab_ok_finfo_dstack(x, W_q, W_k, W_v):
    """mask filled with finfo(dtype).min, read-out by einsum, [x, read-out] by torch.dstack."""
    T = x.shape[1]
    q = torch.einsum("bti,ik->btk", x, W_q)
    k = torch.einsum("bti,ik->btk", x, W_k)
    v = torch.einsum("bti,iv->btv", x, W_v)
    scores = torch.einsum("btk,bsk->bts", q, k) / math.sqrt(W_q.shape[-1])
    scores = scores.masked_fill(~causal_mask(T, device=x.device), torch.finfo(scores.dtype).min)
    weights = scores.softmax(-1)
    return torch.dstack([x, torch.einsum("bts,bsv->btv", weights, v)]), weights


SLIPS = [
    ("self_attention_2d", "returns (weights, o), not (o, weights)", sa_returns_swapped),
    ("self_attention_2d", "read reshaped to (B, C, H, W) with C, not C̄ (-1): raises", sa_reshape_with_C),
    ("self_attention_2d", "scale sqrt(C // 8), not the actual C̄ = W_f.shape[0] (raises for C < 8)", sa_scale_from_C),
    ("self_attention_2d", "u: k.T on a 3-D tensor (reverses all axes): raises", sa_u_dotT_3d),
    ("self_attention_2d", "u: weights detached before mixing: no gradient to W_f, W_g", sa_u_detached_weights),
    ("self_attention_2d", "u: diagonal masked: a pixel never attends to itself", sa_u_no_self),
    ("self_attention_block", "super().__init__() called after the convs are assigned: raises", BlockSuperLate),
    ("self_attention_block", "f's weight passed for the queries too (g unused)", BlockFTwice),
    ("self_attention_block", "weights kept as self.attention_weights, not self.attn_weights", BlockWrongAttrName),
    ("self_attention_block", "u: γ.clamp(min=0): a negative γ acts as 0", BlockUGammaClamped),
    ("self_attention_block", "u: attention on x.detach(): no gradient to x through o", BlockUDetachedInput),
    ("self_attention_block", "u: γ a class attribute: not registered as a parameter, shared", BlockUGammaClassAttr),
    ("patchify", "permute(0, 3, 5, 2, 4, 1): inside-patch axes before the patch axes", patch_inside_before_which),
    ("patchify", "last axis P·2·C for P·P·C: right only for P = 2 (raises otherwise)", patch_P_times_2),
    ("patchify", "shape unpacked as (B, H, W, C): wrong (or raises) unless C = H = W", patch_shape_channels_last),
    ("patchify", "u: images.detach(): no gradient back to the images", patch_u_detached),
    ("patchify", "u: Tensor.unfold twice, reshaped without moving C: right for C = 1 only", patch_u_unfold_channels_unmoved),
    ("dense_block", "roll then x_past[:d] = 0: zeroes batch rows, not the first d steps", dense_roll_zero_batch),
    ("dense_block", "x_past[:, d:] = x[:, d:]: no shift, only the first d steps zeroed", dense_copy_no_shift),
    ("dense_block", "appends x_past (the delayed input), not x", dense_appends_past),
    ("dense_block", "u: hand-written σ = 1/(1 + exp(g)): σ(−g)", dense_u_sigmoid_sign),
    ("dense_block", "u: einsum 'btd,kdf->btf' sums both taps on the present", dense_u_einsum_sums_taps),
    ("causal_attention_block", "mixes x, not v = x W_v (W_v unused)", cab_mixes_x),
    ("causal_attention_block", "scaled by sqrt(k.size(1)) = sqrt(T)", cab_scale_by_T),
    ("causal_attention_block", "torch.cat without dim=-1: batch axis, raises", cab_cat_no_dim),
    ("causal_attention_block", "u: q pre-scaled and scores scaled again: 1/d_key", cab_u_double_scaled),
    ("causal_attention_block", "u: additive mask (m − 1)·∞: 0·∞ = NaN everywhere", cab_u_additive_inf_times_mask),
    ("causal_attention_block", "u: read-out mixes with weightsᵀ (anti-causal flow)", cab_u_weights_transposed_mix),
    ("dense_block", "u: stacked taps reshaped interleaved (feature, tap)", dense_u_interleaved_taps),
]

CORRECT = [
    ("self_attention_2d", "tokens first, F.linear, bmm, nn.Softmax module, movedim + unflatten back", sa_ok_linear_bmm),
    ("self_attention_2d", "keys-first scores k·qᵀ, softmax over dim 1, .mT back", sa_ok_transposed_scores),
    ("self_attention_block", "reshape(w.shape[:2]) weights, tensor([0.]) γ, torch.lerp(x, x + o, γ)", BlockOkLerp),
    ("patchify", "one as_strided view (B, H/P, W/P, P, P, C)", patch_ok_as_strided),
    ("dense_block", "pad left then crop [:, :-d], F.linear taps, tanh as 2σ(2f) − 1", dense_ok_crop_end_tanh_by_sigmoid),
    ("causal_attention_block", "finfo.min fill, einsum throughout, torch.dstack", cab_ok_finfo_dstack),
]
