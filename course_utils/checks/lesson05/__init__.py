"""Checks for lesson 05, the Neural Turing Machine: the memory's read and write, the addressing stages (cosine,
content, interpolation, circular shift, sharpening) and the head's activations, on batch-first float32 torch inputs
(memory (B, N, M), weightings (B, N)). One module per exercise, each with its registry of known mistakes
(mistakes.py), imported in the lesson's order; `inputs.py`, `weightings.py`, `batch_axis.py` and
`head_activations.py` hold what they share."""
from .memory_read import memory_read  # noqa: I001 - the lesson's order, which the registry keeps
from .memory_write import memory_write
from .cosine_similarity import cosine_similarity
from .content_addressing import content_addressing
from .interpolate import interpolate
from .shift import shift
from .sharpen import sharpen
from .head_parameters import head_parameters

__all__ = ["memory_read", "memory_write", "cosine_similarity", "content_addressing", "interpolate", "shift", "sharpen",
           "head_parameters"]
