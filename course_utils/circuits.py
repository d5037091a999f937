"""Reading a circuit from the weights, and patching one head (lesson 14; Elhage et al. 2021, "A Mathematical
Framework for Transformer Circuits"; activation patching as in Meng et al. 2022 and Wang et al. 2023).

    W_Q, W_K, W_V, W_O = head_weights(attn, head)     # one head's matrices, x W (row vectors, as the lesson writes)
    ov = ov_circuit(model, layer, head)               # (V, V): W_E W_V W_O W_U, what attending to a token writes
    kc = k_composition(model, previous, induction)    # (V, V): the induction head's scores through layer 0's head
    eigenvalue_score(ov), diagonal_top1(ov)           # does it copy? (Elhage et al.; 1.0 for a pure copier)
    scores = k_composition_scores(model)              # (h, h): ||W_QK W_OVᵀ|| / (||W_QK|| ||W_OV||) per pair of heads
    logits = patch_head(model, clean, corrupted, layer, head)   # the corrupted run, one head's output from clean
    maps = patched_attention_maps(model, clean, corrupted, layer, head)   # (N, B, h, T, T) in that run
    effects = patching_effects(model, clean, corrupted, half_length)   # (N, h): share of the loss gap recovered

The model is an attention-only Transformer (course_utils.induction.AttentionOnly: `embed`, `layers[l].attn`,
`unembed`) or a GPT (`head` for the unembedding). Row vectors throughout: a token's embedding e_a is a row of
W_E = embed.weight (V, d_model); nn.Linear computes x Wᵀ + b, so the lesson's W (x W) is the Linear's weight
transposed. The products leave out the LayerNorms, the biases and the rotary positions (Elhage et al. read
their models the same way: each LayerNorm rescales a position's vector, which changes how large a product's
entries are more than which entry of a row is largest).
"""
import contextlib

import torch
import torch.nn.functional as F

from .induction import attention_heads, second_copy_loss

__all__ = ["head_weights", "embedding", "unembedding", "ov_circuit", "qk_circuit", "k_composition",
           "eigenvalue_score", "diagonal_top1", "composition_score", "k_composition_scores", "patch_head",
           "patched_attention_maps", "patched_loss", "patching_effects"]


def head_weights(attn, head):
    """(W_Q, W_K, W_V, W_O) of query head `head` of a CausalSelfAttention: W_Q, W_K, W_V (d_model, d_head), W_O
    (d_head, d_model), so that the head's query is x W_Q and what it writes is (weights @ x W_V) W_O. in_proj's
    rows are [W_Q; W_K; W_V] (d_model, then h_kv d_head twice); with grouped-query heads the key/value head of
    query head j is j // (h / h_kv). W_O is the head's columns of out_proj."""
    h, d_head, d_model = attn.num_heads, attn.d_head, attn.d_model
    if not 0 <= head < h:
        raise ValueError(f"head must be in 0 .. {h - 1}, got {head}")
    kv = head // (h // attn.num_kv_heads)
    W = attn.in_proj.weight.detach()                                   # (d_model + 2 h_kv d_head, d_model)
    q = W[head * d_head:(head + 1) * d_head]
    k = W[d_model + kv * d_head:d_model + (kv + 1) * d_head]
    v = W[d_model + attn.d_kv + kv * d_head:d_model + attn.d_kv + (kv + 1) * d_head]
    o = attn.out_proj.weight.detach()[:, head * d_head:(head + 1) * d_head]   # (d_model, d_head)
    return q.T, k.T, v.T, o.T


def embedding(model):
    """W_E (V, d_model)."""
    return model.embed.weight.detach()


def unembedding(model):
    """W_U (d_model, V): the unembedding (an AttentionOnly's `unembed`, a GPT's `head`), transposed."""
    layer = model.unembed if hasattr(model, "unembed") else model.head
    return layer.weight.detach().T


def _attn(model, layer):
    modules = attention_heads(model)
    if not 0 <= layer < len(modules):
        raise ValueError(f"layer must be in 0 .. {len(modules) - 1}, got {layer}")
    return modules[layer]


def ov_circuit(model, layer, head):
    """(V, V) W_E W_V W_O W_U: row a is what head `head` of layer `layer` adds to every next-token logit when it
    attends to token a (the direct path: the embedding read, the unembedding written)."""
    _, _, W_V, W_O = head_weights(_attn(model, layer), head)
    return embedding(model) @ W_V @ W_O @ unembedding(model)


def qk_circuit(model, layer, head):
    """(V, V) (W_E W_Q)(W_E W_K)ᵀ: the head's score of a query token (row) against a key token (column), each read
    straight from the embedding."""
    W_Q, W_K, _, _ = head_weights(_attn(model, layer), head)
    W_E = embedding(model)
    return (W_E @ W_Q) @ (W_E @ W_K).T


def k_composition(model, previous, induction, layers=(0, 1)):
    """(V, V): the score of head `induction` of layers[1] for a query whose token is a (row) against a key whose
    residual stream holds what head `previous` of layers[0] wrote after attending to token c (column):
    (W_E W_Q)(W_E W_V' W_O' W_K)ᵀ, with ' the previous-token head's matrices. An induction head matched with the
    previous-token head has its largest entries on the diagonal: the query a finds the key whose previous token
    was a."""
    _, _, V1, O1 = head_weights(_attn(model, layers[0]), previous)
    W_Q, W_K, _, _ = head_weights(_attn(model, layers[1]), induction)
    W_E = embedding(model)
    return (W_E @ W_Q) @ (W_E @ V1 @ O1 @ W_K).T


def eigenvalue_score(circuit):
    """Σ λ / Σ |λ| over the eigenvalues λ of a square matrix: 1 when every eigenvalue is positive (a copying
    OV circuit: attending to a raises a's logit), -1 when every one is negative (Elhage et al.)."""
    eigenvalues = torch.linalg.eigvals(circuit.double())
    return float(eigenvalues.real.sum() / eigenvalues.abs().sum())


def diagonal_top1(circuit):
    """The share of rows whose largest entry is on the diagonal (for an OV circuit: of tokens a for which
    attending to a raises a's logit most)."""
    n = circuit.size(0)
    return float((circuit.argmax(-1) == torch.arange(n, device=circuit.device)).float().mean())


def composition_score(A, B):
    """||A B||_F / (||A||_F ||B||_F), between 0 and 1: how much of what A writes B reads (Elhage et al.)."""
    return float(torch.linalg.matrix_norm(A @ B) / (torch.linalg.matrix_norm(A) * torch.linalg.matrix_norm(B)))


def k_composition_scores(model, layers=(0, 1)):
    """(h, h): the K-composition score of every head j of layers[1] (rows) with every head i of layers[0]
    (columns): composition_score(W_OV^i, W_K^j W_Q^jᵀ) = ||W_OV^i W_K^j W_Q^jᵀ|| / (||W_OV^i|| ||W_QK^j||)."""
    first, second = _attn(model, layers[0]), _attn(model, layers[1])
    rows = []
    for j in range(second.num_heads):
        W_Q, W_K, _, _ = head_weights(second, j)
        rows.append([composition_score(W_V @ W_O, W_K @ W_Q.T)
                     for W_V, W_O in (head_weights(first, i)[2:] for i in range(first.num_heads))])
    return torch.tensor(rows)


# ---- activation patching ------------------------------------------------------------------------------
@contextlib.contextmanager
def _hooked(module, hook):
    handle = module.register_forward_pre_hook(hook)
    try:
        yield
    finally:
        handle.remove()


def _patched_run(model, clean, corrupted, layer, head, maps=False):
    """The corrupted run with one head's output from the clean run: its logits, and every layer's attention
    weights (N, B, h, T, T) when `maps`."""
    if clean.shape != corrupted.shape:
        raise ValueError(f"clean and corrupted must have the same shape, got {tuple(clean.shape)} and "
                         f"{tuple(corrupted.shape)}")
    attn = _attn(model, layer)
    if not 0 <= head < attn.num_heads:
        raise ValueError(f"layer {layer} has heads 0 .. {attn.num_heads - 1}, got head {head}")
    lo, hi = head * attn.d_head, (head + 1) * attn.d_head
    kept = {}

    def keep(module, args):
        kept["z"] = args[0][..., lo:hi].clone()                        # (B, T, d_head): the head's output

    def put(module, args):
        z = args[0].clone()
        z[..., lo:hi] = kept["z"]
        return (z,) + tuple(args[1:])

    was_training = model.training
    modules = attention_heads(model)
    model.eval()
    try:
        with torch.no_grad():
            with _hooked(attn.out_proj, keep):
                model(clean)
            for module in modules:
                module.store_weights = maps
            with _hooked(attn.out_proj, put):
                logits = model(corrupted)
            weights = torch.stack([m.attn_weights.float() for m in modules]) if maps else None
    finally:
        for module in modules:
            module.store_weights, module.attn_weights = False, None
        model.train(was_training)
    return logits, weights


def patch_head(model, clean, corrupted, layer, head):
    """(B, T, V): the logits of `model` on `corrupted` (B, T), with head `head` of layer `layer` writing what it
    wrote on `clean` (B, T): its slice of W_O's input (features head·d_head .. (head+1)·d_head - 1 of the
    concatenated heads) taken from the clean run, every other head and layer computed on the corrupted input.
    The model is left as it was (no hook, its mode)."""
    return _patched_run(model, clean, corrupted, layer, head)[0]


def patched_attention_maps(model, clean, corrupted, layer, head):
    """(N, B, h, T, T): every layer's attention weights in the run of patch_head."""
    return _patched_run(model, clean, corrupted, layer, head, maps=True)[1]


def _second_copy(logits, tokens, half_length):
    losses = F.cross_entropy(logits[:, :-1].float().transpose(1, 2), tokens[:, 1:], reduction="none").mean(0)
    return float(second_copy_loss(losses, half_length))


@torch.no_grad()
def patched_loss(model, clean, corrupted, layer, head, half_length):
    """The loss on the second copy of `corrupted` (its targets: the tokens of `corrupted` itself) with one head
    patched from `clean` (patch_head)."""
    return _second_copy(patch_head(model, clean, corrupted, layer, head), corrupted, half_length)


@torch.no_grad()
def patching_effects(model, clean, corrupted, half_length):
    """(N, h): for every head, the share of the gap between the corrupted run's loss on the second copy and the
    clean run's that patching that head alone from the clean run closes: (L_corrupted - L_patched) /
    (L_corrupted - L_clean); 1 = the whole loss recovered, 0 = nothing, negative = worse. The targets are the
    second copy's tokens, the same in both runs ([r, r] clean, [r', r] corrupted)."""
    was_training = model.training
    model.eval()
    try:
        clean_loss = _second_copy(model(clean), clean, half_length)
        corrupted_loss = _second_copy(model(corrupted), corrupted, half_length)
    finally:
        model.train(was_training)
    gap = corrupted_loss - clean_loss
    return torch.tensor([[(corrupted_loss - patched_loss(model, clean, corrupted, layer, head, half_length)) / gap
                          for head in range(attn.num_heads)] for layer, attn in enumerate(attention_heads(model))])
