"""What lesson 04's six score exercises share: the loop that draws each configuration's inputs, calls the learner's
score function and names its mistakes by their values, and the mistakes every score of s (B, d_s) and h (B, T, d_h)
can make: s mixed across the batch, and the features of s and of h summed separately.

    score_tests(ev, answer, reference, configs, draw, mistakes, what, crash=None)   # -> the number of tests
    batch_mixups(reference, right)       # the Mistakes of example b scored with another s than its own s_b
    separate_sums(shows, hint)           # the Mistake: s·h_i taken as (sum_k s_k)(sum_k h_ik)
"""
import functools

import torch

from ..core import Mistake
from ..errors import ExerciseError
from ..evaluation import RAISED, Evaluation, renamed
from ..mistakes import Said


def dot(s, h):
    """s·h_i for every position: s (B, d), h (B, T, d) -> (B, T)."""
    return torch.einsum("bd,btd->bt", s, h)


def call_renaming(ev: Evaluation, answer, args, crash):
    """`ev.call(answer, *args)`, a crash told as the Mistake `crash(text)` gives (None: left as it is)."""
    try:
        return ev.call(answer, *args)
    except ExerciseError as error:
        symptom = crash(str(error)) if crash is not None and str(error).startswith(RAISED) else None
        if symptom:
            raise renamed(error, symptom) from None
        raise


def score_tests(ev: Evaluation, answer, reference, configs, draw, mistakes, what, crash=None):
    """The loop of every score check: for each config, draw the score function's inputs from the config's seed, call
    the learner's function on them and compare its scores e (B, T) with the reference's, naming the exercise's
    mistakes. draw(g, *config) -> the arguments; mistakes(*arguments) -> {Mistake or Said: the scores it gives};
    what(*arguments) -> how the message names the scores; crash(text, arguments, passed) -> the Mistake of a crash
    on these arguments after the earlier configs `passed` (their arguments), or None. Returns the number of tests."""
    passed = []
    for seed, config in enumerate(configs):
        args = draw(ev.rng(seed), *config)
        expected = reference(*args)                                          # (B, T)
        e = call_renaming(ev, answer, args, crash and functools.partial(crash, args=args, passed=list(passed)))
        found = mistakes(*args)
        if expected.shape[0] == expected.shape[1]:       # (B = T: the shape cannot tell a transposed result)
            found[Said("transposed", f"{what(*args)} is transposed: (T, B) where (B, T) was asked; keep the batch "
                                     "axis first")] = expected.T
        ev.expect_close(e, expected, what(*args), mistakes=found)
        passed.append(args)
    return len(configs)


def _mixed(reference, mix):
    def score(s, *rest):
        return reference(mix(s), *rest)
    return score


_OWN = "each example b must use its own s_b"


def batch_mixups(reference, right, scale_free=False):
    """The Mistakes of a score whose example b does not use its own s_b (the batch index of s summed, averaged, or one
    example's s for all); `reference(s, ...)` is the exercise's score, `right` how it pairs s_b with h_b. scale_free:
    the score does not change when s is scaled (a cosine), so that a sum and a mean over the batch are one mistake."""
    hint = f"give s the batch index b of the output, e.g. {right}"
    summed = ("s is summed (or averaged: a cosine does not tell them apart) over the batch: every example is scored "
              "with the same sum of all the s_b" if scale_free else
              "s is summed over the batch: every example is scored with the same sum of all the s_b")
    averaged = [] if scale_free else [
        Mistake("s_averaged_over_batch", f"s is averaged over the batch: every example is scored with the mean of all "
                f"the s_b; {_OWN}", hint=hint,
                shows=_mixed(reference, lambda s: s.mean(0, keepdim=True).expand_as(s)))]
    return [
        Mistake("s_summed_over_batch", f"{summed}; {_OWN}",
                hint=hint + " (an einsum letter of its own for s sums it, e.g. 'ad,...->bt')",
                shows=_mixed(reference, lambda s: s.sum(0, keepdim=True).expand_as(s))),
        *averaged,
        Mistake("s_of_first_example", f"every example is scored with the s of example 0; {_OWN}",
                hint=hint + " (`h @ s.T` pairs every h with every s, (B, T, B), and `[..., 0]` keeps example 0's)",
                shows=_mixed(reference, lambda s: s[:1].expand_as(s))),
        Mistake("s_of_last_example", f"every example is scored with the s of the last example; {_OWN}", hint=hint,
                shows=_mixed(reference, lambda s: s[-1:].expand_as(s))),
    ]


def separate_sums(shows, hint="torch.einsum('bd,btd->bt', s, h)"):
    """The Mistake of s·h_i computed as (sum_k s_k)(sum_k h_ik): an einsum with one letter for the features of s and
    another for those of h sums each on its own. shows: the exercise's score written so."""
    return Mistake("features_summed_separately", "s and h_i are summed separately, (sum_k s_k)(sum_k h_ik), instead "
                   "of multiplied feature by feature and then summed: the features of s and of h_i are one axis, "
                   "summed once over their products",
                   hint="give the shared feature axis ONE einsum letter: " + hint, shows=shows)


def features_summed(s, h):
    """(sum_k s_k)(sum_k h_ik), (B, T): what separate_sums's mistake puts in place of s·h_i."""
    return s.sum(-1)[:, None] * h.sum(-1)
