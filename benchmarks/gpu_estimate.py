"""How long the `gpu` preset should train on a GPU, estimated from its FLOPs (no GPU is needed to run this).

    python benchmarks/gpu_estimate.py                          # a T4: 65 TFLOP/s fp16 tensor-core peak
    python benchmarks/gpu_estimate.py --peak 312 --name A100    # another GPU (its dense bf16/fp16 peak)
    python benchmarks/gpu_estimate.py --tiny                    # seconds: the smoke preset, to check it runs

It counts, with torch.utils.flop_counter, the FLOPs of the forward and backward pass of the gpu
preset's Transformer on real bucketed batches of Multi30k (the matrix products and attention, which
are nearly all the work), multiplies by the steps of an epoch and the preset's epochs, and divides
by the GPU's peak times a utilisation. Small models (d_model 512, short sentences) use a GPU's
tensor cores poorly: the printed range assumes 5-40 % of the peak (the range is an assumption, not
a measurement: the course has not been run on a GPU). Validation after every epoch and the final
decoding come on top and are estimated apart, from their FLOPs too.
"""
import argparse
import sys
from pathlib import Path

import torch
from torch.utils.flop_counter import FlopCounterMode

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import median, shrink, tokenizer_path  # noqa: E402
from train_profile import real_batches, tokenizer  # noqa: E402

from course_utils.data.multi30k import load_multi30k  # noqa: E402
from course_utils.translation.presets import build_model, make_config  # noqa: E402


def step_flops(model, batch, backward=True):
    """FLOPs of one training step's forward (and backward); the optimizer's are negligible."""
    with FlopCounterMode(display=False) as counter:
        logits = model(batch["src"], batch["tgt_in"])
        if backward:
            torch.nn.functional.cross_entropy(logits.transpose(1, 2), batch["tgt_out"], ignore_index=0).backward()
    model.zero_grad(set_to_none=True)
    return counter.get_total_flops()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--name", default="T4")
    p.add_argument("--peak", type=float, default=65.0, help="the GPU's fp16/bf16 tensor-core peak, TFLOP/s")
    p.add_argument("--batches", type=int, default=6, help="batches whose FLOPs are counted (median)")
    p.add_argument("--tokenizer", default=tokenizer_path())
    p.add_argument("--preset", default="gpu")
    p.add_argument("--tiny", action="store_true", help="seconds: the smoke preset's model, one batch")
    args = shrink(p.parse_args(argv), preset="smoke", batches=1)
    torch.set_num_threads(1)
    cfg = make_config(args.preset)
    tok = tokenizer(args.tokenizer, cfg.vocab_size)
    batches = real_batches(cfg, tok, 10_000)                       # every batch of an epoch
    steps = len(batches)
    torch.manual_seed(0)
    model = build_model(cfg, tok.vocab_size).train()
    per_step = median([step_flops(model, b) for b in batches[: args.batches]])
    train = per_step * steps * cfg.epochs
    # Evaluation, in forward passes: every epoch the validation loss (one forward of val) and its
    # greedy decoding (with the key/value cache, about one more forward's work); at the end greedy and
    # beam-5 decoding of test_2016_flickr (about 1 + 5 forwards of it).
    per_token = sum(step_flops(model, b, backward=False) for b in batches[: args.batches]) / sum(
        b["tokens"] for b in batches[: args.batches])               # forward FLOPs per real token
    def tokens_of(split):
        pairs = load_multi30k(split)
        return sum(len(s) + len(t) + 1 for s, t in zip(tok.encode_batch([de for de, _ in pairs]),
                                                       tok.encode_batch([en for _, en in pairs])))
    evaluation = per_token * (tokens_of("val") * 2 * cfg.epochs + tokens_of("test_2016_flickr") * 6)
    peak = args.peak * 1e12
    print(f"{args.preset} preset: d_model {cfg.d_model}, {cfg.num_heads} heads, "
          f"{cfg.num_layers}+{cfg.num_layers} layers, "
          f"d_ff {cfg.d_ff}, vocabulary {tok.vocab_size}, batches of {cfg.batch_tokens} padded tokens")
    print(f"FLOPs per training step (forward + backward, median of {args.batches} real batches): "
          f"{per_step / 1e12:.3f} TFLOP")
    print(f"steps per epoch: {steps}; epochs: {cfg.epochs}; training FLOPs: {per_step / 1e12:.3f} x {steps} x "
          f"{cfg.epochs} = {train / 1e15:.2f} PFLOP")
    print(f"evaluation (validation every epoch, test decoding at the end), estimated: {evaluation / 1e15:.2f} PFLOP")
    print(f"{args.name} at {args.peak:g} TFLOP/s peak:")
    for share in (1.0, 0.4, 0.2, 0.1, 0.05):
        seconds = (train + evaluation) / (peak * share)
        print(f"  at {share:4.0%} of the peak: {(train + evaluation) / 1e15:.2f} PFLOP / ({args.peak:g} x {share:.2f} "
              f"TFLOP/s) = {seconds / 60:5.1f} min")


if __name__ == "__main__":
    main()
