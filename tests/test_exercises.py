"""Every exercise of the course, through the check registry: the same rules for all of them, and every mistake
registered for it (mistakes.py: a mistake is data, written once).

- each check declares a reference answer, which passes, and right answers written other ways, which pass;
- every registered mistake's wrong answer (`shows`) is rejected under the mistake's KEY (never asserted by its
  prose), its words are filled in, and its code-level hint is not already in its words;
- a check that draws random inputs runs under two seed offsets (the grader moves them by one the notebook cannot
  know), one that draws none under one, and each check says truly which it is (`@exercise(random=...)`);
- an unfinished answer (it raises NotImplementedError) gets the "not implemented yet" outcome;
- an answer that returns the right values in another order is told so, by the framework;
- the lessons call the checks in the registry's order, on the names the grader will look up.
The catalogues of learners' slips (tests/fresh_slips) are measured by `python tools/measure_slips.py --all`.
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
# Two offsets, for the checks that draw random inputs: the notebook's (0), and one far from it, so that a mistake
# that coincides with the right answer on one draw is still named on the other.
OFFSETS = (0, 40_009)


def _offsets(check):
    return OFFSETS if check.random else (0,)


def _runs_here(check):
    """Skip a check that cannot run on this machine (lesson 13's Triton kernel without Triton: it says so in the
    notebook, and CI installs Triton)."""
    ok, why = getattr(check, "runs_here", lambda: (True, ""))()
    if not ok:
        pytest.skip(why)


def _cases(items):
    """pytest params (check, item, offset) for each item of each check, under the check's offsets."""
    return [pytest.param(check, item, offset, id=f"{check.lesson}-{check.exercise}-{name}-offset{offset}")
            for check in ALL for name, item in items(check) for offset in _offsets(check)]


def _right(check):
    return [(f"right{i}", answer) for i, answer in enumerate(check.right)]


def _mistakes(check):
    return [(mistake.key, mistake) for mistake in check.mistakes]


def _stub_for(reference):
    if inspect.isclass(reference):
        def forward(self, *args, **kwargs):
            raise NotImplementedError()
        return type("Unfinished" + reference.__name__, (reference,), {"forward": forward})

    def stub(*args, **kwargs):
        raise NotImplementedError()
    return stub


@pytest.mark.parametrize("check", ALL, ids=IDS)
def test_reference_passes_and_the_check_says_truly_whether_it_draws_random_inputs(check):
    _runs_here(check)
    assert check.reference is not None, f"{check.lesson}/{check.exercise}: give @exercise a reference="
    for offset in _offsets(check):
        outcome, ev = check.evaluation(check.reference, offset)
        assert outcome.passed, outcome.message
        assert ev.drew == check.random, (f"{check.lesson}/{check.exercise} {'draws' if ev.drew else 'draws no'} "
                                         f"random inputs: declare @exercise(random={ev.drew})")


@pytest.mark.parametrize(("check", "answer", "offset"), _cases(_right))
def test_a_right_answer_written_another_way_passes(check, answer, offset):
    _runs_here(check)
    outcome = check.evaluate(answer, seed_offset=offset)
    assert outcome.passed, outcome.message


@pytest.mark.parametrize(("check", "mistake", "offset"), _cases(_mistakes))
def test_a_registered_mistake_is_named_by_its_key(check, mistake, offset):
    _runs_here(check)
    assert mistake.shows is not None, f"{mistake.key}: give the mistake the wrong answer that shows it (shows=)"
    outcome = check.evaluate(mistake.shows, seed_offset=offset)
    assert outcome.status == "wrong", f"{mistake.key} passed (or is not implemented): {outcome.message}"
    assert outcome.key == mistake.key, f"expected the key {mistake.key!r}, got {outcome.key!r}: {outcome.message}"
    assert "{" not in outcome.message.replace("{...}", ""), f"words with a field not filled in: {outcome.message}"
    assert not outcome.hint or outcome.hint not in outcome.message, f"the hint is in the first message: {outcome.hint}"


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
