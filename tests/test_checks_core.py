"""The check framework itself: messages, not-implemented handling, IPython display."""
import numpy as np
import pytest

from course_utils.checks import core
from course_utils.checks.core import ExerciseError, ExerciseNotImplemented


@core.exercise("demo")
def demo_check(fn):
    x = core.rng(0).normal(size=(3, 4))
    core.expect_close(core.call(fn, x), x * 2, "demo(x)", mistakes={"you added instead of multiplying": x + 2})
    return 2


def test_pass_prints_one_tick_line(capsys):
    assert demo_check(lambda x: x * 2)
    assert capsys.readouterr().out.strip() == "✔ demo: correct (2 tests)."


def test_failure_names_exercise_and_known_mistake():
    with pytest.raises(ExerciseError, match=r"^✘ demo: you added instead of multiplying"):
        demo_check(lambda x: x + 2)


def test_unknown_mistake_reports_largest_difference():
    with pytest.raises(ExerciseError, match="largest difference"):
        demo_check(lambda x: x * 3)


def test_none_and_shape_messages():
    with pytest.raises(ExerciseError, match="forget to `return`"):
        demo_check(lambda x: None)
    with pytest.raises(ExerciseError, match=r"shape \(4, 3\), expected \(3, 4\)"):
        demo_check(lambda x: (x * 2).T)


def test_not_implemented_is_one_line_without_chained_traceback():
    def stub(x):
        raise NotImplementedError()

    with pytest.raises(ExerciseNotImplemented) as info:
        demo_check(stub)
    assert "\n" not in str(info.value) and "not implemented yet" in str(info.value)
    assert info.value.__cause__ is None and info.value.__suppress_context__


def test_passing_a_call_instead_of_a_function():
    with pytest.raises(ExerciseError, match="pass the name without calling it"):
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


def test_ipython_shows_exercise_errors_as_one_line():
    from IPython.testing.globalipapp import start_ipython

    shell = start_ipython()
    shell.run_cell("from course_utils.checks import core")  # installs the handler in this shell
    core._install_ipython_handler()
    shown = []
    shell._showtraceback = lambda etype, value, stb: shown.append(stb)
    result = shell.run_cell(
        "def stub(x):\n    raise NotImplementedError()\n"
        "from tests.test_checks_core import demo_check\n"
        "demo_check(stub)")
    assert not result.success
    assert len(shown) == 1 and len(shown[0]) == 1 and "not implemented yet" in shown[0][0]
