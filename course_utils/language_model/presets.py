"""Lesson 12's language model: its configuration, three presets, the GPT it builds, loading a trained one.

    cfg = make_config("full", steps=2000)       # a preset, with overrides
    model = build_model(cfg, vocab_size)        # course_utils.gpt.GPT sized by cfg
    model, tok, cfg = load_language_model("runs/language_model-full/model.pt")

A run is `steps` optimizer steps, evaluated every `eval_every` steps (the pipeline's "epoch" here: a round).
"""
import dataclasses

import torch

from ..config import resolve_device
from ..gpt import GPT
from ..pipeline.task import ConfigError, RunConfig, make_config_of
from ..tokenization import SubwordTokenizer

__all__ = ["ConfigError", "Config", "PRESETS", "POSITION_EXPERIMENT", "make_config", "build_model",
           "load_language_model"]


@dataclasses.dataclass
class Config(RunConfig):
    """The pipeline's settings (pipeline.task.RunConfig: lr, amp, threads, seed, ...) and the language model's."""
    preset: str = "full"
    epochs: int = None                 # not set: the run is `steps` steps, in rounds of `eval_every`
    # data
    captions: int = None               # training captions (None: all 29,000)
    vocab_size: int = 500              # English-only BPE
    context: int = 64                  # T: tokens per window
    batch_size: int = 32               # windows per optimizer step (the global batch)
    # model (course_utils.gpt.GPT)
    d_model: int = 256
    num_heads: int = 8
    num_kv_heads: int = None           # None: as many as num_heads
    num_layers: int = 6
    d_ff: int = 1024
    dropout: float = 0.0
    positions: str = "rope"
    # optimisation: AdamW, warm-up then a cosine down to lr / 10
    steps: int = 1000
    warmup: int = 100
    weight_decay: float = 0.1
    betas: tuple = (0.9, 0.95)
    eval_every: int = None             # steps between evaluations (None: only at the end)
    log_every: int = 1                 # every step's loss is kept (train_ppl is the mean of the last 50)

    MAY_CHANGE_ON_RESUME = RunConfig.MAY_CHANGE_ON_RESUME + ("steps",)

    def problems(self):
        out = [p for p in super().problems() if not p.startswith("epochs ")]

        def need(ok, field, what):
            if not ok:
                out.append(f"{field} must be {what}, got {getattr(self, field)!r}")

        for field in ("vocab_size", "context", "batch_size", "d_model", "num_heads", "num_layers", "d_ff", "steps"):
            need(isinstance(getattr(self, field), int) and getattr(self, field) >= 1, field, "a whole number >= 1")
        for field in ("captions", "eval_every", "num_kv_heads"):
            value = getattr(self, field)
            need(value is None or (isinstance(value, int) and value >= 1), field, "a whole number >= 1 (or unset)")
        need(0 <= self.dropout < 1, "dropout", "in [0, 1)")
        need(isinstance(self.warmup, int) and self.warmup >= 0, "warmup", "a whole number >= 0")
        return out


PRESETS = {
    # a few seconds: the notebook's tests (COURSE_FAST=1)
    "fast": dict(captions=2000, vocab_size=500, context=32, batch_size=16, d_model=64, num_heads=4,
                 num_kv_heads=2, num_layers=2, d_ff=128, dropout=0.0, steps=60, lr=2e-3, warmup=10, eval_every=30),
    # between the two: a smaller GPT (3 layers, d_model 128, 0.6 M parameters) that writes recognisable captions
    # in a few minutes on a 2-core CPU, float32 (lesson 12, section 6; the reference file lesson12_mid.json)
    "mid": dict(captions=None, vocab_size=500, context=64, batch_size=16, d_model=128, num_heads=4, num_kv_heads=2,
                num_layers=3, d_ff=512, dropout=0.0, steps=1000, lr=3e-3, warmup=50, eval_every=250),
    # the lesson in full: about 8 minutes of training on a 2-core CPU with bf16 instructions (bf16 autocast), 55
    # minutes on one thread in float32 on one without (lesson12_full.json). No dropout: on a
    # CPU its random numbers cost ~40 % of a step at these sizes, and 1,200 steps (~3.5 epochs) overfit little
    "full": dict(captions=None, vocab_size=500, context=64, batch_size=32, d_model=256, num_heads=8,
                 num_kv_heads=2, num_layers=7, d_ff=1024, dropout=0.0, steps=1200, lr=2.5e-3, warmup=100,
                 eval_every=200),
}


# the position experiment (section 8): small GPTs identical but for their positions, trained at `context`
# on the main run's tokens, measured at `context` and at twice it (positions.py)
POSITION_EXPERIMENT = {
    "fast": dict(context=16, batch_size=8, d_model=32, num_heads=4, num_layers=1, d_ff=64, steps=15, lr=2e-3, warmup=3),
    "full": dict(context=32, batch_size=32, d_model=128, num_heads=4, num_layers=4, d_ff=512, steps=600, lr=2e-3,
                 warmup=50),
}


def make_config(preset="full", **overrides):
    """The preset's Config with `overrides` (None values are ignored)."""
    return make_config_of(Config, PRESETS, preset, **overrides)


def build_model(cfg, vocab_size):
    """The GPT of `cfg`: positions for up to twice the training context (lesson 12 measures it there too)."""
    return GPT(vocab_size, cfg.d_model, cfg.num_heads, cfg.num_layers, cfg.d_ff, max_len=2 * cfg.context,
               dropout=cfg.dropout, positions=cfg.positions, num_kv_heads=cfg.num_kv_heads)


def load_language_model(path, device="cpu"):
    """(model, tokenizer, cfg) from a model.pt written by a run of `python -m course_utils.language_model`."""
    saved = torch.load(path, map_location="cpu", weights_only=False)
    if not isinstance(saved, dict) or not {"model", "config", "tokenizer"} <= set(saved):
        raise ValueError(f"{path} is not a model.pt written by `python -m course_utils.language_model` "
                         "(it lacks model, config or tokenizer)")
    cfg = Config.from_dict(saved["config"])
    tok = SubwordTokenizer.from_str(saved["tokenizer"])
    model = build_model(cfg, tok.vocab_size)
    model.load_state_dict(saved["model"])
    return model.to(resolve_device(device) if isinstance(device, str) else device).eval(), tok, cfg
