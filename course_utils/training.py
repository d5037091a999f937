"""Training: ONE optimizer step for every model of the course, the lessons' loop, the optimizer, the
learning-rate schedules and the label-smoothed loss. As in minGPT's trainer, nothing here is specific
to a model: the loss function is where a model meets its data.

    history = train(model, data, loss_fn, num_steps=2000, lr=3e-3)   # lessons 02-09 and 11
    plot_learning_curves({"train loss": smooth(history)})

    state = TrainState(model, optimizer)                              # lesson 10, and several processes
    loss = train_step(state, micro_batches, loss_fn, count)           # one optimizer step

`loss_fn(model, batch)` returns the batch's loss SUMMED over its items (tokens), and `count(batch)`
how many items it holds (default: 1 per batch, for a loss_fn that returns a mean). `train_step`
divides by the items of the whole step, so that accumulating micro-batches, or training on several
processes (DistributedDataParallel, see distributed.py), gives the gradient of one big batch.
"""
import contextlib
import dataclasses
from typing import Any, Callable, Optional

import numpy as np
import torch
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel
from tqdm.auto import tqdm

from .precision import autocast


# ---------------------------------------------------------------------------------------------
# The model being trained, possibly wrapped
# ---------------------------------------------------------------------------------------------
def unwrap(model):
    """The plain module inside DDP (and torch.compile): what to save, decode and evaluate with."""
    model = getattr(model, "_orig_mod", model)        # torch.compile(model)
    if isinstance(model, DistributedDataParallel):
        model = model.module
    return getattr(model, "_orig_mod", model)         # DDP(torch.compile(model))


def sync_gradients(model, sync):
    """Context for one micro-batch's forward and backward: under DDP, all-reduce only when `sync`.

    The other micro-batches accumulate their gradients locally under DDP's no_sync(); the
    all-reduce of the last one then averages the whole step's gradients at once.
    """
    ddp = getattr(model, "_orig_mod", model)
    if sync or not isinstance(ddp, DistributedDataParallel):
        return contextlib.nullcontext()
    return ddp.no_sync()


@dataclasses.dataclass
class TrainState:
    """Everything one optimizer step needs, and the counters a run reports and resumes from."""
    model: torch.nn.Module                      # the module stepped (maybe compiled / DDP-wrapped)
    optimizer: torch.optim.Optimizer
    scaler: Any = None                          # torch.amp.GradScaler (precision.grad_scaler); None: off
    device: torch.device = torch.device("cpu")
    amp_dtype: Optional[torch.dtype] = None     # autocast dtype (precision.resolve_amp); None: fp32
    clip_norm: Optional[float] = 1.0            # clip the gradient norm (None: no clipping)
    lr_schedule: Optional[Callable] = None      # lr_schedule(step) -> learning rate of optimizer step `step`
    dist: Any = None                            # distributed.Dist of several processes; None: one process
    step: int = 0                               # optimizer steps done
    items: float = 0.0                          # items (e.g. target tokens) trained on, all processes

    def __post_init__(self):
        if self.scaler is None:
            self.scaler = torch.amp.GradScaler(self.device.type, enabled=False)
        self.set_lr()

    @property
    def raw_model(self):
        return unwrap(self.model)

    @property
    def world_size(self):
        return self.dist.world_size if self.dist is not None else 1

    def global_sum(self, value):
        return self.dist.sum(value) if self.dist is not None else value

    def set_lr(self):
        """Set the learning rate of the NEXT optimizer step (step + 1) from the schedule."""
        if self.lr_schedule is None:
            return None
        lr = self.lr_schedule(self.step + 1)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        return lr


def train_step(state, micro_batches, loss_fn, count=lambda batch: 1):
    """One optimizer step over `micro_batches`; returns the mean loss per item of the whole step.

    Each micro-batch's summed loss is divided by the items of the whole step (over all processes)
    and multiplied by the number of processes, because DDP averages the gradients in the last
    backward. Then: unscale (fp16), clip the gradient norm, step, zero the gradients, and set the
    learning rate of the next step.
    """
    total = float(state.global_sum(float(sum(count(batch) for batch in micro_batches))))
    loss_sum = 0.0
    for j, batch in enumerate(micro_batches):
        with sync_gradients(state.model, j == len(micro_batches) - 1):
            with autocast(state.device, state.amp_dtype):
                loss = loss_fn(state.model, batch)
            state.scaler.scale(loss * state.world_size / total).backward()
        loss_sum += float(loss.detach())
    state.scaler.unscale_(state.optimizer)          # clip the true gradients, not the scaled ones
    if state.clip_norm:
        torch.nn.utils.clip_grad_norm_(state.model.parameters(), state.clip_norm, foreach=True)
    state.scaler.step(state.optimizer)              # skipped when fp16 gradients overflowed
    state.scaler.update()
    state.optimizer.zero_grad(set_to_none=True)
    state.step += 1
    state.items += total
    state.set_lr()
    return float(state.global_sum(loss_sum)) / total


# ---------------------------------------------------------------------------------------------
# The lessons' loop
# ---------------------------------------------------------------------------------------------
def train(model, data, loss_fn, num_steps, lr=1e-3, optimizer=None, grad_clip=1.0,
          progress=True, desc="training"):
    """Take `num_steps` optimizer steps (Adam unless `optimizer` is given); return the losses.

    `data` is any re-iterable of batches (a list, a DataLoader, a BatchLoader), iterated again when
    exhausted; `loss_fn(model, batch)` returns the batch's mean loss (a scalar tensor).
    """
    state = TrainState(model, optimizer or torch.optim.Adam(model.parameters(), lr=lr), clip_norm=grad_clip)
    model.train()
    history, batches = [], iter(data)
    bar = tqdm(range(num_steps), desc=desc, disable=not progress)
    for step in bar:
        try:
            batch = next(batches)
        except StopIteration:                 # one pass over the data done: start the next
            batches = iter(data)
            try:
                batch = next(batches)
            except StopIteration:
                raise ValueError("train() got data without any batch") from None
        history.append(train_step(state, [batch], loss_fn))
        if step % 20 == 0 or step == num_steps - 1:
            bar.set_postfix(loss=f"{np.mean(history[-20:]):.3f}")
    model.eval()
    return history


def smooth(values, window=50):
    """Moving average over `window` values (shorter at the start): for readable loss curves."""
    values = np.asarray(values, dtype=float)
    if len(values) == 0:
        return values
    cumsum = np.cumsum(np.insert(values, 0, 0.0))
    starts = np.maximum(np.arange(1, len(values) + 1) - window, 0)
    return (cumsum[1:] - cumsum[starts]) / (np.arange(1, len(values) + 1) - starts)


# ---------------------------------------------------------------------------------------------
# Optimizer, schedules, loss (lesson 10)
# ---------------------------------------------------------------------------------------------
def make_optimizer(model, lr, weight_decay=0.01, betas=(0.9, 0.98)):
    """AdamW; no weight decay on biases, norms and embeddings (and the output layer tied to them)."""
    decay, no_decay = [], []
    for name, p in {id(p): (n, p) for n, p in model.named_parameters()}.values():
        (decay if p.dim() >= 2 and "embed" not in name and "generator" not in name else no_decay).append(p)
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=lr, betas=tuple(betas), fused=True)   # one kernel per step, CPU or GPU


def noam_lr(step, d_model, warmup_steps, factor=1.0):
    """The paper's schedule: factor * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5), step >= 1."""
    step = max(step, 1)
    return factor * d_model ** -0.5 * min(step ** -0.5, step * warmup_steps ** -1.5)


def warmup_lr(step, progress, peak, warmup_steps, schedule="linear", warmup_progress=0.0):
    """Learning rate at optimizer step `step` (1-based); `progress` in [0, 1] is the part of the run done.

    linear: peak * step / warmup during warm-up, then a linear decay from peak to 0 over the rest of the
            run (`warmup_progress` = the part of the run the warm-up takes, warmup_steps / total steps)
    noam:   peak * min(step / warmup, sqrt(warmup / step))   (the paper's shape, with its peak = `peak`)
    """
    step = max(step, 1)
    if schedule == "noam":                # the paper's schedule, rescaled so that its peak is `peak`
        return peak * noam_lr(step, 1, warmup_steps) / noam_lr(warmup_steps, 1, warmup_steps)
    if schedule == "linear":
        if step <= warmup_steps:
            return peak * step / warmup_steps
        decay = (progress - warmup_progress) / max(1.0 - warmup_progress, 1e-9)
        return peak * min(1.0, max(0.0, 1.0 - decay))
    raise ValueError(f"schedule must be 'linear' or 'noam', got {schedule!r}")


def label_smoothed_loss(logits, target, smoothing=0.1, pad_id=0, reduction="mean"):
    """Cross-entropy against the smoothed target (1 - ε) one_hot(y) + ε / V, padding ignored.

    loss_t = (1 - ε) (-log p(y_t)) + ε mean_v (-log p(v));   mean (or sum) over non-pad positions.
    Equal to F.cross_entropy(..., label_smoothing=ε, ignore_index=pad_id). logits (B, T, V), target (B, T).
    """
    log_probs = F.log_softmax(logits.float(), dim=-1)                        # (B, T, V)
    nll = -log_probs.gather(-1, target.unsqueeze(-1)).squeeze(-1)            # (B, T)
    uniform = -log_probs.mean(dim=-1)                                        # (B, T)
    loss = (1.0 - smoothing) * nll + smoothing * uniform
    keep = target != pad_id
    total = (loss * keep).sum()
    return total if reduction == "sum" else total / keep.sum().clamp(min=1)
