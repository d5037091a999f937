"""Lesson 00: the weighted-sum check passes right answers and names the mistakes learners make most."""
import numpy as np
import pytest

from course_utils import numpy_attention as ref
from course_utils.checks import ExerciseError, lesson00
from tests.checking import named, not_implemented, prints_not_implemented

pytestmark = pytest.mark.usefixtures("any_seed_offset")   # every test under every seed offset
check = lesson00.weighted_sum


def test_reference_and_other_right_answers_pass(capsys):
    assert check.reference is ref.weighted_sum
    for answer in (ref.weighted_sum, lambda w, x: (w[:, None] * x).sum(axis=0), lambda w, x: x.T @ w,
                   lambda w, x: np.einsum("t,td->d", w, x), lambda w, x: np.dot(w, x)):
        assert check(answer) is None
        assert "✔" in capsys.readouterr().out
    with prints_not_implemented():
        check(not_implemented)


def test_weighted_sum_mistakes():
    named(check, lambda w, x: w[:, None] * x, "keeps the sequence axis")
    named(check, lambda w, x: (w[:, None] * x).sum(axis=1), "over the vector's own axis")
    named(check, lambda w, x: x.mean(axis=0), "plain mean")
    named(check, lambda w, x: x.sum(axis=0), "forgot the weights")
    named(check, lambda w, x: (w @ x) / w.sum(), "divided by the sum of the weights")
    named(check, lambda w, x: (w[:, None] * x).mean(axis=0), "divided by T")
    named(check, lambda w, x: (w[:, None] * x).sum(), "a single number")
    named(check, lambda w, x: w[None, :] @ x, r"shape \(1, d\)")


def test_weights_paired_with_the_vectors_own_axis_are_named():
    """The square first test (T == d) lets these run, so they are named by their values, not by their crash."""
    named(check, lambda w, x: x @ w, r"paired with the vector's own axis d.*`weights @ vectors`")
    named(check, lambda w, x: np.dot(x, w), r"paired with the vector's own axis d")
    named(check, lambda w, x: (w * x).sum(axis=1), r"paired with the vector's own axis d")
    named(check, lambda w, x: (w * x).sum(axis=0), r"LAST axis.*weights\[:, None\] \* vectors")
    named(check, lambda w, x: w * x, r"LAST axis.*weights\[:, None\] \* vectors")


def loop_sum(weights, vectors):
    return sum(w_i * x_i for w_i, x_i in zip(weights, vectors))


def loop_from_zeros(weights, vectors):
    z = np.zeros(vectors.shape[1])
    for i in range(len(weights)):
        z = z + weights[i] * vectors[i]
    return z


def loop_while(weights, vectors):
    z, i = np.zeros(vectors.shape[1]), 0
    while i < len(weights):
        z, i = z + weights[i] * vectors[i], i + 1
    return z


def test_python_loops_are_named():
    named(check, loop_sum, r"Python loop \(`for w_i, x_i in zip\(weights, vectors\)`\).*`weights @ vectors`")
    named(check, loop_from_zeros, r"Python loop \(`for i in range\(len\(weights\)\)`\)")
    named(check, loop_while, r"Python loop \(`while i < len\(weights\)`\)")
    named(check, lambda w, x: np.array([wi * xi for wi, xi in zip(w, x)]).sum(axis=0), "Python loop")


def test_a_loop_whose_code_cannot_be_read_is_not_seen():
    """As under the grader, whose proxy of a learner's function has no code to read: same values, so it passes."""
    space = {"np": np}
    exec("def weighted_sum(weights, vectors):\n"
         "    return sum(w_i * x_i for w_i, x_i in zip(weights, vectors))\n", space)
    assert lesson00.python_loop(space["weighted_sum"]) is None
    assert check.evaluate(space["weighted_sum"]).passed


def test_learner_crash_is_reported_with_their_line():
    def crashes(w, x):
        return w @ x.reshape(1, -1)  # shapes do not match

    with pytest.raises(ExerciseError, match="your function raised ValueError") as info:
        check(crashes)
    assert "weighted sum" in str(info.value) and "in your code" in str(info.value)


def test_weights_changed_before_the_sum_are_named():
    """Weights normalised or transformed before `weights @ vectors`: the listed ones by their values, any other
    function of w alone by the weights recovered from two square inputs."""
    def softmax_first(w, x):
        return (np.exp(w) / np.exp(w).sum()) @ x

    named(check, softmax_first, r"softmax before the sum.*use them as they are")
    named(check, lambda w, x: np.exp(w) @ x, r"exp before the sum")
    named(check, lambda w, x: (w / w.max()) @ x, r"divided by their largest value")
    named(check, lambda w, x: (w ** 2) @ x, r"squared before the sum")
    named(check, lambda w, x: w[::-1] @ x, r"reverse order")
    named(check, lambda w, x: (w ** 3) @ x, r"other weights than the given ones \(an increasing function")
    named(check, lambda w, x: np.sqrt(w) @ x, r"other weights than the given ones")
    named(check, lambda w, x: (1 - w) @ x, r"other weights than the given ones.*use them as they are")


def test_a_loop_over_the_arguments_is_not_a_loop_over_the_vectors(capsys):
    def converts(weights, vectors):
        weights, vectors = (np.asarray(a, dtype=np.float64) for a in (weights, vectors))
        return weights @ vectors

    assert check(converts) is None
    assert "✔" in capsys.readouterr().out
