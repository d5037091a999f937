"""Lesson 08's notebook checks split_heads and merge_heads on their own. (Every check's reference, right answers and
registered mistakes are run by tests/test_exercises.py, from the checks' registries.)"""
import json
from pathlib import Path

from course_utils import attention as ref
from course_utils.checks import ExerciseError, lesson08


def test_merge_heads_is_checked_on_its_own(capsys):
    """In the lesson, split_heads and merge_heads have a cell and a check each, and the merge_heads check
    never uses the learner's split_heads: with split_heads wrong, merge_heads still gets its verdict."""
    nb = json.loads((Path(__file__).resolve().parents[1] / "notebooks" / "08_multihead_positional.ipynb")
                    .read_text(encoding="utf-8"))
    code = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]
    split_check = next(s for s in code if "check.split_heads(" in s)
    merge_check = next(s for s in code if "check.merge_heads(" in s)
    assert split_check != merge_check, "split_heads and merge_heads must be checked in separate cells"
    assert not any("def split_heads" in s and "def merge_heads" in s for s in code), \
        "split_heads and merge_heads must be written in separate cells"
    namespace = {"check": lesson08, "split_heads": lesson08.split_heads.mistakes.cut_across_positions.shows,
                 "merge_heads": ref.merge_heads}               # a wrong split_heads, a right merge_heads
    try:
        exec(split_check, namespace)
    except ExerciseError as error:
        assert error.key == "cut_across_positions", str(error)
    else:
        raise AssertionError("the wrong split_heads passed")
    capsys.readouterr()
    exec(merge_check, namespace)
    assert "✔" in capsys.readouterr().out
