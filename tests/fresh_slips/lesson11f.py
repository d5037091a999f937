"""Lesson 11, independent catalogue (seventh): learner-style wrong answers (one slip each) and correct-but-unusual answers.

Written from the notebook text and the reference solution only, without reading the checks, and avoiding the
slips of the earlier catalogues (tests/fresh_slips/lesson11*.py). Descriptions starting "u: " are unusual slips.
"""
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from course_utils.masks import causal_mask
from course_utils.vision import conv1x1
from course_utils.vision import self_attention_2d as reference_self_attention_2d


# ================================================================ Exercise 1: self_attention_2d
def sa_times_sqrt(x, W_f, W_g, W_h, W_v):
    B, C, height, width = x.shape
    k = conv1x1(x, W_f).flatten(2).transpose(1, 2)
    q = conv1x1(x, W_g).flatten(2).transpose(1, 2)
    v = conv1x1(x, W_h).flatten(2).transpose(1, 2)
    scores = q @ k.transpose(1, 2) * math.sqrt(k.size(-1))      # slip: multiplied by sqrt(C̄), not divided
    weights = torch.softmax(scores, dim=-1)
    read = (weights @ v).transpose(1, 2).reshape(B, -1, height, width)
    return conv1x1(read, W_v), weights


def sa_keys_as_rows(x, W_f, W_g, W_h, W_v):
    B, C, height, width = x.shape
    k = conv1x1(x, W_f).flatten(2).transpose(1, 2)
    q = conv1x1(x, W_g).flatten(2).transpose(1, 2)
    v = conv1x1(x, W_h).flatten(2).transpose(1, 2)
    scores = k @ q.transpose(1, 2) / math.sqrt(k.size(-1))      # slip: k·qᵀ: rows are the keys, not the queries
    weights = torch.softmax(scores, dim=-1)
    read = (weights @ v).transpose(1, 2).reshape(B, -1, height, width)
    return conv1x1(read, W_v), weights


def sa_token_layout_output(x, W_f, W_g, W_h, W_v):
    B, C, height, width = x.shape
    k = conv1x1(x, W_f).flatten(2).transpose(1, 2)
    q = conv1x1(x, W_g).flatten(2).transpose(1, 2)
    v = conv1x1(x, W_h).flatten(2).transpose(1, 2)
    weights = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(k.size(-1)), dim=-1)
    o = (weights @ v) @ W_v.T                                    # (B, N, C)
    return o, weights                                            # slip: o left as (B, N, C), never put back to (B, C, H, W)


def sa_u_tokens_by_reshape(x, W_f, W_g, W_h, W_v):
    B, C, height, width = x.shape
    N = height * width
    k = conv1x1(x, W_f).flatten(2).reshape(B, N, -1)             # slip: reshape, not transpose: right only when C̄ = 1
    q = conv1x1(x, W_g).flatten(2).reshape(B, N, -1)
    v = conv1x1(x, W_h).flatten(2).reshape(B, N, -1)
    weights = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(k.size(-1)), dim=-1)
    read = (weights @ v).transpose(1, 2).reshape(B, -1, height, width)
    return conv1x1(read, W_v), weights


def sa_u_softmax_float32(x, W_f, W_g, W_h, W_v):
    B, C, height, width = x.shape
    k = conv1x1(x, W_f).flatten(2).transpose(1, 2)
    q = conv1x1(x, W_g).flatten(2).transpose(1, 2)
    v = conv1x1(x, W_h).flatten(2).transpose(1, 2)
    scores = q @ k.transpose(1, 2) / math.sqrt(k.size(-1))
    weights = torch.softmax(scores, dim=-1, dtype=torch.float32)  # slip: "stable" float32 softmax: float64 x then raises
    read = (weights @ v).transpose(1, 2).reshape(B, -1, height, width)
    return conv1x1(read, W_v), weights


def sa_u_power_precedence(x, W_f, W_g, W_h, W_v):
    B, C, height, width = x.shape
    k = conv1x1(x, W_f).flatten(2).transpose(1, 2)
    q = conv1x1(x, W_g).flatten(2).transpose(1, 2)
    v = conv1x1(x, W_h).flatten(2).transpose(1, 2)
    scores = q @ k.transpose(1, 2) / (k.size(-1) ** 1 / 2)      # slip: ** 1/2 is (C̄**1)/2: right only for C̄ = 4
    weights = torch.softmax(scores, dim=-1)
    read = (weights @ v).transpose(1, 2).reshape(B, -1, height, width)
    return conv1x1(read, W_v), weights


def sa_u_softmax_whole_map(x, W_f, W_g, W_h, W_v):
    B, C, height, width = x.shape
    k = conv1x1(x, W_f).flatten(2).transpose(1, 2)
    q = conv1x1(x, W_g).flatten(2).transpose(1, 2)
    v = conv1x1(x, W_h).flatten(2).transpose(1, 2)
    scores = q @ k.transpose(1, 2) / math.sqrt(k.size(-1))
    weights = torch.softmax(scores.flatten(1), dim=-1).view_as(scores)   # slip: one softmax over all N·N pairs
    read = (weights @ v).transpose(1, 2).reshape(B, -1, height, width)
    return conv1x1(read, W_v), weights


def sa_u_mix_with_scores(x, W_f, W_g, W_h, W_v):
    B, C, height, width = x.shape
    k = conv1x1(x, W_f).flatten(2).transpose(1, 2)
    q = conv1x1(x, W_g).flatten(2).transpose(1, 2)
    v = conv1x1(x, W_h).flatten(2).transpose(1, 2)
    scores = q @ k.transpose(1, 2) / math.sqrt(k.size(-1))
    weights = torch.softmax(scores, dim=-1)
    read = (scores @ v).transpose(1, 2).reshape(B, -1, height, width)   # slip: values mixed by the scores (wrong variable)
    return conv1x1(read, W_v), weights


# --- correct, unusual
def sa_ok_channels_first(x, W_f, W_g, W_h, W_v):
    """heykeetae's layout: everything stays (B, C̄, N); scores qᵀk, read-out v·weightsᵀ, unflatten back."""
    k = conv1x1(x, W_f).flatten(2)                               # (B, C̄, N)
    q = conv1x1(x, W_g).flatten(2)
    v = conv1x1(x, W_h).flatten(2)
    weights = torch.softmax(q.mT @ k / k.shape[1] ** 0.5, dim=2)  # (B, N, N)
    read = (v @ weights.mT).unflatten(2, x.shape[2:])            # (B, C̄, H, W)
    return conv1x1(read, W_v), weights


def sa_ok_bilinear_logsumexp(x, W_f, W_g, W_h, W_v):
    """one C×C bilinear form W_gᵀW_f for the scores, softmax as exp(s − logsumexp s), W_v·W_h after mixing x."""
    c_bar = W_f.shape[0]
    tokens = x.flatten(2).transpose(1, 2)                        # (B, N, C)
    scores = tokens @ (W_g.T @ W_f) @ tokens.transpose(1, 2) / math.sqrt(c_bar)
    weights = torch.exp(scores - torch.logsumexp(scores, dim=-1, keepdim=True))
    o = weights @ tokens @ (W_v @ W_h).T                         # (B, N, C_out)
    return o.transpose(1, 2).reshape(x.shape[0], -1, *x.shape[2:]), weights


# ================================================================ Exercise 2: SelfAttention2d (self_attention_block)
class BlockWeights4d(nn.Module):
    def __init__(self, channels):
        super().__init__()
        c_bar = max(channels // 8, 1)
        self.f = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.g = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.h = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.v = nn.Conv2d(c_bar, channels, kernel_size=1, bias=False)
        self.gamma = nn.Parameter(torch.zeros(1))

    def forward(self, x):
        o, weights = reference_self_attention_2d(x, self.f.weight, self.g.weight,   # slip: 4-D conv weights, no [:, :, 0, 0]
                                                 self.h.weight, self.v.weight)
        self.attn_weights = weights.detach()
        return x + self.gamma * o


class BlockValuesFullChannels(nn.Module):
    def __init__(self, channels):
        super().__init__()
        c_bar = max(channels // 8, 1)
        self.f = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.g = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.h = nn.Conv2d(channels, channels, kernel_size=1, bias=False)   # slip: values with C channels (arXiv v1)
        self.v = nn.Conv2d(channels, channels, kernel_size=1, bias=False)
        self.gamma = nn.Parameter(torch.zeros(1))

    def forward(self, x):
        o, weights = reference_self_attention_2d(x, self.f.weight[:, :, 0, 0], self.g.weight[:, :, 0, 0],
                                                 self.h.weight[:, :, 0, 0], self.v.weight[:, :, 0, 0])
        self.attn_weights = weights.detach()
        return x + self.gamma * o


class BlockReturnsTuple(nn.Module):
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
        return x + self.gamma * o, weights                       # slip: returns (y, weights) like the function


class BlockOutputConvReversed(nn.Module):
    def __init__(self, channels):
        super().__init__()
        c_bar = max(channels // 8, 1)
        self.f = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.g = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.h = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.v = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)      # slip: v declared C -> C̄, like f, g, h
        self.gamma = nn.Parameter(torch.zeros(1))

    def forward(self, x):
        o, weights = reference_self_attention_2d(x, self.f.weight[:, :, 0, 0], self.g.weight[:, :, 0, 0],
                                                 self.h.weight[:, :, 0, 0], self.v.weight[:, :, 0, 0])
        self.attn_weights = weights.detach()
        return x + self.gamma * o


class BlockUGammaRandomInit(nn.Module):
    def __init__(self, channels):
        super().__init__()
        c_bar = max(channels // 8, 1)
        self.f = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.g = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.h = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.v = nn.Conv2d(c_bar, channels, kernel_size=1, bias=False)
        self.gamma = nn.Parameter(torch.zeros(1))
        nn.init.normal_(self.gamma, std=0.02)                    # slip: "initialised like the other weights", not 0

    def forward(self, x):
        o, weights = reference_self_attention_2d(x, self.f.weight[:, :, 0, 0], self.g.weight[:, :, 0, 0],
                                                 self.h.weight[:, :, 0, 0], self.v.weight[:, :, 0, 0])
        self.attn_weights = weights.detach()
        return x + self.gamma * o


class BlockUGammaFrozen(nn.Module):
    def __init__(self, channels):
        super().__init__()
        c_bar = max(channels // 8, 1)
        self.f = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.g = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.h = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.v = nn.Conv2d(c_bar, channels, kernel_size=1, bias=False)
        self.gamma = nn.Parameter(torch.zeros(1), requires_grad=False)   # slip: γ frozen at 0: the block stays the identity

    def forward(self, x):
        o, weights = reference_self_attention_2d(x, self.f.weight[:, :, 0, 0], self.g.weight[:, :, 0, 0],
                                                 self.h.weight[:, :, 0, 0], self.v.weight[:, :, 0, 0])
        self.attn_weights = weights.detach()
        return x + self.gamma * o


class BlockUGammaInForward(nn.Module):
    def __init__(self, channels):
        super().__init__()
        c_bar = max(channels // 8, 1)
        self.f = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.g = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.h = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.v = nn.Conv2d(c_bar, channels, kernel_size=1, bias=False)
        self.gamma = nn.Parameter(torch.zeros(1))

    def forward(self, x):
        self.gamma = nn.Parameter(torch.zeros(1, dtype=x.dtype, device=x.device))   # slip: γ re-created at 0 on every call
        o, weights = reference_self_attention_2d(x, self.f.weight[:, :, 0, 0], self.g.weight[:, :, 0, 0],
                                                 self.h.weight[:, :, 0, 0], self.v.weight[:, :, 0, 0])
        self.attn_weights = weights.detach()
        return x + self.gamma * o


class BlockUCeilCbar(nn.Module):
    def __init__(self, channels):
        super().__init__()
        c_bar = math.ceil(channels / 8)                          # slip: ceil(C/8): one channel too many when 8 ∤ C
        self.f = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.g = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.h = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.v = nn.Conv2d(c_bar, channels, kernel_size=1, bias=False)
        self.gamma = nn.Parameter(torch.zeros(1))

    def forward(self, x):
        o, weights = reference_self_attention_2d(x, self.f.weight[:, :, 0, 0], self.g.weight[:, :, 0, 0],
                                                 self.h.weight[:, :, 0, 0], self.v.weight[:, :, 0, 0])
        self.attn_weights = weights.detach()
        return x + self.gamma * o


# --- correct, unusual
class BlockOkGeneratorConvs(nn.Module):
    """f, g, h unpacked from a generator, C̄ by a bit shift, weights by squeeze(-1).squeeze(-1), o·γ + x."""

    def __init__(self, channels):
        super().__init__()
        c_bar = max(1, channels >> 3)
        self.f, self.g, self.h = (nn.Conv2d(channels, c_bar, 1, bias=False) for _ in range(3))
        self.v = nn.Conv2d(c_bar, channels, 1, bias=False)
        self.gamma = nn.Parameter(torch.tensor([0.0]))

    def forward(self, x):
        mats = [conv.weight.squeeze(-1).squeeze(-1) for conv in (self.f, self.g, self.h, self.v)]
        o, weights = reference_self_attention_2d(x, *mats)
        self.attn_weights = weights.detach()
        return o * self.gamma + x


# ================================================================ Exercise 3: patchify
def patch_channels_forgotten(images, patch_size):
    B, C, H, W = images.shape
    P = patch_size
    x = images.reshape(B, C, H // P, P, W // P, P).permute(0, 2, 4, 3, 5, 1)
    return x.reshape(B, -1, P * P)                               # slip: last axis P·P, C forgotten: right for C = 1 only


def patch_square_count(images, patch_size):
    B, C, H, W = images.shape
    P = patch_size
    N = (H // P) ** 2                                            # slip: N = (H/P)²: square images only
    x = images.reshape(B, C, H // P, P, W // P, P).permute(0, 2, 4, 3, 5, 1)
    return x.reshape(B, N, P * P * C)


def patch_loop_unscaled_offsets(images, patch_size):
    B, C, H, W = images.shape
    P = patch_size
    patches = []
    for r in range(H // P):
        for c in range(W // P):
            patch = images[:, :, r:r + P, c:c + P]                # slip: offsets r, c, not r·P, c·P: overlapping patches
            patches.append(patch.permute(0, 2, 3, 1).reshape(B, -1))
    return torch.stack(patches, dim=1)


def patch_batch_merged(images, patch_size):
    B, C, H, W = images.shape
    P = patch_size
    x = images.reshape(B, C, H // P, P, W // P, P).permute(0, 2, 4, 3, 5, 1)
    return x.reshape(-1, P * P * C)                              # slip: (B·N, P·P·C): the batch axis merged into the patches


def patch_u_unfold_step1(images, patch_size):
    P = patch_size
    x = images.unfold(2, P, 1).unfold(3, P, 1)                   # slip: step 1: overlapping windows, not patches
    x = x.permute(0, 2, 3, 4, 5, 1)                              # (B, H-P+1, W-P+1, P, P, C)
    return x.reshape(images.shape[0], -1, P * P * images.shape[1])


def patch_u_numpy_roundtrip(images, patch_size):
    B, C, H, W = images.shape
    P = patch_size
    a = images.numpy()                                           # slip: through numpy: raises for inputs that need grad (or on a GPU)
    a = a.reshape(B, C, H // P, P, W // P, P).transpose(0, 2, 4, 3, 5, 1)
    return torch.from_numpy(np.ascontiguousarray(a.reshape(B, -1, P * P * C)))


def patch_u_float32_buffer(images, patch_size):
    B, C, H, W = images.shape
    P = patch_size
    out = torch.zeros(B, (H // P) * (W // P), P * P * C)         # slip: float32 buffer: float64 images are rounded
    n = 0
    for r in range(0, H, P):
        for c in range(0, W, P):
            out[:, n] = images[:, :, r:r + P, c:c + P].permute(0, 2, 3, 1).reshape(B, -1)
            n += 1
    return out


# --- correct, unusual
def patch_ok_einsum_permute(images, patch_size):
    """the permute written as an einsum on the 6-axis view."""
    B, C, H, W = images.shape
    P = patch_size
    x = torch.einsum("bcrisj->brsijc", images.view(B, C, H // P, P, W // P, P))
    return x.reshape(B, -1, P * P * C)


def patch_ok_onehot_conv(images, patch_size):
    """a stride-P convolution whose P·P·C one-hot kernels pick pixel (i, j, ch) of each patch."""
    B, C, H, W = images.shape
    P = patch_size
    eye = torch.eye(P * P * C, dtype=images.dtype, device=images.device)   # feature (i·P + j)·C + ch
    kernels = eye.reshape(P * P * C, P, P, C).permute(0, 3, 1, 2)           # (out, C, P, P)
    return F.conv2d(images, kernels, stride=P).flatten(2).transpose(1, 2)


# ================================================================ Exercise 4: dense_block
def dense_pad_not_cropped(x, W_f, W_g, dilation):
    B, T, d_in = x.shape
    x_past = F.pad(x, (0, 0, dilation, 0))                      # slip: not cropped back to T steps (T + d)
    filter_ = x @ W_f[0] + x_past @ W_f[1]
    gate = x @ W_g[0] + x_past @ W_g[1]
    return torch.cat([x, torch.tanh(filter_) * torch.sigmoid(gate)], dim=-1)


def dense_tanh_of_product(x, W_f, W_g, dilation):
    B, T, d_in = x.shape
    x_past = F.pad(x, (0, 0, dilation, 0))[:, :T]
    filter_ = x @ W_f[0] + x_past @ W_f[1]
    gate = x @ W_g[0] + x_past @ W_g[1]
    return torch.cat([x, torch.tanh(filter_ * torch.sigmoid(gate))], dim=-1)   # slip: tanh around the product


def dense_present_tap_twice(x, W_f, W_g, dilation):
    B, T, d_in = x.shape
    x_past = F.pad(x, (0, 0, dilation, 0))[:, :T]
    filter_ = x @ W_f[0] + x_past @ W_f[0]                      # slip: tap W[0] on the past too, W[1] never used
    gate = x @ W_g[0] + x_past @ W_g[0]
    return torch.cat([x, torch.tanh(filter_) * torch.sigmoid(gate)], dim=-1)


def dense_not_appended(x, W_f, W_g, dilation):
    B, T, d_in = x.shape
    x_past = F.pad(x, (0, 0, dilation, 0))[:, :T]
    filter_ = x @ W_f[0] + x_past @ W_f[1]
    gate = x @ W_g[0] + x_past @ W_g[1]
    return torch.tanh(filter_) * torch.sigmoid(gate)             # slip: the new features only, x not appended


def dense_u_weight_transposed(x, W_f, W_g, dilation):
    B, T, d_in = x.shape
    x_past = F.pad(x, (0, 0, dilation, 0))[:, :T]
    filter_ = x @ W_f[0].T + x_past @ W_f[1].T                  # slip: W.T as in nn.Linear: runs only when d_in = filters
    gate = x @ W_g[0].T + x_past @ W_g[1].T
    return torch.cat([x, torch.tanh(filter_) * torch.sigmoid(gate)], dim=-1)


def dense_u_batch_axis_padded(x, W_f, W_g, dilation):
    B, T, d_in = x.shape
    x_past = F.pad(x, (0, 0, 0, 0, dilation, 0))[:B]            # slip: pads the batch axis: past = sequence b − d
    filter_ = x @ W_f[0] + x_past @ W_f[1]
    gate = x @ W_g[0] + x_past @ W_g[1]
    return torch.cat([x, torch.tanh(filter_) * torch.sigmoid(gate)], dim=-1)


def dense_u_dilation_beyond_T(x, W_f, W_g, dilation):
    B, T, d_in = x.shape
    x_past = torch.cat([x.new_zeros(B, dilation, d_in), x[:, :T - dilation]], dim=1)   # slip: :T − d counts from the end when d > T: too many steps, raises
    filter_ = x @ W_f[0] + x_past @ W_f[1]
    gate = x @ W_g[0] + x_past @ W_g[1]
    return torch.cat([x, torch.tanh(filter_) * torch.sigmoid(gate)], dim=-1)


def dense_u_delay_minus_one(x, W_f, W_g, dilation):
    B, T, d_in = x.shape
    x_past = F.pad(x, (0, 0, dilation - 1, 0))[:, :T]           # slip: d − 1 zeros: delay d − 1 (x itself for d = 1)
    filter_ = x @ W_f[0] + x_past @ W_f[1]
    gate = x @ W_g[0] + x_past @ W_g[1]
    return torch.cat([x, torch.tanh(filter_) * torch.sigmoid(gate)], dim=-1)


# --- correct, unusual
def dense_ok_shift_matrix(x, W_f, W_g, dilation):
    """the delay as a (T, T) shift matrix S (S[t, t − d] = 1), x_past = S @ x; any d, even d ≥ T."""
    T = x.shape[1]
    S = torch.ones(T, T, dtype=x.dtype, device=x.device).tril(-dilation).triu(-dilation)
    x_past = S @ x
    z = torch.stack([x, x_past])                                 # (2, B, T, d_in): present, past
    filter_ = torch.einsum("kbtd,kdf->btf", z, W_f)
    gate = torch.einsum("kbtd,kdf->btf", z, W_g)
    return torch.cat([x, filter_.tanh() * gate.sigmoid()], dim=-1)


# ================================================================ Exercise 5: causal_attention_block
def cab_no_scale(x, W_q, W_k, W_v):
    B, T, d_in = x.shape
    q, k, v = x @ W_q, x @ W_k, x @ W_v
    scores = q @ k.transpose(1, 2)                               # slip: no 1/sqrt(d_key)
    scores = scores.masked_fill(~causal_mask(T), float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return torch.cat([x, weights @ v], dim=-1), weights


def cab_scale_dkey_no_sqrt(x, W_q, W_k, W_v):
    B, T, d_in = x.shape
    q, k, v = x @ W_q, x @ W_k, x @ W_v
    scores = q @ k.transpose(1, 2) / k.size(-1)                  # slip: divided by d_key, not sqrt(d_key)
    scores = scores.masked_fill(~causal_mask(T), float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return torch.cat([x, weights @ v], dim=-1), weights


def cab_masked_fill_discarded(x, W_q, W_k, W_v):
    B, T, d_in = x.shape
    q, k, v = x @ W_q, x @ W_k, x @ W_v
    scores = q @ k.transpose(1, 2) / math.sqrt(k.size(-1))
    scores.masked_fill(~causal_mask(T), float("-inf"))           # slip: result thrown away (not in place): no mask
    weights = torch.softmax(scores, dim=-1)
    return torch.cat([x, weights @ v], dim=-1), weights


def cab_q_k_swapped(x, W_q, W_k, W_v):
    B, T, d_in = x.shape
    q, k, v = x @ W_k, x @ W_q, x @ W_v                          # slip: queries from W_k, keys from W_q
    scores = q @ k.transpose(1, 2) / math.sqrt(k.size(-1))
    scores = scores.masked_fill(~causal_mask(T), float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return torch.cat([x, weights @ v], dim=-1), weights


def cab_u_plus_inf(x, W_q, W_k, W_v):
    B, T, d_in = x.shape
    q, k, v = x @ W_q, x @ W_k, x @ W_v
    scores = q @ k.transpose(1, 2) / math.sqrt(k.size(-1))
    scores = scores.masked_fill(~causal_mask(T), float("inf"))   # slip: +inf, not -inf: NaN rows
    weights = torch.softmax(scores, dim=-1)
    return torch.cat([x, weights @ v], dim=-1), weights


def cab_u_T_from_batch(x, W_q, W_k, W_v):
    T = x.shape[0]                                               # slip: T read from axis 0 (the batch): right only if B = T
    q, k, v = x @ W_q, x @ W_k, x @ W_v
    scores = q @ k.transpose(1, 2) / math.sqrt(k.size(-1))
    scores = scores.masked_fill(~causal_mask(T), float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return torch.cat([x, weights @ v], dim=-1), weights


def cab_u_softmax_no_max(x, W_q, W_k, W_v):
    B, T, d_in = x.shape
    q, k, v = x @ W_q, x @ W_k, x @ W_v
    scores = q @ k.transpose(1, 2) / math.sqrt(k.size(-1))
    e = torch.exp(scores) * causal_mask(T)                       # slip: no max subtracted: inf/inf = NaN on large scores
    weights = e / e.sum(dim=-1, keepdim=True)
    return torch.cat([x, weights @ v], dim=-1), weights


def cab_u_weights_squeezed(x, W_q, W_k, W_v):
    B, T, d_in = x.shape
    q, k, v = x @ W_q, x @ W_k, x @ W_v
    scores = q @ k.transpose(1, 2) / math.sqrt(k.size(-1))
    scores = scores.masked_fill(~causal_mask(T), float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return torch.cat([x, weights @ v], dim=-1), weights.squeeze()   # slip: squeeze(): (T, T) when B = 1


# --- correct, unusual
def cab_ok_sdpa_is_causal(x, W_q, W_k, W_v):
    """read-out by F.scaled_dot_product_attention(is_causal=True); the weights by hand, from the same scores."""
    q, k, v = x @ W_q, x @ W_k, x @ W_v
    read = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    T = x.shape[1]
    allowed = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
    weights = torch.softmax((q @ k.mT / math.sqrt(k.shape[-1])).masked_fill(~allowed, -math.inf), dim=-1)
    return torch.cat([x, read], dim=-1), weights


def cab_ok_log_softmax_exp(x, W_q, W_k, W_v):
    """scores by bmm, mask with masked_fill_ (in place on a fresh tensor), weights = exp(log_softmax)."""
    T = x.shape[1]
    q, k, v = x @ W_q, x @ W_k, x @ W_v
    scores = torch.bmm(q, k.transpose(1, 2)).div_(math.sqrt(W_q.shape[1]))
    scores.masked_fill_(causal_mask(T, device=x.device).logical_not(), float("-inf"))
    weights = F.log_softmax(scores, dim=-1).exp()
    return torch.cat((x, torch.bmm(weights, v)), dim=2), weights


SLIPS = [
    ("self_attention_2d", "scores multiplied by sqrt(C̄) instead of divided", sa_times_sqrt),
    ("self_attention_2d", "scores k·qᵀ: rows are the keys (softmax over the queries, transposed)", sa_keys_as_rows),
    ("self_attention_2d", "o left in token layout (B, N, C), not (B, C, H, W)", sa_token_layout_output),
    ("self_attention_2d", "u: tokens by reshape(B, N, C̄) instead of transpose: right only when C̄ = 1", sa_u_tokens_by_reshape),
    ("self_attention_2d", "u: softmax(dtype=float32): float64 inputs raise in weights @ v", sa_u_softmax_float32),
    ("self_attention_2d", "u: C̄ ** 1 / 2 precedence: divides by C̄/2 (right only for C̄ = 4)", sa_u_power_precedence),
    ("self_attention_2d", "u: one softmax over all N·N pairs of an image", sa_u_softmax_whole_map),
    ("self_attention_2d", "u: values mixed with the scores, weights returned right", sa_u_mix_with_scores),
    ("self_attention_block", "4-D conv weights passed (no [:, :, 0, 0]): raises", BlockWeights4d),
    ("self_attention_block", "values with C channels (h: C -> C, v: C -> C), the arXiv v1 form", BlockValuesFullChannels),
    ("self_attention_block", "forward returns (y, weights), not y", BlockReturnsTuple),
    ("self_attention_block", "v declared C -> C̄ (direction reversed): raises", BlockOutputConvReversed),
    ("self_attention_block", "u: γ initialised N(0, 0.02) like a weight, not 0", BlockUGammaRandomInit),
    ("self_attention_block", "u: γ = Parameter(zeros(1), requires_grad=False): frozen", BlockUGammaFrozen),
    ("self_attention_block", "u: γ re-created at 0 inside forward", BlockUGammaInForward),
    ("self_attention_block", "u: C̄ = ceil(C/8): wrong when 8 does not divide C", BlockUCeilCbar),
    ("patchify", "last axis P·P, C forgotten: right for C = 1 only", patch_channels_forgotten),
    ("patchify", "N = (H/P)²: raises for non-square images", patch_square_count),
    ("patchify", "loop slices r:r+P, c:c+P (offsets not times P): overlapping patches", patch_loop_unscaled_offsets),
    ("patchify", "reshape(-1, P·P·C): (B·N, P·P·C), batch axis lost", patch_batch_merged),
    ("patchify", "u: Tensor.unfold with step 1: overlapping windows", patch_u_unfold_step1),
    ("patchify", "u: through .numpy(): raises for images that require grad (or on a GPU)", patch_u_numpy_roundtrip),
    ("patchify", "u: torch.zeros buffer in float32: float64 images rounded, float32 output", patch_u_float32_buffer),
    ("dense_block", "F.pad without cropping back to T: raises", dense_pad_not_cropped),
    ("dense_block", "tanh around the product: tanh(f · σ(g))", dense_tanh_of_product),
    ("dense_block", "W[0] used on both present and past, W[1] unused", dense_present_tap_twice),
    ("dense_block", "returns the gated features only, x not appended", dense_not_appended),
    ("dense_block", "u: x @ W.T (nn.Linear habit): runs only when d_in = filters", dense_u_weight_transposed),
    ("dense_block", "u: F.pad pads the batch axis: past from sequence b − d", dense_u_batch_axis_padded),
    ("dense_block", "u: d zeros + x[:, :T − d]: raises for dilation > T", dense_u_dilation_beyond_T),
    ("dense_block", "u: pads d − 1 zeros: delay d − 1", dense_u_delay_minus_one),
    ("causal_attention_block", "no 1/sqrt(d_key) scaling", cab_no_scale),
    ("causal_attention_block", "divided by d_key, not sqrt(d_key)", cab_scale_dkey_no_sqrt),
    ("causal_attention_block", "masked_fill result discarded: no mask at all", cab_masked_fill_discarded),
    ("causal_attention_block", "queries from W_k, keys from W_q (swapped)", cab_q_k_swapped),
    ("causal_attention_block", "u: masked with +inf: NaN rows", cab_u_plus_inf),
    ("causal_attention_block", "u: T = x.shape[0] (batch size) for the mask", cab_u_T_from_batch),
    ("causal_attention_block", "u: hand softmax without the max: NaN on large scores", cab_u_softmax_no_max),
    ("causal_attention_block", "u: weights.squeeze(): (T, T) when B = 1", cab_u_weights_squeezed),
]

CORRECT = [
    ("self_attention_2d", "channels-first throughout: qᵀk, v·weightsᵀ, unflatten", sa_ok_channels_first),
    ("self_attention_2d", "bilinear W_gᵀW_f scores, exp(s − logsumexp), W_v·W_h after mixing x", sa_ok_bilinear_logsumexp),
    ("self_attention_block", "generator-unpacked convs, C >> 3, squeeze(-1) twice, o·γ + x", BlockOkGeneratorConvs),
    ("patchify", "einsum as the permute", patch_ok_einsum_permute),
    ("patchify", "stride-P conv2d with one-hot (P, P, C) kernels", patch_ok_onehot_conv),
    ("dense_block", "(T, T) shift matrix for the delay, stacked taps by einsum", dense_ok_shift_matrix),
    ("causal_attention_block", "F.scaled_dot_product_attention(is_causal=True) read-out, weights by hand", cab_ok_sdpa_is_causal),
    ("causal_attention_block", "bmm, in-place masked_fill_, exp(log_softmax)", cab_ok_log_softmax_exp),
]
