"""course_utils.notebook_client: a missed wake-up costs one slice, not the cell's whole timeout; the same messages,
timeouts and errors otherwise; and a real notebook runs with it."""
import asyncio
import time
from queue import Empty

import nbformat
import pytest

from course_utils.notebook_client import SteadyNotebookClient, sliced


class MissesFirstWakeUp:
    """A channel's get_msg whose first poll misses the message that is already there: it returns it only when a
    poll starts after it (as pyzmq's asyncio poller does at the end of its timeout)."""

    def __init__(self):
        self.polls = []

    async def get_msg(self, timeout=None):
        self.polls.append(timeout)
        if len(self.polls) == 1:
            await asyncio.sleep(timeout if timeout is not None else 3600)
            raise Empty
        return {"msg_type": "execute_reply"}


def test_a_missed_wake_up_costs_one_slice_not_the_whole_timeout():
    channel = MissesFirstWakeUp()
    start = time.monotonic()
    msg = asyncio.run(sliced(channel.get_msg, slice_seconds=0.05)(timeout=900))
    assert msg == {"msg_type": "execute_reply"} and time.monotonic() - start < 5
    assert channel.polls[0] == 0.05, "each poll lasts one slice at most"


def test_the_whole_timeout_still_ends_in_empty():
    async def never(timeout=None):
        await asyncio.sleep(timeout)
        raise Empty

    start = time.monotonic()
    with pytest.raises(Empty):
        asyncio.run(sliced(never, slice_seconds=0.05)(timeout=0.3))
    assert 0.25 < time.monotonic() - start < 3


def test_a_notebook_runs_with_the_same_outputs_and_timeouts():
    from nbclient.exceptions import CellTimeoutError

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("import time; time.sleep(1.2); print('hi')"),
                                         nbformat.v4.new_code_cell("1 + 1")])
    SteadyNotebookClient(nb, timeout=60, kernel_name="python3").execute()
    assert nb.cells[0].outputs[0]["text"] == "hi\n" and nb.cells[1].outputs[0]["data"]["text/plain"] == "2"
    slow = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("import time; time.sleep(30)")])
    start = time.monotonic()
    with pytest.raises(CellTimeoutError):
        SteadyNotebookClient(slow, timeout=2, kernel_name="python3").execute()
    assert time.monotonic() - start < 25
