"""Checks for lesson 16 (serving attention: a paged key/value cache, continuous batching, speculative decoding),
one module per exercise, each with its registry of known mistakes (mistakes.py); imported in the lesson's order.
What they share: outcomes.py (an outcome that is not one array, compared and named)."""
from .paged_attention import paged_attention  # noqa: I001 - the lesson's order, which the registry keeps
from .release import release
from .append_slot import append_slot
from .schedule import schedule
from .speculative_accept import speculative_accept

__all__ = ["paged_attention", "release", "append_slot", "schedule", "speculative_accept"]
