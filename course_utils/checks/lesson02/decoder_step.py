"""Lesson 02, exercise 2: one step of the decoder.

    decoder_step(decoder, y_prev (B,), s_prev (B, d_hidden)) -> (logits (B, vocab), s (B, d_hidden))

s_t = GRU(s_{t-1}, E y_{t-1}) and the logits W_out s_t. The check compares s, then the logits, for B = 4, 1 and 6
(B = 1: a squeeze without its axis drops the batch); it names the GRU's crashes on a state or an input of the wrong
rank, a function put on the embedding or on the state, and then that the gradient of s and of the logits reaches
s_prev (training backpropagates through every step).
"""
import torch

from ... import recurrent as ref
from ..core import Mistake, Mistakes, exercise, expect, expect_returns, single_threaded
from ..evaluation import Evaluation, call_naming
from ..torch_errors import RNN_HX
from .batches import VOCAB


def wrong(embedded=lambda x: x, state=lambda s_prev: s_prev[None], logits_of=lambda s, s_prev: s, new=True,
          returned=lambda logits, s: (logits, s), no_grad=False):
    """One decoder step with one mistake (every default is the right choice): embedded(x) the GRU's input from the
    embedding x (B, 1, d_emb); state(s_prev) its initial state (None: zeros); logits_of(s, s_prev) what decoder.out
    projects; new: the state returned is the GRU's (else s_prev); returned(logits, s)."""
    def decoder_step(decoder, y_prev, s_prev):
        with torch.set_grad_enabled(torch.is_grad_enabled() and not no_grad):
            x = embedded(decoder.embedding(y_prev)[:, None, :])
            h0 = state(s_prev)
            _, s = decoder.gru(x) if h0 is None else decoder.gru(x, h0)
            s = s[0] if new else s_prev
            return returned(decoder.out(logits_of(s, s_prev)), s)
    return decoder_step


_EMBEDDING = ("the GRU's input is not the embedding of y_prev as it is: {how} was put on it; the step is s_t = "
              "GRU(s_(t-1), E y_(t-1))")
_STATE = "the logits come from {how} of the new state: the logits are W_out s_t, with nothing between s_t and W_out"
CHANGES = {"relu": ("a ReLU", torch.relu), "tanh": ("a tanh", torch.tanh), "sigmoid": ("a sigmoid", torch.sigmoid),
           "scaled": ("a scale by √d_emb", lambda t: t * t.shape[-1] ** 0.5)}
M = Mistakes(
    Mistake("state_2d", "the GRU's state must have the shape (num_layers, B, d_hidden) = (1, B, d_hidden), and "
            "s_prev is (B, d_hidden)", hint="decoder.gru(x, s_prev[None])", shows=wrong(state=lambda s_prev: s_prev)),
    Mistake("input_2d", "the GRU got the embeddings as (B, d_emb), which it reads as ONE unbatched sequence of B "
            "tokens: it needs a batch of sequences of length 1, (B, 1, d_emb)",
            hint="decoder.embedding(y_prev)[:, None, :]", shows=wrong(embedded=lambda x: x[:, 0])),
    Mistake("s_prev_returned", "s is the previous state: return the state the GRU computes from y_prev and s_prev",
            shows=wrong(new=False)),
    Mistake("no_input", "s ignores the previous token: the GRU's input is the embedding of y_prev, with s_prev as "
            "its state", hint="decoder.gru(decoder.embedding(y_prev)[:, None, :], s_prev[None])",
            shows=wrong(embedded=torch.zeros_like)),
    Mistake("from_zeros", "the GRU started from zeros, not from s_prev: the previous state is its initial state",
            hint="pass it as its second argument, decoder.gru(x, s_prev[None])", shows=wrong(state=lambda s: None)),
    Mistake("layers_axis", "s has an extra leading axis: the GRU returns its state as (num_layers, B, d_hidden) = "
            "(1, B, d_hidden), and s is (B, d_hidden)", hint="s[0]",
            shows=wrong(returned=lambda logits, s: (logits, s[None]))),
    *[Mistake(f"embedding_{key}", _EMBEDDING.format(how=how), hint="feed decoder.embedding(y_prev)[:, None, :] "
              "itself", shows=wrong(embedded=f)) for key, (how, f) in CHANGES.items()],
    Mistake("logits_from_s_prev", "the logits come from the previous state s_prev: they project the NEW state",
            hint="decoder.out(s)", shows=wrong(logits_of=lambda s, s_prev: s_prev)),
    Mistake("probabilities", "the logits went through a softmax: the step returns the logits themselves (the loss "
            "applies the log-softmax)", hint="decoder.out(s), without a softmax",
            shows=wrong(returned=lambda logits, s: (torch.softmax(logits, -1), s))),
    Mistake("log_probabilities", "the logits went through a log-softmax: the step returns the logits themselves",
            hint="decoder.out(s)", shows=wrong(returned=lambda logits, s: (torch.log_softmax(logits, -1), s))),
    Mistake("logits_time_axis", "the logits have an extra axis of length 1 (the GRU's sequence axis): they are "
            "(B, vocab)", hint="decoder.out(s) with s of shape (B, d_hidden)",
            shows=wrong(returned=lambda logits, s: (logits[:, None], s))),
    *[Mistake(f"state_{key}", _STATE.format(how=how), hint="decoder.out(s)",
              shows=wrong(logits_of=lambda s, s_prev, f=f: f(s))) for key, (how, f) in list(CHANGES.items())[:3]],
    Mistake("state_detached", "the new state s carries no gradient: training backpropagates through every decoder "
            "step, s_t -> s_(t-1) -> ... -> the encoder; return the GRU's state as it is",
            hint="no .detach(), .data or torch.no_grad()", shows=wrong(no_grad=True)),
    Mistake("logits_cut", "no gradient flows from the logits back to s_prev: they must come from the GRU's new "
            "state itself, so that training reaches the earlier steps and the encoder",
            hint="decoder.out(s), with no .detach() or .data",
            shows=wrong(logits_of=lambda s, s_prev: s.detach())),
)
CRASHES = [(RNN_HX, lambda match: M.state_2d if match["input"].startswith("batched") else M.input_2d)]
STATE_MISTAKES = ["s_prev_returned", "no_input", "from_zeros", "layers_axis",
                  *[f"embedding_{key}" for key in CHANGES]]
LOGITS_MISTAKES = ["logits_from_s_prev", "probabilities", "log_probabilities", "logits_time_axis",
                   *[f"state_{key}" for key in list(CHANGES)[:3]]]


def _reference(decoder, y_prev, s_prev):
    return decoder.step(y_prev, s_prev)


def _output_sequence(decoder, y_prev, s_prev):
    """The new state read from the GRU's output sequence (one step, one layer) is right too."""
    out, _ = decoder.gru(decoder.embedding(y_prev).unsqueeze(1), s_prev.unsqueeze(0))
    s = out.squeeze(1)
    return torch.nn.functional.linear(s, decoder.out.weight, decoder.out.bias), s


@exercise("one decoder step", reference=_reference, mistakes=M, right=[_output_sequence])
@single_threaded
def decoder_step(ev: Evaluation, answer):
    """answer(decoder, y_prev (B,), s_prev (B, d_hidden)) -> logits (B, vocab), s (B, d_hidden)."""
    tests = 0
    for seed, B in enumerate([4, 1, 6]):
        with torch.random.fork_rng():
            torch.manual_seed(10 + seed)
            decoder = ref.Decoder(VOCAB, 5, 8)
        g = ev.rng(seed)
        y_prev = torch.as_tensor(g.integers(1, VOCAB, size=B))
        s_prev = torch.as_tensor(g.normal(size=(B, 8)), dtype=torch.float32)
        with torch.no_grad():
            logits_ref, s_ref = decoder.step(y_prev, s_prev)
            logits, s = expect_returns(call_naming(ev, CRASHES, answer, decoder, y_prev, s_prev.clone()),
                                       (logits_ref, s_ref), ("logits", "s"))
            ev.expect_close(s, s_ref, f"the new state s (B={B})",
                            mistakes=M.variants(STATE_MISTAKES, decoder, y_prev, s_prev, pick=lambda r: r[1]))
            ev.expect_close(logits, logits_ref, f"the logits (B={B})",
                            mistakes=M.variants(LOGITS_MISTAKES, decoder, y_prev, s_prev, pick=lambda r: r[0]))
        tests += 1
    _expect_gradients(ev, answer, decoder, y_prev, s_prev)       # no detach: training goes back through s_prev
    return tests + 1


def _expect_gradients(ev: Evaluation, answer, decoder, y_prev, s_prev):
    """The gradient of the step's new state, then of its logits, reaches s_prev as the reference's does. One
    backward() per call (the grader carries one back through the learner's kernel)."""
    for index, mistake in ((1, M.state_detached), (0, M.logits_cut)):
        leaf, leaf_ref = (s_prev.detach().clone().requires_grad_() for _ in range(2))
        got = call_naming(ev, CRASHES, answer, decoder, y_prev, leaf)[index]
        expect(isinstance(got, torch.Tensor) and got.requires_grad, mistake)
        expected = decoder.step(y_prev, leaf_ref)[index]
        weights = torch.linspace(-1, 1, expected.numel()).reshape(expected.shape)
        (got * weights).sum().backward()
        (expected * weights).sum().backward()
        expect(leaf.grad is not None and torch.allclose(leaf.grad, leaf_ref.grad, atol=1e-5, rtol=1e-4), mistake)
