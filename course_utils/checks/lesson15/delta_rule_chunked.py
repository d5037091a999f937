"""Lesson 15, exercise 6: the chunked form of the delta rule.

    delta_rule_chunked(q, k (B, h, T, d_k), v (B, h, T, d_v), beta (B, h, T), chunk_size)
        -> (o (B, h, T, d_v), S (B, h, d_v, d_k)): the outputs and last state of DeltaNet, computed chunk by chunk

Within a chunk of C positions, with S the state before it: U = (I + tril(diag(β) K Kᵀ, -1))⁻¹ diag(β) (V - K Sᵀ),
O = Q Sᵀ + (Q Kᵀ masked to i <= t) U, then S <- S + Uᵀ K; the last chunk may be shorter. The check compares both
results with the recurrent form (course_utils.delta_rule.delta_rule_recurrent) for T a multiple of C and T not
one, names the mistake whose values the answer gives, and measures the largest tensor the answer creates on a
longer sequence: nothing T x T (the parallel form's matrix across chunks), only C x C blocks and states.
"""
import torch

from ...delta_rule import delta_rule_chunked as ref_chunked
from ...delta_rule import delta_rule_recurrent
from ..core import Mistake, Mistakes, exercise, expect, expect_returns, expect_shape, randn, single_threaded
from ..evaluation import Evaluation, call_naming
from ..torch_errors import BROADCAST


def _reference(q, k, v, beta, chunk_size):
    return ref_chunked(q, k, v, beta, None, chunk_size)


def wrong(kind):
    """The chunked form with the mistake `kind`, one chunk after the other."""
    def delta_rule_chunked(q, k, v, beta, chunk_size):
        B, h, T, d_k = k.shape
        S = q.new_zeros(B, h, v.size(-1), d_k)
        C = T if kind == "whole_sequence" else chunk_size
        stop = T - T % C if kind == "last_chunk_dropped" else T
        out = []
        for s in range(0, stop, C):
            Q, K, V, b = q[:, :, s:s + C], k[:, :, s:s + C], v[:, :, s:s + C], beta[:, :, s:s + C]
            n = K.size(2)
            if kind == "state_reset":
                S = torch.zeros_like(S)
            KK = K @ K.transpose(-2, -1)
            weighted = {"beta_missing": KK, "beta_of_column": KK * b[..., None, :]}.get(kind, b[..., :, None] * KK)
            A = weighted.tril(0 if kind == "diagonal_in_A" else -1)
            rhs = (1 if kind == "rhs_without_beta" else b[..., :, None]) * (V - K @ S.transpose(-2, -1))
            u = rhs if kind == "no_correction" else torch.linalg.solve_triangular(torch.eye(n) + A, rhs, upper=False)
            inner = (Q @ K.transpose(-2, -1)).tril(-1 if kind == "strict_intra" else 0)
            o = Q @ S.transpose(-2, -1)
            out.append(o if kind == "no_intra" else o + inner @ u)
            plain = b[..., :, None] * V
            if kind == "state_transposed":             # Kᵀ U: a d_k x d_v state
                S = S + K.transpose(-2, -1) @ u
            else:
                S = S + (plain if kind == "state_uncorrected" else u).transpose(-2, -1) @ K
        return torch.cat(out, 2), S
    return delta_rule_chunked


def _eye_of_chunk_size(q, k, v, beta, chunk_size):
    """torch.eye(chunk_size) in every chunk: the last, shorter chunk's (c, c) system meets an identity of C."""
    B, h, T, d_k = k.shape
    S, out = q.new_zeros(B, h, v.size(-1), d_k), []
    for s in range(0, T, chunk_size):
        Q, K, V, b = (x[:, :, s:s + chunk_size] for x in (q, k, v, beta))
        A = torch.eye(chunk_size) + (b[..., None] * (K @ K.transpose(-2, -1))).tril(-1)
        U = torch.linalg.solve_triangular(A, b[..., None] * (V - K @ S.transpose(-2, -1)), upper=False)
        out.append(Q @ S.transpose(-2, -1) + (Q @ K.transpose(-2, -1)).tril() @ U)
        S = S + U.transpose(-2, -1) @ K
    return torch.cat(out, 2), S


def _dropped_shape(B, h, T, C, d_v):
    return (B, h, T - T % C, d_v)


M = Mistakes(
    Mistake("no_intra", "each chunk's outputs read only the state of the chunks before it (Q Sᵀ): the intra-chunk "
            "part, (Q Kᵀ masked to i <= t) U, is missing, so a token never sees the tokens before it in its own "
            "chunk", shows=wrong("no_intra")),
    Mistake("strict_intra", "the intra-chunk mask excludes the diagonal: o_t = S_t q_t reads the state AFTER token "
            "t's own write, so the mask keeps i <= t", hint="(Q @ K.transpose(-2, -1)).tril(0)",
            shows=wrong("strict_intra")),
    Mistake("no_correction", "the writes inside a chunk ignore each other: u_t = β_t (v_t - S k_t) uses the state "
            "before the chunk, but token t must see the writes of tokens i < t of its chunk too. Solve "
            "(I + tril(diag(β) K Kᵀ, -1)) U = diag(β) (V - K Sᵀ)", shows=wrong("no_correction")),
    Mistake("beta_missing", "the triangular system has no β: tokens i < t changed the state by β_i ... u_i, so the "
            "system is (I + tril(diag(β) K Kᵀ, -1)) U = diag(β) (V - K Sᵀ)", shows=wrong("beta_missing")),
    Mistake("rhs_without_beta", "the right-hand side has no β: token t writes β_t (v_t - S k_t), so the system's "
            "right side is diag(β) (V - K Sᵀ)", hint="b[..., :, None] * (V - K @ S.transpose(-2, -1))",
            shows=wrong("rhs_without_beta")),
    Mistake("beta_of_column", "the triangular system weighs row t by the β of the EARLIER token i: token t's write is "
            "β_t (v_t - S_(t-1) k_t), so row t of diag(β) K Kᵀ is scaled by β_t, the row's own",
            hint="b[..., :, None] * (K @ K.transpose(-2, -1))", shows=wrong("beta_of_column")),
    Mistake("state_transposed", "an axis of d_k = {d_k} entries meets one of d_v = {d_v} in the state between chunks: "
            "S maps keys to values, (d_v, d_k), values along its rows and keys along its columns, so what a chunk "
            "adds to it is Uᵀ K (d_v x d_k)", shows=wrong("state_transposed")),
    Mistake("diagonal_in_A", "the triangular system counts each token's own key on its diagonal: the sum runs over "
            "i < t only, tril(diag(β) K Kᵀ, -1) has zeros on the diagonal", shows=wrong("diagonal_in_A")),
    Mistake("state_uncorrected", "the state between chunks is updated with β V instead of the chunk's writes U: "
            "S <- S + Uᵀ K", shows=wrong("state_uncorrected")),
    Mistake("state_reset", "the state starts from zero in every chunk: it must carry the chunks before it (it is "
            "all that crosses the chunks)", shows=wrong("state_reset")),
    Mistake("last_chunk_dropped", "the last, shorter chunk is dropped ({got} positions out, T = {T}): when T is not "
            "a multiple of C the last chunk has T mod C positions", shows=wrong("last_chunk_dropped")),
    Mistake("short_last_chunk", "an axis of chunk_size = {C} entries meets one of {c}, the last chunk's length "
            "(T = {T}): when T is not a multiple of chunk_size the last chunk is shorter, and its matrices are (c, "
            "c), c its own length ({c} here), not chunk_size",
            hint="n = K.size(2) (the chunk's own length); torch.eye(n), masks of (n, n)", shows=_eye_of_chunk_size),
    Mistake("whole_sequence", "the answer builds a tensor of shape {shape}, as large as T x T (T = {T}): that is the "
            "parallel form over the whole sequence. The chunked form keeps C x C blocks inside a chunk and only "
            "the d_v x d_k state between chunks", shows=wrong("whole_sequence")),
)
VALUE_KEYS = ["no_intra", "strict_intra", "no_correction", "beta_missing", "rhs_without_beta", "beta_of_column",
              "diagonal_in_A", "state_uncorrected", "state_reset"]


def _inputs(ev, seed, B, h, T, d_k, d_v):
    g = ev.rng(seed)
    q, v = randn(g, B, h, T, d_k), randn(g, B, h, T, d_v)
    k = torch.nn.functional.normalize(randn(g, B, h, T, d_k), dim=-1)
    beta = torch.as_tensor(g.uniform(0.2, 0.9, size=(B, h, T)), dtype=torch.float32)
    return q, k, v, beta


def _forward_substitution(q, k, v, beta, chunk_size):
    """Each chunk's writes by forward substitution, row after row (fla's naive form)."""
    B, h, T, d_k = k.shape
    S, out = q.new_zeros(B, h, v.size(-1), d_k), []
    for s in range(0, T, chunk_size):
        Q, K, V, b = q[:, :, s:s + chunk_size], k[:, :, s:s + chunk_size], v[:, :, s:s + chunk_size], \
            beta[:, :, s:s + chunk_size]
        rhs = b[..., None] * (V - K @ S.transpose(-2, -1))
        rows = []
        for t in range(K.size(2)):
            acc = rhs[:, :, t]
            for i in range(t):
                acc = acc - b[:, :, t, None] * (K[:, :, t] * K[:, :, i]).sum(-1, keepdim=True) * rows[i]
            rows.append(acc)
        u = torch.stack(rows, 2)
        out.append(Q @ S.transpose(-2, -1) + (Q @ K.transpose(-2, -1)).tril() @ u)
        S = S + u.transpose(-2, -1) @ K
    return torch.cat(out, 2), S


@exercise("chunked delta rule", reference=_reference, mistakes=M, right=[_forward_substitution])
@single_threaded
def delta_rule_chunked(ev: Evaluation, answer):
    """answer(q, k, v, beta, chunk_size) -> (o, S)."""
    tests = 0
    for seed, (B, h, T, d_k, d_v, C) in enumerate([(2, 3, 12, 5, 4, 4), (1, 2, 22, 4, 3, 8)]):
        q, k, v, beta = _inputs(ev, seed, B, h, T, d_k, d_v)
        expected = delta_rule_recurrent(q, k, v, beta)
        crashes = [(BROADCAST, lambda m, d_k=d_k, d_v=d_v: M.state_transposed.at(d_k=d_k, d_v=d_v)
                    if {int(m["a"]), int(m["b"])} == {d_k, d_v} else None)]
        if T % C and not {C, T % C} & {B, h, d_k, d_v}:        # only there do the sizes single the last chunk out
            crashes.append((BROADCAST, lambda m, C=C, c=T % C, T=T: M.short_last_chunk.at(C=C, c=c, T=T)
                            if {int(m["a"]), int(m["b"])} == {C, c} else None))
        o, S = expect_returns(call_naming(ev, crashes, answer, q, k, v, beta, C), expected, ("o", "S"))
        got = tuple(getattr(o, "shape", ()))
        expect(got != _dropped_shape(B, h, T, C, d_v) or T % C == 0, M.last_chunk_dropped.at(got=got[2:3], T=T))
        expect_shape(o, (B, h, T, d_v), f"o (T = {T}, chunk_size = {C})")
        expect_shape(S, (B, h, d_v, d_k), f"the last state S (d_v = {d_v}, d_k = {d_k})")
        variants = M.variants(VALUE_KEYS, q, k, v, beta, C)
        what = f"(T = {T}, chunk_size = {C})"
        ev.expect_close(o, expected[0], f"o {what}, against the recurrent form", atol=1e-4,
                        mistakes={m: r[0] for m, r in variants.items()})
        ev.expect_close(S, expected[1], f"the last state {what}, against the recurrent form", atol=1e-4,
                        mistakes={m: r[1] for m, r in variants.items()})
        tests += 1
    # nothing T x T: a longer sequence in chunks of 8
    B, h, T, C = 1, 2, 48, 8
    q, k, v, beta = _inputs(ev, 5, B, h, T, 4, 3)
    (o, S), elements, shape = ev.call_measured(answer, q, k, v, beta, C)
    ev.expect_close(o, delta_rule_recurrent(q, k, v, beta)[0], f"o (T = {T}, chunk_size = {C})", atol=1e-4)
    expect(2 * elements < B * h * T * T, M.whole_sequence.at(shape=shape, T=T))
    return tests + 1
