"""Mistakes as data: each exercise's known mistakes, written once, read by its check, its test and the measure.

A `Mistake` is a key, the words the learner reads, the code-level hint they may ask for, and the wrong answer
that shows it:

    M = Mistakes(
        Mistake("no_scale", "the scores are not scaled: their spread grows with d_k and the softmax saturates",
                hint="divide q kᵀ by math.sqrt(d_k) before the softmax", shows=wrong_attention(scale=False)),
        Mistake("softmax_axis", "the softmax runs over axis {axis}, the {name} axis: each query's weights must "
                "sum to 1 over the keys", shows=wrong_attention(dim=0)),
    )

    @exercise("scaled dot-product attention", mistakes=M, random=True)
    def attention(ev, answer):
        ...
        ev.expect_close(weights, expected, "the weights", mistakes={M.no_scale: M.no_scale.run(q, k, v)[1]})
        expect(condition, M.softmax_axis.at(axis=0, name="batch"))

- the check names a mistake by its entry (`M.no_scale`, or `M.no_scale.at(**fields)` for words with fields);
  the message the learner reads is the entry's `says`, and the outcome carries its `key`;
- the words say what the answer breaks (the property, where), never the code; the `hint` holds the code-level
  fix, shown only when the learner asks for it (`check.NAME.hint()`, core.py);
- `shows` is the wrong answer (a function or class with the exercise's signature) that makes the check name
  this key: tests/test_mistakes.py runs every entry of every exercise and asserts its KEY, never its prose, and
  tools/measure_slips.py counts the catalogues of learners' slips by the same keys. Where the check detects a
  mistake by its values, it computes them from `shows` itself (`M.no_scale.run(...)`), so that the mistake is
  written once.

The framework's own findings (a wrong shape, NaN, the values in another order, a transposed matrix, a constant
factor, ...) have keys too, in GENERIC below; a few are BARE: they say that something is wrong, not what.
"""
import string
from typing import Callable, NamedTuple, Optional


class Said(NamedTuple):
    """A mistake as one check names it: its key, its words with their fields filled in, its hint."""
    key: str
    says: str
    hint: str = ""

    def __str__(self):
        return self.says


class Mistake:
    """One known mistake of one exercise (see the module's docstring)."""

    def __init__(self, key: str, says: str, hint: str = "", shows: Optional[Callable] = None, note: str = ""):
        if not key.replace("_", "").replace(".", "").isalnum():
            raise ValueError(f"a mistake's key is an identifier (letters, digits, _ and .), got {key!r}")
        self.key, self.says, self.hint, self.shows, self.note = key, says, hint, shows, note
        self.fields = {name for _, name, _, _ in string.Formatter().parse(says + hint) if name}

    def __repr__(self):
        return f"Mistake({self.key!r})"

    def at(self, **fields) -> Said:
        """The words with `fields` filled in (e.g. the row, the axis where the answer breaks the property)."""
        return Said(self.key, self.says.format(**fields), self.hint.format(**fields) if self.hint else "")

    def said(self) -> Said:
        return self.at() if not self.fields else Said(self.key, self.says, self.hint)

    def run(self, *args, **kwargs):
        """What the wrong answer gives on these inputs (for a check that names the mistake by its values)."""
        return self.shows(*args, **kwargs)

    # A Mistake is used as the key of a check's `mistakes={...}` dictionary: hashed by identity.
    __hash__ = object.__hash__


class Mistakes:
    """One exercise's registry: its mistakes by key, in the order they were written (`M.no_scale`, `M["no_scale"]`,
    `for mistake in M`)."""

    def __init__(self, *mistakes: Mistake):
        self._by_key = {}
        for mistake in mistakes:
            if mistake.key in self._by_key:
                raise ValueError(f"two mistakes share the key {mistake.key!r}")
            if mistake.key in GENERIC:
                raise ValueError(f"{mistake.key!r} is a key of the framework's own findings (mistakes.GENERIC)")
            self._by_key[mistake.key] = mistake

    def __getattr__(self, key):
        try:
            return self.__dict__["_by_key"][key]
        except KeyError:
            raise AttributeError(f"no mistake registered under the key {key!r}") from None

    def __getitem__(self, key):
        return self._by_key[key]

    def __iter__(self):
        return iter(self._by_key.values())

    def __len__(self):
        return len(self._by_key)

    def __contains__(self, key):
        return key in self._by_key

    def keys(self):
        return list(self._by_key)

    def variants(self, mistakes, *args, pick=None, **kwargs):
        """{mistake: what its wrong answer gives on these inputs (through `pick`)} for the `mistakes` (entries or keys)
        whose wrong answer runs on them; one that cannot (a transposed product on non-square scores) does not apply
        here. The values a check names mistakes by (`ev.expect_close(..., mistakes=M.variants(...))`)."""
        import warnings

        found = {}
        for mistake in mistakes:
            mistake = self[mistake] if isinstance(mistake, str) else mistake
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    result = mistake.run(*args, **kwargs)
                found[mistake] = pick(result) if pick is not None else result
            except Exception:  # noqa: BLE001 - a mistake that cannot happen on these inputs
                continue
        return found

    def __add__(self, other):
        return Mistakes(*self, *other)


def said(symptom) -> Said:
    """A symptom as a `Said`: a Mistake or a Said as it is; plain words (a check not yet keyed) with no key."""
    if isinstance(symptom, Said):
        return symptom
    if isinstance(symptom, Mistake):
        return symptom.said()
    return Said("", str(symptom))


# The framework's own findings (expectations.py, probes.py, evaluation.py, core.py), by key. Their words are
# written where they are found, since they carry the shapes and values of the answer.
GENERIC = {
    # what an answer returns
    "none": "the result is None (a missing `return`)",
    "count": "the wrong number of values returned",
    "order": "the right values returned in another order",
    "shape": "a result of the wrong shape",
    "shape.transposed": "a result whose last two axes are swapped",
    "not_array": "a result that is not an array",
    "not_callable": "something other than a function or class handed to the check",
    "in_place": "an input changed in place",
    "exit": "the answer called exit()",
    "dtype.integer": "integers where floats were expected",
    "dtype.low": "a low-precision float (float16, bfloat16)",
    # properties of the values
    "not_finite": "NaN or inf where the expected values are finite",
    "distribution.not_finite": "weights with NaN or inf",
    "distribution.negative": "weights with negative entries",
    "distribution.sums": "weights that do not sum to 1 over the axis asked for",
    "transposed": "a matrix whose last two axes are swapped",
    "sign": "every value negated",
    "factor": "every value off by one constant factor",
    "unnormalised": "values proportional to the right ones along the last axis",
    "neighbour": "a neighbouring function of the right values (log, exp, square, square root, softmax)",
    "shifted": "the right values shifted by one position",
    "reversed": "the right values in reverse order",
    "permuted": "the right values in another order along one axis",
    "off_by_one": "every value off by one",
    "swapped_args": "two arguments' roles exchanged",
    "missing_term": "an argument's term left out (as if it were all zeros or ones)",
    "ambiguous": "values that several known mistakes give alike on the input that showed them",
    # what does not name a mistake
    "values": "wrong values that no known mistake explains",
    "crash": "the answer raised an exception of its own",
    "unchecked": "an answer the check could not use",
}

# Findings that say that something is wrong but not what: a catalogued slip that gets one of these is "bare".
BARE = frozenset({"values", "crash", "unchecked", "not_finite", "permuted"})
