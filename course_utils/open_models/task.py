"""Lesson 15's models as tasks of the training pipeline (course_utils/pipeline): what is specific to them.

    CaptionTask(cfg, data=(tok, train_stream, val_stream))   one caption model of MODELS (cfg.model)
    RecallTask(cfg)                                         one associative-recall model of RECALL_MODELS

The caption task is lesson 12's recipe: random windows of the caption stream drawn from ONE generator seeded once
(round r's windows are a function of r: a resumed run draws the same ones), the next-token loss, AdamW with weight
decay on matrices, a linear warm-up then a cosine down to lr / 10. After every round it measures the validation
perplexity and the largest attention logit on a fixed validation batch; at the end, the perplexity at 4 x the
context and where the attention of the global layers goes (first position, learned sinks). The recall task draws
fresh sequences for every step (the number of pairs at random in [min_pairs, max_pairs]) and measures the accuracy
at each of `eval_pairs` on fixed sequences.
"""
import math

import torch

from ..data.associative_recall import recall_batch
from ..gpt import next_token_loss
from ..pipeline.task import ConfigError, Task
from .data import prepare, windows
from .measure import first_position, largest_logits, perplexity, recall_accuracy, recall_loss
from .presets import PRESETS, RECALL_PRESETS, Config, RecallConfig, build_model, build_recall_model

__all__ = ["CaptionTask", "RecallTask"]


def _decay_groups(model, cfg):
    decay = [p for p in model.parameters() if p.dim() >= 2]
    other = [p for p in model.parameters() if p.dim() < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": cfg.weight_decay},
                              {"params": other, "weight_decay": 0.0}], lr=cfg.lr, betas=tuple(cfg.betas))


def _cosine(cfg, step):
    """Linear warm-up over `warmup` steps, then a cosine from lr down to lr / 10 at `steps`."""
    s = step - 1
    if s < cfg.warmup:
        return cfg.lr * (s + 1) / cfg.warmup
    done = min(1.0, (s - cfg.warmup) / max(1, cfg.steps - cfg.warmup))
    return cfg.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * done)))


class _Rounds(Task):
    """`steps` optimizer steps in rounds of `eval_every` (the pipeline's epochs)."""
    unit = "round"

    def rounds(self):
        return min(self.cfg.eval_every, self.cfg.steps)

    def num_epochs(self):
        return -(-self.cfg.steps // self.rounds())

    def num_steps(self, steps_per_epoch):
        return self.cfg.steps

    def make_optimizer(self, model):
        return _decay_groups(model, self.cfg)

    def learning_rate(self, step, progress):
        return _cosine(self.cfg, step)

    def check(self, world_size=1):
        self.cfg.check()
        if self.cfg.batch_size % self.parts:
            raise ConfigError(f"batch_size {self.cfg.batch_size} cannot be split into {self.parts} micro-batches")


class CaptionTask(_Rounds):
    """Train one of lesson 15's caption models (cfg.model) on Multi30k's English captions."""
    name, command, Config, presets, default_preset = "open_models", "python -m course_utils.open_models", \
        Config, PRESETS, "full"
    tokens_counted = "every token of the windows (batch_size x context per step)"
    headline = ("val_ppl", "val_ppl_4x", "steps", "train_seconds")

    def __init__(self, cfg, data=None):
        super().__init__(cfg)
        self.given = data

    def prepare(self, out_dir, saved=None, log=print):
        self.tok, self.train_stream, self.val_stream = self.given if self.given is not None else prepare(self.cfg)
        self.val = windows(self.val_stream, self.cfg.context)[:self.cfg.val_windows]
        self.probe = self.val[:self.cfg.measure_windows]                 # the fixed batch of the logit measure

    def build_model(self):
        return build_model(self.cfg, self.tok.vocab_size)

    def model_extras(self):
        return {"tokenizer": self.tok.to_str()}

    def batches(self, epoch):
        """Round `epoch`'s window offsets, drawn from the one generator (lesson 12's way)."""
        cfg, per = self.cfg, self.rounds()
        gen = torch.Generator().manual_seed(cfg.seed)
        last = min((epoch + 1) * per, cfg.steps)
        draws = [torch.randint(0, self.train_stream.numel() - cfg.context + 1, (cfg.batch_size,), generator=gen)
                 for _ in range(last)]
        return draws[epoch * per:]

    def to_device(self, starts, device):
        return torch.stack([self.train_stream[s:s + self.cfg.context] for s in starts.tolist()]).to(device)

    def loss(self, model, tokens):
        return next_token_loss(model(tokens), tokens, pad_id=-1)

    def tokens(self, tokens):
        return tokens.numel()

    def evaluate(self, model, history):
        recent = history["step_loss"][-50:]
        return {"eval_step": history["step"][-1], "train_ppl": math.exp(sum(recent) / len(recent)),
                "val_ppl": perplexity(model, self.val), "max_logit": largest_logits(model, self.probe)}

    def describe(self, m):
        return (f"val perplexity {m['val_ppl']:.2f}, largest logit {max(m['max_logit'], default=float('nan')):.1f}"
                if m else "")

    def finish(self, model, history, log=print):
        cfg = self.cfg
        long = windows(self.val_stream, 4 * cfg.context)[:cfg.val_windows and -(-cfg.val_windows // 4)]
        results = {"model": cfg.model, "vocab_size": self.tok.vocab_size,
                   "val_ppl": round(history["val_ppl"][-1], 2), "val_ppl_4x": round(perplexity(model, long), 2),
                   "first_position": first_position(model, self.val[:cfg.measure_windows]),
                   "first_position_4x": first_position(model, long[:cfg.measure_windows]),
                   "history": {k: history[k] for k in ("eval_step", "train_ppl", "val_ppl", "max_logit")}}
        log(f"{cfg.model}: validation perplexity {results['val_ppl']} (at 4 x the context {results['val_ppl_4x']})")
        return results


class RecallTask(_Rounds):
    """Train one of lesson 15's associative-recall models (cfg.model) on MQAR sequences."""
    name, command, Config, presets, default_preset = "open_models_recall", "python -m course_utils.open_models", \
        RecallConfig, RECALL_PRESETS, "full"
    tokens_counted = "every position of the sequences (batch_size x length per step)"
    headline = ("accuracy", "steps", "train_seconds")

    def prepare(self, out_dir, saved=None, log=print):
        cfg = self.cfg
        gen = torch.Generator().manual_seed(10_000 + cfg.seed)
        self.eval_sets = {n: recall_batch(cfg.eval_sequences, n, cfg.length, cfg.num_keys, gen)
                          for n in cfg.eval_pairs}

    def build_model(self):
        return build_recall_model(self.cfg)

    def batches(self, epoch):
        cfg = self.cfg
        gen = torch.Generator().manual_seed(cfg.seed * 100_003 + epoch)
        count = min(self.rounds(), cfg.steps - epoch * self.rounds())
        return [recall_batch(cfg.batch_size, torch.randint(cfg.min_pairs, cfg.max_pairs + 1, (cfg.batch_size,),
                                                           generator=gen), cfg.length, cfg.num_keys, gen)
                for _ in range(count)]

    def split(self, batch, parts):
        return [batch] if parts == 1 else list(zip(*(torch.tensor_split(t, parts) for t in batch)))

    def to_device(self, batch, device):
        return tuple(t.to(device) for t in batch)

    def loss(self, model, batch):
        return recall_loss(model, *batch)

    def tokens(self, batch):
        return batch[0].numel()

    def evaluate(self, model, history):
        return {"eval_step": history["step"][-1] if history["step"] else 0,
                "accuracy": {str(n): round(recall_accuracy(model, *s), 4) for n, s in self.eval_sets.items()}}

    def describe(self, m):
        return "accuracy " + ", ".join(f"{n} pairs {a:.2f}" for n, a in m["accuracy"].items())

    def finish(self, model, history, log=print):
        results = {"model": self.cfg.model, "accuracy": history["accuracy"][-1],
                   "history": {k: history[k] for k in ("eval_step", "accuracy")}}
        log(f"{self.cfg.model}: recall accuracy {results['accuracy']}")
        return results
