"""Lesson 14, exercise 2: ablating one head.

    ablation_effect(model, tokens (B, 2L), layer, head, half_length=L) -> a float: the mean loss on the second
        copy (positions L .. 2L-2 of induction.loss_per_position, targets L+1 .. 2L-1) with head `head` of
        model.layers[layer].attn writing nothing (its slice of W_O's input zeroed), minus the same loss with every
        head; the model exactly as it was afterwards (no hook left, the same weights, the same mode)

The check builds two small attention-only models (2 layers, 2 heads, random weights made large enough that every
head matters) and asks for four (layer, head) pairs, one model in training mode; it compares the four rises
together, as one vector, so that a mistake is named only when it gives all four (ablations.py: the mistakes'
answers). Where none matches, it names the property that fails (ablation_properties.py): the positions whose
loss the rise is the mean of, a rise for a head that already writes nothing, or the rise of which head differs.
"""
import copy
import functools

import torch

from ... import induction as ref
from ..core import Mistake, Mistakes, exercise, expect, single_threaded
from ..evaluation import Evaluation
from ..mistakes import Said
from . import ablation_properties as props
from . import ablations as wrong
from .properties import by_property


def _wrong(**kinds):
    return functools.partial(wrong.ablation, **kinds)


_SLICE = ("the features zeroed are {}, not the head's own slice of W_O's input: head j writes features j·d_head .. "
          "(j+1)·d_head - 1 of the concatenated heads")
M = Mistakes(
    Mistake("rise_sign", "the sign is reversed: the rise is the loss WITH the head taken out minus the loss with every "
            "head", shows=_wrong(result="sign")),
    Mistake("ablated_only", "this is the loss with the head taken out; the exercise asks how much it RISES: the "
            "difference from the loss of the intact model", shows=_wrong(result="ablated")),
    Mistake("whole", "the loss is averaged over the whole sequence: the rise is measured on the second copy only "
            "(its tokens after the first), where only an induction circuit can help", shows=_wrong(positions="whole")),
    Mistake("early", "the second copy's loss includes its first token (position L-1 of the per-position losses), "
            "which nothing can predict: targets L+1 .. 2L-1 are positions L .. 2L-2",
            shows=_wrong(positions="early")),
    Mistake("late", "the loss is averaged over positions L+1 .. 2L-1 of the per-position losses, one too late: "
            "position t holds the loss of token t + 1, so targets L+1 .. 2L-1 are positions L .. 2L-2",
            hint="losses[L:2 * L - 1]", shows=_wrong(positions="late")),
    Mistake("unshifted", "the loss is not shifted: position t is scored on token t, but the logits at position t "
            "predict token t + 1", hint="compare logits[:, :-1] with tokens[:, 1:], or use induction.loss_per_position",
            shows=_wrong(shift=False)),
    Mistake("queries", "the head's queries or keys are zeroed (its rows of W_Q or W_K, and their bias): its "
            "attention becomes uniform but it still writes its values into the stream; a head taken out writes "
            "nothing: its slice of W_O's input is zero", shows=_wrong(remove="queries")),
    Mistake("rows", "the head's slice of W_O's OUTPUT is zeroed (d_model features that every head writes to); the "
            "head's own output is its slice of W_O's INPUT, features head·d_head .. (head+1)·d_head - 1",
            hint="out_proj.weight[:, lo:hi] (columns), or a pre-hook on out_proj", shows=_wrong(remove="rows")),
    Mistake("value_rows", "the head's rows of W_V are zeroed but not its bias: the head still writes W_O·b_V; a head "
            "taken out writes nothing: its slice of W_O's input is zero", shows=_wrong(remove="values")),
    Mistake("other_head", "the rise is that of another head in the same layer: heads are counted from "
            "0 within the layer", shows=_wrong(target="head_from_1")),
    Mistake("other_layer", "the rise is the same head's in another layer: layers are counted from 0, "
            "the first layer is layer 0", shows=_wrong(target="layer_from_1")),
    Mistake("slice_unscaled", _SLICE.format("head .. head + d_head - 1 (the head's index not multiplied by d_head)"),
            hint="[head * d_head:(head + 1) * d_head]", shows=_wrong(remove="unscaled")),
    Mistake("slice_end", _SLICE.format("head·d_head .. head + d_head - 1 (the end is head + d_head, not "
                                       "(head+1)·d_head)"),
            hint="[head * d_head:(head + 1) * d_head]", shows=_wrong(remove="parenthesis")),
    Mistake("hook_left", "a hook is still registered on the model after your function returned: the head stays "
            "taken out for everyone after you", hint="keep the handle: handle = ...register_forward_pre_hook(...); "
            "handle.remove() in a finally", shows=wrong.hook_left),
    Mistake("weights_changed", "your function changed the model's weights ({names}): the head stays taken out "
            "after you return", hint="zero the columns on a copy (copy.deepcopy(model)), or put the weights back",
            shows=wrong.zeroed_in_place),
    Mistake("mode_changed", "your function left the model in {mode} mode (the caller's model.training changed): "
            "the model must be exactly as it was", hint="was_training = model.training first; "
            "model.train(was_training) before returning", shows=wrong.left_in_eval_mode),
    Mistake("one_number", "return one number, the rise of the mean loss; got {n} values", shows=wrong.every_position),
    Mistake("positions", "the rise you return is the mean over positions {first} .. {last} of the per-position "
            "losses, for all four heads asked: the second copy's targets L+1 .. 2L-1 are positions L .. 2L-2",
            shows=_wrong(positions="inner")),
    Mistake("dead_head", "for a head that already writes nothing (layer {layer}, head {head} with its columns of "
            "W_O set to 0) your function returns {got:.4g}, where taking it out can change nothing: the difference "
            "it returns comes from something besides that head's output", shows=_wrong(remove="to_end")),
    Mistake("rise", "for a head that already writes nothing your function returns 0, as it must; but for (layer, "
            "head) = ({layer}, {head}) it returns {got:.4g} where the second copy's loss rises by {want:.4g} when "
            "that head's output is zeroed", shows=_wrong(remove="mean")),
)
_BY_VALUES = ["rise_sign", "ablated_only", "whole", "early", "late", "unshifted", "queries", "rows", "value_rows",
              "other_head", "other_layer", "slice_unscaled", "slice_end"]


def _model(ev: Evaluation, seed, L):
    """A small attention-only model with random weights, made large enough that every head matters."""
    g = ev.rng(seed)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(g.integers(2 ** 31)))
        model = ref.AttentionOnly(vocab_size=11, d_model=16, num_heads=2, num_layers=2, max_len=2 * L)
        with torch.no_grad():
            for layer in model.layers:
                layer.attn.in_proj.weight.mul_(2.5)
                layer.attn.in_proj.bias.normal_(0, 0.5)              # a trained model's biases are not 0
                layer.attn.out_proj.weight.mul_(3.0)
    tokens = ref.repeated_sequences(6, L, 11, torch.Generator().manual_seed(int(g.integers(2 ** 31))))
    return model.eval(), tokens


def _no_hooks_left(model):
    return not any(module._forward_pre_hooks or module._forward_hooks for module in model.modules())


def _expect_model_as_it_was(model, before, modes):
    expect(_no_hooks_left(model), M.hook_left)
    changed = [k for k, v in model.state_dict().items() if not torch.equal(v, before[k])]
    expect(not changed, M.weights_changed.at(names=", ".join(changed[:2])))
    flipped = [now for was, now in zip(modes, (m.training for m in model.modules())) if was != now]
    expect(not flipped, M.mode_changed.at(mode="training" if flipped[:1] == [True] else "eval"))


def _right_on_a_copy(model, tokens, layer, head, half_length):
    """Zeroes the head's columns of W_O on a deep copy (W_O's bias stays: the same as zeroing the head)."""
    L = half_length
    clean = ref.loss_per_position(model, tokens)[L:2 * L - 1].mean()
    ablated_model = copy.deepcopy(model)
    attn = ablated_model.layers[layer].attn
    with torch.no_grad():
        attn.out_proj.weight[:, head * attn.d_head:(head + 1) * attn.d_head] = 0
    return (ref.loss_per_position(ablated_model, tokens)[L:2 * L - 1].mean() - clean).item()


@exercise("ablating one head", name="ablation_effect", reference=ref.ablation_effect, mistakes=M,
          right=[_right_on_a_copy])
@single_threaded
def ablation_effect(ev: Evaluation, answer):
    """answer(model, tokens (B, 2L), layer, head, half_length) -> the rise of the second copy's loss (a float).
    The four cases' answers are compared together, as one vector: a mistake is named when it gives all four
    (one number alone can come close to another mistake's by chance)."""
    got_all, expected_all, cases = [], [], []
    for seed, pairs in enumerate([[(1, 0), (0, 1)], [(1, 1), (0, 0)]]):
        L = 5 + seed
        model, tokens = _model(ev, seed, L)
        if seed == 0:
            model.train()                                           # (no dropout: the same losses in both modes)
        before = {k: v.clone() for k, v in model.state_dict().items()}
        modes = [m.training for m in model.modules()]
        for layer, head in pairs:
            expected = ref.ablation_effect(model, tokens, layer, head, L)
            got = ev.call(answer, model, tokens, layer, head, L)
            expect(got is not None, Said("none", "your function returned nothing: return the rise of the loss (a "
                                                 "number)."))
            _expect_model_as_it_was(model, before, modes)
            got = torch.as_tensor(got, dtype=torch.float64).detach().reshape(-1)
            expect(got.numel() == 1, M.one_number.at(n=got.numel()))
            got_all.append(got[0])
            expected_all.append(expected)
            cases.append((model, tokens, layer, head, L))
    got, want = torch.stack(got_all), torch.tensor(expected_all, dtype=torch.float64)
    atol, rtol = 1e-4, 1e-3
    if torch.allclose(got, want, atol=atol, rtol=rtol):
        return len(cases)
    # the mistakes' rises on the same cases (each model is as the check built it: the answer changed nothing)
    variants = [M.variants(_BY_VALUES, *case) for case in cases]
    mistakes = {m: torch.tensor([v[m] for v in variants], dtype=torch.float64) for m in variants[0]
                if all(m in v for v in variants)}
    with by_property(props.positions(M, cases, got), props.removal(M, ev, answer, cases, got, want)):
        ev.expect_close(got, want, "the loss rises of (layer, head) = "
                        + ", ".join(f"({layer}, {head})" for _, _, layer, head, _ in cases), atol=atol, rtol=rtol,
                        mistakes=mistakes)
    return len(cases)
