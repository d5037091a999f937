"""Lesson 15's models and their sizes: the caption models (one configuration, a `model` name picks the variant)
and the associative-recall models.

    cfg = make_config("full", model="mla")            # a caption model of the full preset
    model = build_model(cfg, vocab_size)
    rcfg = make_recall_config("full", model="deltanet")
    model = build_recall_model(rcfg)

A run is `steps` optimizer steps, evaluated every `eval_every` steps (the pipeline's "epoch" here: a round), the
same on every machine: only its time changes.
"""
import dataclasses

from ..gpt import GPT
from ..local_attention import layer_pattern
from ..modern_block import swiglu_width
from ..open_model import OpenLM
from ..pipeline.task import RunConfig, make_config_of

__all__ = ["Config", "RecallConfig", "MODELS", "RECALL_MODELS", "PRESETS", "RECALL_PRESETS", "make_config",
           "make_recall_config", "build_model", "build_recall_model", "layers_of"]

# The caption models, side by side: lesson 12's GPT-2 block, then today's block and its variants.
MODELS = {
    "gpt2": "lesson 12's block: LayerNorm, ReLU feed-forward, biases, tied embeddings (GQA, RoPE)",
    "modern": "RMSNorm, SwiGLU, QK-norm, no biases, untied embeddings (GQA, RoPE), every layer global",
    "no_qk_norm": "the modern block without QK-norm",
    "mla": "the modern block with multi-head latent attention, as many cache bytes as GQA",
    "local": "5 local (sliding-window) layers for every global one (Gemma 3's pattern)",
    "local_sinks": "the same, with a learned sink per head in every layer (gpt-oss)",
    "gated_deltanet": "3 Gated DeltaNet layers for every global attention layer (Qwen3-Next's pattern)",
}
RECALL_MODELS = {
    "softmax": "softmax attention (its cache grows with the sequence)",
    "linear": "lesson 13's linear attention (phi = elu + 1), a state of d_head x d_head per head",
    "deltanet": "the delta rule, the same state",
    "gated_deltanet": "the gated delta rule, the same state",
}


@dataclasses.dataclass
class Config(RunConfig):
    """The pipeline's settings (RunConfig: lr, amp, threads, seed, ...) and the caption models'."""
    preset: str = "full"
    epochs: int = None                 # not set: `steps` steps, in rounds of `eval_every`
    model: str = "modern"              # one of MODELS
    # data: Multi30k's English captions, an English-only BPE (lesson 12's)
    captions: int = None               # training captions (None: all 29,000)
    vocab_size: int = 500
    context: int = 64                  # T: tokens per training window; measured at T and at 4 T
    batch_size: int = 16
    # model
    d_model: int = 64
    num_heads: int = 4
    num_kv_heads: int = 2
    num_layers: int = 12               # 12: both patterns fit whole, 5:1 twice and 3:1 three times
    d_ff: int = 256                    # lesson 12's ReLU width; SwiGLU is sized to the same parameter count
    window: int = 16                   # a local layer's window
    d_latent: int = 56                 # MLA: d_c + d_R = 64 numbers per token, as GQA's 2 x 2 x 16
    d_rope: int = 8
    chunk_size: int = 16               # the chunked form of the delta rule
    # optimisation: AdamW, warm-up then a cosine down to lr / 10 (lesson 12's)
    steps: int = 800
    warmup: int = 80
    lr: float = 2e-3
    weight_decay: float = 0.1
    betas: tuple = (0.9, 0.95)
    eval_every: int = 100
    val_windows: int = None            # validation windows measured (None: all of them)
    measure_windows: int = 32          # validation windows for the attention measures (first position, sinks)
    log_every: int = 1
    amp: str = "off"                   # float32: the budget is float32 on a 2-core CPU

    MAY_CHANGE_ON_RESUME = RunConfig.MAY_CHANGE_ON_RESUME + ("steps",)

    def problems(self):
        out = [p for p in super().problems() if not p.startswith("epochs ")]
        for field in ("vocab_size", "context", "batch_size", "d_model", "num_heads", "num_kv_heads", "num_layers",
                      "d_ff", "window", "d_latent", "d_rope", "chunk_size", "steps", "eval_every"):
            value = getattr(self, field)
            if not (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
                out.append(f"{field} must be a whole number >= 1, got {value!r}")
        if self.model not in MODELS:
            out.append(f"model must be one of {', '.join(MODELS)}, got {self.model!r}")
        return out


@dataclasses.dataclass
class RecallConfig(RunConfig):
    """Multi-query associative recall (course_utils.data.associative_recall): two-layer models, one per rule."""
    preset: str = "full"
    epochs: int = None
    model: str = "gated_deltanet"      # one of RECALL_MODELS
    num_keys: int = 32                 # keys 1 .. 32, values 33 .. 64
    length: int = 64                   # 4 N <= length: N up to 16 pairs
    min_pairs: int = 2
    max_pairs: int = 16
    eval_pairs: tuple = (2, 4, 8, 12, 16)
    eval_sequences: int = 256
    batch_size: int = 32
    d_model: int = 64
    num_heads: int = 4                 # the state of a layer: 4 heads x 16 x 16 numbers
    num_layers: int = 2
    d_ff: int = 128
    steps: int = 800
    warmup: int = 80
    lr: float = 3e-3
    weight_decay: float = 0.1
    betas: tuple = (0.9, 0.95)
    eval_every: int = 200
    log_every: int = 10
    amp: str = "off"

    MAY_CHANGE_ON_RESUME = RunConfig.MAY_CHANGE_ON_RESUME + ("steps",)

    def problems(self):
        out = [p for p in super().problems() if not p.startswith("epochs ")]
        if self.model not in RECALL_MODELS:
            out.append(f"model must be one of {', '.join(RECALL_MODELS)}, got {self.model!r}")
        if not (1 <= self.min_pairs <= self.max_pairs <= min(self.num_keys, self.length // 4)):
            out.append(f"pairs must satisfy 1 <= min_pairs <= max_pairs <= min(num_keys, length / 4), got "
                       f"{self.min_pairs}, {self.max_pairs}")
        return out


PRESETS = {
    # seconds: the notebook's tests (COURSE_FAST=1)
    "fast": dict(captions=2000, vocab_size=300, context=16, batch_size=4, d_model=32, num_heads=4, num_kv_heads=2,
                 num_layers=12, d_ff=64, window=4, d_latent=24, d_rope=8, chunk_size=4, steps=6, warmup=2,
                 eval_every=3, val_windows=16, measure_windows=4, checkpoint_minutes=None),
    # the lesson: 7 models x 800 steps of 16 windows of 64 tokens, float32, one thread
    "full": dict(checkpoint_minutes=None),
}
RECALL_PRESETS = {
    "fast": dict(num_keys=16, length=32, min_pairs=2, max_pairs=8, eval_pairs=(2, 4, 8), eval_sequences=16,
                 batch_size=8, d_model=16, num_heads=2, d_ff=32, steps=6, warmup=2, eval_every=3,
                 checkpoint_minutes=None),
    "full": dict(checkpoint_minutes=None),
}


def make_config(preset="full", **overrides):
    return make_config_of(Config, PRESETS, preset, **overrides)


def make_recall_config(preset="full", **overrides):
    return make_config_of(RecallConfig, RECALL_PRESETS, preset, **overrides)


def layers_of(cfg):
    """The kinds of the caption model's layers."""
    if cfg.model == "mla":
        return ("mla",) * cfg.num_layers
    if cfg.model in ("local", "local_sinks"):
        return layer_pattern(cfg.num_layers, 6, "local")
    if cfg.model == "gated_deltanet":
        return layer_pattern(cfg.num_layers, 4, "gated_deltanet")
    return ("full",) * cfg.num_layers


def _modern_width(cfg, vocab_size):
    """The SwiGLU width that gives the modern model (all layers global) lesson 12's block's parameter count: the
    untied output layer's V x d_model weights come out of the feed-forward networks."""
    gpt = sum(p.numel() for p in build_model(dataclasses.replace(cfg, model="gpt2"), vocab_size).parameters())
    per_layer_ff = 3 * cfg.d_model                                            # weights per unit of SwiGLU width
    base = OpenLM(vocab_size, cfg.d_model, cfg.num_heads, ("full",) * cfg.num_layers, 8, cfg.num_kv_heads)
    rest = sum(p.numel() for p in base.parameters()) - cfg.num_layers * per_layer_ff * 8
    width = (gpt - rest) / (cfg.num_layers * per_layer_ff)
    return max(8, int(round(width / 8)) * 8) if width > 8 else swiglu_width(cfg.d_ff)


def build_model(cfg, vocab_size):
    """The caption model `cfg.model` (MODELS): positions for up to 4 x the context where they are a table."""
    if cfg.model == "gpt2":
        return GPT(vocab_size, cfg.d_model, cfg.num_heads, cfg.num_layers, cfg.d_ff, max_len=4 * cfg.context,
                   positions="rope", num_kv_heads=cfg.num_kv_heads)
    return OpenLM(vocab_size, cfg.d_model, cfg.num_heads, layers_of(cfg), _modern_width(cfg, vocab_size),
                  num_kv_heads=cfg.num_kv_heads, qk_norm=cfg.model != "no_qk_norm", window=cfg.window,
                  sinks=cfg.model == "local_sinks", d_latent=cfg.d_latent, d_rope=cfg.d_rope,
                  chunk_size=cfg.chunk_size)


def build_recall_model(cfg):
    """A two-layer model of `cfg.model`'s token mixer (softmax attention: global layers with RoPE)."""
    from ..data.associative_recall import vocab_size

    kind = "full" if cfg.model == "softmax" else cfg.model
    return OpenLM(vocab_size(cfg.num_keys), cfg.d_model, cfg.num_heads, (kind,) * cfg.num_layers, cfg.d_ff,
                  num_kv_heads=cfg.num_heads, chunk_size=16)
