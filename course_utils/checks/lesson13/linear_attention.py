"""Lesson 13, exercise 4: linear attention.

    linear_attention(q (..., T_q, d), k (..., T_k, d), v (..., T_k, d_v)) -> (..., T_q, d_v)

out_t = φ(q_t)ᵀ (Σ_j φ(k_j) v_jᵀ) / φ(q_t)ᵀ (Σ_j φ(k_j)), φ(x) = elu(x) + 1: time and memory linear in T.

The check compares the output with the kernel's quadratic form (weights φ(q_t)·φ(k_j) normalised over the keys) on
three shapes, the first with B = T_q = T_k = d = d_v (so that the mistakes of a wrong axis still run), the second
with T_q != T_k and d != d_v; and it tests the point (probes.py): nothing of size T_q x T_k created (256 x 256).
The wrong answers are in linear_attention_mistakes.py.
"""
import functools

import torch
import torch.nn.functional as F

from ... import efficient_attention as ref
from ..core import Mistake, Mistakes, exercise, expect, expect_shape, randn, single_threaded
from ..evaluation import Evaluation
from ..expectations import explained
from .crashes import naming_crashes
from .linear_attention_mistakes import FORMS, kernel_quadratic, learner, quadratic
from .naming import by_values
from .probes import largest_tensor, normalised, quadratic_symptom

_PHI = "φ(x) = elu(x) + 1"
M = Mistakes(
    Mistake("S_from_q", "S is built from the queries, Σ_t φ(q_t) v_tᵀ: the numerator's S sums over the KEYS, "
            "S = Σ_j φ(k_j) v_jᵀ (d_k x d_v), then φ(q_t)ᵀ S for each query", shows=FORMS.shows("S_from_q")),
    Mistake("no_denominator", "the output is not normalised: φ(q_t)ᵀ(Σ_j φ(k_j) v_jᵀ) is divided by "
            "φ(q_t)ᵀ Σ_j φ(k_j), the sum of the kernel over the keys, so that the weights of each query sum to 1",
            shows=FORMS.shows("no_denominator")),
    Mistake("phi_missing", "φ is missing: linear attention needs positive features, " + _PHI + ", applied to q and to "
            "k (with raw q·k the 'weights' can be negative and the denominator 0)", shows=FORMS.shows("phi_missing")),
    Mistake("phi_q_only", "φ is applied to q only: the keys go through " + _PHI + " too",
            shows=FORMS.shows("phi_q_only")),
    Mistake("phi_k_only", "φ is applied to k only: the queries go through " + _PHI + " too",
            shows=FORMS.shows("phi_k_only")),
    Mistake("elu_no_plus1", "φ(x) = elu(x) is negative for x < 0: the feature map is elu(x) + 1 > 0, so that every "
            "weight φ(q)·φ(k) is positive", shows=FORMS.shows("elu_no_plus1")),
    Mistake("k_no_plus1", "φ(k) is elu(k), without the +1 (written for q only): " + _PHI + " for the keys too",
            shows=FORMS.shows("k_no_plus1")),
    Mistake("relu", "φ(x) = relu(x) is 0 for every negative entry (a query or key can then get no weight at all): the "
            "feature map is elu(x) + 1 > 0", shows=FORMS.shows("relu")),
    Mistake("elu_shifted", "φ(x) = elu(x + 1): the +1 goes outside, " + _PHI, hint="F.elu(x) + 1",
            shows=FORMS.shows("elu_shifted")),
    Mistake("phi_exp", "φ(x) = exp(x): the exercise's feature map is elu(x) + 1 (exp of each feature is not the "
            "softmax's kernel, and it overflows)", shows=FORMS.shows("phi_exp")),
    Mistake("relu_plus1", "φ(x) = relu(x) + 1: the feature map is elu(x) + 1 (smooth below 0)",
            shows=FORMS.shows("relu_plus1")),
    Mistake("gelu_plus1", "φ is gelu(x) + 1: the lesson's feature map is elu(x) + 1 (positive, exp(x) for x < 0)",
            shows=FORMS.shows("gelu_plus1")),
    Mistake("softplus", "φ is softplus(x): the lesson's feature map is elu(x) + 1", shows=FORMS.shows("softplus")),
    Mistake("phi_softmax", "φ(x) = softmax(x) over the features: the feature map is elu(x) + 1, applied to each "
            "feature alone", shows=FORMS.shows("phi_softmax")),
    Mistake("phi_v", "φ is applied to the values too: only q and k go through φ (the kernel φ(q)·φ(k) replaces "
            "exp(q·k)); the values enter as they are", shows=FORMS.shows("phi_v")),
    Mistake("z_scalar", "the denominator is one number for every query: it is φ(q_t)ᵀ z, one number per QUERY, with "
            "z = Σ_j φ(k_j) a vector of d_k numbers", hint="phi_q @ z", shows=FORMS.shows("z_scalar")),
    Mistake("z_wrong_axis", "the denominator sums φ(k) over the wrong axis: z = Σ_j φ(k_j) sums over the KEYS, one "
            "vector of d_k numbers", hint="phi_k.sum(dim=-2)", shows=FORMS.shows("z_wrong_axis")),
    Mistake("denominator_broadcast", "the denominator divides the wrong axis: φ(q_t)ᵀ z is one number per QUERY, "
            "which divides each row of φ(q) S (it needs a last axis of size 1)", hint="(phi_q @ z)[..., None]",
            shows=FORMS.shows("denominator_broadcast")),
    Mistake("normalised_over_queries", "the weights are normalised over the queries: each query's weights sum to 1 "
            "over the keys, φ(q_t)ᵀ z with z = Σ_j φ(k_j)", shows=FORMS.shows("normalised_over_queries")),
    Mistake("causal", "query t reads only the keys up to t (cumulative sums): this exercise is NOT causal, every "
            "query reads S and z summed over ALL the keys", shows=FORMS.shows("causal")),
    Mistake("scaled", "q and k are scaled by 1/√d before φ: linear attention applies φ to q and k as they are (there "
            "is no softmax to keep from saturating)", shows=FORMS.shows("scaled")),
    Mistake("softmax", "this is softmax attention: linear attention replaces exp(q·k/√d) by the kernel φ(q)·φ(k), "
            + _PHI, shows=FORMS.shows("softmax")),
    Mistake("weights_sum", "with every value equal to 1 the output should be 1 for every query, and it is not for "
            "{queries}: the numerator's weights φ(q_t)·φ(k_j) and the denominator φ(q_t)ᵀ z, z = Σ_j φ(k_j), sum the "
            "same kernel over the same keys, so that each query's weights sum to 1", shows=learner("z_of_queries")),
    Mistake("quadratic", "{symptom}: that is the T_q x T_k matrix of weights φ(q_t)·φ(k_j), which linear attention "
            "never forms; S = Σ_j φ(k_j) v_jᵀ (d_k x d_v) and z = Σ_j φ(k_j) come first, then φ(q) S / φ(q) z: time "
            "and memory linear in T", shows=kernel_quadratic),
)
_KEYS = [key for key in M.keys() if key not in ("weights_sum", "quadratic")]


def _einsum(q, k, v):
    """A right answer, with einsum."""
    phi_q, phi_k = F.elu(q) + 1, F.elu(k) + 1
    kv = torch.einsum("...jd,...je->...de", phi_k, v)
    z = 1 / torch.einsum("...td,...d->...t", phi_q, phi_k.sum(-2))
    return torch.einsum("...td,...de,...t->...te", phi_q, kv, z)


@exercise("linear attention", name="linear_attention", reference=ref.linear_attention, mistakes=M, right=[_einsum])
@single_threaded
@naming_crashes(M)
def linear_attention(ev: Evaluation, answer):
    """answer(q, k, v) -> φ(q) (φ(k)ᵀ v) / (φ(q) · Σ_j φ(k_j)), φ(x) = elu(x) + 1."""
    tests = 0
    # first B = T_q = T_k = d = d_v: the mistakes that sum or divide over the wrong axis still run there
    for seed, (lead, T_q, T_k, d, d_v) in enumerate((((5,), 5, 5, 5, 5), ((2, 3), 5, 9, 4, 3),
                                                      ((1,), 12, 12, 8, 5))):
        g = ev.rng(800 + seed)
        q, k, v = randn(g, *lead, T_q, d), randn(g, *lead, T_k, d), randn(g, *lead, T_k, d_v)
        out = ev.call(answer, q, k, v)
        expect_shape(out, (*lead, T_q, d_v), "the output")
        expected = quadratic(q, k, v)
        by_values(out, expected, M, FORMS.values(_KEYS, q, k, v), "the output")
        with explained(functools.partial(normalised, ev, answer, (q, k, v), 2, None, M.weights_sum)):
            ev.expect_close(out, expected, f"the output (T_q={T_q}, T_k={T_k}, d={d}, d_v={d_v})")
        tests += 1
    # the point: no T_q x T_k tensor (256 x 256 here)
    g = ev.rng(850)
    q, k, v = randn(g, 1, 256, 8), randn(g, 1, 256, 8), randn(g, 1, 256, 4)
    out, elements, shape = largest_tensor(ev, answer, q, k, v)
    symptom = quadratic_symptom(elements, shape, (1,), 256, 256, "your function")
    expect(symptom is None, M.quadratic.at(symptom=symptom))
    ev.expect_close(out, quadratic(q, k, v), "the output (T_q = T_k = 256, d = 8, d_v = 4)", atol=1e-4)
    return tests + 1
