"""Lesson 11's checks pass the references and reject planted mistakes with the right symptom."""
import math

import pytest
import torch
import torch.nn as nn

from course_utils.checks import ExerciseError
from course_utils.checks import lesson11 as check
from course_utils.snail import causal_attention_block, causal_mask
from course_utils.vision import SelfAttention2d, conv1x1, self_attention_2d
from tests.checking import prints_not_implemented


def not_implemented(*args, **kwargs):
    raise NotImplementedError()


# --- exercise 1: self_attention_2d -----------------------------------------------------------------
def _attention_2d(x, W_f, W_g, W_h, softmax_dim=-1, scale=True, swap=False, transpose_first=True):
    B, C, H, W = x.shape
    k = conv1x1(x, W_f).flatten(2).transpose(1, 2)
    q = conv1x1(x, W_g).flatten(2).transpose(1, 2)
    v = conv1x1(x, W_h).flatten(2).transpose(1, 2)
    if swap:
        q, k = k, q
    scores = q @ k.transpose(1, 2) / (math.sqrt(k.size(-1)) if scale else 1.0)
    weights = torch.softmax(scores, dim=softmax_dim)
    o = weights @ v
    o = o.transpose(1, 2).reshape(B, -1, H, W) if transpose_first else o.reshape(B, -1, H, W)
    return o, weights


def test_self_attention_2d_accepts_reference():
    check.self_attention_2d(self_attention_2d)
def test_self_attention_2d_accepts_conv2d_answer():
    def with_conv2d(x, W_f, W_g, W_h):
        B, C, H, W = x.shape
        f = nn.functional.conv2d(x, W_f[:, :, None, None]).view(B, -1, H * W)
        g = nn.functional.conv2d(x, W_g[:, :, None, None]).view(B, -1, H * W)
        h = nn.functional.conv2d(x, W_h[:, :, None, None]).view(B, -1, H * W)
        weights = torch.softmax(torch.bmm(g.transpose(1, 2), f) / f.size(1) ** 0.5, dim=2)
        return torch.bmm(h, weights.transpose(1, 2)).view(B, -1, H, W), weights
    check.self_attention_2d(with_conv2d)
@pytest.mark.parametrize("kwargs, symptom", [
    (dict(softmax_dim=1), "normalised over the queries"),
    (dict(scale=False), "not divided by √d_key"),
    (dict(swap=True), "queries and keys are swapped"),
    (dict(transpose_first=False), "scrambled"),
])
def test_self_attention_2d_rejects_mistakes(kwargs, symptom):
    with pytest.raises(ExerciseError, match=symptom):
        check.self_attention_2d(lambda *a: _attention_2d(*a, **kwargs))


def test_self_attention_2d_rejects_wrong_return():
    with pytest.raises(ExerciseError, match="should return a pair"):
        check.self_attention_2d(lambda *a: _attention_2d(*a)[0])


def test_self_attention_2d_not_implemented():
    with prints_not_implemented():
        check.self_attention_2d(not_implemented)


# --- exercise 2: SelfAttention2d (the γ-residual) --------------------------------------------------
def _block(gamma_init=0.0, residual="x + γo", as_parameter=True, keep_weights=True):
    class Block(SelfAttention2d):
        def __init__(self, channels):
            super().__init__(channels)
            if as_parameter:
                self.gamma = nn.Parameter(torch.full((1,), gamma_init))
            else:
                del self.gamma
                self.gamma = torch.full((1,), gamma_init)

        def forward(self, x):
            o, weights = self_attention_2d(x, self.f.weight[:, :, 0, 0], self.g.weight[:, :, 0, 0],
                                           self.h.weight[:, :, 0, 0])
            if keep_weights:
                self.attn_weights = weights
            return {"x + γo": x + self.gamma * o, "γo": self.gamma * o, "x + o": x + o,
                    "γx + o": self.gamma * x + o}[residual]
    return Block


def test_block_accepts_reference():
    check.self_attention_block(SelfAttention2d)
def test_block_accepts_convs_with_bias():
    class WithBias(nn.Module):
        def __init__(self, channels):
            super().__init__()
            self.f, self.g = nn.Conv2d(channels, 2, 1), nn.Conv2d(channels, 2, 1)
            self.h = nn.Conv2d(channels, channels, 1)
            self.gamma = nn.Parameter(torch.zeros(1))

        def forward(self, x):
            B, C, H, W = x.shape
            k, q, v = self.f(x).flatten(2), self.g(x).flatten(2), self.h(x).flatten(2)
            self.attn_weights = torch.softmax(q.transpose(1, 2) @ k / math.sqrt(2), dim=-1)
            return x + self.gamma * (v @ self.attn_weights.transpose(1, 2)).view(B, C, H, W)
    check.self_attention_block(WithBias)
@pytest.mark.parametrize("kwargs, symptom", [
    (dict(gamma_init=1.0), "γ should start at 0"),
    (dict(residual="γo"), "residual is missing"),
    (dict(residual="x + o"), "γ is not used"),
    (dict(residual="γx + o"), "γ multiplies the wrong term"),
    (dict(as_parameter=False), "not an nn.Parameter"),
    (dict(keep_weights=False), "self.attn_weights"),
])
def test_block_rejects_mistakes(kwargs, symptom):
    with pytest.raises(ExerciseError, match=symptom):
        check.self_attention_block(_block(**kwargs))


def test_block_rejects_missing_gamma():
    class NoGamma(SelfAttention2d):
        def __init__(self, channels):
            super().__init__(channels)
            del self.gamma
    with pytest.raises(ExerciseError, match="no attribute `gamma`"):
        check.self_attention_block(NoGamma)


def test_block_not_implemented():
    class Stub(nn.Module):
        def __init__(self, channels):
            super().__init__()
            raise NotImplementedError()
    with prints_not_implemented():
        check.self_attention_block(Stub)


# --- exercise 3: causal_attention_block ------------------------------------------------------------
def _causal(x, W_q, W_k, W_v, mask="causal", scale=True, fill=float("-inf"), softmax_dim=-1, concat="x, read"):
    T = x.shape[1]
    q, k, v = x @ W_q, x @ W_k, x @ W_v
    scores = q @ k.transpose(1, 2) / (math.sqrt(k.size(-1)) if scale else 1.0)
    keep = {"causal": causal_mask(T), "flipped": causal_mask(T).T, "none": torch.ones(T, T, dtype=torch.bool)}[mask]
    weights = torch.softmax(scores.masked_fill(~keep, fill), dim=softmax_dim)
    read = weights @ v
    out = {"x, read": lambda: torch.cat([x, read], -1), "read, x": lambda: torch.cat([read, x], -1),
           "read": lambda: read}[concat]()
    return out, weights


def test_causal_block_accepts_reference():
    check.causal_attention_block(causal_attention_block)
@pytest.mark.parametrize("kwargs, symptom", [
    (dict(mask="flipped"), "mask is flipped"),
    (dict(mask="none"), "no causal mask"),
    (dict(scale=False), "not divided by √d_key"),
    (dict(fill=0.0), "instead of -inf"),
    (dict(softmax_dim=1), "over the queries"),
    (dict(concat="read"), r"\[x, read\] concatenated"),
    (dict(concat="read, x"), "wrong order"),
])
def test_causal_block_rejects_mistakes(kwargs, symptom):
    with pytest.raises(ExerciseError, match=symptom):
        check.causal_attention_block(lambda *a: _causal(*a, **kwargs))


def test_causal_block_rejects_future_leak_it_cannot_name():
    def leaky(x, W_q, W_k, W_v):        # correct weights, but the read-out peeks one step ahead
        out, weights = causal_attention_block(x, W_q, W_k, W_v)
        return out + 0.1 * torch.roll(x, -1, dims=1).sum(-1, keepdim=True), weights
    with pytest.raises(ExerciseError):
        check.causal_attention_block(leaky)


def test_causal_block_not_implemented():
    with prints_not_implemented():
        check.causal_attention_block(not_implemented)
