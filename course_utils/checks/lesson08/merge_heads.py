"""Lesson 08, exercise 1b: merging the heads back, the inverse of split_heads.

    merge_heads(x (B, num_heads, T, d_head)) -> (B, T, num_heads * d_head)

Position t's output concatenates head 1's d_head features, then head 2's, ... The check compares the result with
the course's merge_heads on three shapes (the first is the notebook's num_heads = 3, the others are not), names
the typical reshapes and permutes by their values, an answer that holds x's numbers in other places, the crashes
of a view of a transposed tensor and of sizes that do not fit, and that merge_heads undoes split_heads. It never
runs the learner's split_heads (a wrong split does not spoil the merge's verdict).
"""
from ... import attention as ref
from ..core import Mistake, Mistakes, exercise, single_threaded
from ..evaluation import Evaluation
from .crashes import naming_crashes, reshape_sizes, view_transposed
from .heads import rearranged, rearranged_mistake, x_of

NOTEBOOK_NUM_HEADS = 3          # the notebook's running example, which a slip reads instead of x's own size
HOW = "x.transpose(1, 2).reshape(B, T, num_heads * d_head)"


def _merge_notebook_heads(x):
    B, _, T, d_head = x.shape
    return x.transpose(1, 2).reshape(B, T, NOTEBOOK_NUM_HEADS * d_head)


M = Mistakes(
    Mistake("no_transpose", "the heads are merged in the wrong order: (B, num_heads, T, d_head) reshaped directly "
            "mixes the positions; move time back in front of the heads, (B, T, num_heads, d_head), then merge the "
            "last two axes", hint=HOW, shows=lambda x: x.reshape(x.size(0), x.size(2), -1)),
    Mistake("interleaved", "the features are interleaved across heads: position t must hold head 1's d_head "
            "features, then head 2's, ... (the head axis just before d_head, not after it)",
            hint=".transpose(1, 2), not .permute(0, 2, 3, 1)",
            shows=lambda x: x.permute(0, 2, 3, 1).reshape(x.size(0), x.size(2), -1)),
    Mistake("not_merged", "the result is (B, T, num_heads, d_head): merge its last two axes into "
            "num_heads * d_head features", hint=".reshape(B, T, -1)", shows=lambda x: x.transpose(1, 2)),
    Mistake("along_time", "the heads are stacked along time, (B, num_heads * T, d_head): concatenate them along the "
            "FEATURES, (B, T, num_heads * d_head)", hint=HOW, shows=lambda x: x.reshape(x.size(0), -1, x.size(-1))),
    Mistake("last_axes", "the last two axes (T, d_head) are swapped instead of the heads and time: move time in "
            "front of the heads, (B, T, num_heads, d_head), then merge the last two axes", hint=HOW,
            shows=lambda x: x.transpose(-1, -2).reshape(x.size(0), x.size(2), -1)),
    rearranged_mistake(hint=HOW, shows=lambda x: ref.merge_heads(x).flip(1)),
    view_transposed(shows=lambda x: x.transpose(1, 2).view(x.size(0), x.size(2), -1)),
    reshape_sizes("B, num_heads, T and d_head are x's own sizes, and the result is (B, T, num_heads * d_head)",
                  hint="B, h, T, d_head = x.shape", shows=_merge_notebook_heads),
)
_VALUES = ("no_transpose", "interleaved", "not_merged", "along_time", "last_axes")


@exercise("merge heads", reference=ref.merge_heads, mistakes=M,
          right=[lambda x: x.permute(0, 2, 1, 3).flatten(2)])
@single_threaded
@naming_crashes(M)
def merge_heads(ev: Evaluation, answer):
    """answer(x (B, num_heads, T, d_head)) -> (B, T, num_heads * d_head), the inverse of split_heads."""
    tests = 0
    for seed, (B, h, T, d_head) in enumerate([(2, 3, 5, 4), (1, 4, 7, 2), (3, 2, 4, 6)]):
        x = x_of(ev, seed, B, h, T, d_head)
        out = ev.call(answer, x)
        what = f"merge_heads(x {tuple(x.shape)})"
        with rearranged(out, x, what, M):
            ev.expect_close(out, ref.merge_heads(x), what, mistakes=M.variants(_VALUES, x))
        x = x_of(ev, seed, B, T, h * d_head)
        ev.expect_close(ev.call(answer, ref.split_heads(x, h)), x,
                        "merge_heads(split_heads(x))", hint="merge_heads must undo split_heads.")
        tests += 1
    return tests
