"""What lesson 16's checks share: an answer's outcome that is not one array (a block table and a slot, a free
list, a scheduler's plan, the tokens of a speculative step) compared with the right one, a registered mistake
named where the answer's outcome IS that mistake's, and the property that fails named where none is.

    expect_outcome(got, want, "the plan", variants, probes=(...,))
        got, want: outcomes in a comparable form (tuples of ints and lists); variants: {Mistake: its outcome}
        (from M.variants); probes: () -> a Mistake.at(...) or None, tried in order where no mistake matches.
"""
from ..errors import ExerciseError
from ..expectations import fail
from ..mistakes import said


def same(a, b):
    """Equal outcomes: nested tuples and lists of ints, floats (to 1e-5) and tensors."""
    if hasattr(a, "tolist") and not isinstance(a, (int, float)):
        a = a.tolist()
    if hasattr(b, "tolist") and not isinstance(b, (int, float)):
        b = b.tolist()
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return abs(a - b) <= 1e-5 + 1e-4 * abs(b)
    return a == b


def expect_outcome(got, want, what, variants=None, probes=(), shown=None):
    """`got` equals `want`; else the registered mistake whose outcome it is (`ambiguous` when several give it),
    else the first probe's symptom, else a bare difference (`shown(x)`: how an outcome is written in it)."""
    if same(got, want):
        return
    found = list({m.key: m for m, outcome in (variants or {}).items() if same(got, outcome)}.values())
    if len(found) == 1:
        fail(found[0])
    if found:
        raise ExerciseError(f"{what} is what each of these mistakes gives here; the check cannot tell which is "
                            "yours: " + "; or ".join(said(m).says.rstrip(".") for m in found) + ".",
                            key="ambiguous")
    for probe in probes:
        symptom = probe()
        if symptom:
            fail(symptom)
    shown = shown or repr
    raise ExerciseError(f"{what}: got {shown(got)}, expected {shown(want)}.", key="values")
