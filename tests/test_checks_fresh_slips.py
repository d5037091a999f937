"""An independent catalogue of learner slips for lessons 11-13 (tests/fresh_slips: written from the notebooks'
text, not from the checks): every slip is rejected under every seed offset with a message that names it (never a
bare "wrong values", a NaN notice, a generic order or the learner's own exception), the same family of message
under every offset; every unusual right answer passes."""
import importlib
import re

import pytest

pytestmark = pytest.mark.usefixtures("any_seed_offset")   # every test under every seed offset

BARE = ("wrong values (largest difference", "contains NaN or inf where", "could not be checked",
        "your function raised", "in the wrong order along axis", "Traceback")


def _catalogue(kind):
    items = []
    for catalogue in (f"{lesson}{letter}" for letter in ("", "b", "c", "d", "e", "f", "g") for lesson in (11, 12, 13)):
        module = importlib.import_module(f"tests.fresh_slips.lesson{catalogue}")
        check = importlib.import_module(f"course_utils.checks.lesson{catalogue[:2]}")
        items += [pytest.param(getattr(check, exercise), fn, id=f"{catalogue}-{exercise}-{name}")
                  for exercise, name, fn in getattr(module, kind)]
    return items


_AT_SEED = {}                                    # (check, answer) -> its message under the notebook's seed


def _family(message):
    """The message without its numbers and asides in parentheses (which say more under some offsets)."""
    message = re.sub(r"\s*\([^()]*\)", "", message)
    return re.sub(r"[-+]?\d+(\.\d+)?(e[-+]?\d+)?", "#", message)[:120]


@pytest.mark.parametrize(("check", "answer"), _catalogue("SLIPS"))
def test_a_fresh_slip_is_named_alike_under_every_offset(check, answer, any_seed_offset):
    outcome = check.evaluate(answer)
    assert not outcome.passed, f"accepted: {check.exercise}"
    bare = [words for words in BARE if words in outcome.message]
    assert not bare, f"not named ({bare[0]!r}): {outcome.message}"
    if any_seed_offset:                          # the same family of message as under the notebook's seed
        if (check, answer) not in _AT_SEED:
            _AT_SEED[check, answer] = check.evaluate(answer, seed_offset=0).message
        assert _family(outcome.message) == _family(_AT_SEED[check, answer])


@pytest.mark.parametrize(("check", "answer"), _catalogue("CORRECT"))
def test_a_fresh_right_answer_passes(check, answer):
    outcome = check.evaluate(answer)
    assert outcome.passed, outcome.message
