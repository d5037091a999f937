"""Reports of the full training runs made for the course, shipped with the package (lesson 10 shows
what a full run gives, even in FAST mode or before your own run has finished).

    reference_report("cpu")   # the report.json of `python -m course_utils.translate --preset cpu`

`reference_runs/<preset>.json` is a run's report.json, copied by `python tools/save_reference_run.py
runs/cpu/report.json`; each report names the command, the machine, the threads and the time.
"""
import json
from pathlib import Path

FOLDER = Path(__file__).resolve().parent / "reference_runs"


def reference_report(preset):
    """The reference run's report (a dict), or None when there is none for `preset`."""
    path = FOLDER / f"{preset}.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None
