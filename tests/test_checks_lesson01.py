"""Lessons 00–01: every check passes the reference and names typical mistakes."""
import numpy as np
import pytest

from course_utils import numpy_attention as ref
from course_utils.checks import ExerciseError, lesson00, lesson01
from tests.checking import prints_not_implemented


def not_implemented(*args):
    raise NotImplementedError()


@pytest.mark.parametrize("check, reference", [
    (lesson00.weighted_sum, ref.weighted_sum),
    (lesson01.softmax, ref.softmax),
    (lesson01.single_query_attention, ref.single_query_attention),
    (lesson01.attention, ref.attention),
    (lesson01.bahdanau_context, ref.bahdanau_context),
])
def test_reference_passes_and_stub_is_not_implemented(check, reference, capsys):
    assert check(reference) is None
    assert "✔" in capsys.readouterr().out
    with prints_not_implemented():
        check(not_implemented)


def test_weighted_sum_mistakes():
    with pytest.raises(ExerciseError, match="keeps the sequence axis"):
        lesson00.weighted_sum(lambda w, x: w[:, None] * x)
    with pytest.raises(ExerciseError, match="over the vector's own axis"):
        lesson00.weighted_sum(lambda w, x: (w[:, None] * x).sum(axis=1))
    with pytest.raises(ExerciseError, match="plain mean"):
        lesson00.weighted_sum(lambda w, x: x.mean(axis=0))


def test_softmax_mistakes():
    with pytest.raises(ExerciseError, match="wrong axis"):
        lesson01.softmax(lambda x: ref.softmax(x, axis=0))
    with pytest.raises(ExerciseError, match="subtract the maximum"):
        lesson01.softmax(lambda x: np.exp(x) / np.exp(x).sum(axis=-1, keepdims=True))
    with pytest.raises(ExerciseError, match="not normalised"):
        lesson01.softmax(lambda x: np.exp(x))


def test_single_query_attention_mistakes():
    def unscaled(q, K, V):
        w = ref.softmax(K @ q)
        return w @ V, w

    def values_from_keys(q, K, V):
        w = ref.softmax(K @ q / np.sqrt(q.shape[-1]))
        return w @ K, w

    with pytest.raises(ExerciseError, match="sqrt\\(d_k\\)"):
        lesson01.single_query_attention(unscaled)
    with pytest.raises(ExerciseError, match="VALUES"):
        lesson01.single_query_attention(values_from_keys)
    with pytest.raises(ExerciseError, match="return two things"):
        lesson01.single_query_attention(lambda q, K, V: ref.single_query_attention(q, K, V)[0])


def test_attention_mistakes():
    def wrong_axis(Q, K, V):
        w = ref.softmax(Q @ K.T / np.sqrt(Q.shape[-1]), axis=0)
        return w @ V, w

    def no_scale(Q, K, V):
        w = ref.softmax(Q @ K.T)
        return w @ V, w

    def transposed(Q, K, V):
        w = ref.softmax(K @ Q.T / np.sqrt(Q.shape[-1]))
        return w @ V, w

    with pytest.raises(ExerciseError, match="wrong axis"):
        lesson01.attention(wrong_axis)
    with pytest.raises(ExerciseError, match="missing scale"):
        lesson01.attention(no_scale)
    with pytest.raises(ExerciseError, match="transposed|shape"):
        lesson01.attention(transposed)


def test_bahdanau_context_mistakes():
    with pytest.raises(ExerciseError, match="raw scores"):
        lesson01.bahdanau_context(lambda e, h: (e @ h, e))
    with pytest.raises(ExerciseError, match="wrong axis"):
        lesson01.bahdanau_context(lambda e, h: ((ref.softmax(e)[:, None] * h).sum(axis=1), ref.softmax(e)))


def test_learner_crash_is_reported_with_their_line():
    def crashes(w, x):
        return w @ x.T  # shapes do not match

    with pytest.raises(ExerciseError, match="your function raised ValueError") as info:
        lesson00.weighted_sum(crashes)
    assert "weighted sum" in str(info.value) and "in your code" in str(info.value)
