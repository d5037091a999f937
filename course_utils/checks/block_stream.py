"""Lesson 13, exercise 1a's point, tested as a property: ONE pass over the blocks, keeping state that does not grow
with the number of blocks.

`OneAtATime(x, block_size, count_from)` hands out the columns of x (R, n) in blocks of `block_size`, one at a
time and once, as `column_blocks` does (the block passed is overwritten with NaN, a second pass raises
BlocksReadTwice); and it counts what the answer keeps: every tensor a torch function or tensor method returns
while the answer runs (a `TorchFunctionMode`, pushed while the stream is open: it sees `.clone()`, `torch.cat`,
`torch.stack`, a list of blocks), and every block it handed out that is still alive. At block `count_from` and
after the last block it adds up the storage of what is still alive (the block just passed left out: the loop's
variable still holds it); when that grew by at least half a number per row per block in between, the answer
keeps something per block (the blocks, copies of them, their maxima), and the stream raises BlocksKept at its
end: an online softmax keeps m and l, one number each per row, whatever the number of blocks.

The count runs where the stream is iterated: in this process for a notebook's function; under the instructor's grader
the stream is pickled into the learner's kernel and raises there, and the exception comes back with the learner's (its
name and words). It lives beside measure.py, outside the lesson's package, so that the kernel's copy of the package
keeps it when the grader withholds the lesson's checks and references (--withhold-references). Like every measure
taken in the learner's process it is a witness: code that switches torch's function modes off, or keeps the blocks as
Python numbers or NumPy copies, can hide from it.
"""
import weakref

import torch
from torch.overrides import TorchFunctionMode

from ..efficient_attention import BlocksReadTwice


class BlocksKept(RuntimeError):
    """What an answer keeps grows with the number of blocks it is handed."""


class _Made(TorchFunctionMode):
    """Weak references to every tensor a torch function or method returns while it is pushed."""

    def __init__(self):
        super().__init__()
        self.refs = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        for t in result if isinstance(result, (tuple, list)) else (result,):
            if isinstance(t, torch.Tensor):
                try:
                    self.refs.append(weakref.ref(t))
                except TypeError:                  # (a tensor type that takes no weak reference)
                    pass
        return result


def _remove(mode):
    """Take `mode` off torch's stack of function modes wherever it is (a generator closed late may find other
    modes above it), putting back those above it."""
    above = []
    while torch._C._len_torch_function_stack():
        top = torch._C._pop_torch_function_stack()
        if top is mode:
            break
        above.append(top)
    for other in reversed(above):
        torch._C._push_on_torch_function_stack(other)


def _alive(refs, leave_out):
    """The elements of the storages still alive among `refs` (each storage once), `leave_out` (a data pointer)
    left out."""
    storages = {}
    for ref in refs:
        t = ref()
        if t is None:
            continue
        storage = t.untyped_storage()
        if storage.data_ptr() != leave_out:
            storages[storage.data_ptr()] = storage.nbytes() // max(t.element_size(), 1)
    return sum(storages.values())


class OneAtATime:
    """The columns of x (..., n) in blocks of `block_size`, handed out once, one at a time; what the answer keeps
    counted from block `count_from` to the end (see the module's docstring)."""

    def __init__(self, x, block_size, count_from):
        self.x, self.block_size, self.count_from = x.detach().clone(), int(block_size), int(count_from)
        self.passes, self.grew = 0, None          # grew: (elements, blocks) when the stream found growth
        self._open = []

    def __len__(self):
        return -(-self.x.shape[-1] // self.block_size)

    def __repr__(self):
        return (f"<blocks: {len(self)} blocks of {self.block_size} columns, rows {tuple(self.x.shape[:-1])}, "
                "handed out once>")

    def __getstate__(self):                      # (pickled into the learner's kernel by the grader)
        return {"x": self.x, "block_size": self.block_size, "count_from": self.count_from}

    def __setstate__(self, state):
        self.__init__(state["x"], state["block_size"], state["count_from"])

    def __iter__(self):
        if self.passes:
            raise BlocksReadTwice("the blocks of a row can be read only once, in ONE pass: update m and l from each "
                                  "block as it arrives (a second loop over the blocks is a second pass)")
        self.passes += 1
        stream = self._hand_out()
        self._open.append(weakref.ref(stream))
        return stream

    def close(self):
        """Close a pass the answer left open (it returned from inside its loop), so that its count stops."""
        for ref in self._open:
            stream = ref()
            if stream is not None:
                stream.close()

    def _hand_out(self):
        made, handed, block, counted = _Made(), [], None, None
        rows, n = int(self.x[..., :1].numel()), self.x.shape[-1]
        torch._C._push_on_torch_function_stack(made)
        try:
            for index, j0 in enumerate(range(0, n, self.block_size)):
                with torch._C.DisableTorchFunction():
                    if block is not None:
                        block.fill_(float("nan"))                   # the previous block is gone
                    if index == self.count_from:
                        counted = _alive(made.refs + handed, block.untyped_storage().data_ptr())
                    block = self.x[..., j0:j0 + self.block_size].clone()
                    handed.append(weakref.ref(block))
                yield block
            with torch._C.DisableTorchFunction():
                block.fill_(float("nan"))
                if counted is not None:
                    blocks = len(handed) - self.count_from
                    grown = _alive(made.refs + handed, block.untyped_storage().data_ptr()) - counted
                    if grown * 2 >= blocks * rows:
                        self.grew = (grown, blocks)
                        raise BlocksKept(f"what your function keeps grew by {grown} numbers over the last {blocks} "
                                         f"blocks of {rows} rows")
        finally:
            _remove(made)
