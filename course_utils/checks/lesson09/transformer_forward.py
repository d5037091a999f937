"""Lesson 09, exercise 4: the Transformer's forward pass, with its masks.

    transformer_forward(model, src (B, S), tgt_in (B, T)) -> logits (B, T, tgt_vocab_size), equal to
    model(src, tgt_in): the embeddings times √d_model plus the positions, the encoder with the source padding mask,
    the decoder with the causal AND target padding mask and the source padding mask, then the generator.

The check draws no random input: two fixed models (pre-norm, then post-norm; pad id 3, not the notebook's PAD = 0,
and 0, 1, 2 are real tokens) on fixed tokens. It compares the logits with model(src, tgt_in), names the registered
slips by the logits they give, and else whether a change of later target tokens moves earlier logits (a leak of
the future).
"""
import functools
import math

import numpy as np
import torch
import torch.nn.functional as F

from ... import transformer as ref
from ...masks import causal_mask, padding_mask
from ..core import Mistake, Mistakes, exercise, expect_shape, single_threaded, to_numpy
from ..errors import ExerciseError
from ..evaluation import Evaluation
from ..expectations import explained

D_MODEL, HEADS, D_FF = 16, 4, 32
PAD_ID = 3                  # the check's model: not the notebook's PAD = 0
PAD_IDS = (0, 1, 2)         # the ids a learner may type instead of model.pad_id (the notebook's PAD, BOS, EOS)


def forward(model, src, tgt_in, kind="ok"):
    """The full forward pass from the model's parts; `kind` plants a typical slip (("pad", p, which): the masks
    `which` ("src", "tgt" or "both") built with the pad id p). The one definition of every slip of the exercise."""
    d = model.d_model
    scale = {"no_scale": 1.0, "d_model": d, "divided": 1 / math.sqrt(d)}.get(kind, math.sqrt(d))

    def embed(tokens, table):
        if kind == "pos_scaled":  # the positions scaled with the embedding
            return model.pos(table(tokens)) * math.sqrt(d)
        e = table(tokens) * scale                                   # (B, T, d_model)
        return e if kind == "no_pos" else model.pos(e)

    src_pad = tgt_pad = model.pad_id
    if isinstance(kind, tuple):
        _, pad, which = kind
        src_pad = pad if which in ("src", "both") else src_pad
        tgt_pad = pad if which in ("tgt", "both") else tgt_pad
    src_table, tgt_table = ((model.tgt_embed, model.src_embed) if kind == "swapped_embed"
                            else (model.src_embed, model.tgt_embed))
    src_mask = padding_mask(src, src_pad)                           # (B, 1, 1, S)
    src_mask = {"no_src_mask": None, "inverted_src": ~src_mask}.get(kind, src_mask)
    memory_mask = None if kind == "no_memory_mask" else src_mask
    T = tgt_in.size(1)
    causal, tgt_padding = causal_mask(T), padding_mask(tgt_in, tgt_pad)   # (T, T), (B, 1, 1, T)
    ones = torch.ones(T, T, dtype=torch.bool)
    tgt_mask = {"no_causal": tgt_padding, "no_tgt_pad": causal, "or_masks": causal | tgt_padding,
                "inverted_tgt_pad": causal & ~tgt_padding, "causal-1": torch.tril(ones, diagonal=-1) & tgt_padding,
                "causal+1": torch.tril(ones, diagonal=1) & tgt_padding, "causal+2": torch.tril(ones, 2) & tgt_padding,
                "future": ~causal & tgt_padding, "future_and_self": torch.triu(ones) & tgt_padding,
                "inverted_tgt": ~(causal & tgt_padding)}.get(kind, causal & tgt_padding)
    memory = model.encoder(embed(src, src_table), src_mask)
    s = model.decoder(embed(tgt_in, tgt_table), memory, tgt_mask, memory_mask)
    logits = model.generator(s)                                     # (B, T, tgt_vocab_size)
    return {"log_softmax": F.log_softmax(logits, dim=-1), "softmax": F.softmax(logits, dim=-1)}.get(kind, logits)


def _answer(kind):
    def transformer_forward(model, src, tgt_in):
        return forward(model, src, tgt_in, kind)
    return transformer_forward


_ALLOWED = "the course's masks are True where attention is ALLOWED"
_TARGET = "the target mask is the causal mask AND the target padding mask"
_CAUSAL_HINT = "causal_mask(T) & padding_mask(tgt_in, model.pad_id)"
_INVERTED = f"; {_ALLOWED}: the causal mask is True on and below the diagonal"
# (key, the words, the hint, the slip)
_KINDS = [
    ("no_scale", "the embeddings are not scaled: they are multiplied by √d_model before the positions are added",
     "model.pos(embedding * math.sqrt(model.d_model))", "no_scale"),
    ("no_positions", "the positional encoding is missing: the positions are added to the scaled embeddings",
     "model.pos(embedding * math.sqrt(model.d_model))", "no_pos"),
    ("no_causal_mask", f"the decoder sees the future: {_TARGET}", _CAUSAL_HINT, "no_causal"),
    ("no_source_mask", "the source padding mask is missing: the encoder AND the decoder's cross-attention take it",
     "padding_mask(src, model.pad_id)", "no_src_mask"),
    ("no_target_padding", f"the target padding mask is missing: {_TARGET}", _CAUSAL_HINT, "no_tgt_pad"),
    ("no_memory_mask", "the decoder's cross-attention gets no source padding mask: the decoder takes it too, as its "
     "memory mask", "model.decoder(..., tgt_mask, src_mask)", "no_memory_mask"),
    ("scale_by_d_model", "the embeddings are multiplied by d_model: the scale is its square root, √d_model", "",
     "d_model"),
    ("scale_divided", "the embeddings are divided by √d_model: they are multiplied by it", "", "divided"),
    ("positions_scaled", "the positions are scaled too: the embedding is multiplied by √d_model first, then the "
     "positions are added", "model.pos(embedding * math.sqrt(model.d_model))", "pos_scaled"),
    ("embeddings_swapped", "the source and target embeddings are swapped: the source tokens go through the source "
     "table, the target tokens through the target table", "model.src_embed(src), model.tgt_embed(tgt_in)",
     "swapped_embed"),
    ("source_mask_inverted", f"the source padding mask is inverted (True at the padding): {_ALLOWED}",
     "padding_mask(src, model.pad_id)", "inverted_src"),
    ("target_padding_inverted", f"the target padding mask is inverted (True at the padding): {_ALLOWED}",
     _CAUSAL_HINT, "inverted_tgt_pad"),
    ("masks_or", "the causal and target padding masks are combined with OR (either one allows a key): a key must "
     "pass both", _CAUSAL_HINT, "or_masks"),
    ("causal_no_diagonal", "the causal mask hides the diagonal: position t may attend to itself and the positions "
     "before it", "causal_mask(T) (torch.tril with diagonal=0)", "causal-1"),
    ("causal_next", "the causal mask lets each position see the next one: position t may attend to positions <= t "
     "only", "causal_mask(T) (torch.tril with diagonal=0)", "causal+1"),
    ("causal_future", "the causal mask is inverted (True above the diagonal): each position sees the future and not "
     "the past" + _INVERTED, "causal_mask(T), torch.tril, not torch.triu(..., diagonal=1)", "future"),
    ("causal_future_and_self", "the causal mask is inverted (True on and above the diagonal): each position sees "
     "itself and the future, not the past" + _INVERTED, "causal_mask(T), torch.tril, not torch.triu",
     "future_and_self"),
    ("target_mask_inverted", f"the target mask is inverted (True at the future and at the padding): {_ALLOWED}",
     _CAUSAL_HINT + ", without ~", "inverted_tgt"),
    ("log_probabilities", "the function returns log-probabilities (a log-softmax): it returns the logits, without a "
     "softmax (the loss applies it)", "return model.generator(s)", "log_softmax"),
    ("probabilities", "the function returns probabilities (a softmax): it returns the logits, without a softmax (the "
     "loss applies it)", "return model.generator(s)", "softmax"),
]
_PAD = ("the pad id {pad} instead of the model's (the check's model pads with {pad_id}): every padding mask is built "
        "with the model's pad id")
_PAD_HINT = "padding_mask(src, model.pad_id) and padding_mask(tgt_in, model.pad_id)"
_PADS = {"both": "pad_id_both", "src": "pad_id_source", "tgt": "pad_id_target"}
M = Mistakes(
    *(Mistake(key, says, hint=hint, shows=_answer(kind)) for key, says, hint, kind in _KINDS),
    Mistake("pad_id_both", "the padding masks use " + _PAD, hint=_PAD_HINT,
            shows=_answer(("pad", 0, "both"))),
    Mistake("pad_id_source", "the source padding mask uses " + _PAD, hint=_PAD_HINT, shows=_answer(("pad", 0, "src"))),
    Mistake("pad_id_target", "the target padding mask uses " + _PAD, hint=_PAD_HINT, shows=_answer(("pad", 2, "tgt"))),
    Mistake("leaks_future", "the logits at position {t} changed when only target tokens 3-4 changed: no position may "
            "see the tokens after it", hint=_CAUSAL_HINT, shows=_answer("causal+2")),
)


def _variants(model, src, tgt_in):
    """{the mistake, its words filled in: the logits with it}."""
    variants = {M[key]: forward(model, src, tgt_in, kind) for key, _, _, kind in _KINDS}
    for pad in PAD_IDS:
        for which, key in _PADS.items():
            variants[M[key].at(pad=pad, pad_id=model.pad_id)] = forward(model, src, tgt_in, ("pad", pad, which))
    return variants


def _leak(ev, answer, model, src, tgt_in, logits):
    """M.leaks_future where changing target tokens 3-4 of the first sentence moves an earlier logit, or None."""
    changed = tgt_in.clone()
    changed[0, 3:] = torch.tensor([11, 12])
    try:
        later = to_numpy(ev.call(answer, model, src, changed))
    except ExerciseError:
        return None
    moved = np.abs(later[0, :3] - to_numpy(logits)[0, :3]).max(axis=-1) > 1e-5
    return M.leaks_future.at(t=int(np.argmax(moved))) if later.shape == logits.shape and moved.any() else None


@exercise("Transformer forward pass with masks", reference=lambda model, src, tgt_in: model(src, tgt_in), mistakes=M,
          right=[_answer("ok")], random=False)
@single_threaded
def transformer_forward(ev: Evaluation, answer):
    """answer(model, src (B, S), tgt_in (B, T)) -> logits (B, T, tgt_vocab_size), equal to model(src, tgt_in)."""
    tests = 0
    for seed, norm_first in enumerate((True, False)):
        torch.manual_seed(seed)
        model = ref.Transformer(17, 19, d_model=D_MODEL, num_heads=HEADS, num_layers=2, d_ff=D_FF, dropout=0.0,
                                max_len=16, norm_first=norm_first, pad_id=PAD_ID).eval()
        # the pad id is not the notebook's PAD = 0, and 0, 1, 2 are real tokens here
        src = torch.tensor([[5, 0, 7, 1, 2, 4], [5, 6, 0, PAD_ID, PAD_ID, PAD_ID]])
        tgt_in = torch.tensor([[1, 5, 0, 7, 2], [1, 2, 0, PAD_ID, PAD_ID]])
        with torch.no_grad():
            logits = ev.call(answer, model, src, tgt_in)
            expect_shape(logits, (2, 5, 19), "the logits")
            with explained(functools.partial(_leak, ev, answer, model, src, tgt_in, logits)):
                ev.expect_close(logits, model(src, tgt_in), f"the logits (norm_first={norm_first})",
                                mistakes=_variants(model, src, tgt_in))
        tests += 1
    return tests
