"""Lesson 07: every check passes the reference and names typical mistakes."""
import math

import pytest
import torch

from course_utils import attention as ref
from course_utils import masks
from course_utils.checks import ExerciseError, lesson07
from tests.checking import named, not_implemented, prints_not_implemented

pytestmark = pytest.mark.usefixtures("any_seed_offset")   # every test under every seed offset


def reference_attention(q, k, v, mask=None):
    return ref.scaled_dot_product_attention(q, k, v, mask, need_weights=True)


@pytest.mark.parametrize("check, reference", [
    (lesson07.scaled_dot_product_attention, reference_attention),
    (lesson07.causal_mask, masks.causal_mask),
    (lesson07.padding_mask, masks.padding_mask),
    (lesson07.sliding_window_mask, masks.sliding_window_mask),
])
def test_reference_passes_and_stub_is_not_implemented(check, reference, capsys):
    assert check(reference) is None
    assert "✔" in capsys.readouterr().out
    with prints_not_implemented():
        check(not_implemented)


def make_attention(scale=True, dim=-1, invert=False, fill=float("-inf"), guard=True, after=False, divisor=None,
                   transposed=False, by_max=False):
    def attention(q, k, v, mask=None):
        scores = k @ q.transpose(-2, -1) if transposed else q @ k.transpose(-2, -1)
        if divisor is not None:
            scores = scores / divisor(q, k, v)
        elif scale:
            scores = scores / math.sqrt(q.size(-1))
        if by_max:
            if mask is not None:
                scores = scores.masked_fill(~mask, float("-inf"))
            weights = (scores - scores.amax(-1, keepdim=True)).exp()
            return weights @ v, weights
        if mask is not None:
            keep = ~mask if invert else mask
            if after:
                weights = scores.softmax(dim) * keep
                return weights @ v, weights
            if guard:
                has_key = keep.any(-1, keepdim=True)
                weights = scores.masked_fill(~(keep | ~has_key), fill).softmax(dim) * has_key
            else:
                weights = scores.masked_fill(~keep, fill).softmax(dim)
        else:
            weights = scores.softmax(dim)
        return weights @ v, weights
    return attention


@pytest.mark.parametrize("mistake, symptom", [
    (make_attention(scale=False), "missing scale"),
    (make_attention(dim=-2), "wrong axis"),
    (make_attention(invert=True), "mask is inverted"),
    (make_attention(after=True), "after the softmax"),
    (make_attention(fill=0.0), "set to 0"),
    (make_attention(guard=False), "NaN"),
    (make_attention(guard=False, fill=-1e9), "uniform weights"),
    (make_attention(divisor=lambda q, k, v: math.sqrt(v.size(-1))), r"sqrt\(d_v\)"),
    (make_attention(divisor=lambda q, k, v: math.sqrt(k.size(-2))), r"sqrt\(T_k\)"),
    (make_attention(divisor=lambda q, k, v: q.size(-1)), "divided by d_k"),
    (make_attention(divisor=lambda q, k, v: 1 / math.sqrt(q.size(-1))), "multiplied by sqrt"),
    (make_attention(by_max=True), "MAXIMUM"),
    (make_attention(transposed=True), "transposed"),
    (make_attention(dim=0), "axis 0, the batch axis"),
    (lambda q, k, v, mask=None: make_attention(dim=1 if q.dim() == 4 else -1)(q, k, v, mask), "axis 1, the head axis"),
    (lambda q, k, v, mask=None: reference_attention(q, k, v, mask)[0], "return 2 things"),
    (lambda q, k, v, mask=None: reference_attention(q, k, v, mask)[::-1], "wrong order"),
    (lambda q, k, v, mask=None: (reference_attention(q, k, k, mask)[0], reference_attention(q, k, v, mask)[1]),
     "instead of the values"),
])
def test_attention_mistakes(mistake, symptom):
    with pytest.raises(ExerciseError, match=symptom):
        lesson07.scaled_dot_product_attention(mistake)


def test_attention_causality_is_checked():
    def leaks_future(q, k, v, mask=None):  # applies the mask to the weights only, output uses all keys
        out, weights = reference_attention(q, k, v, mask)
        return reference_attention(q, k, v)[0] if mask is not None and mask.dim() == 2 else out, weights
    with pytest.raises(ExerciseError, match="must not see later positions"):
        lesson07.scaled_dot_product_attention(leaks_future)


@pytest.mark.parametrize("mistake, symptom", [
    (lambda T: torch.triu(torch.ones(T, T, dtype=torch.bool), 1), "allows the FUTURE"),
    (lambda T: torch.triu(torch.ones(T, T, dtype=torch.bool)), "transposed"),
    (lambda T: torch.tril(torch.ones(T, T, dtype=torch.bool), -1), "diagonal is masked"),
    (lambda T: torch.tril(torch.ones(T, T)), "boolean"),
    (lambda T: torch.tril(torch.ones(T, T, dtype=torch.bool), 1), "off by one"),
    (lambda T: torch.ones(T, T, dtype=torch.bool), "hides nothing"),
])
def test_causal_mask_mistakes(mistake, symptom):
    with pytest.raises(ExerciseError, match=symptom):
        lesson07.causal_mask(mistake)


@pytest.mark.parametrize("mistake, symptom", [
    (lambda tokens, pad_id: (tokens == pad_id)[:, None, None, :], "inverted"),
    (lambda tokens, pad_id: tokens != pad_id, r"shape \(B, T\)"),
    (lambda tokens, pad_id: (tokens != pad_id)[:, None, :, None], "masks QUERIES"),
    (lambda tokens, pad_id: (tokens != pad_id)[:, None, :], r"shape \(B, 1, T\)"),
    (lambda tokens, pad_id: (tokens != pad_id).float()[:, None, None, :], "boolean"),
    (lambda tokens, pad_id: (tokens != pad_id)[:, :, None, None], r"shape \(B, T, 1, 1\)"),
    (lambda tokens, pad_id: (tokens != 0)[:, None, None, :], "not with `pad_id`"),
])
def test_padding_mask_mistakes(mistake, symptom):
    with pytest.raises(ExerciseError, match=symptom):
        lesson07.padding_mask(mistake)


def _mask_from_lengths(tokens, pad_id):
    lengths = (tokens != pad_id).sum(dim=1)                      # mistake: assumes the padding is at the end
    return (torch.arange(tokens.size(1))[None, :] < lengths[:, None])[:, None, None, :]


def _mask_up_to_first_pad(tokens, pad_id):
    return (tokens != pad_id).cumprod(dim=1).bool()[:, None, None, :]   # mistake: stops at the first pad


@pytest.mark.parametrize("mistake, symptom", [
    (_mask_from_lengths, r"first n positions .* padded on the LEFT"),
    (_mask_up_to_first_pad, r"positions before its first pad.* padded on the LEFT"),
])
def test_padding_mask_that_assumes_right_padding_is_named(mistake, symptom):
    named(lesson07.padding_mask, mistake, symptom)


def test_the_causal_mask_exercise_does_not_give_its_answer():
    """Exercise 2 describes the mask; neither the learner's notebook (up to the exercise) nor the masks
    diagram writes the code (`~torch.triu(...)`)."""
    import inspect
    import json
    from pathlib import Path

    import diagrams.lesson07

    nb = json.loads((Path(__file__).resolve().parents[1] / "notebooks" / "07_self_attention.ipynb")
                    .read_text(encoding="utf-8"))
    sources = ["".join(c["source"]) for c in nb["cells"]]
    end = next(i for i, s in enumerate(sources) if "check.causal_mask(" in s)
    before = "\n".join(sources[:end + 1])
    for answer in ("triu", "tril"):
        assert answer not in before, f"the learner's notebook names `{answer}` before the causal-mask exercise"
        assert answer not in inspect.getsource(diagrams.lesson07.masks), f"the masks diagram shows `{answer}`"


def window(keep, transpose=False, dtype=torch.bool):
    """A planted sliding_window_mask: keep(t, j, left, right) -> bool (T, T), rows = queries t, columns = keys j."""
    def sliding_window_mask(T, left, right=0):
        t, j = torch.arange(T)[:, None], torch.arange(T)[None, :]
        mask = keep(t, j, left, right)
        return (mask.T if transpose else mask).to(dtype)
    return sliding_window_mask


@pytest.mark.parametrize("mistake, symptom", [
    (window(lambda t, j, left, right: (j >= t - right) & (j <= t + left)), "mirrored"),
    (window(lambda t, j, left, right: (j >= t - left) & (j <= t + right), transpose=True), "mirrored"),
    (window(lambda t, j, left, right: (t - j).abs() <= left), r"symmetric, \|t - j\| <= left"),
    (window(lambda t, j, left, right: (j >= t - left) & (j <= t)), "keys after query t are missing"),
    (window(lambda t, j, left, right: (j > t - left) & (j < t + right)), "both ends of the window are missing"),
    (window(lambda t, j, left, right: (j > t - left) & (j <= t + right)), "first key of the window is missing"),
    (window(lambda t, j, left, right: (j >= t - left) & (j < t + right)), "last key of the window is missing"),
    (window(lambda t, j, left, right: (j >= t - left - 1) & (j <= t + right + 1)), "one key too wide"),
    (window(lambda t, j, left, right: (j < t - left) | (j > t + right)), "inverted"),
    (window(lambda t, j, left, right: (t >= 0) & (j >= 0)), "hides nothing"),
    (window(lambda t, j, left, right: (j >= t - left) & (j <= t + right) & (j != t)), "diagonal is masked"),
    (window(lambda t, j, left, right: (j >= t - left) & (j <= t + right), dtype=torch.int64), "boolean"),
    (lambda T, left, right=0: torch.tril(torch.ones(T, T, dtype=torch.bool), right)     # triu's diagonal: +left
     & torch.triu(torch.ones(T, T, dtype=torch.bool), left), "hides every key.*mind the signs"),
])
def test_sliding_window_mask_mistakes(mistake, symptom):
    named(lesson07.sliding_window_mask, mistake, symptom)


def test_the_window_exercise_does_not_give_its_answer():
    """The sliding-window exercise says what the mask must be; the learner's notebook, up to its check,
    writes no comparison of positions (`j >= t - left`, `(t - j).abs()`), nor the band with torch.tril /
    torch.triu (its docstring states the rule, t - left <= j <= t + right)."""
    import json
    from pathlib import Path

    nb = json.loads((Path(__file__).resolve().parents[1] / "notebooks" / "07_self_attention.ipynb")
                    .read_text(encoding="utf-8"))
    code = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]
    end = next(i for i, s in enumerate(code) if "check.sliding_window_mask(" in s)
    before = "\n".join(code[:end + 1])
    for answer in (".abs()", ">= t - left", "> t - left", "triu(", "tril("):
        assert answer not in before, f"the learner's notebook writes `{answer}` before the window exercise's check"
