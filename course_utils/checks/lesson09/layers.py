"""Lesson 09's encoder and decoder layers computed from their parts, right or with a typical slip: the one
definition of every slip of the two layer exercises (encoder_layer.py, decoder_layer.py).

A layer is a list of blocks (sub-layer, its LayerNorm, its dropout), run in order; every block has its Add & Norm,
    pre-norm:   x = x + dropout_k(Sublayer(norm_k(x)))
    post-norm:  x = norm_k(x + dropout_k(Sublayer(x)))
and a slip (a `kind`) can sit in every block or in one (`kinds`, one per block), in the blocks' order, in which
LayerNorm a block uses, in the masks, or in where dropout is applied (seen in training only).
"""
ENCODER = {"names": ("self-attention", "feed-forward network"),
           "calls": ("self_attn({y}, {y}, {y}, mask)", "ff({y})")}
DECODER = {"names": ("masked self-attention", "cross-attention", "feed-forward network"),
           "calls": ("self_attn({y}, {y}, {y}, tgt_mask)", "cross_attn({y}, memory, memory, memory_mask)", "ff({y})")}


def _identity(t):
    return t


def _sublayer(x, x0, block, norm_first, kind, first_norm):
    """One block's Add & Norm on x (x0: the layer's input); `kind` plants a typical slip."""
    sub, norm, drop = block
    if kind == "swapped":
        norm_first = not norm_first
    if kind == "no_drop":
        drop = _identity
    if kind == "no_residual":
        return drop(sub(norm(x))) if norm_first else norm(drop(sub(x)))
    if kind == "norm_output":               # the LayerNorm on the sub-layer's output, inside the residual
        return x + norm(drop(sub(x)))
    if kind == "no_norm":                   # pre-norm: the sub-layer reads x; post-norm: no LayerNorm after the sum
        return x + drop(sub(x))
    if kind == "norm_residual" and norm_first:
        y = norm(x)
        return y + drop(sub(y))
    if kind == "reads_input":               # the sub-layer reads the layer's input, not the updated x
        return x + drop(sub(norm(x0))) if norm_first else norm(x + drop(sub(x0)))
    if kind == "reads_y" and norm_first:    # ... the y = norm1(x) computed for the first sub-layer
        return x + drop(sub(first_norm(x0)))
    if kind == "drop_sum":
        return drop(x + sub(norm(x))) if norm_first else norm(drop(x + sub(x)))
    if kind == "drop_after_norm" and not norm_first:
        return drop(norm(x + sub(x)))
    if kind == "drop_input":
        return x + sub(drop(norm(x))) if norm_first else norm(x + sub(drop(x)))
    return x + drop(sub(norm(x))) if norm_first else norm(x + drop(sub(x)))


def one(kind, block, n):
    """`kinds` with the slip `kind` in block `block` (of n) only."""
    return ["ok"] * block + [kind] + ["ok"] * (n - block - 1)


def run_layer(x, blocks, norm_first, kinds="ok", order=None):
    """The layer's output: its blocks run in `order` (default: as given), each with its kind (`kinds`: one for
    all, or one per block)."""
    kinds = [kinds] * len(blocks) if isinstance(kinds, str) else kinds
    x0 = x
    for i in order or range(len(blocks)):
        x = _sublayer(x, x0, blocks[i], norm_first, kinds[i], blocks[0][1])
    return x


def encoder_output(layer, x, mask, norm_first, norms=None, **how):
    """The encoder layer `layer` (its modules) on x; `norms`: the LayerNorms of the two blocks (default its own)."""
    n1, n2 = norms or (layer.norm1, layer.norm2)
    blocks = [(lambda y: layer.self_attn(y, y, y, mask), n1, layer.dropout1), (layer.ff, n2, layer.dropout2)]
    return run_layer(x, blocks, norm_first, **how)


def decoder_output(layer, x, memory, tgt_mask, memory_mask, norm_first, norms=None, cross="ok", **how):
    """The decoder layer on x; `cross` plants a slip in the cross-attention's arguments."""
    n1, n2, n3 = norms or (layer.norm1, layer.norm2, layer.norm3)

    def cross_attention(y):
        if cross == "self_twice":           # keys and values from the decoder instead of the encoder's memory
            return layer.cross_attn(y, y, y, tgt_mask)
        if cross == "memory_normed":
            m = n2(memory)
            return layer.cross_attn(y, m, m, memory_mask)
        attn = layer.self_attn if cross == "self_attn" else layer.cross_attn
        return attn(y, memory, memory, memory_mask)

    blocks = [(lambda y: layer.self_attn(y, y, y, tgt_mask), n1, layer.dropout1), (cross_attention, n2, layer.dropout2),
              (layer.ff, n3, layer.dropout3)]
    return run_layer(x, blocks, norm_first, **how)


def formula(layer, i, norm_first):
    """Block i's Add & Norm, written out in the exercise's names (a hint: it is code)."""
    k, call = i + 1, layer["calls"][i]
    if norm_first:
        return f"y = self.norm{k}(x); x = x + self.dropout{k}(self.{call.format(y='y')})"
    return f"x = self.norm{k}(x + self.dropout{k}(self.{call.format(y='x')}))"


def placement(norm_first):
    """The Add & Norm that norm_first asks for, in the lesson's notation."""
    return ("pre-norm, x = x + Dropout(Sublayer(LayerNorm(x)))" if norm_first else
            "post-norm, x = LayerNorm(x + Dropout(Sublayer(x)))")
