"""Lesson 14, exercise 6: the induction head's QK circuit composed with the previous-token head (K-composition).

    k_composition(model, previous, induction) -> (V, V): (W_E W_Q)(W_E W_V' W_O' W_K)ᵀ, with W_Q, W_K those of head
        `induction` of layer 1 and W_V', W_O' those of head `previous` of layer 0; rows: the query's token,
        columns: the token the previous-token head attended to; no LayerNorm, no bias, no 1/√d_head

The check reads two small attention-only models with random weights at four (previous, induction) pairs. The
lesson's typical mistakes are named by their values, each computed by running its own wrong answer below; a
product of matrices whose sizes do not fit is named by torch's error.
"""
import functools
import math

import torch

from ... import circuits as ref
from ... import induction
from ..core import Mistake, Mistakes, exercise, expect_array, single_threaded
from ..evaluation import Evaluation, call_naming
from . import circuit_weights as cw


def composed(model, previous, induction_head, read="right", side="keys", key="k", layers=(0, 1), scale=False,
             ends="both", order="right", transpose=False):
    """The K-composition circuit written with the mistakes the keywords name (every default: right)."""
    if transpose:
        return composed(model, previous, induction_head).T
    if order == "swapped":
        previous, induction_head = induction_head, previous
    attns = induction.attention_heads(model)
    _, _, V1, O1 = cw.weights(attns[layers[0]], previous, read)
    Q, K, V, _ = cw.weights(attns[layers[1]], induction_head, read)
    K = {"k": K, "v": V}[key]
    E = cw.embedding(model)
    if side == "direct":
        out = (E @ Q) @ (E @ K).T
    elif side == "queries":
        out = (E @ V1 @ O1 @ Q) @ (E @ K).T
    elif side == "both":
        out = (E @ V1 @ O1 @ Q) @ (E @ V1 @ O1 @ K).T
    else:
        keys = V1 @ O1 @ K if ends == "no_embed" else E @ V1 @ O1 @ K
        out = (E @ Q) @ keys.T
    return out / math.sqrt(Q.size(-1)) if scale else out


def _wrong(**kinds):
    return functools.partial(composed, **kinds)


M = Mistakes(
    Mistake("direct", "this is the induction head's QK circuit straight from the embedding, (W_E W_Q)(W_E W_K)ᵀ: the "
            "previous-token head is not in it; K-composition puts what that head writes, W_E W_V' W_O', where the "
            "keys read the residual stream", shows=_wrong(side="direct")),
    Mistake("queries", "the previous-token head's output is on the QUERY side, (W_E W_V' W_O' W_Q)(W_E W_K)ᵀ: that is "
            "Q-composition; in the induction circuit the KEYS read what the previous-token head wrote",
            shows=_wrong(side="queries")),
    Mistake("both_sides", "the previous-token head's output is on both sides, queries and keys: only the keys read it "
            "(K-composition); the query reads the current token, W_E W_Q", shows=_wrong(side="both")),
    Mistake("swapped_axes", "rows and columns are exchanged: a row is the QUERY's token a, a column the token c that "
            "the previous-token head attended to: (W_E W_Q)(W_E W_V' W_O' W_K)ᵀ, not its transpose",
            shows=_wrong(transpose=True)),
    Mistake("value_weights", "the key side goes through the induction head's W_V, not its W_K: a score compares a "
            "query with a KEY", shows=_wrong(key="v")),
    Mistake("layers", "the previous-token head is read from layer 1 and the induction head from layer 0: `previous` "
            "is a head of the first layer (layer 0), `induction` one of the second (layer 1)",
            shows=_wrong(layers=(1, 0))),
    Mistake("heads_swapped", "the two head numbers are exchanged: `previous` names the head of layer 0, `induction` "
            "the head of layer 1", shows=_wrong(order="swapped")),
    Mistake("scaled", "the scores are divided by √d_head: the circuit is the product of the matrices alone (the "
            "attention divides its scores by √d_head, but that only scales every entry alike)",
            shows=_wrong(scale=True)),
    Mistake("out_rows", "W_O' is read from d_head ROWS of out_proj's weight; a head's part of W_O is d_head of its "
            "COLUMNS (out_proj maps the concatenated heads to d_model features)",
            hint="out_proj.weight[:, head * d_head:(head + 1) * d_head].T", shows=_wrong(read="out_rows")),
    Mistake("slice_unscaled", "a head's rows are taken from row `head` of each block of in_proj, not from head·d_head: "
            "head j owns rows j·d_head .. (j+1)·d_head - 1 of each block",
            hint="in_proj.weight[offset + head * d_head:offset + (head + 1) * d_head]",
            shows=_wrong(read="unscaled")),
    Mistake("no_embed", "the key side starts at W_V' ({shape}): it starts from the token the previous-token head "
            "attended to, through the embedding: W_E W_V' W_O' W_K", shows=_wrong(ends="no_embed")),
    Mistake("matmul", "two matrices whose inner sizes differ were multiplied ({a} by {b}): " + cw.SHAPES,
            hint="in_proj.weight[rows].T is (d_model, d_head)", shows=_wrong(read="untransposed")),
)
_BY_VALUES = ["direct", "queries", "both_sides", "swapped_axes", "value_weights", "layers", "heads_swapped", "scaled",
              "out_rows", "slice_unscaled"]
CASES = [(0, (2, 0)), (0, (1, 1)), (1, (0, 1)), (1, (1, 0))]        # (model, (previous, induction))


def _by_weight_products(model, previous, induction_head):
    """W_QK = W_Q W_Kᵀ and W_OV' = W_V' W_O' first: W_E W_QK (W_E W_OV')ᵀ."""
    first, second = induction.attention_heads(model)
    W_Q, W_K, _, _ = ref.head_weights(second, induction_head)
    _, _, W_V, W_O = ref.head_weights(first, previous)
    W_E = model.embed.weight.detach()
    return W_E @ (W_Q @ W_K.T) @ (W_E @ W_V @ W_O).T


@exercise("the K-composition circuit", name="k_composition", reference=ref.k_composition, mistakes=M,
          right=[_by_weight_products])
@single_threaded
def k_composition(ev: Evaluation, answer):
    """answer(model, previous, induction) -> (V, V)."""
    models = cw.circuit_models(ev, seeds=(2, 3))
    for which, (previous, head) in CASES:
        model = models[which]
        V = model.vocab_size
        what = f"the K-composition circuit of layer 0's head {previous} into layer 1's head {head} (V = {V})"
        got = call_naming(ev, cw.matmul_symptom(M.matmul), answer, model, previous, head)
        expect_array(got, (V, V), what)
        got = torch.as_tensor(got).detach().float()
        shaped = {m.at(shape=f"shape {tuple(v.shape)}"): v for m, v in M.variants(["no_embed"], model, previous,
                                                                                   head).items()}
        ev.expect_close(got, ref.k_composition(model, previous, head), what, atol=1e-4, rtol=1e-3,
                        mistakes={**M.variants(_BY_VALUES, model, previous, head), **shaped})
    return len(CASES)
