"""How large a tensor the learner's code creates: the measure behind lesson 13's "nothing of size T_q x T_k".

    result, elements, shape = measured(answer, q, k, v)
    # elements: the storage, in elements, of the largest tensor a torch function or tensor method returned
    # while `answer` ran; shape: that tensor's shape (None if it made none)

`Evaluation.call_measured` calls it where the learner's code runs: in this process for a function of the
notebook (the notebook's checks, the tests); in the learner's kernel under the instructor's grader, whose
kernel side loads this file BY PATH (no package: it imports torch only), runs the call under the same mode
and sends the measurement back with the result. The measure is a witness, like the grader's copy watch: code
that runs where it is taken (the learner's) can switch it off, or make its tensors where it does not look
(another thread, NumPy, a C extension).
"""
import torch
from torch.overrides import TorchFunctionMode


class Largest(TorchFunctionMode):
    """Notes the largest tensor (by its storage, in elements) that any torch function or method returns.
    A T_q x T_k tensor is found whatever it is called or however it is built (the scores, P, the whole
    causal mask, a broadcast product). (A function mode: a dispatch mode would see the same tensors, but its
    first use imports torch._dynamo, seconds on a busy machine.) The modes are per thread: it sees the
    thread it is entered in."""

    def __init__(self):
        super().__init__()
        self.elements, self.shape = 0, None

    def __torch_function__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        for t in result if isinstance(result, (tuple, list)) else (result,):
            if isinstance(t, torch.Tensor):
                size = t.untyped_storage().nbytes() // max(t.element_size(), 1)
                if size > self.elements:
                    self.elements, self.shape = size, tuple(t.shape)
        return result


def measured(function, *args, **kwargs):
    """(function(*args, **kwargs), the elements of the largest tensor it created, that tensor's shape or None)."""
    with Largest() as seen:
        result = function(*args, **kwargs)
    return result, int(seen.elements), None if seen.shape is None else tuple(int(n) for n in seen.shape)
