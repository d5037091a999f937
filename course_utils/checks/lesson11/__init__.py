"""Checks for lesson 11: attention beyond text (SAGAN's attention over pixels and its γ-residual block, the Vision
Transformer's patches, SNAIL's dense block and causal attention block), one module per exercise, each with its
registry of known mistakes (mistakes.py); imported in the lesson's order (the order the checks register in)."""
# isort: off
from .self_attention_2d import self_attention_2d
from .self_attention_block import self_attention_block
from .patchify import patchify
from .dense_block import dense_block, dense_block_reference
from .causal_attention_block import causal_attention_block
# isort: on

__all__ = ["self_attention_2d", "self_attention_block", "patchify", "dense_block", "causal_attention_block",
           "dense_block_reference"]
