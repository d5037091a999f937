"""Lesson 10's translator: its configuration, three presets, the model it builds, loading a trained one.

    cfg = make_config("cpu", epochs=3)          # a preset, with overrides
    model = build_model(cfg, vocab_size)        # the course's Transformer (lesson 09), sized by cfg
    model, tok, cfg = load_translator("runs/cpu/model.pt")

A preset is defined by its data, model, optimiser steps (epochs) and schedule, never by a time: the
same preset gives the same model, up to floating-point nondeterminism, on a fast or a slow machine.
`time_budget_minutes` is an optional hard cap (then the learning rate decays by the clock and the
result depends on the machine's speed).

    check_config(cfg)                           # every impossible value at once, as a ConfigError
    cfg.resume_differences(saved_cfg_dict)      # what a resumed run would change, and what it may
"""
import dataclasses

import torch

from ..config import resolve_device
from ..data.batch import PAD_ID
from ..pipeline.report import count_parameters  # noqa: F401 (the translator's size, as reports count it)
from ..pipeline.task import ConfigError, RunConfig, make_config_of
from ..tokenization import SubwordTokenizer
from ..transformer import Transformer

__all__ = ["ConfigError", "Config", "PRESETS", "make_config", "check_config", "build_model", "count_parameters",
           "load_translator"]


@dataclasses.dataclass
class Config(RunConfig):
    """The pipeline's settings (pipeline.task.RunConfig: epochs, lr, amp, threads, seed, ...) and the translator's."""
    preset: str = "cpu"
    epochs: int = 30                   # the run: `epochs` passes over the data, a fixed number of optimizer steps
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
    # optimisation (lr, clip_norm, accum_steps: RunConfig's)
    batch_tokens: int = 3072           # the GLOBAL batch: padded tokens per optimizer step
    warmup_steps: int = 400
    schedule: str = "linear"           # "linear": warm-up then linear decay to 0; "noam": inverse sqrt
    weight_decay: float = 0.01
    betas: tuple = (0.9, 0.98)
    label_smoothing: float = 0.1
    average_last: int = 3              # average the weights of the last epochs (1 = off)
    # evaluation
    val_bleu_pairs: int = None         # val sentences scored with greedy BLEU each epoch (None = all)
    beam_size: int = 5
    length_penalty: float = 0.6
    eval_batch_sentences: int = 128

    MAY_CHANGE_ON_RESUME = RunConfig.MAY_CHANGE_ON_RESUME + ("beam_size", "length_penalty", "eval_batch_sentences")

    def problems(self):
        out = super().problems()

        def need(ok, field, what):
            if not ok:
                out.append(f"{field} must be {what}, got {getattr(self, field)!r}")

        for field in ("batch_tokens", "beam_size", "vocab_size", "d_model", "num_heads", "num_layers", "d_ff",
                      "max_tokens_per_sentence", "average_last", "eval_batch_sentences"):
            need(isinstance(getattr(self, field), int) and getattr(self, field) >= 1, field, "a whole number >= 1")
        for field in ("max_train_pairs", "max_eval_pairs", "val_bleu_pairs"):
            value = getattr(self, field)
            need(value is None or (isinstance(value, int) and value >= 1), field, "a whole number >= 1 (or unset)")
        need(0 <= self.dropout < 1, "dropout", "in [0, 1)")
        need(0 <= self.label_smoothing < 1, "label_smoothing", "in [0, 1)")
        need(self.warmup_steps >= 0, "warmup_steps", ">= 0")
        need(self.length_penalty >= 0, "length_penalty", ">= 0")
        need(self.schedule in ("linear", "noam"), "schedule", "'linear' or 'noam'")
        if isinstance(self.d_model, int) and isinstance(self.num_heads, int) and self.num_heads >= 1 \
                and self.d_model % self.num_heads:
            out.append(f"d_model ({self.d_model}) must be divisible by num_heads ({self.num_heads})")
        return out


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
    return make_config_of(Config, PRESETS, preset, **overrides)


def check_config(cfg):
    """Raise one ConfigError naming every impossible setting of `cfg` (before any data is loaded)."""
    return cfg.check()


def build_model(cfg, vocab_size):
    """The course's Transformer sized by `cfg` (joint vocabulary, tied embeddings, pre-norm)."""
    return Transformer(vocab_size, vocab_size, d_model=cfg.d_model, num_heads=cfg.num_heads,
                       num_layers=cfg.num_layers, d_ff=cfg.d_ff, dropout=cfg.dropout, max_len=512,
                       norm_first=True, tie_embeddings=True,
                       share_src_tgt_embeddings=cfg.share_embeddings, pad_id=PAD_ID)


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
