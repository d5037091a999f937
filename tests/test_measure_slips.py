"""The measure of the catalogues of learners' slips (tools/measure_slips.py): it tells a named slip from an accepted
one and a right answer from a rejected one, and docs/development.md shows the table of the recorded sweep."""
import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _tool():
    spec = importlib.util.spec_from_file_location("measure_slips", ROOT / "tools" / "measure_slips.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    return tool


def test_the_measuring_tool_counts_a_catalogue(tmp_path, capsys):
    """On a catalogue of one slip and one right answer, it says which is which, and by which key."""
    catalogue = tmp_path / "lesson13z.py"
    catalogue.write_text(
        "import torch\n\n\ndef right(m1, l1, m2, l2):\n    m = torch.maximum(m1, m2)\n"
        "    s = torch.where(torch.isneginf(m), 0.0, m)\n"
        "    return m, l1 * torch.exp(m1 - s) + l2 * torch.exp(m2 - s)\n"
        "\n\ndef summed(m1, l1, m2, l2):\n    return torch.maximum(m1, m2), l1 + l2\n\n\n"
        "SLIPS = [('merge_softmax_stats', 'l1 + l2 unscaled', summed)]\n"
        "CORRECT = [('merge_softmax_stats', 'u: where-guarded', right)]\n")
    assert _tool().main([str(catalogue), "--offsets", "2", "--jobs", "1"]) == 0
    out = capsys.readouterr().out
    assert "slip  named" in out and "right passes" in out and "textbook: 1 of 1 named" in out, out


def test_the_docs_show_the_recorded_sweep():
    record = json.loads((ROOT / "tests" / "fresh_slips" / "sweep.json").read_text())
    tool = _tool()
    table = tool.table({lesson: counts for lesson, counts in record["lessons"].items()})
    assert table in (ROOT / "docs" / "development.md").read_text(encoding="utf-8"), (
        "docs/development.md does not show the recorded sweep: paste `python tools/measure_slips.py --markdown`")


def test_every_recorded_key_is_registered():
    """The catalogues read the same registry: every key a slip was named by is its exercise's, or the framework's."""
    from course_utils.checks import exercises
    from course_utils.checks.mistakes import GENERIC

    record = json.loads((ROOT / "tests" / "fresh_slips" / "sweep.json").read_text())
    checks = {(c.lesson, c.exercise): c for checks in exercises().values() for c in checks}
    unknown = []
    for name, key in record["keys"].items():
        catalogue, kind, exercise, _ = name.split("/", 3)
        if kind != "slip" or key in ("accepted", "bare", "inconsistent") or key.startswith("words: "):
            continue
        registry = checks[catalogue[len("lesson"):len("lesson") + 2], exercise].mistakes
        if key not in registry and key not in GENERIC:
            unknown.append(f"{name}: {key}")
    assert not unknown, f"keys no registry holds: {unknown[:5]}"
