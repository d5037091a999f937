"""What exercises 5 and 7 (the cached step, grouped-query attention) share: a probe with values all 1, which an
attention's read-out must give back (each query's weights sum to 1), and with values all 2 (the read-out moves
with the values). It names a property, not a guessed cause: the weights of a query do not sum to 1, or the values
are not what the weights multiply."""
import numpy as np
import torch

from ..core import Mistake, to_numpy
from ..evaluation import call_naming


def weights_unnormalised(shows):
    return Mistake("weights_unnormalised", "with every value equal to 1 {what} should be 1 everywhere, and it is not: "
                   "the weights of a query do not sum to 1 over the keys it may see",
                   hint="a softmax over the last axis, the masked scores set to -inf before it, each score q·k "
                   "divided by √d before it", shows=shows)


def values_ignored(shows):
    return Mistake("values_ignored", "{what} does not change when the values change (all 1, then all 2): the "
                   "read-out is the weights times the values v you are given",
                   hint="check that it is v, not k or q, that the weights multiply", shows=shows)


def unnormalised(ev, M, errors, answer, args, values, what):
    """M.weights_unnormalised or M.values_ignored when `answer`, given values (the arguments at the indices
    `values`) that are all 1, does not return 1 everywhere; None when it does."""
    def run(fill):
        out = call_naming(ev, errors, answer, *[torch.full_like(a, fill) if i in values else a
                                                for i, a in enumerate(args)])
        return out[0] if isinstance(out, (tuple, list)) else out
    out = run(1.0)
    if hasattr(out, "shape") and not np.allclose(to_numpy(out), 1.0, atol=1e-4):
        twice = run(2.0)
        if hasattr(twice, "shape") and twice.shape == out.shape and np.allclose(to_numpy(twice), to_numpy(out)):
            return M.values_ignored.at(what=what)
        return M.weights_unnormalised.at(what=what)
    return None
