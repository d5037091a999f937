"""Lesson 16, exercise 4: one step of continuous batching.

    schedule(running, waiting, free_blocks, block_size, max_running) -> (retired, preempted, admitted, batch)

running, waiting: lists of Seq(id, length, cached, blocks, finished) (admission order; queue order); returns ids
retired, ids preempted (the newest first), ids admitted, and the batch [(id, start, end)]: feed positions
start .. end-1. The check runs seven states: finished requests whose blocks make room for a newcomer, a request
crossing into a new block, a step that must preempt, a full batch (max_running), a queue whose first request does
not fit though a later one would, an empty engine filling up, nothing to do, a finished request while max_running
binds (its row is free for a newcomer). It compares the plan with the course's; where no
registered mistake gives it, it names the property the plan breaks: a finished request kept, a running request
fed other positions than cached .. length-1, more blocks than are free, an admission out of arrival order, more
requests than max_running, a preemption that is not of the newest request.
"""
from ... import scheduler as ref
from ..core import Mistake, Mistakes, exercise, expect, expect_returns, single_threaded
from ..evaluation import Evaluation
from ..mistakes import Said
from .outcomes import expect_outcome

Seq = ref.Seq


def _wrong(kind):
    """schedule with one typical mistake."""
    def schedule(running, waiting, free_blocks, block_size, max_running):
        def need(s):
            return ref.blocks_for(s.length, block_size)

        def extra(s):
            return 0 if kind == "decode_blocks" else max(0, need(s) - s.blocks)
        finished = [] if kind == "finished_kept" else [s for s in running if s.finished]
        free = free_blocks + (0 if kind == "retired_blocks" else sum(s.blocks for s in finished))
        keep = [s for s in running if s not in finished]
        preempted = []
        while sum(extra(s) for s in keep) > free:
            victim = keep.pop(0 if kind == "preempt_oldest" else -1)
            free += victim.blocks
            preempted.append(victim.id)
        free -= sum(extra(s) for s in keep)
        admitted = []
        for s in ([] if preempted and kind != "admit_after_preempt" else waiting):
            rows = len(running) if kind == "finished_counted" else len(keep)
            if (kind != "no_max" and rows + len(admitted) >= max_running) or \
                    (kind != "no_block_check" and need(s) > free):
                if kind == "skip_ahead":
                    continue
                break
            admitted.append(s)
            free -= need(s)
        starts = {"restarted": lambda s: 0, "whole": lambda s: 0}
        batch = [(s.id, starts.get(kind, lambda s: s.cached)(s),
                  s.length - s.cached if kind == "restarted" else s.length) for s in keep]
        batch += [(s.id, 0, s.length) for s in admitted]
        if kind == "packed":                            # positions run on from one request to the next
            at, packed = 0, []
            for i, start, end in batch:
                packed.append((i, at, at + end - start))
                at += end - start
            batch = packed
        return [s.id for s in finished], preempted, [s.id for s in admitted], batch
    return schedule


M = Mistakes(
    Mistake("finished_kept", "request {id} finished but is still in the batch: it keeps its blocks and a row of "
            "every pass; a finished request leaves at the next step", shows=_wrong("finished_kept")),
    Mistake("retired_blocks", "the blocks of the requests retired in this step were not counted as free: request "
            "{id} could have been admitted into them", shows=_wrong("retired_blocks")),
    Mistake("restarted", "positions restarted: request {id} has {cached} positions cached, so its next position is "
            "{cached}, not 0; each request feeds its own positions cached .. length-1", shows=_wrong("restarted")),
    Mistake("whole", "request {id} is fed its whole sequence again (positions 0 .. {end}) though {cached} of them "
            "are cached: a running request feeds only cached .. length-1", shows=_wrong("whole")),
    Mistake("packed", "the positions run on from one request to the next across the batch: every request's "
            "positions are its own (cached .. length-1), whatever else is in the batch", shows=_wrong("packed")),
    Mistake("no_block_check", "request {id} was admitted though the free blocks no longer hold its {need} block(s) "
            "(ceil({length} / block_size): a last block filled in part counts too): admit only while the free "
            "blocks hold all of them", shows=_wrong("no_block_check")),
    Mistake("decode_blocks", "the blocks the running requests need for their next position were not set aside: "
            "request {id} crosses into a new block this step ({need} blocks for {length} positions)",
            shows=_wrong("decode_blocks")),
    Mistake("preempt_oldest", "the OLDEST request ({id}) was preempted: preempt the most recently admitted one, "
            "the one that has done the least work", shows=_wrong("preempt_oldest")),
    Mistake("admit_after_preempt", "request {id} was admitted in a step that preempted: the preempted request goes "
            "back to the FRONT of the queue, so nobody overtakes it", shows=_wrong("admit_after_preempt")),
    Mistake("skip_ahead", "request {id} was admitted ahead of request {first}, which arrived first but did not fit: "
            "first come, first served; stop at the first request that does not fit", shows=_wrong("skip_ahead")),
    Mistake("finished_counted", "request {id} was not admitted though max_running = {max} leaves it a row: the "
            "finished request(s) {ids} were counted toward max_running, but they retire in this step and take no "
            "row of the batch. The requests that count are the ones still running plus those admitted so far",
            shows=_wrong("finished_counted")),
    Mistake("no_max", "{n} requests run in one batch, more than max_running = {max}", shows=_wrong("no_max")),
)
_BY_VALUES = [m.key for m in M]


def _cases():
    """(running, waiting, free_blocks, block_size, max_running), each showing some of the mistakes."""
    S = Seq
    return [
        # a finished request (3 blocks) makes room; request 3 crosses into a new block; 4 fits, 5 and 6 wait
        ([S(1, 9, 8, 3), S(2, 7, 6, 2, True), S(3, 13, 12, 3)], [S(4, 5), S(5, 3), S(6, 9)], 1, 4, 5),
        # the blocks lack: the newest running request is preempted, nobody is admitted
        ([S(7, 8, 7, 2), S(8, 9, 8, 2), S(9, 13, 12, 3)], [S(10, 3)], 1, 4, 8),
        # room for everyone but max_running
        ([S(11, 4, 3, 2)], [S(12, 2), S(13, 5), S(14, 3)], 20, 3, 3),
        # the first in the queue does not fit, a later one would
        ([S(15, 7, 6, 3)], [S(16, 11), S(17, 2)], 3, 3, 4),
        # an empty engine filling up, a preempted request (its tokens kept) at the front of the queue
        ([], [S(18, 10), S(19, 4), S(20, 6), S(21, 7)], 5, 4, 8),
        # nothing to do
        ([], [], 4, 4, 2),
        # a finished request while max_running binds: its row goes to the first in the queue, the second waits
        ([S(22, 5, 4, 2), S(23, 6, 6, 2, True)], [S(24, 2), S(25, 3)], 20, 4, 2),
    ]


def _canonical(plan):
    retired, preempted, admitted, batch = plan
    return ([int(i) for i in retired], [int(i) for i in preempted], [int(i) for i in admitted],
            [tuple(int(x) for x in entry) for entry in batch])


def _fields(running, waiting, free, bs, max_running):
    """The fields of each mistake's words for one state."""
    by = {s.id: s for s in running}
    fin = [s for s in running if s.finished]
    live = [s for s in running if not s.finished]
    cross = [s for s in live if ref.blocks_for(s.length, bs) > s.blocks]
    big = [s for s in waiting if ref.blocks_for(s.length, bs) > free]
    wanted = _canonical(ref.schedule(running, waiting, free, bs, max_running))
    left = [s for s in waiting if s.id not in wanted[2]]
    one = (live or running or waiting or [Seq(-1, 0)])[0]
    return {"finished_kept": dict(id=fin[0].id if fin else -1),
            "retired_blocks": dict(id=wanted[2][0] if wanted[2] else -1),
            "restarted": dict(id=one.id, cached=one.cached), "whole": dict(id=one.id, end=one.length - 1,
                                                                           cached=one.cached),
            "packed": {}, "no_block_check": dict(id=left[0].id if left else -1,
                                                  need=ref.blocks_for(left[0].length, bs) if left else 0,
                                                  length=left[0].length if left else 0),
            "decode_blocks": dict(id=(cross or [one])[0].id, need=ref.blocks_for((cross or [one])[0].length, bs),
                                  length=(cross or [one])[0].length),
            "preempt_oldest": dict(id=live[0].id if live else -1),
            "admit_after_preempt": dict(id=waiting[0].id if waiting else -1),
            "skip_ahead": dict(id=left[1].id if len(left) > 1 else -1, first=big[0].id if big else -1),
            "no_max": dict(n=len(live) + len(waiting), max=max_running),
            "finished_counted": dict(id=wanted[2][max(0, len(wanted[2]) - max(1, len(fin)))] if wanted[2] else -1,
                                     max=max_running, ids=[s.id for s in fin])}, by


def _probes(plan, running, waiting, free, bs, max_running):
    retired, preempted, admitted, batch = plan
    by = {s.id: s for s in list(running) + list(waiting)}
    fed = {i: (a, b) for i, a, b in batch}

    def finished_kept():
        kept = [s.id for s in running if s.finished and s.id in fed]
        return M.finished_kept.at(id=kept[0]) if kept else None

    def positions():
        for s in running:
            if s.id in fed and not s.finished and fed[s.id] != (s.cached, s.length):
                a, b = fed[s.id]
                return Said("positions", f"request {s.id} is fed positions {a} .. {b - 1}; it has {s.cached} cached "
                                         f"of its {s.length}: it feeds {s.cached} .. {s.length - 1}")
        return None

    def blocks():
        held = {s.id: s.blocks for s in running}
        released = sum(held[i] for i in list(retired) + list(preempted) if i in held)
        need = sum(max(0, ref.blocks_for(by[i].length, bs) - held.get(i, 0)) for i in fed if i in by)
        if need > free + released:
            return Said("blocks", f"the batch needs {need} new block(s) and only {free + released} are free: "
                                  "admit a request only when its blocks fit, and preempt when the running ones "
                                  "do not")
        return None

    def order():
        ids = [s.id for s in waiting]
        if list(admitted) != ids[:len(admitted)]:
            return Said("order", f"the admitted requests {list(admitted)} are not the first of the queue "
                                 f"{ids}: first come, first served")
        return None

    def too_many():
        n = len([i for i in fed])
        return M.no_max.at(n=n, max=max_running) if n > max_running else None
    return finished_kept, positions, blocks, order, too_many


@exercise("one step of continuous batching", name="schedule", reference=ref.schedule, mistakes=M, random=False)
@single_threaded
def schedule(ev: Evaluation, answer):
    """answer(running, waiting, free_blocks, block_size, max_running) -> (retired, preempted, admitted, batch)."""
    tests = 0
    for running, waiting, free, bs, max_running in _cases():
        want = ref.schedule(running, waiting, free, bs, max_running)
        got = expect_returns(ev.call(answer, list(running), list(waiting), free, bs, max_running), want,
                             ("retired", "preempted", "admitted", "batch"))
        expect(all(isinstance(x, (list, tuple)) for x in got),
               Said("not_array", "each of retired, preempted, admitted and batch should be a list"))
        fields, _ = _fields(running, waiting, free, bs, max_running)
        variants = {m.at(**fields[m.key]): _canonical(o)
                    for m, o in M.variants(_BY_VALUES, running, waiting, free, bs, max_running).items()}
        what = (f"the plan for {len(running)} running and {len(waiting)} waiting requests, {free} free blocks of "
                f"{bs}, max_running {max_running}")
        expect_outcome(_canonical(got), _canonical(want), what, variants,
                       probes=_probes(_canonical(got), running, waiting, free, bs, max_running),
                       shown=lambda p: f"retired {p[0]}, preempted {p[1]}, admitted {p[2]}, batch {p[3]}")
        tests += 1
    return tests
