"""Lesson 10's translator: its configuration, three presets, the model it builds, loading a trained one.

    cfg = make_config("cpu", epochs=3)          # a preset, with overrides
    model = build_model(cfg, vocab_size)        # the course's Transformer (lesson 09), sized by cfg
    model, tok, cfg = load_translator("runs/cpu/model.pt")

A preset is defined by its data, model, optimiser steps (epochs) and schedule, never by a time: the
same preset gives the same model, up to floating-point nondeterminism, on a fast or a slow machine.
`time_budget_minutes` is an optional hard cap (then the learning rate decays by the clock and the
result depends on the machine's speed).

    check_config(cfg)                           # every impossible value at once, as a ConfigError
    resume_differences(saved_cfg_dict, cfg)     # what a resumed run would change, and what it may
"""
import dataclasses

import torch

from ..config import resolve_device
from ..data.batch import PAD_ID
from ..tokenization import SubwordTokenizer
from ..transformer import Transformer


class ConfigError(ValueError):
    """A configuration that cannot work; raised before any training starts."""


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
    # optimisation: the run is `epochs` passes over the data, a fixed number of optimizer steps
    epochs: int = 30
    time_budget_minutes: float = None  # optional hard cap (machine-dependent; None = none)
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
    checkpoint_minutes: float = 5.0    # also write a checkpoint this often within an epoch (0 = every step)
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

    @classmethod
    def from_dict(cls, data):
        known = {f.name for f in dataclasses.fields(cls)}
        data = {k: v for k, v in data.items() if k in known}
        data["betas"] = tuple(data.get("betas", (0.9, 0.98)))
        return cls(**data)


PRESETS = {
    # CI: a few hundred pairs, a tiny model; checks the whole path in seconds.
    "smoke": dict(max_train_pairs=400, max_eval_pairs=40, val_bleu_pairs=20, vocab_size=600, d_model=64,
                  num_heads=2, num_layers=1, d_ff=128, dropout=0.1, epochs=2, batch_tokens=1024, lr=3e-3,
                  warmup_steps=5, average_last=2, beam_size=3, eval_batch_sentences=64, log_every=2,
                  threads=1),
    # A learner's laptop / this 2-core machine: ~7.6M parameters, bf16 autocast on the CPU.
    "cpu": dict(vocab_size=8000, d_model=256, num_heads=4, num_layers=3, d_ff=1024, dropout=0.1,
                epochs=11, batch_tokens=2048, lr=2e-3, warmup_steps=300, average_last=3, beam_size=5,
                length_penalty=0.6, val_bleu_pairs=500),
    # A Colab GPU: a bigger model, more dropout, the full schedule.
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


def check_config(cfg):
    """Raise one ConfigError naming every impossible setting of `cfg` (before any data is loaded)."""
    problems = []

    def need(ok, field, what):
        if not ok:
            problems.append(f"{field} must be {what}, got {getattr(cfg, field)!r}")

    for field in ("epochs", "batch_tokens", "accum_steps", "beam_size", "vocab_size", "d_model", "num_heads",
                  "num_layers", "d_ff", "max_tokens_per_sentence", "average_last", "eval_batch_sentences",
                  "log_every"):
        need(isinstance(getattr(cfg, field), int) and getattr(cfg, field) >= 1, field, "a whole number >= 1")
    for field in ("max_train_pairs", "max_eval_pairs", "val_bleu_pairs", "threads"):
        value = getattr(cfg, field)
        need(value is None or (isinstance(value, int) and value >= 1), field, "a whole number >= 1 (or unset)")
    need(cfg.lr > 0, "lr", "positive")
    need(0 <= cfg.dropout < 1, "dropout", "in [0, 1)")
    need(0 <= cfg.label_smoothing < 1, "label_smoothing", "in [0, 1)")
    need(cfg.warmup_steps >= 0, "warmup_steps", ">= 0")
    need(cfg.length_penalty >= 0, "length_penalty", ">= 0")
    need(cfg.time_budget_minutes is None or cfg.time_budget_minutes > 0, "time_budget_minutes", "positive (or unset)")
    need(cfg.checkpoint_minutes is None or cfg.checkpoint_minutes >= 0, "checkpoint_minutes", ">= 0 (or unset)")
    need(cfg.schedule in ("linear", "noam"), "schedule", "'linear' or 'noam'")
    need(cfg.amp in ("auto", "bf16", "fp16", "off"), "amp", "one of auto, bf16, fp16, off")
    if isinstance(cfg.d_model, int) and isinstance(cfg.num_heads, int) and cfg.num_heads >= 1 \
            and cfg.d_model % cfg.num_heads:
        problems.append(f"d_model ({cfg.d_model}) must be divisible by num_heads ({cfg.num_heads})")
    if problems:
        raise ConfigError("; ".join(problems))
    return cfg


# Settings a resumed run may change: they do not change what the checkpoint's model was trained on
# (`epochs` may grow: the learning-rate schedule then stretches to the new number of steps from here;
# `accum_steps` may follow a new number of processes, the global batch `batch_tokens` staying the same).
MAY_CHANGE_ON_RESUME = ("epochs", "time_budget_minutes", "checkpoint_minutes", "device", "threads", "compile",
                        "accum_steps", "beam_size", "length_penalty", "eval_batch_sentences")


def resume_differences(saved, cfg, epochs_done=0):
    """(refused, allowed): lists of "name: saved -> new" between a checkpoint's config dict and `cfg`."""
    new = cfg.to_dict()
    refused, allowed = [], []
    for key in new:
        if key in saved and saved[key] != new[key]:
            line = f"{key}: {saved[key]!r} -> {new[key]!r}"
            ok = key in MAY_CHANGE_ON_RESUME and not (key == "epochs" and new[key] < max(epochs_done, 1))
            (allowed if ok else refused).append(line)
    return refused, allowed


def build_model(cfg, vocab_size):
    """The course's Transformer sized by `cfg` (joint vocabulary, tied embeddings, pre-norm)."""
    return Transformer(vocab_size, vocab_size, d_model=cfg.d_model, num_heads=cfg.num_heads,
                       num_layers=cfg.num_layers, d_ff=cfg.d_ff, dropout=cfg.dropout, max_len=512,
                       norm_first=True, tie_embeddings=True,
                       share_src_tgt_embeddings=cfg.share_embeddings, pad_id=PAD_ID)


def count_parameters(model):
    """Parameters of `model`, each shared tensor counted once."""
    return sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())


def load_translator(path, device="cpu"):
    """(model, tokenizer, cfg) from a model.pt written by a training run."""
    ckpt = torch.load(path, map_location="cpu", weights_only=False)
    if not isinstance(ckpt, dict) or not {"model", "config", "tokenizer"} <= set(ckpt):
        raise ValueError(f"{path} is not a model.pt written by `python -m course_utils.translation` "
                         "(it lacks model, config or tokenizer)")
    cfg = Config.from_dict(ckpt["config"])
    tok = SubwordTokenizer.from_str(ckpt["tokenizer"])
    model = build_model(cfg, tok.vocab_size)
    model.load_state_dict(ckpt["model"])
    return model.to(resolve_device(device) if isinstance(device, str) else device).eval(), tok, cfg
