"""Lesson 14's attention-only Transformer as a task of the training pipeline (course_utils/pipeline): what is
specific to it. The third model of the pipeline, after lesson 10's translator and lesson 12's language model.

    report = run(make_config("full"), "runs/induction_heads-full", resume=True)   # the command line's run
    model, cfg = load_induction_model("runs/induction_heads-full/model.pt")

Its data: random tokens with one segment repeated later at a random place (induction.segment_repeats), drawn
fresh for every step from a generator seeded by the epoch (a resumed run draws the same ones). Its loss: the
next-token cross-entropy. Its "epoch" is `eval_every` optimizer steps: after each, `evaluate` measures, on
fixed sequences [r, r], what the phase-change figure needs: the loss per position, Olsson et al.'s in-context
learning score, and every head's previous-token and induction scores; plus every head's attention on one short
[r, r] (the stripe appearing). `finish` measures every head's ablation effect, names the induction head and the
previous-token head by it, runs the composition test, and dates the phase change.
"""
import dataclasses

import torch
import torch.nn.functional as F

from .. import circuits, induction
from ..pipeline.task import ConfigError, RunConfig, Task, make_config_of

__all__ = ["Config", "PRESETS", "make_config", "InductionTask", "run", "load_induction_model", "phase_change_step",
           "find_phase_change", "ICL_FALL", "STRIPE_RISE"]


@dataclasses.dataclass
class Config(RunConfig):
    """The pipeline's settings (pipeline.task.RunConfig: lr, amp, threads, seed, ...) and the model's."""
    preset: str = "full"
    epochs: int = None                 # not set: `steps` steps, evaluated every `eval_every`
    # data
    vocab_size: int = 64
    length: int = 48                   # T: tokens per training sequence; the evaluation's [r, r] has L = T / 2
    batch_size: int = 64               # sequences per optimizer step
    eval_sequences: int = 128          # [r, r] sequences of the evaluation (fixed: the same at every evaluation)
    snapshot_half: int = 12            # the short [r, r] whose attention maps every evaluation keeps
    # model (induction.AttentionOnly)
    d_model: int = 64
    num_heads: int = 4
    num_layers: int = 2
    positions: str = "rope"
    # optimisation: AdamW at a constant rate (RunConfig's lr) after a short warm-up
    steps: int = 800
    warmup: int = 20
    weight_decay: float = 0.0
    eval_every: int = 20
    log_every: int = 10
    amp: str = "off"                   # a tiny model: float32 is as fast on a CPU

    MAY_CHANGE_ON_RESUME = RunConfig.MAY_CHANGE_ON_RESUME + ("steps",)

    def problems(self):
        out = [p for p in super().problems() if not p.startswith("epochs ")]
        for field in ("vocab_size", "length", "batch_size", "eval_sequences", "snapshot_half", "d_model",
                      "num_heads", "num_layers", "steps", "eval_every"):
            value = getattr(self, field)
            if not (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
                out.append(f"{field} must be a whole number >= 1, got {value!r}")
        if isinstance(self.length, int) and (self.length < 8 or self.length % 2):
            out.append(f"length must be even and >= 8 (the evaluation repeats L = length / 2 tokens), got "
                       f"{self.length!r}")
        if self.positions not in induction.POSITIONS:
            out.append(f"positions must be one of {induction.POSITIONS}, got {self.positions!r}")
        if isinstance(self.d_model, int) and isinstance(self.num_heads, int) and self.num_heads >= 1 \
                and self.d_model % self.num_heads:
            out.append(f"d_model ({self.d_model}) must be divisible by num_heads ({self.num_heads})")
        return out


PRESETS = {
    # seconds: the notebook's tests (COURSE_FAST=1); far too short for induction heads to form
    "fast": dict(length=32, batch_size=16, eval_sequences=32, d_model=32, num_heads=2, steps=40, warmup=5,
                 eval_every=10, lr=3e-3),
    # the lesson: the phase change, then the induction heads at work (minutes on a CPU)
    "full": dict(length=48, batch_size=64, eval_sequences=128, d_model=64, num_heads=4, steps=800, warmup=20,
                 eval_every=20, lr=3e-3),
}


def make_config(preset="full", **overrides):
    """The preset's Config with `overrides` (None values are ignored)."""
    return make_config_of(Config, PRESETS, preset, **overrides)


def build_model(cfg):
    return induction.AttentionOnly(cfg.vocab_size, cfg.d_model, cfg.num_heads, cfg.num_layers, max_len=cfg.length,
                                   positions=cfg.positions)


def load_induction_model(path, device="cpu"):
    """(model, cfg) from a model.pt written by a run of `python -m course_utils.induction_heads`."""
    saved = torch.load(path, map_location=device, weights_only=False)
    if not isinstance(saved, dict) or not {"model", "config"} <= set(saved):
        raise ValueError(f"{path} is not a model.pt written by `python -m course_utils.induction_heads`")
    cfg = Config.from_dict(saved["config"])
    model = build_model(cfg)
    model.load_state_dict(saved["model"])
    return model.eval(), cfg


def phase_change_step(steps, values):
    """The step at the middle of the steepest change of `values` between two evaluations (the phase change
    of a curve that falls, or rises, abruptly), and that change."""
    if len(values) < 2:
        return None, 0.0
    changes = [abs(b - a) for a, b in zip(values, values[1:])]
    i = max(range(len(changes)), key=changes.__getitem__)
    return (steps[i] + steps[i + 1]) // 2, values[i + 1] - values[i]


# What counts as a phase change: the in-context learning score falls by at least ICL_FALL nats in all (a model
# that copies reaches about -ln V, -4.2 here; one that does not use its context stays near 0), and at least
# ABRUPT of that fall happens between two evaluations; for the induction head's score, a rise of STRIPE_RISE.
ICL_FALL, STRIPE_RISE, ABRUPT = 1.0, 0.3, 0.25


def find_phase_change(steps, values, min_change=ICL_FALL, abrupt=ABRUPT, direction=-1):
    """The phase change of a curve, as phase_change_step finds it, or (None, 0.0) when the curve has none: when
    it moves by less than `min_change` in all in `direction` (-1: a fall, from its first value to its lowest;
    +1: a rise, to its highest), or when its steepest step between two evaluations is less than `abrupt` of that
    movement (a slow drift is no phase change)."""
    if len(values) < 2:
        return None, 0.0
    total = (values[0] - min(values)) if direction < 0 else (max(values) - values[0])
    diffs = [direction * (b - a) for a, b in zip(values, values[1:])]
    i = max(range(len(diffs)), key=diffs.__getitem__)
    if total < min_change or diffs[i] < abrupt * total:
        return None, 0.0
    return (steps[i] + steps[i + 1]) // 2, values[i + 1] - values[i]


class InductionTask(Task):
    """Train lesson 14's attention-only Transformer on repeated random tokens: induction heads form."""
    name, command, Config, presets, default_preset = "induction_heads", "python -m course_utils.induction_heads", \
        Config, PRESETS, "full"
    unit = "round"
    tokens_counted = "every target token (batch_size x (length - 1) per step)"
    headline = ("icl_score", "second_copy_loss", "induction_head", "induction_head_effect", "previous_token_head",
                "previous_token_head_effect", "phase_change_step", "steps", "train_seconds")
    summary = ("preset", "device", "threads", "steps", "train_seconds", "icl_score", "second_copy_loss",
               "induction_head", "previous_token_head", "phase_change_step")

    @classmethod
    def add_arguments(cls, p):
        p.add_argument("--steps", type=int, help="optimizer steps of the run")
        p.add_argument("--eval-every", type=int, help="optimizer steps between two evaluations")

    def check(self, world_size=1):
        self.cfg.check()
        if self.cfg.batch_size % self.parts:
            raise ConfigError(f"batch_size {self.cfg.batch_size} cannot be split into {world_size} process(es) x "
                              f"{self.cfg.accum_steps} accumulation step(s): choose a multiple of {self.parts}")

    # ---- data and model -----------------------------------------------------------------------------
    def prepare(self, out_dir, saved=None, log=print):
        cfg = self.cfg
        g = torch.Generator().manual_seed(10_000 + cfg.seed)       # fixed evaluation sequences
        self.val = induction.repeated_sequences(cfg.eval_sequences, cfg.length // 2, cfg.vocab_size, g)
        self.snapshot = induction.repeated_sequences(1, min(cfg.snapshot_half, cfg.length // 2), cfg.vocab_size, g)

    def build_model(self):
        return build_model(self.cfg)

    def make_optimizer(self, model):
        return torch.optim.AdamW(model.parameters(), lr=self.cfg.lr, weight_decay=self.cfg.weight_decay)

    def learning_rate(self, step, progress):
        return self.cfg.lr * min(1.0, step / max(1, self.cfg.warmup))

    def num_epochs(self):
        return -(-self.cfg.steps // self.cfg.eval_every)

    def num_steps(self, steps_per_epoch):
        return self.cfg.steps

    # ---- training -----------------------------------------------------------------------------------
    def batches(self, epoch):
        """Round `epoch`'s global batches (B, T), a pure function of the seed and the round."""
        cfg = self.cfg
        g = torch.Generator().manual_seed(cfg.seed * 1_000_003 + epoch)
        count = min(cfg.eval_every, cfg.steps - epoch * cfg.eval_every)
        return [induction.segment_repeats(cfg.batch_size, cfg.length, cfg.vocab_size, g) for _ in range(count)]

    def loss(self, model, tokens):
        logits = model(tokens[:, :-1])                                          # (B, T-1, V)
        return F.cross_entropy(logits.flatten(0, 1).float(), tokens[:, 1:].flatten(), reduction="sum")

    def count(self, tokens):
        return tokens[:, 1:].numel()

    # ---- evaluation ---------------------------------------------------------------------------------
    @torch.no_grad()
    def evaluate(self, model, history):
        L = self.cfg.length // 2
        tokens = self.val.to(self.device)
        losses = induction.loss_per_position(model, tokens)                  # (2L-1,)
        previous, ind = induction.head_scores(induction.attention_maps(model, tokens), L)   # (layers, B, h)
        snapshot = induction.attention_maps(model, self.snapshot.to(self.device))[:, 0]     # (layers, h, t, t)
        return {"eval_step": history["step"][-1] if history["step"] else 0,
                "icl_score": float(induction.icl_score(losses, L)),
                "first_copy_loss": float(losses[:L - 1].mean()),
                "second_copy_loss": float(induction.second_copy_loss(losses, L)),
                "loss_per_position": _rounded(losses.tolist(), 4),
                "previous_scores": _rounded(previous.mean(1).tolist(), 4),            # (layers, h)
                "induction_scores": _rounded(ind.mean(1).tolist(), 4),                # (layers, h)
                "snapshot_maps": _rounded(snapshot.tolist(), 3)}

    def describe(self, m):
        best = max(max(row) for row in m["induction_scores"])
        return (f"ICL score {m['icl_score']:+.2f}, loss on the second copy {m['second_copy_loss']:.2f}, "
                f"best induction score {best:.2f}")

    @torch.no_grad()
    def finish(self, model, history, log=print):
        """The heads found by ablation, their scores, the composition test, and the phase change's step."""
        L = self.cfg.length // 2
        tokens = self.val.to(self.device)
        effects = induction.ablation_effects(model, tokens, L)              # (layers, h)
        ind = torch.tensor(history["induction_scores"][-1])                 # (layers, h)
        prev = torch.tensor(history["previous_scores"][-1])
        (li, top), (lp, below) = self.named_heads(effects)
        results = {"icl_score": round(history["icl_score"][-1], 3),
                   "first_copy_loss": round(history["first_copy_loss"][-1], 3),
                   "second_copy_loss": round(history["second_copy_loss"][-1], 3),
                   "induction_head": [li, top], "previous_token_head": [lp, below],
                   "induction_head_effect": round(float(effects[li, top]), 3),
                   "previous_token_head_effect": round(float(effects[lp, below]), 3),
                   "induction_score": round(float(ind[li, top]), 3), "previous_score": round(float(prev[lp, below]), 3),
                   "ablation_effects": _rounded(effects.tolist(), 3)}
        step, change = find_phase_change(history["eval_step"], history["icl_score"])
        stripe, _ = find_phase_change(history["eval_step"], [row[li][top] for row in history["induction_scores"]],
                                      min_change=STRIPE_RISE, direction=1)
        results.update(phase_change_step=step, icl_change=round(change, 3), stripe_step=stripe)
        if isinstance(model, induction.AttentionOnly) and model.num_layers == 2:
            results["composition"] = {k: round(v, 3) for k, v in
                                      induction.composition_test(model, tokens, below, top, L).items()}
            results["circuits"] = self.circuits(model, (lp, below), (li, top))
        self.heads = {"induction": (li, top), "previous_token": (lp, below)}
        log(f"by ablation: the induction head is layer {li}, head {top} (zeroing it raises the second copy's loss by "
            f"{effects[li, top]:.2f}; induction score {ind[li, top]:.2f}); the previous-token head is layer {lp}, "
            f"head {below} (+{effects[lp, below]:.2f}; previous-token score {prev[lp, below]:.2f}); "
            + (f"phase change near step {step}" if step is not None else
               f"no phase change in this run (the in-context learning score went from {history['icl_score'][0]:+.2f} "
               f"to {history['icl_score'][-1]:+.2f}, a phase change falls by {ICL_FALL} nats or more, abruptly)"))
        return results

    @torch.no_grad()
    def circuits(self, model, previous, induction_head):
        """The circuit read from the weights and patched (lesson 14, sections 7 and 8): every head's OV circuit
        scores, the K-composition scores, the two heads' circuits themselves, and one head at a time patched from
        [r, r] into [r', r]."""
        L, cfg = self.cfg.length // 2, self.cfg
        (lp, below), (li, top) = previous, induction_head
        g = torch.Generator().manual_seed(20_000 + cfg.seed)
        clean = induction.repeated_sequences(cfg.eval_sequences, L, cfg.vocab_size, g).to(self.device)
        corrupted = torch.cat([torch.randint(0, cfg.vocab_size, (cfg.eval_sequences, L), generator=g).to(self.device),
                               clean[:, L:]], dim=1)                  # [r', r]: nothing in it to copy from
        heads = [(layer, head) for layer, attn in enumerate(induction.attention_heads(model))
                 for head in range(attn.num_heads)]
        ov = {(layer, head): circuits.ov_circuit(model, layer, head) for layer, head in heads}
        scores = lambda maps: induction.head_scores(maps[li], L)[1].mean(0)   # noqa: E731 - layer li's heads
        return {"ov_eigenvalue_score": _grid(heads, lambda lh: circuits.eigenvalue_score(ov[lh])),
                "ov_diagonal_top1": _grid(heads, lambda lh: circuits.diagonal_top1(ov[lh])),
                "ov_induction_head": _rounded(ov[(li, top)].tolist(), 2),
                "k_composition": _rounded(circuits.k_composition(model, below, top).tolist(), 2),
                "k_composition_top1": _rounded([circuits.diagonal_top1(circuits.k_composition(model, i, top))
                                                for i in range(model.layers[lp].attn.num_heads)], 3),
                "direct_qk_top1": round(circuits.diagonal_top1(circuits.qk_circuit(model, li, top)), 3),
                "k_composition_scores": _rounded(circuits.k_composition_scores(model).tolist(), 3),
                "patching": _rounded(circuits.patching_effects(model, clean, corrupted, L).tolist(), 3),
                "patched_induction_scores": {
                    "clean": _rounded(scores(induction.attention_maps(model, clean)).tolist(), 3),
                    "corrupted": _rounded(scores(induction.attention_maps(model, corrupted)).tolist(), 3),
                    "previous-token head patched": _rounded(scores(circuits.patched_attention_maps(
                        model, clean, corrupted, lp, below)).tolist(), 3)}}

    @staticmethod
    def named_heads(effects):
        """((layer, head) of the induction head, (layer, head) of the previous-token head): the heads whose
        ablation raises the second copy's loss most, in the last layer and in the layer below it."""
        last = effects.size(0) - 1
        below = max(last - 1, 0)
        return (last, int(effects[last].argmax())), (below, int(effects[below].argmax()))

    def reference_extras(self, model, history):
        """The whole history but the snapshots, which are kept for the two named heads only; the final maps."""
        L = self.cfg.length // 2
        maps = induction.attention_maps(model, self.val[:1].to(self.device))[:, 0]     # (layers, h, 2L, 2L)
        kept = {k: v for k, v in history.items() if k != "snapshot_maps"}
        kept["snapshots"] = {name: [snap[layer][head] for snap in history["snapshot_maps"]]
                             for name, (layer, head) in self.heads.items()}
        return {"history": kept, "final_maps": _rounded(maps.tolist(), 3),
                "final_tokens": self.val[0].tolist(), "snapshot_tokens": self.snapshot[0].tolist(),
                "half_length": L}


def _grid(heads, value, digits=3):
    """[[value((layer, head)) for head] for layer] over the (layer, head) pairs `heads`, in order."""
    rows = {}
    for layer, head in heads:
        rows.setdefault(layer, []).append(round(float(value((layer, head))), digits))
    return [rows[layer] for layer in sorted(rows)]


def _rounded(values, digits):
    if isinstance(values, (list, tuple)):
        return [_rounded(v, digits) for v in values]
    return round(float(values), digits)


def run(cfg, out_dir=None, resume=False, overwrite=False, show_progress=True, log=print, command=None,
        reference=None):
    """The lesson's run (the command line's, from Python): returns the report (report.json's dict).
    `resume=True`: go on with the run kept in `out_dir`, or start one; out_dir None: runs/induction_heads-<preset>."""
    from ..pipeline import trainer

    return trainer.run(InductionTask(cfg), out_dir, resume=resume, overwrite=overwrite, show_progress=show_progress,
                       log=log, command=command, reference=reference)
