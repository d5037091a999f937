"""Checks for lesson 01: attention from scratch in NumPy, one module per exercise, each with its registry of known
mistakes (mistakes.py); imported in the lesson's order."""
from .softmax import softmax  # noqa: I001 - the lesson's order, which the registry keeps
from .bahdanau_context import bahdanau_context
from .single_query_attention import single_query_attention
from .attention import attention

__all__ = ["softmax", "bahdanau_context", "single_query_attention", "attention"]
