"""Every benchmark runs, at tiny sizes (`--tiny`: seconds), so that none can rot unnoticed.

The default run takes the quick ones; the three that load Multi30k, train a tokenizer and time lesson 10's training
set-ups (15 s each on a quiet 2-core machine) run with the exhaustive tests (RUN_SLOW=1); lesson 10's training path
they exercise is run by the default tests of lesson 10 and the pipeline.

The benchmarks measure; these tests only check that each script still runs to its end on the course's
current code and prints its results. `benchmarks/generate.py` and `benchmarks/attention_memory.py`
(lessons 12 and 13) are covered as soon as they exist.
"""
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"
NEEDS_MULTI30K = {"cpu_settings.py", "decode.py", "gpu_estimate.py", "train_profile.py"}   # real sentences
EXHAUSTIVE = {"cpu_settings.py", "gpu_estimate.py", "train_profile.py"}                 # RUN_SLOW=1
KNOWN = ("amp_step.py", "cpu_settings.py", "decode.py", "gpu_estimate.py", "train_profile.py",
         "transformer_step.py", "generate.py", "attention_memory.py")


def scripts():
    found = sorted(p.name for p in BENCHMARKS.glob("*.py") if not p.name.startswith("_"))
    params = []
    for name in sorted(set(found) | set(KNOWN)):
        marks = [pytest.mark.multi30k] if name in NEEDS_MULTI30K else []
        marks += [pytest.mark.slow] if name in EXHAUSTIVE else []
        if name not in found:
            marks.append(pytest.mark.skip(reason=f"benchmarks/{name} does not exist yet"))
        params.append(pytest.param(name, marks=marks, id=name))
    return params


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """One temporary folder for all the scripts: the BPE tokenizer they share is trained once."""
    return tmp_path_factory.mktemp("bench")


@pytest.mark.parametrize("name", scripts())
def test_benchmark_runs_tiny(name, cache):
    env = dict(os.environ, OMP_NUM_THREADS="1", TMPDIR=str(cache), PYTHONPATH=str(ROOT), MPLBACKEND="Agg")
    done = subprocess.run([sys.executable, str(BENCHMARKS / name), "--tiny"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{name} --tiny failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    assert done.stdout.strip(), f"{name} --tiny printed nothing"


def test_every_benchmark_has_a_tiny_mode():
    missing = [p.name for p in BENCHMARKS.glob("*.py")
               if not p.name.startswith("_") and "--tiny" not in p.read_text(encoding="utf-8")]
    assert not missing, f"give these benchmarks a --tiny flag (see benchmarks/_common.shrink): {missing}"
