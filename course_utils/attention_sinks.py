"""Attention sinks and a key/value cache that keeps them (lesson 14; Xiao et al. 2023, "Efficient Streaming
Language Models with Attention Sinks", StreamingLLM).

    mass = first_position_mass(maps)                       # (N, h): mean weight the queries put on position 0
    k, v = keep_sinks_and_window(k, v, sinks=4, window=60)  # the cache's first 4 and last 60 positions
    nll = stream_nll(model, tokens, sinks=4, window=60)     # (B, T-1): each token's loss, one token at a time
    nll = stream_nll(model, tokens)                         # the full cache (tokens must fit max_len)
    nll = recompute_nll(model, tokens, window=64)           # each token from its last `window` tokens, from scratch

A generation keeps every layer's keys and values (lesson 12's cache). A sliding window keeps only the last
`window` of them: memory and time per token stop growing. Xiao et al. found that this breaks a trained model
as soon as the first tokens leave the cache: many heads put a large part of their weight on the first
position (a "sink" for weight they do not need elsewhere: the softmax must put it somewhere), and once it is
gone that weight lands on the other tokens. Keeping the first few positions (4 in the paper) restores it.

Positions inside the cache (as StreamingLLM): with rotary positions, a query and a key interact through
their distance only, and the model has seen distances up to its training context. The cache's keys sit at
positions 0 .. n-1 of the cache, and the newest token at n: when the window slides, its keys move one
position down, which for RoPE is one more rotation of each kept key by -1 (a rotation by δ moves a key by δ
positions: R(m + δ) = R(δ) R(m)). So the model never sees a distance beyond sinks + window.
"""
import torch
import torch.nn.functional as F

from .gpt import GPTState
from .positions import apply_rope

__all__ = ["first_position_mass", "uniform_first_position_mass", "keep_sinks_and_window", "stream_nll",
           "recompute_nll", "slide", "stream_generate"]


def first_position_mass(maps):
    """maps (N, B, h, T, T) -> (N, h): the weight on key 0, averaged over the queries 1 .. T-1 and the batch
    (query 0 can see only key 0)."""
    if maps.dim() != 5 or maps.size(-1) != maps.size(-2):
        raise ValueError(f"maps must be (layers, B, heads, T, T), got {tuple(maps.shape)}")
    return maps[..., 1:, 0].float().mean(dim=(1, 3))


def uniform_first_position_mass(T):
    """What first_position_mass would be if every query spread its weight evenly over the keys it may see:
    the mean of 1 / (t + 1) over t = 1 .. T-1."""
    return float(sum(1.0 / (t + 1) for t in range(1, T)) / (T - 1))


def keep_sinks_and_window(k, v, sinks, window):
    """A cache k, v (..., t, d) cut to its first `sinks` positions and its last `window` ones, in that order
    (unchanged when t <= sinks + window). sinks = 0: a plain sliding window."""
    t = k.size(-2)
    if sinks < 0 or window < 1:
        raise ValueError(f"sinks must be >= 0 and window >= 1, got sinks={sinks}, window={window}")
    if t <= sinks + window:
        return k, v
    keep = lambda x: torch.cat([x[..., :sinks, :], x[..., t - window:, :]], dim=-2)   # noqa: E731
    return keep(k), keep(v)


def _check_rope(model):
    if getattr(model, "positions", None) != "rope":
        raise ValueError("stream_nll moves keys inside the cache, which needs rotary positions: a GPT built with "
                         f"positions='rope' (this one has {getattr(model, 'positions', None)!r})")


@torch.no_grad()
def stream_nll(model, tokens, sinks=0, window=None):
    """(B, T-1): the loss of each token of `tokens` (B, T) given the ones before, fed one at a time through
    `model` (a GPT, lesson 12) with a key/value cache: the full cache (window=None; T must fit the model's
    max_len), or the first `sinks` positions and the last `window` (positions inside the cache)."""
    model.eval()
    B, T = tokens.shape
    if window is None and T > model.max_len:
        raise ValueError(f"the full cache holds every token: {T} tokens do not fit this model's max_len="
                         f"{model.max_len}; score the first {model.max_len}, or give a window")
    if window is not None:
        _check_rope(model)
        if sinks + window + 1 > model.max_len:
            raise ValueError(f"sinks + window + 1 = {sinks + window + 1} positions must fit max_len={model.max_len}")
    state = GPTState(model.num_layers)
    nll = torch.zeros(B, T - 1)
    for t in range(T - 1):
        logits, state = model.decode_step(tokens[:, t], state)                # (B, V)
        nll[:, t] = F.cross_entropy(logits.float(), tokens[:, t + 1], reduction="none")
        if window is not None:
            slide(model, state, sinks, window)
    return nll


def slide(model, state, sinks, window):
    """Cut a GPTState's cache (every layer's K, V: (B, h_kv, n, d_head)) to its sinks and its window, the
    window's keys moved down to the positions sinks .. sinks + window - 1 (rotated back by as many positions
    as the window moved). Returns the state."""
    moved = state.length - sinks - window                                    # positions the window moves down
    if moved <= 0:
        return state
    kept = []
    for k, v in state.kv:
        k, v = keep_sinks_and_window(k, v, sinks, window)
        shift = torch.full((window,), -moved, device=k.device)
        k = torch.cat([k[..., :sinks, :], apply_rope(k[..., sinks:, :], shift, _rope_base(model))], dim=-2)
        kept.append((k, v))
    state.kv, state.length = kept, sinks + window
    return state


def _rope_base(model):
    return getattr(model.layers[0].attn, "rope_base", 10000.0)


@torch.no_grad()
def recompute_nll(model, tokens, window):
    """(B, T-1): the loss of each token given at most the `window` tokens before it, every prediction computed
    from scratch (a sliding window with re-computation: the strong, slow baseline; T forward passes)."""
    model.eval()
    B, T = tokens.shape
    if window > model.max_len:
        raise ValueError(f"window={window} does not fit the model's max_len={model.max_len}")
    nll = torch.zeros(B, T - 1)
    for t in range(T - 1):
        context = tokens[:, max(0, t + 1 - window):t + 1]                    # (B, <= window)
        logits = model(context)[:, -1].float()                               # (B, V)
        nll[:, t] = F.cross_entropy(logits, tokens[:, t + 1], reduction="none")
    return nll


@torch.no_grad()
def stream_generate(model, prompt, steps, sinks=0, window=60, generator=None, temperature=0.8):
    """Sample `steps` tokens after `prompt` (1, t0) with the sink-and-window cache; returns (1, steps) ids."""
    _check_rope(model)
    model.eval()
    state = GPTState(model.num_layers)
    token, out = prompt[:, 0], []
    for t in range(prompt.size(1) + steps - 1):
        logits, state = model.decode_step(token, state)
        slide(model, state, sinks, window)
        if t + 1 < prompt.size(1):
            token = prompt[:, t + 1]
        else:
            probs = F.softmax(logits.float() / temperature, dim=-1)
            token = torch.multinomial(probs, 1, generator=generator)[:, 0]
            out.append(token)
    return torch.stack(out, dim=1)
