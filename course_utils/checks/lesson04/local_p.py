"""Lesson 04, exercise 7: local-p attention (Luong et al. 2015): the predicted position, the window, the Gaussian.

    local_p(e (B, T), mask (B, T), s (B, d_s), W_p (d_p, d_s), v_p (d_p,), S (B,), D) -> p (B,), alpha (B, T)

p_t = S * sigmoid(v_p^T tanh(W_p s_t)) stays real; alpha is the softmax of e over the window |i - p_t| <= D and the
mask, times exp(-(i - p_t)^2 / (2 sigma^2)), sigma = D / 2. The check draws four configurations with several lengths
(so that the mask matters), d_p = d_s once (so that a transposed W_p runs) and D = 1, 2, 3 (so that sigma = D and
D / 2 differ). The first places p_t where every window mistake shows, whatever the seeds: fractional parts above
and below 0.5 (round against int), a window reaching past the padding (the mask ignored), and a whole p_t = 5, whose
window ends |i - p_t| = D are in the window (a strict < drops them). It names p's mistakes and then alpha's by their
values; alpha's other differences by the property they break (weight outside the window, negative weights).
"""
import numpy as np
import torch

from ... import scores as ref
from ..core import Mistake, Mistakes, ValuesDiffer, exercise, expect_returns, expect_shape, randn, to_numpy
from ..evaluation import Evaluation
from ..expectations import fail
from .local_p_mistakes import SCALES, wrong_local_p

_P = "p_t = S * sigmoid(v_p^T tanh(W_p s_t))"
_WINDOW = "the window holds the positions with |i - p_t| <= D"


def _slip(key, says, slip, hint=""):
    return Mistake(key, says, hint=hint, shows=wrong_local_p(slip))


M = Mistakes(
    _slip("p_not_scaled", f"p_t is not scaled by S: sigmoid(...) lies in [0, 1]; {_P} lies in [0, S]", "p_not_scaled"),
    _slip("p_no_tanh", f"the tanh is missing in {_P}", "p_no_tanh"),
    _slip("p_no_sigmoid", f"the sigmoid is missing in {_P}: it keeps p_t in [0, S]", "p_no_sigmoid"),
    _slip("p_rounded", "p_t is rounded: it stays a real number (it is learned by gradient descent); only the window "
          "test |i - p_t| <= D picks whole positions", "p_rounded"),
    _slip("W_p_transposed", "W_p is transposed: W_p s_t for a batch of rows s is s W_pᵀ (W_p has shape (d_p, d_s))",
          "W_p_transposed", hint="s @ W_p.T"),
    _slip("p_scale", "p_t is scaled by {what}: it is scaled by the argument S (B,), each source's own last position, "
          + _P, "scale:padded_last"),
    _slip("softmax_all", "the softmax runs over all positions: it runs over the window only (the positions with "
          "|i - p_t| > D masked), then the weights are multiplied by the Gaussian", "softmax_all"),
    _slip("softmax_then_cut", "the softmax runs over all positions and is cut to the window afterwards: the softmax "
          "runs over the window only (mask first, then softmax)", "softmax_then_cut"),
    _slip("sigma_D", "sigma = D: the Gaussian's width is sigma = D / 2", "sigma_D"),
    _slip("no_two", "the Gaussian is exp(-(i - p_t)^2 / sigma^2): the factor 2 in its denominator, 2 sigma^2, is "
          "missing", "no_two"),
    _slip("no_gaussian", "the Gaussian is missing: the window softmax is multiplied by exp(-(i - p_t)^2 / "
          "(2 sigma^2))", "no_gaussian"),
    _slip("gaussian_times_scores", "the Gaussian multiplies the scores before the softmax: it multiplies the weights, "
          "after the softmax", "gaussian_times_scores"),
    _slip("renormalised", "the weights sum to 1 after the Gaussian: local-p multiplies the window softmax by the "
          "Gaussian and stops there, so that the weights sum to less than 1 (renormalising after the Gaussian, or "
          "adding its log to the scores before the softmax, gives these weights)", "renormalised"),
    _slip("by_max", "the window softmax is divided by its largest term instead of the sum of its terms", "by_max"),
    _slip("mask_ignored", "the mask is ignored: padded positions inside the window get weight; the softmax runs over "
          "the window AND the mask", "mask_ignored", hint="window & mask"),
    _slip("centred_round", f"the window is centred on round(p_t): p_t stays real; {_WINDOW}", "centred_round"),
    _slip("centred_floor", f"the window is centred on int(p_t) (rounded down): p_t stays real; {_WINDOW}",
          "centred_floor"),
    _slip("window_wide", f"the window is one position too wide on each side: {_WINDOW}", "window_wide"),
    _slip("window_narrow", f"the window is one position too narrow on each side: {_WINDOW}", "window_narrow"),
    _slip("window_strict", "the window test is strict, |i - p_t| < D, which drops its ends when p_t is a whole "
          f"number: {_WINDOW}", "window_strict", hint="(i - p).abs() <= D"),
    _slip("window_slice", "the window stops one position before its end, as the slice [int(p_t) - D : int(p_t) + D] "
          f"does: {_WINDOW} (with p_t real)", "window_slice"),
    Mistake("outside_window", "positions outside the window [p_t - D, p_t + D], or padded, get weight (row {row}, "
            "position {i}): they must get weight 0", shows=lambda *args: _shifted_positions(*args)),
    Mistake("negative_weights", "some weights are negative (row {row}, position {i}): local-p's weights are a "
            "softmax times a Gaussian, >= 0", shows=lambda *args: _linear_gaussian(*args)),
)
_POSITION = [M[k] for k in ("p_not_scaled", "p_no_tanh", "p_no_sigmoid", "p_rounded", "W_p_transposed")]
_WEIGHTS = [m for m in M if m.key not in {m.key for m in _POSITION} | {"p_scale", "outside_window",
                                                                          "negative_weights"}]


def _shifted_positions(e, mask, s, W_p, v_p, S, D):
    """The window and the Gaussian with the positions counted from 1 (weight on position p_t + D + 1)."""
    p, _ = ref.local_p(e, mask, s, W_p, v_p, S, D)
    return p, ref.local_p_weights(e, mask, p - 1, D)


def _linear_gaussian(e, mask, s, W_p, v_p, S, D):
    """The Gaussian replaced by its first-order expansion, 1 - (i - p_t)^2 / (2 sigma^2): negative near the window's
    ends."""
    p, _ = ref.local_p(e, mask, s, W_p, v_p, S, D)
    distance = torch.arange(e.shape[-1], dtype=e.dtype)[None, :] - p[:, None]
    return p, ref.masked_softmax(e, (distance.abs() <= D) & mask) * (1 - distance ** 2 / (2 * (D / 2) ** 2))


def _positions(args):
    values = M.variants(_POSITION, *args, pick=lambda r: r[0])
    for kind, (_, words) in SCALES.items():
        values[M.p_scale.at(what=words)] = wrong_local_p(f"scale:{kind}")(*args)[0]
    return values


def _property(alpha, p, mask, D):
    """The first property the weights break: weight outside the window or on padding, a negative weight."""
    a, T = to_numpy(alpha), alpha.shape[-1]
    outside = ~(((torch.arange(T)[None, :] - p[:, None]).abs() <= D) & mask).numpy()
    for found, mistake in ((np.argwhere(outside & (np.abs(a) >= 1e-6)), M.outside_window),
                           (np.argwhere(a < -1e-6), M.negative_weights)):
        if len(found):
            fail(mistake.at(row=int(found[0][0]), i=int(found[0][1])))


def _inputs(ev: Evaluation, seed, B, T, d_s, d_p, D, lengths, p_at):
    g = ev.rng(440 + seed)
    e, s = randn(g, B, T, scale=2.0), randn(g, B, d_s)
    W_p, v_p = randn(g, d_p, d_s), randn(g, d_p, scale=1.5)
    lengths = torch.tensor(lengths)
    mask = torch.arange(T)[None, :] < lengths[:, None]                      # (B, T), True = real token
    S = (lengths - 1).float()                                              # the last position
    if p_at is not None:                                                   # S chosen so that p_t = p_at
        p_at = torch.tensor(p_at)
        s[p_at == p_at.round()] = 0.0                                      # a whole p_t, exactly
        S = p_at / torch.sigmoid(torch.tanh(s @ W_p.T) @ v_p)
    return e, mask, s, W_p, v_p, S, D


def _gaussian_written_out(e, mask, s, W_p, v_p, S, D):
    """A right answer written another way: F.linear for p, the Gaussian as exp(-2 (i - p)^2 / D^2)."""
    p = S * torch.sigmoid(torch.nn.functional.linear(torch.tanh(torch.nn.functional.linear(s, W_p)), v_p[None])[:, 0])
    distance = torch.arange(e.shape[-1], dtype=e.dtype)[None, :] - p[:, None]
    keep = (distance.abs() <= D) & mask
    return p, ref.masked_softmax(e, keep) * torch.exp(-2 * distance ** 2 / D ** 2)


@exercise("local-p attention: position, window and Gaussian", name="local_p", reference=ref.local_p, mistakes=M,
          right=[_gaussian_written_out])
def local_p(ev: Evaluation, answer):
    """answer(e (B, T), mask (B, T), s (B, d_s), W_p (d_p, d_s), v_p (d_p,), S (B,), D) -> p (B,), alpha (B, T)."""
    configs = [(4, 12, 4, 4, 2, [12, 8, 4, 11], [3.7, 6.2, 2.8, 5.0]), (3, 12, 5, 5, 2, [12, 9, 6], None),
               (4, 10, 4, 6, 3, [10, 10, 7, 5], None), (2, 9, 6, 3, 1, [9, 4], None)]
    for seed, (B, T, *config) in enumerate(configs):
        args = _inputs(ev, seed, B, T, *config)
        mask, D = args[1], args[-1]
        p_ref, alpha_ref = ref.local_p(*args)
        p, alpha = expect_returns(ev.call(answer, *args), (p_ref, alpha_ref), ("p", "alpha"))
        expect_shape(p, (B,), f"p (B={B})")
        ev.expect_close(p, p_ref, f"p (lengths {mask.sum(-1).tolist()})", mistakes=_positions(args))
        expect_shape(alpha, (B, T), f"alpha (B={B}, T={T})")
        try:
            ev.expect_close(alpha, alpha_ref, f"alpha (D={D}, p={[round(x, 2) for x in p_ref.tolist()]})",
                            mistakes=M.variants(_WEIGHTS, *args, pick=lambda r: r[1]))
        except ValuesDiffer:
            _property(alpha, p_ref, mask, D)
            raise
    return len(configs)

