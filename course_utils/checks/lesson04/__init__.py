"""Checks for lesson 04, the attention zoo: one check per score function (each maps s (B, d_s) and h (B, T, d_h) to
scores e (B, T), before any softmax), then local-p attention and the REINFORCE loss of hard attention. One module per
exercise, each with its registry of known mistakes (mistakes.py), imported in the lesson's order; `scores.py` holds
what the six score checks share."""
from .cosine_score import cosine_score  # noqa: I001 - the lesson's order, which the registry keeps
from .additive_score import additive_score
from .location_score import location_score
from .general_score import general_score
from .dot_score import dot_score
from .scaled_dot_score import scaled_dot_score
from .local_p import local_p
from .reinforce_loss import reinforce_loss

__all__ = ["cosine_score", "additive_score", "location_score", "general_score", "dot_score", "scaled_dot_score",
           "local_p", "reinforce_loss"]
