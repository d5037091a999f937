"""Lesson 03, exercise 1: a bidirectional encoder's two directions, put together.

    bidirectional_states(h_fwd (B, S, d), h_bwd (B, S, d), lengths (B,)) -> (h (B, S, 2d), final (B, 2d))

h_i = [forward h_i; backward h_i]; final = [the forward state at the last real token (lengths - 1); the backward
state at position 0], each direction's state after reading the whole sequence. The check compares h, then final, on
three padded batches (zeros past each length) of unequal lengths; it names an index one past the last position (a
crash) and the states put in the wrong places.
"""
import torch

from ... import recurrent as ref
from ..core import Mistake, Mistakes, exercise, expect_returns
from ..evaluation import Evaluation, call_naming
from ..torch_errors import INDEX_BOUNDS
from .padding import padded


def with_h(combine):
    """A wrong answer whose h is combine(h_fwd, h_bwd, lengths) (final right)."""
    def bidirectional_states(h_fwd, h_bwd, lengths):
        return combine(h_fwd, h_bwd, lengths), ref.bidirectional_states(h_fwd, h_bwd, lengths)[1]
    return bidirectional_states


def with_final(fwd_at, bwd_at, combine=lambda fwd, bwd: torch.cat([fwd, bwd], -1)):
    """A wrong answer (h right) whose final combines the forward state at fwd_at(lengths, S) with the backward state
    at bwd_at(lengths, S)."""
    def bidirectional_states(h_fwd, h_bwd, lengths):
        rows, S = torch.arange(len(lengths)), h_fwd.shape[1]
        fwd, bwd = h_fwd[rows, fwd_at(lengths, S)], h_bwd[rows, bwd_at(lengths, S)]
        return torch.cat([h_fwd, h_bwd], -1), combine(fwd, bwd)
    return bidirectional_states


def _last(n, S):
    return n - 1


def _first(n, S):
    return torch.zeros_like(n)


def _column(n, S):
    return torch.full_like(n, S - 1)


def reversed_within(x, lengths):
    """x (B, S, d) with each sequence's first `length` positions in reverse order (the padding left in place)."""
    out = x.clone()
    for b, n in enumerate(lengths.tolist()):
        out[b, :n] = x[b, :n].flip(0)
    return out


def _interleaved(first, second):
    return lambda f, b, n: torch.stack([f, b] if first == "f" else [b, f], -1).flatten(2)


_CONCATENATE = "h_i concatenates them along the features, (B, S, 2d)"
_CAT_HINT = "torch.cat([h_fwd, h_bwd], dim=-1)"
_BACKWARD = ("the backward GRU reads right to left, from the last real token back to the first, so its final state "
             "is at position 0")
_INTERLEAVED = ("the features of the two directions are interleaved{order} (a stack on a new last axis, then a "
                "reshape): h_i holds the d forward features first, then the d backward ones")
_BWD_REVERSED = ("the backward states are reversed along the positions{what}: h_bwd already holds the backward state "
                 "of position i at index i (it has read tokens n..i), so h_i = [h_fwd at i; h_bwd at i]")
M = Mistakes(
    Mistake("at_lengths", "an index is one past the last position: a sequence of n real tokens ends at position n - 1 "
            "(positions count from 0), so the forward final state is at index lengths - 1",
            hint="h_fwd[torch.arange(B), lengths - 1]", shows=with_final(lambda n, S: n, _first)),
    Mistake("directions_swapped", "the directions are swapped: h_i = [forward h_i; backward h_i], the forward "
            "states first", hint=_CAT_HINT, shows=with_h(lambda f, b, n: torch.cat([b, f], -1))),
    Mistake("added", f"the two directions are added: {_CONCATENATE}", hint=_CAT_HINT,
            shows=with_h(lambda f, b, n: f + b)),
    Mistake("averaged", f"the two directions are averaged: {_CONCATENATE}", hint=_CAT_HINT,
            shows=with_h(lambda f, b, n: (f + b) / 2)),
    Mistake("stacked", f"the two directions are stacked on a new axis before the features: {_CONCATENATE}",
            hint=_CAT_HINT, shows=with_h(lambda f, b, n: torch.stack([f, b], -2))),
    Mistake("stacked_last", f"the two directions are stacked on a new last axis: {_CONCATENATE}", hint=_CAT_HINT,
            shows=with_h(lambda f, b, n: torch.stack([f, b], -1))),
    Mistake("stacked_first", f"the two directions are stacked on a new first axis: {_CONCATENATE}", hint=_CAT_HINT,
            shows=with_h(lambda f, b, n: torch.stack([f, b]))),
    Mistake("cat_positions", f"the two directions are concatenated along the positions: {_CONCATENATE}",
            hint=_CAT_HINT, shows=with_h(lambda f, b, n: torch.cat([f, b], 1))),
    Mistake("cat_batch", f"the two directions are concatenated along the batch: {_CONCATENATE}", hint=_CAT_HINT,
            shows=with_h(lambda f, b, n: torch.cat([f, b], 0))),
    Mistake("interleaved", _INTERLEAVED.format(order=""), hint=_CAT_HINT, shows=with_h(_interleaved("f", "b"))),
    Mistake("interleaved_backward_first", _INTERLEAVED.format(order=", the backward ones first"), hint=_CAT_HINT,
            shows=with_h(_interleaved("b", "f"))),
    Mistake("bwd_flipped", _BWD_REVERSED.format(what=""), hint="concatenate h_bwd as it is, without flipping it",
            shows=with_h(lambda f, b, n: torch.cat([f, b.flip(1)], -1))),
    Mistake("bwd_reversed", _BWD_REVERSED.format(what=" within each sequence's real tokens"),
            hint="concatenate h_bwd as it is, without reversing it",
            shows=with_h(lambda f, b, n: torch.cat([f, reversed_within(b, n)], -1))),
    Mistake("fwd_flipped", "the forward states are reversed along the positions: h_fwd holds the forward state of "
            "position i at index i", hint="concatenate h_fwd as it is, without flipping it",
            shows=with_h(lambda f, b, n: torch.cat([f.flip(1), b], -1))),
    Mistake("fwd_at_last_column", "the forward final state is taken at the last column, which is padding (zeros) for "
            "the shorter sequences: it is at each sequence's last real token",
            hint="h_fwd[torch.arange(B), lengths - 1]", shows=with_final(_column, _first)),
    Mistake("bwd_at_last_token", f"the backward final state is taken at the last real token: {_BACKWARD}",
            hint="h_bwd[:, 0]", shows=with_final(_last, _last)),
    Mistake("bwd_at_last_column", f"the backward final state is taken at the last column: {_BACKWARD}",
            hint="h_bwd[:, 0]", shows=with_final(_last, _column)),
    Mistake("both_at_last_column", "both final states are taken at the last column: the forward one is at each "
            f"sequence's last real token (lengths - 1), and {_BACKWARD}", shows=with_final(_column, _column)),
    Mistake("finals_positions_swapped", "the two final states' positions are swapped: the forward one is at the last "
            "real token (lengths - 1), the backward one at position 0", shows=with_final(_first, _last)),
    Mistake("finals_order", "the final states are in the wrong order: [forward final; backward final], the forward "
            "one first", hint="torch.cat([forward, backward], dim=-1)",
            shows=with_final(_last, _first, lambda fwd, bwd: torch.cat([bwd, fwd], -1))),
    Mistake("finals_stacked", "the final states are stacked as (2, B, d), as nn.GRU's h_n: final concatenates them "
            "into (B, 2d)", hint="torch.cat([forward, backward], dim=-1)",
            shows=with_final(_last, _first, lambda fwd, bwd: torch.stack([fwd, bwd]))),
    Mistake("finals_cat_batch", "the final states are concatenated along the batch, (2B, d): final concatenates them "
            "along the features, (B, 2d)", hint="torch.cat([forward, backward], dim=-1)",
            shows=with_final(_last, _first, lambda fwd, bwd: torch.cat([fwd, bwd], 0))),
    Mistake("forward_only", "final holds only the forward state: it concatenates [forward final; backward final], "
            "(B, 2d)", shows=with_final(_last, _first, lambda fwd, bwd: fwd)),
)
FINAL_MISTAKES = [M[key] for key in ("fwd_at_last_column", "bwd_at_last_token", "bwd_at_last_column",
                                     "both_at_last_column", "finals_positions_swapped", "finals_order",
                                     "finals_stacked", "finals_cat_batch", "forward_only")]
H_MISTAKES = [m for m in M if m not in FINAL_MISTAKES and m.key != "at_lengths"]


def index_errors(S):
    """An index equal to S, one past the last position: a sequence's last real token taken at `lengths`."""
    return [(INDEX_BOUNDS, lambda match: M.at_lengths if int(match["index"]) == int(match["size"]) == S else None)]


def _gather(h_fwd, h_bwd, lengths):
    """The forward final state with gather, h with torch.concat."""
    B, _, d = h_fwd.shape
    last = h_fwd.gather(1, (lengths - 1).view(B, 1, 1).expand(B, 1, d))[:, 0]
    return torch.concat([h_fwd, h_bwd], -1), torch.concat([last, h_bwd[:, 0]], -1)


@exercise("bidirectional encoder states", reference=ref.bidirectional_states, mistakes=M, right=[_gather])
def bidirectional_states(ev: Evaluation, answer):
    """answer(h_fwd (B, S, d), h_bwd (B, S, d), lengths (B,)) -> h (B, S, 2d), final (B, 2d)."""
    tests = 0
    for seed, (lengths, d) in enumerate([([4, 2, 5, 1], 3), ([3, 3], 4), ([6, 2, 4], 2)]):
        g = ev.rng(seed)
        h_fwd, h_bwd, lens = padded(g, lengths, d), padded(g, lengths, d), torch.tensor(lengths)
        h_ref, final_ref = ref.bidirectional_states(h_fwd, h_bwd, lens)
        result = call_naming(ev, index_errors(max(lengths)), answer, h_fwd, h_bwd, lens)
        h, final = expect_returns(result, (h_ref, final_ref), ("h", "final"))
        ev.expect_close(h, h_ref, f"h (lengths {lengths}, d={d})",
                        mistakes=M.variants(H_MISTAKES, h_fwd, h_bwd, lens, pick=lambda r: r[0]))
        ev.expect_close(final, final_ref, f"the final states (lengths {lengths}, d={d})",
                        mistakes=M.variants(FINAL_MISTAKES, h_fwd, h_bwd, lens, pick=lambda r: r[1]))
        tests += 1
    return tests
