"""Lesson 16, exercise 2: giving back a finished sequence's blocks.

    release(table, refs (num_blocks,) long, free (list of block ids)) -> (refs, free)

Each block of `table` loses one holder; a block whose count falls to 0 goes back on the free list; a block another
sequence still holds (a shared prefix) stays off it. The check builds pools where some of the table's blocks are
shared (2 or 3 holders) and some are not, with blocks already free and a table whose blocks are not in order, and
compares the counts and the free list (in any order) with the course's. Where no registered mistake matches, it
names what fails: a block freed while a sequence still holds it, a block that nobody holds left off the free list
(a leak), a count that does not fall by one, a block on the free list twice, a block lost from it.
"""
from collections import Counter

import torch

from ... import paged_cache as ref
from ..core import Mistake, Mistakes, exercise, expect, expect_returns, single_threaded
from ..evaluation import Evaluation
from ..mistakes import Said
from .outcomes import expect_outcome


def _wrong(kind):
    def release(table, refs, free):
        refs, newly = refs.clone(), []
        for block in table:
            if kind == "shared_skipped" and refs[block] > 1:
                continue                                # a shared block's count never decremented
            if kind == "zeroed":
                refs[block] = 0                         # the count set to 0, whoever else holds the block
            elif kind != "not_decremented":
                refs[block] -= 1
            if kind in ("always_freed", "zeroed"):
                freed = True
            elif kind == "not_decremented":
                freed = refs[block] == 1
            elif kind == "at_one":
                freed = refs[block] <= 1
            else:
                freed = kind != "never_freed" and refs[block] == 0
            if freed:
                newly.append(int(block))
        return refs, (newly if kind == "only_new" else list(free) + newly)   # only_new: the old free list lost
    return release


M = Mistakes(
    Mistake("always_freed", "block {block} went back to the free list though {n} other sequence(s) still hold it: "
            "a shared block is freed only when its count falls to 0, else another sequence's keys get overwritten",
            shows=_wrong("always_freed")),
    Mistake("zeroed", "the count of block {block} was set to 0 though another sequence still holds it: a finished "
            "sequence removes ONE holder (count - 1)", shows=_wrong("zeroed")),
    Mistake("at_one", "block {block} went back to the free list while its count is still 1: free a block when its "
            "count reaches 0 (after this sequence's holder is taken off)", shows=_wrong("at_one")),
    Mistake("never_freed", "blocks {blocks} have no holder left but are not on the free list: they are lost to the "
            "pool (a leak); a block whose count falls to 0 goes back on the free list",
            shows=_wrong("never_freed")),
    Mistake("not_decremented", "blocks {blocks} are back on the free list but their counts still say {count}: the "
            "count falls by one for every block of the table", shows=_wrong("not_decremented")),
    Mistake("shared_skipped", "the counts of blocks {blocks}, which other sequences share, did not fall: every "
            "block of the table loses ONE holder, shared or not", shows=_wrong("shared_skipped")),
    Mistake("only_new", "blocks {blocks}, free before, are no longer on the free list: the freed blocks are ADDED to "
            "the free list", shows=_wrong("only_new")),
)
_BY_VALUES = ["always_freed", "zeroed", "at_one", "never_freed", "not_decremented", "only_new", "shared_skipped"]


def _cases(g):
    """(table, refs, free): a pool of 12 blocks, the table's blocks in no order, some shared (counts 2 and 3)."""
    order = [int(b) for b in g.permutation(12)]
    out = []
    for shared, own, free_count in ((2, 3, 3), (1, 1, 2), (0, 2, 4), (3, 0, 1)):
        table = order[:shared + own]
        rng_order = [table[i] for i in g.permutation(len(table))] if own else table
        refs = torch.zeros(12, dtype=torch.long)
        refs[table] = 1
        for i, b in enumerate(table[:shared]):
            refs[b] = 2 + i % 2                               # held by one or two other sequences too
        others = order[shared + own:]
        free = others[:free_count]
        refs[others[free_count:]] = 1                         # other sequences' blocks
        out.append((rng_order, refs, free))
    return out


def _canonical(outcome):
    refs, free = outcome
    return (torch.as_tensor(refs).tolist(), sorted(int(b) for b in free))


def _probes(table, refs, free, got_refs, got_free):
    want_refs, want_free = ref.release(table, refs, free)
    count = Counter(int(b) for b in got_free)

    def freed_held():
        held = [b for b in count if want_refs[b] > 0]
        return M.always_freed.at(block=held[0], n=int(want_refs[held[0]])) if held else None

    def twice():
        again = [b for b, n in count.items() if n > 1]
        return Said("twice", f"block {again[0]} is on the free list {count[again[0]]} times: a block is given back "
                             "once, when its count falls to 0") if again else None

    def counts():
        wrong = [b for b in range(len(refs)) if int(got_refs[b]) != int(want_refs[b])]
        return Said("counts", f"the count of block {wrong[0]} is {int(got_refs[wrong[0]])}, it should be "
                              f"{int(want_refs[wrong[0]])}: each block of the table loses ONE holder, the others "
                              "keep their counts") if wrong else None

    def leaked():
        lost = [b for b in want_free if b not in count]
        return M.never_freed.at(blocks=lost) if lost else None
    return freed_held, twice, counts, leaked


def _by_set(table, refs, free):
    """A right answer written another way: the counts at once, the freed blocks found after."""
    refs = refs.clone()
    refs[torch.as_tensor(table, dtype=torch.long)] -= 1
    return refs, list(free) + [b for b in table if refs[b] == 0]


@exercise("giving back a finished sequence's blocks", name="release", reference=ref.release, mistakes=M,
          right=[_by_set], may_change=("refs", "free"))
@single_threaded
def release(ev: Evaluation, answer):
    """answer(table, refs, free) -> (refs, free)."""
    tests = 0
    for table, refs, free in _cases(ev.rng(0)):
        want = ref.release(table, refs, free)
        got = expect_returns(ev.call(answer, list(table), refs.clone(), list(free)), want, ("refs", "free"))
        expect(hasattr(got[0], "shape") and tuple(got[0].shape) == tuple(refs.shape),
               Said("shape", f"refs should come back as a tensor of {len(refs)} counts, got {type(got[0]).__name__}"))
        variants = {m: _canonical(o) for m, o in M.variants(_BY_VALUES, table, refs, free).items()}
        shared = [b for b in table if refs[b] > 1] or [-1]
        own = [b for b in table if refs[b] == 1]
        fields = {"always_freed": dict(block=shared[0], n=int(refs[shared[0]]) - 1), "zeroed": dict(block=shared[0]),
                  "at_one": dict(block=shared[0]), "never_freed": dict(blocks=own),
                  "not_decremented": dict(blocks=own, count=1), "only_new": dict(blocks=list(free)),
                  "shared_skipped": dict(blocks=[b for b in shared if b >= 0])}
        variants = {m.at(**fields[m.key]): o for m, o in variants.items()}
        expect_outcome(_canonical(got), _canonical(want), f"release of a table of {len(table)} blocks", variants,
                       probes=_probes(table, refs, free, got[0], got[1]))
        tests += 1
    return tests
