"""Lesson 04's typical mistakes, for its checks (lesson04.py): what a wrong score function, a wrong local-p or a
wrong REINFORCE loss returns, and the crash of a score function that mixes up two sizes, named.

    batch_mixups(lambda s2: score(s2, h), s)      # {symptom: the scores with s mixed across the batch}
    cosine_norm_mistakes(s, h, beta)              # {symptom: a cosine with norms over the wrong axes}
    separate_sums(score_of_dot, s, h)             # {symptom: s·h_i taken as (sum_k s_k)(sum_k h_ik)}
    broadcast_crash(text, B, T, d)                # the symptom of a crash where (B,) met (B, T), or a norm met d
    additive_mistakes(s, h, W_a, v_a)             # {symptom: what a wrong additive score gives}
    position_mistakes(s, W_p, v_p, S, mask)       # {symptom: a wrong p_t of local-p}
    weight_mistakes(e, mask, p, D)                # {symptom: wrong local-p weights alpha}
    reinforce_mistakes(log_alpha, sampled, reward, baseline)
    renamed(error, symptom)                       # a learner's crash (ev.call's ExerciseError), named
"""
import re

import torch

from .. import scores as ref
from .core import ExerciseError
from .evaluation import RAISED

SIZES_MIXED = ("your function works when d_s = d_h but fails when they differ (here d_s = {d_s}, d_h = {d_h}): "
               "d_h is used where d_s belongs, or the reverse. W_a = [W_s W_h] splits after its first d_s "
               "columns: W_s = W_a[:, :d_s] (d_a, d_s) multiplies s, W_h = W_a[:, d_s:] (d_a, d_h) multiplies h_i")


def renamed(error, symptom):
    """The ExerciseError of a learner's crash (`ev.call`'s "your function raised ..."), told as `symptom`, the
    PyTorch message and the learner's lines kept below it."""
    raised, _, rest = str(error)[len(RAISED):].partition("\n")
    where = "\n".join(line for line in rest.splitlines() if "called with" not in line)
    return ExerciseError(f"{symptom}\n  (PyTorch: {raised[:200]})" + (f"\n{where}" if where.strip() else ""))


def dot(s, h):
    return torch.einsum("bd,btd->bt", s, h)


DOT_RIGHT = "einsum 'bd,btd->bt', or `h @ s[:, :, None]` (a batched matmul, (B, T, 1))"


def batch_mixups(score_of_s, s, right=DOT_RIGHT):
    """The scores when example b does not use its own s_b: s summed or averaged over the batch (an einsum index
    of its own), or the s of one example for all (`h @ s.T` is (B, T, B); `[..., 0]` keeps example 0's).
    score_of_s(s2) -> the scores with s replaced by s2 (B, d_s); right: how the exercise pairs them, e.g."""
    if s.shape[0] < 2:
        return {}
    how = f"each example b must use its own s_b: give s the batch index b of the output, e.g. {right}"
    return {
        "s is summed over the batch (a separate einsum index for s, e.g. 'ad,...->bt', or a sum over dim 0): "
        + how: score_of_s(s.sum(0, keepdim=True).expand_as(s)),
        "s is averaged over the batch (a mean over dim 0): " + how: score_of_s(s.mean(0, keepdim=True).expand_as(s)),
        "every example is scored with the s of example 0 (`h @ s.T` pairs every h with every s, (B, T, B), and "
        "`[..., 0]` keeps example 0's): " + how: score_of_s(s[:1].expand_as(s)),
        "every example is scored with the s of the last example: " + how: score_of_s(s[-1:].expand_as(s)),
    }


def separate_sums(score_of_dot, s, h, wrong="'bd,bte->bt'", right="'bd,btd->bt'"):
    """The scores when s·h_i is computed as (sum_k s_k)(sum_k h_ik): an einsum with one letter for the features of
    s and another for those of h sums each on its own. score_of_dot(dot (B, T)) -> the scores from that dot;
    wrong, right: such an einsum and the exercise's."""
    return {"s and h_i are summed separately, (sum_k s_k)(sum_k h_ik), instead of multiplied feature by feature "
            f"and then summed: an einsum with different letters for the features of s and of h (e.g. {wrong}) "
            f"sums each over its own letter; give the shared feature axis ONE letter, {right}":
                score_of_dot(s.sum(-1)[:, None] * h.sum(-1))}


BROADCAST = re.compile(r"size of tensor a \((\d+)\) must match the size of tensor b \((\d+)\)")


def broadcast_crash(text, B, T, d):
    """The symptom of a score function's crash `text` where PyTorch could not broadcast two sizes: a (B,) tensor
    against a (B, T) one (the T axis met the batch axis), or a norm without keepdim against the d features; None
    for another crash or when the sizes do not tell (two of B, T, d equal)."""
    match = BROADCAST.search(text)
    if not match or len({B, T, d}) < 3:
        return None
    sizes = {int(match[1]), int(match[2])}
    if sizes == {B, T}:
        return (f"a tensor of shape (B,) met one of shape (B, T) (B = {B}, T = {T}): PyTorch lines up the LAST "
                "axes, so the (B,) one is matched with the T axis, not the batch axis. A norm taken without "
                "keepdim=True does this: keep its axis, |s| = s.norm(dim=-1, keepdim=True) of shape (B, 1)")
    if d in sizes and sizes <= {B, T, d}:
        return (f"a norm taken without keepdim=True (|s| of shape (B,) or |h_i| of shape (B, T)) divides vectors "
                f"of d features (d = {d}): PyTorch lines up the LAST axes, so the norm meets the feature axis. Keep "
                "its axis: s.norm(dim=-1, keepdim=True) (B, 1), h.norm(dim=-1, keepdim=True) (B, T, 1)")
    return None


def cosine_norm_mistakes(s, h, beta):
    """The cosine with |s| or |h_i| taken over the wrong axes (the whole tensor, the batch axis, the time
    axis), the vectors normalised first as F.normalize does."""
    s_norms = [(s.norm(dim=-1, keepdim=True), None),
               (s.norm(), "|s| is the norm of the whole tensor s (`s.norm()` without dim)"),
               (s.norm(dim=0, keepdim=True), "s is normalised along the batch axis (dim=0)")]
    h_norms = [(h.norm(dim=-1, keepdim=True), None),
               (h.norm(), "|h_i| is the norm of the whole tensor h (`h.norm()` without dim)"),
               (h.norm(dim=1, keepdim=True), "h is normalised along the time axis (dim=1)"),
               (h.norm(dim=0, keepdim=True), "h is normalised along the batch axis (dim=0)")]
    found = {}
    for n_s, s_wrong in s_norms:
        for n_h, h_wrong in h_norms:
            if s_wrong or h_wrong:
                wrong = " and ".join(x for x in (s_wrong, h_wrong) if x)
                found[f"{wrong}: divide each vector by its own norm, taken over the features (the last axis): "
                      "|s| = s.norm(dim=-1), |h_i| = h.norm(dim=-1)"] = beta * dot(s / n_s, h / n_h)
    return found


def additive_mistakes(s, h, W_a, v_a):
    B, T, d_s, d_h, d_a = *h.shape[:2], s.shape[-1], h.shape[-1], W_a.shape[0]
    W_s, W_h = W_a[:, :d_s], W_a[:, d_s:]
    inside = (s @ W_s.T)[:, None] + h @ W_h.T                                # (B, T, d_a)
    found = {
        "the tanh is missing: e_i = v_a^T tanh(W_s s + W_h h_i)": inside @ v_a,
        "the tanh is applied after the projection by v_a: e_i = v_a^T tanh(W_s s + W_h h_i), "
        "tanh first": torch.tanh(inside @ v_a),
        "v_a is missing: you summed tanh(W_s s + W_h h_i) over its d_a entries; project it with v_a "
        "(`@ v_a`)": torch.tanh(inside).sum(-1),
        "the tanh is taken of W_s s and of W_h h_i separately: take the tanh of their SUM, "
        "v_a^T tanh(W_s s + W_h h_i)": (torch.tanh(s @ W_s.T)[:, None] + torch.tanh(h @ W_h.T)) @ v_a,
    }
    if d_s == d_h:
        found["the blocks of W_a are swapped: its first d_s columns multiply s, the rest multiply h_i"] = \
            torch.tanh((s @ W_h.T)[:, None] + h @ W_s.T) @ v_a
    if d_s == d_h == d_a:
        found["W_s and W_h are used without transposing: W_s s for a batch of rows s is s @ W_s.T"] = \
            torch.tanh((s @ W_s)[:, None] + h @ W_h) @ v_a
    if d_h == d_a:
        found["W_h is used without transposing: W_h h_i for the rows h_i of h is h @ W_h.T (W_h has shape "
              "(d_a, d_h))"] = torch.tanh((s @ W_s.T)[:, None] + h @ W_h) @ v_a
    if d_s == d_a:
        found["W_s is used without transposing: W_s s for a batch of rows s is s @ W_s.T (W_s has shape "
              "(d_a, d_s))"] = torch.tanh((s @ W_s)[:, None] + h @ W_h.T) @ v_a
    if B == T:
        found["W_s s (B, d_a) is added to W_h h (B, T, d_a) without a T axis, so it broadcasts over the wrong "
              "axis (position i gets the s of example i): give it the axis, (s @ W_s.T)[:, None, :] of shape "
              "(B, 1, d_a)"] = torch.tanh((s @ W_s.T)[None] + h @ W_h.T) @ v_a
    return found


def position_mistakes(s, W_p, v_p, S, mask):
    """What the likely mistakes in p_t = S * sigmoid(v_p^T tanh(W_p s_t)) produce."""
    z = torch.tanh(s @ W_p.T) @ v_p                                          # (B,)
    T, lengths = mask.shape[-1], mask.sum(-1).to(z.dtype)
    mistakes = {
        "p_t is not scaled by S: sigmoid(...) lies in [0, 1]; p_t = S * sigmoid(v_p^T tanh(W_p s_t)) "
        "lies in [0, S]": torch.sigmoid(z),
        "the tanh is missing in p_t = S * sigmoid(v_p^T tanh(W_p s_t))": S * torch.sigmoid((s @ W_p.T) @ v_p),
        "the sigmoid is missing in p_t = S * sigmoid(v_p^T tanh(W_p s_t)): it keeps p_t in [0, S]": S * z,
        "p_t is rounded: keep it a real number (it is learned by gradient descent); only the window "
        "test |i - p_t| <= D picks whole positions": (S * torch.sigmoid(z)).round(),
    }
    for scale, what in ((T - 1, "the padded length T - 1, the same for every row"),
                        (T, "the padded length T, the same for every row"),
                        (S.max(), "the largest S, the same for every row"),
                        (lengths - 1, "the last positions computed from the mask"),
                        (lengths, "the lengths computed from the mask")):
        mistakes[f"p_t is scaled by {what}: scale by the argument S (B,), each source's own last position, "
                 "p_t = S * sigmoid(v_p^T tanh(W_p s_t))"] = scale * torch.sigmoid(z)
    if W_p.shape[0] == W_p.shape[1]:
        mistakes["W_p is transposed: W_p s_t for a batch of rows s is s @ W_p.T (W_p has shape (d_p, d_s))"] = \
            S * torch.sigmoid(torch.tanh(s @ W_p) @ v_p)
    return mistakes


def weight_mistakes(e, mask, p, D):
    """What the likely mistakes in the window, the softmax and the Gaussian produce."""
    T = e.shape[-1]
    distance = torch.arange(T, dtype=e.dtype)[None, :] - p[:, None]        # (B, T)
    window = distance.abs() <= D
    keep = window & mask
    sigma = D / 2
    gauss = torch.exp(-distance ** 2 / (2 * sigma ** 2))
    soft = ref.masked_softmax(e, keep)

    def windowed(other):
        return ref.masked_softmax(e, other & mask) * gauss

    by_max = torch.exp(e - e.masked_fill(~keep, -torch.inf).amax(-1, keepdim=True)) * keep
    return {
        "the softmax runs over all positions: take it over the window only (mask the positions with "
        "|i - p_t| > D), then multiply by the Gaussian": ref.masked_softmax(e, mask) * gauss,
        "the softmax runs over all positions and is cut to the window afterwards: take the softmax over "
        "the window only (mask first, then softmax)": ref.masked_softmax(e, mask) * gauss * window,
        "sigma = D: the Gaussian's width is sigma = D / 2": soft * torch.exp(-distance ** 2 / (2 * D ** 2)),
        "the Gaussian is exp(-(i - p_t)^2 / (2 sigma^2)): the factor 2 in the denominator is missing":
            soft * torch.exp(-distance ** 2 / sigma ** 2),
        "the Gaussian is missing: multiply the window softmax by exp(-(i - p_t)^2 / (2 sigma^2))": soft,
        "the Gaussian multiplies the scores before the softmax: take the softmax of the scores, then "
        "multiply the weights by the Gaussian": ref.masked_softmax(e * gauss, keep),
        "the weights are renormalised after the Gaussian (or the Gaussian went into the scores before the "
        "softmax): local-p multiplies the window softmax by the Gaussian and stops there, so the weights "
        "sum to less than 1": soft * gauss / (soft * gauss).sum(-1, keepdim=True),
        "the window softmax is divided by its largest term instead of the sum of its terms":
            by_max * gauss,
        "the mask is ignored: padded positions inside the window get weight; combine the window with the "
        "mask (window & mask)": ref.masked_softmax(e, window) * gauss,
        "the window is centred on round(p_t): keep p_t real; the window holds the positions with "
        "|i - p_t| <= D": windowed((torch.arange(T)[None, :] - p.round()[:, None]).abs() <= D),
        "the window is centred on int(p_t) (rounded down): keep p_t real; the window holds the positions "
        "with |i - p_t| <= D": windowed((torch.arange(T)[None, :] - p.floor()[:, None]).abs() <= D),
        "the window is one position too wide on each side: it holds the positions with |i - p_t| <= D":
            windowed(distance.abs() <= D + 1),
        "the window is one position too narrow on each side: it holds the positions with |i - p_t| <= D":
            windowed(distance.abs() <= D - 1),
        "the window test is strict, |i - p_t| < D, which drops its ends when p_t is a whole number: the "
        "window holds the positions with |i - p_t| <= D (use <=)": windowed(distance.abs() < D),
        "the window is the slice [int(p_t) - D : int(p_t) + D], which stops before its end: the window "
        "holds the positions with |i - p_t| <= D (keep p_t real)":
            windowed((torch.arange(T)[None, :] >= p.floor()[:, None] - D)
                     & (torch.arange(T)[None, :] < p.floor()[:, None] + D)),
    }


def reinforce_mistakes(log_alpha, sampled, reward, baseline):
    B = len(sampled)
    log_p = log_alpha[torch.arange(B), sampled]                             # (B,)
    advantage = reward - baseline
    return {
        "the baseline is missing: the loss is -(r - b) log alpha[sampled]; subtracting b leaves the "
        "gradient unbiased and makes it far less noisy": -(reward * log_p).mean(),
        "the baseline is added: the advantage is r - b, so the loss is -(r - b) log alpha[sampled], "
        "not -(r + b) log alpha[sampled]": -((reward + baseline) * log_p).mean(),
        "the baseline must multiply the log-probability: -(r - b) log alpha[sampled], not "
        "-(r log alpha[sampled]) + b": -(reward * log_p).mean() + baseline,
        "the baseline must multiply the log-probability: -(r - b) log alpha[sampled], not "
        "-(r log alpha[sampled]) - b": -(reward * log_p).mean() - baseline,
        "the loss has the wrong sign: MINIMISE -(r - b) log alpha[sampled], so that gradient descent raises "
        "the log-probability of the samples that did better than the baseline": (advantage * log_p).mean(),
        "you used alpha instead of log alpha: REINFORCE weights the gradient of the LOG-probability, "
        "-(r - b) log alpha[sampled] (the argument is already log alpha)": -(advantage * log_p.exp()).mean(),
        "the loss is summed over the batch: take the mean over the B examples": -(advantage * log_p).sum(),
        "you returned one loss per example: return their mean over the batch, a single number":
            -(advantage * log_p),
        "(r - b) of shape (B,) times the gathered log-probabilities of shape (B, 1) broadcasts to (B, B): "
        "squeeze them to (B,) first (`[:, 0]`)": -(advantage * log_p[:, None]).mean(),
        "log_alpha[:, sampled] picks a (B, B) block: take one entry per example, "
        "log_alpha[torch.arange(B), sampled] (or `gather`)": -(advantage * log_alpha[:, sampled]).mean(),
        "the log-probabilities of every position are used: take only the sampled one, "
        "log alpha[b, sampled[b]]": -(advantage[:, None] * log_alpha).mean(),
        "the log-probabilities of every position are summed: take only the sampled one, "
        "log alpha[b, sampled[b]]": -(advantage[:, None] * log_alpha).sum(-1).mean(),
    }
