"""Train the course's Transformer on Multi30k German -> English, decode, and score with sacreBLEU.

    python -m course_utils.translate --preset smoke --out /tmp/l10_smoke     # CI: seconds
    python -m course_utils.translate --preset cpu   --out runs/cpu           # 2-core CPU: < 1 hour
    python -m course_utils.translate --preset gpu   --out runs/gpu           # a Colab GPU
    python -m course_utils.translate --preset cpu --out runs/cpu --resume    # go on from the checkpoint
    torchrun --standalone --nproc_per_node=4 -m course_utils.translate --preset gpu --out runs/gpu4
                                                       # 4 GPUs, DistributedDataParallel (see distributed.py)

It writes into --out: tokenizer.json, checkpoint.pt (everything needed to resume, written atomically
after every epoch), model.pt (the final weights, possibly averaged), history.json,
learning_curves.png, and report.json (preset, device, epochs, train_seconds, tokens_per_second,
bleu_greedy, bleu_beam, sacrebleu_signature, ...).

The training loop is split so that each piece can be replaced (e.g. for several processes):

    train(cfg, out_dir)                      the whole run: data, model, epochs, checkpoints
      prepare_data(cfg, out_dir)             tokenizer + encoded pairs
      build_model(cfg, vocab_size)           the course's Transformer
      make_optimizer(cfg, model)             AdamW (no weight decay on norms/biases)
      make_batch_sampler(cfg, data, epoch)   token-bucketed micro-batches of this epoch
      train_epoch(state, ...)                loops over optimizer steps:
        train_step(state, micro_batches)       one optimizer step =
          forward_loss(model, batch, cfg)        batch -> summed label-smoothed loss, tokens
          backward(loss, state)                  (scaled) backward
          optimizer_step(state)                  unscale, clip, step, zero_grad, set the lr
      evaluate(state, ...)                   validation loss and BLEU

`cfg.batch_tokens` is the EFFECTIVE batch size: padded tokens per optimizer step, summed over the
`cfg.accum_steps` micro-batches and the `world_size` processes. It does not depend on the number of
processes, and neither does the learning-rate schedule (it counts optimizer steps): with N
processes each micro-batch holds batch_tokens / (N x accum_steps) tokens, or, with
--micro-batch-tokens M, accum_steps = batch_tokens / (N x M). Under torchrun only rank 0 logs,
shows the progress bar, evaluates, and writes the checkpoint, model and report.
"""
import argparse
import contextlib
import dataclasses
import json
import math
import os
import platform
import sys
import tempfile
import time
from collections import deque
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from . import distributed
from .data.bucketing import BucketBatchSampler, pad_sequences
from .data.multi30k import load_multi30k
from .decoding import beam_search, greedy_decode, strip_after_eos
from .distributed import atomic_save
from .metrics import corpus_bleu
from .tokenization import BOS_ID, EOS_ID, PAD_ID, SubwordTokenizer, train_bpe


# ---------------------------------------------------------------------------------------------
# Configuration: one dataclass, three presets
# ---------------------------------------------------------------------------------------------
@dataclasses.dataclass
class Config:
    preset: str = "cpu"
    # data and vocabulary
    max_train_pairs: int = None        # None = all 29,000
    max_eval_pairs: int = None         # limit val/test sentences (smoke only)
    vocab_size: int = 8000             # joint German+English BPE
    max_tokens_per_sentence: int = 128
    # model (the course's Transformer)
    d_model: int = 256
    num_heads: int = 4
    num_layers: int = 3
    d_ff: int = 1024
    dropout: float = 0.1
    share_embeddings: bool = True      # one table for German, English and the output layer
    # optimisation
    epochs: int = 30
    time_budget_minutes: float = None  # stop (and finish the lr decay) after this much training
    batch_tokens: int = 3072           # EFFECTIVE batch: padded tokens per optimizer step
    accum_steps: int = 1               # micro-batches per step (per process)
    lr: float = 1e-3                   # peak learning rate
    warmup_steps: int = 400
    schedule: str = "linear"           # "linear": warm-up then linear decay to 0; "noam": inverse sqrt
    weight_decay: float = 0.01
    betas: tuple = (0.9, 0.98)
    label_smoothing: float = 0.1
    clip_norm: float = 1.0
    average_last: int = 3              # average the weights of the last epochs (1 = off)
    # speed
    amp: str = "auto"                  # auto | bf16 | fp16 | off
    compile: bool = False
    device: str = "auto"
    threads: int = None
    # evaluation
    val_bleu_pairs: int = None         # val sentences scored with greedy BLEU each epoch (None = all)
    beam_size: int = 5
    length_penalty: float = 0.6
    eval_batch_sentences: int = 128
    seed: int = 0
    log_every: int = 20                # steps between points of the step-level loss curve

    def to_dict(self):
        d = dataclasses.asdict(self)
        d["betas"] = list(d["betas"])
        return d


PRESETS = {
    # CI: a few hundred pairs, a tiny model; checks the whole path in seconds.
    "smoke": dict(max_train_pairs=400, max_eval_pairs=40, val_bleu_pairs=20, vocab_size=600, d_model=64, num_heads=2,
                  num_layers=1, d_ff=128, dropout=0.1, epochs=2, batch_tokens=1024, lr=3e-3,
                  warmup_steps=5, average_last=2, beam_size=3, eval_batch_sentences=64, log_every=2,
                  threads=1),
    # A learner's laptop / this 2-core machine: ~7.6M parameters, 35 minutes of training (time-budgeted).
    "cpu": dict(vocab_size=8000, d_model=256, num_heads=4, num_layers=3, d_ff=1024, dropout=0.1,
                epochs=40, time_budget_minutes=35, batch_tokens=2048, lr=2e-3, warmup_steps=300,
                average_last=3, beam_size=5, length_penalty=0.6, val_bleu_pairs=500),
    # A Colab GPU: a bigger model, more dropout, the full schedule (about 45 minutes on a T4).
    "gpu": dict(vocab_size=8000, d_model=512, num_heads=8, num_layers=4, d_ff=2048, dropout=0.3,
                epochs=40, batch_tokens=8192, lr=1e-3, warmup_steps=1000, average_last=5,
                beam_size=5, length_penalty=0.6, eval_batch_sentences=256),
}


def make_config(preset="cpu", **overrides):
    """The preset's Config with `overrides` (None values are ignored)."""
    if preset not in PRESETS:
        raise ValueError(f"preset must be one of {sorted(PRESETS)}, got {preset!r}")
    cfg = Config(preset=preset, **PRESETS[preset])
    for key, value in overrides.items():
        if value is None:
            continue
        if not hasattr(cfg, key):
            raise ValueError(f"unknown config field {key!r}")
        setattr(cfg, key, value)
    return cfg


# ---------------------------------------------------------------------------------------------
# Device and precision
# ---------------------------------------------------------------------------------------------
def resolve_device(name="auto"):
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def resolve_amp(amp, device):
    """The autocast dtype for `amp` on `device` (None = full fp32).

    auto: bf16 on a GPU that supports it, else fp16 (with a gradient scaler); bf16 on a CPU
    (measured on this course's 2-core CPU: bf16 autocast trains faster than fp32).
    """
    if amp not in ("auto", "bf16", "fp16", "off"):
        raise ValueError(f"amp must be auto, bf16, fp16 or off, got {amp!r}")
    if amp == "off":
        return None
    if amp == "auto":
        if device.type == "cuda":
            return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        return torch.bfloat16 if device.type == "cpu" else None
    return torch.bfloat16 if amp == "bf16" else torch.float16


def autocast(device, dtype):
    """torch.autocast for `device` and `dtype`, or a no-op when dtype is None."""
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=dtype)


# ---------------------------------------------------------------------------------------------
# Data: tokenizer, encoded pairs, batches
# ---------------------------------------------------------------------------------------------
@dataclasses.dataclass
class TranslationData:
    tokenizer: SubwordTokenizer
    train: list            # [(src_ids, tgt_ids)], tgt framed by <bos> ... <eos>
    val: list
    test: list
    val_text: list         # [(german, english)] raw text, for BLEU
    test_text: list


def encode_pairs(tok, pairs, max_tokens=None):
    src = tok.encode_batch([de for de, _ in pairs])
    tgt = tok.encode_batch([en for _, en in pairs], bos=True, eos=True)
    out = list(zip(src, tgt))
    if max_tokens is not None:
        out = [(s, t) for s, t in out if len(s) <= max_tokens and len(t) <= max_tokens + 1]
    return out


def prepare_data(cfg, out_dir=None):
    """Load Multi30k, train (or load from out_dir) the joint BPE vocabulary, encode every split."""
    train_text = load_multi30k("train", max_pairs=cfg.max_train_pairs)
    val_text = load_multi30k("val", max_pairs=cfg.max_eval_pairs)
    test_text = load_multi30k("test_2016_flickr", max_pairs=cfg.max_eval_pairs)
    path = Path(out_dir) / "tokenizer.json" if out_dir is not None else None
    if path is not None and path.exists():
        tok = SubwordTokenizer.load(path)
    else:
        tok = train_bpe((s for pair in train_text for s in pair), vocab_size=cfg.vocab_size)
        if path is not None:
            tok.save(path)
    return TranslationData(tok, encode_pairs(tok, train_text, cfg.max_tokens_per_sentence),
                           encode_pairs(tok, val_text), encode_pairs(tok, test_text), val_text, test_text)


def example_lengths(pairs):
    """Padded cost of each pair: the longer of source and decoder input."""
    return [max(len(s), len(t) - 1) for s, t in pairs]


def collate(pairs, pad_id=PAD_ID):
    """[(src_ids, tgt_ids)] -> dict of src (B, S), tgt_in (B, T), tgt_out (B, T) and token counts."""
    src = pad_sequences([s for s, _ in pairs], pad_id)
    tgt = pad_sequences([t for _, t in pairs], pad_id)
    tgt_in, tgt_out = tgt[:, :-1], tgt[:, 1:]
    return {"src": src, "tgt_in": tgt_in, "tgt_out": tgt_out,
            "src_tokens": int((src != pad_id).sum()), "tgt_tokens": int((tgt_out != pad_id).sum())}


def to_device(batch, device):
    non_blocking = device.type == "cuda"
    return {k: (v.to(device, non_blocking=non_blocking) if torch.is_tensor(v) else v)
            for k, v in batch.items()}


def make_batch_sampler(cfg, pairs, epoch, shuffle=True, world_size=1, rank=0):
    """Bucketed micro-batches of `epoch`: each holds batch_tokens / (accum_steps * world_size) tokens."""
    micro = max(cfg.batch_tokens // (cfg.accum_steps * world_size), cfg.max_tokens_per_sentence + 1)
    sampler = BucketBatchSampler(example_lengths(pairs), max_tokens=micro, shuffle=shuffle,
                                 seed=cfg.seed, num_replicas=world_size, rank=rank)
    sampler.set_epoch(epoch)
    return sampler


# ---------------------------------------------------------------------------------------------
# Model, loss, schedule, optimizer
# ---------------------------------------------------------------------------------------------
def build_model(cfg, vocab_size):
    """The course's Transformer sized by `cfg` (joint vocabulary, tied embeddings)."""
    from .transformer import Transformer
    return Transformer(vocab_size, vocab_size, d_model=cfg.d_model, num_heads=cfg.num_heads,
                       num_layers=cfg.num_layers, d_ff=cfg.d_ff, dropout=cfg.dropout, max_len=512,
                       norm_first=True, tie_embeddings=True,
                       share_src_tgt_embeddings=cfg.share_embeddings, pad_id=PAD_ID)


def count_parameters(model):
    return sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())


def label_smoothed_loss(logits, target, smoothing=0.1, pad_id=PAD_ID, reduction="mean"):
    """Cross-entropy against the smoothed target (1 - ε) one_hot(y) + ε / V, padding ignored.

    loss_t = (1 - ε) (-log p(y_t)) + ε mean_v (-log p(v));   mean (or sum) over non-pad positions.
    Equal to F.cross_entropy(..., label_smoothing=ε, ignore_index=pad_id).
    logits (B, T, V), target (B, T).
    """
    log_probs = F.log_softmax(logits.float(), dim=-1)                        # (B, T, V)
    nll = -log_probs.gather(-1, target.unsqueeze(-1)).squeeze(-1)            # (B, T)
    uniform = -log_probs.mean(dim=-1)                                        # (B, T)
    loss = (1.0 - smoothing) * nll + smoothing * uniform
    keep = target != pad_id
    total = (loss * keep).sum()
    return total if reduction == "sum" else total / keep.sum().clamp(min=1)


def noam_lr(step, d_model, warmup_steps, factor=1.0):
    """The paper's schedule: factor * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5), step >= 1."""
    step = max(step, 1)
    return factor * d_model ** -0.5 * min(step ** -0.5, step * warmup_steps ** -1.5)


def lr_at(step, progress, cfg):
    """Learning rate at optimizer step `step` (1-based) and `progress` in [0, 1] of the run.

    linear: peak * min(1, step / warmup) * (1 - progress)   (warm-up, then linear decay to 0)
    noam:   peak * min(step / warmup, sqrt(warmup / step))   (the paper's shape, peak = cfg.lr)
    """
    step = max(step, 1)
    if cfg.schedule == "noam":
        return cfg.lr * min(step / cfg.warmup_steps, math.sqrt(cfg.warmup_steps / step))
    if cfg.schedule == "linear":
        return cfg.lr * min(1.0, step / cfg.warmup_steps) * max(0.0, 1.0 - progress)
    raise ValueError(f"schedule must be 'linear' or 'noam', got {cfg.schedule!r}")


def make_optimizer(cfg, model):
    """AdamW; no weight decay on biases, norms and embeddings."""
    decay, no_decay = [], []
    for name, p in {id(p): (n, p) for n, p in model.named_parameters()}.values():
        (decay if p.dim() >= 2 and "embed" not in name and "generator" not in name else no_decay).append(p)
    groups = [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    kwargs = {"fused": True} if next(model.parameters()).is_cuda else {}
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=tuple(cfg.betas), **kwargs)


# ---------------------------------------------------------------------------------------------
# The training state and the per-step pieces
# ---------------------------------------------------------------------------------------------
@dataclasses.dataclass
class TrainState:
    cfg: Config
    model: torch.nn.Module          # the module that is trained (maybe compiled / wrapped)
    raw_model: torch.nn.Module      # the plain Transformer (for saving and decoding)
    optimizer: torch.optim.Optimizer
    scaler: torch.amp.GradScaler
    device: torch.device
    amp_dtype: torch.dtype = None
    step: int = 0                   # optimizer steps done
    epoch: int = 0                  # epochs done
    train_seconds: float = 0.0      # time spent in train steps (evaluation excluded)
    tokens: int = 0                 # non-pad source + target tokens trained on (by all processes)
    tgt_tokens: int = 0
    total_steps: int = None         # steps of the whole run, if known (epochs x steps per epoch)
    world_size: int = 1
    rank: int = 0
    dist: distributed.Dist = None   # the process group (None: one process)

    def progress(self):
        """Fraction of the run done: the larger of steps done and training time used."""
        done = self.step / self.total_steps if self.total_steps else 0.0
        if self.cfg.time_budget_minutes:
            done = max(done, self.train_seconds / (60.0 * self.cfg.time_budget_minutes))
        return min(done, 1.0)


def forward_loss(model, batch, cfg, amp_dtype=None, device=None):
    """One micro-batch -> (summed label-smoothed loss over its target tokens, number of them)."""
    device = device or batch["src"].device
    with autocast(device, amp_dtype):
        logits = model(batch["src"], batch["tgt_in"])                       # (B, T, V)
    loss = F.cross_entropy(logits.float().transpose(1, 2), batch["tgt_out"], ignore_index=PAD_ID,
                           label_smoothing=cfg.label_smoothing, reduction="sum")
    return loss, batch["tgt_tokens"]


def backward(loss, state):
    """Backward pass, through the gradient scaler when fp16 needs one."""
    state.scaler.scale(loss).backward()


def optimizer_step(state):
    """Clip the gradient norm, step, zero the gradients, set the next learning rate; returns the norm."""
    state.scaler.unscale_(state.optimizer)
    norm = torch.nn.utils.clip_grad_norm_(state.model.parameters(), state.cfg.clip_norm)
    state.scaler.step(state.optimizer)
    state.scaler.update()
    state.optimizer.zero_grad(set_to_none=True)
    state.step += 1
    set_lr(state)
    return float(norm)


def set_lr(state):
    lr = lr_at(state.step + 1, state.progress(), state.cfg)
    for group in state.optimizer.param_groups:
        group["lr"] = lr
    return lr


def train_step(state, micro_batches):
    """One optimizer step over `micro_batches` (already on the device); returns the mean token loss.

    The loss is normalised by the target tokens of the whole step, so that accumulating
    micro-batches (or processes) gives the gradient of one big batch. With several processes the
    token count is summed over all of them, and each loss is multiplied by world_size because
    DDP averages (sums, then divides by world_size) the gradients in the last backward.
    """
    dist = state.dist or distributed.Dist()
    total_tokens, src_tokens = (int(n) for n in dist.sum([sum(b["tgt_tokens"] for b in micro_batches),
                                                          sum(b["src_tokens"] for b in micro_batches)]))
    loss_sum = 0.0                # (token counts of the whole step, over all processes)
    for j, batch in enumerate(micro_batches):
        # DDP: no all-reduce for the first micro-batches, one for the whole step in the last backward
        with distributed.sync_gradients(state.model, j == len(micro_batches) - 1):
            loss, _ = forward_loss(state.model, batch, state.cfg, state.amp_dtype, state.device)
            backward(loss * dist.world_size / total_tokens, state)
        loss_sum += float(loss.detach())
    state.tokens += src_tokens + total_tokens
    state.tgt_tokens += total_tokens
    optimizer_step(state)
    return dist.sum(loss_sum) / total_tokens


def steps_of(batches, accum_steps):
    """Group micro-batches (lists of indices) into optimizer steps of `accum_steps` each."""
    return [batches[i:i + accum_steps] for i in range(0, len(batches), accum_steps)]


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def train_epoch(state, pairs, history, show_progress=True):
    """One pass over `pairs` (stops early when the time budget is used up); returns mean loss."""
    cfg = state.cfg
    state.model.train()
    sampler = make_batch_sampler(cfg, pairs, state.epoch, world_size=state.world_size, rank=state.rank)
    # full optimizer steps only (each one global batch), the same number on every process
    steps = distributed.full_steps(list(sampler), len(sampler.batches()), state.world_size, cfg.accum_steps)
    bar = tqdm(steps, desc=f"epoch {state.epoch + 1}", disable=not show_progress, leave=False,
               mininterval=1.0 if sys.stderr.isatty() else 30.0)
    losses, tokens_before, t_before = [], state.tokens, state.train_seconds
    for indices_list in bar:
        start = time.perf_counter()
        micro = [to_device(collate([pairs[i] for i in idx]), state.device) for idx in indices_list]
        loss = train_step(state, micro)
        _sync(state.device)
        state.train_seconds += time.perf_counter() - start
        if state.world_size > 1 and cfg.time_budget_minutes:   # the lr and the stop follow the clock:
            state.train_seconds = state.dist.max(state.train_seconds)   # every process reads the same one
            set_lr(state)
        losses.append(loss)
        if state.step % cfg.log_every == 0:
            history["step"].append(state.step)
            history["step_loss"].append(loss)
            history["step_lr"].append(state.optimizer.param_groups[0]["lr"])
        tok_s = (state.tokens - tokens_before) / max(state.train_seconds - t_before, 1e-9)
        bar.set_postfix(loss=f"{loss:.3f}", lr=f"{state.optimizer.param_groups[0]['lr']:.2e}",
                        tok_s=f"{tok_s:,.0f}", refresh=False)
        if state.progress() >= 1.0:
            break
    bar.close()
    state.epoch += 1
    return float(np.mean(losses)) if losses else float("nan")


# ---------------------------------------------------------------------------------------------
# Evaluation: loss, decoding, BLEU
# ---------------------------------------------------------------------------------------------
@torch.no_grad()
def evaluate_loss(model, pairs, cfg, device, amp_dtype=None):
    """Mean label-smoothed loss and plain cross-entropy per target token on `pairs`."""
    model.eval()
    sampler = BucketBatchSampler(example_lengths(pairs), max_tokens=max(cfg.batch_tokens, 2048),
                                 shuffle=False)
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


@torch.no_grad()
def translate_ids(model, src_ids, device, beam_size=1, length_penalty=0.6, n_best=1,
                  batch_sentences=128, amp_dtype=None, show_progress=False):
    """Decode lists of source ids; returns, per sentence, a list of n_best output id lists
    (greedy when beam_size == 1 and n_best == 1). Sentences are batched by length."""
    model.eval()
    order = sorted(range(len(src_ids)), key=lambda i: len(src_ids[i]))
    out = [None] * len(src_ids)
    chunks = [order[i:i + batch_sentences] for i in range(0, len(order), batch_sentences)]
    for chunk in tqdm(chunks, desc="decoding", disable=not show_progress, leave=False):
        src = pad_sequences([src_ids[i] for i in chunk], PAD_ID).to(device)
        with autocast(device, amp_dtype):
            if beam_size == 1 and n_best == 1:
                ys = greedy_decode(model, src, BOS_ID, EOS_ID, PAD_ID)
                results = [[strip_after_eos(row, EOS_ID, PAD_ID)] for row in ys.tolist()]
            else:
                hyps = beam_search(model, src, BOS_ID, EOS_ID, PAD_ID, beam_size=beam_size,
                                   length_penalty=length_penalty, n_best=n_best)
                results = [[h.tokens for h in sentence] for sentence in hyps]
        for i, result in zip(chunk, results):
            out[i] = result
    return out


def translate_sentences(model, tok, sentences, device=None, beam_size=1, length_penalty=0.6,
                        n_best=1, batch_sentences=128, amp_dtype=None, show_progress=False):
    """German sentences -> English strings (n_best > 1: lists of strings)."""
    device = device or next(model.parameters()).device
    single = isinstance(sentences, str)
    sentences = [sentences] if single else list(sentences)
    ids = translate_ids(model, tok.encode_batch(sentences), device, beam_size, length_penalty, n_best,
                        batch_sentences, amp_dtype, show_progress)
    texts = [[tok.decode(h) for h in hyps] for hyps in ids]
    texts = [t[0] for t in texts] if n_best == 1 else texts
    return texts[0] if single else texts


def bleu_on(model, tok, text_pairs, device, beam_size=1, length_penalty=0.6, batch_sentences=128,
            amp_dtype=None, show_progress=False):
    """sacreBLEU of the model's translations of [(german, english)]; returns (BleuResult, hypotheses)."""
    hyps = translate_sentences(model, tok, [de for de, _ in text_pairs], device, beam_size,
                               length_penalty, 1, batch_sentences, amp_dtype, show_progress)
    return corpus_bleu(hyps, [en for _, en in text_pairs]), hyps


# ---------------------------------------------------------------------------------------------
# Checkpoints (atomic) and weight averaging
# ---------------------------------------------------------------------------------------------
def atomic_write_text(text, path):
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def cpu_state_dict(model):
    return {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}


def average_state_dicts(states):
    """Element-wise mean of several state dicts (checkpoint averaging)."""
    if not states:
        raise ValueError("average_state_dicts needs at least one state dict")
    out = {}
    for key, value in states[0].items():
        if value.is_floating_point():
            out[key] = sum(s[key].float() for s in states).div(len(states)).to(value.dtype)
        else:
            out[key] = value.clone()
    return out


def save_checkpoint(state, path, history, snapshots):
    atomic_save({"model": cpu_state_dict(state.raw_model), "optimizer": state.optimizer.state_dict(),
                 "scaler": state.scaler.state_dict(), "step": state.step, "epoch": state.epoch,
                 "train_seconds": state.train_seconds, "tokens": state.tokens,
                 "tgt_tokens": state.tgt_tokens, "config": state.cfg.to_dict(), "history": history,
                 "snapshots": list(snapshots), "torch_rng": torch.get_rng_state()}, path)


def load_checkpoint(state, path):
    """Restore `state` from `path` (written by any number of processes); returns (history, snapshots)."""
    ckpt = distributed.load_checkpoint(path, state.dist or distributed.Dist())
    state.raw_model.load_state_dict(ckpt["model"])
    state.optimizer.load_state_dict(ckpt["optimizer"])
    state.scaler.load_state_dict(ckpt["scaler"])
    for key in ("step", "epoch", "train_seconds", "tokens", "tgt_tokens"):
        setattr(state, key, ckpt[key])
    torch.set_rng_state(ckpt["torch_rng"])
    set_lr(state)
    return ckpt["history"], ckpt["snapshots"]


def save_model(model, cfg, tok, path, extra=None):
    """The weights to translate with, plus what is needed to rebuild the model and tokenizer."""
    atomic_save({"model": cpu_state_dict(model), "config": cfg.to_dict(), "tokenizer": tok.to_str(),
                 **(extra or {})}, path)


def load_translator(path, device="cpu"):
    """(model, tokenizer, cfg) from a model.pt written by `train`."""
    ckpt = torch.load(path, map_location="cpu", weights_only=False)
    data = dict(ckpt["config"])
    data["betas"] = tuple(data["betas"])
    cfg = Config(**data)
    tok = SubwordTokenizer.from_str(ckpt["tokenizer"])
    model = build_model(cfg, tok.vocab_size)
    model.load_state_dict(ckpt["model"])
    return model.to(resolve_device(device) if isinstance(device, str) else device).eval(), tok, cfg


# ---------------------------------------------------------------------------------------------
# The whole run
# ---------------------------------------------------------------------------------------------
def new_history():
    return {"epoch": [], "train_loss": [], "val_loss": [], "val_nll": [], "val_bleu": [],
            "train_seconds": [], "step": [], "step_loss": [], "step_lr": []}


def plot_history(history, path=None):
    """Learning curves: training and validation loss per epoch, validation BLEU."""
    import matplotlib.pyplot as plt

    from .plotting import plot_learning_curves
    fig, axes = plt.subplots(1, 3, figsize=(14, 3.5))
    plot_learning_curves({"train (per step)": (history["step"], history["step_loss"])}, xlabel="step",
                         ylabel="label-smoothed loss", ax=axes[0])
    plot_learning_curves({"train": (history["epoch"], history["train_loss"]),
                          "validation": (history["epoch"], history["val_loss"])}, xlabel="epoch",
                         ylabel="label-smoothed loss", ax=axes[1])
    plot_learning_curves({"validation BLEU (greedy)": (history["epoch"], history["val_bleu"])},
                         xlabel="epoch", ylabel="BLEU", ax=axes[2])
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=100)
        plt.close(fig)
    return fig


def setup_state(cfg, vocab_size, device=None, world_size=1, rank=0, dist=None):
    """Model, optimizer, scaler and precision on the device: everything train() steps.

    With `dist` (a distributed.Dist of several processes) the stepped model is wrapped in DDP.
    """
    if dist is not None:
        device, world_size, rank = dist.device, dist.world_size, dist.rank
    device = resolve_device(cfg.device) if device is None else device
    amp_dtype = resolve_amp(cfg.amp, device)
    raw_model = build_model(cfg, vocab_size).to(device)
    model = raw_model if dist is None else distributed.wrap_model(raw_model, dist)
    if cfg.compile:
        model = torch.compile(model)
    optimizer = make_optimizer(cfg, raw_model)
    scaler = torch.amp.GradScaler(device.type, enabled=amp_dtype == torch.float16)
    state = TrainState(cfg, model, raw_model, optimizer, scaler, device, amp_dtype,
                       world_size=world_size, rank=rank, dist=dist)
    set_lr(state)
    return state


def prepare_data_everywhere(cfg, out_dir, dist):
    """prepare_data on rank 0 (it trains the tokenizer), then on the others with rank 0's tokenizer."""
    data = prepare_data(cfg, out_dir) if dist.is_main else None
    tokenizer = dist.broadcast(data.tokenizer.to_str() if dist.is_main else None)
    if not dist.is_main:
        with tempfile.TemporaryDirectory() as tmp:
            SubwordTokenizer.from_str(tokenizer).save(Path(tmp) / "tokenizer.json")
            data = prepare_data(cfg, tmp)
    return data


def train(cfg, out_dir, resume=False, show_progress=True, log=print, data=None, dist=None):
    """Train on Multi30k, validating every epoch; returns (state, data, history).

    Writes out_dir/checkpoint.pt after every epoch (atomically) and out_dir/model.pt at the end:
    the final weights, or the average of the last `cfg.average_last` epochs' weights when that
    scores better on validation (greedy BLEU).

    `dist` (distributed.setup()): several processes train one model with DDP; rank 0 alone logs,
    evaluates and writes; the other ranks return after training.
    """
    from .config import seed_everything
    dist = dist or distributed.Dist()
    if not dist.is_main:
        log, show_progress = (lambda *args, **kwargs: None), False
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    seed_everything(cfg.seed)
    data = data or prepare_data_everywhere(cfg, out_dir, dist)
    state = setup_state(cfg, data.tokenizer.vocab_size, dist=dist if dist.active else None)
    num_batches = len(make_batch_sampler(cfg, data.train, 0, world_size=dist.world_size, rank=dist.rank).batches())
    distributed.check_enough_batches(num_batches, dist.world_size, cfg.accum_steps, "the training data")
    per_epoch = num_batches // (dist.world_size * cfg.accum_steps)     # the same for any number of processes
    state.total_steps = per_epoch * cfg.epochs
    history, snapshots = new_history(), deque(maxlen=max(cfg.average_last, 1))
    ckpt_path = out_dir / "checkpoint.pt"
    if dist.broadcast(resume and ckpt_path.exists()):                  # rank 0's file decides
        history, saved = load_checkpoint(state, ckpt_path)
        snapshots.extend(saved)
        log(f"resumed from {ckpt_path}: epoch {state.epoch}, step {state.step}, "
            f"{state.train_seconds / 60:.1f} min of training done")
    log(f"{cfg.preset} preset on {state.device} (autocast: {state.amp_dtype or 'off'}): "
        f"{count_parameters(state.raw_model) / 1e6:.2f}M parameters, vocabulary {data.tokenizer.vocab_size}, "
        f"{len(data.train)} training pairs, {per_epoch} steps per epoch")
    if dist.world_size > 1:   # the same weights everywhere (DDP copied rank 0's), different dropout masks
        torch.manual_seed(cfg.seed + 1000 * (state.epoch + 1) + dist.rank)
    val_bleu_pairs = data.val_text[: cfg.val_bleu_pairs] if cfg.val_bleu_pairs else data.val_text
    while state.epoch < cfg.epochs and state.progress() < 1.0:
        train_loss = train_epoch(state, data.train, history, show_progress)
        if not dist.is_main:          # rank 0 alone evaluates and writes the checkpoint
            dist.barrier()
            continue
        val_loss, val_nll = evaluate_loss(state.raw_model, data.val, cfg, state.device, state.amp_dtype)
        bleu, _ = bleu_on(state.raw_model, data.tokenizer, val_bleu_pairs, state.device,
                          batch_sentences=cfg.eval_batch_sentences, amp_dtype=state.amp_dtype)
        for key, value in (("epoch", state.epoch), ("train_loss", train_loss), ("val_loss", val_loss),
                           ("val_nll", val_nll), ("val_bleu", bleu.score),
                           ("train_seconds", state.train_seconds)):
            history[key].append(value)
        snapshots.append(cpu_state_dict(state.raw_model))
        save_checkpoint(state, ckpt_path, history, snapshots)
        log(f"epoch {state.epoch}: train loss {train_loss:.3f}, val loss {val_loss:.3f} "
            f"(nll {val_nll:.3f}), val BLEU {bleu.score:.2f}, step {state.step}, "
            f"{state.train_seconds / 60:.1f} min, {state.tokens / max(state.train_seconds, 1e-9):,.0f} tok/s")
        dist.barrier()                # the others wait here for the checkpoint
    state.replica_max_diff = distributed.replica_max_diff(state.model, dist)   # 0.0: identical replicas
    if not dist.is_main:
        return state, data, history
    # Checkpoint averaging: keep the average only if it does better on validation.
    final_state = cpu_state_dict(state.raw_model)
    choice = {"averaged_epochs": 1, "val_bleu_final": history["val_bleu"][-1] if history["val_bleu"] else None}
    if len(snapshots) > 1:
        state.raw_model.load_state_dict(average_state_dicts(list(snapshots)))
        bleu_avg, _ = bleu_on(state.raw_model, data.tokenizer, val_bleu_pairs, state.device,
                              batch_sentences=cfg.eval_batch_sentences, amp_dtype=state.amp_dtype)
        choice["val_bleu_averaged"] = bleu_avg.score
        if choice["val_bleu_final"] is None or bleu_avg.score > choice["val_bleu_final"]:
            choice["averaged_epochs"] = len(snapshots)
            log(f"averaging the last {len(snapshots)} epochs: val BLEU {bleu_avg.score:.2f} "
                f"(final weights: {choice['val_bleu_final']:.2f}) -> keep the average")
        else:
            state.raw_model.load_state_dict(final_state)
            log(f"averaging the last {len(snapshots)} epochs: val BLEU {bleu_avg.score:.2f} "
                f"(final weights: {choice['val_bleu_final']:.2f}) -> keep the final weights")
    state.averaging = choice
    save_model(state.raw_model, cfg, data.tokenizer, out_dir / "model.pt", {"averaging": choice})
    atomic_write_text(json.dumps(history, indent=1), out_dir / "history.json")
    if history["epoch"]:
        plot_history(history, out_dir / "learning_curves.png")
    return state, data, history


def evaluate_test(state, data, log=print, show_progress=False):
    """Greedy and beam-search sacreBLEU on test_2016_flickr; returns a dict for the report."""
    cfg, t0 = state.cfg, time.perf_counter()
    greedy, greedy_hyps = bleu_on(state.raw_model, data.tokenizer, data.test_text, state.device,
                                  batch_sentences=cfg.eval_batch_sentences, amp_dtype=state.amp_dtype,
                                  show_progress=show_progress)
    t1 = time.perf_counter()
    beam, beam_hyps = bleu_on(state.raw_model, data.tokenizer, data.test_text, state.device,
                              beam_size=cfg.beam_size, length_penalty=cfg.length_penalty,
                              batch_sentences=max(cfg.eval_batch_sentences // cfg.beam_size, 8),
                              amp_dtype=state.amp_dtype, show_progress=show_progress)
    t2 = time.perf_counter()
    log(f"test_2016_flickr: greedy {greedy}\n                  beam {cfg.beam_size}: {beam}")
    return {"bleu_greedy": round(greedy.score, 2), "bleu_beam": round(beam.score, 2),
            "sacrebleu_signature": beam.signature, "test_sentences": len(data.test_text),
            "greedy_seconds": round(t1 - t0, 1), "beam_seconds": round(t2 - t1, 1),
            "examples": [{"source": de, "reference": en, "greedy": g, "beam": b}
                         for (de, en), g, b in list(zip(data.test_text, greedy_hyps, beam_hyps))[:5]],
            "_hyps": {"greedy": greedy_hyps, "beam": beam_hyps}}


def run(cfg, out_dir, resume=False, show_progress=True, log=print, dist=None, command=None):
    """train + evaluate_test + report.json; returns the report dict (None on ranks other than 0).

    `command`: the command line to record in the report (main passes it; None from Python)."""
    dist = dist or distributed.Dist()
    wall = time.perf_counter()
    state, data, history = train(cfg, out_dir, resume=resume, show_progress=show_progress, log=log, dist=dist)
    if not dist.is_main:
        return None
    results = evaluate_test(state, data, log=log, show_progress=show_progress)
    hyps = results.pop("_hyps")
    for name, lines in hyps.items():
        atomic_write_text("\n".join(lines) + "\n", Path(out_dir) / f"test_2016_flickr.{name}.en")
    report = {
        "preset": cfg.preset, "device": str(state.device),
        "device_name": (torch.cuda.get_device_name(0) if state.device.type == "cuda"
                        else platform.processor() or platform.machine()),
        "threads": torch.get_num_threads(), "amp": str(state.amp_dtype).replace("torch.", "") if state.amp_dtype else "off",
        "compile": cfg.compile, "epochs": state.epoch, "steps": state.step,
        "train_seconds": round(state.train_seconds, 1),
        "tokens_per_second": round(state.tokens / max(state.train_seconds, 1e-9), 1),
        "tgt_tokens_per_second": round(state.tgt_tokens / max(state.train_seconds, 1e-9), 1),
        "parameters": count_parameters(state.raw_model), "vocab_size": data.tokenizer.vocab_size,
        "train_pairs": len(data.train),
        "world_size": dist.world_size, "global_batch_tokens": cfg.batch_tokens,
        "micro_batch_tokens": cfg.batch_tokens // (dist.world_size * cfg.accum_steps),
        "accum_steps": cfg.accum_steps, "replica_max_diff": state.replica_max_diff,
        **{k: v for k, v in results.items() if k != "examples"},
        "val_bleu_greedy_per_epoch": [round(b, 2) for b in history["val_bleu"]],
        "val_loss_per_epoch": [round(v, 4) for v in history["val_loss"]],
        "averaging": getattr(state, "averaging", None),
        "wall_seconds": round(time.perf_counter() - wall, 1),
        "command": command or f"course_utils.translate.run(make_config({cfg.preset!r}, ...)) from Python",
        "config": cfg.to_dict(), "examples": results["examples"],
        "notes": "train_seconds counts optimizer steps only (validation after each epoch excluded); "
                 "tokens_per_second counts non-pad source + target tokens.",
    }
    atomic_write_text(json.dumps(report, indent=1, ensure_ascii=False), Path(out_dir) / "report.json")
    return report


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m course_utils.translate",
                                description="Train a Transformer on Multi30k de->en and report sacreBLEU.")
    p.add_argument("--preset", choices=sorted(PRESETS), default="smoke")
    p.add_argument("--out", required=True, help="output folder (checkpoints, report.json)")
    p.add_argument("--resume", action="store_true", help="continue from OUT/checkpoint.pt")
    p.add_argument("--epochs", type=int)
    p.add_argument("--time-budget", type=float, dest="time_budget_minutes", help="minutes of training")
    p.add_argument("--device", help="cpu, cuda, cuda:1 (default: a GPU when found)")
    p.add_argument("--amp", choices=["auto", "bf16", "fp16", "off"])
    p.add_argument("--compile", action="store_true", default=None, help="torch.compile the model")
    p.add_argument("--max-train-pairs", type=int)
    p.add_argument("--max-eval-pairs", type=int)
    p.add_argument("--batch-tokens", type=int)
    p.add_argument("--accum-steps", type=int, help="micro-batches per process and optimizer step")
    p.add_argument("--micro-batch-tokens", type=int, help="tokens per micro-batch and process: sets "
                   "--accum-steps to batch_tokens / (processes x this), the same global batch for any N")
    p.add_argument("--dropout", type=float)
    p.add_argument("--lr", type=float)
    p.add_argument("--beam-size", type=int)
    p.add_argument("--length-penalty", type=float)
    p.add_argument("--threads", type=int)
    p.add_argument("--seed", type=int)
    p.add_argument("--no-progress", action="store_true")
    return p.parse_args(argv)


def check_batch(cfg, world_size, micro_batch_tokens=None):
    """Set cfg.accum_steps from --micro-batch-tokens; refuse a global batch that cannot be split."""
    if micro_batch_tokens is not None:
        cfg.accum_steps = distributed.accumulation_steps(cfg.batch_tokens, micro_batch_tokens, world_size)
    micro = distributed.micro_batch_size(cfg.batch_tokens, world_size, cfg.accum_steps)
    if micro < cfg.max_tokens_per_sentence + 1:
        raise distributed.DistributedConfigError(
            f"a micro-batch of {micro} tokens (batch_tokens {cfg.batch_tokens} / ({world_size} processes x "
            f"{cfg.accum_steps} accumulation steps)) cannot hold the longest sentence "
            f"({cfg.max_tokens_per_sentence + 1} tokens): use fewer processes or accumulation steps")
    return micro


def main(argv=None):
    args = parse_args(argv)
    overrides = {k: v for k, v in vars(args).items()
                 if k not in ("preset", "out", "resume", "no_progress", "micro_batch_tokens")}
    cfg = make_config(args.preset, **overrides)
    if args.micro_batch_tokens is not None and args.accum_steps is not None:
        raise SystemExit("error: give --accum-steps or --micro-batch-tokens, not both")
    try:   # an impossible configuration stops here, with one message, before any training
        dist = distributed.setup(cfg.device)
        micro = check_batch(cfg, dist.world_size, args.micro_batch_tokens)
        dist.print(f"{dist.world_size} process(es), backend {dist.backend or 'none'}: global batch "
                   f"{cfg.batch_tokens} tokens = {micro} per micro-batch x {dist.world_size} process(es) x "
                   f"{cfg.accum_steps} accumulation step(s); the lr schedule counts optimizer steps"
                   f"{' and the time budget' if cfg.time_budget_minutes else ''}")
        command = " ".join(["python -m course_utils.translate"] + list(sys.argv[1:] if argv is None else argv))
        report = run(cfg, args.out, resume=args.resume, show_progress=not args.no_progress and dist.is_main,
                     dist=dist, command=command)
    except distributed.DistributedConfigError as error:
        distributed.report_error(error)
        return 2
    finally:
        distributed.cleanup()
    if not dist.is_main:
        return 0
    print(json.dumps({k: report[k] for k in ("preset", "device", "epochs", "train_seconds",
                                             "tokens_per_second", "bleu_greedy", "bleu_beam",
                                             "sacrebleu_signature")}, indent=1))
    return 0



# ---------------------------------------------------------------------------------------------
# Looking inside: cross-attention maps and a translation widget (lesson 10)
# ---------------------------------------------------------------------------------------------
@torch.no_grad()
def cross_attention(model, tok, sentence, beam_size=5, length_penalty=0.6):
    """Translate `sentence` and return its decoder cross-attention.

    Returns (weights (num_layers, num_heads, T, S), source pieces (S), output pieces (T), translation):
    row t is the query that produced output piece t (the last row produced <eos>).
    """
    device = next(model.parameters()).device
    src_ids = tok.encode(sentence)
    out_ids = translate_ids(model, [src_ids], device, beam_size=beam_size, length_penalty=length_penalty)[0][0]
    src = torch.tensor([src_ids], device=device)
    tgt_in = torch.tensor([[BOS_ID] + out_ids], device=device)
    model.eval()
    model.store_attention(True)
    try:
        model(src, tgt_in)
        weights = model.attention_maps()["decoder_cross"][:, 0]         # (L, h, T, S)
    finally:
        model.store_attention(False)
    pieces = [tok.id_to_token(i) for i in out_ids] + ["<eos>"]
    return weights.float().cpu(), [tok.id_to_token(i) for i in src_ids], pieces, tok.decode(out_ids)


def translation_widget(model, tok, sentence="Ein kleiner Junge spielt mit einem roten Ball im Park.",
                       beam_size=5):
    """A text box for a German sentence, a slider for the layer: shows the translation and the
    cross-attention of every head of that layer."""
    import ipywidgets as widgets
    import matplotlib.pyplot as plt

    from .plotting import show_attention

    num_layers = len(model.decoder.layers)

    def show(sentence, layer):
        if not sentence.strip():
            print("Type a German sentence.")
            return
        weights, src_pieces, out_pieces, text = cross_attention(model, tok, sentence, beam_size)
        print("translation:", text)
        show_attention(weights[layer - 1], x_labels=src_pieces, y_labels=out_pieces,
                       title=f"cross-attention, decoder layer {layer}", xlabel="German (keys)",
                       ylabel="English (queries)")
        plt.show()

    return widgets.interact(show, sentence=widgets.Text(value=sentence, continuous_update=False,
                                                        layout=widgets.Layout(width="80%")),
                            layer=widgets.IntSlider(min=1, max=num_layers, value=num_layers))


if __name__ == "__main__":
    sys.exit(main())
