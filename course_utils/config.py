"""One switch for sizes (FAST), the device, where runs are kept, and repeatable seeds.

    FAST     on when COURSE_FAST=1, or when CI is set (COURSE_FAST=0 turns it off again)
    pick     pick(fast, full) -> the value for the current mode
    DEVICE   CUDA when available, else CPU (printed once, with a hint when no GPU is found)
    resolve_device("auto" | "cpu" | "cuda:1" ...) -> torch.device (the one "auto" of the course)
    runs_dir()  the folder for training runs: $COURSE_RUNS_DIR, else runs/ at the repository root
    describe_machine(device, load_before)   the machine and its load, as every report records them
    machine_line(), load_line(), load_average()   the same as one line (benchmarks), and the load alone
"""
import os
import platform
import random
from pathlib import Path

import numpy as np


def _truthy(value):
    return value is not None and value.strip().lower() not in ("", "0", "false", "no", "off")


def fast_mode(environ=None):
    """True when lessons should run at tiny sizes (COURSE_FAST=1, or CI set)."""
    environ = os.environ if environ is None else environ
    if "COURSE_FAST" in environ:
        return _truthy(environ["COURSE_FAST"])
    return _truthy(environ.get("CI"))


FAST = fast_mode()


def pick(fast, full):
    """The value for the current mode: `fast` in FAST mode (CI, smoke runs), else `full`."""
    return fast if FAST else full


def resolve_device(name="auto"):
    """torch.device for `name`; "auto" is a GPU when there is one, else the CPU."""
    import torch

    if str(name) == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def runs_dir(environ=None):
    """Where training runs (checkpoints, reports) go, the same for the command line and the lessons.

    $COURSE_RUNS_DIR if set (e.g. a mounted Google Drive folder on Colab); else `runs/` at the root
    of the repository this package was installed from (pip install -e .); else `runs/` in the
    current folder (a plain pip install, e.g. on Colab: /content/runs).
    """
    env = os.environ if environ is None else environ
    if env.get("COURSE_RUNS_DIR"):
        return Path(env["COURSE_RUNS_DIR"]).expanduser()
    root = Path(__file__).resolve().parents[1]
    if (root / "pyproject.toml").exists() and (root / "solutions").is_dir():
        return root / "runs"
    return Path.cwd() / "runs"


def _find_device():
    import torch

    device = resolve_device("auto")
    if device.type == "cuda":
        print(f"Device: cuda ({torch.cuda.get_device_name(0)})")
    else:
        print("Device: cpu (no GPU found: every lesson runs on a CPU; for lesson 10's full "
              "schedule use a GPU, e.g. Colab: Runtime > Change runtime type > GPU)")
    return device


_DEVICE = None


def __getattr__(name):  # DEVICE is found (and printed) once, on first use
    global _DEVICE
    if name == "DEVICE":
        if _DEVICE is None:
            _DEVICE = _find_device()
        return _DEVICE
    raise AttributeError(f"module 'course_utils.config' has no attribute {name!r}")


def seed_everything(seed=0):
    """Seed Python, NumPy and torch so that CPU runs are repeatable."""
    random.seed(seed)
    np.random.seed(seed)
    try:
        import torch
    except ImportError:  # lesson 01 needs only NumPy
        return
    torch.manual_seed(seed)
    torch.cuda.manual_seed_all(seed)
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True


def load_average():
    """The load averages over 1, 5 and 15 minutes (what `uptime` prints), rounded; None where unknown."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (AttributeError, OSError):
        return None


def _processor():
    """The CPU's model name (Linux: /proc/cpuinfo), else what the platform module knows."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            return next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()


def describe_machine(device=None, load_before=None):
    """The machine a measurement ran on, as every report and reference file records it: platform, CPU, cores,
    torch and its threads, the device (a GPU's name), and the load average before (`load_before`, taken by the
    caller when it started) and now."""
    import torch

    device = resolve_device("auto" if device is None else device)
    return {"platform": platform.platform(), "processor": _processor(), "cpus": os.cpu_count(),
            "device": str(device), "device_name": torch.cuda.get_device_name(device) if device.type == "cuda"
            else _processor(), "torch": torch.__version__, "threads": torch.get_num_threads(),
            "load_before": load_before, "load_after": load_average()}


def load_line():
    """The load average as `uptime` prints it: "load average 0.52, 0.61, 0.70"."""
    load = load_average()
    return "load average " + (", ".join(f"{x:.2f}" for x in load) if load else "unknown")


def machine_line(with_load=False):
    """One line: CPU model, cores, torch version and threads, OMP_NUM_THREADS (and the load average)."""
    import torch

    line = (f"{_processor()}, {os.cpu_count()} cores; torch {torch.__version__}, {torch.get_num_threads()} "
            f"thread(s), OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}")
    return f"{line}; {load_line()}" if with_load else line
