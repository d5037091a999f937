"""Lesson 16, exercise 3: room for a sequence's next position, with copy-on-write.

    append_slot(table, length, block_size, refs, free) -> (table, slot, refs, free, copy)

A sequence holds positions 0 .. length-1 in the blocks of `table`; its next position, `length`, goes to block
table[length // block_size] at offset length % block_size. A new block (off the free list, its count set to 1) when
the last one is full or there is none; when the last block is shared with another sequence (count > 1) and not
full, a private copy first: a new block, copy = (old, new) for the caller to copy the keys and values, one holder
less on the old one (exercise 2's `release`), so that writing never changes another sequence's keys. Everything is
judged from what the answer RETURNS (the grader runs it in another process): the check applies the returned counts,
free list and copy to its own pool. Any free block may be taken: the blocks an answer takes are renamed to those
`free.pop()` gives before comparing.

The check runs five pools (blocks of 4 and 3 positions): a private last block with room, a full last block, an empty
sequence, a shared last block with room, a shared FULL last block (which stays shared). It compares the table, the
slot, the counts, the free list, then writes into the slot and reads back every sequence of the pool through its
table. Where no registered mistake matches, it names what breaks: another sequence's keys changed by the write, this
sequence's earlier keys lost, a block both held and free, a count that is not the number of tables listing the block,
a block more than the positions need, a slot that is not where the table puts position `length`.
"""
import copy as copying

import torch

from ... import paged_cache as ref
from ..core import Mistake, Mistakes, exercise, expect_returns, randn, single_threaded
from ..errors import ExerciseError
from ..evaluation import RAISED, Evaluation
from ..mistakes import Said
from .outcomes import expect_outcome


def _wrong(kind):
    """append_slot with one typical mistake."""
    def append_slot(table, length, block_size, refs, free):
        table, refs, free, copy, bs = list(table), refs.clone(), list(free), None, block_size
        last = table[-1] if table else None
        shared, full = last is not None and refs[last] > 1, length % bs == 0

        def take():
            block = free[-1] if kind == "still_free" else free.pop()
            refs[block] = 0 if kind == "count_not_set" else 1
            return block
        if kind == "copies_full" and shared:                     # the shared test first, full or not
            table[-1], copy = _copied(refs, free, last, take)
            if full:
                table.append(take())
        elif kind == "always_new" or (full and (kind != "never_new" or not table)):
            table.append(take())
        elif not full and (shared or kind == "copies_private"):
            if kind == "copy_without_data":                      # a new block, nothing copied into it
                refs, free = ref.release([last], refs, free)
                table[-1] = take()
            elif kind != "no_copy":
                table[-1], copy = _copied(refs, free, last, take, release=kind not in ("copy_not_released",
                                                                                       "old_zeroed"))
                if kind == "old_zeroed":
                    refs[last] = 0
                if kind == "copy_reversed":
                    copy = copy[::-1]
        if kind == "logical":
            slot = length
        elif kind == "unwrapped":                                # the offset not taken modulo the block size
            slot = table[length // bs] * bs + length
        elif kind == "offset_behind":                            # the offset one behind, inside the right block
            slot = table[length // bs] * bs + (length - 1) % bs
        elif kind == "always_new":
            slot = table[-1] * bs + length % bs
        else:
            slot = table[length // bs] * bs + length % bs
        return table, slot, refs, free, copy
    return append_slot


def _copied(refs, free, block, take, release=True):
    """(a new block, the copy (block, new)); `block` loses this sequence's hold (in refs and free, in place)."""
    new = take()
    if release:
        refs[:], free[:] = ref.release([block], refs, free)
    return new, (block, new)


def _shared_tested_first(table, length, block_size, refs, free):
    """append_slot that tests whether the last block is shared before whether there is one: it crashes on an empty
    table (a learner's answer, kept as the mistake `empty_table` shows)."""
    copy = None
    if refs[table[-1]] > 1 and length % block_size:
        new = free.pop()
        refs[new] = 1
        copy = (table[-1], new)
        refs[table[-1]] -= 1
        table[-1] = new
    elif length % block_size == 0:
        table.append(free.pop())
        refs[table[-1]] = 1
    return table, table[length // block_size] * block_size + length % block_size, refs, free, copy


def _by_index(table, length, block_size, refs, free):
    """A right answer written another way: the logical block first, then whether it exists and is shared; the FIRST
    free block taken; the counts and the free list changed in place."""
    i, offset = divmod(length, block_size)
    copy = None
    if i == len(table):
        table = table + [free.pop(0)]
        refs[table[-1]] = 1
    elif int(refs[table[i]]) != 1:
        private = free.pop(0)
        refs[private] = 1
        refs[table[i]] -= 1
        copy = (table[i], private)
        table = table[:i] + [private]
    return table, table[i] * block_size + offset, refs, free, copy


M = Mistakes(
    Mistake("slot_outside", "the slot {slot} is outside block table[{i}] = {block}, where position {length} goes: it "
            "lies in block {other}{whose}, so writing there overwrites keys that are not position {length}'s. "
            "Within a block the offset runs from 0 to block_size - 1 ({last} here): position {length} is at offset "
            "{offset}, slot {right}", shows=_wrong("unwrapped")),
    Mistake("slot", "the slot {slot} is not where the table puts position {length}: block table[{i}] = {block}, "
            "offset {offset}, i.e. slot {right}", shows=_wrong("offset_behind")),
    Mistake("no_copy", "the slot is in block {block}, which {n} other sequence(s) also hold: writing there changes "
            "their keys. A shared block that is written must be copied first (copy-on-write): take a new block, "
            "return copy = (old, new), give up this sequence's hold on the old one, and write into the new one",
            shows=_wrong("no_copy")),
    Mistake("copy_without_data", "positions {positions} of the sequence lost their keys: the new block that "
            "replaces the shared one must receive a COPY of its keys and values", hint="return copy = (old, new)",
            shows=_wrong("copy_without_data")),
    Mistake("copy_reversed", "the copy goes the wrong way: the shared block {block} received the new block's "
            "(empty) keys, and every sequence that holds it lost them. copy = (old, new): the old block's keys go "
            "INTO the new one", shows=_wrong("copy_reversed")),
    Mistake("copy_not_released", "block {block} still counts the sequence as a holder ({count} in all) though its "
            "table no longer lists it: release the old block after copying it, or it never returns to the pool",
            hint="refs, free = release([old], refs, free)", shows=_wrong("copy_not_released")),
    Mistake("old_zeroed", "the count of the shared block {block} fell to 0, though {n} other sequence(s) still "
            "hold it: giving it up takes ONE holder off (count - 1), as exercise 2's release does",
            hint="refs, free = release([old], refs, free)", shows=_wrong("old_zeroed")),
    Mistake("copies_private", "block {block} was copied though no other sequence holds it (count 1): write into it "
            "directly; only a SHARED block is copied", shows=_wrong("copies_private")),
    Mistake("copies_full", "the shared block {block} was copied though it is full: position {length} goes to a NEW "
            "block, and a full block is never written again, so it can stay shared", shows=_wrong("copies_full")),
    Mistake("always_new", "a new block for position {length} though the last block has room ({room} free "
            "slot(s)): a new block only when the last one is full", hint="length % block_size == 0",
            shows=_wrong("always_new")),
    Mistake("never_new", "position {length} needs a new block: the last block is full, and the slot after it "
            "belongs to another block", hint="if length % block_size == 0: table.append(...)",
            shows=_wrong("never_new")),
    Mistake("empty_table", "the sequence is empty (length {length}: its table lists no block) and reading its table "
            "failed: there is no last block to test here; a sequence with no block takes a new one first",
            hint="if not table or length % block_size == 0: take a new block", shows=_shared_tested_first),
    Mistake("still_free", "block {block} is in the table but still on the free list: the next sequence would be "
            "handed it too. Taking a block removes it from the free list", hint="block = free.pop()",
            shows=_wrong("still_free")),
    Mistake("count_not_set", "block {block} was taken but its count is {count}: a block that one table lists has "
            "count 1, or the next release of it fails", hint="refs[block] = 1", shows=_wrong("count_not_set")),
    Mistake("logical", "the slot returned is the position itself ({length}): the slot is where the table puts it, "
            "block table[length // block_size] * block_size + length % block_size", shows=_wrong("logical")),
)
# block size, the sequence's length and whether its last block is shared with a second sequence
CASES = [(4, 6, False), (4, 8, False), (3, 0, False), (4, 7, True), (3, 6, True)]
NAMES = ("table", "slot", "refs", "free", "copy")


def _pool(g, bs, length, shared):
    """A pool of 10 blocks (1 layer, 1 head, d = 2): the sequence, a second one that shares its blocks when `shared`
    (a forked prefix), a third one of its own; every slot holds a different random key."""
    cache = ref.PagedKVCache(1, 1, 2, num_blocks=10, block_size=bs)
    cache.free = [int(b) for b in g.permutation(10)]            # blocks handed out in a random order
    cache.k[:] = randn(g, *cache.k.shape)
    cache.v[:] = randn(g, *cache.v.shape)
    table = [cache.allocate() for _ in range(ref.blocks_needed(length, bs))]
    other = cache.fork(table) if shared else [cache.allocate()]
    third = [cache.allocate() for _ in range(2)]
    return cache, table, {"the second sequence": (other, length if shared else 2), "the third sequence": (third, 5)}


def _ints(x, what, n=None):
    """x as a list of ints (each in range(n) when n is given), or a message saying what came back."""
    try:
        values = torch.as_tensor(x).reshape(-1).tolist() if not isinstance(x, (list, tuple)) else list(x)
        values = [int(v) for v in values]
    except (TypeError, ValueError, RuntimeError):
        raise ExerciseError(f"{what} should be a list of block ids, got {type(x).__name__}", key="unchecked") from None
    if n is not None and any(not 0 <= v < n for v in values):
        raise ExerciseError(f"{what} holds {values}: block ids run from 0 to {n - 1}", key="unchecked")
    return values


def _canonical(result, free0, n, bs):
    """The answer's returns as plain ints, the blocks it took from the free list renamed to those `free.pop()` gives
    (free0[-1], free0[-2], ...), so that an answer may take any free block."""
    table, slot, refs, free, copy = result
    table, free = _ints(table, "the table", n), _ints(free, "the free list", n)
    refs = _ints(refs, "refs")
    if len(refs) != n:
        raise ExerciseError(f"refs should come back with a count for each of the {n} blocks, got {len(refs)}",
                            key="shape")
    copy = [] if copy is None or (hasattr(copy, "__len__") and len(copy) == 0) else _ints(copy, "copy", n)
    if len(copy) not in (0, 2):
        raise ExerciseError(f"copy should be None or a pair (old block, new block), got {copy}", key="unchecked")
    taken = [b for b in table + copy if b in free0]
    taken += sorted(b for b in free0 if b not in free and b not in taken)
    taken = list(dict.fromkeys(taken))
    to = [free0[-1 - i] for i in range(len(taken))]
    rename = dict(zip(taken, to))
    rename.update(zip(sorted(set(to) - set(taken)), sorted(set(taken) - set(to))))    # a bijection of the blocks
    r = [rename.get(b, b) for b in range(n)]
    new_refs = [0] * n
    for b in range(n):
        new_refs[r[b]] = refs[b]
    slot = int(slot)
    if 0 <= slot < n * bs:
        slot = r[slot // bs] * bs + slot % bs
    return [r[b] for b in table], slot, new_refs, [r[b] for b in free], tuple(r[b] for b in copy)


def _applied(before, result):
    """The pool after the answer: `before` with the returned counts and free list, and the copy made; (pool, the
    canonical returns)."""
    table, slot, refs, free, copy = _canonical(result, before.free, before.num_blocks, before.block_size)
    cache = copying.deepcopy(before)
    cache.refs, cache.free = torch.tensor(refs, dtype=torch.long), list(free)
    if copy:
        cache.copy_block(*copy)
    return cache, (table, slot, refs, sorted(free), copy)


def _read(cache, table, length):
    return cache.gather(0, table, length)[0].flatten().tolist() if length else []


def _outcome(cache, returns, others, length):
    """What an answer did to the pool: (table, slot, counts, free blocks, copy made, its keys read back, the
    others' keys read back after a write into the slot)."""
    table, slot = returns[0], returns[1]
    own = _read(cache, table, length) if ref.blocks_needed(length, cache.block_size) <= len(table) else None
    written = copying.deepcopy(cache)
    if 0 <= slot < cache.num_blocks * cache.block_size:
        written.write(0, torch.tensor([slot]), torch.full((1, 1, 2), 99.0), torch.full((1, 1, 2), 99.0))
    seen = [_read(written, t, n) for t, n in others.values()]
    return table, slot, returns[2], returns[3], own, seen


def _probes(got, before, table0, length, others):
    table, slot, refs, free, own, seen = got
    bs = before.block_size

    def changed_others():
        for (t, n), keys in zip(others.values(), seen):
            if keys != _read(before, t, n):
                block = slot // bs
                if table0 and block == table0[-1] and block in table and int(before.refs[block]) > 1:
                    return M.no_copy.at(block=block, n=int(before.refs[block]) - 1)
                return misplaced() or Said("others_changed", f"{list(others)[0]}'s keys changed: a block that other "
                                                             "sequences hold was overwritten")
        return None

    def lost():
        if own is not None and own != _read(before, table0, length):
            return M.copy_without_data.at(positions=f"{(length // bs) * bs} .. {length - 1}")
        return None

    def held_and_free():
        both = [b for b in table if b in free]
        return M.still_free.at(block=both[0]) if both else None

    def counts():
        listed = [0] * before.num_blocks
        for t in [table] + [t for t, _ in others.values()]:
            for b in t:
                listed[b] += 1
        high = [b for b in range(before.num_blocks) if refs[b] > listed[b]]
        if high:
            return M.copy_not_released.at(block=high[0], count=refs[high[0]])
        low = [b for b in range(before.num_blocks) if refs[b] < listed[b]]
        if not low:
            return None
        if low[0] in before.free:
            return M.count_not_set.at(block=low[0], count=refs[low[0]])
        return Said("counts", f"the count of block {low[0]} is {refs[low[0]]}, but {listed[low[0]]} table(s) list "
                              "it: a block's count is the number of tables that hold it")

    def too_many():
        need = ref.blocks_needed(length + 1, bs)
        return M.always_new.at(length=length, room=bs - length % bs) if len(table) > need else None

    def misplaced():
        if len(table) > length // bs and slot != table[length // bs] * bs + length % bs:
            i, offset = length // bs, length % bs
            right = table[i] * bs + offset
            if slot // bs != table[i]:
                holders = [name for name, (t, _) in others.items() if slot // bs in t]
                whose = (f", which {holders[0]} holds" if holders else
                         ", which this sequence's table does not list" if slot // bs not in table else "")
                return M.slot_outside.at(slot=slot, i=i, block=table[i], length=length, other=slot // bs,
                                         whose=whose, last=bs - 1, offset=offset, right=right)
            return M.slot.at(slot=slot, length=length, i=i, block=table[i], offset=offset, right=right)
        return None
    return changed_others, lost, held_and_free, counts, too_many, misplaced


def _fields(before, table, length, bs):
    last, new = (table[-1] if table else -1), before.free[-1]
    return {"no_copy": dict(block=last, n=int(before.refs[last]) - 1 if table else 0),
            "copy_without_data": dict(positions=f"{(length // bs) * bs} .. {length - 1}"),
            "copy_reversed": dict(block=last),
            "copy_not_released": dict(block=last, count=int(before.refs[last]) if table else 0),
            "old_zeroed": dict(block=last, n=int(before.refs[last]) - 1 if table else 0),
            "copies_private": dict(block=last), "copies_full": dict(block=last, length=length),
            "always_new": dict(length=length, room=bs - length % bs), "never_new": dict(length=length),
            "empty_table": dict(length=length),
            "still_free": dict(block=new), "count_not_set": dict(block=new, count=0), "logical": dict(length=length)}


def _none_empty(result):
    """`result` with None (no copy) as an empty tuple, which the comparisons of values can handle."""
    return tuple(() if x is None else x for x in result) if isinstance(result, (tuple, list)) else result


def _called(ev, answer, table, length, bs, before):
    """ev.call(answer, ...), a Python IndexError (a list read past its end) named where the pool singles its cause
    out: an empty table (no block to read), or a full last block (the slot read from a block never added)."""
    try:
        return ev.call(answer, list(table), length, bs, before.refs.clone(), list(before.free))
    except ExerciseError as error:
        text = str(error)
        if not text.startswith(RAISED) or "IndexError: list index out of range" not in text:
            raise
        if not table:
            symptom = M.empty_table.at(length=length)
        elif length % bs == 0:
            symptom = M.never_new.at(length=length)
        else:
            raise
        raised = text[len(RAISED):].partition("\n")[0]
        raise ExerciseError(f"{symptom.says} (Python said: {raised[:200]})", key=symptom.key,
                            hint=symptom.hint) from None


def _run(fn, before, table, length, others):
    """The outcome of `fn` (the reference or a mistake) on a copy of the pool."""
    result = fn(list(table), length, before.block_size, before.refs.clone(), list(before.free))
    cache, returns = _applied(before, result)
    return _outcome(cache, returns, others, length)


@exercise("room for the next position, with copy-on-write", name="append_slot", reference=ref.append_slot,
          mistakes=M, right=[_by_index], may_change=("table", "refs", "free"))
@single_threaded
def append_slot(ev: Evaluation, answer):
    """answer(table, length, block_size, refs, free) -> (table, slot, refs, free, copy)."""
    tests = 0
    for seed, (bs, length, shared) in enumerate(CASES):
        before, table, others = _pool(ev.rng(seed), bs, length, shared)
        expected = ref.append_slot(list(table), length, bs, before.refs.clone(), list(before.free))
        want = _run(ref.append_slot, before, table, length, others)
        result = _called(ev, answer, table, length, bs, before)
        expect_returns(_none_empty(result), _none_empty(expected), NAMES)     # (None compares with nothing)
        result = tuple(result)
        cache, returns = _applied(before, result)
        got = _outcome(cache, returns, others, length)
        variants = {}
        fields = _fields(before, table, length, bs)
        for m in M:
            try:
                variants[m.at(**fields[m.key])] = _run(m.shows, before, table, length, others)
            except Exception:  # noqa: BLE001 - a mistake that cannot happen on this pool
                continue
        what = (f"append_slot(table, {length}, {bs}, refs, free)"
                + (", the last block shared" if shared and length % bs else ""))
        expect_outcome(got, want, what, variants, probes=_probes(got, before, table, length, others),
                       shown=lambda o: f"table {o[0]}, slot {o[1]}, counts {o[2]}, free {o[3]}")
        tests += 1
    return tests
