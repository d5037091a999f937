"""Lesson 15, exercise 1: multi-head latent attention, the forward pass.

    latent_attention(q_c (B, h, T, d_h), q_r (B, h, T, d_R), c (B, T, d_c), k_r (B, T, d_R),
                     W_uk, W_uv (h, d_h, d_c)) -> (B, h, T, d_h)

Head i's keys are [W_uk[i] c_j ; k_r_j] (the RoPE key k_r is ONE for all heads), its values W_uv[i] c_j, its scores
(q_c . k^C + q_r . k^R) / sqrt(d_h + d_R), causal. The check compares the output with the course's
(course_utils.latent_attention) on two sets of sizes where d_h, d_R, d_c, h, B and T all differ (so that a
swapped size shows), names the mistake whose values the answer gives, and names a few typical crashes.
"""
import math

import torch
import torch.nn.functional as F

from ... import latent_attention as ref
from ...masks import causal_mask
from ..core import Mistake, Mistakes, exercise, expect, expect_shape, randn, single_threaded
from ..evaluation import Evaluation, call_naming
from ..torch_errors import BMM, BROADCAST


def wrong(rope=True, scale=None, causal=True, swap=False, axis=-1, future=False, values=None, both=None,
          diagonal=False):
    """Latent attention with one typical mistake (every default is the right choice)."""
    def latent_attention(q_c, q_r, c, k_r, W_uk, W_uv):
        W_k, W_v = (W_uv, W_uk) if swap else (W_uk, W_uv)
        W_k, W_v = {"uk": (W_uk, W_uk), "uv": (W_uv, W_uv)}.get(both, (W_k, W_v))
        k_c = torch.einsum("btc,hdc->bhtd", c, W_k)
        v = torch.einsum("btc,hdc->bhtd", c, W_v)
        scores = q_c @ k_c.transpose(-2, -1)
        if rope:
            scores = scores + q_r @ k_r[:, None].transpose(-2, -1)
        d_h, d_r, T = q_c.size(-1), q_r.size(-1), c.size(1)
        scores = scores / math.sqrt({"d_h": d_h, "d_c": c.size(-1), "none": 1}.get(scale, d_h + d_r))
        if causal:
            allowed = causal_mask(T).T if future else causal_mask(T)
            allowed = allowed & ~torch.eye(T, dtype=torch.bool) if diagonal else allowed
            scores = scores.masked_fill(~allowed, float("-inf"))
        weights = scores.softmax(axis)
        if values == "latent":
            return weights @ c[:, None]
        if values == "with_rope":
            return weights @ torch.cat([v, k_r[:, None].expand(-1, v.size(1), -1, -1)], -1)
        return weights @ v
    return latent_attention


def _no_head_axis(q_c, q_r, c, k_r, W_uk, W_uv):
    """k_r (B, T, d_R) used without a head axis: q_r (B, h, T, d_R) @ k_rᵀ (B, d_R, T) pairs B with h."""
    k_c, v = torch.einsum("btc,hdc->bhtd", c, W_uk), torch.einsum("btc,hdc->bhtd", c, W_uv)
    scores = (q_c @ k_c.transpose(-2, -1) + q_r @ k_r.transpose(-2, -1)) / math.sqrt(q_c.size(-1) + q_r.size(-1))
    return scores.masked_fill(~causal_mask(c.size(1)), float("-inf")).softmax(-1) @ v


def _up_transposed(q_c, q_r, c, k_r, W_uk, W_uv):
    """c @ W_uk: the (h, d_h, d_c) up-projection used as if it were (h, d_c, d_h)."""
    k_c, v = c[:, None] @ W_uk, c[:, None] @ W_uv
    scores = q_c @ k_c.transpose(-2, -1) + q_r @ k_r[:, None].transpose(-2, -1)
    scores = scores / math.sqrt(q_c.size(-1) + q_r.size(-1))
    return scores.masked_fill(~causal_mask(c.size(1)), float("-inf")).softmax(-1) @ v


M = Mistakes(
    Mistake("up_transposed", "an up-projection is used transposed: W_uk[i] is (d_h, d_c) and maps a latent c_j "
            "(d_c numbers) to a key of d_h numbers, W_uk[i] c_j", hint="c[:, None] @ W_uk.transpose(-2, -1), or "
            "torch.einsum('btc,hdc->bhtd', c, W_uk)", shows=_up_transposed),
    Mistake("no_rope_key", "the scores have no RoPE part: a key is [W_UK c_j ; k^R_j] and a query [q^C ; q^R], so "
            "each score is q^C . k^C + q^R . k^R (the latent alone carries no position)",
            hint="scores = q_c @ k_c.transpose(-2, -1) + q_r @ k_r[:, None].transpose(-2, -1)",
            shows=wrong(rope=False)),
    Mistake("no_rope_at_all", "the scores have no RoPE part and are scaled by √d_h: the key is [W_UK c_j ; k^R_j], "
            "d_h + d_R wide, and the scale is 1/√(d_h + d_R)", shows=wrong(rope=False, scale="d_h")),
    Mistake("scale_dh", "the scores are scaled by 1/√d_h: a query and a key are d_h + d_R wide (content and "
            "RoPE parts), so the scale is 1/√(d_h + d_R)", shows=wrong(scale="d_h")),
    Mistake("no_scale", "the scores are not scaled: divide them by √(d_h + d_R), the width of a query and a key "
            "(content and RoPE parts)", shows=wrong(scale="none")),
    Mistake("scale_dc", "the scores are scaled by 1/√d_c, the latent's width: the dot products are between "
            "queries and keys of d_h + d_R numbers, so the scale is 1/√(d_h + d_R)", shows=wrong(scale="d_c")),
    Mistake("not_causal", "position t attends to later positions too: the scores need the causal mask (query t sees "
            "keys 0 .. t)", hint="scores.masked_fill(~causal_mask(T), float('-inf'))", shows=wrong(causal=False)),
    Mistake("mask_transposed", "query t sees keys t .. T-1, the future, not 0 .. t: the causal mask is transposed",
            shows=wrong(future=True)),
    Mistake("keys_values_swapped", "the keys come from W_UV and the values from W_UK: keys are W_UK c (they are "
            "compared with the queries), values W_UV c (they are mixed)", shows=wrong(swap=True)),
    Mistake("values_from_uk", "the values come from W_UK, as the keys do: a head's values are W_UV c (W_UK makes "
            "the keys, which meet the queries; W_UV the values, which are mixed)", shows=wrong(both="uk")),
    Mistake("keys_from_uv", "the keys come from W_UV, as the values do: a head's keys are W_UK c (W_UK makes the "
            "keys, which meet the queries; W_UV the values, which are mixed)", shows=wrong(both="uv")),
    Mistake("mask_diagonal", "query t may not see key t itself: the causal mask keeps the diagonal, keys 0 .. t "
            "(with it masked, position 0 sees no key and its weights are NaN)",
            hint="mask the keys j > t only: torch.triu(..., diagonal=1), or causal_mask(T)",
            shows=wrong(diagonal=True)),
    Mistake("softmax_queries", "each KEY's weights sum to 1 over the queries: the softmax runs over the keys, the "
            "last axis", shows=wrong(axis=-2)),
    Mistake("values_latent", "the output mixes the latents c themselves ({d_c} numbers): each head's values are "
            "W_UV c, d_h wide", hint="v = torch.einsum('btc,hdc->bhtd', c, W_uv)", shows=wrong(values="latent")),
    Mistake("values_with_rope", "the values carry the RoPE key too: k^R only joins the scores; the values are "
            "W_UV c alone", shows=wrong(values="with_rope")),
    Mistake("no_head_axis", "a tensor without a head axis (k_r (B, T, d_R), or c (B, T, d_c)) is multiplied with one "
            "that has heads, so torch pairs its batch axis with the head axis: give it a head axis of size 1, shared "
            "by every head", hint="k_r[:, None] (B, 1, T, d_R) and c[:, None] (B, 1, T, d_c) broadcast over the heads",
            shows=_no_head_axis),
)
VALUE_KEYS = ["no_rope_key", "no_rope_at_all", "scale_dh", "no_scale", "scale_dc", "not_causal", "mask_transposed",
              "keys_values_swapped", "values_from_uk", "keys_from_uv", "mask_diagonal", "softmax_queries"]


def _torch_sdpa(q_c, q_r, c, k_r, W_uk, W_uv):
    """torch's fused attention over [q^C ; q^R] and [k^C ; k^R] (its scale: 1/√ of their width)."""
    h = W_uk.size(0)
    k = torch.cat([c[:, None] @ W_uk.transpose(-2, -1), k_r[:, None].expand(-1, h, -1, -1)], -1)
    return F.scaled_dot_product_attention(torch.cat([q_c, q_r], -1), k, c[:, None] @ W_uv.transpose(-2, -1),
                                          is_causal=True)


def _loop_over_heads(q_c, q_r, c, k_r, W_uk, W_uv):
    out = []
    for i in range(W_uk.size(0)):
        k, v = c @ W_uk[i].T, c @ W_uv[i].T                                       # (B, T, d_h)
        s = (q_c[:, i] @ k.transpose(1, 2) + q_r[:, i] @ k_r.transpose(1, 2)) / (q_c.size(-1) + q_r.size(-1)) ** 0.5
        T = c.size(1)
        s = s + torch.full((T, T), float("-inf")).triu(1)
        out.append(s.softmax(-1) @ v)
    return torch.stack(out, 1)


@exercise("multi-head latent attention", reference=ref.latent_attention, mistakes=M,
          right=[_torch_sdpa, _loop_over_heads])
@single_threaded
def latent_attention(ev: Evaluation, answer):
    """answer(q_c, q_r, c, k_r, W_uk, W_uv) -> (B, h, T, d_h)."""
    tests = 0
    for seed, (B, h, T, d_h, d_r, d_c) in enumerate([(2, 3, 6, 4, 2, 5), (3, 2, 5, 6, 4, 3)]):
        g = ev.rng(seed)
        args = (randn(g, B, h, T, d_h), randn(g, B, h, T, d_r), randn(g, B, T, d_c), randn(g, B, T, d_r),
                randn(g, h, d_h, d_c, scale=0.7), randn(g, h, d_h, d_c, scale=0.7))
        sizes = {B, h}
        widths = {d_h, d_c}
        crashes = [(BROADCAST, lambda m, sizes=sizes: M.no_head_axis
                    if {int(m["a"]), int(m["b"])} == sizes else None),
                   (BMM, lambda m, widths=widths: M.up_transposed
                    if {int(m["want"].split(",")[-1]), int(m["got"].split(",")[-1])} == widths else None)]
        out = call_naming(ev, crashes, answer, *args)
        shape = tuple(getattr(out, "shape", ()))
        expect(shape != (B, h, T, d_c), M.values_latent.at(d_c=d_c))
        expect(shape != (B, h, T, d_h + d_r), M.values_with_rope)
        expect_shape(out, (B, h, T, d_h), f"the output (B={B}, h={h}, T={T}, d_h={d_h})")
        ev.expect_close(out, ref.latent_attention(*args), f"the output (B={B}, h={h}, T={T}, d_h={d_h}, d_R={d_r}, "
                        f"d_c={d_c})", mistakes=M.variants(VALUE_KEYS, *args))
        tests += 1
    return tests
