"""Lesson 11's checks pass the references and reject planted mistakes, naming each one, under every seed offset.

Each planted mistake is a slip a learner makes (written as a learner would write it); `named` asserts that the
check rejects it with a message that names it (not a bare "wrong values", nor the learner's own exception)."""
import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from course_utils.checks import lesson11 as check
from course_utils.masks import causal_mask
from course_utils.snail import causal_attention_block
from course_utils.vision import SelfAttention2d, conv1x1, patchify, self_attention_2d
from tests.checking import named, not_implemented, prints_not_implemented

pytestmark = pytest.mark.usefixtures("any_seed_offset")   # every test under every seed offset


# --- exercise 1: self_attention_2d -----------------------------------------------------------------
def _attention_2d(x, W_f, W_g, W_h, W_v, softmax_dim=-1, scale="d_key", swap=False, transpose_first=True,
                  normalise="sum", values="h", reshape=True, output=True, pixels="flatten",
                  transpose_W=False, k_T="transpose", read_T=False):
    B, C, H, W = x.shape
    if transpose_W:
        W_f = W_f.T

    def project(matrix):
        y = conv1x1(x, matrix)                                          # (B, c, H, W)
        return y.reshape(B, H * W, -1) if pixels == "reshape" else y.flatten(2).transpose(1, 2)
    k, q = project(W_f), project(W_g)
    v = project(W_h) if values == "h" else x.flatten(2).transpose(1, 2)
    if swap:
        q, k = k, q
    size = {"d_key": k.size(-1), "none": 1, "C̄": W_h.shape[0], "N": H * W, "C": C, "d_key²": k.size(-1) ** 2}[scale]
    keys = {"transpose": lambda: k.transpose(1, 2), ".T": lambda: k.T, "none": lambda: k}[k_T]()
    scores = q @ keys / math.sqrt(size)
    if normalise == "sum":
        weights = torch.softmax(scores, dim=softmax_dim)
    elif normalise == "max":
        weights = torch.exp(scores) / torch.exp(scores).amax(-1, keepdim=True)
    elif normalise == "none":
        weights = torch.exp(scores)
    else:
        weights = scores
    read = (weights.transpose(1, 2) if read_T else weights) @ v        # (B, N, C̄)
    if not reshape:
        return (read @ W_v.T if output else read), weights
    read = read.transpose(1, 2).reshape(B, -1, H, W) if transpose_first else read.reshape(B, -1, H, W)
    if output and values == "h":
        read = conv1x1(read, W_v)
    return read, weights


def test_self_attention_2d_accepts_reference():
    check.self_attention_2d(self_attention_2d)


def test_self_attention_2d_accepts_conv2d_answer():
    def with_conv2d(x, W_f, W_g, W_h, W_v):
        B, C, H, W = x.shape
        f = nn.functional.conv2d(x, W_f[:, :, None, None]).view(B, -1, H * W)
        g = nn.functional.conv2d(x, W_g[:, :, None, None]).view(B, -1, H * W)
        h = nn.functional.conv2d(x, W_h[:, :, None, None]).view(B, -1, H * W)
        weights = torch.softmax(torch.bmm(g.transpose(1, 2), f) / f.size(1) ** 0.5, dim=2)
        read = torch.bmm(h, weights.transpose(1, 2)).view(B, -1, H, W)
        return nn.functional.conv2d(read, W_v[:, :, None, None]), weights
    check.self_attention_2d(with_conv2d)


def test_self_attention_2d_accepts_output_map_applied_to_the_values_first():
    def values_mapped_first(x, W_f, W_g, W_h, W_v):      # W_v (Σ α h) = Σ α (W_v h): the same, by linearity
        B, C, H, W = x.shape
        _, weights = self_attention_2d(x, W_f, W_g, W_h, W_v)
        v = conv1x1(x, W_v @ W_h).flatten(2).transpose(1, 2)
        return (weights @ v).transpose(1, 2).reshape(B, C, H, W), weights
    check.self_attention_2d(values_mapped_first)


@pytest.mark.parametrize("kwargs, symptom", [
    (dict(softmax_dim=1), "normalised over the queries"),
    (dict(softmax_dim=0), r"F.softmax without dim= picks dim 0"),
    (dict(scale="none"), "not divided by √d_key"),
    (dict(scale="C̄"), r"divided by √C̄ \(the channels of a value\)"),
    (dict(scale="N"), r"divided by √N \(the number of pixels\)"),
    (dict(scale="C"), r"divided by √C \(the channels of x\)"),
    (dict(scale="d_key²"), "divided by d_key, not by its square root"),
    (dict(normalise="max"), "divided by their largest value, not by their sum"),
    (dict(normalise="none"), r"exp\(scores\), not normalised"),
    (dict(normalise="scores"), "the scores themselves"),
    (dict(swap=True), "queries and keys are swapped"),
    (dict(output=False), "the output map W_v is missing"),
    (dict(transpose_first=False), "scrambled: weights @ v is"),
    (dict(reshape=False), r"o is still \(B, N, C\)"),
    (dict(reshape=False, output=False), r"o is still \(B, N, C̄\)"),
    (dict(values="x"), "mixes x itself, not the values"),
    (dict(read_T=True), "transposed weights"),
    (dict(pixels="reshape"), r"pixels' vectors are scrambled: .* reshaped straight to \(B, N, C̄\)"),
    (dict(transpose_W=True), "a weight matrix was transposed: conv1x1"),
    (dict(k_T=".T"), r"`\.T` on a 3-D tensor reverses all three axes"),
    (dict(k_T="none"), r"the scores are q @ k\.transpose\(1, 2\)"),
])
def test_self_attention_2d_names_mistakes(kwargs, symptom):
    named(check.self_attention_2d, lambda *a: _attention_2d(*a, **kwargs), symptom)


@pytest.mark.parametrize("answer, symptom", [
    (lambda *a: _attention_2d(*a)[0], r"return 2 things, as `return o, weights`"),
    (lambda *a: _attention_2d(*a)[::-1], r"wrong order: you return \(weights, o\)"),
    (lambda *a: (_attention_2d(*a)[0], _attention_2d(*a)[1].transpose(1, 2)), "the weights are transposed"),
])
def test_self_attention_2d_names_wrong_returns(answer, symptom):
    named(check.self_attention_2d, answer, symptom)


def test_self_attention_2d_not_implemented():
    with prints_not_implemented():
        check.self_attention_2d(not_implemented)


# --- exercise 2: SelfAttention2d (the γ-residual) --------------------------------------------------
def _block(gamma_init=0.0, residual="x + γo", as_parameter=True, keep_weights=True, gamma_shape=(1,), swap=False,
           values=None, output=True, bias=False, init_super=True, c_bar="//", weights="matrix", order="fghv",
           returns="y", gamma_dtype=torch.float32, gamma_item=False):
    class Block(nn.Module):
        def __init__(self, channels):
            if init_super:
                super().__init__()
            c = {"//": max(channels // 8, 1), "no floor": channels // 8, "/": channels / 8}[c_bar]
            self.f = nn.Conv2d(channels, c, 1, bias=bias)
            self.g = nn.Conv2d(channels, c, 1, bias=bias)
            self.h = nn.Conv2d(channels, values or c, 1, bias=bias)
            if output:
                self.v = nn.Conv2d(values or c, channels, 1, bias=bias)
            if as_parameter == "buffer":
                self.register_buffer("gamma", torch.full(gamma_shape, gamma_init))
            elif as_parameter:
                self.gamma = nn.Parameter(torch.full(gamma_shape, gamma_init, dtype=gamma_dtype))
            elif as_parameter is False:
                self.gamma = torch.full((1,), gamma_init)

        def forward(self, x):
            matrix = (lambda conv: conv.weight[:, :, 0, 0]) if weights == "matrix" else (lambda conv: conv.weight)
            W = {name: matrix(getattr(self, name)) for name in "fghv"}
            W_f, W_g = (W["g"], W["f"]) if swap else (W["f"], W["g"])
            args = {"fghv": (W_f, W_g, W["h"], W["v"]), "fgvh": (W_f, W_g, W["v"], W["h"])}[order]
            o, attn = self_attention_2d(x, *args)
            if keep_weights:
                self.attn_weights = attn
            gamma = self.gamma.item() if gamma_item else self.gamma
            y = {"x + γo": x + gamma * o, "γo": gamma * o, "x + o": x + o,
                 "γx + o": gamma * x + o, "x + γx": x + gamma * x,
                 "(1 − γ)x + γo": (1 - gamma) * x + gamma * o}[residual]
            return (y, attn) if returns == "tuple" else y
    return Block


def test_block_accepts_reference():
    check.self_attention_block(SelfAttention2d)


def test_block_accepts_an_answer_written_from_scratch():
    class FromScratch(nn.Module):
        def __init__(self, channels):
            super().__init__()
            c = max(channels // 8, 1)
            self.f, self.g = nn.Conv2d(channels, c, 1, bias=False), nn.Conv2d(channels, c, 1, bias=False)
            self.h, self.v = nn.Conv2d(channels, c, 1, bias=False), nn.Conv2d(c, channels, 1, bias=False)
            self.gamma = nn.Parameter(torch.zeros(1))

        def forward(self, x):
            B, C, H, W = x.shape
            k, q, v = self.f(x).flatten(2), self.g(x).flatten(2), self.h(x).flatten(2)
            self.attn_weights = torch.softmax(q.transpose(1, 2) @ k / math.sqrt(self.f.out_channels), dim=-1)
            return x + self.gamma * self.v((v @ self.attn_weights.transpose(1, 2)).view(B, -1, H, W))
    check.self_attention_block(FromScratch)


BLOCK_MISTAKES = [
    (dict(gamma_init=1.0), "γ should start at 0"),
    (dict(residual="γo"), "residual is missing"),
    (dict(residual="x + o"), "γ is not used"),
    (dict(residual="γx + o"), "γ multiplies the wrong term"),
    (dict(residual="x + γx"), "o is missing"),
    (dict(residual="(1 − γ)x + γo"), r"y = \(1 − γ\)·x \+ γ·o, a gate between x and o: the block is a residual"),
    (dict(swap=True), "keys and queries are swapped"),
    (dict(gamma_shape=(16,)), "one learned scalar"),
    (dict(as_parameter="buffer"), "not an nn.Parameter"),
    (dict(as_parameter=False), "γ is missing from the module's parameters"),
    (dict(as_parameter=None), "γ is missing from the module's parameters"),
    (dict(keep_weights=False), "self.attn_weights"),
    (dict(values=16), r"self.h maps 16 channels to 16: .*C̄ = C/8 = 2"),
    (dict(values=4), r"self.h \(values\) has weight of shape \(4, 16, 1, 1\), expected \(2, 16, 1, 1\)"),
    (dict(output=False), "no 1×1 convolution self.v .*fourth 1×1 convolution"),
    (dict(bias=True), "has a bias"),
    (dict(init_super=False), r"call super\(\).__init__\(\) first"),
    (dict(c_bar="/"), r"channels / 8 is a float .* channels // 8"),
    (dict(c_bar="no floor"), r"SelfAttention2d\(4\) has self.f, self.g, self.h, self.v with 0 channels: .*"
                             r"at least 1: c_bar = max\(channels // 8, 1\)"),
    (dict(weights="kernel"), r"takes the weight MATRICES: .*self.f.weight\[:, :, 0, 0\]"),
    (dict(order="fgvh"), "the matrices are passed in the wrong order"),
    (dict(returns="tuple"), "forward returns a tuple: it should return y"),
    (dict(gamma_dtype=torch.int64), r"γ must be a float tensor"),
    (dict(gamma_item=True), "no gradient reaches γ"),
]


@pytest.mark.parametrize("shape", [(), (1, 1, 1, 1)])
def test_block_accepts_gamma_of_any_scalar_shape(shape):
    class Block(SelfAttention2d):
        def __init__(self, channels):
            super().__init__(channels)
            self.gamma = nn.Parameter(torch.zeros(shape))
    check.self_attention_block(Block)


@pytest.mark.parametrize("kwargs, symptom", BLOCK_MISTAKES)
def test_block_names_mistakes(kwargs, symptom):
    named(check.self_attention_block, _block(**kwargs), symptom)


def test_block_not_implemented():
    class Stub(nn.Module):
        def __init__(self, channels):
            super().__init__()
            raise NotImplementedError()
    with prints_not_implemented():
        check.self_attention_block(Stub)


# --- exercise 3: patchify --------------------------------------------------------------------------
def _patchify(images, P, mistake=None):
    B, C, H, W = images.shape
    N = (H // P) * (W // P)
    if mistake == "reshape (B, H, W, C)":
        return images.permute(0, 2, 3, 1).reshape(B, N, P * P * C)
    if mistake == "reshape (B, C, H, W)":
        return images.reshape(B, N, P * P * C)
    if mistake == "channels in front":                    # unfold twice, then reshape without moving C
        return images.unfold(2, P, P).unfold(3, P, P).reshape(B, N, P * P * C)
    if mistake == "unfold":                                   # (C, P, P) order, as F.unfold gives it
        return F.unfold(images, kernel_size=P, stride=P).transpose(1, 2)
    if mistake == "transposed":
        return patchify(images, P).transpose(1, 2)
    if mistake == "view":
        return images.reshape(B, C, H // P, P, W // P, P).permute(0, 2, 4, 3, 5, 1).view(B, N, P * P * C)
    if mistake == "strided":                                  # einops' b c (p1 h) (p2 w) -> b (h w) (p1 p2 c)
        return images.reshape(B, C, P, H // P, P, W // P).permute(0, 3, 5, 2, 4, 1).reshape(B, N, P * P * C)
    if mistake == "H and W swapped":
        return images.reshape(B, C, W // P, P, H // P, P).permute(0, 2, 4, 3, 5, 1).reshape(B, N, P * P * C)
    if mistake == "grid not merged":
        return images.reshape(B, C, H // P, P, W // P, P).permute(0, 2, 4, 3, 5, 1).reshape(B, H // P, W // P, -1)
    if mistake == "patches not flattened":
        return images.reshape(B, C, H // P, P, W // P, P).permute(0, 2, 4, 3, 5, 1).reshape(B, N, P, P, C)
    if mistake == "first image only":
        return patchify(images, P)[0]
    if mistake == "transposed image":
        return _patchify(images.transpose(2, 3), P).reshape(B, N, P * P * C)
    x = images.reshape(B, C, H // P, P, W // P, P)
    order = {None: (0, 2, 4, 3, 5, 1), "columns": (0, 4, 2, 3, 5, 1), "pixels by column": (0, 2, 4, 5, 3, 1),
             "pixels by column, channels first": (0, 2, 4, 1, 5, 3)}[mistake]
    return x.permute(*order).reshape(B, N, P * P * C)


def test_patchify_accepts_reference():
    check.patchify(patchify)


def test_patchify_accepts_answers_written_otherwise():
    def with_unfold(images, P):                          # F.unfold, then channels moved last
        B, C, H, W = images.shape
        cols = F.unfold(images, kernel_size=P, stride=P)                     # (B, C·P·P, N)
        return cols.view(B, C, P * P, -1).permute(0, 3, 2, 1).reshape(B, -1, P * P * C)

    def with_loops(images, P):
        B, C, H, W = images.shape
        rows = [images[:, :, r:r + P, c:c + P].permute(0, 2, 3, 1).reshape(B, -1)
                for r in range(0, H, P) for c in range(0, W, P)]
        return torch.stack(rows, dim=1)
    check.patchify(with_unfold)
    check.patchify(with_loops)


@pytest.mark.parametrize("mistake, symptom", [
    ("columns", "read in column order"),
    ("unfold", r"flattened in \(C, P, P\) order"),
    ("pixels by column", "read column by column: flatten each patch row by row"),
    ("pixels by column, channels first", "column by column and channel by channel"),
    ("reshape (B, H, W, C)", r"reshape mixes rows of different patches: \(B, H, W, C\)"),
    ("reshape (B, C, H, W)", r"reshape mixes rows of different patches: \(B, C, H, W\)"),
    ("channels in front", "reshape mixes different patches: .* channel axis still in front"),
    ("transposed", "last two axes are swapped"),
    ("view", r"`\.view\(\)` cannot follow a transpose or a permute"),
    ("strided", r"splits as \(H/P, P\), which patch first"),
    ("H and W swapped", "H and W are swapped"),
    ("grid not merged", "grid of patches is not merged"),
    ("patches not flattened", "each patch should be flattened into one vector"),
    ("first image only", "the batch axis is missing"),
    ("transposed image", r"the patches of the transposed image \(as after images\.transpose\(2, 3\)\)"),
])
def test_patchify_names_mistakes(mistake, symptom):
    named(check.patchify, lambda images, P: _patchify(images, P, mistake), symptom)


def test_patchify_not_implemented():
    with prints_not_implemented():
        check.patchify(not_implemented)


# --- exercise 4: dense_block ----------------------------------------------------------------------
def _dense(x, W_f, W_g, dilation, pad="left", delay=None, taps=(0, 1), acts=(torch.tanh, torch.sigmoid),
           swap_weights=False, present=True, past=True, concat="x, new", combine="product"):
    """A dense block written as a learner would, with x_{t-d} from F.pad (or torch.roll)."""
    T = x.shape[1]
    d = dilation if delay is None else delay
    if pad == "left":
        x_past = F.pad(x, (0, 0, d, 0))[:, :T]               # x_{t-d}, zeros for t < d
    elif pad == "left, not cut":
        x_past = F.pad(x, (0, 0, d, 0))                      # T + d steps
    elif pad == "left, last T":
        x_past = F.pad(x, (0, 0, d, 0))[:, -T:]              # x itself
    elif pad == "features":
        x_past = F.pad(x, (d, 0))[:, :T]                     # pads the last axis: (B, T, d_in + d)
    elif pad == "features, cut":
        x_past = F.pad(x, (d, 0))[..., :x.shape[-1]]         # the features shifted by d, not the steps
    elif pad == "right":
        x_past = F.pad(x, (0, 0, 0, d))[:, d:]               # x_{t+d}: the future
    else:
        x_past = torch.roll(x, d, dims=1)                    # wraps the end round to the start
    if swap_weights:
        W_f, W_g = W_g, W_f

    def conv(W):
        return (x @ W[taps[0]] if present else 0) + (x_past @ W[taps[1]] if past else 0)
    f, g = acts[0](conv(W_f)), acts[1](conv(W_g))
    new = f + g if combine == "sum" else f * g
    return {"x, new": lambda: torch.cat([x, new], -1), "new, x": lambda: torch.cat([new, x], -1),
            "new": lambda: new, "dim 1": lambda: torch.cat([x, new], dim=1)}[concat]()


def _dense_conv1d(x, W_f, W_g, dilation, padding="left", keep="first", concat=True, transpose=True):
    """A dense block written with F.conv1d, whose kernel tap 0 meets the older input x_{t-d}."""
    T = x.shape[1]
    xt = x.transpose(1, 2) if transpose else x               # (B, d_in, T)

    def conv(W):
        kernel = torch.stack([W[1].T, W[0].T], dim=-1)       # (filters, d_in, 2)
        if padding == "left":
            out = F.conv1d(F.pad(xt, (dilation, 0)), kernel, dilation=dilation)
        elif padding == "none":
            out = F.conv1d(xt, kernel, dilation=dilation)
        elif padding == "same":
            out = F.conv1d(xt, kernel, dilation=dilation, padding="same")
        else:                                                # both sides: T + d steps
            out = F.conv1d(xt, kernel, dilation=dilation, padding=dilation)
            out = {"first": out[..., :T], "last": out[..., -T:], "all": out}[keep]
        return out.transpose(1, 2)
    new = torch.tanh(conv(W_f)) * torch.sigmoid(conv(W_g))
    return torch.cat([x, new], dim=-1) if concat else new


_STEPS_DIFFER = "^[^\n]*could not be concatenated: [^\n]* numbers of steps"    # the first line of the message


def test_dense_block_reference_is_the_formula():
    g = torch.Generator().manual_seed(0)
    B, T, d_in, filters, d = 2, 7, 3, 4, 2
    x, W_f, W_g = torch.randn(B, T, d_in, generator=g), torch.randn(2, d_in, filters, generator=g), \
        torch.randn(2, d_in, filters, generator=g)
    out = check.dense_block_reference(x, W_f, W_g, d)
    assert out.shape == (B, T, d_in + filters) and torch.equal(out[..., :d_in], x)
    for t in range(T):
        past = x[:, t - d] if t >= d else torch.zeros(B, d_in)
        new = torch.tanh(x[:, t] @ W_f[0] + past @ W_f[1]) * torch.sigmoid(x[:, t] @ W_g[0] + past @ W_g[1])
        assert torch.allclose(out[:, t, d_in:], new, atol=1e-6)


def test_dense_block_reference_keeps_the_global_seed():
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    check.dense_block_reference(torch.randn(1, 4, 2), torch.randn(2, 2, 3), torch.randn(2, 2, 3), 1)
    torch.manual_seed(0)
    assert torch.equal(torch.rand(3), expected)


def test_dense_block_accepts_reference():
    check.dense_block(check.dense_block_reference)


@pytest.mark.parametrize("answer", [
    lambda *a: _dense(*a),
    lambda *a: _dense_conv1d(*a, padding="left"),
    lambda *a: _dense_conv1d(*a, padding="both", keep="first"),
], ids=["pad-and-slice", "conv1d-left-padded", "conv1d-both-padded-first-T"])
def test_dense_block_accepts_correct_answers(answer):
    check.dense_block(answer)


@pytest.mark.parametrize("answer, symptom", [
    (lambda *a: _dense(*a, pad="right"), r"future: step t is mixed with x_\{t\+d\}.*padded on the right"),
    (lambda *a: _dense(*a, pad="roll"), "torch.roll wraps"),
    (lambda *a: _dense(*a, pad="left, last T"), r"the delayed sequence is x itself.*FIRST T steps"),
    (lambda *a: _dense(*a, pad="left, not cut"), r"x_\{t−d\} has T \+ d = \d+ steps.*FIRST T steps"),
    (lambda *a: _dense(*a, pad="features"), r"F.pad\(x, \(d, 0\)\) pads the LAST axis, the features"),
    (lambda *a: _dense(*a, pad="features, cut"), r"x_\{t−d\} is x shifted along the features, not the steps"),
    (lambda *a: _dense_conv1d(*a, padding="both", keep="last"), "looks into the future"),
    (lambda *a: _dense_conv1d(*a, padding="same"), "looks into the future"),
    (lambda *a: _dense_conv1d(*a, padding="none"), _STEPS_DIFFER),
    (lambda *a: _dense_conv1d(*a, padding="both", keep="all"), _STEPS_DIFFER),
    (lambda *a: _dense_conv1d(*a, padding="none", concat=False), "^[^\n]*dropped d = 4 steps"),
    (lambda *a: _dense_conv1d(*a, padding="both", keep="all", concat=False), "^[^\n]*both sides adds steps"),
    (lambda *a: _dense_conv1d(*a, transpose=False), r"F.conv1d takes x as \(B, channels, T\)"),
    (lambda x, W_f, W_g, d: _dense(x, W_f, W_g, 1), "dilation is ignored"),
    (lambda *a: _dense(*a, delay=a[3] - 1), r"off by one: step t is mixed with x_\{t−d\+1\}"),
    (lambda *a: _dense(*a, delay=a[3] + 1), r"off by one: step t is mixed with x_\{t−d−1\}"),
    (lambda *a: _dense(*a, taps=(1, 0)), "two taps are swapped"),
    (lambda *a: _dense(*a, acts=(torch.sigmoid, torch.tanh)), "tanh and σ are swapped"),
    (lambda *a: _dense(*a, swap_weights=True), "tanh and σ are swapped"),
    (lambda *a: _dense(*a, acts=(torch.tanh, lambda z: 1.0)), "the gate is missing"),
    (lambda *a: _dense(*a, acts=(torch.tanh, torch.tanh)), "the gate goes through tanh"),
    (lambda *a: _dense(*a, acts=(torch.sigmoid, torch.sigmoid)), "the filter goes through σ"),
    (lambda *a: _dense(*a, acts=(torch.relu, torch.sigmoid)), "the filter goes through ReLU"),
    (lambda *a: _dense(*a, combine="sum"), "are added: the gate MULTIPLIES the filter"),
    (lambda *a: _dense(*a, present=False), "the present step is missing"),
    (lambda *a: _dense(*a, past=False), "the past step is missing"),
    (lambda *a: _dense(*a, concat="new"), r"\[x, new features\] concatenated on the last axis"),
    (lambda *a: _dense(*a, concat="new, x"), "concatenated in the wrong order"),
    (lambda *a: _dense(*a, concat="dim 1"), r"concatenated along axis 1: .*LAST axis"),
    (lambda *a: None, "forget to `return`"),
])
def test_dense_block_names_mistakes(answer, symptom):
    named(check.dense_block, answer, symptom)


def test_dense_block_rejects_future_leak_it_cannot_name():
    def leaky(x, W_f, W_g, d):            # right values on the test inputs' past, but peeks at the last step
        out = check.dense_block_reference(x, W_f, W_g, d)
        return out + 0.1 * x[:, -1:].sum(-1, keepdim=True)
    named(check.dense_block, leaky, r"changed when only the inputs after step \d+ changed")


def test_dense_block_not_implemented():
    with prints_not_implemented():
        check.dense_block(not_implemented)


# --- exercise 5: causal_attention_block ------------------------------------------------------------
def _causal(x, W_q, W_k, W_v, mask="causal", scale="d_key", fill=float("-inf"), softmax_dim=-1, concat="x, read",
            normalise="sum", values="v", transpose_weights=False, transpose_W=False, k_T="transpose",
            mask_dtype=torch.bool, mask_size="T"):
    T = x.shape[1]
    if transpose_W:
        q, k, v = x @ W_q.T, x @ W_k.T, x @ W_v.T
    else:
        q, k, v = x @ W_q, x @ W_k, x @ W_v
    if values == "x":
        v = x
    size = {"d_key": k.size(-1), "none": 1, "d_value": W_v.shape[1], "T": T, "d_in": x.shape[-1],
            "d_key²": k.size(-1) ** 2}[scale]
    keys = {"transpose": lambda: k.transpose(1, 2), ".T": lambda: k.T}[k_T]()
    scores = q @ keys / math.sqrt(size)
    n = T if mask_size == "T" else x.shape[-1]
    ones = torch.ones(n, n, dtype=torch.bool)
    keep = {"causal": causal_mask(n), "flipped": causal_mask(n).T, "none": ones,
            "one ahead": torch.tril(ones, 1), "no diagonal": torch.tril(ones, -1)}.get(mask)
    if mask_dtype != torch.bool:                              # a 0/1 float mask, then ~ on it
        keep = keep.to(mask_dtype)
    if mask == "inverted":                                    # the future kept, the past masked
        scores = scores.masked_fill(causal_mask(T), fill)
        weights = torch.softmax(scores, dim=softmax_dim)
    elif normalise == "after":
        weights = torch.softmax(scores, dim=softmax_dim) * keep
    elif normalise == "max":
        e = torch.exp(scores.masked_fill(~keep, fill))
        weights = e / e.amax(-1, keepdim=True)
    else:
        weights = torch.softmax(scores.masked_fill(~keep, fill), dim=softmax_dim)
    read = (weights.transpose(1, 2) if transpose_weights else weights) @ v
    out = {"x, read": lambda: torch.cat([x, read], -1), "read, x": lambda: torch.cat([read, x], -1),
           "read": lambda: read, "dim 1": lambda: torch.cat([x, read], dim=1)}[concat]()
    return out, weights


def test_causal_block_accepts_reference():
    check.causal_attention_block(causal_attention_block)


def test_causal_block_accepts_a_large_negative_fill():
    check.causal_attention_block(lambda *a: _causal(*a, fill=-1e9))


@pytest.mark.parametrize("kwargs, symptom", [
    (dict(mask="flipped"), "mask is flipped"),
    (dict(mask="none"), "no causal mask"),
    (dict(mask="one ahead"), "mask is off by one"),
    (dict(mask="no diagonal"), "leaves out the diagonal"),
    (dict(mask="no diagonal", fill=-1e9), r"leaves out the diagonal .*finite fill such as -1e9 .*spread evenly"),
    (dict(mask="inverted"), r"the mask is inverted: causal_mask\(T\) is True where query t MAY attend"),
    (dict(normalise="after"), "mask is applied after the softmax"),
    (dict(normalise="max"), "divided by their largest value, not by their sum"),
    (dict(scale="none"), "not divided by √d_key"),
    (dict(scale="d_value"), r"divided by √d_value \(the size of a value\)"),
    (dict(scale="T"), r"divided by √T \(the number of steps\)"),
    (dict(scale="d_in"), r"divided by √d_in \(the size of an input\)"),
    (dict(scale="d_key²"), "divided by d_key, not by its square root"),
    (dict(values="x"), "mixes x itself, not the values"),
    (dict(transpose_weights=True), "transposed weights"),
    (dict(fill=0.0), "instead of -inf"),
    (dict(softmax_dim=1), "over the queries"),
    (dict(softmax_dim=0), r"F.softmax without dim= picks dim 0"),
    (dict(concat="read"), r"\[x, read\] concatenated"),
    (dict(concat="read, x"), "wrong order"),
    (dict(concat="dim 1"), r"x and the read-out are concatenated along axis 1: .*LAST axis"),
    (dict(transpose_W=True), r"a weight matrix was transposed: .*q = x @ W_q"),
    (dict(k_T=".T"), r"`\.T` on a 3-D tensor reverses all three axes"),
    (dict(mask_dtype=torch.float32), "the mask must be boolean"),
    (dict(mask_size="d_in"), r"the mask has the wrong size: it must be \(T, T\)"),
])
def test_causal_block_names_mistakes(kwargs, symptom):
    named(check.causal_attention_block, lambda *a: _causal(*a, **kwargs), symptom)


@pytest.mark.parametrize("answer, symptom", [
    (lambda *a: causal_attention_block(*a)[0], r"return 2 things, as `return out, weights`"),
    (lambda *a: causal_attention_block(*a)[::-1], r"wrong order: you return \(weights, out\)"),
])
def test_causal_block_names_wrong_returns(answer, symptom):
    named(check.causal_attention_block, answer, symptom)


def test_causal_block_rejects_future_leak_it_cannot_name():
    def leaky(x, W_q, W_k, W_v):        # correct weights, but the read-out peeks one step ahead
        out, weights = causal_attention_block(x, W_q, W_k, W_v)
        return out + 0.1 * torch.roll(x, -1, dims=1).sum(-1, keepdim=True), weights
    named(check.causal_attention_block, leaky, r"changed when only the inputs after step \d+ changed")


def test_causal_block_not_implemented():
    with prints_not_implemented():
        check.causal_attention_block(not_implemented)


# --- more slips a learner makes, each named ---------------------------------------------------------
def _attention_2d_slip(x, W_f, W_g, W_h, W_v, slip):
    B, C, H, W = x.shape
    k = conv1x1(x, W_f).flatten(2).transpose(1, 2)
    q = conv1x1(x, W_f if slip == "queries from W_f" else W_g).flatten(2).transpose(1, 2)
    v = conv1x1(x, W_g if slip == "values from W_g" else W_h).flatten(2).transpose(1, 2)
    scores = q @ k.transpose(1, 2)
    if slip == "scaled after the softmax":
        weights = torch.softmax(scores, dim=-1) / math.sqrt(k.size(-1))
    else:
        weights = torch.softmax(scores / math.sqrt(k.size(-1)), dim=-1)
    read = (weights @ v).transpose(1, 2)
    read = read.reshape(B, -1, W, H).transpose(2, 3) if slip == "W, H" else read.reshape(B, -1, H, W)
    read = read.reshape(B, -1, W, H) if slip == "(W, H)" else read
    o = conv1x1(read, W_v)
    return (x + o if slip == "residual" else o), weights


@pytest.mark.parametrize("slip, symptom", [
    ("residual", r"o includes x: .*exercise 2"),
    ("scaled after the softmax", "divided by √d_key AFTER the softmax"),
    ("values from W_g", r"the values are h\(x\) = conv1x1\(x, W_h\)"),
    ("queries from W_f", "the queries and the keys come from the same matrix"),
    ("W, H", r"not \(B, C̄, W, H\)"),
    ("(W, H)", r"o has shape \(B, C, W, H\) = \(\d+, \d+, \d+, \d+\), its two sides swapped"),
])
def test_self_attention_2d_names_more_mistakes(slip, symptom):
    named(check.self_attention_2d, lambda *a: _attention_2d_slip(*a, slip), symptom)


def test_block_that_keeps_the_transposed_weights_is_named():
    class KeepsTransposed(SelfAttention2d):
        def forward(self, x):
            y = super().forward(x)
            self.attn_weights = self.attn_weights.transpose(1, 2)
            return y
    named(check.self_attention_block, KeepsTransposed, "self.attn_weights is transposed")


def _dense_slip(x, W_f, W_g, d, slip):
    T = x.shape[1]
    past = F.pad(x, (0, 0, d, 0))[:, :T]
    if slip == "gate from W_f":
        W_g = W_f
    taps = (0, 0) if slip == "one tap" else (0, 1)
    new = torch.tanh(x @ W_f[taps[0]] + past @ W_f[taps[1]]) * torch.sigmoid(x @ W_g[taps[0]] + past @ W_g[taps[1]])
    return torch.cat([past if slip == "x_{t-d} first" else x, new], dim=-1)


@pytest.mark.parametrize("slip, symptom", [
    ("gate from W_f", "the gate uses W_f"),
    ("one tap", r"one tap serves both steps"),
    ("x_{t-d} first", r"starts with the delayed x_\{t−d\}"),
])
def test_dense_block_names_more_mistakes(slip, symptom):
    named(check.dense_block, lambda *a: _dense_slip(*a, slip), symptom)


def test_dense_block_accepts_roll_with_the_wrapped_steps_zeroed():
    def rolled(x, W_f, W_g, d):
        past = torch.roll(x, d, dims=1)
        past[:, :d] = 0
        return torch.cat([x, torch.tanh(x @ W_f[0] + past @ W_f[1]) * torch.sigmoid(x @ W_g[0] + past @ W_g[1])], -1)
    check.dense_block(rolled)


def _causal_slip(x, W_q, W_k, W_v, slip):
    out, weights = causal_attention_block(x, W_q, W_k, W_v)
    v = x @ W_v
    if slip in ("keys from W_q", "queries from W_k"):
        return causal_attention_block(x, *((W_q, W_q) if slip == "keys from W_q" else (W_k, W_k)), W_v)
    if slip in ("uniform weights", "identity weights"):         # the read-out right, the weights made up
        T = x.shape[1]
        made_up = causal_mask(T).float() / causal_mask(T).sum(-1, keepdim=True) if slip == "uniform weights" \
            else torch.eye(T)
        return out, made_up.expand(x.shape[0], T, T)
    if slip == "values":
        return torch.cat([x, v], -1), weights
    return torch.cat([x @ W_q, weights @ v], -1), weights          # "q first"


@pytest.mark.parametrize("slip, symptom", [
    ("values", "the values themselves are concatenated, not the read-out"),
    ("q first", r"the output has \d+ features, not d_in \+ d_value"),
    ("keys from W_q", "the queries and the keys come from the same matrix W_q"),
    ("queries from W_k", "the queries and the keys come from the same matrix W_k"),
    ("uniform weights", r"your output is right, but the weights are uniform over the steps s <= t"),
    ("identity weights", "your output is right, but the weights you return are wrong"),
])
def test_causal_block_names_more_mistakes(slip, symptom):
    named(check.causal_attention_block, lambda *a: _causal_slip(*a, slip), symptom)


def test_causal_block_accepts_weights_masked_after_the_softmax_and_renormalised():
    def renormalised(x, W_q, W_k, W_v):
        T = x.shape[1]
        q, k, v = x @ W_q, x @ W_k, x @ W_v
        weights = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(k.size(-1)), -1) * causal_mask(T)
        weights = weights / weights.sum(-1, keepdim=True)
        return torch.cat([x, weights @ v], -1), weights
    check.causal_attention_block(renormalised)


def test_dense_block_with_a_shifted_copy_whose_first_steps_stay_x_is_named():
    def clone_not_zeroed(x, W_f, W_g, d):            # past = x.clone(): the first d steps keep x_t, not 0
        past = x.clone()
        past[:, d:] = x[:, :-d]
        return torch.cat([x, torch.tanh(x @ W_f[0] + past @ W_f[1]) * torch.sigmoid(x @ W_g[0] + past @ W_g[1])], -1)
    named(check.dense_block, clone_not_zeroed, r"the first d = \d+ steps of x_\{t−d\} are x_t itself, not 0")


def _causal_copy_slip(x, W_q, W_k, W_v, slip):
    T = x.shape[1]
    q, k = x @ W_q, x @ W_k
    v = x @ {"values from W_k": W_k, "values from W_q": W_q}.get(slip, W_v)
    scores = q @ k.transpose(1, 2) / math.sqrt(k.size(-1))
    if slip == "raw scores":
        scores = q @ k.transpose(1, 2)
    masked = scores.masked_fill(~causal_mask(T), -1e9 if slip == "scores, -1e9" else float("-inf"))
    weights = torch.softmax(masked, -1)
    out = torch.cat([x, weights @ v], -1)
    return (out, masked) if slip in ("scores", "scores, -1e9", "raw scores") else (out, weights)


@pytest.mark.parametrize("slip, symptom", [
    ("values from W_k", r"the values are computed with W_k, not W_v .*W_k only makes the keys"),
    ("values from W_q", r"the values are computed with W_q, not W_v .*W_q only makes the queries"),
    ("scores", r"the weights you return are the masked scores q·k/√d_key, not the weights: .*softmax"),
    ("scores, -1e9", r"the weights you return are the masked scores q·k/√d_key, not the weights"),
    ("raw scores", r"the weights you return are the masked scores q·k, not even scaled"),
])
def test_causal_block_copy_paste_and_returned_scores_are_named(slip, symptom):
    named(check.causal_attention_block, lambda *a: _causal_copy_slip(*a, slip), symptom)
