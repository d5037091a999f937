"""What exercises 5 and 6 of lesson 14 share: the small models their checks read, and one head's matrices read with
one thing wrong (the single definition of their mistakes' values).

    models = circuit_models(ev)                 # two small AttentionOnly models with random weights and biases
    W_Q, W_K, W_V, W_O = weights(attn, head, read="right")   # as circuits.head_weights, or with the `read` mistake
    matmul_symptom(M.some_mistake)              # for call_naming: a product of matrices whose inner sizes differ

`read` names how the head's matrices are taken from in_proj (rows [W_Q; W_K; W_V]) and out_proj (columns):
"right"; "unscaled" (rows from j, not j·d_head); "out_rows" (W_O from out_proj's rows j·d_head .. (j+1)·d_head,
not its columns); "untransposed" (in_proj's rows as they are, (d_head, d_model): nn.Linear keeps (out, in)).
"""
import torch

from ... import circuits as ref
from ... import induction
from .. import torch_errors


def circuit_models(ev, seeds=(0, 1)):
    """Two small 2-layer AttentionOnly models (vocabulary, d_model, heads of sizes that differ, so that a matrix
    read the wrong way round does not fit by chance), their weights and biases drawn from ev.rng(seed)."""
    models = []
    for seed, (vocab, d_model, heads) in zip(seeds, [(11, 12, 3), (13, 16, 2)]):
        g = ev.rng(seed)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(g.integers(2 ** 31)))
            model = induction.AttentionOnly(vocab, d_model, heads, num_layers=2, max_len=8)
            with torch.no_grad():
                for p in model.parameters():
                    if p.dim() == 1 and p is not None:
                        p.normal_(0, 0.3)                          # biases and LayerNorm gains: not 0, not 1
        models.append(model.eval())
    return models


def weights(attn, head, read="right"):
    """(W_Q, W_K, W_V, W_O) of one head, read as `read` says (see the module's docstring)."""
    if read == "right":
        return ref.head_weights(attn, head)
    d, dh = attn.d_model, attn.d_head
    W, W_out = attn.in_proj.weight.detach(), attn.out_proj.weight.detach()
    start = head if read == "unscaled" else head * dh
    rows = [W[offset + start:offset + start + dh] for offset in (0, d, 2 * d)]   # (d_head, d_model) each
    if read == "untransposed":
        return rows[0], rows[1], rows[2], W_out[:, head * dh:(head + 1) * dh]
    q, k, v = (r.T for r in rows)
    o = W_out[head * dh:(head + 1) * dh] if read == "out_rows" else W_out[:, start:start + dh].T
    return q, k, v, o


def embedding(model):
    return model.embed.weight.detach()


def unembedding(model):
    return model.unembed.weight.detach().T


def matmul_symptom(mistake):
    """[(torch's matmul error, the mistake's words with the two shapes)] for call_naming."""
    return [(torch_errors.MATMUL, lambda m: mistake.at(a=f"{m['r1']}×{m['c1']}", b=f"{m['r2']}×{m['c2']}"))]


SHAPES = ("W_E is (V, d_model), W_Q, W_K, W_V (d_model, d_head), W_O (d_head, d_model), W_U (d_model, V); "
          "an nn.Linear keeps its weight as (out_features, in_features), the transpose of the W in x W")
