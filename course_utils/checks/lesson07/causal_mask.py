"""Lesson 07, exercise 2: the causal mask.

    causal_mask(T) -> (T, T) bool, True on and below the diagonal (query t may attend to keys 0..t)

The check draws no random input: it compares the mask for T = 4, 7 and 1 with the right one.
"""
import torch

from ... import masks
from ..core import Mistake, Mistakes, exercise, single_threaded
from ..evaluation import Evaluation
from .masks import as_float, expect_bool_tensor, not_bool, not_tensor


def _ones(T):
    return torch.ones(T, T, dtype=torch.bool)


M = Mistakes(
    not_tensor(shows=lambda T: masks.causal_mask(T).numpy()),
    not_bool(shows=lambda T: torch.tril(torch.ones(T, T))),
    Mistake("future", "the mask allows the FUTURE and hides the past: query t may see keys 0..t, on and below the "
            "diagonal", hint="torch.tril", shows=lambda T: torch.triu(_ones(T), 1)),
    Mistake("upper", "the mask is transposed (True on and above the diagonal): rows are queries and columns "
            "keys, so row t is True for columns 0..t", shows=lambda T: torch.triu(_ones(T))),
    Mistake("no_diagonal", "the diagonal is masked: a position may attend to itself",
            hint="the `diagonal` argument of torch.tril", shows=lambda T: torch.tril(_ones(T), -1)),
    Mistake("one_ahead", "query t may also see key t+1, one step into the future: the mask is True on and below "
            "the diagonal only", shows=lambda T: torch.tril(_ones(T), 1)),
    Mistake("hides_nothing", "the mask is all True, so it hides nothing: query t must not see the keys after t",
            shows=_ones),
)


@exercise("causal mask", reference=masks.causal_mask, mistakes=M, random=False,
          right=[lambda T: torch.arange(T)[:, None] >= torch.arange(T)[None, :]])
@single_threaded
def causal_mask(ev: Evaluation, answer):
    """answer(T) -> (T, T) bool, True on and below the diagonal."""
    tests = 0
    for T in (4, 7, 1):
        mask = ev.call(answer, T)
        expect_bool_tensor(mask, f"causal_mask({T})", (T, T), M)
        ev.expect_close(as_float(mask), as_float(masks.causal_mask(T)), f"causal_mask({T})",
                        mistakes=M.variants(("future", "upper", "no_diagonal", "one_ahead", "hides_nothing"), T,
                                            pick=as_float))
        tests += 1
    return tests
