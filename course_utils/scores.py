"""Attention over encoder states: masked softmax, every classic score function, the context vector.

A score function maps the decoder state s (B, d_s) and the encoder states h (B, T, d_h) to one
score per source position, e (B, T). The weights are alpha = masked_softmax(e, mask) and the
context is c = sum_i alpha_i h_i (B, d_h).

    name        score e_i                      paper
    cosine      beta * cos(s, h_i)             Graves et al. 2014 (Neural Turing Machines)
    additive    v_a^T tanh(W_a [s; h_i])       Bahdanau et al. 2015 (Luong's "concat")
    location    (W_a s)_i                      Luong et al. 2015 (weights = softmax(W_a s))
    general     s^T W_a h_i                    Luong et al. 2015
    dot         s^T h_i                        Luong et al. 2015
    scaled_dot  s^T h_i / sqrt(d)              Vaswani et al. 2017

Beyond global soft attention (lesson 04): Luong's local-p attention (`predicted_position`,
`local_p_weights`, `local_p`, `LocalPAttention`) and the REINFORCE loss of hard attention
(`reinforce_loss`).

Masks are boolean, True = may attend (keep), False = masked out; a fully masked row gets zero
weights. Attention modules keep their last weights on `self.attn_weights` (for plots).
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from .masks import check_mask, masked_softmax  # noqa: F401 (masked_softmax: lesson 03's reference)


def context_vector(weights, h):
    """c = sum_i alpha_i h_i: weights (B, T), h (B, T, d_h) -> (B, d_h)."""
    if weights.dim() != 2 or h.dim() != 3 or tuple(weights.shape) != tuple(h.shape[:2]):
        raise ValueError(f"context_vector takes weights (B, T) and h (B, T, d_h) with the same B and T, got "
                         f"{tuple(weights.shape)} and {tuple(h.shape)}")
    return torch.einsum("bt,btd->bd", weights, h)


# --- the score functions: s (B, d_s), h (B, T, d_h) -> e (B, T) --------------------------------

def _same_size(s, h, name):
    if s.dim() != 2 or h.dim() != 3 or s.shape[0] != h.shape[0]:
        raise ValueError(f"{name} takes s (B, d_s) and h (B, T, d_h) with the same batch size B, got "
                         f"{tuple(s.shape)} and {tuple(h.shape)}")
    if s.shape[-1] != h.shape[-1]:
        raise ValueError(f"{name} needs s and h of the same size, got d_s={s.shape[-1]}, "
                         f"d_h={h.shape[-1]} (use the 'general' score to compare different sizes)")


def cosine_score(s, h, beta=1.0, eps=1e-8):
    """Content-based (Graves): beta * cos(s, h_i); beta (the key strength) sharpens the weights."""
    _same_size(s, h, "cosine_score")
    return beta * F.cosine_similarity(s[:, None, :], h, dim=-1, eps=eps)


def additive_score(s, h, W_a, v_a):
    """Additive / concat (Bahdanau): v_a^T tanh(W_a [s; h_i]); W_a (d_a, d_s + d_h), v_a (d_a,)."""
    B, T, _ = h.shape
    s_h = torch.cat([s[:, None, :].expand(B, T, s.shape[-1]), h], dim=-1)  # (B, T, d_s + d_h)
    return torch.tanh(s_h @ W_a.T) @ v_a                                   # (B, T)


def location_score(s, W_a, T):
    """Location-based (Luong): the first T entries of W_a s; W_a (max_len, d_s). Ignores h."""
    if T > W_a.shape[0]:
        raise ValueError(f"location_score was built for at most {W_a.shape[0]} source positions, got {T}")
    return (s @ W_a.T)[:, :T]


def general_score(s, h, W_a):
    """General (Luong): s^T W_a h_i; W_a (d_s, d_h)."""
    return torch.einsum("bd,de,bte->bt", s, W_a, h)


def dot_score(s, h):
    """Dot (Luong): s^T h_i."""
    _same_size(s, h, "dot_score")
    return torch.einsum("bd,btd->bt", s, h)


def scaled_dot_score(s, h):
    """Scaled dot (Vaswani): s^T h_i / sqrt(d)."""
    _same_size(s, h, "scaled_dot_score")
    return torch.einsum("bd,btd->bt", s, h) / math.sqrt(s.shape[-1])


# --- the same as modules with their parameters: forward(s, h) -> e ------------------------------

class CosineScore(nn.Module):
    "beta * cos(s, h_i), with the key strength beta learned (one number)"

    def __init__(self, d_s, d_h, beta=5.0):
        super().__init__()
        if d_s != d_h:
            raise ValueError(f"CosineScore needs d_s == d_h, got {d_s} and {d_h}")
        self.beta = nn.Parameter(torch.tensor(float(beta)))

    def forward(self, s, h):
        return cosine_score(s, h, self.beta)


class AdditiveScore(nn.Module):
    "v_a^T tanh(W_a [s; h_i])"

    def __init__(self, d_s, d_h, d_attn):
        super().__init__()
        self.d_s = d_s
        self.W_a = nn.Linear(d_s + d_h, d_attn, bias=False)
        self.v_a = nn.Linear(d_attn, 1, bias=False)

    def forward(self, s, h):
        # W_a [s; h_i] = W_s s + W_h h_i: the same numbers as additive_score, without the concatenation
        W_s, W_h = self.W_a.weight[:, :self.d_s], self.W_a.weight[:, self.d_s:]
        return torch.tanh((s @ W_s.T)[:, None, :] + h @ W_h.T) @ self.v_a.weight[0]


class LocationScore(nn.Module):
    "(W_a s)_i: the weights depend on the decoder state only, not on the content of h"

    def __init__(self, d_s, max_len):
        super().__init__()
        self.W_a = nn.Linear(d_s, max_len, bias=False)

    def forward(self, s, h):
        return location_score(s, self.W_a.weight, h.shape[1])


class GeneralScore(nn.Module):
    "s^T W_a h_i"

    def __init__(self, d_s, d_h):
        super().__init__()
        self.W_a = nn.Linear(d_h, d_s, bias=False)  # weight (d_s, d_h): W_a h_i = self.W_a(h_i)

    def forward(self, s, h):
        return general_score(s, h, self.W_a.weight)


class DotScore(nn.Module):
    "s^T h_i"

    def forward(self, s, h):
        return dot_score(s, h)


class ScaledDotScore(nn.Module):
    "s^T h_i / sqrt(d)"

    def forward(self, s, h):
        return scaled_dot_score(s, h)


SCORE_NAMES = ("cosine", "additive", "location", "general", "dot", "scaled_dot")


def make_score(name, d_s, d_h, d_attn=64, max_len=64):
    """The score module called `name` (one of SCORE_NAMES) for states of sizes d_s and d_h."""
    if name == "cosine":
        return CosineScore(d_s, d_h)
    if name == "additive":
        return AdditiveScore(d_s, d_h, d_attn)
    if name == "location":
        return LocationScore(d_s, max_len)
    if name == "general":
        return GeneralScore(d_s, d_h)
    if name == "dot":
        return DotScore()
    if name == "scaled_dot":
        return ScaledDotScore()
    raise ValueError(f"unknown score {name!r}: choose one of {SCORE_NAMES}")


class Attention(nn.Module):
    """alpha = masked_softmax(score(s, h), mask), c = sum_i alpha_i h_i; returns (c, alpha).

    s (B, d_s), h (B, T, d_h), mask (B, T) bool (True = real token) -> c (B, d_h), alpha (B, T).
    """

    def __init__(self, score):
        super().__init__()
        self.score = score
        self.attn_weights = None

    def forward(self, s, h, mask=None):
        e = self.score(s, h)                # (B, T)
        alpha = masked_softmax(e, mask)     # (B, T)
        self.attn_weights = alpha.detach()
        return context_vector(alpha, h), alpha


class AdditiveAttention(Attention):
    """Bahdanau's attention: e_i = v_a^T tanh(W_a [s; h_i]), alpha = masked softmax, c = sum alpha_i h_i."""

    def __init__(self, d_s, d_h, d_attn):
        super().__init__(AdditiveScore(d_s, d_h, d_attn))


# --- local attention (Luong's local-p) ---------------------------------------------------------

def predicted_position(s, W_p, v_p, S):
    """p_t = S * sigmoid(v_p^T tanh(W_p s)) in [0, S]: s (B, d_s), S (B,) -> (B,).

    Luong et al. take S = the source length; with positions counted from 0, S = length - 1
    keeps p_t on the sentence."""
    return S.to(s.dtype) * torch.sigmoid(torch.tanh(s @ W_p.T) @ v_p)


def local_p_weights(scores, mask, p, D):
    """Luong's local-p: alpha_i = softmax_window(e)_i * exp(-(i - p)^2 / (2 sigma^2)), sigma = D / 2.

    Only positions with |i - p| <= D take part in the softmax. scores (B, T), mask (B, T) or None,
    p (B,) the predicted aligned positions -> (B, T).
    """
    positions = torch.arange(scores.shape[-1], device=scores.device, dtype=scores.dtype)
    distance = positions[None, :] - p[:, None]                     # (B, T)
    window = distance.abs() <= D
    keep = window if mask is None else window & mask
    sigma = D / 2
    return masked_softmax(scores, keep) * torch.exp(-distance ** 2 / (2 * sigma ** 2))


def local_p(e, mask, s, W_p, v_p, S, D):
    """Local-p from the decoder state: p = predicted_position(s, W_p, v_p, S), then the window weights.

    e (B, T) scores, mask (B, T) bool or None, s (B, d_s), W_p (d_p, d_s), v_p (d_p,), S (B,) the
    last position (length - 1), D the half-width -> p (B,), alpha (B, T).
    """
    p = predicted_position(s, W_p, v_p, S)
    return p, local_p_weights(e, mask, p, D)


class LocalPAttention(nn.Module):
    """Local-p attention: predict the aligned position p_t, attend to a Gaussian window around it."""

    def __init__(self, score, d_s, D=2, d_p=32):
        super().__init__()
        self.score, self.D = score, D
        self.W_p = nn.Linear(d_s, d_p, bias=False)
        self.v_p = nn.Linear(d_p, 1, bias=False)
        self.attn_weights = None

    def forward(self, s, h, mask=None):
        lengths = mask.sum(-1) if mask is not None else torch.full((h.shape[0],), h.shape[1])
        _, alpha = local_p(self.score(s, h), mask, s, self.W_p.weight, self.v_p.weight[0], lengths - 1, self.D)
        self.attn_weights = alpha.detach()
        return context_vector(alpha, h), alpha


# --- hard attention: REINFORCE ------------------------------------------------------------------

def reinforce_loss(log_alpha, sampled, reward, baseline):
    """REINFORCE for hard attention: -(r - b) log alpha[sampled], averaged over the batch.

    log_alpha (B, T) the log-weights, sampled (B,) the positions drawn from alpha, reward (B,),
    baseline a number, () or (B,) -> a scalar. The reward and the baseline are constants for the
    gradient (detached): only log alpha[sampled] is differentiated, so gradient descent raises the
    log-probability of samples that did better than the baseline and lowers the others.
    """
    log_p = log_alpha.gather(-1, sampled[:, None].long())[:, 0]          # (B,) log alpha[sampled]
    advantage = torch.as_tensor(reward - baseline).detach()               # (B,) r - b, a constant
    return -(advantage * log_p).mean()
