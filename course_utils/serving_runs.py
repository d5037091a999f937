"""Lesson 16's measurements, run by the notebook (full mode) and by `python benchmarks/serving.py` (which writes
the reference file fast mode shows), with the sizes of SIZES, stated once.

    waste = cache_waste(lengths, max_len, block_sizes=(8, 16, 32))     # contiguous against paged, on real lengths
    sweep = speculation_sweep(target, drafts, prompts, ks, new_tokens)  # acceptance and speed-up against plain decoding
    capacity = sequential_capacity(target, requests)                    # requests a second, one at a time, saturated
    runs = load_sweep(target, draft, requests, loads, capacity, ...)    # every policy at every load, side by side

Every time is CPU time of this process on one torch thread (time.process_time), each comparison interleaved
(the order rotating), so that the other jobs of a shared machine do not tilt a ratio.
"""
import copy
import time

from .paged_cache import blocks_needed
from .request_stream import contiguous_waste, paged_waste, poisson_arrivals, serve, summarize
from .serving_engine import Engine
from .speculative import plain_generate, speculative_generate

__all__ = ["SIZES", "cache_waste", "speculation_sweep", "sequential_capacity", "load_sweep", "POLICY_RUNS",
           "measure_all", "headline", "draft_model", "DRAFT_TRAINING"]

SIZES = {
    # fast mode (the tests): seconds
    "fast": dict(draft_steps=20, draft_layers=(1, 2), ks=(1, 2, 4), spec_prompts=3, spec_tokens=8, spec_repeats=1,
                 stream_requests=12, loads=(1.0, 4.0), capacity_requests=4, block_size=16, max_running=16,
                 static_batch=4, pool_tokens=2048, k=2, seed=0),
    # full mode: the lesson's figures (benchmarks/serving.py --reference lesson16_serving)
    "full": dict(draft_steps=600, draft_layers=(1, 2), ks=(1, 2, 3, 4, 6, 8), spec_prompts=24, spec_tokens=24,
                 spec_repeats=3,
                 stream_requests=96, loads=(0.5, 1.0, 2.0, 4.0, 8.0, 16.0), capacity_requests=24, block_size=16,
                 max_running=32, static_batch=8, pool_tokens=2048, k=3, seed=0),
}
# how a draft is trained (language_model.train_language_model), on the target's tokens
DRAFT_TRAINING = dict(context=64, batch_size=32, lr=2e-3, warmup=50)
# the policies of the stream: (name, Engine policy, with the draft)
POLICY_RUNS = (("sequential", "sequential", False), ("static", "static", False), ("continuous", "continuous", False),
               ("continuous + speculative", "continuous", True))


def draft_model(target, num_layers, seed=0):
    """A draft for `target`: lesson 12's fast preset's widths (d_model 64, 4 query / 2 key-value heads, d_ff 128),
    `num_layers` layers, the target's vocabulary and context."""
    import torch

    from .gpt import GPT

    torch.manual_seed(seed)
    return GPT(target.vocab_size, 64, 4, num_layers, 128, max_len=target.max_len, positions="rope", num_kv_heads=2)


def cache_waste(lengths, max_len, block_sizes=(8, 16, 32)):
    """The fraction of cache memory reserved but never filled, for sequences of `lengths`: contiguous (each
    reserves the model's context, max_len) and paged (each holds whole blocks)."""
    return {"contiguous": contiguous_waste(lengths, max_len),
            "paged": {int(b): paged_waste(lengths, b) for b in block_sizes}}


def _timed(fn):
    start = time.process_time()
    out = fn()
    return out, time.process_time() - start


def speculation_sweep(target, drafts, prompts, ks, new_tokens, temperature=0.0, seed=0, repeats=1, progress=None):
    """For each draft (name -> model) and k: acceptance rate and speed-up of speculative decoding against the target
    alone, decoding `new_tokens` after each prompt. Every configuration and the target alone run `repeats` times,
    in rounds whose order rotates; a speed-up is the ratio of the median times. At temperature 0 it also checks that
    every configuration gives the target's tokens."""
    import statistics

    import torch

    def run(config):
        g = torch.Generator().manual_seed(seed)
        if config is None:
            return [plain_generate(target, p, new_tokens, temperature, g)[0] for p in prompts]
        name, k = config
        return [speculative_generate(target, drafts[name], p, new_tokens, k, temperature, g) for p in prompts]

    configs = [None] + [(name, k) for name in drafts for k in ks]
    times, outputs = {c: [] for c in configs}, {}
    for r in range(repeats):
        for config in configs[r % len(configs):] + configs[:r % len(configs)]:
            outputs[config], seconds = _timed(lambda config=config: run(config))
            times[config].append(seconds)
    plain = statistics.median(times[None])
    rows = []
    for config in configs[1:]:
        out = outputs[config]
        proposed = sum(s["proposed"] for _, s in out)
        passes = sum(s["target_passes"] for _, s in out)
        spec = statistics.median(times[config])
        rows.append(dict(draft=config[0], k=config[1], acceptance=sum(s["accepted"] for _, s in out) / max(proposed, 1),
                         tokens_per_pass=len(prompts) * new_tokens / passes, plain_seconds=plain,
                         speculative_seconds=spec, speedup=plain / spec,
                         same_tokens=(temperature != 0) or [o for o, _ in out] == outputs[None]))
        if progress is not None:
            progress(rows[-1])
    return rows


def _fresh(requests):
    """Copies of the requests, nothing generated yet."""
    out = []
    for r in requests:
        r = copy.copy(r)
        r.output, r.table, r.draft_table = [], [], []
        r.cached = r.draft_cached = r.preemptions = 0
        r.first_token = r.finished = None
        out.append(r)
    return out


def _engine(target, draft, policy, use_draft, sizes):
    blocks = sizes["pool_tokens"] // sizes["block_size"]
    batch = sizes["static_batch"] if policy == "static" else sizes["max_running"]
    return Engine(target, num_blocks=blocks, block_size=sizes["block_size"], max_running=batch, policy=policy,
                  draft=draft if use_draft else None, k=sizes["k"], temperature=0.0, seed=sizes["seed"])


def sequential_capacity(target, requests, sizes):
    """Requests a second that sequential decoding serves when it is never idle (all arriving at once)."""
    engine = _engine(target, None, "sequential", False, sizes)
    served = serve(engine, _fresh(requests), [0.0] * len(requests))
    return len(served) / max(r.finished for r in served)


def load_sweep(target, draft, requests, loads, capacity, sizes, progress=None):
    """Every policy of POLICY_RUNS on the same stream at every load (arrival rate = load x `capacity`), side by side:
    at each load the policies run one after the other, the order rotating from one load to the next. Returns
    {policy: [summary per load]} (request_stream.summarize, with "load", "rate" and the outputs' agreement)."""
    import torch

    for r in requests:
        if blocks_needed(len(r.prompt) + r.max_new_tokens + sizes["k"], sizes["block_size"]) * \
                sizes["block_size"] > sizes["pool_tokens"]:
            raise ValueError(f"request {r.id} does not fit in the pool of {sizes['pool_tokens']} positions")
    results = {name: [] for name, _, _ in POLICY_RUNS}
    for i, load in enumerate(loads):
        rate = load * capacity
        arrivals = poisson_arrivals(len(requests), rate, torch.Generator().manual_seed(sizes["seed"] + i))
        order = POLICY_RUNS[i % len(POLICY_RUNS):] + POLICY_RUNS[:i % len(POLICY_RUNS)]
        outputs = {}
        for name, policy, use_draft in order:
            engine = _engine(target, draft, policy, use_draft, sizes)
            served, seconds = _timed(lambda e=engine, a=arrivals: serve(e, _fresh(requests), a))
            figures = summarize(served, engine)
            figures.update(load=load, rate=rate, cpu_seconds=seconds)
            outputs[name] = {r.id: r.output for r in served}
            results[name].append(figures)
            if progress is not None:
                progress(name, load, figures)
        first = outputs[POLICY_RUNS[0][0]]
        for name in outputs:                      # greedy: every policy should give the same tokens
            results[name][-1]["same_tokens"] = sum(outputs[name][j] == first[j] for j in first) / len(first)
    return results


def measure_all(target, drafts, captions, sizes, eos_id=2, log=print):
    """Everything the lesson measures, on the tokenized `captions` (lists of ids): the waste of a contiguous cache,
    the speculation sweep (temperature 0 for every k; temperature 1 at the stream's k), the sequential capacity and
    the load sweep with the draft of the best speed-up at the stream's k. A dict for the reference file."""
    import torch

    from .request_stream import caption_requests

    captions = [c for c in captions if len(c) + 2 <= target.max_len]      # requests the model's context holds
    lengths = [len(c) + 2 for c in captions]                               # <bos> caption <eos>
    out = {"waste": cache_waste(lengths, target.max_len), "mean_length": sum(lengths) / len(lengths)}
    log(f"waste: contiguous {out['waste']['contiguous']:.3f}, paged {out['waste']['paged']}")
    g = torch.Generator().manual_seed(sizes["seed"])
    prompts = [r.prompt for r in caption_requests(captions, sizes["spec_prompts"], generator=g)]
    show = (lambda row: log(f"  draft {row['draft']}, k = {row['k']}: acceptance {row['acceptance']:.2f}, "
                            f"speed-up {row['speedup']:.2f}x"))
    out["speculation"] = speculation_sweep(target, drafts, prompts, sizes["ks"], sizes["spec_tokens"], 0.0,
                                           sizes["seed"], sizes["spec_repeats"], show)
    out["speculation_t1"] = speculation_sweep(target, drafts, prompts, (sizes["k"],), sizes["spec_tokens"], 1.0,
                                              sizes["seed"], sizes["spec_repeats"], show)
    at_k = [r for r in out["speculation"] if r["k"] == sizes["k"]]
    best = max(at_k, key=lambda r: r["speedup"])["draft"]
    out["stream_draft"] = best
    requests = caption_requests(captions, sizes["stream_requests"], generator=g)
    out["capacity"] = sequential_capacity(target, requests[:sizes["capacity_requests"]], sizes)
    log(f"sequential decoding serves {out['capacity']:.2f} requests a second (CPU time); the stream's draft: {best}")
    out["stream"] = load_sweep(target, drafts[best], requests, sizes["loads"], out["capacity"], sizes,
                               lambda name, load, f: log(f"  load {load:g}: {name}: {f['throughput']:.0f} tokens/s, "
                                                         f"TTFT p50 {f['ttft_p50']:.3f} s, p99 {f['ttft_p99']:.3f} s"))
    out["requests"] = [dict(prompt=len(r.prompt), new=r.max_new_tokens) for r in requests]
    return out


def headline(results):
    """The numbers docs/results.md quotes: the waste, each policy at the highest load (saturated) and at load 1
    (latency), the best single-stream speed-up, speculation's ratio in the stream."""
    stream = results["stream"]
    top = {name: runs[-1] for name, runs in stream.items()}
    one = {name: next(r for r in runs if r["load"] == 1.0) for name, runs in stream.items()}
    best = max(results["speculation"], key=lambda r: r["speedup"])
    out = {"contiguous_waste": results["waste"]["contiguous"], "paged_waste_16": results["waste"]["paged"][16],
           "best_speedup": best["speedup"], "best_speedup_k": best["k"], "best_speedup_draft": best["draft"],
           "best_speedup_acceptance": best["acceptance"]}
    for name, _, _ in POLICY_RUNS:
        key = name.replace(" + ", "_").replace(" ", "_")
        out[f"{key}_throughput"] = top[name]["throughput"]
        for f in ("ttft_p50", "ttft_p99", "tpot_p50", "tpot_p99"):
            out[f"{key}_{f}"] = one[name][f]
        out[f"{key}_peak_bytes"] = (top[name]["peak_paged_bytes"] if name.startswith("continuous")
                                    else top[name]["peak_contiguous_bytes"])
    out["continuous_over_sequential"] = out["continuous_throughput"] / out["sequential_throughput"]
    out["continuous_over_static"] = out["continuous_throughput"] / out["static_throughput"]
    out["speculative_over_continuous"] = out["continuous_speculative_throughput"] / out["continuous_throughput"]
    return out
