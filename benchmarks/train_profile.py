"""Where one training step of lesson 10's cpu model spends its time, and its FLOP/s as a share of this
CPU's bf16 matrix-multiply peak; variants of the step side by side.

    python benchmarks/train_profile.py                  # 1 thread, bf16 autocast, real Multi30k batches
    python benchmarks/train_profile.py --steps 30 --threads 2
    python benchmarks/train_profile.py --tiny           # seconds: the smoke preset, to check the script runs

1. Peak: FLOP/s of one bf16 (and fp32) matrix product at the model's shapes and at 1024^3.
2. Step variants, interleaved on the same batches (the order rotating), median tokens/s (non-pad
   source + target tokens, as the trainer counts them):
     before               the step as the trainer took it before these measurements: bf16 autocast,
                          F.cross_entropy on all (B, T, V) float32 logits, clip, AdamW
     fused SDPA           attention through torch's fused CPU kernel instead of the explicit formula
     keep freed memory    glibc told to keep freed memory (mallopt M_MMAP_MAX=0, M_TRIM_THRESHOLD=1 GB):
                          no page faults for the step's big temporaries (trainer.keep_freed_memory)
     fused loss           the label-smoothed loss with a hand-written backward (LabelSmoothedLoss)
     real-token logits    the output layer and the loss only at real (non-pad) target positions
                          (model(src, tgt_in, positions=tgt_out != pad))
     fused AdamW          AdamW(fused=True) and a foreach gradient-norm clip
     trainer now          what course_utils.translation does now: keep freed memory, real-token logits,
                          fused AdamW (the fused loss gained too little on top to be worth its code)
     all                  trainer now + the fused loss
3. FLOPs of a step (torch.utils.flop_counter: matrix products and attention, forward and backward)
   -> achieved FLOP/s = FLOPs / median step time, and its share of the measured bf16 peak.
4. A profile of one step (torch.profiler), every operator's own time given to the part of the model
   it runs for (backward operators to the part of their forward operator).

Batches: the cpu preset's bucketed batches of Multi30k training pairs (batch_tokens padded tokens),
encoded with an 8k joint BPE trained once and kept at --tokenizer.
"""
import argparse
import contextlib
import copy
import sys
import time
from collections import defaultdict
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.profiler import profile, record_function
from torch.utils.flop_counter import FlopCounterMode

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import interleaved, load, machine, median, shrink, tokenizer_path  # noqa: E402

import course_utils.attention as attention  # noqa: E402
from course_utils.attention import MultiHeadAttention, PositionalEncoding  # noqa: E402
from course_utils.data.batch import PAD_ID as PAD  # noqa: E402
from course_utils.data.batch import collate  # noqa: E402
from course_utils.data.multi30k import load_multi30k  # noqa: E402
from course_utils.pipeline.runs import keep_freed_memory  # noqa: E402
from course_utils.tokenization import SubwordTokenizer, train_bpe  # noqa: E402
from course_utils.transformer import PositionwiseFeedForward  # noqa: E402
from course_utils.translation.data import batch_sampler, encode_pairs  # noqa: E402
from course_utils.translation.presets import build_model, make_config  # noqa: E402

VARIANTS = {  # name -> Step options; "before" first: the others are compared with it
    "before": {},
    "fused SDPA": {"sdpa": True},
    "keep freed memory": {"allocator": True},
    "fused loss": {"loss": "fused"},
    "real-token logits": {"real_tokens": True},
    "fused AdamW": {"fused_adamw": True},
    "trainer now": {"allocator": True, "real_tokens": True, "fused_adamw": True},
    "all": {"allocator": True, "loss": "fused", "real_tokens": True, "fused_adamw": True},
}


# ---- data ----------------------------------------------------------------------------------------
def tokenizer(path, vocab_size):
    path = Path(path.format(vocab=vocab_size))
    if path.exists():
        return SubwordTokenizer.load(path)
    tok = train_bpe((s for pair in load_multi30k("train") for s in pair), vocab_size=vocab_size)
    path.parent.mkdir(parents=True, exist_ok=True)
    tok.save(path)
    return tok


def real_batches(cfg, tok, n):
    """The first n bucketed batches of an epoch of Multi30k's training pairs, as the trainer builds them
    (course_utils.data.batch.collate), with their real-token counts."""
    pairs = encode_pairs(tok, load_multi30k("train"), cfg.max_tokens_per_sentence)
    batches = []
    for idx in list(batch_sampler(pairs, cfg.batch_tokens, epoch=0, seed=0))[:n]:
        b = collate([pairs[i] for i in idx])
        batches.append({"src": b.src, "tgt_in": b.tgt_in, "tgt_out": b.tgt_out,
                        "tokens": b.src_tokens + b.tgt_tokens, "tgt_tokens": b.tgt_tokens})
    return batches


# ---- the step and its variants -------------------------------------------------------------------
@contextlib.contextmanager
def fused_sdpa():
    """Attention through torch's fused kernel on the CPU in bf16 too (the path before this change)."""
    original = attention._fused_kernel_is_slower
    attention._fused_kernel_is_slower = lambda q: False
    try:
        yield
    finally:
        attention._fused_kernel_is_slower = original


class LabelSmoothedLoss(torch.autograd.Function):
    """The label-smoothed cross-entropy SUMMED over the real targets, with a hand-written backward.

    loss_i = logsumexp(z_i) - (1 - eps) z_i[y_i] - eps mean_v z_i[v]   (= F.cross_entropy(..., label_smoothing=eps))
    d loss_i / d z_i = softmax(z_i) - (1 - eps) onehot(y_i) - eps / V
    Forward keeps only logsumexp (n,); backward makes ONE (n, V) tensor: autograd through
    F.cross_entropy keeps log-probabilities and builds several (n, V) temporaries.
    """

    @staticmethod
    def forward(ctx, logits, target, eps, pad_id):       # logits (n, V) any float dtype, target (n,)
        z = logits.float()
        lse = torch.logsumexp(z, dim=-1)                                          # (n,)
        keep = (target != pad_id).to(z.dtype)                                     # (n,)
        z_y = z.gather(-1, target[:, None]).squeeze(-1)
        loss = ((lse - (1.0 - eps) * z_y - eps * z.mean(-1)) * keep).sum()
        ctx.save_for_backward(logits, lse, target, keep)
        ctx.eps = eps
        return loss

    @staticmethod
    def backward(ctx, grad):
        logits, lse, target, keep = ctx.saved_tensors
        eps, V = ctx.eps, logits.size(-1)
        g = torch.exp(logits.float() - lse[:, None]).sub_(eps / V)                # softmax - eps / V
        g.scatter_add_(-1, target[:, None], torch.full_like(lse[:, None], eps - 1.0))
        return g.mul_((grad * keep)[:, None]).to(logits.dtype), None, None, None


def label_smoothed_loss(logits, target, eps, pad_id=PAD):
    """logits (..., V), target (...) -> summed label-smoothed loss over the non-pad targets."""
    return LabelSmoothedLoss.apply(logits.reshape(-1, logits.size(-1)), target.reshape(-1), eps, pad_id)


class Step:
    """One optimizer step, as the trainer takes it (bf16 autocast, float32 loss, clip, AdamW), with options:
    sdpa (attention through torch's fused kernel), allocator (keep freed memory), loss="fused"
    (LabelSmoothedLoss), real_tokens (logits only at non-pad targets), fused_adamw (and foreach clip)."""

    def __init__(self, model, cfg, sdpa=False, allocator=False, loss="torch", real_tokens=False,
                 fused_adamw=False):
        self.model, self.cfg = model, cfg
        self.sdpa, self.allocator, self.loss, self.real_tokens, self.fused_adamw = \
            sdpa, allocator, loss, real_tokens, fused_adamw
        kwargs = {"fused": True} if fused_adamw else {}
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=tuple(cfg.betas),
                                           weight_decay=cfg.weight_decay, **kwargs)
        self.scope = lambda name: contextlib.nullcontext()

    def loss_of(self, logits, target):
        eps = self.cfg.label_smoothing
        if self.loss == "fused":
            return label_smoothed_loss(logits, target, eps)
        logits = logits.float()
        if logits.dim() == 3:
            logits = logits.transpose(1, 2)
        return F.cross_entropy(logits, target, ignore_index=PAD, label_smoothing=eps, reduction="sum")

    def __call__(self, batch):
        keep_freed_memory(self.allocator)
        with fused_sdpa() if self.sdpa else contextlib.nullcontext():
            with torch.autocast("cpu", dtype=torch.bfloat16):
                if self.real_tokens:
                    keep = batch["tgt_out"] != PAD
                    logits = self.model(batch["src"], batch["tgt_in"], positions=keep)            # (n, V)
                    target = batch["tgt_out"][keep]
                else:
                    logits, target = self.model(batch["src"], batch["tgt_in"]), batch["tgt_out"]  # (B, T, V)
                with self.scope("loss"), torch.autocast("cpu", enabled=False):
                    loss = self.loss_of(logits, target)
            (loss / batch["tgt_tokens"]).backward()
        with self.scope("clip + optimizer"):
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.clip_norm,
                                           foreach=True if self.fused_adamw else None)
            self.optimizer.step()
            self.optimizer.zero_grad(set_to_none=True)
        return float(loss.detach())


# ---- peak and FLOPs ------------------------------------------------------------------------------
def matmul_flops_per_second(M, K, N, dtype, repeats=7):
    """Best of `repeats` products (CPU time of this process: the peak, not the machine's load)."""
    a, b, c = torch.randn(M, K).to(dtype), torch.randn(K, N).to(dtype), torch.empty(M, N, dtype=dtype)
    times = []
    for _ in range(repeats + 1):
        start = time.process_time()
        torch.mm(a, b, out=c)                          # into the same memory: no allocation timed
        times.append(time.process_time() - start)
    return 2 * M * K * N / min(times[1:])


def step_flops(model, batches, cfg):
    """FLOPs of the forward and backward of each batch (no optimizer step)."""
    flops = []
    for batch in batches:
        with FlopCounterMode(display=False) as counter:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                logits = model(batch["src"], batch["tgt_in"])
            F.cross_entropy(logits.float().transpose(1, 2), batch["tgt_out"], ignore_index=PAD).backward()
        model.zero_grad(set_to_none=True)
        flops.append(counter.get_total_flops())
    return flops


# ---- the profile ---------------------------------------------------------------------------------
PARTS = {MultiHeadAttention: "attention", PositionwiseFeedForward: "feed-forward", nn.LayerNorm: "layer norm",
         PositionalEncoding: "embeddings + positions", nn.Embedding: "embeddings + positions"}
SCOPES = set(PARTS.values()) | {"output layer", "loss", "clip + optimizer"}


def add_scopes(model):
    """Wrap the forward of every part of the model in a profiler scope named after the part."""
    handles = []

    def enter(name):
        def pre(module, args):
            module._scope = record_function(name)
            module._scope.__enter__()
        return pre

    def leave(module, args, out):
        module._scope.__exit__(None, None, None)

    for module in model.modules():
        name = "output layer" if module is model.generator else PARTS.get(type(module))
        if name:
            handles += [module.register_forward_pre_hook(enter(name)), module.register_forward_hook(leave)]
    return handles


def part_of(event, seq_part):
    """(phase, part) of a profiler event: the scope around it, or for a backward operator the part of
    the forward operator with its sequence number. Attention splits into its projections and the rest."""
    e, linear = event, False
    while e is not None:
        if e.name.startswith("autograd::engine::evaluate_function"):
            return "backward", seq_part.get(e.sequence_nr, "other (residuals, dropout, masks)")
        linear |= e.name == "aten::linear"
        if e.name in SCOPES:
            if e.name == "attention":
                return "forward", "attention: projections W_Q,K,V,O" if linear else "attention: scores, softmax, sum"
            return "forward", e.name
        e = e.cpu_parent
    return "forward", "other (residuals, dropout, masks)"


def profile_step(step, batch):
    handles = add_scopes(step.model)
    step.scope = record_function
    step(batch)                                        # the step's memory once more, after the others'
    with profile(record_shapes=False) as prof:
        start = time.perf_counter()
        step(batch)
        wall = time.perf_counter() - start
    for h in handles:
        h.remove()
    step.scope = lambda name: contextlib.nullcontext()
    events = [e for e in prof.events() if e.device_type.name == "CPU"]
    seq_part = {}
    for e in events:                                   # forward operators: sequence number -> part
        if e.sequence_nr >= 0 and not e.name.startswith("autograd::") and "Backward" not in e.name:
            phase, part = part_of(e, {})
            if phase == "forward":
                seq_part.setdefault(e.sequence_nr, part)
    times = defaultdict(float)
    python = 0.0
    for e in events:
        if e.name in SCOPES:                           # Python time inside a part, outside its operators
            python += e.self_cpu_time_total
            continue
        phase, part = part_of(e, seq_part)
        times[(part, phase)] += e.self_cpu_time_total
    return wall, times, python


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--preset", default="cpu")
    p.add_argument("--steps", type=int, default=12, help="timed steps per variant")
    p.add_argument("--batches", type=int, default=12, help="distinct real batches, used in turn")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--tokenizer", default=tokenizer_path())
    p.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated, among: " + ", ".join(VARIANTS))
    p.add_argument("--tiny", action="store_true", help="seconds: the smoke preset, one step per variant")
    args = shrink(p.parse_args(argv), preset="smoke", steps=1, batches=1)
    torch.set_num_threads(args.threads)
    cfg = make_config(args.preset)
    tok = tokenizer(args.tokenizer, cfg.vocab_size)
    batches = real_batches(cfg, tok, args.batches)
    torch.manual_seed(0)
    base = build_model(cfg, tok.vocab_size).train()
    padded = sum(b["src"].numel() + b["tgt_out"].numel() for b in batches)
    print(f"{args.preset} preset: d_model {cfg.d_model}, {cfg.num_heads} heads, {cfg.num_layers}+{cfg.num_layers} "
          f"layers, d_ff {cfg.d_ff}, vocabulary {tok.vocab_size}; batches of {cfg.batch_tokens} padded tokens "
          f"({sum(b['tokens'] for b in batches) / padded:.0%} real), bf16 autocast")
    print(f"machine: {machine()}; before: {load()}")

    # 1. peak
    shapes = {"x W_QKV (2048x256 @ 256x768)": (2048, 256, 768), "FFN in (2048x256 @ 256x1024)": (2048, 256, 1024),
              "FFN out (2048x1024 @ 1024x256)": (2048, 1024, 256), "logits (2048x256 @ 256x8000)": (2048, 256, 8000),
              "square 1024^3": (1024, 1024, 1024)}
    if args.tiny:
        shapes = {"square 64^3": (64, 64, 64)}
    peak = {}
    print("matrix product, GFLOP/s   bf16     fp32")
    for name, (M, K, N) in shapes.items():
        bf16, fp32 = (matmul_flops_per_second(M, K, N, dt) for dt in (torch.bfloat16, torch.float32))
        peak[name] = bf16
        print(f"  {name:32s} {bf16 / 1e9:6.1f}   {fp32 / 1e9:6.1f}")
    bf16_peak = max(peak.values())
    print(f"  bf16 peak (best of these, {args.threads} thread(s)): {bf16_peak / 1e9:.1f} GFLOP/s")

    # 2. variants, interleaved
    options = VARIANTS
    names = [n.strip() for n in args.variants.split(",")]
    steps = {name: Step(copy.deepcopy(base), cfg, **options[name]) for name in names}
    counter = {name: 0 for name in names}

    def run(name):
        def go():
            step = steps[name]
            step(batches[counter[name] % len(batches)])
            counter[name] += 1
        return go
    for name in names:                                 # warm-up: every batch shape once
        for b in batches[:3]:
            steps[name](b)
    wall, cpu = interleaved({name: run(name) for name in names}, args.steps)
    tokens = [batches[i % len(batches)]["tokens"] for i in range(args.steps)]   # step i of every variant
    print(f"after: {load()}")
    clock = cpu if args.threads == 1 else wall
    which = "CPU time (1 thread: not counting other jobs)" if args.threads == 1 else "wall time"
    print(f"medians over {args.steps} steps of each; tokens/s and speed-ups by {which}")
    print(f"{'variant':20s} {'wall ms':>8s} {'CPU ms':>8s} {'tokens/s':>9s}  speed-up vs {names[0]}")
    speed = {name: median([n / t for n, t in zip(tokens, clock[name])]) for name in names}
    for name in names:
        print(f"{name:20s} {1e3 * median(wall[name]):8.0f} {1e3 * median(cpu[name]):8.0f} {speed[name]:9,.0f}  "
              f"{speed[name] / speed[names[0]]:.2f}x")

    # 3. FLOP share
    flops = median(step_flops(copy.deepcopy(base), batches[:args.steps], cfg))
    print(f"FLOPs of one step (forward + backward, matrix products and attention): {flops / 1e9:.1f} GFLOP "
          f"(batch {batches[0]['src'].shape} + {batches[0]['tgt_in'].shape} padded, median over batches)")
    for name in [n for n in (names[0], "trainer now", "all") if n in clock]:
        t = median(clock[name])
        print(f"  {name}: {1e3 * t:.0f} ms/step -> {flops / t / 1e9:.1f} GFLOP/s = {flops / t / bf16_peak:.0%} of "
              f"the bf16 peak" + (" (counting the padded-batch FLOPs, some skipped)" if name != names[0] else ""))

    # 4. profile of one step
    for name in [n for n in ("before", "trainer now") if n in steps]:
        wall, parts, python = profile_step(steps[name], batches[0])
        total_ops = sum(parts.values()) + python
        print(f"profile of one step ({name}; {1e3 * wall:.0f} ms under the profiler, which slows small operators):")
        rows = sorted({part for part, _ in parts}, key=lambda q: -parts[(q, "forward")] - parts[(q, "backward")])
        for part in rows:
            f, b = parts[(part, "forward")] / 1e3, parts[(part, "backward")] / 1e3
            print(f"  {part:38s} forward {f:7.1f} ms  backward {b:7.1f} ms  {(f + b) / (1e3 * wall):5.1%}")
        rest = 1e3 * wall - total_ops / 1e3
        print(f"  {'Python inside the parts':38s} {python / 1e3:7.1f} ms {python / 1e3 / (1e3 * wall):24.1%}")
        print(f"  {'outside any operator (Python, autograd)':38s} {rest:7.1f} ms {rest / (1e3 * wall):24.1%}")


if __name__ == "__main__":
    main()
