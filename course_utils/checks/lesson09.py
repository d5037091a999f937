"""Checks for lesson 09: the encoder layer, the decoder layer and the Transformer's forward pass."""
import math

import torch

from .. import transformer as ref
from ..attention import causal_mask, padding_mask
from .core import call, exercise, expect, expect_close, expect_shape, single_threaded, to_numpy

D_MODEL, HEADS, D_FF = 16, 4, 32


def _x(seed, *shape):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _build(cls, reference, norm_first):
    """The learner's layer with the reference layer's weights (same attribute names)."""
    module = call(cls, D_MODEL, HEADS, D_FF, dropout=0.0, norm_first=norm_first)
    try:
        module.load_state_dict(reference.state_dict())
    except (RuntimeError, AttributeError) as error:
        expect(False, f"your layer's parameters do not match the reference's names: keep __init__ as given "
                      f"({str(error).splitlines()[0][:160]}).")
    return module.eval()


def _sublayer(x, sublayer, norm, norm_first, kind="ok"):
    """One residual block; `kind` plants a typical mistake."""
    if kind == "no_residual":
        return sublayer(norm(x)) if norm_first else norm(sublayer(x))
    if kind == "swapped":
        norm_first = not norm_first
    if kind == "norm_residual" and norm_first:  # the residual starts from the normalised x
        y = norm(x)
        return y + sublayer(y)
    return x + sublayer(norm(x)) if norm_first else norm(x + sublayer(x))


def _encoder_layer(layer, x, mask, norm_first, kind="ok", use_mask=True):
    m = mask if use_mask else None
    x = _sublayer(x, lambda y: layer.self_attn(y, y, y, m), layer.norm1, norm_first, kind)
    return _sublayer(x, layer.ff, layer.norm2, norm_first, kind)


def _decoder_layer(layer, x, memory, tgt_mask, memory_mask, norm_first, kind="ok"):
    t_mask = None if kind == "no_causal" else tgt_mask
    m_mask = None if kind == "no_memory_mask" else memory_mask
    block = "ok" if kind in ("no_causal", "no_memory_mask", "self_twice") else kind
    x = _sublayer(x, lambda y: layer.self_attn(y, y, y, t_mask), layer.norm1, norm_first, block)
    if kind == "self_twice":  # keys and values from the decoder instead of the encoder's memory
        x = _sublayer(x, lambda y: layer.cross_attn(y, y, y, tgt_mask), layer.norm2, norm_first)
    else:
        x = _sublayer(x, lambda y: layer.cross_attn(y, memory, memory, m_mask), layer.norm2, norm_first, block)
    return _sublayer(x, layer.ff, layer.norm3, norm_first, block)


_RESIDUAL = ("the residual connection is missing: add the sub-layer's input back, "
             "x + Dropout(Sublayer(...)) (both sub-layers)")
_SWAPPED = {True: "this is the post-norm layer, but norm_first=True asks for pre-norm: "
                  "x = x + Dropout(Sublayer(LayerNorm(x)))",
            False: "this is the pre-norm layer, but norm_first=False asks for the paper's post-norm: "
                   "x = LayerNorm(x + Dropout(Sublayer(x)))"}
_NORM_RESIDUAL = ("the residual starts from the normalised x: in pre-norm, y = LayerNorm(x) feeds only the "
                  "sub-layer; add its output to the ORIGINAL x (x = x + Sublayer(y))")


@exercise("encoder layer", name="MyEncoderLayer")
@single_threaded
def encoder_layer(cls):
    """cls(d_model, num_heads, d_ff, dropout, norm_first) with forward(x, mask=None) -> (B, S, d_model)."""
    tests = 0
    for seed, norm_first in enumerate((False, True)):
        torch.manual_seed(seed)
        reference = ref.EncoderLayer(D_MODEL, HEADS, D_FF, dropout=0.0, norm_first=norm_first).eval()
        module = _build(cls, reference, norm_first)
        src = torch.tensor([[5, 6, 7, 8, 9, 4], [5, 6, 7, 0, 0, 0]])
        mask = padding_mask(src, 0)
        x = _x(seed, 2, 6, D_MODEL)
        with torch.no_grad():
            out = call(module, x, mask)
            args = (reference, x, mask, norm_first)
            expect_shape(out, (2, 6, D_MODEL), "the output")
            mistakes = {_RESIDUAL: _encoder_layer(*args, "no_residual"),
                        _SWAPPED[norm_first]: _encoder_layer(*args, "swapped"),
                        "the padding mask is not passed to the self-attention: self_attn(y, y, y, mask)":
                            _encoder_layer(*args, use_mask=False)}
            if norm_first:
                mistakes[_NORM_RESIDUAL] = _encoder_layer(*args, "norm_residual")
            expect_close(out, reference(x, mask), f"the output (norm_first={norm_first})", mistakes=mistakes)
        tests += 1
    return tests


@exercise("decoder layer", name="MyDecoderLayer")
@single_threaded
def decoder_layer(cls):
    """cls(d_model, num_heads, d_ff, dropout, norm_first) with forward(x, memory, tgt_mask, memory_mask)."""
    tests = 0
    for seed, norm_first in enumerate((False, True)):
        torch.manual_seed(seed)
        reference = ref.DecoderLayer(D_MODEL, HEADS, D_FF, dropout=0.0, norm_first=norm_first).eval()
        module = _build(cls, reference, norm_first)
        src = torch.tensor([[5, 6, 7, 8, 9, 4, 3], [5, 6, 7, 0, 0, 0, 0]])
        tgt = torch.tensor([[1, 5, 6, 7, 8], [1, 5, 6, 0, 0]])
        tgt_mask, memory_mask = causal_mask(5) & padding_mask(tgt, 0), padding_mask(src, 0)
        x, memory = _x(seed, 2, 5, D_MODEL), _x(seed + 10, 2, 7, D_MODEL)
        with torch.no_grad():
            out = call(module, x, memory, tgt_mask, memory_mask)
            expect_shape(out, (2, 5, D_MODEL), "the output")
            args = (reference, x, memory, tgt_mask, memory_mask, norm_first)
            mistakes = {
                "the cross-attention takes its keys and values from the decoder: they come from the "
                "encoder, cross_attn(y, memory, memory, memory_mask)": _decoder_layer(*args, "self_twice"),
                "the causal mask is not applied in the self-attention: self_attn(y, y, y, tgt_mask)":
                    _decoder_layer(*args, "no_causal"),
                "the source padding mask is not applied in the cross-attention: "
                "cross_attn(y, memory, memory, memory_mask)": _decoder_layer(*args, "no_memory_mask"),
                _RESIDUAL.replace("both", "all three"): _decoder_layer(*args, "no_residual"),
                _SWAPPED[norm_first]: _decoder_layer(*args, "swapped"),
            }
            if norm_first:
                mistakes[_NORM_RESIDUAL] = _decoder_layer(*args, "norm_residual")
            expect_close(out, reference(x, memory, tgt_mask, memory_mask), f"the output (norm_first={norm_first})",
                         mistakes=mistakes)
            # causality: changing later decoder positions leaves earlier outputs unchanged
            changed = x.clone()
            changed[:, 3:] += 3.0
            out2 = call(module, changed, memory, tgt_mask, memory_mask)
            moved = (to_numpy(out) - to_numpy(out2))[:, :3]
            expect(abs(moved).max() < 1e-5, "the output at positions 0-2 changed when positions 3-4 changed: "
                                            "the decoder's self-attention must be causal (tgt_mask).")
        tests += 1
    return tests


def _forward(model, src, tgt_in, kind="ok"):
    """The full forward pass from the model's parts; `kind` plants a typical mistake."""
    scale = 1.0 if kind == "no_scale" else math.sqrt(model.d_model)
    pos = (lambda e: e) if kind == "no_pos" else model.pos
    src_mask = None if kind == "no_src_mask" else padding_mask(src, model.pad_id)
    T = tgt_in.size(1)
    tgt_mask = {"no_causal": padding_mask(tgt_in, model.pad_id),
                "no_tgt_pad": causal_mask(T)}.get(kind, causal_mask(T) & padding_mask(tgt_in, model.pad_id))
    memory = model.encoder(pos(model.src_embed(src) * scale), src_mask)
    s = model.decoder(pos(model.tgt_embed(tgt_in) * scale), memory, tgt_mask, src_mask)
    return model.generator(s)


@exercise("Transformer forward pass with masks")
@single_threaded
def transformer_forward(fn):
    """fn(model, src (B, S), tgt_in (B, T)) -> logits (B, T, tgt_vocab_size), equal to model(src, tgt_in)."""
    tests = 0
    for seed, norm_first in enumerate((True, False)):
        torch.manual_seed(seed)
        model = ref.Transformer(17, 19, d_model=D_MODEL, num_heads=HEADS, num_layers=2, d_ff=D_FF, dropout=0.0,
                                max_len=16, norm_first=norm_first).eval()
        src = torch.tensor([[5, 6, 7, 8, 9, 4], [5, 6, 7, 0, 0, 0]])
        tgt_in = torch.tensor([[1, 5, 6, 7, 8], [1, 5, 6, 0, 0]])
        with torch.no_grad():
            logits = call(fn, model, src, tgt_in)
            expect_shape(logits, (2, 5, 19), "the logits")
            args = (model, src, tgt_in)
            expect_close(logits, model(src, tgt_in), f"the logits (norm_first={norm_first})", mistakes={
                "the embeddings are not scaled: multiply them by sqrt(d_model) before adding the positions":
                    _forward(*args, "no_scale"),
                "the positional encoding is missing: model.pos(embedding * sqrt(d_model))": _forward(*args, "no_pos"),
                "the decoder sees the future: combine the causal mask with the target padding mask, "
                "causal_mask(T) & padding_mask(tgt_in, pad_id)": _forward(*args, "no_causal"),
                "the source padding mask is missing: pass padding_mask(src, pad_id) to the encoder AND to the "
                "decoder's cross-attention": _forward(*args, "no_src_mask"),
                "the target padding mask is missing: combine causal_mask(T) with padding_mask(tgt_in, pad_id)":
                    _forward(*args, "no_tgt_pad"),
            })
            # causality: later target tokens do not change the earlier logits
            changed = tgt_in.clone()
            changed[0, 3:] = torch.tensor([11, 12])
            later = call(fn, model, src, changed)
            expect(torch.allclose(torch.as_tensor(to_numpy(later))[0, :3], torch.as_tensor(to_numpy(logits))[0, :3],
                                  atol=1e-5),
                   "the logits at positions 0-2 changed when target tokens 3-4 changed: the decoder must be causal.")
        tests += 1
    return tests
