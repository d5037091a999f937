"""Lesson 15, exercise 2: the absorbed decoding step of multi-head latent attention.

    absorbed_step(q_c (B, h, 1, d_h), q_r (B, h, 1, d_R), cache_c (B, t, d_c), cache_kr (B, t, d_R),
                  W_uk, W_uv (h, d_h, d_c), W_o (d_model, h d_h)) -> (B, 1, d_model)

The new position's output after W_O, computed in the latent space: W_uk folded into the query, W_uv into W_O, the
scores against the cached latents themselves. The check compares the output with the course's
(course_utils.latent_attention.absorbed_step, equal to the step that rebuilds every head's keys and values), names
the mistake whose values the answer gives, and measures the largest tensor the answer creates: a per-head key or
value of every cached position must never be built, not even one head's at a time (B, t, d_h): on sizes where that
is larger than anything the absorbed step needs (d_h > d_c + d_R, d_h > h, a long cache), the answer may create
nothing of B t d_h elements or more.
"""
import math

import torch

from ... import latent_attention as ref
from ..core import Mistake, Mistakes, exercise, expect, expect_shape, randn, single_threaded
from ..evaluation import Evaluation


def wrong(swap=False, rope=True, scale=None, mean_heads=False, newest=False, axis=-1, w_o_rows=False):
    """The absorbed step with one typical mistake (every default is the right choice)."""
    def absorbed_step(q_c, q_r, cache_c, cache_kr, W_uk, W_uv, W_o):
        d_h, d_r, h = q_c.size(-1), q_r.size(-1), W_uk.size(0)
        if newest:
            cache_c, cache_kr = cache_c[:, -1:], cache_kr[:, -1:]
        W_q_side, W_o_side = (W_uv, W_uk) if swap else (W_uk, W_uv)
        q_lat = torch.einsum("bhqd,hdc->bhqc", q_c, W_q_side)
        scores = q_lat @ cache_c[:, None].transpose(-2, -1)
        if rope:
            scores = scores + q_r @ cache_kr[:, None].transpose(-2, -1)
        scores = scores / math.sqrt({"d_h": d_h, "d_c": cache_c.size(-1), "none": 1}.get(scale, d_h + d_r))
        o_lat = scores.softmax(axis) @ cache_c[:, None]
        W_o_heads = W_o.reshape(h, d_h, W_o.size(0)).permute(2, 0, 1) if w_o_rows else W_o.view(W_o.size(0), h, d_h)
        W_ov = torch.einsum("mhd,hdc->hmc", W_o_heads, W_o_side)
        out = torch.einsum("bhqc,hmc->bqm", o_lat, W_ov)
        return out / h if mean_heads else out
    return absorbed_step


def _keys_head_by_head(q_c, q_r, cache_c, cache_kr, W_uk, W_uv, W_o):
    """The step without absorbing, one head at a time: each head's keys and values rebuilt from the cache."""
    h, d_h, _ = W_uk.shape
    out = 0
    for i in range(h):
        k, v = cache_c @ W_uk[i].T, cache_c @ W_uv[i].T                            # (B, t, d_h): one head's
        s = (q_c[:, i] @ k.transpose(1, 2) + q_r[:, i] @ cache_kr.transpose(1, 2)) / (d_h + q_r.size(-1)) ** 0.5
        out = out + (s.softmax(-1) @ v) @ W_o[:, i * d_h:(i + 1) * d_h].T
    return out


def _latents_out(q_c, q_r, cache_c, cache_kr, W_uk, W_uv, W_o):
    """Stops at the mixed latents (B, h, 1, d_c): W_UV and W_O never applied."""
    scores = (torch.einsum("bhqd,hdc->bhqc", q_c, W_uk) @ cache_c[:, None].transpose(-2, -1)
              + q_r @ cache_kr[:, None].transpose(-2, -1)) / math.sqrt(q_c.size(-1) + q_r.size(-1))
    return scores.softmax(-1) @ cache_c[:, None]


M = Mistakes(
    Mistake("keys_built", "the step creates a tensor of shape {shape}, at least as large as one head's keys or "
            "values for all {t} cached positions (B x t x d_h): the absorbed step never builds keys or values from "
            "the cached latents, for all heads or one at a time. That is what MLA's cache saves: fold W_UK into the "
            "query (q^C W_UK, d_c wide per head) and W_UV into W_O, and attend over the latents themselves",
            hint="q_lat = torch.einsum('bhqd,hdc->bhqc', q_c, W_uk); scores = q_lat @ cache_c[:, None].transpose(-2, "
            "-1) + ...; the output from weights @ cache_c[:, None] and W_O W_UV",
            shows=ref.unabsorbed_step),
    Mistake("keys_built_per_head", "the step rebuilds each head's keys or values from the cached latents, one head "
            "at a time: a tensor of shape {shape}, one head's keys of all {t} positions (B x t x d_h). Absorbed, no "
            "head needs them: fold W_UK into the query and W_UV into W_O, and attend over the latents themselves",
            hint="per head: q_lat = q_c[:, i] @ W_uk[i]; scores = q_lat @ cache_c.transpose(1, 2) + ...",
            shows=_keys_head_by_head),
    Mistake("wrong_side", "W_UK and W_UV are absorbed on the wrong sides: W_UK makes KEYS, so it folds into the "
            "query (q^C . W_UK c = (W_UKᵀ q^C) . c); W_UV makes VALUES, so it folds into W_O", shows=wrong(swap=True)),
    Mistake("no_rope", "the scores have no RoPE part: the cache holds k^R beside c, and each score is "
            "(q^C W_UK) . c_j + q^R . k^R_j", shows=wrong(rope=False)),
    Mistake("scale_dh", "the scores are scaled by 1/√d_h: queries and keys are d_h + d_R wide, so the scale is "
            "1/√(d_h + d_R), absorbed or not", shows=wrong(scale="d_h")),
    Mistake("no_scale", "the scores are not scaled: absorbed or not, they are the scores of queries and keys d_h + "
            "d_R wide, scaled by 1/√(d_h + d_R)", shows=wrong(scale="none")),
    Mistake("w_o_split", "W_O (d_model, h d_h) is split into heads the wrong way: head i reads its COLUMNS i d_h .. "
            "(i+1) d_h - 1 (reshaping the matrix itself to (h, d_h, d_model) cuts it along its rows)",
            hint="W_o.view(d_model, h, d_h) (head i: W_o[:, i*d_h:(i+1)*d_h]), or W_o.T.reshape(h, d_h, d_model)",
            shows=wrong(w_o_rows=True)),
    Mistake("scale_dc", "the scores are scaled by 1/√d_c: absorbing changes the width the dot product is computed "
            "in, not the scores, whose scale stays 1/√(d_h + d_R)", shows=wrong(scale="d_c")),
    Mistake("mean_heads", "the heads' outputs are averaged: W_O takes the heads concatenated, so after absorbing, "
            "their contributions W_O_i W_UV_i o_i are SUMMED", shows=wrong(mean_heads=True)),
    Mistake("newest_only", "the new query attends to the newest latent only: it attends over every cached "
            "position, 0 .. t-1", shows=wrong(newest=True)),
    Mistake("softmax_heads", "the softmax runs over the wrong axis: each head's weights sum to 1 over the cached "
            "positions, the last axis", shows=wrong(axis=1)),
    Mistake("latents_out", "the step returns the mixed latents {shape}: they still go through W_UV and W_O "
            "(absorbed into one matrix per head) to the output (B, 1, d_model)", shows=_latents_out),
)
VALUE_KEYS = ["wrong_side", "no_rope", "scale_dh", "no_scale", "scale_dc", "w_o_split", "mean_heads", "newest_only",
              "softmax_heads"]


def _precomputed(q_c, q_r, cache_c, cache_kr, W_uk, W_uv, W_o):
    """The absorbed matrices written with matmuls, the heads of the output summed in a loop."""
    h, d_h = W_uk.shape[:2]
    q_lat = q_c @ W_uk[None]                                                      # (B, h, 1, d_c)
    scores = torch.cat([q_lat, q_r], -1) @ torch.cat([cache_c, cache_kr], -1)[:, None].transpose(-2, -1)
    o_lat = (scores / (d_h + q_r.size(-1)) ** 0.5).softmax(-1) @ cache_c[:, None]
    return sum(o_lat[:, i] @ (W_o[:, i * d_h:(i + 1) * d_h] @ W_uv[i]).T for i in range(h))


def _head_by_head(q_c, q_r, cache_c, cache_kr, W_uk, W_uv, W_o):
    """One head at a time, in the latent space: the head's query through W_UK, its output through W_O_i W_UV_i."""
    h, d_h, _ = W_uk.shape
    out = 0
    for i in range(h):
        q_lat = q_c[:, i] @ W_uk[i]                                               # (B, 1, d_c)
        s = (q_lat @ cache_c.transpose(1, 2) + q_r[:, i] @ cache_kr.transpose(1, 2)) / (d_h + q_r.size(-1)) ** 0.5
        out = out + (s.softmax(-1) @ cache_c) @ (W_o[:, i * d_h:(i + 1) * d_h] @ W_uv[i]).T
    return out


@exercise("absorbed decoding step", reference=ref.absorbed_step, mistakes=M, right=[_precomputed, _head_by_head])
@single_threaded
def absorbed_step(ev: Evaluation, answer):
    """answer(q_c, q_r, cache_c, cache_kr, W_uk, W_uv, W_o) -> (B, 1, d_model)."""
    tests = 0
    # sizes where one head's keys of the whole cache, B t d_h, outgrow all the absorbed step needs (d_c + d_R < d_h,
    # h < d_h, h d_model < B t): the scores B h t, the cache B t (d_c + d_R), W_O W_UV h d_model d_c
    for seed, (B, h, t, d_h, d_r, d_c, d_model) in enumerate([(2, 4, 40, 8, 2, 5, 7), (3, 3, 24, 12, 4, 6, 10)]):
        g = ev.rng(seed)
        args = (randn(g, B, h, 1, d_h), randn(g, B, h, 1, d_r), randn(g, B, t, d_c), randn(g, B, t, d_r),
                randn(g, h, d_h, d_c, scale=0.6), randn(g, h, d_h, d_c, scale=0.6), randn(g, d_model, h * d_h,
                                                                                         scale=0.3))
        out, elements, shape = ev.call_measured(answer, *args)
        got = tuple(getattr(out, "shape", ()))
        expect(got not in ((B, h, 1, d_c), (B, 1, h * d_c)), M.latents_out.at(shape=got))
        expect_shape(out, (B, 1, d_model), f"the output (B={B}, d_model={d_model})")
        ev.expect_close(out, ref.absorbed_step(*args), f"the output (B={B}, h={h}, t={t}, d_h={d_h}, d_R={d_r}, "
                        f"d_c={d_c})", mistakes=M.variants(VALUE_KEYS, *args))
        built = M.keys_built_per_head if shape == (B, t, d_h) else M.keys_built
        expect(elements < B * t * d_h, built.at(shape=shape, t=t))
        tests += 1
    return tests
