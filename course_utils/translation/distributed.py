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
pipeline: the batch arithmetic (global batch = micro-batch x processes x accumulation steps) in
batching.py, the ONE optimizer step (all-reduce once, in the last backward) in course_utils.training,
the checkpoints (rank 0 writes, every rank reads) in checkpoints.py.

Launch (see the README): `torchrun --nproc_per_node=2 -m course_utils.translation.distributed` runs
`demo`, a quick check that a machine (or a cluster) trains one tiny model correctly on several processes.
"""
import datetime
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as torch_dist
from torch.nn.parallel import DistributedDataParallel

from ..config import resolve_device
from ..training import TrainState, train_step, unwrap
from . import checkpoints
from .batching import BucketBatchSampler, accumulation_steps, check_enough_batches, full_steps, steps_per_epoch
from .presets import ConfigError

__all__ = ["ENV_VARS", "DistributedConfigError", "Dist", "read_env", "setup", "cleanup", "report_error",
           "wrap_model", "replica_max_diff", "demo", "main"]

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


# ---------------------------------------------------------------------------------------------
# demo: a tiny model that shows (and tests) the whole recipe
# ---------------------------------------------------------------------------------------------
def _demo_data(num_sequences, vocab_size, seed):
    """Variable-length token sequences; the task: predict (token + 1) mod vocab at each position."""
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.randint(3, 13, (num_sequences,), generator=gen).tolist()
    return [torch.randint(1, vocab_size, (n,), generator=gen) for n in lengths]


def _demo_batch(seqs, vocab_size):
    x = torch.nn.utils.rnn.pad_sequence(seqs, batch_first=True, padding_value=0)   # (B, T)
    y = torch.where(x != 0, x % (vocab_size - 1) + 1, 0)                            # (B, T)
    return x, y


def demo(steps=6, batch_tokens=512, micro_tokens=64, lr=3e-3, seed=0, dist=None,
         save_at=None, checkpoint=None, resume=None, num_sequences=400):
    """Train a tiny token model for `steps` optimizer steps on any number of processes.

    Global batch: `batch_tokens` padded tokens per optimizer step = micro_tokens x world_size x
    accumulation (length-bucketed micro-batches, every rank takes every world_size-th).
    Returns {"losses": global mean loss per step, "replica_max_diff", "accum_steps", ...}.
    `checkpoint` + `save_at`: save after that step; `resume`: start from such a checkpoint
    (written by any number of processes).
    """
    dist = dist or Dist()
    vocab_size, d_model = 24, 16
    accum = accumulation_steps(batch_tokens, micro_tokens, dist.world_size)
    torch.manual_seed(seed)                      # same initial weights everywhere (DDP copies them anyway)
    model = torch.nn.Sequential(torch.nn.Embedding(vocab_size, d_model), torch.nn.Linear(d_model, d_model),
                                torch.nn.Tanh(), torch.nn.Linear(d_model, vocab_size)).to(dist.device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    state = TrainState(wrap_model(model, dist), optimizer, device=dist.device, clip_norm=None,
                       lr_schedule=lambda step: lr * min(1.0, step / 3), dist=dist)
    if resume is not None:
        ckpt, _ = checkpoints.load(resume, dist, required=("model", "optimizer", "step"))
        model.load_state_dict(ckpt["model"])
        optimizer.load_state_dict(ckpt["optimizer"])
        state.step = ckpt["step"]
        state.set_lr()
    seqs = _demo_data(num_sequences, vocab_size, seed)
    sampler = BucketBatchSampler([len(s) for s in seqs], max_tokens=micro_tokens, seed=seed,
                                 num_replicas=dist.world_size, rank=dist.rank)
    num_batches = len(sampler.batches())          # all ranks' micro-batches of an epoch
    check_enough_batches(num_batches, dist.world_size, accum, "the demo data")
    per_epoch = steps_per_epoch(num_batches, dist.world_size, accum)   # the same for any world_size

    def loss_sum(model, batch):                   # summed over the batch's target tokens
        x, y = (t.to(dist.device) for t in batch)
        return torch.nn.functional.cross_entropy(model(x).transpose(1, 2), y, ignore_index=0, reduction="sum")

    def target_tokens(batch):
        return int((batch[1] != 0).sum())

    losses = []
    while state.step < steps:
        sampler.set_epoch(state.step // per_epoch)
        epoch_steps = full_steps(list(sampler), num_batches, dist.world_size, accum)
        for step_batches in epoch_steps[state.step % per_epoch:]:     # (resume: skip the steps done)
            if state.step >= steps:
                break
            micro = [_demo_batch([seqs[i] for i in idx], vocab_size) for idx in step_batches]
            losses.append(train_step(state, micro, loss_sum, target_tokens))
            dist.print(f"step {state.step}: loss {losses[-1]:.6f}")
            if checkpoint is not None and state.step == save_at:
                checkpoints.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                                  "step": state.step, "world_size": dist.world_size}, checkpoint, dist)
    return {"losses": losses, "replica_max_diff": replica_max_diff(state.model, dist), "accum_steps": accum,
            "world_size": dist.world_size, "steps_per_epoch": per_epoch,
            "parameters": [p.detach().cpu() for p in model.parameters()]}


def main(argv=None):
    import argparse
    import json
    p = argparse.ArgumentParser(prog="torchrun --nproc_per_node=N -m course_utils.translation.distributed",
                                description="Check that several processes train one model correctly.")
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--batch-tokens", type=int, default=512, help="global batch (padded tokens per step)")
    p.add_argument("--micro-tokens", type=int, default=64, help="micro-batch per process")
    p.add_argument("--device", default="cpu", help="cpu (gloo) or auto/cuda (NCCL)")
    p.add_argument("--checkpoint", help="save a checkpoint here after --save-at steps")
    p.add_argument("--save-at", type=int)
    p.add_argument("--resume", help="start from a checkpoint (written by any number of processes)")
    p.add_argument("--json", help="rank 0 writes the losses and the replica check here")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    try:
        dist = setup(args.device)
        accum = accumulation_steps(args.batch_tokens, args.micro_tokens, dist.world_size)
        dist.print(f"{dist.world_size} process(es) on {dist.device} (backend {dist.backend or 'none'}): "
                   f"global batch {args.batch_tokens} tokens = {args.micro_tokens} per micro-batch x "
                   f"{dist.world_size} process(es) x {accum} accumulation step(s)")
        out = demo(args.steps, args.batch_tokens, args.micro_tokens, dist=dist, checkpoint=args.checkpoint,
                   save_at=args.save_at, resume=args.resume)
    except ConfigError as error:
        report_error(error)
        return 2
    finally:
        cleanup()
    dist.print(f"replicas differ by at most {out['replica_max_diff']:.1e} (0 = identical)")
    if args.json and dist.is_main:
        Path(args.json).write_text(json.dumps({k: v for k, v in out.items() if k != "parameters"}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
