"""Lesson 10's translator as a task of the training pipeline (course_utils/pipeline): what is specific to it.

    task = TranslationTask(make_config("cpu"))
    report = pipeline.trainer.run(task, "runs/cpu", resume=True)     # what translation.run.run does
    state = setup_state(cfg, vocab_size)         # a model to step by hand (the notebook's speed measurement)

Its data: Multi30k as subword ids (data.py), bucketed by length (batching.py): every bucketed batch of
`batch_tokens` padded tokens is one optimizer step. Its loss: label-smoothed cross-entropy summed over the
target tokens (step.py). Its evaluation: validation loss and greedy BLEU after every epoch; at the end,
checkpoint averaging (kept only when it scores better) and greedy and beam-search sacreBLEU on
test_2016_flickr (decode.py); its figures and reference file: figures.py, reference.py.
"""
import collections
import time

from ..config import resolve_device, runs_dir
from ..data.batch import collate
from ..data.multi30k import Multi30kError
from ..files import atomic_write_text
from ..pipeline import trainer
from ..pipeline.batches import accumulation_steps
from ..pipeline.task import ConfigError, Task
from ..tensors import cpu_state_dict
from ..training import warmup_lr
from .batching import BucketBatchSampler, micro_batch_tokens
from .data import TokenizerFileError, example_lengths, prepare_data
from .decode import bleu_on
from .presets import PRESETS, Config, build_model
from .reference import FOLDER, attention_maps, rounded_history
from .step import evaluate_loss, forward_loss

TEST_FILES = ("test_2016_flickr.greedy.en", "test_2016_flickr.beam.en")


class TranslationTask(Task):
    """Train the course's Transformer on Multi30k German -> English, decode, and score with sacreBLEU."""
    name, command, Config, presets, default_preset = "translation", "python -m course_utils.translation", Config, \
        PRESETS, "smoke"
    out_help = "<preset>"
    output_files = ("tokenizer.json", "learning_curves.png") + TEST_FILES
    tokens_counted = "non-pad source + target tokens"
    headline = ("bleu_beam", "bleu_greedy", "steps", "epochs", "train_seconds")
    reference_folder = FOLDER
    data_errors = (Multi30kError, TokenizerFileError)
    summary = ("preset", "device", "threads", "steps", "epochs", "train_seconds", "tokens_per_second", "bleu_greedy",
               "bleu_beam", "sacrebleu_signature")

    def default_out(self):
        return runs_dir() / self.cfg.preset          # runs/<preset>: where lesson 10 looks too

    @classmethod
    def add_arguments(cls, p):
        p.add_argument("--epochs", type=int)
        p.add_argument("--max-train-pairs", type=int)
        p.add_argument("--max-eval-pairs", type=int)
        p.add_argument("--batch-tokens", type=int, help="the GLOBAL batch: padded tokens per optimizer step, "
                                                        "summed over the micro-batches and the processes")
        p.add_argument("--micro-batch-tokens", type=int, help="tokens per micro-batch and process: sets "
                       "--accum-steps to batch_tokens / (processes x this), the same global batch for any N")
        p.add_argument("--dropout", type=float)
        p.add_argument("--beam-size", type=int)
        p.add_argument("--length-penalty", type=float)

    @classmethod
    def configure(cls, cfg, args, world_size):
        if args.micro_batch_tokens is None:
            return
        if args.accum_steps is not None:
            raise ConfigError("give --accum-steps or --micro-batch-tokens, not both")
        if args.micro_batch_tokens < 1:
            raise ConfigError(f"--micro-batch-tokens must be >= 1, got {args.micro_batch_tokens}")
        cfg.accum_steps = accumulation_steps(cfg.batch_tokens, args.micro_batch_tokens, world_size)

    def check(self, world_size=1):
        self.cfg.check()
        self.micro_tokens = micro_batch_tokens(self.cfg, world_size)   # the batch arithmetic, resolved once

    # ---- data and model -----------------------------------------------------------------------------
    def prepare(self, out_dir, saved=None, log=print):
        saved = saved or {}
        self.data = prepare_data(self.cfg, out_dir, saved.get("tokenizer"), log)
        self.vocab_size = self.data.tokenizer.vocab_size
        self.lengths = example_lengths(self.data.train)
        self.snapshots = collections.deque(saved.get("snapshots", ()), maxlen=max(self.cfg.average_last, 1))

    def state_dict(self):
        return {"tokenizer": self.data.tokenizer.to_str(), "snapshots": list(self.snapshots)}

    def build_model(self):
        return build_model(self.cfg, self.vocab_size)

    def learning_rate(self, step, progress):
        cfg, total = self.cfg, getattr(self, "total_steps", None)
        return warmup_lr(step, progress, cfg.lr, cfg.warmup_steps, cfg.schedule,
                         cfg.warmup_steps / total if total else 0.0)

    # ---- training -----------------------------------------------------------------------------------
    def batches(self, epoch):
        """The epoch's bucketed batches of at most batch_tokens padded tokens, one per optimizer step; with
        several parts (processes x accumulation) only those with a sentence for every part."""
        sampler = BucketBatchSampler(self.lengths, max_tokens=self.cfg.batch_tokens, seed=self.cfg.seed)
        sampler.set_epoch(epoch)
        return [b for b in sampler.batches() if len(b) >= self.parts]

    def to_device(self, indices, device):
        return collate([self.data.train[i] for i in indices]).to(device)

    def loss(self, model, batch):
        return forward_loss(model, batch, self.cfg.label_smoothing)

    def count(self, batch):
        return batch.tgt_tokens

    def tokens(self, batch):
        return batch.src_tokens + batch.tgt_tokens

    # ---- evaluation ---------------------------------------------------------------------------------
    def _val_pairs(self):
        return self.data.val_text[: self.cfg.val_bleu_pairs] if self.cfg.val_bleu_pairs else self.data.val_text

    def _bleu(self, model, pairs, **options):
        return bleu_on(model, self.data.tokenizer, pairs, self.device, amp_dtype=self.amp_dtype, **options)

    def evaluate(self, model, history):
        val_loss, val_nll = evaluate_loss(model, self.data.val, self.cfg, self.device, self.amp_dtype)
        bleu, _ = self._bleu(model, self._val_pairs(), batch_sentences=self.cfg.eval_batch_sentences)
        self.snapshots.append(cpu_state_dict(model))
        return {"val_loss": val_loss, "val_nll": val_nll, "val_bleu": bleu.score}

    def describe(self, m):
        return f"val loss {m['val_loss']:.3f} (nll {m['val_nll']:.3f}), val BLEU {m['val_bleu']:.2f}"

    def describe_start(self, state, steps_per_epoch):
        from .presets import count_parameters

        return (f"{self.cfg.preset} preset on {state.device} (autocast: {state.amp_dtype or 'off'}): "
                f"{count_parameters(state.raw_model) / 1e6:.2f}M parameters, vocabulary "
                f"{self.data.tokenizer.vocab_size}, {len(self.data.train)} training pairs, {steps_per_epoch} steps "
                f"per epoch, {state.total_steps} steps in all")

    def describe_batch(self, world_size):
        return (f"global batch {self.cfg.batch_tokens} tokens = {self.micro_tokens} per micro-batch x {world_size} "
                f"process(es) x {self.cfg.accum_steps} accumulation step(s); the lr schedule counts optimizer steps")

    def _average(self, model, history, log):
        """Checkpoint averaging: keep the average of the last epochs' weights only if it does better on validation."""
        from ..pipeline.checkpoints import average_state_dicts

        final = cpu_state_dict(model)
        choice = {"averaged_epochs": 1, "val_bleu_final": history["val_bleu"][-1] if history.get("val_bleu") else None}
        if len(self.snapshots) > 1:
            model.load_state_dict(average_state_dicts(list(self.snapshots)))
            bleu, _ = self._bleu(model, self._val_pairs(), batch_sentences=self.cfg.eval_batch_sentences)
            choice["val_bleu_averaged"] = bleu.score
            keep = choice["val_bleu_final"] is None or bleu.score > choice["val_bleu_final"]
            if keep:
                choice["averaged_epochs"] = len(self.snapshots)
            else:
                model.load_state_dict(final)
            log(f"averaging the last {len(self.snapshots)} epochs: val BLEU {bleu.score:.2f} (final weights: "
                f"{choice['val_bleu_final']:.2f}) -> keep the {'average' if keep else 'final weights'}")
        return choice

    def finish(self, model, history, log=print):
        """Averaging, the learning curves, then greedy and beam-search sacreBLEU on test_2016_flickr."""
        from .figures import plot_history

        cfg, data = self.cfg, self.data
        self.averaging = self._average(model, history, log)
        if self.out_dir is not None and history["epoch"]:
            plot_history(history, path=self.out_dir / "learning_curves.png")
        t0 = time.perf_counter()
        greedy, greedy_hyps = self._bleu(model, data.test_text, batch_sentences=cfg.eval_batch_sentences)
        t1 = time.perf_counter()
        beam, beam_hyps = self._bleu(model, data.test_text, beam_size=cfg.beam_size, length_penalty=cfg.length_penalty,
                                     batch_sentences=max(cfg.eval_batch_sentences // cfg.beam_size, 8))
        t2 = time.perf_counter()
        log(f"test_2016_flickr: greedy {greedy}\n                  beam {cfg.beam_size}: {beam}")
        if self.out_dir is not None:
            for name, lines in zip(TEST_FILES, (greedy_hyps, beam_hyps)):
                atomic_write_text("\n".join(lines) + "\n", self.out_dir / name)
        return {"vocab_size": data.tokenizer.vocab_size, "train_pairs": len(data.train),
                "global_batch_tokens": cfg.batch_tokens, "micro_batch_tokens": self.micro_tokens,
                "bleu_greedy": round(greedy.score, 2), "bleu_beam": round(beam.score, 2),
                "sacrebleu_signature": beam.signature, "test_sentences": len(data.test_text),
                "greedy_seconds": round(t1 - t0, 1), "beam_seconds": round(t2 - t1, 1),
                "val_bleu_greedy_per_epoch": [round(b, 2) for b in history.get("val_bleu", [])],
                "val_loss_per_epoch": [round(v, 4) for v in history.get("val_loss", [])],
                "averaging": self.averaging,
                "examples": [{"source": de, "reference": en, "greedy": g, "beam": b}
                             for (de, en), g, b in list(zip(data.test_text, greedy_hyps, beam_hyps))[:8]]}

    def model_extras(self):
        return {"tokenizer": self.data.tokenizer.to_str(), "averaging": getattr(self, "averaging", None)}

    def reference_extras(self, model, history):
        return {"history": rounded_history(history), "attention": attention_maps(model, self.data.tokenizer)}


def setup_state(cfg, vocab_size, device=None):
    """A translator of `cfg` with its optimizer, precision and schedule (the pipeline's RunState), without
    data: to take steps by hand (translation_step)."""
    task = TranslationTask(cfg)
    task.vocab_size = vocab_size
    return trainer.make_state(task, resolve_device(cfg.device) if device is None else device)
