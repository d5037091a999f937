"""What a newcomer without Multi30k meets: lesson 10's Run All, offline, with COURSE_DATA_DIR pointing to an
empty folder, reaches its last cell. The data cell says once, on one line, what is missing (all six files)
and where to read how to provide them (docs/data.md); no cell fails; the sections that would show this
notebook's run show the course's reference run (curves, translations, attention maps, the report)."""
import os
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
LESSON = ROOT / "notebooks" / "10_translation_multi30k.ipynb"
FILES = ("train.de.gz", "train.en.gz", "val.de.gz", "val.en.gz", "test_2016_flickr.de.gz", "test_2016_flickr.en.gz")


def _text(cell):
    return "".join(o.get("text", "") for o in cell.get("outputs", []) if o.get("output_type") == "stream")


def test_lesson_10_runs_to_the_end_without_multi30k(tmp_path, monkeypatch):
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    (tmp_path / "data").mkdir()
    monkeypatch.setenv("COURSE_DATA_DIR", str(tmp_path / "data"))     # an empty copy: never a download
    monkeypatch.setenv("COURSE_CACHE_DIR", str(tmp_path / "cache"))
    for proxy in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY"):
        monkeypatch.setenv(proxy, "http://127.0.0.1:9")                # and no network, should one be tried
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")   # the pictures, as a learner sees
    nb = nbformat.read(LESSON, as_version=4)
    client = NotebookClient(nb, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(LESSON.parent)}})
    try:
        client.execute()
    except CellExecutionError as error:
        pytest.fail(f"without Multi30k, Run All of lesson 10 stops at a cell that fails:\n{str(error)[-1500:]}")
    code = [c for c in nb.cells if c.cell_type == "code"]
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
