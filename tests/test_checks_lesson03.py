"""Lesson 03 checks: the reference passes, planted mistakes are named, a stub is 'not implemented'."""
import pytest
import torch

from course_utils import scores as ref
from course_utils.checks import ExerciseError, lesson03
from tests.checking import prints_not_implemented


def not_implemented(*args):
    raise NotImplementedError()


def attention_decoder_step(decoder, y_prev, s_prev, h, mask):
    return decoder.step(y_prev, s_prev, h, mask)


@pytest.mark.parametrize("check, reference", [
    (lesson03.additive_score, ref.additive_score),
    (lesson03.masked_softmax, ref.masked_softmax),
    (lesson03.context_vector, ref.context_vector),
    (lesson03.attention_decoder_step, attention_decoder_step),
])
def test_reference_passes_and_stub_is_not_implemented(check, reference, capsys):
    assert check(reference) is None
    assert "✔" in capsys.readouterr().out
    with prints_not_implemented():
        check(not_implemented)


def _concat(s, h):
    return torch.cat([s[:, None, :].expand(-1, h.shape[1], -1), h], -1)


def test_additive_score_mistakes():
    with pytest.raises(ExerciseError, match="tanh is missing"):
        lesson03.additive_score(lambda s, h, W, v: _concat(s, h) @ W.T @ v)
    with pytest.raises(ExerciseError, match="tanh is applied after"):
        lesson03.additive_score(lambda s, h, W, v: torch.tanh(_concat(s, h) @ W.T @ v))
    with pytest.raises(ExerciseError, match="wrong order"):
        lesson03.additive_score(lambda s, h, W, v: torch.tanh(
            torch.cat([h, s[:, None, :].expand(-1, h.shape[1], -1)], -1) @ W.T) @ v)


def test_masked_softmax_mistakes():
    with pytest.raises(ExerciseError, match="mask is ignored"):
        lesson03.masked_softmax(lambda e, m: torch.softmax(e, -1))
    with pytest.raises(ExerciseError, match="mask is inverted"):
        lesson03.masked_softmax(lambda e, m: ref.masked_softmax(e, ~m))
    with pytest.raises(ExerciseError, match="gives NaN"):
        lesson03.masked_softmax(lambda e, m: torch.softmax(e.masked_fill(~m, float("-inf")), -1))
    with pytest.raises(ExerciseError, match="uniform weights"):
        lesson03.masked_softmax(lambda e, m: torch.softmax(e.masked_fill(~m, -1e9), -1))
    with pytest.raises(ExerciseError, match="without renormalising"):
        lesson03.masked_softmax(lambda e, m: torch.softmax(e, -1) * m)


def test_context_vector_mistakes():
    with pytest.raises(ExerciseError, match="ignores the weights"):
        lesson03.context_vector(lambda w, h: h.mean(1))
    with pytest.raises(ExerciseError, match="feature axis"):
        lesson03.context_vector(lambda w, h: (w[..., None] * h).sum(-1))
    with pytest.raises(ExerciseError, match="keeps the source axis"):
        lesson03.context_vector(lambda w, h: w[..., None] * h)
    with pytest.raises(ExerciseError, match="mean of"):
        lesson03.context_vector(lambda w, h: (w[..., None] * h).mean(1))


def test_attention_decoder_step_mistakes():
    def no_mask(decoder, y_prev, s_prev, h, mask):
        return decoder.step(y_prev, s_prev, h, torch.ones_like(mask))

    def swapped_input(decoder, y_prev, s_prev, h, mask):
        c, alpha = decoder.attention(s_prev, h, mask)
        s = decoder.gru(torch.cat([c, decoder.embedding(y_prev)], -1), s_prev)
        return decoder.out(torch.cat([s, c], -1)), s, alpha

    def old_state_logits(decoder, y_prev, s_prev, h, mask):
        c, alpha = decoder.attention(s_prev, h, mask)
        s = decoder.gru(torch.cat([decoder.embedding(y_prev), c], -1), s_prev)
        return decoder.out(torch.cat([s_prev, c], -1)), s, alpha

    with pytest.raises(ExerciseError, match="weight to padding"):
        lesson03.attention_decoder_step(no_mask)
    with pytest.raises(ExerciseError, match="GRU input"):
        lesson03.attention_decoder_step(swapped_input)
    with pytest.raises(ExerciseError, match="previous state"):
        lesson03.attention_decoder_step(old_state_logits)
    with pytest.raises(ExerciseError, match="three things"):
        lesson03.attention_decoder_step(lambda *a: attention_decoder_step(*a)[:2])
