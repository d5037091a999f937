"""Training on several processes (GPUs, nodes) with PyTorch's own engine: torchrun + DDP.

Data parallelism: every process holds a full copy (replica) of the model and trains on its own
share of each global batch; DistributedDataParallel (DDP) all-reduces the gradients during the
backward pass, so every replica takes the same optimizer step and the replicas stay identical.

    dist = setup()                      # reads torchrun's RANK, WORLD_SIZE, LOCAL_RANK, MASTER_*;
                                        # without them: one process, no process group
    model = wrap_model(model.to(dist.device), dist)          # DDP when world_size > 1
    dist.sum(x), dist.max(x), dist.broadcast(obj), dist.barrier()   # collectives (no-ops for one process)
    replica_max_diff(model, dist)                            # 0.0 when the replicas are identical
    cleanup()

This module is only about processes. The rest of a multi-process run lives with the rest of the
pipeline: how a global batch is split into processes x accumulation steps in batches.py, the ONE
optimizer step (all-reduce once, in the last backward) in course_utils.training, the checkpoints
(rank 0 writes, every rank reads) in checkpoints.py. Launch: `torchrun --nproc_per_node=2 -m
course_utils.translation ...` (or any task's command: the pipeline's command line calls setup()).
"""
import datetime
import os
import sys
from dataclasses import dataclass

import torch
import torch.distributed as torch_dist
from torch.nn.parallel import DistributedDataParallel

from ..config import resolve_device
from ..training import unwrap
from .task import ConfigError

__all__ = ["ENV_VARS", "DistributedConfigError", "Dist", "read_env", "setup", "cleanup", "report_error",
           "wrap_model", "replica_max_diff"]

ENV_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")  # set by torchrun


class DistributedConfigError(ConfigError):
    """A launch configuration that cannot work; raised before any training starts."""


def report_error(error, environ=None):
    """Print `error` once (from rank 0, or from a process that cannot tell its rank) to stderr."""
    rank = (os.environ if environ is None else environ).get("RANK", "0")
    if not rank.isdigit() or int(rank) == 0:
        print(f"error: {error}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# Processes: who am I, and the process group
# ---------------------------------------------------------------------------------------------
def read_env(environ=None):
    """torchrun's variables as ints, or None when none is set (a plain single-process run)."""
    env = os.environ if environ is None else environ
    present = [k for k in ENV_VARS if env.get(k)]
    if not present:
        return None
    missing = [k for k in ENV_VARS if not env.get(k)]
    if missing:
        raise DistributedConfigError(
            f"incomplete distributed environment: {', '.join(present)} set but {', '.join(missing)} "
            "missing. Launch with torchrun (it sets all of them), e.g. `torchrun --nproc_per_node=2 "
            "-m course_utils.translation ...`, or unset them to train in one process.")
    try:
        out = {k.lower(): int(env[k]) for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_PORT")}
        out["local_world_size"] = int(env.get("LOCAL_WORLD_SIZE") or out["world_size"])
    except ValueError:
        raise DistributedConfigError("RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE and MASTER_PORT "
                                     f"must be integers, got {[env.get(k) for k in ENV_VARS]}") from None
    out["master_addr"] = env["MASTER_ADDR"]
    if out["world_size"] < 1 or not 0 <= out["rank"] < out["world_size"]:
        raise DistributedConfigError(f"RANK must be in [0, WORLD_SIZE), got RANK={out['rank']}, "
                                     f"WORLD_SIZE={out['world_size']}")
    if not 0 <= out["local_rank"] < out["local_world_size"]:
        raise DistributedConfigError(f"LOCAL_RANK must be in [0, LOCAL_WORLD_SIZE), got "
                                     f"{out['local_rank']} and {out['local_world_size']}")
    if not 0 < out["master_port"] < 65536:
        raise DistributedConfigError(f"MASTER_PORT must be a port in 1..65535, got {out['master_port']}: "
                                     "give torchrun a free port, e.g. --master_port=29500")
    return out


@dataclass
class Dist:
    """This process's place in the job; with world_size 1 every collective is a no-op."""
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    device: torch.device = torch.device("cpu")
    backend: str = None                # "nccl" | "gloo" | None (no process group)

    @property
    def is_main(self):
        """Rank 0: the one process that logs, evaluates and writes files."""
        return self.rank == 0

    @property
    def active(self):
        return self.backend is not None and torch_dist.is_initialized()

    def print(self, *args, **kwargs):
        if self.is_main:
            print(*args, **kwargs, flush=True)

    def barrier(self):
        if self.active:
            torch_dist.barrier()

    def _reduce(self, values, op):
        single = not isinstance(values, (list, tuple))
        if not self.active:
            return values
        t = torch.tensor([values] if single else list(values), dtype=torch.float64, device=self.device)
        torch_dist.all_reduce(t, op=op)
        out = t.tolist()
        return out[0] if single else out

    def sum(self, values):
        """Sum of a number (or a list of numbers) over all processes."""
        return self._reduce(values, torch_dist.ReduceOp.SUM)

    def max(self, values):
        """Largest value of a number (or of each number in a list) over all processes."""
        return self._reduce(values, torch_dist.ReduceOp.MAX)

    def broadcast(self, obj, src=0):
        """Rank `src`'s Python object (any picklable value), on every rank."""
        if not self.active:
            return obj
        box = [obj]
        torch_dist.broadcast_object_list(box, src=src, device=self.device)
        return box[0]


def setup(device="auto", timeout_minutes=30, environ=None):
    """Join the process group torchrun describes (NCCL on GPUs, gloo on CPUs); returns a Dist.

    Without torchrun's variables: one process, no process group, `device` as asked ("auto": a
    GPU when there is one). With them: the process uses GPU LOCAL_RANK (or the CPU with
    device="cpu" or no GPU) and init_process_group("env://") meets the others at
    MASTER_ADDR:MASTER_PORT. `timeout_minutes` bounds a wait for a missing process, and the
    time rank 0 may spend evaluating while the others wait.
    """
    env = read_env(environ)
    wanted = resolve_device(device)
    if env is None:
        return Dist(device=wanted)
    if wanted.type == "cuda":
        visible = torch.cuda.device_count()
        if env["local_rank"] >= visible:
            raise DistributedConfigError(
                f"process LOCAL_RANK={env['local_rank']} needs GPU {env['local_rank']} but this node "
                f"has {visible} visible GPU(s): start at most {visible} processes per node "
                "(--nproc_per_node), or train on CPUs with --device cpu (gloo)")
        dev, backend = torch.device("cuda", env["local_rank"]), "nccl"
        torch.cuda.set_device(dev)
    else:
        dev, backend = torch.device("cpu"), "gloo"
    if not torch_dist.is_initialized():
        try:
            torch_dist.init_process_group(backend, init_method="env://", rank=env["rank"],
                                          world_size=env["world_size"],
                                          timeout=datetime.timedelta(minutes=timeout_minutes))
        except Exception as error:  # noqa: BLE001 - re-raised with what to check
            raise RuntimeError(
                f"rank {env['rank']} could not join the other {env['world_size'] - 1} process(es) at "
                f"{env['master_addr']}:{env['master_port']} ({backend}): {error}. Check that every node "
                "was started with the same --nnodes and --rdzv_endpoint=HOST:PORT (HOST = node 0, "
                "reachable from all nodes, PORT open).") from error
    return Dist(env["rank"], env["world_size"], env["local_rank"], dev, backend)


def cleanup():
    """Leave the process group, if this process joined one (call once at the end of a run)."""
    if torch_dist.is_initialized():
        torch_dist.destroy_process_group()


# ---------------------------------------------------------------------------------------------
# The model: DDP, gradient sync, replicas
# ---------------------------------------------------------------------------------------------
def wrap_model(model, dist):
    """DistributedDataParallel(model) when several processes train, else the model itself.

    DDP copies rank 0's parameters and buffers to every rank, then averages the gradients
    during backward (all-reduce, in buckets of ~25 MB, overlapping with the backward pass).
    """
    if not dist.active:
        return model
    device_ids = [dist.device.index] if dist.device.type == "cuda" else None
    return DistributedDataParallel(model, device_ids=device_ids)


def replica_max_diff(model, dist):
    """Largest |parameter - rank 0's parameter| over all ranks (0.0 when replicas are identical)."""
    flat = torch.cat([p.detach().reshape(-1).float() for p in unwrap(model).parameters()])
    if not dist.active:
        return 0.0
    reference = flat.clone()
    torch_dist.broadcast(reference, src=0)
    return dist.max(float((flat - reference).abs().max()))
