"""Lesson 10, exercise 1: the paper's learning-rate schedule.

    noam_lr(step, d_model, warmup_steps) -> d_model^-0.5 · min(step^-0.5, step · warmup_steps^-1.5), a plain Python
    number (steps count from 1)

The check draws no random input: it compares the rates at eight steps (1, 2, warmup/2, warmup - 1, warmup,
warmup + 1, 2 warmup, 10 warmup) for three (d_model, warmup_steps), names each registered slip by the rates it
gives, else which part of the schedule is wrong (the warm-up, the decay, or only the steps near the peak), that
the rate is a plain Python number, and that over every step 1 ... 1999 of one schedule the rate peaks at
warmup_steps.
"""
import functools

import numpy as np
import torch

from ...training import noam_lr as ref_noam
from ..core import Mistake, Mistakes, exercise, expect, single_threaded
from ..evaluation import Evaluation
from ..expectations import explained

_PRECEDENCE = "power_precedence"


def _noam(warm=lambda s, w: s * w ** -1.5, decay=lambda s: s ** -0.5, scale=lambda d: d ** -0.5):
    """The schedule with one of its parts written another way (the one definition of the slips in a part)."""
    def noam_lr(step, d_model, warmup_steps):
        return scale(d_model) * min(decay(step), warm(step, warmup_steps))
    return noam_lr


def _max_not_min(step, d_model, warmup_steps):
    return d_model ** -0.5 * max(step ** -0.5, step * warmup_steps ** -1.5)


def _linear_to_peak(step, d_model, warmup_steps):
    return d_model ** -0.5 * (step / warmup_steps if step < warmup_steps else step ** -0.5)


def _right_only_where_checked(step, d_model, warmup_steps):
    """The check's own steps' rates (as if looked up), twice the rate at every other step."""
    checked = {1, 2, warmup_steps // 2, warmup_steps - 1, warmup_steps, warmup_steps + 1, 2 * warmup_steps,
               10 * warmup_steps}
    return ref_noam(step, d_model, warmup_steps) * (1 if step in checked else 2)


def _half_at_the_peak(step, d_model, warmup_steps):
    return ref_noam(step, d_model, warmup_steps) * (0.5 if step == warmup_steps else 1.0)


# the three places where a power written as a fraction loses its parentheses: (x, k, h) for x^-h written x ** -k/2
_POWERS = {"step": _noam(decay=lambda s: s ** -1 / 2), "warmup_steps": _noam(warm=lambda s, w: s * w ** -3 / 2),
           "d_model": _noam(scale=lambda d: d ** -1 / 2)}
_FIELDS = {"step": (1, 0.5), "warmup_steps": (3, 1.5), "d_model": (1, 0.5)}
_PEAK = "at step = warmup_steps both parts of the min are equal"
M = Mistakes(
    Mistake("warmup_exponent", "the warm-up part grows as step · warmup_steps^-1.5 (exponent -1.5, not -0.5): " + _PEAK,
            shows=_noam(warm=lambda s, w: s * w ** -0.5)),
    Mistake("no_d_model_factor", "the rate is missing the factor d_model^-0.5 in front",
            shows=_noam(scale=lambda d: 1.0)),
    Mistake("max_not_min", "the rate is the max of the two parts: it is their min, which grows during warm-up, then "
            "decays as 1/√step", hint="min(...), not max(...)", shows=_max_not_min),
    Mistake("decay_inverse", "the decay part is step^-0.5 (the inverse square root of the step), not 1/step",
            shows=_noam(decay=lambda s: 1 / s)),
    Mistake("step_plus_one", "the rate is that of the next step: steps count from 1, and the rate of step s uses s "
            "itself", hint="use `step` as it is given, not step + 1", shows=lambda s, d, w: ref_noam(s + 1, d, w)),
    Mistake("step_minus_one", "the rate is that of the step before: steps count from 1, and the rate of step s uses s "
            "itself", hint="use `step` as it is given, not step - 1",
            shows=_noam(warm=lambda s, w: (s - 1) * w ** -1.5, decay=lambda s: max(s - 1, 1e-9) ** -0.5)),
    Mistake(_PRECEDENCE, "{x}^-{h} came out as {x}^-{k} / 2: the power is computed before the division, so an exponent "
            "written as a fraction needs parentheses", hint="{x} ** -{h} (or {x} ** (-{k} / 2))",
            shows=_POWERS["step"]),
    Mistake("warmup_normalised", "the warm-up part is step / warmup_steps, which reaches 1 at the peak: it is "
            "step · warmup_steps^-1.5, which equals step^-0.5 at step = warmup_steps",
            shows=_noam(warm=lambda s, w: s / w)),
    Mistake("warmup_grouped", "the warm-up part is (step · warmup_steps)^-1.5: only warmup_steps takes the exponent "
            "-1.5, the step multiplies it", hint="step * warmup_steps ** -1.5 (** binds tighter than *)",
            shows=_noam(warm=lambda s, w: (s * w) ** -1.5)),
    Mistake("linear_to_peak", "the warm-up rises linearly to d_model^-0.5 (step / warmup_steps), so the rate drops "
            "suddenly after step = warmup_steps: during warm-up it is d_model^-0.5 · step · warmup_steps^-1.5, which "
            "meets d_model^-0.5 · step^-0.5 at the peak", shows=_linear_to_peak),
    Mistake("warmup_part", "after the peak your rate is right, but during warm-up it is not: at step {step} it should "
            "be {expected}, yours is {got}. The warm-up part is d_model^-0.5 · step · warmup_steps^-1.5: it grows "
            "linearly and meets d_model^-0.5 · step^-0.5 at step = warmup_steps",
            shows=_noam(warm=lambda s, w: s * w ** -1.25)),
    Mistake("decay_part", "during warm-up your rate is right, but after the peak it is not: at step {step} it should "
            "be {expected}, yours is {got}. The decay part is d_model^-0.5 · step^-0.5 (the inverse square root of "
            "the step)", shows=_noam(decay=lambda s: s ** -0.6)),
    Mistake("near_peak", "far from the peak your rate is right, but not near step = warmup_steps: at step {step} it "
            "should be {expected}, yours is {got}. The rate is the min of the two parts, which are equal, "
            "d_model^-0.5 · warmup_steps^-0.5, at step = warmup_steps: it grows until then and decays after",
            shows=_half_at_the_peak),
    Mistake("not_a_number", "noam_lr returned a {kind} ({value}), not a plain Python number: the exercise asks for "
            "plain numbers in and out (the rate an optimizer's param group holds)",
            hint="compute with Python's min and ** on the numbers given (no tensors), or return float(...)",
            shows=lambda s, d, w: torch.tensor(ref_noam(s, d, w))),
    Mistake("peak", "the schedule peaks at step {peak}, not at step = warmup_steps = {warmup}: the rate grows until "
            "warmup_steps and decays after (your rates are right at the steps checked first, not at every step)",
            shows=_right_only_where_checked),
)
_VALUES = ("warmup_exponent", "no_d_model_factor", "max_not_min", "decay_inverse", "step_plus_one", "step_minus_one",
           "warmup_normalised", "warmup_grouped", "linear_to_peak")


def _rates(answer, steps, d_model, warmup):
    return np.array([float(answer(s, d_model, warmup)) for s in steps])


def _parts(s, got, expected, w):
    """Which part of the schedule is wrong: the warm-up (steps up to warmup_steps / 2), the decay (steps from
    2 warmup_steps on) or only the steps near the peak (or None)."""
    ok = np.isclose(got, expected, rtol=1e-6, atol=1e-12)
    early, late = s <= w / 2, s >= 2 * w

    def at(mistake, where):
        bad = int(np.flatnonzero(where & ~ok)[0])
        return mistake.at(step=int(s[bad]), expected=f"{expected[bad]:.4g}", got=f"{got[bad]:.4g}")

    if ok[late].all() and not ok[early].all():
        return at(M.warmup_part, early)
    if ok[early].all() and not ok[late].all():
        return at(M.decay_part, late)
    if ok[early].all() and ok[late].all():
        return at(M.near_peak, np.ones_like(ok))
    return None


def _plain_number(x):
    """The exercise asks for plain Python numbers in and out (the rate an optimizer's param group holds)."""
    kind = f"{type(x).__module__}.{type(x).__qualname__}".replace("builtins.", "")
    expect(isinstance(x, (int, float)) and not isinstance(x, bool), M.not_a_number.at(kind=kind, value=repr(x)))


def _another_way(step, d_model, warmup_steps):
    """A right answer written another way: the peak rate times the shape, min(step / warmup, √(warmup / step))."""
    return (d_model * warmup_steps) ** -0.5 * min(step / warmup_steps, (warmup_steps / step) ** 0.5)


@exercise("learning-rate schedule (noam_lr)", reference=ref_noam, mistakes=M, right=[_another_way], random=False)
@single_threaded
def noam_lr(ev: Evaluation, answer):
    """answer(step, d_model, warmup_steps) -> the rate, a plain Python number."""
    tests = 0
    for d_model, warmup in ((512, 4000), (256, 400), (64, 10)):
        steps = [1, 2, warmup // 2, warmup - 1, warmup, warmup + 1, 2 * warmup, 10 * warmup]
        results = [ev.call(answer, s, d_model, warmup) for s in steps]
        _plain_number(results[0])
        got = np.array([float(r) for r in results])
        expected = np.array([ref_noam(s, d_model, warmup) for s in steps])
        mistakes = {M[key]: _rates(M[key].shows, steps, d_model, warmup) for key in _VALUES}
        mistakes.update({M[_PRECEDENCE].at(x=x, k=_FIELDS[x][0], h=_FIELDS[x][1]): _rates(wrong, steps, d_model, warmup)
                         for x, wrong in _POWERS.items()})
        with explained(functools.partial(_parts, np.array(steps, dtype=float), got, expected, warmup)):
            ev.expect_close(got, expected, f"noam_lr(step, d_model={d_model}, warmup_steps={warmup}) for steps "
                            f"{steps}", mistakes=mistakes, rtol=1e-6, atol=1e-12)
        tests += 1
    # every step of one schedule (not only the eight above): the rate peaks at warmup_steps
    peak = int(np.argmax([float(ev.call(answer, step, 256, 400)) for step in range(1, 2000)])) + 1
    expect(peak == 400, M.peak.at(peak=peak, warmup=400))
    return tests + 1
