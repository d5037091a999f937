import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from course_utils.masks import causal_mask
from course_utils.vision import conv1x1
from course_utils.vision import self_attention_2d as reference_self_attention_2d


# ---------------- self_attention_2d ----------------
def sa_softmax_queries(x, W_f, W_g, W_h, W_v):
    B, C, H, W = x.shape
    k = conv1x1(x, W_f).flatten(2).transpose(1, 2)
    q = conv1x1(x, W_g).flatten(2).transpose(1, 2)
    v = conv1x1(x, W_h).flatten(2).transpose(1, 2)
    scores = q @ k.transpose(1, 2) / math.sqrt(k.size(-1))
    weights = torch.softmax(scores, dim=1)                        # slip: over the queries
    read = (weights @ v).transpose(1, 2).reshape(B, -1, H, W)
    return conv1x1(read, W_v), weights


def sa_scale_C(x, W_f, W_g, W_h, W_v):
    B, C, H, W = x.shape
    k = conv1x1(x, W_f).flatten(2).transpose(1, 2)
    q = conv1x1(x, W_g).flatten(2).transpose(1, 2)
    v = conv1x1(x, W_h).flatten(2).transpose(1, 2)
    scores = q @ k.transpose(1, 2) / math.sqrt(C)                 # slip: sqrt(C) not sqrt(C̄)
    weights = torch.softmax(scores, dim=-1)
    read = (weights @ v).transpose(1, 2).reshape(B, -1, H, W)
    return conv1x1(read, W_v), weights


def sa_no_transpose(x, W_f, W_g, W_h, W_v):
    B, C, H, W = x.shape
    k = conv1x1(x, W_f).flatten(2).transpose(1, 2)
    q = conv1x1(x, W_g).flatten(2).transpose(1, 2)
    v = conv1x1(x, W_h).flatten(2).transpose(1, 2)
    weights = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(k.size(-1)), dim=-1)
    read = (weights @ v).reshape(B, -1, H, W)                     # slip: no transpose before reshape
    return conv1x1(read, W_v), weights


def sa_u_values_from_Wf(x, W_f, W_g, W_h, W_v):
    B, C, H, W = x.shape
    k = conv1x1(x, W_f).flatten(2).transpose(1, 2)
    q = conv1x1(x, W_g).flatten(2).transpose(1, 2)
    v = conv1x1(x, W_f).flatten(2).transpose(1, 2)                # slip: copy-paste, W_f for values
    weights = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(k.size(-1)), dim=-1)
    read = (weights @ v).transpose(1, 2).reshape(B, -1, H, W)
    return conv1x1(read, W_v), weights


def sa_u_returns_read_not_o(x, W_f, W_g, W_h, W_v):
    B, C, H, W = x.shape
    k = conv1x1(x, W_f).flatten(2).transpose(1, 2)
    q = conv1x1(x, W_g).flatten(2).transpose(1, 2)
    v = conv1x1(x, W_h).flatten(2).transpose(1, 2)
    weights = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(k.size(-1)), dim=-1)
    read = (weights @ v).transpose(1, 2).reshape(B, -1, H, W)
    o = conv1x1(read, W_v)
    return o, weights.transpose(1, 2)                             # slip: weights returned as [b, i, j]


def sa_ok_einsum(x, W_f, W_g, W_h, W_v):
    B, C, H, W = x.shape
    f = conv1x1(x, W_f).flatten(2)                                # (B, C̄, N)
    g = conv1x1(x, W_g).flatten(2)
    h = conv1x1(x, W_h).flatten(2)
    s = torch.einsum("bcj,bci->bji", g, f) / f.size(1) ** 0.5
    a = s.softmax(-1)
    read = torch.einsum("bji,bci->bcj", a, h).unflatten(2, (H, W))
    return torch.einsum("oc,bchw->bohw", W_v, read), a


# ---------------- self_attention_block (class) ----------------
class BlockGammaOne(nn.Module):
    def __init__(self, channels):
        super().__init__()
        c_bar = max(channels // 8, 1)
        self.f = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.g = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.h = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.v = nn.Conv2d(c_bar, channels, kernel_size=1, bias=False)
        self.gamma = nn.Parameter(torch.ones(1))                  # slip: starts at 1

    def forward(self, x):
        o, w = reference_self_attention_2d(x, self.f.weight[:, :, 0, 0], self.g.weight[:, :, 0, 0],
                                           self.h.weight[:, :, 0, 0], self.v.weight[:, :, 0, 0])
        self.attn_weights = w.detach()
        return x + self.gamma * o


class BlockUGammaTensor(nn.Module):
    def __init__(self, channels):
        super().__init__()
        c_bar = max(channels // 8, 1)
        self.f = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.g = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.h = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.v = nn.Conv2d(c_bar, channels, kernel_size=1, bias=False)
        self.gamma = torch.zeros(1)                               # slip: plain tensor, never learned

    def forward(self, x):
        o, w = reference_self_attention_2d(x, self.f.weight[:, :, 0, 0], self.g.weight[:, :, 0, 0],
                                           self.h.weight[:, :, 0, 0], self.v.weight[:, :, 0, 0])
        self.attn_weights = w.detach()
        return x + self.gamma * o


class BlockUFGSwapped(nn.Module):
    def __init__(self, channels):
        super().__init__()
        c_bar = max(channels // 8, 1)
        self.f = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.g = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.h = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.v = nn.Conv2d(c_bar, channels, kernel_size=1, bias=False)
        self.gamma = nn.Parameter(torch.zeros(1))

    def forward(self, x):
        # slip: g passed where f goes (queries used as keys and vice versa)
        o, w = reference_self_attention_2d(x, self.g.weight[:, :, 0, 0], self.f.weight[:, :, 0, 0],
                                           self.h.weight[:, :, 0, 0], self.v.weight[:, :, 0, 0])
        self.attn_weights = w.detach()
        return x + self.gamma * o


class BlockOk(nn.Module):
    """right: weights via .squeeze, gamma as tensor([0.]), o * gamma + x."""
    def __init__(self, channels):
        super().__init__()
        cb = channels // 8
        self.f, self.g, self.h = (nn.Conv2d(channels, cb, 1, bias=False) for _ in range(3))
        self.v = nn.Conv2d(cb, channels, 1, bias=False)
        self.gamma = nn.Parameter(torch.tensor([0.0]))

    def forward(self, x):
        W = [m.weight.squeeze(-1).squeeze(-1) for m in (self.f, self.g, self.h, self.v)]
        o, self.attn_weights = reference_self_attention_2d(x, *W)
        return o * self.gamma + x


# ---------------- patchify ----------------
def patch_CPP(images, P):
    B, C, H, W = images.shape
    x = images.reshape(B, C, H // P, P, W // P, P).permute(0, 2, 4, 1, 3, 5)   # slip: (C, P, P)
    return x.reshape(B, (H // P) * (W // P), P * P * C)


def patch_plain_reshape(images, P):
    B, C, H, W = images.shape
    return images.reshape(B, (H // P) * (W // P), P * P * C)     # slip: one reshape


def patch_u_column_major(images, P):
    B, C, H, W = images.shape
    x = images.reshape(B, C, H // P, P, W // P, P).permute(0, 4, 2, 3, 5, 1)   # slip: patches column-major
    return x.reshape(B, (H // P) * (W // P), P * P * C)


def patch_u_ji_inside(images, P):
    B, C, H, W = images.shape
    x = images.reshape(B, C, H // P, P, W // P, P).permute(0, 2, 4, 5, 3, 1)   # slip: column inside patch first
    return x.reshape(B, (H // P) * (W // P), P * P * C)


def patch_ok_unfold(images, P):
    B, C, H, W = images.shape
    u = F.unfold(images, kernel_size=P, stride=P)                  # (B, C·P·P, N) in (C, P, P)
    return u.reshape(B, C, P, P, -1).permute(0, 4, 2, 3, 1).reshape(B, -1, P * P * C)


# ---------------- dense_block ----------------
def dense_right_pad(x, W_f, W_g, dilation):
    T = x.size(1)
    x_past = F.pad(x, (0, 0, 0, dilation))[:, dilation:]          # slip: padded on the right: the future
    f = x @ W_f[0] + x_past @ W_f[1]
    g = x @ W_g[0] + x_past @ W_g[1]
    return torch.cat([x, torch.tanh(f) * torch.sigmoid(g)], dim=-1)


def dense_shift_one(x, W_f, W_g, dilation):
    T = x.size(1)
    x_past = F.pad(x, (0, 0, 1, 0))[:, :T]                        # slip: dilation ignored, always 1
    f = x @ W_f[0] + x_past @ W_f[1]
    g = x @ W_g[0] + x_past @ W_g[1]
    return torch.cat([x, torch.tanh(f) * torch.sigmoid(g)], dim=-1)


def dense_taps_swapped(x, W_f, W_g, dilation):
    T = x.size(1)
    x_past = F.pad(x, (0, 0, dilation, 0))[:, :T]
    f = x_past @ W_f[0] + x @ W_f[1]                               # slip: taps swapped (conv1d-like)
    g = x_past @ W_g[0] + x @ W_g[1]
    return torch.cat([x, torch.tanh(f) * torch.sigmoid(g)], dim=-1)


def dense_u_sigmoid_tanh_swapped(x, W_f, W_g, dilation):
    T = x.size(1)
    x_past = F.pad(x, (0, 0, dilation, 0))[:, :T]
    f = x @ W_f[0] + x_past @ W_f[1]
    g = x @ W_g[0] + x_past @ W_g[1]
    return torch.cat([x, torch.sigmoid(f) * torch.tanh(g)], dim=-1)   # slip: sigmoid on filter, tanh on gate


def dense_u_pad_wrong_axis(x, W_f, W_g, dilation):
    T = x.size(1)
    x_past = F.pad(x, (dilation, 0))[..., :x.size(-1)]             # slip: F.pad on the feature axis
    f = x @ W_f[0] + x_past @ W_f[1]
    g = x @ W_g[0] + x_past @ W_g[1]
    return torch.cat([x, torch.tanh(f) * torch.sigmoid(g)], dim=-1)


def dense_ok_conv1d(x, W_f, W_g, dilation):
    xt = F.pad(x.transpose(1, 2), (dilation, 0))                   # (B, d_in, d + T)
    def conv(Wt):                                                  # tap 0 meets x_{t-d}, tap 1 meets x_t
        w = torch.stack([Wt[1], Wt[0]], dim=-1).permute(1, 0, 2)   # (filters, d_in, 2)
        return F.conv1d(xt, w, dilation=dilation).transpose(1, 2)
    return torch.cat([x, torch.tanh(conv(W_f)) * torch.sigmoid(conv(W_g))], dim=-1)


# ---------------- causal_attention_block ----------------
def cab_mask_not_negated(x, W_q, W_k, W_v):
    T = x.size(1)
    q, k, v = x @ W_q, x @ W_k, x @ W_v
    s = q @ k.transpose(1, 2) / math.sqrt(k.size(-1))
    s = s.masked_fill(causal_mask(T), float("-inf"))              # slip: mask not negated
    w = torch.softmax(s, dim=-1)
    return torch.cat([x, w @ v], dim=-1), w


def cab_scale_din(x, W_q, W_k, W_v):
    T = x.size(1)
    q, k, v = x @ W_q, x @ W_k, x @ W_v
    s = q @ k.transpose(1, 2) / math.sqrt(x.size(-1))             # slip: sqrt(d_in)
    s = s.masked_fill(~causal_mask(T), float("-inf"))
    w = torch.softmax(s, dim=-1)
    return torch.cat([x, w @ v], dim=-1), w


def cab_u_strict_mask(x, W_q, W_k, W_v):
    T = x.size(1)
    q, k, v = x @ W_q, x @ W_k, x @ W_v
    s = q @ k.transpose(1, 2) / math.sqrt(k.size(-1))
    allowed = torch.ones(T, T).tril(-1).bool()                     # slip: strictly below, no self
    s = s.masked_fill(~allowed, -1e9)                              # (finite fill: row 0 becomes uniform)
    w = torch.softmax(s, dim=-1)
    return torch.cat([x, w @ v], dim=-1), w


def cab_u_cat_order(x, W_q, W_k, W_v):
    T = x.size(1)
    q, k, v = x @ W_q, x @ W_k, x @ W_v
    s = (q @ k.transpose(1, 2) / math.sqrt(k.size(-1))).masked_fill(~causal_mask(T), float("-inf"))
    w = torch.softmax(s, dim=-1)
    return torch.cat([w @ v, x], dim=-1), w                        # slip: read-out first


def cab_ok_triu(x, W_q, W_k, W_v):
    T = x.size(1)
    q = (x @ W_q) / W_q.size(1) ** 0.5
    s = q @ (x @ W_k).mT
    s[..., torch.triu(torch.ones(T, T, dtype=torch.bool), 1)] = -math.inf
    w = s.softmax(-1)
    return torch.cat((x, w @ (x @ W_v)), -1), w


SLIPS = [
    ("self_attention_2d", "softmax over the queries (dim=1)", sa_softmax_queries),
    ("self_attention_2d", "reshape without transpose", sa_no_transpose),
    ("self_attention_2d", "u: values projected with W_f (copy-paste)", sa_u_values_from_Wf),
    ("self_attention_2d", "u: weights returned transposed", sa_u_returns_read_not_o),
    ("self_attention_block", "gamma initialised at 1", BlockGammaOne),
    ("self_attention_block", "u: gamma a plain tensor, not a Parameter", BlockUGammaTensor),
    ("self_attention_block", "u: W_f and W_g passed swapped", BlockUFGSwapped),
    ("patchify", "(C, P, P) order inside a patch", patch_CPP),
    ("patchify", "single reshape", patch_plain_reshape),
    ("patchify", "u: patches column-major", patch_u_column_major),
    ("dense_block", "padded on the right (future)", dense_right_pad),
    ("dense_block", "taps swapped (W[0] on past)", dense_taps_swapped),
    ("dense_block", "u: sigmoid/tanh swapped", dense_u_sigmoid_tanh_swapped),
    ("causal_attention_block", "mask not negated", cab_mask_not_negated),
    ("causal_attention_block", "u: strict mask (no self), finite fill", cab_u_strict_mask),
    ("causal_attention_block", "u: read-out concatenated first", cab_u_cat_order),
    ("self_attention_block", "squeeze weights, tensor([0.]) gamma", BlockOk),  # right until the text asked for C̄ >= 1
]
CORRECT = [
    ("self_attention_2d", "einsum formulation", sa_ok_einsum),
    ("patchify", "F.unfold then permute", patch_ok_unfold),
    ("dense_block", "F.conv1d with dilation", dense_ok_conv1d),
    ("causal_attention_block", "triu boolean index, pre-scaled q", cab_ok_triu),
]
