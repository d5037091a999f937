"""Lesson 09, exercise 3: the decoder layer.

    MyDecoderLayer(d_model, num_heads, d_ff, dropout, norm_first): self_attn, cross_attn, ff, norm1-3, dropout1-3
    (given); forward(x (B, T, d_model), memory (B, S, d_model), tgt_mask (B, 1, T, T), memory_mask (B, 1, 1, S))
    -> (B, T, d_model): masked self-attention, cross-attention over the encoder's memory (queries from x, keys and
    values from memory), the feed-forward network, each in its Add & Norm, post-norm or pre-norm.

The check (layer_check.py) gives the learner's layer the weights of the course's DecoderLayer (its LayerNorms with
gains and biases of their own) and compares the outputs, post-norm then pre-norm, with T = 5 != S = 7 (so that the
attentions' queries, keys, values and masks mixed up make torch, or the course's masks, refuse them: those crashes
are named), a causal and padding target mask and a source padding mask: at evaluation, naming the registered slips
by their values (layer_mistakes.py, and the masks and the cross-attention's inputs here), else a leak of the future
positions into earlier outputs, else the block the slip needs; then in training, dropout1-3 on.
"""
import functools
from types import SimpleNamespace

import numpy as np
import torch

from ... import transformer as ref
from ...masks import causal_mask, padding_mask
from ..core import Mistake, Mistakes, exercise, single_threaded, to_numpy
from ..errors import ExerciseError
from ..evaluation import Evaluation
from ..torch_errors import BROADCAST
from .layer_check import checking, layer_check, layers, x_of
from .layer_mistakes import shared
from .layers import DECODER, decoder_output

T, S = 5, 7                     # the decoder's length and the memory's
# the course's masks (course_utils/masks.py) refuse a mask that does not fit the attention's scores
MASK_SCORES = r"mask of shape \(([\d, ]+)\) does not broadcast to the scores' shape \(([\d, ]+)\)"


def answer(tgt=lambda m: m, memory_mask=lambda m: m, **how):
    """The exercise's class with the slip `how` (layers.decoder_output's arguments; norms by name), and `tgt`,
    `memory_mask`: what it does to the masks it is given."""
    def forward(self, x, memory, tgt_mask=None, memory_mask_=None):
        norms = how.get("norms")
        extra = {**how, "norms": [getattr(self, name) for name in norms]} if norms else how
        return decoder_output(self, x, memory, tgt(tgt_mask), memory_mask(memory_mask_), self.norm_first, **extra)
    return type("DecoderLayerWithASlip", (ref.DecoderLayer,), {"forward": forward})


def _forward(forward):
    return type("LearnersDecoderLayer", (ref.DecoderLayer,), {"forward": forward})


def _cross(cross):
    """The layer whose cross-attention is cross(self, y, memory, tgt_mask, memory_mask), right elsewhere."""
    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        parts = SimpleNamespace(**{name: getattr(self, name) for name in (
            "self_attn", "norm1", "norm2", "norm3", "dropout1", "dropout2", "dropout3", "ff")})
        parts.cross_attn = lambda y, *_: cross(self, y, memory, tgt_mask, memory_mask)
        return decoder_output(parts, x, memory, tgt_mask, memory_mask, self.norm_first)
    return _forward(forward)


class _Renamed(ref.DecoderLayer):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.encoder_attn = self.cross_attn
        del self.cross_attn


def _dropout_twice(self, x, memory, tgt_mask=None, memory_mask=None):
    out = ref.DecoderLayer.forward(self, x, memory, tgt_mask, memory_mask)
    return self.dropout2(out) if self.training else out


def _peeks(self, x, memory, tgt_mask=None, memory_mask=None):
    """The right layer, plus a little of the mean over every position (the future too)."""
    return ref.DecoderLayer.forward(self, x, memory, tgt_mask, memory_mask) + 1e-3 * x.mean(dim=1, keepdim=True)


def _looped(self, x, memory, tgt_mask=None, memory_mask=None):
    """A right answer written another way: one loop over the (LayerNorm, dropout, sub-layer) blocks."""
    for norm, drop, sub in ((self.norm1, self.dropout1, lambda y: self.self_attn(y, y, y, tgt_mask)),
                            (self.norm2, self.dropout2, lambda y: self.cross_attn(y, memory, memory, memory_mask)),
                            (self.norm3, self.dropout3, self.ff)):
        x = x + drop(sub(norm(x))) if self.norm_first else norm(x + drop(sub(x)))
    return x


_CROSS = "self.cross_attn(y, memory, memory, memory_mask)"
_ALLOWED = "the course's masks are True where attention is ALLOWED"
M = Mistakes(
    Mistake("cross_from_decoder", "the cross-attention takes its keys and values from the decoder: they come from the "
            "encoder's memory (the decoder's x asks, the memory answers)", hint=_CROSS,
            shows=answer(cross="self_twice")),
    Mistake("no_causal_mask", "the causal mask is not applied in the masked self-attention: position t must not see "
            "the positions after it", hint="self.self_attn(y, y, y, tgt_mask)", shows=answer(tgt=lambda m: None)),
    Mistake("no_target_padding", "the target padding is not masked in the self-attention: the target mask you are "
            "given is the causal mask AND the target padding, not a causal mask of your own",
            hint="self.self_attn(y, y, y, tgt_mask)", shows=answer(tgt=lambda m: causal_mask(m.shape[-1]))),
    Mistake("tgt_mask_inverted", f"the target mask is inverted (True at the future and the padding): {_ALLOWED}; "
            "pass it as given", shows=answer(tgt=lambda m: ~m)),
    Mistake("no_memory_mask", "the source padding mask is not applied in the cross-attention: the memory's padding "
            "positions must get no attention", hint=_CROSS, shows=answer(memory_mask=lambda m: None)),
    Mistake("memory_mask_inverted", f"the source padding mask is inverted (True at the padding): {_ALLOWED}; pass it "
            "as given", shows=answer(memory_mask=lambda m: ~m)),
    Mistake("memory_normed", "the encoder's memory goes through norm2: only the decoder's x is normalised; the keys "
            "and values are the memory as it is", hint=_CROSS, shows=answer(cross="memory_normed")),
    Mistake("cross_uses_self_attn", "the cross-attention uses the self-attention's weights: it has its own module, "
            "with its own W_Q, W_K, W_V and W_O", hint=_CROSS, shows=answer(cross="self_attn")),
    Mistake("cross_queries_from_memory", "the cross-attention's queries come from the memory and its keys and values "
            "from the decoder (its scores are S x T = {S} x {T}): the decoder's x asks and the encoder's memory "
            "answers", hint=_CROSS, shows=_cross(lambda self, y, m, t, mm: self.cross_attn(m, y, y, mm))),
    Mistake("memory_mask_on_decoder", "an attention over the decoder's {T} positions got the source padding mask "
            "(over the memory's {S} positions): the cross-attention's keys and values are the memory, and the masked "
            "self-attention takes the target mask", hint=f"self.self_attn(y, y, y, tgt_mask) and {_CROSS}",
            shows=_cross(lambda self, y, m, t, mm: self.cross_attn(y, y, y, mm))),
    Mistake("tgt_mask_on_cross", "the cross-attention got the target mask (over the decoder's {T} positions): its "
            "mask is the source padding mask; the target mask belongs to the self-attention", hint=_CROSS,
            shows=_cross(lambda self, y, m, t, mm: self.cross_attn(y, m, m, t))),
    Mistake("lengths_mismatch", "a tensor of the memory's length S = {S} meets one of the decoder's length T = {T}: "
            "the cross-attention's queries (and its residual) are the decoder's x, its keys and values the memory, "
            "so its output has the decoder's length", hint=_CROSS,
            shows=_cross(lambda self, y, m, t, mm: self.cross_attn(m, m, m, mm))),
    Mistake("leaks_future", "the output at position {t} changed when only positions 3-4 changed: no decoder position "
            "may see the positions after it", shows=_forward(_peeks)),
    *shared(answer, 3),
    *checking(_Renamed, _forward(_dropout_twice), _cross(lambda self, y, m, t, mm: 2 * self.cross_attn(y, m, m, mm))),
)


def _crashes():
    """[(regex, message)] for call_naming: the crashes of the attentions' queries, keys, values or masks mixed up."""
    def scores(match):
        mask, (t_q, t_k) = [int(n) for n in match[1].split(",")], [int(n) for n in match[2].split(",")[-2:]]
        if (t_q, t_k) == (S, T):
            return M.cross_queries_from_memory.at(S=S, T=T)
        if (t_q, t_k) == (T, T) and mask[-1] == S:
            return M.memory_mask_on_decoder.at(S=S, T=T)
        if (t_q, t_k) == (T, S) and mask[-1] == T:
            return M.tgt_mask_on_cross.at(T=T)
        return None

    def lengths(match):
        return M.lengths_mismatch.at(S=S, T=T) if {int(match["a"]), int(match["b"])} == {S, T} else None
    return [(MASK_SCORES, scores), (BROADCAST, lengths)]


def _leak(ev, module, x, memory, tgt_mask, memory_mask):
    """M.leaks_future where changing positions 3-4 of x moves the learner's output at an earlier position, or None."""
    changed = x.clone()
    changed[:, 3:] += 3.0
    try:
        a, b = ev.call(module, x, memory, tgt_mask, memory_mask), ev.call(module, changed, memory, tgt_mask,
                                                                          memory_mask)
    except ExerciseError:
        return None
    moved = np.abs(to_numpy(a) - to_numpy(b))[:, :3].max(axis=(0, 2)) > 1e-5
    return M.leaks_future.at(t=int(np.argmax(moved))) if moved.any() else None


@exercise("decoder layer", name="MyDecoderLayer", reference=ref.DecoderLayer, mistakes=M, right=[_forward(_looped)])
@single_threaded
def decoder_layer(ev: Evaluation, cls):
    """cls(d_model, num_heads, d_ff, dropout, norm_first) with forward(x, memory, tgt_mask, memory_mask)."""
    tests = 0
    for seed, norm_first, reference, module in layers(ev, cls, ref.DecoderLayer, M):
        src = torch.tensor([[5, 6, 7, 8, 9, 4, 3], [5, 6, 7, 0, 0, 0, 0]])
        tgt = torch.tensor([[1, 5, 6, 7, 8], [1, 5, 6, 0, 0]])
        tgt_mask, memory_mask = causal_mask(T) & padding_mask(tgt, 0), padding_mask(src, 0)
        d_model = reference.norm1.normalized_shape[0]
        x, memory = x_of(ev, seed, 2, T, d_model), x_of(ev, seed + 10, 2, S, d_model)
        output = functools.partial(decoder_output, reference, x, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                                   norm_first=norm_first)
        mistakes = {M.cross_from_decoder: output(cross="self_twice"), M.no_causal_mask: output(tgt_mask=None),
                    M.no_target_padding: output(tgt_mask=causal_mask(T)), M.tgt_mask_inverted: output(
                        tgt_mask=~tgt_mask), M.no_memory_mask: output(memory_mask=None),
                    M.memory_mask_inverted: output(memory_mask=~memory_mask),
                    M.memory_normed: output(cross="memory_normed"), M.cross_uses_self_attn: output(cross="self_attn")}
        args = (x, memory, tgt_mask, memory_mask)
        layer_check(ev, DECODER, M, module, reference, args, output, norm_first, seed, mistakes, crashes=_crashes(),
                    probes=(functools.partial(_leak, ev, module, *args),))
        tests += 1
    return tests
