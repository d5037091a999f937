"""Checks for lesson 09: the feed-forward network, the encoder layer, the decoder layer and the Transformer's forward
pass (PyTorch), one module per exercise, each with its registry of known mistakes (mistakes.py), and what the two
layer exercises share (layers.py, layer_mistakes.py, layer_check.py); imported in the lesson's order (a check is
registered when its module is imported: the order is the lesson's, not the alphabet's)."""
# isort: off
from .feed_forward import FeedForward, feed_forward
from .encoder_layer import encoder_layer
from .decoder_layer import decoder_layer
from .transformer_forward import transformer_forward
# isort: on

__all__ = ["feed_forward", "encoder_layer", "decoder_layer", "transformer_forward", "FeedForward"]
