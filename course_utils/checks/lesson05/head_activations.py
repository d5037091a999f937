"""The activations of lesson 05's head parameters: what the lesson's table asks for each of k, beta, g, s, gamma,
every other common activation a learner may apply instead, and a head's parameters computed with one of those slips
(the single definition of head_parameters.py's mistakes).

    wrong_heads(name=..., act=...)(raw, M, S)        # `name` with the activation `act`
    wrong_heads(name=..., start=...)(raw, M, S)      # `name` from the slice of raw starting at `start`
    wrong_heads(s_dim=0)(raw, M, S)                  # s's softmax over another axis
"""
import torch
import torch.nn.functional as F

from ... import memory as ref

NAMES = ("k", "beta", "g", "s", "gamma")
SOFTMAX = "a softmax over the last axis"
ACTIVATIONS = {"no activation": lambda x: x, "relu": torch.relu, "abs": torch.abs, "exp": torch.exp,
               "square": torch.square, "sigmoid": torch.sigmoid, "tanh": torch.tanh, "softplus": F.softplus,
               "1 + relu": lambda x: 1 + torch.relu(x), "1 + exp": lambda x: 1 + torch.exp(x),
               "1 + sigmoid": lambda x: 1 + torch.sigmoid(x), "1 + softplus": lambda x: 1 + F.softplus(x),
               "a clamp to [0, 1]": lambda x: x.clamp(0, 1), SOFTMAX: lambda x: torch.softmax(x, dim=-1),
               "softplus(1 + x)": lambda x: F.softplus(1 + x)}
# name -> (the activation the table asks for, what it gives, the code)
WANTED = {"k": ("no activation", "the key is any vector of R^M", "use its slice as it is"),
          "beta": ("softplus", "a key strength >= 0, smooth, with a gradient for every raw value", "F.softplus(beta)"),
          "g": ("sigmoid", "a gate in [0, 1], smooth, with a gradient for every raw value", "torch.sigmoid(g)"),
          "s": (SOFTMAX, "a distribution over the shifts", "torch.softmax(s, dim=-1)"),
          "gamma": ("1 + softplus", "a sharpening exponent >= 1, smooth", "1 + F.softplus(gamma)")}
# what an activation breaks, where the table's reason alone does not say it
WHY = {"relu": ": relu is 0, with no gradient, for every raw value below 0, where the head could never recover",
       "a clamp to [0, 1]": ": a clamp has no gradient outside [0, 1]",
       ("gamma", "softplus"): ": softplus alone falls below 1, where sharpening would flatten the weighting",
       ("beta", "no activation"): ": a raw beta can be negative, which turns the addressing away from the key",
       ("g", "no activation"): ": a raw gate leaves [0, 1]",
       ("g", "tanh"): ": tanh's values lie in (-1, 1)"}


def why(name, act, single):
    """The words after "{name} uses {act}": what that activation breaks (or "")."""
    if act == SOFTMAX and single:
        return ": a softmax over an axis of size 1 is always 1"
    return WHY.get((name, act), WHY.get(act, ""))


def others(name):
    """The activations a learner may give `name` instead of the table's (softplus(1 + x) is gamma's own mistake)."""
    return [act for act in ACTIVATIONS if act not in (WANTED[name][0], "softplus(1 + x)")]


def wrong_heads(name=None, act=None, start=None, s_dim=-1):
    """head_parameters with one slip: `name` with the activation `act`, or from the slice of raw at `start`; or the
    softmax of s over the axis `s_dim`."""
    def head_parameters(raw, M, num_shifts=3):
        sizes = ref.head_sizes(M, num_shifts)
        parts = dict(zip(NAMES, torch.split(raw, sizes, dim=-1)))
        if start is not None:
            parts[name] = raw[..., start:start + sizes[NAMES.index(name)]]
        out = {n: ACTIVATIONS[WANTED[n][0]](parts[n]) for n in NAMES}
        if act is not None:
            out[name] = ACTIVATIONS[act](parts[name])
        if s_dim != -1:
            out["s"] = torch.softmax(parts["s"], dim=s_dim)
        return tuple(out[n] for n in NAMES)
    return head_parameters


def signed_scalars(raw, M):
    """raw with beta, g and gamma (entries M, M + 1 and -1 of its last axis) between 1.2 and 2.5 in size, negative in
    every other head and positive in the rest: activations that agree on one sign (relu and none, abs and none)
    differ on the other, and a size above 1 but not far from 0 tells a clamp from relu and relu from softplus."""
    sign = torch.ones(raw.shape[:-1]).flatten()
    sign[::2] = -1
    raw = raw.clone()
    for i in (M, M + 1, raw.shape[-1] - 1):
        raw[..., i] = sign.reshape(raw.shape[:-1]) * (1.2 + 1.3 * torch.sigmoid(raw[..., i]))
    return raw
