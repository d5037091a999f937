"""Lesson 11: new slips (one mistake each) and unusual right answers."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from course_utils.attention import scaled_dot_product_attention
from course_utils.masks import causal_mask
from course_utils.vision import conv1x1
from course_utils.vision import self_attention_2d as reference_self_attention_2d

# ---------------------------------------------------------------- self_attention_2d


def sa_roles_swapped(x, W_f, W_g, W_h, W_v):
    # queries from W_f, keys from W_g (SAGAN's f/g swapped): weights transposed before softmax
    B, C, H, W = x.shape
    q = conv1x1(x, W_f).flatten(2).transpose(1, 2)
    k = conv1x1(x, W_g).flatten(2).transpose(1, 2)
    v = conv1x1(x, W_h).flatten(2).transpose(1, 2)
    weights = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(k.size(-1)), dim=-1)
    read = (weights @ v).transpose(1, 2).reshape(B, -1, H, W)
    return conv1x1(read, W_v), weights


def sa_paper_no_scale(x, W_f, W_g, W_h, W_v):
    # follows the SAGAN paper: no 1/sqrt(C̄)
    B, C, H, W = x.shape
    k = conv1x1(x, W_f).flatten(2).transpose(1, 2)
    q = conv1x1(x, W_g).flatten(2).transpose(1, 2)
    v = conv1x1(x, W_h).flatten(2).transpose(1, 2)
    weights = torch.softmax(q @ k.transpose(1, 2), dim=-1)
    read = (weights @ v).transpose(1, 2).reshape(B, -1, H, W)
    return conv1x1(read, W_v), weights


def sa_scale_by_C(x, W_f, W_g, W_h, W_v):
    # divides by sqrt(C) (input channels) instead of sqrt(C̄)
    B, C, H, W = x.shape
    k = conv1x1(x, W_f).flatten(2).transpose(1, 2)
    q = conv1x1(x, W_g).flatten(2).transpose(1, 2)
    v = conv1x1(x, W_h).flatten(2).transpose(1, 2)
    weights = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(C), dim=-1)
    read = (weights @ v).transpose(1, 2).reshape(B, -1, H, W)
    return conv1x1(read, W_v), weights


def sa_reshape_no_transpose(x, W_f, W_g, W_h, W_v):
    # (B, N, C̄) reshaped straight to (B, C̄, H, W)
    B, C, H, W = x.shape
    k = conv1x1(x, W_f).flatten(2).transpose(1, 2)
    q = conv1x1(x, W_g).flatten(2).transpose(1, 2)
    v = conv1x1(x, W_h).flatten(2).transpose(1, 2)
    weights = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(k.size(-1)), dim=-1)
    read = (weights @ v).reshape(B, -1, H, W)
    return conv1x1(read, W_v), weights


def sa_column_major_pixels(x, W_f, W_g, W_h, W_v):
    # flattens the pixels column by column (W before H), puts them back consistently: o right, weights not row-major
    B, C, H, W = x.shape
    flat = lambda t: t.transpose(2, 3).flatten(2).transpose(1, 2)
    k, q, v = flat(conv1x1(x, W_f)), flat(conv1x1(x, W_g)), flat(conv1x1(x, W_h))
    weights = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(k.size(-1)), dim=-1)
    read = (weights @ v).transpose(1, 2).reshape(B, -1, W, H).transpose(2, 3)
    return conv1x1(read, W_v), weights


def sa_softmax_over_queries(x, W_f, W_g, W_h, W_v):
    # softmax over dim=1 (queries) instead of the keys
    B, C, H, W = x.shape
    k = conv1x1(x, W_f).flatten(2).transpose(1, 2)
    q = conv1x1(x, W_g).flatten(2).transpose(1, 2)
    v = conv1x1(x, W_h).flatten(2).transpose(1, 2)
    weights = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(k.size(-1)), dim=1)
    read = (weights @ v).transpose(1, 2).reshape(B, -1, H, W)
    return conv1x1(read, W_v), weights


def sa_values_from_x(x, W_f, W_g, W_h, W_v):
    # forgot the value projection W_h: mixes raw x, then applies W_h after (W_v then W_h order)
    B, C, H, W = x.shape
    k = conv1x1(x, W_f).flatten(2).transpose(1, 2)
    q = conv1x1(x, W_g).flatten(2).transpose(1, 2)
    v = x.flatten(2).transpose(1, 2)                       # (B, N, C)
    weights = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(k.size(-1)), dim=-1)
    read = (weights @ v).transpose(1, 2).reshape(B, -1, H, W)   # (B, C, H, W)
    return conv1x1(conv1x1(read, W_h), W_v), weights


# ---------------------------------------------------------------- self_attention_block (a class)


class SA_GammaOne(nn.Module):
    def __init__(self, channels):
        super().__init__()
        c = max(channels // 8, 1)
        self.f = nn.Conv2d(channels, c, 1, bias=False)
        self.g = nn.Conv2d(channels, c, 1, bias=False)
        self.h = nn.Conv2d(channels, c, 1, bias=False)
        self.v = nn.Conv2d(c, channels, 1, bias=False)
        self.gamma = nn.Parameter(torch.ones(1))            # slip: starts at 1

    def forward(self, x):
        o, w = reference_self_attention_2d(x, self.f.weight[:, :, 0, 0], self.g.weight[:, :, 0, 0],
                                           self.h.weight[:, :, 0, 0], self.v.weight[:, :, 0, 0])
        self.attn_weights = w.detach()
        return x + self.gamma * o


class SA_GammaTensor(nn.Module):
    def __init__(self, channels):
        super().__init__()
        c = max(channels // 8, 1)
        self.f = nn.Conv2d(channels, c, 1, bias=False)
        self.g = nn.Conv2d(channels, c, 1, bias=False)
        self.h = nn.Conv2d(channels, c, 1, bias=False)
        self.v = nn.Conv2d(c, channels, 1, bias=False)
        self.gamma = torch.zeros(1, requires_grad=True)     # slip: not a registered Parameter

    def forward(self, x):
        o, w = reference_self_attention_2d(x, self.f.weight[:, :, 0, 0], self.g.weight[:, :, 0, 0],
                                           self.h.weight[:, :, 0, 0], self.v.weight[:, :, 0, 0])
        self.attn_weights = w.detach()
        return x + self.gamma * o


class SA_Interpolate(nn.Module):
    def __init__(self, channels):
        super().__init__()
        c = max(channels // 8, 1)
        self.f = nn.Conv2d(channels, c, 1, bias=False)
        self.g = nn.Conv2d(channels, c, 1, bias=False)
        self.h = nn.Conv2d(channels, c, 1, bias=False)
        self.v = nn.Conv2d(c, channels, 1, bias=False)
        self.gamma = nn.Parameter(torch.zeros(1))

    def forward(self, x):
        o, w = reference_self_attention_2d(x, self.f.weight[:, :, 0, 0], self.g.weight[:, :, 0, 0],
                                           self.h.weight[:, :, 0, 0], self.v.weight[:, :, 0, 0])
        self.attn_weights = w.detach()
        return (1 - self.gamma) * x + self.gamma * o        # slip: a gate, not a residual


class SA_FGSwapped(nn.Module):
    def __init__(self, channels):
        super().__init__()
        c = max(channels // 8, 1)
        self.f = nn.Conv2d(channels, c, 1, bias=False)
        self.g = nn.Conv2d(channels, c, 1, bias=False)
        self.h = nn.Conv2d(channels, c, 1, bias=False)
        self.v = nn.Conv2d(c, channels, 1, bias=False)
        self.gamma = nn.Parameter(torch.zeros(1))

    def forward(self, x):
        # slip: passes g as W_f and f as W_g
        o, w = reference_self_attention_2d(x, self.g.weight[:, :, 0, 0], self.f.weight[:, :, 0, 0],
                                           self.h.weight[:, :, 0, 0], self.v.weight[:, :, 0, 0])
        self.attn_weights = w.detach()
        return x + self.gamma * o


class SA_WithBias(nn.Module):
    def __init__(self, channels):
        super().__init__()
        c = max(channels // 8, 1)
        self.f = nn.Conv2d(channels, c, 1)                  # slip: bias left on (bias=False forgotten)
        self.g = nn.Conv2d(channels, c, 1)
        self.h = nn.Conv2d(channels, c, 1)
        self.v = nn.Conv2d(c, channels, 1)
        self.gamma = nn.Parameter(torch.zeros(1))

    def forward(self, x):
        o, w = reference_self_attention_2d(x, self.f.weight[:, :, 0, 0], self.g.weight[:, :, 0, 0],
                                           self.h.weight[:, :, 0, 0], self.v.weight[:, :, 0, 0])
        self.attn_weights = w.detach()
        return x + self.gamma * o


class SA_NoWeightsKept(nn.Module):
    def __init__(self, channels):
        super().__init__()
        c = max(channels // 8, 1)
        self.f = nn.Conv2d(channels, c, 1, bias=False)
        self.g = nn.Conv2d(channels, c, 1, bias=False)
        self.h = nn.Conv2d(channels, c, 1, bias=False)
        self.v = nn.Conv2d(c, channels, 1, bias=False)
        self.gamma = nn.Parameter(torch.zeros(1))

    def forward(self, x):
        o, w = reference_self_attention_2d(x, self.f.weight[:, :, 0, 0], self.g.weight[:, :, 0, 0],
                                           self.h.weight[:, :, 0, 0], self.v.weight[:, :, 0, 0])
        return x + self.gamma * o                            # slip: forgot self.attn_weights


class SA_InPlaceResidual(nn.Module):
    def __init__(self, channels):
        super().__init__()
        c = max(channels // 8, 1)
        self.f = nn.Conv2d(channels, c, 1, bias=False)
        self.g = nn.Conv2d(channels, c, 1, bias=False)
        self.h = nn.Conv2d(channels, c, 1, bias=False)
        self.v = nn.Conv2d(c, channels, 1, bias=False)
        self.gamma = nn.Parameter(torch.zeros(1))

    def forward(self, x):
        o, w = reference_self_attention_2d(x, self.f.weight[:, :, 0, 0], self.g.weight[:, :, 0, 0],
                                           self.h.weight[:, :, 0, 0], self.v.weight[:, :, 0, 0])
        self.attn_weights = w.detach()
        x += self.gamma * o                                  # slip: edits the caller's tensor in place
        return x


# ---------------------------------------------------------------- patchify


def pt_unfold(images, patch_size):
    # F.unfold: features in (C, P, P) order
    return F.unfold(images, kernel_size=patch_size, stride=patch_size).transpose(1, 2)


def pt_column_major_patches(images, patch_size):
    B, C, H, W = images.shape
    P = patch_size
    x = images.reshape(B, C, H // P, P, W // P, P).permute(0, 4, 2, 3, 5, 1)   # slip: W/P before H/P
    return x.reshape(B, -1, P * P * C)


def pt_ij_swapped(images, patch_size):
    B, C, H, W = images.shape
    P = patch_size
    x = images.reshape(B, C, H // P, P, W // P, P).permute(0, 2, 4, 5, 3, 1)   # slip: j before i inside a patch
    return x.reshape(B, -1, P * P * C)


def pt_single_reshape(images, patch_size):
    B, C, H, W = images.shape
    P = patch_size
    return images.permute(0, 2, 3, 1).reshape(B, (H // P) * (W // P), P * P * C)   # slip: one reshape


def pt_view_after_permute(images, patch_size):
    B, C, H, W = images.shape
    P = patch_size
    x = images.reshape(B, C, H // P, P, W // P, P).permute(0, 2, 4, 3, 5, 1)
    return x.view(B, -1, P * P * C)                          # slip: .view on a non-contiguous tensor


def pt_hw_from_shape_swapped(images, patch_size):
    B, C, H, W = images.shape
    P = patch_size
    # slip: unpacks H/P and W/P in the wrong place of the reshape (fine on square images only)
    x = images.reshape(B, C, W // P, P, H // P, P).permute(0, 2, 4, 3, 5, 1)
    return x.reshape(B, -1, P * P * C)


# ---------------------------------------------------------------- dense_block


def db_right_pad(x, W_f, W_g, dilation):
    T = x.shape[1]
    x_past = F.pad(x, (0, 0, 0, dilation))[:, dilation:]    # slip: pads on the right: x_{t+d}
    f = x @ W_f[0] + x_past @ W_f[1]
    g = x @ W_g[0] + x_past @ W_g[1]
    return torch.cat([x, torch.tanh(f) * torch.sigmoid(g)], dim=-1)


def db_pad_feature_axis(x, W_f, W_g, dilation):
    d_in = x.shape[-1]
    x_past = F.pad(x, (dilation, 0))[..., :d_in]            # slip: F.pad pads the last axis (features)
    f = x @ W_f[0] + x_past @ W_f[1]
    g = x @ W_g[0] + x_past @ W_g[1]
    return torch.cat([x, torch.tanh(f) * torch.sigmoid(g)], dim=-1)


def db_taps_swapped(x, W_f, W_g, dilation):
    T = x.shape[1]
    x_past = F.pad(x, (0, 0, dilation, 0))[:, :T]
    f = x @ W_f[1] + x_past @ W_f[0]                         # slip: W[1] on the present
    g = x @ W_g[1] + x_past @ W_g[0]
    return torch.cat([x, torch.tanh(f) * torch.sigmoid(g)], dim=-1)


def db_activations_swapped(x, W_f, W_g, dilation):
    T = x.shape[1]
    x_past = F.pad(x, (0, 0, dilation, 0))[:, :T]
    f = x @ W_f[0] + x_past @ W_f[1]
    g = x @ W_g[0] + x_past @ W_g[1]
    return torch.cat([x, torch.sigmoid(f) * torch.tanh(g)], dim=-1)   # slip: σ on the filter, tanh on the gate


def db_roll(x, W_f, W_g, dilation):
    x_past = torch.roll(x, shifts=dilation, dims=1)          # slip: wraps the last steps round to the start
    f = x @ W_f[0] + x_past @ W_f[1]
    g = x @ W_g[0] + x_past @ W_g[1]
    return torch.cat([x, torch.tanh(f) * torch.sigmoid(g)], dim=-1)


def db_off_by_one(x, W_f, W_g, dilation):
    T = x.shape[1]
    x_past = F.pad(x, (0, 0, dilation + 1, 0))[:, :T]        # slip: delay d + 1
    f = x @ W_f[0] + x_past @ W_f[1]
    g = x @ W_g[0] + x_past @ W_g[1]
    return torch.cat([x, torch.tanh(f) * torch.sigmoid(g)], dim=-1)


def db_new_first(x, W_f, W_g, dilation):
    T = x.shape[1]
    x_past = F.pad(x, (0, 0, dilation, 0))[:, :T]
    f = x @ W_f[0] + x_past @ W_f[1]
    g = x @ W_g[0] + x_past @ W_g[1]
    return torch.cat([torch.tanh(f) * torch.sigmoid(g), x], dim=-1)   # slip: new features first


# ---------------------------------------------------------------- causal_attention_block


def ca_polarity(x, W_q, W_k, W_v):
    T = x.shape[1]
    q, k, v = x @ W_q, x @ W_k, x @ W_v
    s = q @ k.transpose(1, 2) / math.sqrt(k.size(-1))
    s = s.masked_fill(causal_mask(T), float("-inf"))        # slip: masks what may be attended
    w = torch.softmax(s, dim=-1)
    return torch.cat([x, w @ v], dim=-1), w


def ca_fill_zero(x, W_q, W_k, W_v):
    T = x.shape[1]
    q, k, v = x @ W_q, x @ W_k, x @ W_v
    s = q @ k.transpose(1, 2) / math.sqrt(k.size(-1))
    s = s.masked_fill(~causal_mask(T), 0.0)                  # slip: 0 instead of -inf
    w = torch.softmax(s, dim=-1)
    return torch.cat([x, w @ v], dim=-1), w


def ca_mask_after_softmax(x, W_q, W_k, W_v):
    T = x.shape[1]
    q, k, v = x @ W_q, x @ W_k, x @ W_v
    w = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(k.size(-1)), dim=-1)
    w = w * causal_mask(T)                                   # slip: masks after softmax, no renormalising
    return torch.cat([x, w @ v], dim=-1), w


def ca_scale_d_in(x, W_q, W_k, W_v):
    B, T, d_in = x.shape
    q, k, v = x @ W_q, x @ W_k, x @ W_v
    s = q @ k.transpose(1, 2) / math.sqrt(d_in)              # slip: sqrt(d_in)
    s = s.masked_fill(~causal_mask(T), float("-inf"))
    w = torch.softmax(s, dim=-1)
    return torch.cat([x, w @ v], dim=-1), w


def ca_strict_past(x, W_q, W_k, W_v):
    T = x.shape[1]
    q, k, v = x @ W_q, x @ W_k, x @ W_v
    s = q @ k.transpose(1, 2) / math.sqrt(k.size(-1))
    allowed = torch.ones(T, T).tril(-1).bool()               # slip: strictly below the diagonal
    s = s.masked_fill(~allowed, float("-inf"))
    w = torch.softmax(s, dim=-1)
    return torch.cat([x, w @ v], dim=-1), w


def ca_weights_transposed(x, W_q, W_k, W_v):
    T = x.shape[1]
    q, k, v = x @ W_q, x @ W_k, x @ W_v
    s = q @ k.transpose(1, 2) / math.sqrt(k.size(-1))
    s = s.masked_fill(~causal_mask(T), float("-inf"))
    w = torch.softmax(s, dim=-1)
    return torch.cat([x, w @ v], dim=-1), w.transpose(1, 2)  # slip: returns the weights transposed


def ca_readout_only(x, W_q, W_k, W_v):
    T = x.shape[1]
    q, k, v = x @ W_q, x @ W_k, x @ W_v
    s = q @ k.transpose(1, 2) / math.sqrt(k.size(-1))
    s = s.masked_fill(~causal_mask(T), float("-inf"))
    w = torch.softmax(s, dim=-1)
    return torch.cat([x, w @ v], dim=1), w                   # slip: concatenates along time


# ================================================================ right answers


def ok_sa_einsum(x, W_f, W_g, W_h, W_v):
    B, C, H, W = x.shape
    xf = x.reshape(B, C, H * W)
    k = torch.einsum("kc,bcn->bnk", W_f, xf)
    q = torch.einsum("kc,bcn->bnk", W_g, xf)
    v = torch.einsum("kc,bcn->bnk", W_h, xf)
    w = torch.einsum("bjk,bik->bji", q, k).div(math.sqrt(W_f.shape[0])).softmax(-1)
    o = torch.einsum("ck,bji,bik->bcj", W_v, w, v).reshape(B, -1, H, W)
    return o, w


def ok_sa_library(x, W_f, W_g, W_h, W_v):
    B, C, H, W = x.shape
    tok = x.flatten(2).transpose(1, 2)                       # (B, N, C)
    q, k, v = tok @ W_g.T, tok @ W_f.T, tok @ W_h.T
    read, w = scaled_dot_product_attention(q, k, v, need_weights=True)
    o = (read @ W_v.T).transpose(1, 2).reshape(B, C, H, W)
    return o, w


class OK_SA_OwnAttention(nn.Module):
    def __init__(self, channels):
        super().__init__()
        c = max(channels // 8, 1)
        self.f, self.g, self.h = (nn.Conv2d(channels, c, kernel_size=1, bias=False) for _ in range(3))
        self.v = nn.Conv2d(c, channels, kernel_size=1, bias=False)
        self.gamma = nn.Parameter(torch.zeros(1))

    def forward(self, x):
        B, C, H, W = x.shape
        k = self.f(x).flatten(2)                             # (B, C̄, N)
        q = self.g(x).flatten(2)
        v = self.h(x).flatten(2)
        w = torch.softmax(q.transpose(1, 2) @ k / math.sqrt(k.size(1)), dim=-1)
        o = self.v((v @ w.transpose(1, 2)).reshape(B, -1, H, W))
        self.attn_weights = w.detach()
        return x + self.gamma * o


def ok_pt_channels_last(images, patch_size):
    B, C, H, W = images.shape
    P = patch_size
    x = images.permute(0, 2, 3, 1).reshape(B, H // P, P, W // P, P, C).transpose(2, 3)
    return x.reshape(B, -1, P * P * C)


def ok_pt_loops(images, patch_size):
    B, C, H, W = images.shape
    P = patch_size
    patches = []
    for r in range(H // P):
        for c in range(W // P):
            patch = images[:, :, r * P:(r + 1) * P, c * P:(c + 1) * P]   # (B, C, P, P)
            patches.append(patch.permute(0, 2, 3, 1).reshape(B, -1))
    return torch.stack(patches, dim=1)


def ok_pt_unfold_reordered(images, patch_size):
    B, C, H, W = images.shape
    P = patch_size
    u = F.unfold(images, kernel_size=P, stride=P)            # (B, C·P·P, N)
    return u.reshape(B, C, P * P, -1).permute(0, 3, 2, 1).reshape(B, -1, P * P * C)


def ok_db_conv1d(x, W_f, W_g, dilation):
    xt = F.pad(x.transpose(1, 2), (dilation, 0))             # (B, d_in, d + T)
    def conv(Wt):                                            # (2, d_in, filters) -> conv weight (filters, d_in, 2)
        return F.conv1d(xt, Wt.permute(2, 1, 0).flip(-1), dilation=dilation).transpose(1, 2)
    return torch.cat([x, torch.tanh(conv(W_f)) * torch.sigmoid(conv(W_g))], dim=-1)


def ok_db_index(x, W_f, W_g, dilation):
    T = x.shape[1]
    x_past = torch.zeros_like(x)
    if dilation < T:
        x_past[:, dilation:] = x[:, :T - dilation]
    z = torch.einsum("btd,kdf->kbtf", torch.stack([x, x_past]), W_f) if False else None
    f = torch.einsum("btd,df->btf", x, W_f[0]) + torch.einsum("btd,df->btf", x_past, W_f[1])
    g = torch.einsum("btd,df->btf", x, W_g[0]) + torch.einsum("btd,df->btf", x_past, W_g[1])
    return torch.cat([x, f.tanh() * g.sigmoid()], -1)


def ok_ca_triu(x, W_q, W_k, W_v):
    T = x.shape[1]
    s = (x @ W_q) @ (x @ W_k).transpose(1, 2) / math.sqrt(W_k.shape[1])
    s = s + torch.full((T, T), float("-inf")).triu(1)         # additive mask
    w = s.softmax(-1)
    return torch.cat([x, w @ (x @ W_v)], dim=-1), w


def ok_ca_loop(x, W_q, W_k, W_v):
    B, T, _ = x.shape
    q, k, v = x @ W_q, x @ W_k, x @ W_v
    w = x.new_zeros(B, T, T)
    for t in range(T):
        w[:, t, :t + 1] = torch.softmax(q[:, t:t + 1] @ k[:, :t + 1].transpose(1, 2) / math.sqrt(k.size(-1)), -1)[:, 0]
    return torch.cat([x, w @ v], dim=-1), w


SLIPS = [
    ("self_attention_2d", "q from W_f, k from W_g (f/g roles swapped)", sa_roles_swapped),
    ("self_attention_2d", "no 1/sqrt(C̄) scale (paper formula)", sa_paper_no_scale),
    ("self_attention_2d", "scale by sqrt(C) instead of sqrt(C̄)", sa_scale_by_C),
    ("self_attention_2d", "reshape (B,N,C̄)->(B,C̄,H,W) without transpose", sa_reshape_no_transpose),
    ("self_attention_2d", "pixels flattened column-major (weights order wrong, o right)", sa_column_major_pixels),
    ("self_attention_2d", "softmax over queries (dim=1)", sa_softmax_over_queries),
    ("self_attention_block", "gamma initialised at 1", SA_GammaOne),
    ("self_attention_block", "gamma a plain tensor, not nn.Parameter", SA_GammaTensor),
    ("self_attention_block", "(1-γ)x + γo instead of x + γo", SA_Interpolate),
    ("self_attention_block", "f and g weights passed in swapped order", SA_FGSwapped),
    ("self_attention_block", "convs with bias (bias=False forgotten)", SA_WithBias),
    ("self_attention_block", "attn_weights never stored", SA_NoWeightsKept),
    ("self_attention_block", "x += γo in place on the input", SA_InPlaceResidual),
    ("patchify", "F.unfold: (C,P,P) order", pt_unfold),
    ("patchify", "patches column-major (W/P before H/P)", pt_column_major_patches),
    ("patchify", "inside a patch j before i", pt_ij_swapped),
    ("patchify", "one reshape of channels-last image", pt_single_reshape),
    ("patchify", ".view after permute (non-contiguous)", pt_view_after_permute),
    ("patchify", "H/P and W/P swapped in reshape (square-only)", pt_hw_from_shape_swapped),
    ("dense_block", "pad on the right: x_{t+d} (future)", db_right_pad),
    ("dense_block", "F.pad pads the feature axis instead of time", db_pad_feature_axis),
    ("dense_block", "W[0]/W[1] taps swapped (W[1] on present)", db_taps_swapped),
    ("dense_block", "sigmoid(filter)*tanh(gate) swapped", db_activations_swapped),
    ("dense_block", "torch.roll: wraps around instead of zeros", db_roll),
    ("dense_block", "delay d+1 (off by one)", db_off_by_one),
    ("dense_block", "new features first, x last", db_new_first),
    ("causal_attention_block", "mask polarity inverted (masks the allowed)", ca_polarity),
    ("causal_attention_block", "masked scores set to 0 not -inf", ca_fill_zero),
    ("causal_attention_block", "mask applied after softmax without renormalising", ca_mask_after_softmax),
    ("causal_attention_block", "scale sqrt(d_in) instead of sqrt(d_key)", ca_scale_d_in),
    ("causal_attention_block", "strictly past keys (tril(-1)), no self", ca_strict_past),
    ("causal_attention_block", "returns weights transposed", ca_weights_transposed),
    ("causal_attention_block", "concatenates along time (dim=1)", ca_readout_only),
]

CORRECT = [
    ("self_attention_2d", "values = raw x, W_h applied after mixing (linear, commutes: first planted as slip)", sa_values_from_x),
    ("self_attention_2d", "einsum throughout", ok_sa_einsum),
    ("self_attention_2d", "tokens first, library attention, W.T products", ok_sa_library),
    ("self_attention_block", "own attention from the convs (no reference)", OK_SA_OwnAttention),
    ("patchify", "channels-last then transpose", ok_pt_channels_last),
    ("patchify", "python loops over patches + stack", ok_pt_loops),
    ("patchify", "F.unfold then reorder to (P,P,C)", ok_pt_unfold_reordered),
    ("dense_block", "F.conv1d with dilation and flipped taps", ok_db_conv1d),
    ("dense_block", "index-shift + einsum", ok_db_index),
    ("causal_attention_block", "additive -inf triu mask", ok_ca_triu),
    ("causal_attention_block", "loop over queries", ok_ca_loop),
]


# ================================================================ batch 2: less textbook slips


def b2_sa_weights_are_scores(x, W_f, W_g, W_h, W_v):
    B, C, H, W = x.shape
    k = conv1x1(x, W_f).flatten(2).transpose(1, 2)
    q = conv1x1(x, W_g).flatten(2).transpose(1, 2)
    v = conv1x1(x, W_h).flatten(2).transpose(1, 2)
    scores = q @ k.transpose(1, 2) / math.sqrt(k.size(-1))
    read = (scores.softmax(-1) @ v).transpose(1, 2).reshape(B, -1, H, W)
    return conv1x1(read, W_v), scores                        # slip: returns the scores, not the weights


def b2_sa_divide_by_d(x, W_f, W_g, W_h, W_v):
    B, C, H, W = x.shape
    k = conv1x1(x, W_f).flatten(2).transpose(1, 2)
    q = conv1x1(x, W_g).flatten(2).transpose(1, 2)
    v = conv1x1(x, W_h).flatten(2).transpose(1, 2)
    w = torch.softmax(q @ k.transpose(1, 2) / k.size(-1), dim=-1)   # slip: / d_key, not / sqrt(d_key)
    read = (w @ v).transpose(1, 2).reshape(B, -1, H, W)
    return conv1x1(read, W_v), w


def b2_sa_attend_across_batch(x, W_f, W_g, W_h, W_v):
    B, C, H, W = x.shape
    k = conv1x1(x, W_f).flatten(2).transpose(1, 2)
    q = conv1x1(x, W_g).flatten(2).transpose(1, 2)
    v = conv1x1(x, W_h).flatten(2).transpose(1, 2)
    s = q @ k.transpose(1, 2) / math.sqrt(k.size(-1))        # (B, N, N)
    w = torch.softmax(s, dim=0)                              # slip: softmax over the batch axis
    read = (w @ v).transpose(1, 2).reshape(B, -1, H, W)
    return conv1x1(read, W_v), w


def b2_sa_hw_swapped_in_reshape(x, W_f, W_g, W_h, W_v):
    B, C, H, W = x.shape
    k = conv1x1(x, W_f).flatten(2).transpose(1, 2)
    q = conv1x1(x, W_g).flatten(2).transpose(1, 2)
    v = conv1x1(x, W_h).flatten(2).transpose(1, 2)
    w = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(k.size(-1)), dim=-1)
    read = (w @ v).transpose(1, 2).reshape(B, -1, W, H)     # slip: (W, H) - fine only on square maps
    return conv1x1(read, W_v), w


class B2_SA_PerChannelGamma(nn.Module):
    def __init__(self, channels):
        super().__init__()
        c = max(channels // 8, 1)
        self.f = nn.Conv2d(channels, c, 1, bias=False)
        self.g = nn.Conv2d(channels, c, 1, bias=False)
        self.h = nn.Conv2d(channels, c, 1, bias=False)
        self.v = nn.Conv2d(c, channels, 1, bias=False)
        self.gamma = nn.Parameter(torch.zeros(channels))     # slip: one γ per channel, broadcast on the W axis

    def forward(self, x):
        o, w = reference_self_attention_2d(x, self.f.weight[:, :, 0, 0], self.g.weight[:, :, 0, 0],
                                           self.h.weight[:, :, 0, 0], self.v.weight[:, :, 0, 0])
        self.attn_weights = w.detach()
        return x + self.gamma * o


class B2_SA_HalfChannels(nn.Module):
    def __init__(self, channels):
        super().__init__()
        c = max(channels // 2, 1)                            # slip: C/2 (the authors' code), not C/8
        self.f = nn.Conv2d(channels, c, 1, bias=False)
        self.g = nn.Conv2d(channels, c, 1, bias=False)
        self.h = nn.Conv2d(channels, c, 1, bias=False)
        self.v = nn.Conv2d(c, channels, 1, bias=False)
        self.gamma = nn.Parameter(torch.zeros(1))

    def forward(self, x):
        o, w = reference_self_attention_2d(x, self.f.weight[:, :, 0, 0], self.g.weight[:, :, 0, 0],
                                           self.h.weight[:, :, 0, 0], self.v.weight[:, :, 0, 0])
        self.attn_weights = w.detach()
        return x + self.gamma * o


class B2_SA_GammaDetached(nn.Module):
    def __init__(self, channels):
        super().__init__()
        c = max(channels // 8, 1)
        self.f = nn.Conv2d(channels, c, 1, bias=False)
        self.g = nn.Conv2d(channels, c, 1, bias=False)
        self.h = nn.Conv2d(channels, c, 1, bias=False)
        self.v = nn.Conv2d(c, channels, 1, bias=False)
        self.gamma = nn.Parameter(torch.zeros(1))

    def forward(self, x):
        o, w = reference_self_attention_2d(x, self.f.weight[:, :, 0, 0], self.g.weight[:, :, 0, 0],
                                           self.h.weight[:, :, 0, 0], self.v.weight[:, :, 0, 0])
        self.attn_weights = w.detach()
        return x + self.gamma.item() * o                      # slip: γ as a Python float: no gradient reaches it


def b2_pt_strided(images, patch_size):
    B, C, H, W = images.shape
    P = patch_size
    # slip: (where inside, which patch) instead of (which patch, where inside): strided "patches"
    x = images.reshape(B, C, P, H // P, P, W // P).permute(0, 3, 5, 2, 4, 1)
    return x.reshape(B, -1, P * P * C)


def b2_pt_transposed_image(images, patch_size):
    B, C, H, W = images.shape
    P = patch_size
    x = images.transpose(2, 3)                               # slip: works on the transposed image
    x = x.reshape(B, C, W // P, P, H // P, P).permute(0, 2, 4, 3, 5, 1)
    return x.reshape(B, -1, P * P * C)


def b2_pt_channels_slow(images, patch_size):
    B, C, H, W = images.shape
    P = patch_size
    x = images.reshape(B, C, H // P, P, W // P, P).permute(0, 2, 4, 1, 3, 5)   # slip: (C, P, P) by permute
    return x.reshape(B, -1, P * P * C)


def b2_db_no_dilation(x, W_f, W_g, dilation):
    T = x.shape[1]
    x_past = F.pad(x, (0, 0, 1, 0))[:, :T]                   # slip: dilation ignored (always 1)
    f = x @ W_f[0] + x_past @ W_f[1]
    g = x @ W_g[0] + x_past @ W_g[1]
    return torch.cat([x, torch.tanh(f) * torch.sigmoid(g)], dim=-1)


def b2_db_wrong_slice(x, W_f, W_g, dilation):
    x_past = F.pad(x, (0, 0, dilation, 0))[:, dilation:]     # slip: keeps the LAST T steps = x itself
    f = x @ W_f[0] + x_past @ W_f[1]
    g = x @ W_g[0] + x_past @ W_g[1]
    return torch.cat([x, torch.tanh(f) * torch.sigmoid(g)], dim=-1)


def b2_db_gate_shared(x, W_f, W_g, dilation):
    T = x.shape[1]
    x_past = F.pad(x, (0, 0, dilation, 0))[:, :T]
    f = x @ W_f[0] + x_past @ W_f[1]
    return torch.cat([x, torch.tanh(f) * torch.sigmoid(f)], dim=-1)   # slip: W_g never used


def b2_db_added(x, W_f, W_g, dilation):
    T = x.shape[1]
    x_past = F.pad(x, (0, 0, dilation, 0))[:, :T]
    f = x @ W_f[0] + x_past @ W_f[1]
    g = x @ W_g[0] + x_past @ W_g[1]
    return torch.cat([x, torch.tanh(f) + torch.sigmoid(g)], dim=-1)   # slip: + instead of ⊙


def b2_ca_anticausal(x, W_q, W_k, W_v):
    T = x.shape[1]
    q, k, v = x @ W_q, x @ W_k, x @ W_v
    s = q @ k.transpose(1, 2) / math.sqrt(k.size(-1))
    s = s.masked_fill(~causal_mask(T).T, float("-inf"))      # slip: mask transposed: sees itself and the future
    w = torch.softmax(s, dim=-1)
    return torch.cat([x, w @ v], dim=-1), w


def b2_ca_keys_from_query_weights(x, W_q, W_k, W_v):
    T = x.shape[1]
    q, k, v = x @ W_q, x @ W_q, x @ W_v                      # slip: W_q used for the keys too
    s = q @ k.transpose(1, 2) / math.sqrt(k.size(-1))
    s = s.masked_fill(~causal_mask(T), float("-inf"))
    w = torch.softmax(s, dim=-1)
    return torch.cat([x, w @ v], dim=-1), w


def b2_ca_sdpa_is_causal_weights_uniform(x, W_q, W_k, W_v):
    T = x.shape[1]
    q, k, v = x @ W_q, x @ W_k, x @ W_v
    read = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    w = causal_mask(T).float() / causal_mask(T).sum(-1, keepdim=True)   # slip: weights not the real ones
    return torch.cat([x, read], dim=-1), w.expand(x.shape[0], T, T)


def b2_ca_last_axis_masked_fill_neg_large(x, W_q, W_k, W_v):
    T = x.shape[1]
    q, k, v = x @ W_q, x @ W_k, x @ W_v
    s = q @ k.transpose(1, 2) / math.sqrt(k.size(-1))
    s = s.masked_fill(~causal_mask(T), -1e9)                  # right: a large negative number works too
    w = torch.softmax(s, dim=-1)
    return torch.cat([x, w @ v], dim=-1), w


def b2_ok_sa_wv_first(x, W_f, W_g, W_h, W_v):
    # W_v W_h applied before the mixing: linear maps commute with the weighted sum
    B, C, H, W = x.shape
    k = conv1x1(x, W_f).flatten(2).transpose(1, 2)
    q = conv1x1(x, W_g).flatten(2).transpose(1, 2)
    v = conv1x1(x, W_v @ W_h).flatten(2).transpose(1, 2)     # (B, N, C)
    w = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(W_f.shape[0]), dim=-1)
    return (w @ v).transpose(1, 2).reshape(B, C, H, W), w


SLIPS += [
    ("self_attention_2d", "b2: returns scores, not softmax weights", b2_sa_weights_are_scores),
    ("self_attention_2d", "b2: divides by d_key not sqrt", b2_sa_divide_by_d),
    ("self_attention_2d", "b2: softmax over the batch axis", b2_sa_attend_across_batch),
    ("self_attention_2d", "b2: reshape to (W,H) (square-only)", b2_sa_hw_swapped_in_reshape),
    ("self_attention_block", "b2: per-channel gamma broadcast on W", B2_SA_PerChannelGamma),
    ("self_attention_block", "b2: C̄ = C/2", B2_SA_HalfChannels),
    ("self_attention_block", "b2: gamma.item() (no gradient)", B2_SA_GammaDetached),
    ("patchify", "b2: strided patches (inside, which) split", b2_pt_strided),
    ("patchify", "b2: patches of the transposed image", b2_pt_transposed_image),
    ("patchify", "b2: (C,P,P) via permute", b2_pt_channels_slow),
    ("dense_block", "b2: dilation ignored (1)", b2_db_no_dilation),
    ("dense_block", "b2: slice [:, d:] keeps x itself as past", b2_db_wrong_slice),
    ("dense_block", "b2: gate uses W_f (W_g unused)", b2_db_gate_shared),
    ("dense_block", "b2: tanh + sigmoid (sum, not product)", b2_db_added),
    ("causal_attention_block", "b2: anti-causal (mask transposed)", b2_ca_anticausal),
    ("causal_attention_block", "b2: keys with W_q", b2_ca_keys_from_query_weights),
    ("causal_attention_block", "b2: sdpa read-out, fake uniform weights", b2_ca_sdpa_is_causal_weights_uniform),
]
CORRECT += [
    ("self_attention_2d", "b2: W_v W_h applied before mixing", b2_ok_sa_wv_first),
    ("causal_attention_block", "b2: masked_fill -1e9", b2_ca_last_axis_masked_fill_neg_large),
]
