"""The one rule every mask in the course follows, checked in one place.

A mask is a boolean tensor, True where attention (or a choice) is allowed, False where it is
blocked: the convention of torch.nn.functional.scaled_dot_product_attention. It must broadcast to
the scores it masks without changing their shape.
"""
import torch


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
