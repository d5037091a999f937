"""Exercise 1's known mistakes (the next-token loss): `loss_variant(logits, tokens, pad_id, kind)` is the loss with
one typical mistake, the single definition each registry entry's wrong answer runs; the registry `M` also holds
the crashes torch reports for typical slips and the properties the check tests (one number, a gradient, finite
with confident logits)."""
import functools

import torch
import torch.nn.functional as F

from ..core import Mistake, Mistakes
from ..torch_errors import BATCH_SIZE, NOT_TENSOR, TARGET_DTYPE, TARGET_SIZE, VIEW


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


def _variant(kind, hint="", says=""):
    return Mistake(kind, says, hint=hint, shows=functools.partial(loss_variant, kind=kind))


_SHIFT = "compare logits[:, :-1] with tokens[:, 1:]"
_REAL = "ignore_index=pad_id, or keep tokens[:, 1:] != pad_id"

# the mistakes the check names by their values, in the order it tries them
VALUE_KEYS = ["not_shifted", "not_shifted_cut", "wrong_way", "shift2", "same_positions", "flat_shift", "shift_batch",
              "pads_only", "last_only", "reshape_bvt", "pad_greater", "time_major", "roll", "padding", "pad0",
              "input_mask", "sum", "batch", "all_tokens", "all_positions", "per_row", "axis", "axis0",
              "nll_on_logits", "nll_on_probs", "label_smoothing", "softmax_first"]

M = Mistakes(
    _variant("not_shifted", _SHIFT, "the targets are not shifted: every position is compared with the token it "
             "reads; position t must predict token t+1"),
    _variant("not_shifted_cut", _SHIFT, "the targets are not shifted: the logits at position t are compared with "
             "the token at t, the one they read; position t must predict token t+1"),
    _variant("wrong_way", "logits[:, :-1] against tokens[:, 1:], not logits[:, 1:] against tokens[:, :-1]",
             "the targets are shifted the wrong way: the logits at positions 1..T-1 meet tokens 0..T-2; the logits "
             "at positions 0..T-2 predict tokens 1..T-1"),
    _variant("shift2", _SHIFT, "the targets are shifted by two: position t predicts the NEXT token, t+1"),
    _variant("same_positions", _SHIFT, "the logits and the targets are taken at the same positions, 1..T-1: "
             "position t predicts token t+1"),
    _variant("flat_shift", "logits[:, :-1] and tokens[:, 1:], then reshape both", "the batch was flattened BEFORE "
             "the shift: the last position of each row then predicts the first token of the NEXT row; shift inside "
             "each row, then flatten"),
    _variant("shift_batch", _SHIFT, "the shift is along the batch axis (axis 0): the positions are axis 1"),
    _variant("pads_only", _REAL, "the loss is the mean over the PADDING targets: the padding mask is inverted; keep "
             "the targets that are not padding"),
    _variant("last_only", _SHIFT, "only the last target of each window is scored: every position t < T-1 predicts "
             "token t+1, and all of them count"),
    _variant("reshape_bvt", "logits[:, :-1].transpose(1, 2), or flatten both to (N, V) and (N,)",
             "the logits were reshaped to (B, V, T-1), not transposed: a reshape keeps the memory order and "
             "scrambles the vocabulary and time axes"),
    _variant("pad_greater", _REAL, "only targets with ids ABOVE the pad id count: ids below it are real tokens "
             "too; leave out only the targets EQUAL to the pad id"),
    _variant("time_major", "logits[:, :-1].reshape(-1, V) and tokens[:, 1:].reshape(-1)",
             "the logits and the targets are flattened in different orders (one of them time-major): row n of the "
             "flat logits must meet flat target n, both flattened as (B, T-1) -> B·(T-1)"),
    _variant("roll", _SHIFT, "the targets are rolled, and a roll wraps around: the last position gets the row's "
             "FIRST token as its target; drop the last position instead"),
    _variant("padding", "ignore_index=pad_id", "padding is counted: targets equal to the pad id must not enter the "
             "loss"),
    _variant("pad0", "ignore_index=pad_id", "the padding id is taken as 0: use the pad id you are given (here it "
             "is not 0)"),
    _variant("input_mask", "keep tokens[:, 1:] != pad_id", "the padding mask is taken from the INPUTS: what must be "
             "left out are the TARGETS that are padding (a real token may be followed by padding)"),
    _variant("sum", "reduction='mean' (the default) with ignore_index=pad_id", "the loss is a sum: return the MEAN "
             "over the real targets (a sum grows with the batch and the length, so the learning rate would have to "
             "change with them)"),
    _variant("batch", "divide by (tokens[:, 1:] != pad_id).sum()", "the sum of the losses is divided by the batch "
             "size B: divide it by the number of real targets"),
    _variant("all_tokens", "divide by (tokens[:, 1:] != pad_id).sum()", "the sum is divided by the number of ALL "
             "real tokens, the inputs' first included: divide by the number of real TARGETS"),
    _variant("all_positions", "divide by (tokens[:, 1:] != pad_id).sum()", "the sum over the real targets is "
             "divided by all T-1 positions of every row, padding included: divide by the number of real targets"),
    _variant("per_row", "one mean over every real target of the batch", "the loss is averaged per row, then over "
             "the rows: a short row weighs as much as a long one; average over all the real targets of the batch "
             "at once"),
    _variant("axis", "log_softmax(dim=-1)", "the softmax runs over the wrong axis: the log-softmax is over the LAST "
             "axis, the vocabulary (V)"),
    _variant("axis0", "log_softmax(dim=-1)", "the softmax runs over the batch axis (axis 0): the log-softmax is over "
             "the LAST axis, the vocabulary (V)"),
    _variant("nll_on_logits", "F.cross_entropy on the logits (it applies log_softmax itself)",
             "the negative log-likelihood loss got the logits: it takes LOG-probabilities"),
    _variant("nll_on_probs", "F.cross_entropy on the logits, or F.nll_loss on logits.log_softmax(-1)",
             "the negative log-likelihood loss got probabilities (a softmax without the log): it takes "
             "LOG-probabilities"),
    _variant("label_smoothing", "F.cross_entropy without label_smoothing", "the loss is label-smoothed: the "
             "next-token loss (and the perplexity, its exponential) is the plain cross-entropy"),
    _variant("softmax_first", "F.cross_entropy takes the logits themselves", "the logits went through a softmax "
             "before the cross-entropy, which applies a log-softmax of its own: it takes the LOGITS"),
    Mistake("not_scalar", "return ONE number, the mean over the real targets; got shape {shape}",
            hint="reduction='mean' (the default)",
            shows=lambda logits, tokens, pad_id: _ce(logits[:, :-1], tokens[:, 1:], pad_id, "none")),
    Mistake("no_grad", "the loss must stay a torch tensor that gradients flow through, so that the backward pass "
            "reaches the logits", hint="return it as it is, without .item(), float(...) or .detach()",
            shows=lambda logits, tokens, pad_id: _ce(logits[:, :-1], tokens[:, 1:], pad_id).detach()),
    Mistake("view_after_slice", "the sliced logits cannot be flattened by a view: a slice along the positions is "
            "not one block of memory", hint=".reshape(-1, V) (or .flatten(0, 1)) to get (B·(T-1), V)",
            shows=lambda logits, tokens, pad_id: F.cross_entropy(logits[:, :-1].view(-1, logits.size(-1)),
                                                                 tokens[:, 1:].reshape(-1), ignore_index=pad_id)),
    Mistake("pad_as_weight", "the pad id went to the cross-entropy's third positional argument, which is `weight`, "
            "a tensor of class weights", hint="pass it by name, ignore_index=pad_id",
            shows=lambda logits, tokens, pad_id: F.cross_entropy(logits[:, :-1].reshape(-1, logits.size(-1)),
                                                                 tokens[:, 1:].reshape(-1), pad_id)),
    Mistake("float_targets", "the targets reached the cross-entropy as floats, which it reads as class "
            "probabilities: the targets are integer token ids", hint="keep them torch.long, without .float()",
            shows=lambda logits, tokens, pad_id: _ce(logits[:, :-1], tokens[:, 1:].float(), pad_id)),
    Mistake("classes_axis", "the cross-entropy takes the classes on axis 1, and the logits (B, T-1, V) have them "
            "last", hint="flatten both, logits.reshape(-1, V) and targets.reshape(-1) (or transpose(1, 2))",
            shows=lambda logits, tokens, pad_id: F.cross_entropy(logits[:, :-1], tokens[:, 1:], ignore_index=pad_id)),
    Mistake("not_lined_up", "the cross-entropy got {rows} rows of logits and {targets} targets: the logits and the "
            "targets do not line up", hint="shift both, then flatten both the same way: "
            "logits[:, :-1].reshape(-1, V) against tokens[:, 1:].reshape(-1)",
            shows=lambda logits, tokens, pad_id: _ce(logits, tokens[:, 1:], pad_id)),
    Mistake("not_finite_confident", "with confident logits (one logit 120 above the others) your loss is inf or NaN: "
            "a log of a softmax underflows to log 0 there (and an exponential of the raw logits overflows)",
            hint="F.cross_entropy or log_softmax, which compute z − logsumexp(z)",
            shows=lambda logits, tokens, pad_id: -logits[:, :-1].softmax(-1).log().gather(
                -1, tokens[:, 1:, None])[..., 0][tokens[:, 1:] != pad_id].mean()),
)

CRASHES = [
    (VIEW, M.view_after_slice),
    (NOT_TENSOR, lambda match: M.pad_as_weight if match["arg"] == "weight" else None),
    (TARGET_DTYPE, M.float_targets),
    (TARGET_SIZE, M.classes_axis),
    (BATCH_SIZE, lambda match: M.not_lined_up.at(rows=match["input"], targets=match["target"])),
]
