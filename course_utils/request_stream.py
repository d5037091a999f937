"""A stream of requests and how a server is measured (lesson 16): Poisson arrivals, prompts and lengths drawn from
captions, and the figures serving engines are compared by.

    arrivals = poisson_arrivals(100, rate=4.0, generator=g)     # seconds: a Poisson process, 4 a second
    requests = caption_requests(captions, 100, generator=g)    # <bos> + a caption's first words; the rest: its length
    served = serve(engine, requests, arrivals)                  # the engine runs the stream on its clock
    figures = summarize(served, engine)                         # throughput, TTFT and TPOT at p50 / p99, memory

The clock: the engine's own time, the CPU time its steps take (`time.process_time`, one torch thread), and
nothing else; requests arrive on that clock. While it has nothing to do the clock jumps to the next arrival. So
the other jobs of a shared machine do not stretch the figures (they would stretch a wall clock), and every
scheduler is timed by the work it does. A real server's clock is the wall clock; with one thread and an idle
machine the two agree.

Time to first token (TTFT): from a request's arrival to its first token (queueing and prefill). Time per output
token (TPOT): the time between its first and its last token, over the tokens after the first. Throughput:
tokens generated per second from the first arrival to the last token. A request's work is fixed by the stream:
it generates exactly its number of tokens (the rest of its caption), whatever the model says (no stop at <eos>).
"""
import math
import time

import numpy as np
import torch

from .serving_engine import Request

__all__ = ["poisson_arrivals", "caption_requests", "serve", "summarize", "percentile", "contiguous_waste",
           "paged_waste"]


def poisson_arrivals(n, rate, generator=None):
    """(n,) arrival times of a Poisson process of `rate` requests per second: exponential gaps of mean 1/rate."""
    if rate <= 0:
        raise ValueError(f"the arrival rate must be > 0 requests per second, got {rate}")
    gaps = torch.empty(n, dtype=torch.float64).exponential_(1.0, generator=generator) / rate
    return torch.cumsum(gaps, 0).tolist()


def caption_requests(captions, n, generator=None, bos_id=1, eos_id=2, prompt_words=(2, 6)):
    """n requests from tokenized `captions` (lists of ids, no <bos>/<eos>), drawn at random with replacement:
    the prompt is <bos> and the caption's first tokens (between prompt_words[0] and [1], and never the whole
    caption), the request asks for the rest of the caption and its <eos>: len(caption) - m + 1 tokens."""
    captions = [c for c in captions if len(c) > prompt_words[0]]
    if not captions:
        raise ValueError(f"no caption longer than {prompt_words[0]} tokens")
    pick = torch.randint(len(captions), (n,), generator=generator).tolist()
    requests = []
    for i, c in enumerate(pick):
        caption = captions[c]
        high = min(prompt_words[1], len(caption) - 1)
        m = int(torch.randint(prompt_words[0], high + 1, (1,), generator=generator))
        requests.append(Request(id=i, prompt=[bos_id] + list(caption[:m]), max_new_tokens=len(caption) - m + 1))
    return requests


def serve(engine, requests, arrivals, clock="cpu", progress=None):
    """Run `requests` arriving at `arrivals` (seconds) through `engine` on its clock ("cpu": the CPU time of its
    steps; "wall": the wall clock's time of its steps). Returns the requests, stamped (first token, finished)."""
    timer = time.process_time if clock == "cpu" else time.perf_counter
    order = sorted(range(len(requests)), key=lambda i: arrivals[i])
    now, i = 0.0, 0
    for j in order:
        requests[j].arrival = float(arrivals[j])
    while i < len(order) or engine.busy:
        while i < len(order) and requests[order[i]].arrival <= now:
            engine.add(requests[order[i]])
            i += 1
        if not engine.busy:
            now = requests[order[i]].arrival          # idle: the clock jumps to the next arrival
            continue
        start = timer()
        engine.step()
        now += timer() - start
        engine.stamp(now)
        if progress is not None:
            progress(len(engine.done), now)
    return requests


def percentile(values, q):
    return float(np.percentile(np.asarray(values, dtype=float), q)) if len(values) else math.nan


def summarize(requests, engine):
    """The figures of one served stream (seconds, tokens per second, bytes)."""
    ttft = [r.first_token - r.arrival for r in requests]
    tpot = [(r.finished - r.first_token) / (len(r.output) - 1) for r in requests if len(r.output) > 1]
    latency = [(r.finished - r.arrival) / len(r.output) for r in requests]
    tokens = sum(len(r.output) for r in requests)
    span = max(r.finished for r in requests) - min(r.arrival for r in requests)
    per_token = engine.cache.bytes_per_block // engine.cache.block_size
    if engine.draft_cache is not None:
        per_token += engine.draft_cache.bytes_per_block // engine.draft_cache.block_size
    occupancy = engine.occupancy
    out = dict(requests=len(requests), tokens=tokens, seconds=span, throughput=tokens / span,
               ttft_p50=percentile(ttft, 50), ttft_p99=percentile(ttft, 99), tpot_p50=percentile(tpot, 50),
               tpot_p99=percentile(tpot, 99), latency_per_token_p50=percentile(latency, 50),
               latency_per_token_p99=percentile(latency, 99), steps=engine.steps,
               peak_batch=engine.peak_running, preemptions=engine.preemptions,
               padding_tokens=engine.padding_tokens,
               peak_paged_bytes=engine.peak_cache_bytes(),
               peak_contiguous_bytes=engine.peak_running * engine.model.max_len * per_token,
               paged_unused=1 - occupancy["filled"] / max(occupancy["paged"], 1),
               contiguous_unused=1 - occupancy["filled"] / max(occupancy["contiguous"], 1))
    if engine.draft is not None:
        out.update(proposed=engine.proposed, accepted=engine.accepted,
                   acceptance=engine.accepted / max(engine.proposed, 1))
    return out


def contiguous_waste(lengths, reserve):
    """The fraction of a contiguous cache reserved but never filled: each sequence reserves `reserve` positions
    (a number: the model's context; or a list, one per sequence) and fills its length."""
    lengths = np.asarray(lengths, dtype=float)
    reserve = np.broadcast_to(np.asarray(reserve, dtype=float), lengths.shape)
    if np.any(lengths > reserve):
        raise ValueError("a sequence is longer than the positions reserved for it")
    return float(1 - lengths.sum() / reserve.sum())


def paged_waste(lengths, block_size):
    """The fraction of a paged cache's blocks left unfilled: each sequence holds ceil(length / block_size) blocks."""
    lengths = np.asarray(lengths, dtype=float)
    held = np.ceil(lengths / block_size) * block_size
    return float(1 - lengths.sum() / held.sum())
