"""Lesson 03, exercise 5: one step of Bahdanau's attention decoder.

    attention_decoder_step(decoder, y_prev (B,), s_prev (B, d_hidden), h (B, S, d_enc), mask (B, S))
        -> (logits (B, vocab), s (B, d_hidden), alpha (B, S))

c_t, alpha_t = attention(s_(t-1), h, mask), read BEFORE the GRU; s_t = GRU([E y_(t-1); c_t], s_(t-1));
logits = W_out [s_t; c_t]. The check compares alpha, then s, then the logits, on three padded batches.
"""
import torch

from ... import recurrent
from ... import scores as ref
from ..core import Mistake, Mistakes, exercise, expect_distribution, expect_returns, randn, single_threaded
from ..evaluation import Evaluation
from .padding import random_mask


def wrong(mask_of=lambda mask: mask, gru_input=lambda x, c: torch.cat([x, c], -1), state=lambda s, s_prev: s,
          out_input=lambda s, c, s_prev: torch.cat([s, c], -1), logits_of=lambda logits: logits, luong=None):
    """One decoder step with one mistake (every default is the right choice): mask_of(mask) what the attention is
    given; gru_input(embedding, c); state(the GRU's output, s_prev) the new state; out_input(s, c, s_prev) what
    decoder.out projects; logits_of(logits) what is returned; luong: attention read again with the new state, for
    the output layer ("context") and for the alpha returned too ("both")."""
    def attention_decoder_step(decoder, y_prev, s_prev, h, mask):
        c, alpha = decoder.attention(s_prev, h, mask_of(mask))
        s = state(decoder.gru(gru_input(decoder.embedding(y_prev), c), s_prev), s_prev)
        if luong:
            c, new_alpha = decoder.attention(s, h, mask)
            alpha = new_alpha if luong == "both" else alpha
        return logits_of(decoder.out(out_input(s, c, s_prev))), s, alpha
    return attention_decoder_step


_LUONG = ("attention is read with the NEW state s_t (after the GRU, Luong's order): Bahdanau's decoder reads it with "
          "the previous state, before the GRU, and uses that one c_t in the GRU's input and in the output layer")
_EXTRA = ("the new state s went through an extra {name}: the GRU cell's output already is the new state, s_t = "
          "GRU([E y_(t-1); c_t], s_(t-1))")
M = Mistakes(
    Mistake("no_mask", "alpha gives weight to padding: the attention needs the mask (True = real token)",
            hint="decoder.attention(s_prev, h, mask)", shows=wrong(mask_of=torch.ones_like)),
    Mistake("mask_inverted", "alpha attends to the padding only: the mask is True at real tokens, and the attention "
            "takes it as it is", hint="mask, not ~mask", shows=wrong(mask_of=lambda mask: ~mask)),
    Mistake("luong", _LUONG + "; the alpha returned is that step's", hint="c, alpha = decoder.attention(s_prev, h, "
            "mask), before the GRU", shows=wrong(luong="both")),
    Mistake("gru_input_order", "the GRU's input is [c_t; E y_(t-1)]: it is [E y_(t-1); c_t], the embedding first",
            hint="torch.cat([decoder.embedding(y_prev), c], dim=-1)",
            shows=wrong(gru_input=lambda x, c: torch.cat([c, x], -1))),
    Mistake("s_prev_returned", "the state s is the previous state: the GRU cell turns it into the new one",
            hint="s = decoder.gru(torch.cat([embedding, c], dim=-1), s_prev)",
            shows=wrong(state=lambda s, s_prev: s_prev)),
    *[Mistake(f"state_{name}", _EXTRA.format(name=name), hint="use the GRU cell's output as it is",
              shows=wrong(state=lambda s, s_prev, f=f: f(s)))
      for name, f in (("tanh", torch.tanh), ("relu", torch.relu), ("sigmoid", torch.sigmoid))],
    Mistake("logits_from_s_prev", "the logits come from the previous state: the output layer reads [s_t; c_t] with "
            "the NEW state", hint="decoder.out(torch.cat([s, c], dim=-1))",
            shows=wrong(out_input=lambda s, c, s_prev: torch.cat([s_prev, c], -1))),
    Mistake("out_input_order", "the logits come from [c_t; s_t]: the output layer reads [s_t; c_t], the state first",
            hint="decoder.out(torch.cat([s, c], dim=-1))",
            shows=wrong(out_input=lambda s, c, s_prev: torch.cat([c, s], -1))),
    Mistake("probabilities", "the logits went through a softmax: the step returns the logits themselves",
            hint="decoder.out(...), without a softmax", shows=wrong(logits_of=lambda x: torch.softmax(x, -1))),
    Mistake("log_probabilities", "the logits went through a log-softmax: the step returns the logits themselves",
            hint="decoder.out(...), without a log_softmax", shows=wrong(logits_of=lambda x: torch.log_softmax(x, -1))),
    Mistake("logits_tanh", "the logits went through a tanh: the output layer's result is returned as it is, with no "
            "activation", hint="decoder.out(torch.cat([s, c], dim=-1))", shows=wrong(logits_of=torch.tanh)),
    Mistake("luong_context", _LUONG, hint="one c_t, from decoder.attention(s_prev, h, mask) before the GRU",
            shows=wrong(luong="context")),
)
ALPHA = [M.no_mask, M.mask_inverted, M.luong]
STATE = [M.gru_input_order, M.s_prev_returned, M.state_tanh, M.state_relu, M.state_sigmoid]
LOGITS = [M.logits_from_s_prev, M.out_input_order, M.probabilities, M.log_probabilities, M.logits_tanh,
          M.luong_context]


def _reference(decoder, y_prev, s_prev, h, mask):
    return decoder.step(y_prev, s_prev, h, mask)


def _written_out(decoder, y_prev, s_prev, h, mask):
    """The output layer written out as W_s s + W_c c + b, the embedding first, torch.concat."""
    x = decoder.embedding(y_prev)
    c, alpha = decoder.attention(s_prev, h, mask)
    s = decoder.gru(torch.concat([x, c], dim=1), s_prev)
    d = s.shape[-1]
    W, b = decoder.out.weight, decoder.out.bias
    return s @ W[:, :d].T + c @ W[:, d:].T + b, s, alpha


@exercise("one attention decoder step", reference=_reference, mistakes=M, right=[_written_out])
@single_threaded
def attention_decoder_step(ev: Evaluation, answer):
    """answer(decoder, y_prev (B,), s_prev (B, d_hidden), h (B, S, d_enc), mask (B, S)) -> logits, s, alpha."""
    tests = 0
    d_emb, d_hidden, d_enc, vocab = 4, 6, 8, 11
    for seed, lengths in enumerate([[5, 3, 2], [4, 4], [6, 1, 3, 5]]):
        with torch.random.fork_rng():
            torch.manual_seed(20 + seed)
            decoder = recurrent.AttentionDecoder(vocab, d_emb, d_hidden, d_enc,
                                                 ref.AdditiveAttention(d_hidden, d_enc, 5))
        g = ev.rng(seed)
        B, S = len(lengths), max(lengths)
        y_prev = torch.as_tensor(g.integers(1, vocab, size=B))
        s_prev, h = randn(g, B, d_hidden), randn(g, B, S, d_enc)
        mask = random_mask(g, B, S, lengths)
        args = (decoder, y_prev, s_prev, h, mask)
        with torch.no_grad():
            logits_ref, s_ref, alpha_ref = decoder.step(y_prev, s_prev, h, mask)
            logits, s, alpha = expect_returns(ev.call(answer, decoder, y_prev, s_prev.clone(), h.clone(), mask.clone()),
                                              (logits_ref, s_ref, alpha_ref), ("logits", "s", "alpha"))
            ev.expect_close(alpha, alpha_ref, f"alpha (source lengths {lengths})",
                            mistakes=M.variants(ALPHA, *args, pick=lambda r: r[2]))
            expect_distribution(alpha, "alpha")
            ev.expect_close(s, s_ref, f"the new state s (source lengths {lengths})",
                            mistakes=M.variants(STATE, *args, pick=lambda r: r[1]))
            ev.expect_close(logits, logits_ref, f"the logits (source lengths {lengths})",
                            mistakes=M.variants(LOGITS, *args, pick=lambda r: r[0]))
        tests += 1
    return tests
