"""The two ways a check says an answer is wrong."""


class ExerciseError(AssertionError):
    """A learner's answer is wrong; the message says what to look at.

    key: the mistake it names (an exercise's registered key, or one of the framework's, mistakes.GENERIC), "" where
    the words were written without one; hint: the code-level hint the learner may ask for (core.Exercise.hint)."""

    def __init__(self, message="", key="", hint=""):
        super().__init__(message)
        self.key, self.hint = key, hint


class ValuesDiffer(ExerciseError):
    """The answer has the right shape but not the right values, and no mistake listed by the check
    explains it (the message may still name a mistake any exercise can make)."""
