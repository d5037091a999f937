"""A small serving engine (lesson 16): lesson 12's GPT answering many requests, with a paged key/value cache,
under one of three policies, with or without speculative decoding.

    engine = Engine(model, num_blocks=64, block_size=16, max_running=16, policy="continuous")
    engine.add(Request(id=0, prompt=[1, 94, 119], max_new_tokens=12))
    while engine.busy:
        events = engine.step()          # one pass of the model (speculative: k draft passes, then one)

policy  "sequential"  one request at a time, to its end;
        "static"      up to `max_running` requests taken together when the engine is idle, run until the LAST of
                      them ends (a finished one stays in the batch, fed padding, as a padded batch computes it);
        "continuous"  scheduler.schedule at every step: finished requests leave, waiting ones join, prefill and
                      decode in one pass, preemption (recompute) when the blocks run out (Orca, vLLM).
draft   a smaller GPT of the same vocabulary: every running request gets k drafted tokens per step, verified by
        the target in the same pass as the step's prefills (speculative.speculative_accept).

Every policy runs the same pass of the model (serving_model.forward_paged) on the same paged cache, so that
they differ only in which requests each step runs. Generation is greedy at temperature 0 (the same tokens
whatever the policy) and sampled otherwise; a request generates exactly `max_new_tokens` tokens (no early stop
at <eos>: the work of a request is fixed by the stream, as in serving benchmarks).
"""
from collections import deque
from dataclasses import dataclass, field
from typing import List, Optional

import torch

from .paged_cache import PagedKVCache, blocks_needed
from .scheduler import Seq, schedule
from .serving_model import Chunk, forward_paged
from .speculative import check_same_vocabulary, probabilities, sample_from, speculative_tokens

__all__ = ["Request", "Engine", "POLICIES", "cache_for"]
POLICIES = ("sequential", "static", "continuous")


@dataclass
class Request:
    """One request: its prompt (ids) and how many tokens to generate; what happened to it."""
    id: int
    prompt: List[int]
    max_new_tokens: int
    arrival: float = 0.0
    output: List[int] = field(default_factory=list)
    cached: int = 0                     # positions of the target's cache that hold this request's keys/values
    table: List[int] = field(default_factory=list)
    draft_cached: int = 0
    draft_table: List[int] = field(default_factory=list)
    first_token: Optional[float] = None   # when its first token came out
    finished: Optional[float] = None      # when its last token came out
    preemptions: int = 0

    @property
    def tokens(self):
        return self.prompt + self.output

    @property
    def length(self):
        return len(self.prompt) + len(self.output)

    @property
    def done(self):
        return len(self.output) >= self.max_new_tokens


def cache_for(model, num_blocks, block_size):
    """A paged cache shaped for `model` (its layers, key/value heads, d_head, dtype)."""
    attn = model.layers[0].attn
    dtype = next(model.parameters()).dtype
    return PagedKVCache(model.num_layers, attn.num_kv_heads, attn.d_head, num_blocks, block_size, dtype=dtype)


class Engine:
    """See the module's docstring. `now` (a number) stamps the first and last tokens of the requests."""

    def __init__(self, model, num_blocks, block_size, max_running, policy="continuous", draft=None, k=4,
                 temperature=0.0, seed=0, trace=False):
        if policy not in POLICIES:
            raise ValueError(f"policy must be one of {POLICIES}, got {policy!r}")
        if draft is not None:
            check_same_vocabulary(model, draft)
            if policy != "continuous":
                raise ValueError("speculative decoding runs with the continuous policy here")
        self.model, self.draft, self.k, self.policy = model.eval(), draft, k, policy
        self.max_running = 1 if policy == "sequential" else int(max_running)
        self.cache = cache_for(model, num_blocks, block_size)
        self.draft_cache = cache_for(draft, num_blocks, block_size) if draft is not None else None
        self.temperature = temperature
        self.generator = torch.Generator().manual_seed(seed)
        self.sample = sample_from(self.generator)
        self.waiting, self.running, self.done = deque(), [], []
        self.steps, self.proposed, self.accepted, self.preemptions, self.padding_tokens = 0, 0, 0, 0, 0
        self.peak_running = 0               # the most requests in one step's batch
        self.occupancy = dict(filled=0, paged=0, contiguous=0)   # summed over the steps: slots filled, held
        self.trace = [] if trace else None

    # ---- requests in and out ------------------------------------------------------------------------
    def add(self, request):
        total = len(request.prompt) + request.max_new_tokens
        if total > self.model.max_len:
            raise ValueError(f"request {request.id} needs {total} positions (prompt {len(request.prompt)} + "
                             f"{request.max_new_tokens} new tokens): longer than the model's context, "
                             f"max_len={self.model.max_len}")
        need = blocks_needed(total + (self.k if self.draft is not None else 0), self.cache.block_size)
        if need > self.cache.num_blocks:
            raise ValueError(f"request {request.id} needs {need} blocks of {self.cache.block_size} positions: the "
                             f"cache has {self.cache.num_blocks} in all, it could never be served")
        if not request.prompt or request.max_new_tokens < 1:
            raise ValueError(f"request {request.id}: a prompt of at least one token and max_new_tokens >= 1")
        self.waiting.append(request)

    @property
    def busy(self):
        return bool(self.waiting or self.running)

    def _retire(self, request):
        request.table = self.cache.free_sequence(request.table)
        if self.draft_cache is not None:
            request.draft_table = self.draft_cache.free_sequence(request.draft_table)
        self.running.remove(request)
        self.done.append(request)

    def _preempt(self, request):
        self._retire(request)
        self.done.remove(request)
        request.cached = request.draft_cached = 0
        request.preemptions += 1
        self.preemptions += 1
        self.waiting.appendleft(request)          # back to the front: it recomputes its cache when admitted again

    # ---- one step -------------------------------------------------------------------------------------
    def stamp(self, now):
        """Note `now` as the time of the first token, and of the last, of the requests that just produced them."""
        for r in self.running:
            if r.output and r.first_token is None:
                r.first_token = now
            if r.done and r.finished is None:
                r.finished = now

    def step(self, now=None):
        """One pass of the model (with a draft: k draft passes and one target pass). Returns what happened:
        {"prefill": ids, "decode": ids, "retired": ids, "preempted": ids, "tokens": tokens produced}. `now`: the
        time the step ends, to stamp the requests with (else call `stamp` after the step, before the next)."""
        events = self._plan()
        produced = self._run_speculative(events) if self.draft is not None else self._run(events)
        self.peak_running = max(self.peak_running, len(self.running))
        filled = sum(r.cached for r in self.running)           # positions that hold keys and values
        self.occupancy["filled"] += filled
        self.occupancy["paged"] += self.cache.num_used * self.cache.block_size
        self.occupancy["contiguous"] += len(self.running) * self.model.max_len
        if now is not None:
            self.stamp(now)
        self.steps += 1
        events["tokens"] = produced
        if self.trace is not None:
            self.trace.append(dict(events, step=self.steps, waiting=[r.id for r in self.waiting],
                                   tables={r.id: list(r.table) for r in self.running},
                                   lengths={r.id: r.cached for r in self.running}))
        return events

    def _plan(self):
        if self.policy == "continuous":
            look = self.k if self.draft is not None else 0
            view = [Seq(r.id, r.length + (look if r.cached else 0), r.cached, len(r.table), r.done)
                    for r in self.running]
            waiting = [Seq(r.id, r.length, 0, 0) for r in self.waiting]
            retired, preempted, admitted, _ = schedule(view, waiting, self.cache.num_free, self.cache.block_size,
                                                       self.max_running)
            by_id = {r.id: r for r in self.running}
            for i in retired:
                self._retire(by_id[i])
            for i in preempted:
                self._preempt(by_id[i])
            for _ in admitted:
                self.running.append(self.waiting.popleft())
            return dict(prefill=admitted, decode=[r.id for r in self.running if r.id not in admitted],
                        retired=retired, preempted=preempted)
        admitted, retired = [], []
        if self.running and all(r.done for r in self.running):
            retired = [r.id for r in self.running]  # static and sequential: the whole batch ends together
            for r in list(self.running):
                self._retire(r)
        if not self.running:                        # ... and a new batch starts when the last one ended
            while self.waiting and len(self.running) < self.max_running:
                self.running.append(self.waiting.popleft())
                admitted.append(self.running[-1].id)
        return dict(prefill=admitted, decode=[r.id for r in self.running if r.id not in admitted], retired=retired,
                    preempted=[])

    def _chunk(self, r, cache, table_name, cached_name, extra=()):
        """Reserve r's slots for its tokens cached .. length-1 (+ extra), in `cache`; its Chunk."""
        start = getattr(r, cached_name)
        feed = r.tokens[start:] + list(extra)
        table, _ = cache.reserve(getattr(r, table_name), start, len(feed))
        setattr(r, table_name, table)
        return Chunk(feed, start, table)

    def _run(self, events):
        chunks, who = [], []
        for r in self.running:
            if r.done:                              # static: a finished request still fills its row (padding)
                if r.cached >= self.model.max_len:
                    continue
                table, _ = self.cache.reserve(r.table, r.cached, 1)
                r.table = table
                chunks.append(Chunk([0], r.cached, table))
                self.padding_tokens += 1
            else:
                chunks.append(self._chunk(r, self.cache, "table", "cached"))
            who.append(r)
        produced = 0
        for r, chunk, logits in zip(who, chunks, forward_paged(self.model, self.cache, chunks)):
            r.cached = chunk.start + len(chunk.tokens)
            if not r.done:
                r.output.append(self._pick(logits[-1]))
                produced += 1
        return produced

    def _run_speculative(self, events):
        """k draft passes for the running requests that decode, then ONE target pass: their k + 1 positions
        and the prefills of the admitted requests; then the accept/reject rule per request."""
        decoding = [r for r in self.running if 0 < r.cached == r.length - 1]
        ks = {r.id: min(self.k, r.max_new_tokens - len(r.output) - 1) for r in decoding}
        drafts, qs = {r.id: [] for r in decoding}, {r.id: [] for r in decoding}
        for j in range(max(ks.values(), default=0)):
            active = [r for r in decoding if ks[r.id] > j]
            chunks = [self._chunk(r, self.draft_cache, "draft_table", "draft_cached") if j == 0
                      else self._next_draft_chunk(r, drafts[r.id]) for r in active]
            for r, chunk, logits in zip(active, chunks, forward_paged(self.draft, self.draft_cache, chunks)):
                r.draft_cached = chunk.start + len(chunk.tokens)
                qs[r.id].append(probabilities(logits[-1], self.temperature))
                drafts[r.id].append(self.sample(qs[r.id][-1]))
        chunks = [self._chunk(r, self.cache, "table", "cached", drafts.get(r.id, ())) for r in self.running]
        produced = 0
        for r, logits in zip(list(self.running), forward_paged(self.model, self.cache, chunks)):
            n, kk = r.length, len(drafts.get(r.id, ()))
            p = probabilities(logits[-(kk + 1):], self.temperature)
            if kk:
                u = torch.rand(kk, generator=self.generator)
                new = speculative_tokens(p, torch.stack(qs[r.id]), torch.tensor(drafts[r.id]), u, self.sample)
                self.proposed, self.accepted = self.proposed + kk, self.accepted + len(new) - 1
            else:
                new = [self._pick(logits[-1])]
            r.cached = n + len(new) - 1                   # the accepted drafts' keys stay, the rejected go
            r.table = self.cache.truncate(r.table, r.cached)
            r.draft_cached = min(r.draft_cached, r.cached)
            r.draft_table = self.draft_cache.truncate(r.draft_table, r.draft_cached)
            new = new[:r.max_new_tokens - len(r.output)]
            r.output += new
            produced += len(new)
        return produced

    def _pick(self, logits):
        """The next token from (V,) logits: the argmax at temperature 0, else a draw from softmax(logits / T)."""
        if self.temperature == 0:
            return int(logits.argmax())
        return self.sample(probabilities(logits, self.temperature))

    def _next_draft_chunk(self, r, drafts):
        table, _ = self.draft_cache.reserve(r.draft_table, r.draft_cached, 1)
        r.draft_table = table
        return Chunk([drafts[-1]], r.draft_cached, table)

    # ---- what it held ---------------------------------------------------------------------------------
    def peak_cache_bytes(self):
        """The most bytes of cache blocks (target and draft) held at once."""
        peak = self.cache.memory_bytes(self.cache.peak_used)
        return peak + (self.draft_cache.memory_bytes(self.draft_cache.peak_used) if self.draft_cache else 0)
