"""Lesson 15, exercise 4: the ring-buffer cache of a local layer.

    ring_buffer_append(cache_k, cache_v (B, h, W, d), slots (W,), k, v (B, h, 1, d), position)
        -> (cache_k, cache_v, slots): position's key and value written into slot position mod W, slots[that slot]
           set to position; nothing else changes (the arguments may be changed in place and returned)

The check gives the step the course's buffer after positions 0 .. p-1 and compares what it returns with the course's
(course_utils.local_attention.ring_buffer_append) for p = 0 .. 2W + 1 (the buffer fills, then wraps round twice),
names the mistake whose buffers the answer returns, tests that the buffer never holds more than W entries, then
decodes a local attention layer with the answer's own buffers, one position after the other, against the window
recomputed from scratch.
"""
import torch

from ...local_attention import attention_with_sink, empty_ring_buffer, ring_buffer_append, ring_buffer_mask
from ..core import Mistake, Mistakes, exercise, expect, expect_returns, randn, single_threaded, to_numpy
from ..errors import ExerciseError
from ..evaluation import Evaluation, call_naming
from ..mistakes import Said
from ..torch_errors import INDEX_BOUNDS


def wrong(kind):
    """The append with the mistake `kind` (on copies: the check's buffers are never touched)."""
    def ring_buffer_append(cache_k, cache_v, slots, k, v, position):
        cache_k, cache_v, slots = cache_k.clone(), cache_v.clone(), slots.clone()
        W = cache_k.size(2)
        if kind == "grows":
            return (torch.cat([cache_k, k], 2), torch.cat([cache_v, v], 2),
                    torch.cat([slots, slots.new_tensor([position])]))
        if kind == "shifts":                     # drop the oldest, append at the end: a queue, not a ring
            return (torch.cat([cache_k[:, :, 1:], k], 2), torch.cat([cache_v[:, :, 1:], v], 2),
                    torch.cat([slots[1:], slots.new_tensor([position])]))
        slot = {"next_slot": (position + 1) % W, "previous_slot": (position - 1) % W,
                "feature_axis": position % cache_k.size(3), "mod_w_minus_1": position % (W - 1), "slot_zero": 0,
                "no_wrap": min(position, W - 1)}.get(kind, position % W)
        cache_k[:, :, slot] = (v if kind == "k_from_v" else k)[:, :, 0]
        if kind != "value_not_written":
            cache_v[:, :, slot] = v[:, :, 0]
        if kind != "forgets_positions":
            slots[slot] = slot if kind == "slot_as_position" else position
        return cache_k, cache_v, slots
    return ring_buffer_append


M = Mistakes(
    Mistake("grows", "the buffer grew to {n} entries: a local layer's ring buffer keeps exactly W = {W} slots, "
            "and position t overwrites slot t mod W (the position W earlier, which no query can see any more)",
            shows=wrong("grows")),
    Mistake("shifts", "the buffer is shifted left and the new position written at the end: right as a window, but "
            "it copies all W entries at every step. A ring buffer moves nothing: position t goes into slot t mod W",
            hint="slot = position % W; cache_k[:, :, slot] = k[:, :, 0]", shows=wrong("shifts")),
    Mistake("previous_slot", "position t is written into slot (t - 1) mod W: it belongs in slot t mod W",
            shows=wrong("previous_slot")),
    Mistake("slot_out_of_range", "slot {index} is past the buffer's W = {W} slots: position t goes into slot t mod W, "
            "W the size of the slot axis (cache_k.size(2), not the feature axis)", hint="slot = position % "
            "cache_k.size(2)", shows=wrong("feature_axis")),
    Mistake("next_slot", "position t is written into slot (t + 1) mod W: it belongs in slot t mod W",
            shows=wrong("next_slot")),
    Mistake("mod_w_minus_1", "position t is written into slot t mod (W - 1): with W slots, it is t mod W",
            shows=wrong("mod_w_minus_1")),
    Mistake("slot_zero", "every position is written into slot 0: position t goes into slot t mod W",
            shows=wrong("slot_zero")),
    Mistake("no_wrap", "after W positions every new one overwrites the last slot: the buffer wraps round, position "
            "t goes into slot t mod W", shows=wrong("no_wrap")),
    Mistake("forgets_positions", "the slot table is not updated: slots[t mod W] must say that it now holds position "
            "t, or the mask of the next queries cannot tell which slots are in their window",
            shows=wrong("forgets_positions")),
    Mistake("slot_as_position", "the slot table records the slot's own index: it records the POSITION the slot now "
            "holds (t, not t mod W)", shows=wrong("slot_as_position")),
    Mistake("k_from_v", "the key slot receives the value: cache_k gets k, cache_v gets v", shows=wrong("k_from_v")),
    Mistake("value_not_written", "the value is not written: cache_v[:, :, t mod W] must get v too",
            shows=wrong("value_not_written")),
)
VALUE_KEYS = ["shifts", "next_slot", "previous_slot", "mod_w_minus_1", "slot_zero", "no_wrap", "forgets_positions",
              "slot_as_position", "k_from_v", "value_not_written"]


def _same(a, b):
    a, b = to_numpy(a), to_numpy(b)
    return a.shape == b.shape and bool((abs(a.astype(float) - b.astype(float)) < 1e-6).all())


def _in_place_index_copy(cache_k, cache_v, slots, k, v, position):
    slot = torch.tensor([position % cache_k.size(2)])
    cache_k.index_copy_(2, slot, k)
    cache_v.index_copy_(2, slot, v)
    slots.index_fill_(0, slot, position)
    return cache_k, cache_v, slots


def _new_tensors(cache_k, cache_v, slots, k, v, position):
    W = cache_k.size(2)
    at = (torch.arange(W) == position % W).view(1, 1, W, 1)
    return torch.where(at, k, cache_k), torch.where(at, v, cache_v), torch.where(at.view(W), position, slots)


@exercise("ring-buffer cache", name="ring_buffer_append", reference=ring_buffer_append, mistakes=M,
          may_change=("cache_k", "cache_v", "slots"), right=[_in_place_index_copy, _new_tensors])
@single_threaded
def ring_buffer(ev: Evaluation, answer):
    """answer(cache_k, cache_v, slots, k, v, position) -> (cache_k, cache_v, slots)."""
    B, h, W, d = 2, 3, 4, 5
    g = ev.rng(0)
    keys, values = randn(g, B, h, 2 * W + 2, d), randn(g, B, h, 2 * W + 2, d)
    state = empty_ring_buffer(B, h, W, d)
    crashes = [(INDEX_BOUNDS, lambda m: M.slot_out_of_range.at(index=m["index"], W=W)
                if int(m["size"]) == W and int(m["index"]) >= W else None)]
    steps = []                                          # (p, the answer's buffers, the course's, the mistakes')
    for p in range(2 * W + 2):                          # the course's buffer before p, the answer's step from it
        args = (*state, keys[:, :, p:p + 1], values[:, :, p:p + 1], p)
        expected = ring_buffer_append(*(t.clone() for t in state), *args[3:])
        try:
            got = expect_returns(call_naming(ev, crashes, answer, *args), expected, ("cache_k", "cache_v", "slots"))
        except ExerciseError:
            if any(not all(_same(a, b) for a, b in zip(g, e)) for _, g, e, _ in steps):
                break                                   # a step before went wrong already: that is told below
            raise
        n = tuple(getattr(got[0], "shape", (0, 0, 0)))[2:3]
        expect(not n or n[0] <= W, M.grows.at(n=n[0] if n else 0, W=W))
        steps.append((p, got, expected, M.variants(VALUE_KEYS, *(t.clone() for t in state), *args[3:])))
        state = expected
    # a mistake is named only if it gives the answer's buffers at EVERY step the answer took (at position 0 several
    # give the same buffers: writing the last slot and shifting an empty buffer left, for one)
    consistent = [M[key] for key in VALUE_KEYS
                  if all(M[key] in v and all(_same(a, b) for a, b in zip(g, v[M[key]])) for _, g, _, v in steps)]
    tests = 0
    for p, got, expected, variants in steps:
        for i, name in enumerate(("cache_k", "cache_v", "slots")):
            ev.expect_close(got[i], expected[i], f"the returned {name} after writing position {p} (W = {W})",
                            mistakes={m: variants[m][i] for m in consistent if m in variants})
        tests += 1
    _decodes_a_window(ev, answer, B, h, W, d)
    return tests + 1


def _decodes_a_window(ev: Evaluation, answer, B, h, W, d):
    """A local attention layer decoded with the answer's own buffers gives the window recomputed from scratch."""
    g = ev.rng(1)
    T = 3 * W
    q, k, v = randn(g, B, h, T, d), randn(g, B, h, T, d), randn(g, B, h, T, d)
    state = empty_ring_buffer(B, h, W, d)
    for t in range(T):
        state = tuple(torch.as_tensor(x) for x in ev.call(answer, *state, k[:, :, t:t + 1], v[:, :, t:t + 1], t))
        out, _ = attention_with_sink(q[:, :, t:t + 1], state[0], state[1], None,
                                     ring_buffer_mask(state[2], t, W)[None])
        start = max(0, t - W + 1)
        window, _ = attention_with_sink(q[:, :, t:t + 1], k[:, :, start:t + 1], v[:, :, start:t + 1])
        same = abs(to_numpy(out) - to_numpy(window)).max() < 1e-5
        expect(same, Said("values", f"decoding with your buffer, position {t} attends to other keys than the "
                                    f"window {start} .. {t} recomputed from scratch."))
