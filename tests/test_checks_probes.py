"""The framework's guards against the learner's own code (inputs changed in place, a wrong dtype,
exit()) and its probes for mistakes any exercise can make, each on a small check of its own."""
import numpy as np
import pytest

from course_utils.checks import core


def _softmax(x):
    z = np.exp(x - x.max(-1, keepdims=True))
    return z / z.sum(-1, keepdims=True)


@core.exercise("softmax", reference=_softmax)
def softmax_check(ev, answer):
    x = ev.rng(3).normal(size=(4, 6))
    ev.expect_close(ev.call(answer, x), _softmax(x), "softmax(x)")


def _attend(q, k, v):
    return _softmax(q @ k.T / np.sqrt(q.shape[-1])) @ v


@core.exercise("attend", reference=_attend)
def attend_check(ev, answer):
    g = ev.rng(4)
    q, k, v = g.normal(size=(5, 4)), g.normal(size=(5, 4)), g.normal(size=(5, 3))
    ev.expect_close(ev.call(answer, q, k, v), _attend(q, k, v), "attend(q, k, v)")


def _affine(x, w, b):
    return x * w + b


@core.exercise("affine", reference=_affine)
def affine_check(ev, answer):
    g = ev.rng(5)
    x, w, b = g.normal(size=(3, 4)), g.normal(size=(3, 4)), g.normal(size=(3, 4))
    ev.expect_close(ev.call(answer, x, w, b), _affine(x, w, b), "affine(x, w, b)")


@core.exercise("positions", reference=lambda x: np.argsort(-x))
def order_check(ev, answer):
    x = ev.rng(6).permutation(7).astype(float)
    ev.expect_close(ev.call(answer, x), np.argsort(-x).astype(float), "positions")


def message(check, answer):
    outcome = check.evaluate(answer)
    assert outcome.status == "wrong", outcome
    return outcome.message


def test_a_function_that_zeroes_its_input_and_returns_uniform_weights_fails_and_is_named():
    def cheat(x):
        x[...] = 0.0                                  # the expected answer used to be computed from this
        return _softmax(x)
    assert "changed its input `x` in place" in message(softmax_check, cheat)


def test_a_correct_function_that_works_in_place_is_told_so_not_misdiagnosed():
    def in_place(q, k, v):
        q /= np.sqrt(q.shape[-1])                     # the right answer, but q changed for the caller
        return _softmax(q @ k.T) @ v
    text = message(attend_check, in_place)
    assert "changed its input `q` in place" in text and "missing" not in text and "factor" not in text


def test_torch_inputs_changed_in_place_are_named_and_gradients_still_flow():
    torch = pytest.importorskip("torch")

    @core.exercise("power")
    def power_check(ev, answer):
        w = torch.rand(5, requires_grad=True)
        out = ev.call(answer, w, 2.0)
        core.expect_close(out, w.detach() ** 2, "w ** gamma")
        out.sum().backward()
        core.expect(w.grad is not None, "no gradient")

    assert power_check.evaluate(lambda w, gamma: w ** gamma).passed
    assert "changed its input `w` in place" in message(power_check, lambda w, gamma: w.detach().pow_(gamma))


def test_a_wrong_dtype_is_named():
    assert "dtype int64" in message(softmax_check, lambda x: (_softmax(x) * 10).astype(np.int64))
    assert "dtype float16" in message(softmax_check, lambda x: (_softmax(x) + 1e-3).astype(np.float16))


def test_exit_inside_the_learner_function_is_an_answer_not_a_crash():
    def leaves(x):
        raise SystemExit(3)
    assert "called exit()" in message(softmax_check, leaves)


@pytest.mark.parametrize("answer, symptom", [
    (lambda x: np.log(_softmax(x)), "log of the probabilities"),
    (lambda x: x, "scores before the softmax"),
    (lambda x: np.exp(_softmax(x)), "exp of the expected values"),
])
def test_a_neighbouring_function_is_named(answer, symptom):
    assert symptom in message(softmax_check, answer)


def test_roles_swapped_inside_a_formula_are_named():
    text = message(attend_check, lambda q, k, v: _softmax(k @ q.T / np.sqrt(q.shape[-1])) @ v)
    assert "`q` and `k` exchanged" in text


def test_a_forgotten_term_is_named():
    assert "`b` were all zeros" in message(affine_check, lambda x, w, b: x * w)
    assert "`w` were all ones" in message(affine_check, lambda x, w, b: x + b)


def test_results_ordered_the_wrong_way_and_off_by_one_are_named():
    assert "reverse order" in message(order_check, lambda x: np.argsort(x).astype(float))
    assert "off by one" in message(order_check, lambda x: np.argsort(-x).astype(float) + 1)


def test_numpy_warnings_become_one_note_after_the_message(capsys):
    text = message(softmax_check, lambda x: np.exp(x * 1000) / np.exp(x * 1000).sum(-1, keepdims=True))
    assert "warning was raised while checking" in text and capsys.readouterr().err == ""


def test_messages_are_wrapped_between_words():
    text = core.wrap("✘ demo: " + "weights num_heads " * 20)
    assert all(len(line) <= 72 for line in text.splitlines())   # JupyterLab at 1024 px holds ~80
    assert "weights" in text.split() and "num_heads" in text.split() and "weigh" not in text.split()


def test_the_grader_can_draw_inputs_the_notebook_cannot_know():
    seen = []

    def spy(x):
        seen.append(x.copy())
        return _softmax(x)

    assert softmax_check.evaluate(spy).passed and softmax_check.evaluate(spy, seed_offset=12345).passed
    assert softmax_check.evaluate(spy).passed
    assert not np.allclose(seen[0], seen[1]) and np.array_equal(seen[0], seen[2])


def test_two_evaluations_never_see_each_other():
    """A check run inside another (the learner's function checks something itself): the outer check's
    reference probes still use the outer call's inputs, and its offset is its own."""
    inner = []

    def nested(q, k, v):
        inner.append(affine_check.evaluate(_affine, seed_offset=99))   # another evaluation, mid-call
        return _attend(k, q, v)                                       # q and k swapped

    outcome = attend_check.evaluate(nested, seed_offset=3)
    assert inner[0].passed
    assert outcome.status == "wrong" and "`q` and `k` exchanged" in outcome.message, outcome.message


# --- ev.call_measured: the call, and the largest tensor the learner's code created ---------------------------
def test_a_measured_call_returns_the_result_and_the_largest_tensor_the_function_made():
    torch = pytest.importorskip("torch")
    from course_utils.checks import Evaluation

    q, k = torch.randn(2, 40, 8), torch.randn(2, 24, 8)
    ev = Evaluation()
    result, elements, shape = ev.call_measured(lambda q, k: (q @ k.transpose(-2, -1)).sum(-1), q, k)
    assert torch.allclose(result, (q @ k.transpose(-2, -1)).sum(-1)) and (elements, shape) == (2 * 40 * 24, (2, 40, 24))
    big = torch.randn(1, 256, 256)                      # the evaluation's own copy of it is not the function's
    assert ev.call_measured(lambda x: x.sum(-1), big)[1:] == (256, (1, 256))
    assert ev.call_measured(lambda x: x.shape[0], big) == (1, 0, None)    # no tensor made
    assert len(ev.calls) == 3 and ev.calls[1].args[0] is big


def test_a_measured_call_keeps_the_guards_of_a_call():
    """Copies handed over, inputs changed in place noted, the learner's exceptions turned into messages."""
    torch = pytest.importorskip("torch")
    from course_utils.checks import Evaluation, ExerciseError
    from course_utils.checks.evaluation import LearnerNotImplemented

    x = torch.ones(3, 4)
    ev = Evaluation()
    result, elements, _ = ev.call_measured(lambda x: x.mul_(2).sum(), x)     # (mul_ returns its copy of x: 12)
    assert float(result) == 24.0 and torch.equal(x, torch.ones(3, 4)) and ev.modified == ["x"] and elements == 12

    def raises(x):
        raise ValueError("no")

    def unfinished(x):
        raise NotImplementedError()

    with pytest.raises(ExerciseError, match="your function raised ValueError: no"):
        ev.call_measured(raises, x)
    with pytest.raises(LearnerNotImplemented):
        ev.call_measured(unfinished, x)
