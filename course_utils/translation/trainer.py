"""Lesson 10's training run: epochs of bucketed steps, validation, checkpoints, exact resume.

    state, data, history = train(cfg, out_dir, resume=True)

    train(cfg, out_dir)                 the whole run (data, model, epochs, checkpoints, averaging)
      step.setup_state(cfg, vocab)        model, AdamW, precision, schedule: a TranslatorState
      train_epoch(state, data, ...)       the epoch's optimizer steps, each one step.translation_step
      step.evaluate_loss(model, pairs)    validation loss after every epoch (and greedy BLEU)

Checkpoints (checkpoints.py): `checkpoint.pt` after every epoch and every `cfg.checkpoint_minutes`
within one. A checkpoint holds the model, the optimizer, the gradient scaler, the counters, the step
reached inside the epoch, every random generator's state, the settings and the tokenizer, so that
`resume=True` goes on with the same batches in the same order, the same dropout masks and the same
learning rate as if the run had never stopped. Ctrl-C (or the notebook's stop button) ends the current
step, saves, and says how to resume. A run never silently replaces another: a folder that holds one
needs `resume=True` (which refuses settings the run was not trained with) or `overwrite=True`.
"""
import collections
import ctypes
import json
import math
import signal
import sys
import threading
import time
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

from ..config import seed_everything
from ..data.batch import collate
from ..files import atomic_save, atomic_write_text
from ..tensors import cpu_state_dict
from . import checkpoints, distributed
from .batching import check_enough_batches, full_steps, micro_batch_tokens, steps_per_epoch
from .data import batch_sampler, prepare_data, prepare_data_everywhere
from .decode import bleu_on
from .figures import plot_history
from .presets import ConfigError, check_config, count_parameters, resume_differences
from .step import evaluate_loss, setup_state, translation_step

RUN_FILES = ("checkpoint.pt", "checkpoint.prev.pt", "model.pt", "report.json")       # a folder holds a run
OUTPUT_FILES = RUN_FILES + ("tokenizer.json", "history.json", "learning_curves.png",
                            "test_2016_flickr.greedy.en", "test_2016_flickr.beam.en")


class TrainingStopped(KeyboardInterrupt):
    """Ctrl-C stopped the run at the end of a step; the checkpoint is saved. The message says how to go on."""


class RunExistsError(ConfigError):
    """The output folder holds a run that a new one would replace."""


def check_out_dir(out_dir, resume=False, overwrite=False):
    """Refuse to start a new run where one is kept, unless `overwrite` (which then deletes its files)."""
    out_dir = Path(out_dir)
    found = [name for name in RUN_FILES if (out_dir / name).exists()]
    if not found or resume:
        return
    if not overwrite:
        raise RunExistsError(
            f"{out_dir} already holds a run ({', '.join(found)}): add --resume to go on with it, give a new "
            f"--out folder for a new run, or add --overwrite to replace it")
    for name in OUTPUT_FILES:
        (out_dir / name).unlink(missing_ok=True)


def new_history():
    return {"epoch": [], "train_loss": [], "val_loss": [], "val_nll": [], "val_bleu": [],
            "train_seconds": [], "step": [], "step_loss": [], "step_lr": []}


def save_run(state, path, history, snapshots, tokenizer):
    """The checkpoint of a run: everything needed to go on exactly where it stopped (rank 0 writes)."""
    main = state.dist is None or state.dist.is_main
    payload = None if not main else {
        "model": cpu_state_dict(state.raw_model), "optimizer": state.optimizer.state_dict(),
        "scaler": state.scaler.state_dict(), "step": state.step, "epoch": state.epoch,
        "epoch_step": state.epoch_step, "epoch_losses": list(state.epoch_losses),
        "train_seconds": state.train_seconds, "tokens": state.tokens, "items": state.items,
        "config": state.cfg.to_dict(), "history": history, "snapshots": list(snapshots),
        "tokenizer": tokenizer.to_str(), "rng": checkpoints.rng_state()}
    checkpoints.save(payload, path, state.dist, required=REQUIRED)


REQUIRED = ("model", "optimizer", "step", "rng")


def restore_run(state, ckpt):
    """Put a checkpoint's weights, optimizer, counters and random generators into `state`."""
    state.raw_model.load_state_dict(ckpt["model"])
    state.optimizer.load_state_dict(ckpt["optimizer"])
    state.scaler.load_state_dict(ckpt["scaler"])
    for key in ("step", "epoch", "epoch_step", "epoch_losses", "train_seconds", "tokens", "items"):
        setattr(state, key, ckpt[key])
    checkpoints.set_rng_state(ckpt["rng"])
    state.set_lr()
    return ckpt["history"], ckpt["snapshots"]


def check_resume(ckpt, used, cfg, log=print):
    """Refuse to resume with settings the checkpoint's model was not trained with; log allowed changes."""
    refused, allowed = resume_differences(ckpt.get("config", {}), cfg, epochs_done=ckpt.get("epoch", 0))
    if refused:
        raise ConfigError(
            f"cannot resume {used}: it was trained with other settings ({'; '.join(refused)}). Resume with "
            f"the run's own settings (leave these options out), or start a new run with another --out")
    if allowed:
        log(f"resuming with changed settings (allowed: they do not change what was trained so far): "
            f"{'; '.join(allowed)}")


# glibc gives every freed block over 32 MB back to the system, so each step pays page faults again for its
# large temporaries (the logits, their float copy and gradients).
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD, M_MMAP_MAX = -1, -3, -4


def keep_freed_memory(on=True):
    """on: keep freed memory for reuse instead (no mmap, trim only above 1 GiB): the README's 1.05x
    faster per step on the cpu preset, measured by `python benchmarks/train_profile.py` (variant "keep
    freed memory"); off: glibc's settings after warm-up. A no-op where glibc is not the allocator."""
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


class _StopOnInterrupt:
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


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def train_epoch(state, data, history, show_progress=True, on_step=None):
    """Go on with the current epoch from state.epoch_step; returns True when the epoch is complete.

    `on_step(state)` runs after every step and may return True to stop here (a checkpoint, Ctrl-C).
    """
    cfg, dist = state.cfg, state.dist
    rank = dist.rank if dist is not None else 0
    state.model.train()
    micro = micro_batch_tokens(cfg, state.world_size)
    sampler = batch_sampler(data.train, micro, state.epoch, cfg.seed, world_size=state.world_size, rank=rank)
    # full optimizer steps only (each one global batch), the same number on every process
    steps = full_steps(list(sampler), len(sampler.batches()), state.world_size, cfg.accum_steps)
    bar = tqdm(total=len(steps), initial=state.epoch_step, desc=f"epoch {state.epoch + 1}", leave=False,
               disable=not show_progress, mininterval=1.0 if sys.stderr.isatty() else 30.0)
    tokens_before, seconds_before = state.tokens, state.train_seconds
    stopped = False
    for indices_list in steps[state.epoch_step:]:
        start = time.perf_counter()
        batches = [collate([data.train[i] for i in idx]).to(state.device) for idx in indices_list]
        src_tokens = int(state.global_sum(sum(b.src_tokens for b in batches)))
        items_before = state.items
        loss = translation_step(state, batches)
        _sync(state.device)
        state.train_seconds += time.perf_counter() - start
        state.tokens += src_tokens + int(state.items - items_before)
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


def _val_pairs(data, cfg):
    return data.val_text[: cfg.val_bleu_pairs] if cfg.val_bleu_pairs else data.val_text


def _average(state, data, history, snapshots, log):
    """Checkpoint averaging: keep the average of the last epochs' weights only if it does better on validation."""
    cfg = state.cfg
    final = cpu_state_dict(state.raw_model)
    choice = {"averaged_epochs": 1, "val_bleu_final": history["val_bleu"][-1] if history["val_bleu"] else None}
    if len(snapshots) > 1:
        state.raw_model.load_state_dict(checkpoints.average_state_dicts(list(snapshots)))
        bleu, _ = bleu_on(state.raw_model, data.tokenizer, _val_pairs(data, cfg), state.device,
                          batch_sentences=cfg.eval_batch_sentences, amp_dtype=state.amp_dtype)
        choice["val_bleu_averaged"] = bleu.score
        keep = choice["val_bleu_final"] is None or bleu.score > choice["val_bleu_final"]
        if keep:
            choice["averaged_epochs"] = len(snapshots)
        else:
            state.raw_model.load_state_dict(final)
        log(f"averaging the last {len(snapshots)} epochs: val BLEU {bleu.score:.2f} (final weights: "
            f"{choice['val_bleu_final']:.2f}) -> keep the {'average' if keep else 'final weights'}")
    return choice


def _validate(state, data, history, train_loss, log):
    cfg = state.cfg
    val_loss, val_nll = evaluate_loss(state.raw_model, data.val, cfg, state.device, state.amp_dtype)
    bleu, _ = bleu_on(state.raw_model, data.tokenizer, _val_pairs(data, cfg), state.device,
                      batch_sentences=cfg.eval_batch_sentences, amp_dtype=state.amp_dtype)
    for key, value in (("epoch", state.epoch), ("train_loss", train_loss), ("val_loss", val_loss),
                       ("val_nll", val_nll), ("val_bleu", bleu.score), ("train_seconds", state.train_seconds)):
        history[key].append(value)
    log(f"epoch {state.epoch}: train loss {train_loss:.3f}, val loss {val_loss:.3f} "
        f"(nll {val_nll:.3f}), val BLEU {bleu.score:.2f}, step {state.step}, "
        f"{state.train_seconds / 60:.1f} min, {state.tokens / max(state.train_seconds, 1e-9):,.0f} tok/s")


def train(cfg, out_dir, resume=False, show_progress=True, log=print, data=None, dist=None, overwrite=False):
    """Train on Multi30k, validating every epoch; returns (state, data, history).

    Writes out_dir/checkpoint.pt (see the module's docstring) and, at the end, out_dir/model.pt: the
    final weights, or the average of the last `cfg.average_last` epochs' weights when that scores
    better on validation (greedy BLEU); the choice is in state.averaging. `dist`
    (distributed.setup()): several processes train one model with DDP; rank 0 alone logs, evaluates
    and writes; the other ranks return after training. None: one process.
    """
    several = dist is not None and dist.active
    is_main = not several or dist.is_main
    world_size = dist.world_size if several else 1
    if not is_main:
        log, show_progress = (lambda *args, **kwargs: None), False
    check_config(cfg)                                   # impossible settings fail here, before any work
    out_dir = Path(out_dir)
    if is_main:
        check_out_dir(out_dir, resume, overwrite)
    keep_freed_memory()
    out_dir.mkdir(parents=True, exist_ok=True)
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    seed_everything(cfg.seed)
    ckpt_path, ckpt = out_dir / "checkpoint.pt", None
    found = resume and checkpoints.exists(ckpt_path)
    if dist.broadcast(found) if several else found:      # rank 0's file decides
        ckpt, used = checkpoints.load(ckpt_path, dist, required=REQUIRED, log=log)
        check_resume(ckpt, used, cfg, log)
    saved_tokenizer = ckpt.get("tokenizer") if ckpt is not None else None
    if data is None:
        data = (prepare_data_everywhere(cfg, out_dir, dist, saved_tokenizer, log) if several
                else prepare_data(cfg, out_dir, saved_tokenizer, log))
    state = setup_state(cfg, data.tokenizer.vocab_size, dist=dist if several else None,
                        wrap=(lambda model: distributed.wrap_model(model, dist)) if several else None)
    micro = micro_batch_tokens(cfg, world_size)
    num_batches = len(batch_sampler(data.train, micro, 0, cfg.seed, world_size=world_size).batches())
    check_enough_batches(num_batches, world_size, cfg.accum_steps, "the training data")
    per_epoch = steps_per_epoch(num_batches, world_size, cfg.accum_steps)   # the same for any number of processes
    state.total_steps = per_epoch * cfg.epochs     # for the schedule; an epoch's bucketed batches vary by a few,
                                                   # so a run may end a few steps short of it
    history, snapshots = new_history(), collections.deque(maxlen=max(cfg.average_last, 1))
    if ckpt is not None:
        history, saved = restore_run(state, ckpt)
        snapshots.extend(saved)
        ckpt = None                                # free its memory
        log(f"resumed from {used}: epoch {state.epoch + 1}, step {state.step} of {state.total_steps}, "
            f"{state.train_seconds / 60:.1f} min of training done")
    log(f"{cfg.preset} preset on {state.device} (autocast: {state.amp_dtype or 'off'}): "
        f"{count_parameters(state.raw_model) / 1e6:.2f}M parameters, vocabulary {data.tokenizer.vocab_size}, "
        f"{len(data.train)} training pairs, {per_epoch} steps per epoch, {state.total_steps} steps in all")
    if world_size > 1:        # the same weights everywhere (DDP copied rank 0's), different dropout masks
        torch.manual_seed(cfg.seed + 1000 * (state.epoch + 1) + 7 * state.epoch_step + dist.rank)
    every = 60.0 * cfg.checkpoint_minutes if cfg.checkpoint_minutes is not None else math.inf
    last_save = [time.monotonic()]

    def on_step(state):
        stop = dist.broadcast(interrupt.requested) if several else interrupt.requested
        due = stop or (dist.broadcast(time.monotonic() - last_save[0] >= every) if several
                       else time.monotonic() - last_save[0] >= every)
        if due:
            save_run(state, ckpt_path, history, snapshots, data.tokenizer)
            last_save[0] = time.monotonic()
        return stop

    with _StopOnInterrupt(log) as interrupt:
        while state.epoch < cfg.epochs and state.progress() < 1.0:
            if not train_epoch(state, data, history, show_progress, on_step):
                raise TrainingStopped(
                    f"training stopped at step {state.step} of {state.total_steps} (epoch {state.epoch + 1}); "
                    f"the checkpoint is saved in {out_dir}. Go on with the same command and --resume "
                    f"(`python -m course_utils.translation --preset {cfg.preset} --out {out_dir} --resume` "
                    "and the options you gave), or run the training cell again.")
            train_loss = float(np.mean(state.epoch_losses)) if state.epoch_losses else float("nan")
            state.epoch_losses = []
            if is_main:                   # rank 0 alone evaluates and writes the checkpoint
                _validate(state, data, history, train_loss, log)
                snapshots.append(cpu_state_dict(state.raw_model))
            save_run(state, ckpt_path, history, snapshots, data.tokenizer)   # rank 0 writes, the others wait
            last_save[0] = time.monotonic()
    if several:
        state.replica_max_diff = distributed.replica_max_diff(state.model, dist)   # 0.0: identical replicas
    if not is_main:
        return state, data, history
    state.averaging = _average(state, data, history, snapshots, log)
    atomic_save({"model": cpu_state_dict(state.raw_model), "config": cfg.to_dict(),
                 "tokenizer": data.tokenizer.to_str(), "averaging": state.averaging}, out_dir / "model.pt")
    atomic_write_text(json.dumps(history, indent=1), out_dir / "history.json")
    if history["epoch"]:
        plot_history(history, path=out_dir / "learning_curves.png")
    return state, data, history
