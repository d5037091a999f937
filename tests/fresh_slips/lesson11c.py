import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from course_utils.masks import causal_mask
from course_utils.vision import conv1x1
from course_utils.vision import self_attention_2d as ref_sa2d


# ---------------- self_attention_2d ----------------
def _sa(x, W_f, W_g, W_h, W_v, softmax_dim=-1, scale="cbar", reshape_no_T=False, qk_swap=False,
        v_from=None, ret_T=False, no_Wv=False, colmajor=False):
    B, C, H, W = x.shape
    def flat(t):
        if colmajor:
            t = t.transpose(2, 3)
        return t.flatten(2).transpose(1, 2)
    k = flat(conv1x1(x, W_f))
    q = flat(conv1x1(x, W_g))
    v = flat(conv1x1(x, v_from if v_from is not None else W_h))
    if qk_swap:
        q, k = k, q
    s = q @ k.transpose(1, 2)
    if scale == "cbar":
        s = s / math.sqrt(k.size(-1))
    elif scale == "C":
        s = s / math.sqrt(C)
    elif scale == "N":
        s = s / math.sqrt(k.size(1))
    w = torch.softmax(s, dim=softmax_dim)
    r = w @ v
    if reshape_no_T:
        r = r.reshape(B, -1, H, W)
    elif colmajor:
        r = r.transpose(1, 2).reshape(B, -1, W, H).transpose(2, 3)
    else:
        r = r.transpose(1, 2).reshape(B, -1, H, W)
    o = r if no_Wv else conv1x1(r, W_v)
    return o, (w.transpose(1, 2) if ret_T else w)


def sa_softmax_queries(x, W_f, W_g, W_h, W_v):
    return _sa(x, W_f, W_g, W_h, W_v, softmax_dim=1)

def sa_no_scale(x, W_f, W_g, W_h, W_v):
    return _sa(x, W_f, W_g, W_h, W_v, scale=None)

def sa_scale_C(x, W_f, W_g, W_h, W_v):
    return _sa(x, W_f, W_g, W_h, W_v, scale="C")

def sa_reshape_no_transpose(x, W_f, W_g, W_h, W_v):
    return _sa(x, W_f, W_g, W_h, W_v, reshape_no_T=True)

def sa_q_from_Wf(x, W_f, W_g, W_h, W_v):
    return _sa(x, W_f, W_g, W_h, W_v, qk_swap=True)

def sa_v_from_Wf(x, W_f, W_g, W_h, W_v):   # copy-paste: values with W_f
    return _sa(x, W_f, W_g, W_h, W_v, v_from=W_f)

def sa_weights_transposed(x, W_f, W_g, W_h, W_v):
    return _sa(x, W_f, W_g, W_h, W_v, ret_T=True)

def sa_scale_by_N(x, W_f, W_g, W_h, W_v):   # k.size(1) after the transpose is N, not C̄
    return _sa(x, W_f, W_g, W_h, W_v, scale="N")

def sa_colmajor(x, W_f, W_g, W_h, W_v):     # pixels numbered column by column, consistently
    return _sa(x, W_f, W_g, W_h, W_v, colmajor=True)


# ---------------- SelfAttention2d ----------------
class _Block(nn.Module):
    gamma_init = 0.0
    def __init__(self, channels):
        super().__init__()
        c_bar = max(channels // 8, 1)
        self.f = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.g = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.h = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.v = nn.Conv2d(c_bar, channels, kernel_size=1, bias=False)
        self.gamma = nn.Parameter(torch.full((1,), self.gamma_init))
    def mats(self):
        return (self.f.weight[:, :, 0, 0], self.g.weight[:, :, 0, 0], self.h.weight[:, :, 0, 0],
                self.v.weight[:, :, 0, 0])
    def forward(self, x):
        o, w = ref_sa2d(x, *self.mats())
        self.attn_weights = w.detach()
        return x + self.gamma * o


class BlockGammaOne(_Block):
    gamma_init = 1.0

class BlockNoResidual(_Block):
    def forward(self, x):
        o, w = ref_sa2d(x, *self.mats())
        self.attn_weights = w.detach()
        return self.gamma * o

class BlockGammaNotParameter(_Block):
    def __init__(self, channels):
        super().__init__(channels)
        del self.gamma
        self.gamma = torch.zeros(1)

class BlockFGSwapped(_Block):
    def forward(self, x):
        f, g, h, v = self.mats()
        o, w = ref_sa2d(x, g, f, h, v)
        self.attn_weights = w.detach()
        return x + self.gamma * o

class BlockStoresOutput(_Block):
    def forward(self, x):
        o, w = ref_sa2d(x, *self.mats())
        self.attn_weights = o.detach()
        return x + self.gamma * o

class BlockFloatDivision(nn.Module):
    def __init__(self, channels):
        super().__init__()
        c_bar = channels / 8
        self.f = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.g = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.h = nn.Conv2d(channels, c_bar, kernel_size=1, bias=False)
        self.v = nn.Conv2d(c_bar, channels, kernel_size=1, bias=False)
        self.gamma = nn.Parameter(torch.zeros(1))
    def forward(self, x):
        o, w = ref_sa2d(x, self.f.weight[:, :, 0, 0], self.g.weight[:, :, 0, 0], self.h.weight[:, :, 0, 0],
                        self.v.weight[:, :, 0, 0])
        self.attn_weights = w.detach()
        return x + self.gamma * o


# ---------------- patchify ----------------
def patch_CPP(images, P):
    B, C, H, W = images.shape
    x = images.reshape(B, C, H // P, P, W // P, P).permute(0, 2, 4, 1, 3, 5)
    return x.reshape(B, -1, P * P * C)

def patch_colmajor(images, P):
    B, C, H, W = images.shape
    x = images.reshape(B, C, H // P, P, W // P, P).permute(0, 4, 2, 3, 5, 1)
    return x.reshape(B, -1, P * P * C)

def patch_single_reshape(images, P):
    B, C, H, W = images.shape
    return images.reshape(B, -1, P * P * C)

def patch_inner_transposed(images, P):
    B, C, H, W = images.shape
    x = images.reshape(B, C, H // P, P, W // P, P).permute(0, 2, 4, 5, 3, 1)
    return x.reshape(B, -1, P * P * C)

def patch_split_order(images, P):   # (P, H/P) instead of (H/P, P): strided "patches"
    B, C, H, W = images.shape
    x = images.reshape(B, C, P, H // P, P, W // P).permute(0, 3, 5, 2, 4, 1)
    return x.reshape(B, -1, P * P * C)


# ---------------- dense_block ----------------
def _dense(x, W_f, W_g, past, order="xf", swap_act=False, swap_taps=False):
    a, b = (1, 0) if swap_taps else (0, 1)
    f = x @ W_f[a] + past @ W_f[b]
    g = x @ W_g[a] + past @ W_g[b]
    new = torch.sigmoid(f) * torch.tanh(g) if swap_act else torch.tanh(f) * torch.sigmoid(g)
    return torch.cat([x, new] if order == "xf" else [new, x], dim=-1)

def _past(x, d):
    return F.pad(x, (0, 0, d, 0))[:, :x.size(1)]

def dense_future(x, W_f, W_g, dilation):
    fut = F.pad(x, (0, 0, 0, dilation))[:, dilation:]
    return _dense(x, W_f, W_g, fut)

def dense_taps_swapped(x, W_f, W_g, dilation):
    return _dense(x, W_f, W_g, _past(x, dilation), swap_taps=True)

def dense_cat_order(x, W_f, W_g, dilation):
    return _dense(x, W_f, W_g, _past(x, dilation), order="fx")

def dense_acts_swapped(x, W_f, W_g, dilation):
    return _dense(x, W_f, W_g, _past(x, dilation), swap_act=True)

def dense_dilation_ignored(x, W_f, W_g, dilation):
    return _dense(x, W_f, W_g, _past(x, 1))

def dense_clone_not_zeroed(x, W_f, W_g, dilation):
    past = x.clone()
    past[:, dilation:] = x[:, :-dilation]
    return _dense(x, W_f, W_g, past)

def dense_pad_wrong_axis(x, W_f, W_g, dilation):
    past = F.pad(x, (dilation, 0))[:, :x.size(1)]
    return _dense(x, W_f, W_g, past)


# ---------------- causal_attention_block ----------------
def _cab(x, W_q, W_k, W_v, allowed=None, scale=None, fill=float("-inf"), ret_scores=False, v_mat=None):
    B, T, d_in = x.shape
    q, k, v = x @ W_q, x @ W_k, x @ (W_v if v_mat is None else v_mat)
    s = q @ k.transpose(1, 2) / math.sqrt(k.size(-1) if scale is None else scale)
    if allowed is None:
        allowed = causal_mask(T)
    s = s.masked_fill(~allowed, fill)
    w = torch.softmax(s, dim=-1)
    return torch.cat([x, w @ v], dim=-1), (s if ret_scores else w)

def cab_mask_polarity(x, W_q, W_k, W_v):
    T = x.size(1)
    return _cab(x, W_q, W_k, W_v, allowed=~causal_mask(T))

def cab_mask_transposed(x, W_q, W_k, W_v):
    T = x.size(1)
    return _cab(x, W_q, W_k, W_v, allowed=causal_mask(T).T)

def cab_scale_din(x, W_q, W_k, W_v):
    return _cab(x, W_q, W_k, W_v, scale=x.size(-1))

def cab_returns_scores(x, W_q, W_k, W_v):
    return _cab(x, W_q, W_k, W_v, ret_scores=True)

def cab_v_from_Wk(x, W_q, W_k, W_v):
    return _cab(x, W_q, W_k, W_v, v_mat=W_k)

def cab_mask_of_din(x, W_q, W_k, W_v):
    return _cab(x, W_q, W_k, W_v, allowed=causal_mask(x.size(-1)))

def cab_read_only(x, W_q, W_k, W_v):       # forgets to concatenate x
    out, w = _cab(x, W_q, W_k, W_v)
    return out[..., x.size(-1):], w


# ---------------- right answers ----------------
def sa_einsum(x, W_f, W_g, W_h, W_v):
    B, C, H, W = x.shape
    xf = x.reshape(B, C, H * W)
    k = torch.einsum("kc,bcn->bnk", W_f, xf)
    q = torch.einsum("kc,bcn->bnk", W_g, xf)
    v = torch.einsum("kc,bcn->bkn", W_h, xf)
    w = torch.softmax(torch.einsum("bjk,bik->bji", q, k) * k.size(-1) ** -0.5, dim=-1)
    o = torch.einsum("ck,bkn,bjn->bcj", W_v, v, w).reshape(B, C, H, W)
    return o, w

def sa_Wv_first(x, W_f, W_g, W_h, W_v):   # W_v W_h applied before the mixing: linear, same result
    B, C, H, W = x.shape
    k = conv1x1(x, W_f).flatten(2).transpose(1, 2)
    q = conv1x1(x, W_g).flatten(2).transpose(1, 2)
    vo = conv1x1(x, W_v @ W_h).flatten(2)              # (B, C, N)
    w = (q @ k.transpose(1, 2) / math.sqrt(W_f.shape[0])).softmax(-1)
    return (vo @ w.transpose(1, 2)).reshape(B, C, H, W), w

class BlockGammaTensorList(nn.Module):
    def __init__(self, channels):
        super().__init__()
        c = channels // 8
        self.f, self.g, self.h = (nn.Conv2d(channels, c, 1, bias=False) for _ in range(3))
        self.v = nn.Conv2d(c, channels, 1, bias=False)
        self.gamma = nn.Parameter(torch.tensor([0.0]))
    def forward(self, x):
        mats = [m.weight.squeeze(-1).squeeze(-1) for m in (self.f, self.g, self.h, self.v)]
        o, self.attn_weights = ref_sa2d(x, *mats)
        return torch.addcmul(x, self.gamma, o)

def patch_unfold(images, P):
    B, C, H, W = images.shape
    u = F.unfold(images, kernel_size=P, stride=P)          # (B, C·P·P, N) in (C, P, P) order
    return u.reshape(B, C, P * P, -1).permute(0, 3, 2, 1).reshape(B, -1, P * P * C)

def patch_loops(images, P):
    B, C, H, W = images.shape
    rows = []
    for r in range(H // P):
        for c in range(W // P):
            rows.append(images[:, :, r * P:(r + 1) * P, c * P:(c + 1) * P].permute(0, 2, 3, 1).reshape(B, -1))
    return torch.stack(rows, 1)

def dense_conv1d(x, W_f, W_g, dilation):
    B, T, d_in = x.shape
    xt = F.pad(x.transpose(1, 2), (dilation, 0))
    def conv(Wt):   # Wt (2, d_in, filters) -> weight (filters, d_in, 2): tap 0 past, tap 1 present
        return F.conv1d(xt, torch.stack([Wt[1].T, Wt[0].T], -1), dilation=dilation)
    new = torch.tanh(conv(W_f)) * torch.sigmoid(conv(W_g))
    return torch.cat([x, new.transpose(1, 2)], -1)

def dense_roll(x, W_f, W_g, dilation):
    past = torch.roll(x, dilation, dims=1)
    past[:, :dilation] = 0
    return _dense(x, W_f, W_g, past)

def cab_big_negative(x, W_q, W_k, W_v):
    return _cab(x, W_q, W_k, W_v, fill=-1e9)

def cab_tril(x, W_q, W_k, W_v):
    B, T, _ = x.shape
    q, k, v = x @ W_q, x @ W_k, x @ W_v
    s = torch.baddbmm(torch.zeros(B, T, T).masked_fill(torch.tril(torch.ones(T, T)) == 0, float("-inf")),
                      q, k.transpose(1, 2), alpha=1 / math.sqrt(W_q.shape[1]))
    w = s.softmax(-1)
    return torch.cat((x, torch.bmm(w, v)), 2), w


SLIPS = [
    ("self_attention_2d", "softmax over the queries (dim=1)", sa_softmax_queries),
    ("self_attention_2d", "no 1/sqrt(C̄) scaling", sa_no_scale),
    ("self_attention_2d", "scaled by sqrt(C) instead of sqrt(C̄)", sa_scale_C),
    ("self_attention_2d", "reshape (B,N,C̄)->(B,C̄,H,W) without transposing", sa_reshape_no_transpose),
    ("self_attention_2d", "queries from W_f, keys from W_g", sa_q_from_Wf),
    ("self_attention_2d", "u: values computed with W_f (copy-paste)", sa_v_from_Wf),
    ("self_attention_2d", "u: weights returned transposed (key, query)", sa_weights_transposed),
    ("self_attention_2d", "u: scaled by sqrt(k.size(1)) = sqrt(N)", sa_scale_by_N),
    ("self_attention_2d", "u: pixels flattened column-major (o right, weights permuted)", sa_colmajor),
    ("self_attention_block", "gamma initialised to 1", BlockGammaOne),
    ("self_attention_block", "returns gamma*o, no residual", BlockNoResidual),
    ("self_attention_block", "u: gamma a plain tensor, not a Parameter", BlockGammaNotParameter),
    ("self_attention_block", "u: W_f and W_g passed in swapped order", BlockFGSwapped),
    ("self_attention_block", "u: attn_weights holds o instead of the weights", BlockStoresOutput),
    ("self_attention_block", "u: channels / 8 (float) for C̄", BlockFloatDivision),
    ("patchify", "patch flattened in (C, P, P) order", patch_CPP),
    ("patchify", "patches in column-major order", patch_colmajor),
    ("patchify", "u: one reshape of the image", patch_single_reshape),
    ("patchify", "u: inside a patch, columns before rows (j, i)", patch_inner_transposed),
    ("patchify", "u: reshape splits (P, H/P) instead of (H/P, P)", patch_split_order),
    ("dense_block", "padding on the right: x_{t+d} (future)", dense_future),
    ("dense_block", "taps swapped: W[0] on the past, W[1] on the present", dense_taps_swapped),
    ("dense_block", "concatenation order [new, x]", dense_cat_order),
    ("dense_block", "u: sigmoid on the filter, tanh on the gate", dense_acts_swapped),
    ("dense_block", "u: delay of 1 whatever the dilation", dense_dilation_ignored),
    ("dense_block", "u: delayed copy via clone, first d steps not zeroed", dense_clone_not_zeroed),
    ("dense_block", "u: F.pad(x, (d, 0)) pads the feature axis", dense_pad_wrong_axis),
    ("causal_attention_block", "mask polarity inverted (~causal_mask filled)", cab_mask_polarity),
    ("causal_attention_block", "mask transposed (sees the future)", cab_mask_transposed),
    ("causal_attention_block", "scaled by sqrt(d_in) instead of sqrt(d_key)", cab_scale_din),
    ("causal_attention_block", "u: returns the masked scores, not the weights", cab_returns_scores),
    ("causal_attention_block", "u: values computed with W_k (copy-paste)", cab_v_from_Wk),
    ("causal_attention_block", "u: causal_mask(d_in) instead of causal_mask(T)", cab_mask_of_din),
    ("causal_attention_block", "u: returns the read-out only, x not concatenated", cab_read_only),
    ("self_attention_block", "gamma tensor([0.]), addcmul, weights not detached", BlockGammaTensorList),  # right until the text asked for C̄ >= 1
]

CORRECT = [
    ("self_attention_2d", "einsum throughout", sa_einsum),
    ("self_attention_2d", "W_v W_h applied before mixing", sa_Wv_first),
    ("patchify", "F.unfold then reorder (C,P,P)->(P,P,C)", patch_unfold),
    ("patchify", "python loops over patches", patch_loops),
    ("dense_block", "F.conv1d with dilation", dense_conv1d),
    ("dense_block", "torch.roll and zero the first d", dense_roll),
    ("causal_attention_block", "masked_fill -1e9", cab_big_negative),
    ("causal_attention_block", "baddbmm with additive -inf mask", cab_tril),
]
