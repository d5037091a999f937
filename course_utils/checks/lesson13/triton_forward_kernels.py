"""Lesson 13, exercise 5: the course's kernels as the check receives them, the reference and the wrong ones.

The check runs a kernel from its source text in Triton's interpreter (course_utils.triton_interpreter): a
learner's @triton.jit function gives its own. The course's kernels are given as `KernelSource` classes whose
`forward()` returns their text: the reference's is read from course_utils/triton_kernel.py, and each wrong kernel
is the reference with a few lines changed (`variant`), the mistake written once, as the learner would write it.
No kernel is defined in this process, which may have no Triton at all.
"""
from ...triton_attention import reference_source

__all__ = ["KernelSource", "reference", "variant", "WRONG", "exp2_kernel"]


class KernelSource:
    """A Triton kernel as source text: `forward()` gives it (an unfinished answer's raises NotImplementedError);
    `kernel_text` is the same text, for source_text.source_of where the class crossed to the learner's kernel."""
    name = "flash_forward_kernel"
    text = kernel_text = ""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls.kernel_text = cls.text

    def forward(self):
        return self.text


def _edited(text, edits):
    for old, new in edits:
        if old not in text:
            raise ValueError(f"the reference kernel no longer holds {old!r}: update this variant")
        text = text.replace(old, new)
    return text


def variant(name, *edits):
    """A KernelSource class: the reference kernel with each (old, new) text replaced (every occurrence)."""
    return type(name, (KernelSource,), {"text": _edited(reference_source(), edits), "__doc__": name})


class reference(KernelSource):  # noqa: N801 - the check's reference answer
    """The course's kernel (course_utils/triton_kernel.py)."""
    text = reference_source()


_MASKED = ('        s = tl.where(keep, s, float("-inf"))                   '
           '# masked BEFORE the maximum and the exponent\n')
WRONG = {
    # ℓ (the running sum) not rescaled when the maximum grows
    "sum_not_rescaled": variant("sum_not_rescaled", ("l = l * alpha + tl.sum", "l = l + tl.sum")),
    # the accumulator not rescaled
    "acc_not_rescaled": variant("acc_not_rescaled", ("acc = acc * alpha[:, None] + ", "acc = acc + ")),
    # the running maximum started at 0, not -inf
    "max_zero": variant("max_zero", ('m = tl.full((BLOCK_Q,), float("-inf"), tl.float32)',
                                     "m = tl.zeros((BLOCK_Q,), tl.float32)")),
    # the mask applied to the exponentials, after the maximum was taken over every score of the tile
    "mask_after_exp": variant("mask_after_exp", (_MASKED, ""),
                              ("p = tl.exp(s - m_new[:, None])",
                               "p = tl.where(keep, tl.exp(s - m_new[:, None]), 0.0)")),
    # the loads of k and v without a mask: the last, partial block of keys reads past T
    "unmasked_load": variant("unmasked_load", (",\n                    mask=inside, other=0.0)", ")")),
    # the stores without a mask: the last block of queries writes past T
    "unmasked_store": variant("unmasked_store", (",\n             out.to(O.dtype.element_ty), mask=rows[:, None] < T)",
                                                 ",\n             out.to(O.dtype.element_ty))"),
                              (", m + tl.log(l), mask=rows < T)", ", m + tl.log(l))")),
    # k's batch and head strides exchanged
    "stride": variant("stride", ("b * stride_kb + h * stride_kh", "b * stride_kh + h * stride_kb")),
    # the output not divided by ℓ
    "no_divide": variant("no_divide", ("out = acc / l[:, None]", "out = acc")),
    # the loop over every block of keys, masked, where causal attention could stop at the diagonal
    "every_tile": variant("every_tile", ("        end = tl.minimum(T, (pid_q + 1) * BLOCK_Q)", "        end = T")),
    # no maximum subtracted at all: exp(s) overflows for large scores
    "no_max": variant("no_max", ("p = tl.exp(s - m_new[:, None])", "p = tl.exp(s)"),
                      ("alpha = tl.exp(m - m_new)", "alpha = 1.0"), ("m + tl.log(l)", "tl.log(l)")),
    # L stored in base 2 (the Triton tutorial's exp2 form) instead of the natural log
    "lse_base2": variant("lse_base2", ("m + tl.log(l)", "(m + tl.log(l)) * 1.4426950408889634")),
    # L = m alone
    "lse": variant("lse", ("m + tl.log(l), mask=rows < T", "m, mask=rows < T")),
    # the loop ends at the diagonal, but the diagonal tile gets no element-wise mask
    "diagonal": variant("diagonal", ("        if CAUSAL:\n            keep = keep & (cols[None, :] <= rows[:, None])\n",
                                     "")),
}

# A right answer written another way: exp2 with log2(e) folded into the scale (as Triton's tutorial and
# FlashAttention-2's kernels do), L converted back to the natural log before it is stored.
exp2_kernel = variant("exp2_kernel",
                      ("s = tl.dot(q, tl.trans(k)).to(tl.float32) * scale",
                       "s = tl.dot(q, tl.trans(k)).to(tl.float32) * (scale * 1.4426950408889634)"),
                      ("p = tl.exp(s - m_new[:, None])", "p = tl.exp2(s - m_new[:, None])"),
                      ("alpha = tl.exp(m - m_new)", "alpha = tl.exp2(m - m_new)"),
                      ("m + tl.log(l)", "m * 0.6931471805599453 + tl.log(l)"))
