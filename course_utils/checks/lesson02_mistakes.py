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


ONE_STATE = ("the context is ONE state, the one after each sequence's last real token (index lengths - 1, or h_n[-1] "
             "of a packed GRU); do not pool the states over the positions")


@torch.no_grad()
def context_mistakes(unpacked, h, src, lengths, pad_id):
    """{symptom: s} for a context s pooled over the positions (a mean, a sum, a max; padding included or not) and
    for the last column of the packed-then-unpacked states h (zeros past each length). unpacked: the GRU's states
    over the padding too; h: the reference's states, zeros at the padding."""
    real = (src != pad_id)[..., None].to(unpacked.dtype)
    n = lengths.to(unpacked.dtype)[:, None]
    return {
        f"s is the mean of the states over every position, padding included: {ONE_STATE}": unpacked.mean(1),
        f"s is the mean of the states over the positions, the padding counted as zeros: {ONE_STATE}": h.mean(1),
        f"s is the mean of the states over each sequence's real tokens: {ONE_STATE}": (unpacked * real).sum(1) / n,
        f"s is the sum of the states over the positions: {ONE_STATE}": unpacked.sum(1),
        f"s is the sum of the states over each sequence's real tokens: {ONE_STATE}": (unpacked * real).sum(1),
        f"s is the largest value of each feature over the positions (a max pooling): {ONE_STATE}":
            unpacked.max(1).values,
        "s is the last column of the unpacked states, h[:, -1]: pad_packed_sequence fills the positions past each "
        "length with zeros, so for every sequence shorter than S it is a zero vector; take the state at index "
        "lengths - 1, or h_n[-1], the packed GRU's final state": h[:, -1],
    }


EMBEDDING_CHANGED = ("the GRU's input is not the embedding of y_prev as it is: {}; the step is s_t = GRU(s_{{t-1}}, "
                     "E y_{{t-1}}): feed decoder.embedding(y_prev)[:, None, :] itself")
STATE_CHANGED = ("the logits come from {} of the new state: the logits are W_out s_t, decoder.out(s), with no "
                 "function between the state and decoder.out")


@torch.no_grad()
def step_mistakes(decoder, y_prev, s_prev):
    """({symptom: s}, {symptom: logits}) for an extra function put on the embedding before the GRU, or on the new
    state before decoder.out (a ReLU, a tanh, a sigmoid, a scale by sqrt(d_emb))."""
    x = decoder.embedding(y_prev)[:, None, :]
    d_emb = x.shape[-1]
    changes = {"a ReLU": torch.relu, "a tanh": torch.tanh, "a sigmoid": torch.sigmoid,
               "a scale by sqrt(d_emb)": lambda t: t * d_emb ** 0.5}
    states = {EMBEDDING_CHANGED.format(f"you put {name} on it"): decoder.gru(f(x), s_prev[None])[1][0]
              for name, f in changes.items()}
    s = decoder.gru(x, s_prev[None])[1][0]
    logits = {STATE_CHANGED.format(name): decoder.out(f(s)) for name, f in list(changes.items())[:3]}
    return states, logits


LOG_OF_SOFTMAX = ("the loss is inf (or NaN) on confident logits: torch.log(torch.softmax(...)) underflows, a "
                  "probability of exp(-200) is 0 in float32 and its log is -inf; use F.log_softmax(logits, dim=-1), "
                  "which computes log p = z - logsumexp(z) stably (or F.cross_entropy on the logits)")


@torch.no_grad()
def confident_logits(g, tgt_out, vocab):
    """Logits (B, T, vocab) whose every position puts a logit 200 above the others on a class that is not its
    target: the true loss is about 200 per token, and softmax gives the target a probability of 0 in float32."""
    logits = torch.as_tensor(g.normal(size=(*tgt_out.shape, vocab)) * 2, dtype=torch.float32)
    wrong = (tgt_out + 1) % vocab
    logits.scatter_add_(-1, wrong[..., None], torch.full((*tgt_out.shape, 1), 200.0))
    return logits


def capped_loss(loss, expected):
    """A probe: on confident logits, a finite loss below the true one (log(p + eps), or p clamped): a message."""
    got, want = float(torch.as_tensor(loss).detach()), float(expected)
    if not (torch.isfinite(torch.tensor(got)) and got < 0.9 * want):
        return None
    return (f"the loss on confident logits is capped ({got:.3g} instead of {want:.3g}): log(softmax + eps), or "
            "probabilities clamped before the log, cut the loss of a confident wrong prediction at -log(eps); use "
            "F.log_softmax(logits, dim=-1) (or F.cross_entropy on the logits), which needs no eps.")
