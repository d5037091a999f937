"""Lesson 02's typical mistakes, for its checks (lesson02.py): the PyTorch errors a slip raises, named; what a
wrong encoder, decoder step or loss returns; the gradient a decoder step must let through.

    out = call_naming(ev, ENCODER_ERRORS, answer, encoder, src, lengths)   # ev.call, the listed crashes named
    mistakes = loss_mistakes(logits, tgt_out, pad_id)       # {symptom: the loss that mistake gives}
    decoder_gradients(ev, answer, decoder, y_prev, s_prev)  # the gradient reaches s_prev through logits and s
"""

import torch
import torch.nn.functional as F

from .core import expect
from .evaluation import call_naming  # noqa: F401 - lesson02's checks import it from here

ENCODER_ERRORS = [
    (r"must be sorted in decreasing order when `enforce_sorted` is True",
     "pack_padded_sequence, with its default enforce_sorted=True, needs the lengths sorted from longest to "
     "shortest, and a batch comes in any order: pass enforce_sorted=False (or skip packing and take each "
     "sequence's state at index lengths - 1)"),
    (r"exceeds dimension size[\s\S]*(pack_padded_sequence|_VF\.gru)",    # packed as (S, B, ...): the GRU trips
     "the packed batch does not fit its lengths: pack_padded_sequence read the embeddings as time-major, (S, B, "
     "d_emb), but they are (B, S, d_emb); pass batch_first=True to pack_padded_sequence (and to "
     "pad_packed_sequence)"),
]

DECODER_ERRORS = [
    (r"For batched 3-D input, hx should also be 3-D but got 2-D",
     "the GRU's state must be (num_layers, B, d_hidden) = (1, B, d_hidden): pass s_prev[None] as its second "
     "argument, not s_prev"),
    (r"For unbatched 2-D input, hx should also be 2-D but got 3-D",
     "the GRU got the embeddings as (B, d_emb), which it reads as ONE unbatched sequence of B tokens: give it a "
     "batch of sequences of length 1, decoder.embedding(y_prev)[:, None, :] of shape (B, 1, d_emb)"),
]

LOSS_ERRORS = [
    (r"Expected target size \[\d+, \d+\], got \[\d+, \d+\]",
     "F.cross_entropy got logits (B, T, V): it takes the classes on axis 1, so either move them there, "
     "logits.transpose(1, 2) of shape (B, V, T), or flatten both, logits.reshape(-1, V) and tgt_out.reshape(-1)"),
    (r"Expected input batch_size \(\d+\) to match target batch_size \(\d+\)",
     "the logits and the targets are flattened differently: flatten BOTH, logits.reshape(-1, V) (B*T rows) and "
     "tgt_out.reshape(-1) (B*T targets)"),
]

STATE_DETACHED = ("the new state s carries no gradient (.detach(), .data or torch.no_grad()): training backpropagates "
                  "through every decoder step, s_t -> s_{t-1} -> ... -> the encoder; return the GRU's state as it is")
LOGITS_CUT = ("no gradient flows from the logits back to s_prev: compute them as decoder.out(s) from the GRU's new "
              "state s itself (no .detach(), no .data), so that training reaches the earlier steps and the encoder")
LOSS_NO_GRAD = ("the loss must stay a torch tensor that gradients flow through: return it as it is, without .item(), "
                "float(...), .detach() or torch.tensor(...), so that loss.backward() reaches the logits")


def time_major_states(encoder, src):
    """The states of a GRU given (S, B, d_emb) although it is batch_first: it runs along the batch axis."""
    return encoder.gru(encoder.embedding(src).transpose(0, 1))[0].transpose(0, 1)


def _nll(log_probs, tgt_out, real):
    """The mean of -log_probs at the targets over the real positions."""
    picked = log_probs.gather(-1, tgt_out.clamp(0, log_probs.shape[-1] - 1)[..., None])[..., 0]
    return -(picked * real).sum() / real.sum()


@torch.no_grad()
def loss_mistakes(logits, tgt_out, pad_id):
    """{symptom: the loss that mistake gives} for logits (B, T, V), tgt_out (B, T) padded with pad_id."""
    B, T, V = logits.shape
    flat_logits, flat = logits.reshape(-1, V), tgt_out.reshape(-1)
    per_token = F.cross_entropy(flat_logits, flat, reduction="none").reshape(tgt_out.shape)
    real = (tgt_out != pad_id).float()
    pad = 1 - real

    def shifted(lg, tg):
        return F.cross_entropy(lg.reshape(-1, V), tg.reshape(-1), ignore_index=pad_id)

    mistakes = {
        "the padding positions count in the loss: ignore targets equal to pad_id "
        "(ignore_index=pad_id), so that every real token weighs the same": F.cross_entropy(flat_logits, flat),
        f"the loss ignores the targets equal to 0, not those equal to the argument pad_id (here pad_id = {pad_id}, "
        "and 0 is a real token): use the argument, ignore_index=pad_id (or tgt_out != pad_id)":
            F.cross_entropy(flat_logits, flat, ignore_index=0),
        "the mask is inverted: the loss averages over the PADDING positions (tgt_out == pad_id); keep the real "
        "tokens, tgt_out != pad_id": (per_token * pad).sum() / pad.sum(),
        "the loss is divided by every position, padding included: the padding adds 0 to the sum but "
        "counts in the mean; divide by the number of REAL tokens (ignore_index=pad_id does it)":
            (per_token * real).mean(),
        "the loss is a sum: average over the real tokens (a sum grows with batch size and length)":
            (per_token * real).sum(),
        "the loss averages each sequence first: average over all real tokens of the batch at once, "
        "so that a long sequence counts as much as its tokens": ((per_token * real).sum(1) / real.sum(1)).mean(),
        "the logits were reshaped to (B, V, T): reshape (or view) does not move the vocabulary axis, it "
        "scrambles the numbers; move it with logits.transpose(1, 2), or flatten both, logits.reshape(-1, V) "
        "and tgt_out.reshape(-1)": F.cross_entropy(logits.reshape(B, V, T), tgt_out, ignore_index=pad_id),
        "the targets are flattened in another order than the logits (tgt_out.T?): flatten both the same way, "
        "logits.reshape(-1, V) and tgt_out.reshape(-1)": F.cross_entropy(flat_logits, tgt_out.T.reshape(-1),
                                                                          ignore_index=pad_id),
        "the logits and the targets are shifted by one more step: tgt_out is already aligned with the logits "
        "(the decoder read tgt_in, shifted right), so compare logits[:, t] with tgt_out[:, t], without slicing":
            shifted(logits[:, :-1], tgt_out[:, 1:]),
        "the logits and the targets are shifted against each other: tgt_out is already aligned with the logits "
        "(the decoder read tgt_in), so compare logits[:, t] with tgt_out[:, t], without slicing":
            shifted(logits[:, 1:], tgt_out[:, :-1]),
        "you applied a softmax before F.cross_entropy: it takes the logits (it applies log-softmax "
        "itself)": F.cross_entropy(torch.softmax(flat_logits, -1), flat, ignore_index=pad_id),
        "F.nll_loss got probabilities (a softmax): it takes LOG-probabilities; use F.log_softmax(logits, dim=-1) "
        "(or F.cross_entropy on the logits)": _nll(torch.softmax(logits, -1), tgt_out, real),
        "the loss is the mean negative logit, without the log-softmax: use F.cross_entropy on "
        "the logits": _nll(logits, tgt_out, real),
    }
    for axis, name in ((1, "time"), (0, "batch")):
        mistakes[f"the log-softmax is over axis {axis}, the {name} axis, not the vocabulary: normalise over the "
                 "last axis, F.log_softmax(logits, dim=-1) (F.cross_entropy on flattened logits does it)"] = \
            _nll(torch.log_softmax(logits, axis), tgt_out, real)
    return mistakes


def decoder_gradients(ev, answer, decoder, y_prev, s_prev):
    """The gradient of the step's new state, then of its logits, reaches s_prev as the reference's does (no detach).
    One backward() per call (the grader carries one back through the learner's kernel)."""
    for index, symptom in ((1, STATE_DETACHED), (0, LOGITS_CUT)):
        leaf, leaf_ref = (s_prev.detach().clone().requires_grad_() for _ in range(2))
        got = call_naming(ev, DECODER_ERRORS, answer, decoder, y_prev, leaf)[index]
        expect(isinstance(got, torch.Tensor) and got.requires_grad, symptom)
        expected = decoder.step(y_prev, leaf_ref)[index]
        weights = torch.linspace(-1, 1, expected.numel()).reshape(expected.shape)
        (got * weights).sum().backward()
        (expected * weights).sum().backward()
        expect(leaf.grad is not None and torch.allclose(leaf.grad, leaf_ref.grad, atol=1e-5, rtol=1e-4), symptom)
