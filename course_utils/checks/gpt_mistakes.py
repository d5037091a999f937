"""Lesson 12's planted mistakes for the model side: the next-token loss (exercise 1), the decoder block
(exercise 2) and the GPT (exercise 3). Each `*_variant` computes what an answer with one typical mistake
returns; the checks (lesson12.py) name the mistake an answer matches (the learner's crashes that torch reports
are named by lesson12_setup.call_naming with the *_ERRORS lists)."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..gpt import GPT
from ..masks import causal_mask


# ---------------------------------------------------------------------------------------------
# Exercise 1: next-token targets and the loss
# ---------------------------------------------------------------------------------------------
def _ce(logits, targets, ignore, reduction="mean"):
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1), ignore_index=ignore,
                           reduction=reduction)


def loss_variant(logits, tokens, pad_id, kind):
    """The next-token loss with the mistake `kind` planted."""
    shifts = {"not_shifted": (logits, tokens), "not_shifted_cut": (logits[:, :-1], tokens[:, :-1]),
              "wrong_way": (logits[:, 1:], tokens[:, :-1]),
              "same_positions": (logits[:, 1:], tokens[:, 1:]),
              "shift2": (logits[:, :-2], tokens[:, 2:]), "roll": (logits, tokens.roll(-1, dims=1)),
              "flat_shift": (logits.reshape(1, -1, logits.size(-1))[:, :-1], tokens.reshape(1, -1)[:, 1:]),
              "shift_batch": (logits[:-1], tokens[1:])}
    x, y = shifts.get(kind, (logits[:, :-1], tokens[:, 1:]))
    real = y != pad_id
    if kind == "padding":
        return _ce(x, y, -100)
    if kind == "pad0":
        return _ce(x, y, 0)
    if kind in ("sum", "batch", "all_tokens"):
        return _ce(x, y, pad_id, "sum") / {"sum": 1, "batch": x.size(0), "all_tokens": (tokens != pad_id).sum()}[kind]
    if kind == "all_positions":
        return _ce(x, y, pad_id, "sum") / y.numel()
    if kind in ("axis", "axis0"):
        return -(torch.log_softmax(x, dim=1 if kind == "axis" else 0).gather(-1, y[..., None])[..., 0])[real].mean()
    if kind == "per_row":
        per = _ce(x, y, pad_id, "none").view(y.shape)
        return ((per * real).sum(1) / real.sum(1)).mean()
    if kind == "input_mask":
        inputs = tokens[:, :-1] != pad_id
        return F.cross_entropy(x[inputs], y[inputs])
    if kind == "pads_only":                      # the pad mask inverted: the mean over the padding targets
        return F.cross_entropy(x[y == pad_id], y[y == pad_id])
    if kind == "last_only":                      # only the window's last target
        return F.cross_entropy(logits[:, -2], tokens[:, -1], ignore_index=pad_id)
    if kind == "reshape_bvt":                    # (B, T-1, V) reshaped, not transposed, to (B, V, T-1)
        return F.cross_entropy(x.reshape(x.size(0), x.size(-1), x.size(1)), y, ignore_index=pad_id)
    if kind == "pad_greater":                    # ids above pad_id taken as the real targets
        return F.cross_entropy(x[y > pad_id], y[y > pad_id])
    if kind == "time_major":                     # logits flattened after a transpose, the targets as they are
        return F.cross_entropy(x.transpose(0, 1).reshape(-1, x.size(-1)), y.reshape(-1), ignore_index=pad_id)
    if kind == "softmax_first":
        return _ce(x.softmax(-1), y, pad_id)
    if kind in ("nll_on_logits", "nll_on_probs"):
        x = x.softmax(-1) if kind == "nll_on_probs" else x
        return F.nll_loss(x.reshape(-1, x.size(-1)), y.reshape(-1), ignore_index=pad_id)
    if kind == "label_smoothing":
        return F.cross_entropy(x.reshape(-1, x.size(-1)), y.reshape(-1), ignore_index=pad_id, label_smoothing=0.1)
    return _ce(x, y, pad_id)


LOSS_MISTAKES = {
    "not_shifted": "the targets are not shifted: position t must predict token t+1, so compare logits[:, :-1] "
                   "with tokens[:, 1:] (you compared every position with the token it reads)",
    "not_shifted_cut": "the targets are not shifted: the logits at position t are compared with the token at t, the "
                       "one they read; position t must predict token t+1 (logits[:, :-1] against tokens[:, 1:])",
    "wrong_way": "the targets are shifted the wrong way: the logits at positions 0..T-2 predict tokens 1..T-1 "
                 "(logits[:, :-1] against tokens[:, 1:]), not logits[:, 1:] against tokens[:, :-1]",
    "shift2": "the targets are shifted by two: position t predicts the NEXT token, t+1 (logits[:, :-1], tokens[:, 1:])",
    "same_positions": "the logits and the targets are taken at the same positions (logits[:, 1:] against "
                      "tokens[:, 1:]): position t predicts token t+1, logits[:, :-1] against tokens[:, 1:]",
    "flat_shift": "the batch was flattened BEFORE the shift: the last position of each row then predicts the first "
                  "token of the NEXT row. Shift inside each row (logits[:, :-1] against tokens[:, 1:]), then flatten",
    "shift_batch": "the shift is on the batch axis (logits[:-1], tokens[1:]): the positions are axis 1, so "
                   "compare logits[:, :-1] with tokens[:, 1:]",
    "pads_only": "the loss is the mean over the PADDING targets: the mask is inverted; keep the targets that are "
                 "not pad_id (tokens[:, 1:] != pad_id, or ignore_index=pad_id)",
    "last_only": "only the last target of each window is scored: every position t < T-1 predicts token t+1, so "
                 "compare all of logits[:, :-1] with tokens[:, 1:]",
    "reshape_bvt": "the logits were reshaped to (B, V, T-1), not transposed: reshape keeps the memory order and "
                   "scrambles V and T; use logits[:, :-1].transpose(1, 2), or flatten both to (N, V) and (N,)",
    "pad_greater": "only targets with ids ABOVE pad_id count: ids below the pad id are real tokens too; leave out "
                   "only the targets EQUAL to pad_id (ignore_index=pad_id, or tokens[:, 1:] != pad_id)",
    "time_major": "the logits and the targets are flattened in different orders (one of them transposed to "
                  "time-major first): the target of row n of the flat logits must be flat target n; flatten both "
                  "as (B, T-1) -> B·(T-1), logits[:, :-1].reshape(-1, V) and tokens[:, 1:].reshape(-1)",
    "roll": "torch.roll wraps around: the last position gets the row's FIRST token as its target. Drop the last "
            "position instead: logits[:, :-1] against tokens[:, 1:]",
    "padding": "padding is counted: targets equal to pad_id must not enter the loss (ignore_index=pad_id, or "
               "average over the real targets only)",
    "pad0": "the padding id is taken as 0: use the pad_id you are given (here it is not 0)",
    "input_mask": "the padding mask is taken from the INPUTS (tokens[:, :-1]): what must be left out are the "
                  "targets that are padding, tokens[:, 1:] == pad_id (a real token may be followed by padding)",
    "sum": "the loss is a sum: return the MEAN over the real targets (a sum grows with the batch and the length, "
           "so the learning rate would have to change with them)",
    "batch": "the sum of the losses is divided by the batch size B: divide it by the number of real targets (the "
             "mean over every real target of the batch)",
    "all_tokens": "the sum is divided by the number of ALL real tokens, the inputs' first included: divide by the "
                  "number of real TARGETS, (tokens[:, 1:] != pad_id).sum()",
    "all_positions": "the sum over the real targets is divided by ALL T-1 positions of every row, padding "
                     "included: divide by the number of real targets",
    "per_row": "the loss is averaged per row, then over the rows: a short row would weigh as much as a long one. "
               "Average over all the real targets of the batch at once",
    "axis": "the softmax runs over the wrong axis: log_softmax over the LAST axis (the vocabulary, V)",
    "axis0": "the softmax runs over the batch axis (dim 0): log_softmax over the LAST axis (the vocabulary, V)",
    "nll_on_logits": "F.nll_loss takes LOG-probabilities and you gave it logits: use F.cross_entropy on the "
                     "logits (it applies log_softmax itself)",
    "nll_on_probs": "F.nll_loss takes LOG-probabilities and you gave it probabilities (a softmax without the log): "
                    "use F.cross_entropy on the logits, or F.nll_loss on logits.log_softmax(-1)",
    "label_smoothing": "the loss is label-smoothed: the next-token loss (and the perplexity, its exponential) is "
                       "the plain cross-entropy, without label_smoothing",
    "softmax_first": "the logits went through a softmax before the cross-entropy: F.cross_entropy takes the "
                     "LOGITS (it applies log_softmax itself)",
}

LOSS_NO_GRAD = ("the loss must stay a torch tensor that gradients flow through: return it as it is, without .item(), "
                "float(...) or .detach(), so that loss.backward() reaches the logits")
LOSS_ERRORS = [
    (r"view size is not compatible", "logits[:, :-1] is a slice that .view cannot flatten: use .reshape(-1, V) "
                                     "(or .flatten(0, 1)) to get (B·(T-1), V)"),
    (r"argument 'weight' \(position 3\) must be Tensor", "pad_id went to F.cross_entropy's THIRD positional "
                                                         "argument, which is `weight` (a tensor of class weights): "
                                                         "pass it by name, ignore_index=pad_id"),
    (r"expected target dtype to be Long", "the targets reached F.cross_entropy as floats, which it reads as class "
                                          "probabilities: keep them as integer ids (torch.long), without .float()"),
    (r"Expected target size", "F.cross_entropy takes the classes on axis 1: give it logits (N, V) and targets (N,), "
                              "flattened with .reshape(-1, V) and .reshape(-1)"),
    (r"Expected input batch_size", "the logits and the targets do not line up: shift both, then flatten both the "
                                   "same way, logits[:, :-1].reshape(-1, V) against tokens[:, 1:].reshape(-1)"),
]


# ---------------------------------------------------------------------------------------------
# Exercise 2: the decoder block
# ---------------------------------------------------------------------------------------------
def block_variant(layer, x, mask, kind):
    """A GPT block's output, from the reference block's modules, with the mistake `kind` planted."""
    n1, n2, ff = layer.norm1, layer.norm2, layer.ff
    d1, d2 = layer.dropout1, layer.dropout2
    m = {"no_mask": None, "sees_next": torch.ones(x.size(1), x.size(1), dtype=torch.bool).tril(1),
         "inverted": ~mask}.get(kind, mask)

    def attn(y):
        return layer.attn(y, m)
    if kind == "one_norm":
        n2 = n1
    if kind == "norms_swapped":
        n1, n2 = n2, n1
    if kind in ("no_dropout", "no_dropout1"):
        d1 = nn.Identity()
    if kind in ("no_dropout", "no_dropout2"):
        d2 = nn.Identity()
    if kind == "unpacked":                   # out, weights = attention(...): the batch's first two rows
        x = x + d1(attn(n1(x))[0])
        return x + d2(ff(n2(x)))
    if kind in ("parallel", "ff_on_attn"):   # the FFN reads the block's input, or the attention's output alone
        a = d1(attn(n1(x)))
        return x + a + d2(ff(n2(x if kind == "parallel" else a)))
    if kind == "norm_residual_attn":
        y = n1(x)
        x = y + d1(attn(y))
        return x + d2(ff(n2(x)))
    if kind == "post_norm":
        x = n1(x + d1(attn(x)))
        return n2(x + d2(ff(x)))
    if kind == "no_residual":
        return d2(ff(n2(d1(attn(n1(x))))))
    if kind == "no_residual_attn":
        x = d1(attn(n1(x)))
        return x + d2(ff(n2(x)))
    if kind == "no_residual_ff":
        x = x + d1(attn(n1(x)))
        return d2(ff(n2(x)))
    if kind == "norm_residual":
        y = n1(x)
        x = y + d1(attn(y))
        y = n2(x)
        return y + d2(ff(y))
    if kind == "stale":
        y = n1(x)
        x = x + d1(attn(y))
        return x + d2(ff(y))
    if kind == "norm2_residual":             # x = norm2(x): the second residual adds to the normalised x
        x = n2(x + d1(attn(n1(x))))
        return x + d2(ff(x))
    if kind == "post_norm_ff":               # the second sub-layer post-norm, the first pre-norm
        x = x + d1(attn(n1(x)))
        return n2(x + d2(ff(x)))
    if kind == "norm_after_attn":            # the first LayerNorm on the attention's output, inside the residual
        x = x + n1(d1(attn(x)))
        return x + d2(ff(n2(x)))
    if kind == "norm_after":
        x = x + d1(n1(attn(x)))
        return x + d2(n2(ff(x)))
    if kind == "order":
        x = x + d2(ff(n2(x)))
        return x + d1(attn(n1(x)))
    if kind == "kv_raw":                     # queries from LN(x), keys and values from x itself
        y = n1(x)
        x = x + d1(layer.attn.attend(*_kv_raw(layer.attn, y, x), mask))
        return x + d2(ff(n2(x)))
    if kind in ("attn_no_norm", "ff_no_norm"):
        x = x + d1(attn(x if kind == "attn_no_norm" else n1(x)))
        return x + d2(ff(x if kind == "ff_no_norm" else n2(x)))
    if kind in ("dropout_sum", "dropout_sum_attn", "dropout_sum_ff"):   # dropout over the residual sum
        x = d1(x + attn(n1(x))) if kind != "dropout_sum_ff" else x + d1(attn(n1(x)))
        return d2(x + ff(n2(x))) if kind != "dropout_sum_attn" else x + d2(ff(n2(x)))
    x = x + d1(attn(n1(x)))
    return x + d2(ff(n2(x)))


def _kv_raw(attn, y, x):
    """A GPT attention's q from y, k and v from x (each split into heads, rotated as in forward)."""
    positions = torch.arange(x.size(1))
    q, _, _ = attn.project(y, positions)
    _, k, v = attn.project(x, positions)
    return q, k, v


_RESIDUAL = "add the sub-layer's output to its input, x = x + Dropout(Sublayer(LayerNorm(x)))"
BLOCK_MISTAKES = {
    "post_norm": "this is the post-norm layer of lesson 09's paper, x = LayerNorm(x + Sublayer(x)); a GPT is "
                 "pre-norm: x = x + Dropout(Sublayer(LayerNorm(x))), the LayerNorm on the sub-layer's input",
    "no_residual": f"the residual connections are missing: {_RESIDUAL}, around both sub-layers",
    "no_residual_attn": f"the residual connection around the attention is missing: {_RESIDUAL}",
    "no_residual_ff": f"the residual connection around the feed-forward network is missing: {_RESIDUAL}",
    "no_mask": "the mask is not passed to the attention: self.attn(y, y, y, mask), so that position t sees "
               "positions <= t only",
    "sees_next": "the attention's mask lets position t see position t+1: pass the mask the block is given (the "
                 "causal mask, True on and below the diagonal only)",
    "one_norm": "one LayerNorm serves both sub-layers: norm1 before the attention, norm2 before the "
                "feed-forward network (each has its own gain and bias)",
    "norm_residual": "the residual starts from the normalised x: y = LayerNorm(x) feeds only the sub-layer; add "
                     "its output to the ORIGINAL x (x = x + Sublayer(y))",
    "norms_swapped": "norm1 and norm2 are swapped: norm1 normalises the attention's input, norm2 the FFN's",
    "norm_residual_attn": "the attention's residual starts from the normalised x: y = LayerNorm(x) feeds only the "
                          "sub-layer; add its output to the ORIGINAL x (x = x + Dropout(Attn(y)))",
    "inverted": "the mask is inverted: True means MAY attend (the causal mask you are given, True on and below the "
                "diagonal); pass `mask` itself to the attention",
    "no_dropout1": "dropout1 is not applied: x = x + self.dropout1(attention output)",
    "no_dropout2": "dropout2 is not applied: x = x + self.dropout2(feed-forward output)",
    "unpacked": "the attention's output was unpacked as (out, weights): the course's MultiHeadAttention returns ONE "
                "tensor (B, T, d_model) (nn.MultiheadAttention returns a pair), so `out, _ = ...` takes the batch's "
                "first two rows; use out = self.attn(y, y, y, mask)",
    "parallel": "the two sub-layers run side by side on the block's input: the feed-forward network reads the "
                "UPDATED x, after the attention's residual (x = x + Attn(...), then x + FFN(LayerNorm2(x)))",
    "ff_on_attn": "the feed-forward network reads the attention's output alone: it reads the UPDATED x, after the "
                  "residual (x = x + Dropout(Attn(...)), then x + Dropout(FFN(LayerNorm2(x))))",
    "stale": "the feed-forward network reads LayerNorm of the block's INPUT (the y computed before the "
             "attention): normalise the updated x again, x + Dropout(self.ff(self.norm2(x)))",
    "norm2_residual": "x is replaced by norm2(x): the second residual must add to the UN-normalised x; keep the "
                      "normalised copy apart, y = self.norm2(x), then x = x + Dropout(FFN(y))",
    "post_norm_ff": "the feed-forward half is post-norm, LayerNorm(x + FFN(x)): in a pre-norm block it is "
                    "x + Dropout(FFN(LayerNorm2(x))), like the attention half",
    "norm_after_attn": "the first LayerNorm is applied to the attention's OUTPUT (x + LN(Attn(x))): in a pre-norm "
                       "block it normalises the attention's INPUT, x = x + Dropout(Attn(LN(x)))",
    "norm_after": "the LayerNorm is applied to the sub-layer's OUTPUT: in a pre-norm block it normalises the "
                  "sub-layer's input, x = x + Dropout(Sublayer(LayerNorm(x)))",
    "order": "the feed-forward network comes before the attention: attention first (norm1), then the "
             "feed-forward network (norm2)",
    "kv_raw": "the keys and values come from x, the queries from LayerNorm(x): self-attention takes the SAME "
              "normalised y = LayerNorm(x) as query, key and value, self.attn(y, y, y, mask)",
    "attn_no_norm": "the attention reads x without its LayerNorm: x + Dropout(Attn(LayerNorm1(x)))",
    "ff_no_norm": "the feed-forward network reads x without its LayerNorm: x + Dropout(FFN(LayerNorm2(x)))",
    "no_dropout": "dropout1 and dropout2 are not applied: x = x + self.dropout1(attention output), then "
                  "x + self.dropout2(feed-forward output) (in training they drop features of each sub-layer's "
                  "output before it is added)",
    "dropout_sum": "the dropout is applied to the sum x + Sublayer(...): apply it to the sub-layer's output only, "
                   "x = x + Dropout(Sublayer(LayerNorm(x))), so that the residual path is never dropped",
    "dropout_sum_attn": "dropout1 is applied to the sum x + Attn(...): apply it to the attention's output only, "
                        "x = x + Dropout1(Attn(LayerNorm1(x))), so that the residual path is never dropped",
    "dropout_sum_ff": "dropout2 is applied to the sum x + FFN(...): apply it to the feed-forward output only, "
                      "x + Dropout2(FFN(LayerNorm2(x))), so that the residual path is never dropped",
}


# ---------------------------------------------------------------------------------------------
# Exercise 3: the GPT
# ---------------------------------------------------------------------------------------------
class ReferenceGPT(GPT):
    """The answer to exercise 3: the course's GPT with learned positions (GPT-2's), with the exercise's
    signature. `gpt.GPT` is the same model with a choice of positions and lesson 12's attention options."""

    def __init__(self, vocab_size, d_model, num_heads, num_layers, d_ff, max_len, dropout=0.0):
        super().__init__(vocab_size, d_model, num_heads, num_layers, d_ff, max_len, dropout, positions="learned")


def model_variant(model, tokens, kind):
    """The logits of a learned-positions GPT, from the reference model's modules, with the mistake `kind`."""
    d, T = model.d_model, tokens.size(1)
    e = model.embed(tokens)
    scale = {"no_scale": 1.0, "scale_d": d, "divided": 1 / math.sqrt(d)}.get(kind, math.sqrt(d))
    if kind == "pos_scaled":                     # the positions scaled with the embedding
        x = model.pos(e) * math.sqrt(d)
    elif kind == "no_pos":
        x = e * scale
    elif kind == "pos_twice":
        x = model.pos(model.pos(e * scale))
    elif kind == "pos_no_dropout":               # the table added by hand: the positions' dropout skipped
        x = e * scale + model.pos.pe.weight[:T]
    else:
        x = model.pos(e * scale)
    mask = {"no_mask": None, "sees_next": torch.ones(T, T, dtype=torch.bool).tril(1),
            "inverted": ~causal_mask(T)}.get(kind, causal_mask(T))
    if kind == "norm_before":
        x = model.norm(x)
    layers = {"first_block_only": [model.layers[0]] * len(model.layers), "one_block": list(model.layers)[-1:],
              "first_block_once": list(model.layers)[:1], "reversed": list(model.layers)[::-1]}.get(kind, model.layers)
    if kind == "pos_every_block":
        x = e * scale
    for layer in layers:
        x = layer(model.pos(x) if kind == "pos_every_block" else x, mask)
        x = model.norm(x) if kind == "norm_every_block" and layer is not layers[-1] else x
    if kind not in ("no_final_norm", "norm_before"):
        x = model.norm(x)
    logits = model.head(x)
    return {"softmax": logits.softmax(-1), "log_softmax": logits.log_softmax(-1)}.get(kind, logits)


MODEL_MISTAKES = {
    "no_scale": "the token embeddings are not scaled: multiply them by √d_model before adding the positions (as "
                "lesson 09's Transformer; the course's GPT does it too)",
    "scale_d": "the embeddings are multiplied by d_model: multiply by its square root, √d_model",
    "divided": "the embeddings are divided by √d_model: multiply them by it",
    "pos_scaled": "the positions are scaled too: multiply the embedding by √d_model first, then add the positions, "
                  "self.pos(self.embed(tokens) * √d_model)",
    "no_pos": "the positions are not added: self.pos(...) adds the learned position vectors P[:T] to the scaled "
              "embeddings (without them the model cannot tell the order of the tokens)",
    "pos_twice": "the positions are added twice: self.pos adds them once (x + P[:T]); call it once",
    "pos_no_dropout": "the positions' dropout is skipped (in training): self.pos(x) adds P[:T] and then applies "
                      "dropout; adding self.pos.pe.weight[:T] by hand leaves the dropout out. Call self.pos(x)",
    "no_mask": "the blocks get no causal mask: every position sees the whole window, the future included. Pass "
               "causal_mask(T) (T = tokens.size(1)) to every block",
    "sees_next": "the mask lets position t see position t+1: the causal mask is True on and below the diagonal "
                 "only (causal_mask(T), or torch.ones(T, T, dtype=torch.bool).tril())",
    "inverted": "the mask is inverted: True means MAY attend, on and below the diagonal (causal_mask(T)); yours "
                "lets every position see only the future",
    "no_final_norm": "the final LayerNorm is missing: self.norm(x) after the last block, before the output layer "
                     "(GPT-2's final LayerNorm, which pre-norm blocks need: their sum of residuals is never "
                     "normalised otherwise)",
    "norm_before": "the final LayerNorm is applied before the blocks: apply it after the LAST block, just before "
                   "the output layer",
    "first_block_only": "the same block is applied num_layers times: each block of self.layers has weights of its "
                        "own; run them one after the other (for layer in self.layers: x = layer(x, mask))",
    "reversed": "the blocks run in reverse order: self.layers[0] first, then the next one, up to the last",
    "norm_every_block": "the final LayerNorm is applied after EVERY block: the blocks normalise their own inputs "
                        "(pre-norm); the final LayerNorm comes once, after the last block",
    "pos_every_block": "the positions are added before EVERY block: add them once, to the scaled embeddings",
    "one_block": "only the last block is applied: run every block of self.layers in turn (for layer in self.layers: "
                 "x = layer(x, mask))",
    "first_block_once": "only the first block is applied: run every block of self.layers in turn (for layer in "
                        "self.layers: x = layer(x, mask))",
    "log_softmax": "you return log-probabilities (a log_softmax): return the LOGITS (the output layer's values); the "
                   "loss and sampling apply the softmax themselves",
    "softmax": "you return probabilities: return the LOGITS (the output layer's values); the loss and sampling "
               "apply the softmax themselves",
}

MODEL_ERRORS = [
    (r"a 2-D mask must be \(T_q, T_k\)|does not broadcast to the scores",
     "the mask does not fit the input: build it for the T = tokens.size(1) tokens of this batch, "
     "causal_mask(T), not for max_len"),
    (r"mat1 and mat2 shapes cannot be multiplied \(\d+x(\d+) and \d+x\1\)",
     "the output layer multiplies by the embedding matrix (V, d_model) without transposing it: the logits are "
     "x @ self.embed.weight.T, which self.head(x) computes once it is tied"),
    (r"IndexError: index out of range in self",
     "an embedding table was read past its end: the position table has max_len rows, looked up by POSITION "
     "(0..T-1, self.pos(x) adds P[:T]), not by the token ids; the token ids index self.embed"),
    (r"sqrt\(\): argument 'input' \(position 1\) must be Tensor, not int",
     "torch.sqrt takes a tensor: √d_model is a number, math.sqrt(self.d_model) (or self.d_model ** 0.5)"),
    (r"Sequential.forward\(\) takes 2 positional arguments",
     "nn.Sequential passes ONE input from block to block, and each block also needs the mask: loop, for layer in "
     "self.layers: x = layer(x, mask)"),
    (r"Expected tensor for argument #1 'indices' to have one of the following scalar types",
     "the output layer looks up ids: `self.head = self.embed` replaced the Linear by the embedding module; tie the "
     "WEIGHTS, self.head.weight = self.embed.weight"),
    (r"Given normalized_shape=\[\d+\], expected input with shape \[\*, \d+\], but got input of size\[\d+, \d+, \d+\]",
     "a LayerNorm got the logits (V values per position, not d_model): the final LayerNorm comes BEFORE the output "
     "layer, self.head(self.norm(x))"),
    (r"mask must be a bool tensor", "the mask must be boolean, True where a position may attend: causal_mask(T) "
                                    "(torch.tril of ones gives floats; add dtype=torch.bool)"),
]
TIED_IN_FORWARD = ("the output layer is tied in forward, not in __init__: a new model has two matrices until its first "
                   "forward call, so an optimiser made before it (as every training loop makes it) trains the head "
                   "that forward then throws away. Tie once, in __init__: self.head.weight = self.embed.weight")
UNTIED = ("the output layer is not tied to the embedding: it must be the SAME parameter, "
          "self.head.weight = self.embed.weight (a copy of its values is not tied: the two would train apart)")

BLOCK_ERRORS = [
    (r"forward\(\) missing 1 required positional argument: 'value'",
     "the course's MultiHeadAttention takes query, key and value (lesson 09): self-attention passes the normalised x "
     "three times, self.attn(y, y, y, mask)"),
]
