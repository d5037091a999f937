"""Lesson 16's measurements of serving, in one run: the waste of a contiguous cache, speculative decoding's
acceptance and speed-up for each draft and k, and a Poisson stream of caption requests served by sequential
decoding, static batching and continuous batching (with and without speculation) at six loads, side by side.

    python benchmarks/serving.py                              # lesson 12's GPT: runs/language_model-full
    python benchmarks/serving.py --reference lesson16_serving # ... and write the reference file fast mode shows
    python benchmarks/serving.py --tiny                       # seconds: random tiny models, synthetic captions

The target is lesson 12's trained GPT (`python -m course_utils.language_model --preset full` writes it); the
drafts are GPTs of lesson 12's fast preset's widths with 1 and 2 layers, trained here for a few hundred steps on
the target's tokens with lesson 12's pipeline (language_model.train_language_model). The stream's requests are
validation captions: the prompt is <bos> and the first 2-6 tokens, the answer the rest of the caption. Sizes:
course_utils.serving_runs.SIZES["full"] (the lesson's full mode). One torch thread; every time is CPU time of this
process, every comparison interleaved (serving_runs). Prints the figures, the machine and its load; with
--reference NAME also writes course_utils/reference_runs/NAME.json, which the lesson shows in fast mode.
"""
import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import load, machine  # noqa: E402

from course_utils.config import describe_machine, load_average, runs_dir  # noqa: E402
from course_utils.serving_runs import DRAFT_TRAINING, SIZES, draft_model, headline, measure_all  # noqa: E402

COMMAND = "python benchmarks/serving.py"


def _trained(tiny):
    """(target, tokenized validation captions, training stream, where the target comes from)."""
    if tiny:
        from course_utils.gpt import GPT
        torch.manual_seed(0)
        g = torch.Generator().manual_seed(0)
        captions = [torch.randint(4, 60, (int(n),), generator=g).tolist() for n in torch.randint(5, 14, (40,),
                                                                                                generator=g)]
        stream = torch.tensor([t for c in captions for t in [1] + c + [2]])
        return GPT(60, 32, 4, 2, 64, max_len=64, num_kv_heads=2).eval(), captions, stream, "random tiny GPT"
    return None


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--target", default=str(runs_dir() / "language_model-full" / "model.pt"),
                   help="lesson 12's model.pt (python -m course_utils.language_model --preset full)")
    p.add_argument("--reference", metavar="NAME", help="also write course_utils/reference_runs/NAME.json")
    p.add_argument("--tiny", action="store_true", help="seconds, random tiny models (the smoke test)")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    sizes = dict(SIZES["fast" if args.tiny else "full"])
    load_before, start, cpu_start = load_average(), time.perf_counter(), time.process_time()
    print(f"machine: {machine()}")
    print(f"before: {load()}")
    tiny = _trained(args.tiny)
    if tiny:
        target, captions, stream, source = tiny
    else:
        from course_utils.language_model import caption_stream, load_language_model
        from course_utils.language_model.data import captions as caption_texts

        target_path = Path(args.target)
        if not target_path.exists():
            raise SystemExit(f"error: {target_path} is not there: train lesson 12's GPT first with `python -m "
                             "course_utils.language_model --preset full` (or pass --target)")
        target, tok, cfg = load_language_model(target_path)
        train_text, val_text = caption_texts(cfg)
        captions = tok.encode_batch(val_text)
        stream = caption_stream(tok, train_text)
        source = f"lesson 12's GPT ({args.target})"
    print(f"target: {source}, {sum(q.numel() for q in target.parameters()) / 1e6:.2f}M parameters, "
          f"{target.num_layers} layers; {len(captions)} captions")
    from course_utils.language_model import train_language_model
    drafts, draft_info = {}, {}
    for layers in sizes["draft_layers"]:
        name = f"{layers} layer{'s' if layers > 1 else ''}"
        drafts[name] = draft_model(target, layers, seed=sizes["seed"])
        t0 = time.process_time()
        history = train_language_model(drafts[name], stream, steps=sizes["draft_steps"], show_progress=False,
                                       seed=sizes["seed"], **DRAFT_TRAINING)
        drafts[name].eval()
        draft_info[name] = dict(parameters=sum(q.numel() for q in drafts[name].parameters()), layers=layers,
                                train_loss=sum(history["train_loss"][-20:]) / len(history["train_loss"][-20:]),
                                train_cpu_seconds=time.process_time() - t0)
        print(f"draft {name}: {draft_info[name]['parameters'] / 1e6:.2f}M parameters, {sizes['draft_steps']} steps, "
              f"train loss {draft_info[name]['train_loss']:.2f}")
    results = measure_all(target, drafts, captions, sizes)
    result = headline(results)
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    print("\n" + "\n".join(f"{k}: {v:.4g}" if isinstance(v, float) else f"{k}: {v}" for k, v in result.items()))
    print(f"\n{wall / 60:.1f} min wall, {cpu / 60:.1f} min CPU; after: {load()}")
    if args.reference and not args.tiny:
        from course_utils.reference_runs import write
        result.update(wall_seconds=round(wall, 1), cpu_seconds=round(cpu, 1))
        path = write(args.reference, written_by=f"{COMMAND} --reference {args.reference}",
                     what="lesson 16: a paged cache's waste, speculative decoding, a stream of caption requests "
                          "under sequential, static and continuous batching",
                     settings=dict(sizes, draft_training=DRAFT_TRAINING, target=source.split(" (")[0]),
                     result=result, machine=describe_machine("cpu", load_before), drafts=draft_info, **results)
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
