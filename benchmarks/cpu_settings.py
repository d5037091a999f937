"""torch.compile and the number of CPU threads for lesson 10's cpu model: training and decoding, side by side.

    python benchmarks/cpu_settings.py                    # training (eager / compiled x 1 / 2 threads), decoding
    python benchmarks/cpu_settings.py --no-compile --steps 10
    python benchmarks/cpu_settings.py --tiny             # seconds: the smoke preset, to check the script runs

Training: the step of benchmarks/train_profile.py ("trainer now": as the trainer takes it, bf16) on
the cpu preset's real Multi30k batches, four ways: eager or torch.compile'd model, 1 or 2 threads.
The compiled models are compiled (and warmed up on every batch shape) first; the compile time is
printed apart. Decoding: cached greedy and beam search (`--beam`) of a sample of test_2016_flickr by
an UNTRAINED cpu-size model with a fixed `--max-len` (every variant does the same steps), 1 or 2
threads. Every group is interleaved, the order rotating; medians of WALL time (with several threads
the CPU time adds up the threads), with the machine and its load.
"""
import argparse
import copy
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import interleaved, load, machine, median, shrink, tokenizer_path  # noqa: E402
from decode import decoder, sample_sentences  # noqa: E402
from train_profile import VARIANTS, Step, real_batches, tokenizer  # noqa: E402

from course_utils.translation.presets import build_model, make_config  # noqa: E402


def training(args, cfg, tok):
    batches = real_batches(cfg, tok, args.batches)
    torch.manual_seed(0)
    base = build_model(cfg, tok.vocab_size).train()
    variants = {}
    for compiled in ([False, True] if args.compile else [False]):
        for threads in (1, 2):
            model = copy.deepcopy(base)
            torch.set_num_threads(threads)
            if compiled:
                model = torch.compile(model)
            step = Step(model, cfg, **VARIANTS["trainer now"])
            start = time.perf_counter()
            for b in batches:                          # warm-up (and compilation) on every batch shape
                step(b)
            name = f"{'compiled' if compiled else 'eager'}, {threads} thread{'s' if threads > 1 else ''}"
            print(f"  warm-up of {name}: {time.perf_counter() - start:.0f} s for {len(batches)} steps"
                  + (" (includes compiling)" if compiled else ""), flush=True)
            variants[name] = (step, threads)
    counter = {name: 0 for name in variants}

    def run(name):
        step, threads = variants[name]

        def go():
            torch.set_num_threads(threads)
            step(batches[counter[name] % len(batches)])
            counter[name] += 1
        return go
    wall, _ = interleaved({name: run(name) for name in variants}, args.steps)
    tokens = [batches[i % len(batches)]["tokens"] for i in range(args.steps)]
    speed = {name: median([n / t for n, t in zip(tokens, wall[name])]) for name in variants}
    first = next(iter(variants))
    print(f"training step ({load()}): median tokens/s by wall time over {args.steps} steps")
    for name in variants:
        print(f"  {name:22s} {1e3 * median(wall[name]):7.0f} ms/step {speed[name]:8,.0f} tokens/s  "
              f"{speed[name] / speed[first]:.2f}x")


def decoding(args, cfg, tok):
    torch.manual_seed(0)
    model = build_model(cfg, tok.vocab_size).eval()
    src_ids = tok.encode_batch(sample_sentences(args.sentences))
    outputs, variants = {}, {}
    for beam in (1, args.beam):
        for threads in (1, 2):
            name = f"{'greedy' if beam == 1 else f'beam {beam}'}, {threads} thread{'s' if threads > 1 else ''}"
            run = decoder(model, tok, src_ids, beam, True, args.max_len, 128, True, outputs, name)
            variants[name] = (lambda run=run, threads=threads: (torch.set_num_threads(threads), run()))
    wall, _ = interleaved(variants, args.repeats)
    print(f"decoding {args.sentences} sentences with the cache, max_len {args.max_len} ({load()}): median wall time")
    for name in variants:
        base = name.replace("2 threads", "1 thread")
        print(f"  {name:22s} {median(wall[name]):6.2f} s  {median(wall[base]) / median(wall[name]):.2f}x")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--preset", default="cpu")
    p.add_argument("--steps", type=int, default=8, help="timed training steps per variant")
    p.add_argument("--batches", type=int, default=6, help="distinct real batches, used in turn")
    p.add_argument("--no-compile", dest="compile", action="store_false")
    p.add_argument("--no-training", dest="training", action="store_false")
    p.add_argument("--no-decoding", dest="decoding", action="store_false")
    p.add_argument("--sentences", type=int, default=100)
    p.add_argument("--beam", type=int, default=5)
    p.add_argument("--max-len", type=int, default=20)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--tokenizer", default=tokenizer_path())
    p.add_argument("--tiny", action="store_true", help="seconds: the smoke preset, eager, one step, 4 sentences")
    args = shrink(p.parse_args(argv), preset="smoke", steps=1, batches=1, compile=False, sentences=4, beam=2,
                  max_len=4, repeats=1)
    cfg = make_config(args.preset)
    tok = tokenizer(args.tokenizer, cfg.vocab_size)
    print(f"machine: {machine()}; {load()}")
    if args.training:
        training(args, cfg, tok)
    if args.decoding:
        decoding(args, cfg, tok)


if __name__ == "__main__":
    main()
