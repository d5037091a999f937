"""nbclient's NotebookClient, made steady: it never waits a cell's whole timeout for a reply that has come.

    from course_utils.notebook_client import SteadyNotebookClient as NotebookClient

nbclient waits for a cell's reply with ONE poll of the kernel client's socket, as long as the cell's timeout
(e.g. 900 s). Now and then, with the machine busy, the asyncio poller misses the socket's wake-up (zmq's
descriptor signals an edge, not a level: pyzmq issue 1558 describes the same), and the poll then returns the
reply only when its timeout ends: the cell, which took a second, is seen to end 900 s later. Seen in the
course's CI: one or two of fifteen notebooks, 15 minutes each. This client's channels poll in slices of at
most SLICE seconds up to the same deadline, so that a missed wake-up costs at most a slice. Nothing else
changes: the same messages, the same timeouts, the same errors.
"""
import time
from queue import Empty

from nbclient import NotebookClient
from nbclient.util import run_sync

SLICE = 1.0   # seconds: the longest single wait on a socket


def sliced(get_msg, slice_seconds=SLICE):
    """`get_msg(timeout=None)` (an async channel's) as polls of at most `slice_seconds` up to the same deadline:
    the same message, or Empty once the whole timeout has passed (never, for timeout=None)."""

    async def get_msg_in_slices(timeout=None):
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                return await get_msg(timeout=slice_seconds if left is None else min(slice_seconds, left))
            except Empty:
                if left is not None and time.monotonic() >= deadline:
                    raise

    return get_msg_in_slices


class SteadyNotebookClient(NotebookClient):
    """A NotebookClient whose kernel client polls its shell and iopub sockets in slices (see the module)."""

    async def async_start_new_kernel_client(self):
        kc = await super().async_start_new_kernel_client()
        for channel in (kc.shell_channel, kc.iopub_channel):
            channel.get_msg = sliced(channel.get_msg)
        return kc

    start_new_kernel_client = run_sync(async_start_new_kernel_client)
