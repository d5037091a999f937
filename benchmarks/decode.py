"""Greedy and beam-search decoding of test_2016_flickr with and without the key/value cache, side by side.

    python benchmarks/decode.py --model runs/cpu/model.pt            # a trained model (translate's model.pt)
    python benchmarks/decode.py --model /tmp/smoke/model.pt --sentences 1000
    python benchmarks/decode.py --untrained cpu --max-len 30         # the cpu preset's sizes, random weights
    python benchmarks/decode.py --tiny                  # seconds: untrained smoke model, to check the script runs

Decodes a fixed sample of `--sentences` German sentences of test_2016_flickr (seeded; all 1000 with
--sentences 1000), batched by length as lesson 10 does (`--batch-sentences` per batch), under CPU
bf16 autocast as lesson 10 does (`--amp off` for float32), four ways: greedy and beam search
(`--beam`), each with the cache (`use_cache=True`, one position per step) and without it (the decoder
runs again over the whole prefix at every step). The four are interleaved, the order rotating, for
`--repeats` rounds; the medians and the speed-ups (time without / time with the cache) are printed,
with the machine and its load, and how many sentences the two paths decode differently (float
rounding can flip a near-tie under bf16; 0 in float32).

An untrained model rarely produces <eos>: give it a fixed `--max-len` so that every variant does the
same number of steps (a trained model stops at its <eos>, the length limit is then 1.5 * S + 10).
"""
import argparse
import random
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import interleaved, load, machine, median, shrink, tokenizer_path  # noqa: E402

from course_utils.data.batch import pad  # noqa: E402
from course_utils.data.multi30k import load_multi30k  # noqa: E402
from course_utils.decoding import beam_search, greedy_decode, strip_after_eos  # noqa: E402
from course_utils.tokenization import SubwordTokenizer, train_bpe  # noqa: E402
from course_utils.translation.presets import build_model, load_translator, make_config  # noqa: E402


def sample_sentences(n, seed=0):
    pairs = load_multi30k("test_2016_flickr")
    if n < len(pairs):
        pairs = random.Random(seed).sample(pairs, n)
    return [de for de, _ in pairs]


def untrained_model(preset, tokenizer_path):
    """A model of the preset's sizes with its initial weights, and a joint BPE tokenizer of the
    preset's vocabulary (trained once on Multi30k's training sentences and kept at tokenizer_path)."""
    cfg = make_config(preset)
    path = Path(tokenizer_path.format(vocab=cfg.vocab_size))
    if path.exists():
        tok = SubwordTokenizer.load(path)
    else:
        tok = train_bpe((s for pair in load_multi30k("train") for s in pair), vocab_size=cfg.vocab_size)
        path.parent.mkdir(parents=True, exist_ok=True)
        tok.save(path)
    torch.manual_seed(0)
    return build_model(cfg, tok.vocab_size).eval(), tok, cfg


def batches(src_ids, batch_sentences, pad_id):
    """Sentences sorted by length, in batches: (indices, padded src (B, S))."""
    order = sorted(range(len(src_ids)), key=lambda i: len(src_ids[i]))
    for i in range(0, len(order), batch_sentences):
        chunk = order[i:i + batch_sentences]
        yield chunk, pad([src_ids[j] for j in chunk], pad_id)


def decoder(model, tok, src_ids, beam, use_cache, max_len, batch_sentences, amp, outputs, name):
    """A callable that decodes every sentence and keeps its outputs (ids) in outputs[name]."""
    ids = dict(pad_id=tok.pad_id, bos_id=tok.bos_id, eos_id=tok.eos_id)

    def run():
        out = [None] * len(src_ids)
        for chunk, src in batches(src_ids, batch_sentences, tok.pad_id):
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
                if beam == 1:
                    ys = greedy_decode(model, src, max_len=max_len, use_cache=use_cache, **ids)
                    results = [strip_after_eos(row, tok.eos_id, tok.pad_id) for row in ys.tolist()]
                else:
                    hyps = beam_search(model, src, beam_size=beam, max_len=max_len, use_cache=use_cache, **ids)
                    results = [h[0].tokens for h in hyps]
            for i, r in zip(chunk, results):
                out[i] = r
        outputs[name] = out
    return run


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--model", help="a model.pt written by `python -m course_utils.translation`")
    which.add_argument("--untrained", metavar="PRESET", help="random weights with this preset's sizes")
    which.add_argument("--tiny", action="store_true",
                       help="seconds: an untrained smoke-size model, 4 sentences, to check the script runs")
    p.add_argument("--tokenizer", default=tokenizer_path(),
                   help="where the untrained model's tokenizer is kept ({vocab} = vocabulary size)")
    p.add_argument("--sentences", type=int, default=200, help="sample of test_2016_flickr (1000 = all)")
    p.add_argument("--beam", type=int, default=5)
    p.add_argument("--max-len", type=int, default=None, help="fixed output length limit (default 1.5 S + 10)")
    p.add_argument("--batch-sentences", type=int, default=128)
    p.add_argument("--amp", choices=["bf16", "off"], default="bf16")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    args = shrink(p.parse_args(argv), untrained="smoke", sentences=4, beam=2, max_len=4, repeats=1)
    torch.set_num_threads(args.threads)
    if args.model:
        model, tok, cfg = load_translator(args.model)
        what = f"trained model {args.model} (preset {cfg.preset})"
    else:
        model, tok, cfg = untrained_model(args.untrained, args.tokenizer)
        what = f"UNTRAINED model of the {args.untrained} preset's sizes"
    model.eval()
    sentences = sample_sentences(args.sentences)
    src_ids = tok.encode_batch(sentences)
    params = sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())
    print(f"{what}: d_model {cfg.d_model}, {cfg.num_heads} heads, {cfg.num_layers}+{cfg.num_layers} layers, "
          f"d_ff {cfg.d_ff}, vocabulary {tok.vocab_size}, {params / 1e6:.1f}M parameters")
    print(f"{len(sentences)} sentences of test_2016_flickr ({sum(map(len, src_ids)) / len(src_ids):.1f} source "
          f"pieces on average), batches of {args.batch_sentences}, "
          f"{'bf16 autocast' if args.amp == 'bf16' else 'float32'}, max_len {args.max_len or '1.5 S + 10'}")
    print(f"machine: {machine()}")
    print(f"before: {load()}")
    outputs = {}
    variants = {}
    for beam in (1, args.beam):
        for use_cache in (True, False):
            name = (f"beam {beam}" if beam > 1 else "greedy") + (", cache" if use_cache else ", no cache")
            variants[name] = decoder(model, tok, src_ids, beam, use_cache, args.max_len, args.batch_sentences,
                                     args.amp == "bf16", outputs, name)
    wall, cpu = interleaved(variants, args.repeats)
    print(f"after:  {load()}")
    clock = cpu if args.threads == 1 else wall
    print(f"{'':18s} {'wall':>8s} {'CPU':>8s} {'per sentence':>13s}   (medians; all wall times)")
    for name, ts in wall.items():
        per_sentence = 1e3 * median(clock[name]) / len(sentences)
        print(f"{name:18s} {median(ts):7.2f}s {median(cpu[name]):7.2f}s {per_sentence:10.1f} ms   "
              + " ".join(f"{t:.2f}" for t in ts))
    which = "CPU time, 1 thread" if args.threads == 1 else "wall time"
    for beam_name in ("greedy", f"beam {args.beam}"):
        cached, plain = clock[f"{beam_name}, cache"], clock[f"{beam_name}, no cache"]
        paired = median([b / a for a, b in zip(cached, plain)])
        differ = sum(a != b for a, b in zip(outputs[f"{beam_name}, cache"], outputs[f"{beam_name}, no cache"]))
        out_len = sum(map(len, outputs[f"{beam_name}, cache"])) / len(sentences)
        print(f"{beam_name}: {median(plain) / median(cached):.2f}x faster with the cache ({which}, ratio of medians; "
              f"median of paired ratios {paired:.2f}x); {out_len:.1f} output pieces on average; "
              f"{differ} of {len(sentences)} outputs differ between the two paths")

if __name__ == "__main__":
    main()
