"""What a newcomer without Multi30k meets: Run All of lessons 10, 12, 14, 15 and 16, offline, with COURSE_DATA_DIR
pointing to an empty folder, reaches the last cell. The first cell that needs the data says once, on one line, what is
missing (all six files) and where to read how to provide them (docs/data.md); no cell fails; every open exercise's
check runs (its "not implemented yet" notice); the sections that would show this notebook's run show the course's
reference run (lesson 10: curves, translations, attention maps, the report; lesson 12: the GPT's learning curve, the
sampling figure, the cache's timing, the position table, the widget's prompts; lesson 14: the trained GPT's heads and
sinks, its sliding-window scores, the translator's counterfactual attention)."""
import os
import re
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
LESSON = ROOT / "notebooks" / "10_translation_multi30k.ipynb"
FILES = ("train.de.gz", "train.en.gz", "val.de.gz", "val.en.gz", "test_2016_flickr.de.gz", "test_2016_flickr.en.gz")


def _text(cell):
    return "".join(o.get("text", "") for o in cell.get("outputs", []) if o.get("output_type") == "stream")


def _run_all_without_data(path, tmp_path, monkeypatch):
    """Run All of the learner notebook `path` offline, COURSE_DATA_DIR an empty folder: its code cells, run."""
    from nbclient.exceptions import CellExecutionError

    from course_utils.notebook_client import SteadyNotebookClient as NotebookClient

    (tmp_path / "data").mkdir()
    monkeypatch.setenv("COURSE_DATA_DIR", str(tmp_path / "data"))     # an empty copy: never a download
    monkeypatch.setenv("COURSE_CACHE_DIR", str(tmp_path / "cache"))
    for proxy in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY"):
        monkeypatch.setenv(proxy, "http://127.0.0.1:9")                # and no network, should one be tried
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")   # the pictures, as a learner sees
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}})
    try:
        client.execute()
    except CellExecutionError as error:
        pytest.fail(f"without Multi30k, Run All of {path.name} stops at a cell that fails:\n{str(error)[-1500:]}")
    return [c for c in nb.cells if c.cell_type == "code"]


def test_lesson_10_runs_to_the_end_without_multi30k(tmp_path, monkeypatch):
    code = _run_all_without_data(LESSON, tmp_path, monkeypatch)
    assert code[-1].get("execution_count"), "Run All did not reach the last cell"
    errors = [o for c in code for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors, errors
    said = [t for t in map(_text, code) if "Multi30k is not available" in t]
    assert len(said) == 1, f"the missing data is said {len(said)} times, not once: {said}"
    line = said[0].strip()
    assert "\n" not in line, f"the message is not one line: {line!r}"
    assert "docs/data.md" in line and all(name in line for name in FILES) and "COURSE_DATA_DIR" in line, line
    assert "Traceback" not in "".join(map(_text, code))
    shown = "".join(map(_text, code))
    assert "Without Multi30k, the full run of the cpu preset" in shown
    assert "the course's reference run of the cpu preset" in shown and "test BLEU" in shown
    reference = [c for c in code if "Without Multi30k" in _text(c)]    # the curves and the attention maps
    pictures = [sum("image/png" in o.get("data", {}) for o in c.outputs) for c in reference]
    assert len(pictures) == 2 and all(pictures), f"the reference run's pictures are not shown: {pictures}"
    assert sum(t.count("not implemented yet") for t in map(_text, code)) == 3, "the open exercises' notices"
    assert not os.listdir(tmp_path / "data"), "the empty copy was written to"


# lesson: (its open exercises, {the cell that shows the course's reference run instead: True where it draws it})
SHOWN = {
    "12_gpt_from_scratch": (7, {"l12-reference": True,                 # the GPT's learning curve
                                "l12-sampling-figure-code": True,      # the next-token bars and continuations
                                "l12-cache-speed-code": False,         # the cache's timing (and section 4's GPT's)
                                "l12-rope-experiment-code": False,     # learned / sinusoidal / rotary: the table
                                "l12-widget-code": False}),            # the widget's prompts, continued
    "14_what_attention_learns": (7, {"l14-gpt-figure": True,           # the trained GPT's scores and ablations
                                     "l14-sinks-code": True,           # its weight on position 0
                                     "l14-stream-code": False,         # the sliding windows' perplexities
                                     "l14-jw-code": False}),           # the translator's counterfactual attention
}


@pytest.mark.parametrize("lesson", [pytest.param(name, marks=[pytest.mark.slow] if name.startswith("14") else [])
                                    for name in SHOWN])        # lesson 14's: with the exhaustive tests (RUN_SLOW=1)
def test_lessons_12_and_14_run_to_the_end_without_multi30k(lesson, tmp_path, monkeypatch):
    exercises, shown = SHOWN[lesson]
    code = _run_all_without_data(ROOT / "notebooks" / f"{lesson}.ipynb", tmp_path, monkeypatch)
    assert code[-1].get("execution_count"), "Run All did not reach the last cell"
    errors = [o for c in code for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors, errors
    said = [t for t in map(_text, code) if "Multi30k is not available" in t]
    assert len(said) == 1, f"the missing data is said {len(said)} times, not once: {said}"
    line = said[0].strip()
    assert "\n" not in line, f"the message is not one line: {line!r}"
    assert "docs/data.md" in line and all(name in line for name in FILES) and "COURSE_DATA_DIR" in line, line
    assert "Traceback" not in "".join(map(_text, code))
    cells = {c.get("id"): c for c in code}
    for cell_id, draws in shown.items():
        text = _text(cells[cell_id])
        assert "Without Multi30k" in text and "reference" in text, \
            f"{lesson}, cell {cell_id}: does not say it shows the course's reference run: {text[:300]!r}"
        pictures = sum("image/png" in o.get("data", {}) for o in cells[cell_id].outputs)
        assert bool(pictures) == draws, f"{lesson}, cell {cell_id}: {pictures} picture(s), expected {int(draws)}+"
    checks = sum(len(re.findall(r"^check\.\w+\(", c.source, re.M)) for c in code)
    assert checks == exercises and sum(t.count("not implemented yet") for t in map(_text, code)) == exercises, \
        "every open exercise's check runs without the data and prints its notice"
    assert not any("✔" in t or "✘" in t for t in map(_text, code)), "a check passed or failed on a stub"
    assert not os.listdir(tmp_path / "data"), "the empty copy was written to"


@pytest.mark.parametrize("lesson", ["15_open_models", "16_serving"])
def test_lessons_15_and_16_run_to_the_end_without_multi30k(lesson, tmp_path, monkeypatch):
    """Lesson 15 trains no caption model and shows the reference runs; lesson 16 serves a GPT with random weights
    and shows the reference figures: said once, on one line; every open exercise's check runs."""
    code = _run_all_without_data(ROOT / "notebooks" / f"{lesson}.ipynb", tmp_path, monkeypatch)
    assert code[-1].get("execution_count"), "Run All did not reach the last cell"
    assert not [o for c in code for o in c.get("outputs", []) if o.get("output_type") == "error"]
    said = [line for t in map(_text, code) for line in t.splitlines() if "Multi30k is not available" in line]
    assert len(said) == 1, f"the missing data is said {len(said)} times, not once: {said}"
    assert "docs/data.md" in said[0] and "COURSE_DATA_DIR" in said[0] and "reference" in said[0], said[0]
    checks = sum(len(re.findall(r"^check\.\w+\(", c.source, re.M)) for c in code)
    assert sum(t.count("not implemented yet") for t in map(_text, code)) == checks > 0
    assert not os.listdir(tmp_path / "data"), "the empty copy was written to"
