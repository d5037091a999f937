"""Training-step speed of lesson 10's `cpu` model in float32 vs bf16 autocast, side by side.

    python benchmarks/amp_step.py                # 1 thread (as on a busy machine)
    python benchmarks/amp_step.py --threads 2
    python benchmarks/amp_step.py --tiny         # seconds: the smoke preset's model, to check the script runs

Builds the `cpu` preset's Transformer (d_model 256, 4 heads, 3+3 layers, d_ff 1024, joint 8k
vocabulary), makes one batch of `--sentences` random sentences of `--length` tokens, and times
training steps (forward, label-smoothed loss, backward, AdamW) alternately in float32 and under
`torch.autocast(device_type, dtype=torch.bfloat16)` so the machine's load hits both alike. Prints
the tokens per second of each and their ratio (medians).
"""
import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import load, machine, shrink  # noqa: E402

from course_utils.training import label_smoothed_loss  # noqa: E402
from course_utils.translation.presets import build_model, make_config  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--sentences", type=int, default=128)
    p.add_argument("--length", type=int, default=16)
    p.add_argument("--steps", type=int, default=10, help="timed steps per mode (after 2 warm-up steps)")
    p.add_argument("--preset", default="cpu", help="whose model is timed")
    p.add_argument("--tiny", action="store_true", help="seconds: the smoke model, a small batch, one step")
    args = shrink(p.parse_args(argv), preset="smoke", sentences=4, length=6, steps=1)
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    cfg = make_config(args.preset)
    model = build_model(cfg, cfg.vocab_size)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    src = torch.randint(4, cfg.vocab_size, (args.sentences, args.length))
    tgt = torch.randint(4, cfg.vocab_size, (args.sentences, args.length + 1))
    tokens = src.numel() + tgt.numel()

    def step(dtype):
        start = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype == "bf16"):
            logits = model(src, tgt[:, :-1])
            loss = label_smoothed_loss(logits.float(), tgt[:, 1:], cfg.label_smoothing)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return time.perf_counter() - start

    times = {"fp32": [], "bf16": []}
    for i in range(args.steps + 2):
        for mode in times:
            t = step(mode)
            if i >= 2:
                times[mode].append(t)
    speed = {mode: tokens / statistics.median(ts) for mode, ts in times.items()}
    print(f"{args.preset}-preset Transformer, batch {args.sentences}x{args.length} tokens; {machine()}; {load()}")
    for mode, tps in speed.items():
        print(f"  {mode}: {tps:8,.0f} tokens/s (median of {args.steps} steps)")
    print(f"  bf16 / fp32 speed ratio: {speed['bf16'] / speed['fp32']:.2f}")


if __name__ == "__main__":
    main()
