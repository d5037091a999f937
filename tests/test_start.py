"""tools/start.py, the one command that sets up and opens the course: its decisions, without installing.

What was run by hand (not here: it installs ~2 GB): `python3 tools/start.py` in a fresh clone on Linux
as root, without a GPU; see README "Start". macOS, Windows, Colab and a GPU machine: reasoned only.
"""
import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("start", ROOT / "tools" / "start.py")
start = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(start)


@pytest.mark.parametrize("system, gpu, choice, cpu", [
    ("Linux", False, None, True), ("Linux", True, None, False), ("Windows", False, None, True),
    ("Windows", True, None, False), ("Darwin", False, None, False),
    ("Linux", True, "cpu", True), ("Linux", False, "gpu", False)])
def test_cpu_torch_first_only_where_pip_would_bring_an_unusable_build(monkeypatch, system, gpu, choice, cpu):
    monkeypatch.setattr(start.platform, "system", lambda: system)
    monkeypatch.setattr(start, "has_nvidia_gpu", lambda: gpu)
    assert start.wants_cpu_torch(choice) == cpu


@pytest.mark.parametrize("uid, extra, allow_root", [(0, [], True), (1000, [], False), (0, ["--allow-root"], True)])
def test_jupyterlab_opens_at_the_root_with_lesson_00(monkeypatch, uid, extra, allow_root):
    monkeypatch.setattr(start.os, "geteuid", lambda: uid, raising=False)
    cmd = start.lab_command(Path("py"), extra)
    assert cmd[:3] == ["py", "-m", "jupyterlab"]                 # the environment's own JupyterLab
    assert f"--ServerApp.root_dir={ROOT}" in cmd                  # notebooks/ and solutions/ both reachable
    assert "--LabApp.default_url=/lab/tree/notebooks/00_welcome.ipynb" in cmd
    assert (ROOT / start.LESSON_00).exists()
    assert cmd.count("--allow-root") == int(allow_root)


def test_set_up_installs_once_cpu_torch_first(monkeypatch, tmp_path):
    calls = []
    monkeypatch.setattr(start, "run", lambda cmd, on_failure=None: calls.append([str(c) for c in cmd]))
    monkeypatch.setattr(start, "has_torch", lambda python: False)
    monkeypatch.setattr(start, "wants_cpu_torch", lambda choice: True)
    stamp = tmp_path / start.STAMP
    start.set_up(Path("py"), stamp, None, reinstall=False)
    assert calls == [["py", "-m", "pip", "install", "torch", "--index-url", start.CPU_INDEX],
                     ["py", "-m", "pip", "install", "-r", "requirements.txt"]]
    start.set_up(Path("py"), stamp, None, reinstall=False)       # set up already: nothing to do
    assert len(calls) == 2
    stamp.write_text("requirements of an older version\n")
    monkeypatch.setattr(start, "has_torch", lambda python: True)
    start.set_up(Path("py"), stamp, None, reinstall=False)       # requirements changed: install again, keep torch
    assert calls[2:] == [["py", "-m", "pip", "install", "-r", "requirements.txt"]]


def test_an_active_environment_is_used_as_it_is(monkeypatch):
    monkeypatch.setattr(start.sys, "prefix", "/some/venv")
    monkeypatch.setattr(start.sys, "base_prefix", "/usr")
    assert start.environment() == (Path(sys.executable), Path("/some/venv"))


def test_an_unreachable_cpu_index_says_what_happened_and_the_ways_forward(monkeypatch, tmp_path):
    monkeypatch.setattr(start.subprocess, "call", lambda cmd, cwd=None: 1 if "--index-url" in cmd else 0)
    monkeypatch.setattr(start, "has_torch", lambda python: False)
    monkeypatch.setattr(start, "wants_cpu_torch", lambda choice: True)
    with pytest.raises(SystemExit) as stopped:
        start.set_up(Path("py"), tmp_path / start.STAMP, None, reinstall=False)
    text = str(stopped.value.code)
    assert start.CPU_INDEX in text and "--gpu" in text and "2.5 GB" in text
    assert not (tmp_path / start.STAMP).exists()                  # not marked as set up
