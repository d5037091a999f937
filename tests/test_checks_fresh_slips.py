"""Independent catalogues of learner slips for every lesson (tests/fresh_slips: written from the notebooks' text,
not from the checks): every slip is rejected under every seed offset with a message that names it (never a
bare "wrong values", a NaN notice, a generic order or the learner's own exception), the same family of message
under every offset; every unusual right answer passes."""
import importlib
import importlib.util
from pathlib import Path

import pytest

from tests.fresh_slips.naming import BARE, family

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.usefixtures("any_seed_offset")   # every test under every seed offset

def _catalogue(kind):
    items = []
    for catalogue in sorted(path.stem[len("lesson"):] for path in (ROOT / "tests" / "fresh_slips").glob("lesson*.py")):
        module = importlib.import_module(f"tests.fresh_slips.lesson{catalogue}")
        check = importlib.import_module(f"course_utils.checks.lesson{catalogue[:2]}")
        items += [pytest.param(getattr(check, exercise), fn, id=f"{catalogue}-{exercise}-{name}")
                  for exercise, name, fn in getattr(module, kind)]
    return items


_AT_SEED = {}                                    # (check, answer) -> its message under the notebook's seed


@pytest.mark.parametrize(("check", "answer"), _catalogue("SLIPS"))
def test_a_fresh_slip_is_named_alike_under_every_offset(check, answer, any_seed_offset):
    outcome = check.evaluate(answer)
    assert not outcome.passed, f"accepted: {check.exercise}"
    bare = [words for words in BARE if words in outcome.message]
    assert not bare, f"not named ({bare[0]!r}): {outcome.message}"
    if any_seed_offset:                          # the same family of message as under the notebook's seed
        if (check, answer) not in _AT_SEED:
            _AT_SEED[check, answer] = check.evaluate(answer, seed_offset=0).message
        assert family(outcome.message) == family(_AT_SEED[check, answer])


@pytest.mark.parametrize(("check", "answer"), _catalogue("CORRECT"))
def test_a_fresh_right_answer_passes(check, answer):
    outcome = check.evaluate(answer)
    assert outcome.passed, outcome.message


def test_the_measuring_tool_counts_a_catalogue(tmp_path, capsys):
    """tools/measure_slips.py, on a catalogue of one slip and one right answer, says which is which."""
    spec = importlib.util.spec_from_file_location("measure_slips", ROOT / "tools" / "measure_slips.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    catalogue = tmp_path / "lesson13z.py"
    catalogue.write_text(
        "import torch\n\n\ndef right(m1, l1, m2, l2):\n    m = torch.maximum(m1, m2)\n"
        "    s = torch.where(torch.isneginf(m), 0.0, m)\n"
        "    return m, l1 * torch.exp(m1 - s) + l2 * torch.exp(m2 - s)\n"
        "\n\ndef summed(m1, l1, m2, l2):\n    return torch.maximum(m1, m2), l1 + l2\n\n\n"
        "SLIPS = [('merge_softmax_stats', 'l1 + l2 unscaled', summed)]\n"
        "CORRECT = [('merge_softmax_stats', 'u: where-guarded', right)]\n")
    tool.main([str(catalogue), "--offsets", "2"])
    out = capsys.readouterr().out
    assert "slip  named" in out and "right passes" in out and "textbook: 1 of 1 named" in out, out
