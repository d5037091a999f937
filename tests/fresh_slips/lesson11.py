"""Learner-style wrong answers (and correct-but-unusual ones) for lesson 11, written from the notebook text only."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from course_utils.masks import causal_mask
from course_utils.vision import conv1x1
from course_utils.vision import self_attention_2d as ref_sa2d

SLIPS, CORRECT = [], []


def slip(exercise, name):
    def deco(fn):
        SLIPS.append((exercise, name, fn))
        return fn
    return deco


def correct(exercise, name):
    def deco(fn):
        CORRECT.append((exercise, name, fn))
        return fn
    return deco


# ---------------------------------------------------------------- Exercise 1: self_attention_2d
def _sa2d(x, W_f, W_g, W_h, W_v, scale=None, softmax_dim=-1, swap_qk=False, no_transpose_back=False,
          no_wv=False, return_scores=False, mix_transposed=False, colmajor=False):
    B, C, H, W = x.shape
    if colmajor:
        x = x.transpose(2, 3)
    k = conv1x1(x, W_f).flatten(2).transpose(1, 2)
    q = conv1x1(x, W_g).flatten(2).transpose(1, 2)
    v = conv1x1(x, W_h).flatten(2).transpose(1, 2)
    if swap_qk:
        q, k = k, q
    s = q @ k.transpose(1, 2) / (math.sqrt(k.size(-1)) if scale is None else scale(k, C))
    w = torch.softmax(s, dim=softmax_dim)
    mixed = (w.transpose(1, 2) if mix_transposed else w) @ v
    hh, ww = (W, H) if colmajor else (H, W)
    if no_transpose_back:
        read = mixed.reshape(B, -1, hh, ww)
    else:
        read = mixed.transpose(1, 2).reshape(B, -1, hh, ww)
    if colmajor:
        read = read.transpose(2, 3)
    o = read if no_wv else conv1x1(read, W_v)
    return o, (s if return_scores else w)


slip("self_attention_2d", "no 1/sqrt(C̄) scale")(lambda *a: _sa2d(*a, scale=lambda k, C: 1.0))
slip("self_attention_2d", "scaled by sqrt(C), not sqrt(C̄)")(lambda *a: _sa2d(*a, scale=lambda k, C: math.sqrt(C)))
slip("self_attention_2d", "softmax over the queries (dim=1)")(lambda *a: _sa2d(*a, softmax_dim=1))
slip("self_attention_2d", "W_f used for queries, W_g for keys (swapped)")(lambda *a: _sa2d(*a, swap_qk=True))
slip("self_attention_2d", "reshape (B,N,C̄)->(B,C̄,H,W) without transposing")(lambda *a: _sa2d(*a, no_transpose_back=True))
slip("self_attention_2d", "forgot W_v (returns C̄ channels)")(lambda *a: _sa2d(*a, no_wv=True))
slip("self_attention_2d", "returns the scores, not the weights")(lambda *a: _sa2d(*a, return_scores=True))
slip("self_attention_2d", "mixes values with weightsᵀ")(lambda *a: _sa2d(*a, mix_transposed=True))
slip("self_attention_2d", "pixels flattened column-major")(lambda *a: _sa2d(*a, colmajor=True))


@correct("self_attention_2d", "einsum throughout")
def sa2d_einsum(x, W_f, W_g, W_h, W_v):
    B, C, H, W = x.shape
    xf = x.flatten(2)                                    # (B, C, N)
    k = torch.einsum("oc,bcn->bno", W_f, xf)
    q = torch.einsum("oc,bcn->bno", W_g, xf)
    v = torch.einsum("oc,bcn->bno", W_h, xf)
    w = torch.einsum("bjc,bic->bji", q, k).div(W_f.shape[0] ** 0.5).softmax(-1)
    read = torch.einsum("bji,bic->bjc", w, v)            # (B, N, C̄)
    o = torch.einsum("oc,bnc->bon", W_v, read).reshape(B, C, H, W)
    return o, w


@correct("self_attention_2d", "F.scaled_dot_product_attention + permute")
def sa2d_sdpa(x, W_f, W_g, W_h, W_v):
    B, C, H, W = x.shape
    k = conv1x1(x, W_f).permute(0, 2, 3, 1).reshape(B, H * W, -1)
    q = conv1x1(x, W_g).permute(0, 2, 3, 1).reshape(B, H * W, -1)
    v = conv1x1(x, W_h).permute(0, 2, 3, 1).reshape(B, H * W, -1)
    w = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]), -1)
    read = F.scaled_dot_product_attention(q, k, v)
    read = read.reshape(B, H, W, -1).permute(0, 3, 1, 2)
    return conv1x1(read, W_v), w


@correct("self_attention_2d", "W_v applied before mixing (linear, commutes)")
def sa2d_wv_first(x, W_f, W_g, W_h, W_v):
    B, C, H, W = x.shape
    k = conv1x1(x, W_f).flatten(2).transpose(1, 2)
    q = conv1x1(x, W_g).flatten(2).transpose(1, 2)
    v = conv1x1(x, W_v @ W_h).flatten(2).transpose(1, 2)       # (B, N, C)
    w = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(k.size(-1)), dim=-1)
    return (w @ v).transpose(1, 2).reshape(B, C, H, W), w


# ---------------------------------------------------------------- Exercise 2: SelfAttention2d
class _Block(nn.Module):
    gamma_init = 0.0
    bias = False
    divisor = 8

    def __init__(self, channels):
        super().__init__()
        c_bar = max(channels // self.divisor, 1)
        self.f = nn.Conv2d(channels, c_bar, kernel_size=1, bias=self.bias)
        self.g = nn.Conv2d(channels, c_bar, kernel_size=1, bias=self.bias)
        self.h = nn.Conv2d(channels, c_bar, kernel_size=1, bias=self.bias)
        self.v = nn.Conv2d(c_bar, channels, kernel_size=1, bias=self.bias)
        self.gamma = nn.Parameter(torch.full((1,), self.gamma_init))

    def attend(self, x):
        return ref_sa2d(x, self.f.weight[:, :, 0, 0], self.g.weight[:, :, 0, 0],
                        self.h.weight[:, :, 0, 0], self.v.weight[:, :, 0, 0])

    def forward(self, x):
        o, w = self.attend(x)
        self.attn_weights = w.detach()
        return x + self.gamma * o


@slip("self_attention_block", "gamma initialised at 1")
class GammaOne(_Block):
    gamma_init = 1.0


@slip("self_attention_block", "gamma a plain tensor, not a Parameter")
class GammaTensor(_Block):
    def __init__(self, channels):
        super().__init__(channels)
        del self.gamma
        self.gamma = torch.zeros(1)


@slip("self_attention_block", "returns gamma * o (no residual)")
class NoResidual(_Block):
    def forward(self, x):
        o, w = self.attend(x)
        self.attn_weights = w.detach()
        return self.gamma * o


@slip("self_attention_block", "returns x + o (gamma forgotten)")
class NoGamma(_Block):
    def forward(self, x):
        o, w = self.attend(x)
        self.attn_weights = w.detach()
        return x + o


@slip("self_attention_block", "convolutions with bias")
class WithBias(_Block):
    bias = True


@slip("self_attention_block", "f and g swapped in the call")
class SwappedFG(_Block):
    def attend(self, x):
        return ref_sa2d(x, self.g.weight[:, :, 0, 0], self.f.weight[:, :, 0, 0],
                        self.h.weight[:, :, 0, 0], self.v.weight[:, :, 0, 0])


@slip("self_attention_block", "C̄ = C // 2")
class HalfC(_Block):
    divisor = 2


@slip("self_attention_block", "attn_weights never stored")
class NoWeights(_Block):
    def forward(self, x):
        o, w = self.attend(x)
        return x + self.gamma * o


@slip("self_attention_block", "v declared C->C̄ and its weight passed transposed")
class VTransposed(_Block):
    def __init__(self, channels):
        super().__init__(channels)
        c_bar = max(channels // 8, 1)
        self.v = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)

    def attend(self, x):
        return ref_sa2d(x, self.f.weight[:, :, 0, 0], self.g.weight[:, :, 0, 0],
                        self.h.weight[:, :, 0, 0], self.v.weight[:, :, 0, 0].T)


@slip("self_attention_block", "h (values) gets C channels, as in the arXiv v1")
class ValuesC(_Block):
    def __init__(self, channels):
        super().__init__(channels)
        self.h = nn.Conv2d(channels, channels, kernel_size=1, bias=False)
        self.v = nn.Conv2d(channels, channels, kernel_size=1, bias=False)


@correct("self_attention_block", "gamma = nn.Parameter(torch.tensor([0.]))")
class GammaList(_Block):
    def __init__(self, channels):
        super().__init__(channels)
        self.gamma = nn.Parameter(torch.tensor([0.0]))


@correct("self_attention_block", "own attention (no reference call), weights via .squeeze")
class OwnAttention(_Block):
    def attend(self, x):
        return sa2d_einsum(x, self.f.weight.squeeze(-1).squeeze(-1), self.g.weight.squeeze(-1).squeeze(-1),
                           self.h.weight.squeeze(-1).squeeze(-1), self.v.weight.squeeze(-1).squeeze(-1))


@slip("self_attention_block", "channels // 8 without max, gamma * o + x")   # right until the text asked for C̄ >= 1
class NoMax(_Block):
    def __init__(self, channels):
        super().__init__(channels)
        c_bar = channels // 8
        self.f = nn.Conv2d(channels, c_bar, 1, bias=False)
        self.g = nn.Conv2d(channels, c_bar, 1, bias=False)
        self.h = nn.Conv2d(channels, c_bar, 1, bias=False)
        self.v = nn.Conv2d(c_bar, channels, 1, bias=False)

    def forward(self, x):
        o, w = self.attend(x)
        self.attn_weights = w.detach()
        return self.gamma * o + x


# ---------------------------------------------------------------- Exercise 3: patchify
@slip("patchify", "F.unfold: features in (C, P, P) order")
def patch_unfold(images, patch_size):
    return F.unfold(images, patch_size, stride=patch_size).transpose(1, 2)


@slip("patchify", "patches in column-major order")
def patch_colmajor(images, P):
    B, C, H, W = images.shape
    x = images.reshape(B, C, H // P, P, W // P, P).permute(0, 4, 2, 3, 5, 1)
    return x.reshape(B, -1, P * P * C)


@slip("patchify", "one plain reshape")
def patch_reshape(images, P):
    B, C, H, W = images.shape
    return images.reshape(B, (H // P) * (W // P), P * P * C)


@slip("patchify", "pixels of a patch column by column (j, i)")
def patch_ji(images, P):
    B, C, H, W = images.shape
    x = images.reshape(B, C, H // P, P, W // P, P).permute(0, 2, 4, 5, 3, 1)
    return x.reshape(B, -1, P * P * C)


@slip("patchify", "channels-last then plain reshape")
def patch_cl_reshape(images, P):
    B, C, H, W = images.shape
    return images.permute(0, 2, 3, 1).reshape(B, (H // P) * (W // P), P * P * C)


@slip("patchify", "split as (P, H/P) instead of (H/P, P): strided patches")
def patch_strided(images, P):
    B, C, H, W = images.shape
    x = images.reshape(B, C, P, H // P, P, W // P).permute(0, 3, 5, 2, 4, 1)
    return x.reshape(B, -1, P * P * C)


@slip("patchify", "H // P used for both axes (square assumption)")
def patch_square(images, P):
    B, C, H, W = images.shape
    x = images.reshape(B, C, H // P, P, H // P, P).permute(0, 2, 4, 3, 5, 1)
    return x.reshape(B, -1, P * P * C)


@slip("patchify", "(P, P, C) order but channel first inside each pixel row: (i, C, j)")
def patch_icj(images, P):
    B, C, H, W = images.shape
    x = images.reshape(B, C, H // P, P, W // P, P).permute(0, 2, 4, 3, 1, 5)
    return x.reshape(B, -1, P * P * C)


@correct("patchify", "F.unfold then permute to (P, P, C)")
def patch_unfold_fixed(images, P):
    B, C, H, W = images.shape
    u = F.unfold(images, P, stride=P)                          # (B, C*P*P, N)
    return u.reshape(B, C, P, P, -1).permute(0, 4, 2, 3, 1).reshape(B, -1, P * P * C)


@correct("patchify", "python loops over patches")
def patch_loops(images, P):
    B, C, H, W = images.shape
    out = []
    for r in range(H // P):
        for c in range(W // P):
            out.append(images[:, :, r * P:(r + 1) * P, c * P:(c + 1) * P].permute(0, 2, 3, 1).reshape(B, -1))
    return torch.stack(out, dim=1)


@correct("patchify", "unflatten + einsum-style permute, channels-last first")
def patch_cl(images, P):
    B, C, H, W = images.shape
    x = images.permute(0, 2, 3, 1)                               # (B, H, W, C)
    x = x.unflatten(1, (H // P, P)).unflatten(3, (W // P, P))    # (B, H/P, P, W/P, P, C)
    return x.permute(0, 1, 3, 2, 4, 5).flatten(3).flatten(1, 2)


# ---------------------------------------------------------------- Exercise 4: dense_block
def _dense(x, W_f, W_g, d, past=None, swap_taps=False, swap_act=False, no_concat=False, concat_rev=False):
    B, T, d_in = x.shape
    x_past = F.pad(x, (0, 0, d, 0))[:, :T] if past is None else past(x, d)
    a, b = (1, 0) if swap_taps else (0, 1)
    f = x @ W_f[a] + x_past @ W_f[b]
    g = x @ W_g[a] + x_past @ W_g[b]
    y = torch.sigmoid(f) * torch.tanh(g) if swap_act else torch.tanh(f) * torch.sigmoid(g)
    if no_concat:
        return y
    return torch.cat([y, x], -1) if concat_rev else torch.cat([x, y], -1)


slip("dense_block", "padded on the right: x_{t+d}")(
    lambda x, Wf, Wg, d: _dense(x, Wf, Wg, d, past=lambda x, d: F.pad(x, (0, 0, 0, d))[:, d:]))
slip("dense_block", "F.pad's order misread: pads the features")(
    lambda x, Wf, Wg, d: _dense(x, Wf, Wg, d, past=lambda x, d: F.pad(x, (d, 0))[..., :x.shape[-1]]))
slip("dense_block", "taps swapped: W[0] on the past, W[1] on the present")(
    lambda x, Wf, Wg, d: _dense(x, Wf, Wg, d, swap_taps=True))
slip("dense_block", "shift by 1 whatever the dilation")(
    lambda x, Wf, Wg, d: _dense(x, Wf, Wg, d, past=lambda x, d: F.pad(x, (0, 0, 1, 0))[:, :x.shape[1]]))
slip("dense_block", "torch.roll: wraps the end round to the start")(
    lambda x, Wf, Wg, d: _dense(x, Wf, Wg, d, past=lambda x, d: torch.roll(x, d, dims=1)))
slip("dense_block", "tanh and sigmoid swapped")(lambda x, Wf, Wg, d: _dense(x, Wf, Wg, d, swap_act=True))
slip("dense_block", "returns the new features only (no concat)")(lambda x, Wf, Wg, d: _dense(x, Wf, Wg, d, no_concat=True))
slip("dense_block", "concatenated [new, x]")(lambda x, Wf, Wg, d: _dense(x, Wf, Wg, d, concat_rev=True))
slip("dense_block", "shift by d - 1 (off by one)")(
    lambda x, Wf, Wg, d: _dense(x, Wf, Wg, d, past=lambda x, d: F.pad(x, (0, 0, d - 1, 0))[:, :x.shape[1]]))


@correct("dense_block", "zeros + slice assignment")
def dense_assign(x, W_f, W_g, dilation):
    x_past = torch.zeros_like(x)
    if dilation < x.shape[1]:
        x_past[:, dilation:] = x[:, :x.shape[1] - dilation]
    f = torch.einsum("btd,df->btf", x, W_f[0]) + torch.einsum("btd,df->btf", x_past, W_f[1])
    g = torch.einsum("btd,df->btf", x, W_g[0]) + torch.einsum("btd,df->btf", x_past, W_g[1])
    return torch.cat([x, torch.tanh(f) * torch.sigmoid(g)], dim=-1)


@correct("dense_block", "F.conv1d with dilation and left padding")
def dense_conv(x, W_f, W_g, dilation):
    xt = F.pad(x.transpose(1, 2), (dilation, 0))                  # (B, d_in, T + d)
    w_f = torch.stack([W_f[1], W_f[0]], dim=-1).permute(1, 0, 2)   # (filters, d_in, 2): tap 0 past, tap 1 present
    w_g = torch.stack([W_g[1], W_g[0]], dim=-1).permute(1, 0, 2)
    f = F.conv1d(xt, w_f, dilation=dilation).transpose(1, 2)
    g = F.conv1d(xt, w_g, dilation=dilation).transpose(1, 2)
    return torch.cat([x, torch.tanh(f) * torch.sigmoid(g)], dim=-1)


@correct("dense_block", "cat of zeros and x[:, :-d], sliced")
def dense_cat(x, W_f, W_g, dilation):
    B, T, d_in = x.shape
    x_past = torch.cat([x.new_zeros(B, dilation, d_in), x], dim=1)[:, :T]
    f = x @ W_f[0] + x_past @ W_f[1]
    g = x @ W_g[0] + x_past @ W_g[1]
    return torch.cat([x, f.tanh() * g.sigmoid()], dim=-1)


# ---------------------------------------------------------------- Exercise 5: causal_attention_block
def _cab(x, W_q, W_k, W_v, mask="causal", scale="dk", after=False, fill=float("-inf"), order="x_first"):
    B, T, d_in = x.shape
    q, k, v = x @ W_q, x @ W_k, x @ W_v
    div = {"dk": math.sqrt(k.size(-1)), "none": 1.0, "d_in": math.sqrt(d_in)}[scale]
    s = q @ k.transpose(1, 2) / div
    allowed = {"causal": causal_mask(T), "inverted": ~causal_mask(T), "triu": torch.triu(torch.ones(T, T)).bool(),
               "none": torch.ones(T, T, dtype=torch.bool)}[mask]
    if after:
        w = torch.softmax(s, -1) * allowed
    else:
        w = torch.softmax(s.masked_fill(~allowed, fill), -1)
    read = w @ v
    if order == "read_only":
        return read, w
    return (torch.cat([read, x], -1) if order == "read_first" else torch.cat([x, read], -1)), w


slip("causal_attention_block", "no mask")(lambda *a: _cab(*a, mask="none"))
slip("causal_attention_block", "mask inverted (fills the allowed pairs)")(lambda *a: _cab(*a, mask="inverted"))
slip("causal_attention_block", "mask applied after the softmax, not renormalised")(lambda *a: _cab(*a, after=True))
slip("causal_attention_block", "triu: attends to the future")(lambda *a: _cab(*a, mask="triu"))
slip("causal_attention_block", "no 1/sqrt(d_key)")(lambda *a: _cab(*a, scale="none"))
slip("causal_attention_block", "scaled by sqrt(d_in)")(lambda *a: _cab(*a, scale="d_in"))
slip("causal_attention_block", "concatenated [read-out, x]")(lambda *a: _cab(*a, order="read_first"))
slip("causal_attention_block", "returns the read-out only")(lambda *a: _cab(*a, order="read_only"))
slip("causal_attention_block", "masked scores set to 0, not -inf")(lambda *a: _cab(*a, fill=0.0))

correct("causal_attention_block", "masked_fill with -1e9")(lambda *a: _cab(*a, fill=-1e9))


@correct("causal_attention_block", "F.scaled_dot_product_attention(is_causal=True) + tril weights")
def cab_sdpa(x, W_q, W_k, W_v):
    q, k, v = x @ W_q, x @ W_k, x @ W_v
    T = x.shape[1]
    read = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    s = (q @ k.transpose(-1, -2)) * k.shape[-1] ** -0.5
    w = s.masked_fill(torch.tril(torch.ones(T, T, dtype=torch.bool)).logical_not(), -math.inf).softmax(-1)
    return torch.cat((x, read), dim=2), w


@correct("causal_attention_block", "additive -inf bias from triu(diagonal=1)")
def cab_bias(x, W_q, W_k, W_v):
    T = x.shape[1]
    bias = torch.full((T, T), float("-inf")).triu(1)
    q, k, v = x @ W_q, x @ W_k, x @ W_v
    w = torch.softmax(q @ k.mT / math.sqrt(W_k.shape[1]) + bias, dim=-1)
    return torch.cat([x, w @ v], dim=-1), w
