"""Checks for lesson 07: self-attention, scaled dot-product attention and its masks (PyTorch)."""
import math
import re

import numpy as np
import torch
import torch.nn.functional as F

from .. import attention as ref
from .. import masks
from .core import (
    ExerciseError,
    exercise,
    expect,
    expect_distribution,
    expect_returns,
    expect_shape,
    randn,
    single_threaded,
    to_numpy,
)
from .evaluation import Evaluation

_NAN_ROW = ("a query whose every key is masked gives NaN (softmax of a row of -inf): give such rows zero "
            "weights, e.g. compute `has_key = mask.any(-1, keepdim=True)`, keep those rows finite, and "
            "multiply the weights by `has_key`")
_WRONG_SOFTMAX_AXIS = ("the softmax is taken over axis {axis}, the {name} axis (a softmax without `dim=` picks "
                       "axis 0 or 1): normalise each query's scores over the KEYS, `softmax(dim=-1)`, whatever the "
                       "number of leading axes")


_LEADING_AXES = ("with 4-D inputs (B, h, T, d) your function fails where 3-D ones (B, T, d) passed: kᵀ must swap the "
                 "LAST two axes whatever comes before them, k.transpose(-2, -1) (transpose(1, 2) swaps the head and "
                 "time axes of a 4-D k) ({error})")
_NOT_TENSOR = ("{what} is a {kind}, not a torch tensor: masked_fill and the attention functions take a torch "
               "boolean tensor; build it with torch (torch.ones(..., dtype=torch.bool), torch.arange comparisons)")


def _weights(q, k, mask=None, divisor=None, dim=-1, fill=float("-inf"), invert=False, after=False,
             transposed=False, by_max=False):
    """What the attention weights come out as, with or without a typical mistake.

    divisor: what the scores are divided by (default √d_k); transposed: scores k qᵀ instead of q kᵀ;
    by_max: exp(e) divided by its maximum instead of its sum.
    """
    scores = k @ q.transpose(-2, -1) if transposed else q @ k.transpose(-2, -1)
    scores = scores / (math.sqrt(q.size(-1)) if divisor is None else divisor)
    if mask is not None:
        keep = ~mask if invert else mask
        if after:  # mask applied to the weights, not the scores: rows no longer sum to 1
            return scores.softmax(dim) * keep
        scores = scores.masked_fill(~keep, fill)
    if by_max:
        return (scores - scores.amax(dim, keepdim=True)).exp()
    return scores.softmax(dim)


def _random_mask(ev: Evaluation, seed, shape):
    """A mask with the diagonal kept and at least one key masked in every row (so no row is empty,
    and the inverted mask has no empty row either)."""
    T_q, T_k = shape[-2:]
    mask = torch.as_tensor(ev.rng(seed).random(shape) > 0.4)
    eye = torch.eye(T_q, T_k, dtype=torch.bool)
    return (mask | eye) & ~torch.roll(eye, 1, dims=-1)


def _weight_mistakes(q, k, v, mask):
    """{symptom: the weights that mistake gives} for these inputs."""
    d_k, d_v, T_q, T_k = q.size(-1), v.size(-1), q.size(-2), k.size(-2)
    mistakes = {
        "missing scale: divide the scores q kᵀ by sqrt(d_k) before the softmax": _weights(q, k, mask, divisor=1.0),
        "softmax over the wrong axis: each query's weights must sum to 1 over the KEYS (dim=-1)":
            _weights(q, k, mask, dim=-2),
        "the scores are divided by d_k: divide by its square root, sqrt(d_k)": _weights(q, k, mask, divisor=d_k),
        "the scores are multiplied by sqrt(d_k): divide by it": _weights(q, k, mask, divisor=1 / math.sqrt(d_k)),
        "the weights are exp(e) divided by their MAXIMUM: a softmax divides by the SUM over the keys "
        "(subtracting the maximum first only keeps exp from overflowing)": _weights(q, k, mask, by_max=True),
    }
    if d_v != d_k:
        mistakes["the scores are scaled by sqrt(d_v), the width of the values: scale by sqrt(d_k), the width of "
                 "the queries and keys, `q.size(-1)`"] = _weights(q, k, mask, divisor=math.sqrt(d_v))
    if T_k != d_k:
        mistakes["the scores are scaled by sqrt(T_k), the number of keys: scale by sqrt(d_k), the width of the "
                 "queries and keys, `q.size(-1)` (not `k.size(-2)`)"] = _weights(q, k, mask, divisor=math.sqrt(T_k))
    if T_q == T_k:
        mistakes["the scores are transposed (k qᵀ instead of q kᵀ): row t must hold query t's scores over "
                 "the keys"] = _weights(q, k, mask, transposed=True)
    for axis in reversed(range(q.dim() - 2)):  # the head axis of (B, h, T, d) inputs first: with a mask both
        # give NaN (a column of -inf), which is all that expect_close compares then; the batch axis shows in case 1
        mistakes[_WRONG_SOFTMAX_AXIS.format(axis=axis, name=("batch", "head")[axis])] = _weights(q, k, mask, dim=axis)
    if mask is not None:
        mistakes.update({
            "the mask is inverted: True means 'may attend' (keep), so fill the scores where the mask is "
            "False (`scores.masked_fill(~mask, float('-inf'))`)": _weights(q, k, mask, invert=True),
            "the mask is applied after the softmax: set masked scores to -inf BEFORE the softmax, so the "
            "remaining weights still sum to 1": _weights(q, k, mask, after=True),
            "masked scores are set to 0, which still gets weight after the softmax: fill them with "
            "float('-inf')": _weights(q, k, mask, fill=0.0),
        })
    return mistakes


def _reference(q, k, v, mask=None):
    return ref.scaled_dot_product_attention(q, k, v, mask, need_weights=True)


@exercise("scaled dot-product attention with a mask", name="attention", reference=_reference)
@single_threaded
def scaled_dot_product_attention(ev: Evaluation, answer):
    """answer(q, k, v, mask=None) -> (out (B, ..., T_q, d_v), weights (B, ..., T_q, T_k))."""
    tests = 0
    # d_k, d_v and T_k all differ in the last case, so that scaling by the wrong one shows
    cases = [((2, 5, 4), (2, 5, 4), (2, 5, 4), False),
             ((2, 3, 6, 8), (2, 3, 6, 8), (2, 3, 6, 8), True),
             ((2, 2, 4, 8), (2, 2, 7, 8), (2, 2, 7, 5), True)]
    for seed, (sq, sk, sv, masked) in enumerate(cases):
        g = ev.rng(seed)
        q, k, v = randn(g, *sq, scale=2.0), randn(g, *sk, scale=2.0), randn(g, *sv)
        mask = _random_mask(ev, seed, (sq[0], 1, sq[-2], sk[-2])) if masked else None
        expected = _reference(q, k, v, mask)
        try:
            result = ev.call(answer, q, k, v, mask) if masked else ev.call(answer, q, k, v)
        except ExerciseError as error:
            if len(sq) == 4 and re.search(r"must match the size of tensor b \(\d+\) at non-singleton dimension 1",
                                          str(error)):
                raise ExerciseError(_LEADING_AXES.format(error=str(error).splitlines()[0].replace(
                    "your function raised ", "torch said: "))) from None
            raise
        out, weights = expect_returns(result, expected, ("out", "weights"))
        w_mistakes = _weight_mistakes(q, k, v, mask)
        expect_shape(weights, sq[:-1] + (sk[-2],), "weights")
        ev.expect_close(weights, expected[1], f"the weights (q {sq}, k {sk}, v {sv}, "
                        f"{'with a mask' if masked else 'no mask'})", mistakes=w_mistakes)
        expect_distribution(weights, "each query's weights")
        expect_shape(out, sq[:-1] + (sv[-1],), "out")
        out_mistakes = {symptom: w @ v for symptom, w in w_mistakes.items()}
        if sk == sv:
            out_mistakes["out mixes the keys instead of the values: out = weights @ v"] = expected[1] @ k
        ev.expect_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask),
                        "out, compared with torch.nn.functional.scaled_dot_product_attention", mistakes=out_mistakes)
        if mask is not None:
            expect(bool(torch.all(torch.as_tensor(to_numpy(weights))[~mask.expand(weights.shape)] == 0)),
                   "masked positions get non-zero weight: fill the scores where the mask is False with -inf.")
        tests += 1
    # causality: with a causal mask, changing later positions leaves earlier outputs unchanged
    x = randn(ev.rng(7), 1, 8, 6)
    y = x.clone()
    y[:, 5:] += randn(ev.rng(8), 1, 3, 6, scale=3.0)
    causal = masks.causal_mask(8)
    out_x, _ = expect_returns(ev.call(answer, x, x, x, causal), _reference(x, x, x, causal), ("out", "weights"))
    out_y, _ = expect_returns(ev.call(answer, y, y, y, causal), _reference(y, y, y, causal), ("out", "weights"))
    changed = np.abs(to_numpy(out_x)[0, :5] - to_numpy(out_y)[0, :5]).max(axis=-1) > 1e-5
    expect(not changed.any(), f"the output at position {int(np.argmax(changed))} changed when positions 5-7 "
                              "changed: with the causal mask, a position must not see later positions.")
    tests += 1
    # a query with no key allowed gets zero weights and a zero output, not NaN
    g = ev.rng(9)
    q, k, v = randn(g, 1, 4, 4), randn(g, 1, 5, 4), randn(g, 1, 5, 3)
    mask = torch.ones(1, 4, 5, dtype=torch.bool)
    mask[0, 2] = False
    expected = _reference(q, k, v, mask)
    out, weights = expect_returns(ev.call(answer, q, k, v, mask), expected, ("out", "weights"))
    ev.expect_close(weights, expected[1], "the weights when query 2 may attend to no key", mistakes={
        _NAN_ROW: _weights(q, k, mask),
        "a fully masked query gets uniform weights (a large negative fill gives every key the same "
        "score): give rows with no allowed key zero weights (multiply by `mask.any(-1, keepdim=True)`)":
            _weights(q, k, mask, fill=-1e9)})
    ev.expect_close(out, expected[0], "the output when query 2 may attend to no key", hint="it should be all zeros")
    return tests + 1


@exercise("causal mask", reference=masks.causal_mask)
@single_threaded
def causal_mask(ev: Evaluation, answer):
    """answer(T) -> (T, T) bool, True on and below the diagonal (query t may attend to keys 0..t)."""
    tests = 0
    for T in (4, 7, 1):
        mask = ev.call(answer, T)
        expect(not isinstance(mask, np.ndarray), _NOT_TENSOR.format(what=f"causal_mask({T})", kind="NumPy array"))
        expect_shape(mask, (T, T), f"causal_mask({T})")
        expect(str(getattr(mask, "dtype", "")).endswith("bool"),
               f"causal_mask({T}) has dtype {getattr(mask, 'dtype', type(mask))}; it should be boolean "
               "(True = may attend): use dtype=torch.bool, or compare, e.g. `... == 0`.")
        ones = torch.ones(T, T, dtype=torch.bool)
        ev.expect_close(to_numpy(mask).astype(float), to_numpy(masks.causal_mask(T)).astype(float),
                        f"causal_mask({T})", mistakes={
            "the mask is True above the diagonal, i.e. it allows the FUTURE: with True = may attend, "
            "query t keeps keys 0..t, on and below the diagonal, and hides the keys above it":
                torch.triu(ones, 1).float(),
            "the mask is transposed (True on and above the diagonal): rows are queries and columns keys, "
            "so row t must be True for columns 0..t": torch.triu(ones).float(),
            "the diagonal is masked: a position may attend to itself (check the `diagonal` argument "
            "of torch.tril / torch.triu)":
                torch.tril(ones, -1).float(),
            "the mask is off by one: query t may also see key t+1, one step into the future (True on and "
            "below the diagonal only)": torch.tril(ones, 1).float(),
            "the mask is all True, so it hides nothing: query t must not see the keys after t": ones.float(),
        })
        tests += 1
    # in use: the output at position t does not change when later positions change
    T = 6
    mask = torch.as_tensor(to_numpy(ev.call(answer, T))).bool()
    x = randn(ev.rng(3), 1, T, 4)
    y = x.clone()
    y[:, 4:] += 5.0
    a = ref.scaled_dot_product_attention(x, x, x, mask)
    b = ref.scaled_dot_product_attention(y, y, y, mask)
    expect(torch.allclose(a[:, :4], b[:, :4], atol=1e-5),
           "with your mask, the output at positions 0-3 changed when positions 4-5 changed: "
           "the mask must hide later positions.")
    return tests + 1


_AT_THE_END = ("the mask keeps, in each row, {what}, as if the padding were always at the end; here the last "
               "row is padded on the LEFT (as for generation): mark each token by its own id, `tokens != pad_id`")


def _padded_at_the_end(tokens, pad_id):
    """{symptom: mask} of the masks built from a length, which assume right padding (tokens (B, T))."""
    positions, real = torch.arange(tokens.size(1))[None, :], tokens != pad_id
    first_pad = torch.where(real.all(1), tokens.size(1), (~real).int().argmax(1))
    return {_AT_THE_END.format(what="the first n positions (n = its number of real tokens)"):
            (positions < real.sum(1, keepdim=True)).float()[:, None, None, :],
            _AT_THE_END.format(what="the positions before its first pad"):
            (positions < first_pad[:, None]).float()[:, None, None, :]}


@exercise("padding mask", reference=masks.padding_mask)
@single_threaded
def padding_mask(ev: Evaluation, answer):
    """answer(tokens (B, T), pad_id) -> (B, 1, 1, T) bool, True at real tokens."""
    tests = 0
    for seed, pad_id in enumerate((0, 3)):
        tokens = torch.as_tensor(ev.rng(seed).integers(4, 20, size=(3, 6)))
        if pad_id:
            tokens[0, 0], tokens[1, 1] = pad_id - 2, pad_id - 1    # real tokens with ids BELOW the pad id
        for b, length in enumerate((6, 4, 2)):
            tokens[b, length:] = pad_id
        if pad_id:   # the last row padded on the LEFT (as for generation): padding need not be at the end
            tokens[2] = tokens[2].roll(6 - 2)
        mask = ev.call(answer, tokens, pad_id)
        expect(not isinstance(mask, np.ndarray), _NOT_TENSOR.format(what="the padding mask", kind="NumPy array"))
        expected = masks.padding_mask(tokens, pad_id)
        real = (tokens != pad_id).float()
        expect(hasattr(mask, "dtype") and str(mask.dtype).endswith("bool"),
               f"the mask should be a boolean tensor (True = real token), got "
               f"{getattr(mask, 'dtype', type(mask).__name__)}: compare, e.g. `tokens != pad_id`.")
        ev.expect_close(to_numpy(mask).astype(float), expected.float(), f"padding_mask(tokens (3, 6), pad_id={pad_id})",
                        mistakes={
            "the mask is inverted: True must mark the REAL tokens (may attend), use `tokens != pad_id`":
                (1 - real)[:, None, None, :],
            "the mask has shape (B, T): add the head and query axes, (B, 1, 1, T), so that it broadcasts "
            "over heads and queries (`mask[:, None, None, :]`)": real,
            "the mask has shape (B, 1, T, 1): that masks QUERIES; padding must hide KEYS, the last axis, "
            "shape (B, 1, 1, T)": real[:, None, :, None],
            "the mask has shape (B, 1, T): use (B, 1, 1, T), one axis for heads and one for queries":
                real[:, None, :],
            "the mask has shape (B, T, 1, 1): the token axis must be the LAST one, (B, 1, 1, T), because "
            "padding hides keys": real[:, :, None, None],
            "the mask compares the tokens with 0, not with `pad_id`: use `tokens != pad_id`":
                (tokens != 0).float()[:, None, None, :],
            "the mask keeps the tokens GREATER than pad_id, and hides real tokens whose ids are smaller (the pad id "
            "need not be the smallest id): use `tokens != pad_id`": (tokens > pad_id).float()[:, None, None, :],
            **_padded_at_the_end(tokens, pad_id),
        })
        tests += 1
    # in use: changing what sits at padded positions leaves the outputs of real positions unchanged
    tokens = torch.tensor([[5, 6, 7, 0, 0]])
    mask = torch.as_tensor(to_numpy(ev.call(answer, tokens, 0))).bool()
    x = randn(ev.rng(4), 1, 1, 5, 4)
    y = x.clone()
    y[..., 3:, :] += 5.0
    a = ref.scaled_dot_product_attention(x, x, x, mask)
    b = ref.scaled_dot_product_attention(y, y, y, mask)
    expect(torch.allclose(a[..., :3, :], b[..., :3, :], atol=1e-5),
           "with your mask, the outputs of the real tokens changed when the padding changed: padding must "
           "be hidden as keys.")
    return tests + 1


def _band(T, low, high, strict_low=False, strict_high=False):
    """(T, T) float, 1 where key j lies in t+low .. t+high for query t (row t); strict_*: that end left out."""
    t, j = torch.arange(T)[:, None], torch.arange(T)[None, :]
    above = j > t + low if strict_low else j >= t + low
    below = j < t + high if strict_high else j <= t + high
    return (above & below).float()


def _sliced(T, left, right):
    """The window written row by row as mask[t, t-left : t+right+1] = True, the start not clipped at 0."""
    mask = torch.zeros(T, T)
    for t in range(T):
        mask[t, t - left:t + right + 1] = 1.0
    return mask


@exercise("sliding-window mask", reference=masks.sliding_window_mask)
@single_threaded
def sliding_window_mask(ev: Evaluation, answer):
    """answer(T, left, right=0) -> (T, T) bool, True where query t may attend to key j: t-left <= j <= t+right."""
    tests = 0
    # first left != right, both >= 2 (every mistake below gives a different band), then a window seeing more
    # of the future than of the past, a causal window, a symmetric one, one wider than T, and T = 1
    for T, left, right in ((8, 3, 2), (6, 1, 3), (7, 2, 0), (5, 1, 1), (4, 6, 5), (1, 0, 0)):
        what = f"sliding_window_mask({T}, left={left}, right={right})"
        mask = ev.call(answer, T, left, right)
        expect(not isinstance(mask, np.ndarray), _NOT_TENSOR.format(what=what, kind="NumPy array"))
        expect_shape(mask, (T, T), what)
        expect(str(getattr(mask, "dtype", "")).endswith("bool"),
               f"{what} has dtype {getattr(mask, 'dtype', type(mask))}; it should be boolean (True = may attend): "
               "build it from comparisons, which give bool tensors, or use dtype=torch.bool.")
        expected = masks.sliding_window_mask(T, left, right).float()
        ev.expect_close(to_numpy(mask).astype(float), expected, what, mistakes={
            "the mask hides every key, so no query sees anything: the window runs from key t-left, BEFORE "
            "query t, to key t+right, after it (mind the signs)": torch.zeros(T, T),
            "the window is mirrored (left and right swapped, or the mask transposed): row t is query t, "
            "`left` counts the keys BEFORE it (t-left .. t-1) and `right` the keys after it": _band(T, -right, left),
            "the window is symmetric, |t - j| <= left: after query t it must stop at t+right (right=0: "
            "no key after t, a causal window)": _band(T, -left, left),
            "the keys after query t are missing: `right` counts the keys after t that it may see, "
            "up to t+right": _band(T, -left, 0),
            "both ends of the window are missing: keys t-left and t+right are visible too (<=, not <)":
                _band(T, -left, right, strict_low=True, strict_high=True),
            "the first key of the window is missing: key t-left is visible too (t-left <= j, not <)":
                _band(T, -left, right, strict_low=True),
            "the last key of the window is missing: key t+right is visible too (j <= t+right, not <)":
                _band(T, -left, right, strict_high=True),
            "the window is one key too wide on each side: query t sees keys t-left .. t+right, "
            "left + right + 1 keys in all": _band(T, -left - 1, right + 1),
            "the mask is inverted: True = may attend, so it is True INSIDE the window and False outside":
                1 - expected,
            "the mask is all True, so it hides nothing: query t must not see keys before t-left or after "
            "t+right": torch.ones(T, T),
            "the diagonal is masked: query t may always attend to itself, key t": expected * (1 - torch.eye(T)),
            f"the first rows are wrong: for t < left = {left} the slice starts at t - left < 0, and a negative start "
            "counts from the END (mask[t, -2:4] is empty or wraps round): start the slice at max(t - left, 0)":
                _sliced(T, left, right),
        })
        tests += 1
    # in use: a key outside a query's window does not move its output, a key inside does
    T, left, right = 8, 2, 1
    mask = torch.as_tensor(to_numpy(ev.call(answer, T, left, right))).bool()
    x = randn(ev.rng(5), 1, T, 4)
    out = ref.scaled_dot_product_attention(x, x, x, mask)
    for key in (0, T - 1):
        y = x.clone()
        y[:, key] += 3.0
        moved = (ref.scaled_dot_product_attention(y, y, y, mask) - out).abs().amax(-1)[0] > 1e-5   # (T,)
        for t in range(T):
            inside = t - left <= key <= t + right
            expect(bool(moved[t]) == inside or t == key,
                   f"with your sliding_window_mask({T}, left={left}, right={right}), the output at position {t} "
                   f"{'did not change' if inside else 'changed'} when key {key} changed: query {t} must see "
                   f"keys {max(t - left, 0)} .. {min(t + right, T - 1)} and no others.")
    return tests + 1
