"""One rule for every test that needs Multi30k (a pytest plugin, loaded by ../conftest.py).

Mark such a test `@pytest.mark.multi30k` (or a parameter: `pytest.param(..., marks=pytest.mark.multi30k)`).
The cells of a notebook that calls `load_multi30k` are marked here, so nbval's items follow the rule too.
Before the first marked test runs, the data is looked for once per session (no network when the files
are there; else one quick download attempt, which fails within a second offline):

    data available                      -> the test runs
    not available, CI unset             -> skipped, with one reason that says how to provide the data
    not available, CI set (CI=true)     -> fails with that reason: CI never passes without the data
"""
import os
from pathlib import Path

import pytest

from course_utils.config import _truthy
from course_utils.data import multi30k

MARKER = "multi30k"
_problem = pytest.StashKey()


def verdict(problem, ci):
    """("run", None), ("skip", reason) or ("fail", reason) for a test that needs Multi30k, given
    `problem` (None when the data is available, else why not) and whether CI is set."""
    if problem is None:
        return "run", None
    if ci:
        return "fail", f"needs Multi30k, and CI must have it (CI is set, so this fails instead of skipping): {problem}"
    return "skip", f"needs Multi30k, which is not available: {problem}"


def ci_is_set(environ=os.environ):
    """CI=true (or 1, yes): set by GitHub Actions, GitLab CI and most others, and by .ci/run."""
    return _truthy(environ.get("CI"))


def loads_multi30k(path, _cache={}):  # noqa: B006 (a cache on purpose)
    """True for a notebook whose code calls load_multi30k (so each of its nbval cells needs the data)."""
    path = Path(path)
    if path.suffix != ".ipynb":
        return False
    if path not in _cache:
        _cache[path] = "load_multi30k(" in path.read_text(encoding="utf-8")
    return _cache[path]


def pytest_configure(config):
    config.addinivalue_line("markers", f"{MARKER}: needs the Multi30k data: skipped when it is not available, "
                                       "fails instead when CI is set (tests/multi30k_rule.py)")


@pytest.hookimpl(tryfirst=True)  # before -m selects on the marker
def pytest_collection_modifyitems(config, items):
    for item in items:
        if loads_multi30k(item.path):
            item.add_marker(MARKER)


@pytest.hookimpl(tryfirst=True)  # before the item's set-up (for nbval: before its kernel starts)
def pytest_runtest_setup(item):
    if item.get_closest_marker(MARKER) is None:
        return
    if _problem not in item.config.stash:
        item.config.stash[_problem] = multi30k.why_unavailable()
    action, reason = verdict(item.config.stash[_problem], ci_is_set())
    if action == "skip":
        pytest.skip(reason)
    if action == "fail":
        pytest.fail(reason, pytrace=False)
