"""Checks for lesson 07: self-attention, scaled dot-product attention and its masks (PyTorch)."""
import math

import numpy as np
import torch
import torch.nn.functional as F

from .. import attention as ref
from .core import call, exercise, expect, expect_close, expect_distribution, expect_shape, single_threaded, to_numpy

_NAN_ROW = ("a query whose every key is masked gives NaN (softmax of a row of -inf): give such rows zero "
            "weights, e.g. compute `has_key = mask.any(-1, keepdim=True)`, keep those rows finite, and "
            "multiply the weights by `has_key`")


def _tensors(seed, *shapes):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(*s, generator=g) for s in shapes]


def _weights(q, k, mask=None, scale=True, dim=-1, fill=float("-inf"), invert=False, after=False):
    """What the attention weights come out as, with or without a typical mistake."""
    scores = q @ k.transpose(-2, -1)
    if scale:
        scores = scores / math.sqrt(q.size(-1))
    if mask is None:
        return scores.softmax(dim)
    keep = ~mask if invert else mask
    if after:  # mask applied to the weights, not the scores: rows no longer sum to 1
        return scores.softmax(dim) * keep
    return scores.masked_fill(~keep, fill).softmax(dim)


def _random_mask(seed, shape):
    """A mask with the diagonal kept and at least one key masked in every row (so no row is empty,
    and the inverted mask has no empty row either)."""
    g = torch.Generator().manual_seed(seed)
    T_q, T_k = shape[-2:]
    mask = torch.rand(*shape, generator=g) > 0.4
    eye = torch.eye(T_q, T_k, dtype=torch.bool)
    mask = (mask | eye) & ~torch.roll(eye, 1, dims=-1)
    return mask


def _attention_mistakes(q, k, v, mask):
    def out(w):
        return w @ v
    mistakes = {
        "missing scale: divide the scores q kᵀ by sqrt(d_k) before the softmax": _weights(q, k, mask, scale=False),
        "softmax over the wrong axis: each query's weights must sum to 1 over the KEYS (dim=-1)":
            _weights(q, k, mask, dim=-2),
    }
    if mask is not None:
        mistakes.update({
            "the mask is inverted: True means 'may attend' (keep), so fill the scores where the mask is "
            "False (`scores.masked_fill(~mask, float('-inf'))`)": _weights(q, k, mask, invert=True),
            "the mask is applied after the softmax: set masked scores to -inf BEFORE the softmax, so the "
            "remaining weights still sum to 1": _weights(q, k, mask, after=True),
            "masked scores are set to 0, which still gets weight after the softmax: fill them with "
            "float('-inf')": _weights(q, k, mask, fill=0.0),
        })
    return mistakes, {symptom: out(w) for symptom, w in mistakes.items()}


def _unpack(result, what="attention"):
    expect(isinstance(result, tuple) and len(result) == 2,
           f"return two things: the output and the weights, as `return out, weights` ({what}).")
    return result


@exercise("scaled dot-product attention with a mask", name="attention")
@single_threaded
def scaled_dot_product_attention(fn):
    """fn(q, k, v, mask=None) -> (out (B, ..., T_q, d_v), weights (B, ..., T_q, T_k))."""
    tests = 0
    cases = [((2, 5, 4), (2, 5, 4), (2, 5, 4), None),
             ((2, 3, 6, 8), (2, 3, 6, 8), (2, 3, 6, 8), "random"),
             ((2, 2, 4, 8), (2, 2, 7, 8), (2, 2, 7, 5), "random")]
    for seed, (sq, sk, sv, kind) in enumerate(cases):
        q, k, v = _tensors(seed, sq, sk, sv)
        q, k = q * 2, k * 2
        mask = None if kind is None else _random_mask(seed, (sq[0], 1, sq[-2], sk[-2]))
        out, weights = _unpack(call(fn, q, k, v, mask) if mask is not None else call(fn, q, k, v))
        w_mistakes, out_mistakes = _attention_mistakes(q, k, v, mask)
        T_q, T_k = sq[-2], sk[-2]
        expect_shape(weights, sq[:-1] + (T_k,), "weights")
        expect_close(weights, ref.attention_weights(q, k, mask), f"the weights (q {sq}, k {sk}, "
                     f"{'no mask' if mask is None else 'with a mask'})", mistakes=w_mistakes)
        expect_distribution(weights, "each query's weights")
        expect_shape(out, sq[:-1] + (sv[-1],), "out")
        expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        if sk == sv:
            out_mistakes["out mixes the keys instead of the values: out = weights @ v"] = \
                ref.attention_weights(q, k, mask) @ k
        expect_close(out, expected, "out, compared with torch.nn.functional.scaled_dot_product_attention",
                     mistakes=out_mistakes)
        if mask is not None:
            expect(bool(torch.all(torch.as_tensor(to_numpy(weights))[~mask.expand(weights.shape)] == 0)),
                   "masked positions get non-zero weight: fill the scores where the mask is False with -inf.")
        tests += 1
    # causality: with a causal mask, changing later positions leaves earlier outputs unchanged
    x, = _tensors(7, (1, 8, 6))
    y = x.clone()
    y[:, 5:] += 3 * torch.randn(1, 3, 6, generator=torch.Generator().manual_seed(8))
    causal = ref.causal_mask(8)
    out_x, _ = _unpack(call(fn, x, x, x, causal))
    out_y, _ = _unpack(call(fn, y, y, y, causal))
    changed = (to_numpy(out_x)[0, :5] - to_numpy(out_y)[0, :5]).__abs__().max(axis=-1) > 1e-5
    expect(not changed.any(), f"the output at position {int(np.argmax(changed))} changed when positions 5-7 "
                              "changed: with the causal mask, a position must not see later positions.")
    tests += 1
    # a query with no key allowed gets zero weights and a zero output, not NaN
    q, k, v = _tensors(9, (1, 4, 4), (1, 5, 4), (1, 5, 4))
    mask = torch.ones(1, 4, 5, dtype=torch.bool)
    mask[0, 2] = False
    out, weights = _unpack(call(fn, q, k, v, mask))
    w_ref = ref.attention_weights(q, k, mask)
    expect_close(weights, w_ref, "the weights when query 2 may attend to no key", mistakes={
        _NAN_ROW: _weights(q, k, mask),
        "a fully masked query gets uniform weights (a large negative fill gives every key the same "
        "score): give rows with no allowed key zero weights (multiply by `mask.any(-1, keepdim=True)`)":
            _weights(q, k, mask, fill=-1e9)})
    expect_close(out, w_ref @ v, "the output when query 2 may attend to no key", hint="it should be all zeros")
    return tests + 1


@exercise("causal mask")
@single_threaded
def causal_mask(fn):
    """fn(T) -> (T, T) bool, True on and below the diagonal (query t may attend to keys 0..t)."""
    tests = 0
    for T in (4, 7, 1):
        mask = call(fn, T)
        expect_shape(mask, (T, T), f"causal_mask({T})")
        expect(str(getattr(mask, "dtype", "")).endswith("bool"),
               f"causal_mask({T}) has dtype {getattr(mask, 'dtype', type(mask))}; it should be boolean "
               "(True = may attend): use dtype=torch.bool, or compare, e.g. `... == 0`.")
        ones = torch.ones(T, T, dtype=torch.bool)
        expect_close(to_numpy(mask).astype(float), to_numpy(ref.causal_mask(T)).astype(float),
                     f"causal_mask({T})", mistakes={
            "the mask is True above the diagonal, i.e. it allows the FUTURE: with True = may attend, "
            "query t keeps keys 0..t, on and below the diagonal (`~torch.triu(ones, diagonal=1)`)":
                torch.triu(ones, 1).float(),
            "the mask is transposed (True on and above the diagonal): rows are queries and columns keys, "
            "so row t must be True for columns 0..t": torch.triu(ones).float(),
            "the diagonal is masked: a position may attend to itself (use diagonal=1 in torch.triu)":
                torch.tril(ones, -1).float(),
        })
        tests += 1
    # in use: the output at position t does not change when later positions change
    T = 6
    mask = torch.as_tensor(to_numpy(call(fn, T))).bool()
    x, = _tensors(3, (1, T, 4))
    y = x.clone()
    y[:, 4:] += 5.0
    a = ref.scaled_dot_product_attention(x, x, x, mask)
    b = ref.scaled_dot_product_attention(y, y, y, mask)
    expect(torch.allclose(a[:, :4], b[:, :4], atol=1e-5),
           "with your mask, the output at positions 0-3 changed when positions 4-5 changed: "
           "the mask must hide later positions.")
    return tests + 1


@exercise("padding mask")
@single_threaded
def padding_mask(fn):
    """fn(tokens (B, T), pad_id) -> (B, 1, 1, T) bool, True at real tokens."""
    tests = 0
    for seed, pad_id in enumerate((0, 3)):
        g = torch.Generator().manual_seed(seed)
        tokens = torch.randint(4, 20, (3, 6), generator=g)
        for b, length in enumerate((6, 4, 2)):
            tokens[b, length:] = pad_id
        mask = call(fn, tokens, pad_id)
        expected = ref.padding_mask(tokens, pad_id)
        real = (tokens != pad_id).float()
        expect(hasattr(mask, "dtype") and str(mask.dtype).endswith("bool"),
               f"the mask should be a boolean tensor (True = real token), got "
               f"{getattr(mask, 'dtype', type(mask).__name__)}: compare, e.g. `tokens != pad_id`.")
        expect_close(to_numpy(mask).astype(float), expected.float(), f"padding_mask(tokens (3, 6), pad_id={pad_id})",
                     mistakes={
            "the mask is inverted: True must mark the REAL tokens (may attend), use `tokens != pad_id`":
                (1 - real)[:, None, None, :],
            "the mask has shape (B, T): add the head and query axes, (B, 1, 1, T), so that it broadcasts "
            "over heads and queries (`mask[:, None, None, :]`)": real,
            "the mask has shape (B, 1, T, 1): that masks QUERIES; padding must hide KEYS, the last axis, "
            "shape (B, 1, 1, T)": real[:, None, :, None],
            "the mask has shape (B, 1, T): use (B, 1, 1, T), one axis for heads and one for queries":
                real[:, None, :],
        })
        tests += 1
    # in use: changing what sits at padded positions leaves the outputs of real positions unchanged
    tokens = torch.tensor([[5, 6, 7, 0, 0]])
    mask = torch.as_tensor(to_numpy(call(fn, tokens, 0))).bool()
    x, = _tensors(4, (1, 1, 5, 4))
    y = x.clone()
    y[..., 3:, :] += 5.0
    a = ref.scaled_dot_product_attention(x, x, x, mask)
    b = ref.scaled_dot_product_attention(y, y, y, mask)
    expect(torch.allclose(a[..., :3, :], b[..., :3, :], atol=1e-5),
           "with your mask, the outputs of the real tokens changed when the padding changed: padding must "
           "be hidden as keys.")
    return tests + 1
