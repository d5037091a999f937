"""`.ci/run`: the course's own virtual environment, torch's CPU build first, the README's test command."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUN = (ROOT / ".ci" / "run").read_text()


def _commands():
    return [line.strip() for line in RUN.splitlines() if line.strip() and not line.strip().startswith("#")]


def test_ci_installs_into_a_virtual_environment_of_its_own_before_any_pip():
    commands = _commands()
    make = next(i for i, c in enumerate(commands) if "-m venv .venv" in c)
    use = next(i for i, c in enumerate(commands) if c.startswith(". .venv/bin/activate"))
    pips = [i for i, c in enumerate(commands) if "pip install" in c]
    assert make < use < min(pips)
    assert not any(c.startswith("python3 -m pip") for c in commands)   # never the system's Python


def test_the_first_install_is_torch_s_cpu_build_as_the_comment_says():
    first = next(c for c in _commands() if "pip install" in c)
    assert '"torch==2.13.0+cpu"' in first
    assert "whl/cpu" in RUN and re.search(r"CPU build", RUN)


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    command = "COURSE_FAST=1 python -m pytest"
    tests = [c for c in _commands() if c == command]
    assert command in readme and len(tests) == 1, "CI runs the README's test command, once"
    after = _commands()[_commands().index(command) + 1:]
    assert all(c.startswith("echo ") for c in after), f"after the test command, CI only reports: {after}"


def test_ci_sweeps_the_catalogues_only_when_a_check_changed():
    """docs/development.md: the full sweep runs in CI when the checks, the catalogues or torch changed since the
    recorded sweep, and fails unless every slip is named; before the test command."""
    commands = _commands()
    sweep = next(i for i, c in enumerate(commands) if "tools/measure_slips.py --all --if-changed --strict" in c)
    assert sweep < commands.index("COURSE_FAST=1 python -m pytest")
