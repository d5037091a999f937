"""Peak memory and time of plain, tiled and fused attention, side by side, as the sequence grows (lesson 13).

    python benchmarks/attention_memory.py                  # T = 1k, 2k, 4k, 8k, 16k (about 2-4 minutes)
    python benchmarks/attention_memory.py --tiny           # T = 512, 1024, 2048, one round: a smoke run in seconds
    python benchmarks/attention_memory.py --lengths 1024 4096 --block 128 --repeats 5

One head of one sequence, q, k, v of shape (1, 1, T, --d-head) in float32, on one thread:
- plain: scores, softmax, weights @ v, every T x T matrix stored (course_utils.attention_cost.plain_attention);
- tiled: the lesson's tiled_attention in Python (course_utils.efficient_attention), tiles of --block x --block;
- fused: torch.nn.functional.scaled_dot_product_attention (the backend it picks is printed).
Peak memory: each measurement in a fresh process, the rise of its peak resident memory (ru_maxrss) from
before q, k, v were built to after the call: inputs, output and everything the call materialises, and
nothing of the other programs on the machine (course_utils.attention_cost). Time: the three methods
interleaved, the order rotating, for --repeats rounds; medians of wall-clock and of CPU time (with one
thread the CPU time does not count the time other jobs hold the core: the steadier number on a loaded
machine). Then, for each method, the slope of log(memory) and log(time) against log(T) fitted over the
last three lengths (2 = quadratic, 1 = linear), and the targets of the lesson: at T = 16384 the tiled
peak is at most 1/10 of plain's, and its memory slope (4k..16k) is at most 1.2; the exit status is 1 when
a target is missed (runs that stop below 16384, e.g. --tiny, do not judge them).
"""
import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import interleaved, load, machine, median  # noqa: E402

from course_utils.attention_cost import (  # noqa: E402
    METHODS,
    attention_memory_bytes,
    fitted_slope,
    peak_memory_bytes,
    random_qkv,
    run_attention,
    sdpa_backend,
)


def slope(xs, ys):
    """The fitted log-log slope, or nan where a measurement is 0 (a peak too small for the page-sized
    resident memory to see, at tiny lengths)."""
    return fitted_slope(xs, ys) if min(ys) > 0 else float("nan")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[1024, 2048, 4096, 8192, 16384])
    parser.add_argument("--tiny", action="store_true", help="T = 512, 1024, 2048 and one round: a smoke run")
    parser.add_argument("--d-head", type=int, default=64)
    parser.add_argument("--block", type=int, default=256, help="tile size of the tiled method (block_q = block_k)")
    parser.add_argument("--repeats", type=int, default=3, help="timed rounds (lengths above 4096: at most 2)")
    args = parser.parse_args(argv)
    lengths = [512, 1024, 2048] if args.tiny else sorted(args.lengths)
    if len(lengths) < 2:
        parser.error("give at least two lengths (a slope needs two points)")
    torch.set_num_threads(1)
    print(f"machine: {machine()}")
    print(f"load before: {load()}")
    q, k, v = random_qkv(64, args.d_head)
    print(f"fused backend for (1, 1, T, {args.d_head}) float32 without a mask: {sdpa_backend(q, k, v)}")
    print(f"tiles: {args.block} x {args.block}; d_head = {args.d_head}; one thread\n")

    seconds = {m: [] for m in METHODS}
    cpu = {m: [] for m in METHODS}
    peak = {m: [] for m in METHODS}
    print(f"{'T':>6}  " + "  ".join(f"{m + ' time (s)':>15} {'cpu (s)':>8} {'peak (MiB)':>11}" for m in METHODS))
    for T in lengths:
        q, k, v = random_qkv(T, args.d_head)
        variants = {m: (lambda m=m, q=q, k=k, v=v: run_attention(m, q, k, v, block=args.block)) for m in METHODS}
        repeats = 1 if args.tiny else (min(args.repeats, 2) if T > 4096 else args.repeats)
        wall, cpu_times = interleaved(variants, repeats)
        del q, k, v, variants
        for m in METHODS:
            seconds[m].append(median(wall[m]))
            cpu[m].append(median(cpu_times[m]))
            peak[m].append(peak_memory_bytes(m, T, args.d_head, block=args.block))
        print(f"{T:6d}  " + "  ".join(f"{seconds[m][-1]:15.3f} {cpu[m][-1]:8.3f} {peak[m][-1] / 2**20:11.1f}"
                                      for m in METHODS), flush=True)

    fit = slice(-3, None) if len(lengths) >= 3 else slice(None)
    span = f"T = {lengths[fit][0]}..{lengths[-1]}"
    print(f"\nfitted slopes on the log-log scale ({span}; 2 = quadratic, 1 = linear):")
    for m in METHODS:
        print(f"  {m:5s}: memory {slope(lengths[fit], peak[m][fit]):5.2f}   time (wall) "
              f"{slope(lengths[fit], seconds[m][fit]):5.2f}   time (cpu) {slope(lengths[fit], cpu[m][fit]):5.2f}")
    T = lengths[-1]
    print(f"\nat T = {T}:")
    for m in METHODS:
        print(f"  {m:5s}: peak {peak[m][-1] / 2**20:9.1f} MiB = {peak[m][-1] / peak['plain'][-1]:.4f} of plain's "
              f"(counted for plain: {attention_memory_bytes(T, args.d_head, 'plain') / 2**20:.1f} MiB); "
              f"cpu time {cpu[m][-1] / cpu['plain'][-1]:.2f} x plain's, {cpu[m][-1] / cpu['fused'][-1]:.2f} x fused's")
    ratio = peak["tiled"][-1] / peak["plain"][-1]
    growth = slope(lengths[fit], peak["tiled"][fit])
    print(f"\ntarget: tiled peak <= 1/10 of plain's at T = {T}: {ratio:.4f} -> {'met' if ratio <= 0.1 else 'NOT met'}")
    print(f"target: tiled memory grows at most linearly ({span}): slope {growth:.2f} -> "
          f"{'met' if growth <= 1.2 else 'NOT met'}")
    print(f"load after: {load()}")
    if T < 16384:
        print("(the targets are set for T = 16384; at shorter lengths the constant part of the tiled peak, the tiles "
              "and the interpreter's buffers, still weighs: this run does not judge them)")
        return 0
    return 0 if ratio <= 0.1 and growth <= 1.2 else 1


if __name__ == "__main__":
    sys.exit(main())
