"""Multi-head latent attention's decoding step, absorbed against unabsorbed, side by side (lesson 15).

    python benchmarks/latent_decode.py                  # 256 tokens, the lesson's layer and a larger one
    python benchmarks/latent_decode.py --tokens 64 256 1024 --repeats 5
    python benchmarks/latent_decode.py --tiny           # seconds: only checks that the script still works

One MultiHeadLatentAttention layer (random weights: the work per step does not depend on them) decodes one
sequence position by position from its cache of latents c and RoPE keys k^R, two ways, interleaved, the order
rotating, for `--repeats` rounds:
  absorbed   W_UK folded into the query and W_UV into W_O (W_O W_UV computed once, before the first step): the
             scores and the mix are taken against the cached latents themselves;
  unabsorbed every head's keys and values rebuilt from the cached latents at every step, then plain attention.
Prints the medians per step (wall clock and CPU time of this process, one thread), the ratio unabsorbed /
absorbed, whether both give the same outputs, the machine and its load.
"""
import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import interleaved, load, machine, median, shrink  # noqa: E402

from course_utils.latent_attention import (  # noqa: E402
    MultiHeadLatentAttention,
    absorbed_attend,
    absorbed_weights,
    unabsorbed_step,
)
from course_utils.open_models import make_config  # noqa: E402

LARGER = dict(d_model=512, num_heads=8, d_latent=256, d_rope=32)   # d_c = 4 d_h, d_R = d_h / 2 (DeepSeek-V3's ratios)


def sizes(tiny):
    cfg = make_config("full")
    lesson = dict(d_model=cfg.d_model, num_heads=cfg.num_heads, d_latent=cfg.d_latent, d_rope=cfg.d_rope)
    if tiny:
        return {"tiny": dict(d_model=16, num_heads=2, d_latent=8, d_rope=4)}
    return {"the lesson's layer": lesson, "a larger layer": LARGER}


@torch.no_grad()
def measure(layer, tokens, repeats):
    x = torch.randn(1, tokens, layer.d_model, generator=torch.Generator().manual_seed(0))
    positions = torch.arange(tokens)
    c, k_r = layer.latents(x, positions)
    q_c, q_r = layer.queries(x, positions)
    W_uk, W_uv, W_o = layer.heads(layer.up_k), layer.heads(layer.up_v), layer.o_proj.weight
    outputs = {}

    def absorbed():
        W_ov = absorbed_weights(W_uk, W_uv, W_o)
        outputs["absorbed"] = [absorbed_attend(q_c[:, :, t:t + 1], q_r[:, :, t:t + 1], c[:, :t + 1], k_r[:, :t + 1],
                                               W_uk, W_ov) for t in range(tokens)]

    def unabsorbed():
        outputs["unabsorbed"] = [unabsorbed_step(q_c[:, :, t:t + 1], q_r[:, :, t:t + 1], c[:, :t + 1],
                                                 k_r[:, :t + 1], W_uk, W_uv, W_o) for t in range(tokens)]

    wall, cpu = interleaved({"absorbed": absorbed, "unabsorbed": unabsorbed}, repeats, warmup=1)
    same = all(torch.allclose(a, b, atol=1e-4, rtol=1e-4) for a, b in zip(outputs["absorbed"], outputs["unabsorbed"]))
    return wall, cpu, same


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tokens", type=int, nargs="+", default=[256])
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--tiny", action="store_true", help="a run of seconds at tiny sizes (the smoke test)")
    args = shrink(p.parse_args(argv), tokens=[8], repeats=1)
    torch.set_num_threads(args.threads)
    print(f"machine: {machine()}")
    print(f"before: {load()}")
    for name, s in sizes(args.tiny).items():
        torch.manual_seed(0)
        layer = MultiHeadLatentAttention(**s).eval()
        for tokens in args.tokens:
            wall, cpu, same = measure(layer, tokens, args.repeats)
            ms = {k: {"wall": median(wall[k]) / tokens * 1000, "cpu": median(cpu[k]) / tokens * 1000}
                  for k in wall}
            print(f"{name} {s}, {tokens} tokens: absorbed {ms['absorbed']['cpu']:.3f} ms per step (CPU; wall "
                  f"{ms['absorbed']['wall']:.3f}), unabsorbed {ms['unabsorbed']['cpu']:.3f} (wall "
                  f"{ms['unabsorbed']['wall']:.3f}): absorbed {ms['unabsorbed']['cpu'] / ms['absorbed']['cpu']:.2f}x "
                  f"faster (CPU time; wall {ms['unabsorbed']['wall'] / ms['absorbed']['wall']:.2f}x), same outputs: "
                  f"{same}")
    print(f"after: {load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
