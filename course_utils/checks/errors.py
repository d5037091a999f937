"""The two ways a check says an answer is wrong."""


class ExerciseError(AssertionError):
    """A learner's answer is wrong; the message says what to look at."""


class ValuesDiffer(ExerciseError):
    """The answer has the right shape but not the right values, and no mistake listed by the check
    explains it (the message may still name a mistake any exercise can make)."""
