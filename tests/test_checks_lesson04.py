"""Lesson 04 checks: the reference passes, planted mistakes are named, a stub is 'not implemented'."""
import math

import pytest
import torch

from course_utils import scores as ref
from course_utils.checks import ExerciseError, lesson04
from tests.checking import prints_not_implemented


def not_implemented(*args):
    raise NotImplementedError()


def additive_split(s, h, W_a, v_a):
    d_s = s.shape[-1]
    return torch.tanh((s @ W_a[:, :d_s].T)[:, None] + h @ W_a[:, d_s:].T) @ v_a


@pytest.mark.parametrize("check, reference", [
    (lesson04.cosine_score, ref.cosine_score),
    (lesson04.additive_score, ref.additive_score),
    (lesson04.additive_score, additive_split),
    (lesson04.location_score, ref.location_score),
    (lesson04.general_score, ref.general_score),
    (lesson04.dot_score, ref.dot_score),
    (lesson04.scaled_dot_score, ref.scaled_dot_score),
])
def test_reference_passes_and_stub_is_not_implemented(check, reference, capsys):
    assert check(reference) is None
    assert "✔" in capsys.readouterr().out
    with prints_not_implemented():
        check(not_implemented)


def dot(s, h):
    return torch.einsum("bd,btd->bt", s, h)


def test_cosine_mistakes():
    with pytest.raises(ExerciseError, match="plain dot products"):
        lesson04.cosine_score(lambda s, h, beta: beta * dot(s, h))
    with pytest.raises(ExerciseError, match="only h_i is normalised"):
        lesson04.cosine_score(lambda s, h, beta: beta * dot(s, h) / h.norm(dim=-1))
    with pytest.raises(ExerciseError, match="beta is missing"):
        lesson04.cosine_score(lambda s, h, beta: ref.cosine_score(s, h))


def test_additive_mistakes():
    def swapped(s, h, W_a, v_a):
        d_h = h.shape[-1]
        return torch.tanh((s @ W_a[:, d_h:].T)[:, None] + h @ W_a[:, :d_h].T) @ v_a

    def no_tanh(s, h, W_a, v_a):
        d_s = s.shape[-1]
        return ((s @ W_a[:, :d_s].T)[:, None] + h @ W_a[:, d_s:].T) @ v_a

    with pytest.raises(ExerciseError, match="blocks of W_a are swapped"):
        lesson04.additive_score(swapped)
    with pytest.raises(ExerciseError, match="tanh is missing"):
        lesson04.additive_score(no_tanh)


def test_location_mistakes():
    with pytest.raises(ExerciseError, match="returned weights"):
        lesson04.location_score(lambda s, W, T: torch.softmax((s @ W.T)[:, :T], -1))
    with pytest.raises(ExerciseError, match="all max_len positions"):
        lesson04.location_score(lambda s, W, T: s @ W.T)
    with pytest.raises(ExerciseError, match="LAST T entries"):
        lesson04.location_score(lambda s, W, T: (s @ W.T)[:, -T:])


def test_general_mistakes():
    with pytest.raises(ExerciseError, match="transposed"):
        lesson04.general_score(lambda s, h, W: ref.general_score(s, h, W.T))
    with pytest.raises(ExerciseError, match="W_a is missing"):
        lesson04.general_score(lambda s, h, W: dot(s, h))


def test_dot_mistakes():
    with pytest.raises(ExerciseError, match="scaled by 1/sqrt"):
        lesson04.dot_score(lambda s, h: dot(s, h) / math.sqrt(s.shape[-1]))
    with pytest.raises(ExerciseError, match="cosine"):
        lesson04.dot_score(lambda s, h: ref.cosine_score(s, h))
    with pytest.raises(ExerciseError, match="not summed"):
        lesson04.dot_score(lambda s, h: s[:, None, :] * h)


def test_scaled_dot_mistakes():
    with pytest.raises(ExerciseError, match="not scaled"):
        lesson04.scaled_dot_score(dot)
    with pytest.raises(ExerciseError, match="divided by d:"):
        lesson04.scaled_dot_score(lambda s, h: dot(s, h) / s.shape[-1])
    with pytest.raises(ExerciseError, match="sqrt\\(T\\)"):
        lesson04.scaled_dot_score(lambda s, h: dot(s, h) / math.sqrt(h.shape[1]))
