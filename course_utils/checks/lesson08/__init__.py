"""Checks for lesson 08: splitting and merging heads, multi-head attention, the sinusoidal positional encoding
(PyTorch), one module per exercise, each with its registry of known mistakes (mistakes.py); imported in the
lesson's order (a check is registered when its module is imported: the order is the lesson's, not the alphabet's)."""
# isort: off
from .split_heads import split_heads
from .merge_heads import merge_heads
from .multi_head_attention import ReferenceMultiHeadAttention, multi_head_attention
from .positional_encoding import positional_encoding
# isort: on

__all__ = ["split_heads", "merge_heads", "multi_head_attention", "positional_encoding", "ReferenceMultiHeadAttention"]
