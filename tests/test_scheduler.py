"""The continuous-batching scheduler (course_utils.scheduler.schedule): on random states, every plan keeps the
rules of its docstring (no finished request runs, running requests feed cached .. length-1, the blocks fit,
arrival order, the newest is preempted first, max_running), checked here one by one rather than against a copy."""
import random

import pytest

from course_utils.scheduler import Seq, blocks_for, schedule


def _state(rng):
    bs = rng.choice([2, 4, 8])
    running = []
    for i in range(rng.randint(0, 6)):
        length = rng.randint(2, 30)
        cached = length - 1
        running.append(Seq(i, length, cached, blocks_for(cached, bs), rng.random() < 0.2))
    waiting = [Seq(100 + i, rng.randint(1, 25)) for i in range(rng.randint(0, 6))]
    return running, waiting, rng.randint(0, 12), bs, rng.randint(1, 8)


@pytest.mark.parametrize("seed", range(200))
def test_every_plan_keeps_the_rules(seed):
    running, waiting, free, bs, max_running = _state(random.Random(seed))
    retired, preempted, admitted, batch = schedule(running, waiting, free, bs, max_running)
    by = {s.id: s for s in running + waiting}
    fed = {i: (a, b) for i, a, b in batch}
    assert retired == [s.id for s in running if s.finished]
    assert not set(retired) & set(fed) and not set(preempted) & set(fed)
    live = [s.id for s in running if not s.finished]
    assert preempted == live[::-1][:len(preempted)], "the newest are preempted first"
    assert admitted == [s.id for s in waiting][:len(admitted)], "first come, first served"
    assert not (preempted and admitted), "a step that preempts admits nobody"
    assert set(fed) == (set(live) - set(preempted)) | set(admitted)
    for i, (a, b) in fed.items():
        assert (a, b) == ((0 if i in admitted else by[i].cached), by[i].length)
    assert len(fed) <= max(max_running, len(live))
    if admitted:
        assert len(fed) <= max_running
    freed = sum(by[i].blocks for i in retired + preempted)
    need = sum(blocks_for(by[i].length, bs) - (0 if i in admitted else by[i].blocks) for i in fed)
    assert need <= free + freed, "the plan fits in the free blocks"
    nxt = [s for s in waiting if s.id not in admitted]
    if nxt and not preempted and len(fed) < max_running:
        assert blocks_for(nxt[0].length, bs) > free + freed - need, "the first waiting request would have fit"
