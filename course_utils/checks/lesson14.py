"""Checks for lesson 14 (what attention heads learn): the previous-token and induction scores of a head, the
ablation of one head, the key/value cache that keeps the attention sinks, and attention rollout. Each compares
the learner's function with the course's reference (induction.head_scores, induction.ablation_effect,
attention_sinks.keep_sinks_and_window, rollout.attention_rollout) on seeded random inputs, and names the
lesson's typical mistakes, computed as the same code with one thing wrong (here, and for exercises 1 and 4 in
lesson14_mistakes.py)."""
import torch
import torch.nn.functional as F

from .. import attention_sinks as sinks_ref
from .. import induction as ref
from ..rollout import attention_rollout as ref_rollout
from . import lesson14_mistakes as mk
from .core import ExerciseError, exercise, expect, expect_returns, expect_shape, randn, single_threaded
from .evaluation import Evaluation, call_naming

__all__ = ["head_scores", "ablation_effect", "keep_sinks_and_window", "attention_rollout"]


def _causal_weights(g, B, h, T, scale=2.0):
    """(B, h, T, T) attention weights: a causal softmax of random scores (rows sum to 1 over keys <= query)."""
    scores = randn(g, B, h, T, T, scale=scale).masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
    return scores.softmax(-1)


# ---------------------------------------------------------------------------------------------
# Exercise 1: previous-token and induction scores
# ---------------------------------------------------------------------------------------------
_score_variants = mk.score_variants                                       # (the tests plant them)


@exercise("previous-token and induction scores", name="head_scores", reference=ref.head_scores)
@single_threaded
def head_scores(ev: Evaluation, answer):
    """answer(weights (B, h, 2L, 2L), half_length) -> (previous, induction), each (B, h)."""
    tests = 0
    for seed, (B, h, L) in enumerate([(3, 2, 5), (2, 4, 6), (1, 3, 4)]):
        w = _causal_weights(ev.rng(seed), B, h, 2 * L)
        prev, ind = ref.head_scores(w, L)
        result = ev.call(answer, w, L)
        got_prev, got_ind = expect_returns(result, (prev, ind), ("previous", "induction"))
        for got, what in ((got_prev, "the previous-token score"), (got_ind, "the induction score")):
            expect(hasattr(got, "shape"), f"{what} should be a tensor of shape {(B, h)}, got {type(got).__name__}.")
            expect(tuple(got.shape) not in ((h,), (B,), ()),
                   f"{what} has shape {tuple(got.shape)}: give one score per sequence and head, shape {(B, h)} "
                   "(average over the queries only, the last two axes are (query, key)).")
            expect_shape(got, (B, h), what)
        ev.expect_close(got_prev, prev, f"the previous-token score (L = {L})", mistakes=mk.score_mistakes(w, L, "prev"))
        ev.expect_close(got_ind, ind, f"the induction score (L = {L})", mistakes=mk.score_mistakes(w, L, "ind"))
        tests += 1
    # a head with a perfect stripe scores 1, and a perfect previous-token head too
    L = 4
    stripe = torch.zeros(1, 2, 2 * L, 2 * L)
    stripe[0, 0, 0, 0] = 1.0
    stripe[0, 0, torch.arange(1, 2 * L), torch.arange(0, 2 * L - 1)] = 1.0        # head 0: previous token
    stripe[0, 1, torch.arange(L), torch.arange(L)] = 1.0                           # head 1: itself, then ...
    stripe[0, 1, torch.arange(L, 2 * L), torch.arange(1, L + 1)] = 1.0             # ... the induction stripe
    got_prev, got_ind = expect_returns(ev.call(answer, stripe, L), ref.head_scores(stripe, L),
                                       ("previous", "induction"))
    expect(torch.allclose(torch.as_tensor(got_prev).float(), torch.tensor([[1.0, 0.0]]), atol=1e-5)
           and torch.allclose(torch.as_tensor(got_ind).float(), torch.tensor([[0.0, 1.0]]), atol=1e-5),
           "a head that always attends to the token before must score previous = 1, and a head with a perfect "
           "induction stripe induction = 1; yours do not (check the averaging: a mean over the queries)")
    return tests + 1


# ---------------------------------------------------------------------------------------------
# Exercise 2: ablating one head
# ---------------------------------------------------------------------------------------------
def _model(ev: Evaluation, seed, L):
    """A small attention-only model with random weights, made large enough that every head matters."""
    g = ev.rng(seed)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(g.integers(2 ** 31)))
        model = ref.AttentionOnly(vocab_size=11, d_model=16, num_heads=2, num_layers=2, max_len=2 * L)
        with torch.no_grad():
            for layer in model.layers:
                layer.attn.in_proj.weight.mul_(2.5)
                layer.attn.in_proj.bias.normal_(0, 0.5)              # a trained model's biases are not 0
                layer.attn.out_proj.weight.mul_(3.0)
    tokens = ref.repeated_sequences(6, L, 11, torch.Generator().manual_seed(int(g.integers(2 ** 31))))
    return model.eval(), tokens


def _unshifted_losses(model, tokens):
    """(T,): the mistake of scoring position t on token t (no shift), averaged over the batch."""
    was_training = model.training
    model.eval()
    logits = model(tokens).float()
    model.train(was_training)
    return F.cross_entropy(logits.transpose(1, 2), tokens, reduction="none").mean(0)


def _loss_with(model, tokens, L, positions, edit=None, shift=True):
    """The mean loss over `positions` of loss_per_position, with `edit(model)` -> a list of hook handles."""
    handles = edit(model) if edit is not None else []
    try:
        with torch.no_grad():
            losses = ref.loss_per_position(model, tokens) if shift else _unshifted_losses(model, tokens)
        return float(losses[positions].mean())
    finally:
        for handle in handles:
            handle.remove()


def _zero_output_rows(layer, head):
    def edit(model):
        attn = ref.attention_heads(model)[layer]
        lo, hi = head * attn.d_head, (head + 1) * attn.d_head

        def hook(module, args, out):
            out = out.clone()
            out[..., lo:hi] = 0
            return out
        return [attn.out_proj.register_forward_hook(hook)]
    return edit


def _zero_values_not_bias(layer, head):
    def edit(model):
        attn = ref.attention_heads(model)[layer]
        lo = 2 * attn.d_model + head * attn.d_head                  # W_V's rows of the head in [W_Q; W_K; W_V]

        def hook(module, args, out):
            out = out.clone()
            x = args[0]
            out[..., lo:lo + attn.d_head] -= x @ module.weight[lo:lo + attn.d_head].T
            return out
        return [attn.in_proj.register_forward_hook(hook)]
    return edit


def _zero_slice(layer, head, kind):
    """Zeroes a wrong slice of W_O's input: from `head` (not head·d_head), or to head + d_head (a missing
    parenthesis, head * d_head:head + 1 * d_head)."""
    def edit(model):
        attn = ref.attention_heads(model)[layer]
        lo, hi = (head, head + attn.d_head) if kind == "unscaled" else (head * attn.d_head, head + attn.d_head)

        def hook(module, args):
            z = args[0].clone()
            z[..., lo:hi] = 0
            return (z,) + tuple(args[1:])
        return [attn.out_proj.register_forward_pre_hook(hook)]
    return edit


def _zero_in_proj(layer, head, part):
    """Zeroes the head's queries (part 0) or keys (part 1): its rows of W_Q (or W_K) and their bias."""
    def edit(model):
        attn = ref.attention_heads(model)[layer]
        lo = part * attn.d_model + head * attn.d_head

        def hook(module, args, out):
            out = out.clone()
            out[..., lo:lo + attn.d_head] = 0
            return out
        return [attn.in_proj.register_forward_hook(hook)]
    return edit


def _ablate(layer, head):
    def edit(model):
        context = ref.ablate_heads(model, [(layer, head)])
        context.__enter__()

        class Handle:
            def remove(self):
                context.__exit__(None, None, None)
        return [Handle()]
    return edit


def _ablation_variants(model, tokens, L, layer, head):
    second, whole, early, late = slice(L, 2 * L - 1), slice(0, 2 * L - 1), slice(L - 1, 2 * L - 1), slice(L + 1, 2 * L)
    clean = {k: _loss_with(model, tokens, L, s) for k, s in (("second", second), ("whole", whole), ("early", early),
                                                             ("late", late))}
    ablated = lambda s, edit: _loss_with(model, tokens, L, s, edit)          # noqa: E731
    right = ablated(second, _ablate(layer, head))
    out = {
        "sign": clean["second"] - right, "ablated_only": right,
        "whole": ablated(whole, _ablate(layer, head)) - clean["whole"],
        "early": ablated(early, _ablate(layer, head)) - clean["early"],
        "late": ablated(late, _ablate(layer, head)) - clean["late"],
        "queries": ablated(second, _zero_in_proj(layer, head, 0)) - clean["second"],
        "rows": ablated(second, _zero_output_rows(layer, head)) - clean["second"],
        "values": ablated(second, _zero_values_not_bias(layer, head)) - clean["second"],
        "other_head": ablated(second, _ablate(layer, 1 - head)) - clean["second"],
        "other_layer": ablated(second, _ablate(1 - layer, head)) - clean["second"],
        "unshifted": (_loss_with(model, tokens, L, second, _ablate(layer, head), shift=False)
                      - _loss_with(model, tokens, L, second, shift=False)),
        "unscaled": ablated(second, _zero_slice(layer, head, "unscaled")) - clean["second"],        # (head 0: right)
        "parenthesis": ablated(second, _zero_slice(layer, head, "parenthesis")) - clean["second"]}
    return right - clean["second"], out


_ABL = {
    "sign": "the sign is reversed: the increase is the loss WITH the head zeroed minus the loss with every head",
    "ablated_only": "this is the loss with the head zeroed; the exercise asks how much it RISES: subtract the loss "
                    "of the intact model",
    "whole": "the loss is averaged over the whole sequence: measure it on the second copy only (its tokens after "
             "the first), where only an induction circuit can help",
    "early": "the second copy's loss includes its first token, which nothing can predict (nothing says the repeat "
             "starts there): average over targets L+1 .. 2L-1, i.e. the losses at positions L .. 2L-2",
    "late": "the loss is averaged over positions L+1 .. 2L-1 of loss_per_position, one too late: position t holds "
            "the loss of token t + 1, so targets L+1 .. 2L-1 are positions L .. 2L-2, losses[L:2 * L - 1]",
    "queries": "you zeroed the head's queries or keys (its rows of W_Q or W_K, and their bias): its attention "
               "becomes uniform but it still writes its values into the stream; make it write nothing: zero its "
               "output, its slice of W_O's input (features head·d_head .. (head+1)·d_head)",
    "rows": "you zeroed the head's slice of W_O's OUTPUT (d_model features that every head writes to); the "
            "head's own output is its slice of W_O's INPUT, features head·d_head .. (head+1)·d_head",
    "values": "you zeroed the head's rows of W_V but not its bias: the head still writes W_O·b_V; zero its "
              "output instead (its slice of W_O's input)",
    "other_head": "the effect is another head's: heads are counted from 0 within the layer",
    "other_layer": "the effect is another layer's head: layers are counted from 0 (model.layers[layer])",
    "unshifted": "the loss is not shifted: you score position t on token t, but the logits at position t predict "
                 "token t + 1; compare logits[:, :-1] with tokens[:, 1:] (or use induction.loss_per_position)",
    "unscaled": "the head's slice of W_O's input is wrong: head j writes features j·d_head .. (j+1)·d_head - 1, "
                "the slice [j * d_head:(j + 1) * d_head]",
}
_ABL["parenthesis"] = _ABL["unscaled"] + " "


def _no_hooks_left(model):
    for module in model.modules():
        if module._forward_pre_hooks or module._forward_hooks:
            return False
    return True


@exercise("ablating one head", name="ablation_effect", reference=ref.ablation_effect)
@single_threaded
def ablation_effect(ev: Evaluation, answer):
    """answer(model, tokens (B, 2L), layer, head, half_length) -> the rise of the second copy's loss (a float).
    The four cases' answers are compared together, as one vector: a mistake is named when it gives all four
    (one number alone can come close to another mistake's by chance)."""
    got_all, expected_all, variants_all, cases_run = [], [], {}, []
    for seed, cases in enumerate([[(1, 0), (0, 1)], [(1, 1), (0, 0)]]):
        L = 5 + seed
        model, tokens = _model(ev, seed, L)
        if seed == 0:
            model.train()                                           # (no dropout: the same losses in both modes)
        before = {k: v.clone() for k, v in model.state_dict().items()}
        modes = [m.training for m in model.modules()]
        for layer, head in cases:
            expected, variants = _ablation_variants(model, tokens, L, layer, head)
            got = ev.call(answer, model, tokens, layer, head, L)
            expect(got is not None, "your function returned nothing: return the increase of the loss (a number).")
            expect(_no_hooks_left(model), "a hook is still registered on the model after your function returned: "
                                          "the head stays zeroed for everyone after you; remove it (handle.remove(), "
                                          "in a try/finally) before returning")
            changed = [k for k, v in model.state_dict().items() if not torch.equal(v, before[k])]
            expect(not changed, f"your function changed the model's weights ({', '.join(changed[:2])}): the head "
                                "stays zeroed after you return. Zero it on a copy (copy.deepcopy(model)), or with a "
                                "hook that you remove, or put the weights back")
            flipped = [now for was, now in zip(modes, (m.training for m in model.modules())) if was != now]
            expect(not flipped, f"your function left the model in {'training' if flipped[:1] == [True] else 'eval'} "
                                "mode (the caller's model.training changed): the model must be exactly as it was; "
                                "note was_training = model.training first and put it back with "
                                "model.train(was_training) before returning")
            got = torch.as_tensor(got, dtype=torch.float64).detach().reshape(-1)
            expect(got.numel() == 1, f"return one number (the increase of the mean loss), got {got.numel()} values")
            got_all.append(got[0])
            expected_all.append(expected)
            for k, v in variants.items():
                variants_all.setdefault(_ABL[k], []).append(v)
            cases_run.append((layer, head))
    ev.expect_close(torch.stack(got_all), torch.tensor(expected_all, dtype=torch.float64),
                    f"the loss increases of (layer, head) = {', '.join(map(str, cases_run))}", atol=1e-4, rtol=1e-3,
                    mistakes={k: torch.tensor(v, dtype=torch.float64) for k, v in variants_all.items()})
    return len(cases_run)


# ---------------------------------------------------------------------------------------------
# Exercise 3: the cache that keeps the attention sinks
# ---------------------------------------------------------------------------------------------
def _cut(x, sinks, window, kind, dim=-2):
    t = x.size(dim)
    first = x.narrow(dim, 0, min(sinks, t))
    last = lambda n: x.narrow(dim, max(t - n, 0), min(n, t))             # noqa: E731
    return {"plain": last(window), "plain_total": last(sinks + window), "short": last(window - 1),
            "long": last(window + 1), "reversed": torch.cat([last(window), first], dim),
            "oldest": x.narrow(dim, 0, min(sinks + window, t)),
            "short_sinks_long": torch.cat([first, last(window)], dim) if t <= sinks + window else None,
            "axis": torch.cat([first, last(window)], dim)}[kind]


_SINK = {
    "plain": "the first positions (the sinks) are gone: this is a plain sliding window; keep the first `sinks` "
             "positions AND the last `window`",
    "plain_total": "the first positions (the sinks) are gone: you kept the last sinks + window positions; keep "
                   "the first `sinks` and the last `window`",
    "short": "the window is one position short: keep the LAST `window` positions (t - window .. t - 1)",
    "long": "the window is one position too long: keep the last `window` positions (t - window .. t - 1)",
    "reversed": "the sinks come after the window: keep the positions in their order, the sinks first (the cache's "
                "positions 0 .. sinks-1), then the window",
    "oldest": "you kept the OLDEST positions: the window is the last `window` positions, the newest ones",
    "short_sinks_long": "positions repeated: when the cache holds no more than sinks + window positions, nothing "
                        "is evicted: return it unchanged",
    "axis": "the cache is cut along the wrong axis: k and v are (B, heads, t, d_head), the positions are axis -2",
    "other": "{what} hold positions of {other} (a copy-paste slip?): cut each of k and v from itself, the same "
             "positions from both",
}


def _sink_crashes(x):
    """The crashes of keep_sinks_and_window's typical slips (evaluation.call_naming's errors), for x (B, h, t, d)."""
    def axis(match):
        return _SINK["axis"] if int(match[1]) != x.dim() - 2 else None
    return [(r"Sizes of tensors must match except in dimension (\d+)", axis)]


def _mixed(x, other, sinks, window):
    """x's cut with one part (or both) taken from `other`: a copy-paste slip between k and v."""
    sinks_of = lambda y: y[..., :min(sinks, y.size(-2)), :]                    # noqa: E731
    window_of = lambda y: _cut(y, sinks, window, "plain")                      # noqa: E731
    return [torch.cat([sinks_of(x), window_of(other)], -2), torch.cat([sinks_of(other), window_of(x)], -2),
            sinks_ref.keep_sinks_and_window(other, other, sinks, window)[0]]


@exercise("a key/value cache that keeps the attention sinks", name="keep_sinks_and_window",
          reference=sinks_ref.keep_sinks_and_window)
@single_threaded
def keep_sinks_and_window(ev: Evaluation, answer):
    """answer(k, v (B, h, t, d), sinks, window) -> (k, v): the first `sinks` positions and the last `window`."""
    tests = 0
    for seed, (t, s, w) in enumerate([(20, 4, 8), (15, 0, 6), (13, 2, 10), (10, 4, 8), (12, 4, 8), (9, 3, 1)]):
        g = ev.rng(seed)
        B, h, d = 2, 3, 5
        k = torch.arange(t, dtype=torch.float32)[:, None] + 0.01 * randn(g, B, h, t, d)   # key i holds about i
        v = randn(g, B, h, t, d)
        want_k, want_v = sinks_ref.keep_sinks_and_window(k, v, s, w)
        result = call_naming(ev, _sink_crashes(k), answer, k, v, s, w)
        got_k, got_v = expect_returns(result, (want_k, want_v), ("k", "v"))
        for got, want, x, other, what in ((got_k, want_k, k, v, "the keys k"), (got_v, want_v, v, k, "the values v")):
            expect(hasattr(got, "shape"), f"{what} should be a tensor, got {type(got).__name__}")
            mistakes = {}
            for kind in ("short_sinks_long", "plain", "plain_total", "short", "long", "reversed", "oldest"):
                wrong = _cut(x, s, w, kind)
                if wrong is not None and not (wrong.shape == want.shape and torch.allclose(wrong, want)):
                    mistakes.setdefault(_SINK[kind], wrong)
            for dim in (1, -1):
                wrong = _cut(x, s, w, "axis", dim)
                if wrong.shape != want.shape:
                    mistakes.setdefault(_SINK["axis"], wrong)
            for i, wrong in enumerate(_mixed(x, other, s, w)):       # (one message, distinct keys)
                if not (wrong.shape == want.shape and torch.allclose(wrong, want)):
                    mistakes[_SINK["other"].format(what=what, other="v" if x is k else "k") + " " * i] = wrong
            if want.shape != x.shape:
                mistakes.setdefault(f"{what} are not cut: evict the same positions from k and from v", x)
            ev.expect_close(got, want, f"{what} (t = {t}, sinks = {s}, window = {w})", mistakes=mistakes)
        tests += 1
    return tests


# ---------------------------------------------------------------------------------------------
# Exercise 4: attention rollout
# ---------------------------------------------------------------------------------------------
_rollout_variant, _ROLL = mk.rollout_variant, mk.ROLL                      # (the tests plant them)


@exercise("attention rollout", name="attention_rollout", reference=ref_rollout)
@single_threaded
def attention_rollout(ev: Evaluation, answer):
    """answer(maps (N, B, h, T, T)) -> R (B, T, T) = Ã_N ... Ã_1, Ã = 0.5 I + 0.5 mean over heads, rows
    renormalised (the last maps are weights after dropout, whose rows do not sum to 1)."""
    tests = 0
    for seed, (N, B, h, T) in enumerate([(3, 2, 4, 5), (2, 3, 2, 6), (4, 1, 3, 4), (3, 2, 3, 5)]):
        g = ev.rng(seed)
        maps = randn(g, N, B, h, T, T, scale=2.0).softmax(-1)
        if seed == 3:                                   # dropout (p = 0.2) on the weights: rows sum to 0.4 .. 1.6
            maps = maps * torch.as_tensor(g.random(size=maps.shape) > 0.2, dtype=maps.dtype) / 0.8
        want = ref_rollout(maps)
        got = ev.call(answer, maps)
        if hasattr(got, "shape") and tuple(got.shape) != (B, T, T):
            wrong = "(h, T, T)" if tuple(got.shape) == (h, T, T) else None
            raise ExerciseError(f"the rollout has shape {tuple(got.shape)}, expected (B, T, T) = {(B, T, T)}"
                                + (f" : it looks like {wrong}: average each layer over its HEADS (axis 1 of a "
                                   "layer's (B, h, T, T)), not over the batch" if wrong else "."))
        mistakes = {_ROLL[k]: _rollout_variant(maps, k) for k in _ROLL}
        ev.expect_close(got, want, f"the rollout (N = {N} layers)", mistakes=mistakes)
        tests += 1
    return tests
