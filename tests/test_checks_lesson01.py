"""Lesson 01: what the checks' registries cannot say (every check's reference, right answers and registered mistakes
are run by tests/test_exercises.py): the inputs are drawn again where a saturated softmax would hide a mistake."""
from course_utils.checks import lesson01
from course_utils.checks.lesson01.single_query_attention import M


def test_a_saturated_softmax_does_not_hide_the_scale_mistake():
    """Scores are drawn again until each scale mistake has weights of its own: at these offsets the first draw
    saturated the softmax, and a doubled scale looked like a missing one."""
    for offset in (272422, 849066):
        outcome = lesson01.single_query_attention.evaluate(M.scale_multiplied.shows, seed_offset=offset)
        assert outcome.key == "scale_multiplied", outcome.message
