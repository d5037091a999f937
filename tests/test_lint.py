"""The code stays clean: ruff with the rules of pyproject.toml (unused imports, undefined names, import
order, bugbear's likely bugs) over the package, the tests, the tools, the benchmarks and the diagrams."""
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_finds_nothing():
    pytest.importorskip("ruff", reason="ruff is not installed (pip install -r requirements.txt)")
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "--output-format", "concise", "."],
                            cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, f"`ruff check .` found problems:\n{result.stdout[-3000:]}{result.stderr[-1000:]}"
