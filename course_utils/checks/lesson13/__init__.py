"""Checks for lesson 13: attention at scale, one module per exercise, each with its registry of known mistakes
(mistakes.py); imported in the lesson's order. The expected values come from the formula itself (the whole row's
maximum and sum, the course's reference attention and autograd's gradients of it, the quadratic form of the
kernel), never from the lesson's own blocked code; each check also tests the point of its exercise: one pass over
blocks that keeps no more than m and l (stream.py), the causal tiles never computed, nothing of size T_q x T_k.
The Triton kernel's check (triton_forward.py) runs it in Triton's interpreter, in a process of its own."""
from .online_softmax import online_softmax  # noqa: I001 - the lesson's order
from .merge_softmax_stats import merge_softmax_stats
from .tiled_attention import tiled_attention
from .tiled_attention_backward import tiled_attention_backward
from .triton_forward import flash_forward_kernel
from .linear_attention import linear_attention

__all__ = ["online_softmax", "merge_softmax_stats", "tiled_attention", "tiled_attention_backward",
           "flash_forward_kernel", "linear_attention"]
