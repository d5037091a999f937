"""Settings for every pytest run from the repository root (tests/ and the notebooks under nbval):
fast sizes, offline data, a non-interactive plot backend, slow tests opt-in."""
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent

os.environ.setdefault("COURSE_FAST", "1")  # kernels started by the tests inherit it
os.environ.setdefault("MPLBACKEND", "Agg")
_shared = ROOT.parent / "shared" / "data"
if "COURSE_DATA_DIR" not in os.environ and (_shared / "multi30k").is_dir():
    os.environ["COURSE_DATA_DIR"] = str(_shared)


def pytest_collection_modifyitems(config, items):
    if os.environ.get("RUN_SLOW") == "1":
        return
    skip = pytest.mark.skip(reason="slow: set RUN_SLOW=1 to run")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
