"""Lesson 13's checks pass the references and other right answers, report a stub as not implemented, reject
every named mistake with its named symptom, and test the point of each exercise: ONE pass over the blocks,
the causal tiles never computed, nothing of size T_q x T_k (linear attention, tiled forward and backward).

The mistakes are planted twice: as the check's own catalogue (lesson13_mistakes, one line wrong per kind),
and as answers written here the way a learner would write them (the check must name those too)."""
import math
import re

import pytest
import torch
import torch.nn.functional as F

from course_utils import efficient_attention as ref
from course_utils.attention import scaled_dot_product_attention
from course_utils.checks import lesson13 as check
from course_utils.checks import lesson13_mistakes as mk
from course_utils.checks import lesson13_symptoms as say
from course_utils.masks import causal_mask
from tests.checking import named, not_implemented, prints_not_implemented
from tests.fresh_slips import lesson13d as fresh

pytestmark = pytest.mark.usefixtures("any_seed_offset")   # every test under every seed offset

CHECKS = [check.online_softmax, check.merge_softmax_stats, check.tiled_attention, check.tiled_attention_backward,
          check.linear_attention]
NEG_INF = float("-inf")


@pytest.mark.parametrize("exercise", CHECKS, ids=lambda c: c.exercise)
def test_reference_passes_and_stub_is_not_implemented(exercise, capsys):
    assert exercise(exercise.reference) is None
    assert "✔" in capsys.readouterr().out
    with prints_not_implemented():
        exercise(not_implemented)


# --- other right answers pass ------------------------------------------------------------------
def online_softmax_from_the_first_block(blocks):
    """Starts from the first block's statistics instead of (-inf, 0), guards with nan_to_num."""
    m = ell = None
    for block in blocks:
        if m is None:
            m = block.amax(-1)
            ell = torch.nan_to_num(torch.exp(block - m[..., None])).sum(-1)
            continue
        m_new = torch.maximum(m, block.amax(-1))
        fresh = torch.nan_to_num(torch.exp(block - m_new[..., None])).sum(-1)
        ell = torch.nan_to_num(ell * torch.exp(m - m_new)) + fresh
        m = m_new
    return m, ell


def online_softmax_with_scalars(blocks):
    """0-d starting values, as the lesson suggests; each block merged with merge_softmax_stats."""
    m, ell = torch.tensor(NEG_INF), torch.tensor(0.0)
    for block in blocks:
        m_b = block.amax(-1)
        safe = torch.where(torch.isneginf(m_b), 0.0, m_b)
        m, ell = ref.merge_softmax_stats(m, ell, m_b, torch.exp(block - safe[..., None]).sum(-1))
    return m, ell


def merge_with_logaddexp(m1, l1, m2, l2):
    m = torch.maximum(m1, m2)
    lse = torch.logaddexp(m1 + torch.log(l1), m2 + torch.log(l2))
    return m, torch.nan_to_num(torch.exp(lse - m))


def tiled_flash1(q, k, v, block_q, block_k, causal=False, mask=None, skip=True):
    """FlashAttention-1's form: the output kept normalised, rescaled by l_old e^(m_old - m_new) / l_new; its
    key loop skips the tiles above the diagonal (unless skip=False) and builds each tile's causal mask from
    its positions."""
    *lead, T_q, _ = q.shape
    T_k = k.shape[-2]
    mask = None if mask is None else torch.broadcast_to(mask, (*lead, T_q, T_k))
    out, lse = q.new_zeros(*lead, T_q, v.shape[-1]), q.new_zeros(*lead, T_q)
    for i0 in range(0, T_q, block_q):
        i1 = min(i0 + block_q, T_q)
        m, ell = q.new_full((*lead, i1 - i0), -math.inf), q.new_zeros(*lead, i1 - i0)
        o = q.new_zeros(*lead, i1 - i0, v.shape[-1])
        for j0 in range(0, T_k, block_k):
            j1 = min(j0 + block_k, T_k)
            if causal and skip and j0 >= i1:
                continue
            s = q[..., i0:i1, :] @ k[..., j0:j1, :].transpose(-2, -1) / math.sqrt(q.shape[-1])
            keep = torch.ones(i1 - i0, j1 - j0, dtype=torch.bool)
            if causal:
                keep = torch.arange(j0, j1)[None, :] <= torch.arange(i0, i1)[:, None]
            if mask is not None:
                keep = keep & mask[..., i0:i1, j0:j1]
            s = s.masked_fill(~keep, -math.inf)
            m_new = torch.maximum(m, s.amax(-1))
            safe = torch.where(torch.isinf(m_new), 0.0, m_new)
            p = torch.exp(s - safe[..., None])
            l_new = ell * torch.exp(m - safe) + p.sum(-1)
            denom = torch.where(l_new > 0, l_new, 1.0)[..., None]
            o = (o * (ell * torch.exp(m - safe))[..., None] + p @ v[..., j0:j1, :]) / denom
            m, ell = m_new, l_new
        out[..., i0:i1, :] = o
        lse[..., i0:i1] = m + torch.log(ell)
    return out, lse


def backward_with_D_from_a_first_pass(q, k, v, out, lse, grad_out, block_q, block_k, causal=False):
    """D_i = rowsum(P ∘ dP) summed over every tile of the row in a first pass (equal to rowsum(dO ∘ O))."""
    scale = 1 / math.sqrt(q.shape[-1])
    T_q, T_k = q.shape[-2], k.shape[-2]

    def tiles():
        for i0 in range(0, T_q, block_q):
            for j0 in range(0, T_k, block_k):
                i1, j1 = min(i0 + block_q, T_q), min(j0 + block_k, T_k)
                if causal and j0 > i1 - 1:
                    continue
                s = q[..., i0:i1, :] @ k[..., j0:j1, :].transpose(-2, -1) * scale
                if causal:
                    s = s.masked_fill(torch.arange(j0, j1)[None, :] > torch.arange(i0, i1)[:, None], NEG_INF)
                p = torch.exp(s - lse[..., i0:i1, None])
                yield i0, i1, j0, j1, p, grad_out[..., i0:i1, :] @ v[..., j0:j1, :].transpose(-2, -1)

    D = torch.zeros_like(lse)
    for i0, i1, _, _, p, dp in tiles():
        D[..., i0:i1] += (p * dp).sum(-1)
    dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    for i0, i1, j0, j1, p, dp in tiles():
        ds = p * (dp - D[..., i0:i1, None])
        dv[..., j0:j1, :] += p.transpose(-2, -1) @ grad_out[..., i0:i1, :]
        dq[..., i0:i1, :] += ds @ k[..., j0:j1, :] * scale
        dk[..., j0:j1, :] += ds.transpose(-2, -1) @ q[..., i0:i1, :] * scale
    return dq, dk, dv


def linear_with_einsum(q, k, v):
    phi_q, phi_k = F.elu(q) + 1, F.elu(k) + 1
    kv = torch.einsum("...jd,...je->...de", phi_k, v)
    z = 1 / torch.einsum("...td,...d->...t", phi_q, phi_k.sum(-2))
    return torch.einsum("...td,...de,...t->...te", phi_q, kv, z)


@pytest.mark.parametrize("exercise, answer", [
    (check.online_softmax, online_softmax_from_the_first_block),
    (check.online_softmax, online_softmax_with_scalars),
    (check.merge_softmax_stats, merge_with_logaddexp),
    (check.tiled_attention, tiled_flash1),
    (check.tiled_attention_backward, backward_with_D_from_a_first_pass),
    (check.linear_attention, linear_with_einsum),
], ids=["online-first-block", "online-scalars", "merge-logaddexp", "tiled-flash1", "backward-D-first-pass",
        "linear-einsum"])
def test_other_right_answers_pass(exercise, answer):
    outcome = exercise.evaluate(answer)
    assert outcome.passed, outcome.message


# --- the point of each exercise: answers that skip it are rejected and named ---------------------
def online_softmax_maximum_first(blocks):
    """Two passes: the whole row's maximum first (the blocks kept in a list), then the normaliser."""
    blocks = list(blocks)
    m = torch.stack([b.amax(-1) for b in blocks]).amax(0)
    safe = torch.where(torch.isneginf(m), 0.0, m)
    return m, sum(torch.exp(b - safe[..., None]).sum(-1) for b in blocks)


def online_softmax_concatenated(blocks):
    x = torch.cat([b for b in blocks], dim=-1)
    m = x.amax(-1)
    return m, torch.exp(x - torch.where(torch.isneginf(m), 0.0, m)[..., None]).sum(-1)


@pytest.mark.parametrize("answer", [online_softmax_maximum_first, online_softmax_concatenated,
                                    lambda blocks: mk.two_passes(blocks, "list")], ids=["max-first", "cat", "list"])
def test_online_softmax_in_two_passes_is_rejected(answer):
    named(check.online_softmax, answer, "two passes over the row.*ONCE")


def test_online_softmax_with_a_second_loop_is_rejected():
    named(check.online_softmax, lambda blocks: mk.two_passes(blocks, "two_loops"), "a second time.*ONE pass")


def tiled_computing_every_tile(q, k, v, block_q, block_k, causal=False, mask=None):
    """Every tile computed, the causal mask applied element-wise: right values, the point missed."""
    return tiled_flash1(q, k, v, block_q, block_k, causal, mask, skip=False)


def test_causal_tiled_attention_that_computes_every_tile_is_rejected():
    named(check.tiled_attention, tiled_computing_every_tile, r"tiles above the diagonal are computed.*j0 > i1 − 1")
    named(check.tiled_attention, lambda *a, **kw: mk.tiled(*a, **kw, kind="all_tiles"),
          r"tiles above the diagonal are computed")


def test_causal_tiled_attention_that_computes_one_tile_too_many_is_named_off_by_one():
    named(check.tiled_attention, lambda *a, **kw: mk.tiled(*a, **kw, kind="extra_tile"), r"off by one.*j0 = i1")


def tiled_with_the_whole_score_matrix(q, k, v, block_q, block_k, causal=False, mask=None):
    """Not tiled: the whole T_q x T_k scores, then the softmax statistics."""
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    full = causal_mask(q.shape[-2]) if causal else None
    if mask is not None:
        full = mask if full is None else full & mask
    if full is not None:
        s = s.masked_fill(~full, NEG_INF)
    return scaled_dot_product_attention(q, k, v, full), torch.logsumexp(s, dim=-1)


def tiled_with_the_whole_causal_mask(q, k, v, block_q, block_k, causal=False, mask=None):
    """Tiled, but the T x T causal mask is built once and sliced."""
    if causal:
        full = causal_mask(q.shape[-2])
        mask = full if mask is None else mask & full
    return ref.tiled_attention(q, k, v, block_q, block_k, causal=causal, mask=mask)


@pytest.mark.parametrize("answer", [tiled_with_the_whole_score_matrix, tiled_with_the_whole_causal_mask])
def test_tiled_attention_that_builds_a_quadratic_tensor_is_rejected(answer):
    named(check.tiled_attention, answer, r"built a tensor of shape \(.*64, 64\).*ONE tile")


def tiled_returning_P(q, k, v, block_q, block_k, causal=False, mask=None):
    out, lse = ref.tiled_attention(q, k, v, block_q, block_k, causal=causal, mask=mask)
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    return out, lse, torch.exp(s - lse[..., None])


def test_a_forward_pass_that_returns_P_for_the_backward_is_rejected():
    named(check.tiled_attention, tiled_returning_P, r"returns a T_q x T_k tensor besides out and lse")


def backward_keeping_P(q, k, v, out, lse, grad_out, block_q, block_k, causal=False):
    """The textbook backward: P and dS of the whole sequence."""
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if causal:
        s = s.masked_fill(~causal_mask(q.shape[-2]), NEG_INF)
    p = torch.softmax(s, dim=-1)
    dp = grad_out @ v.transpose(-2, -1)
    ds = p * (dp - (grad_out * out).sum(-1, keepdim=True))
    scale = 1 / math.sqrt(q.shape[-1])
    return ds @ k * scale, ds.transpose(-2, -1) @ q * scale, p.transpose(-2, -1) @ grad_out


@pytest.mark.parametrize("answer", [backward_keeping_P, lambda *a, **kw: mk.backward(*a, **kw, kind="full_P")],
                         ids=["softmax", "from-lse"])
def test_a_backward_pass_that_builds_P_is_rejected(answer):
    named(check.tiled_attention_backward, answer, r"built a tensor of shape .*that is P or S of the whole sequence")


def test_a_causal_backward_pass_that_computes_every_tile_is_rejected():
    named(check.tiled_attention_backward, lambda *a, **kw: mk.backward(*a, **kw, kind="all_tiles"),
          r"backward pass computes the tiles above the diagonal")


def linear_through_the_weights(q, k, v):
    """Right values, but the T_q x T_k weights are formed (the quadratic form)."""
    a = (F.elu(q) + 1) @ (F.elu(k) + 1).transpose(-2, -1)
    return a / a.sum(-1, keepdim=True) @ v


def linear_through_a_broadcast_product(q, k, v):
    """Right values, the T_q x T_k x d_k products of a broadcast formed."""
    a = ((F.elu(q) + 1)[..., :, None, :] * (F.elu(k) + 1)[..., None, :, :]).sum(-1)
    return (a @ v) / a.sum(-1, keepdim=True)


@pytest.mark.parametrize("answer", [linear_through_the_weights, linear_through_a_broadcast_product,
                                    lambda q, k, v: ref.kernel_attention(q, k, v)])
def test_linear_attention_that_builds_a_quadratic_tensor_is_rejected(answer):
    named(check.linear_attention, answer, r"built a tensor of shape .*256, 256.*never forms")


# --- named mistakes, from the check's catalogue ----------------------------------------------------
@pytest.mark.parametrize("kind", ["max_wrong_axis", "stale_max", "no_guard", "no_rescale", "flipped", "flipped_safe",
                                  "old_max", "no_shift", "init_zero", "sum_wrong_axis", "block_max",
                                  "block_max_no_rescale", "lse", "block_max_only", "old_max_safe", "sum_rows_mean"])
def test_online_softmax_mistakes(kind):
    named(check.online_softmax, lambda blocks: mk.online(blocks, kind), re.escape(say.ONLINE[kind][:40]))


def test_online_softmax_returned_in_the_wrong_order():
    named(check.online_softmax, lambda blocks: ref.online_softmax(blocks)[::-1], "wrong order")


@pytest.mark.parametrize("kind", list(say.MERGE))
def test_merge_mistakes(kind):
    # one normaliser not rescaled gives l1 + l2 (no rescaling at all) wherever the other part holds the maximum:
    # either message says what to do, rescale each to the common maximum
    words = "normaliser.* rescale" if kind in ("one_rescaled", "other_rescaled") else re.escape(say.MERGE[kind][:30])
    named(check.merge_softmax_stats, lambda m1, l1, m2, l2: mk.merge(m1, l1, m2, l2, kind), words)


TILED_KINDS = ["acc_not_rescaled", "l_not_rescaled", "divide_inside", "divide_inside_twice", "scale_d", "no_scale",
               "scale_times", "drop_tail", "no_guard", "wrong_side", "wrong_side_unmasked", "skip_ge", "skip_diag",
               "diag_full", "local_idx", "inverted_causal", "causal_ignored", "mask_ignored", "inverted_mask", "lse_m",
               "lse_log_l", "lse_l", "lse_empty_zero", "strict_causal", "divide_inside_reset", "p_old_max",
               "no_safe", "tk_from_q", "m_first", "drop_last_q", "state_outside", "local_idx_diag"]


@pytest.mark.parametrize("kind", TILED_KINDS)
def test_tiled_attention_mistakes(kind):
    def answer(q, k, v, block_q, block_k, causal=False, mask=None):
        return mk.tiled(q, k, v, block_q, block_k, causal, mask, kind)
    words = re.escape(say.TILED[kind][:40])
    if kind == "no_safe":               # NaN first shows in the log-sum-exp of a query that sees no key at all
        words = f"{words}|{re.escape(say.TILED['lse_nan'][:40])}"
    named(check.tiled_attention, answer, words)


def test_tiled_attention_that_peeks_only_at_one_later_key_is_caught_by_perturbation():
    def peeks(q, k, v, block_q, block_k, causal=False, mask=None):
        out, lse = ref.tiled_attention(q, k, v, block_q, block_k, causal=causal, mask=mask)
        return (out + 1e-3 * v[..., -1:, :] if causal else out), lse      # the last value leaks into every output
    named(check.tiled_attention, peeks, "outputs of earlier positions change when only later keys")


def test_tiled_attention_whose_key_blocks_have_block_q_keys_is_rejected():
    """Right values, but the tiles are block_q x block_q: measured with tall tiles (block_q=32, block_k=2)."""
    def square_tiles(q, k, v, block_q, block_k, causal=False, mask=None):
        return ref.tiled_attention(q, k, v, block_q, block_q, causal=causal, mask=mask)
    named(check.tiled_attention, square_tiles, r"tiles are block_q x block_q.*\(1, 1, 32, 32\).*block_q x block_k")


def test_tiled_attention_with_the_wrong_shape():
    named(check.tiled_attention, lambda q, k, v, bq, bk, causal=False, mask=None: (q, q[..., 0]),
          r"out is q itself.*d_v = 6")
    named(check.tiled_attention, lambda q, k, v, bq, bk, causal=False, mask=None:
          ref.tiled_attention(q, k, v, bq, bk, causal, mask)[0], r"return 2 things, as `return out, lse`")


def test_the_empty_row_hint_appears_only_when_only_empty_rows_differ():
    def empty_rows_nan_to_one(q, k, v, block_q, block_k, causal=False, mask=None):
        out, lse = ref.tiled_attention(q, k, v, block_q, block_k, causal=causal, mask=mask)
        return torch.where(torch.isneginf(lse)[..., None], 1.0, out), lse
    named(check.tiled_attention, empty_rows_nan_to_one, "only the rows of queries with no key allowed are wrong")
    outcome = check.tiled_attention.evaluate(lambda *a, **kw: mk.tiled(*a, **kw, kind="mask_ignored"))
    assert "no key allowed" not in outcome.message, outcome.message


BACKWARD_KINDS = ["no_D", "D_wrong_axis", "D_no_axis", "lse_no_axis", "D_tile", "no_scale", "scale_twice",
                  "dq_no_scale", "dk_scale_twice", "p_no_scale", "p_softmax_tile", "no_diag_mask", "dv_no_transpose",
                  "dk_no_transpose", "overwrite", "D_all", "D_plus", "dv_from_out", "dk_from_dO", "local_idx",
                  "overwrite_dq_dk", "overwrite_dq", "overwrite_dk", "D_dO", "lse_sign", "dv_dO_keys",
                  "lse_keys"]


@pytest.mark.parametrize("kind", BACKWARD_KINDS)
def test_backward_mistakes(kind):
    named(check.tiled_attention_backward, lambda *a, **kw: mk.backward(*a, **kw, kind=kind),
          re.escape(say.BACKWARD[kind][:40]))


def test_backward_that_returns_the_gradients_in_another_order_or_one():
    def reordered(*args, **kwargs):
        dq, dk, dv = ref.tiled_attention_backward(*args, **kwargs)
        return dk, dq, dv
    named(check.tiled_attention_backward, reordered, "wrong order")
    named(check.tiled_attention_backward, lambda *a, **kw: ref.tiled_attention_backward(*a, **kw)[0],
          r"return dq, dk, dv")


@pytest.mark.parametrize("kind", [k for k in say.LINEAR if k != "quadratic"])
def test_linear_attention_mistakes(kind):
    named(check.linear_attention, lambda q, k, v: mk.linear(q, k, v, kind),
          re.escape(say.LINEAR[kind][:30]))


# --- the same mistakes, written as a learner would ------------------------------------------------
def online_softmax_rescaling_by_the_new_maximum(blocks):
    m, ell = torch.tensor(NEG_INF), torch.tensor(0.0)
    for block in blocks:
        m_new = torch.maximum(m, block.amax(-1))
        safe_new, safe_old = (torch.where(torch.isneginf(t), 0.0, t) for t in (m_new, m))
        ell = ell * torch.exp(safe_new - safe_old) + torch.exp(block - safe_new[..., None]).sum(-1)
        m = m_new
    return m, ell


def tiled_scaled_by_d(q, k, v, block_q, block_k, causal=False, mask=None):
    return ref.tiled_attention(q * math.sqrt(q.shape[-1]) / q.shape[-1], k, v, block_q, block_k, causal, mask)


def linear_with_phi_on_the_values(q, k, v):
    phi = lambda x: F.elu(x) + 1  # noqa: E731
    kv = phi(k).transpose(-2, -1) @ phi(v)
    return (phi(q) @ kv) / (phi(q) @ phi(k).sum(-2)[..., None])


def backward_without_D(q, k, v, out, lse, grad_out, block_q, block_k, causal=False):
    return ref.tiled_attention_backward(q, k, v, torch.zeros_like(out), lse, grad_out, block_q, block_k, causal)


def online_softmax_with_one_maximum_per_block(blocks):
    m, ell = torch.tensor(NEG_INF), torch.tensor(0.0)
    for block in blocks:
        m_new = torch.maximum(m, block.max())
        ell = ell * torch.exp(m - m_new) + torch.exp(block - m_new).sum(-1)
        m = m_new
    return m, ell


def tiled_slicing_the_mask_as_given(q, k, v, block_q, block_k, causal=False, mask=None):
    """The mask sliced without broadcasting it first: a padding mask (B, 1, 1, T) has no query rows to slice."""
    if mask is not None:
        for i0 in range(block_q, q.shape[-2], block_q):
            tile = mask[..., i0:i0 + block_q, :]
            if tile.shape[-2] == 0:
                raise IndexError(f"tile of shape {tuple(tile.shape)}")
    return ref.tiled_attention(q, k, v, block_q, block_k, causal=causal, mask=mask)


@pytest.mark.parametrize("exercise, answer, words", [
    (check.online_softmax, online_softmax_rescaling_by_the_new_maximum, r"rescaled by e\^\(m_new − m_old\)"),
    (check.online_softmax, online_softmax_with_one_maximum_per_block, r"one number for the whole block"),
    (check.tiled_attention, tiled_slicing_the_mask_as_given, r"mask of shape \(\d+, 1, 1, \d+\).*broadcast_to"),
    (check.tiled_attention, tiled_scaled_by_d, r"divided by d_k instead of √d_k"),
    (check.linear_attention, linear_with_phi_on_the_values, "φ is applied to the values"),
    (check.tiled_attention_backward, backward_without_D, "the term D_i is missing"),
], ids=["online-flipped", "online-max-all", "tiled-mask-not-broadcast", "tiled-1/d", "linear-phi-v",
        "backward-no-D"])
def test_mistakes_written_as_a_learner_would(exercise, answer, words):
    named(exercise, answer, words)


# --- more slips, written as a learner would -------------------------------------------------------
def online_softmax_with(slip):
    def answer(blocks):
        m, ell = torch.tensor(NEG_INF), torch.tensor(0.0)
        for block in blocks:
            if slip == "max_namedtuple":
                m_new = torch.maximum(m, block.max(dim=-1))
            elif slip == "python_max":
                m_new = max(m, block.amax(-1))
            else:
                m_new = torch.maximum(m, block.amax(-1))
            safe = torch.where(torch.isneginf(m_new), 0.0, m_new)
            ell = ell * torch.exp(m - safe) + torch.exp(block - safe[..., None]).sum(0 if slip == "rows" else -1)
            m = m_new
        return m, ell
    return answer


def merge_rescaling_only_the_first(m1, l1, m2, l2):
    m = torch.maximum(m1, m2)
    return m, l1 * torch.exp(m1 - torch.where(torch.isneginf(m), 0.0, m)) + l2


def tiled_with(slip):
    """The reference loop of the lesson with one slip: a causal test, the tile's mask, or where the running
    statistics start."""
    def answer(q, k, v, block_q, block_k, causal=False, mask=None):
        *lead, T_q, d = q.shape
        T_k, d_v = k.shape[-2], v.shape[-1]
        mask = None if mask is None else torch.broadcast_to(mask, (*lead, T_q, T_k))
        out, lse = q.new_zeros(*lead, T_q, d_v), q.new_zeros(*lead, T_q)
        if slip == "state_once":                                     # made once, the size of a full block
            m, ell, acc = q.new_full((*lead, block_q), NEG_INF), q.new_zeros(*lead, block_q), \
                q.new_zeros(*lead, block_q, d_v)
        for a, i0 in enumerate(range(0, T_q, block_q)):
            i1 = min(i0 + block_q, T_q)
            if slip != "state_once":
                m, ell, acc = q.new_full((*lead, i1 - i0), NEG_INF), q.new_zeros(*lead, i1 - i0), \
                    q.new_zeros(*lead, i1 - i0, d_v)
            for b, j0 in enumerate(range(0, T_k, block_k)):
                j1 = min(j0 + block_k, T_k)
                skip = {"first_query": j0 > i0, "block_index": b > a}.get(slip, j0 > i1 - 1)
                if causal and skip:
                    continue
                s = (q if slip == "q_whole" else q[..., i0:i1, :]) @ k[..., j0:j1, :].transpose(-2, -1) / math.sqrt(d)
                keep = None
                if causal:
                    rows, cols = torch.arange(i0, i1)[:, None], torch.arange(j0, j1)[None, :]
                    keep = cols < rows if slip == "strict" else cols <= rows
                if mask is not None:
                    tile = mask[..., j0:j1, i0:i1] if slip == "mask_keys_first" else mask[..., i0:i1, j0:j1]
                    keep = tile if keep is None else (keep | tile if slip == "or" else keep & tile)
                if keep is not None:
                    s = s.masked_fill(~keep, NEG_INF)
                m_new = torch.maximum(m, s.amax(-1))
                safe = torch.where(torch.isneginf(m_new), 0.0, m_new)
                p, rescale = torch.exp(s - safe[..., None]), torch.exp(m - safe)
                ell = ell * rescale + p.sum(-1)
                acc = (acc * rescale if slip == "no_axis" else acc * rescale[..., None]) + p @ (
                    v if slip == "v_whole" else v[..., j0:j1, :])
                if slip == "normalise_inside":                       # the output kept normalised, l set to 1
                    acc = acc / torch.where(ell > 0, ell, 1.0)[..., None]
                    ell = torch.where(ell > 0, torch.ones_like(ell), ell)
                m = m_new
            seen = ell > 0
            out[..., i0:i1, :] = torch.where(seen[..., None], acc / torch.where(seen, ell, 1.0)[..., None], 0.0)
            lse[..., i0:i1] = m + torch.log(ell)
        return out, lse
    return answer


def backward_with(slip):
    """The lesson's backward loop with one slip."""
    def answer(q, k, v, out, lse, grad_out, block_q, block_k, causal=False):
        T_q, T_k, scale = q.shape[-2], k.shape[-2], 1 / math.sqrt(q.shape[-1])
        dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
        D = (grad_out * out).sum(-1)
        for i0 in range(0, T_q, block_q):
            i1 = min(i0 + block_q, T_q)
            for j0 in range(0, T_k, block_k):
                j1 = min(j0 + block_k, T_k)
                if causal and (j0 >= i1 - 1 if slip == "skip_ge" else j0 > i1 - 1):
                    continue
                s = q[..., i0:i1, :] @ k[..., j0:j1, :].transpose(-2, -1) * scale
                if causal:
                    rows, cols = torch.arange(i0, i1)[:, None], torch.arange(j0, j1)[None, :]
                    s = s.masked_fill(cols - j0 > rows - i0 if slip == "local" else cols > rows, NEG_INF)
                p = torch.exp(s - lse[..., i0:i1, None])
                do = grad_out[..., i0:i1, :]
                dp = do @ v[..., j0:j1, :].transpose(-2, -1)
                ds = p * (dp + D[..., i0:i1, None] if slip == "D_plus" else dp - D[..., i0:i1, None])
                dv[..., j0:j1, :] += p.transpose(-2, -1) @ do
                dq[..., i0:i1, :] += ds @ k[..., j0:j1, :] * scale
                dk[..., j0:j1, :] += ds.transpose(-2, -1) @ (do if slip == "dk_from_dO" else q[..., i0:i1, :]) * scale
        return dq, dk, dv
    return answer


def linear_with(phi=lambda x: F.elu(x) + 1, slip=""):
    def answer(q, k, v):
        phi_q, phi_k = phi(q), phi(k)
        S, z = phi_k.transpose(-2, -1) @ v, phi_k.sum(-2)
        if slip == "scalar_denominator":
            return phi_q @ S / z.sum(-1)[..., None, None]
        if slip == "causal":                                         # running sums: query t reads keys 0..t
            S = torch.cumsum(phi_k[..., :, :, None] * v[..., :, None, :], dim=-3)
            return (phi_q[..., :, None, :] @ S)[..., 0, :] / (phi_q * torch.cumsum(phi_k, -2)).sum(-1, keepdim=True)
        return phi_q @ S / (phi_q @ z[..., None])
    return answer


@pytest.mark.parametrize("exercise, answer, words", [
    (check.online_softmax, online_softmax_with("max_namedtuple"), r"returns two things, \(values, indices\)"),
    (check.online_softmax, online_softmax_with("python_max"), r"Python's max\(\).*torch\.maximum"),
    (check.online_softmax, online_softmax_with("rows"), "l sums the exponentials over the wrong axis"),
    (check.merge_softmax_stats, merge_rescaling_only_the_first, "only one of the two normalisers is rescaled"),
    (check.tiled_attention, tiled_with("first_query"), r"skips tiles that hold keys their queries may see: queries"),
    (check.tiled_attention, tiled_with("block_index"), r"skips tiles that hold keys their queries may see: queries"),
    (check.tiled_attention, tiled_with("strict"), "leaves out the diagonal"),
    (check.tiled_attention, tiled_with("state_once"), "make them afresh for EACH block of queries"),
    (check.tiled_attention, tiled_with("normalise_inside"), "divided by l inside the loop"),
    (check.tiled_attention, tiled_with("mask_keys_first"), r"failed with a mask .*i0:i1, j0:j1\], the queries'"),
    (check.tiled_attention, tiled_with("no_axis"), r"without a last axis: give it one, rescale\[\.\.\., None\]"),
    (check.tiled_attention_backward, backward_with("skip_ge"), "backward pass skips tiles that hold keys"),
    (check.tiled_attention_backward, backward_with("local"), "built from positions within the tile"),
    (check.tiled_attention_backward, backward_with("D_plus"), "D_i is SUBTRACTED"),
    (check.tiled_attention_backward, backward_with("dk_from_dO"), r"multiplied dSᵀ by dO"),
    (check.linear_attention, linear_with(lambda x: F.elu(x + 1)), r"elu\(x \+ 1\): the \+1 goes outside"),
    (check.linear_attention, linear_with(torch.exp), r"φ\(x\) = exp\(x\)"),
    (check.linear_attention, linear_with(lambda x: F.relu(x) + 1), r"relu\(x\) \+ 1"),
    (check.linear_attention, linear_with(slip="scalar_denominator"), "one number for every query"),
    (check.linear_attention, linear_with(slip="causal"), "NOT causal"),
    (check.linear_attention, linear_with(lambda x: torch.softmax(x, -1)), r"φ\(x\) = softmax\(x\) over the features"),
], ids=["online-max-namedtuple", "online-python-max", "online-sum-over-rows", "merge-one-rescaled",
        "tiled-skip-first-query", "tiled-skip-block-index", "tiled-strict-mask", "tiled-state-once",
        "tiled-normalise-inside", "tiled-mask-keys-first", "tiled-rescale-no-axis", "backward-skip-ge",
        "backward-local-mask", "backward-D-plus", "backward-dk-from-dO",
        "linear-elu-shifted", "linear-exp", "linear-relu-plus-1", "linear-scalar-denominator", "linear-causal",
        "linear-softmax-features"])
def test_more_mistakes_written_as_a_learner_would(exercise, answer, words):
    named(exercise, answer, words)


def tiled_with_the_keys_outside(q, k, v, block_q, block_k, causal=False, mask=None):
    """Blocks of keys outside, the running statistics of every query kept in tensors of size T_q."""
    *lead, T_q, d = q.shape
    T_k = k.shape[-2]
    mask = None if mask is None else torch.broadcast_to(mask, (*lead, T_q, T_k))
    m, ell = q.new_full((*lead, T_q), NEG_INF), q.new_zeros(*lead, T_q)
    acc = q.new_zeros(*lead, T_q, v.shape[-1])
    for j0 in range(0, T_k, block_k):
        j1 = min(j0 + block_k, T_k)
        for i0 in range(0, T_q, block_q):
            i1 = min(i0 + block_q, T_q)
            if causal and j0 >= i1:
                continue
            s = (q[..., i0:i1, :] / math.sqrt(d)) @ k[..., j0:j1, :].transpose(-2, -1)
            keep = torch.ones(i1 - i0, j1 - j0, dtype=torch.bool)
            if causal:
                keep = torch.arange(j0, j1)[None] <= torch.arange(i0, i1)[:, None]
            if mask is not None:
                keep = keep & mask[..., i0:i1, j0:j1]
            s = s.masked_fill(~keep, NEG_INF)
            m_new = torch.maximum(m[..., i0:i1], s.amax(-1))
            safe = torch.where(torch.isneginf(m_new), 0.0, m_new)
            p, rescale = torch.exp(s - safe[..., None]), torch.exp(m[..., i0:i1] - safe)
            ell[..., i0:i1] = ell[..., i0:i1] * rescale + p.sum(-1)
            acc[..., i0:i1, :] = acc[..., i0:i1, :] * rescale[..., None] + p @ v[..., j0:j1, :]
            m[..., i0:i1] = m_new
    seen = ell > 0
    out = torch.where(seen[..., None], acc / torch.where(seen, ell, 1.0)[..., None], 0.0)
    return out, torch.where(seen, m + torch.log(ell), NEG_INF)


def online_softmax_with_logaddexp(blocks):
    lse, m = torch.tensor(NEG_INF), torch.tensor(NEG_INF)
    for block in blocks:
        lse, m = torch.logaddexp(lse, torch.logsumexp(block, -1)), torch.maximum(m, block.amax(-1))
    return m, torch.nan_to_num(torch.exp(lse - torch.where(torch.isneginf(m), 0.0, m)))


@pytest.mark.parametrize("exercise, answer", [
    (check.tiled_attention, tiled_with_the_keys_outside),
    (check.tiled_attention, tiled_with("none")),
    (check.online_softmax, online_softmax_with_logaddexp),
    (check.tiled_attention_backward, lambda *a, **kw: ref.tiled_attention_backward(*(t.double() for t in a[:6]),
                                                                                   *a[6:], **kw)),
], ids=["tiled-keys-outside", "tiled-learner-loop", "online-logaddexp", "backward-float64"])
def test_more_right_answers_pass(exercise, answer):
    outcome = exercise.evaluate(answer)
    assert outcome.passed, outcome.message


# --- slips no catalogued mistake gives: the probes say where they are -------------------------------
def backward_masking_the_diagonal(q, k, v, out, lse, grad_out, block_q, block_k, causal=False):
    """The lesson's loop, with the element-wise mask of the backward pass hiding the diagonal too (j >= i)."""
    T_q, T_k, scale = q.shape[-2], k.shape[-2], 1 / math.sqrt(q.shape[-1])
    dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    D = (grad_out * out).sum(-1)
    for i0 in range(0, T_q, block_q):
        i1 = min(i0 + block_q, T_q)
        for j0 in range(0, T_k, block_k):
            j1 = min(j0 + block_k, T_k)
            if causal and j0 > i1 - 1:
                continue
            s = q[..., i0:i1, :] @ k[..., j0:j1, :].transpose(-2, -1) * scale
            if causal:
                s = s.masked_fill(torch.arange(j0, j1)[None, :] >= torch.arange(i0, i1)[:, None], NEG_INF)
            p = torch.exp(s - lse[..., i0:i1, None])
            ds = p * (grad_out[..., i0:i1, :] @ v[..., j0:j1, :].transpose(-2, -1) - D[..., i0:i1, None])
            dv[..., j0:j1, :] += p.transpose(-2, -1) @ grad_out[..., i0:i1, :]
            dq[..., i0:i1, :] += ds @ k[..., j0:j1, :] * scale
            dk[..., j0:j1, :] += ds.transpose(-2, -1) @ q[..., i0:i1, :] * scale
    return dq, dk, dv


def online_softmax_returning_log_l(blocks):
    m, ell = ref.online_softmax(blocks)
    return m, torch.log(ell)


def online_softmax_zeroing_its_nan(blocks):
    m, ell = torch.tensor(NEG_INF), torch.tensor(0.0)
    for block in blocks:
        m_new = torch.maximum(m, block.amax(-1))
        ell = ell * torch.exp(m - m_new) + torch.exp(block - m_new[..., None]).sum(-1)
        m = m_new
    return m, torch.nan_to_num(ell)


@pytest.mark.parametrize("exercise, answer, words", [
    (check.tiled_attention_backward, backward_masking_the_diagonal,
     "your backward pass is right without the causal mask and wrong with it"),
    (check.tiled_attention, tiled_with("or"), "out is right without the causal mask and wrong with it"),
    (check.online_softmax, online_softmax_zeroing_its_nan, r"exp\(−∞ − \(−∞\)\) is NaN.*turning the NaN into 0"),
    (check.online_softmax, online_softmax_returning_log_l, "the log of the expected values"),
    (check.tiled_attention, tiled_with("q_whole"), r"meets the whole sequence.*q\[\.\.\., i0:i1, :\]"),
    (check.tiled_attention, tiled_with("v_whole"), r"meets the whole sequence.*\[\.\.\., j0:j1, :\]"),
    (check.linear_attention, lambda q, k, v: (F.elu(q) + 1) @ ((F.elu(k) + 1).transpose(-2, -1) @ v)
     / ((F.elu(q) + 1) @ (F.elu(q) + 1).sum(-2)[..., None]), "with every value equal to 1 the output should be 1"),
    (check.linear_attention, lambda q, k, v: (F.elu(q) + 1) @ ((F.elu(k) + 1).transpose(-2, -1) @ v)
     / (F.elu(q) + 1).sum(-1, keepdim=True), "with every value equal to 1 the output should be 1"),
], ids=["backward-diagonal-masked", "tiled-masks-joined-with-or", "online-nan-zeroed", "online-log-l",
        "tiled-q-not-sliced", "tiled-v-not-sliced", "linear-z-of-the-queries", "linear-denominator-of-q-only"])
def test_slips_placed_by_the_probes(exercise, answer, words):
    named(exercise, answer, words)


# --- the third catalogue's slips (tests/fresh_slips/lesson13c.py), written as a learner would ----------------
def online_softmax_slip(slip):
    """The lesson's one pass with one slip: the running maximum forgotten or kept for one block only, the block's
    terms summed over every row and averaged, or measured from the previous maximum."""
    def answer(blocks):
        m, ell, previous = torch.tensor(NEG_INF), torch.tensor(0.0), torch.tensor(NEG_INF)
        for block in blocks:
            m_block = block.amax(-1)
            m_new = {"block_max": m_block, "last_two": torch.maximum(previous, m_block)}.get(
                slip, torch.maximum(m, m_block))
            safe = torch.where(torch.isneginf(m_new), 0.0, m_new)
            start = torch.where(torch.isneginf(m), 0.0, m) if slip == "old_max" else safe
            terms = torch.exp(block - start[..., None])
            ell = ell * torch.exp(m - safe) + (terms.sum(dim=0).sum() / block.size(0) if slip == "rows_mean"
                                               else terms.sum(-1))
            m, previous = m_new, m_block
        return m, ell
    return answer


def online_softmax_with_one_wrong_maximum(blocks):
    m, ell = ref.online_softmax(blocks)
    return m + 0.5 * (torch.arange(len(m)) == 0), ell


def merge_with_one_factor(which):
    def answer(m1, l1, m2, l2):
        m = torch.maximum(m1, m2)
        safe = torch.where(torch.isneginf(m), 0.0, m)
        factor = torch.exp((m1 if which == 1 else m2) - safe)
        return m, l1 * factor + l2 * factor
    return answer


def tiled_slip(slip):
    """The lesson's forward loop with one slip: m set to m_new before the rescale factor (which is then 1), or the
    loop over the blocks of queries stopped at T_q - block_q."""
    def answer(q, k, v, block_q, block_k, causal=False, mask=None):
        *lead, T_q, d = q.shape
        T_k = k.shape[-2]
        mask = None if mask is None else torch.broadcast_to(mask, (*lead, T_q, T_k))
        out, lse = q.new_zeros(*lead, T_q, v.shape[-1]), q.new_zeros(*lead, T_q)
        for i0 in range(0, T_q - block_q if slip == "stop_early" and T_q > block_q else T_q, block_q):
            i1 = min(i0 + block_q, T_q)
            m, ell = q.new_full((*lead, i1 - i0), NEG_INF), q.new_zeros(*lead, i1 - i0)
            acc = q.new_zeros(*lead, i1 - i0, v.shape[-1])
            for j0 in range(0, T_k, block_k):
                j1 = min(j0 + block_k, T_k)
                if causal and j0 > i1 - 1:
                    continue
                s = q[..., i0:i1, :] @ k[..., j0:j1, :].transpose(-2, -1) / math.sqrt(d)
                keep = torch.arange(j0, j1)[None, :] <= torch.arange(i0, i1)[:, None] if causal else None
                if mask is not None:
                    keep = mask[..., i0:i1, j0:j1] if keep is None else keep & mask[..., i0:i1, j0:j1]
                if keep is not None:
                    s = s.masked_fill(~keep, NEG_INF)
                m_new = torch.maximum(m, s.amax(-1))
                safe = torch.where(torch.isneginf(m_new), 0.0, m_new)
                p = torch.exp(s - safe[..., None])
                if slip == "m_first":
                    m = m_new
                rescale = torch.exp(m - safe)
                ell = ell * rescale + p.sum(-1)
                acc = acc * rescale[..., None] + p @ v[..., j0:j1, :]
                m = m_new
            seen = ell > 0
            out[..., i0:i1, :] = torch.where(seen[..., None], acc / torch.where(seen, ell, 1.0)[..., None], 0.0)
            lse[..., i0:i1] = torch.where(seen, m + torch.log(ell), NEG_INF)
        return out, lse
    return answer


def backward_with_dO_of_the_keys(q, k, v, out, lse, grad_out, block_q, block_k, causal=False):
    """The lesson's backward loop, dV taking grad_out's rows of the block of KEYS (it runs where the tiles are
    square)."""
    T_q, T_k, scale = q.shape[-2], k.shape[-2], 1 / math.sqrt(q.shape[-1])
    dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    D = (grad_out * out).sum(-1)
    for i0 in range(0, T_q, block_q):
        i1 = min(i0 + block_q, T_q)
        for j0 in range(0, T_k, block_k):
            j1 = min(j0 + block_k, T_k)
            if causal and j0 > i1 - 1:
                continue
            s = q[..., i0:i1, :] @ k[..., j0:j1, :].transpose(-2, -1) * scale
            if causal:
                s = s.masked_fill(torch.arange(j0, j1)[None, :] > torch.arange(i0, i1)[:, None], NEG_INF)
            p = torch.exp(s - lse[..., i0:i1, None])
            ds = p * (grad_out[..., i0:i1, :] @ v[..., j0:j1, :].transpose(-2, -1) - D[..., i0:i1, None])
            dv[..., j0:j1, :] += p.transpose(-2, -1) @ grad_out[..., j0:j1, :]
            dq[..., i0:i1, :] += ds @ k[..., j0:j1, :] * scale
            dk[..., j0:j1, :] += ds.transpose(-2, -1) @ q[..., i0:i1, :] * scale
    return dq, dk, dv


@pytest.mark.parametrize("exercise, answer, words", [
    (check.online_softmax, online_softmax_slip("block_max"), "m is the maximum of the LAST block only"),
    (check.online_softmax, online_softmax_slip("last_two"), r"m forgets the maxima of earlier blocks"),
    (check.online_softmax, online_softmax_slip("rows_mean"), "l adds the same number to every row"),
    (check.online_softmax, online_softmax_slip("old_max"),
     r"measured from the PREVIOUS maximum, exp\(x_block − m_old\)"),
    (check.merge_softmax_stats, merge_with_one_factor(1), "rescaled by the same factor"),
    (check.merge_softmax_stats, merge_with_one_factor(2), "rescaled by the same factor"),
    (check.tiled_attention, tiled_slip("m_first"), r"neither l nor acc is rescaled.*before the factor is computed"),
    (check.tiled_attention, tiled_slip("stop_early"),
     r"no output is computed for the last queries \(queries 8-10: all 0\).*range\(0, T_q, block_q\)"),
    (check.tiled_attention_backward, backward_with_dO_of_the_keys, r"block of QUERIES, grad_out\[\.\.\., i0:i1, :\]"),
], ids=["online-block-max", "online-last-two-maxima", "online-rows-mean", "online-old-max", "merge-m1-twice",
        "merge-m2-twice", "tiled-m-first", "tiled-last-query-block", "backward-dO-of-the-keys"])
def test_third_catalogue_slips_written_as_a_learner_would(exercise, answer, words):
    named(exercise, answer, words)


def test_a_wrong_maximum_is_named_by_its_row_not_by_a_nan_difference():
    """Where no mistake explains a wrong m, the row is named (what it holds, got, expected): never the NaN that
    −∞ − (−∞) gives in the row that is −∞ everywhere (right there)."""
    named(check.online_softmax, online_softmax_with_one_wrong_maximum, r"m is wrong in row 0 \(random entries\)")
    assert "nan" not in check.online_softmax.evaluate(online_softmax_slip("block_max")).message


@pytest.mark.parametrize("exercise, answer, words", [
    (check.tiled_attention, fresh.ta_u_state_outside, r"not started afresh for each block of queries.*m = −∞, l = 0"),
    (check.tiled_attention, fresh.ta_local_indices, "positions within the tile .* instead of the whole sequence"),
    (check.tiled_attention_backward, fresh.bw_u_lse_key_slice, r"L belongs|sliced with the block of KEYS"),
    (check.tiled_attention_backward, fresh.bw_u_inplace_q, r"in place.*scales those queries again"),
    (check.linear_attention, fresh.la_u_S_from_q, r"S is built from the queries.*S = Σ_j φ\(k_j\) v_jᵀ"),
], ids=["tiled-state-not-reset", "tiled-local-positions-on-the-diagonal", "backward-lse-of-the-keys",
        "backward-q-scaled-in-place", "linear-S-from-q"])
def test_fourth_catalogue_slips_are_named(exercise, answer, words):
    named(exercise, answer, words)


def test_an_in_place_slip_is_named_without_a_bare_difference():
    message = check.tiled_attention_backward.evaluate(fresh.bw_u_inplace_q).message
    assert "changed its input `q` in place" in message and "wrong values" not in message, message
