"""Checks for lesson 07: self-attention, scaled dot-product attention and its masks (PyTorch), one module per
exercise, each with its registry of known mistakes (mistakes.py); imported in the lesson's order."""
from .attention import scaled_dot_product_attention
from .causal_mask import causal_mask
from .padding_mask import padding_mask
from .sliding_window_mask import sliding_window_mask

__all__ = ["scaled_dot_product_attention", "causal_mask", "padding_mask", "sliding_window_mask"]
