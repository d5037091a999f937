"""Typical learner slips (and right answers written differently) for lesson 11, Attention beyond text.

Exercises: self_attention_2d, self_attention_block, patchify, dense_block, causal_attention_block.
Every slip has exactly one thing wrong, marked with a `# slip:` comment.
"""
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from course_utils.masks import causal_mask
from course_utils.vision import conv1x1
from course_utils.vision import self_attention_2d as reference_self_attention_2d

# ---------------------------------------------------------------------------------------------
# Exercise 1: self_attention_2d(x, W_f, W_g, W_h, W_v) -> o (B, C, H, W), weights (B, N, N)
# ---------------------------------------------------------------------------------------------

def s2d_softmax_over_queries(x, W_f, W_g, W_h, W_v):
    B, C, height, width = x.shape
    k = conv1x1(x, W_f).flatten(2).transpose(1, 2)
    q = conv1x1(x, W_g).flatten(2).transpose(1, 2)
    v = conv1x1(x, W_h).flatten(2).transpose(1, 2)
    scores = q @ k.transpose(1, 2) / math.sqrt(k.size(-1))
    weights = torch.softmax(scores, dim=1)  # slip: softmax over the queries instead of the keys
    read = (weights @ v).transpose(1, 2).reshape(B, -1, height, width)
    return conv1x1(read, W_v), weights


def s2d_no_scaling(x, W_f, W_g, W_h, W_v):
    B, C, height, width = x.shape
    k = conv1x1(x, W_f).flatten(2).transpose(1, 2)
    q = conv1x1(x, W_g).flatten(2).transpose(1, 2)
    v = conv1x1(x, W_h).flatten(2).transpose(1, 2)
    scores = q @ k.transpose(1, 2)  # slip: no division by sqrt(C̄)
    weights = torch.softmax(scores, dim=-1)
    read = (weights @ v).transpose(1, 2).reshape(B, -1, height, width)
    return conv1x1(read, W_v), weights


def s2d_scale_by_input_channels(x, W_f, W_g, W_h, W_v):
    B, C, height, width = x.shape
    k = conv1x1(x, W_f).flatten(2).transpose(1, 2)
    q = conv1x1(x, W_g).flatten(2).transpose(1, 2)
    v = conv1x1(x, W_h).flatten(2).transpose(1, 2)
    scores = q @ k.transpose(1, 2) / math.sqrt(C)  # slip: scales by sqrt(C), the input's channels, not sqrt(C̄)
    weights = torch.softmax(scores, dim=-1)
    read = (weights @ v).transpose(1, 2).reshape(B, -1, height, width)
    return conv1x1(read, W_v), weights


def s2d_reshape_without_transpose(x, W_f, W_g, W_h, W_v):
    B, C, height, width = x.shape
    k = conv1x1(x, W_f).flatten(2).transpose(1, 2)
    q = conv1x1(x, W_g).flatten(2).transpose(1, 2)
    v = conv1x1(x, W_h).flatten(2).transpose(1, 2)
    scores = q @ k.transpose(1, 2) / math.sqrt(k.size(-1))
    weights = torch.softmax(scores, dim=-1)
    read = (weights @ v).reshape(B, -1, height, width)  # slip: reshapes (B, N, C̄) to (B, C̄, H, W) without transposing
    return conv1x1(read, W_v), weights


def s2d_keys_queries_swapped(x, W_f, W_g, W_h, W_v):
    B, C, height, width = x.shape
    k = conv1x1(x, W_g).flatten(2).transpose(1, 2)  # slip: keys from W_g and queries from W_f (roles swapped)
    q = conv1x1(x, W_f).flatten(2).transpose(1, 2)
    v = conv1x1(x, W_h).flatten(2).transpose(1, 2)
    scores = q @ k.transpose(1, 2) / math.sqrt(k.size(-1))
    weights = torch.softmax(scores, dim=-1)
    read = (weights @ v).transpose(1, 2).reshape(B, -1, height, width)
    return conv1x1(read, W_v), weights


def s2d_forgets_output_conv(x, W_f, W_g, W_h, W_v):
    B, C, height, width = x.shape
    k = conv1x1(x, W_f).flatten(2).transpose(1, 2)
    q = conv1x1(x, W_g).flatten(2).transpose(1, 2)
    v = conv1x1(x, W_h).flatten(2).transpose(1, 2)
    scores = q @ k.transpose(1, 2) / math.sqrt(k.size(-1))
    weights = torch.softmax(scores, dim=-1)
    read = (weights @ v).transpose(1, 2).reshape(B, -1, height, width)
    return read, weights  # slip: forgets the output 1×1 convolution W_v (returns C̄ channels)


def s2d_attends_over_channels(x, W_f, W_g, W_h, W_v):
    B, C, height, width = x.shape
    k = conv1x1(x, W_f).flatten(2)  # slip: pixels never put first: (B, C̄, N), so the attention is over channels
    q = conv1x1(x, W_g).flatten(2)
    v = conv1x1(x, W_h).flatten(2)
    scores = q @ k.transpose(1, 2) / math.sqrt(k.size(1))
    weights = torch.softmax(scores, dim=-1)
    read = (weights @ v).reshape(B, -1, height, width)
    return conv1x1(read, W_v), weights


def s2d_column_major_pixels(x, W_f, W_g, W_h, W_v):
    B, C, height, width = x.shape
    k = conv1x1(x, W_f).transpose(2, 3).flatten(2).transpose(1, 2)  # slip: pixels flattened column by column (W before H)
    q = conv1x1(x, W_g).transpose(2, 3).flatten(2).transpose(1, 2)
    v = conv1x1(x, W_h).transpose(2, 3).flatten(2).transpose(1, 2)
    scores = q @ k.transpose(1, 2) / math.sqrt(k.size(-1))
    weights = torch.softmax(scores, dim=-1)
    read = (weights @ v).transpose(1, 2).reshape(B, -1, height, width)
    return conv1x1(read, W_v), weights


def s2d_casts_to_float32(x, W_f, W_g, W_h, W_v):
    B, C, height, width = x.shape
    k = conv1x1(x, W_f).flatten(2).transpose(1, 2)
    q = conv1x1(x, W_g).flatten(2).transpose(1, 2)
    v = conv1x1(x, W_h).flatten(2).transpose(1, 2)
    scores = q @ k.transpose(1, 2) / math.sqrt(k.size(-1))
    weights = torch.softmax(scores, dim=-1, dtype=torch.float32)  # slip: forces float32, loses a float64 input's dtype
    read = (weights @ v.float()).transpose(1, 2).reshape(B, -1, height, width)
    return conv1x1(read, W_v.float()), weights


def s2d_right_einsum(x, W_f, W_g, W_h, W_v):
    B, C, height, width = x.shape
    k = torch.einsum("kc,bchw->bhwk", W_f, x).reshape(B, height * width, -1)   # (B, N, C̄), row-major pixels
    q = torch.einsum("kc,bchw->bhwk", W_g, x).reshape(B, height * width, -1)
    v = torch.einsum("kc,bchw->bhwk", W_h, x).reshape(B, height * width, -1)
    scores = torch.einsum("bjk,bik->bji", q, k) * k.shape[-1] ** -0.5
    weights = scores.softmax(-1)
    read = torch.einsum("bji,bic->bjc", weights, v)                           # (B, N, C̄)
    o = torch.einsum("oc,bjc->bjo", W_v, read)                                # (B, N, C)
    return o.permute(0, 2, 1).reshape(B, -1, height, width), weights


def s2d_right_channels_first(x, W_f, W_g, W_h, W_v):
    B, C, height, width = x.shape
    N = height * width
    flat = x.reshape(B, C, N)                          # (B, C, N)
    k, q, v = W_f @ flat, W_g @ flat, W_h @ flat       # (B, C̄, N)
    scores = torch.bmm(q.transpose(1, 2), k) / math.sqrt(W_f.shape[0])   # (B, N, N)
    weights = F.softmax(scores, dim=2)
    read = torch.bmm(v, weights.transpose(1, 2))       # (B, C̄, N): column j = Σ_i α_{j,i} v_i
    return (W_v @ read).reshape(B, -1, height, width), weights


# ---------------------------------------------------------------------------------------------
# Exercise 2: SelfAttention2d(channels), forward(x) -> x + gamma * o, keeps self.attn_weights
# ---------------------------------------------------------------------------------------------

class BlockGammaOne(nn.Module):
    def __init__(self, channels):
        super().__init__()
        c_bar = max(channels // 8, 1)
        self.f = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.g = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.h = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.v = nn.Conv2d(c_bar, channels, kernel_size=1, bias=False)
        self.gamma = nn.Parameter(torch.ones(1))  # slip: gamma starts at 1, not 0

    def forward(self, x):
        o, weights = reference_self_attention_2d(x, self.f.weight[:, :, 0, 0], self.g.weight[:, :, 0, 0],
                                                 self.h.weight[:, :, 0, 0], self.v.weight[:, :, 0, 0])
        self.attn_weights = weights.detach()
        return x + self.gamma * o


class BlockGammaNotParameter(nn.Module):
    def __init__(self, channels):
        super().__init__()
        c_bar = max(channels // 8, 1)
        self.f = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.g = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.h = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.v = nn.Conv2d(c_bar, channels, kernel_size=1, bias=False)
        self.gamma = torch.zeros(1)  # slip: a plain tensor, not an nn.Parameter: gamma is never learned

    def forward(self, x):
        o, weights = reference_self_attention_2d(x, self.f.weight[:, :, 0, 0], self.g.weight[:, :, 0, 0],
                                                 self.h.weight[:, :, 0, 0], self.v.weight[:, :, 0, 0])
        self.attn_weights = weights.detach()
        return x + self.gamma * o


class BlockNoResidual(nn.Module):
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
        return self.gamma * o  # slip: forgets the residual x


class BlockNoGamma(nn.Module):
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
        return x + o  # slip: forgets to scale o by gamma


class BlockKeysQueriesSwapped(nn.Module):
    def __init__(self, channels):
        super().__init__()
        c_bar = max(channels // 8, 1)
        self.f = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.g = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.h = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.v = nn.Conv2d(c_bar, channels, kernel_size=1, bias=False)
        self.gamma = nn.Parameter(torch.zeros(1))

    def forward(self, x):
        o, weights = reference_self_attention_2d(x, self.g.weight[:, :, 0, 0], self.f.weight[:, :, 0, 0],  # slip: passes g as W_f and f as W_g
                                                 self.h.weight[:, :, 0, 0], self.v.weight[:, :, 0, 0])
        self.attn_weights = weights.detach()
        return x + self.gamma * o


class BlockConvBias(nn.Module):
    def __init__(self, channels):
        super().__init__()
        c_bar = max(channels // 8, 1)
        self.f = nn.Conv2d(channels, c_bar, kernel_size=1)  # slip: default bias=True in the four convolutions
        self.g = nn.Conv2d(channels, c_bar, kernel_size=1)
        self.h = nn.Conv2d(channels, c_bar, kernel_size=1)
        self.v = nn.Conv2d(c_bar, channels, kernel_size=1)
        self.gamma = nn.Parameter(torch.zeros(1))

    def forward(self, x):
        o, weights = reference_self_attention_2d(x, self.f.weight[:, :, 0, 0], self.g.weight[:, :, 0, 0],
                                                 self.h.weight[:, :, 0, 0], self.v.weight[:, :, 0, 0])
        self.attn_weights = weights.detach()
        return x + self.gamma * o


class BlockFullChannelValues(nn.Module):
    def __init__(self, channels):
        super().__init__()
        c_bar = max(channels // 8, 1)
        self.f = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.g = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.h = nn.Conv2d(channels, channels, kernel_size=1, bias=False)  # slip: values with all C channels (arXiv v1), not C/8
        self.v = nn.Conv2d(channels, channels, kernel_size=1, bias=False)
        self.gamma = nn.Parameter(torch.zeros(1))

    def forward(self, x):
        o, weights = reference_self_attention_2d(x, self.f.weight[:, :, 0, 0], self.g.weight[:, :, 0, 0],
                                                 self.h.weight[:, :, 0, 0], self.v.weight[:, :, 0, 0])
        self.attn_weights = weights.detach()
        return x + self.gamma * o


class BlockForgetsAttnWeights(nn.Module):
    def __init__(self, channels):
        super().__init__()
        c_bar = max(channels // 8, 1)
        self.f = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.g = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.h = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.v = nn.Conv2d(c_bar, channels, kernel_size=1, bias=False)
        self.gamma = nn.Parameter(torch.zeros(1))

    def forward(self, x):
        o, _ = reference_self_attention_2d(x, self.f.weight[:, :, 0, 0], self.g.weight[:, :, 0, 0],  # slip: drops the weights, never sets self.attn_weights
                                           self.h.weight[:, :, 0, 0], self.v.weight[:, :, 0, 0])
        return x + self.gamma * o


class BlockRightFlattenedWeights(nn.Module):
    def __init__(self, channels):
        super().__init__()
        c_bar = channels // 8 or 1
        self.f, self.g, self.h = (nn.Conv2d(channels, c_bar, 1, bias=False) for _ in range(3))
        self.v = nn.Conv2d(c_bar, channels, 1, bias=False)
        self.gamma = nn.Parameter(torch.tensor([0.0]))

    def forward(self, x):
        W_f, W_g, W_h, W_v = (conv.weight.flatten(1) for conv in (self.f, self.g, self.h, self.v))
        o, self.attn_weights = reference_self_attention_2d(x, W_f, W_g, W_h, W_v)
        self.attn_weights = self.attn_weights.detach()
        return torch.addcmul(x, self.gamma, o)


class BlockRightSqueeze(nn.Module):
    def __init__(self, channels):
        super().__init__()
        c_bar = max(1, channels // 8)
        self.g = nn.Conv2d(channels, c_bar, kernel_size=(1, 1), bias=False)      # queries
        self.f = nn.Conv2d(channels, c_bar, kernel_size=(1, 1), bias=False)      # keys
        self.h = nn.Conv2d(channels, c_bar, kernel_size=(1, 1), bias=False)      # values
        self.v = nn.Conv2d(c_bar, channels, kernel_size=(1, 1), bias=False)
        self.gamma = nn.Parameter(torch.zeros(1))

    def forward(self, x):
        matrix = lambda conv: conv.weight.reshape(conv.out_channels, conv.in_channels)
        o, weights = reference_self_attention_2d(x, matrix(self.f), matrix(self.g), matrix(self.h), matrix(self.v))
        self.attn_weights = weights.detach()
        return self.gamma * o + x


# ---------------------------------------------------------------------------------------------
# Exercise 3: patchify(images, patch_size) -> (B, N, P·P·C), row-major patches, (P, P, C) inside
# ---------------------------------------------------------------------------------------------

def patchify_cpp_order(images, patch_size):
    B, C, H, W = images.shape
    P = patch_size
    x = images.reshape(B, C, H // P, P, W // P, P)
    x = x.permute(0, 2, 4, 1, 3, 5)  # slip: each patch flattened in (C, P, P) order, not (P, P, C)
    return x.reshape(B, (H // P) * (W // P), P * P * C)


def patchify_unfold(images, patch_size):
    return F.unfold(images, kernel_size=patch_size, stride=patch_size).transpose(1, 2)  # slip: F.unfold gives (C, P, P) order


def patchify_single_reshape(images, patch_size):
    B, C, H, W = images.shape
    P = patch_size
    return images.reshape(B, (H // P) * (W // P), P * P * C)  # slip: one reshape: its "patches" are runs of memory, not squares


def patchify_column_major_patches(images, patch_size):
    B, C, H, W = images.shape
    P = patch_size
    x = images.reshape(B, C, H // P, P, W // P, P)
    x = x.permute(0, 4, 2, 3, 5, 1)  # slip: patches numbered column by column (patch-column before patch-row)
    return x.reshape(B, (H // P) * (W // P), P * P * C)


def patchify_columns_inside_patch(images, patch_size):
    B, C, H, W = images.shape
    P = patch_size
    x = images.reshape(B, C, H // P, P, W // P, P)
    x = x.permute(0, 2, 4, 5, 3, 1)  # slip: pixels inside a patch read column by column, (j, i) instead of (i, j)
    return x.reshape(B, (H // P) * (W // P), P * P * C)


def patchify_split_order(images, patch_size):
    B, C, H, W = images.shape
    P = patch_size
    x = images.reshape(B, C, P, H // P, P, W // P)  # slip: splits H as (P, H/P): strided pixels, not P×P squares
    x = x.permute(0, 3, 5, 2, 4, 1)
    return x.reshape(B, (H // P) * (W // P), P * P * C)


def patchify_view_after_permute(images, patch_size):
    B, C, H, W = images.shape
    P = patch_size
    x = images.reshape(B, C, H // P, P, W // P, P)
    x = x.permute(0, 2, 4, 3, 5, 1)
    return x.view(B, (H // P) * (W // P), P * P * C)  # slip: .view on a permuted (non-contiguous) tensor


def patchify_square_only(images, patch_size):
    B, C, H, W = images.shape
    P = patch_size
    n = H // P  # slip: assumes a square image: H/P patches across as well as down
    x = images.reshape(B, C, n, P, n, P)
    x = x.permute(0, 2, 4, 3, 5, 1)
    return x.reshape(B, n * n, P * P * C)


def patchify_through_numpy(images, patch_size):
    B, C, H, W = images.shape
    P = patch_size
    x = images.detach().numpy().reshape(B, C, H // P, P, W // P, P)  # slip: goes through numpy: the gradient is cut
    x = x.transpose(0, 2, 4, 3, 5, 1)
    return torch.from_numpy(np.ascontiguousarray(x).reshape(B, (H // P) * (W // P), P * P * C))


def patchify_float32(images, patch_size):
    B, C, H, W = images.shape
    P = patch_size
    x = images.float().reshape(B, C, H // P, P, W // P, P)  # slip: casts to float32, loses a float64 input's dtype
    x = x.permute(0, 2, 4, 3, 5, 1)
    return x.reshape(B, (H // P) * (W // P), P * P * C)


def patchify_right_tensor_unfold(images, patch_size):
    B, C, H, W = images.shape
    P = patch_size
    x = images.unfold(2, P, P).unfold(3, P, P)               # (B, C, H/P, W/P, P, P): last two = (i, j)
    return x.permute(0, 2, 3, 4, 5, 1).reshape(B, -1, P * P * C)


def patchify_right_from_unfold(images, patch_size):
    B, C, H, W = images.shape
    P = patch_size
    cols = F.unfold(images, kernel_size=P, stride=P)          # (B, C·P·P, N), features in (C, P, P) order
    return cols.reshape(B, C, P * P, -1).permute(0, 3, 2, 1).reshape(B, -1, P * P * C)


def patchify_right_loop(images, patch_size):
    B, C, H, W = images.shape
    P = patch_size
    patches = []
    for r in range(H // P):
        for c in range(W // P):
            square = images[:, :, r * P:(r + 1) * P, c * P:(c + 1) * P]    # (B, C, P, P)
            patches.append(square.permute(0, 2, 3, 1).reshape(B, -1))      # (B, P·P·C) in (i, j, ch) order
    return torch.stack(patches, dim=1)


# ---------------------------------------------------------------------------------------------
# Exercise 4: dense_block(x, W_f, W_g, dilation) -> [x, tanh(filter) * sigmoid(gate)]
# ---------------------------------------------------------------------------------------------

def dense_pads_right(x, W_f, W_g, dilation):
    B, T, d_in = x.shape
    x_past = F.pad(x, (0, 0, 0, dilation))[:, dilation:]  # slip: pads on the right: x_{t+d}, the future
    filter_ = x @ W_f[0] + x_past @ W_f[1]
    gate = x @ W_g[0] + x_past @ W_g[1]
    return torch.cat([x, torch.tanh(filter_) * torch.sigmoid(gate)], dim=-1)


def dense_slices_wrong_end(x, W_f, W_g, dilation):
    B, T, d_in = x.shape
    x_past = F.pad(x, (0, 0, dilation, 0))[:, dilation:]  # slip: keeps the last T steps of the padded sequence: no delay at all
    filter_ = x @ W_f[0] + x_past @ W_f[1]
    gate = x @ W_g[0] + x_past @ W_g[1]
    return torch.cat([x, torch.tanh(filter_) * torch.sigmoid(gate)], dim=-1)


def dense_roll(x, W_f, W_g, dilation):
    B, T, d_in = x.shape
    x_past = torch.roll(x, shifts=dilation, dims=1)  # slip: roll wraps the last steps around instead of zeros
    filter_ = x @ W_f[0] + x_past @ W_f[1]
    gate = x @ W_g[0] + x_past @ W_g[1]
    return torch.cat([x, torch.tanh(filter_) * torch.sigmoid(gate)], dim=-1)


def dense_ignores_dilation(x, W_f, W_g, dilation):
    B, T, d_in = x.shape
    x_past = F.pad(x, (0, 0, 1, 0))[:, :T]  # slip: delays by one step whatever the dilation
    filter_ = x @ W_f[0] + x_past @ W_f[1]
    gate = x @ W_g[0] + x_past @ W_g[1]
    return torch.cat([x, torch.tanh(filter_) * torch.sigmoid(gate)], dim=-1)


def dense_taps_swapped(x, W_f, W_g, dilation):
    B, T, d_in = x.shape
    x_past = F.pad(x, (0, 0, dilation, 0))[:, :T]
    filter_ = x @ W_f[1] + x_past @ W_f[0]  # slip: W[0] applied to the past and W[1] to the present
    gate = x @ W_g[1] + x_past @ W_g[0]
    return torch.cat([x, torch.tanh(filter_) * torch.sigmoid(gate)], dim=-1)


def dense_activations_swapped(x, W_f, W_g, dilation):
    B, T, d_in = x.shape
    x_past = F.pad(x, (0, 0, dilation, 0))[:, :T]
    filter_ = x @ W_f[0] + x_past @ W_f[1]
    gate = x @ W_g[0] + x_past @ W_g[1]
    return torch.cat([x, torch.sigmoid(filter_) * torch.tanh(gate)], dim=-1)  # slip: sigmoid on the filter, tanh on the gate


def dense_no_concat(x, W_f, W_g, dilation):
    B, T, d_in = x.shape
    x_past = F.pad(x, (0, 0, dilation, 0))[:, :T]
    filter_ = x @ W_f[0] + x_past @ W_f[1]
    gate = x @ W_g[0] + x_past @ W_g[1]
    return torch.tanh(filter_) * torch.sigmoid(gate)  # slip: returns the new features only, x not appended


def dense_concat_order(x, W_f, W_g, dilation):
    B, T, d_in = x.shape
    x_past = F.pad(x, (0, 0, dilation, 0))[:, :T]
    filter_ = x @ W_f[0] + x_past @ W_f[1]
    gate = x @ W_g[0] + x_past @ W_g[1]
    return torch.cat([torch.tanh(filter_) * torch.sigmoid(gate), x], dim=-1)  # slip: new features first, x last


def dense_copy_paste_gate(x, W_f, W_g, dilation):
    B, T, d_in = x.shape
    x_past = F.pad(x, (0, 0, dilation, 0))[:, :T]
    filter_ = x @ W_f[0] + x_past @ W_f[1]
    gate = x @ W_g[0] + x_past @ W_f[1]  # slip: copy-paste: the gate's past tap uses W_f[1]
    return torch.cat([x, torch.tanh(filter_) * torch.sigmoid(gate)], dim=-1)


def dense_zeros_float32(x, W_f, W_g, dilation):
    B, T, d_in = x.shape
    x_past = torch.zeros(B, T, d_in)  # slip: new tensor in the default float32 (and CPU), not made from x
    x_past[:, dilation:] = x[:, :T - dilation] if dilation < T else x[:, :0]
    filter_ = x @ W_f[0] + x_past @ W_f[1]
    gate = x @ W_g[0] + x_past @ W_g[1]
    return torch.cat([x, torch.tanh(filter_) * torch.sigmoid(gate)], dim=-1)


def dense_right_cat_zeros(x, W_f, W_g, dilation):
    B, T, d_in = x.shape
    d = min(dilation, T)
    x_past = torch.cat([x.new_zeros(B, d, d_in), x[:, :T - d]], dim=1)      # x_{t-d}, zeros first
    both = torch.cat([x, x_past], dim=-1)                                   # (B, T, 2·d_in)
    filter_ = both @ torch.cat([W_f[0], W_f[1]], dim=0)                     # (B, T, filters)
    gate = both @ torch.cat([W_g[0], W_g[1]], dim=0)
    return torch.cat([x, filter_.tanh() * gate.sigmoid()], dim=-1)


def dense_right_conv1d(x, W_f, W_g, dilation):
    B, T, d_in = x.shape
    filters = W_f.shape[-1]
    W = torch.cat([W_f, W_g], dim=-1)                 # (2, d_in, 2·filters)
    weight = W.flip(0).permute(2, 1, 0)               # (2·filters, d_in, 2): tap 0 meets x_{t-d}, tap 1 meets x_t
    inp = F.pad(x.transpose(1, 2), (dilation, 0))     # (B, d_in, d + T): zeros on the left
    out = F.conv1d(inp, weight, dilation=dilation).transpose(1, 2)   # (B, T, 2·filters)
    filter_, gate = out.split(filters, dim=-1)
    return torch.cat([x, torch.tanh(filter_) * torch.sigmoid(gate)], dim=-1)


# ---------------------------------------------------------------------------------------------
# Exercise 5: causal_attention_block(x, W_q, W_k, W_v) -> [x, read-out], weights (B, T, T)
# ---------------------------------------------------------------------------------------------

def causal_mask_inverted(x, W_q, W_k, W_v):
    B, T, d_in = x.shape
    q, k, v = x @ W_q, x @ W_k, x @ W_v
    scores = q @ k.transpose(1, 2) / math.sqrt(k.size(-1))
    scores = scores.masked_fill(causal_mask(T), float("-inf"))  # slip: mask inverted: hides the allowed keys
    weights = torch.softmax(scores, dim=-1)
    return torch.cat([x, weights @ v], dim=-1), weights


def causal_mask_excludes_diagonal(x, W_q, W_k, W_v):
    B, T, d_in = x.shape
    q, k, v = x @ W_q, x @ W_k, x @ W_v
    scores = q @ k.transpose(1, 2) / math.sqrt(k.size(-1))
    allowed = torch.tril(torch.ones(T, T, dtype=torch.bool), diagonal=-1)  # slip: strictly below the diagonal: t cannot see itself
    scores = scores.masked_fill(~allowed, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return torch.cat([x, weights @ v], dim=-1), weights


def causal_no_scaling(x, W_q, W_k, W_v):
    B, T, d_in = x.shape
    q, k, v = x @ W_q, x @ W_k, x @ W_v
    scores = q @ k.transpose(1, 2)  # slip: no division by sqrt(d_key)
    scores = scores.masked_fill(~causal_mask(T), float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return torch.cat([x, weights @ v], dim=-1), weights


def causal_scale_by_d_in(x, W_q, W_k, W_v):
    B, T, d_in = x.shape
    q, k, v = x @ W_q, x @ W_k, x @ W_v
    scores = q @ k.transpose(1, 2) / math.sqrt(d_in)  # slip: scales by sqrt(d_in) instead of sqrt(d_key)
    scores = scores.masked_fill(~causal_mask(T), float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return torch.cat([x, weights @ v], dim=-1), weights


def causal_softmax_over_queries(x, W_q, W_k, W_v):
    B, T, d_in = x.shape
    q, k, v = x @ W_q, x @ W_k, x @ W_v
    scores = q @ k.transpose(1, 2) / math.sqrt(k.size(-1))
    scores = scores.masked_fill(~causal_mask(T), float("-inf"))
    weights = torch.softmax(scores, dim=1)  # slip: softmax over the queries (dim 1) instead of the keys
    return torch.cat([x, weights @ v], dim=-1), weights


def causal_mask_after_softmax(x, W_q, W_k, W_v):
    B, T, d_in = x.shape
    q, k, v = x @ W_q, x @ W_k, x @ W_v
    scores = q @ k.transpose(1, 2) / math.sqrt(k.size(-1))
    weights = torch.softmax(scores, dim=-1) * causal_mask(T)  # slip: masks after the softmax, rows no longer sum to 1
    return torch.cat([x, weights @ v], dim=-1), weights


def causal_fill_zero(x, W_q, W_k, W_v):
    B, T, d_in = x.shape
    q, k, v = x @ W_q, x @ W_k, x @ W_v
    scores = q @ k.transpose(1, 2) / math.sqrt(k.size(-1))
    scores = scores.masked_fill(~causal_mask(T), 0.0)  # slip: fills masked scores with 0, not -inf: the future still gets weight
    weights = torch.softmax(scores, dim=-1)
    return torch.cat([x, weights @ v], dim=-1), weights


def causal_no_concat(x, W_q, W_k, W_v):
    B, T, d_in = x.shape
    q, k, v = x @ W_q, x @ W_k, x @ W_v
    scores = q @ k.transpose(1, 2) / math.sqrt(k.size(-1))
    scores = scores.masked_fill(~causal_mask(T), float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights  # slip: returns the read-out only, x not concatenated


def causal_concat_order(x, W_q, W_k, W_v):
    B, T, d_in = x.shape
    q, k, v = x @ W_q, x @ W_k, x @ W_v
    scores = q @ k.transpose(1, 2) / math.sqrt(k.size(-1))
    scores = scores.masked_fill(~causal_mask(T), float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return torch.cat([weights @ v, x], dim=-1), weights  # slip: read-out first, x last


def causal_queries_keys_swapped(x, W_q, W_k, W_v):
    B, T, d_in = x.shape
    q, k, v = x @ W_k, x @ W_q, x @ W_v  # slip: queries from W_k and keys from W_q
    scores = q @ k.transpose(1, 2) / math.sqrt(k.size(-1))
    scores = scores.masked_fill(~causal_mask(T), float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return torch.cat([x, weights @ v], dim=-1), weights


def causal_right_where(x, W_q, W_k, W_v):
    T = x.shape[1]
    q = torch.einsum("btd,dk->btk", x, W_q)
    k = torch.einsum("btd,dk->btk", x, W_k)
    v = torch.einsum("btd,dk->btk", x, W_v)
    scores = torch.einsum("btk,bsk->bts", q, k) / W_q.shape[1] ** 0.5
    allowed = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
    scores = torch.where(allowed, scores, torch.full_like(scores, -math.inf))
    weights = scores.softmax(dim=2)
    return torch.cat((x, torch.einsum("bts,bsv->btv", weights, v)), dim=2), weights


def causal_right_additive(x, W_q, W_k, W_v):
    B, T, d_in = x.shape
    q, k, v = torch.matmul(x, W_q), torch.matmul(x, W_k), torch.matmul(x, W_v)
    bias = x.new_full((T, T), float("-inf")).triu(diagonal=1)      # 0 on and below the diagonal, -inf above
    weights = F.softmax(torch.bmm(q, k.transpose(1, 2)) / math.sqrt(W_k.shape[-1]) + bias, dim=-1)
    return torch.cat([x, torch.bmm(weights, v)], dim=-1), weights


SLIPS = [
    ("self_attention_2d", "softmax taken over the queries (dim 1) instead of over the keys", s2d_softmax_over_queries),
    ("self_attention_2d", "scores not divided by sqrt(C̄)", s2d_no_scaling),
    ("self_attention_2d", "scores divided by sqrt(C), the input's channel count, instead of sqrt(C̄)", s2d_scale_by_input_channels),
    ("self_attention_2d", "read-out (B, N, C̄) reshaped to (B, C̄, H, W) without transposing first", s2d_reshape_without_transpose),
    ("self_attention_2d", "keys and queries swapped: keys from W_g, queries from W_f", s2d_keys_queries_swapped),
    ("self_attention_2d", "output 1×1 convolution W_v forgotten: returns the C̄-channel read-out", s2d_forgets_output_conv),
    ("self_attention_2d", "pixels never moved in front of the channels: attention over channels, weights (B, C̄, C̄)", s2d_attends_over_channels),
    ("self_attention_2d", "pixels flattened column by column, but the read-out reshaped back row by row", s2d_column_major_pixels),
    ("self_attention_2d", "softmax and output forced to float32, so a float64 input loses its dtype", s2d_casts_to_float32),
    ("self_attention_block", "gamma initialised at 1 instead of 0", BlockGammaOne),
    ("self_attention_block", "gamma a plain tensor, not an nn.Parameter, so it is never learned", BlockGammaNotParameter),
    ("self_attention_block", "returns gamma * o without the residual x", BlockNoResidual),
    ("self_attention_block", "returns x + o: o not scaled by gamma", BlockNoGamma),
    ("self_attention_block", "passes g's weight as W_f and f's weight as W_g (keys and queries swapped)", BlockKeysQueriesSwapped),
    ("self_attention_block", "the 1×1 convolutions keep the default bias=True", BlockConvBias),
    ("self_attention_block", "values h and output v with all C channels (the arXiv v1 form) instead of C/8", BlockFullChannelValues),
    ("self_attention_block", "never stores the attention weights on self.attn_weights", BlockForgetsAttnWeights),
    ("patchify", "each patch flattened in (C, P, P) order instead of (P, P, C)", patchify_cpp_order),
    ("patchify", "uses F.unfold, whose features come in (C, P, P) order", patchify_unfold),
    ("patchify", "a single reshape of the image: rows of memory, not P×P squares", patchify_single_reshape),
    ("patchify", "patches numbered column by column instead of row by row", patchify_column_major_patches),
    ("patchify", "pixels inside a patch read column by column ((j, i) instead of (i, j))", patchify_columns_inside_patch),
    ("patchify", "splits each image axis as (P, H/P) instead of (H/P, P): strided pixels instead of squares", patchify_split_order),
    ("patchify", ".view after the permute (not contiguous) instead of .reshape", patchify_view_after_permute),
    ("patchify", "assumes square images: uses H/P patches along the width too", patchify_square_only),
    ("patchify", "goes through numpy, so the result has no gradient back to the images", patchify_through_numpy),
    ("patchify", "casts the images to float32, so float64 input comes back float32", patchify_float32),
    ("dense_block", "pads on the right: the convolution reads x_{t+d}, the future", dense_pads_right),
    ("dense_block", "pads on the left but keeps the last T steps: the 'past' is x_t itself", dense_slices_wrong_end),
    ("dense_block", "torch.roll for the delay: the first d steps get the last steps instead of zeros", dense_roll),
    ("dense_block", "delay of one step whatever the dilation", dense_ignores_dilation),
    ("dense_block", "taps swapped: W[0] applied to the past and W[1] to the present", dense_taps_swapped),
    ("dense_block", "sigmoid on the filter and tanh on the gate (swapped)", dense_activations_swapped),
    ("dense_block", "returns only the new features, without x", dense_no_concat),
    ("dense_block", "concatenates the new features before x instead of after", dense_concat_order),
    ("dense_block", "copy-paste: the gate's past tap uses W_f[1] instead of W_g[1]", dense_copy_paste_gate),
    ("dense_block", "delayed sequence built with torch.zeros: float32 on the CPU whatever x is", dense_zeros_float32),
    ("causal_attention_block", "mask inverted: masks the past and the diagonal, keeps the future", causal_mask_inverted),
    ("causal_attention_block", "mask strictly below the diagonal: a step cannot attend to itself", causal_mask_excludes_diagonal),
    ("causal_attention_block", "scores not divided by sqrt(d_key)", causal_no_scaling),
    ("causal_attention_block", "scores divided by sqrt(d_in) instead of sqrt(d_key)", causal_scale_by_d_in),
    ("causal_attention_block", "softmax over the queries (dim 1) instead of over the keys", causal_softmax_over_queries),
    ("causal_attention_block", "mask applied by multiplying after the softmax, without renormalising", causal_mask_after_softmax),
    ("causal_attention_block", "masked scores set to 0 instead of -inf", causal_fill_zero),
    ("causal_attention_block", "returns the read-out alone, x not concatenated", causal_no_concat),
    ("causal_attention_block", "concatenates the read-out before x instead of after", causal_concat_order),
    ("causal_attention_block", "queries from W_k and keys from W_q (swapped)", causal_queries_keys_swapped),
]

CORRECT = [
    ("self_attention_2d", "einsum throughout, pixels flattened through a (B, H, W, C̄) layout", s2d_right_einsum),
    ("self_attention_2d", "kept in channels-first (B, C̄, N) layout, bmm with the transposed weights", s2d_right_channels_first),
    ("self_attention_block", "weight matrices by flatten(1), addcmul for x + gamma * o", BlockRightFlattenedWeights),
    ("self_attention_block", "weight matrices by reshape(out, in), convs declared in another order", BlockRightSqueeze),
    ("patchify", "Tensor.unfold twice, then permute the channels last", patchify_right_tensor_unfold),
    ("patchify", "F.unfold, then reorder the (C, P, P) features to (P, P, C)", patchify_right_from_unfold),
    ("patchify", "loop over the patches in row-major order and stack", patchify_right_loop),
    ("dense_block", "delay by concatenating x.new_zeros, one product on [x_t, x_{t-d}] with stacked weights", dense_right_cat_zeros),
    ("dense_block", "a real F.conv1d with dilation, left padding and flipped taps", dense_right_conv1d),
    ("causal_attention_block", "einsum and torch.where with a tril mask", causal_right_where),
    ("causal_attention_block", "additive -inf bias above the diagonal", causal_right_additive),
]
