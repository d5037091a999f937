"""Fixtures of the browser tests: ONE JupyterLab server on a copy of the course and ONE headless
Chromium for every test of this folder (package scope), stopped after the last one."""
import pytest

from tests.browser.server import launch_browser, start_lab


@pytest.fixture(scope="package")
def lab(tmp_path_factory):
    yield from start_lab(tmp_path_factory)


@pytest.fixture(scope="package")
def browser(lab, tmp_path_factory):
    yield from launch_browser(tmp_path_factory)
