"""Checks for lesson 06 (pointer networks): pointer scores, masking chosen positions, one decoding step.

    from course_utils.checks import lesson06 as check
    check.pointer_scores(pointer_scores)
    check.masked_pointer_softmax(masked_pointer_softmax)
    check.decode_step(decode_step)
"""
import functools

import torch
import torch.nn.functional as F

from .. import pointer as ref
from . import lesson06_symptoms as symptoms
from .core import (
    exercise,
    expect,
    expect_distribution,
    expect_returns,
    expect_shape,
    randn,
    to_numpy,
)
from .evaluation import Evaluation
from .expectations import explained


def _random_mask(generator, B, T):
    """A (B, T) bool mask with at least one True per row (some positions already chosen)."""
    mask = torch.from_numpy(generator.random((B, T)) < 0.6)
    mask[torch.arange(B), torch.from_numpy(generator.integers(T, size=B))] = True
    return mask


@exercise("pointer scores", reference=ref.pointer_scores)
def pointer_scores(ev: Evaluation, answer):
    tests = 0
    # (B, T, d_h, d_s, d_attn): square weights so that swapped weights still run; B == T so that
    # forgetting to broadcast s over the positions still runs (and gives wrong numbers)
    for seed, (B, T, d_h, d_s, d_attn) in enumerate([(2, 5, 6, 6, 6), (4, 4, 8, 8, 8), (3, 7, 6, 4, 5)]):
        g = ev.rng(600 + seed)
        h, s = randn(g, B, T, d_h), randn(g, B, d_s)
        W_h, W_s, v = randn(g, d_h, d_attn), randn(g, d_s, d_attn), randn(g, d_attn)
        expected = ref.pointer_scores(h, s, W_h, W_s, v)
        with symptoms.batch_meets_positions(B, T):
            got = ev.call(answer, h.clone(), s.clone(), W_h.clone(), W_s.clone(), v.clone())
        inside = h @ W_h + (s @ W_s).unsqueeze(1)                            # (B, T, d_attn)
        mistakes = {
            "the scores should be a raw score per position, before any softmax: the softmax comes later "
            "(with the mask), so return v^T tanh(W_h h_j + W_s s) as it is.": torch.softmax(expected, dim=-1),
            "tanh is missing: e_j = v^T tanh(W_h h_j + W_s s) applies tanh before the projection by v.":
                inside @ v,
            "tanh is applied after the projection by v: e_j = v^T tanh(W_h h_j + W_s s), tanh first.":
                torch.tanh(inside @ v),
            "v is missing: you summed tanh(W_h h_j + W_s s) over its d_attn entries; project it with v "
            "(`@ v`).": torch.tanh(inside).sum(-1),
            **symptoms.tanh_and_sum_mistakes(h @ W_h, (s @ W_s).unsqueeze(1), v),
        }
        if d_h == d_s == d_attn:
            mistakes["the weights are transposed: here they act on the right, h @ W_h and s @ W_s "
                     "(W_h is (d_h, d_attn), W_s is (d_s, d_attn))."] = \
                torch.tanh(h @ W_h.T + (s @ W_s.T).unsqueeze(1)) @ v
            mistakes["W_h is transposed: here weights act on the right, h @ W_h (W_h is (d_h, d_attn))."] = \
                torch.tanh(h @ W_h.T + (s @ W_s).unsqueeze(1)) @ v
            mistakes["W_s is transposed: here weights act on the right, s @ W_s (W_s is (d_s, d_attn))."] = \
                torch.tanh(h @ W_h + (s @ W_s.T).unsqueeze(1)) @ v
        if d_s == d_attn:
            mistakes["W_s is missing: the decoder state s is added as it is; project it first, s @ W_s, then add "
                     "it over the positions ((s @ W_s).unsqueeze(1))."] = torch.tanh(h @ W_h + s.unsqueeze(1)) @ v
        if d_h == d_attn:
            mistakes["W_h is missing: the encoder states h_j are added as they are; project them first, "
                     "h @ W_h."] = torch.tanh(h + (s @ W_s).unsqueeze(1)) @ v
        if d_h == d_s:
            mistakes["W_h and W_s are swapped: W_h multiplies the encoder states h_j, W_s the decoder "
                     "state s."] = ref.pointer_scores(h, s, W_s, W_h, v)
        if B == T and d_h == d_s:
            mistakes[symptoms.NOT_BROADCAST] = torch.tanh(h @ W_h + s @ W_s) @ v
        expect_shape(got, (B, T), "pointer_scores(h, s, W_h, W_s, v)")
        with explained(functools.partial(symptoms.other_example, got, h, s, W_h, W_s, v)):
            ev.expect_close(got, expected, "pointer_scores(h, s, W_h, W_s, v)", mistakes=mistakes)
        tests += 1
    return tests


@exercise("masked pointer softmax", name="masked_pointer_softmax", reference=ref.masked_softmax)
def masked_pointer_softmax(ev: Evaluation, answer):
    tests = 0
    for seed, (B, T) in enumerate([(3, 6), (5, 4), (2, 9)]):
        g = ev.rng(610 + seed)
        scores = 3 * randn(g, B, T)
        mask = _random_mask(g, B, T)
        expected = ref.masked_softmax(scores, mask)
        got = ev.call(answer, scores.clone(), mask.clone())
        mistakes = {
            "chosen positions are not masked: positions where mask is False must get weight 0 (fill their "
            "scores with -inf before the softmax).": torch.softmax(scores, dim=-1),
            "masked positions still get weight: filling their scores with 0 is not enough (exp(0) = 1); "
            "fill them with -inf (float('-inf')) before the softmax.":
                torch.softmax(scores.masked_fill(~mask, 0.0), dim=-1),
            symptoms.INVERTED: ref.masked_softmax(scores, ~mask),
            "softmax over the wrong axis: normalise over the positions (the last axis, dim=-1), "
            "not over the batch.": torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=0),
            "the mask is applied after the softmax: the remaining weights no longer sum to 1; mask the "
            "scores (-inf) before the softmax.": torch.softmax(scores, dim=-1) * mask,
            "you divided by the largest exp instead of the sum: a softmax divides exp(e_j) by the sum of "
            "exp(e_k) over the positions that may be chosen.": torch.exp(
                scores - scores.masked_fill(~mask, float("-inf")).amax(-1, keepdim=True)) * mask,
        }
        expect_shape(got, (B, T), "masked_pointer_softmax(scores, mask)")
        expect(symptoms.inverted(got, mask) is None, symptoms.INVERTED)
        expect(not bool(torch.isneginf(torch.as_tensor(got)).any()),
               "some weights are -inf: return probabilities (torch.softmax), not log-probabilities "
               "(log_softmax).")
        with explained(functools.partial(symptoms.batch_normalised, got)):
            ev.expect_close(got, expected, "masked_pointer_softmax(scores, mask)", mistakes=mistakes)
        expect_distribution(got, "the pointer weights", axis=-1)
        expect(bool((to_numpy(got)[~mask.numpy()] == 0).all()),
               "positions where mask is False must get weight exactly 0.")
        tests += 1
    # a row where every position is taken gives zeros, not NaN (the house convention)
    scores, mask = randn(ev.rng(619), 2, 4), torch.tensor([[True, False, True, False], [False] * 4])
    got = ev.call(answer, scores, mask)
    ev.expect_close(got, ref.masked_softmax(scores, mask), "masked_pointer_softmax with a fully masked row",
                    mistakes={"a row where every position is masked gives NaN: return zeros there "
                              "(e.g. `weights.masked_fill(~mask.any(-1, keepdim=True), 0.0)`).":
                              torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1),
                              "a row where every position is masked gives equal weights (a large negative "
                              "fill such as -1e9 leaves a uniform softmax there): return zeros in such rows "
                              "(e.g. `weights.masked_fill(~mask.any(-1, keepdim=True), 0.0)`).":
                              torch.softmax(scores.masked_fill(~mask, -1e9), dim=-1)})
    # a softmax does not change when every score moves by the same amount: large scores must not overflow
    for seed, shift in enumerate((200.0, -200.0)):
        g = ev.rng(615 + seed)
        scores, mask = 3 * randn(g, 3, 6) + shift, _random_mask(g, 3, 6)
        got = ev.call(answer, scores.clone(), mask.clone())
        expect_shape(got, (3, 6), f"masked_pointer_softmax(scores {shift:+g}, mask)")
        symptom = symptoms.unstable(got, ref.masked_softmax(scores, mask), shift)
        expect(symptom is None, symptom)
    return tests + 3


def _comparable(x):
    """A value expect_returns can compare: a bool mask as floats, the state (s, c) stacked."""
    if isinstance(x, (tuple, list)) and len(x) == 2 and all(hasattr(t, "shape") for t in x) \
            and tuple(x[0].shape) == tuple(x[1].shape):
        return torch.stack([torch.as_tensor(t) for t in x])
    if hasattr(x, "dtype") and x.dtype == torch.bool:
        return x.float()
    return x


def _model(seed):
    """A small untrained PointerNetwork whose pointer is sharpened: at its initial scale tanh is nearly linear, so
    the decoder state adds about the same to every score and the weights hardly depend on it (a wrong state would
    pass, and the argmax would be a near tie)."""
    with torch.random.fork_rng(devices=[]):   # leave the learner's random state alone
        torch.manual_seed(seed)
        model = ref.PointerNetwork(d_model=16, d_attn=12).eval()
    with torch.no_grad():
        model.pointer.W_h.weight.mul_(8.0)
        model.pointer.W_s.weight.mul_(8.0)
        model.pointer.v.mul_(3.0)
    return model


def _wrong_state_step(model, h, state, inp, mask):
    """The mistake: point with the decoder state from *before* this step's update."""
    s, c = model.decoder(inp, state)
    weights = model.pointer(h, state[0], mask)
    j = weights.argmax(dim=-1)
    return weights, j, mask & ~F.one_hot(j, mask.shape[-1]).bool(), (s, c)


NO_STATE = ("the decoder cell is called without the state: model.decoder(inp) starts from zeros at every step and "
            "forgets the steps before; pass the state in, (s, c) = model.decoder(inp, state).")
CELL_STATE = ("the pointer uses the cell state {c}: an LSTM's output is its hidden state; point with s, the first of "
              "(s, c) = model.decoder(inp, state), model.pointer(h, s, mask).")
SWAPPED_STATE = ("the state is passed to the decoder cell as (c, s): an nn.LSTMCell takes (s, c), hidden state "
                 "first; call model.decoder(inp, state) with the state as it is given.")


@exercise("one decoding step", reference=ref.decode_step, may_change=("mask",))
def decode_step(ev: Evaluation, answer):
    tests = 0
    # B == T first: an argmax over the batch axis still gives B positions (and is named, not a crash)
    for seed, (B, T) in ((622, (5, 5)), (620, (4, 6)), (621, (3, 9))):
        g = ev.rng(seed)
        model = _model(seed)
        x = torch.from_numpy(g.random((B, T)).astype("float32"))
        with torch.no_grad():
            h, state = model.encode(x)
            inp = model.start_input(B)
            mask = torch.ones(B, T, dtype=torch.bool)
            for step in range(T):
                w_ref, j_ref, mask_ref, (s_ref, c_ref) = ref.decode_step(model, h, state, inp, mask.clone())
                out = ev.call(answer, model, h, (state[0].clone(), state[1].clone()), inp.clone(), mask.clone())
                expect_returns(tuple(map(_comparable, out)) if isinstance(out, (tuple, list)) else out,
                               tuple(map(_comparable, (w_ref, j_ref, mask_ref, (s_ref, c_ref)))),
                               ("weights", "j", "new_mask", "(s, c)"))
                weights, j, new_mask, new_state = out
                what = f"step {step + 1}: "
                w_wrong = _wrong_state_step(model, h, state, inp, mask.clone())[0]
                zero_state, swapped = model.decoder(inp), model.decoder(inp, state[::-1])
                expect_shape(weights, (B, T), what + "weights")
                ev.expect_close(weights, w_ref, what + "weights", mistakes={
                    "the pointer uses the wrong decoder state: run the decoder cell on the input first "
                    "and point with the NEW state s_i (not the state passed in).": w_wrong,
                    "the mask is not used when pointing: pass it to model.pointer(h, s, mask) so that "
                    "chosen positions get weight 0.": model.pointer(h, s_ref),
                    NO_STATE: model.pointer(h, zero_state[0], mask),
                    SWAPPED_STATE: model.pointer(h, swapped[0], mask),
                    CELL_STATE.format(c="c_i"): model.pointer(h, c_ref, mask),
                    CELL_STATE.format(c="c_{i-1} passed in"): model.pointer(h, state[1], mask),
                })
                expect(isinstance(new_state, tuple) and len(new_state) == 2,
                       what + "the new state should be the tuple (s, c) returned by model.decoder.")
                ev.expect_close(new_state[0], s_ref, what + "new decoder state s", mistakes={
                    "the returned state is the old one: return the (s, c) that model.decoder gave you.":
                        state[0], NO_STATE: zero_state[0], SWAPPED_STATE: swapped[0]})
                ev.expect_close(new_state[1], c_ref, what + "new decoder cell c",
                                mistakes={NO_STATE: zero_state[1], SWAPPED_STATE: swapped[1]})
                expect_shape(j, (B,), what + "chosen positions j")
                j = torch.as_tensor(j).long()
                expect(torch.equal(j, j_ref) or not torch.equal(j, w_ref.argmax(dim=0)),
                       what + "j is the argmax over the batch axis (dim=0), the example with the largest weight "
                       "at each position: j[b] is the position with the largest weight in row b, "
                       "weights.argmax(dim=-1).")
                expect(torch.equal(j, j_ref),
                       what + f"chosen positions {to_numpy(j).tolist()} differ from the expected "
                       f"{j_ref.tolist()}: take the argmax of the weights over the positions (dim=-1).")
                expect_shape(new_mask, (B, T), what + "new mask")
                new_mask = torch.as_tensor(new_mask)
                expect(new_mask.dtype == torch.bool, what + f"the new mask should be bool, got {new_mask.dtype}.")
                expect(not torch.equal(new_mask, mask) or torch.equal(mask_ref, mask),
                       what + "chosen positions are not masked: set new_mask[b, j[b]] = False so that "
                       "a position cannot be chosen twice.")
                columns = mask & ~F.one_hot(j_ref, T).bool().any(0, keepdim=True)   # new_mask[:, j] = False
                expect(torch.equal(columns, mask_ref) or not torch.equal(new_mask, columns),
                       what + "new_mask[:, j] = False masks every example's choice in every row: index each row "
                       "with its own choice, new_mask[torch.arange(B), j] = False.")
                expect(torch.equal(new_mask, mask_ref),
                       what + "the new mask should equal the old mask with the chosen position j set to "
                       "False in every row (and nothing else changed).")
                state, mask, inp = (s_ref, c_ref), mask_ref, model.next_input(x, j_ref)
                tests += 1
        expect(not mask.any(), "after T steps every position should have been chosen once.")
    return tests
