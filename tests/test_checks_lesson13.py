"""Lesson 13's checks pass the references and other right answers, report a stub as not implemented,
and reject every named mistake with its named symptom."""
import math

import pytest
import torch
import torch.nn.functional as F

from course_utils import efficient_attention as ref
from course_utils.checks import lesson13 as check
from tests.checking import named, not_implemented, prints_not_implemented

pytestmark = pytest.mark.usefixtures("any_seed_offset")   # every test under every seed offset

CHECKS = [check.online_softmax, check.merge_softmax_stats, check.tiled_attention, check.linear_attention]


@pytest.mark.parametrize("exercise", CHECKS, ids=lambda c: c.exercise)
def test_reference_passes_and_stub_is_not_implemented(exercise, capsys):
    assert exercise(exercise.reference) is None
    assert "✔" in capsys.readouterr().out
    with prints_not_implemented():
        exercise(not_implemented)


# --- other right answers pass ------------------------------------------------------------------
def online_softmax_from_the_first_block(x, block_size):
    """Starts from the first block's statistics instead of (-inf, 0), guards with nan_to_num."""
    m = x[..., :block_size].amax(-1)
    ell = torch.nan_to_num(torch.exp(x[..., :block_size] - m[..., None])).sum(-1)
    for j0 in range(block_size, x.shape[-1], block_size):
        block = x[..., j0:j0 + block_size]
        m_new = torch.maximum(m, block.amax(-1))
        ell = (torch.nan_to_num(ell * torch.exp(m - m_new))
             + torch.nan_to_num(torch.exp(block - m_new[..., None])).sum(-1))
        m = m_new
    return m, ell


def merge_with_logaddexp(m1, l1, m2, l2):
    m = torch.maximum(m1, m2)
    lse = torch.logaddexp(m1 + torch.log(l1), m2 + torch.log(l2))
    return m, torch.nan_to_num(torch.exp(lse - m))


def tiled_flash1(q, k, v, block_q, block_k, causal=False, mask=None):
    """FlashAttention-1's form: the output kept normalised, rescaled by l_old e^(m_old - m_new) / l_new."""
    T_q, T_k = q.shape[-2], k.shape[-2]
    full = torch.ones(T_q, T_k, dtype=torch.bool).tril() if causal else torch.ones(T_q, T_k, dtype=torch.bool)
    mask = full if mask is None else mask & full
    mask = torch.broadcast_to(mask, (*q.shape[:-2], T_q, T_k))
    out = torch.zeros(*q.shape[:-1], v.shape[-1])
    for i0 in range(0, T_q, block_q):
        i1 = min(i0 + block_q, T_q)
        m = torch.full((*q.shape[:-2], i1 - i0), -math.inf)
        ell = torch.zeros(*q.shape[:-2], i1 - i0)
        o = torch.zeros(*q.shape[:-2], i1 - i0, v.shape[-1])
        for j0 in range(0, T_k, block_k):
            j1 = min(j0 + block_k, T_k)
            s = (q[..., i0:i1, :] @ k[..., j0:j1, :].transpose(-2, -1) / math.sqrt(q.shape[-1]))
            s = s.masked_fill(~mask[..., i0:i1, j0:j1], -math.inf)
            m_new = torch.maximum(m, s.amax(-1))
            safe = torch.where(torch.isinf(m_new), 0.0, m_new)
            p = torch.exp(s - safe[..., None])
            l_new = ell * torch.exp(m - safe) + p.sum(-1)
            denom = torch.where(l_new > 0, l_new, 1.0)[..., None]
            o = (o * (ell * torch.exp(m - safe))[..., None] + p @ v[..., j0:j1, :]) / denom
            m, ell = m_new, l_new
        out[..., i0:i1, :] = o
    return out


def linear_with_einsum(q, k, v):
    phi_q, phi_k = F.elu(q) + 1, F.elu(k) + 1
    kv = torch.einsum("...jd,...je->...de", phi_k, v)
    z = 1 / torch.einsum("...td,...d->...t", phi_q, phi_k.sum(-2))
    return torch.einsum("...td,...de,...t->...te", phi_q, kv, z)


@pytest.mark.parametrize("exercise, answer", [
    (check.online_softmax, online_softmax_from_the_first_block),
    (check.merge_softmax_stats, merge_with_logaddexp),
    (check.tiled_attention, tiled_flash1),
    (check.tiled_attention, lambda q, k, v, bq, bk, causal=False, mask=None:
        ref.tiled_attention(q, k, v, bq, bk, causal=causal, mask=mask)),
    (check.linear_attention, linear_with_einsum),
    (check.linear_attention, lambda q, k, v: ref.kernel_attention(q, k, v)),
])
def test_other_right_answers_pass(exercise, answer):
    outcome = exercise.evaluate(answer)
    assert outcome.passed, outcome.message


# --- named mistakes ------------------------------------------------------------------------------
@pytest.mark.parametrize("kind, words", [
    ("no_rescale", "old normaliser must be rescaled"),
    ("flipped", r"rescaled by e\^\(m_new − m_old\)"),
    ("flipped_safe", r"rescaled by e\^\(m_new − m_old\)"),
    ("stale_max", "maximum is never updated"),
    ("no_guard", "NaN where a whole block is −inf"),
])
def test_online_softmax_mistakes(kind, words):
    named(check.online_softmax, lambda x, block_size: check._online(x, block_size, kind), words)


def test_online_softmax_returned_in_the_wrong_order():
    named(check.online_softmax, lambda x, b: ref.online_softmax(x, b)[::-1], "wrong order")


@pytest.mark.parametrize("kind, words", [
    ("no_rescale", "adds normalisers measured from different maxima"),
    ("flipped", r"rescaled by e\^\(m − m1\)"),
    ("flipped_safe", r"rescaled by e\^\(m − m1\)"),
    ("first_max", r"m is not max\(m1, m2\)"),
    ("no_guard", "NaN where a whole block is −inf"),
])
def test_merge_mistakes(kind, words):
    named(check.merge_softmax_stats, lambda m1, l1, m2, l2: check._merge(m1, l1, m2, l2, kind), words)


@pytest.mark.parametrize("kind, words", [
    ("acc_not_rescaled", "accumulator is not rescaled"),
    ("divide_inside", "divided by l inside the loop"),
    ("divide_inside_twice", "divided by l inside the loop"),
    ("wrong_side", "BELOW the diagonal are skipped"),
    ("wrong_side_unmasked", "BELOW the diagonal are skipped"),
    ("diag_full", "diagonal are treated as fully visible"),
    ("drop_tail", "last positions are missing"),
    ("mask_ignored", "mask is ignored"),
    ("causal_ignored", "queries see later keys"),
    ("no_guard", "every key is masked gives NaN"),
])
def test_tiled_attention_mistakes(kind, words):
    def answer(q, k, v, block_q, block_k, causal=False, mask=None):
        return check._tiled(q, k, v, block_q, block_k, causal, mask, kind)
    named(check.tiled_attention, answer, words)


def test_tiled_attention_that_peeks_only_at_one_later_key_is_caught_by_perturbation():
    def peeks(q, k, v, block_q, block_k, causal=False, mask=None):
        out = ref.tiled_attention(q, k, v, block_q, block_k, causal=causal, mask=mask)
        return out + 1e-3 * v[..., -1:, :] if causal else out      # the last value leaks into every output
    named(check.tiled_attention, peeks, "causal|wrong values|later")


def test_tiled_attention_with_the_wrong_shape():
    named(check.tiled_attention, lambda q, k, v, bq, bk, causal=False, mask=None: q, "shape|wrong values")


@pytest.mark.parametrize("answer, words", [
    (lambda q, k, v: (F.elu(q) + 1) @ ((F.elu(k) + 1).transpose(-2, -1) @ v), "not normalised"),
    (lambda q, k, v: check._quadratic(q, k, v, check._identity, check._identity), "φ is missing"),
    (lambda q, k, v: check._quadratic(q, k, v, check._phi, check._identity), "φ is applied to q only"),
    (lambda q, k, v: check._quadratic(q, k, v, check._identity, check._phi), "φ is applied to k only"),
    (lambda q, k, v: check._quadratic(q / math.sqrt(q.shape[-1]), k, v), "scaled by 1/√d"),
    (lambda q, k, v: torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), -1) @ v, "softmax attention"),
])
def test_linear_attention_mistakes(answer, words):
    named(check.linear_attention, answer, words)
