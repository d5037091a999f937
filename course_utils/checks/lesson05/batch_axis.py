"""What lesson 05's checks share about the batch axis: a value per example, (B,) or (B, M), that meets the (B, N, ...)
values of the memory's rows without the rows' axis (torch's broadcasting lines its batch axis up with the N rows: a
crash when B != N), and a batch of one, where squeeze() without an axis drops the batch axis too.

    call_naming(ev, [lined_up(B, N, M.key)], answer, ...)   # the crash named, when torch's sizes are B and N
    squeeze_all(shows, hint)                               # the Mistake of a batch of one squeezed away
    batch_of_one(ev, answer, args, expected, what, mistake) # the check on B = 1
"""
from ..core import Mistake, expect, expect_shape
from ..evaluation import Evaluation
from ..torch_errors import BROADCAST


def lined_up(B, N, mistake):
    """(pattern, symptom) for call_naming: the crash of a value per example multiplied with (B, N) or (B, N, M)
    values without the rows' axis, where broadcasting lines its batch axis up with the N rows (B != N)."""
    def symptom(match):
        return mistake.at(B=B, N=N) if {int(match["a"]), int(match["b"])} == {B, N} and B != N else None
    return BROADCAST, symptom


def squeeze_all(shows, hint):
    return Mistake("squeeze_all", "{what} for a batch of one (B = 1) has shape {shape}, expected {want}: the batch "
                   "axis is gone; squeeze() without an axis drops every axis of size 1, the batch axis too",
                   hint="name the axis to squeeze: " + hint, shows=shows)


def batch_of_one(ev: Evaluation, answer, args, expected, what, mistake):
    """The answer on a batch of one (B = 1): squeeze() without an axis drops the batch axis too (`mistake`)."""
    out = ev.call(answer, *args)
    shape, want = tuple(getattr(out, "shape", ())), tuple(expected.shape)
    expect(shape == want or shape != tuple(n for n in want if n != 1), mistake.at(what=what, shape=shape, want=want))
    expect_shape(out, want, f"{what} for a batch of one (B = 1)")
    ev.expect_close(out, expected, f"{what} for a batch of one (B = 1)")
