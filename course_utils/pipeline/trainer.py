"""The one training loop of every long run of the course: epochs of optimizer steps, evaluation, checkpoints,
exact resume, Ctrl-C, several processes. What is specific to a model comes from its Task (task.py).

    report = run(task, out_dir, resume=True)      # train + the task's finish + report.json (+ a reference file)
    state, history, results = train(task, out_dir)  # the training only; out_dir=None: in memory, no files

    train(task, out_dir)
      task.check(world_size)              every impossible setting, once, before any work
      runs.check_out_dir(...)             a run kept there is never replaced silently
      task.prepare(out_dir, saved)        the data (with the checkpoint's saved state when resuming)
      make_state(task, device)            model, optimizer, precision, schedule: a RunState
      run_epoch(...)                      the epoch's optimizer steps, each training.train_step on
                                          this process's parts of one global batch
      task.evaluate(model, history)       after every epoch, on the main process
      task.finish(model, history)         after the last one

Checkpoints (checkpoints.py): `checkpoint.pt` after every epoch and every `cfg.checkpoint_minutes` within
one. A checkpoint holds the model, the optimizer, the gradient scaler, the counters, the step reached
inside the epoch, every random generator's state, the settings, the history and the task's state (e.g.
its tokenizer), so that a resumed run goes on with the same batches in the same order (a task's
`batches(epoch)` is a pure function of the epoch), the same dropout masks and the same learning rate as
if it had never stopped. Ctrl-C (or the notebook's stop button) ends the current step, saves, and says
how to resume. A checkpoint whose weights do not fit the model counts as damaged: the previous one is used.
"""
import dataclasses
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

from ..config import resolve_device, seed_everything
from ..files import atomic_save, atomic_write_text
from ..precision import grad_scaler, resolve_amp
from ..tensors import cpu_state_dict
from ..training import TrainState, train_step
from . import checkpoints, distributed
from .batches import check_enough_steps, my_parts
from .report import build_report, load_average, write_reference
from .runs import StopOnInterrupt, TrainingStopped, check_out_dir, keep_freed_memory
from .task import ConfigError

REQUIRED = ("model", "optimizer", "step", "rng")        # what a checkpoint must hold to count


@dataclasses.dataclass
class RunState(TrainState):
    """training.TrainState, plus what a run counts and resumes from."""
    cfg: object = None
    epoch: int = 0                  # epochs done
    epoch_step: int = 0             # optimizer steps done in the current epoch
    epoch_losses: list = dataclasses.field(default_factory=list)   # this epoch's step losses so far
    train_seconds: float = 0.0      # time spent in train steps (evaluation excluded)
    tokens: int = 0                 # tokens trained on (Task.tokens, by all processes)
    total_steps: int = None         # optimizer steps of the whole run
    replica_max_diff: float = 0.0   # after training: largest difference between the processes' replicas

    def progress(self):
        """Fraction of the run done: steps done, or training time used if a time cap is set and larger."""
        done = self.step / self.total_steps if self.total_steps else 0.0
        if self.cfg.time_budget_minutes:
            done = max(done, self.train_seconds / (60.0 * self.cfg.time_budget_minutes))
        return min(done, 1.0)


def make_state(task, device=None, dist=None, wrap=None):
    """The task's model, optimizer, scaler and precision on the device: everything a run steps.
    `wrap(model)` (distributed.wrap_model: DDP) with several processes."""
    cfg = task.cfg
    device = task.device = task.device if device is None else device
    amp_dtype = task.amp_dtype = resolve_amp(cfg.amp, device)
    raw_model = task.build_model().to(device)
    model = raw_model if wrap is None else wrap(raw_model)
    if cfg.compile:
        model = torch.compile(model)
    state = RunState(model, task.make_optimizer(raw_model), grad_scaler(device, amp_dtype), device, amp_dtype,
                     cfg.clip_norm, dist=dist, cfg=cfg)
    state.lr_schedule = lambda step: task.learning_rate(step, state.progress())
    state.set_lr()
    return state


def save_run(task, state, path, history):
    """The checkpoint of a run: everything needed to go on exactly where it stopped (rank 0 writes)."""
    main = state.dist is None or state.dist.is_main
    payload = None if not main else {
        "model": cpu_state_dict(state.raw_model), "optimizer": state.optimizer.state_dict(),
        "scaler": state.scaler.state_dict(), "step": state.step, "epoch": state.epoch,
        "epoch_step": state.epoch_step, "epoch_losses": list(state.epoch_losses),
        "train_seconds": state.train_seconds, "tokens": state.tokens, "items": state.items,
        "config": state.cfg.to_dict(), "history": history, "task": task.state_dict(), "rng": checkpoints.rng_state()}
    checkpoints.save(payload, path, state.dist, required=REQUIRED)


def restore_run(state, ckpt):
    """Put a checkpoint into `state`; returns None, or why its weights do not fit the model."""
    try:
        state.raw_model.load_state_dict(ckpt["model"])
        state.optimizer.load_state_dict(ckpt["optimizer"])
        state.scaler.load_state_dict(ckpt.get("scaler", state.scaler.state_dict()))
    except (RuntimeError, ValueError, KeyError, TypeError) as error:
        return str(error).strip().splitlines()[-1][:200]
    for key in ("step", "epoch", "epoch_step", "epoch_losses", "train_seconds", "tokens", "items"):
        setattr(state, key, ckpt.get(key, getattr(state, key)))
    checkpoints.set_rng_state(ckpt["rng"])
    state.set_lr()
    return None


def check_resume(ckpt, used, cfg, log=print):
    """Refuse to resume with settings the checkpoint's model was not trained with; log allowed changes."""
    refused, allowed = cfg.resume_differences(ckpt.get("config", {}), epochs_done=ckpt.get("epoch", 0))
    if refused:
        raise ConfigError(
            f"cannot resume {used}: it was trained with other settings ({'; '.join(refused)}). Resume with "
            f"the run's own settings (leave these options out), or start a new run with another --out")
    if allowed:
        log(f"resuming with changed settings (allowed: they do not change what was trained so far): "
            f"{'; '.join(allowed)}")


def _prepare(task, saved, dist, log):
    """task.prepare on the main process first (it may train a tokenizer), then on the others with its state."""
    if dist is None:
        return task.prepare(task.out_dir, saved, log)
    if dist.is_main:
        task.prepare(task.out_dir, saved, log)
    shared = dist.broadcast(task.state_dict() if dist.is_main else None)
    if not dist.is_main:
        task.prepare(None, shared, lambda *a, **k: None)


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def run_epoch(task, state, batches, history, show_progress=True, on_step=None):
    """Go on with the current epoch (its global `batches`) from state.epoch_step; True when it is complete.

    `on_step(state)` runs after every step and may return True to stop here (a checkpoint, Ctrl-C)."""
    cfg, dist = task.cfg, state.dist
    rank = dist.rank if dist is not None else 0
    state.model.train()
    bar = tqdm(total=len(batches), initial=state.epoch_step, desc=f"{task.unit} {state.epoch + 1}", leave=False,
               disable=not show_progress, mininterval=1.0 if sys.stderr.isatty() else 30.0)
    tokens_before, seconds_before = state.tokens, state.train_seconds
    stopped = False
    for batch in batches[state.epoch_step:]:
        start = time.perf_counter()
        micro = [task.to_device(part, state.device)
                 for part in my_parts(task.split(batch, task.parts), state.world_size, rank)]
        tokens = int(state.global_sum(sum(task.tokens(m) for m in micro)))
        loss = train_step(state, micro, task.loss, task.count)
        _sync(state.device)
        state.train_seconds += time.perf_counter() - start
        state.tokens += tokens
        if state.world_size > 1 and cfg.time_budget_minutes:   # the lr and the stop follow the clock:
            state.train_seconds = dist.max(state.train_seconds)  # every process reads the same one
            state.set_lr()
        state.epoch_step += 1
        state.epoch_losses.append(loss)
        if state.step % cfg.log_every == 0:
            history["step"].append(state.step)
            history["step_loss"].append(loss)
            history["step_lr"].append(state.optimizer.param_groups[0]["lr"])
        tok_s = (state.tokens - tokens_before) / max(state.train_seconds - seconds_before, 1e-9)
        bar.update(1)
        bar.set_postfix(loss=f"{loss:.3f}", lr=f"{state.optimizer.param_groups[0]['lr']:.2e}",
                        tok_s=f"{tok_s:,.0f}", refresh=False)
        if state.progress() >= 1.0:
            bar.total = bar.n           # a run that ends here ends well: close the bar as complete
            break
        if on_step is not None and on_step(state):
            stopped = True
            break
    bar.close()
    if stopped:
        return False
    state.epoch += 1
    state.epoch_step = 0
    return True


def new_history():
    return {"epoch": [], "train_loss": [], "train_seconds": [], "step": [], "step_loss": [], "step_lr": []}


def _record(history, state, train_loss, metrics):
    for key, value in (("epoch", state.epoch), ("train_loss", train_loss), ("train_seconds", state.train_seconds),
                       *metrics.items()):
        history.setdefault(key, []).append(value)


def _load_checkpoint(task, ckpt_path, found, dist, log):
    """(state, checkpoint or None): the run resumed from the newest usable checkpoint, or a new one."""
    bad = []
    while True:
        seed_everything(task.cfg.seed)
        ckpt, used = checkpoints.load(ckpt_path, dist, REQUIRED, log, skip=bad) if found else (None, None)
        if ckpt is not None:
            check_resume(ckpt, used, task.cfg, log)
            task.check(task.world_size)               # again: the run's own settings may have been taken
        _prepare(task, ckpt.get("task") if ckpt is not None else None, dist, log)
        state = make_state(task, dist=dist, wrap=(lambda model: distributed.wrap_model(model, dist)) if dist else None)
        if ckpt is None:
            return state, None, None
        problem = restore_run(state, ckpt)
        if problem is None:
            return state, ckpt, used
        checkpoints.forget(used)
        bad.append(used)
        log(f"warning: {used} does not fit the model ({problem}); trying the previous checkpoint")


def train(task, out_dir=None, resume=False, overwrite=False, show_progress=True, log=print, dist=None):
    """Train `task` in `out_dir` (None: in memory, nothing written); returns (state, history, results).

    resume: False (a new run; a run kept in out_dir is refused unless `overwrite`), True (go on with the run
    kept there, or start one), "required" (go on; refused where there is nothing to resume: --resume).
    `dist` (distributed.setup()): several processes train one model with DDP; rank 0 alone logs, evaluates
    and writes; the other ranks return (state, history, None) after training.
    """
    cfg = task.cfg
    dist = dist if dist is not None and dist.active else None
    is_main = dist is None or dist.is_main
    if not is_main:
        log, show_progress = (lambda *args, **kwargs: None), False
    task.world_size = dist.world_size if dist else 1
    task.parts = task.world_size * cfg.accum_steps
    task.check(task.world_size)                         # impossible settings fail here, before any work
    task.device = dist.device if dist else resolve_device(cfg.device)
    out_dir = Path(out_dir) if out_dir is not None else None
    if out_dir is not None:
        problem = None
        if is_main:
            try:
                check_out_dir(out_dir, resume, overwrite, task.output_files)
            except ConfigError as error:
                problem = error
        problem = dist.broadcast(problem) if dist else problem
        if problem is not None:
            raise problem
        if is_main:
            out_dir.mkdir(parents=True, exist_ok=True)
    task.out_dir = out_dir if is_main else None
    keep_freed_memory()
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    ckpt_path = out_dir / "checkpoint.pt" if out_dir is not None else None
    found = bool(resume) and ckpt_path is not None and is_main and checkpoints.exists(ckpt_path)
    found = dist.broadcast(found) if dist else found          # rank 0's file decides
    state, ckpt, used = _load_checkpoint(task, ckpt_path, found, dist, log)
    first = task.batches(state.epoch)                          # the current epoch's batches, computed once
    per_epoch = len(first) if state.epoch == 0 else len(task.batches(0))
    check_enough_steps(per_epoch)
    state.total_steps = task.total_steps = task.num_steps(per_epoch)
    if used is not None and state.step > state.total_steps:   # --resume --steps N, N below the steps done
        raise ConfigError(f"cannot resume {used}: it has done {state.step} steps, more than the "
                          f"{state.total_steps} asked for; resume with at least --steps {state.step}, or start a new "
                          "run with another --out")
    state.set_lr()
    history = new_history()
    if ckpt is not None:
        history = ckpt["history"]
        ckpt = None                                # free its memory
        log(f"resumed from {used}: {task.unit} {state.epoch + 1}, step {state.step} of {state.total_steps}, "
            f"{state.train_seconds / 60:.1f} min of training done")
    log(task.describe_start(state, per_epoch))
    log(task.describe_batch(task.world_size))
    if dist:                  # the same weights everywhere (DDP copied rank 0's), different dropout masks
        torch.manual_seed(cfg.seed + 1000 * (state.epoch + 1) + 7 * state.epoch_step + dist.rank)
    every = 60.0 * cfg.checkpoint_minutes if cfg.checkpoint_minutes is not None else math.inf
    last_save = [time.monotonic()]

    def on_step(state):
        stop = dist.broadcast(interrupt.requested) if dist else interrupt.requested
        due = time.monotonic() - last_save[0] >= every
        due = stop or (dist.broadcast(due) if dist else due)
        if due and ckpt_path is not None:
            save_run(task, state, ckpt_path, history)
            last_save[0] = time.monotonic()
        return stop

    with StopOnInterrupt(log) as interrupt:
        while state.epoch < task.num_epochs() and state.progress() < 1.0:
            batches, first = first if first is not None else task.batches(state.epoch), None
            if not run_epoch(task, state, batches, history, show_progress, on_step):
                where = (f"the checkpoint is saved in {out_dir}. Go on with the same command and --resume "
                         f"(`{task.command} --preset {cfg.preset} --out {out_dir} --resume` and the options you "
                         "gave), or run the training cell again." if ckpt_path is not None
                         else "this run was kept in memory only: nothing is saved.")
                raise TrainingStopped(f"training stopped at step {state.step} of {state.total_steps} "
                                      f"({task.unit} {state.epoch + 1}); {where}")
            train_loss = float(np.mean(state.epoch_losses)) if state.epoch_losses else float("nan")
            state.epoch_losses = []
            if is_main:                   # rank 0 alone evaluates and writes the checkpoint
                metrics = task.evaluate(state.raw_model, history)
                _record(history, state, train_loss, metrics)
                log(f"{task.unit} {state.epoch}: train loss {train_loss:.3f}, {task.describe(metrics)}, step "
                    f"{state.step}, {state.train_seconds / 60:.1f} min, "
                    f"{state.tokens / max(state.train_seconds, 1e-9):,.0f} tok/s")
            if ckpt_path is not None:
                save_run(task, state, ckpt_path, history)   # rank 0 writes, the others wait
            last_save[0] = time.monotonic()
    if dist:
        state.replica_max_diff = distributed.replica_max_diff(state.model, dist)   # 0.0: identical replicas
    if not is_main:
        return state, history, None
    results = task.finish(state.raw_model, history, log)
    if out_dir is not None:
        atomic_save({"model": cpu_state_dict(state.raw_model), "config": cfg.to_dict(), **task.model_extras()},
                    out_dir / "model.pt")
        atomic_write_text(_json(history), out_dir / "history.json")
    return state, history, results


def _json(value):
    return json.dumps(value, indent=1, ensure_ascii=False)


def run(task, out_dir=None, resume=False, overwrite=False, show_progress=True, log=print, dist=None, command=None,
        reference=None):
    """train + report.json (+ the reference file `reference`); returns the report (None on ranks other than 0).

    `out_dir`: None = task.default_out(). `command`: the command line to record (the command line passes it).
    """
    started, load_before = time.perf_counter(), load_average()
    out_dir = Path(out_dir) if out_dir is not None else task.default_out()
    state, history, results = train(task, out_dir, resume=resume, overwrite=overwrite, show_progress=show_progress,
                                    log=log, dist=dist)
    if results is None:
        return None
    report = build_report(task, state, results, command, time.perf_counter() - started, load_before)
    atomic_write_text(_json(report), out_dir / "report.json")
    if reference:
        path = write_reference(task, report, history, reference, state.raw_model)
        log(f"written: the reference file {path.name} ({task.describe_reference(report)})")
    return report
