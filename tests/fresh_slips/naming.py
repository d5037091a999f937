"""What counts as naming a slip, for the test (tests/test_checks_fresh_slips.py) and for the tool that measures a
new catalogue before any check is changed for it (tools/measure_slips.py)."""
import re

BARE = ("wrong values (largest difference", "contains NaN or inf where", "could not be checked",
        "your function raised", "in the wrong order along axis", "Traceback")


def family(message):
    """The message without its numbers and asides in parentheses (which say more under some offsets)."""
    message = re.sub(r"\s*\([^()]*\)", "", message)
    return re.sub(r"[-+]?\d+(\.\d+)?(e[-+]?\d+)?", "#", message)[:120]


def verdict(outcomes):
    """One slip's outcomes under several offsets: 'accepted' (some offset passes it), 'bare' (some message names
    nothing), 'inconsistent' (messages of different families), else 'named'."""
    if any(outcome.passed for outcome in outcomes):
        return "accepted"
    if any(words in outcome.message for outcome in outcomes for words in BARE):
        return "bare"
    return "named" if len({family(outcome.message) for outcome in outcomes}) == 1 else "inconsistent"
