"""Checks for lesson 04: the attention zoo, one check per score function.

Every score function maps s (B, d_s) and h (B, T, d_h) to scores e (B, T), before any softmax.
"""
import math

import torch

from .. import scores as ref
from .core import call, exercise, expect_close, expect_shape, randn, rng


def _inputs(seed, B, T, d_s, d_h, scale=1.0):
    g = rng(seed)
    return g, randn(g, B, d_s, scale=scale), randn(g, B, T, d_h, scale=scale)


def _dot(s, h):
    return torch.einsum("bd,btd->bt", s, h)


@exercise("cosine score (Graves)")
def cosine_score(fn):
    """fn(s (B, d), h (B, T, d), beta) -> beta * cos(s, h_i), (B, T)."""
    tests = 0
    for seed, (B, T, d, beta) in enumerate([(2, 5, 4, 1.0), (3, 4, 6, 5.0), (1, 7, 3, 2.5)]):
        g, s, h = _inputs(seed, B, T, d, d, scale=2.0)
        e = call(fn, s.clone(), h.clone(), beta)
        expect_shape(e, (B, T), f"e (B={B}, T={T})")
        norm_h = h.norm(dim=-1)
        expect_close(e, ref.cosine_score(s, h, beta), f"e (d={d}, beta={beta})", mistakes={
            "the scores are plain dot products: divide s·h_i by |s| |h_i| (cosine similarity)":
                beta * _dot(s, h),
            "only h_i is normalised: divide s·h_i by BOTH norms, |s| and |h_i|": beta * _dot(s, h) / norm_h,
            "beta is missing: multiply the cosine by the key strength beta": ref.cosine_score(s, h, 1.0),
        } if beta != 1.0 else {
            "the scores are plain dot products: divide s·h_i by |s| |h_i| (cosine similarity)": _dot(s, h),
            "only h_i is normalised: divide s·h_i by BOTH norms, |s| and |h_i|": _dot(s, h) / norm_h,
        })
        tests += 1
    return tests


@exercise("additive score without the concatenation")
def additive_score(fn):
    """fn(s, h, W_a (d_a, d_s + d_h), v_a (d_a,)) -> v_a^T tanh(W_s s + W_h h_i), the same as lesson 03."""
    tests = 0
    for seed, (B, T, d_s, d_h, d_a) in enumerate([(2, 5, 4, 4, 3), (3, 6, 5, 7, 4), (1, 3, 6, 6, 8)]):
        g, s, h = _inputs(seed, B, T, d_s, d_h)
        W_a, v_a = randn(g, d_a, d_s + d_h, scale=0.7), randn(g, d_a)
        e = call(fn, s.clone(), h.clone(), W_a, v_a)
        W_s, W_h = W_a[:, :d_s], W_a[:, d_s:]
        mistakes = {
            "the tanh is missing: e_i = v_a^T tanh(W_s s + W_h h_i)":
                ((s @ W_s.T)[:, None] + h @ W_h.T) @ v_a,
        }
        if d_s == d_h:
            mistakes["the blocks of W_a are swapped: its first d_s columns multiply s, the rest multiply h_i"] = \
                torch.tanh((s @ W_h.T)[:, None] + h @ W_s.T) @ v_a
        expect_close(e, ref.additive_score(s, h, W_a, v_a), f"e (d_s={d_s}, d_h={d_h})", mistakes=mistakes)
        tests += 1
    return tests


@exercise("location score (Luong)")
def location_score(fn):
    """fn(s (B, d_s), W_a (max_len, d_s), T) -> the first T entries of W_a s, (B, T)."""
    tests = 0
    for seed, (B, T, d_s, max_len) in enumerate([(2, 4, 5, 7), (3, 6, 3, 6), (1, 2, 4, 9)]):
        g = rng(seed)
        s, W_a = randn(g, B, d_s), randn(g, max_len, d_s)
        e = call(fn, s.clone(), W_a.clone(), T)
        full = s @ W_a.T
        mistakes = {
            "you returned weights (a softmax): return the raw scores W_a s; the masked softmax comes later":
                torch.softmax(full[:, :T], -1),
            "the scores keep all max_len positions: keep the first T (one per source position)": full,
        }
        if T < max_len:
            mistakes["the scores are the LAST T entries of W_a s: keep the first T (positions 0..T-1)"] = \
                full[:, -T:]
        expect_close(e, ref.location_score(s, W_a, T), f"e (T={T}, max_len={max_len})", mistakes=mistakes)
        tests += 1
    return tests


@exercise("general score (Luong)")
def general_score(fn):
    """fn(s (B, d_s), h (B, T, d_h), W_a (d_s, d_h)) -> s^T W_a h_i, (B, T)."""
    tests = 0
    for seed, (B, T, d_s, d_h) in enumerate([(2, 5, 4, 4), (3, 4, 3, 6), (1, 6, 5, 5)]):
        g, s, h = _inputs(seed, B, T, d_s, d_h)
        W_a = randn(g, d_s, d_h)
        e = call(fn, s.clone(), h.clone(), W_a.clone())
        mistakes = {}
        if d_s == d_h:
            mistakes = {
                "W_a is transposed: the score is s^T W_a h_i, with W_a of shape (d_s, d_h)":
                    ref.general_score(s, h, W_a.T),
                "W_a is missing: the general score is s^T W_a h_i, not the dot product": _dot(s, h),
            }
        expect_close(e, ref.general_score(s, h, W_a), f"e (d_s={d_s}, d_h={d_h})", mistakes=mistakes)
        tests += 1
    return tests


@exercise("dot score (Luong)")
def dot_score(fn):
    """fn(s (B, d), h (B, T, d)) -> s^T h_i, (B, T)."""
    tests = 0
    for seed, (B, T, d) in enumerate([(2, 5, 4), (3, 3, 9), (1, 6, 16)]):
        g, s, h = _inputs(seed, B, T, d, d)
        e = call(fn, s.clone(), h.clone())
        expect_close(e, ref.dot_score(s, h), f"e (d={d})", mistakes={
            "the scores are scaled by 1/sqrt(d): that is the scaled dot score; here return s·h_i":
                _dot(s, h) / math.sqrt(d),
            "the scores are cosine similarities: do not normalise, return s·h_i": ref.cosine_score(s, h),
            "the products are not summed over the features: e_i = sum_k s_k h_ik, shape (B, T)":
                s[:, None, :] * h,
        })
        tests += 1
    return tests


@exercise("scaled dot score (Vaswani)")
def scaled_dot_score(fn):
    """fn(s (B, d), h (B, T, d)) -> s^T h_i / sqrt(d), (B, T)."""
    tests = 0
    for seed, (B, T, d) in enumerate([(2, 5, 4), (3, 7, 9), (1, 6, 16)]):
        g, s, h = _inputs(seed, B, T, d, d)
        e = call(fn, s.clone(), h.clone())
        expect_close(e, ref.scaled_dot_score(s, h), f"e (d={d}, T={T})", mistakes={
            "the scores are not scaled: divide s·h_i by sqrt(d)": _dot(s, h),
            "the scores are divided by d: divide by sqrt(d), which keeps their variance near 1":
                _dot(s, h) / d,
            "the scores are divided by sqrt(T): scale by the vector size d (the last axis), "
            "not by the number of positions": _dot(s, h) / math.sqrt(T),
        })
        tests += 1
    return tests
