"""Every torch (and NumPy) error text the checks read (course_utils/checks/torch_errors.py) is raised here by the
pinned torch itself, and matched: a release that rewords a message fails this test, not a learner's check."""
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from course_utils.checks import torch_errors as te


def _pack_unsorted():
    torch.nn.utils.rnn.pack_padded_sequence(torch.zeros(2, 3, 1), torch.tensor([1, 3]), batch_first=True)


def _module_before_init():
    class Block(torch.nn.Module):
        def __init__(self):
            self.f = torch.nn.Linear(2, 2)           # before super().__init__()
    Block()


CRASHES = {
    "BROADCAST": lambda: torch.zeros(2, 4) + torch.zeros(2, 3),
    "EXPAND": lambda: torch.zeros(2, 3).expand(2, 5),
    "MATMUL": lambda: torch.nn.Linear(5, 3)(torch.zeros(6, 4)),
    "BMM": lambda: torch.bmm(torch.zeros(2, 3, 4), torch.zeros(2, 5, 6)),
    "VIEW": lambda: torch.zeros(2, 3, 4).transpose(1, 2).view(2, 12),
    "RESHAPE": lambda: torch.zeros(5).view(2, 3),
    "FLOAT_SIZE": lambda: torch.zeros(2, 12).view(2, 12 / 4, 4),
    "CAT": lambda: torch.cat([torch.zeros(2, 3), torch.zeros(3, 4)], dim=0),
    "DIM_RANGE": lambda: torch.zeros(3).sum(dim=1),
    "NUMPY_AXIS": lambda: np.zeros((2, 2)).sum(axis=2),
    "EMBEDDING_INDEX": lambda: torch.nn.Embedding(3, 2)(torch.tensor([5])),
    "INDEX_BOUNDS": lambda: torch.zeros(5)[torch.tensor(5)],
    "TARGET_DTYPE": lambda: F.cross_entropy(torch.zeros(4, 3), torch.zeros(4)),
    "TARGET_SIZE": lambda: F.cross_entropy(torch.zeros(2, 3, 5), torch.zeros(2, 3, dtype=torch.long)),
    "BATCH_SIZE": lambda: F.cross_entropy(torch.zeros(6, 3), torch.zeros(4, dtype=torch.long)),
    "DTYPE_MIX": lambda: torch.zeros(2, 3) @ torch.zeros(3, 2, dtype=torch.float64),
    "RETURN_TYPES": lambda: torch.exp(torch.zeros(2, 3).max(dim=-1)),
    "AMBIGUOUS_BOOL": lambda: max(torch.zeros(3), torch.ones(3)),
    "ONE_ELEMENT": lambda: math.exp(torch.zeros(3)),
    "OUTPUT_BROADCAST": lambda: torch.zeros(3).mul_(torch.zeros(3, 3)),
    "ENFORCE_SORTED": _pack_unsorted,
    "NORMALIZED_SHAPE": lambda: torch.nn.LayerNorm(4)(torch.zeros(2, 3, 5)),
    "MASK_INDEX": lambda: torch.zeros(3, 4)[torch.ones(2, 4, dtype=torch.bool)],
    "SPLIT_SIZES": lambda: torch.zeros(6).split([2, 3]),
    "NOT_TENSOR": lambda: torch.sqrt(4),
    "INDICES_DTYPE": lambda: F.embedding(torch.zeros(2, dtype=torch.float32), torch.zeros(3, 2)),
    "BOOL_NEGATION": lambda: -torch.ones(2, dtype=torch.bool),
    "RNN_HX": lambda: torch.nn.GRU(2, 3, batch_first=True)(torch.zeros(4, 1, 2), torch.zeros(4, 3)),
    "NARROW": lambda: torch.zeros(12).narrow(0, 12, 1),
    "PARAMETER_ASSIGN": lambda: setattr(torch.nn.Linear(2, 3), "weight", torch.zeros(3, 2)),
    "INVALID_ARGS": lambda: torch.zeros(2, 3).repeat_interleave(2.0, dim=1),
    "MODULE_INIT": _module_before_init,
    "GRAD_DTYPE": lambda: torch.nn.Parameter(torch.tensor(0)),
    "CONV_CHANNELS": lambda: F.conv1d(torch.zeros(2, 11, 3), torch.zeros(5, 3, 2)),
    "BOOL_MASK": lambda: torch.zeros(2, 2).masked_fill(torch.ones(2, 2), 0.0),
    "STACK": lambda: torch.stack([torch.zeros(2, 3, 4, 5), torch.zeros(2, 3, 8, 5)], dim=-2),
}


def test_every_pattern_is_raised_here():
    assert set(CRASHES) == set(te.ALL), f"patterns without a crash here: {set(te.ALL) - set(CRASHES)}"


@pytest.mark.parametrize("name", sorted(CRASHES))
def test_torch_still_says_it_this_way(name):
    with pytest.raises(Exception) as raised:
        CRASHES[name]()
    text = f"{type(raised.value).__name__}: {raised.value}"
    assert te.found(te.ALL[name], text), f"torch {torch.__version__} now says: {text[:300]}"
