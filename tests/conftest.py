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
