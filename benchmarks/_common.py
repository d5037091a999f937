"""What every benchmark prints and uses: the machine and its load, medians of interleaved runs, and
lookups of course_utils functions that may move between modules."""
import importlib
import os
import pkgutil
import platform
import statistics
import time

import torch


def machine():
    """One line: CPU model, cores, torch version and threads."""
    cpu = platform.processor() or ""
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return (f"{cpu or platform.machine()}, {os.cpu_count()} cores; torch {torch.__version__}, "
            f"{torch.get_num_threads()} thread(s), OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}")


def load():
    """The load averages over 1, 5 and 15 minutes (what `uptime` prints)."""
    try:
        return "load average %.2f, %.2f, %.2f" % os.getloadavg()
    except OSError:
        return "load average unknown"


def course_function(name, first="course_utils.translate"):
    """course_utils' function `name`, looked up in `first`, else in any module of the package
    (lesson 10's helpers are being split into several modules)."""
    import course_utils
    names = [first] + [f"course_utils.{m.name}" for m in pkgutil.walk_packages(course_utils.__path__)
                       if not m.name.startswith("checks")]
    for module_name in names:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        if hasattr(module, name):
            return getattr(module, name)
    raise ImportError(f"no function {name!r} in course_utils")


def interleaved(variants, repeats, warmup=0):
    """Run each callable of `variants` (name -> fn) `warmup + repeats` times, the order rotating at
    each round so that a shared machine's load hits all alike.

    Returns (wall, cpu): name -> list of wall-clock times, and of CPU times of this process (user +
    system, all its threads). With one thread the CPU time does not count the time other jobs hold
    the core, so it is the steadier measure on a loaded machine; with several threads compare wall times.
    """
    names = list(variants)
    wall, cpu = {name: [] for name in names}, {name: [] for name in names}
    for r in range(warmup + repeats):
        for name in names[r % len(names):] + names[:r % len(names)]:
            start, cpu_start = time.perf_counter(), time.process_time()
            variants[name]()
            if r >= warmup:
                wall[name].append(time.perf_counter() - start)
                cpu[name].append(time.process_time() - cpu_start)
    return wall, cpu


def median(values):
    return statistics.median(values)
