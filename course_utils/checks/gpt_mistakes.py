"""Lesson 12's planted mistakes for two checks: the sampling distribution (temperature after the
softmax, the k smallest kept, the token that crosses p dropped, no renormalisation) and rotary
positions (pairs (i, i+1) instead of halves, the angle's sign, the frequencies)."""

import torch

from ..decoding import sampling_distribution as ref_sampling
from .core import expect_distribution, expect_shape
from .evaluation import Evaluation


def _keep_top_p(probs, top_p, crossing=True):
    """Mask of the nucleus: the most probable tokens until the mass reaches top_p (ties at the end kept);
    crossing=False drops the token that crosses p."""
    ranked = probs.sort(-1, descending=True).values
    if not crossing:                         # only the tokens whose cumulative mass stays <= p: maybe none
        inside = (ranked.cumsum(-1) <= top_p).sum(-1, keepdim=True)
        return (probs >= ranked.gather(-1, (inside - 1).clamp(min=0))) & (inside > 0)
    before = (ranked.cumsum(-1) < top_p).sum(-1, keepdim=True)
    last = ranked.gather(-1, before.clamp(max=probs.size(-1) - 1))
    return probs >= last


def _variant(logits, temperature, top_k, top_p, kind="ok"):
    """The sampling distribution with a typical mistake planted."""
    z = logits.double()
    probs_first = kind == "temperature_after"
    if kind == "temperature_times":
        z = z * temperature
    elif not probs_first:
        z = z / temperature
    if top_k is not None:
        if kind == "k_smallest":
            kth = z.topk(top_k, -1, largest=False).values[..., -1:]
            z = z.masked_fill(z > kth, float("-inf"))
        else:
            kth = z.topk(top_k, -1).values[..., -1:]
            z = z.masked_fill(z < kth, float("-inf"))
    probs = z.softmax(-1)
    if probs_first:
        probs = probs / temperature
    if top_p is not None and top_p < 1:
        base = logits.double().div(temperature).softmax(-1) if kind == "top_p_unfiltered" else probs
        keep = _keep_top_p(base, top_p, crossing=kind != "drops_crossing")
        probs = probs * keep
    if kind == "no_renorm":
        return probs
    return probs / probs.sum(-1, keepdim=True)


def _unnormalised(logits, temperature, top_k, top_p):
    """What forgetting the renormalisation gives: the softmax's values where the token is kept, else 0."""
    kept = _variant(logits, temperature, top_k, top_p) > 0
    return logits.double().div(temperature).softmax(-1) * kept


_MISTAKES = {
    "temperature_after": "the temperature has no effect: divide the LOGITS by T before the softmax (dividing "
                         "the probabilities by T is undone when they are renormalised)",
    "temperature_times": "the logits are multiplied by the temperature: divide them by T (T > 1 flattens the "
                         "distribution, T < 1 sharpens it)",
    "k_smallest": "top-k keeps the k SMALLEST logits: keep the k largest (torch.topk(z, k) gives the largest)",
    "drops_crossing": "top-p drops the token that crosses p: keep the smallest set of most probable tokens whose "
                      "mass REACHES p, the token that takes the cumulative sum to p or beyond included",
    "top_p_unfiltered": "top-p is computed on the distribution before top-k: apply it to the distribution top-k "
                        "left (renormalised), as the order temperature -> top-k -> top-p says",
}


def _expect_sampling(ev: Evaluation, got, logits, temperature, top_k, top_p, what):
    expect_shape(got, tuple(logits.shape), what)
    expected = ref_sampling(logits, temperature, top_k, top_p)
    mistakes = {text: _variant(logits, temperature, top_k, top_p, kind) for kind, text in _MISTAKES.items()}
    mistakes["the kept probabilities are not renormalised: after zeroing the filtered tokens, divide by the sum "
             "of what is kept so that the distribution sums to 1"] = _unnormalised(logits, temperature, top_k, top_p)
    mistakes["the probabilities top-p keeps are not renormalised: after zeroing the tokens outside the nucleus, "
             "divide by the sum of what is kept so that the distribution sums to 1"] = \
        _variant(logits, temperature, top_k, top_p, "no_renorm")
    mistakes = {k: v for k, v in mistakes.items() if not torch.allclose(v.float(), expected, atol=1e-5,
                                                                         equal_nan=True)}
    ev.expect_close(got, expected, what, mistakes=mistakes, atol=1e-5, rtol=1e-4)
    expect_distribution(got, what)


def _rope_variant(x, positions, base, kind):
    d = x.size(-1)
    x = x.double()
    i = torch.arange(d // 2, dtype=torch.float64)
    exponent = {"freq_no_two": -i / d, "freq_sign": 2 * i / d, "freq_full": -2 * i / (d // 2)}.get(kind, -2 * i / d)
    theta = base ** exponent
    angle = positions.double()[:, None] * theta
    if kind == "sign":
        angle = -angle
    if kind == "degrees":
        angle = torch.deg2rad(angle)
    cos, sin = angle.cos(), angle.sin()
    if kind == "interleaved":              # pairs (2i, 2i+1)
        x1, x2 = x[..., 0::2], x[..., 1::2]
        out = torch.empty_like(x)
        out[..., 0::2], out[..., 1::2] = x1 * cos - x2 * sin, x1 * sin + x2 * cos
        return out
    x1, x2 = x[..., :d // 2], x[..., d // 2:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1)


def _rope_complex(x, positions, base):
    """The complex form: z_i = x_i + i x_{i+d/2}, multiplied by e^{i m θ_i}."""
    d = x.size(-1)
    z = torch.complex(x[..., :d // 2].double(), x[..., d // 2:].double())
    theta = base ** (-2 * torch.arange(d // 2, dtype=torch.float64) / d)
    z = z * torch.polar(torch.ones(()).double(), positions.double()[:, None] * theta)
    return torch.cat([z.real, z.imag], -1)
