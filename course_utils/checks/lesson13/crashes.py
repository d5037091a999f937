"""The crashes of lesson 13's typical slips, named by torch's own words (torch_errors.py): `x.max(dim=...)` used as a
tensor, Python's max() or math.exp on tensors, a running statistic started as a Python number, an in-place update
whose right side is larger than its left. Each exercise names those its registry holds (a mistake with a wrong
answer that shows it); torch's line stays below the words."""
from ..evaluation import crashes_named
from ..torch_errors import AMBIGUOUS_BOOL, NOT_TENSOR, ONE_ELEMENT, OUTPUT_BROADCAST, RETURN_TYPES, found


def _float_start(match):
    return match["op"] == "maximum" and match["got"] in ("float", "int")


CRASHES = [(RETURN_TYPES, "max_namedtuple", None), (AMBIGUOUS_BOOL, "python_max", None),
           (ONE_ELEMENT, "math_function", None), (NOT_TENSOR, "float_start", _float_start),
           (OUTPUT_BROADCAST, "scalar_inplace", lambda match: match["shape"] == ""),
           (OUTPUT_BROADCAST, "inplace_broadcast", lambda match: match["shape"] != "")]


def naming_crashes(M):
    """A decorator: the check's learner crashes listed in CRASHES get the words of the registry `M`'s entry."""
    def symptom_of(text, _check):
        raised = text.partition(": ")[2]
        for pattern, key, test in CRASHES:
            match = found(pattern, raised)
            if match and key in M and (test is None or test(match)):
                mistake = M[key]
                return mistake.at(**{f: match[f] for f in mistake.fields}) if mistake.fields else mistake
        return None
    return crashes_named(symptom_of)
