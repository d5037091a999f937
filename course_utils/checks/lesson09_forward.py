"""Lesson 09's full forward pass computed from a Transformer's parts, right or with a typical mistake (what
lesson09.transformer_forward compares a learner's function with)."""
import math

import torch
import torch.nn.functional as F

from ..masks import causal_mask, padding_mask

PAD_IDS = (0, 1, 2)     # the ids a learner may type instead of model.pad_id (the notebook's PAD, BOS, EOS)


def _forward(model, src, tgt_in, kind="ok"):
    """The full forward pass from the model's parts; `kind` plants a typical mistake (("pad", p, which): the masks
    `which` ("src", "tgt" or "both") built with the pad id p)."""
    d = model.d_model
    scale = {"no_scale": 1.0, "d_model": d, "divided": 1 / math.sqrt(d)}.get(kind, math.sqrt(d))

    def embed(tokens, table):
        if kind == "pos_scaled":  # the positions scaled with the embedding
            return model.pos(table(tokens)) * math.sqrt(d)
        e = table(tokens) * scale
        return e if kind == "no_pos" else model.pos(e)

    src_pad = tgt_pad = model.pad_id
    if isinstance(kind, tuple):
        _, pad, which = kind
        src_pad = pad if which in ("src", "both") else src_pad
        tgt_pad = pad if which in ("tgt", "both") else tgt_pad
    src_table, tgt_table = ((model.tgt_embed, model.src_embed) if kind == "swapped_embed"
                            else (model.src_embed, model.tgt_embed))
    src_mask = padding_mask(src, src_pad)
    src_mask = {"no_src_mask": None, "inverted_src": ~src_mask}.get(kind, src_mask)
    memory_mask = None if kind == "no_memory_mask" else src_mask
    T = tgt_in.size(1)
    causal, tgt_padding = causal_mask(T), padding_mask(tgt_in, tgt_pad)
    ones = torch.ones(T, T, dtype=torch.bool)
    tgt_mask = {"no_causal": tgt_padding, "no_tgt_pad": causal, "or_masks": causal | tgt_padding,
                "inverted_tgt_pad": causal & ~tgt_padding, "causal-1": torch.tril(ones, diagonal=-1) & tgt_padding,
                "causal+1": torch.tril(ones, diagonal=1) & tgt_padding, "future": ~causal & tgt_padding,
                "future_and_self": torch.triu(ones) & tgt_padding,
                "inverted_tgt": ~(causal & tgt_padding)}.get(kind, causal & tgt_padding)
    memory = model.encoder(embed(src, src_table), src_mask)
    s = model.decoder(embed(tgt_in, tgt_table), memory, tgt_mask, memory_mask)
    logits = model.generator(s)
    return {"log_softmax": F.log_softmax(logits, dim=-1), "softmax": F.softmax(logits, dim=-1)}.get(kind, logits)


def forward_mistakes(model, src, tgt_in):
    """{symptom: the logits with that mistake}."""
    def out(kind):
        return _forward(model, src, tgt_in, kind)

    mistakes = {
        "the embeddings are not scaled: multiply them by sqrt(d_model) before adding the positions": out("no_scale"),
        "the positional encoding is missing: model.pos(embedding * sqrt(d_model))": out("no_pos"),
        "the decoder sees the future: combine the causal mask with the target padding mask, "
        "causal_mask(T) & padding_mask(tgt_in, pad_id)": out("no_causal"),
        "the source padding mask is missing: pass padding_mask(src, pad_id) to the encoder AND to the "
        "decoder's cross-attention": out("no_src_mask"),
        "the target padding mask is missing: combine causal_mask(T) with padding_mask(tgt_in, pad_id)":
            out("no_tgt_pad"),
        "the decoder's cross-attention gets no source padding mask: pass padding_mask(src, pad_id) to "
        "the decoder as memory_mask too": out("no_memory_mask"),
        "the embeddings are multiplied by d_model: multiply by its square root, sqrt(d_model)": out("d_model"),
        "the embeddings are divided by sqrt(d_model): multiply them by it": out("divided"),
        "the positions are scaled too: multiply the embedding by sqrt(d_model) first, then add the "
        "positions, model.pos(embedding * sqrt(d_model))": out("pos_scaled"),
        "the source and target embeddings are swapped: the source tokens go through model.src_embed, "
        "the target tokens through model.tgt_embed": out("swapped_embed"),
        "the source padding mask is inverted (True at the padding): the course's masks are True where attention "
        "is ALLOWED, padding_mask(src, model.pad_id) = (src != pad_id)[:, None, None, :]": out("inverted_src"),
        "the target padding mask is inverted (True at the padding): the course's masks are True where attention "
        "is ALLOWED, causal_mask(T) & padding_mask(tgt_in, model.pad_id)": out("inverted_tgt_pad"),
        "the causal and target padding masks are combined with | (either one allows a key): a key must pass both, "
        "causal_mask(T) & padding_mask(tgt_in, model.pad_id)": out("or_masks"),
        "the causal mask hides the diagonal (tril with diagonal=-1): position t may attend to itself and the "
        "positions before it, causal_mask(T) (tril with diagonal=0)": out("causal-1"),
        "the causal mask lets each position see the next one (tril with diagonal=1): position t may attend to "
        "positions <= t only, causal_mask(T) (tril with diagonal=0)": out("causal+1"),
        "the causal mask is inverted (True above the diagonal, as torch.triu(..., diagonal=1) builds it): each "
        "position sees the future and not the past; the course's masks are True where attention is ALLOWED, "
        "causal_mask(T) (True on and below the diagonal, torch.tril)": out("future"),
        "the causal mask is inverted (True on and above the diagonal, as torch.triu builds it): each position sees "
        "itself and the future, not the past; the course's masks are True where attention is ALLOWED, "
        "causal_mask(T) (True on and below the diagonal, torch.tril)": out("future_and_self"),
        "the target mask is inverted (True at the future and at the padding): the course's masks are True where "
        "attention is ALLOWED, causal_mask(T) & padding_mask(tgt_in, model.pad_id), without ~": out("inverted_tgt"),
        "the function returns log-probabilities (a log-softmax): return the logits, model.generator(s), "
        "without a softmax (the loss applies it)": out("log_softmax"),
        "the function returns probabilities (a softmax): return the logits, model.generator(s), without a "
        "softmax (the loss applies it)": out("softmax"),
    }
    for pad in PAD_IDS:
        if pad != model.pad_id:
            for which, masks in (("both", "the padding masks use"), ("src", "the source padding mask uses"),
                                 ("tgt", "the target padding mask uses")):
                mistakes[f"{masks} the pad id {pad} instead of model.pad_id (the check's model pads with "
                         f"{model.pad_id}): build the masks with padding_mask(src, model.pad_id) and "
                         f"padding_mask(tgt_in, model.pad_id)"] = out(("pad", pad, which))
    return mistakes
