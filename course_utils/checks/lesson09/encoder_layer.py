"""Lesson 09, exercise 2: the encoder layer.

    MyEncoderLayer(d_model, num_heads, d_ff, dropout, norm_first): self_attn, ff, norm1, norm2, dropout1, dropout2
    (given); forward(x (B, S, d_model), mask=None (B, 1, 1, S)) -> (B, S, d_model): self-attention then the
    feed-forward network, each in its Add & Norm, post-norm (norm_first=False) or pre-norm (True).

The check (layer_check.py) gives the learner's layer the weights of the course's EncoderLayer (its LayerNorms with
gains and biases of their own) and compares the outputs, post-norm then pre-norm, with a padding mask: at
evaluation, naming the registered slips by their values (layer_mistakes.py: the Add & Norm blocks, their order,
their LayerNorms; here also the mask) or else the block the slip needs; then in training, dropout1 and dropout2 on.
"""
import functools
from types import SimpleNamespace

import torch

from ... import transformer as ref
from ...masks import padding_mask
from ..core import Mistake, Mistakes, exercise, single_threaded
from ..evaluation import Evaluation
from .layer_check import checking, layer_check, layers, x_of
from .layer_mistakes import shared
from .layers import ENCODER, encoder_output


def answer(mask=lambda m: m, **how):
    """The exercise's class with the slip `how` (layers.run_layer's arguments; norms by name) and `mask`: what it does
    to the mask it is given."""
    def forward(self, x, mask_=None):
        norms = how.get("norms")
        extra = {**how, "norms": [getattr(self, name) for name in norms]} if norms else how
        return encoder_output(self, x, mask(mask_), self.norm_first, **extra)
    return type("EncoderLayerWithASlip", (ref.EncoderLayer,), {"forward": forward})


def _forward(forward):
    return type("LearnersEncoderLayer", (ref.EncoderLayer,), {"forward": forward})


class _Renamed(ref.EncoderLayer):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.attention = self.self_attn
        del self.self_attn


def _dropout_twice(self, x, mask=None):
    """dropout1 once more on the layer's output, in training only."""
    out = ref.EncoderLayer.forward(self, x, mask)
    return self.dropout1(out) if self.training else out


def _ff_doubled(self, x, mask=None):
    parts = SimpleNamespace(**{name: getattr(self, name) for name in (
        "self_attn", "norm1", "norm2", "dropout1", "dropout2")}, ff=lambda y: 2 * self.ff(y))
    return encoder_output(parts, x, mask, self.norm_first)


def _looped(self, x, mask=None):
    """A right answer written another way: one loop over the (LayerNorm, dropout, sub-layer) blocks."""
    for norm, drop, sub in ((self.norm1, self.dropout1, lambda y: self.self_attn(y, y, y, mask)),
                            (self.norm2, self.dropout2, self.ff)):
        x = x + drop(sub(norm(x))) if self.norm_first else norm(torch.add(x, drop(sub(x))))
    return x


M = Mistakes(
    Mistake("mask_not_passed", "the padding mask is not passed to the self-attention: the padding positions must "
            "get no attention", hint="self.self_attn(y, y, y, mask)", shows=answer(mask=lambda m: None)),
    Mistake("mask_inverted", "the padding mask is inverted (True at the padding): the course's masks are True where "
            "attention is ALLOWED; pass the mask as given", shows=answer(mask=lambda m: ~m)),
    *shared(answer, 2),
    *checking(_Renamed, _forward(_dropout_twice), _forward(_ff_doubled)),
)


@exercise("encoder layer", name="MyEncoderLayer", reference=ref.EncoderLayer, mistakes=M, right=[_forward(_looped)])
@single_threaded
def encoder_layer(ev: Evaluation, cls):
    """cls(d_model, num_heads, d_ff, dropout, norm_first) with forward(x, mask=None) -> (B, S, d_model)."""
    tests = 0
    for seed, norm_first, reference, module in layers(ev, cls, ref.EncoderLayer, M):
        src = torch.tensor([[5, 6, 7, 8, 9, 4], [5, 6, 7, 0, 0, 0]])
        mask = padding_mask(src, 0)
        x = x_of(ev, seed, 2, 6, reference.norm1.normalized_shape[0])
        output = functools.partial(encoder_output, reference, x, mask=mask, norm_first=norm_first)
        mistakes = {M.mask_not_passed: output(mask=None), M.mask_inverted: output(mask=~mask)}
        layer_check(ev, ENCODER, M, module, reference, (x, mask), output, norm_first, seed, mistakes)
        tests += 1
    return tests
