"""Lesson 13, exercise 3: tiled attention, FlashAttention-2's backward pass.

    tiled_attention_backward(q, k, v, out, lse, grad_out, block_q, block_k, causal=False) -> (dq, dk, dv)

From q, k, v, the output O, its log-sum-exp L and dO alone: D_i = rowsum(dO_i ∘ O_i) once per query, then tile by
tile P_ij = exp(S_ij − L_i), dV_j += P_ijᵀ dO_i, dS_ij = P_ij ∘ (dO_i V_jᵀ − D_i), dQ_i += dS_ij K_j / √d_k,
dK_j += dS_ijᵀ Q_i / √d_k; with causal=True the tiles above the diagonal skipped, the diagonal ones masked.

The check compares the three gradients with autograd's through the course's reference attention (formula.py), for
one square sequence (T = d_v, square tiles: the mistakes of a wrong axis still run there), then (2, 2, 11, 4) with
values of width 6 and several tile shapes, causal or not, and a sequence without heads; then in float64 (gradcheck
needs it). It tests the points too (probes.py): nothing of size T_q x T_k created (64 x 64, tiles of 8 x 8), and
the causal tiles above the diagonal never computed. The wrong answers are in tiled_attention_backward_mistakes.py.
"""
import functools

import torch

from ... import efficient_attention as ref
from ..core import Mistake, Mistakes, exercise, expect, expect_returns, expect_shape, single_threaded
from ..evaluation import Evaluation, call_naming
from ..expectations import explained
from ..mistakes import Said
from ..torch_errors import BROADCAST
from .crashes import naming_crashes
from .formula import backward_inputs, gradients
from .naming import by_values, same
from .probes import (
    backward_part,
    block_ranges,
    d_rows,
    largest_tensor,
    quadratic_symptom,
    tile_ranges,
    tiles_above_computed,
    tiles_skipped,
)
from .tiled_attention_backward_mistakes import FORMS, every_tile, learner, whole_p

_SKIP = "a tile is skipped when its first key comes after the block's last query, j0 > i1 − 1"
_DS = "dS = P ∘ (dP − D_i), with D_i = rowsum(dO_i ∘ O_i), one number per query"
M = Mistakes(
    # D
    Mistake("no_D", "dS = P ∘ dP: the term D_i is missing; " + _DS + " (the softmax subtracts the weighted mean of dP)",
            shows=FORMS.shows("no_D")),
    Mistake("D_wrong_axis", "D is summed over the wrong axis: D_i = Σ_c dO_ic O_ic is one number per QUERY, the sum "
            "over the features, shape (..., T_q)", hint="(grad_out * out).sum(dim=-1)",
            shows=FORMS.shows("D_wrong_axis")),
    Mistake("D_no_axis", "D_i is subtracted along the wrong axis: D holds one number per QUERY, so it is subtracted "
            "from each ROW of dP_ij (without an axis of its own it runs along the keys)",
            hint="D[..., i0:i1, None]", shows=FORMS.shows("D_no_axis")),
    Mistake("D_all", "D is one number for the whole batch: D_i = Σ_c dO_ic O_ic is one number per QUERY, the sum over "
            "the features only, shape (..., T_q)", hint="(grad_out * out).sum(dim=-1)", shows=FORMS.shows("D_all")),
    Mistake("D_plus", "dS = P ∘ (dP + D_i): D_i is SUBTRACTED, " + _DS, shows=FORMS.shows("D_plus")),
    Mistake("D_tile", "D is computed from one tile, rowsum(P_ij ∘ dP_ij): D_i sums over ALL the keys of the row; it is "
            "computed once per query from the output, D_i = rowsum(dO_i ∘ O_i)", shows=FORMS.shows("D_tile")),
    Mistake("D_dO", "D = rowsum(dO ∘ dO), the gradient times itself: D_i = rowsum(dO_i ∘ O_i), the gradient times "
            "the OUTPUT O, one number per query", shows=FORMS.shows("D_dO")),
    Mistake("ds_D_outside", "dS = P ∘ dP − D_i: D_i is multiplied by P too, dS = P ∘ (dP − D_i) (the softmax's "
            "Jacobian is P_ij (dP_ij − D_i))", shows=FORMS.shows("ds_D_outside")),
    Mistake("D_rows", "with dO zero at every query but one, dq of the other queries should be 0 (their dP = "
            "dO_i V_jᵀ and D_i = rowsum(dO_i ∘ O_i) are 0), and yours is not at queries {rows}: dq_i depends only on "
            "query i's own dO_i and D_i, through dS_i = P_i ∘ (dP_i − D_i), so something of other rows reaches it",
            hint="dO_i = grad_out[..., i0:i1, :], D = (grad_out * out).sum(dim=-1), D[..., i0:i1, None]",
            shows=learner("D_keys")),
    Mistake("shared_grads", "dq, dk and dv come out equal: they are one tensor (made once and returned three times), "
            "so every tile's share of each lands in all three; each gradient is a tensor of its own, the shape of its "
            "input", hint="dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v), not "
            "[torch.zeros_like(q)] * 3", shows=learner("shared")),
    # P
    Mistake("lse_no_axis", "L_i is subtracted along the wrong axis: P_ij = exp(S_ij − L_i) subtracts each query's L "
            "from its ROW (without an axis of its own it runs along the keys)", hint="lse[..., i0:i1, None]",
            shows=FORMS.shows("lse_no_axis")),
    Mistake("lse_keys", "L is sliced with the block of KEYS: L_i = m_i + log l_i belongs to the QUERIES (one number "
            "per query), so P_ij = exp(S_ij − L_i) takes the block of queries' L", hint="lse[..., i0:i1, None]",
            shows=FORMS.shows("lse_keys")),
    Mistake("lse_sign", "P is recomputed as exp(S + L): each query's log-sum-exp is SUBTRACTED, P_ij = exp(S_ij − L_i) "
            "(= exp(S_ij) / Σ_j exp(S_ij), the softmax of the forward pass)", shows=FORMS.shows("lse_sign")),
    Mistake("p_no_scale", "the recomputed P leaves out the scale: P_ij = exp(Q_i K_jᵀ/√d_k − L_i), the same scores as "
            "in the forward pass", shows=FORMS.shows("p_no_scale")),
    Mistake("p_softmax_tile", "P is recomputed as the softmax of one tile: each row's weights are normalised over ALL "
            "its keys, which the forward pass's log-sum-exp does, P_ij = exp(S_ij − L_i)",
            shows=FORMS.shows("p_softmax_tile")),
    # the scale
    Mistake("no_scale", "dq and dk miss the factor 1/√d_k: S = QKᵀ/√d_k, so dQ = dS K/√d_k and dK = dSᵀ Q/√d_k",
            shows=FORMS.shows("no_scale")),
    Mistake("scale_twice", "dq and dk are scaled by 1/d_k: the factor 1/√d_k is applied twice (once is right: "
            "dQ = dS K/√d_k, dK = dSᵀ Q/√d_k)", shows=FORMS.shows("scale_twice")),
    Mistake("dq_no_scale", "dq misses the factor 1/√d_k: dQ_i = dS_ij K_j / √d_k (dk has it)",
            shows=FORMS.shows("dq_no_scale")),
    Mistake("dk_scale_twice", "dk is scaled by 1/√d_k twice: dK = dSᵀ Q/√d_k (a q scaled before the product is not "
            "scaled again)", shows=FORMS.shows("dk_scale_twice")),
    Mistake("bw_scale_times", "the scale is √d_k, multiplied: S = Q Kᵀ / √d_k, so S, dq and dk are multiplied by "
            "1/√d_k", shows=FORMS.shows("bw_scale_times")),
    # the products
    Mistake("dv_no_transpose", "dV_j = P_ijᵀ dO_i: P is not transposed (each key gathers the gradients of the "
            "queries that read it)", shows=FORMS.shows("dv_no_transpose")),
    Mistake("dk_no_transpose", "dK_j = dS_ijᵀ Q_i: dS is not transposed", shows=FORMS.shows("dk_no_transpose")),
    Mistake("dv_from_out", "dV_j = P_ijᵀ dO_i: O (the output) is used where the gradient dO goes",
            shows=FORMS.shows("dv_from_out")),
    Mistake("dv_from_ds", "dV is accumulated with dS: dV_j += P_ijᵀ dO_i, the PROBABILITIES (dS goes into dq and dk)",
            shows=FORMS.shows("dv_from_ds")),
    Mistake("dk_from_dO", "dK_j = dS_ijᵀ Q_i / √d_k: dSᵀ is multiplied by dO instead of by Q",
            shows=FORMS.shows("dk_from_dO")),
    Mistake("dq_from_v", "dQ_i += dS_ij V_j: the keys go there, dQ_i += dS_ij K_j (times 1/√d_k)",
            shows=FORMS.shows("dq_from_v")),
    Mistake("dv_dO_keys", "dV_j = P_ijᵀ dO_i: the gradient's rows are those of the block of QUERIES (dO_i), not of the "
            "block of keys", hint="grad_out[..., i0:i1, :]", shows=FORMS.shows("dv_dO_keys")),
    Mistake("dv_query_rows", "dV is accumulated at the QUERIES' rows: dV_j belongs to the block of keys",
            hint="dv[..., j0:j1, :] += p.transpose(-2, -1) @ do_i", shows=FORMS.shows("dv_query_rows")),
    # accumulation
    Mistake("overwrite", "dq, dk and dv are overwritten by each tile: they are ACCUMULATED over the tiles",
            hint="dq[..., i0:i1, :] += ..., likewise dk and dv", shows=FORMS.shows("overwrite")),
    Mistake("overwrite_dq_dk", "dq and dk are overwritten by each tile: they are ACCUMULATED over the tiles, as dv is",
            hint="dq[..., i0:i1, :] += ..., dk[..., j0:j1, :] += ...", shows=FORMS.shows("overwrite_dq_dk")),
    Mistake("overwrite_dq", "dq is overwritten by each tile (it ends as the share of the last block of keys only): it "
            "is ACCUMULATED over the blocks of keys, as dk and dv", hint="dq[..., i0:i1, :] += ...",
            shows=FORMS.shows("overwrite_dq")),
    Mistake("overwrite_dk", "dk is overwritten by each tile (it ends as the share of the last block of queries only): "
            "it is ACCUMULATED over the blocks of queries, as dq and dv", hint="dk[..., j0:j1, :] += ...",
            shows=FORMS.shows("overwrite_dk")),
    Mistake("overwrite_dv", "dv is overwritten by each tile (it ends as the share of the last block of queries only): "
            "it is ACCUMULATED over the blocks of queries, as dq and dk", hint="dv[..., j0:j1, :] += ...",
            shows=FORMS.shows("overwrite_dv")),
    Mistake("keys_short", "the last block of keys is never visited: the loop over the keys stops early",
            hint="j0 in range(0, T_k, block_k), j1 = min(j0 + block_k, T_k)", shows=FORMS.shows("keys_short")),
    # causal
    Mistake("no_diag_mask", "with causal=True the tiles on the diagonal are used unmasked: P is recomputed with the "
            "same element-wise causal mask as in the forward pass (key j visible from query i iff j ≤ i)",
            shows=FORMS.shows("no_diag_mask")),
    Mistake("local_idx", "the element-wise causal mask of a diagonal tile is built from positions within the tile "
            "(0, 1, ...): it compares the GLOBAL positions, key j0 + c against query i0 + r, as in the forward pass",
            hint="torch.arange(j0, j1) against torch.arange(i0, i1)", shows=FORMS.shows("local_idx")),
    Mistake("skipped_visible", "the causal test of the backward pass skips tiles that hold keys their queries may "
            "see: {tiles} (their dq did not move when those keys' values changed): " + _SKIP,
            hint="if causal and j0 > i1 - 1: continue", shows=learner("skip_ge")),
    Mistake("causal_part", "your backward pass is right without the causal mask and wrong with it: the slip is in the "
            "causal part, the tiles skipped (" + _SKIP + ") or the diagonal tiles' element-wise mask (key j visible "
            "from query i iff j ≤ i, positions in the whole sequence)", shows=learner("diagonal_masked")),
    # the points
    Mistake("quadratic", "{symptom}: that is P or S of the whole sequence. P is recomputed one tile at a time from q, "
            "k and L, used for the tile's share of dq, dk, dv, and dropped: nothing of size T_q x T_k is kept "
            "between the passes or built in the backward one", shows=whole_p),
    Mistake("all_tiles", "with causal=True the backward pass computes the tiles above the diagonal: dq of queries "
            "{rows} turned NaN or changed when only the values of later keys, which they may not see, were set to "
            "inf (0 · inf = NaN); those tiles are skipped as in the forward pass: " + _SKIP, shows=every_tile),
    Mistake("grads_dtype", "with float64 inputs your {what} is {dtype}: the gradients are made in q's dtype (section "
            "4's gradcheck needs float64)", hint="torch.zeros_like(q), q.new_zeros(...): torch.zeros(shape) is "
            "float32 whatever q is", shows=learner("float32")),
    Mistake("inplace_broadcast", "an in-place update (+=) of a gradient's tile received a tensor larger than the "
            "tile (the tile has shape [{shape}], the update [{broadcast}]): something in the tile's computation "
            "broadcast to more axes than the tile has; each number per query (D_i, L_i) is one value per query, "
            "sliced to the block and given one axis of size 1 against a tile", hint="D = (grad_out * out).sum(-1) "
            "without keepdim; D[..., i0:i1, None]", shows=learner("D_keepdim")),
    Mistake("grad_width", "a gradient has another input's width (d_k = {d_k}, d_v = {d_v}): each gradient has its own "
            "input's shape", hint="dq = torch.zeros_like(q), dk = torch.zeros_like(k), dv = torch.zeros_like(v)",
            shows=learner("dv_like_q")),
)
_KEYS = ("no_D", "D_wrong_axis", "D_no_axis", "D_all", "D_plus", "lse_no_axis", "D_tile", "no_scale", "scale_twice",
         "dq_no_scale", "dk_scale_twice", "p_no_scale", "p_softmax_tile", "dv_no_transpose", "dk_no_transpose",
         "dv_from_out", "dk_from_dO", "overwrite", "overwrite_dq_dk", "overwrite_dq", "overwrite_dk", "D_dO",
         "lse_sign", "dv_dO_keys", "lse_keys", "ds_D_outside", "keys_short", "dv_from_ds", "dq_from_v",
         "dv_query_rows", "overwrite_dv", "bw_scale_times")
_IN_PLACE = Said("in_place", "a block of q changed in place (a slice of q is a view of q) is changed again at every "
                 "block of keys, so the scores, dq and dk use a q changed many times: the loop computes on new "
                 "tensors", "q_i = q[..., i0:i1, :] * scale, or s = q_i @ k_j.transpose(-2, -1) * scale")


def _dq_of(ev: Evaluation, out, lse, grad_out, bq, bk):
    def run(answer, q, k, v):
        result = ev.call(answer, q, k, v, out, lse, grad_out, bq, bk, causal=True)
        return result[0] if isinstance(result, (tuple, list)) else result
    return run


def _check(ev: Evaluation, answer, seed, shape, d_v, bq, bk, causal):
    """One call of the answer, compared with autograd's gradients; its mistakes named."""
    q, k, v, grad_out = backward_inputs(ev, seed, shape, d_v)
    out, lse = ref.tiled_attention(q, k, v, 4, causal=causal)
    expected = gradients(q, k, v, grad_out, causal)
    d_k = q.shape[-1]
    width = [(BROADCAST, lambda f: M.grad_width.at(d_k=d_k, d_v=d_v) if {f["a"], f["b"]} == {str(d_k), str(d_v)}
              else None)]
    result = call_naming(ev, width, answer, q, k, v, out, lse, grad_out, bq, bk, causal=causal)
    expect(not ev.modified, _IN_PLACE)           # (core says which input; this, what it does here)
    grads = expect_returns(result, expected, ("dq", "dk", "dv"))
    for name, got, want in zip(("dq", "dk", "dv"), grads, expected):
        expect_shape(got, tuple(want.shape), f"{name} (the shape of {name[1]})")
    expect(not (same(grads[0], grads[1]) and same(grads[1], grads[2])) or same(expected[0], expected[1]),
           M.shared_grads)
    keys = _KEYS + (("no_diag_mask", "local_idx") if causal else ())
    inputs = (q, k, v, out, lse, grad_out, bq, bk, causal)
    by_values(tuple(grads), tuple(expected), M, FORMS.values(keys, *inputs), "the gradients", atol=1e-4, rtol=1e-3)
    if causal and not same(grads[0], expected[0], 1e-4, 1e-3):
        skipped = tiles_skipped(ev, answer, q, k, v, bq, bk, _dq_of(ev, out, lse, grad_out, bq, bk))
        expect(not skipped, M.skipped_visible.at(tiles=tile_ranges(skipped, bq, bk, q.shape[-2], k.shape[-2])))
    part = [functools.partial(backward_part, ev, answer, (q, k, v, grad_out), bq, bk, gradients, M.causal_part)] \
        if causal else []
    part.append(functools.partial(d_rows, ev, answer, (q, k, v), bq, bk, causal, M.D_rows))
    for name, got, want in zip(("dq", "dk", "dv"), grads, expected):
        with explained(*part):     # (causal: is it right without the causal mask?)
            ev.expect_close(got, want, f"{name} (block_q={bq}, block_k={bk}, causal={causal})", atol=1e-4, rtol=1e-3)


def _in_float64(ev: Evaluation, answer):
    """The backward pass on float64 inputs returns float64 gradients, equal to autograd's."""
    q, k, v, grad_out = (t.double() for t in backward_inputs(ev, 720, (1, 2, 7, 4), 5))
    out, lse = ref.tiled_attention(q, k, v, 3, causal=True)
    expected = gradients(q, k, v, grad_out, True)
    grads = expect_returns(ev.call(answer, q, k, v, out, lse, grad_out, 3, 2, causal=True), expected,
                           ("dq", "dk", "dv"))
    for what, got, want in zip(("dq", "dk", "dv"), grads, expected):
        dtype = getattr(got, "dtype", None)
        expect(dtype in (None, torch.float64), M.grads_dtype.at(what=what, dtype=dtype))
        ev.expect_close(got, want, f"{what} in float64 (block_q=3, block_k=2, causal=True)", atol=1e-8, rtol=1e-6)


def _first_pass_D(q, k, v, out, lse, grad_out, block_q, block_k, causal=False):
    """A right answer: D_i = rowsum(P ∘ dP) summed over every tile of the row in a first pass (= rowsum(dO ∘ O))."""
    scale = 1 / q.shape[-1] ** 0.5
    T_q, T_k = q.shape[-2], k.shape[-2]

    def tiles():
        for i0 in range(0, T_q, block_q):
            for j0 in range(0, T_k, block_k):
                i1, j1 = min(i0 + block_q, T_q), min(j0 + block_k, T_k)
                if causal and j0 > i1 - 1:
                    continue
                s = q[..., i0:i1, :] @ k[..., j0:j1, :].transpose(-2, -1) * scale
                if causal:
                    s = s.masked_fill(torch.arange(j0, j1)[None, :] > torch.arange(i0, i1)[:, None], float("-inf"))
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


def _in_float64_inside(q, k, v, out, lse, grad_out, block_q, block_k, causal=False):
    """A right answer: the lesson's loop run in float64 (float64 gradients for float32 inputs are close enough)."""
    tensors = (t.double() for t in (q, k, v, out, lse, grad_out))
    return learner("none")(*tensors, block_q, block_k, causal)


@exercise("tiled attention: the backward pass", name="tiled_attention_backward",
          reference=ref.tiled_attention_backward, mistakes=M,
          right=[_first_pass_D, learner("none"), _in_float64_inside])
@single_threaded
@naming_crashes(M)
def tiled_attention_backward(ev: Evaluation, answer):
    """answer(q, k, v, out, lse, grad_out, block_q, block_k, causal=False) -> (dq, dk, dv)."""
    tests = 0
    # first one sequence with T = d_v and square tiles: the mistakes of a wrong axis still run there
    configs = [((1, 8, 8), 8, (4, 4), False), ((1, 8, 8), 8, (4, 4), True), ((2, 2, 11, 4), 6, (4, 3), False),
               ((2, 2, 11, 4), 6, (4, 3), True), ((2, 2, 11, 4), 6, (3, 5), True), ((2, 2, 11, 4), 6, (16, 16), True),
               ((1, 11, 4), 6, (2, 7), False)]
    for seed, (shape, d_v, (bq, bk), causal) in enumerate(configs):
        _check(ev, answer, 600 + seed, shape, d_v, bq, bk, causal)
        tests += 1
    # nothing of size T_q x T_k (64 x 64 here, tiles of 8 x 8)
    for causal in (False, True):
        q, k, v, grad_out = backward_inputs(ev, 710 + causal, (1, 2, 64, 8), 8)
        out, lse = ref.tiled_attention(q, k, v, 8, causal=causal)
        _, elements, shape = largest_tensor(ev, answer, q, k, v, out, lse, grad_out, 8, 8, causal=causal)
        symptom = quadratic_symptom(elements, shape, (1, 2), 64, 64, "your backward pass")
        expect(symptom is None, M.quadratic.at(symptom=symptom))
    # the causal tiles above the diagonal are skipped in the backward pass too
    q, k, v, grad_out = backward_inputs(ev, 700, (1, 1, 12, 8), 8)
    out, lse = ref.tiled_attention(q, k, v, 4, causal=True)
    computed = tiles_above_computed(answer, q, k, v, 4, 4, _dq_of(ev, out, lse, grad_out, 4, 4))
    expect(not computed, M.all_tiles.at(rows=block_ranges([a for a, _ in computed], 4, 12)))
    _in_float64(ev, answer)
    return tests + 3
