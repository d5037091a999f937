"""Checks for lesson 06, pointer networks: the pointer's scores, its softmax over the positions still free, and one
greedy decoding step. One module per exercise, each with its registry of known mistakes (mistakes.py), imported in the
lesson's order."""
from .pointer_scores import pointer_scores  # noqa: I001 - the lesson's order, which the registry keeps
from .masked_pointer_softmax import masked_pointer_softmax
from .decode_step import decode_step

__all__ = ["pointer_scores", "masked_pointer_softmax", "decode_step"]
