"""Lesson 14, exercise 7: activation patching of one head.

    patch_head(model, clean, corrupted, layer, head) -> logits (B, T, V): the model run on `corrupted`, with head
        `head` of layer `layer` writing what it wrote on `clean` (its slice of out_proj's input, features
        head·d_head .. (head+1)·d_head - 1, taken from the clean run); the model exactly as it was afterwards

The check runs two small attention-only models with random weights (one of them in training mode) on random clean
and corrupted sequences at four (layer, head) pairs. It tests that the model is left as it was (no hook, the same
weights, the same mode), then compares the logits; the lesson's typical mistakes are named by their values, each
computed by running its own wrong answer (patchings.py), and so is the run of another head.
"""
import functools

import torch

from ... import circuits as ref
from ... import induction
from ..core import Mistake, Mistakes, exercise, expect, expect_shape, single_threaded
from ..evaluation import Evaluation
from ..mistakes import Said
from . import circuit_weights as cw
from . import patchings as wrong


def _wrong(**kinds):
    return functools.partial(wrong.patched, **kinds)


M = Mistakes(
    Mistake("backwards", "these are the logits of the CLEAN sequence with the head's output taken from the corrupted "
            "run: the patch goes the other way, the corrupted run receives the head's output from the clean run",
            shows=_wrong(source="corrupted", target="clean")),
    Mistake("unchanged", "these are the corrupted run's logits as they are: the head's output was not replaced (was "
            "the hook registered on the module the model runs, and before the corrupted run?)", shows=wrong.unchanged),
    Mistake("clean_run", "these are the clean run's logits: the model runs on the CORRUPTED sequence, and only the "
            "one head's output comes from the clean run", shows=wrong.clean_run),
    Mistake("zeroed", "the head's output is set to zero in the corrupted run (an ablation): patching puts in what the "
            "head wrote on the clean sequence", shows=_wrong(value="zero")),
    Mistake("whole_layer", "every head of the layer is taken from the clean run (the whole input of W_O): patching one "
            "head replaces its d_head features only", shows=_wrong(what="layer")),
    Mistake("output_side", "the features replaced are features head·d_head .. (head+1)·d_head - 1 of W_O's OUTPUT, the "
            "d_model features every head writes to; a head's own output is its slice of W_O's INPUT",
            hint="a forward pre-hook on out_proj (it sees the concatenated heads), not a forward hook",
            shows=_wrong(where="output")),
    Mistake("slice_unscaled", "the features replaced start at feature `head` of W_O's input, not at head·d_head: "
            "head j writes features j·d_head .. (j+1)·d_head - 1", hint="[head * d_head:(head + 1) * d_head]",
            shows=_wrong(what="unscaled")),
    Mistake("other_head", "these are the logits with {found} patched; the exercise asks for layer {layer}, head {head} "
            "(both counted from 0)", shows=_wrong(pick="head_from_1")),
    Mistake("hook_left", "a hook is still registered on the model after your function returned: every later run of "
            "the model is patched too", hint="handle = ...register_forward_pre_hook(...); handle.remove() in a "
            "finally", shows=wrong.hook_left),
    Mistake("weights_changed", "your function changed the model's weights ({names}): the model must be exactly as it "
            "was", hint="patch the head's output with hooks, or edit a copy (copy.deepcopy(model))",
            shows=wrong.weights_edited),
    Mistake("mode_changed", "your function left the model in {mode} mode (the caller's model.training changed): the "
            "model must be exactly as it was", hint="was_training = model.training first; model.train(was_training) "
            "before returning", shows=wrong.left_in_eval_mode),
)
_BY_VALUES = ["backwards", "unchanged", "clean_run", "zeroed", "whole_layer", "output_side", "slice_unscaled"]
CASES = [(0, (1, 0)), (0, (0, 2)), (1, (0, 1)), (1, (1, 0))]        # (model, (layer, head))


def _tokens(ev, seed, vocab, B=3, T=8):
    g = ev.rng(seed)
    return (torch.as_tensor(g.integers(0, vocab, (B, T))), torch.as_tensor(g.integers(0, vocab, (B, T))))


def _other_heads(model, clean, corrupted, layer, head):
    return {M.other_head.at(found=f"layer {l_}, head {j}", layer=layer, head=head):
            ref.patch_head(model, clean, corrupted, l_, j)
            for l_, attn in enumerate(induction.attention_heads(model)) for j in range(attn.num_heads)
            if (l_, j) != (layer, head)}


def _expect_model_as_it_was(model, before, modes):
    hooked = any(m._forward_pre_hooks or m._forward_hooks for m in model.modules())
    expect(not hooked, M.hook_left)
    changed = [k for k, v in model.state_dict().items() if not torch.equal(v, before[k])]
    expect(not changed, M.weights_changed.at(names=", ".join(changed[:2])))
    flipped = [now for was, now in zip(modes, (m.training for m in model.modules())) if was != now]
    expect(not flipped, M.mode_changed.at(mode="training" if flipped[:1] == [True] else "eval"))


def _with_a_copy(model, clean, corrupted, layer, head):
    """Keeps the clean run's output of the head with a forward hook on out_proj reading its input, then runs a deep
    copy of the model whose out_proj gets the slice through a pre-hook."""
    import copy

    attn = model.layers[layer].attn
    lo, hi = head * attn.d_head, (head + 1) * attn.d_head
    kept = []
    handle = attn.out_proj.register_forward_hook(lambda m, args, out: kept.append(args[0][..., lo:hi].clone()))
    with torch.no_grad():
        model(clean)
    handle.remove()
    other = copy.deepcopy(model).eval()

    def put(module, args):
        z = args[0].clone()
        z[..., lo:hi] = kept[0]
        return (z,)
    other.layers[layer].attn.out_proj.register_forward_pre_hook(put)
    with torch.no_grad():
        return other(corrupted)


@exercise("activation patching of one head", name="patch_head", reference=ref.patch_head, mistakes=M,
          right=[_with_a_copy])
@single_threaded
def patch_head(ev: Evaluation, answer):
    """answer(model, clean (B, T), corrupted (B, T), layer, head) -> logits (B, T, V)."""
    models = cw.circuit_models(ev, seeds=(4, 5))
    models[0].train()                                          # (no dropout: the same logits in both modes)
    for case, (which, (layer, head)) in enumerate(CASES):
        model = models[which]
        clean, corrupted = _tokens(ev, 10 + case, model.vocab_size)
        expected = ref.patch_head(model, clean, corrupted, layer, head)
        variants = {**M.variants(_BY_VALUES, model, clean, corrupted, layer, head),
                    **_other_heads(model, clean, corrupted, layer, head)}
        before = {k: v.clone() for k, v in model.state_dict().items()}
        modes = [m.training for m in model.modules()]
        got = ev.call(answer, model, clean, corrupted, layer, head)
        _expect_model_as_it_was(model, before, modes)
        what = f"the logits with layer {layer}, head {head} patched"
        expect(got is not None, Said("none", f"{what}: your function returned nothing: return the logits of the "
                                             "corrupted run, (B, T, V)."))
        expect_shape(got, tuple(expected.shape), what)
        ev.expect_close(torch.as_tensor(got).detach().float(), expected, what, atol=1e-4, rtol=1e-3,
                        mistakes=variants)
    return len(CASES)
