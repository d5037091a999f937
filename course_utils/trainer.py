"""Lesson 10's training run: epochs of bucketed steps, validation, checkpoints, exact resume.

    state, data, history = train(cfg, out_dir, resume=True)

    train(cfg, out_dir)                 the whole run (data, model, epochs, checkpoints, averaging)
      setup_state(cfg, vocab_size)        model, AdamW, precision, schedule: a TranslatorState
      train_epoch(state, data, ...)       the epoch's optimizer steps, each one training.train_step
      evaluate_loss(model, pairs, cfg)    validation loss after every epoch (and greedy BLEU)

Checkpoints: `checkpoint.pt` after every epoch and every `cfg.checkpoint_minutes` within one
(atomically, the last good one kept as checkpoint.prev.pt). A checkpoint holds the model, the
optimizer, the gradient scaler, the counters, the step reached inside the epoch and every random
generator's state, so that `resume=True` goes on with the same batches in the same order, the same
dropout masks and the same learning rate as if the run had never stopped. Ctrl-C (or the notebook's
stop button) ends the current step, saves, and says how to resume.
"""
import collections
import ctypes
import dataclasses
import json
import math
import signal
import sys
import threading
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from . import checkpoints, distributed
from .config import resolve_device, seed_everything
from .data.translation import batch_sampler, collate, prepare_data_everywhere, to_device
from .decoding import bleu_on
from .files import atomic_save, atomic_write_text
from .plotting import plot_run_history
from .precision import autocast, grad_scaler, resolve_amp
from .presets import build_model, count_parameters
from .tensors import cpu_state_dict
from .tokenization import PAD_ID
from .training import TrainState, make_optimizer, train_step, warmup_lr


class TrainingStopped(KeyboardInterrupt):
    """Ctrl-C stopped the run at the end of a step; the checkpoint is saved. The message says how to go on."""


@dataclasses.dataclass
class TranslatorState(TrainState):
    """training.TrainState, plus what a translation run counts and resumes from."""
    cfg: object = None
    epoch: int = 0                  # epochs done
    epoch_step: int = 0             # optimizer steps done in the current epoch
    epoch_losses: list = dataclasses.field(default_factory=list)   # this epoch's step losses so far
    train_seconds: float = 0.0      # time spent in train steps (evaluation excluded)
    tokens: int = 0                 # non-pad source + target tokens trained on (by all processes)
    total_steps: int = None         # optimizer steps of the whole run
    replica_max_diff: float = 0.0   # after training: largest difference between the processes' replicas
    averaging: dict = None          # after training: which weights model.pt holds (see _average)

    def progress(self):
        """Fraction of the run done: steps done, or training time used if a time cap is set and larger."""
        done = self.step / self.total_steps if self.total_steps else 0.0
        if self.cfg.time_budget_minutes:
            done = max(done, self.train_seconds / (60.0 * self.cfg.time_budget_minutes))
        return min(done, 1.0)


def micro_batch_tokens(cfg, world_size):
    """Padded tokens per micro-batch and process: batch_tokens / (world_size x accum_steps), exactly."""
    micro = distributed.micro_batch_size(cfg.batch_tokens, world_size, cfg.accum_steps)
    if micro < cfg.max_tokens_per_sentence + 1:
        raise distributed.DistributedConfigError(
            f"a micro-batch of {micro} tokens (batch_tokens {cfg.batch_tokens} / ({world_size} processes x "
            f"{cfg.accum_steps} accumulation steps)) cannot hold the longest sentence "
            f"({cfg.max_tokens_per_sentence + 1} tokens): use fewer processes or accumulation steps")
    return micro


def setup_state(cfg, vocab_size, device=None, dist=None):
    """Model, optimizer, scaler and precision on the device: everything train() steps.

    With `dist` (a distributed.Dist of several processes) the stepped model is wrapped in DDP.
    """
    if dist is not None:
        device = dist.device
    device = resolve_device(cfg.device) if device is None else device
    amp_dtype = resolve_amp(cfg.amp, device)
    raw_model = build_model(cfg, vocab_size).to(device)
    model = raw_model if dist is None else distributed.wrap_model(raw_model, dist)
    if cfg.compile:
        model = torch.compile(model)
    state = TranslatorState(model, make_optimizer(raw_model, cfg.lr, cfg.weight_decay, cfg.betas),
                            grad_scaler(device, amp_dtype), device, amp_dtype, cfg.clip_norm, dist=dist, cfg=cfg)
    state.lr_schedule = lambda step: warmup_lr(step, state.progress(), cfg.lr, cfg.warmup_steps, cfg.schedule,
                                               cfg.warmup_steps / state.total_steps if state.total_steps else 0.0)
    state.set_lr()
    return state


def forward_loss(model, batch, label_smoothing):
    """One micro-batch -> label-smoothed loss SUMMED over its target tokens (float32 logits).

    The output layer and the loss run on the real (non-pad) target positions only: no work, and no
    (B, T, V) float copy, for the padding (measured 1.19x faster per step, benchmarks/train_profile.py).
    """
    keep = batch["tgt_out"] != PAD_ID                                              # (B, T)
    logits = model(batch["src"], batch["tgt_in"], positions=keep)                  # (n, V), n real tokens
    with torch.autocast(logits.device.type, enabled=False):                       # the loss in float32
        return F.cross_entropy(logits.float(), batch["tgt_out"][keep], label_smoothing=label_smoothing,
                               reduction="sum")


def translation_step(state, batches):
    """One optimizer step on `batches` (collated, on the device); returns the mean loss per target token."""
    return train_step(state, batches, lambda model, batch: forward_loss(model, batch, state.cfg.label_smoothing),
                      count=lambda batch: batch["tgt_tokens"])


@torch.no_grad()
def evaluate_loss(model, pairs, cfg, device, amp_dtype=None):
    """Mean label-smoothed loss and plain cross-entropy per target token on `pairs`."""
    model.eval()
    sampler = batch_sampler(pairs, max(cfg.batch_tokens, 2048), epoch=0, shuffle=False)
    smoothed = plain = tokens = 0.0
    for idx in sampler:
        batch = to_device(collate([pairs[i] for i in idx]), device)
        with autocast(device, amp_dtype):
            logits = model(batch["src"], batch["tgt_in"])
        logits = logits.float().transpose(1, 2)
        smoothed += float(F.cross_entropy(logits, batch["tgt_out"], ignore_index=PAD_ID,
                                          label_smoothing=cfg.label_smoothing, reduction="sum"))
        plain += float(F.cross_entropy(logits, batch["tgt_out"], ignore_index=PAD_ID, reduction="sum"))
        tokens += batch["tgt_tokens"]
    return smoothed / max(tokens, 1), plain / max(tokens, 1)


# ---------------------------------------------------------------------------------------------
# Checkpoints of a run
# ---------------------------------------------------------------------------------------------
def new_history():
    return {"epoch": [], "train_loss": [], "val_loss": [], "val_nll": [], "val_bleu": [],
            "train_seconds": [], "step": [], "step_loss": [], "step_lr": []}


def save_run(state, path, history, snapshots):
    """The checkpoint of a run: everything needed to go on exactly where it stopped (rank 0 writes)."""
    main = state.dist is None or state.dist.is_main
    payload = None if not main else {
        "model": cpu_state_dict(state.raw_model), "optimizer": state.optimizer.state_dict(),
        "scaler": state.scaler.state_dict(), "step": state.step, "epoch": state.epoch,
        "epoch_step": state.epoch_step, "epoch_losses": list(state.epoch_losses),
        "train_seconds": state.train_seconds, "tokens": state.tokens, "items": state.items,
        "config": state.cfg.to_dict(), "history": history, "snapshots": list(snapshots),
        "rng": checkpoints.rng_state()}
    checkpoints.save(payload, path, state.dist)


def load_run(state, path, log=print):
    """Restore `state` from the newest readable checkpoint at `path`; returns (history, snapshots)."""
    ckpt = checkpoints.load(path, state.dist, required=("model", "optimizer", "step", "rng"), log=log)
    state.raw_model.load_state_dict(ckpt["model"])
    state.optimizer.load_state_dict(ckpt["optimizer"])
    state.scaler.load_state_dict(ckpt["scaler"])
    for key in ("step", "epoch", "epoch_step", "epoch_losses", "train_seconds", "tokens", "items"):
        setattr(state, key, ckpt[key])
    checkpoints.set_rng_state(ckpt["rng"])
    state.set_lr()
    return ckpt["history"], ckpt["snapshots"]


def _keep_freed_memory():
    """glibc (Linux) gives every freed block over 32 MB back to the system, so each step pays page
    faults again for its logits: keep freed memory for reuse instead (measured 1.10x faster per step
    on the cpu preset, benchmarks/train_profile.py). A no-op where glibc is not the allocator."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(-4, 0)            # M_MMAP_MAX: large blocks from the heap, not from mmap
        libc.mallopt(-1, 1 << 30)      # M_TRIM_THRESHOLD: give memory back only above 1 GiB free
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


# ---------------------------------------------------------------------------------------------
# The epochs
# ---------------------------------------------------------------------------------------------
def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def train_epoch(state, data, history, show_progress=True, on_step=None):
    """Go on with the current epoch from state.epoch_step; returns True when the epoch is complete.

    `on_step(state)` runs after every step and may return True to stop here (a checkpoint, Ctrl-C).
    """
    cfg, dist = state.cfg, state.dist or distributed.Dist()
    state.model.train()
    micro = micro_batch_tokens(cfg, state.world_size)
    sampler = batch_sampler(data.train, micro, state.epoch, cfg.seed, world_size=state.world_size, rank=dist.rank)
    # full optimizer steps only (each one global batch), the same number on every process
    steps = distributed.full_steps(list(sampler), len(sampler.batches()), state.world_size, cfg.accum_steps)
    bar = tqdm(total=len(steps), initial=state.epoch_step, desc=f"epoch {state.epoch + 1}", leave=False,
               disable=not show_progress, mininterval=1.0 if sys.stderr.isatty() else 30.0)
    tokens_before, seconds_before = state.tokens, state.train_seconds
    stopped = False
    for indices_list in steps[state.epoch_step:]:
        start = time.perf_counter()
        batches = [to_device(collate([data.train[i] for i in idx]), state.device) for idx in indices_list]
        src_tokens = int(state.global_sum(sum(b["src_tokens"] for b in batches)))
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


def train(cfg, out_dir, resume=False, show_progress=True, log=print, data=None, dist=None):
    """Train on Multi30k, validating every epoch; returns (state, data, history).

    Writes out_dir/checkpoint.pt (see the module's docstring) and, at the end, out_dir/model.pt: the
    final weights, or the average of the last `cfg.average_last` epochs' weights when that scores
    better on validation (greedy BLEU); the choice is in state.averaging. `dist`
    (distributed.setup()): several processes train one model with DDP; rank 0 alone logs, evaluates
    and writes; the other ranks return after training.
    """
    dist = dist or distributed.Dist()
    if not dist.is_main:
        log, show_progress = (lambda *args, **kwargs: None), False
    _keep_freed_memory()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    seed_everything(cfg.seed)
    data = data or prepare_data_everywhere(cfg, out_dir, dist)
    state = setup_state(cfg, data.tokenizer.vocab_size, dist=dist if dist.active else None)
    micro = micro_batch_tokens(cfg, dist.world_size)
    num_batches = len(batch_sampler(data.train, micro, 0, cfg.seed, world_size=dist.world_size).batches())
    distributed.check_enough_batches(num_batches, dist.world_size, cfg.accum_steps, "the training data")
    per_epoch = num_batches // (dist.world_size * cfg.accum_steps)     # the same for any number of processes
    state.total_steps = per_epoch * cfg.epochs     # for the schedule; an epoch's bucketed batches vary by a few,
                                                   # so a run may end a few steps short of it
    history, snapshots = new_history(), collections.deque(maxlen=max(cfg.average_last, 1))
    ckpt_path = out_dir / "checkpoint.pt"
    if dist.broadcast(resume and checkpoints.exists(ckpt_path)):      # rank 0's file decides
        history, saved = load_run(state, ckpt_path, log)
        snapshots.extend(saved)
        log(f"resumed from {ckpt_path}: epoch {state.epoch + 1}, step {state.step} of {state.total_steps}, "
            f"{state.train_seconds / 60:.1f} min of training done")
    log(f"{cfg.preset} preset on {state.device} (autocast: {state.amp_dtype or 'off'}): "
        f"{count_parameters(state.raw_model) / 1e6:.2f}M parameters, vocabulary {data.tokenizer.vocab_size}, "
        f"{len(data.train)} training pairs, {per_epoch} steps per epoch, {state.total_steps} steps in all")
    if dist.world_size > 1:   # the same weights everywhere (DDP copied rank 0's), different dropout masks
        torch.manual_seed(cfg.seed + 1000 * (state.epoch + 1) + 7 * state.epoch_step + dist.rank)
    every = 60.0 * cfg.checkpoint_minutes if cfg.checkpoint_minutes is not None else math.inf
    last_save = [time.monotonic()]

    def on_step(state):
        stop = dist.broadcast(interrupt.requested) if dist.active else interrupt.requested
        due = stop or dist.broadcast(time.monotonic() - last_save[0] >= every)
        if due:
            save_run(state, ckpt_path, history, snapshots)
            last_save[0] = time.monotonic()
        return stop

    with _StopOnInterrupt(log) as interrupt:
        while state.epoch < cfg.epochs and state.progress() < 1.0:
            if not train_epoch(state, data, history, show_progress, on_step):
                raise TrainingStopped(
                    f"training stopped at step {state.step} of {state.total_steps} (epoch {state.epoch + 1}); "
                    f"the checkpoint is saved in {out_dir}. Go on with `python -m course_utils.translate "
                    f"--preset {cfg.preset} --out {out_dir} --resume`, or run the training cell again.")
            train_loss = float(np.mean(state.epoch_losses)) if state.epoch_losses else float("nan")
            state.epoch_losses = []
            if dist.is_main:              # rank 0 alone evaluates and writes the checkpoint
                val_loss, val_nll = evaluate_loss(state.raw_model, data.val, cfg, state.device, state.amp_dtype)
                bleu, _ = bleu_on(state.raw_model, data.tokenizer, _val_pairs(data, cfg), state.device,
                                  batch_sentences=cfg.eval_batch_sentences, amp_dtype=state.amp_dtype)
                for key, value in (("epoch", state.epoch), ("train_loss", train_loss), ("val_loss", val_loss),
                                   ("val_nll", val_nll), ("val_bleu", bleu.score),
                                   ("train_seconds", state.train_seconds)):
                    history[key].append(value)
                snapshots.append(cpu_state_dict(state.raw_model))
                log(f"epoch {state.epoch}: train loss {train_loss:.3f}, val loss {val_loss:.3f} "
                    f"(nll {val_nll:.3f}), val BLEU {bleu.score:.2f}, step {state.step}, "
                    f"{state.train_seconds / 60:.1f} min, {state.tokens / max(state.train_seconds, 1e-9):,.0f} tok/s")
            save_run(state, ckpt_path, history, snapshots)     # rank 0 writes, the others wait for it
            last_save[0] = time.monotonic()
    state.replica_max_diff = distributed.replica_max_diff(state.model, dist)   # 0.0: identical replicas
    if not dist.is_main:
        return state, data, history
    state.averaging = _average(state, data, history, snapshots, log)
    atomic_save({"model": cpu_state_dict(state.raw_model), "config": cfg.to_dict(),
                 "tokenizer": data.tokenizer.to_str(), "averaging": state.averaging}, out_dir / "model.pt")
    atomic_write_text(json.dumps(history, indent=1), out_dir / "history.json")
    if history["epoch"]:
        plot_run_history(history, out_dir / "learning_curves.png")
    return state, data, history

