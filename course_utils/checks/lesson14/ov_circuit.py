"""Lesson 14, exercise 5: the OV circuit of one head.

    ov_circuit(model, layer, head) -> (V, V): W_E W_V W_O W_U, the head's matrices read from
        model.layers[layer].attn (in_proj's rows [W_Q; W_K; W_V], out_proj's columns), W_E = model.embed.weight,
        W_U = model.unembed.weight transposed; no LayerNorm, no bias

The check reads two small attention-only models with random weights and biases (vocabulary, d_model and d_head of
different sizes) at four (layer, head) pairs. The lesson's typical mistakes are named by their values, each
computed by running its own wrong answer below (circuit_weights.py reads a head's matrices with one thing wrong);
a product of matrices whose sizes do not fit is named by torch's error; the circuit of another head is named
as such.
"""
import functools

import torch

from ... import circuits as ref
from ... import induction
from ..core import Mistake, Mistakes, exercise, expect_array, single_threaded
from ..evaluation import Evaluation, call_naming
from . import circuit_weights as cw
from .properties import by_property


def ov(model, layer, head, read="right", part="v", target="same", whole=False, biases=False, ends="both",
       transpose=False):
    """The OV circuit written with the mistakes the keywords name (every default: right)."""
    if transpose:
        return ov(model, layer, head).T
    attns = induction.attention_heads(model)
    if target == "head_from_1":
        head = (head - 1) % attns[layer].num_heads
    attn = attns[layer]
    if part == "qk":
        return ref.qk_circuit(model, layer, head)
    heads = range(attn.num_heads) if whole else [head]
    E, U = cw.embedding(model), cw.unembedding(model)
    total = 0
    for j in heads:
        W_Q, W_K, W_V, W_O = cw.weights(attn, j, read)
        W_V = {"v": W_V, "q": W_Q, "k": W_K}[part]
        if biases:
            start = 2 * attn.d_model + j * attn.d_head
            total = total + (E @ W_V + attn.in_proj.bias.detach()[start:start + attn.d_head]) @ W_O
        else:
            total = total + (E @ W_V @ W_O if ends != "no_embed" else W_V @ W_O)
    if biases:
        return (total + attn.out_proj.bias.detach()) @ U + model.unembed.bias.detach()
    return total if ends == "no_unembed" else total @ U


def _wrong(**kinds):
    return functools.partial(ov, **kinds)


M = Mistakes(
    Mistake("queries", "this is the product through the head's QUERY weights (in_proj's first d_model rows): what a "
            "head writes comes from its values, the rows of W_V, the third block of in_proj's rows",
            shows=_wrong(part="q")),
    Mistake("keys", "this is the product through the head's KEY weights (in_proj's second block of rows): what a head "
            "writes comes from its values, the rows of W_V, the third block", shows=_wrong(part="k")),
    Mistake("qk", "this is the head's QK circuit, (W_E W_Q)(W_E W_K)ᵀ, which says where it looks; the OV circuit says "
            "what it writes: W_E W_V W_O W_U", shows=_wrong(part="qk")),
    Mistake("slice_unscaled", "the head's rows of W_V start at row head of the value block, not at head·d_head: "
            "head j owns rows j·d_head .. (j+1)·d_head - 1 of each block",
            hint="in_proj.weight[2 * d_model + head * d_head:2 * d_model + (head + 1) * d_head]",
            shows=_wrong(read="unscaled")),
    Mistake("out_rows", "W_O is read from d_head ROWS of out_proj's weight; the head's part of W_O is d_head of its "
            "COLUMNS (out_proj maps the concatenated heads, its input, to d_model features)",
            hint="out_proj.weight[:, head * d_head:(head + 1) * d_head].T", shows=_wrong(read="out_rows")),
    Mistake("whole_layer", "this is the sum of the OV circuits of every head of the layer: the exercise asks for one "
            "head's, with its d_head rows of W_V and columns of W_O", shows=_wrong(whole=True)),
    Mistake("biases", "every row differs from the circuit by the same amount, what a bias adds (b_V W_O W_U, b_O W_U "
            "or b_U: the same whatever token is attended to): the circuit is the product of the weight matrices alone",
            hint="use the modules' .weight only, not the modules themselves (they add their biases)",
            shows=_wrong(biases=True)),
    Mistake("no_unembed", "the product stops at W_O: {shape}, what the head writes into the residual stream; the "
            "circuit goes on to the logits, through the unembedding W_U (d_model, V)", shows=_wrong(ends="no_unembed")),
    Mistake("no_embed", "the product starts at W_V: {shape}; the circuit starts from the tokens, through the embedding "
            "W_E (V, d_model)", shows=_wrong(ends="no_embed")),
    Mistake("swapped_axes", "rows and columns are exchanged: row a is the token the head attends to, and its V entries "
            "are what that adds to each next-token logit: W_E W_V W_O W_U, not its transpose",
            shows=_wrong(transpose=True)),
    Mistake("other_head", "this is the OV circuit of {found}; the exercise asks for layer {layer}, head {head} (both "
            "counted from 0)", shows=_wrong(target="head_from_1")),
    Mistake("matmul", "two matrices whose inner sizes differ were multiplied ({a} by {b}): " + cw.SHAPES,
            hint="in_proj.weight[rows].T is (d_model, d_head)", shows=_wrong(read="untransposed")),
)
_BY_VALUES = ["queries", "keys", "qk", "slice_unscaled", "out_rows", "whole_layer", "swapped_axes"]
_BY_SHAPE = ["no_unembed", "no_embed"]
CASES = [(0, (1, 0)), (0, (0, 2)), (1, (1, 1)), (1, (0, 0))]        # (model, (layer, head))


def _other_heads(model, layer, head):
    """{other_head at (l, j): the OV circuit of head j of layer l} for every other head of the model."""
    return {M.other_head.at(found=f"layer {l_}, head {j}", layer=layer, head=head): ref.ov_circuit(model, l_, j)
            for l_, attn in enumerate(induction.attention_heads(model)) for j in range(attn.num_heads)
            if (l_, j) != (layer, head)}


def _a_bias_added(got, expected):
    """A probe: the answer differs from the circuit by the same row added to every row (what any of the biases b_V,
    b_O, b_U adds: the same whatever token is attended to)."""
    def probe():
        if got.shape != expected.shape:
            return None
        diff = got - expected
        if diff.abs().max() > 1e-3 and torch.allclose(diff, diff[:1].expand_as(diff), atol=1e-4, rtol=1e-3):
            return M.biases
        return None
    return probe


def _by_reshaping(model, layer, head):
    """in_proj's weight viewed as (3, h, d_head, d_model), out_proj's as (d_model, h, d_head)."""
    attn = induction.attention_heads(model)[layer]
    h, dh, d = attn.num_heads, attn.d_head, attn.d_model
    W_V = attn.in_proj.weight.detach().view(3, h, dh, d)[2, head].T
    W_O = attn.out_proj.weight.detach().view(d, h, dh)[:, head].T
    return model.embed.weight.detach() @ W_V @ W_O @ model.unembed.weight.detach().T


def _by_linear_maps(model, layer, head):
    """The Linear maps themselves with their biases taken out: F.linear(x, weight[rows]) for W_V, and so on."""
    attn = induction.attention_heads(model)[layer]
    lo, hi = head * attn.d_head, (head + 1) * attn.d_head
    x = torch.nn.functional.linear(model.embed.weight, attn.in_proj.weight[2 * attn.d_model + lo:2 * attn.d_model + hi])
    x = torch.nn.functional.linear(x, attn.out_proj.weight[:, lo:hi])
    return torch.nn.functional.linear(x, model.unembed.weight).detach()


@exercise("the OV circuit of a head", name="ov_circuit", reference=ref.ov_circuit, mistakes=M,
          right=[_by_reshaping, _by_linear_maps])
@single_threaded
def ov_circuit(ev: Evaluation, answer):
    """answer(model, layer, head) -> (V, V)."""
    models = cw.circuit_models(ev)
    for which, (layer, head) in CASES:
        model = models[which]
        V = model.vocab_size
        what = f"the OV circuit of layer {layer}, head {head} (V = {V}, d_model = {model.d_model})"
        got = call_naming(ev, cw.matmul_symptom(M.matmul), answer, model, layer, head)
        expect_array(got, (V, V), what)
        got = torch.as_tensor(got).detach().float()
        shaped = {m.at(shape=f"shape {tuple(v.shape)}"): v
                  for m, v in M.variants(_BY_SHAPE, model, layer, head).items()}
        expected = ref.ov_circuit(model, layer, head)
        with by_property(_a_bias_added(got, expected)):
            ev.expect_close(got, expected, what, atol=1e-4, rtol=1e-3,
                            mistakes={**M.variants(_BY_VALUES, model, layer, head), **shaped,
                                      **_other_heads(model, layer, head)})
    return len(CASES)
