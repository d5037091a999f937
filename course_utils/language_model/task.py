"""Lesson 12's language model as a task of the training pipeline (course_utils/pipeline): what is specific to it.

    report = run(make_config("full"), "runs/language_model-full", resume=True)   # the command line's run
    history = train_language_model(model, train_stream, steps=3000, context=64, batch_size=32,
                                   eval_windows=val)    # a given model, in memory (no run folder)

Its data: random windows of the caption stream (data.py), a global batch of `batch_size` windows per
optimizer step, drawn from ONE generator seeded once (so the windows of round r are a function of r:
a resumed run draws the same ones). Its loss: the next-token cross-entropy (gpt.next_token_loss, a mean
over equal micro-batches). Its optimiser: AdamW (weight decay on matrices only, betas 0.9, 0.95), the rate
warmed up linearly then decayed on a cosine to lr/10. Its evaluation (evaluate.py): validation perplexity
every `eval_every` steps; at the end, at twice the context too, against the smoothed bigram.
"""
import math

import torch

from ..data.multi30k import Multi30kError
from ..gpt import next_token_loss
from ..pipeline import trainer
from ..pipeline.task import ConfigError, Task
from .data import eval_windows, prepare, window_starts
from .evaluate import best_bigram, perplexity
from .presets import PRESETS, Config, build_model
from .samples import showcase

__all__ = ["LanguageModelTask", "run", "train_language_model"]
AMP_NAMES = {None: "off", torch.bfloat16: "bf16", torch.float16: "fp16"}


class LanguageModelTask(Task):
    """Train lesson 12's GPT on Multi30k's English captions and measure its perplexity against a bigram."""
    name, command, Config, presets, default_preset = "language_model", "python -m course_utils.language_model", \
        Config, PRESETS, "full"
    unit = "round"
    output_files = ("tokenizer.json",)
    tokens_counted = "every token of the windows (batch_size x context per step)"
    headline = ("gpt_val_ppl", "bigram_val_ppl", "gpt_val_ppl_2x", "steps", "train_seconds")
    data_errors = (Multi30kError,)
    summary = ("preset", "device", "threads", "steps", "train_seconds", "tokens_per_second", "bigram_val_ppl",
               "gpt_val_ppl", "gpt_val_ppl_2x")

    def __init__(self, cfg, data=None, model=None, val_windows=None):
        """`data` = (tok or None, train_stream, val_stream or None), `model`, `val_windows` (N, T): train and
        measure these instead of Multi30k and the GPT of cfg (train_language_model, the position experiment)."""
        super().__init__(cfg)
        self.given_data, self.given_model, self.given_val = data, model, val_windows

    @classmethod
    def add_arguments(cls, p):
        p.add_argument("--steps", type=int, help="optimizer steps of the run")
        p.add_argument("--batch-size", type=int, help="windows per optimizer step (the global batch)")
        p.add_argument("--dropout", type=float)

    def check(self, world_size=1):
        self.cfg.check()
        if self.cfg.batch_size % self.parts:
            raise ConfigError(f"batch_size {self.cfg.batch_size} cannot be split into {world_size} process(es) x "
                              f"{self.cfg.accum_steps} accumulation step(s): choose a batch size that is a multiple "
                              f"of {self.parts}")

    # ---- data and model -----------------------------------------------------------------------------
    def prepare(self, out_dir, saved=None, log=print):
        cfg = self.cfg
        if self.given_data is not None:
            self.tok, self.train_stream, self.val_stream = self.given_data
        else:
            path = out_dir / "tokenizer.json" if out_dir is not None else None
            saved_tok = (saved or {}).get("tokenizer") or (path.read_text(encoding="utf-8")
                                                           if path is not None and path.exists() else None)
            self.tok, self.train_stream, self.val_stream = prepare(cfg, saved_tok)
            if path is not None:
                self.tok.save(path)
        self.val = self.given_val if self.given_val is not None else (
            eval_windows(self.val_stream, cfg.context) if self.val_stream is not None else None)

    def state_dict(self):
        return {"tokenizer": self.tok.to_str()} if self.tok is not None else {}

    def build_model(self):
        if self.given_model is not None:
            return self.given_model
        return build_model(self.cfg, self.tok.vocab_size if self.tok is not None else self.cfg.vocab_size)

    def make_optimizer(self, model):
        decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
        other = [p for n, p in model.named_parameters() if p.dim() < 2]
        return torch.optim.AdamW([{"params": decay, "weight_decay": self.cfg.weight_decay},
                                  {"params": other, "weight_decay": 0.0}], lr=self.cfg.lr, betas=tuple(self.cfg.betas))

    def learning_rate(self, step, progress):
        """Linear warm-up over `warmup` steps, then a cosine from lr down to lr / 10 at `steps`."""
        cfg, s = self.cfg, step - 1                                      # s counts from 0
        if s < cfg.warmup:
            return cfg.lr * ((s + 1) / cfg.warmup)
        done = (s - cfg.warmup) / max(1, cfg.steps - cfg.warmup)
        return cfg.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, done))))

    def rounds(self):
        return self.cfg.eval_every or self.cfg.steps

    def num_epochs(self):
        return -(-self.cfg.steps // self.rounds())

    def num_steps(self, steps_per_epoch):
        return self.cfg.steps

    # ---- training -----------------------------------------------------------------------------------
    def batches(self, epoch):
        """Round `epoch`'s global batches: the window offsets of its steps, drawn from the one generator."""
        cfg, per = self.cfg, self.rounds()
        gen = torch.Generator().manual_seed(cfg.seed)
        first, last = epoch * per, min((epoch + 1) * per, cfg.steps)
        draws = [window_starts(self.train_stream.numel(), cfg.context, cfg.batch_size, gen) for _ in range(last)]
        return draws[first:]

    def to_device(self, starts, device):
        return torch.stack([self.train_stream[s:s + self.cfg.context] for s in starts.tolist()]).to(device)

    def loss(self, model, tokens):
        return next_token_loss(model(tokens), tokens, getattr(model, "pad_id", 0))

    def tokens(self, tokens):
        return tokens.numel()

    # ---- evaluation ---------------------------------------------------------------------------------
    def evaluate(self, model, history):
        if self.val is None:
            return {}
        recent = history["step_loss"][-50:]
        return {"eval_step": history["step"][-1], "train_ppl": math.exp(sum(recent) / len(recent)),
                "val_ppl": perplexity(model, self.val, amp_dtype=self.amp_dtype)}

    def describe(self, m):
        return f"train perplexity {m['train_ppl']:.2f}, val perplexity {m['val_ppl']:.2f}" if m else "no validation"

    def finish(self, model, history, log=print):
        """The bigram baseline and the perplexity at the context and at twice it."""
        if self.val_stream is None or self.tok is None:
            return {}
        cfg = self.cfg
        bigram = best_bigram(self.train_stream, self.tok.vocab_size, self.val)
        ppl_2x = perplexity(model, eval_windows(self.val_stream, 2 * cfg.context), amp_dtype=self.amp_dtype)
        results = {"vocab_size": self.tok.vocab_size, "train_tokens": self.train_stream.numel(),
                   "val_tokens": self.val_stream.numel(), "bigram_alpha": bigram.alpha,
                   "bigram_val_ppl": round(bigram.perplexity(self.val), 2),
                   "gpt_val_ppl": round(history["val_ppl"][-1], 2), "gpt_val_ppl_2x": round(ppl_2x, 2),
                   "history": {k: history[k] for k in ("eval_step", "train_ppl", "val_ppl")},
                   "samples": showcase(model, self.tok)}       # what the lesson shows of the trained model
        log(f"validation perplexity: GPT {results['gpt_val_ppl']} (at 2 x the context {results['gpt_val_ppl_2x']}), "
            f"smoothed bigram {results['bigram_val_ppl']}")
        return results

    def model_extras(self):
        return self.state_dict()

    def reference_extras(self, model, history):
        return {"history": {k: history[k] for k in ("eval_step", "train_ppl", "val_ppl")}}


def run(cfg, out_dir=None, resume=False, show_progress=True, log=print, command=None, overwrite=False, reference=None):
    """Lesson 12's main run (the command line's, from Python): returns the report (report.json's dict).
    `resume=True`: go on with the run kept in `out_dir`, or start one; out_dir None: runs/language_model-<preset>."""
    task = LanguageModelTask(cfg)
    return trainer.run(task, out_dir, resume=resume, overwrite=overwrite, show_progress=show_progress, log=log,
                       command=command, reference=reference)


def train_language_model(model, train_stream, steps, context, batch_size, lr=1e-3, warmup=100, weight_decay=0.1,
                         clip=1.0, eval_windows=None, eval_every=None, amp_dtype=None, seed=0, show_progress=True,
                         log=None):
    """Train `model` on random windows of train_stream with the pipeline, in memory (no checkpoints, no files).

    Returns a history: {"step": [...], "train_loss": [...]} (each step's loss) and, every `eval_every` steps
    and at the end, {"eval_step": [...], "train_ppl": [...], "val_ppl": [...]} (train_ppl from the running
    mean of the last 50 steps' losses), "seconds" (training time, evaluation excluded) and "tokens_per_second".
    """
    cfg = Config(preset=None, context=context, batch_size=batch_size, lr=lr, warmup=warmup, weight_decay=weight_decay,
                 clip_norm=clip, steps=steps, eval_every=eval_every if eval_windows is not None else None,
                 amp=AMP_NAMES[amp_dtype], seed=seed, device=str(next(model.parameters()).device))
    task = LanguageModelTask(cfg, data=(None, train_stream, None), model=model, val_windows=eval_windows)
    state, history, _ = trainer.train(task, None, show_progress=show_progress, log=log or (lambda *a, **k: None))
    out = {"step": history["step"], "train_loss": history["step_loss"], "eval_step": history.get("eval_step", []),
           "train_ppl": history.get("train_ppl", []), "val_ppl": history.get("val_ppl", []),
           "seconds": state.train_seconds, "tokens_per_second": state.tokens / max(state.train_seconds, 1e-9)}
    model.eval()
    return out
