"""The course's FlashAttention-2 forward kernel in Triton (lesson 13). Import it through
`course_utils.triton_attention.kernel()`, never directly: that sets TRITON_INTERPRET=1 first where there is no
GPU, so that the kernel is defined for Triton's interpreter (a kernel is compiled or interpreted as it is
DEFINED, not as it is launched). This module imports triton: only Linux has it (course_utils.triton_attention).

One program per block of BLOCK_Q queries of one (batch, head): the grid is (cdiv(T, BLOCK_Q), B * H). Its loop
runs over the blocks of BLOCK_K keys with the lesson's online softmax (a running maximum m, normaliser l and
unnormalised accumulator acc, rescaled by e^(m_old - m_new)); with CAUSAL the loop ends at the block holding the
program's last query, so the tiles above the diagonal are never visited, and the keys after a query are masked
(to -inf) before the maximum and the exponent. The output is divided by l once, and L = m + log l is stored for
the backward pass. The strides are in elements; the last axis of every tensor is contiguous (stride 1).
"""
# ruff: noqa: E741 - the kernel keeps the lesson's names: O the output, l the normaliser
import triton
import triton.language as tl

__all__ = ["flash_forward_kernel"]


@triton.jit
def flash_forward_kernel(Q, K, V, O, L,
                         stride_qb, stride_qh, stride_qt,
                         stride_kb, stride_kh, stride_kt,
                         stride_vb, stride_vh, stride_vt,
                         stride_ob, stride_oh, stride_ot,
                         stride_lb, stride_lh,
                         H, T, scale,
                         D: tl.constexpr, BLOCK_Q: tl.constexpr, BLOCK_K: tl.constexpr, CAUSAL: tl.constexpr):
    pid_q = tl.program_id(0)                                   # which block of queries
    pid_bh = tl.program_id(1)                                  # which (batch, head)
    b = pid_bh // H
    h = pid_bh % H
    rows = pid_q * BLOCK_Q + tl.arange(0, BLOCK_Q)             # (BLOCK_Q,) positions of the queries
    dims = tl.arange(0, D)
    q = tl.load(Q + b * stride_qb + h * stride_qh + rows[:, None] * stride_qt + dims[None, :],
                mask=rows[:, None] < T, other=0.0)             # (BLOCK_Q, D); rows beyond T read as 0
    m = tl.full((BLOCK_Q,), float("-inf"), tl.float32)         # running maximum
    l = tl.zeros((BLOCK_Q,), tl.float32)                       # running normaliser
    acc = tl.zeros((BLOCK_Q, D), tl.float32)                   # unnormalised output
    end = T
    if CAUSAL:
        end = tl.minimum(T, (pid_q + 1) * BLOCK_Q)             # the last key any of these queries sees, + 1
    for start in range(0, end, BLOCK_K):
        cols = start + tl.arange(0, BLOCK_K)                   # (BLOCK_K,) positions of the keys
        inside = cols[:, None] < T
        k = tl.load(K + b * stride_kb + h * stride_kh + cols[:, None] * stride_kt + dims[None, :],
                    mask=inside, other=0.0)                    # (BLOCK_K, D)
        v = tl.load(V + b * stride_vb + h * stride_vh + cols[:, None] * stride_vt + dims[None, :],
                    mask=inside, other=0.0)
        s = tl.dot(q, tl.trans(k)).to(tl.float32) * scale     # (BLOCK_Q, BLOCK_K): one tile of scores
        keep = cols[None, :] < T
        if CAUSAL:
            keep = keep & (cols[None, :] <= rows[:, None])
        s = tl.where(keep, s, float("-inf"))                   # masked BEFORE the maximum and the exponent
        m_new = tl.maximum(m, tl.max(s, axis=1))               # finite: key 0 is in every row's first tile
        p = tl.exp(s - m_new[:, None])
        alpha = tl.exp(m - m_new)                              # e^(m_old - m_new) <= 1
        l = l * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v).to(tl.float32)
        m = m_new
    out = acc / l[:, None]                                     # divided once, at the end
    tl.store(O + b * stride_ob + h * stride_oh + rows[:, None] * stride_ot + dims[None, :],
             out.to(O.dtype.element_ty), mask=rows[:, None] < T)
    tl.store(L + b * stride_lb + h * stride_lh + rows, m + tl.log(l), mask=rows < T)
