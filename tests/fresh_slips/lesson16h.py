"""Typical learner answers for lesson 16 (serving attention), written from the lesson's text.

Exercises (the `exercise` key): paged_attention, release, append_slot, schedule, speculative_accept.

Every answer is what a learner would hand to the lesson's check:
  paged_attention     a function paged_attention(q (B, h, d), k_cache, v_cache (num_blocks, block_size, h, d),
                      block_tables (B, max_blocks), lengths (B,)) -> (B, h, d): softmax(q kᵀ / √d) v over positions
                      0 .. lengths[b] - 1 of sequence b, read from slot table[t // B] * B + t % B
  release             a function release(table, refs, free) -> (refs, free): one holder less for each block of the
                      table, the blocks whose count reaches 0 added to the free list
  append_slot         a function append_slot(table, length, block_size, refs, free) -> (table, slot, refs, free,
                      copy): a new block (free.pop(), count 1) when the last one is full or there is none; a private
                      copy of a shared last block (count > 1) with room: a new block, copy = (old, new), release
                      the old one; the slot table[length // B] * B + length % B
  schedule            a function schedule(running, waiting, free_blocks, block_size, max_running) -> (retired,
                      preempted, admitted, batch): retire, preempt the newest while the blocks do not cover the
                      running requests' next position, admit in order (none after a preemption), the batch
                      [(id, start, end)]: running from `cached`, admitted from 0
  speculative_accept  a function speculative_accept(p (k+1, V), q (k, V), draft (k,), u (k,)) -> (accepted, dist):
                      accept x_i while u_i < min(1, p_i(x_i) / q_i(x_i)); the residual norm(max(0, p_i - q_i)) at
                      the first rejection, p_(k+1) (the last row of p) when every draft is accepted

SLIPS holds answers with exactly one typical mistake each (marked `# slip:`), CORRECT holds right answers
written differently from the reference solution.
"""
import math

import torch
import torch.nn.functional as F

from course_utils.paged_cache import release as course_release


# ================================================================================================
# Exercise 1: paged_attention
# ================================================================================================
def _gather(k_cache, v_cache, block_tables):
    """(k, v) (B, T, h, d) and the positions t (T,) of every slot the tables name."""
    bs = k_cache.size(1)
    t = torch.arange(block_tables.size(1) * bs)
    blocks = block_tables.clamp(min=0)[:, t // bs]
    return k_cache[blocks, t % bs], v_cache[blocks, t % bs], t


def pa_no_length_mask(q, k_cache, v_cache, block_tables, lengths):
    k, v, t = _gather(k_cache, v_cache, block_tables)
    scores = torch.einsum("bhd,bthd->bht", q, k) / math.sqrt(q.size(-1))   # slip: every slot the table names, no mask
    return torch.einsum("bht,bthd->bhd", scores.softmax(-1), v)


def pa_mask_greater(q, k_cache, v_cache, block_tables, lengths):
    k, v, t = _gather(k_cache, v_cache, block_tables)
    scores = torch.einsum("bhd,bthd->bht", q, k) / math.sqrt(q.size(-1))
    scores = scores.masked_fill(t > lengths[:, None, None], float("-inf"))   # slip: > instead of >=: one slot too many
    return torch.einsum("bht,bthd->bhd", scores.softmax(-1), v)


def pa_no_scale(q, k_cache, v_cache, block_tables, lengths):
    k, v, t = _gather(k_cache, v_cache, block_tables)
    scores = torch.einsum("bhd,bthd->bht", q, k)   # slip: not divided by √d
    scores = scores.masked_fill(t >= lengths[:, None, None], float("-inf"))
    return torch.einsum("bht,bthd->bhd", scores.softmax(-1), v)


def pa_flat_slot_without_modulo(q, k_cache, v_cache, block_tables, lengths):
    nb, bs, h, d = k_cache.shape
    t = torch.arange(block_tables.size(1) * bs)
    slots = block_tables.clamp(min=0)[:, t // bs] * bs + t // bs   # slip: the offset written t // bs, not t % bs
    k = k_cache.reshape(nb * bs, h, d)[slots]
    v = v_cache.reshape(nb * bs, h, d)[slots]
    scores = torch.einsum("bhd,bthd->bht", q, k) / math.sqrt(d)
    scores = scores.masked_fill(t >= lengths[:, None, None], float("-inf"))
    return torch.einsum("bht,bthd->bhd", scores.softmax(-1), v)


def pa_softmax_over_heads(q, k_cache, v_cache, block_tables, lengths):
    k, v, t = _gather(k_cache, v_cache, block_tables)
    scores = torch.einsum("bhd,bthd->bht", q, k) / math.sqrt(q.size(-1))
    scores = scores.masked_fill(t >= lengths[:, None, None], -1e9)
    return torch.einsum("bht,bthd->bhd", scores.softmax(1), v)   # slip: the softmax over the heads axis


def pa_excludes_newest(q, k_cache, v_cache, block_tables, lengths):
    k, v, t = _gather(k_cache, v_cache, block_tables)
    scores = torch.einsum("bhd,bthd->bht", q, k) / math.sqrt(q.size(-1))
    scores = scores.masked_fill(t >= (lengths - 1)[:, None, None], float("-inf"))   # slip: lengths taken as the past only
    return torch.einsum("bht,bthd->bhd", scores.softmax(-1), v)


def pa_loop_over_sequences(q, k_cache, v_cache, block_tables, lengths):
    nb, bs, h, d = k_cache.shape
    out = []
    for b in range(q.size(0)):
        n = int(lengths[b])
        pos = torch.arange(n)
        slots = block_tables[b, pos // bs] * bs + pos % bs
        k = k_cache.reshape(-1, h, d)[slots].transpose(0, 1)          # (h, n, d)
        v = v_cache.reshape(-1, h, d)[slots].transpose(0, 1)
        w = (k @ q[b][:, :, None]).squeeze(-1) / d ** 0.5             # (h, n)
        out.append((w.softmax(-1)[:, None, :] @ v).squeeze(1))
    return torch.stack(out)


def pa_sdpa_with_mask(q, k_cache, v_cache, block_tables, lengths):
    k, v, t = _gather(k_cache, v_cache, block_tables)
    keep = (t[None, :] < lengths[:, None])[:, None, None, :]           # (B, 1, 1, T)
    out = F.scaled_dot_product_attention(q[:, :, None, :], k.transpose(1, 2), v.transpose(1, 2), attn_mask=keep)
    return out[:, :, 0]


# ================================================================================================
# Exercise 2: release
# ================================================================================================
def rl_frees_every_block(table, refs, free):
    for block in table:
        refs[block] -= 1
        free.append(block)   # slip: every block back on the free list, even one another sequence still holds
    return refs, free


def rl_frees_at_one_after_decrement(table, refs, free):
    for block in table:
        refs[block] -= 1
        if refs[block] <= 1:   # slip: tests the count as it was before this sequence let go
            free.append(block)
    return refs, free


def rl_new_list(table, refs, free):
    freed = []
    for block in table:
        refs[block] -= 1
        if refs[block] == 0:
            freed.append(block)
    return refs, freed   # slip: returns only the blocks freed now; the free list's old blocks are lost


def rl_shared_skipped(table, refs, free):
    for block in table:
        if refs[block] > 1:
            continue   # slip: a shared block keeps its count: this sequence's holder is never taken off
        refs[block] = 0
        free.append(block)
    return refs, free


def rl_sets_zero(table, refs, free):
    for block in table:
        refs[block] = 0   # slip: the count set to 0 instead of one less
        free.append(block)
    return refs, free


def rl_check_before_decrement(table, refs, free):
    for block in table:
        if refs[block] == 1:
            free.append(int(block))
        refs[block] -= 1
    return refs, free


def rl_vectorised(table, refs, free):
    refs = refs.clone()
    index = torch.as_tensor(table, dtype=torch.long)
    refs.index_add_(0, index, -torch.ones_like(index))
    return refs, free + [int(b) for b in index if refs[b] == 0]


# ================================================================================================
# Exercise 3: append_slot
# ================================================================================================
def as_shared_checked_first(table, length, block_size, refs, free):
    copy = None
    if table and refs[table[-1]] > 1:   # slip: the shared test first: a FULL shared block is copied too
        new = free.pop()
        refs[new] = 1
        copy = (table[-1], new)
        refs, free = course_release([table[-1]], refs, free)
        table[-1] = new
        if length % block_size == 0:
            table.append(free.pop())
            refs[table[-1]] = 1
    elif length % block_size == 0:
        table.append(free.pop())
        refs[table[-1]] = 1
    return table, table[length // block_size] * block_size + length % block_size, refs, free, copy


def as_no_copy_returned(table, length, block_size, refs, free):
    if length % block_size == 0:
        table.append(free.pop())
        refs[table[-1]] = 1
    elif refs[table[-1]] > 1:
        new = free.pop()
        refs[new] = 1
        refs, free = course_release([table[-1]], refs, free)
        table[-1] = new
    return table, table[length // block_size] * block_size + length % block_size, refs, free, None   # slip: the copy is never asked for


def as_copy_backwards(table, length, block_size, refs, free):
    copy = None
    if length % block_size == 0:
        table.append(free.pop())
        refs[table[-1]] = 1
    elif refs[table[-1]] > 1:
        new = free.pop()
        refs[new] = 1
        copy = (new, table[-1])   # slip: (new, old): the copy goes from the new block into the shared one
        refs, free = course_release([table[-1]], refs, free)
        table[-1] = new
    return table, table[length // block_size] * block_size + length % block_size, refs, free, copy


def as_old_block_kept(table, length, block_size, refs, free):
    copy = None
    if length % block_size == 0:
        table.append(free.pop())
        refs[table[-1]] = 1
    elif refs[table[-1]] > 1:
        new = free.pop()
        refs[new] = 1
        copy = (table[-1], new)   # slip: the old block is not released: its count still includes this sequence
        table[-1] = new
    return table, table[length // block_size] * block_size + length % block_size, refs, free, copy


def as_old_count_zeroed(table, length, block_size, refs, free):
    copy = None
    if length % block_size == 0:
        table.append(free.pop())
        refs[table[-1]] = 1
    elif refs[table[-1]] > 1:
        new = free.pop()
        refs[new] = 1
        copy = (table[-1], new)
        refs[table[-1]] = 0   # slip: the shared block's count set to 0 though the other sequence still holds it
        table[-1] = new
    return table, table[length // block_size] * block_size + length % block_size, refs, free, copy


def as_count_not_set(table, length, block_size, refs, free):
    copy = None
    if length % block_size == 0:
        table.append(free.pop())   # slip: the new block's count is never set to 1
    elif refs[table[-1]] > 1:
        new = free.pop()
        copy = (table[-1], new)
        refs, free = course_release([table[-1]], refs, free)
        table[-1] = new
    return table, table[length // block_size] * block_size + length % block_size, refs, free, copy


def as_peeks_free(table, length, block_size, refs, free):
    copy = None
    if length % block_size == 0:
        table.append(free[-1])   # slip: reads the free list's last block without taking it off the list
        refs[table[-1]] = 1
    elif refs[table[-1]] > 1:
        new = free.pop()
        refs[new] = 1
        copy = (table[-1], new)
        refs, free = course_release([table[-1]], refs, free)
        table[-1] = new
    return table, table[length // block_size] * block_size + length % block_size, refs, free, copy


def as_slot_is_position(table, length, block_size, refs, free):
    copy = None
    if length % block_size == 0:
        table.append(free.pop())
        refs[table[-1]] = 1
    elif refs[table[-1]] > 1:
        new = free.pop()
        refs[new] = 1
        copy = (table[-1], new)
        refs, free = course_release([table[-1]], refs, free)
        table[-1] = new
    return table, length, refs, free, copy   # slip: the logical position returned as the slot


def as_shared_tested_before_empty(table, length, block_size, refs, free):
    copy = None
    if refs[table[-1]] > 1 and length % block_size:   # slip: reads the last block before testing there is one
        new = free.pop()
        refs[new] = 1
        copy = (table[-1], new)
        refs[table[-1]] -= 1
        table[-1] = new
    elif length % block_size == 0:
        table.append(free.pop())
        refs[table[-1]] = 1
    return table, table[length // block_size] * block_size + length % block_size, refs, free, copy


def as_offset_without_modulo(table, length, block_size, refs, free):
    copy = None
    if length % block_size == 0:
        table.append(free.pop())
        refs[table[-1]] = 1
    elif refs[table[-1]] > 1:
        new = free.pop()
        refs[new] = 1
        copy = (table[-1], new)
        refs[table[-1]] -= 1
        table[-1] = new
    return table, table[-1] * block_size + length, refs, free, copy   # slip: the offset is length, not length % B


def as_last_block_and_first_free(table, length, block_size, refs, free):
    table, refs, free = list(table), refs.clone(), list(free)
    copy = None
    if len(table) * block_size == length:
        table.append(free.pop(0))
        refs[table[-1]] = 1
    elif int(refs[table[-1]]) >= 2:
        old, new = table[-1], free.pop(0)
        refs[old] -= 1
        refs[new] = 1
        table[-1], copy = new, (old, new)
    return table, table[-1] * block_size + length % block_size, refs, free, copy


def as_through_the_logical_block(table, length, block_size, refs, free):
    i, offset = divmod(length, block_size)
    copy = None
    if i >= len(table):
        block = min(free)
        free.remove(block)
        refs[block] = 1
        table.append(block)
    elif refs[table[i]] != 1:
        block = min(free)
        free.remove(block)
        refs[block] = 1
        copy = (table[i], block)
        refs, free = course_release([table[i]], refs, free)
        table[i] = block
    return table, table[i] * block_size + offset, refs, free, copy


# ================================================================================================
# Exercise 4: schedule
# ================================================================================================
def _need(s, bs):
    return math.ceil(s.length / bs)


def _plan(running, waiting, free_blocks, block_size, max_running, keep_finished=False, restart=False,
          oldest=False, admit_after=False, skip=False, retired_free=True, need=_need):
    retired = [s.id for s in running if s.finished]
    free = free_blocks + (sum(s.blocks for s in running if s.finished) if retired_free else 0)
    keep = [s for s in running if keep_finished or not s.finished]
    preempted = []
    while sum(max(0, need(s, block_size) - s.blocks) for s in keep if not s.finished) > free:
        victim = keep.pop(0 if oldest else -1)
        free += victim.blocks
        preempted.append(victim.id)
    free -= sum(max(0, need(s, block_size) - s.blocks) for s in keep if not s.finished)
    admitted = []
    for s in ([] if preempted and not admit_after else waiting):
        if len(keep) + len(admitted) >= max_running:
            break
        if need(s, block_size) > free:
            if skip:
                continue
            break
        admitted.append(s)
        free -= need(s, block_size)
    batch = [(s.id, 0 if restart else s.cached, s.length) for s in keep] + [(s.id, 0, s.length) for s in admitted]
    return retired, preempted, [s.id for s in admitted], batch


def sc_finished_stay(running, waiting, free_blocks, block_size, max_running):
    # slip: the finished requests are listed as retired but stay in the batch (and keep their row)
    return _plan(running, waiting, free_blocks, block_size, max_running, keep_finished=True)


def sc_batch_from_zero(running, waiting, free_blocks, block_size, max_running):
    # slip: every request of the batch starts at position 0, the running ones too
    return _plan(running, waiting, free_blocks, block_size, max_running, restart=True)


def sc_preempts_oldest(running, waiting, free_blocks, block_size, max_running):
    # slip: running.pop(0): the first admitted is preempted, not the most recent
    return _plan(running, waiting, free_blocks, block_size, max_running, oldest=True)


def sc_admits_after_preempting(running, waiting, free_blocks, block_size, max_running):
    # slip: admission runs in a step that preempted
    return _plan(running, waiting, free_blocks, block_size, max_running, admit_after=True)


def sc_skips_what_does_not_fit(running, waiting, free_blocks, block_size, max_running):
    # slip: `continue` instead of `break`: a later, smaller request jumps the queue
    return _plan(running, waiting, free_blocks, block_size, max_running, skip=True)


def sc_retired_blocks_not_freed(running, waiting, free_blocks, block_size, max_running):
    # slip: the retired requests' blocks are not added to the free count of this step
    return _plan(running, waiting, free_blocks, block_size, max_running, retired_free=False)


def sc_floor_blocks(running, waiting, free_blocks, block_size, max_running):
    # slip: blocks needed as length // block_size (floor), not the ceiling
    return _plan(running, waiting, free_blocks, block_size, max_running, need=lambda s, bs: s.length // bs)


def sc_counts_finished_toward_max(running, waiting, free_blocks, block_size, max_running):
    retired = [s.id for s in running if s.finished]
    free = free_blocks + sum(s.blocks for s in running if s.finished)
    keep = [s for s in running if not s.finished]
    preempted = []
    while sum(max(0, _need(s, block_size) - s.blocks) for s in keep) > free:
        victim = keep.pop()
        free += victim.blocks
        preempted.append(victim.id)
    free -= sum(max(0, _need(s, block_size) - s.blocks) for s in keep)
    admitted = []
    for s in ([] if preempted else waiting):
        if len(running) + len(admitted) >= max_running or _need(s, block_size) > free:   # slip: len(running)
            break
        admitted.append(s)
        free -= _need(s, block_size)
    batch = [(s.id, s.cached, s.length) for s in keep] + [(s.id, 0, s.length) for s in admitted]
    return retired, preempted, [s.id for s in admitted], batch


def sc_one_pass_with_counters(running, waiting, free_blocks, block_size, max_running):
    alive = [s for s in running if not s.finished]
    free = free_blocks + sum(s.blocks for s in running) - sum(s.blocks for s in alive)
    lacking = [-(-s.length // block_size) - s.blocks for s in alive]
    preempted = []
    while sum(max(0, x) for x in lacking) > free:
        free += alive[-1].blocks
        preempted.append(alive[-1].id)
        alive, lacking = alive[:-1], lacking[:-1]
    free -= sum(max(0, x) for x in lacking)
    admitted = []
    if not preempted:
        for s in waiting:
            need = -(-s.length // block_size)
            if len(alive) + len(admitted) == max_running or need > free:
                break
            admitted.append(s)
            free -= need
    batch = [(s.id, s.cached, s.length) for s in alive] + [(s.id, 0, s.length) for s in admitted]
    return [s.id for s in running if s.finished], preempted, [s.id for s in admitted], batch


# ================================================================================================
# Exercise 5: speculative_accept
# ================================================================================================
def _rule(p, q, draft, u, ratio=None, residual=None, bonus=None, keep_rejected=False, go_on=False):
    accepted = []
    for i, x in enumerate(draft.tolist()):
        r = ratio(p, q, i, x) if ratio else p[i, x] / q[i, x]
        if u[i] < min(1.0, float(r)):
            accepted.append(x)
            continue
        if keep_rejected:
            accepted.append(x)
        if go_on:
            continue
        res = residual(p, q, i) if residual else torch.clamp(p[i] - q[i], min=0)
        return accepted, (res / res.sum() if residual is None else res)
    return accepted, (bonus(p, len(draft)) if bonus else p[len(draft)])


def sp_draft_on_both_sides(p, q, draft, u):
    # slip: copy-paste: the draft's probability over the draft's (always 1)
    return _rule(p, q, draft, u, ratio=lambda p, q, i, x: q[i, x] / q[i, x])


def sp_ratio_upside_down(p, q, draft, u):
    # slip: q / p instead of p / q
    return _rule(p, q, draft, u, ratio=lambda p, q, i, x: q[i, x] / p[i, x])


def sp_resample_from_target(p, q, draft, u):
    # slip: after a rejection, the target's own distribution instead of the residual
    return _rule(p, q, draft, u, residual=lambda p, q, i: p[i])


def sp_residual_not_normalised(p, q, draft, u):
    # slip: max(0, p - q) returned without dividing by its sum
    return _rule(p, q, draft, u, residual=lambda p, q, i: torch.clamp(p[i] - q[i], min=0))


def sp_residual_not_clamped(p, q, draft, u):
    # slip: p - q normalised without the max(0, .)
    return _rule(p, q, draft, u, residual=lambda p, q, i: (p[i] - q[i]) / (p[i] - q[i]).abs().sum())


def sp_residual_softmax(p, q, draft, u):
    # slip: max(0, p - q) normalised with a softmax instead of its sum
    return _rule(p, q, draft, u, residual=lambda p, q, i: torch.softmax(torch.clamp(p[i] - q[i], min=0), -1))


def sp_bonus_last_draft_row(p, q, draft, u):
    # slip: the bonus from p[k - 1], the row at the last draft, not the row after it
    return _rule(p, q, draft, u, bonus=lambda p, k: p[k - 1])


def sp_bonus_forgotten(p, q, draft, u):
    # slip: no distribution when every draft is accepted
    return _rule(p, q, draft, u, bonus=lambda p, k: None)


def sp_rejected_kept(p, q, draft, u):
    # slip: the rejected draft is appended before stopping
    return _rule(p, q, draft, u, keep_rejected=True)


def sp_no_stop(p, q, draft, u):
    # slip: `continue` where the loop should stop: later drafts are still judged after a rejection
    return _rule(p, q, draft, u, go_on=True)


def sp_ratio_next_row(p, q, draft, u):
    # slip: the target's probability read from row i + 1 of p (its shape is (k+1, V))
    return _rule(p, q, draft, u, ratio=lambda p, q, i, x: p[i + 1, x] / q[i, x])


def sp_without_min(p, q, draft, u):
    k = len(draft)
    for i in range(k):
        x = int(draft[i])
        if not u[i] < p[i, x] / q[i, x]:            # u < 1, so min(1, .) changes nothing
            residual = F.relu(p[i] - q[i])
            return [int(t) for t in draft[:i]], residual / residual.sum()
    return [int(t) for t in draft], p[-1]


def sp_vectorised(p, q, draft, u):
    k = len(draft)
    idx = torch.arange(k)
    accept = u < (p[idx, draft] / q[idx, draft]).clamp(max=1)
    n = int(torch.cumprod(accept.long(), 0).sum())     # the accepted prefix
    if n == k:
        return draft.tolist(), p[k]
    residual = (p[n] - q[n]).clamp(min=0)
    return draft[:n].tolist(), residual / residual.sum()


SLIPS = [
    ("paged_attention", "No mask: every slot the table names is attended.", pa_no_length_mask),
    ("paged_attention", "Mask t > lengths: one slot past the sequence attended.", pa_mask_greater),
    ("paged_attention", "Scores not divided by sqrt(d).", pa_no_scale),
    ("paged_attention", "Flat slot with the offset written t // B instead of t % B.", pa_flat_slot_without_modulo),
    ("paged_attention", "Softmax over the heads axis.", pa_softmax_over_heads),
    ("paged_attention", "Mask t >= lengths - 1: the newest key left out.", pa_excludes_newest),

    ("release", "Every block of the table goes back on the free list.", rl_frees_every_block),
    ("release", "Frees when the count after the decrement is <= 1.", rl_frees_at_one_after_decrement),
    ("release", "Returns only the newly freed blocks as the free list.", rl_new_list),
    ("release", "Shared blocks skipped: their count is never decremented.", rl_shared_skipped),
    ("release", "Count set to 0 instead of decremented.", rl_sets_zero),

    ("append_slot", "Shared test first: a full shared block is copied.", as_shared_checked_first),
    ("append_slot", "The block replaced but the copy never returned (None).", as_no_copy_returned),
    ("append_slot", "copy = (new, old).", as_copy_backwards),
    ("append_slot", "The old shared block not released.", as_old_block_kept),
    ("append_slot", "The old shared block's count set to 0.", as_old_count_zeroed),
    ("append_slot", "The new block's count never set to 1.", as_count_not_set),
    ("append_slot", "free[-1] read without popping it.", as_peeks_free),
    ("append_slot", "The logical position returned as the slot.", as_slot_is_position),
    ("append_slot", "The shared test reads table[-1] before the empty case.", as_shared_tested_before_empty),
    ("append_slot", "The slot's offset is length, not length % B.", as_offset_without_modulo),

    ("schedule", "Finished requests stay in the batch.", sc_finished_stay),
    ("schedule", "Running requests fed from position 0.", sc_batch_from_zero),
    ("schedule", "The oldest request preempted.", sc_preempts_oldest),
    ("schedule", "Admits in a step that preempted.", sc_admits_after_preempting),
    ("schedule", "Skips a waiting request that does not fit and admits the next.", sc_skips_what_does_not_fit),
    ("schedule", "The retired requests' blocks not counted as free.", sc_retired_blocks_not_freed),
    ("schedule", "Blocks needed as length // block_size.", sc_floor_blocks),
    ("schedule", "Finished requests counted toward max_running (len(running)).", sc_counts_finished_toward_max),

    ("speculative_accept", "Draft's probability on both sides of the ratio.", sp_draft_on_both_sides),
    ("speculative_accept", "Ratio q / p.", sp_ratio_upside_down),
    ("speculative_accept", "After a rejection, the target's p_i instead of the residual.", sp_resample_from_target),
    ("speculative_accept", "Residual not normalised.", sp_residual_not_normalised),
    ("speculative_accept", "Residual p - q not clamped at 0.", sp_residual_not_clamped),
    ("speculative_accept", "Bonus from p[k - 1].", sp_bonus_last_draft_row),
    ("speculative_accept", "No bonus distribution when every draft is accepted.", sp_bonus_forgotten),
    ("speculative_accept", "The rejected draft kept among the accepted.", sp_rejected_kept),
    ("speculative_accept", "The loop goes on after a rejection.", sp_no_stop),
    ("speculative_accept", "The ratio reads p[i + 1] instead of p[i].", sp_ratio_next_row),
    ("speculative_accept", "Residual normalised with a softmax.", sp_residual_softmax),
]

CORRECT = [
    ("paged_attention", "A loop over the sequences, gathering slots from the flattened pool.", pa_loop_over_sequences),
    ("paged_attention", "scaled_dot_product_attention with a boolean mask of the lengths.", pa_sdpa_with_mask),

    ("release", "The count tested before the decrement (== 1).", rl_check_before_decrement),
    ("release", "index_add_ of -1 for the table, then the zeros collected.", rl_vectorised),

    ("append_slot", "The first free block, len(table) * B == length, the slot through table[-1].",
     as_last_block_and_first_free),
    ("append_slot", "Through the logical block length // B; the smallest free block.", as_through_the_logical_block),

    ("schedule", "Counters of the blocks each running request lacks.", sc_one_pass_with_counters),

    ("speculative_accept", "u < p / q without min, relu for the residual, p[-1] for the bonus.", sp_without_min),
    ("speculative_accept", "Every ratio at once, the accepted prefix by cumprod.", sp_vectorised),
]
