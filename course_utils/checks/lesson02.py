"""Checks for lesson 02: the seq2seq encoder-decoder (encoder forward, one decoder step, the loss).
Their typical mistakes (named crashes, wrong losses, a cut gradient, a context pooled over the positions, a function
put on the embedding or the state) are in lesson02_mistakes.py; the loss also meets confident logits (a logit 200
above the others), where a log of the softmax gives -inf."""
import functools

import torch

from .. import recurrent as ref
from ..data.sequences import PAD_ID
from .core import (
    exercise,
    expect,
    expect_returns,
    expect_shape,
    single_threaded,
)
from .evaluation import Evaluation
from .expectations import explained
from .lesson02_mistakes import (
    DECODER_ERRORS,
    ENCODER_ERRORS,
    LOG_OF_SOFTMAX,
    LOSS_ERRORS,
    LOSS_NO_GRAD,
    call_naming,
    capped_loss,
    confident_logits,
    context_mistakes,
    decoder_gradients,
    loss_mistakes,
    step_mistakes,
    time_major_states,
)

VOCAB = 13


def _tokens(g, lengths, extra=0, pad_id=PAD_ID):
    """Random ids padded with pad_id to the longest length (+ `extra` columns): (B, S), lengths. With PAD_ID the
    ids are 3..VOCAB-1; with another pad_id they are any id but pad_id, and the first one is 0 (a real token)."""
    S = max(lengths) + extra
    src = torch.full((len(lengths), S), pad_id, dtype=torch.long)
    ids = torch.arange(3, VOCAB) if pad_id == PAD_ID else torch.tensor([i for i in range(VOCAB) if i != pad_id])
    for i, n in enumerate(lengths):
        src[i, :n] = ids[torch.as_tensor(g.integers(0, len(ids), size=n))]
    if pad_id != PAD_ID:
        src[0, 0] = 0
    return src, torch.tensor(lengths)


def _encoder_forward(encoder, src, lengths):
    return encoder(src, lengths)


def _decoder_step(decoder, y_prev, s_prev):
    return decoder.step(y_prev, s_prev)


@exercise("encoder forward pass", reference=_encoder_forward)
@single_threaded
def encoder_forward(ev: Evaluation, answer):
    """answer(encoder, src (B, S), lengths (B,)) -> h (B, S, d_hidden), s (B, d_hidden)."""
    tests = 0
    # the first batch has a column of padding after its longest sequence, as a padded batch of a
    # larger data set may: every row's last real token is then before the last column
    for seed, (lengths, extra) in enumerate([([5, 3, 4, 1], 1), ([7, 7, 2], 0), ([6], 0)]):
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            encoder = ref.Encoder(VOCAB, 5, 8)
        src, lens = _tokens(ev.rng(seed), lengths, extra)
        B, S = src.shape
        with torch.no_grad():
            h_ref, s_ref = encoder(src, lens)
            h, s = expect_returns(call_naming(ev, ENCODER_ERRORS, answer, encoder, src, lens.clone()),
                                  (h_ref, s_ref), ("h", "s"))
            unpacked, _ = encoder.gru(encoder.embedding(src))        # ran over the padding too
            time_major = time_major_states(encoder, src)
        rows = torch.arange(B)
        expect_shape(h, (B, S, 8), "h")
        keep = (src != PAD_ID)[..., None]
        ev.expect_close(h * keep, h_ref, f"h at the real tokens (lengths {lengths}); positions past "
                        "each length are not checked", mistakes={
            "the GRU ran along the batch axis: it is batch_first, so it reads (B, S, d_emb) as it comes from "
            "the embedding; do not transpose the input to (S, B, d_emb)": time_major * keep})
        ev.expect_close(s, s_ref, f"the final state s (lengths {lengths})", mistakes={
            "s is the GRU's output at the last column, which is padding for the shorter sequences: "
            "take each sequence's state at its last real token (index lengths - 1), or pack the batch "
            "with pack_padded_sequence so the GRU stops there": unpacked[:, -1],
            "s is the state at index lengths, one step past the last real token (after the first <pad>): "
            "the last real token is at index lengths - 1": unpacked[rows, torch.clamp(lens, max=S - 1)],
            "s is the state after the FIRST token: the context is the state after the last real token":
                unpacked[:, 0],
            "s has an extra leading axis (num_layers): return h_n[0] (shape (B, d_hidden))": s_ref[None],
            **context_mistakes(unpacked, h_ref, src, lens, PAD_ID),
        })
        tests += 1
    return tests


@exercise("one decoder step", reference=_decoder_step)
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
            logits, s = expect_returns(call_naming(ev, DECODER_ERRORS, answer, decoder, y_prev, s_prev.clone()),
                                       (logits_ref, s_ref), ("logits", "s"))
            x = decoder.embedding(y_prev)[:, None, :]
            changed_input, changed_state = step_mistakes(decoder, y_prev, s_prev)
            ev.expect_close(s, s_ref, f"the new state s (B={B})", mistakes={
                "s is the previous state: return the state the GRU computes from y_prev and s_prev":
                    s_prev,
                "s ignores the previous token: feed the EMBEDDING of y_prev to the GRU, with s_prev as "
                "its hidden state": decoder.gru(torch.zeros(B, 1, 5), s_prev[None])[1][0],
                "the GRU started from zeros, not from s_prev: pass the state as its second argument, "
                "decoder.gru(x, s_prev[None])": decoder.gru(x)[1][0],
                "s has an extra leading axis (num_layers): the GRU returns its state as (1, B, d_hidden); "
                "take s[0]": s_ref[None],
                **changed_input,
            })
            ev.expect_close(logits, logits_ref, f"the logits (B={B})", mistakes={
                "the logits come from the previous state s_prev: project the NEW state, "
                "decoder.out(s)": decoder.out(s_prev),
                "you returned probabilities: return the logits decoder.out(s), without a softmax "
                "(the loss applies log-softmax itself)": torch.softmax(logits_ref, -1),
                "you returned log-probabilities: return the logits decoder.out(s)":
                    torch.log_softmax(logits_ref, -1),
                "the logits have an extra axis of length 1 (the GRU's sequence axis): return logits of "
                "shape (B, vocab), e.g. decoder.out(s) with s of shape (B, d_hidden)": logits_ref[:, None],
                **changed_state,
            })
        tests += 1
    decoder_gradients(ev, answer, decoder, y_prev, s_prev)       # no detach: training goes back through s_prev
    return tests + 1


@exercise("teacher-forced loss", reference=ref.sequence_loss)
@single_threaded
def sequence_loss(ev: Evaluation, answer):
    """answer(logits (B, T, V), tgt_out (B, T), pad_id) -> mean cross-entropy over the real tokens. The last
    batch pads with another id than 0, where 0 is a real token: the loss must use its argument pad_id."""
    tests = 0
    for seed, (lengths, pad_id) in enumerate([([5, 2, 4], PAD_ID), ([3, 3], PAD_ID), ([6, 1, 2, 6], PAD_ID),
                                              ([4, 6, 3], 4)]):
        g = ev.rng(seed)
        tgt_out, _ = _tokens(g, lengths, pad_id=pad_id)
        logits = torch.as_tensor(g.normal(size=(*tgt_out.shape, VOCAB)) * 2, dtype=torch.float32)
        logits.requires_grad_()                                              # the loss must reach them
        loss = call_naming(ev, LOSS_ERRORS, answer, logits, tgt_out.clone(), pad_id)
        expect(isinstance(loss, torch.Tensor), f"return the loss as a torch tensor (for .backward()), "
                                               f"got {type(loss).__name__}.")
        expect(loss.dim() == 0 or loss.numel() == 1, f"the loss should be one number (a scalar "
                                                     f"tensor), got shape {tuple(loss.shape)}: average it.")
        with torch.no_grad():
            expected = ref.sequence_loss(logits, tgt_out, pad_id)
        ev.expect_close(loss.reshape(()), expected, f"the loss (target lengths {lengths}, pad_id = {pad_id})",
                        mistakes=loss_mistakes(logits, tgt_out, pad_id))
        expect(loss.requires_grad, LOSS_NO_GRAD)
        tests += 1
    return tests + _confident_loss(ev, answer)


def _confident_loss(ev, answer):
    """Confident logits (a logit 200 above the others, not on the target): the true loss is about 200 per token,
    and a log of the softmax gives log(0) = -inf. Returns the number of tests (1)."""
    g = ev.rng(20)
    lengths = [4, 2, 3]
    tgt_out, _ = _tokens(g, lengths)
    logits = confident_logits(g, tgt_out, VOCAB).requires_grad_()
    loss = call_naming(ev, LOSS_ERRORS, answer, logits, tgt_out.clone(), PAD_ID)
    with torch.no_grad():
        expected = ref.sequence_loss(logits, tgt_out, PAD_ID)
        log_p = torch.log(torch.softmax(logits, -1)).gather(-1, tgt_out[..., None])[..., 0]
        unstable = -(log_p[tgt_out != PAD_ID]).mean()
    with explained(functools.partial(capped_loss, loss, expected)):
        ev.expect_close(torch.as_tensor(loss).reshape(()), expected, f"the loss on confident logits (a logit 200 "
                        f"above the others, target lengths {lengths})", mistakes={LOG_OF_SOFTMAX: unstable})
    return 1
