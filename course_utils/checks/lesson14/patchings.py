"""Exercise 7's answers written with one thing wrong: the single definition of its mistakes' values.

    patched(model, clean, corrupted, layer, head, source="clean", target="corrupted", what="slice", where="input",
            pick="same") -> logits (B, T, V)

The right answer is every default: run `clean`, keep head `head`'s slice of out_proj's input (features
head·d_head .. (head+1)·d_head - 1 of the concatenated heads), run `corrupted` with that slice replaced by the kept
one; every hook removed, the model left in its mode.
"""
import torch

from ... import induction as ref

# what: (attn, head) -> the (lo, hi) features replaced
WHAT = {
    "slice": lambda attn, j: (j * attn.d_head, (j + 1) * attn.d_head),
    "unscaled": lambda attn, j: (j, j + attn.d_head),                          # from j, not j·d_head
    "layer": lambda attn, j: (0, attn.num_heads * attn.d_head),                # every head of the layer
}
PICK = {
    "same": lambda layer, head, n_layers, n_heads: (layer, head),
    "head_from_1": lambda layer, head, n_layers, n_heads: (layer, (head - 1) % n_heads),
    "layer_from_1": lambda layer, head, n_layers, n_heads: ((layer - 1) % n_layers, head),
}


def _run(model, tokens, module, hook, kind="pre"):
    handle = module.register_forward_pre_hook(hook) if kind == "pre" else module.register_forward_hook(hook)
    try:
        with torch.no_grad():
            return model(tokens)
    finally:
        handle.remove()


def patched(model, clean, corrupted, layer, head, source="clean", target="corrupted", what="slice", where="input",
            pick="same", value="kept"):
    """The patched run with the mistakes the keywords name (every default: right)."""
    attns = ref.attention_heads(model)
    layer, head = PICK[pick](layer, head, len(attns), attns[0].num_heads)
    attn = attns[layer]
    lo, hi = WHAT[what](attn, head)
    runs = {"clean": clean, "corrupted": corrupted}
    kept = {}
    was_training = model.training
    model.eval()
    try:
        if where == "input":                                             # out_proj's input: the heads' outputs
            def keep(module, args):
                kept["z"] = args[0][..., lo:hi].clone()

            def put(module, args):
                z = args[0].clone()
                z[..., lo:hi] = 0 if value == "zero" else kept["z"]
                return (z,) + tuple(args[1:])
            _run(model, runs[source], attn.out_proj, keep)
            return _run(model, runs[target], attn.out_proj, put)

        def keep_out(module, args, out):                                 # out_proj's output: d_model features
            kept["y"] = out[..., lo:hi].clone()

        def put_out(module, args, out):
            out = out.clone()
            out[..., lo:hi] = kept["y"]
            return out
        _run(model, runs[source], attn.out_proj, keep_out, kind="post")
        return _run(model, runs[target], attn.out_proj, put_out, kind="post")
    finally:
        model.train(was_training)


def unchanged(model, clean, corrupted, layer, head):
    """The corrupted run as it is: nothing patched."""
    with torch.no_grad():
        return model(corrupted)


def clean_run(model, clean, corrupted, layer, head):
    """The clean run as it is."""
    with torch.no_grad():
        return model(clean)


# ---- answers that leave the model changed (the check tests the model, not these values) ---------------------
def hook_left(model, clean, corrupted, layer, head):
    """The hook that puts the clean slice in, registered and never removed."""
    attn = ref.attention_heads(model)[layer]
    lo, hi = head * attn.d_head, (head + 1) * attn.d_head
    kept = {}
    handle = attn.out_proj.register_forward_pre_hook(lambda m, a: kept.update(z=a[0][..., lo:hi].clone()))
    with torch.no_grad():
        model(clean)
    handle.remove()

    def put(module, args):
        z = args[0].clone()
        z[..., lo:hi] = kept["z"]
        return (z,) + tuple(args[1:])
    attn.out_proj.register_forward_pre_hook(put)
    with torch.no_grad():
        return model(corrupted)


def left_in_eval_mode(model, clean, corrupted, layer, head):
    """model.eval() called on the caller's model, its mode never put back."""
    out = patched(model, clean, corrupted, layer, head)
    model.eval()
    return out


def weights_edited(model, clean, corrupted, layer, head):
    """The head taken out by zeroing its columns of W_O in the caller's model (never put back), and the clean run's
    contribution, averaged over the positions, added to out_proj's bias."""
    attn = ref.attention_heads(model)[layer]
    lo, hi = head * attn.d_head, (head + 1) * attn.d_head
    kept = {}
    handle = attn.out_proj.register_forward_pre_hook(lambda m, a: kept.update(z=a[0][..., lo:hi].clone()))
    with torch.no_grad():
        model(clean)
        handle.remove()
        attn.out_proj.bias += (kept["z"] @ attn.out_proj.weight[:, lo:hi].T).mean((0, 1))
        attn.out_proj.weight[:, lo:hi] = 0
        return model(corrupted)
