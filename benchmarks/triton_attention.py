"""Lesson 13's Triton kernel against PyTorch's fused attention and the lesson's tiled attention in Python, on a GPU:
forward, and forward + backward, from 1,024 to 16,384 positions; time (median of CUDA-synchronised runs, the methods
interleaved) and peak memory; printed with their ratios to scaled_dot_product_attention.

    python benchmarks/triton_attention.py              # on a CUDA GPU (Colab's T4, any other); float16, causal
    python benchmarks/triton_attention.py --full-mask  # not causal
    python benchmarks/triton_attention.py --tiny       # seconds: only checks that the script runs

The three methods: "triton", the course's kernel (course_utils.triton_kernel, the solution of the lesson's exercise)
through course_utils.triton_attention.TritonFlashAttention, whose backward pass is the lesson's tiled backward in
Python; "sdpa", torch.nn.functional.scaled_dot_product_attention (is_causal), forward and backward fused; "tiled",
the lesson's efficient_attention.tiled_attention and tiled_attention_backward, both loops in Python. So the
backward columns compare a Python backward pass (for triton and tiled) with a fused one.

Without a CUDA GPU nothing is timed, and the script says so: Triton's interpreter runs a kernel thousands of times
slower than compiled, so a time measured there says nothing about the kernel. (--tiny without a GPU runs the kernel
once in the interpreter at a tiny size, to check the code path: correctness only.)
"""
import argparse
import statistics

import torch
import torch.nn.functional as F
from _common import load, machine, shrink

from course_utils import efficient_attention as ea
from course_utils import triton_attention as ta


class TiledAttention(torch.autograd.Function):
    """The lesson's tiled forward and backward passes, both in Python."""

    @staticmethod
    def forward(ctx, q, k, v, causal, block):
        out, lse = ea.tiled_attention(q, k, v, block, causal=causal)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.causal, ctx.block = causal, block
        return out

    @staticmethod
    def backward(ctx, grad_out):
        q, k, v, out, lse = ctx.saved_tensors
        return (*ea.tiled_attention_backward(q, k, v, out, lse, grad_out, ctx.block, causal=ctx.causal), None, None)


def methods(causal, block, python_block):
    return {
        "triton": lambda q, k, v: ta.TritonFlashAttention.apply(q, k, v, causal, None, block, python_block),
        "sdpa": lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=causal),
        "tiled": lambda q, k, v: TiledAttention.apply(q, k, v, causal, python_block),
    }


def timed(fn, inputs, backward):
    """(seconds, peak bytes above what was allocated before) of one forward (and backward) call of fn(*inputs)."""
    for x in inputs:
        x.grad = None                                  # each call allocates its own gradients
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    out = fn(*inputs)
    if backward:
        out.backward(torch.ones_like(out))
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / 1000, torch.cuda.max_memory_allocated() - before


def run_gpu(args):
    dtype = getattr(torch, args.dtype)
    print(f"GPU: {torch.cuda.get_device_name()}, torch {torch.__version__}, {ta.triton_status()[1]}; {args.dtype}, "
          f"B = 1, H = {args.heads}, d = {args.d_head}, {'causal' if args.causal else 'no mask'}; kernel blocks "
          f"{args.block} x {args.block}, Python tiles {args.python_block}; median of {args.repeats} runs")
    print(f"host: {machine()} ({load()})")
    fns = methods(args.causal, args.block, args.python_block)
    header = f"{'T':>6} {'pass':>9} " + " ".join(f"{n + ' ms':>11} {n + ' MiB':>11}" for n in fns)
    print(header + "   triton/sdpa time  tiled/sdpa time")
    for T in args.lengths:
        inputs = tuple(torch.randn(1, args.heads, T, args.d_head, device="cuda", dtype=dtype, requires_grad=True)
                       for _ in range(3))
        for backward in (False, True):
            samples = {name: [] for name in fns}
            for fn in fns.values():                                            # warm-up (compiles the kernel)
                timed(fn, inputs, backward)
            for r in range(args.repeats):                                      # interleaved, order rotating
                names = list(fns)[r % 3:] + list(fns)[:r % 3]
                for name in names:
                    samples[name].append(timed(fns[name], inputs, backward))
            ms = {n: 1000 * statistics.median(s for s, _ in samples[n]) for n in fns}
            mib = {n: max(m for _, m in samples[n]) / 2**20 for n in fns}
            row = " ".join(f"{ms[n]:11.2f} {mib[n]:11.1f}" for n in fns)
            print(f"{T:6d} {'fwd+bwd' if backward else 'forward':>9} {row}   {ms['triton'] / ms['sdpa']:16.2f} "
                  f"{ms['tiled'] / ms['sdpa']:16.2f}")
        del inputs
        torch.cuda.empty_cache()


def run_interpreter():
    """No GPU, --tiny: the kernel's code path once in the interpreter (correctness, never speed)."""
    ok, why = ta.triton_status()
    if not ok:
        print(f"Triton cannot run here either: {why}")
        return
    q, k, v = (torch.randn(1, 2, 24, 16) for _ in range(3))
    out, lse = ta.flash_forward(q, k, v, causal=True)
    expected, expected_lse = ea.tiled_attention(q, k, v, 16, causal=True)
    print(f"--tiny: the kernel's path ran once in Triton's interpreter at T = 24 (correctness only, no time): largest "
          f"difference from the lesson's tiled attention {(out - expected).abs().max():.1e} (output), "
          f"{(lse - expected_lse).abs().max():.1e} (L)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[1024, 2048, 4096, 8192, 16384])
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--d-head", type=int, default=64)
    parser.add_argument("--dtype", default="float16", choices=["float16", "bfloat16", "float32"])
    parser.add_argument("--block", type=int, default=64, help="BLOCK_Q = BLOCK_K of the Triton kernel")
    parser.add_argument("--python-block", type=int, default=256, help="tile size of the Python loops")
    parser.add_argument("--full-mask", dest="causal", action="store_false", help="no causal mask")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--tiny", action="store_true", help="seconds: check that the script runs")
    args = shrink(parser.parse_args(), lengths=[256, 512], heads=2, repeats=1)
    if not torch.cuda.is_available():
        print("No CUDA GPU found: nothing was timed. This benchmark compiles the Triton kernel for a GPU; run it on "
              "one (Colab: Runtime > Change runtime type > T4 GPU). Triton's interpreter on a CPU checks a kernel's "
              "values, never its speed.")
        if args.tiny:
            run_interpreter()
        return
    ok, why = ta.triton_status()
    if not ok:
        print(f"A GPU, but Triton cannot run: {why}")
        return
    run_gpu(args)


if __name__ == "__main__":
    main()
