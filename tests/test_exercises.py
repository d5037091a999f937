"""Every exercise of the course, through the check registry: the same rules for all of them.

- each check declares a reference answer, which passes;
- an unfinished answer (it raises NotImplementedError) gets the "not implemented yet" outcome;
- an answer that returns the right values in another order is told so, by the framework;
- the lessons call the checks in the registry's order, on the names the grader will look up.
The per-lesson files (test_checks_lessonNN.py) plant the lesson's typical mistakes.
"""
import inspect
import re
from pathlib import Path

import pytest

from course_utils.checks import exercises

ROOT = Path(__file__).resolve().parents[1]
EXERCISES = exercises()
ALL = [check for checks in EXERCISES.values() for check in checks]
IDS = [f"{c.lesson}-{c.exercise}" for c in ALL]


def _stub_for(reference):
    if inspect.isclass(reference):
        def forward(self, *args, **kwargs):
            raise NotImplementedError()
        return type("Unfinished" + reference.__name__, (reference,), {"forward": forward})

    def stub(*args, **kwargs):
        raise NotImplementedError()
    return stub


@pytest.mark.parametrize("check", ALL, ids=IDS)
def test_reference_passes(check):
    assert check.reference is not None, f"{check.lesson}/{check.exercise}: give @exercise a reference="
    outcome = check.evaluate(check.reference)
    assert outcome.passed, outcome.message


@pytest.mark.parametrize("check", ALL, ids=IDS)
def test_unfinished_answer_is_not_implemented(check):
    outcome = check.evaluate(_stub_for(check.reference))
    assert outcome.status == "not implemented", outcome.message


@pytest.mark.parametrize("check", [c for c in ALL if not inspect.isclass(c.reference)],
                         ids=[i for c, i in zip(ALL, IDS) if not inspect.isclass(c.reference)])
def test_values_returned_in_another_order_are_named(check):
    reversed_any = []

    def reordered(*args, **kwargs):
        result = check.reference(*args, **kwargs)
        if isinstance(result, tuple) and len(result) > 1:
            reversed_any.append(True)
            return result[::-1]
        return result

    outcome = check.evaluate(reordered)
    if reversed_any:
        assert outcome.status == "wrong" and "wrong order" in outcome.message, outcome.message
    else:
        assert outcome.passed, outcome.message


def _calls(notebook):
    import nbformat
    nb = nbformat.read(notebook, as_version=4)
    source = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    return re.findall(r"^check\.(\w+)\((\w+)\)", source, re.M)


@pytest.mark.parametrize("lesson", sorted(EXERCISES))
def test_lessons_call_every_check_in_order_on_the_graded_name(lesson):
    notebook = next((ROOT / "solutions").glob(f"{lesson}_*.ipynb"))
    registered = [(c.exercise, c.learner_name) for c in EXERCISES[lesson]]
    assert _calls(notebook) == registered, (
        f"{notebook.name} calls check.NAME(LEARNER) as {_calls(notebook)}, but the checks are defined as "
        f"{registered}: define the checks in the lesson's order, with name= the learner's function or class")
