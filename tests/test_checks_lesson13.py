"""Lesson 13: what the registries cannot hold. Exercise 1a's point is tested as a property, measured where the
learner's code runs (course_utils/checks/lesson13/stream.py): what an answer keeps must not grow with the number of
blocks. These tests hold the measure to what it claims: it leaves torch's function modes as it found them, however
the answer leaves its loop, and it works under the instructor's grader, where the blocks are handed out in the
learner's kernel. (Every check's reference, right answers and registered mistakes are run by tests/test_exercises.py,
from the checks' registries.)"""
import torch

from course_utils import efficient_attention as ref
from course_utils.checks import exercises
from course_utils.checks.block_stream import BlocksKept, OneAtATime
from course_utils.checks.grading import judge
from course_utils.checks.lesson13.online_softmax_mistakes import cloned_then_second_pass, crashing, online, two_loops


def _returns_inside_the_loop(blocks):
    for block in blocks:
        return block.amax(-1), block.exp().sum(-1)


def _peeks(blocks):
    first = next(iter(blocks))
    return first.amax(-1), first.exp().sum(-1)


def test_the_stream_leaves_torch_s_function_modes_as_it_found_them():
    x = torch.randn(6, 64)
    depth = torch._C._len_torch_function_stack()
    for answer in (ref.online_softmax, cloned_then_second_pass, two_loops, _returns_inside_the_loop, _peeks,
                   crashing("python_max")):
        stream = OneAtATime(x, 2, 8)
        try:
            answer(stream)
        except (BlocksKept, ref.BlocksReadTwice, RuntimeError):
            pass
        stream.close()
        assert torch._C._len_torch_function_stack() == depth, answer


def test_the_stream_counts_what_is_kept_not_what_passes():
    """A one-pass answer keeps nothing per block; one that keeps a copy of every block, or the blocks themselves,
    grows by a block's worth of numbers per block."""
    x = torch.randn(6, 64)
    stream = OneAtATime(x, 2, 8)
    m, ell = ref.online_softmax(stream)
    assert stream.grew is None and torch.allclose(m, x.amax(-1))
    for keeps in (cloned_then_second_pass, lambda blocks: torch.cat(list(blocks), -1)):
        stream = OneAtATime(x, 2, 8)
        try:
            keeps(stream)
        except BlocksKept:
            pass
        assert stream.grew == (6 * 2 * 24, 24), stream.grew


def test_the_one_pass_property_holds_under_the_grader():
    """Through the grader's judge and kernel side (over their socket, the kernel side serving from a thread): the
    stream is pickled into the kernel and counts there; a copy kept of every block is named, a one-pass answer
    passes."""
    from tests.test_grade_probes import served

    checks = [c for c in exercises()["13"] if c.learner_name == "online_softmax"]
    for answer, status in ((cloned_then_second_pass, "wrong"), (online, "passed")):
        with served({"online_softmax": answer}) as channel:
            outcome, message = judge.judge(channel, checks, check_timeout=120, offset=3)["online_softmax"]
        assert outcome == status, message
        assert status == "passed" or "grows with the number of blocks" in message, message


def test_a_grader_kernel_without_this_lesson_s_checks_skips_only_the_count():
    """Under `--withhold-references` the learner's kernel has no checks/lesson13/, so the stream cannot be unpickled
    there (the grader says so with a GraderFault): the check goes on with the values' tests instead of failing."""
    from course_utils.checks.lesson13 import online_softmax

    class GraderFault(BaseException):
        pass

    def answer(blocks):
        if isinstance(blocks, OneAtATime):
            raise GraderFault("the kernel could not answer: ModuleNotFoundError: No module named "
                              "'course_utils.checks.lesson13.stream'; 'course_utils.checks.lesson13' is not a package")
        return online(blocks)

    assert online_softmax.evaluate(answer).passed
