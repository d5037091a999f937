"""Checks for lesson 02: the seq2seq encoder-decoder (encoder forward, one decoder step, the loss), one module per
exercise, each with its registry of known mistakes (mistakes.py); imported in the lesson's order."""
from .encoder_forward import encoder_forward  # noqa: I001 - the lesson's order, which the registry keeps
from .decoder_step import decoder_step
from .sequence_loss import sequence_loss

__all__ = ["encoder_forward", "decoder_step", "sequence_loss"]
