"""Lesson 12's package code: the GPT, its attention (rotary positions and grouped-query heads, gpt_attention),
sampling and cached generation in the decoding module, the language-model helpers, and the notebook's
solutions against the package's references."""
import re
from pathlib import Path

import nbformat
import pytest
import torch

from course_utils.attention import MultiHeadAttention, merge_heads, scaled_dot_product_attention, split_heads
from course_utils.checks import lesson12 as check
from course_utils.checks.lesson12.rope_forms import rope_complex
from course_utils.decoding import generate, sample_next, sampling_distribution
from course_utils.gpt import GPT, kv_cache_bytes, next_token_loss
from course_utils.gpt_attention import CausalSelfAttention, grouped_query_attention, repeat_kv_heads
from course_utils.language_model import (
    BigramModel,
    caption_stream,
    eval_windows,
    perplexity,
    random_windows,
    train_language_model,
)
from course_utils.masks import causal_mask
from course_utils.positions import apply_rope, rope_angles

ROOT = Path(__file__).resolve().parents[1]


# ---- a GPT's attention: lesson 08's multi-head attention with lesson 12's options ----------------
def test_options_off_give_lesson_08s_self_attention():
    torch.manual_seed(0)
    mha = MultiHeadAttention(16, 4)
    attn = CausalSelfAttention(16, 4)
    assert attn.in_proj.weight.shape == (48, 16)
    attn.load_state_dict(mha.state_dict())
    x = torch.randn(2, 5, 16)
    assert torch.allclose(attn(x, causal_mask(5)), mha(x, x, x, causal_mask(5)), atol=1e-6)


def test_lesson_08s_module_has_none_of_lesson_12s_options():
    mha = MultiHeadAttention(16, 4)
    assert not any(hasattr(mha, name) for name in ("num_kv_heads", "rope", "extend_cache", "project_kv"))
    assert "num_kv_heads" not in repr(mha) and "rope" not in repr(mha)
    with pytest.raises(TypeError):
        MultiHeadAttention(16, 4, num_kv_heads=2)


@pytest.mark.parametrize("num_kv_heads", [1, 2])
def test_grouped_query_equals_multi_head_with_repeated_key_value_weights(num_kv_heads):
    torch.manual_seed(0)
    d_model, h = 16, 4
    gqa = CausalSelfAttention(d_model, h, num_kv_heads=num_kv_heads)
    d_head, g = d_model // h, h // num_kv_heads
    assert gqa.in_proj.weight.shape == (d_model + 2 * num_kv_heads * d_head, d_model)
    mha = MultiHeadAttention(d_model, h)
    w_q, w_k, w_v = gqa.in_proj.weight.split([d_model, num_kv_heads * d_head, num_kv_heads * d_head])
    b_q, b_k, b_v = gqa.in_proj.bias.split([d_model, num_kv_heads * d_head, num_kv_heads * d_head])

    def repeat(w):  # kv head i // g serves query head i
        return w.view(num_kv_heads, d_head, *w.shape[1:]).repeat_interleave(g, 0).reshape(d_model, *w.shape[1:])
    with torch.no_grad():
        mha.in_proj.weight.copy_(torch.cat([w_q, repeat(w_k), repeat(w_v)]))
        mha.in_proj.bias.copy_(torch.cat([b_q, repeat(b_k), repeat(b_v)]))
        mha.out_proj.load_state_dict(gqa.out_proj.state_dict())
    x = torch.randn(2, 6, d_model)
    assert torch.allclose(gqa(x, causal_mask(6)), mha(x, x, x, causal_mask(6)), atol=1e-6)


def test_gqa_function_equals_attention_when_heads_match_and_checks_its_input():
    q, k, v = torch.randn(2, 4, 5, 8), torch.randn(2, 4, 5, 8), torch.randn(2, 4, 5, 8)
    assert torch.allclose(grouped_query_attention(q, k, v), scaled_dot_product_attention(q, k, v), atol=1e-6)
    with pytest.raises(ValueError, match="multiple of the key/value heads"):
        grouped_query_attention(q, k[:, :3], v[:, :3])


def test_bad_head_counts_are_clear_errors():
    with pytest.raises(ValueError, match="num_heads=4 by num_kv_heads=3"):
        CausalSelfAttention(16, 4, num_kv_heads=3)
    with pytest.raises(ValueError, match="d_head .* must be even"):
        CausalSelfAttention(12, 4, rope=True)
    with pytest.raises(ValueError, match="num_heads=4 by num_kv_heads=3"):
        GPT(20, d_model=16, num_heads=4, num_layers=1, d_ff=16, num_kv_heads=3)
    with pytest.raises(ValueError, match="x must be"):
        CausalSelfAttention(16, 4)(torch.randn(2, 5, 12))


@pytest.mark.parametrize("rope, num_kv_heads", [(False, None), (True, None), (True, 2), (False, 1)])
def test_extend_cache_equals_causal_forward(rope, num_kv_heads):
    torch.manual_seed(0)
    attn = CausalSelfAttention(16, 4, num_kv_heads=num_kv_heads, rope=rope).eval()
    x = torch.randn(2, 7, 16)
    full = attn(x, causal_mask(7))
    cache, outs = None, []
    for t in range(7):
        out, cache = attn.extend_cache(x[:, t:t + 1], cache)
        outs.append(out)
    assert cache[0].shape == (2, num_kv_heads or 4, 7, 4)
    assert torch.allclose(torch.cat(outs, 1), full, atol=1e-5)


@pytest.mark.parametrize("num_kv_heads", [1, 2])
@pytest.mark.parametrize("mask_shape", [None, (2, 1, 1, 6), (6,), (2, 4, 1, 6)])
def test_a_grouped_decoding_step_equals_the_repeated_heads(num_kv_heads, mask_shape):
    """A decoding step folds each group of query heads onto its key/value head instead of copying the
    cache; with any mask it equals attention over the repeated heads (a (B, h, ...) mask takes the copy)."""
    torch.manual_seed(0)
    attn = CausalSelfAttention(16, 4, num_kv_heads=num_kv_heads, rope=True).eval()
    x = torch.randn(2, 6, 16)
    cache = None
    for t in range(5):
        _, cache = attn.extend_cache(x[:, t:t + 1], cache)
    mask = None if mask_shape is None else torch.rand(mask_shape) > 0.3
    if mask is not None:
        mask[..., -1] = True                                         # every query may see itself
    out, _ = attn.extend_cache(x[:, 5:], cache, mask)
    q = split_heads(attn.in_proj(x[:, 5:])[..., :16], 4)
    q = apply_rope(q, torch.tensor([5]))
    k, v = attn.in_proj(x)[..., 16:].split(attn.d_kv, -1)
    k = apply_rope(split_heads(k, num_kv_heads), torch.arange(6))
    k, v = repeat_kv_heads(k, 4), repeat_kv_heads(split_heads(v, num_kv_heads), 4)
    expected = attn.out_proj(merge_heads(scaled_dot_product_attention(q, k, v, mask)))
    assert torch.allclose(out, expected, atol=1e-5)


def test_every_gpt_attention_keeps_its_weights_for_plots():
    model = small(num_kv_heads=2).store_attention(True)
    tokens = torch.randint(3, 31, (2, 6))
    fast = small(num_kv_heads=2)(tokens)
    torch.testing.assert_close(model(tokens), fast, atol=1e-5, rtol=1e-5)
    maps = model.attention_maps()
    assert maps.shape == (2, 2, 4, 6, 6) and torch.allclose(maps.sum(-1), torch.ones(2, 2, 4, 6))
    assert torch.all(maps.triu(1) == 0)                               # causal
    model.store_attention(False)
    assert all(layer.attn.attn_weights is None for layer in model.layers)


# ---- RoPE ----------------------------------------------------------------------------------------
def test_rope_keeps_norms_depends_on_relative_position_and_is_the_complex_product():
    torch.manual_seed(0)
    x = torch.randn(3, 10, 8)
    positions = torch.arange(10)
    y = apply_rope(x, positions)
    assert torch.allclose(y.norm(dim=-1), x.norm(dim=-1), atol=1e-5)
    assert torch.allclose(y, rope_complex(x, positions, 10000.0).float(), atol=1e-5)
    q, k = torch.randn(1, 8), torch.randn(1, 8)
    dots = [float((apply_rope(q, torch.tensor([m])) * apply_rope(k, torch.tensor([n]))).sum())
            for m, n in ((4, 1), (20, 17), (3, 0))]
    assert max(dots) - min(dots) < 1e-4
    assert torch.allclose(apply_rope(x, torch.zeros(10, dtype=torch.long)), x)
    assert rope_angles(torch.tensor([1]), 8)[0, 0] == 1.0            # θ_0 = 1: the fastest pair


def test_rope_keeps_the_dtype_and_checks_positions():
    x = torch.randn(2, 5, 8, dtype=torch.bfloat16)
    assert apply_rope(x, torch.arange(5)).dtype == torch.bfloat16
    with pytest.raises(ValueError, match="positions must be"):
        apply_rope(torch.randn(2, 5, 8), torch.arange(4))
    with pytest.raises(ValueError, match="must be even"):
        apply_rope(torch.randn(2, 5, 7), torch.arange(5))


# ---- the GPT -------------------------------------------------------------------------------------
def small(positions="rope", num_kv_heads=None, **kw):
    torch.manual_seed(0)
    return GPT(31, d_model=16, num_heads=4, num_layers=2, d_ff=32, max_len=24, positions=positions,
               num_kv_heads=num_kv_heads, **kw).eval()


@pytest.mark.parametrize("positions", ["learned", "sinusoidal", "rope"])
@pytest.mark.parametrize("num_kv_heads", [None, 2, 1])
def test_cached_generation_equals_uncached(positions, num_kv_heads):
    model = small(positions, num_kv_heads)
    prompt = torch.randint(3, 31, (3, 4))
    cached = generate(model, prompt, 12, temperature=0, use_cache=True)
    assert torch.equal(cached, generate(model, prompt, 12, temperature=0, use_cache=False))
    state = model.start_decoding(prompt[:, :-1])
    logits, state = model.decode_step(prompt[:, -1], state)
    assert torch.allclose(logits, model(prompt)[:, -1], atol=1e-5)
    assert state.memory_bytes() == kv_cache_bytes(2, num_kv_heads or 4, 4, tokens=4 * 3, bytes_per_number=4)
    g1, g2 = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    sampled = generate(model, prompt, 10, temperature=1.0, top_p=0.9, generator=g1)
    assert torch.equal(sampled, generate(model, prompt, 10, temperature=1.0, top_p=0.9, generator=g2,
                                         use_cache=False))


def test_the_gpt_is_causal_tied_and_pre_norm():
    model = small()
    tokens = torch.randint(3, 31, (2, 10))
    changed = tokens.clone()
    changed[:, 6:] = 3
    assert torch.allclose(model(tokens)[:, :6], model(changed)[:, :6], atol=1e-6)
    assert model.head.weight is model.embed.weight
    assert not any("cross" in name for name, _ in model.named_modules())


def test_context_longer_than_the_models_is_a_clear_error():
    model = small("learned")
    with pytest.raises(ValueError, match="longer than the model's, max_len=24"):
        model(torch.randint(3, 31, (1, 25)))
    with pytest.raises(ValueError, match="longer than the model's"):
        generate(model, torch.randint(3, 31, (1, 20)), 6)
    generate(model, torch.randint(3, 31, (1, 20)), 5, temperature=0)   # 20 + 5 - 1 = 24 positions fit
    with pytest.raises(ValueError, match="positions must be one of"):
        GPT(10, positions="alibi")


def test_generation_stops_at_eos_and_pads_after_it():
    model = small()
    model.head = torch.nn.Linear(16, 31)                              # untied, with a bias toward <eos> (id 2)
    with torch.no_grad():
        model.head.bias[2] = 100.0
    out = generate(model, torch.full((2, 1), 1), 10, temperature=0, eos_id=2)
    assert out.shape == (2, 1) and (out == 2).all()


# ---- sampling ------------------------------------------------------------------------------------
def test_sampling_distribution_properties():
    torch.manual_seed(0)
    logits = torch.randn(5, 20) * 2
    probs = sampling_distribution(logits, top_k=4)
    assert ((probs > 0).sum(-1) == 4).all() and torch.allclose(probs.sum(-1), torch.ones(5))
    nucleus = sampling_distribution(logits, top_p=0.8)
    kept_mass = (logits.softmax(-1) * (nucleus > 0)).sum(-1)
    assert (kept_mass >= 0.8 - 1e-6).all()
    assert torch.allclose(sampling_distribution(logits, top_p=1.0), logits.softmax(-1), atol=1e-6)
    assert torch.equal(sampling_distribution(logits, 0.0).argmax(-1), logits.argmax(-1))
    assert torch.allclose(sampling_distribution(logits, 1e-4), sampling_distribution(logits, 0.0), atol=1e-4)
    tied = torch.tensor([[2.0, 1.0, 1.0, 1.0, -1.0]])
    assert ((sampling_distribution(tied, top_p=0.5) > 0) == torch.tensor([[True, True, True, True, False]])).all()


@pytest.mark.parametrize("kwargs, message", [
    (dict(temperature=-0.5), "temperature must be a number > 0, or 0 for greedy"),
    (dict(top_p=0.0), r"top_p must be None \(no filtering\) or in \(0, 1\]"),
    (dict(top_p=1.5), r"in \(0, 1\]"),
    (dict(top_k=0), "top_k must be None"),
])
def test_bad_sampling_arguments_are_clear_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        sampling_distribution(torch.randn(2, 5), **kwargs)
    with pytest.raises(ValueError, match=message):
        generate(small(), torch.ones(1, 1, dtype=torch.long), 2, **kwargs)


def test_sample_next_draws_from_the_distribution():
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.2, 1e-9]])).repeat(20000, 1)
    draws = sample_next(logits, generator=torch.Generator().manual_seed(0))
    freq = torch.bincount(draws, minlength=4).float() / draws.numel()
    assert torch.allclose(freq, torch.tensor([0.5, 0.3, 0.2, 0.0]), atol=0.015)
    assert torch.equal(sample_next(logits[:3], temperature=0), torch.zeros(3, dtype=torch.long))


# ---- the loss and the language-model helpers ------------------------------------------------------
def test_next_token_loss_shifts_and_ignores_padding():
    logits = torch.randn(2, 4, 7)
    tokens = torch.tensor([[1, 4, 5, 2], [1, 6, 0, 0]])
    terms = [-(logits[b, t].log_softmax(-1)[tokens[b, t + 1]]) for b, t in ((0, 0), (0, 1), (0, 2), (1, 0))]
    assert torch.allclose(next_token_loss(logits, tokens, 0), torch.stack(terms).mean(), atol=1e-6)
    with pytest.raises(ValueError, match="logits must be"):
        next_token_loss(logits[:, :-1], tokens)


class _Tok:
    def encode_batch(self, texts):
        return [[3 + len(w) for w in t.split()] for t in texts]


def test_stream_windows_and_bigram():
    stream = caption_stream(_Tok(), ["a bb", "ccc"])
    assert stream.tolist() == [1, 4, 5, 2, 1, 6, 2]
    assert eval_windows(stream, 3).tolist() == [[1, 4, 5], [2, 1, 6]]
    windows = random_windows(stream, 4, 5, torch.Generator().manual_seed(0))
    assert windows.shape == (5, 4)
    cycle = torch.tensor([1, 4, 5, 2] * 50)
    bigram = BigramModel.fit(cycle, 8, alpha=1e-6)
    assert bigram.perplexity(eval_windows(cycle, 8)) == pytest.approx(1.0, abs=1e-3)


def test_training_learns_a_repeating_stream():
    torch.manual_seed(0)
    stream = torch.tensor([1, 5, 6, 7, 8, 2] * 200)
    model = GPT(10, d_model=16, num_heads=2, num_layers=1, d_ff=32, max_len=16)
    val = eval_windows(stream[:120], 12)
    before = perplexity(model, val)
    history = train_language_model(model, stream, steps=80, context=12, batch_size=8, lr=1e-2, warmup=5,
                                   eval_windows=val, eval_every=40, show_progress=False)
    assert history["val_ppl"][-1] < 1.5 < before and history["eval_step"] == [40, 80]


# ---- the notebook's solutions agree with the package's references ----------------------------------
def _solution_functions():
    nb = nbformat.read(ROOT / "solutions" / "12_gpt_from_scratch.ipynb", as_version=4)
    namespace = {}
    for cell in nb.cells:
        if cell.cell_type == "code" and "### BEGIN SOLUTION" in cell.source:
            source = "\n".join(line for line in cell.source.splitlines() if not re.match(r"^check\.", line))
            exec(compile("import math\nimport torch\nimport torch.nn.functional as F\n"
                         "from course_utils.attention import scaled_dot_product_attention\n"
                         "from course_utils.positions import apply_rope\n"
                         + source, "solution", "exec"), namespace)
    return namespace


@pytest.mark.parametrize("name, check_name", [
    ("next_token_loss", "next_token_loss"), ("MyGPTBlock", "gpt_block"), ("MyGPT", "gpt"),
    ("sampling_distribution", "sampling_distribution"), ("cached_attention_step", "cached_attention_step"),
    ("apply_rope", "apply_rope"), ("grouped_query_attention", "grouped_query_attention")])
def test_the_notebooks_solution_passes_the_check(name, check_name):
    solution = _solution_functions()[name]
    outcome = getattr(check, check_name).evaluate(solution)
    assert outcome.passed, outcome.message


def test_the_learners_gpt_is_the_courses_gpt():
    """The notebook's MyGPT with the course's weights computes the course's GPT (learned positions)."""
    MyGPT = _solution_functions()["MyGPT"]
    torch.manual_seed(0)
    reference = GPT(31, 16, 4, 2, 32, max_len=12, positions="learned").eval()
    mine = MyGPT(31, 16, 4, 2, 32, 12)
    mine.load_state_dict(reference.state_dict())
    tokens = torch.randint(1, 31, (2, 10))
    torch.testing.assert_close(mine.eval()(tokens), reference(tokens))
    assert mine.head.weight is mine.embed.weight
