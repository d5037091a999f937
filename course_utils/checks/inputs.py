"""What a check gives the learner's function: seeded inputs, handed over as copies.

- the seeds: every random input of a check comes from its evaluation's `ev.rng(seed)` (evaluation.py). In a
  notebook the seeds are fixed, so a check gives the same message every time; the grader moves them by an
  offset the notebook cannot know, so that a table of answers recorded from the reference earns nothing.
  `randn(generator, *shape)` turns such a generator's draws into a float32 tensor.
- `given(args, kwargs)`: the learner's function receives copies of the check's arrays and tensors, so the
  expected values are always computed from inputs the learner's code never touched;
  `changed(...)` then names every argument the function modified in place.
"""
import inspect

import numpy as np


def randn(generator, *shape, scale=1.0):
    """A float32 torch tensor of normal samples drawn from the NumPy `generator`."""
    import torch

    return torch.as_tensor(generator.normal(size=shape) * scale, dtype=torch.float32)


def _is_tensor(x):
    return type(x).__module__.startswith("torch") and hasattr(x, "clone") and hasattr(x, "dtype")


def _copy(x):
    """A copy of an array or tensor (through lists, tuples and dicts); anything else is passed as it is.
    Tensors are cloned inside autograd, so gradients still reach the check's own tensors."""
    if isinstance(x, np.ndarray):
        return x.copy()
    if _is_tensor(x):
        return x.clone()
    if isinstance(x, (list, tuple)) and not hasattr(x, "_fields"):
        return type(x)(_copy(v) for v in x)
    if isinstance(x, dict):
        return {k: _copy(v) for k, v in x.items()}
    return x


def given(args, kwargs):
    """Copies of a call's positional and keyword arguments."""
    return tuple(_copy(a) for a in args), {k: _copy(v) for k, v in kwargs.items()}


def _equal(a, b):
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.shape == b.shape and np.array_equal(
            a, b, equal_nan=a.dtype.kind in "fc")
    if _is_tensor(a):
        import torch

        if not _is_tensor(b) or a.shape != b.shape or a.dtype != b.dtype:
            return False
        a, b = a.detach(), b.detach()
        same = a == b
        if a.dtype.is_floating_point:
            same |= torch.isnan(a) & torch.isnan(b)
        return bool(same.all())
    if isinstance(a, (list, tuple)) and not hasattr(a, "_fields"):
        return isinstance(b, (list, tuple)) and len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    return True                                   # not copied, not compared


def argument_names(answer, count):
    """The names of `answer`'s first `count` positional parameters ("argument 1", ... where unknown)."""
    answer = getattr(answer, "forward", answer)               # an nn.Module: the names of its forward
    try:
        params = [p.name for p in inspect.signature(answer).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    return [params[i] if i < len(params) else f"argument {i + 1}" for i in range(count)]


def changed(answer, originals, copies):
    """Names of the arguments whose copy `answer` modified: (args, kwargs) before and after."""
    (args, kwargs), (args_given, kwargs_given) = originals, copies
    names = argument_names(answer, len(args))
    out = [name for name, a, b in zip(names, args, args_given) if not _equal(a, b)]
    return out + [k for k in kwargs if not _equal(kwargs[k], kwargs_given[k])]
