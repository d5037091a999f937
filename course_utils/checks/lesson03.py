"""Checks for lesson 03: Bahdanau attention (bidirectional states, additive score, masked softmax,
context vector, attention decoder step), defined in the lesson's order; the slips named beyond a listed value
(crashes, a batch that mixes, large scores) are in lesson03_mistakes.py."""
import functools

import torch

from .. import recurrent
from .. import scores as ref
from .core import (
    exercise,
    expect,
    expect_distribution,
    expect_returns,
    expect_shape,
    randn,
    single_threaded,
)
from .evaluation import Evaluation
from .expectations import explained
from .lesson03_mistakes import (
    LUONG,
    OVERFLOW,
    UNDERFLOW,
    call_naming,
    h_mistakes,
    index_errors,
    large_scores,
    mask_shape_errors,
    matmul_errors,
    mixes_features,
    mixes_sequences,
    other_axes,
    other_nonlinearities,
)


def random_mask(g, B, T, lengths=None):
    """Padding mask (B, T): True for the first `length` positions of each row."""
    lengths = lengths if lengths is not None else g.integers(1, T + 1, size=B)
    return torch.arange(T)[None, :] < torch.as_tensor(lengths)[:, None]


def _padded(g, lengths, d):
    """Random states (B, S, d) with zeros past each length, as a packed GRU returns them."""
    S = max(lengths)
    x = randn(g, len(lengths), S, d)
    return x * random_mask(g, len(lengths), S, lengths)[..., None]


@exercise("bidirectional encoder states", reference=recurrent.bidirectional_states)
def bidirectional_states(ev: Evaluation, answer):
    """answer(h_fwd (B, S, d), h_bwd (B, S, d), lengths (B,)) -> h (B, S, 2d), final (B, 2d)."""
    tests = 0
    for seed, (lengths, d) in enumerate([([4, 2, 5, 1], 3), ([3, 3], 4), ([6, 2, 4], 2)]):
        g = ev.rng(seed)
        h_fwd, h_bwd, lens = _padded(g, lengths, d), _padded(g, lengths, d), torch.tensor(lengths)
        h_ref, final_ref = recurrent.bidirectional_states(h_fwd, h_bwd, lens)
        result = call_naming(ev, index_errors(max(lengths)), answer, h_fwd, h_bwd, lens)
        h, final = expect_returns(result, (h_ref, final_ref), ("h", "final"))
        concatenate = "concatenate them along the features: torch.cat([h_fwd, h_bwd], dim=-1), shape (B, S, 2d)"
        ev.expect_close(h, h_ref, f"h (lengths {lengths}, d={d})", mistakes={
            "the directions are swapped: h_i = [forward h_i; backward h_i], the forward states first":
                torch.cat([h_bwd, h_fwd], -1),
            f"you added the two directions: {concatenate}": h_fwd + h_bwd,
            f"you averaged the two directions: {concatenate}": (h_fwd + h_bwd) / 2,
            f"you stacked the two directions on a new axis: {concatenate}": torch.stack([h_fwd, h_bwd], -2),
            f"you stacked the two directions on a new last axis: {concatenate}": torch.stack([h_fwd, h_bwd], -1),
            f"you stacked the two directions on a new first axis: {concatenate}": torch.stack([h_fwd, h_bwd]),
            f"you concatenated along the positions (dim=1): {concatenate}": torch.cat([h_fwd, h_bwd], 1),
            f"you concatenated along the batch (dim=0): {concatenate}": torch.cat([h_fwd, h_bwd], 0),
            **h_mistakes(h_fwd, h_bwd, lens),
        })
        rows, S = torch.arange(len(lengths)), max(lengths)
        fwd_last, fwd_end, fwd_first = h_fwd[rows, lens - 1], h_fwd[:, S - 1], h_fwd[:, 0]
        bwd_first, bwd_last, bwd_end = h_bwd[:, 0], h_bwd[rows, lens - 1], h_bwd[:, S - 1]
        backward = ("the backward GRU reads right to left, from the last real token back to the first, so its "
                    "final state is at position 0: h_bwd[:, 0]")
        ev.expect_close(final, final_ref, f"the final states (lengths {lengths}, d={d})", mistakes={
            "the forward final state is taken at the last column, which is padding for the shorter sequences "
            "(zeros): take it at each sequence's last real token, h_fwd[torch.arange(B), lengths - 1]":
                torch.cat([fwd_end, bwd_first], -1),
            f"the backward final state is taken at the last real token: {backward}":
                torch.cat([fwd_last, bwd_last], -1),
            f"the backward final state is taken at the last column: {backward}": torch.cat([fwd_last, bwd_end], -1),
            "the final states are h at the last column: the forward one is at each sequence's last real token "
            f"(lengths - 1), and {backward}": torch.cat([fwd_end, bwd_end], -1),
            "the two final states are swapped: the forward one is at the last real token (lengths - 1), the "
            "backward one at position 0": torch.cat([fwd_first, bwd_last], -1),
            "the final states are in the wrong order: [forward final; backward final], the forward one first":
                torch.cat([bwd_first, fwd_last], -1),
            "the final states are stacked as (2, B, d), as nn.GRU's h_n: concatenate them into (B, 2d)":
                torch.stack([fwd_last, bwd_first]),
            "final holds only the forward state: concatenate [forward final; backward final], shape (B, 2d)":
                fwd_last,
        })
        tests += 1
    return tests


@exercise("additive score", reference=ref.additive_score)
def additive_score(ev: Evaluation, answer):
    """answer(s (B, d_s), h (B, T, d_h), W_a (d_a, d_s + d_h), v_a (d_a,)) -> e (B, T)."""
    tests = 0
    for seed, (B, T, d_s, d_h, d_a) in enumerate([(3, 7, 5, 5, 8), (2, 5, 4, 6, 3), (1, 4, 3, 8, 5)]):
        g = ev.rng(seed)
        s, h = randn(g, B, d_s), randn(g, B, T, d_h)
        W_a, v_a = randn(g, d_a, d_s + d_h, scale=0.7), randn(g, d_a)
        e = call_naming(ev, matmul_errors(d_s, d_h, d_a), answer, s, h, W_a, v_a)
        s_rep = s[:, None, :].expand(B, T, d_s)
        hidden = torch.tanh(torch.cat([s_rep, h], -1) @ W_a.T)                 # (B, T, d_a)
        mistakes = {
            "the tanh is missing: e_i = v_a^T tanh(W_a [s; h_i])":
                torch.cat([s_rep, h], -1) @ W_a.T @ v_a,
            "the tanh is applied after v_a: the score is v_a^T tanh(W_a [s; h_i]), tanh inside":
                torch.tanh(torch.cat([s_rep, h], -1) @ W_a.T @ v_a),
            "the concatenation is in the wrong order: W_a's columns expect [s; h_i] (s first)":
                torch.tanh(torch.cat([h, s_rep], -1) @ W_a.T) @ v_a,
            "v_a is missing: the hidden units are summed; multiply by v_a, tanh(...) @ v_a": hidden.sum(-1),
            "e keeps the d_a hidden units: multiply tanh(W_a [s; h_i]) by v_a to get one score per position":
                hidden,
            **other_nonlinearities(torch.cat([s_rep, h], -1) @ W_a.T, v_a),
        }
        with explained(functools.partial(mixes_sequences, ev, answer, s, h, W_a, v_a)):
            ev.expect_close(e, ref.additive_score(s, h, W_a, v_a), f"e (B={B}, T={T}, d_s={d_s}, d_h={d_h})",
                            mistakes=mistakes)
        tests += 1
    return tests


@exercise("masked softmax", reference=ref.masked_softmax)
def masked_softmax(ev: Evaluation, answer):
    """answer(scores (..., T), mask bool broadcastable, True = keep) -> weights; fully masked rows -> 0."""
    tests = 0
    cases = [((4, 6), (4, 6)), ((3, 5), (3, 5)), ((2, 3, 5), (2, 1, 5))]
    for seed, (shape, mask_shape) in enumerate(cases):
        g = ev.rng(seed)
        scores = randn(g, *shape, scale=3.0)
        mask = torch.as_tensor(g.random(size=mask_shape) < 0.6)
        mask[..., 0] = True
        if seed == 1:
            mask[1] = False                                        # one fully masked row,
            mask[0, -1] = False                                    # and a row that is only partly masked
        weights = call_naming(ev, mask_shape_errors(shape, mask_shape), answer, scores.clone(), mask.clone())
        expect_shape(weights, shape, f"the weights (scores of shape {shape})")
        expected = ref.masked_softmax(scores, mask)
        inverted = ref.masked_softmax(scores, ~mask)
        nan_rows = torch.softmax(scores.masked_fill(~mask, float("-inf")), -1)
        uniform_rows = torch.softmax(scores.masked_fill(~mask, -1e9), -1)
        mistakes = {
            "the mask is ignored: masked positions (mask False) must get weight 0":
                torch.softmax(scores, -1),
            "the masked scores are set to 0, which still gets weight exp(0): fill them with a very negative "
            "number (e.g. torch.finfo(scores.dtype).min) before the softmax":
                torch.softmax(scores.masked_fill(~mask, 0.0), -1),
            "the mask is inverted: True means KEEP (may attend), False means masked out":
                inverted,
            "a row where every position is masked gives NaN: return zeros for such rows "
            "(fill with a large negative number, then multiply the weights by the mask)": nan_rows,
            "a row where every position is masked gives uniform weights: it must give zeros "
            "(multiply the weights by the mask)": uniform_rows,
            "the masked positions are zeroed AFTER the softmax without renormalising: mask the scores "
            "before the softmax": torch.softmax(scores, -1) * mask,
            "softmax over the wrong axis: normalise over the last axis (source positions)":
                ref.masked_softmax(scores, mask, dim=0),
            **other_axes(scores, mask),
        }
        if seed != 1:
            del mistakes["a row where every position is masked gives uniform weights: it must give zeros "
                         "(multiply the weights by the mask)"]
        ev.expect_close(weights, expected, f"the weights (scores {shape}, mask {mask_shape})", mistakes=mistakes)
        w = weights.detach().numpy()
        full = mask.expand(shape).any(-1).numpy()
        expect_distribution(w[full], "the weights of rows with a real position")
        tests += 1
    g = ev.rng(len(cases))                          # large scores: exp overflows (and underflows) in float32
    scores = large_scores(g, (3, 6))
    mask = torch.as_tensor(g.random(size=(3, 6)) < 0.6)
    mask[..., 0] = True
    weights = ev.call(answer, scores, mask)
    expect_shape(weights, (3, 6), "the weights (scores around 100 and -120)")
    expect(bool(torch.isfinite(torch.as_tensor(weights)).all()), OVERFLOW)
    expect(bool((torch.as_tensor(weights).sum(-1) > 1e-6).all()), UNDERFLOW)
    ev.expect_close(weights, ref.masked_softmax(scores, mask), "the weights (scores around 100 and -120)")
    return tests + 1


@exercise("context vector", reference=ref.context_vector)
def context_vector(ev: Evaluation, answer):
    """answer(weights (B, T), h (B, T, d_h)) -> c (B, d_h) = sum_i alpha_i h_i."""
    tests = 0
    for seed, (B, T, d) in enumerate([(2, 5, 3), (4, 3, 7), (1, 6, 6), (3, 4, 5)]):
        g = ev.rng(seed)
        weights = torch.softmax(randn(g, B, T, scale=2.0), -1)
        zero_row = seed == 3                        # a fully masked source: masked_softmax gives a row of zeros
        if zero_row:
            weights[1] = 0.0
        h = randn(g, B, T, d)
        c = ev.call(answer, weights, h)
        what = f"c (B={B}, T={T}, d_h={d}" + (", a row of zero weights)" if zero_row else ")")
        with explained(functools.partial(mixes_features, ev, answer, weights, h)):
            _expect_context(ev, c, weights, h, what)
        tests += 1
    return tests


def _expect_context(ev, c, weights, h, what):
    B, T, d = h.shape
    ev.expect_close(c, ref.context_vector(weights, h), what, mistakes={
        "the weights went through a softmax again: they already are the attention weights alpha (a softmax "
        "of the scores); use them as they are, c = sum_i alpha_i h_i":
            ref.context_vector(torch.softmax(weights, -1), h),
        "c is NaN for a row of zero weights (a fully masked source): the weights were divided by their sum, "
        "0/0; use them as they are, c = sum_i alpha_i h_i (0 for such a row)":
            ref.context_vector(weights / weights.sum(1, keepdim=True), h),
        "c ignores the weights (a plain mean of h): c = sum_i alpha_i h_i": h.mean(1),
        "c is a mean of alpha_i h_i: SUM over the source positions (the weights already sum to 1)":
            (weights[..., None] * h).mean(1),
        "c sums over the feature axis: sum over the source positions (axis 1), keep d_h":
            (weights[..., None] * h).sum(-1),
        "c keeps the source axis: sum alpha_i h_i over the positions i (axis 1)":
            weights[..., None] * h,
        "weights @ h mixes the sequences of the batch (a (B, T) matrix times a batch of (T, d_h) ones "
        "gives (B, B, d_h)): multiply each sequence's weights with its own states, "
        "(weights[:, None, :] @ h)[:, 0] or torch.einsum('bt,btd->bd', weights, h)": weights @ h,
        "h is reshaped to (B, d_h, T) instead of transposed: reshape (or view) keeps the memory order, so it "
        "scrambles positions and features; use h.transpose(1, 2) @ weights[..., None], or "
        "(weights[:, None, :] @ h)[:, 0]": (h.reshape(B, d, T) @ weights[..., None])[..., 0],
    })


def _attention_decoder_step(decoder, y_prev, s_prev, h, mask):
    return decoder.step(y_prev, s_prev, h, mask)


@exercise("one attention decoder step", reference=_attention_decoder_step)
@single_threaded
def attention_decoder_step(ev: Evaluation, answer):
    """answer(decoder, y_prev (B,), s_prev (B, d_hidden), h (B, S, d_enc), mask (B, S)) -> logits, s, alpha."""
    tests = 0
    d_emb, d_hidden, d_enc, vocab = 4, 6, 8, 11
    for seed, lengths in enumerate([[5, 3, 2], [4, 4], [6, 1, 3, 5]]):
        with torch.random.fork_rng():
            torch.manual_seed(20 + seed)
            decoder = recurrent.AttentionDecoder(vocab, d_emb, d_hidden, d_enc,
                                                 ref.AdditiveAttention(d_hidden, d_enc, 5))
        g = ev.rng(seed)
        B, S = len(lengths), max(lengths)
        y_prev = torch.as_tensor(g.integers(1, vocab, size=B))
        s_prev, h = randn(g, B, d_hidden), randn(g, B, S, d_enc)
        mask = random_mask(g, B, S, lengths)
        with torch.no_grad():
            logits_ref, s_ref, alpha_ref = decoder.step(y_prev, s_prev, h, mask)
            logits, s, alpha = expect_returns(ev.call(answer, decoder, y_prev, s_prev.clone(), h.clone(), mask.clone()),
                                              (logits_ref, s_ref, alpha_ref), ("logits", "s", "alpha"))
            x = decoder.embedding(y_prev)
            c_ref = ref.context_vector(alpha_ref, h)
            e = decoder.attention.score(s_prev, h)
            c_new, alpha_new = decoder.attention(s_ref, h, mask)           # attention read after the GRU
            ev.expect_close(alpha, alpha_ref, f"alpha (source lengths {lengths})", mistakes={
                "alpha gives weight to padding: pass the mask to the attention (True = real token)":
                    torch.softmax(e, -1),
                "alpha attends to the padding only: the mask is True at real tokens, pass it as it is (not ~mask)":
                    ref.masked_softmax(e, ~mask),
                LUONG: alpha_new,
            })
            expect_distribution(alpha, "alpha")
            ev.expect_close(s, s_ref, f"the new state s (source lengths {lengths})", mistakes={
                "the GRU input is [c_t; embedding]: concatenate [embedding(y_prev); c_t] in that order":
                    decoder.gru(torch.cat([c_ref, x], -1), s_prev),
                "the state s is the previous state: update it with the GRU cell": s_prev,
                **{f"the new state s went through an extra {name}: the GRU cell's output already is the new state, "
                   "s_t = decoder.gru([embedding(y_prev); c_t], s_prev); use it as it is": f(s_ref)
                   for name, f in (("tanh", torch.tanh), ("relu", torch.relu), ("sigmoid", torch.sigmoid))},
            })
            ev.expect_close(logits, logits_ref, f"the logits (source lengths {lengths})", mistakes={
                "the logits come from the previous state: use decoder.out([s_t; c_t]) with the NEW state":
                    decoder.out(torch.cat([s_prev, c_ref], -1)),
                "the logits come from [c_t; s_t]: concatenate [s_t; c_t] (state first)":
                    decoder.out(torch.cat([c_ref, s_ref], -1)),
                "you returned probabilities: return the logits, without a softmax":
                    torch.softmax(logits_ref, -1),
                "you returned log-probabilities: return the logits, without a log_softmax":
                    torch.log_softmax(logits_ref, -1),
                "the logits went through a tanh: return decoder.out([s_t; c_t]) as it is, without an activation":
                    torch.tanh(logits_ref),
                LUONG.replace("; return that alpha_t", ""): decoder.out(torch.cat([s_ref, c_new], -1)),
            })
        tests += 1
    return tests
