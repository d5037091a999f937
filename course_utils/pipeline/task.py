"""What a model brings to the course's training pipeline: a `Task` (its data, model, loss and evaluation)
and its configuration (a `RunConfig`). Everything else (the one optimizer step, epochs, checkpoints with
exact resume, the runs folder, Ctrl-C, several processes, the report, the command line) is the pipeline's.

Lesson 10's translator (course_utils/translation/task.py) and lesson 12's language model
(course_utils/language_model/task.py) are two tasks. A third model joins with one small module:

    import dataclasses
    import torch
    import torch.nn.functional as F
    from course_utils.pipeline.task import RunConfig, Task
    from course_utils.pipeline import cli, trainer

    @dataclasses.dataclass
    class InductionConfig(RunConfig):          # the common settings (epochs, lr, amp, seed, ...) + its own
        vocab_size: int = 64
        half_length: int = 32                  # a random sequence of 32 tokens, then the same 32 again
        batch_size: int = 32
        steps_per_epoch: int = 100             # an "epoch" is the unit between two evaluations
        d_model: int = 64

    PRESETS = {"fast": dict(epochs=2, steps_per_epoch=5), "full": dict(epochs=20)}

    class InductionTask(Task):
        name, command, Config, presets = "induction", "python -m course_utils.induction", InductionConfig, PRESETS

        def prepare(self, out_dir, saved=None, log=print):     # the data: here generated, nothing to load
            self.val = self.sequences(torch.Generator().manual_seed(10_000 + self.cfg.seed), 256)   # (256, 2L)

        def sequences(self, gen, n):           # (n, 2L): random tokens, repeated once
            first = torch.randint(0, self.cfg.vocab_size, (n, self.cfg.half_length), generator=gen)
            return torch.cat([first, first], dim=1)

        def build_model(self):
            return AttentionOnly(self.cfg.vocab_size, self.cfg.d_model, num_layers=2)   # lesson 14's model

        def batches(self, epoch):               # a pure function of the epoch: what makes resume exact
            gen = torch.Generator().manual_seed(self.cfg.seed * 100_003 + epoch)
            return [self.sequences(gen, self.cfg.batch_size) for _ in range(self.cfg.steps_per_epoch)]

        def loss(self, model, tokens):          # (B, 2L) -> next-token loss SUMMED over the targets
            logits = model(tokens[:, :-1])                                          # (B, 2L-1, V)
            return F.cross_entropy(logits.flatten(0, 1).float(), tokens[:, 1:].flatten(), reduction="sum")

        def count(self, tokens):                # the targets the loss is summed over
            return tokens[:, 1:].numel()

        @torch.no_grad()
        def evaluate(self, model, history):     # after every epoch; each value is appended to the history
            tokens = self.val.to(self.device)
            logits = model(tokens[:, :-1]).float()
            per_position = F.cross_entropy(logits.transpose(1, 2), tokens[:, 1:], reduction="none").mean(0)
            L = self.cfg.half_length
            return {"loss_per_position": per_position.tolist(),
                    "icl_score": float(per_position[2 * L - 2] - per_position[L - 1])}  # late minus early loss

    # __main__.py of the new package: the pipeline's command line, with the pipeline's conventions
    #     sys.exit(cli.main(InductionTask))    # --preset, --out, --resume, --overwrite, --threads, --amp, ...
    # from Python or a notebook (checkpoints, exact resume and the report as with the command):
    #     report = trainer.run(InductionTask(InductionTask.make_config("fast")), out_dir, resume=True)

What the pipeline calls, in order (the methods marked * have a default here):

    prepare(out_dir, saved, log)  the data (and e.g. a tokenizer). `saved` is what state_dict() returned into the
                                  checkpoint of the run being resumed (None for a new run); out_dir is None
                                  in a run kept in memory and on the other processes of a multi-process run
    state_dict()*                 what a checkpoint keeps besides the weights and the optimizer (e.g. the tokenizer)
    build_model()                 the nn.Module (the pipeline moves it to the device and seeds before)
    make_optimizer(model)*        AdamW with the configuration's lr, weight_decay, betas (training.make_optimizer)
    learning_rate(step, progress)* the rate of optimizer step `step` (1-based); `progress` in [0, 1] is the part
                                  of the run done (steps, or time under --time-budget). Default: cfg.lr
    batches(epoch)                the epoch's GLOBAL batches, one per optimizer step, a pure function of the
                                  configuration and `epoch` (a resumed run recomputes them and skips the done ones)
    split(batch, parts)*          one global batch -> `parts` micro-batches (processes x accumulation steps;
                                  default: an even split of a list or of a tensor's first dimension)
    to_device(micro, device)*     a micro-batch ready for the loss (default: tensor.to(device))
    loss(model, micro)            the micro-batch's loss SUMMED over its items (tokens): training.train_step
    count(micro)*                 its items (default 1: then loss() returns a mean over equal micro-batches)
    tokens(micro)*                tokens it holds, for tokens per second (default: count(micro))
    num_epochs()*, num_steps(per_epoch)*   the run's length (default: cfg.epochs x the first epoch's steps)
    evaluate(model, history)*     after every epoch, on the main process: {name: number or list}, appended to
                                  history[name] (history also holds epoch, step, step_loss, train_loss, ...)
    describe(metrics)*            those metrics in the epoch's log line
    finish(model, history, log)*  after training, on the main process: the results for report.json (test
                                  scores, examples; may replace the weights, e.g. by an average)
    model_extras()*               what model.pt keeps besides the weights and config (e.g. the tokenizer)
    reference_extras(model, history)*  more for a reference file (e.g. attention maps), or keys it keeps in
                                  another form (e.g. the history rounded); default: the report and history
    describe_batch(world_size)*   one line: how a global batch is split (printed at the start)

`self.cfg` is the run's configuration, `self.device` the device, `self.out_dir` the run folder (or None),
`self.world_size` the number of processes, `self.parts` = world_size x cfg.accum_steps micro-batches per
step: all four are set by the pipeline before prepare().
"""
import dataclasses

import torch

__all__ = ["ConfigError", "RunConfig", "Task", "make_config_of"]


class ConfigError(ValueError):
    """A configuration that cannot work; raised before any training starts (the command line: one line, 2)."""


@dataclasses.dataclass
class RunConfig:
    """The settings every run of the pipeline has; a task's Config adds its own (data, model, optimiser)."""
    preset: str = None
    epochs: int = 1                    # the run: `epochs` x the optimizer steps of an epoch (a task's unit)
    time_budget_minutes: float = None  # optional hard cap (the result then depends on the machine)
    checkpoint_minutes: float = 5.0    # also write a checkpoint this often within an epoch (0 = every step)
    accum_steps: int = 1               # micro-batches per process and optimizer step
    lr: float = 1e-3                   # peak learning rate
    clip_norm: float = 1.0             # clip the gradient norm (None: no clipping)
    amp: str = "auto"                  # auto | bf16 | fp16 | off (precision.resolve_amp)
    compile: bool = False              # torch.compile the model
    device: str = "auto"               # auto | cpu | cuda | cuda:1 ...
    threads: int = None                # torch threads (None: torch's default)
    seed: int = 0
    log_every: int = 20                # steps between points of the step-level loss curve (history["step"])

    # settings a resumed run may change: they do not change what the checkpoint's model was trained on
    MAY_CHANGE_ON_RESUME = ("epochs", "time_budget_minutes", "checkpoint_minutes", "device", "threads", "compile",
                            "accum_steps")

    def to_dict(self):
        return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(self).items()}

    @classmethod
    def from_dict(cls, data):
        fields = {f.name: f for f in dataclasses.fields(cls)}
        data = {k: (tuple(v) if isinstance(fields[k].default, tuple) else v) for k, v in data.items() if k in fields}
        return cls(**data)

    def problems(self):
        """Every impossible common setting, as lines "name must be ..., got ..."; a task's Config adds its own."""
        out = []

        def need(ok, field, what):
            if not ok:
                out.append(f"{field} must be {what}, got {getattr(self, field)!r}")

        for field in ("epochs", "accum_steps", "log_every"):
            value = getattr(self, field)
            need(isinstance(value, int) and not isinstance(value, bool) and value >= 1, field, "a whole number >= 1")
        need(self.threads is None or (isinstance(self.threads, int) and self.threads >= 1), "threads",
             "a whole number >= 1 (or unset)")
        need(isinstance(self.lr, (int, float)) and self.lr > 0, "lr", "positive")
        need(self.time_budget_minutes is None or self.time_budget_minutes > 0, "time_budget_minutes",
             "positive (or unset)")
        need(self.checkpoint_minutes is None or self.checkpoint_minutes >= 0, "checkpoint_minutes", ">= 0 (or unset)")
        need(self.amp in ("auto", "bf16", "fp16", "off"), "amp", "one of auto, bf16, fp16, off")
        return out

    def check(self):
        """Raise one ConfigError naming every impossible setting (before any data is loaded)."""
        found = self.problems()
        if found:
            raise ConfigError("; ".join(found))
        return self

    def resume_differences(self, saved, epochs_done=0):
        """(refused, allowed): lists of "name: saved -> new" between a checkpoint's config dict and this one.
        A setting that may not change and that the command line was not given (`given`, set by
        cli.configure) takes the run's own value instead: --resume goes on with the run's own settings."""
        refused, allowed = [], []
        given = getattr(self, "given", None)          # None: every value was chosen (the Python API)
        for key, value in self.to_dict().items():
            if key in saved and saved[key] != value and given is not None and key not in given \
                    and key not in self.MAY_CHANGE_ON_RESUME and key != "preset":
                setattr(self, key, tuple(saved[key]) if isinstance(getattr(self, key), tuple) else saved[key])
                continue
            if key in saved and saved[key] != value:
                line = f"{key}: {saved[key]!r} -> {value!r}"
                ok = key in self.MAY_CHANGE_ON_RESUME and not (key == "epochs" and value < max(epochs_done, 1))
                (allowed if ok else refused).append(line)
        return refused, allowed


def make_config_of(config_class, presets, preset, **overrides):
    """`config_class` with preset `preset` of `presets` and `overrides` (None values are ignored)."""
    if presets and preset not in presets:
        raise ValueError(f"preset must be one of {sorted(presets)}, got {preset!r}")
    cfg = config_class(preset=preset, **presets.get(preset, {}))
    for key, value in overrides.items():
        if value is None:
            continue
        if not hasattr(cfg, key):
            raise ValueError(f"unknown config field {key!r}")
        setattr(cfg, key, value)
    return cfg


class Task:
    """One model's part of a run (see the module's docstring for the methods and a whole example)."""
    name = "task"                      # runs go to runs/<name>-<preset> unless told otherwise (tasks may change it)
    command = None                     # the command line that trains it, e.g. "python -m course_utils.translation"
    Config = RunConfig                 # its configuration class
    presets = {}                       # {preset: {field: value}}
    unit = "epoch"                     # what one epoch is called in the logs (the unit between evaluations)
    output_files = ()                  # files of its own a run writes (removed with the run by --overwrite)
    tokens_counted = "the tokens of every micro-batch (Task.tokens)"   # the report's note on tokens_per_second
    headline = ("steps", "train_seconds")  # the report's keys a reference file puts in its `result`
    reference_folder = None            # where its reference files go (None: course_utils/reference_runs/)
    default_preset = None              # the command line's --preset when none is given (None: the first preset)
    out_help = "<name>-<preset>"       # where --out goes by default, in the command line's help
    data_errors = ()                   # exceptions of its data (missing, damaged): one `error:` line, exit status 1
    summary = ("preset", "device", "threads", "steps", "epochs", "train_seconds", "tokens_per_second")  # printed

    @classmethod
    def add_arguments(cls, parser):
        """The task's own command-line options; an option whose dest is a Config field sets that field."""

    @classmethod
    def configure(cls, cfg, args, world_size):
        """Options that are not plain fields (e.g. a micro-batch size that sets the accumulation steps)."""

    def __init__(self, cfg):
        self.cfg = cfg
        self.device, self.out_dir, self.world_size, self.parts = torch.device("cpu"), None, 1, cfg.accum_steps

    @classmethod
    def make_config(cls, preset=None, **overrides):
        """The preset's configuration with `overrides` (None values are ignored)."""
        return make_config_of(cls.Config, cls.presets, preset or cls.default_preset or next(iter(cls.presets), None),
                              **overrides)

    def default_out(self):
        """Where this run goes unless told otherwise: runs/<name>-<preset> in the runs folder (config.runs_dir)."""
        from ..config import runs_dir

        return runs_dir() / f"{self.name}-{self.cfg.preset}"

    def check(self, world_size=1):
        """Every impossible setting at once, as one ConfigError (before any work); `world_size` processes."""
        self.cfg.check()

    # ---- the data and the model ---------------------------------------------------------------------
    def prepare(self, out_dir, saved=None, log=print):
        raise NotImplementedError(f"{type(self).__name__}.prepare: load or make the data")

    def state_dict(self):
        return {}

    def build_model(self):
        raise NotImplementedError(f"{type(self).__name__}.build_model: return the model to train")

    def make_optimizer(self, model):
        from ..training import make_optimizer

        return make_optimizer(model, self.cfg.lr, getattr(self.cfg, "weight_decay", 0.01),
                              getattr(self.cfg, "betas", (0.9, 0.98)))

    def learning_rate(self, step, progress):
        return self.cfg.lr

    def num_epochs(self):
        return self.cfg.epochs

    def num_steps(self, steps_per_epoch):
        """Optimizer steps of the whole run (the schedule's length); epochs may differ by a few steps."""
        return steps_per_epoch * self.num_epochs()

    # ---- training -----------------------------------------------------------------------------------
    def batches(self, epoch):
        raise NotImplementedError(f"{type(self).__name__}.batches: the epoch's global batches")

    def split(self, batch, parts):
        if parts == 1:
            return [batch]
        if isinstance(batch, torch.Tensor):
            return list(torch.tensor_split(batch, parts))
        size, extra = divmod(len(batch), parts)
        bounds = [p * size + min(p, extra) for p in range(parts + 1)]
        return [batch[bounds[p]:bounds[p + 1]] for p in range(parts)]

    def to_device(self, micro, device):
        return micro.to(device)

    def loss(self, model, micro):
        raise NotImplementedError(f"{type(self).__name__}.loss: the micro-batch's summed loss")

    def count(self, micro):
        return 1

    def tokens(self, micro):
        return self.count(micro)

    # ---- evaluation and the end ---------------------------------------------------------------------
    def evaluate(self, model, history):
        return {}

    def describe(self, metrics):
        return ", ".join(f"{k} {v:.3f}" for k, v in metrics.items() if isinstance(v, (int, float)))

    def finish(self, model, history, log=print):
        return {}

    def model_extras(self):
        """What model.pt keeps besides the weights and the configuration (e.g. the tokenizer)."""
        return {}

    def reference_extras(self, model, history):
        return {}

    def describe_reference(self, report):
        return ", ".join(f"{k} {report[k]}" for k in self.headline if k in report)

    def describe_start(self, state, steps_per_epoch):
        from .report import count_parameters

        return (f"{self.name}, {self.cfg.preset} preset on {state.device} (autocast: {state.amp_dtype or 'off'}): "
                f"{count_parameters(state.raw_model) / 1e6:.2f}M parameters, {steps_per_epoch} steps per "
                f"{self.unit}, {state.total_steps} steps in all")

    def describe_batch(self, world_size):
        return (f"{world_size} process(es) x {self.cfg.accum_steps} accumulation step(s) = "
                f"{world_size * self.cfg.accum_steps} micro-batch(es) per optimizer step")
