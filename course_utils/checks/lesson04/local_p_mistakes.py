"""Local-p attention written with one typical slip: the single definition of every mistake lesson 04's local-p check
registers (local_p.py), as a parametric wrong answer.

    wrong_local_p(slip)(e, mask, s, W_p, v_p, S, D) -> p (B,), alpha (B, T)

slip: None (the right answer), a slip of the position p_t (POSITION_SLIPS, "scale:<kind>" for a wrong S, SCALES),
or of the window, the softmax or the Gaussian (WEIGHT_SLIPS).
"""
import torch

from ...masks import masked_softmax

# p_t scaled by something else than the argument S: kind -> (the scale from (T, the lengths, S), its words)
SCALES = {
    "padded_last": (lambda T, lengths, S: T - 1, "the padded length T - 1, the same for every row"),
    "padded_length": (lambda T, lengths, S: T, "the padded length T, the same for every row"),
    "largest_S": (lambda T, lengths, S: S.max(), "the largest S, the same for every row"),
    "mask_last": (lambda T, lengths, S: lengths - 1, "the last positions computed from the mask"),
    "mask_lengths": (lambda T, lengths, S: lengths, "the lengths computed from the mask"),
}
POSITION_SLIPS = ("p_not_scaled", "p_no_tanh", "p_no_sigmoid", "p_rounded", "W_p_transposed")
WEIGHT_SLIPS = ("softmax_all", "softmax_then_cut", "sigma_D", "no_two", "no_gaussian", "gaussian_times_scores",
                "renormalised", "by_max", "mask_ignored", "centred_round", "centred_floor", "window_wide",
                "window_narrow", "window_strict", "window_slice")


def _position(s, W_p, v_p, S, mask, slip):
    """p_t = S * sigmoid(v_p^T tanh(W_p s_t)), (B,), with the slip."""
    z = torch.tanh(s @ (W_p if slip == "W_p_transposed" else W_p.T)) @ v_p               # (B,)
    if slip == "p_no_tanh":
        z = (s @ W_p.T) @ v_p
    if slip == "p_no_sigmoid":
        return S * z
    if slip == "p_not_scaled":
        return torch.sigmoid(z)
    if slip is not None and slip.startswith("scale:"):
        lengths = mask.sum(-1).to(z.dtype)
        S = SCALES[slip.partition(":")[2]][0](mask.shape[-1], lengths, S)
    p = S * torch.sigmoid(z)
    return p.round() if slip == "p_rounded" else p


def _weights(e, mask, p, D, slip):
    """alpha = the softmax over the window |i - p_t| <= D (and the mask), times the Gaussian, (B, T), with the slip."""
    T = e.shape[-1]
    positions = torch.arange(T, dtype=e.dtype)[None, :]                                  # (1, T)
    distance = positions - p[:, None]                                                    # (B, T)
    centre = {"centred_round": p.round(), "centred_floor": p.floor()}.get(slip, p)
    off = (positions - centre[:, None]).abs()
    window = {"window_wide": off <= D + 1, "window_narrow": off <= D - 1, "window_strict": off < D,
              "window_slice": (positions >= p.floor()[:, None] - D) & (positions < p.floor()[:, None] + D)
              }.get(slip, off <= D)
    keep = window if slip == "mask_ignored" else window & mask
    sigma = D if slip == "sigma_D" else D / 2
    gauss = torch.exp(-distance ** 2 / ((1 if slip == "no_two" else 2) * sigma ** 2))
    if slip == "softmax_all":
        return masked_softmax(e, mask) * gauss
    if slip == "softmax_then_cut":
        return masked_softmax(e, mask) * gauss * window
    if slip == "gaussian_times_scores":
        return masked_softmax(e * gauss, keep)
    if slip == "renormalised":
        weights = masked_softmax(e, keep) * gauss
        return weights / weights.sum(-1, keepdim=True)
    if slip == "by_max":
        exp = torch.exp(e - e.masked_fill(~keep, -torch.inf).amax(-1, keepdim=True)) * keep
        return exp / exp.amax(-1, keepdim=True) * gauss
    soft = masked_softmax(e, keep)
    return soft if slip == "no_gaussian" else soft * gauss


def wrong_local_p(slip=None):
    """local_p written from the formulas with one `slip` (see the module's docstring)."""
    def local_p(e, mask, s, W_p, v_p, S, D):
        p = _position(s, W_p, v_p, S, mask, slip if slip not in WEIGHT_SLIPS else None)
        return p, _weights(e, mask, p, D, slip if slip in WEIGHT_SLIPS else None)
    local_p.__name__ = f"local_p_{slip}"
    return local_p
