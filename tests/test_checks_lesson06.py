"""Lesson 06 checks: the reference passes, planted mistakes are named, stubs say 'not implemented'."""
import pytest
import torch
import torch.nn.functional as F

from course_utils import pointer as ref
from course_utils.checks import lesson06 as check
from course_utils.checks.core import ExerciseError
from tests.checking import named, not_implemented, prints_not_implemented

pytestmark = pytest.mark.usefixtures("any_seed_offset")   # every test under every seed offset


# ---------------------------------------------------------------- pointer scores
def test_pointer_scores_reference_passes():
    check.pointer_scores(ref.pointer_scores)
@pytest.mark.parametrize("wrong, symptom", [
    (lambda h, s, W_h, W_s, v: (h @ W_h + (s @ W_s).unsqueeze(1)) @ v, "tanh is missing"),
    (lambda h, s, W_h, W_s, v: ref.pointer_scores(h, s, W_s, W_h, v), "swapped"),
    (lambda h, s, W_h, W_s, v: torch.tanh(h @ W_h + s @ W_s) @ v, "not broadcast over the positions"),
    (lambda h, s, W_h, W_s, v: torch.softmax(ref.pointer_scores(h, s, W_h, W_s, v), -1), "before any softmax"),
    (lambda h, s, W_h, W_s, v: torch.tanh(h @ W_h + (s @ W_s).unsqueeze(1)).sum(-1), "v is missing"),
    (lambda h, s, W_h, W_s, v: torch.tanh((h @ W_h + (s @ W_s).unsqueeze(1)) @ v), "tanh is applied after"),
    (lambda h, s, W_h, W_s, v: torch.tanh(h @ W_h.T + (s @ W_s.T).unsqueeze(1)) @ v, "weights are transposed"),
    (lambda h, s, W_h, W_s, v: torch.tanh(h @ W_h.T + (s @ W_s).unsqueeze(1)) @ v, "W_h is transposed"),
    (lambda h, s, W_h, W_s, v: torch.tanh(h @ W_h + (s @ W_s.T).unsqueeze(1)) @ v, "W_s is transposed"),
])
def test_pointer_scores_mistakes(wrong, symptom):
    with pytest.raises(ExerciseError, match=symptom):
        check.pointer_scores(wrong)


def _repeated_s(h, s, W_h, W_s, v):
    B, T, _ = h.shape
    return torch.tanh(h @ W_h + (s @ W_s).repeat(T, 1).reshape(B, T, -1)) @ v   # mistake: examples mixed


@pytest.mark.parametrize("wrong, symptom", [
    (lambda h, s, W_h, W_s, v: torch.tanh(h @ W_h + s @ W_s) @ v, r"(?s)not broadcast over the positions.*PyTorch"),
    (lambda h, s, W_h, W_s, v: torch.tanh(h @ W_h + (s @ W_s).unsqueeze(0)) @ v, "not broadcast over the positions"),
    (lambda h, s, W_h, W_s, v: torch.tanh(h @ W_h + s.unsqueeze(1)) @ v, "W_s is missing"),
    (lambda h, s, W_h, W_s, v: torch.tanh(h + (s @ W_s).unsqueeze(1)) @ v, "W_h is missing"),
    (_repeated_s, "decoder state s of ANOTHER example"),
    (lambda h, s, W_h, W_s, v: torch.tanh(h @ W_h + (s @ W_s).flip(0).unsqueeze(1)) @ v,
     "decoder state s of ANOTHER example"),
])
def test_pointer_scores_broadcast_and_projection_mistakes_are_named(wrong, symptom):
    named(check.pointer_scores, wrong, symptom)


@pytest.mark.parametrize("wrong, symptom", [
    (lambda h, s, W_h, W_s, v: (torch.tanh(h @ W_h) + torch.tanh(s @ W_s).unsqueeze(1)) @ v,
     "tanh is applied to each projection separately"),
    (lambda h, s, W_h, W_s, v: (torch.tanh(h @ W_h) + (s @ W_s).unsqueeze(1)) @ v, "tanh is applied to W_h h_j only"),
    (lambda h, s, W_h, W_s, v: (h @ W_h + torch.tanh(s @ W_s).unsqueeze(1)) @ v, "tanh is applied to W_s s only"),
    (lambda h, s, W_h, W_s, v: torch.tanh(h @ W_h * (s @ W_s).unsqueeze(1)) @ v, "projections are multiplied, "),
    (lambda h, s, W_h, W_s, v: (h @ W_h * (s @ W_s).unsqueeze(1)) @ v,
     "projections are multiplied and the tanh is missing"),
])
def test_pointer_scores_misplaced_tanh_and_product_are_named(wrong, symptom):
    named(check.pointer_scores, wrong, symptom)


def test_pointer_scores_not_implemented():
    with prints_not_implemented():
        check.pointer_scores(not_implemented)


# ---------------------------------------------------------------- masked softmax
def test_masked_pointer_softmax_reference_passes():
    check.masked_pointer_softmax(ref.masked_softmax)
def _divide_by_max(scores, mask):
    exp = torch.exp(scores - scores.masked_fill(~mask, float("-inf")).amax(-1, keepdim=True)) * mask
    return exp / exp.amax(-1, keepdim=True)


def _fill_then_softmax(value, dim=-1):
    def wrong(scores, mask):
        return torch.softmax(scores.masked_fill(~mask, value), dim=dim)
    return wrong


@pytest.mark.parametrize("wrong, symptom", [
    (lambda scores, mask: torch.softmax(scores, -1), "chosen positions are not masked"),
    (_fill_then_softmax(0.0), "with -inf"),
    (_fill_then_softmax(float("-inf"), dim=0), "wrong axis"),
    (lambda scores, mask: ref.masked_softmax(scores, ~mask), "inverted"),
    (lambda scores, mask: torch.softmax(scores, -1) * mask, "after the softmax"),
    (_fill_then_softmax(float("-inf")), "NaN"),   # right except for fully masked rows
    (_fill_then_softmax(-1e9), "equal weights"),  # right except for fully masked rows
    (lambda scores, mask: _divide_by_max(scores, mask), "largest exp instead of the sum"),
    (lambda scores, mask: torch.log_softmax(scores.masked_fill(~mask, float("-inf")), -1), "log-probabilities"),
])
def test_masked_pointer_softmax_mistakes(wrong, symptom):
    with pytest.raises(ExerciseError, match=symptom):
        check.masked_pointer_softmax(wrong)


def _inverted_unguarded(scores, mask):
    weights = torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1)   # NaN where mask is all True
    return weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)


def _renormalised_over_batch(scores, mask):
    e = torch.softmax(scores, dim=-1) * mask
    return e / e.sum(dim=0, keepdim=True).clamp_min(1e-30)


def _exp_without_max(scores, mask):
    e = torch.where(mask, scores.exp(), torch.zeros_like(scores))
    return e / e.sum(dim=-1, keepdim=True).clamp_min(1e-30)


def _exp_without_max_underflow(scores, mask):
    e = torch.where(mask, scores.exp(), torch.zeros_like(scores))
    return torch.nan_to_num(e / e.sum(dim=-1, keepdim=True), posinf=0.0)


@pytest.mark.parametrize("wrong, symptom", [
    (_inverted_unguarded, "the mask is inverted"),
    (_renormalised_over_batch, r"normalised over the batch axis \(dim=0\)"),
    (_exp_without_max, r"large scores .* subtract each row's maximum"),
    (_exp_without_max_underflow, r"large scores .* subtract each row's maximum"),
])
def test_masked_pointer_softmax_batch_inversion_and_overflow_are_named(wrong, symptom):
    named(check.masked_pointer_softmax, wrong, symptom)


def test_masked_pointer_softmax_not_implemented():
    with prints_not_implemented():
        check.masked_pointer_softmax(not_implemented)


# ---------------------------------------------------------------- one decoding step
def step_old_state(model, h, state, inp, mask):
    s, c = model.decoder(inp, state)
    weights = model.pointer(h, state[0], mask)                  # mistake: the old state
    j = weights.argmax(-1)
    return weights, j, mask & ~F.one_hot(j, mask.shape[-1]).bool(), (s, c)


def step_mask_not_updated(model, h, state, inp, mask):
    s, c = model.decoder(inp, state)
    weights = model.pointer(h, s, mask)
    return weights, weights.argmax(-1), mask, (s, c)            # mistake: j not masked


def step_mask_ignored(model, h, state, inp, mask):
    s, c = model.decoder(inp, state)
    weights = model.pointer(h, s)                               # mistake: no mask when pointing
    j = weights.argmax(-1)
    return weights, j, mask & ~F.one_hot(j, mask.shape[-1]).bool(), (s, c)


def step_returns_old_state(model, h, state, inp, mask):
    weights, j, new_mask, _ = ref.decode_step(model, h, state, inp, mask)
    return weights, j, new_mask, state                          # mistake: old state returned


def step_argmax_wrong_axis(model, h, state, inp, mask):
    s, c = model.decoder(inp, state)
    weights = model.pointer(h, s, mask)
    j = weights.argmax(0)[: len(weights)] % mask.shape[-1]      # mistake: argmax over the batch
    return weights, j, mask & ~F.one_hot(j, mask.shape[-1]).bool(), (s, c)


def step_not_a_tuple(model, h, state, inp, mask):
    return ref.decode_step(model, h, state, inp, mask)[0]


def step_reordered(model, h, state, inp, mask):
    weights, j, new_mask, new_state = ref.decode_step(model, h, state, inp, mask)
    return j, weights, new_mask, new_state


def step_masks_columns(model, h, state, inp, mask):
    weights, j, _, new_state = ref.decode_step(model, h, state, inp, mask)
    new_mask = mask.clone()
    new_mask[:, j] = False
    return weights, j, new_mask, new_state


@pytest.mark.parametrize("wrong, symptom", [
    (step_old_state, "wrong decoder state"),
    (step_mask_not_updated, "chosen positions are not masked"),
    (step_mask_ignored, "mask is not used"),
    (step_returns_old_state, "returned state is the old one"),
    (step_argmax_wrong_axis, "argmax"),
    (step_not_a_tuple, "return 4 things"),
    (step_reordered, "wrong order"),
    (step_masks_columns, "new_mask\\[:, j\\] = False"),
])
def test_decode_step_mistakes(wrong, symptom):
    with pytest.raises(ExerciseError, match=symptom):
        check.decode_step(wrong)


def _step_with(decoder_state):
    def step(model, h, state, inp, mask):
        s, c = model.decoder(inp, *decoder_state(state))
        weights = model.pointer(h, s, mask)
        j = weights.argmax(dim=-1)
        return weights, j, mask & ~F.one_hot(j, mask.shape[-1]).bool(), (s, c)
    return step


def step_argmax_over_batch(model, h, state, inp, mask):
    s, c = model.decoder(inp, state)
    weights = model.pointer(h, s, mask)
    j = weights.argmax(dim=0)                                   # mistake: (T,) positions of the batch axis
    new_mask = mask.clone()
    new_mask[torch.arange(len(j)), j] = False
    return weights, j, new_mask, (s, c)


def _step_points_with_cell(new):
    def step(model, h, state, inp, mask):
        s, c = model.decoder(inp, state)
        weights = model.pointer(h, c if new else state[1], mask)   # mistake: the cell state, not the hidden one
        j = weights.argmax(dim=-1)
        return weights, j, mask & ~F.one_hot(j, mask.shape[-1]).bool(), (s, c)
    return step


@pytest.mark.parametrize("wrong, symptom", [
    (_step_points_with_cell(new=True), r"uses the cell state c_i: .* point with s"),
    (_step_points_with_cell(new=False), r"uses the cell state c_\{i-1\} passed in"),
    (_step_with(lambda state: ()), "called without the state"),              # model.decoder(inp)
    (_step_with(lambda state: (state[::-1],)), r"passed to the decoder cell as \(c, s\)"),
    (step_argmax_over_batch, r"argmax over the batch axis \(dim=0\)"),
])
def test_decode_step_state_and_argmax_mistakes_are_named(wrong, symptom):
    named(check.decode_step, wrong, symptom)


def test_decode_step_reference_passes():
    check.decode_step(ref.decode_step)
def test_decode_step_in_place_mask_update_passes():
    def in_place(model, h, state, inp, mask):
        s, c = model.decoder(inp, state)
        weights = model.pointer(h, s, mask)
        j = weights.argmax(dim=-1)
        mask[torch.arange(len(j)), j] = False
        return weights, j, mask, (s, c)
    check.decode_step(in_place)
def test_decode_step_not_implemented():
    with prints_not_implemented():
        check.decode_step(not_implemented)
