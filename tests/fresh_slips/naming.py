"""What counts as naming a slip, for the sweep of the catalogues (tools/measure_slips.py) and its test.

A slip is named when every seed offset rejects it with a key that names a mistake (mistakes.py: a key of the
exercise's registry or a finding of the framework's that is not BARE) and the same key under every offset. A
message written without a key (a check not moved onto the registry yet) counts by its words: none of the bare
words below, and the same words, numbers aside, under every offset."""
import re

from course_utils.checks.mistakes import BARE as BARE_KEYS

BARE = ("wrong values (largest difference", "contains NaN or inf where", "could not be checked",
        "your function raised", "in the wrong order along axis", "Traceback")


def family(message):
    """The message without its numbers and asides in parentheses (which say more under some offsets)."""
    message = re.sub(r"\s*\([^()]*\)", "", message)
    return re.sub(r"[-+]?\d+(\.\d+)?(e[-+]?\d+)?", "#", message)[:120]


def bare(outcome):
    """True when `outcome` (a wrong one) says that something is wrong but not what."""
    if getattr(outcome, "key", ""):
        return outcome.key in BARE_KEYS
    return any(words in outcome.message for words in BARE)


def name(outcome):
    """What a wrong outcome names: its key, or for words without a key, their family."""
    return getattr(outcome, "key", "") or "words: " + family(outcome.message)


def verdict(outcomes):
    """One slip's outcomes under several offsets: 'accepted' (some offset passes it), 'bare' (some message names
    nothing), 'inconsistent' (different keys, or words of different families), else 'named'."""
    if any(outcome.passed for outcome in outcomes):
        return "accepted"
    if any(bare(outcome) for outcome in outcomes):
        return "bare"
    return "named" if len({name(outcome) for outcome in outcomes}) == 1 else "inconsistent"
