"""Settings for every pytest run from the repository root (tests/ and the notebooks under nbval):
fast sizes, offline data, no progress file, a plot backend that checks every figure, slow tests opt-in,
and one rule for the tests that need Multi30k (tests/multi30k_rule.py: run, skip offline, fail in CI)."""
import os
import shutil
import tempfile
from pathlib import Path

import pytest

pytest_plugins = ["tests.multi30k_rule"]

ROOT = Path(__file__).resolve().parent

os.environ.setdefault("COURSE_FAST", "1")  # kernels started by the tests inherit it
os.environ.setdefault("COURSE_PROGRESS", "off")  # tests never write a learner's progress file
# Every figure a notebook shows must have a title, axis labels and, for a heatmap, a colorbar:
# the kernels draw with a backend that checks it (tests/figure_check.py) and import it from here.
os.environ.setdefault("MPLBACKEND", "module://tests.figure_check")
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
# Training runs of the tests (lesson 10's notebook, the grader's kernels) go to a folder of their own,
# removed at the end, never to the learner's runs/ folder.
_RUNS = None if "COURSE_RUNS_DIR" in os.environ else tempfile.mkdtemp(prefix="course-test-runs-")
if _RUNS:
    os.environ["COURSE_RUNS_DIR"] = _RUNS
_shared = ROOT.parent / "shared" / "data"
if "COURSE_DATA_DIR" not in os.environ and (_shared / "multi30k").is_dir():
    os.environ["COURSE_DATA_DIR"] = str(_shared)


# pyproject's addopts name nbval's options (--nbval-lax ...). Without nbval (the test tools not installed),
# pytest would stop on "unrecognized arguments"; instead it says what to install.
_INSTALL = "python -m pip install -r requirements.txt"


def pytest_addoption(parser, pluginmanager):
    if not pluginmanager.has_plugin("nbval"):
        group = parser.getgroup("nbval (not installed)")
        group.addoption("--nbval-lax", action="store_true", help="needs nbval: " + _INSTALL)
        group.addoption("--nbval-cell-timeout", action="store", help="needs nbval: " + _INSTALL)


def _missing_test_tools(config):
    """The test tools of requirements.txt ([test] in pyproject.toml) that are not installed."""
    import importlib.util

    missing = [] if config.pluginmanager.has_plugin("nbval") else ["nbval (the notebook tests)"]
    missing += [f"{name} ({what})" for name, what in (("nbformat", "the notebook builder's tests"),
                                                       ("nbclient", "the learner-notebook tests"),
                                                       ("playwright", "the browser test"),
                                                       ("ruff", "the lint test"))
                if importlib.util.find_spec(name) is None]
    return missing


def pytest_configure(config):
    if not config.pluginmanager.has_plugin("nbval") and not config.getoption("help", False):
        raise pytest.UsageError(
            "the course's test tools are not installed: missing " + ", ".join(_missing_test_tools(config))
            + f". Install them, from the repository root, with\n    {_INSTALL}\n(the course, JupyterLab and "
            "the test tools; README, 'Start')")


def pytest_report_header(config):
    missing = _missing_test_tools(config)
    if missing:
        return f"not installed: {', '.join(missing)}; their tests are skipped ({_INSTALL})"


def pytest_collection_modifyitems(config, items):
    if os.environ.get("RUN_SLOW") == "1":
        return
    skip = pytest.mark.skip(reason="slow: set RUN_SLOW=1 to run")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


def pytest_sessionfinish(session, exitstatus):
    if _RUNS:
        shutil.rmtree(_RUNS, ignore_errors=True)
