"""Lesson 07, exercise 3: the padding mask.

    padding_mask(tokens (B, T), pad_id) -> (B, 1, 1, T) bool, True at real tokens

The check builds token rows of three lengths, with pad ids 0 and 3 (real ids below the pad id too), and the last
row padded on the LEFT, as for generation: padding need not be at the end, nor the pad id the smallest id.
"""
import torch

from ... import masks
from ..core import Mistake, Mistakes, exercise, single_threaded
from ..evaluation import Evaluation
from .masks import as_float, expect_bool_tensor, not_bool, not_tensor


def _real(tokens, pad_id):
    return tokens != pad_id


def _by_length(tokens, pad_id):
    """The first n positions of each row kept, n its number of real tokens (as if padding were at the end)."""
    return torch.arange(tokens.size(1))[None, :] < _real(tokens, pad_id).sum(1, keepdim=True)


def _before_first_pad(tokens, pad_id):
    """The positions before each row's first pad kept (as if padding were at the end)."""
    real = _real(tokens, pad_id)
    first_pad = torch.where(real.all(1), tokens.size(1), (~real).int().argmax(1))
    return torch.arange(tokens.size(1))[None, :] < first_pad[:, None]


_AT_THE_END = ("the mask keeps, in each row, {what}, as if the padding were always at the end; a row padded on the "
               "LEFT (as for generation) shows it: each token is real or pad by its own id")
M = Mistakes(
    not_tensor(shows=lambda tokens, pad_id: masks.padding_mask(tokens, pad_id).numpy()),
    not_bool(shows=lambda tokens, pad_id: masks.padding_mask(tokens, pad_id).float()),
    Mistake("inverted", "the mask is True at the padding: True must mark the REAL tokens (may attend)",
            hint="tokens != pad_id", shows=lambda tokens, pad_id: (tokens == pad_id)[:, None, None, :]),
    Mistake("shape_bt", "the mask has shape (B, T): it needs an axis for the heads and one for the queries, "
            "(B, 1, 1, T), so that it broadcasts over both", hint="mask[:, None, None, :]", shows=_real),
    Mistake("masks_queries", "the mask has shape (B, 1, T, 1): that hides QUERIES; padding hides KEYS, the last "
            "axis, (B, 1, 1, T)", shows=lambda tokens, pad_id: _real(tokens, pad_id)[:, None, :, None]),
    Mistake("shape_b1t", "the mask has shape (B, 1, T): it needs one axis for the heads and one for the queries, "
            "(B, 1, 1, T)", shows=lambda tokens, pad_id: _real(tokens, pad_id)[:, None, :]),
    Mistake("shape_bt11", "the mask has shape (B, T, 1, 1): the token axis must be the LAST one, (B, 1, 1, T), "
            "because padding hides keys", shows=lambda tokens, pad_id: _real(tokens, pad_id)[:, :, None, None]),
    Mistake("zero_as_pad", "the mask compares the tokens with 0, not with the pad id it is given",
            hint="tokens != pad_id", shows=lambda tokens, pad_id: (tokens != 0)[:, None, None, :]),
    Mistake("greater_than_pad", "the mask keeps the tokens GREATER than the pad id and hides real tokens whose ids are "
            "smaller: the pad id need not be the smallest id",
            shows=lambda tokens, pad_id: (tokens > pad_id)[:, None, None, :]),
    Mistake("by_length", _AT_THE_END.format(what="the first n positions (n = its number of real tokens)"),
            shows=lambda tokens, pad_id: _by_length(tokens, pad_id)[:, None, None, :]),
    Mistake("before_first_pad", _AT_THE_END.format(what="the positions before its first pad"),
            shows=lambda tokens, pad_id: _before_first_pad(tokens, pad_id)[:, None, None, :]),
)
_VALUES = ("inverted", "shape_bt", "masks_queries", "shape_b1t", "shape_bt11", "zero_as_pad", "greater_than_pad",
           "by_length", "before_first_pad")


@exercise("padding mask", reference=masks.padding_mask, mistakes=M,
          right=[lambda tokens, pad_id: tokens.ne(pad_id).view(tokens.size(0), 1, 1, -1)])
@single_threaded
def padding_mask(ev: Evaluation, answer):
    """answer(tokens (B, T), pad_id) -> (B, 1, 1, T) bool, True at real tokens."""
    tests = 0
    for seed, pad_id in enumerate((0, 3)):
        tokens = torch.as_tensor(ev.rng(seed).integers(4, 20, size=(3, 6)))
        if pad_id:
            tokens[0, 0], tokens[1, 1] = pad_id - 2, pad_id - 1    # real tokens with ids BELOW the pad id
        for b, length in enumerate((6, 4, 2)):
            tokens[b, length:] = pad_id
        if pad_id:   # the last row padded on the LEFT (as for generation): padding need not be at the end
            tokens[2] = tokens[2].roll(6 - 2)
        mask = ev.call(answer, tokens, pad_id)
        expect_bool_tensor(mask, "the padding mask", None, M)
        ev.expect_close(as_float(mask), masks.padding_mask(tokens, pad_id).float(),
                        f"padding_mask(tokens (3, 6), pad_id={pad_id})",
                        mistakes=M.variants(_VALUES, tokens, pad_id, pick=as_float))
        tests += 1
    return tests
