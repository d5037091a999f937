"""Continuous batching (lesson 16): the scheduler of Orca (Yu et al., OSDI 2022) as vLLM runs it with a paged cache,
deciding at EVERY decoding step which requests run, so that a request joins the batch as soon as it arrives
and leaves it as soon as it ends.

    retired, preempted, admitted, batch = schedule(running, waiting, free_blocks, block_size, max_running)

A request, as the scheduler sees it (`Seq`): its id, its `length` (prompt + tokens generated so far), the
positions `cached` (whose keys and values are in the cache), the `blocks` it holds, whether it `finished`.
One step:
1. RETIRE the finished requests: they leave the batch, and their blocks are free for this very step;
2. every running request writes the key and value of one more position (length - 1), so it needs
   ceil(length / block_size) blocks: while the free blocks do not cover what the running requests need, PREEMPT
   the most recently admitted one (its blocks are freed; it goes back to the front of the queue and will
   RECOMPUTE its cache from its tokens, which it keeps);
3. ADMIT from the queue, in order (first come, first served; the preempted ones at its front), while the batch has
   fewer than `max_running` requests and the free blocks hold the first waiting request's ceil(length /
   block_size) blocks; stop at the first that does not fit. A step that preempted admits nobody (the queue's
   first request is one that did not fit);
4. the BATCH: every running request feeds its positions cached .. length-1 (one position: decode), every admitted
   one its positions 0 .. length-1 (its prompt, or prompt and tokens for a preempted one: prefill); prefill and
   decode go in ONE pass of the model (serving_model.forward_paged).
"""
from dataclasses import dataclass

__all__ = ["Seq", "schedule", "blocks_for"]


@dataclass(frozen=True)
class Seq:
    """What the scheduler knows of a request (see the module's docstring)."""
    id: int
    length: int            # tokens: prompt + generated so far
    cached: int = 0        # positions whose keys and values are in the cache (0: new, or preempted)
    blocks: int = 0        # blocks it holds
    finished: bool = False


def blocks_for(length, block_size):
    """Blocks that hold `length` positions: ceil(length / block_size)."""
    return -(-length // block_size)


def schedule(running, waiting, free_blocks, block_size, max_running):
    """One iteration of continuous batching: running, waiting lists of Seq (admission order; queue order).
    Returns (retired ids, preempted ids (newest first), admitted ids, batch [(id, start, end)])."""
    def extra(s):                                          # blocks s lacks to write position length - 1
        return max(0, blocks_for(s.length, block_size) - s.blocks)

    retired = [s.id for s in running if s.finished]
    free = free_blocks + sum(s.blocks for s in running if s.finished)
    keep = [s for s in running if not s.finished]
    preempted = []
    while sum(extra(s) for s in keep) > free:              # not enough: the newest request gives its blocks back
        victim = keep.pop()
        free += victim.blocks
        preempted.append(victim.id)
    free -= sum(extra(s) for s in keep)
    admitted = []
    for s in ([] if preempted else waiting):
        if len(keep) + len(admitted) >= max_running or blocks_for(s.length, block_size) > free:
            break                                          # first come, first served: nobody overtakes
        admitted.append(s)
        free -= blocks_for(s.length, block_size)
    batch = [(s.id, s.cached, s.length) for s in keep] + [(s.id, 0, s.length) for s in admitted]
    return retired, preempted, [s.id for s in admitted], batch
