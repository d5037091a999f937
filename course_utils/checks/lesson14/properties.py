"""What lesson 14's checks share: where no registered mistake matches an answer, the check names the PROPERTY
that fails and where (which entries a score reads, which positions a cache keeps, which layer of a rollout
goes wrong, ...), found by probes that run the answer on inputs chosen to show it.

    with by_property(probe, ...):            # a bare finding inside (wrong values, values in another order)
        ev.expect_close(...)                 # becomes the first probe's symptom (a Mistake.at(...) or None)

    ranges([0, 1, 2, 3, 12, 13])             # "0 .. 3, 12 .. 13"
"""
import contextlib

from ..errors import ExerciseError
from ..expectations import fail
from ..mistakes import BARE


@contextlib.contextmanager
def by_property(*probes, keys=BARE):
    """Inside: a finding under one of `keys` (by default those that name nothing, mistakes.BARE) is replaced by the
    symptom of the first probe that finds one (a probe: () -> a Mistake.at(...), a Mistake, or None); the finding
    stands where none does."""
    try:
        yield
    except ExerciseError as error:
        if error.key not in keys:
            raise
        for probe in probes:
            symptom = probe()
            if symptom:
                fail(symptom)
        raise


def ranges(numbers, sort=True):
    """Integers as runs of consecutive ones: [0, 1, 2, 3, 12, 13, 15] -> "0 .. 3, 12 .. 13, 15" (sort=False: in
    the order given, repeats kept: [4, 5, 0, 1] -> "4 .. 5, 0 .. 1")."""
    numbers = [int(n) for n in numbers]
    numbers = sorted(numbers) if sort else numbers
    if not numbers:
        return "none"
    runs, start = [], numbers[0]
    for previous, n in zip(numbers, numbers[1:] + [None]):
        if n is None or n != previous + 1:
            runs.append(str(start) if start == previous else f"{start} .. {previous}")
            start = n
    return ", ".join(runs)
