"""Lesson 02 checks: the reference passes, planted mistakes are named, a stub is 'not implemented'."""

import pytest
import torch
import torch.nn.functional as F

from course_utils import recurrent as ref
from course_utils.checks import lesson02
from tests.checking import named, not_implemented, prints_not_implemented

pytestmark = pytest.mark.usefixtures("any_seed_offset")   # every test under every seed offset


def encoder_forward(encoder, src, lengths):
    return encoder(src, lengths)


def decoder_step(decoder, y_prev, s_prev):
    return decoder.step(y_prev, s_prev)


@pytest.mark.parametrize("check, reference", [
    (lesson02.encoder_forward, encoder_forward),
    (lesson02.decoder_step, decoder_step),
    (lesson02.sequence_loss, ref.sequence_loss),
])
def test_reference_passes_and_stub_is_not_implemented(check, reference, capsys):
    assert check(reference) is None and check.evaluate(check.reference).passed
    assert "✔" in capsys.readouterr().out
    with prints_not_implemented():
        check(not_implemented)


def test_encoder_gather_solution_passes():
    """Running the GRU over the padding and picking the state at lengths - 1 is also right."""
    def gather(encoder, src, lengths):
        h, _ = encoder.gru(encoder.embedding(src))
        return h, h[torch.arange(len(lengths)), lengths - 1]

    assert lesson02.encoder_forward.evaluate(gather).passed


def test_encoder_mistakes():
    def last_column(encoder, src, lengths):
        h, h_n = encoder.gru(encoder.embedding(src))
        return h, h_n[0]

    def at_lengths(encoder, src, lengths):
        h, _ = encoder.gru(encoder.embedding(src))
        return h, h[torch.arange(len(lengths)), lengths.clamp(max=src.shape[1] - 1)]

    def first_state(encoder, src, lengths):
        h, s = encoder(src, lengths)
        return h, h[:, 0]

    def raw_h_n(encoder, src, lengths):
        h, s = encoder(src, lengths)
        return h, s[None]

    named(lesson02.encoder_forward, last_column, "last column")
    named(lesson02.encoder_forward, at_lengths, "one step past the last real token")
    named(lesson02.encoder_forward, first_state, "FIRST token")
    named(lesson02.encoder_forward, raw_h_n, "extra leading axis")
    named(lesson02.encoder_forward, lambda enc, src, lengths: enc(src, lengths)[1], "return 2 things")
    named(lesson02.encoder_forward, lambda enc, src, lengths: enc(src, lengths)[::-1],
          r"wrong order: you return \(s, h\)")


def test_decoder_step_mistakes():
    def old_state_logits(decoder, y_prev, s_prev):
        _, s = decoder.step(y_prev, s_prev)
        return decoder.out(s_prev), s

    def probabilities(decoder, y_prev, s_prev):
        logits, s = decoder.step(y_prev, s_prev)
        return torch.softmax(logits, -1), s

    def no_update(decoder, y_prev, s_prev):
        logits, _ = decoder.step(y_prev, s_prev)
        return logits, s_prev

    def from_zeros(decoder, y_prev, s_prev):
        _, s = decoder.gru(decoder.embedding(y_prev)[:, None, :])
        return decoder.out(s[0]), s[0]

    def unsqueezed(decoder, y_prev, s_prev):
        out, s = decoder.gru(decoder.embedding(y_prev)[:, None, :], s_prev[None])
        return decoder.out(out), s[0]                      # out is (B, 1, d_hidden)

    def three_d_state(decoder, y_prev, s_prev):
        logits, s = decoder.step(y_prev, s_prev)
        return logits, s[None]

    named(lesson02.decoder_step, old_state_logits, "previous state s_prev")
    named(lesson02.decoder_step, probabilities, "probabilities")
    named(lesson02.decoder_step, no_update, "s is the previous state")
    named(lesson02.decoder_step, from_zeros, "started from zeros")
    named(lesson02.decoder_step, unsqueezed, "extra axis of length 1")
    named(lesson02.decoder_step, three_d_state, r"extra leading axis .*s\[0\]")
    named(lesson02.decoder_step, lambda *a: decoder_step(*a)[::-1], r"wrong order: you return \(s, logits\)")


def test_sequence_loss_mistakes():
    def flat(logits, tgt):
        return logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1)

    def with_padding(logits, tgt, pad_id):
        return F.cross_entropy(*flat(logits, tgt))

    def summed(logits, tgt, pad_id):
        return F.cross_entropy(*flat(logits, tgt), ignore_index=pad_id, reduction="sum")

    def per_sequence(logits, tgt, pad_id):
        loss = F.cross_entropy(logits.transpose(1, 2), tgt, ignore_index=pad_id, reduction="none")
        real = (tgt != pad_id).float()
        return ((loss * real).sum(1) / real.sum(1)).mean()

    def masked_mean(logits, tgt, pad_id):
        loss = F.cross_entropy(logits.transpose(1, 2), tgt, reduction="none")
        return (loss * (tgt != pad_id)).mean()

    def softmax_first(logits, tgt, pad_id):
        return F.cross_entropy(*flat(torch.softmax(logits, -1), tgt), ignore_index=pad_id)

    named(lesson02.sequence_loss, with_padding, "padding positions count")
    named(lesson02.sequence_loss, summed, "is a sum")
    named(lesson02.sequence_loss, per_sequence, "averages each sequence first")
    named(lesson02.sequence_loss, masked_mean, "divided by every position, padding included")
    named(lesson02.sequence_loss, softmax_first, "softmax before F.cross_entropy")
    named(lesson02.sequence_loss, lambda logits, tgt, pad_id: F.cross_entropy(
        logits.transpose(1, 2), tgt, ignore_index=pad_id, reduction="none"), "one number")
