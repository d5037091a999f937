"""Lesson 06, exercise 3: one greedy decoding step of a pointer network.

    decode_step(model, h (B, T, d), state (s, c), inp (B, d), mask (B, T) bool) -> weights (B, T), j (B,),
        new_mask (B, T), (s, c)

The decoder cell updates the state first, (s, c) = model.decoder(inp, state); the pointer points with the NEW s and
the mask; j is the position of the largest weight in each row; new_mask is mask with j set to False in each row (the
caller's mask may be changed in place). The check decodes three batches step by step (the first with B = T, so that
an argmax over the batch axis still gives B positions and is named), feeding the right state and mask to each step,
and names the mistakes of the weights, the state, j and the new mask.
"""
import torch
import torch.nn.functional as F

from ... import pointer as ref
from ..core import Mistake, Mistakes, exercise, expect, expect_returns, expect_shape, to_numpy
from ..evaluation import Evaluation
from .decode_step_mistakes import model as small_model
from .decode_step_mistakes import wrong_step

_POINT = "(s, c) = model.decoder(inp, state), then model.pointer(h, s, mask)"
M = Mistakes(
    Mistake("old_state", "the pointer uses the decoder state passed in: the decoder cell runs on the input first, and "
            "the pointer uses the NEW state s_i", hint=_POINT, shows=wrong_step("old_state")),
    Mistake("mask_unused", "the mask is not used when pointing: the positions already chosen get weight 0",
            hint="model.pointer(h, s, mask)", shows=wrong_step("mask_unused")),
    Mistake("no_state", "the decoder cell is called without the state: it starts from zeros at every step and forgets "
            "the steps before", hint="(s, c) = model.decoder(inp, state)", shows=wrong_step("no_state")),
    Mistake("swapped_state", "the state is passed to the decoder cell as (c, s): an nn.LSTMCell takes (s, c), hidden "
            "state first", hint="model.decoder(inp, state), with the state as it is given",
            shows=wrong_step("swapped_state")),
    Mistake("cell_state", "the pointer uses the cell state {c}: an LSTM's output is its hidden state, s", hint=_POINT,
            shows=wrong_step("cell_state")),
    Mistake("state_not_tuple", "the new state is the tuple (s, c) that model.decoder returns",
            shows=wrong_step("state_not_tuple")),
    Mistake("returned_old_state", "the returned state is the old one: the step returns the (s, c) that model.decoder "
            "gave", shows=wrong_step("returned_old_state")),
    Mistake("argmax_batch", "j is the argmax over the batch axis (dim=0), the example with the largest weight at each "
            "position: j[b] is the position with the largest weight in row b", hint="weights.argmax(dim=-1)",
            shows=wrong_step("argmax_batch")),
    Mistake("j_unmasked", "j picks the largest weight before the mask, a position already chosen ({where}): j[b] is "
            "the position of the largest MASKED weight in row b", hint="weights.argmax(dim=-1) of the masked weights",
            shows=wrong_step("j_unmasked")),
    Mistake("j_not_argmax", "the chosen positions j = {got} are not those of the largest weight in each row, {want}",
            hint="weights.argmax(dim=-1)", shows=wrong_step("j_not_argmax")),
    Mistake("mask_float", "the new mask has dtype {dtype}: a mask is boolean (True = may still be chosen)",
            hint="mask & ~F.one_hot(j, T).bool()", shows=wrong_step("mask_float")),
    Mistake("mask_not_updated", "the chosen positions are not masked: the new mask has j set to False in each row, so "
            "that a position cannot be chosen twice", hint="new_mask[torch.arange(B), j] = False",
            shows=wrong_step("mask_not_updated")),
    Mistake("masks_columns", "the new mask hides every example's choice in every row: each row hides its own choice "
            "j[b] only", hint="new_mask[torch.arange(B), j] = False, not new_mask[:, j] = False",
            shows=wrong_step("masks_columns")),
    Mistake("new_mask_wrong", "the new mask is not the old mask with the chosen position j set to False in every row "
            "(row {row} differs, and nothing else may change)", shows=wrong_step("keeps_only_chosen")),
)


def _comparable(x):
    """A value expect_returns can compare: a bool mask as floats, the state (s, c) stacked."""
    if isinstance(x, (tuple, list)) and len(x) == 2 and all(hasattr(t, "shape") for t in x) \
            and tuple(x[0].shape) == tuple(x[1].shape):
        return torch.stack([torch.as_tensor(t) for t in x])
    if hasattr(x, "dtype") and x.dtype == torch.bool:
        return x.float()
    return x


def _in_place(model, h, state, inp, mask):
    """A right answer written another way: the caller's mask updated in place, the state kept as one tuple."""
    s, c = state = model.decoder(inp, state)
    weights = model.pointer(h, s, mask)
    j = weights.max(dim=-1).indices
    mask[torch.arange(len(j)), j] = False
    return weights, j, mask, state


def _weights(ev: Evaluation, weights, w_ref, args, what):
    wrong = {m: wrong_step(m.key)(*args)[0] for m in M if m.key in ("old_state", "mask_unused", "no_state",
                                                                   "swapped_state")}
    wrong[M.cell_state.at(c="c_i")] = wrong_step("cell_state")(*args)[0]
    wrong[M.cell_state.at(c="c_{i-1} passed in")] = wrong_step("old_cell_state")(*args)[0]
    expect_shape(weights, tuple(w_ref.shape), what + "weights")
    ev.expect_close(weights, w_ref, what + "weights", mistakes=wrong)


def _state(ev: Evaluation, new_state, s_ref, c_ref, args, what):
    expect(isinstance(new_state, (tuple, list)) and len(new_state) == 2, M.state_not_tuple)
    model, h, state, inp, mask = args
    zero, swapped = (wrong_step(slip)(*args)[3] for slip in ("no_state", "swapped_state"))
    ev.expect_close(new_state[0], s_ref, what + "new decoder state s",
                    mistakes={M.returned_old_state: state[0], M.no_state: zero[0], M.swapped_state: swapped[0]})
    ev.expect_close(new_state[1], c_ref, what + "new decoder cell c",
                    mistakes={M.returned_old_state: state[1], M.no_state: zero[1], M.swapped_state: swapped[1]})


def _choices(j, w_ref, j_ref, args, what):
    B = len(j_ref)
    expect_shape(j, (B,), what + "chosen positions j")
    j = torch.as_tensor(j).long()
    expect(torch.equal(j, j_ref) or not torch.equal(j, w_ref.argmax(dim=0)), M.argmax_batch)
    unmasked = wrong_step("j_unmasked")(*args)[1]
    taken = [(b, int(j[b])) for b in range(B) if not args[4][b, j[b]]]
    expect(torch.equal(j, j_ref) or not (torch.equal(j, unmasked) and taken),
           M.j_unmasked.at(where=", ".join(f"row {b}, position {i}" for b, i in taken)))
    expect(torch.equal(j, j_ref), M.j_not_argmax.at(got=to_numpy(j).tolist(), want=j_ref.tolist()))


def _new_mask(new_mask, mask, mask_ref, j_ref, what):
    B, T = mask.shape
    expect_shape(new_mask, (B, T), what + "new mask")
    new_mask = torch.as_tensor(new_mask)
    expect(new_mask.dtype == torch.bool, M.mask_float.at(dtype=new_mask.dtype))
    expect(not torch.equal(new_mask, mask) or torch.equal(mask_ref, mask), M.mask_not_updated)
    columns = mask & ~F.one_hot(j_ref, T).bool().any(0, keepdim=True)   # new_mask[:, j] = False
    expect(torch.equal(columns, mask_ref) or not torch.equal(new_mask, columns), M.masks_columns)
    rows = (new_mask != mask_ref).any(-1).nonzero()
    expect(torch.equal(new_mask, mask_ref), M.new_mask_wrong.at(row=int(rows[0]) if len(rows) else 0))


@exercise("one decoding step", reference=ref.decode_step, may_change=("mask",), mistakes=M, right=[_in_place])
def decode_step(ev: Evaluation, answer):
    """answer(model, h, state, inp, mask) -> (weights (B, T), j (B,), new_mask (B, T), (s, c))."""
    tests = 0
    # B == T first: an argmax over the batch axis still gives B positions (and is named, not a crash)
    for seed, (B, T) in ((622, (5, 5)), (620, (4, 6)), (621, (3, 9))):
        g = ev.rng(seed)
        model = small_model(seed)
        x = torch.from_numpy(g.random((B, T)).astype("float32"))
        with torch.no_grad():
            h, state = model.encode(x)
            inp = model.start_input(B)
            mask = torch.ones(B, T, dtype=torch.bool)
            for step in range(T):
                args = (model, h, (state[0].clone(), state[1].clone()), inp.clone(), mask.clone())
                w_ref, j_ref, mask_ref, (s_ref, c_ref) = ref.decode_step(*args)
                out = ev.call(answer, model, h, (state[0].clone(), state[1].clone()), inp.clone(), mask.clone())
                expect_returns(tuple(map(_comparable, out)) if isinstance(out, (tuple, list)) else out,
                               tuple(map(_comparable, (w_ref, j_ref, mask_ref, (s_ref, c_ref)))),
                               ("weights", "j", "new_mask", "(s, c)"))
                weights, j, new_mask, new_state = out
                what = f"step {step + 1}: "
                _weights(ev, weights, w_ref, args, what)
                _state(ev, new_state, s_ref, c_ref, args, what)
                _choices(j, w_ref, j_ref, args, what)
                _new_mask(new_mask, mask, mask_ref, j_ref, what)
                state, mask, inp = (s_ref, c_ref), mask_ref, model.next_input(x, j_ref)
                tests += 1
    return tests
