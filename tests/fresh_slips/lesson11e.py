"""Lesson 11, independent catalogue: learner-style wrong answers (one slip each) and correct-but-unusual answers.

Written from the notebook text and the reference solution only. Descriptions starting "u: " are unusual slips.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from course_utils.masks import causal_mask
from course_utils.vision import conv1x1
from course_utils.vision import self_attention_2d as reference_self_attention_2d


# ================================================================ Exercise 1: self_attention_2d
def sa_u_channel_attention(x, W_f, W_g, W_h, W_v):
    B, C, height, width = x.shape
    k = conv1x1(x, W_f).flatten(2)                               # (B, C̄, N)
    q = conv1x1(x, W_g).flatten(2)                               # slip: pixels never put first: attention over channels
    v = conv1x1(x, W_h).flatten(2)
    scores = q @ k.transpose(1, 2) / math.sqrt(W_f.shape[0])     # (B, C̄, C̄)
    weights = torch.softmax(scores, dim=-1)
    read = (weights @ v).reshape(B, -1, height, width)
    return conv1x1(read, W_v), weights


def sa_u_scale_after_softmax(x, W_f, W_g, W_h, W_v):
    B, C, height, width = x.shape
    k = conv1x1(x, W_f).flatten(2).transpose(1, 2)
    q = conv1x1(x, W_g).flatten(2).transpose(1, 2)
    v = conv1x1(x, W_h).flatten(2).transpose(1, 2)
    scores = q @ k.transpose(1, 2)
    weights = torch.softmax(scores, dim=-1) / math.sqrt(k.size(-1))   # slip: scaled after the softmax
    read = (weights @ v).transpose(1, 2).reshape(B, -1, height, width)
    return conv1x1(read, W_v), weights


def sa_u_log_softmax(x, W_f, W_g, W_h, W_v):
    B, C, height, width = x.shape
    k = conv1x1(x, W_f).flatten(2).transpose(1, 2)
    q = conv1x1(x, W_g).flatten(2).transpose(1, 2)
    v = conv1x1(x, W_h).flatten(2).transpose(1, 2)
    scores = q @ k.transpose(1, 2) / math.sqrt(k.size(-1))
    weights = F.log_softmax(scores, dim=-1)                      # slip: log-probabilities, not probabilities
    read = (weights @ v).transpose(1, 2).reshape(B, -1, height, width)
    return conv1x1(read, W_v), weights


def sa_residual_inside(x, W_f, W_g, W_h, W_v):
    B, C, height, width = x.shape
    k = conv1x1(x, W_f).flatten(2).transpose(1, 2)
    q = conv1x1(x, W_g).flatten(2).transpose(1, 2)
    v = conv1x1(x, W_h).flatten(2).transpose(1, 2)
    weights = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(k.size(-1)), dim=-1)
    read = (weights @ v).transpose(1, 2).reshape(B, -1, height, width)
    return x + conv1x1(read, W_v), weights                       # slip: returns y = x + o, not o


def sa_u_max_wrong_axis(x, W_f, W_g, W_h, W_v):
    B, C, height, width = x.shape
    k = conv1x1(x, W_f).flatten(2).transpose(1, 2)
    q = conv1x1(x, W_g).flatten(2).transpose(1, 2)
    v = conv1x1(x, W_h).flatten(2).transpose(1, 2)
    scores = q @ k.transpose(1, 2) / math.sqrt(k.size(-1))
    scores = scores - scores.amax(dim=1, keepdim=True)          # slip: stabilising max over the queries, not the keys
    e = scores.exp()
    weights = e / e.sum(dim=-1, keepdim=True)
    read = (weights @ v).transpose(1, 2).reshape(B, -1, height, width)
    return conv1x1(read, W_v), weights


def sa_u_einsum_drops_batch(x, W_f, W_g, W_h, W_v):
    B, C, height, width = x.shape
    k = conv1x1(x, W_f).flatten(2).transpose(1, 2)
    q = conv1x1(x, W_g).flatten(2).transpose(1, 2)
    v = conv1x1(x, W_h).flatten(2).transpose(1, 2)
    scores = torch.einsum("bjc,bic->ji", q, k) / math.sqrt(k.size(-1))   # slip: b left out: summed over the batch
    weights = torch.softmax(scores, dim=-1)                      # (N, N), broadcast below
    read = (weights @ v).transpose(1, 2).reshape(B, -1, height, width)
    return conv1x1(read, W_v), weights


def sa_u_keys_from_Wg(x, W_f, W_g, W_h, W_v):
    B, C, height, width = x.shape
    k = conv1x1(x, W_g).flatten(2).transpose(1, 2)               # slip: copy-paste, W_g for the keys too
    q = conv1x1(x, W_g).flatten(2).transpose(1, 2)
    v = conv1x1(x, W_h).flatten(2).transpose(1, 2)
    weights = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(k.size(-1)), dim=-1)
    read = (weights @ v).transpose(1, 2).reshape(B, -1, height, width)
    return conv1x1(read, W_v), weights


def sa_no_softmax(x, W_f, W_g, W_h, W_v):
    B, C, height, width = x.shape
    k = conv1x1(x, W_f).flatten(2).transpose(1, 2)
    q = conv1x1(x, W_g).flatten(2).transpose(1, 2)
    v = conv1x1(x, W_h).flatten(2).transpose(1, 2)
    weights = q @ k.transpose(1, 2) / math.sqrt(k.size(-1))      # slip: no softmax: raw scaled scores used as weights
    read = (weights @ v).transpose(1, 2).reshape(B, -1, height, width)
    return conv1x1(read, W_v), weights


# --- correct, unusual
def sa_ok_batch_loop(x, W_f, W_g, W_h, W_v):
    """One image at a time with 2-D matrices, a hand-written stable softmax, torch.stack at the end."""
    B, C, height, width = x.shape
    outs, maps = [], []
    for b in range(B):
        X = x[b].reshape(C, height * width)                      # (C, N), pixels row-major
        f, g, h = W_f @ X, W_g @ X, W_h @ X                      # (C̄, N) each
        s = g.T @ f / math.sqrt(W_f.shape[0])                    # (N, N): s[j, i] = g_j · f_i / sqrt(C̄)
        e = torch.exp(s - s.max(dim=1, keepdim=True).values)
        a = e / e.sum(dim=1, keepdim=True)
        o = W_v @ (h @ a.T)                                      # (C, N): column j = W_v Σ_i a[j, i] h_i
        outs.append(o.reshape(-1, height, width))
        maps.append(a)
    return torch.stack(outs), torch.stack(maps)


def sa_ok_conv2d_bmm(x, W_f, W_g, W_h, W_v):
    """F.conv2d with 1×1 kernels, torch.bmm, and permute + contiguous + view back to the image."""
    B, C, height, width = x.shape
    k = F.conv2d(x, W_f[:, :, None, None]).flatten(2)            # (B, C̄, N)
    q = F.conv2d(x, W_g[:, :, None, None]).flatten(2).permute(0, 2, 1)   # (B, N, C̄)
    v = F.conv2d(x, W_h[:, :, None, None]).flatten(2)            # (B, C̄, N)
    weights = F.softmax(torch.bmm(q, k) * W_f.shape[0] ** -0.5, dim=2)
    read = torch.bmm(v, weights.permute(0, 2, 1))                # (B, C̄, N)
    read = read.contiguous().view(B, -1, height, width)
    return F.conv2d(read, W_v[:, :, None, None]), weights


# ================================================================ Exercise 2: self_attention_block (the class)
class BlockUSqueeze(nn.Module):
    def __init__(self, channels):
        super().__init__()
        c_bar = max(channels // 8, 1)
        self.f = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.g = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.h = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.v = nn.Conv2d(c_bar, channels, kernel_size=1, bias=False)
        self.gamma = nn.Parameter(torch.zeros(1))

    def forward(self, x):
        W_f, W_g, W_h, W_v = (m.weight.squeeze() for m in (self.f, self.g, self.h, self.v))   # slip: also drops the C̄ axis when C̄ = 1
        o, weights = reference_self_attention_2d(x, W_f, W_g, W_h, W_v)
        self.attn_weights = weights.detach()
        return x + self.gamma * o


class BlockUTanhGamma(nn.Module):
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
        return x + torch.tanh(self.gamma) * o                    # slip: a "bounded" tanh(γ), not γ


class BlockUNoGradAttention(nn.Module):
    def __init__(self, channels):
        super().__init__()
        c_bar = max(channels // 8, 1)
        self.f = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.g = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.h = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.v = nn.Conv2d(c_bar, channels, kernel_size=1, bias=False)
        self.gamma = nn.Parameter(torch.zeros(1))

    def forward(self, x):
        with torch.no_grad():                                    # slip: meant for the stored weights, cuts o's gradients too
            o, weights = reference_self_attention_2d(x, self.f.weight[:, :, 0, 0], self.g.weight[:, :, 0, 0],
                                                     self.h.weight[:, :, 0, 0], self.v.weight[:, :, 0, 0])
        self.attn_weights = weights
        return x + self.gamma * o


class BlockUSharedConv(nn.Module):
    def __init__(self, channels):
        super().__init__()
        c_bar = max(channels // 8, 1)
        self.f = self.g = self.h = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)   # slip: one conv shared by f, g, h
        self.v = nn.Conv2d(c_bar, channels, kernel_size=1, bias=False)
        self.gamma = nn.Parameter(torch.zeros(1))

    def forward(self, x):
        o, weights = reference_self_attention_2d(x, self.f.weight[:, :, 0, 0], self.g.weight[:, :, 0, 0],
                                                 self.h.weight[:, :, 0, 0], self.v.weight[:, :, 0, 0])
        self.attn_weights = weights.detach()
        return x + self.gamma * o


class BlockUIntegerGamma(nn.Module):
    def __init__(self, channels):
        super().__init__()
        c_bar = max(channels // 8, 1)
        self.f = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.g = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.h = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.v = nn.Conv2d(c_bar, channels, kernel_size=1, bias=False)
        self.gamma = nn.Parameter(torch.tensor([0]))             # slip: an integer tensor (0, not 0.)

    def forward(self, x):
        o, weights = reference_self_attention_2d(x, self.f.weight[:, :, 0, 0], self.g.weight[:, :, 0, 0],
                                                 self.h.weight[:, :, 0, 0], self.v.weight[:, :, 0, 0])
        self.attn_weights = weights.detach()
        return x + self.gamma * o


class BlockUFirstImageWeights(nn.Module):
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
        self.attn_weights = weights[0].detach()                  # slip: keeps the first image's map only (N, N)
        return x + self.gamma * o


class BlockUUnpackSwapped(nn.Module):
    def __init__(self, channels):
        super().__init__()
        c_bar = max(channels // 8, 1)
        self.f = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.g = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.h = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.v = nn.Conv2d(c_bar, channels, kernel_size=1, bias=False)
        self.gamma = nn.Parameter(torch.zeros(1))

    def forward(self, x):
        weights, o = reference_self_attention_2d(x, self.f.weight[:, :, 0, 0], self.g.weight[:, :, 0, 0],   # slip: unpacked as (weights, o)
                                                 self.h.weight[:, :, 0, 0], self.v.weight[:, :, 0, 0])
        self.attn_weights = weights.detach()
        return x + self.gamma * o


class BlockGammaOnX(nn.Module):
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
        return self.gamma * x + o                                # slip: γ scales the wrong term


# --- correct, unusual
class BlockOkSetattr(nn.Module):
    """right: convs made in a loop with setattr, γ via register_parameter, weights by flatten(1), o.mul(γ).add(x)."""
    def __init__(self, channels):
        super().__init__()
        c_bar = max(channels // 8, 1)
        for name in ("f", "g", "h"):
            setattr(self, name, nn.Conv2d(channels, c_bar, kernel_size=1, bias=False))
        self.v = nn.Conv2d(c_bar, channels, kernel_size=1, bias=False)
        self.register_parameter("gamma", nn.Parameter(torch.zeros(1)))

    def forward(self, x):
        o, weights = reference_self_attention_2d(x, *(m.weight.flatten(1) for m in (self.f, self.g, self.h, self.v)))
        self.attn_weights = weights.detach()
        return o.mul(self.gamma).add(x)


class BlockOkOwnSDPA(nn.Module):
    """right: no reference call; the convs applied as modules, F.scaled_dot_product_attention for the read-out."""
    def __init__(self, channels):
        super().__init__()
        c_bar = max(channels // 8, 1)
        self.f = nn.Conv2d(channels, c_bar, 1, bias=False)
        self.g = nn.Conv2d(channels, c_bar, 1, bias=False)
        self.h = nn.Conv2d(channels, c_bar, 1, bias=False)
        self.v = nn.Conv2d(c_bar, channels, 1, bias=False)
        self.gamma = nn.Parameter(torch.zeros(1))

    def forward(self, x):
        B, C, height, width = x.shape
        k, q, val = (m(x).flatten(2).mT for m in (self.f, self.g, self.h))   # (B, N, C̄)
        read = F.scaled_dot_product_attention(q, k, val)                    # (B, N, C̄)
        self.attn_weights = torch.softmax(q @ k.mT / math.sqrt(k.shape[-1]), dim=-1).detach()
        o = self.v(read.mT.unflatten(2, (height, width)))
        return torch.addcmul(x, self.gamma, o)


# ================================================================ Exercise 3: patchify
def patch_u_batch_channel_merged(images, patch_size):
    B, C, H, W = images.shape
    P = patch_size
    x = images.reshape(-1, H // P, P, W // P, P)                 # slip: B and C merged in one axis: right for B = 1 only
    x = x.permute(1, 3, 2, 4, 0)                                 # (H/P, W/P, P, P, B·C)
    return x.reshape(B, -1, P * P * C)


def patch_u_loop_off_by_one(images, patch_size):
    B, C, H, W = images.shape
    P = patch_size
    patches = []
    for r in range(0, H - P, P):                                 # slip: stops one patch early: last row of patches lost
        for c in range(0, W - P + 1, P):
            patches.append(images[:, :, r:r + P, c:c + P].permute(0, 2, 3, 1).reshape(B, -1))
    return torch.stack(patches, dim=1)


def patch_u_true_division(images, patch_size):
    B, C, H, W = images.shape
    P = patch_size
    x = images.reshape(B, C, H / P, P, W / P, P)                 # slip: true division gives floats: reshape raises
    x = x.permute(0, 2, 4, 3, 5, 1)
    return x.reshape(B, -1, P * P * C)


def patch_u_channels_last_by_reshape(images, patch_size):
    B, C, H, W = images.shape
    P = patch_size
    x = images.reshape(B, H, W, C)                               # slip: reshape, not permute: right only when C = 1
    x = x.reshape(B, H // P, P, W // P, P, C).permute(0, 1, 3, 2, 4, 5)
    return x.reshape(B, -1, P * P * C)


def patch_u_stack_dim0(images, patch_size):
    B, C, H, W = images.shape
    P = patch_size
    patches = [images[:, :, r:r + P, c:c + P].permute(0, 2, 3, 1).reshape(B, P * P * C)
               for r in range(0, H, P) for c in range(0, W, P)]
    return torch.stack(patches).reshape(B, -1, P * P * C)       # slip: (N, B, ·) reshaped to (B, N, ·), not transposed


def patch_features_first(images, patch_size):
    B, C, H, W = images.shape
    P = patch_size
    x = images.reshape(B, C, H // P, P, W // P, P).permute(0, 3, 5, 1, 2, 4)   # slip: features before patches: (B, P·P·C, N)
    return x.reshape(B, P * P * C, -1)


def patch_not_flattened(images, patch_size):
    B, C, H, W = images.shape
    P = patch_size
    x = images.reshape(B, C, H // P, P, W // P, P).permute(0, 2, 4, 3, 5, 1)
    return x.reshape(B, -1, P, P, C)                             # slip: patches not flattened: (B, N, P, P, C)


def patch_size_as_count(images, patch_size):
    B, C, H, W = images.shape
    P = patch_size
    x = images.reshape(B, C, P, H // P, P, W // P).permute(0, 2, 4, 3, 5, 1)   # slip: patch_size read as patches per side
    return x.reshape(B, P * P, -1)


# --- correct, unusual
def patch_ok_tensor_unfold(images, patch_size):
    """Tensor.unfold on H then on W: (B, C, H/P, W/P, P, P), then channels last."""
    B, C, H, W = images.shape
    P = patch_size
    x = images.unfold(2, P, P).unfold(3, P, P)                   # (B, C, H/P, W/P, P_i, P_j)
    return x.permute(0, 2, 3, 4, 5, 1).flatten(3).flatten(1, 2)


def patch_ok_pixel_unshuffle(images, patch_size):
    """F.pixel_unshuffle gives channel (c, i, j) at every patch position; reorder to (i, j, c)."""
    B, C, H, W = images.shape
    P = patch_size
    x = F.pixel_unshuffle(images, P)                             # (B, C·P·P, H/P, W/P)
    x = x.reshape(B, C, P, P, H // P, W // P).permute(0, 4, 5, 2, 3, 1)
    return x.reshape(B, -1, P * P * C)


def patch_ok_chunks(images, patch_size):
    """torch.chunk into strips then squares, each square channels-last, stacked on dim 1."""
    B, C, H, W = images.shape
    P = patch_size
    squares = [sq for strip in images.chunk(H // P, dim=2) for sq in strip.chunk(W // P, dim=3)]
    return torch.stack([sq.movedim(1, -1).reshape(B, -1) for sq in squares], dim=1)


# ================================================================ Exercise 4: dense_block
def dense_u_alias_inplace(x, W_f, W_g, dilation):
    B, T, d_in = x.shape
    x_past = x                                                   # slip: an alias, not a copy: the edits below overwrite x
    x_past[:, dilation:] = x[:, :max(T - dilation, 0)].clone()
    x_past[:, :dilation] = 0
    filter_ = x @ W_f[0] + x_past @ W_f[1]
    gate = x @ W_g[0] + x_past @ W_g[1]
    return torch.cat([x, torch.tanh(filter_) * torch.sigmoid(gate)], dim=-1)


def dense_u_gate_past_from_Wf(x, W_f, W_g, dilation):
    B, T, d_in = x.shape
    x_past = F.pad(x, (0, 0, dilation, 0))[:, :T]
    filter_ = x @ W_f[0] + x_past @ W_f[1]
    gate = x @ W_g[0] + x_past @ W_f[1]                          # slip: copy-paste, W_f[1] in the gate
    return torch.cat([x, torch.tanh(filter_) * torch.sigmoid(gate)], dim=-1)


def dense_u_roll_zero_off_by_one(x, W_f, W_g, dilation):
    B, T, d_in = x.shape
    x_past = torch.roll(x, shifts=dilation, dims=1)
    x_past[:, :dilation - 1] = 0                                 # slip: zeros d - 1 wrapped steps, not d
    filter_ = x @ W_f[0] + x_past @ W_f[1]
    gate = x @ W_g[0] + x_past @ W_g[1]
    return torch.cat([x, torch.tanh(filter_) * torch.sigmoid(gate)], dim=-1)


def dense_u_past_of_first_sequence(x, W_f, W_g, dilation):
    B, T, d_in = x.shape
    x_past = F.pad(x[0], (0, 0, dilation, 0))[:T]                # slip: x[0]'s past, broadcast to every sequence
    filter_ = x @ W_f[0] + x_past @ W_f[1]
    gate = x @ W_g[0] + x_past @ W_g[1]
    return torch.cat([x, torch.tanh(filter_) * torch.sigmoid(gate)], dim=-1)


def dense_u_glu(x, W_f, W_g, dilation):
    B, T, d_in = x.shape
    x_past = F.pad(x, (0, 0, dilation, 0))[:, :T]
    filter_ = x @ W_f[0] + x_past @ W_f[1]
    gate = x @ W_g[0] + x_past @ W_g[1]
    return torch.cat([x, F.glu(torch.cat([filter_, gate], dim=-1), dim=-1)], dim=-1)   # slip: GLU = filter ⊙ σ(gate), no tanh


def dense_u_zeros_default_dtype(x, W_f, W_g, dilation):
    B, T, d_in = x.shape
    x_past = torch.zeros(B, T, d_in)                             # slip: float32 on the CPU whatever x's dtype and device
    x_past[:, dilation:] = x[:, :max(T - dilation, 0)]
    filter_ = x @ W_f[0] + x_past @ W_f[1]
    gate = x @ W_g[0] + x_past @ W_g[1]
    return torch.cat([x, torch.tanh(filter_) * torch.sigmoid(gate)], dim=-1)


def dense_cat_time(x, W_f, W_g, dilation):
    B, T, d_in = x.shape
    x_past = F.pad(x, (0, 0, dilation, 0))[:, :T]
    filter_ = x @ W_f[0] + x_past @ W_f[1]
    gate = x @ W_g[0] + x_past @ W_g[1]
    return torch.cat([x, torch.tanh(filter_) * torch.sigmoid(gate)], dim=1)   # slip: appended along time


def dense_gate_no_sigmoid(x, W_f, W_g, dilation):
    B, T, d_in = x.shape
    x_past = F.pad(x, (0, 0, dilation, 0))[:, :T]
    filter_ = x @ W_f[0] + x_past @ W_f[1]
    gate = x @ W_g[0] + x_past @ W_g[1]
    return torch.cat([x, torch.tanh(filter_) * gate], dim=-1)   # slip: σ forgotten on the gate


def dense_no_past_tap(x, W_f, W_g, dilation):
    B, T, d_in = x.shape
    filter_ = x @ W_f[0]                                         # slip: past taps W[1] never used: a 1×1 convolution
    gate = x @ W_g[0]
    return torch.cat([x, torch.tanh(filter_) * torch.sigmoid(gate)], dim=-1)


# --- correct, unusual
def dense_ok_one_matmul(x, W_f, W_g, dilation):
    """[x_t, x_{t-d}] against the taps stacked on the input axis, filter and gate in one product, then chunk."""
    B, T, d_in = x.shape
    x_past = torch.cat([x.new_zeros(B, min(dilation, T), d_in), x[:, :max(T - dilation, 0)]], dim=1)
    both = torch.cat([x, x_past], dim=-1)                        # (B, T, 2·d_in)
    W = torch.cat([W_f.reshape(2 * d_in, -1), W_g.reshape(2 * d_in, -1)], dim=-1)   # (2·d_in, 2·filters)
    filter_, gate = (both @ W).chunk(2, dim=-1)
    return torch.cat([x, filter_.tanh() * gate.sigmoid()], dim=-1)


def dense_ok_time_loop(x, W_f, W_g, dilation):
    """One time step at a time, the past tap only where t - d >= 0."""
    B, T, d_in = x.shape
    new = []
    for t in range(T):
        f = x[:, t] @ W_f[0]
        g = x[:, t] @ W_g[0]
        if t - dilation >= 0:
            f = f + x[:, t - dilation] @ W_f[1]
            g = g + x[:, t - dilation] @ W_g[1]
        new.append(torch.tanh(f) * torch.sigmoid(g))
    return torch.cat([x, torch.stack(new, dim=1)], dim=-1)


# ================================================================ Exercise 5: causal_attention_block
def cab_u_tril_diag1(x, W_q, W_k, W_v):
    B, T, d_in = x.shape
    q, k, v = x @ W_q, x @ W_k, x @ W_v
    scores = q @ k.transpose(1, 2) / math.sqrt(k.size(-1))
    allowed = torch.tril(torch.ones(T, T), diagonal=1).bool()    # slip: diagonal=1: each step also sees the next
    scores = scores.masked_fill(~allowed, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return torch.cat([x, weights @ v], dim=-1), weights


def cab_softmax_queries(x, W_q, W_k, W_v):
    B, T, d_in = x.shape
    q, k, v = x @ W_q, x @ W_k, x @ W_v
    scores = q @ k.transpose(1, 2) / math.sqrt(k.size(-1))
    scores = scores.masked_fill(~causal_mask(T), float("-inf"))
    weights = torch.softmax(scores, dim=1)                       # slip: normalised over the queries
    return torch.cat([x, weights @ v], dim=-1), weights


def cab_u_returns_unmasked_weights(x, W_q, W_k, W_v):
    B, T, d_in = x.shape
    q, k, v = x @ W_q, x @ W_k, x @ W_v
    scores = q @ k.transpose(1, 2) / math.sqrt(k.size(-1))
    weights = torch.softmax(scores, dim=-1)
    masked = torch.softmax(scores.masked_fill(~causal_mask(T), float("-inf")), dim=-1)
    return torch.cat([x, masked @ v], dim=-1), weights           # slip: returns the unmasked weights (read-out right)


def cab_u_prescale_Wq_inplace(x, W_q, W_k, W_v):
    B, T, d_in = x.shape
    W_q /= math.sqrt(W_k.shape[1])                               # slip: scales the caller's W_q in place, again at every call
    q, k, v = x @ W_q, x @ W_k, x @ W_v
    scores = (q @ k.transpose(1, 2)).masked_fill(~causal_mask(T), float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return torch.cat([x, weights @ v], dim=-1), weights


def cab_u_scale_dvalue(x, W_q, W_k, W_v):
    B, T, d_in = x.shape
    q, k, v = x @ W_q, x @ W_k, x @ W_v
    scores = q @ k.transpose(1, 2) / math.sqrt(v.size(-1))      # slip: copy-paste, d_value for d_key
    scores = scores.masked_fill(~causal_mask(T), float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return torch.cat([x, weights @ v], dim=-1), weights


def cab_u_bool_mask_added(x, W_q, W_k, W_v):
    B, T, d_in = x.shape
    q, k, v = x @ W_q, x @ W_k, x @ W_v
    scores = q @ k.transpose(1, 2) / math.sqrt(k.size(-1))
    scores = scores + causal_mask(T)                             # slip: boolean mask added (+1 where allowed), nothing is -inf
    weights = torch.softmax(scores, dim=-1)
    return torch.cat([x, weights @ v], dim=-1), weights


def cab_u_cat_weights(x, W_q, W_k, W_v):
    B, T, d_in = x.shape
    q, k, v = x @ W_q, x @ W_k, x @ W_v
    scores = q @ k.transpose(1, 2) / math.sqrt(k.size(-1))
    scores = scores.masked_fill(~causal_mask(T), float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return torch.cat([x, weights], dim=-1), weights             # slip: appends the weights, not weights @ v


def cab_residual_add(x, W_q, W_k, W_v):
    B, T, d_in = x.shape
    q, k, v = x @ W_q, x @ W_k, x @ W_v
    scores = q @ k.transpose(1, 2) / math.sqrt(k.size(-1))
    scores = scores.masked_fill(~causal_mask(T), float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return x + weights @ v, weights                              # slip: residual sum, not concatenation


# --- correct, unusual
def cab_ok_log_mask(x, W_q, W_k, W_v):
    """additive mask = log of the 0/1 mask (0 where allowed, -inf elsewhere), k.mT, scale from W_k's shape."""
    T = x.shape[1]
    q, k, v = x @ W_q, x @ W_k, x @ W_v
    bias = causal_mask(T).to(x.dtype).log()
    weights = torch.softmax(q @ k.mT / math.sqrt(W_k.shape[-1]) + bias, dim=-1)
    return torch.cat([x, weights @ v], dim=-1), weights


def cab_ok_renormalised_exp(x, W_q, W_k, W_v):
    """exp of the scores minus the row's allowed max, times the 0/1 mask, divided by the row sum."""
    T = x.shape[1]
    q, k, v = x @ W_q, x @ W_k, x @ W_v
    allowed = causal_mask(T)
    s = torch.einsum("btk,bsk->bts", q, k) / k.shape[-1] ** 0.5
    row_max = s.masked_fill(~allowed, float("-inf")).amax(dim=-1, keepdim=True)
    e = torch.exp(s - row_max) * allowed
    weights = e / e.sum(dim=-1, keepdim=True)
    return torch.cat([x, torch.einsum("bts,bsv->btv", weights, v)], dim=-1), weights


def cab_ok_where(x, W_q, W_k, W_v):
    """torch.where with an arange comparison (s <= t) for the mask."""
    T = x.shape[1]
    q, k, v = x @ W_q, x @ W_k, x @ W_v
    t = torch.arange(T)
    allowed = t[None, :] <= t[:, None]                           # [t, s]: s <= t
    s = torch.where(allowed, torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(k.shape[-1]), float("-inf"))
    weights = s.softmax(dim=-1)
    return torch.cat((x, torch.matmul(weights, v)), dim=2), weights


SLIPS = [
    ("self_attention_2d", "u: no transpose after flatten: attention over the C̄ channels (B, C̄, C̄)", sa_u_channel_attention),
    ("self_attention_2d", "u: 1/sqrt(C̄) applied after the softmax (rows sum to 1/sqrt(C̄))", sa_u_scale_after_softmax),
    ("self_attention_2d", "u: F.log_softmax instead of softmax", sa_u_log_softmax),
    ("self_attention_2d", "returns x + o (the block's residual) instead of o", sa_residual_inside),
    ("self_attention_2d", "u: hand softmax whose stabilising max is over the queries (dim=1)", sa_u_max_wrong_axis),
    ("self_attention_2d", "u: einsum 'bjc,bic->ji' sums the scores over the batch", sa_u_einsum_drops_batch),
    ("self_attention_2d", "u: keys projected with W_g (copy-paste), W_f unused", sa_u_keys_from_Wg),
    ("self_attention_2d", "no softmax: scaled scores used as weights", sa_no_softmax),
    ("self_attention_block", "u: weight matrices by .squeeze(): breaks when C̄ = 1 (channels < 16)", BlockUSqueeze),
    ("self_attention_block", "u: tanh(γ) as the scale", BlockUTanhGamma),
    ("self_attention_block", "u: attention under torch.no_grad(): f, g, h, v get no gradient", BlockUNoGradAttention),
    ("self_attention_block", "u: self.f = self.g = self.h = one shared Conv2d", BlockUSharedConv),
    ("self_attention_block", "u: gamma = nn.Parameter(torch.tensor([0])): integer tensor, raises", BlockUIntegerGamma),
    ("self_attention_block", "u: attn_weights keeps weights[0] only (N, N)", BlockUFirstImageWeights),
    ("self_attention_block", "u: reference's result unpacked as (weights, o)", BlockUUnpackSwapped),
    ("self_attention_block", "γ on x: γ·x + o", BlockGammaOnX),
    ("patchify", "u: reshape(-1, H/P, P, W/P, P) merges B and C: right for B = 1 only", patch_u_batch_channel_merged),
    ("patchify", "u: loop range(0, H - P, P) drops the last row of patches", patch_u_loop_off_by_one),
    ("patchify", "u: H / P (true division) in reshape: raises", patch_u_true_division),
    ("patchify", "u: channels-last by reshape(B, H, W, C): right for C = 1 only", patch_u_channels_last_by_reshape),
    ("patchify", "u: patches stacked on dim 0, (N, B) reshaped to (B, N): right for B = 1 only", patch_u_stack_dim0),
    ("patchify", "returns (B, P·P·C, N): features before patches", patch_features_first),
    ("patchify", "patches not flattened: (B, N, P, P, C)", patch_not_flattened),
    ("patchify", "patch_size read as the number of patches per side", patch_size_as_count),
    ("dense_block", "u: x_past = x alias, edited in place (caller's x overwritten)", dense_u_alias_inplace),
    ("dense_block", "u: gate's past tap uses W_f[1] (copy-paste)", dense_u_gate_past_from_Wf),
    ("dense_block", "u: torch.roll then zeroes only the first d - 1 steps", dense_u_roll_zero_off_by_one),
    ("dense_block", "u: past built from x[0], broadcast over the batch", dense_u_past_of_first_sequence),
    ("dense_block", "u: F.glu(filter, gate): no tanh on the filter", dense_u_glu),
    ("dense_block", "u: torch.zeros(B, T, d_in) without dtype/device: fails for float64 (or GPU) x", dense_u_zeros_default_dtype),
    ("dense_block", "new features concatenated along time (dim=1)", dense_cat_time),
    ("dense_block", "σ forgotten on the gate", dense_gate_no_sigmoid),
    ("dense_block", "past taps never used (a 1×1 convolution)", dense_no_past_tap),
    ("causal_attention_block", "u: tril(diagonal=1): each step also sees the next", cab_u_tril_diag1),
    ("causal_attention_block", "softmax over the queries (dim=1)", cab_softmax_queries),
    ("causal_attention_block", "u: returns the unmasked softmax as weights (read-out right)", cab_u_returns_unmasked_weights),
    ("causal_attention_block", "u: W_q /= sqrt(d_key) in place: caller's W_q changed, wrong from the 2nd call", cab_u_prescale_Wq_inplace),
    ("causal_attention_block", "u: scaled by sqrt(d_value) (copy-paste)", cab_u_scale_dvalue),
    ("causal_attention_block", "u: boolean mask added to the scores (+1 allowed), nothing masked", cab_u_bool_mask_added),
    ("causal_attention_block", "u: concatenates the weights, not the read-out", cab_u_cat_weights),
    ("causal_attention_block", "x + read-out (residual) instead of concatenation", cab_residual_add),
]

CORRECT = [
    ("self_attention_2d", "loop over the batch, 2-D matrices, hand-written stable softmax", sa_ok_batch_loop),
    ("self_attention_2d", "F.conv2d 1×1 kernels, bmm, contiguous().view", sa_ok_conv2d_bmm),
    ("self_attention_block", "setattr loop, register_parameter, flatten(1), o.mul(γ).add(x)", BlockOkSetattr),
    ("self_attention_block", "convs as modules, F.scaled_dot_product_attention, addcmul", BlockOkOwnSDPA),
    ("patchify", "Tensor.unfold twice then channels last", patch_ok_tensor_unfold),
    ("patchify", "F.pixel_unshuffle then reorder (C, P, P) -> (P, P, C)", patch_ok_pixel_unshuffle),
    ("patchify", "torch.chunk into strips and squares, movedim, stack", patch_ok_chunks),
    ("dense_block", "[x, x_past] against stacked taps, filter and gate in one matmul + chunk", dense_ok_one_matmul),
    ("dense_block", "loop over time steps, past tap where t >= d", dense_ok_time_loop),
    ("causal_attention_block", "additive log(0/1 mask)", cab_ok_log_mask),
    ("causal_attention_block", "masked exp renormalised by the row sum (einsum)", cab_ok_renormalised_exp),
    ("causal_attention_block", "torch.where with arange comparison", cab_ok_where),
]
