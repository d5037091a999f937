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
    monkeypatch.setattr(start, "wants_triton", lambda python: False)
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


@pytest.mark.parametrize("system, installed, wanted", [("Linux", False, True), ("Linux", True, False),
                                                       ("Darwin", False, False), ("Windows", False, False)])
def test_triton_is_installed_on_linux_only_and_only_where_missing(monkeypatch, system, installed, wanted):
    monkeypatch.setattr(start.platform, "system", lambda: system)
    monkeypatch.setattr(start, "has_triton", lambda python: installed)
    assert start.wants_triton(Path("py")) == wanted


def test_the_triton_extra_is_installed_after_the_requirements_and_its_failure_is_not_fatal(monkeypatch, tmp_path,
                                                                                          capsys):
    calls = []
    monkeypatch.setattr(start, "run", lambda cmd, on_failure=None: calls.append([str(c) for c in cmd]))
    monkeypatch.setattr(start.subprocess, "call", lambda cmd, cwd=None: calls.append(cmd) or 1)
    monkeypatch.setattr(start, "has_torch", lambda python: True)
    monkeypatch.setattr(start, "wants_triton", lambda python: True)
    start.set_up(Path("py"), tmp_path / start.STAMP, None, reinstall=False)
    assert calls == [["py", "-m", "pip", "install", "-r", "requirements.txt"],
                     ["py", "-m", "pip", "install", "-e", ".[triton]"]]
    assert "Triton could not be installed" in capsys.readouterr().out
    assert (tmp_path / start.STAMP).exists()                      # set up all the same: Triton is optional


def test_the_extra_pins_the_triton_that_the_course_names_and_torch_requires():
    try:
        import tomllib
    except ImportError:                                           # Python < 3.11
        import tomli as tomllib
    from course_utils.triton_attention import TRITON_VERSION

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    assert extras["triton"] == [f"triton=={TRITON_VERSION}; sys_platform == 'linux'"]
    assert f"triton=={TRITON_VERSION}" in (ROOT / ".ci" / "run").read_text(encoding="utf-8") or \
        ".[triton]" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    installed = importlib.util.find_spec("triton")
    torch = pytest.importorskip("torch")
    if installed is None or not torch.__version__.startswith("2.13."):
        pytest.skip("Triton is not installed, or torch is not the course's 2.13 (which requires this Triton on Linux)")
    import triton
    assert triton.__version__ == TRITON_VERSION, (f"installed triton {triton.__version__}, pinned {TRITON_VERSION}: "
                                                  "pip install -e '.[triton]'")
