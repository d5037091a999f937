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
    os.environ["COURSE_RUNS_DIR"] = os.environ["COURSE_TEST_RUNS_DIR"] = _RUNS
# Parallel workers (pytest-xdist) inherit that folder: each trains its fast runs in a subfolder of its own,
# so that two notebooks never resume each other's half-written run.
_WORKER = os.environ.get("PYTEST_XDIST_WORKER")
if _WORKER and os.environ.get("COURSE_TEST_RUNS_DIR") == os.environ.get("COURSE_RUNS_DIR"):
    os.environ["COURSE_RUNS_DIR"] = os.path.join(os.environ["COURSE_TEST_RUNS_DIR"], _WORKER)
    os.makedirs(os.environ["COURSE_RUNS_DIR"], exist_ok=True)
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
    if not pluginmanager.has_plugin("xdist"):
        group = parser.getgroup("pytest-xdist (not installed)")
        group._addoption("-n", dest="numprocesses", action="store", help="needs pytest-xdist: " + _INSTALL)


def _missing_test_tools(config):
    """The test tools of requirements.txt ([test] in pyproject.toml) that are not installed."""
    import importlib.util

    missing = [] if config.pluginmanager.has_plugin("nbval") else ["nbval (the notebook tests)"]
    if not config.pluginmanager.has_plugin("xdist"):
        missing.append("pytest-xdist (the tests in parallel)")
    missing += [f"{name} ({what})" for name, what in (("nbformat", "the notebook builder's tests"),
                                                       ("nbclient", "the learner-notebook tests"),
                                                       ("playwright", "the browser test"),
                                                       ("ruff", "the lint test"))
                if importlib.util.find_spec(name) is None]
    return missing


def pytest_configure(config):
    tools = config.pluginmanager.has_plugin("nbval") and config.pluginmanager.has_plugin("xdist")
    if not tools and not config.getoption("help", False):
        raise pytest.UsageError(
            "the course's test tools are not installed: missing " + ", ".join(_missing_test_tools(config))
            + f". Install them, from the repository root, with\n    {_INSTALL}\n(the course, JupyterLab and "
            "the test tools; README, 'Start')")


def pytest_report_header(config):
    missing = _missing_test_tools(config)
    if missing:
        return f"not installed: {', '.join(missing)}; their tests are skipped ({_INSTALL})"


@pytest.hookimpl(optionalhook=True)     # pytest-xdist's hook
def pytest_xdist_auto_num_workers(config):
    """`-n auto`: one worker per core, at most 4 (each worker holds torch, a kernel and its notebook's model)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(cores, 4))


# The heaviest groups start first (about their minutes on 2 busy cores), so that no worker is left with a long
# one at the end; the others keep their order.
_HEAVY = {"tests/test_grade_clone.py": 10, "site": 8, "browser": 8, "grader": 6}


# The grader's tests that start sandboxes, a fork bomb and a memory hog among them, and time a Ctrl-C: one
# after the other, never beside each other.
_GRADER = {"tests/test_grade.py", "tests/test_grade_class.py", "tests/test_grade_process.py",
           "tests/test_sandbox_user.py", "tests/test_grade_probes.py"}


def _group(path):
    """The worker group of a test file (a path from the repository root): the file itself (a notebook's cells
    run in order, in one kernel), the browser tests together (one JupyterLab server), the website's tests
    together (one build), the grader's sandbox tests together."""
    if path in ("tests/test_site.py", "tests/browser/test_site.py"):
        return "site"
    if path in _GRADER:
        return "grader"
    if path.startswith("tests/browser/"):
        return "browser"
    return path


def _scope(nodeid):
    """The worker group of one test: its file's group (_group), except in the two files whose tests stand alone
    and together take a third of the test command: each learner notebook is a group of its own, and each
    exercise's tests in tests/test_exercises.py (a file kept whole on one worker was the command's tail)."""
    path, _, rest = nodeid.partition("::")
    if path == "tests/test_notebooks.py" and rest.startswith("test_learner_notebook_runs"):
        return nodeid
    if path == "tests/test_exercises.py" and "[" in rest:
        return path + "::" + "-".join(rest.split("[", 1)[1].split("-")[:2])
    return _group(path)


def _item_group(item):
    return _scope(item.nodeid)


def _weight(group):
    """About a group's minutes on 2 busy cores: the heaviest start first (the learner notebooks next)."""
    return _HEAVY.get(group, 4 if "test_learner_notebook_runs" in group else 0)


@pytest.hookimpl(optionalhook=True)     # pytest-xdist's hook: how the tests are dealt to the workers
def pytest_xdist_make_scheduler(config, log):
    from xdist.scheduler import LoadScopeScheduling

    class ByGroup(LoadScopeScheduling):
        """Whole groups (see _group) to one worker each, in the order of the collection."""

        def _split_scope(self, nodeid):
            return _scope(nodeid)

    config.option.loadscopereorder = False
    return ByGroup(config, log)


def pytest_collection_modifyitems(config, items):
    items.sort(key=lambda item: -_weight(_item_group(item)))      # stable: the rest keep their order
    if os.environ.get("RUN_SLOW") == "1":
        return
    skip = pytest.mark.skip(reason="slow: set RUN_SLOW=1 to run")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


def pytest_sessionfinish(session, exitstatus):
    if _RUNS and not _WORKER:
        shutil.rmtree(_RUNS, ignore_errors=True)
