"""Checks for lesson 10 (translation on Multi30k): the learning-rate schedule, the label-smoothed loss and one step of
beam search, one module per exercise, each with its registry of known mistakes (mistakes.py); imported in the
lesson's order (a check is registered when its module is imported: the order is the lesson's, not the alphabet's)."""
# isort: off
from .noam_lr import noam_lr
from .label_smoothed_loss import label_smoothed_loss
from .beam_step import beam_step
# isort: on

__all__ = ["noam_lr", "label_smoothed_loss", "beam_step"]
