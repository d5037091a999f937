"""Every checkpoint read and written by the training pipeline, so that no run is ever lost to a kill,
a full disk or a disconnected Colab session; and weight averaging.

    save(payload, "runs/cpu/checkpoint.pt", dist)          # rank 0 writes, verifies, then renames
    payload, used = load("runs/cpu/checkpoint.pt", dist)    # the newest readable one, and which file it was
    payload["rng"] = rng_state(); set_rng_state(payload["rng"])   # resume the same random numbers
    average_state_dicts([sd1, sd2, sd3])                    # checkpoint averaging

A save writes the new checkpoint to a temporary file beside it (`.checkpoint.pt.*.part`), reads it
back (a checkpoint is verified before it counts), and only then renames: the current checkpoint
becomes `checkpoint.prev.pt` and the new one `checkpoint.pt`. The current one is kept as the
previous only when it is known to be good (this process wrote and verified it, or loaded it): a
damaged `checkpoint.pt` (the run resumed from the `.prev` one) is replaced without touching the good
`.prev`. So at every moment one complete, verified checkpoint exists, whenever the process is
killed. Temporary files a killed write left behind are removed by the next save and never read.
A file that reads but whose weights do not fit the model (other shapes) counts as damaged too: the
trainer names it with `forget(path)` and loads again with `skip=[path]`, which gives the `.prev` one.

`dist` (distributed.Dist) is only needed with several processes: rank 0 writes and the others wait;
every rank loads the file rank 0 chose (from its own disk, or sent by rank 0 when it cannot see it).
"""
import os
import random
from pathlib import Path

import numpy as np
import torch

from ..files import atomic_open


class CheckpointError(RuntimeError):
    """No readable checkpoint where one was expected."""


def previous_path(path):
    path = Path(path)
    return path.with_name(path.stem + ".prev" + path.suffix)


def exists(path):
    return Path(path).exists() or previous_path(path).exists()


_verified = {}      # resolved path -> (mtime_ns, size) of a file this process verified as complete


def _remember(path):
    st = Path(path).stat()
    _verified[str(Path(path).resolve())] = (st.st_mtime_ns, st.st_size)


def _known_good(path):
    path = Path(path)
    if not path.exists():
        return False
    st = path.stat()
    return _verified.get(str(path.resolve())) == (st.st_mtime_ns, st.st_size)


def _read(path, required):
    """(payload, None) if `path` holds a complete checkpoint with the `required` keys, else (None, why)."""
    try:
        payload = torch.load(path, map_location="cpu", weights_only=False)
    except Exception as error:  # noqa: BLE001 - a truncated file raises anything from EOFError to RuntimeError
        return None, f"{type(error).__name__}: {str(error)[:120]}"
    missing = [key for key in required if not isinstance(payload, dict) or key not in payload]
    return (None, f"it lacks {', '.join(missing)}") if missing else (payload, None)


def save(payload, path, dist=None, required=("model",)):
    """Rank 0 writes `payload` to `path` (see the module's docstring); every rank waits for it."""
    if dist is None or dist.is_main:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        for stale in path.parent.glob(f".{path.name}.*.part"):     # left by a process killed mid-write
            stale.unlink(missing_ok=True)
        fresh = path.with_name(path.name + ".new")
        try:
            with atomic_open(fresh, "wb") as f:
                torch.save(payload, f)
        except OSError as error:          # a full disk, a read-only folder: name the checkpoint, not its .new
            raise OSError(error.errno, error.strerror, str(path)) from error
        _, problem = _read(fresh, required)
        if problem is not None:
            fresh.unlink(missing_ok=True)
            raise CheckpointError(f"the checkpoint just written to {fresh} does not read back ({problem}); "
                                  f"the previous checkpoint is kept. Is the disk full?")
        if _known_good(path):           # keep the current one as the previous only when it is good
            os.replace(path, previous_path(path))
            _remember(previous_path(path))
        os.replace(fresh, path)
        _remember(path)
    if dist is not None:
        dist.barrier()


def forget(path):
    """`path` is not a good checkpoint after all (its weights do not fit): never keep it as the previous one."""
    _verified.pop(str(Path(path).resolve()), None)


def _first_readable(path, required, skip=()):
    """(payload, file used, problems) of the newest readable of `path` and its *.prev, `skip` left out."""
    problems = []
    skip = {Path(p).resolve() for p in skip}
    for candidate in (Path(path), previous_path(path)):
        if not candidate.exists() or candidate.resolve() in skip:
            continue
        payload, problem = _read(candidate, required)
        if payload is not None:
            _remember(candidate)
            return payload, candidate, problems
        problems.append(f"{candidate} is truncated or corrupted ({problem})")
    return None, None, problems


def load(path, dist=None, required=("model",), log=print, skip=()):
    """(payload, the file it came from): the newest readable checkpoint at `path` or its *.prev.pt.

    A damaged newest one is named in ONE log line; none readable raises CheckpointError. `skip`: files
    found unusable already (their weights do not fit the model), named by the caller.
    """
    several = dist is not None and dist.active
    if not several or dist.is_main:
        payload, used, problems = _first_readable(path, required, skip)
    if several:                                   # rank 0 chose; the others follow its choice
        used, problems = dist.broadcast((used, problems) if dist.is_main else None)
    if used is None:
        if not problems and not skip:
            raise CheckpointError(f"no checkpoint at {path}")
        problems = [f"{p} does not fit the model" for p in skip] + problems
        raise CheckpointError("; ".join(problems) + ". Delete the file(s) to start the run afresh.")
    if problems:
        log(f"warning: {problems[0]}; resuming from {used.name} instead")
    if several:
        lacking = dist.max(0.0 if Path(used).exists() else 1.0) > 0      # a collective: every rank
        if lacking:                                                      # nodes with their own disks
            payload = dist.broadcast(payload if dist.is_main else None)
        elif not dist.is_main:
            payload = torch.load(used, map_location="cpu", weights_only=False)
    return payload, used


def rng_state():
    """Every random generator a training run draws from: Python, NumPy, torch (CPU and GPUs)."""
    return {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state(),
            "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else []}


def set_rng_state(state):
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if state.get("cuda") and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def average_state_dicts(states):
    """Element-wise mean of several state dicts (checkpoint averaging); integer buffers from the first."""
    if not states:
        raise ValueError("average_state_dicts needs at least one state dict")
    out = {}
    for key, value in states[0].items():
        if value.is_floating_point():
            out[key] = sum(s[key].float() for s in states).div(len(states)).to(value.dtype)
        else:
            out[key] = value.clone()
    return out
