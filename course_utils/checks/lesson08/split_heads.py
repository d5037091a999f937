"""Lesson 08, exercise 1a: splitting the features into heads.

    split_heads(x (B, T, d_model), num_heads) -> (B, num_heads, T, d_head), d_head = d_model // num_heads

Head i takes the contiguous features i*d_head ... (i+1)*d_head - 1 of every position. The check compares the result
with the course's split_heads on three shapes (the first is the notebook's d_model = 12, num_heads = 3; the others
are not, so that sizes read from the notebook's variables show), names the typical reshapes and views by their
values, an answer that holds x's numbers in other places, and the crashes of a float size, a view of a transposed
tensor and sizes that do not fit.
"""
from ... import attention as ref
from ..core import Mistake, Mistakes, exercise, single_threaded
from ..evaluation import Evaluation
from .crashes import float_size, naming_crashes, reshape_sizes, view_transposed
from .heads import rearranged, rearranged_mistake, x_of

NOTEBOOK_D_MODEL = 12           # the notebook's running example, which a slip reads instead of x's own size
HOW = "x.view(B, T, num_heads, d_head).transpose(1, 2)"


def _split_float(x, num_heads):
    B, T, d_model = x.shape
    return x.view(B, T, num_heads, d_model / num_heads).transpose(1, 2)


def _split_notebook_sizes(x, num_heads):
    B, T, _ = x.shape
    return x.view(B, T, num_heads, NOTEBOOK_D_MODEL // num_heads).transpose(1, 2)


def _view_after_transpose(x, num_heads):
    B, T, d_model = x.shape
    return x.transpose(1, 2).view(B, num_heads, T, d_model // num_heads)


M = Mistakes(
    Mistake("cut_across_positions", "the heads are cut across positions: x viewed straight as (B, num_heads, T, "
            "d_head) gives each head runs of numbers that span several time steps; split each position's d_model "
            "features into num_heads blocks first, then move the head axis in front of time", hint=HOW,
            shows=lambda x, h: x.reshape(x.size(0), h, x.size(1), -1)),
    Mistake("strided", "head i takes every num_heads-th feature (i, i + num_heads, ...): it must get the CONTIGUOUS "
            "block of features i·d_head ... (i+1)·d_head - 1", hint="view as (B, T, num_heads, d_head), not "
            "(B, T, d_head, num_heads)", shows=lambda x, h: x.view(x.size(0), x.size(1), -1, h).permute(0, 3, 1, 2)),
    Mistake("no_transpose", "the result is (B, T, num_heads, d_head): the head axis goes in front of time, "
            "(B, num_heads, T, d_head)", hint=".transpose(1, 2)",
            shows=lambda x, h: x.view(x.size(0), x.size(1), h, -1)),
    Mistake("transposed_first", "x is transposed to (B, d_model, T) before the reshape, which then cuts the heads "
            "across the features AND the positions: split each position's features first, then move the head axis",
            hint=HOW, shows=lambda x, h: x.transpose(1, 2).reshape(x.size(0), h, x.size(1), -1)),
    rearranged_mistake(hint=HOW, shows=lambda x, h: ref.split_heads(x, h).flip(2)),
    float_size(shows=_split_float),
    view_transposed(shows=_view_after_transpose),
    reshape_sizes("B, T and d_model are x's own sizes, and d_head = d_model / num_heads",
                  hint="B, T, d_model = x.shape", shows=_split_notebook_sizes),
)
_VALUES = ("cut_across_positions", "strided", "no_transpose", "transposed_first")


@exercise("split heads", reference=ref.split_heads, mistakes=M,
          right=[lambda x, h: x.unflatten(-1, (h, -1)).transpose(1, 2)])
@single_threaded
@naming_crashes(M)
def split_heads(ev: Evaluation, answer):
    """answer(x (B, T, d_model), num_heads) -> (B, num_heads, T, d_head)."""
    tests = 0
    for seed, (B, T, d_model, h) in enumerate([(2, 5, 12, 3), (1, 7, 16, 4), (3, 4, 8, 2)]):
        x = x_of(ev, seed, B, T, d_model)
        out = ev.call(answer, x, h)
        what = f"split_heads(x {tuple(x.shape)}, num_heads={h})"
        with rearranged(out, x, what, M):
            ev.expect_close(out, ref.split_heads(x, h), what, mistakes=M.variants(_VALUES, x, h))
        tests += 1
    return tests
