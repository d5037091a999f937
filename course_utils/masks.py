"""The masks of the course and the one masked softmax, checked in one place.

A mask is a boolean tensor, True where attention (or a choice) is allowed, False where it is
blocked: the convention of torch.nn.functional.scaled_dot_product_attention. It must broadcast to
the scores it masks without changing their shape.

    causal_mask(T)                         (T, T), True on and below the diagonal
    padding_mask(tokens, pad_id)           (B, 1, 1, T), True at real tokens
    sliding_window_mask(T, left, right=0)  (T, T), True where t-left <= j <= t+right (a band)
    masked_softmax(scores, mask)           softmax over the allowed positions; a fully masked row -> zeros
    masked_log_softmax(scores, mask)       its log (masked positions -> -inf), computed stably
"""
import numbers

import torch

__all__ = ["check_mask", "causal_mask", "padding_mask", "sliding_window_mask", "masked_softmax",
           "masked_log_softmax"]


def check_mask(mask, scores_shape, allowed="may attend"):
    """Return `mask` if it is a bool tensor that broadcasts to `scores_shape`; None stays None.

    Raises TypeError (not boolean) or ValueError (wrong shape) with what was expected.
    """
    if mask is None:
        return None
    if not torch.is_tensor(mask) or mask.dtype != torch.bool:
        kind = mask.dtype if torch.is_tensor(mask) else type(mask).__name__
        raise TypeError(f"mask must be a bool tensor (True = {allowed}, False = masked out), got {kind}. "
                        "Build it with a comparison, e.g. causal_mask(T) or padding_mask(tokens, pad_id).")
    scores_shape = tuple(scores_shape)
    try:
        fits = tuple(torch.broadcast_shapes(mask.shape, scores_shape)) == scores_shape
    except RuntimeError:
        fits = False
    if not fits:
        raise ValueError(f"mask of shape {tuple(mask.shape)} does not broadcast to the scores' shape "
                         f"{scores_shape}")
    return mask


def causal_mask(T, device=None):
    """(T, T) bool mask, True on and below the diagonal: position t may attend to positions <= t."""
    return ~torch.triu(torch.ones(T, T, dtype=torch.bool, device=device), diagonal=1)


def padding_mask(tokens, pad_id):
    """(B, 1, 1, T) bool mask from token ids (B, T): True at real tokens, False at padding.

    It broadcasts over heads and queries: every query may attend to every real key.
    """
    if not torch.is_tensor(tokens) or tokens.dim() != 2:
        raise ValueError(f"tokens must be a (B, T) tensor of token ids, got "
                         f"{tuple(tokens.shape) if torch.is_tensor(tokens) else type(tokens).__name__}")
    return (tokens != pad_id)[:, None, None, :]


def sliding_window_mask(T, left, right=0, device=None):
    """(T, T) bool mask, a band: query t may attend to keys t-left .. t+right, both ends included.

    right=0 is a causal window of left+1 keys (the causal mask when left >= T-1); left=right=w is the
    window |t - j| <= w of 2w+1 keys. Ends beyond the sequence are simply cut off.
    """
    for name, value in (("T", T), ("left", left), ("right", right)):
        if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < 0:
            raise ValueError(f"sliding_window_mask(T, left, right): {name} must be an int >= 0 (query t sees "
                             f"keys t-left .. t+right), got {value!r}")
    t = torch.arange(T, device=device)[:, None]                     # (T, 1): queries, down the rows
    j = torch.arange(T, device=device)[None, :]                     # (1, T): keys, across the columns
    return (j >= t - left) & (j <= t + right)


def masked_softmax(scores, mask=None, dim=-1, allowed="may attend"):
    """Softmax over `dim` where only positions with mask True take part; a fully masked row -> 0 (no NaN).

    scores: any shape; mask: bool, broadcastable to scores. The softmax runs in float32 for half-precision
    scores (bf16 autocast) and the weights come back in the scores' dtype.
    """
    dtype = torch.float32 if scores.dtype in (torch.float16, torch.bfloat16) else scores.dtype
    if mask is None:
        return scores.softmax(dim=dim, dtype=dtype).to(scores.dtype)
    check_mask(mask, scores.shape, allowed)
    has_key = mask.any(dim=dim, keepdim=True)                        # rows with at least one position allowed
    scores = scores.masked_fill(~(mask | ~has_key), float("-inf"))   # fully masked rows stay finite...
    return (scores.softmax(dim=dim, dtype=dtype) * has_key).to(scores.dtype)  # ...and are zeroed here


def masked_log_softmax(scores, mask=None, dim=-1, allowed="may be chosen"):
    """log(masked_softmax(scores, mask)), computed stably: masked positions are -inf."""
    if mask is not None:
        check_mask(mask, scores.shape, allowed)
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.log_softmax(scores, dim=dim)
