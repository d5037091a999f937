"""Exercise 4's known mistakes, as wrong answers with the exercise's signature: `linear(q, k, v, kind)`, linear
attention with one thing wrong (`kind="ok"` is right), the quadratic form of the kernel (`quadratic`, also the
formula the check compares with), and the answers that form the T_q x T_k weights. The registry that names them is
in linear_attention.py."""
import math

import torch
import torch.nn.functional as F

from ... import efficient_attention as ref
from .naming import Forms


def phi(x):
    return F.elu(x) + 1


def _identity(x):
    return x


FEATURE_MAPS = {"elu_shifted": lambda x: F.elu(x + 1), "phi_exp": torch.exp, "relu_plus1": lambda x: F.relu(x) + 1,
                "phi_softmax": lambda x: torch.softmax(x, dim=-1), "gelu_plus1": lambda x: F.gelu(x) + 1,
                "softplus": F.softplus}


def quadratic(q, k, v, fq=phi, fk=phi, axis=-1):
    """The kernel's quadratic form, weights normalised over `axis` (-1: over the keys, right)."""
    a = fq(q) @ fk(k).transpose(-2, -1)                   # (..., T_q, T_k)
    return (a / a.sum(dim=axis, keepdim=True)) @ v


def linear(q, k, v, kind="ok"):
    """Linear attention, right or with one typical mistake."""
    if kind == "phi_missing":
        return quadratic(q, k, v, _identity, _identity)
    if kind == "phi_q_only":
        return quadratic(q, k, v, phi, _identity)
    if kind == "phi_k_only":
        return quadratic(q, k, v, _identity, phi)
    if kind == "elu_no_plus1":
        return quadratic(q, k, v, F.elu, F.elu)
    if kind == "relu":
        return quadratic(q, k, v, F.relu, F.relu)
    if kind == "k_no_plus1":                              # the +1 written for q only
        return quadratic(q, k, v, phi, F.elu)
    if kind in FEATURE_MAPS:
        return quadratic(q, k, v, FEATURE_MAPS[kind], FEATURE_MAPS[kind])
    if kind == "causal":                                  # cumulative sums: query t reads keys 0..t only
        a = (phi(q) @ phi(k).transpose(-2, -1)).tril()
        return (a / a.sum(dim=-1, keepdim=True)) @ v
    if kind == "scaled":
        return quadratic(q / math.sqrt(q.shape[-1]), k, v)
    if kind == "softmax":
        return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1) @ v
    if kind == "normalised_over_queries":
        return quadratic(q, k, v, axis=-2)
    phi_q, phi_k = phi(q), phi(k)
    S = (phi_q if kind == "S_from_q" else phi_k).transpose(-2, -1) @ (phi(v) if kind == "phi_v" else v)   # (d_k, d_v)
    if kind == "no_denominator":
        return phi_q @ S
    if kind == "z_scalar":                                # one number for all the queries: Σ_j Σ_c φ(k_j)_c
        return phi_q @ S / phi_k.sum(dim=(-2, -1), keepdim=True)
    z = phi_k.sum(dim=-1 if kind == "z_wrong_axis" else -2)              # (..., d_k) (wrong axis: (..., T_k))
    if kind == "denominator_broadcast":                                   # (..., T_q) divides the columns
        return (phi_q @ S) / (phi_q * z[..., None, :]).sum(dim=-1)
    return (phi_q @ S) / (phi_q @ z[..., None])


FORMS = Forms(linear)


def learner(slip):
    """Linear attention as a learner writes it, with one slip in the denominator."""
    def answer(q, k, v):
        phi_q, phi_k = phi(q), phi(k)
        numerator = phi_q @ (phi_k.transpose(-2, -1) @ v)
        if slip == "z_of_queries":                            # z summed over the queries' features
            return numerator / (phi_q @ phi_q.sum(-2)[..., None])
        return numerator / phi_q.sum(-1, keepdim=True)        # "q_only": the queries' features alone
    return answer


def weights_formed(q, k, v):
    """Right values, but the T_q x T_k weights are formed (the quadratic form)."""
    return quadratic(q, k, v)


def kernel_quadratic(q, k, v):
    """The course's own quadratic form of the kernel: right values, T_q x T_k weights."""
    return ref.kernel_attention(q, k, v)
