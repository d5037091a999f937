"""Lesson 01: every check passes the reference and names the mistakes learners make most (lesson 00:
test_checks_lesson00.py)."""

import numpy as np
import pytest
import torch

from course_utils import numpy_attention as ref
from course_utils.checks import lesson01
from tests.checking import named, not_implemented, prints_not_implemented

pytestmark = pytest.mark.usefixtures("any_seed_offset")   # every test under every seed offset


@pytest.mark.parametrize("check, reference", [
    (lesson01.softmax, ref.softmax),
    (lesson01.bahdanau_context, ref.bahdanau_context),
    (lesson01.single_query_attention, ref.single_query_attention),
    (lesson01.attention, ref.attention),
])
def test_reference_passes_and_stub_is_not_implemented(check, reference, capsys):
    assert check.reference is reference
    assert check(reference) is None
    assert "✔" in capsys.readouterr().out
    with prints_not_implemented():
        check(not_implemented)


def test_checks_are_defined_in_the_lessons_order():
    from course_utils.checks.core import REGISTRY
    assert list(REGISTRY["01"]) == ["softmax", "bahdanau_context", "single_query_attention", "attention"]


# --- softmax ----------------------------------------------------------------------------------
def _e(x):
    return np.exp(x - x.max(axis=-1, keepdims=True))


def test_softmax_mistakes():
    named(lesson01.softmax, lambda x: ref.softmax(x, axis=0), "wrong axis")
    named(lesson01.softmax, lambda x: np.exp(x), "not normalised")
    named(lesson01.softmax, lambda x: _e(x) / _e(x).max(axis=-1, keepdims=True), "maximum instead of the sum")
    named(lesson01.softmax, lambda x: np.exp(x) / np.exp(x).max(axis=-1, keepdims=True),
          "maximum instead of the sum")
    named(lesson01.softmax, lambda x: np.exp(x) / np.exp(x).sum(), "whole array sums to 1")
    named(lesson01.softmax, lambda x: ref.softmax(x - x.max(axis=0)), "maximum over the wrong axis")
    named(lesson01.softmax, lambda x: _e(x) / _e(x).sum(axis=-1), "keepdims=True")
    named(lesson01.softmax, lambda x: np.exp(x - x.max(axis=-1)) / np.exp(x - x.max(axis=-1)).sum(-1, keepdims=True),
          "keepdims=True")
    with np.errstate(over="ignore", invalid="ignore"):
        named(lesson01.softmax, lambda x: np.exp(x) / np.exp(x).sum(axis=-1, keepdims=True), "subtract the maximum")


def test_softmax_on_a_fixed_axis_is_named():
    """axis=1 crashes on a 1-D input (NumPy's AxisError, torch's IndexError): named, not shown as a crash."""
    named(lesson01.softmax, lambda x: ref.softmax(x, axis=1), r"uses axis=1, which an input of shape \(5,\) does "
          r"not have.*axis=-1")
    named(lesson01.softmax, lambda x: torch.softmax(torch.as_tensor(x), dim=1).numpy(), r"uses axis=1.*axis=-1")
    named(lesson01.softmax, lambda x: ref.softmax(x, axis=min(1, x.ndim - 1)), r"over axis 1, not over the last")


def test_softmax_dividing_by_the_maximum_is_named():
    def divided(x):
        e = np.exp(x / x.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    with np.errstate(over="ignore", invalid="ignore"):
        named(lesson01.softmax, divided, "divided by its maximum instead of having it subtracted")


# --- Bahdanau's three steps -------------------------------------------------------------------
def test_bahdanau_context_mistakes():
    def alpha(e):
        return ref.softmax(e)

    named(lesson01.bahdanau_context, lambda e, h: (e @ h, e), "raw scores")
    named(lesson01.bahdanau_context, lambda e, h: ((alpha(e)[:, None] * h).sum(axis=1), alpha(e)), "wrong axis")
    named(lesson01.bahdanau_context, lambda e, h: (alpha(e) @ h, np.exp(e - e.max())), "maximum instead of their sum")
    named(lesson01.bahdanau_context, lambda e, h: (alpha(e) @ h, e / e.sum()), "not by a softmax")
    named(lesson01.bahdanau_context, lambda e, h: (alpha(e)[:, None] * h, alpha(e)), "keeps the positions")
    named(lesson01.bahdanau_context, lambda e, h: (e @ h, alpha(e)), "scores instead of the weights")
    named(lesson01.bahdanau_context, lambda e, h: (h.mean(axis=0), alpha(e)), "ignores the weights")
    named(lesson01.bahdanau_context, lambda e, h: ref.bahdanau_context(e, h)[::-1],
          r"wrong order: you return \(alpha, c\); the exercise asks for `return c, alpha`")
    named(lesson01.bahdanau_context, lambda e, h: ref.bahdanau_context(e, h)[0], "return 2 things")


def test_bahdanau_context_operand_order_and_stability():
    """The first test is square (T == d), so h @ alpha runs and is named; large scores show an unstable softmax."""
    named(lesson01.bahdanau_context, lambda e, h: (h @ ref.softmax(e), ref.softmax(e)), r"c = h @ alpha pairs")
    named(lesson01.bahdanau_context, lambda e, h: ((ref.softmax(e) * h).sum(axis=0), ref.softmax(e)),
          r"LAST axis of h.*alpha\[:, None\] \* h")

    def unstable(e, h):
        alpha = np.exp(e) / np.exp(e).sum()
        return alpha @ h, alpha

    with np.errstate(over="ignore", invalid="ignore"):
        named(lesson01.bahdanau_context, unstable, r"NaN on large scores.*subtract the maximum")


# --- queries, keys, values --------------------------------------------------------------------
def single_query(scale=None, values=lambda w, K, V: w @ V, normalise=True):
    def answer(q, K, V):
        scores = K @ q / (np.sqrt(q.shape[-1]) if scale is None else scale(q, K, V))
        w = ref.softmax(scores) if normalise else scores
        return values(w, K, V), w
    return answer


@pytest.mark.parametrize("scale, words", [
    (lambda q, K, V: 1.0, "missing scale"),
    (lambda q, K, V: q.shape[-1], "divided by d_k instead of sqrt"),
    (lambda q, K, V: 1 / np.sqrt(q.shape[-1]), "multiplied by sqrt"),
    (lambda q, K, V: np.sqrt(V.shape[-1]), r"sqrt\(d_v\), the width of the values"),
    (lambda q, K, V: np.sqrt(K.shape[0]), r"sqrt\(T_k\), the number of keys"),
])
def test_single_query_attention_scale_mistakes(scale, words):
    named(lesson01.single_query_attention, single_query(scale), words)


def test_single_query_attention_mistakes():
    named(lesson01.single_query_attention, single_query(values=lambda w, K, V: w @ K), "VALUES")
    named(lesson01.single_query_attention, single_query(values=lambda w, K, V: w[:, None] * V), "keeps the positions")
    named(lesson01.single_query_attention, single_query(values=lambda w, K, V: V.mean(0)), "ignores the weights")
    named(lesson01.single_query_attention, single_query(normalise=False), "raw scores")
    named(lesson01.single_query_attention, lambda q, K, V: ref.single_query_attention(q, K, V)[0],
          r"return 2 things, as `return z, weights`")
    named(lesson01.single_query_attention, lambda q, K, V: ref.single_query_attention(q, K, V)[::-1], "wrong order")


def test_single_query_attention_transpose_and_late_scale():
    """The first test is square (T_k == d_k), so q @ K runs and is named; a scale after the softmax is named."""
    named(lesson01.single_query_attention, _q_at_K, r"scores are q @ K.*K @ q")

    def keys_transposed_first(q, K, V):
        w = ref.softmax(K.T @ q / np.sqrt(q.shape[-1]))
        return w @ V, w

    named(lesson01.single_query_attention, keys_transposed_first, r"scores are q @ K")
    for c, words in ((np.sqrt, r"divided by sqrt\(d_k\) after the softmax"), (lambda d: d, "divided by d_k after")):
        def late(q, K, V, c=c):
            w = ref.softmax(K @ q) / c(q.shape[-1])
            return w @ V, w
        named(lesson01.single_query_attention, late, words + r".*softmax\(K q / sqrt\(d_k\)\)")


def test_a_saturated_softmax_does_not_hide_the_scale_mistake():
    """Scores are drawn again until each scale mistake has weights of its own: at these offsets the first draw
    saturated the softmax, and a doubled scale looked like a missing one."""
    for offset in (272422, 849066):
        outcome = lesson01.single_query_attention.evaluate(single_query(lambda q, K, V: 1 / np.sqrt(q.shape[-1])),
                                                           seed_offset=offset)
        assert "multiplied by sqrt(d_k)" in outcome.message, outcome.message


def _q_at_K(q, K, V):
    w = ref.softmax(q @ K / np.sqrt(q.shape[-1]))
    return w @ V, w


def matrix(scale=None, axis=-1, scores=lambda Q, K: Q @ K.T, mix=lambda w, K, V: w @ V):
    def answer(Q, K, V):
        s = scores(Q, K) / (np.sqrt(Q.shape[-1]) if scale is None else scale(Q, K, V))
        w = ref.softmax(s, axis=axis)
        return mix(w, K, V), w
    return answer


@pytest.mark.parametrize("scale, words", [
    (lambda Q, K, V: 1.0, "missing scale"),
    (lambda Q, K, V: Q.shape[-1], "divided by d_k instead of sqrt"),
    (lambda Q, K, V: np.sqrt(V.shape[-1]), r"sqrt\(d_v\), the width of the values"),
    (lambda Q, K, V: np.sqrt(K.shape[0]), r"sqrt\(T\), a sequence length"),   # the first test has T_q = T_k
])
def test_attention_scale_mistakes(scale, words):
    named(lesson01.attention, matrix(scale), words)


def test_attention_scale_by_a_length_is_named_when_lengths_differ():
    """Past the first test (T_q = T_k), sqrt(T_k) and sqrt(T_q) get their own names."""
    for scale, words in [(lambda Q, K: np.sqrt(K.shape[0]), r"sqrt\(T_k\), the number of keys"),
                         (lambda Q, K: np.sqrt(Q.shape[0]), r"sqrt\(T_q\), the number of queries")]:
        def answer(Q, K, V, scale=scale):
            d = Q.shape[-1] ** 0.5 if Q.shape[0] == K.shape[0] else scale(Q, K)
            w = ref.softmax(Q @ K.T / d)
            return w @ V, w
        named(lesson01.attention, answer, words)


def test_attention_scale_after_the_softmax_is_named():
    named(lesson01.attention, _late_attention, r"divided by sqrt\(d_k\) after the softmax.*softmax\(Q K\^T / sqrt")


def _late_attention(Q, K, V):
    w = ref.softmax(Q @ K.T) / np.sqrt(Q.shape[-1])
    return w @ V, w


def test_attention_mistakes():
    named(lesson01.attention, matrix(axis=0), "wrong axis")
    named(lesson01.attention, matrix(scores=lambda Q, K: K @ Q.T), "transposed")
    named(lesson01.attention, lambda Q, K, V: tuple(x.T if i else x for i, x in enumerate(ref.attention(Q, K, V))),
          "transposed")
    named(lesson01.attention, matrix(mix=lambda w, K, V: w.T @ V), "transposed weights")
    named(lesson01.attention, matrix(mix=lambda w, K, V: w @ K), "mixes the keys")

    def global_softmax(Q, K, V):
        s = np.exp(Q @ K.T / np.sqrt(Q.shape[-1]))
        w = s / s.sum()
        return w @ V, w

    named(lesson01.attention, global_softmax, "whole matrix sums to 1")
    named(lesson01.attention, lambda Q, K, V: ref.attention(Q, K, V)[::-1], "wrong order")



# --- fresh slips (lesson01i): scaled Bahdanau scores, loops, an unstable softmax in the matrix form ----------
def test_bahdanau_scores_scaled_before_the_softmax_are_named():
    """alpha = softmax(c e) for any constant c: named with c, and the size it is 1/sqrt of when it is one."""
    for scale, words in ((lambda e, h: np.sqrt(h.shape[1]), r"multiplied by a constant \(0.447 = 1/sqrt\(d\)"),
                         (lambda e, h: h.shape[1], r"= 1/d"), (lambda e, h: 0.5, r"multiplied by a constant \(2\)"),
                         (lambda e, h: 3.0, r"scores were scaled before the softmax.*alpha = softmax\(e\)")):
        def scaled(e, h, scale=scale):
            alpha = ref.softmax(e / scale(e, h))
            return alpha @ h, alpha
        named(lesson01.bahdanau_context, scaled, words)


def test_python_loops_in_the_attention_exercises_are_named():
    def keys_loop(q, K, V):
        w = ref.softmax(np.array([q @ k for k in K]) / np.sqrt(q.shape[-1]))
        return w @ V, w

    def keys_range(q, K, V):
        s = np.zeros(len(K))
        for i in range(len(K)):
            s[i] = q @ K[i] / np.sqrt(len(q))
        w = ref.softmax(s)
        return w @ V, w

    def mapped(q, K, V):
        w = ref.softmax(np.array(list(map(lambda k: q @ k, K))) / np.sqrt(len(q)))
        return w @ V, w

    named(lesson01.single_query_attention, keys_loop, r"Python loop \(`for k in K`\).*K @ q / sqrt\(d_k\)")
    named(lesson01.single_query_attention, keys_range, r"Python loop \(`for i in range\(len\(K\)\)`\)")
    named(lesson01.single_query_attention, mapped, r"Python loop \(`map\(...\)`, a loop in disguise\)")

    def queries_loop(Q, K, V):
        rows = [ref.single_query_attention(q, K, V) for q in Q]
        return np.stack([z for z, _ in rows]), np.stack([w for _, w in rows])

    named(lesson01.attention, queries_loop, r"Python loop \(`for q in Q`\).*matrix form.*Q @ K.T / sqrt\(d_k\)")


def test_a_loop_over_the_arguments_is_not_a_loop_over_the_data(capsys):
    def converts(Q, K, V):
        Q, K, V = (np.asarray(a, dtype=np.float64) for a in (Q, K, V))
        return ref.attention(Q, K, V)

    assert lesson01.attention(converts) is None
    assert "✔" in capsys.readouterr().out


def test_attention_softmax_without_the_maximum_is_named_on_large_scores():
    def unstable(Q, K, V):
        s = Q @ K.T / np.sqrt(Q.shape[-1])
        w = np.exp(s) / np.exp(s).sum(axis=-1, keepdims=True)
        return w @ V, w

    with np.errstate(over="ignore", invalid="ignore"):
        named(lesson01.attention, unstable, r"NaN on large scores \(around 1000\).*subtract each row's maximum")
