"""Checks for lesson 03: Bahdanau attention (bidirectional states, additive score, masked softmax, context vector,
attention decoder step), one module per exercise, each with its registry of known mistakes (mistakes.py); imported
in the lesson's order."""
from .bidirectional_states import bidirectional_states  # noqa: I001 - the lesson's order, which the registry keeps
from .additive_score import additive_score
from .masked_softmax import masked_softmax
from .context_vector import context_vector
from .attention_decoder_step import attention_decoder_step

__all__ = ["bidirectional_states", "additive_score", "masked_softmax", "context_vector", "attention_decoder_step"]
