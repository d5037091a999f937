"""How lesson 12's checks run the learner's code: calls whose typical crashes get named (`call_naming`), the
learner's module built with the reference's weights (`build`, after `randomise` gave every LayerNorm and the
position table values of their own), the same dropout masks for both (`seeded`), a perturbation's first
moved position (`first_moved`, `leak_message`) and the tie of the output layer (`tied`); and the probes that
say where an unnamed slip is: the half of a block (`wrong_half`), the ends of the GPT or its blocks
(`wrong_part`), weights that do not sum to 1 (`unnormalised`), RoPE's frequencies read off unit vectors
(`rope_frequencies`), the key/value head each query head uses (`gqa_heads`)."""
import copy
import re

import numpy as np
import torch
import torch.nn as nn

from ..attention import scaled_dot_product_attention
from ..gpt import next_token_loss as ref_loss
from ..gpt_attention import grouped_query_attention as ref_gqa
from .core import ExerciseError, expect, randn, to_numpy
from .evaluation import Evaluation, call_naming  # noqa: F401 - lesson 12's checks call it from here


def randomise(ev: Evaluation, module, seed, positions=False):
    """Every LayerNorm gets a gain and a bias of its own (at initialisation they are 1 and 0, so a norm used in
    the wrong place, or missing, would go unnoticed); with `positions`, the learned position table gets the
    scale of the token embeddings (at initialisation it is 50 times smaller)."""
    g = ev.rng(100 + seed)
    with torch.no_grad():
        for m in module.modules():
            if isinstance(m, nn.LayerNorm):
                m.weight.copy_(1 + randn(g, *m.weight.shape, scale=0.3))
                m.bias.copy_(randn(g, *m.bias.shape, scale=0.3))
        if positions:
            module.pos.pe.weight.copy_(randn(g, *module.pos.pe.weight.shape))
    return module


TIED_TRANSPOSED = ("self.embed.weight.T is a plain tensor (a transposed view), not the Parameter: nn.Linear(d_model, "
                   "V).weight is (V, d_model), the embedding's own shape, so tie it as it is: self.head.weight = "
                   "self.embed.weight")


def build(ev: Evaluation, cls, reference, *args, dropout=0.0):
    """The learner's module `cls(*args, dropout=dropout)` holding the reference's weights (same attribute names)."""
    try:
        module = ev.call(cls, *args, dropout=dropout)
    except ExerciseError as error:
        expect("as parameter 'weight'" not in str(error), TIED_TRANSPOSED)
        raise
    expect(isinstance(module, nn.Module), f"{cls.__name__}(...) did not build a torch module.")
    try:
        module.load_state_dict(reference.state_dict())
    except (RuntimeError, AttributeError) as error:
        expect(False, f"your module's parameters do not match the reference's names: keep __init__ as given "
                      f"({str(error).splitlines()[0][:160]}).")
    return module


def seeded(seed, fn, *args):
    """fn(*args) with torch's generator seeded (the same dropout masks for the learner and the reference)."""
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return fn(*args)


def first_moved(a, b, upto):
    """The first position < upto where outputs a, b (B, T, ...) differ, or None."""
    moved = (torch.as_tensor(to_numpy(a)) - torch.as_tensor(to_numpy(b))).abs().flatten(2).amax(dim=(0, 2))[:upto]
    where = (moved > 1e-5).nonzero()
    return int(where[0]) if len(where) else None



def tied(ev: Evaluation, module, tokens, logits):
    """The output layer is the embedding's matrix: the same parameter, or a separate `head` the logits never
    use (an answer that multiplies by self.embed.weight itself)."""
    if module.head.weight is module.embed.weight:
        return True
    probe = copy.deepcopy(module)
    with torch.no_grad():
        probe.head.weight.zero_()
        return np.allclose(to_numpy(ev.call(probe, tokens)), to_numpy(logits), atol=1e-6)


def leak_message(changed_at, first_moved, kind="the logits"):
    """What a perturbation of the tokens from position `changed_at` on says when `kind` moved at `first_moved`."""
    if first_moved == changed_at - 1:
        return (f"{kind} at position {first_moved} changed when the token at position {changed_at} changed: "
                "position t sees position t+1. The causal mask is True on and below the diagonal only "
                "(causal_mask(T)).")
    return (f"{kind} at position {first_moved} changed when the tokens from position {changed_at} on changed: "
            "a position sees later ones. Every block needs the causal mask, causal_mask(T).")


_LAST = {"attn": r"(^|\.)attn\.out_proj\.", "ff": r"(^|\.)ff\.linear2\."}   # each sub-layer's last Linear


def _agree(ev, parts, module, reference, *args, seed=0):
    """Do the learner's module and the reference agree on `args` when the sub-layers `parts` of every block add
    nothing (their last Linear, W_O or W_2, at 0)? The learner's module takes those weights through its own
    load_state_dict (so under the grader too, in the learner's kernel) and gets the reference's back after."""
    state = reference.state_dict()
    off = {key: torch.zeros_like(value) if any(re.search(_LAST[part], key) for part in parts) else value
           for key, value in state.items()}
    ref = copy.deepcopy(reference)
    ref.load_state_dict(off)
    try:
        ev.call(module.load_state_dict, off)
        with torch.no_grad():
            a, b = seeded(seed, ev.call, module, *args), seeded(seed, ref, *args)
    finally:
        ev.call(module.load_state_dict, state)
    return hasattr(a, "shape") and tuple(a.shape) == tuple(b.shape) and np.allclose(to_numpy(a), to_numpy(b),
                                                                                    atol=1e-4)


def wrong_half(ev, module, reference, x, mask, seed):
    """Which half of the learner's block holds the slip (a message), found by switching the other one off."""
    if _agree(ev, ("ff",), module, reference, x, mask, seed=seed):
        return ("the attention half of your block is right (with the feed-forward network switched off, your block "
                "and the course's agree): the slip is in the feed-forward half, x = x + Dropout2(FFN(LayerNorm2(x))), "
                "with x the output of the attention half")
    if _agree(ev, ("attn",), module, reference, x, mask, seed=seed):
        return ("the feed-forward half of your block is right (with the attention switched off, your block and the "
                "course's agree): the slip is in the attention half, x = x + Dropout1(Attn(y, y, y, mask)) with "
                "y = LayerNorm1(x)")
    return None


def wrong_part(ev, module, reference, tokens):
    """Where the learner's GPT differs: at its ends, or in how it runs its blocks (with every block off)."""
    if _agree(ev, ("attn", "ff"), module, reference, tokens):
        return ("the embeddings and the output layer are right (with every block switched off your logits agree "
                "with the course's): the slip is in how the blocks run, each block of self.layers once, in order, "
                "x = layer(x, causal_mask(T))")
    return ("with every block switched off your logits still differ from the course's: the slip is at the ends, the "
            "input x = self.pos(self.embed(tokens) * √d_model) (self.pos adds the positions to x and returns the sum) "
            "or the output self.head(self.norm(x))")


def unnormalised(ev, errors, answer, args, values, what):
    """A message when `answer`, given values (the arguments at the indices `values`) that are all 1, does not
    return 1 everywhere: the weights of a query do not sum to 1, or (when values all 2 give the same output) the
    values are not what the weights multiply. None when it returns 1."""
    def run(fill):
        out = call_naming(ev, errors, answer, *[torch.full_like(a, fill) if i in values else a
                                                for i, a in enumerate(args)])
        return out[0] if isinstance(out, (tuple, list)) else out
    out = run(1.0)
    if hasattr(out, "shape") and not np.allclose(to_numpy(out), 1.0, atol=1e-4):
        twice = run(2.0)
        if hasattr(twice, "shape") and twice.shape == out.shape and np.allclose(to_numpy(twice), to_numpy(out)):
            return (f"{what} does not change when the values change (all 1, then all 2): the read-out is the weights "
                    "times the values v you are given; check that it is v, not k or q, that the weights multiply")
        return (f"with every value equal to 1 {what} should be 1 everywhere, and it is not: the weights of a query "
                "must sum to 1 over the keys it may see (a softmax over the last axis, the masked scores set to "
                "-inf before it, each score q·k divided by √d before it)")
    return None


def masks_more(ev, errors, answer, q, k, v, mask):
    """A message when query 0 does not see the later keys its (padding) mask allows: changing their values leaves
    its output as it was (the answer masks more than `mask` says, e.g. a causal mask of its own). Else None."""
    later = v.clone()
    later[..., 1:, :] += 1.0
    a, b = (call_naming(ev, errors, answer, q, k, values, mask) for values in (v, later))
    sees = torch.broadcast_to(mask, q.shape[:-1] + k.shape[-2:-1])[..., 0, 1:].any(-1)     # (B, h): query 0
    if not (hasattr(a, "shape") and hasattr(b, "shape") and tuple(a.shape) == tuple(b.shape) == tuple(q.shape)):
        return None
    moved = ~np.isclose(to_numpy(a)[..., 0, :], to_numpy(b)[..., 0, :], atol=1e-5).all(-1)
    if np.any(to_numpy(sees) & ~moved):
        return ("query 0 does not see the later keys its mask allows (their values changed, its output did not): your "
                "function masks more than `mask` says (a causal mask of its own?); use the mask it is given, True = "
                "may attend")
    return None


def rope_frequencies(ev, errors, answer, d, base):
    """A message when `answer` turns each pair (x_i, x_{i+d/2}) in its own plane, but by another angle per position
    than θ_i = base^(-2i/d) (read off unit vectors e_i at position 1), else None."""
    half = d // 2
    out = call_naming(ev, errors, answer, torch.eye(d)[:half], torch.ones(half, dtype=torch.long), base)
    if not hasattr(out, "shape") or tuple(out.shape) != (half, d):
        return None
    out, i = torch.as_tensor(to_numpy(out)).double(), torch.arange(half)
    cos, sin = out[i, i], out[i, i + half]
    rest = out.clone()
    rest[i, i], rest[i, i + half] = 0.0, 0.0
    if rest.abs().max() > 1e-4 or not torch.allclose(cos ** 2 + sin ** 2, torch.ones(half).double(), atol=1e-4):
        return None                                            # not a rotation of each pair: another slip
    got, want = torch.atan2(sin, cos), base ** (-2 * i.double() / d)
    if torch.allclose(got, want, atol=1e-4):
        return None

    def shown(t):
        return ", ".join(f"{v:.4g}" for v in t[:4].tolist()) + (", ..." if half > 4 else "")
    return (f"the frequencies are off: from one position to the next, pair i turns by θ_i = base^(-2i/d) (d = {d}, "
            f"base = {base:g}: θ = {shown(want)}), yours by {shown(got)}; compute θ_i = base ** (-2 * i / d) for "
            "i = 0 .. d/2 - 1, in floats")


def gqa_heads(got, q, k, v, mask):
    """A message when every query head of `got` is attention with ONE key/value head, but not with head
    j // (h / h_kv) (the heads grouped another way), else None."""
    h, h_kv = q.size(1), k.size(1)
    got, used = to_numpy(got), []
    for j in range(h):
        with_head = [scaled_dot_product_attention(q[:, j:j + 1], k[:, c:c + 1], v[:, c:c + 1], mask)[:, 0]
                     for c in range(h_kv)]
        match = [c for c, out in enumerate(with_head) if np.allclose(got[:, j], to_numpy(out), atol=1e-5)]
        if not match:
            return None
        used.append(match[0])
    want = [j // (h // h_kv) for j in range(h)]
    if used == want:
        return None
    return (f"query heads 0..{h - 1} use key/value heads {used}, not j // (h / h_kv) = {want}: consecutive query "
            "heads share a key/value head, h / h_kv of them each (k.repeat_interleave(h // h_kv, dim=1), the same "
            "for v)")


def heads_permuted(got, expected):
    """A message when `got` (B, h, T, d) holds the expected heads in another order, else None."""
    got, expected = to_numpy(got), to_numpy(expected)
    if got.shape != expected.shape:
        return None
    order = []
    for j in range(got.shape[1]):
        same = [i for i in range(expected.shape[1]) if np.allclose(got[:, j], expected[:, i], atol=1e-5)]
        if not same:
            return None
        order.append(j if j in same else same[0])
    if order == list(range(len(order))):
        return None
    return (f"every output head is right, in the wrong order: your heads 0..{len(order) - 1} are query heads {order}. "
            "Output head j is query head j's: after working on a grouped view (B, h_kv, g, T, d), merge it back in "
            "the same order, reshape(B, h_kv * g, T, d), without transposing h_kv and g")


def batch_mixed(ev, errors, answer, args):
    """A message when `answer` is right on one sequence at a time (the batch's first axis) but not on the batch."""
    B = args[0].shape[0]
    if B < 2:
        return None
    for b in range(B):
        one = [a[b:b + 1] if hasattr(a, "shape") and a.dim() > 2 and a.shape[0] == B else a for a in args]
        want = ref_gqa(*one)
        try:
            got = call_naming(ev, errors, answer, *one)
        except ExerciseError:
            return None
        if not (hasattr(got, "shape") and tuple(got.shape) == tuple(want.shape)
                and np.allclose(to_numpy(got), to_numpy(want), atol=1e-5)):
            return None
    return (f"your answer is right on one sequence at a time but not on a batch of B = {B}: the sequences are "
            "mixed. Keep the batch as the first axis of every reshape; repeat the key/value heads along dim=1, "
            "k.repeat_interleave(h // h_kv, dim=1)")


def gqa_pairs(got, q, k, v, mask):
    """A message when every output head is attention of SOME query head with SOME key/value head, but not query
    head j with key/value head j // (h / h_kv) at place j, else None."""
    h, h_kv = q.size(1), k.size(1)
    got, found = to_numpy(got), []
    for j in range(h):
        pairs = [(i, c) for i in range(h) for c in range(h_kv) if np.allclose(
            got[:, j], to_numpy(scaled_dot_product_attention(q[:, i:i + 1], k[:, c:c + 1], v[:, c:c + 1], mask)[:, 0]),
            atol=1e-5)]
        if not pairs:
            return None
        found.append(pairs[0])
    want = [(j, j // (h // h_kv)) for j in range(h)]
    if found == want:
        return None
    return (f"your output heads 0..{h - 1} are (query head, key/value head) {found}, not {want}: output head j is "
            "query head j, which uses key/value head j // (h / h_kv); repeat k and v with repeat_interleave along "
            "dim=1 and keep the query heads in their order")


def confident_logits(ev: Evaluation, answer):
    """The loss with confident logits (gaps near 120): log(softmax) underflows to log 0 there."""
    g = ev.rng(9)
    logits = randn(g, 2, 5, 7)
    tokens = torch.as_tensor(g.integers(1, 7, size=(2, 5)))
    logits = logits + 120.0 * torch.nn.functional.one_hot(tokens.roll(1, 1), 7)   # sure of the wrong token
    got = call_naming(ev, [], answer, logits, tokens, 0)
    expect(bool(np.isfinite(to_numpy(got)).all()), "with confident logits (one logit 120 above the others) your loss "
                                                   "is inf or NaN: log(softmax(z)) underflows to log 0. Use "
                                                   "F.cross_entropy or log_softmax, which compute z − logsumexp(z)")
    ev.expect_close(got, ref_loss(logits, tokens, 0), "the loss with confident logits", atol=1e-3, rtol=1e-5)
    return 1
