"""Typical learner mistakes (SLIPS) and alternative right answers (CORRECT) for lesson 11,
11_attention_beyond_text.ipynb: self_attention_2d, self_attention_block, patchify, dense_block,
causal_attention_block.

Each answer has the signature of the reference solution:
  self_attention_2d(x, W_f, W_g, W_h, W_v) -> (o (B, C, H, W), weights (B, N, N))
  SelfAttention2d(channels) nn.Module; forward(x) -> x + gamma * o, keeps self.attn_weights
  patchify(images, patch_size) -> (B, N, P*P*C)
  dense_block(x, W_f, W_g, dilation) -> (B, T, d_in + filters)
  causal_attention_block(x, W_q, W_k, W_v) -> ((B, T, d_in + d_value), weights (B, T, T))
Every slip has exactly one thing wrong, marked `# slip:`.
"""
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from course_utils.masks import causal_mask
from course_utils.vision import conv1x1
from course_utils.vision import self_attention_2d as reference_self_attention_2d

# ----------------------------------------------------------------------------------------------
# Exercise 1: self_attention_2d
# ----------------------------------------------------------------------------------------------

def sa2d_softmax_over_queries(x, W_f, W_g, W_h, W_v):
    B, C, H, W = x.shape
    k = conv1x1(x, W_f).flatten(2).transpose(1, 2)
    q = conv1x1(x, W_g).flatten(2).transpose(1, 2)
    v = conv1x1(x, W_h).flatten(2).transpose(1, 2)
    scores = q @ k.transpose(1, 2) / math.sqrt(k.size(-1))
    weights = torch.softmax(scores, dim=1)  # slip: softmax over the queries (dim 1), not the keys
    read = (weights @ v).transpose(1, 2).reshape(B, -1, H, W)
    return conv1x1(read, W_v), weights


def sa2d_no_scaling(x, W_f, W_g, W_h, W_v):
    B, C, H, W = x.shape
    k = conv1x1(x, W_f).flatten(2).transpose(1, 2)
    q = conv1x1(x, W_g).flatten(2).transpose(1, 2)
    v = conv1x1(x, W_h).flatten(2).transpose(1, 2)
    scores = q @ k.transpose(1, 2)  # slip: no division by sqrt(C_bar) (the paper's unscaled form)
    weights = torch.softmax(scores, dim=-1)
    read = (weights @ v).transpose(1, 2).reshape(B, -1, H, W)
    return conv1x1(read, W_v), weights


def sa2d_scale_by_C(x, W_f, W_g, W_h, W_v):
    B, C, H, W = x.shape
    k = conv1x1(x, W_f).flatten(2).transpose(1, 2)
    q = conv1x1(x, W_g).flatten(2).transpose(1, 2)
    v = conv1x1(x, W_h).flatten(2).transpose(1, 2)
    scores = q @ k.transpose(1, 2) / math.sqrt(C)  # slip: scaled by sqrt of the input channels C, not C_bar
    weights = torch.softmax(scores, dim=-1)
    read = (weights @ v).transpose(1, 2).reshape(B, -1, H, W)
    return conv1x1(read, W_v), weights


def sa2d_divide_by_dkey(x, W_f, W_g, W_h, W_v):
    B, C, H, W = x.shape
    k = conv1x1(x, W_f).flatten(2).transpose(1, 2)
    q = conv1x1(x, W_g).flatten(2).transpose(1, 2)
    v = conv1x1(x, W_h).flatten(2).transpose(1, 2)
    scores = q @ k.transpose(1, 2) / k.size(-1)  # slip: divides by C_bar instead of sqrt(C_bar)
    weights = torch.softmax(scores, dim=-1)
    read = (weights @ v).transpose(1, 2).reshape(B, -1, H, W)
    return conv1x1(read, W_v), weights


def sa2d_reshape_without_transpose(x, W_f, W_g, W_h, W_v):
    B, C, H, W = x.shape
    k = conv1x1(x, W_f).flatten(2).transpose(1, 2)
    q = conv1x1(x, W_g).flatten(2).transpose(1, 2)
    v = conv1x1(x, W_h).flatten(2).transpose(1, 2)
    scores = q @ k.transpose(1, 2) / math.sqrt(k.size(-1))
    weights = torch.softmax(scores, dim=-1)
    read = (weights @ v).reshape(B, -1, H, W)  # slip: reshapes (B, N, C_bar) to (B, C_bar, H, W) without transposing first
    return conv1x1(read, W_v), weights


def sa2d_keys_queries_swapped(x, W_f, W_g, W_h, W_v):
    B, C, H, W = x.shape
    q = conv1x1(x, W_f).flatten(2).transpose(1, 2)  # slip: queries from W_f (the keys' matrix), keys from W_g
    k = conv1x1(x, W_g).flatten(2).transpose(1, 2)
    v = conv1x1(x, W_h).flatten(2).transpose(1, 2)
    scores = q @ k.transpose(1, 2) / math.sqrt(k.size(-1))
    weights = torch.softmax(scores, dim=-1)
    read = (weights @ v).transpose(1, 2).reshape(B, -1, H, W)
    return conv1x1(read, W_v), weights


def sa2d_mix_with_transposed_weights(x, W_f, W_g, W_h, W_v):
    B, C, H, W = x.shape
    k = conv1x1(x, W_f).flatten(2).transpose(1, 2)
    q = conv1x1(x, W_g).flatten(2).transpose(1, 2)
    v = conv1x1(x, W_h).flatten(2).transpose(1, 2)
    scores = q @ k.transpose(1, 2) / math.sqrt(k.size(-1))
    weights = torch.softmax(scores, dim=-1)
    read = (weights.transpose(1, 2) @ v).transpose(1, 2).reshape(B, -1, H, W)  # slip: mixes the values with alpha transposed (column j, not row j)
    return conv1x1(read, W_v), weights


def sa2d_no_output_conv(x, W_f, W_g, W_h, W_v):
    B, C, H, W = x.shape
    k = conv1x1(x, W_f).flatten(2).transpose(1, 2)
    q = conv1x1(x, W_g).flatten(2).transpose(1, 2)
    v = conv1x1(x, W_h).flatten(2).transpose(1, 2)
    scores = q @ k.transpose(1, 2) / math.sqrt(k.size(-1))
    weights = torch.softmax(scores, dim=-1)
    read = (weights @ v).transpose(1, 2).reshape(B, -1, H, W)
    return read, weights  # slip: forgets the output 1x1 convolution W_v (arXiv v1 form), returns C_bar channels


def sa2d_height_width_swapped(x, W_f, W_g, W_h, W_v):
    B, C, H, W = x.shape
    k = conv1x1(x, W_f).flatten(2).transpose(1, 2)
    q = conv1x1(x, W_g).flatten(2).transpose(1, 2)
    v = conv1x1(x, W_h).flatten(2).transpose(1, 2)
    scores = q @ k.transpose(1, 2) / math.sqrt(k.size(-1))
    weights = torch.softmax(scores, dim=-1)
    read = (weights @ v).transpose(1, 2).reshape(B, -1, W, H)  # slip: height and width swapped when putting the map back
    return conv1x1(read, W_v), weights


def sa2d_casts_to_float32(x, W_f, W_g, W_h, W_v):
    x, W_f, W_g, W_h, W_v = (t.float() for t in (x, W_f, W_g, W_h, W_v))  # slip: casts everything to float32 (float64 input comes back float32)
    B, C, H, W = x.shape
    k = conv1x1(x, W_f).flatten(2).transpose(1, 2)
    q = conv1x1(x, W_g).flatten(2).transpose(1, 2)
    v = conv1x1(x, W_h).flatten(2).transpose(1, 2)
    scores = q @ k.transpose(1, 2) / math.sqrt(k.size(-1))
    weights = torch.softmax(scores, dim=-1)
    read = (weights @ v).transpose(1, 2).reshape(B, -1, H, W)
    return conv1x1(read, W_v), weights


# right answers

def sa2d_einsum(x, W_f, W_g, W_h, W_v):
    B, C, H, W = x.shape
    xf = x.reshape(B, C, H * W)                               # (B, C, N)
    k = torch.einsum("kc,bcn->bkn", W_f, xf)
    q = torch.einsum("kc,bcn->bkn", W_g, xf)
    v = torch.einsum("kc,bcn->bkn", W_h, xf)
    scores = torch.einsum("bkj,bki->bji", q, k) / math.sqrt(W_f.shape[0])
    weights = scores.softmax(dim=2)
    read = torch.einsum("bji,bki->bkj", weights, v)           # (B, C_bar, N)
    o = torch.einsum("ok,bkn->bon", W_v, read)
    return o.reshape(B, -1, H, W), weights


def sa2d_output_map_first(x, W_f, W_g, W_h, W_v):
    """W_v is linear: fold it into the values (W_v W_h), then mix. Channels-last via permute."""
    B, C, H, W = x.shape
    pix = x.permute(0, 2, 3, 1).reshape(B, H * W, C)          # (B, N, C), row-major pixels
    q, k = pix @ W_g.T, pix @ W_f.T
    vo = pix @ (W_v @ W_h).T                                  # (B, N, C_out)
    weights = F.softmax(torch.bmm(q, k.transpose(1, 2)) * W_f.shape[0] ** -0.5, dim=-1)
    o = torch.bmm(weights, vo)                                # (B, N, C_out)
    return o.reshape(B, H, W, -1).permute(0, 3, 1, 2), weights


def sa2d_conv2d(x, W_f, W_g, W_h, W_v):
    B, C, H, W = x.shape
    f = F.conv2d(x, W_f[:, :, None, None]).flatten(2)        # (B, C_bar, N)
    g = F.conv2d(x, W_g[:, :, None, None]).flatten(2)
    h = F.conv2d(x, W_h[:, :, None, None]).flatten(2)
    scores = g.transpose(1, 2) @ f / math.sqrt(f.shape[1])    # (B, N, N)
    weights = torch.softmax(scores, dim=-1)
    read = h @ weights.transpose(1, 2)                        # (B, C_bar, N)
    o = F.conv2d(read.view(B, -1, H, W), W_v[:, :, None, None])
    return o, weights


# ----------------------------------------------------------------------------------------------
# Exercise 2: self_attention_block (SelfAttention2d)
# ----------------------------------------------------------------------------------------------

def _w(conv):
    return conv.weight[:, :, 0, 0]


class SABlockGammaOne(nn.Module):
    def __init__(self, channels):
        super().__init__()
        c_bar = max(channels // 8, 1)
        self.f = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.g = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.h = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.v = nn.Conv2d(c_bar, channels, kernel_size=1, bias=False)
        self.gamma = nn.Parameter(torch.ones(1))  # slip: gamma starts at 1, not 0 (the block is not the identity at init)

    def forward(self, x):
        o, weights = reference_self_attention_2d(x, _w(self.f), _w(self.g), _w(self.h), _w(self.v))
        self.attn_weights = weights.detach()
        return x + self.gamma * o


class SABlockNoResidual(nn.Module):
    def __init__(self, channels):
        super().__init__()
        c_bar = max(channels // 8, 1)
        self.f = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.g = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.h = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.v = nn.Conv2d(c_bar, channels, kernel_size=1, bias=False)
        self.gamma = nn.Parameter(torch.zeros(1))

    def forward(self, x):
        o, weights = reference_self_attention_2d(x, _w(self.f), _w(self.g), _w(self.h), _w(self.v))
        self.attn_weights = weights.detach()
        return self.gamma * o  # slip: forgets the residual: returns gamma*o instead of x + gamma*o


class SABlockNoGamma(nn.Module):
    def __init__(self, channels):
        super().__init__()
        c_bar = max(channels // 8, 1)
        self.f = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.g = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.h = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.v = nn.Conv2d(c_bar, channels, kernel_size=1, bias=False)
        self.gamma = nn.Parameter(torch.zeros(1))

    def forward(self, x):
        o, weights = reference_self_attention_2d(x, _w(self.f), _w(self.g), _w(self.h), _w(self.v))
        self.attn_weights = weights.detach()
        return x + o  # slip: gamma defined but never used: returns x + o


class SABlockGammaNotParameter(nn.Module):
    def __init__(self, channels):
        super().__init__()
        c_bar = max(channels // 8, 1)
        self.f = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.g = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.h = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.v = nn.Conv2d(c_bar, channels, kernel_size=1, bias=False)
        self.gamma = torch.zeros(1)  # slip: gamma is a plain tensor, not an nn.Parameter: never learned, not in parameters()

    def forward(self, x):
        o, weights = reference_self_attention_2d(x, _w(self.f), _w(self.g), _w(self.h), _w(self.v))
        self.attn_weights = weights.detach()
        return x + self.gamma * o


class SABlockKeysQueriesSwapped(nn.Module):
    def __init__(self, channels):
        super().__init__()
        c_bar = max(channels // 8, 1)
        self.f = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.g = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.h = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.v = nn.Conv2d(c_bar, channels, kernel_size=1, bias=False)
        self.gamma = nn.Parameter(torch.zeros(1))

    def forward(self, x):
        o, weights = reference_self_attention_2d(x, _w(self.g), _w(self.f), _w(self.h), _w(self.v))  # slip: passes g (queries) as W_f and f (keys) as W_g
        self.attn_weights = weights.detach()
        return x + self.gamma * o


class SABlockWithBias(nn.Module):
    def __init__(self, channels):
        super().__init__()
        c_bar = max(channels // 8, 1)
        self.f = nn.Conv2d(channels, c_bar, kernel_size=1)  # slip: all four convolutions keep the default bias=True (unused, extra parameters)
        self.g = nn.Conv2d(channels, c_bar, kernel_size=1)
        self.h = nn.Conv2d(channels, c_bar, kernel_size=1)
        self.v = nn.Conv2d(c_bar, channels, kernel_size=1)
        self.gamma = nn.Parameter(torch.zeros(1))

    def forward(self, x):
        o, weights = reference_self_attention_2d(x, _w(self.f), _w(self.g), _w(self.h), _w(self.v))
        self.attn_weights = weights.detach()
        return x + self.gamma * o


class SABlockValuesHalf(nn.Module):
    def __init__(self, channels):
        super().__init__()
        c_bar = max(channels // 8, 1)
        self.f = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.g = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.h = nn.Conv2d(channels, channels // 2, kernel_size=1, bias=False)  # slip: values get C/2 channels (authors' code), not C/8
        self.v = nn.Conv2d(channels // 2, channels, kernel_size=1, bias=False)
        self.gamma = nn.Parameter(torch.zeros(1))

    def forward(self, x):
        o, weights = reference_self_attention_2d(x, _w(self.f), _w(self.g), _w(self.h), _w(self.v))
        self.attn_weights = weights.detach()
        return x + self.gamma * o


class SABlockSqueeze(nn.Module):
    def __init__(self, channels):
        super().__init__()
        c_bar = max(channels // 8, 1)
        self.f = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.g = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.h = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.v = nn.Conv2d(c_bar, channels, kernel_size=1, bias=False)
        self.gamma = nn.Parameter(torch.zeros(1))

    def forward(self, x):
        o, weights = reference_self_attention_2d(x, self.f.weight.squeeze(), self.g.weight.squeeze(),  # slip: .squeeze() drops the C_bar axis too when C_bar = 1 (channels < 16)
                                                 self.h.weight.squeeze(), self.v.weight.squeeze())
        self.attn_weights = weights.detach()
        return x + self.gamma * o


class SABlockNoMinOne(nn.Module):
    def __init__(self, channels):
        super().__init__()
        c_bar = channels // 8  # slip: no max(., 1): 0 channels (NaN output) for channels < 8
        self.f = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.g = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.h = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.v = nn.Conv2d(c_bar, channels, kernel_size=1, bias=False)
        self.gamma = nn.Parameter(torch.zeros(1))

    def forward(self, x):
        o, weights = reference_self_attention_2d(x, _w(self.f), _w(self.g), _w(self.h), _w(self.v))
        self.attn_weights = weights.detach()
        return x + self.gamma * o


class SABlockNoAttnWeights(nn.Module):
    def __init__(self, channels):
        super().__init__()
        c_bar = max(channels // 8, 1)
        self.f = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.g = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.h = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.v = nn.Conv2d(c_bar, channels, kernel_size=1, bias=False)
        self.gamma = nn.Parameter(torch.zeros(1))

    def forward(self, x):
        o, weights = reference_self_attention_2d(x, _w(self.f), _w(self.g), _w(self.h), _w(self.v))  # slip: never stores the weights on self.attn_weights
        return x + self.gamma * o


# right answers

class SABlockFlatWeights(nn.Module):
    def __init__(self, channels):
        super().__init__()
        c_bar = max(1, channels // 8)
        conv = lambda c_in, c_out: nn.Conv2d(c_in, c_out, 1, bias=False)
        self.f, self.g, self.h = conv(channels, c_bar), conv(channels, c_bar), conv(channels, c_bar)
        self.v = conv(c_bar, channels)
        self.register_parameter("gamma", nn.Parameter(torch.tensor([0.0])))
        self.attn_weights = None

    def forward(self, x):
        mats = [m.weight.flatten(1) for m in (self.f, self.g, self.h, self.v)]   # (out, in)
        o, self.attn_weights = reference_self_attention_2d(x, *mats)
        self.attn_weights = self.attn_weights.detach()
        return torch.addcmul(x, self.gamma, o)


class SABlockReshapeWeights(nn.Module):
    def __init__(self, channels):
        super().__init__()
        c_bar = channels // 8 if channels >= 8 else 1
        self.f = nn.Conv2d(channels, c_bar, (1, 1), bias=False)
        self.g = nn.Conv2d(channels, c_bar, (1, 1), bias=False)
        self.h = nn.Conv2d(channels, c_bar, (1, 1), bias=False)
        self.v = nn.Conv2d(c_bar, channels, (1, 1), bias=False)
        self.gamma = nn.Parameter(torch.zeros(1))

    def forward(self, x):
        W = {name: getattr(self, name).weight.view(getattr(self, name).out_channels, -1) for name in "fghv"}
        o, weights = reference_self_attention_2d(x, W["f"], W["g"], W["h"], W["v"])
        self.attn_weights = weights.detach()
        return o * self.gamma + x


# ----------------------------------------------------------------------------------------------
# Exercise 3: patchify
# ----------------------------------------------------------------------------------------------

def patchify_cpp_order(images, patch_size):
    B, C, H, W = images.shape
    P = patch_size
    x = images.reshape(B, C, H // P, P, W // P, P)
    x = x.permute(0, 2, 4, 1, 3, 5)  # slip: each patch flattened in (C, P, P) order, not (P, P, C)
    return x.reshape(B, (H // P) * (W // P), P * P * C)


def patchify_unfold(images, patch_size):
    P = patch_size
    return F.unfold(images, kernel_size=P, stride=P).transpose(1, 2)  # slip: F.unfold gives (C, P, P) order inside each patch


def patchify_plain_reshape(images, patch_size):
    B, C, H, W = images.shape
    P = patch_size
    return images.reshape(B, (H // P) * (W // P), P * P * C)  # slip: a single reshape, no permute: rows of pixels, not P x P patches


def patchify_column_major_patches(images, patch_size):
    B, C, H, W = images.shape
    P = patch_size
    x = images.reshape(B, C, H // P, P, W // P, P)
    x = x.permute(0, 4, 2, 3, 5, 1)  # slip: patches numbered column by column (patch-column first), not row-major
    return x.reshape(B, (H // P) * (W // P), P * P * C)


def patchify_pixels_column_major(images, patch_size):
    B, C, H, W = images.shape
    P = patch_size
    x = images.reshape(B, C, H // P, P, W // P, P)
    x = x.permute(0, 2, 4, 5, 3, 1)  # slip: pixels inside a patch read column by column (j, i, C), not row by row
    return x.reshape(B, (H // P) * (W // P), P * P * C)


def patchify_split_axes_wrong(images, patch_size):
    B, C, H, W = images.shape
    P = patch_size
    x = images.reshape(B, C, P, H // P, P, W // P)  # slip: splits H into (P, H/P) instead of (H/P, P): strided pixels, not a square patch
    x = x.permute(0, 3, 5, 2, 4, 1)
    return x.reshape(B, (H // P) * (W // P), P * P * C)


def patchify_tensor_unfold_no_permute(images, patch_size):
    B, C, H, W = images.shape
    P = patch_size
    x = images.unfold(2, P, P).unfold(3, P, P)  # (B, C, H/P, W/P, P, P)
    return x.reshape(B, (H // P) * (W // P), P * P * C)  # slip: reshapes without moving C: mixes channels with patch positions


def patchify_loop_float32(images, patch_size):
    B, C, H, W = images.shape
    P = patch_size
    nh, nw = H // P, W // P
    out = torch.zeros(B, nh * nw, P * P * C)  # slip: new tensor with the default dtype (float32) and device, not images'
    for r in range(nh):
        for c in range(nw):
            patch = images[:, :, r * P:(r + 1) * P, c * P:(c + 1) * P]      # (B, C, P, P)
            out[:, r * nw + c] = patch.permute(0, 2, 3, 1).reshape(B, -1)
    return out


def patchify_via_numpy(images, patch_size):
    B, C, H, W = images.shape
    P = patch_size
    a = images.detach().cpu().numpy()  # slip: goes through numpy: gradients are cut (and dtype/device handled outside torch)
    a = a.reshape(B, C, H // P, P, W // P, P).transpose(0, 2, 4, 3, 5, 1)
    return torch.from_numpy(np.ascontiguousarray(a).reshape(B, (H // P) * (W // P), P * P * C))


def patchify_channels_last_assumed(images, patch_size):
    B, C, H, W = images.shape
    P = patch_size
    x = images.reshape(B, H // P, P, W // P, P, C)  # slip: treats the images as channels-last (B, H, W, C)
    x = x.permute(0, 1, 3, 2, 4, 5)
    return x.reshape(B, (H // P) * (W // P), P * P * C)


# right answers

def patchify_tensor_unfold(images, patch_size):
    B, C, H, W = images.shape
    P = patch_size
    x = images.unfold(2, P, P).unfold(3, P, P)                 # (B, C, H/P, W/P, P, P)
    x = x.permute(0, 2, 3, 4, 5, 1)                            # (B, H/P, W/P, P, P, C)
    return x.reshape(B, -1, P * P * C)


def patchify_channels_last_first(images, patch_size):
    B, C, H, W = images.shape
    P = patch_size
    x = images.permute(0, 2, 3, 1)                             # (B, H, W, C)
    x = x.reshape(B, H // P, P, W // P, P, C).transpose(2, 3)  # (B, H/P, W/P, P, P, C)
    return x.flatten(3).flatten(1, 2)


def patchify_loop(images, patch_size):
    B, C, H, W = images.shape
    P = patch_size
    patches = []
    for r in range(H // P):
        for c in range(W // P):
            patch = images[:, :, r * P:(r + 1) * P, c * P:(c + 1) * P]      # (B, C, P, P)
            patches.append(patch.permute(0, 2, 3, 1).reshape(B, P * P * C))
    return torch.stack(patches, dim=1)


# ----------------------------------------------------------------------------------------------
# Exercise 4: dense_block
# ----------------------------------------------------------------------------------------------

def dense_pad_right(x, W_f, W_g, dilation):
    B, T, d_in = x.shape
    x_past = F.pad(x, (0, 0, 0, dilation))[:, dilation:]  # slip: pads on the right: x_{t+d} (the future), not x_{t-d}
    filter_ = x @ W_f[0] + x_past @ W_f[1]
    gate = x @ W_g[0] + x_past @ W_g[1]
    return torch.cat([x, torch.tanh(filter_) * torch.sigmoid(gate)], dim=-1)


def dense_keeps_wrong_end(x, W_f, W_g, dilation):
    B, T, d_in = x.shape
    x_past = F.pad(x, (0, 0, dilation, 0))[:, dilation:]  # slip: keeps the last T steps of the padded sequence: no delay at all (x_past == x)
    filter_ = x @ W_f[0] + x_past @ W_f[1]
    gate = x @ W_g[0] + x_past @ W_g[1]
    return torch.cat([x, torch.tanh(filter_) * torch.sigmoid(gate)], dim=-1)


def dense_roll(x, W_f, W_g, dilation):
    B, T, d_in = x.shape
    x_past = torch.roll(x, shifts=dilation, dims=1)  # slip: torch.roll wraps the last steps round to the start instead of zeros
    filter_ = x @ W_f[0] + x_past @ W_f[1]
    gate = x @ W_g[0] + x_past @ W_g[1]
    return torch.cat([x, torch.tanh(filter_) * torch.sigmoid(gate)], dim=-1)


def dense_ignores_dilation(x, W_f, W_g, dilation):
    B, T, d_in = x.shape
    x_past = F.pad(x, (0, 0, 1, 0))[:, :T]  # slip: always delays by 1 step, whatever the dilation
    filter_ = x @ W_f[0] + x_past @ W_f[1]
    gate = x @ W_g[0] + x_past @ W_g[1]
    return torch.cat([x, torch.tanh(filter_) * torch.sigmoid(gate)], dim=-1)


def dense_taps_swapped(x, W_f, W_g, dilation):
    B, T, d_in = x.shape
    x_past = F.pad(x, (0, 0, dilation, 0))[:, :T]
    filter_ = x @ W_f[1] + x_past @ W_f[0]  # slip: W[1] applied to the present and W[0] to the past (convolution-tap order)
    gate = x @ W_g[1] + x_past @ W_g[0]
    return torch.cat([x, torch.tanh(filter_) * torch.sigmoid(gate)], dim=-1)


def dense_tanh_sigmoid_swapped(x, W_f, W_g, dilation):
    B, T, d_in = x.shape
    x_past = F.pad(x, (0, 0, dilation, 0))[:, :T]
    filter_ = x @ W_f[0] + x_past @ W_f[1]
    gate = x @ W_g[0] + x_past @ W_g[1]
    return torch.cat([x, torch.sigmoid(filter_) * torch.tanh(gate)], dim=-1)  # slip: sigmoid on the filter and tanh on the gate


def dense_no_concat(x, W_f, W_g, dilation):
    B, T, d_in = x.shape
    x_past = F.pad(x, (0, 0, dilation, 0))[:, :T]
    filter_ = x @ W_f[0] + x_past @ W_f[1]
    gate = x @ W_g[0] + x_past @ W_g[1]
    return torch.tanh(filter_) * torch.sigmoid(gate)  # slip: returns only the new features, not [x, features]


def dense_concat_order(x, W_f, W_g, dilation):
    B, T, d_in = x.shape
    x_past = F.pad(x, (0, 0, dilation, 0))[:, :T]
    filter_ = x @ W_f[0] + x_past @ W_f[1]
    gate = x @ W_g[0] + x_past @ W_g[1]
    return torch.cat([torch.tanh(filter_) * torch.sigmoid(gate), x], dim=-1)  # slip: new features first, x second


def dense_pad_wrong_axis(x, W_f, W_g, dilation):
    B, T, d_in = x.shape
    x_past = F.pad(x, (dilation, 0))[:, :, :d_in]  # slip: F.pad's first pair pads the feature axis, not time: shifts the features
    filter_ = x @ W_f[0] + x_past @ W_f[1]
    gate = x @ W_g[0] + x_past @ W_g[1]
    return torch.cat([x, torch.tanh(filter_) * torch.sigmoid(gate)], dim=-1)


def dense_inplace_alias(x, W_f, W_g, dilation):
    B, T, d_in = x.shape
    x_past = x  # slip: an alias, not a copy: the in-place shift below overwrites the learner's input x
    x_past[:, dilation:] = x[:, :T - dilation].clone()
    x_past[:, :dilation] = 0
    filter_ = x @ W_f[0] + x_past @ W_f[1]
    gate = x @ W_g[0] + x_past @ W_g[1]
    return torch.cat([x, torch.tanh(filter_) * torch.sigmoid(gate)], dim=-1)


# right answers

def dense_zeros_like(x, W_f, W_g, dilation):
    T = x.shape[1]
    x_past = torch.zeros_like(x)
    if dilation < T:
        x_past[:, dilation:] = x[:, :T - dilation]
    pre = lambda W: x @ W[0] + x_past @ W[1]
    return torch.cat((x, pre(W_f).tanh() * pre(W_g).sigmoid()), dim=2)


def dense_conv1d(x, W_f, W_g, dilation):
    """A real dilated conv: tap 0 of the kernel meets x_{t-d}, tap 1 meets x_t."""
    filters = W_f.shape[-1]
    kernel = torch.cat([W_f, W_g], dim=-1).flip(0).permute(2, 1, 0)   # (2*filters, d_in, 2)
    xt = F.pad(x.transpose(1, 2), (dilation, 0))                      # (B, d_in, d + T)
    pre = F.conv1d(xt, kernel, dilation=dilation).transpose(1, 2)     # (B, T, 2*filters)
    return torch.cat([x, torch.tanh(pre[..., :filters]) * torch.sigmoid(pre[..., filters:])], dim=-1)


def dense_stacked_inputs(x, W_f, W_g, dilation):
    B, T, d_in = x.shape
    shift = min(dilation, T)
    x_past = torch.cat([x.new_zeros(B, shift, d_in), x[:, :T - shift]], dim=1)
    both = torch.cat([x, x_past], dim=-1)                              # (B, T, 2 d_in)
    f = both @ W_f.reshape(2 * d_in, -1)
    g = both @ W_g.reshape(2 * d_in, -1)
    return torch.cat([x, torch.tanh(f) * torch.sigmoid(g)], dim=-1)


# ----------------------------------------------------------------------------------------------
# Exercise 5: causal_attention_block
# ----------------------------------------------------------------------------------------------

def cab_mask_inverted(x, W_q, W_k, W_v):
    B, T, d_in = x.shape
    q, k, v = x @ W_q, x @ W_k, x @ W_v
    scores = q @ k.transpose(1, 2) / math.sqrt(k.size(-1))
    scores = scores.masked_fill(causal_mask(T), float("-inf"))  # slip: mask inverted: blanks the allowed (past) scores, keeps the future
    weights = torch.softmax(scores, dim=-1)
    return torch.cat([x, weights @ v], dim=-1), weights


def cab_mask_triu(x, W_q, W_k, W_v):
    B, T, d_in = x.shape
    q, k, v = x @ W_q, x @ W_k, x @ W_v
    scores = q @ k.transpose(1, 2) / math.sqrt(k.size(-1))
    allowed = torch.triu(torch.ones(T, T, dtype=torch.bool))  # slip: triu instead of tril: each step attends to itself and the future
    scores = scores.masked_fill(~allowed, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return torch.cat([x, weights @ v], dim=-1), weights


def cab_mask_strict(x, W_q, W_k, W_v):
    B, T, d_in = x.shape
    q, k, v = x @ W_q, x @ W_k, x @ W_v
    scores = q @ k.transpose(1, 2) / math.sqrt(k.size(-1))
    allowed = torch.tril(torch.ones(T, T, dtype=torch.bool), diagonal=-1)  # slip: mask off by one: the diagonal is masked too (step t cannot see itself)
    scores = scores.masked_fill(~allowed, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return torch.cat([x, weights @ v], dim=-1), weights


def cab_fill_zero(x, W_q, W_k, W_v):
    B, T, d_in = x.shape
    q, k, v = x @ W_q, x @ W_k, x @ W_v
    scores = q @ k.transpose(1, 2) / math.sqrt(k.size(-1))
    scores = scores.masked_fill(~causal_mask(T), 0.0)  # slip: masked scores set to 0 instead of -inf (future still gets weight)
    weights = torch.softmax(scores, dim=-1)
    return torch.cat([x, weights @ v], dim=-1), weights


def cab_mask_after_softmax(x, W_q, W_k, W_v):
    B, T, d_in = x.shape
    q, k, v = x @ W_q, x @ W_k, x @ W_v
    scores = q @ k.transpose(1, 2) / math.sqrt(k.size(-1))
    weights = torch.softmax(scores, dim=-1) * causal_mask(T)  # slip: mask applied after the softmax: rows no longer sum to 1
    return torch.cat([x, weights @ v], dim=-1), weights


def cab_no_scaling(x, W_q, W_k, W_v):
    B, T, d_in = x.shape
    q, k, v = x @ W_q, x @ W_k, x @ W_v
    scores = q @ k.transpose(1, 2)  # slip: no division by sqrt(d_key)
    scores = scores.masked_fill(~causal_mask(T), float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return torch.cat([x, weights @ v], dim=-1), weights


def cab_scale_by_dvalue(x, W_q, W_k, W_v):
    B, T, d_in = x.shape
    q, k, v = x @ W_q, x @ W_k, x @ W_v
    scores = q @ k.transpose(1, 2) / math.sqrt(v.size(-1))  # slip: scaled by sqrt(d_value) instead of sqrt(d_key)
    scores = scores.masked_fill(~causal_mask(T), float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return torch.cat([x, weights @ v], dim=-1), weights


def cab_softmax_over_queries(x, W_q, W_k, W_v):
    B, T, d_in = x.shape
    q, k, v = x @ W_q, x @ W_k, x @ W_v
    scores = q @ k.transpose(1, 2) / math.sqrt(k.size(-1))
    scores = scores.masked_fill(~causal_mask(T), float("-inf"))
    weights = torch.softmax(scores, dim=1)  # slip: softmax over the queries (dim 1), not the keys
    return torch.cat([x, weights @ v], dim=-1), weights


def cab_no_concat(x, W_q, W_k, W_v):
    B, T, d_in = x.shape
    q, k, v = x @ W_q, x @ W_k, x @ W_v
    scores = q @ k.transpose(1, 2) / math.sqrt(k.size(-1))
    scores = scores.masked_fill(~causal_mask(T), float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights  # slip: returns the read-out alone, not [x, read-out]


def cab_concat_order(x, W_q, W_k, W_v):
    B, T, d_in = x.shape
    q, k, v = x @ W_q, x @ W_k, x @ W_v
    scores = q @ k.transpose(1, 2) / math.sqrt(k.size(-1))
    scores = scores.masked_fill(~causal_mask(T), float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return torch.cat([weights @ v, x], dim=-1), weights  # slip: read-out first, x second


# right answers

def cab_additive_mask(x, W_q, W_k, W_v):
    T = x.shape[1]
    q, k, v = x @ W_q, x @ W_k, x @ W_v
    future = torch.full((T, T), float("-inf"), dtype=x.dtype, device=x.device).triu(1)   # -inf above the diagonal
    weights = F.softmax(torch.einsum("btd,bsd->bts", q, k) / W_q.shape[1] ** 0.5 + future, dim=-1)
    return torch.cat((x, torch.einsum("bts,bse->bte", weights, v)), dim=2), weights


def cab_loop(x, W_q, W_k, W_v):
    B, T, d_in = x.shape
    q, k, v = x @ W_q, x @ W_k, x @ W_v
    weights = x.new_zeros(B, T, T)
    reads = []
    for t in range(T):
        a = torch.softmax(q[:, t:t + 1] @ k[:, :t + 1].transpose(1, 2) / math.sqrt(q.shape[-1]), dim=-1)  # (B, 1, t+1)
        weights[:, t, :t + 1] = a[:, 0]
        reads.append(a @ v[:, :t + 1])                                                          # (B, 1, d_value)
    return torch.cat([x, torch.cat(reads, dim=1)], dim=-1), weights


def cab_tril_int(x, W_q, W_k, W_v):
    T = x.shape[1]
    q, k, v = torch.matmul(x, W_q), torch.matmul(x, W_k), torch.matmul(x, W_v)
    scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(W_k.shape[-1])
    tri = torch.tril(torch.ones(T, T, device=x.device))
    scores = scores.masked_fill(tri == 0, float("-inf"))
    weights = scores.softmax(-1)
    return torch.cat([x, torch.matmul(weights, v)], dim=-1), weights


# ----------------------------------------------------------------------------------------------

SLIPS = [
    ("self_attention_2d", "softmax taken over the queries (dim 1) instead of over the keys", sa2d_softmax_over_queries),
    ("self_attention_2d", "scores not divided by sqrt(C_bar)", sa2d_no_scaling),
    ("self_attention_2d", "scores divided by sqrt(C), the input channels, instead of sqrt(C_bar)", sa2d_scale_by_C),
    ("self_attention_2d", "scores divided by C_bar instead of its square root", sa2d_divide_by_dkey),
    ("self_attention_2d", "the (B, N, C_bar) read-out reshaped to (B, C_bar, H, W) without transposing first", sa2d_reshape_without_transpose),
    ("self_attention_2d", "keys and queries swapped: queries from W_f, keys from W_g", sa2d_keys_queries_swapped),
    ("self_attention_2d", "values mixed with the transposed attention matrix", sa2d_mix_with_transposed_weights),
    ("self_attention_2d", "output 1x1 convolution W_v forgotten: returns the C_bar-channel read-out", sa2d_no_output_conv),
    ("self_attention_2d", "height and width swapped when reshaping the read-out back to an image", sa2d_height_width_swapped),
    ("self_attention_2d", "casts inputs to float32, so float64 inputs give float32 outputs", sa2d_casts_to_float32),

    ("self_attention_block", "gamma initialised at 1 instead of 0", SABlockGammaOne),
    ("self_attention_block", "residual forgotten: returns gamma * o instead of x + gamma * o", SABlockNoResidual),
    ("self_attention_block", "gamma never used: returns x + o", SABlockNoGamma),
    ("self_attention_block", "gamma a plain tensor, not an nn.Parameter, so it is never learned", SABlockGammaNotParameter),
    ("self_attention_block", "the key and query convolutions passed in swapped order", SABlockKeysQueriesSwapped),
    ("self_attention_block", "the 1x1 convolutions keep the default bias", SABlockWithBias),
    ("self_attention_block", "values given C/2 channels (the authors' code) instead of C/8", SABlockValuesHalf),
    ("self_attention_block", "weight matrices taken with .squeeze(), which breaks when C_bar = 1", SABlockSqueeze),
    ("self_attention_block", "C_bar = channels // 8 with no floor at 1: zero channels for small inputs", SABlockNoMinOne),
    ("self_attention_block", "attention weights not kept on self.attn_weights", SABlockNoAttnWeights),

    ("patchify", "each patch flattened in (C, P, P) order instead of (P, P, C)", patchify_cpp_order),
    ("patchify", "F.unfold used as is, giving (C, P, P) order inside patches", patchify_unfold),
    ("patchify", "one reshape of the image with no permute", patchify_plain_reshape),
    ("patchify", "patches numbered column by column instead of row by row", patchify_column_major_patches),
    ("patchify", "pixels inside each patch read column by column", patchify_pixels_column_major),
    ("patchify", "height split as (P, H/P) instead of (H/P, P), giving strided pixel grids instead of patches", patchify_split_axes_wrong),
    ("patchify", "Tensor.unfold twice, then reshaped without moving the channel axis last", patchify_tensor_unfold_no_permute),
    ("patchify", "loop that fills a torch.zeros tensor of default dtype float32", patchify_loop_float32),
    ("patchify", "goes through numpy, which cuts the gradient", patchify_via_numpy),
    ("patchify", "images treated as channels-last (B, H, W, C)", patchify_channels_last_assumed),

    ("dense_block", "padded on the right, so the past input is the future x_{t+d}", dense_pad_right),
    ("dense_block", "after left padding keeps the last T steps, so there is no delay", dense_keeps_wrong_end),
    ("dense_block", "delay built with torch.roll, which wraps the end round to the start instead of zeros", dense_roll),
    ("dense_block", "delay always 1, dilation ignored", dense_ignores_dilation),
    ("dense_block", "W[0] and W[1] swapped: W[1] on the present, W[0] on the past", dense_taps_swapped),
    ("dense_block", "tanh and sigmoid swapped between filter and gate", dense_tanh_sigmoid_swapped),
    ("dense_block", "only the gated features returned, input not concatenated", dense_no_concat),
    ("dense_block", "concatenation in the wrong order: features first, then x", dense_concat_order),
    ("dense_block", "F.pad pads the feature axis instead of the time axis", dense_pad_wrong_axis),
    ("dense_block", "delayed sequence built by shifting x in place, which overwrites the input", dense_inplace_alias),

    ("causal_attention_block", "mask inverted: the allowed past is blanked out and the future kept", cab_mask_inverted),
    ("causal_attention_block", "mask built with triu: attends to itself and the future", cab_mask_triu),
    ("causal_attention_block", "mask off by one: diagonal masked as well", cab_mask_strict),
    ("causal_attention_block", "masked scores set to 0 instead of -inf", cab_fill_zero),
    ("causal_attention_block", "mask multiplied in after the softmax, no renormalisation", cab_mask_after_softmax),
    ("causal_attention_block", "scores not divided by sqrt(d_key)", cab_no_scaling),
    ("causal_attention_block", "scores divided by sqrt(d_value) instead of sqrt(d_key)", cab_scale_by_dvalue),
    ("causal_attention_block", "softmax over the queries (dim 1) instead of the keys", cab_softmax_over_queries),
    ("causal_attention_block", "read-out returned without the input concatenated in front", cab_no_concat),
    ("causal_attention_block", "concatenation in the wrong order: read-out first, then x", cab_concat_order),
]

CORRECT = [
    ("self_attention_2d", "einsum throughout on the flattened map", sa2d_einsum),
    ("self_attention_2d", "channels-last pixels, W_v folded into the values before mixing (linearity)", sa2d_output_map_first),
    ("self_attention_2d", "F.conv2d with 1x1 kernels, attention written channel-first", sa2d_conv2d),

    ("self_attention_block", "weights flattened with .flatten(1), output via torch.addcmul", SABlockFlatWeights),
    ("self_attention_block", "weights via .view(out_channels, -1), o * gamma + x", SABlockReshapeWeights),

    ("patchify", "Tensor.unfold on both spatial axes, then permute channels last", patchify_tensor_unfold),
    ("patchify", "channels-last permute first, then reshape and swap the in-patch row with the patch column", patchify_channels_last_first),
    ("patchify", "double loop over patches, torch.stack", patchify_loop),

    ("dense_block", "zeros_like and slice assignment for the delay", dense_zeros_like),
    ("dense_block", "one F.conv1d with dilation on a left-padded sequence, kernel built from the flipped W", dense_conv1d),
    ("dense_block", "present and past stacked on the feature axis, times the stacked (2 d_in, filters) weight", dense_stacked_inputs),

    ("causal_attention_block", "additive -inf upper-triangular mask, einsum", cab_additive_mask),
    ("causal_attention_block", "loop over query steps, each attending to steps <= t", cab_loop),
    ("causal_attention_block", "tril of ones, masked_fill where == 0", cab_tril_int),
]
