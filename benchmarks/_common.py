"""What every benchmark prints and uses: the machine and its load, medians of interleaved runs, a
`--tiny` mode (every benchmark has one: seconds, to check it still runs) and the tokenizer cache."""
import statistics
import tempfile
import time
from pathlib import Path

from course_utils.config import load_line, machine_line


def machine():
    """One line: CPU model, cores, torch version and threads (course_utils.config.machine_line)."""
    return machine_line()


def load():
    """The load averages over 1, 5 and 15 minutes (what `uptime` prints)."""
    return load_line()


def tokenizer_path():
    """Where the benchmarks keep the BPE tokenizers they train ({vocab} = vocabulary size): a cache in the
    temporary folder, so that a second run does not train them again."""
    return str(Path(tempfile.gettempdir()) / "course_bench" / "bpe{vocab}.json")


def shrink(args, **tiny):
    """With --tiny, replace the arguments' sizes by `tiny` ones: a run of seconds that only checks the
    script still works (tests/test_benchmarks.py runs every benchmark so)."""
    if getattr(args, "tiny", False):
        for key, value in tiny.items():
            setattr(args, key, value)
    return args


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
