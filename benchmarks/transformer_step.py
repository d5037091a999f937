"""Time one training step of course_utils' Transformer against torch.nn.Transformer (same sizes, masks, batch).

    python benchmarks/transformer_step.py                 # ~1-2 minutes on a 2-core CPU
    # defaults: the sizes of lesson 10's CPU preset (d_model 256, 4 heads, 3+3 layers, d_ff 1024),
    # a 1000-token vocabulary, 16 sentences of 32 tokens
    python benchmarks/transformer_step.py --steps 40 --d-model 512 --num-heads 8 --num-layers 6
    python benchmarks/transformer_step.py --threads 0    # torch's default number of threads
    python benchmarks/transformer_step.py --tiny         # seconds: a tiny model, to check the script runs

Both models get the same embeddings (× √d_model, sinusoidal positions), the same tied output layer,
the same source/target padding masks plus the causal mask, the same batch, dropout and Adam. A step
is forward, cross-entropy, backward and optimiser step. The two models' steps are interleaved
(A, B, A, B, ...) so that the load of a shared machine hits both alike, and the medians are compared:

    ratio = median step time of course_utils.Transformer / median step time of torch.nn.Transformer

The speed target is ratio <= 1.0.
"""
import argparse
import math
import statistics
import sys
import time
import warnings
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import shrink  # noqa: E402

from course_utils.attention import PositionalEncoding  # noqa: E402
from course_utils.transformer import Transformer  # noqa: E402


class TorchTransformerModel(nn.Module):
    """torch.nn.Transformer with the same embeddings, positions and tied output layer as ours."""

    def __init__(self, src_vocab_size, tgt_vocab_size, d_model, num_heads, num_layers, d_ff, dropout,
                 max_len, norm_first, pad_id=0):
        super().__init__()
        self.d_model, self.pad_id = d_model, pad_id
        self.src_embed = nn.Embedding(src_vocab_size, d_model, padding_idx=pad_id)
        self.tgt_embed = nn.Embedding(tgt_vocab_size, d_model, padding_idx=pad_id)
        self.pos = PositionalEncoding(d_model, max_len, dropout)
        self.transformer = nn.Transformer(d_model, num_heads, num_layers, num_layers, d_ff, dropout,
                                          batch_first=True, norm_first=norm_first)
        self.generator = nn.Linear(d_model, tgt_vocab_size, bias=False)
        self.generator.weight = self.tgt_embed.weight

    def forward(self, src, tgt_in):
        T = tgt_in.size(1)
        src_pad, tgt_pad = src == self.pad_id, tgt_in == self.pad_id   # torch: True = masked out
        causal = torch.triu(torch.ones(T, T, dtype=torch.bool, device=src.device), 1)
        x = self.pos(self.src_embed(src) * math.sqrt(self.d_model))
        y = self.pos(self.tgt_embed(tgt_in) * math.sqrt(self.d_model))
        s = self.transformer(x, y, tgt_mask=causal, src_key_padding_mask=src_pad,
                             tgt_key_padding_mask=tgt_pad, memory_key_padding_mask=src_pad)
        return self.generator(s)


def make_batch(batch_size, src_len, tgt_len, vocab, pad_id=0, seed=0):
    """Random token ids with realistic padding: each sequence has a random length."""
    g = torch.Generator().manual_seed(seed)

    def ragged(T):
        tokens = torch.randint(3, vocab, (batch_size, T), generator=g)
        lengths = torch.randint(T // 2, T + 1, (batch_size,), generator=g)
        lengths[0] = T
        return tokens.masked_fill(torch.arange(T)[None] >= lengths[:, None], pad_id)

    src, tgt = ragged(src_len), ragged(tgt_len + 1)
    return src, tgt[:, :-1], tgt[:, 1:]


def make_step(model, src, tgt_in, tgt_out, pad_id=0):
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)

    def step():
        logits = model(src, tgt_in)
        loss = F.cross_entropy(logits.transpose(1, 2), tgt_out, ignore_index=pad_id, label_smoothing=0.1)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss.item()

    return step


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--d-model", type=int, default=256)
    p.add_argument("--num-heads", type=int, default=4)
    p.add_argument("--num-layers", type=int, default=3)
    p.add_argument("--d-ff", type=int, default=1024)
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--src-len", type=int, default=32)
    p.add_argument("--tgt-len", type=int, default=32)
    p.add_argument("--vocab", type=int, default=1000)
    p.add_argument("--post-norm", action="store_true", help="norm_first=False (the paper's layers)")
    p.add_argument("--steps", type=int, default=30, help="timed steps per model")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--threads", type=int, default=1,
                   help="torch.set_num_threads; 0 keeps torch's default (on a shared, loaded machine "
                        "several threads spin against other jobs and every step gets many times slower)")
    p.add_argument("--tiny", action="store_true", help="seconds: a tiny model and batch, one step")
    args = shrink(p.parse_args(argv), d_model=16, num_heads=2, num_layers=1, d_ff=32, batch_size=2, src_len=6,
                  tgt_len=6, vocab=20, steps=1, warmup=0)
    if args.threads:
        torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore", message="enable_nested_tensor")
    norm_first = not args.post_norm
    sizes = dict(d_model=args.d_model, num_heads=args.num_heads, num_layers=args.num_layers,
                 d_ff=args.d_ff, dropout=args.dropout, max_len=max(args.src_len, args.tgt_len) + 1,
                 norm_first=norm_first)
    torch.manual_seed(0)
    ours = Transformer(args.vocab, args.vocab, **sizes).train()
    theirs = TorchTransformerModel(args.vocab, args.vocab, **sizes).train()
    n_ours = sum(p.numel() for p in ours.parameters())
    n_theirs = sum(p.numel() for p in theirs.parameters())
    batch = make_batch(args.batch_size, args.src_len, args.tgt_len, args.vocab)
    steps = {"course_utils.Transformer": make_step(ours, *batch), "torch.nn.Transformer": make_step(theirs, *batch)}
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; {sizes}; batch {args.batch_size}, "
          f"S={args.src_len}, T={args.tgt_len}, vocab {args.vocab}; parameters: ours {n_ours:,}, "
          f"torch {n_theirs:,}")
    times = {name: [] for name in steps}
    cpu_times = {name: [] for name in steps}
    for i in range(args.warmup + args.steps):
        for name, step in (steps.items() if i % 2 == 0 else reversed(steps.items())):  # A,B then B,A
            start, cpu_start = time.perf_counter(), time.process_time()
            step()
            if i >= args.warmup:
                times[name].append(time.perf_counter() - start)
                cpu_times[name].append(time.process_time() - cpu_start)
    medians = {name: statistics.median(t) for name, t in times.items()}
    cpu_medians = {name: statistics.median(t) for name, t in cpu_times.items()}
    for name, t in times.items():
        print(f"{name:26s} median {medians[name] * 1e3:8.1f} ms/step wall  "
              f"(min {min(t) * 1e3:.1f}, max {max(t) * 1e3:.1f}, {len(t)} steps); "
              f"median {cpu_medians[name] * 1e3:.1f} ms/step CPU time")
    ratio = medians["course_utils.Transformer"] / medians["torch.nn.Transformer"]
    cpu_ratio = cpu_medians["course_utils.Transformer"] / cpu_medians["torch.nn.Transformer"]
    paired = statistics.median(a / b for a, b in zip(times["course_utils.Transformer"], times["torch.nn.Transformer"]))
    print(f"CPU-time ratio (ours / torch) = {cpu_ratio:.3f}  (process time: less sensitive to other jobs)")
    print(f"median of the paired ratios (step i of ours / step i of torch) = {paired:.3f}")
    print(f"ratio (ours / torch) = {ratio:.3f}  ->  {'OK' if ratio <= 1.0 else 'SLOWER'} (target <= 1.0)")
    return ratio


if __name__ == "__main__":
    main()
