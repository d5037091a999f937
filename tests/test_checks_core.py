"""The check framework itself: messages, not-implemented notices, outcomes, IPython display."""
import doctest

import numpy as np
import pytest

from course_utils.checks import core
from course_utils.checks.core import ExerciseError
from tests.checking import prints_not_implemented


@core.exercise("demo")
def demo_check(ev, answer):
    x = ev.rng(0).normal(size=(3, 4))
    ev.expect_close(ev.call(answer, x), x * 2, "demo(x)", mistakes={"you added instead of multiplying": x + 2})
    return 2


@core.exercise("pair", reference=lambda a, b: (a + b, a * b))
def pair_check(ev, answer):
    g = ev.rng(1)
    a, b = g.normal(size=(3,)), g.normal(size=(3, 2))
    total, product = core.expect_returns(ev.call(answer, a[:, None], b), (a[:, None] + b, a[:, None] * b),
                                         ("total", "product"))
    core.expect_close(total, a[:, None] + b, "total")
    core.expect_close(product, a[:, None] * b, "product")


def stub(*args):
    raise NotImplementedError()


def test_pass_prints_one_tick_line_and_returns_nothing(capsys):
    assert demo_check(lambda x: x * 2) is None          # no stray `True` under the ✔ in Jupyter
    assert capsys.readouterr().out == "✔ demo: correct (2 tests).\n"


def test_failure_names_exercise_and_known_mistake():
    with pytest.raises(ExerciseError, match=r"^✘ demo: you added instead of multiplying"):
        demo_check(lambda x: x + 2)


def test_unknown_mistake_reports_largest_difference_in_good_grammar():
    with pytest.raises(ExerciseError, match=r"demo\(x\): wrong values \(largest difference"):
        demo_check(lambda x: x * 2 + np.arange(4))


@pytest.mark.parametrize("answer, symptom", [
    (lambda x: (x * 2).T, "is transposed"),
    (lambda x: -2 * x, "wrong sign"),
    (lambda x: x * 2 / np.sqrt(3.0), r"off by a constant factor: every value is 0\.5774 times"),
    (lambda x: np.roll(x * 2, 1, axis=1), "shifted by one position along axis 1"),
])
def test_mistakes_any_exercise_can_make_are_named_without_being_listed(answer, symptom):
    with pytest.raises(ExerciseError, match=symptom):
        demo_check(answer)


def test_missing_normalisation_is_named():
    w = np.array([[0.2, 0.3, 0.5], [0.1, 0.1, 0.8]])
    with pytest.raises(ExerciseError, match="not normalised"):
        core.expect_close(w * np.array([[2.0], [5.0]]), w, "weights")
    with pytest.raises(ExerciseError, match="divide by the maximum instead of the sum"):
        core.expect_distribution(w / w.max(-1, keepdims=True), "weights")


def test_none_and_shape_messages():
    with pytest.raises(ExerciseError, match="forget to `return`"):
        demo_check(lambda x: None)
    with pytest.raises(ExerciseError, match=r"shape \(3, 5\), expected \(3, 4\)"):
        demo_check(lambda x: np.zeros((3, 5)))


def test_a_wrong_shape_says_what_it_most_often_comes_from():
    from course_utils.checks.expectations import expect_shape
    for got, words in (((3, 5), r"Only axis 1 is wrong \(5, expected 4\): a slice or a range off by one, or a sum"),
                       ((3, 4, 1), r"extra axis of size 1 \(axis 2\): keepdim=True"),
                       ((4,), r"axis of size 1 at position 0 is missing: squeeze\(\) without an axis drops EVERY")):
        expected = (1, 4) if got == (4,) else (3, 4)
        with pytest.raises(ExerciseError, match=words):
            expect_shape(np.zeros(got), expected, "x")
    with pytest.raises(ExerciseError, match=r"expected \(3, 4\)\.$"):     # two axes wrong: nothing to add
        expect_shape(np.zeros((5, 6)), (3, 4), "x")


def test_returns_in_the_wrong_order_are_recognised_by_value_and_by_shape():
    with pytest.raises(ExerciseError, match=r"wrong order: you return \(product, total\); the exercise asks "
                                            r"for `return total, product`"):
        pair_check(lambda a, b: (a * b, a + b))
    with pytest.raises(ExerciseError, match="wrong order"):           # wrong values too: told by the shapes
        core.expect_returns((np.zeros(5), np.zeros(4)), (np.ones(4), np.ones(5)), ("c", "alpha"))
    with pytest.raises(ExerciseError, match=r"return 2 things, as `return total, product` \(got one ndarray\)"):
        pair_check(lambda a, b: a + b)
    with pytest.raises(ExerciseError, match="returned nothing"):
        pair_check(lambda a, b: None)
    pair_check(lambda a, b: (a + b, a * b))


def test_not_implemented_prints_one_line_and_does_not_raise():
    with prints_not_implemented() as out:
        assert demo_check(stub) is None
    assert out.getvalue().startswith("○ demo: not implemented yet.")


def test_evaluate_gives_the_outcome_without_printing(capsys):
    assert demo_check.evaluate(lambda x: x * 2).status == "passed"
    wrong = demo_check.evaluate(lambda x: x + 2)
    assert (wrong.status, wrong.message) == ("wrong", "✘ demo: you added instead of multiplying")
    assert demo_check.evaluate(stub).status == "not implemented"
    assert capsys.readouterr().out == ""
    assert (demo_check.lesson, demo_check.exercise, demo_check.learner_name) == ("tests.test_checks_core",
                                                                                "demo_check", "demo_check")


def test_an_answer_the_check_cannot_use_is_a_wrong_answer_not_a_crash():
    outcome = demo_check.evaluate(lambda x: [1.0, [2.0, 3.0]])
    assert outcome.status == "wrong" and "could not be checked" in outcome.message


def test_passing_a_call_instead_of_a_function():
    with pytest.raises(ExerciseError, match="pass its name without calling it"):
        demo_check(np.zeros(3))


def test_expect_distribution_messages():
    core.expect_distribution(np.full((2, 4), 0.25))
    with pytest.raises(ExerciseError, match="wrong axis"):
        core.expect_distribution(np.full((4, 2), 0.25))
    with pytest.raises(ExerciseError, match="NaN"):
        core.expect_distribution(np.array([np.nan, 1.0]))
    with pytest.raises(ExerciseError, match="negative"):
        core.expect_distribution(np.array([-0.5, 1.5]))


def test_torch_tensors_are_accepted():
    torch = pytest.importorskip("torch")
    core.expect_close(torch.ones(2, requires_grad=True) * 1, np.ones(2), "t")


def test_the_docstring_example_runs_as_written():
    result = doctest.testmod(core, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted >= 4 and result.failed == 0


def test_ipython_shows_a_wrong_answer_as_one_line_and_a_stub_as_a_notice():
    from IPython.testing.globalipapp import start_ipython

    shell = start_ipython()
    shown = []
    shell._showtraceback = lambda etype, value, stb: shown.append(stb)
    result = shell.run_cell("from tests.test_checks_core import demo_check\ndemo_check(lambda x: x + 2)")
    assert not result.success
    assert len(shown) == 1 and len(shown[0]) == 1 and "you added instead of multiplying" in shown[0][0]
    result = shell.run_cell("def stub(x):\n    raise NotImplementedError()\ndemo_check(stub)")
    assert result.success and len(shown) == 1                           # Run All goes on


def test_a_check_leaves_torch_random_state_alone():
    torch = pytest.importorskip("torch")

    @core.exercise("draws")
    def draws(ev, answer):
        torch.manual_seed(123)                          # e.g. to build a layer the same way every time
        ev.expect_close(ev.call(answer, torch.rand(3)), torch.zeros(3), "draws")

    torch.manual_seed(0)
    expected = torch.rand(2)
    torch.manual_seed(0)
    draws(lambda x: x * 0)
    assert torch.equal(torch.rand(2), expected)
