"""Checks for lesson 12 (a GPT from scratch), in the lesson's order: the next-token loss, the decoder block, the
GPT, the sampling distribution, one attention step with a key/value cache, rotary positions, grouped-query
attention. Each compares the learner's answer with the course's reference (gpt.next_token_loss, gpt.GPTBlock,
gpt.GPT with learned positions, decoding.sampling_distribution, positions.apply_rope,
gpt_attention.grouped_query_attention; the cached step's reference is in generation_mistakes.py) on seeded
random inputs, tests the property its exercise is about, and names the typical mistakes (planted in
gpt_mistakes.py, lesson12_sampling.py and generation_mistakes.py)."""
import functools

import numpy as np
import torch

from ..decoding import sampling_distribution as ref_sampling
from ..gpt import GPTBlock
from ..gpt import next_token_loss as ref_loss
from ..gpt_attention import grouped_query_attention as ref_gqa
from ..masks import causal_mask
from ..positions import apply_rope as ref_apply_rope
from .core import exercise, expect, expect_returns, expect_shape, randn, single_threaded, to_numpy
from .evaluation import Evaluation
from .expectations import explained
from .generation_mistakes import (
    CAT_AXIS,
    GQA_ERRORS,
    GQA_MISTAKES,
    ROPE_DTYPE,
    ROPE_MISTAKES,
    SQUEEZED,
    STEP_ERRORS,
    STEP_MISTAKES,
    distinct,
    full_attention,
    gpt_generates_with,
    gqa_variant,
    position_mistakes,
    reference_cached_attention_step,
    rope_complex,
    rope_errors,
    rope_variant,
    step_variant,
)
from .gpt_mistakes import (
    BLOCK_ERRORS,
    BLOCK_MISTAKES,
    LOSS_ERRORS,
    LOSS_MISTAKES,
    LOSS_NO_GRAD,
    MODEL_ERRORS,
    MODEL_MISTAKES,
    ReferenceGPT,
    block_variant,
    loss_variant,
    model_variant,
)
from .lesson12_sampling import (
    ROWS_MIXED,
    SAMPLING_ERRORS,
    designed_logits,
    expect_sampling,
    greedy,
    large_top_k,
    rows_alone,
    ties,
    top_p_one,
)
from .lesson12_setup import (
    batch_mixed,
    build,
    call_naming,
    confident_logits,
    first_moved,
    gqa_heads,
    gqa_pairs,
    heads_permuted,
    leak_message,
    masks_more,
    randomise,
    rope_frequencies,
    seeded,
    unnormalised,
    wrong_half,
    wrong_part,
)
from .lesson12_tie import expect_tied

__all__ = ["next_token_loss", "gpt_block", "gpt", "sampling_distribution", "cached_attention_step", "apply_rope",
           "grouped_query_attention", "reference_cached_attention_step", "ReferenceGPT"]
D_MODEL, HEADS, D_FF = 16, 4, 32


# ---------------------------------------------------------------------------------------------
# Exercise 1: next-token targets and the loss
# ---------------------------------------------------------------------------------------------
@exercise("next-token targets and the loss", reference=ref_loss)
@single_threaded
def next_token_loss(ev: Evaluation, answer):
    """answer(logits (B, T, V), tokens (B, T), pad_id) -> the mean cross-entropy of logits[:, :-1] against
    tokens[:, 1:] over the targets that are not padding."""
    tests = 0
    for seed, (B, T, V, pad_id) in enumerate([(3, 7, 11, 0), (2, 9, 6, 0), (4, 5, 13, 3)]):
        g = ev.rng(seed)
        logits = randn(g, B, T, V, scale=2.0).requires_grad_()             # the loss must reach them
        tokens = torch.as_tensor(g.integers(0, V, size=(B, T)))
        tokens[tokens == pad_id] = (pad_id + 1) % V                       # padding only where we put it
        tokens[0, T - 2:] = pad_id                                         # rows end in padding, of two lengths
        tokens[B - 1, T - 3:] = pad_id
        if pad_id:
            tokens[:, 1] = 0                                               # token 0 is a real token here
        got = call_naming(ev, LOSS_ERRORS, answer, logits, tokens, pad_id)
        expect(got is not None, "your function returned nothing: end it with `return loss`.")
        expect(np.size(to_numpy(got)) == 1, f"return ONE number, the mean over the real targets; got shape "
                                            f"{tuple(np.shape(to_numpy(got)))}.")
        expected = ref_loss(logits, tokens, pad_id)
        mistakes = distinct({text: loss_variant(logits, tokens, pad_id, kind) for kind, text in LOSS_MISTAKES.items()},
                            expected)
        ev.expect_close(np.reshape(to_numpy(got), ()), expected, f"the loss (B={B}, T={T}, V={V}, pad_id={pad_id})",
                        mistakes=mistakes, atol=2e-6, rtol=1e-6)   # tight: some mistakes differ by 1e-4
        expect(isinstance(got, torch.Tensor) and got.requires_grad, LOSS_NO_GRAD)
        tests += 1
    return tests + confident_logits(ev, answer)


# ---------------------------------------------------------------------------------------------
# Exercises 2 and 3: the decoder block and the GPT
# ---------------------------------------------------------------------------------------------
@exercise("decoder block (pre-norm, causal)", name="MyGPTBlock", reference=GPTBlock)
@single_threaded
def gpt_block(ev: Evaluation, cls):
    """cls(d_model, num_heads, d_ff, dropout) with forward(x (B, T, d_model), mask) -> (B, T, d_model):
    x + Dropout(Attn(LN(x), mask)), then x + Dropout(FFN(LN(x))). Compared with the course's GPTBlock holding
    the same weights, at evaluation and in training (the same dropout masks)."""
    tests = 0
    for seed, dropout in enumerate((0.0, 0.2)):
        torch.manual_seed(seed)
        reference = randomise(ev, GPTBlock(D_MODEL, HEADS, D_FF, dropout=dropout), seed)
        module = build(ev, cls, reference, D_MODEL, HEADS, D_FF, dropout=dropout)
        training = dropout > 0
        reference.train(training)
        module.train(training)
        T = 6
        x, mask = randn(ev.rng(seed), 2, T, D_MODEL), causal_mask(T)
        with torch.no_grad():
            out = seeded(seed, call_naming, ev, BLOCK_ERRORS, module, x, mask)
            expect_shape(out, (2, T, D_MODEL), "the block's output")
            expected = seeded(seed, reference, x, mask)
            kinds = [k for k in BLOCK_MISTAKES if training or not k.startswith(("no_dropout", "dropout_sum"))]
            mistakes = distinct({BLOCK_MISTAKES[k]: seeded(seed, block_variant, reference, x, mask, k)
                                 for k in kinds}, expected)
            where = "in training, dropout 0.2, the same dropout masks" if training else "at evaluation"
            with explained(functools.partial(wrong_half, ev, module, reference, x, mask, seed)):
                ev.expect_close(out, expected, f"the block's output ({where})", mistakes=mistakes, atol=1e-5)
            if not training:                       # causality: later positions changed, earlier outputs kept
                changed = x.clone()
                changed[:, 4:] += 3.0
                moved = first_moved(out, ev.call(module, changed, mask), 4)
                expect(moved is None, leak_message(4, moved, "the output") if moved is not None else "")
        tests += 1
    return tests


@exercise("the GPT: embeddings, positions, blocks, final LayerNorm, tied output", name="MyGPT",
          reference=ReferenceGPT)
@single_threaded
def gpt(ev: Evaluation, cls):
    """cls(vocab_size, d_model, num_heads, num_layers, d_ff, max_len, dropout) with forward(tokens (B, T)) ->
    logits (B, T, vocab_size). Compared with the course's GPT (learned positions) holding the same weights."""
    tests = 0
    V, L, max_len = 29, 2, 12
    for seed, (T, dropout) in enumerate(((9, 0.0), (max_len, 0.0), (9, 0.2))):
        torch.manual_seed(seed)
        training = dropout > 0
        reference = randomise(ev, ReferenceGPT(V, D_MODEL, HEADS, L, D_FF, max_len, dropout=dropout), seed,
                              positions=True).train(training)
        module = build(ev, cls, reference, V, D_MODEL, HEADS, L, D_FF, max_len, dropout=dropout).train(training)
        tied_in_init = module.head.weight is module.embed.weight
        tokens = torch.as_tensor(ev.rng(seed).integers(1, V, size=(3, T)))
        with torch.no_grad():
            logits = seeded(seed, call_naming, ev, MODEL_ERRORS, module, tokens)
            expect_shape(logits, (3, T, V), f"the logits for tokens of shape (3, {T})")
            expected = seeded(seed, reference, tokens)
            kinds = [k for k in MODEL_MISTAKES if training or k != "pos_no_dropout"]
            mistakes = distinct({MODEL_MISTAKES[k]: seeded(seed, model_variant, reference, tokens, k) for k in kinds},
                                expected)
            where = ", in training, dropout 0.2, the same dropout masks" if training else ""
            with explained(functools.partial(wrong_part, ev, module, reference, tokens)):
                ev.expect_close(logits, expected, f"the logits (T = {T}, max_len = {max_len}{where})",
                                mistakes=mistakes, atol=1e-4)
            expect_tied(ev, module, tokens, logits, training, tied_in_init)
            for k in () if training else (T - 1, T // 2):   # causality: later tokens changed, earlier logits kept
                changed = tokens.clone()
                changed[:, k:] = (changed[:, k:] + 1) % (V - 1) + 1
                moved = first_moved(logits, call_naming(ev, MODEL_ERRORS, module, changed), k)
                expect(moved is None, leak_message(k, moved) if moved is not None else "")
        tests += 1
    return tests


# ---------------------------------------------------------------------------------------------
# Exercise 4: temperature, top-k, top-p
# ---------------------------------------------------------------------------------------------
@exercise("sampling distribution: temperature, top-k, top-p", reference=ref_sampling)
@single_threaded
def sampling_distribution(ev: Evaluation, answer):
    """answer(logits (N, V), temperature, top_k, top_p) -> probabilities (N, V), each row summing to 1."""
    tests, call = 0, functools.partial(call_naming, ev, SAMPLING_ERRORS, answer)   # ev.call, its crashes named
    for seed, (N, V) in enumerate([(4, 10), (3, 17)]):
        logits = randn(ev.rng(seed), N, V, scale=2.0)
        for temperature in (0.5, 1.0, 2.0):                     # temperature alone: sharper and flatter
            got = call(logits, temperature, None, None)
            expect_sampling(ev, got, logits, temperature, None, None, f"the distribution at temperature {temperature}")
            tests += 1
        for top_k in (1, 3):                                    # top-k alone: k tokens left
            got = call(logits, 1.0, top_k, None)
            expect_sampling(ev, got, logits, 1.0, top_k, None, f"the distribution with top_k={top_k}")
            tests += 1
        # top-p alone, the smallest set reaching p: first on rows where its mistakes give values of their own
        for rows, top_p, what in ([(TOP_P_ROWS, 0.75, " (rows built to tell its mistakes apart)")] if seed == 0
                                  else []) + [(logits, p, "") for p in (0.3, 0.75, 0.9)]:
            got = call(rows, 1.0, None, top_p)
            expect(rows_alone(call, got, rows, top_p), ROWS_MIXED.format(top_p=top_p))
            expect_sampling(ev, got, rows, 1.0, None, top_p, f"the distribution with top_p={top_p}{what}")
            probs, kept = rows.double().softmax(-1), torch.as_tensor(to_numpy(got)) > 0
            mass = (probs * kept).sum(-1)
            expect(bool((mass >= top_p - 1e-6).all()), f"with top_p={top_p} the kept tokens hold only "
                                                        f"{float(mass.min()):.3f} of the probability: keep tokens "
                                                        "until their mass reaches p.")
            smallest = (probs * kept).masked_fill(~kept, 2.0).min(-1).values
            expect(bool((mass - smallest < top_p).all()), f"with top_p={top_p} you keep more tokens than needed: "
                                                          "without the least probable kept one, the mass still "
                                                          "reaches p.")
            tests += 1
        # temperature with top-p: the nucleus of the TEMPERED distribution (rows built so that T = 1 keeps more)
        for rows, what in ((designed_logits(0.7), "rows built so that T = 1 keeps other tokens"),
                           (logits, "random rows")):
            got = call(rows, 0.7, None, 0.8)
            expect_sampling(ev, got, rows, 0.7, None, 0.8, f"the distribution with temperature=0.7, top_p=0.8 "
                                                          f"({what})")
        tests += 1
        # all three together, temperature, then top-k, then top-p on what top-k left: first on rows built so that
        # every mistake of the order gives values of its own, then on random rows
        for rows, what in ((designed_logits(0.7), "rows built to tell the orders apart"), (logits, "random rows")):
            got = call(rows, 0.7, 5, 0.8)
            expect_sampling(ev, got, rows, 0.7, 5, 0.8, f"the distribution with temperature=0.7, top_k=5, top_p=0.8 "
                                                        f"({what})")
        got = call(logits, 1.5, None, 1.0)           # p = 1 keeps everything
        expect_sampling(ev, got, logits, 1.5, None, 1.0, "the distribution with top_p=1 (nothing filtered)")
        tests += 3
    tests += greedy(ev, call) + ties(ev, call) + top_p_one(ev, call)   # temperature 0, ties, p = 1 keeps all
    return tests + large_top_k(ev, answer)          # last: top_k > V filters nothing


TOP_P_ROWS = torch.tensor([[.45, .05, .2, .1, .15, .05], [.1, .25, .05, .4, .15, .05]]).log() + 2   # both signs


# ---------------------------------------------------------------------------------------------
# Exercise 5: one attention step with a key/value cache (rotary positions)
# ---------------------------------------------------------------------------------------------
@exercise("attention step with a key/value cache", reference=reference_cached_attention_step)
@single_threaded
def cached_attention_step(ev: Evaluation, answer):
    """answer(q, k, v (B, h, 1, d), cache_k, cache_v (B, h, t, d))
    -> (out (B, h, 1, d), cache_k, cache_v (B, h, t+1, d))."""
    tests = 0
    B, h, T, d = 2, 3, 6, 8
    g = ev.rng(0)
    q_all, k_all, v_all = randn(g, B, h, T, d), randn(g, B, h, T, d), randn(g, B, h, T, d)
    rotated_k = ref_apply_rope(k_all, torch.arange(T))
    for t in reversed(range(T)):   # step t, given the right cache of positions 0..t-1 (the longest first: with
        #                            one or two keys, several mistakes give the same output)
        args = (q_all[:, :, t:t + 1], k_all[:, :, t:t + 1], v_all[:, :, t:t + 1], rotated_k[:, :, :t], v_all[:, :, :t])
        ref = reference_cached_attention_step(*args)
        result = call_naming(ev, STEP_ERRORS, answer, *args)
        out, new_k, new_v = expect_returns(result, ref, ("out", "cache_k", "cache_v"))
        expect(not (hasattr(out, "shape") and tuple(out.shape) == (B, h, d)), SQUEEZED)
        expect_shape(out, (B, h, 1, d), f"out at step t={t}")
        for name, new in (("key", new_k), ("value", new_v)):
            expect(not (hasattr(new, "shape") and tuple(new.shape) == (B, h, t, d)),
                   f"at step t={t} the {name} cache you return still has {t} positions: append the new {name} "
                   f"(along the positions, dim=2) so that the next step sees it.")
        for new, name in ((new_k, "cache_k"), (new_v, "cache_v")):
            expect(not (hasattr(new, "shape") and tuple(new.shape) in ((2 * B, h, t, d), (B, 2 * h, t, d),
                                                                      (B, h, t, 2 * d))), CAT_AXIS)
            expect_shape(new, (B, h, t + 1, d), f"the returned {name} at step t={t}")
        variants = {kind: step_variant(*args, kind) for kind in STEP_MISTAKES}
        mistakes = distinct({STEP_MISTAKES[k]: v[0] for k, v in variants.items()}, ref[0])
        with explained(functools.partial(unnormalised, ev, STEP_ERRORS, answer, args, (2, 4), "out")):
            ev.expect_close(out, ref[0], f"out at step t={t}", mistakes={**mistakes, **position_mistakes(args, ref[0])})
        key_mistakes = {   # not rotated, rotated at 0 (no rotation), appended before rotating: one message
            "the key appended to the cache is not rotated (or rotated at position 0, which is no rotation, or "
            "appended before it was rotated): store apply_rope(k, [t]), the key rotated at its position t (the "
            "cached keys are used as they are at every later step)":
                variants["q_only"][1],
            STEP_MISTAKES["pos+1"]: variants["pos+1"][1], STEP_MISTAKES["rotate_again"]: variants["rotate_again"][1],
            STEP_MISTAKES["rotate_all"]: variants["rotate_all"][1],
            "the new key is put in front of the cache: append it at the END (torch.cat([cache_k, k], dim=2)), so "
            "that position i stays at index i": torch.cat([ref[1][:, :, -1:], args[3]], 2)}
        ev.expect_close(new_k, ref[1], f"the returned cache_k at step t={t}", mistakes=distinct(key_mistakes, ref[1]))
        ev.expect_close(new_v, ref[2], f"the returned cache_v at step t={t}", mistakes=distinct({
            "the cached values are the keys: append v to cache_v": ref[1],
            STEP_MISTAKES["rope_v"]: variants["rope_v"][2],
            "the new value is put in front of the cache: append it at the END": torch.cat([args[2], args[4]], 2)},
            ref[2]))
        tests += 1
    # chained: the learner's own cache, fed back, gives uncached attention's outputs
    cache_k, cache_v, outs = k_all[:, :, :0], v_all[:, :, :0], []
    for t in range(T):
        out, cache_k, cache_v = call_naming(ev, STEP_ERRORS, answer, q_all[:, :, t:t + 1], k_all[:, :, t:t + 1],
                                            v_all[:, :, t:t + 1], cache_k, cache_v)
        outs.append(torch.as_tensor(out))
    ev.expect_close(torch.cat(outs, 2), full_attention(q_all, k_all, v_all),
                    f"the outputs of {T} steps with your cache fed back, against uncached causal attention")
    gpt_generates_with(ev, answer)      # a small GPT generating greedily with your step in every layer
    return tests + 2


# ---------------------------------------------------------------------------------------------
# Exercise 6: rotary position embedding
# ---------------------------------------------------------------------------------------------
@exercise("rotary position embedding (RoPE)", reference=ref_apply_rope)
@single_threaded
def apply_rope(ev: Evaluation, answer):
    """answer(x (..., T, d), positions (T,), base) -> x rotated: pair (x_i, x_{i+d/2}) by angle positions[t] θ_i."""
    tests = 0
    for seed, (shape, base) in enumerate([((2, 3, 5, 8), 10000.0), ((4, 6), 10000.0), ((1, 2, 7, 12), 100.0)]):
        g = ev.rng(seed)
        x = randn(g, *shape)
        T = shape[-2]
        positions = torch.as_tensor(g.permutation(np.arange(3, 3 + 2 * T))[:T])   # any positions, any order
        got = call_naming(ev, rope_errors(T, shape[-1]), answer, x, positions, base)
        expect_shape(got, tuple(shape), "the rotated x")
        expected = rope_complex(x, positions, base)
        mistakes = distinct({text: rope_variant(x, positions, base, kind) for kind, text in ROPE_MISTAKES.items()},
                            expected)
        norms = np.linalg.norm(to_numpy(got).astype(np.float64), axis=-1)
        if not any(np.allclose(to_numpy(got), to_numpy(m), atol=1e-4) for m in mistakes.values()):
            expect(np.allclose(norms, np.linalg.norm(to_numpy(x).astype(np.float64), axis=-1), atol=1e-4),
                   "the rotation changed the vectors' norms: each pair (x_i, x_{i+d/2}) is rotated, (a cos - b sin, "
                   "a sin + b cos): a rotation keeps lengths.")
        with explained(functools.partial(rope_frequencies, ev, rope_errors(T, shape[-1]), answer, shape[-1], base)):
            ev.expect_close(got, expected, f"the rotated x (shape {shape}, base {base})", mistakes=mistakes,
                            atol=1e-4, rtol=1e-4)
        tests += 1
    # relative positions: q_m . k_n depends on m - n only
    g = ev.rng(7)
    q, k = randn(g, 1, 8), randn(g, 1, 8)
    dots = []
    for m, n in ((5, 2), (13, 10), (3, 0)):
        qm = torch.as_tensor(to_numpy(ev.call(answer, q, torch.tensor([m]), 10000.0)))
        kn = torch.as_tensor(to_numpy(ev.call(answer, k, torch.tensor([n]), 10000.0)))
        dots.append(float((qm * kn).sum()))
    expect(np.allclose(dots, dots[0], atol=1e-4), f"q_m · k_n should depend on m - n only: for m - n = 3 it is "
                                                  f"{', '.join(f'{x:.4f}' for x in dots)}.")
    x, positions = randn(ev.rng(8), 2, 5, 8).double(), torch.arange(5)     # x in float64 keeps its dtype
    got = call_naming(ev, rope_errors(5, 8), answer, x, positions, 10000.0)
    expect_shape(got, (2, 5, 8), "the rotated x (float64)")
    dtype = getattr(got, "dtype", type(got).__name__)              # (to_numpy gives float32)
    expect(str(dtype) in ("torch.float64", "float64"), ROPE_DTYPE.format(dtype=dtype))
    ev.expect_close(got, rope_complex(x, positions, 10000.0), "the rotated x (float64)", atol=1e-4, rtol=1e-4)
    return tests + 2


# ---------------------------------------------------------------------------------------------
# Exercise 7: grouped-query attention
# ---------------------------------------------------------------------------------------------
@exercise("grouped-query attention", reference=ref_gqa)
@single_threaded
def grouped_query_attention(ev: Evaluation, answer):
    """answer(q (B, h, T, d), k, v (B, h_kv, T, d), mask) -> (B, h, T, d): query head j uses key/value head
    j // (h / h_kv)."""
    tests = 0
    # the causal mask, then a padding mask (B, 1, 1, T) that is not causal (an answer must use the mask it is given)
    for seed, (B, h, h_kv, T, d) in enumerate([(2, 4, 2, 5, 8), (1, 6, 3, 4, 4), (2, 4, 1, 6, 8), (2, 4, 4, 5, 8),
                                               (3, 4, 2, 6, 8)]):
        g = ev.rng(seed)
        q, k, v = randn(g, B, h, T, d), randn(g, B, h_kv, T, d), randn(g, B, h_kv, T, d)
        lengths = torch.as_tensor([T - 1, 2, T]) if seed == 4 else None         # keys past a sequence's end masked
        mask = causal_mask(T) if lengths is None else (torch.arange(T) < lengths[:, None])[:, None, None, :]
        got = call_naming(ev, GQA_ERRORS, answer, q, k, v, mask)
        expect_shape(got, (B, h, T, d), f"the output (h={h} query heads, h_kv={h_kv})")
        expected = ref_gqa(q, k, v, mask)
        mistakes = {text: gqa_variant(q, k, v, mask, kind) for kind, text in GQA_MISTAKES.items()}
        mistakes = {key: value for key, value in mistakes.items()
                    if not torch.allclose(value, expected, atol=1e-6, equal_nan=True)}
        name = "multi-head" if h_kv == h else ("multi-query" if h_kv == 1 else "grouped-query")
        with_mask = "" if lengths is None else f", a padding mask of shape {tuple(mask.shape)}"
        probes = [functools.partial(masks_more, ev, GQA_ERRORS, answer, q, k, v, mask)] if lengths is not None else []
        probes += [functools.partial(gqa_heads, got, q, k, v, mask),
                   functools.partial(batch_mixed, ev, GQA_ERRORS, answer, (q, k, v, mask)),
                   functools.partial(gqa_pairs, got, q, k, v, mask),
                   functools.partial(unnormalised, ev, GQA_ERRORS, answer, (q, k, v, mask), (2,), "the output")]
        permuted = heads_permuted(got, expected)
        expect(permuted is None, permuted)
        with explained(*probes):
            ev.expect_close(got, expected, f"the output of {name} attention (h={h}, h_kv={h_kv}{with_mask})",
                            mistakes=mistakes)
        tests += 1
    return tests
