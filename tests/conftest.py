"""Fixtures for the unit tests (settings for every pytest run are in ../conftest.py)."""
import pytest
import torch


@pytest.fixture(autouse=True, scope="session")
def one_thread():
    """The tests' models are tiny: one thread is fastest and does not fight other jobs for the cores."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


# The grader moves every check's seeds by an offset the notebook cannot know: a mistake must be named under any
# offset, not only under the notebook's (0). The check tests that take this fixture
# (`pytestmark = pytest.mark.usefixtures("any_seed_offset")`) run once per offset: the notebook's, and one far from
# it (as tests/test_exercises.py does for every registered mistake); the full sweep of the catalogues of slips
# (tools/measure_slips.py --all) uses 16.
SEED_OFFSETS = (0, 40_009)


@pytest.fixture(params=SEED_OFFSETS, ids=lambda offset: f"offset{offset}")
def any_seed_offset(request, monkeypatch):
    """Every check run in the test (`check(fn)`, `check.evaluate(fn)`, `check.strict(fn)`) draws its inputs
    from its seeds + this offset, as the grader's checks do."""
    from course_utils.checks.core import Exercise

    monkeypatch.setattr(Exercise.evaluate, "__defaults__", (request.param,))
    return request.param
