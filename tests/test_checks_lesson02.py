"""Lesson 02 checks: the reference passes, planted mistakes are named, a stub is 'not implemented'."""
import pytest
import torch
import torch.nn.functional as F

from course_utils import recurrent as ref
from course_utils.checks import ExerciseError, lesson02
from tests.checking import prints_not_implemented


def not_implemented(*args):
    raise NotImplementedError()


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
    assert check(reference) is None
    assert "✔" in capsys.readouterr().out
    with prints_not_implemented():
        check(not_implemented)


def test_encoder_gather_solution_passes():
    """Running the GRU over the padding and picking the state at lengths - 1 is also right."""
    def gather(encoder, src, lengths):
        h, _ = encoder.gru(encoder.embedding(src))
        return h, h[torch.arange(len(lengths)), lengths - 1]

    lesson02.encoder_forward(gather)
def test_encoder_mistakes():
    def last_column(encoder, src, lengths):
        h, h_n = encoder.gru(encoder.embedding(src))
        return h, h_n[0]

    def first_state(encoder, src, lengths):
        h, s = encoder(src, lengths)
        return h, h[:, 0]

    def raw_h_n(encoder, src, lengths):
        h, s = encoder(src, lengths)
        return h, s[None]

    with pytest.raises(ExerciseError, match="last column"):
        lesson02.encoder_forward(last_column)
    with pytest.raises(ExerciseError, match="FIRST token"):
        lesson02.encoder_forward(first_state)
    with pytest.raises(ExerciseError, match="extra leading axis"):
        lesson02.encoder_forward(raw_h_n)
    with pytest.raises(ExerciseError, match="return two things"):
        lesson02.encoder_forward(lambda enc, src, lengths: enc(src, lengths)[1])


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

    with pytest.raises(ExerciseError, match="previous state s_prev"):
        lesson02.decoder_step(old_state_logits)
    with pytest.raises(ExerciseError, match="probabilities"):
        lesson02.decoder_step(probabilities)
    with pytest.raises(ExerciseError, match="s is the previous state"):
        lesson02.decoder_step(no_update)


def test_sequence_loss_mistakes():
    def with_padding(logits, tgt, pad_id):
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1))

    def summed(logits, tgt, pad_id):
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1),
                               ignore_index=pad_id, reduction="sum")

    def per_sequence(logits, tgt, pad_id):
        loss = F.cross_entropy(logits.transpose(1, 2), tgt, ignore_index=pad_id, reduction="none")
        real = (tgt != pad_id).float()
        return ((loss * real).sum(1) / real.sum(1)).mean()

    with pytest.raises(ExerciseError, match="padding positions count"):
        lesson02.sequence_loss(with_padding)
    with pytest.raises(ExerciseError, match="is a sum"):
        lesson02.sequence_loss(summed)
    with pytest.raises(ExerciseError, match="averages each sequence first"):
        lesson02.sequence_loss(per_sequence)
    with pytest.raises(ExerciseError, match="one number"):
        lesson02.sequence_loss(lambda logits, tgt, pad_id: F.cross_entropy(
            logits.transpose(1, 2), tgt, ignore_index=pad_id, reduction="none"))
