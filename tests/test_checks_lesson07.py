"""Lesson 07's notebook gives no exercise's answer before its check. (Every check's reference, right answers and
registered mistakes are run by tests/test_exercises.py, from the checks' registries.)"""


def test_the_causal_mask_exercise_does_not_give_its_answer():
    """Exercise 2 describes the mask; neither the learner's notebook (up to the exercise) nor the masks
    diagram writes the code (`~torch.triu(...)`)."""
    import inspect
    import json
    from pathlib import Path

    import diagrams.lesson07

    nb = json.loads((Path(__file__).resolve().parents[1] / "notebooks" / "07_self_attention.ipynb")
                    .read_text(encoding="utf-8"))
    sources = ["".join(c["source"]) for c in nb["cells"]]
    end = next(i for i, s in enumerate(sources) if "check.causal_mask(" in s)
    before = "\n".join(sources[:end + 1])
    for answer in ("triu", "tril"):
        assert answer not in before, f"the learner's notebook names `{answer}` before the causal-mask exercise"
        assert answer not in inspect.getsource(diagrams.lesson07.masks), f"the masks diagram shows `{answer}`"


def test_the_window_exercise_does_not_give_its_answer():
    """The sliding-window exercise says what the mask must be; the learner's notebook, up to its check,
    writes no comparison of positions (`j >= t - left`, `(t - j).abs()`), nor the band with torch.tril /
    torch.triu (its docstring states the rule, t - left <= j <= t + right)."""
    import json
    from pathlib import Path

    nb = json.loads((Path(__file__).resolve().parents[1] / "notebooks" / "07_self_attention.ipynb")
                    .read_text(encoding="utf-8"))
    code = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]
    end = next(i for i, s in enumerate(code) if "check.sliding_window_mask(" in s)
    before = "\n".join(code[:end + 1])
    for answer in (".abs()", ">= t - left", "> t - left", "triu(", "tril("):
        assert answer not in before, f"the learner's notebook writes `{answer}` before the window exercise's check"
