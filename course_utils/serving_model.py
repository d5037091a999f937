"""Lesson 12's GPT run the way a server runs it (lesson 16): several tokens of a sequence in one pass over a cache,
and many sequences of different lengths in ONE pass over the paged cache (prefill and decode together).

    state = GPTState(model.num_layers)                      # lesson 12's contiguous cache
    logits = forward_chunk(model, state, tokens)            # tokens (B, T) at positions state.length ..: (B, T, V)
    truncate(state, length)                                 # forget the positions from `length` on
    logits = forward_paged(model, cache, chunks)            # chunks: [Chunk(tokens, start, table)] -> [(n_i, V)]

`forward_chunk` is lesson 12's `GPT.decode_step` for T tokens at once (the keys of the chunk see the cache and
the chunk's earlier positions: a causal mask shifted by the cache's length); speculative decoding verifies k
drafted tokens with it in one pass. `forward_paged` packs the chunks of all sequences into one row of N tokens:
the projections, the feed-forward network and the output layer run once on the N tokens; each token's key and
value go into its sequence's slot of the pool (`PagedKVCache.write`), and each sequence's queries attend over
the keys gathered through its block table, padded into one (B, h, T_q, T_k) attention with a mask.
A new sequence's chunk is its prompt (prefill), a running one's its newest token (decode).
"""
from typing import List, NamedTuple

import torch

from .gpt import GPTState
from .paged_cache import slots_of

__all__ = ["Chunk", "forward_chunk", "truncate", "forward_paged", "embed_at"]


def embed_at(model, tokens, positions):
    """The GPT's input for `tokens` (B, T) at `positions` (T,) (any positions, not only offset .. offset+T-1)."""
    if int(positions.max()) >= model.max_len:
        raise ValueError(f"position {int(positions.max())} is beyond the model's context, max_len={model.max_len}: "
                         "a request longer than the model's context cannot be served")
    x = model.embed(tokens) * model.d_model ** 0.5
    if model.positions == "learned":
        return x + model.pos.pe.weight[positions]
    if model.positions == "sinusoidal":
        return x + model.pos.pe[positions]
    return x                                                   # rotary positions act inside the attention


def _causal_after(length, T, device):
    """(T, length + T) bool: chunk position i (at length + i) may see keys 0 .. length + i."""
    return torch.arange(length + T, device=device)[None, :] <= length + torch.arange(T, device=device)[:, None]


@torch.no_grad()
def forward_chunk(model, state, tokens):
    """Feed tokens (B, T) at positions state.length .. state.length+T-1 through the contiguous cache `state`
    (a course_utils.gpt.GPTState, extended in place); returns the logits (B, T, V). T = 1 is GPT.decode_step."""
    B, T = tokens.shape
    positions = torch.arange(state.length, state.length + T, device=tokens.device)
    x = embed_at(model, tokens, positions)
    mask = _causal_after(state.length, T, tokens.device)[None, None]          # (1, 1, T, t + T)
    for i, layer in enumerate(model.layers):
        q, k, v = layer.attn.project(layer.norm1(x), positions)               # (B, h, T, d), (B, h_kv, T, d)
        if state.kv[i] is not None:
            k, v = torch.cat([state.kv[i][0], k], dim=2), torch.cat([state.kv[i][1], v], dim=2)
        state.kv[i] = (k, v)
        x = x + layer.attn.attend(q, k, v, mask)
        x = x + layer.ff(layer.norm2(x))
    state.length += T
    return model.head(model.norm(x))


def truncate(state, length):
    """Keep positions 0 .. length-1 of the contiguous cache (the rest: rejected drafts)."""
    state.kv = [None if kv is None else (kv[0][:, :, :length], kv[1][:, :, :length]) for kv in state.kv]
    state.length = min(state.length, length)
    return state


class Chunk(NamedTuple):
    """What one sequence feeds in a step: `tokens` (list of ids) at positions start .. start+len-1, its keys and
    values going into the slots of its block `table`, which already holds positions 0 .. start-1."""
    tokens: List[int]
    start: int
    table: List[int]


class _Layout(NamedTuple):
    """Where everything of one packed step is: the same for every layer."""
    tokens: torch.Tensor        # (N,) the packed tokens
    positions: torch.Tensor     # (N,) their positions in their sequences
    slots: torch.Tensor         # (N,) the slots their keys and values go to
    queries: torch.Tensor       # (B, T_q) index of each sequence's i-th token in the packed row (0 = padding)
    valid: torch.Tensor         # (B, T_q) bool: a real token
    keys: torch.Tensor          # (B, T_k) slots of each sequence's keys 0 .. end-1 (padding: slot 0)
    mask: torch.Tensor          # (B, 1, T_q, T_k) bool: query i may see key j (None: one query, every key)


def _layout(chunks, block_size, device):
    lengths = [len(c.tokens) for c in chunks]
    if min(lengths, default=0) < 1:
        raise ValueError("every chunk feeds at least one token")
    ends = [c.start + n for c, n in zip(chunks, lengths)]
    B, T_q, T_k = len(chunks), max(lengths), max(ends)
    tokens = torch.tensor([t for c in chunks for t in c.tokens], dtype=torch.long)
    positions = torch.cat([torch.arange(c.start, e) for c, e in zip(chunks, ends)])
    slots = torch.cat([slots_of(c.table, torch.arange(c.start, e), block_size) for c, e in zip(chunks, ends)])
    first = torch.tensor([0] + lengths[:-1]).cumsum(0)                            # (B,) where each chunk starts
    i = torch.arange(T_q)
    valid = i[None, :] < torch.tensor(lengths)[:, None]                          # (B, T_q)
    queries = torch.where(valid, first[:, None] + i[None, :], 0)
    j = torch.arange(T_k)
    keys = torch.stack([slots_of(c.table, j.clamp(max=e - 1), block_size) for c, e in zip(chunks, ends)])
    query_pos = torch.tensor([c.start for c in chunks])[:, None] + i[None, :]    # (B, T_q)
    mask = (j[None, None, :] <= query_pos[:, :, None]) & valid[:, :, None]        # causal, real queries only
    to = dict(device=device)
    mask = None if B == 1 and T_q == 1 else mask[:, None].to(**to)     # one query seeing all its keys: no mask
    return _Layout(tokens.to(**to), positions.to(**to), slots.to(**to), queries.to(**to), valid.to(**to),
                   keys.to(**to), mask)


@torch.no_grad()
def forward_paged(model, cache, chunks):
    """One pass of `model` over the chunks of several sequences (Chunk: tokens, start, table) with the paged
    `cache` (their tables must already hold slots up to start + len(tokens) - 1: PagedKVCache.reserve).
    Writes every fed token's key and value into its slot; returns the logits of each chunk, [(len_i, V)]."""
    if not chunks:
        return []
    device = cache.k.device
    lay = _layout(chunks, cache.block_size, device)
    x = embed_at(model, lay.tokens[None], lay.positions)                          # (1, N, d_model)
    for i, layer in enumerate(model.layers):
        q, k, v = layer.attn.project(layer.norm1(x), lay.positions)               # (1, h, N, d), (1, h_kv, N, d)
        cache.write(i, lay.slots, k[0].transpose(0, 1), v[0].transpose(0, 1))
        keys, values = cache.layer_view(i)                                        # (slots, h_kv, d)
        K = keys[lay.keys].permute(0, 2, 1, 3).to(q.dtype)                        # (B, h_kv, T_k, d)
        V = values[lay.keys].permute(0, 2, 1, 3).to(q.dtype)
        Q = q[0][:, lay.queries].transpose(0, 1)                                  # (B, h, T_q, d)
        out = layer.attn.attend(Q, K, V, lay.mask)                                # (B, T_q, d_model)
        x = x + out[lay.valid][None]                                              # back to the packed row
        x = x + layer.ff(layer.norm2(x))
    logits = model.head(model.norm(x))[0]                                         # (N, V)
    return list(logits.split([len(c.tokens) for c in chunks]))


def new_state(model):
    """An empty contiguous cache for `model` (lesson 12's GPTState)."""
    return GPTState(model.num_layers)
