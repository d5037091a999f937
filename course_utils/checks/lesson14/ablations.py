"""Exercise 2's answers written with one thing wrong: the single definition of its mistakes' values.

    ablation(model, tokens, layer, head, half_length, remove="output", positions="second", shift=True,
             result="rise", target="same")
        -> the rise of the mean loss over `positions` of the shifted (or unshifted) per-position loss when
           `remove` takes the head (layer, head) (or the `target` one) out, as `result` says

The right answer is every default: zero the head's slice of W_O's input (features head·d_head .. (head+1)·d_head
of the concatenated heads), the loss on positions L .. 2L-2 of induction.loss_per_position (targets L+1 .. 2L-1),
ablated minus intact. Every hook is removed before it returns and the model is left as it was.
"""
import torch
import torch.nn.functional as F

from ... import induction as ref


def _pre_hook(attn, lo, hi):
    """Zero features lo .. hi-1 of out_proj's input (the concatenated heads)."""
    def hook(module, args):
        z = args[0].clone()
        z[..., lo:hi] = 0
        return (z,) + tuple(args[1:])
    return attn.out_proj.register_forward_pre_hook(hook)


def _output_hook(module, edit):
    """Replace the module's output y by edit(y, x) (x its input)."""
    def hook(m, args, out):
        return edit(out.clone(), args[0])
    return module.register_forward_hook(hook)


def _mean_over_positions(attn, lo, hi):
    """The head's slice of out_proj's input replaced by its mean over the positions ("mean ablation")."""
    def hook(module, args):
        z = args[0].clone()
        z[..., lo:hi] = z[..., lo:hi].mean(-2, keepdim=True)
        return (z,) + tuple(args[1:])
    return attn.out_proj.register_forward_pre_hook(hook)


def _zero(out, lo, hi):
    out[..., lo:hi] = 0
    return out


def _without(lo, hi, weight):
    def edit(out, x):
        out[..., lo:hi] -= x @ weight[lo:hi].T
        return out
    return edit


# remove: (attn, head) -> the hook handles that take the head out (or what the mistake takes out instead)
REMOVE = {
    "output": lambda attn, j: [_pre_hook(attn, j * attn.d_head, (j + 1) * attn.d_head)],
    "unscaled": lambda attn, j: [_pre_hook(attn, j, j + attn.d_head)],                  # from j, not j·d_head
    "parenthesis": lambda attn, j: [_pre_hook(attn, j * attn.d_head, j + attn.d_head)],  # j * d:j + 1 * d
    "rows": lambda attn, j: [_output_hook(attn.out_proj, lambda out, x: _zero(out, j * attn.d_head,
                                                                               (j + 1) * attn.d_head))],
    "queries": lambda attn, j: [_output_hook(attn.in_proj, lambda out, x: _zero(out, j * attn.d_head,
                                                                                (j + 1) * attn.d_head))],
    "values": lambda attn, j: [_output_hook(attn.in_proj, _without(2 * attn.d_model + j * attn.d_head,
                                                                   2 * attn.d_model + (j + 1) * attn.d_head,
                                                                   attn.in_proj.weight))],
    "to_end": lambda attn, j: [_pre_hook(attn, j * attn.d_head, attn.d_model)],          # j·d_head .. the end
    "mean": lambda attn, j: [_mean_over_positions(attn, j * attn.d_head, (j + 1) * attn.d_head)],
}
# positions: L -> the slice of the per-position losses averaged
POSITIONS = {
    "second": lambda L: slice(L, 2 * L - 1),
    "whole": lambda L: slice(0, 2 * L - 1),
    "early": lambda L: slice(L - 1, 2 * L - 1),
    "late": lambda L: slice(L + 1, 2 * L),
    "inner": lambda L: slice(L + 1, 2 * L - 2),
}
# target: (layer, head, model) -> the head actually taken out
TARGET = {
    "same": lambda layer, head, model: (layer, head),
    "layer_from_1": lambda layer, head, model: (layer - 1, head),
    "head_from_1": lambda layer, head, model: (layer, head - 1),
}


def unshifted_losses(model, tokens):
    """(T,): position t scored on token t (no shift), averaged over the batch."""
    logits = model(tokens).float()
    return F.cross_entropy(logits.transpose(1, 2), tokens, reduction="none").mean(0)


def _losses(model, tokens, shift):
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            return ref.loss_per_position(model, tokens) if shift else unshifted_losses(model, tokens)
    finally:
        model.train(was_training)


def ablation(model, tokens, layer, head, half_length, remove="output", positions="second", shift=True,
             result="rise", target="same"):
    """The rise of the loss when one head is taken out, with the mistakes the keywords name (every default: right)."""
    window = POSITIONS[positions](half_length)
    clean = float(_losses(model, tokens, shift)[window].mean())
    layer, head = TARGET[target](layer, head, model)
    attn = ref.attention_heads(model)[layer]
    handles = REMOVE[remove](attn, head % attn.num_heads)
    try:
        ablated = float(_losses(model, tokens, shift)[window].mean())
    finally:
        for handle in handles:
            handle.remove()
    return {"rise": ablated - clean, "sign": clean - ablated, "ablated": ablated}[result]


def per_position_rise(model, tokens, layer, head):
    """(T-1,): the rise of loss_per_position at every position when the head writes nothing (the reference)."""
    clean = ref.loss_per_position(model, tokens)
    with ref.ablate_heads(model, [(layer, head)]):
        return ref.loss_per_position(model, tokens) - clean


# ---- answers that leave the model changed (their values are never compared: the check tests the model) --------
def hook_left(model, tokens, layer, head, half_length):
    """The pre-hook registered and never removed."""
    L = half_length
    clean = ref.loss_per_position(model, tokens)[L:2 * L - 1].mean()
    attn = model.layers[layer].attn
    _pre_hook(attn, head * attn.d_head, (head + 1) * attn.d_head)
    return float(ref.loss_per_position(model, tokens)[L:2 * L - 1].mean() - clean)


def zeroed_in_place(model, tokens, layer, head, half_length):
    """The head's columns of W_O zeroed in the caller's model, never put back."""
    L = half_length
    clean = ref.loss_per_position(model, tokens)[L:2 * L - 1].mean()
    attn = model.layers[layer].attn
    with torch.no_grad():
        attn.out_proj.weight[:, head * attn.d_head:(head + 1) * attn.d_head] = 0
    return float(ref.loss_per_position(model, tokens)[L:2 * L - 1].mean() - clean)


def left_in_eval_mode(model, tokens, layer, head, half_length):
    """model.eval() called on the caller's model, its mode never put back."""
    model.eval()
    return ref.ablation_effect(model, tokens, layer, head, half_length)


def every_position(model, tokens, layer, head, half_length):
    """The rise at every position of the second copy, not their mean: several numbers."""
    return per_position_rise(model, tokens, layer, head)[half_length:2 * half_length - 1]
