"""Lesson 02, exercise 3: the teacher-forced loss.

    sequence_loss(logits (B, T, V), tgt_out (B, T), pad_id) -> the mean cross-entropy over the real target tokens,
    a scalar tensor that gradients flow through

The check compares the loss on four batches (the last pads with another id than 0, where 0 is a real token: the
loss must use its argument pad_id), then on confident logits (a logit 200 above the others), where a log of the
softmax gives -inf and an eps caps the loss. It names the cross-entropy's crashes on unflattened logits, and a loss
that is not a tensor, not one number, or carries no gradient.
"""
import functools

import torch
import torch.nn.functional as F

from ... import recurrent as ref
from ...data.sequences import PAD_ID
from ..core import Mistake, Mistakes, exercise, expect, single_threaded
from ..evaluation import Evaluation, call_naming
from ..expectations import explained
from ..torch_errors import BATCH_SIZE, TARGET_SIZE
from .batches import VOCAB, tokens


def _flat(logits, tgt):
    return logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1)


def _per_token(logits, tgt):
    return F.cross_entropy(logits.transpose(1, 2), tgt, reduction="none")


def _nll(log_probs):
    """A wrong answer: the mean of -log_probs(logits) at the targets over the real tokens."""
    def sequence_loss(logits, tgt_out, pad_id=PAD_ID):
        picked = log_probs(logits).gather(-1, tgt_out[..., None])[..., 0]
        return -picked[tgt_out != pad_id].mean()
    return sequence_loss


def _per_sequence(logits, tgt_out, pad_id=PAD_ID):
    real = (tgt_out != pad_id).float()
    return ((_per_token(logits, tgt_out) * real).sum(1) / real.sum(1)).mean()


def _capped(logits, tgt_out, pad_id=PAD_ID):
    log_p = torch.log(F.softmax(logits, dim=-1) + 1e-9).gather(-1, tgt_out[..., None])[..., 0]
    return -log_p[tgt_out != pad_id].mean()


_SHIFTED = ("tgt_out is already aligned with the logits (the decoder read tgt_in, shifted right), so the logits at "
            "position t go with the target at position t")
_AXIS = "the log-softmax is over axis {axis}, the {name} axis, not the vocabulary: it normalises over the last axis"
M = Mistakes(
    Mistake("classes_last", "the cross-entropy got logits (B, T, V), and it takes the classes on axis 1",
            hint="logits.transpose(1, 2), of shape (B, V, T); or flatten both, logits.reshape(-1, V) and "
            "tgt_out.reshape(-1)", shows=lambda logits, tgt_out, pad_id=PAD_ID: F.cross_entropy(
                logits, tgt_out, ignore_index=pad_id)),
    Mistake("flattened_one", "the logits and the targets are flattened differently: both must become B*T rows",
            hint="logits.reshape(-1, V) and tgt_out.reshape(-1)", shows=lambda logits, tgt_out, pad_id=PAD_ID:
            F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt_out, ignore_index=pad_id)),
    Mistake("not_tensor", "the loss is a Python {type}, not a torch tensor: training calls backward() on it",
            hint="return the tensor itself, without .item() or float(...)",
            shows=lambda logits, tgt_out, pad_id=PAD_ID: ref.sequence_loss(logits, tgt_out, pad_id).item()),
    Mistake("not_scalar", "the loss has shape {shape}: the loss is one number, the mean over the real tokens",
            hint="F.cross_entropy's default reduction, 'mean'", shows=lambda logits, tgt_out, pad_id=PAD_ID:
            F.cross_entropy(logits.transpose(1, 2), tgt_out, ignore_index=pad_id, reduction="none")),
    Mistake("pads_counted", "the padding positions count in the loss: the targets equal to pad_id must be left out, "
            "so that every real token weighs the same", hint="F.cross_entropy(..., ignore_index=pad_id)",
            shows=lambda logits, tgt_out, pad_id=PAD_ID: F.cross_entropy(*_flat(logits, tgt_out))),
    Mistake("zero_as_pad", "the loss leaves out the targets equal to 0, not those equal to the argument pad_id "
            "(here pad_id = {pad_id}, and 0 is a real token)", hint="ignore_index=pad_id (or tgt_out != pad_id), "
            "the argument", shows=lambda logits, tgt_out, pad_id=PAD_ID: F.cross_entropy(
                *_flat(logits, tgt_out), ignore_index=0)),
    Mistake("mask_inverted", "the mask is inverted: the loss averages over the PADDING positions; it must keep the "
            "real tokens", hint="tgt_out != pad_id", shows=lambda logits, tgt_out, pad_id=PAD_ID:
            _per_token(logits, tgt_out)[tgt_out == pad_id].mean()),
    Mistake("mean_over_all", "the loss is divided by every position, padding included: the padding adds 0 to the "
            "sum but counts in the mean; the mean is over the REAL tokens",
            hint="ignore_index=pad_id does it; or divide the sum by (tgt_out != pad_id).sum()",
            shows=lambda logits, tgt_out, pad_id=PAD_ID: (_per_token(logits, tgt_out) * (tgt_out != pad_id)).mean()),
    Mistake("summed", "the loss is a sum: the exercise asks for the mean over the real tokens (a sum grows with "
            "the batch size and the length)", hint="reduction='mean', the default",
            shows=lambda logits, tgt_out, pad_id=PAD_ID: F.cross_entropy(*_flat(logits, tgt_out), ignore_index=pad_id,
                                                                         reduction="sum")),
    Mistake("per_sequence", "the loss averages each sequence first: it must average over all real tokens of the "
            "batch at once, so that a long sequence counts as much as its tokens", shows=_per_sequence),
    Mistake("reshaped", "the logits were reshaped to (B, V, T): a reshape does not move the vocabulary axis, it "
            "scrambles the numbers", hint="logits.transpose(1, 2); or flatten both, logits.reshape(-1, V) and "
            "tgt_out.reshape(-1)", shows=lambda logits, tgt_out, pad_id=PAD_ID: F.cross_entropy(
                logits.reshape(logits.shape[0], logits.shape[2], logits.shape[1]), tgt_out, ignore_index=pad_id)),
    Mistake("targets_transposed", "the targets are flattened in another order than the logits: both must be "
            "flattened the same way", hint="logits.reshape(-1, V) and tgt_out.reshape(-1)",
            shows=lambda logits, tgt_out, pad_id=PAD_ID: F.cross_entropy(
                logits.reshape(-1, logits.shape[-1]), tgt_out.T.reshape(-1), ignore_index=pad_id)),
    Mistake("shifted_more", f"the logits and the targets are shifted by one more step: {_SHIFTED}",
            hint="no slicing", shows=lambda logits, tgt_out, pad_id=PAD_ID: F.cross_entropy(
                *_flat(logits[:, :-1], tgt_out[:, 1:]), ignore_index=pad_id)),
    Mistake("shifted_back", f"the logits and the targets are shifted against each other: {_SHIFTED}",
            hint="no slicing", shows=lambda logits, tgt_out, pad_id=PAD_ID: F.cross_entropy(
                *_flat(logits[:, 1:], tgt_out[:, :-1]), ignore_index=pad_id)),
    Mistake("softmax_first", "the logits went through a softmax before the cross-entropy, which applies the "
            "log-softmax itself", hint="F.cross_entropy on the logits", shows=lambda logits, tgt_out, pad_id=PAD_ID:
            F.cross_entropy(*_flat(torch.softmax(logits, -1), tgt_out), ignore_index=pad_id)),
    Mistake("nll_of_probabilities", "the negative log-likelihood got probabilities (a softmax): it takes "
            "LOG-probabilities", hint="F.log_softmax(logits, dim=-1), or F.cross_entropy on the logits",
            shows=_nll(lambda logits: torch.softmax(logits, -1))),
    Mistake("nll_of_logits", "the loss is the mean negative logit of the targets: the logits need a log-softmax "
            "first", hint="F.cross_entropy on the logits", shows=_nll(lambda logits: logits)),
    Mistake("log_softmax_time", _AXIS.format(axis=1, name="time"), hint="F.log_softmax(logits, dim=-1)",
            shows=_nll(lambda logits: torch.log_softmax(logits, 1))),
    Mistake("log_softmax_batch", _AXIS.format(axis=0, name="batch"), hint="F.log_softmax(logits, dim=-1)",
            shows=_nll(lambda logits: torch.log_softmax(logits, 0))),
    Mistake("no_grad", "the loss carries no gradient: it must stay a tensor that gradients flow through, so that "
            "backward() reaches the logits", hint="return it as it is, without .item(), float(...), .detach() or "
            "torch.tensor(...)", shows=lambda logits, tgt_out, pad_id=PAD_ID: torch.tensor(
                ref.sequence_loss(logits, tgt_out, pad_id).item())),
    Mistake("log_of_softmax", "the loss is inf (or NaN) on confident logits: the log of a softmax underflows, a "
            "probability of exp(-200) is 0 in float32, and its log is -inf",
            hint="F.log_softmax(logits, dim=-1), which computes z - logsumexp(z) stably (or F.cross_entropy)",
            shows=_nll(lambda logits: torch.log(torch.softmax(logits, -1)))),
    Mistake("capped", "the loss on confident logits is capped ({got} instead of {want}): an eps added to the "
            "probabilities, or probabilities clamped before the log, cut the loss of a confident wrong prediction "
            "at -log(eps)", hint="F.log_softmax(logits, dim=-1), which needs no eps", shows=_capped),
)
CRASHES = [(TARGET_SIZE, M.classes_last), (BATCH_SIZE, M.flattened_one)]
VALUES = [m for m in M if m.key not in ("classes_last", "flattened_one", "not_tensor", "not_scalar", "no_grad",
                                        "log_of_softmax", "capped")]


def confident_logits(g, tgt_out, vocab):
    """Logits (B, T, vocab) whose every position puts a logit 200 above the others on a class that is not its
    target: the true loss is about 200 per token, and softmax gives the target a probability of 0 in float32."""
    logits = torch.as_tensor(g.normal(size=(*tgt_out.shape, vocab)) * 2, dtype=torch.float32)
    wrong = (tgt_out + 1) % vocab
    logits.scatter_add_(-1, wrong[..., None], torch.full((*tgt_out.shape, 1), 200.0))
    return logits


def capped(loss, expected):
    """A probe: on confident logits, a finite loss below the true one (log(p + eps), or p clamped)."""
    got, want = float(torch.as_tensor(loss).detach()), float(expected)
    if not (torch.isfinite(torch.tensor(got)) and got < 0.9 * want):
        return None
    return M.capped.at(got=f"{got:.3g}", want=f"{want:.3g}")


def _masked(logits, tgt_out, pad_id=PAD_ID):
    keep = tgt_out != pad_id
    return F.cross_entropy(logits[keep], tgt_out[keep])


def _float64(logits, tgt_out, pad_id=PAD_ID):
    """In float64 a probability of exp(-200) is not 0: the log of the softmax stays finite and right there."""
    log_p = torch.log(F.softmax(logits.double(), dim=-1)).gather(-1, tgt_out[..., None])[..., 0]
    return -log_p[tgt_out != pad_id].mean().float()


@exercise("teacher-forced loss", reference=ref.sequence_loss, mistakes=M,
          right=[_masked, _float64, lambda logits, tgt_out, pad_id=PAD_ID: F.cross_entropy(
              logits.transpose(1, 2), tgt_out, ignore_index=pad_id)])
@single_threaded
def sequence_loss(ev: Evaluation, answer):
    """answer(logits (B, T, V), tgt_out (B, T), pad_id) -> mean cross-entropy over the real tokens."""
    tests = 0
    for seed, (lengths, pad_id) in enumerate([([5, 2, 4], PAD_ID), ([3, 3], PAD_ID), ([6, 1, 2, 6], PAD_ID),
                                              ([4, 6, 3], 4)]):
        g = ev.rng(seed)
        tgt_out, _ = tokens(g, lengths, pad_id=pad_id)
        logits = torch.as_tensor(g.normal(size=(*tgt_out.shape, VOCAB)) * 2, dtype=torch.float32)
        logits.requires_grad_()                                              # the loss must reach them
        loss = call_naming(ev, CRASHES, answer, logits, tgt_out.clone(), pad_id)
        expect(isinstance(loss, torch.Tensor), M.not_tensor.at(type=type(loss).__name__))
        expect(loss.dim() == 0 or loss.numel() == 1, M.not_scalar.at(shape=tuple(loss.shape)))
        with torch.no_grad():
            expected = ref.sequence_loss(logits, tgt_out, pad_id)
            variants = {m.at(pad_id=pad_id): v for m, v in M.variants(VALUES, logits, tgt_out, pad_id).items()}
        ev.expect_close(loss.reshape(()), expected, f"the loss (target lengths {lengths}, pad_id = {pad_id})",
                        mistakes=variants)
        expect(loss.requires_grad, M.no_grad)
        tests += 1
    return tests + _confident_loss(ev, answer)


def _confident_loss(ev: Evaluation, answer):
    """Confident logits (a logit 200 above the others, not on the target): the true loss is about 200 per token,
    and a log of the softmax gives log(0) = -inf. Returns the number of tests (1)."""
    g = ev.rng(20)
    lengths = [4, 2, 3]
    tgt_out, _ = tokens(g, lengths)
    logits = confident_logits(g, tgt_out, VOCAB).requires_grad_()
    loss = call_naming(ev, CRASHES, answer, logits, tgt_out.clone(), PAD_ID)
    with torch.no_grad():
        expected = ref.sequence_loss(logits, tgt_out, PAD_ID)
        variants = M.variants([M.log_of_softmax], logits, tgt_out, PAD_ID)
    with explained(functools.partial(capped, loss, expected)):
        ev.expect_close(torch.as_tensor(loss).reshape(()), expected, f"the loss on confident logits (a logit 200 "
                        f"above the others, target lengths {lengths})", mistakes=variants)
    return 1
