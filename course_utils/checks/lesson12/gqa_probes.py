"""What exercise 7's check reads off an answer no registered mistake's values explain (grouped-query attention):
the heads in another order, the key/value head each query head uses, the (query head, key/value head) pair of
each output head, sequences mixed across the batch, keys hidden that the mask allows; and the crashes, named where
torch's words, or a second call with another mask, single the slip out."""
import re

import numpy as np
import torch

from ...attention import scaled_dot_product_attention
from ...gpt_attention import grouped_query_attention as ref_gqa
from ...masks import causal_mask
from ..core import ExerciseError, to_numpy
from ..evaluation import RAISED, call_naming, renamed
from ..torch_errors import BMM, BROADCAST, EXPAND, INVALID_ARGS, VIEW
from .gqa_mistakes import M

# the course's own words (attention._check_qkv, masks.check_mask)
_FLATTENED = re.compile(r"must have the same number of dimensions \(B, \.\.\., T, d\), got shapes \([\d, ]+\), "
                        r"\(\d+,\)")
_MASK = re.compile(r"mask of shape \((?P<mask>[\d, ]+)\) does not broadcast to the scores' shape "
                   r"\((?P<scores>[\d, ]+)\)")


def crashes(B, h, h_kv, T, mask):
    """The typical crashes of grouped-query attention on these sizes, named where the words single the slip out."""
    def broadcast(match):
        sizes = {int(match["a"]), int(match["b"])}
        other = sizes - {h}
        if match["dim"] == "1" and h in sizes and len(other) == 1 and other.pop() % h_kv == 0:
            return M.heads_not_lined_up.at(sizes=" and ".join(str(n) for n in sorted(sizes)))
        if match["dim"] == "1" and T in sizes and not sizes & {B} and T not in (h, h_kv):
            return M.mask_on_heads_axis.at(sizes=" and ".join(str(n) for n in sorted(sizes)))
        return None

    def bmm(match):
        want, got = int(match["want"].split(",")[0]), int(match["got"].split(",")[0])
        return M.heads_not_lined_up.at(sizes=f"{h_kv} and {h}") if {want, got} == {B * h, B * h_kv} else None

    def course_mask(match):
        scores = [int(n) for n in match["scores"].split(",")]
        if tuple(int(n) for n in match["mask"].split(",")) != tuple(mask.shape):
            return M.mask_changed.at(got=f"({match['mask']})", scores=f"({match['scores']})")
        if scores[-1] != T:                    # the mask as given, the keys grown along the positions
            return M.kv_positions_repeated.at(n=scores[-1], T=T)
        return None                            # the mask as given: the scores' shape is the answer's (`call` probes)
    return [
        (_FLATTENED, M.kv_flattened),
        (VIEW, M.view_not_contiguous),
        (INVALID_ARGS, lambda match: M.group_float if match["op"] == "repeat_interleave"
         and match["got"].startswith("float") else None),
        (EXPAND, lambda match: M.expand_heads if (int(match["new"]), int(match["old"])) == (h, h_kv) else None),
        (_MASK, course_mask),
        (BROADCAST, broadcast),
        (BMM, bmm),
    ]


def call(ev, answer, q, k, v, mask):
    """The learner's answer with its crashes named; a crash with a mask of shape (B, 1, 1, T) where a (T, T) mask
    runs is named as that: the mask does not broadcast against the scores the answer builds."""
    errors = crashes(q.size(0), q.size(1), k.size(1), q.size(2), mask)
    try:
        return call_naming(ev, errors, answer, q, k, v, mask)
    except ExerciseError as error:
        if mask.dim() != 4 or not str(error).startswith(RAISED):
            raise
        try:
            call_naming(ev, [], answer, q, k, v, causal_mask(q.size(2)))
        except ExerciseError:
            raise error from None
        raise renamed(error, M.mask_broadcast.at(shape=tuple(mask.shape))) from None


def heads_permuted(got, expected):
    """M.heads_order when `got` (B, h, T, d) holds the expected heads in another order, else None."""
    got, expected = to_numpy(got), to_numpy(expected)
    if got.shape != expected.shape:
        return None
    order = []
    for j in range(got.shape[1]):
        same = [i for i in range(expected.shape[1]) if np.allclose(got[:, j], expected[:, i], atol=1e-5)]
        if not same:
            return None
        order.append(j if j in same else same[0])
    if order == list(range(len(order))):
        return None
    return M.heads_order.at(last=len(order) - 1, order=order)


def _head(q, k, v, mask, i, c):
    """Attention of query head i with key/value head c: (B, T, d)."""
    return to_numpy(scaled_dot_product_attention(q[:, i:i + 1], k[:, c:c + 1], v[:, c:c + 1], mask)[:, 0])


def gqa_heads(got, q, k, v, mask):
    """M.heads_grouped_otherwise when every query head of `got` is attention with ONE key/value head, but not with
    head j // (h / h_kv) (the heads grouped another way), else None."""
    h, h_kv = q.size(1), k.size(1)
    got, used = to_numpy(got), []
    for j in range(h):
        match = [c for c in range(h_kv) if np.allclose(got[:, j], _head(q, k, v, mask, j, c), atol=1e-5)]
        if not match:
            return None
        used.append(match[0])
    want = [j // (h // h_kv) for j in range(h)]
    return None if used == want else M.heads_grouped_otherwise.at(last=h - 1, used=used, want=want)


def gqa_pairs(got, q, k, v, mask):
    """M.head_pairs when every output head is attention of SOME query head with SOME key/value head, but not query
    head j with key/value head j // (h / h_kv) at place j, else None."""
    h, h_kv = q.size(1), k.size(1)
    got, found = to_numpy(got), []
    for j in range(h):
        pairs = [(i, c) for i in range(h) for c in range(h_kv)
                 if np.allclose(got[:, j], _head(q, k, v, mask, i, c), atol=1e-5)]
        if not pairs:
            return None
        found.append(pairs[0])
    want = [(j, j // (h // h_kv)) for j in range(h)]
    return None if found == want else M.head_pairs.at(last=h - 1, found=found, want=want)


def batch_mixed(ev, answer, args):
    """M.batch_mixed when `answer` is right on one sequence at a time (the batch's first axis) but not on the
    batch."""
    B = args[0].shape[0]
    if B < 2:
        return None
    for b in range(B):
        one = [a[b:b + 1] if hasattr(a, "shape") and a.dim() > 2 and a.shape[0] == B else a for a in args]
        want = ref_gqa(*one)
        try:
            got = call(ev, answer, *one)
        except ExerciseError:
            return None
        if not (hasattr(got, "shape") and tuple(got.shape) == tuple(want.shape)
                and np.allclose(to_numpy(got), to_numpy(want), atol=1e-5)):
            return None
    return M.batch_mixed.at(B=B)


def masks_more(ev, answer, q, k, v, mask):
    """M.masks_more when query 0 does not see the later keys its (padding) mask allows: changing their values leaves
    its output as it was (the answer masks more than `mask` says, e.g. a causal mask of its own). Else None."""
    later = v.clone()
    later[..., 1:, :] += 1.0
    a, b = (call(ev, answer, q, k, values, mask) for values in (v, later))
    sees = torch.broadcast_to(mask, q.shape[:-1] + k.shape[-2:-1])[..., 0, 1:].any(-1)     # (B, h): query 0
    if not (hasattr(a, "shape") and hasattr(b, "shape") and tuple(a.shape) == tuple(b.shape) == tuple(q.shape)):
        return None
    moved = ~np.isclose(to_numpy(a)[..., 0, :], to_numpy(b)[..., 0, :], atol=1e-5).all(-1)
    return M.masks_more if np.any(to_numpy(sees) & ~moved) else None
