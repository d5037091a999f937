"""A run's folder and its life: where it goes, what counts as a run kept there, the refusals that protect
it, Ctrl-C, and the memory setting every run uses.

    check_out_dir(out_dir, resume, overwrite, extra_files)   # refuses, or clears the folder with overwrite
    with StopOnInterrupt(log) as interrupt: ... interrupt.requested ...
    raise TrainingStopped("... how to resume")

A folder holds a run when it has a checkpoint, a model.pt or a report.json (RUN_FILES). A new run there is
refused unless `overwrite` (which removes the run's files, and only those); `resume="required"` (the
command line's --resume) is refused where there is nothing to go on with; `resume=True` (the notebooks'
"run the cell again") goes on with the run kept there, or starts one.
"""
import ctypes
import signal
import sys
import threading
from pathlib import Path

from .checkpoints import exists as checkpoint_exists
from .task import ConfigError

RUN_FILES = ("checkpoint.pt", "checkpoint.prev.pt", "model.pt", "report.json")       # a folder holds a run
OUTPUT_FILES = RUN_FILES + ("history.json",)                                           # + the task's own files


class TrainingStopped(KeyboardInterrupt):
    """Ctrl-C stopped the run at the end of a step; the checkpoint is saved. The message says how to go on."""


class RunExistsError(ConfigError):
    """The output folder holds a run that a new one would replace, or none where --resume needs one."""


def check_out_dir(out_dir, resume=False, overwrite=False, extra_files=()):
    """Refuse what would lose or fake a run (see the module's docstring); `overwrite` deletes the old run's files."""
    out_dir = Path(out_dir)
    if resume and overwrite:
        raise ConfigError("give --resume (go on with the run) or --overwrite (replace it), not both")
    found = [name for name in RUN_FILES if (out_dir / name).exists()]
    if resume == "required" and not checkpoint_exists(out_dir / "checkpoint.pt"):
        what = f"only {', '.join(found)}" if found else "no run"
        raise RunExistsError(f"--resume: {out_dir} holds {what}, no checkpoint to go on with: leave out --resume "
                             "to start a new run there, or give the --out folder of the run to resume")
    if not found or resume:
        return
    if not overwrite:
        raise RunExistsError(
            f"{out_dir} already holds a run ({', '.join(found)}): add --resume to go on with it, give a new "
            f"--out folder for a new run, or add --overwrite to replace it")
    for name in OUTPUT_FILES + tuple(extra_files):
        (out_dir / name).unlink(missing_ok=True)


class StopOnInterrupt:
    """Ctrl-C / the notebook's stop button: finish the current step, then stop (a second one: at once)."""

    def __init__(self, log):
        self.requested, self.log, self.previous = False, log, None

    def _handler(self, signum, frame):
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True
        self.log("\nstopping after this step (press Ctrl-C again to stop at once, without saving)")

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            self.previous = signal.signal(signal.SIGINT, self._handler)
        return self

    def __exit__(self, *exc):
        if self.previous is not None:
            signal.signal(signal.SIGINT, self.previous)


# glibc gives every freed block over 32 MB back to the system, so each step pays page faults again for its
# large temporaries (the logits, their float copy and gradients).
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD, M_MMAP_MAX = -1, -3, -4


def keep_freed_memory(on=True):
    """on: keep freed memory for reuse instead (no mmap, trim only above 1 GiB): the README's 1.05x
    faster per step on lesson 10's cpu preset, measured by `python benchmarks/train_profile.py` (variant
    "keep freed memory"); off: glibc's settings after warm-up. A no-op where glibc is not the allocator."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL("libc.so.6")
        if on:
            libc.mallopt(M_MMAP_MAX, 0)              # large blocks from the heap, not from mmap
            libc.mallopt(M_TRIM_THRESHOLD, 1 << 30)  # give memory back only above 1 GiB free
        else:
            libc.mallopt(M_MMAP_MAX, 65536)
            libc.mallopt(M_MMAP_THRESHOLD, 32 << 20)
            libc.mallopt(M_TRIM_THRESHOLD, 64 << 20)
    except (OSError, AttributeError):
        pass
