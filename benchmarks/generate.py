"""Generation with and without the key/value cache, side by side: lesson 12's GPT, tokens per second.

    python benchmarks/generate.py                        # the lesson's sizes (random weights), 32, 128, 256 tokens
    python benchmarks/generate.py --lengths 32 128 256 512 --batch 4 --repeats 5
    python benchmarks/generate.py --tiny                 # seconds: only checks that the script still works

Generates greedily (temperature 0) from a one-token prompt (<bos>) with `course_utils.decoding.generate`,
for each length, once with the cache (`use_cache=True`: the prompt's keys and values kept, one position per
step, through `CausalSelfAttention.extend_cache`) and once without it (the model runs again on the whole
prefix at every step), interleaved, the order rotating, for `--repeats` rounds. Prints the medians in tokens
per second (wall clock and CPU time of this process), the speed-up, whether both give the same tokens, the
machine and its load. Random weights give the same amount of work per token as trained ones: generation
never stops early here (no <eos>).
"""
import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import interleaved, load, machine, median, shrink  # noqa: E402

from course_utils.decoding import generate  # noqa: E402
from course_utils.gpt import GPT  # noqa: E402
from course_utils.language_model import PRESETS  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--lengths", type=int, nargs="+", default=[32, 128, 256])
    p.add_argument("--batch", type=int, default=1, help="sequences generated at once")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--amp", choices=["bf16", "off"], default="off")
    p.add_argument("--tiny", action="store_true", help="a run of seconds at tiny sizes (the smoke test)")
    args = shrink(p.parse_args(argv), lengths=[4, 8], repeats=1)
    torch.set_num_threads(args.threads)
    sizes = dict(PRESETS["full"])
    if args.tiny:
        sizes.update(vocab_size=50, d_model=16, num_heads=2, num_kv_heads=1, num_layers=1, d_ff=32)
    torch.manual_seed(0)
    max_len = max(args.lengths)
    model = GPT(sizes["vocab_size"], sizes["d_model"], sizes["num_heads"], sizes["num_layers"], sizes["d_ff"],
                max_len=max_len, positions="rope", num_kv_heads=sizes["num_kv_heads"]).eval()
    params = sum(q.numel() for q in model.parameters())
    which = "tiny sizes (--tiny)" if args.tiny else "full preset"
    print(f"GPT of lesson 12's {which}, random weights: {params / 1e6:.2f}M parameters, {sizes['num_layers']} "
          f"layers, d_model {sizes['d_model']}, {sizes['num_heads']} query / {sizes['num_kv_heads']} key-value heads, "
          f"rotary positions; batch {args.batch}, greedy, {'bf16 autocast' if args.amp == 'bf16' else 'float32'}")
    print(f"machine: {machine()}")
    print(f"before: {load()}")
    prompt = torch.full((args.batch, 1), 1)
    rows = []
    for n in args.lengths:
        outputs = {}

        def run(use_cache, n=n, outputs=outputs):
            def go():
                with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.amp == "bf16"):
                    outputs[use_cache] = generate(model, prompt, n, temperature=0, use_cache=use_cache)
            return go

        wall, cpu = interleaved({"cache": run(True), "no cache": run(False)}, args.repeats, warmup=1)
        same = torch.equal(outputs[True], outputs[False])
        tokens = n * args.batch
        rows.append((n, tokens / median(wall["no cache"]), tokens / median(wall["cache"]),
                     median(wall["no cache"]) / median(wall["cache"]), median(cpu["no cache"]) / median(cpu["cache"]),
                     same))
    print(f"\n{'tokens':>6}  {'no cache (tok/s)':>16}  {'cache (tok/s)':>13}  {'speed-up (wall)':>15}  "
          f"{'speed-up (CPU)':>14}  same tokens")
    for n, slow, fast, ratio, cpu_ratio, same in rows:
        print(f"{n:6d}  {slow:16.1f}  {fast:13.1f}  {ratio:14.1f}x  {cpu_ratio:13.1f}x  {same}")
    print(f"after: {load()}")


if __name__ == "__main__":
    main()
