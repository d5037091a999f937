"""Checkpoints that survive a kill, a full disk or a disconnected Colab session, and weight averaging.

    save(payload, "runs/cpu/checkpoint.pt", dist)   # rank 0 writes atomically; the last good one is kept
    payload = load("runs/cpu/checkpoint.pt", dist)  # the newest readable checkpoint (or CheckpointError)
    payload["rng"] = rng_state(); set_rng_state(payload["rng"])   # resume the same random numbers
    average_state_dicts([sd1, sd2, sd3])             # checkpoint averaging

A save first renames the current checkpoint to `checkpoint.prev.pt`, then writes the new one to a
temporary file and renames it (files.atomic_save): at every moment one complete checkpoint exists.
A load that finds the newest one truncated or corrupted says so, once, and uses the previous one.
"""
import random
from pathlib import Path

import numpy as np
import torch

from . import distributed
from .files import atomic_save


class CheckpointError(RuntimeError):
    """No readable checkpoint where one was expected."""


def previous_path(path):
    path = Path(path)
    return path.with_name(path.stem + ".prev" + path.suffix)


def save(payload, path, dist=None):
    """Rank 0 writes `payload` to `path` atomically, keeping the last good one as *.prev.pt."""
    dist = dist or distributed.Dist()
    if dist.is_main:
        path = Path(path)
        for stale in path.parent.glob(f".{path.name}.*.part"):     # left by a process killed mid-write
            stale.unlink(missing_ok=True)
        if path.exists():
            path.replace(previous_path(path))
        atomic_save(payload, path)
    dist.barrier()


def _readable(path, dist, required):
    try:
        payload = distributed.load_checkpoint(path, dist)
    except Exception as error:  # noqa: BLE001 - a truncated file raises anything from EOFError to RuntimeError
        return None, f"{type(error).__name__}: {str(error)[:120]}"
    missing = [key for key in required if not isinstance(payload, dict) or key not in payload]
    return (None, f"it lacks {', '.join(missing)}") if missing else (payload, None)


def exists(path):
    return Path(path).exists() or previous_path(path).exists()


def load(path, dist=None, required=("model",), log=print):
    """The newest readable checkpoint at `path` (or its *.prev.pt); CheckpointError if none is."""
    dist = dist or distributed.Dist()
    problems = []
    for candidate in (Path(path), previous_path(path)):
        if not candidate.exists():
            continue
        payload, problem = _readable(candidate, dist, required)
        if payload is not None:
            if problems:
                log(f"warning: {problems[0]}; resuming from {candidate.name} instead")
            return payload
        problems.append(f"{candidate} is truncated or corrupted ({problem})")
    if not problems:
        raise CheckpointError(f"no checkpoint at {path}")
    raise CheckpointError("; ".join(problems) + ". Delete the file(s) to start the run afresh.")


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
