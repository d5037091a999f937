"""The Transformer's key/value cache: one step of `decode_step` equals the decoder run over the whole
prefix, and greedy and beam search give the same tokens and scores with and without the cache."""
import pytest
import torch
import torch.nn.functional as F

from course_utils import transformer
from course_utils.attention import MultiHeadAttention
from course_utils.decoding import beam_search, greedy_decode
from course_utils.kv_cache import attend_cached, extend_cache, project_kv
from course_utils.masks import causal_mask, padding_mask
from course_utils.transformer import DecoderLayer, Transformer, shift_tokens

PAD, BOS, EOS = 0, 1, 2
D, H = 32, 4


def random_model(seed=0, vocab=20, num_layers=2, norm_first=True, scale=3.0):
    torch.manual_seed(seed)
    model = Transformer(vocab, vocab, d_model=D, num_heads=H, num_layers=num_layers, d_ff=64, dropout=0.1,
                        max_len=64, norm_first=norm_first, pad_id=PAD).eval()
    with torch.no_grad():  # sharper distributions than at initialisation, so that choices matter
        model.generator.weight.mul_(scale)
    return model


def padded_source(seed=0, B=5, S=7, vocab=20):
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(3, vocab, (B, S), generator=g)
    src[1, 4:] = PAD
    src[3, 2:] = PAD
    return src


@pytest.fixture(scope="module")
def trained_model():
    """A small Transformer trained to reverse sequences of 2-7 tokens: it ends its outputs with <eos>
    at different lengths, so that beams finish early and sentences of a batch stop apart."""
    torch.manual_seed(0)
    V = 12
    model = Transformer(V, V, d_model=32, num_heads=4, num_layers=2, d_ff=64, dropout=0.0, max_len=32)
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)
    for _ in range(200):
        lengths = torch.randint(2, 8, (64,))
        after = torch.arange(7) >= lengths[:, None]                # (64, 7) padding
        body = torch.randint(3, V, (64, 7)).masked_fill(after, PAD)
        rev = body.gather(1, (lengths[:, None] - 1 - torch.arange(7)).clamp(min=0)).masked_fill(after, PAD)
        tgt = torch.cat([torch.full((64, 1), BOS), rev, torch.full((64, 1), PAD)], 1)
        tgt[torch.arange(64), lengths + 1] = EOS
        tgt_in, tgt_out = shift_tokens(tgt)
        loss = F.cross_entropy(model(body, tgt_in).transpose(1, 2), tgt_out, ignore_index=PAD)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model.eval()


# ---- the pieces: attention, decoder layer, one step of the model ----------------------------------
def test_extend_cache_equals_causal_self_attention():
    torch.manual_seed(0)
    mha = MultiHeadAttention(D, H).eval()
    x = torch.randn(3, 6, D)
    keep = torch.ones(3, 6, dtype=torch.bool)
    keep[1, 2] = False                                            # a <pad> fed at position 2 of row 1
    full = mha(x, x, x, causal_mask(6) & keep[:, None, None, :])
    cache = None
    for t in range(6):
        out, cache = extend_cache(mha, x[:, t:t + 1], cache, keep[:, None, None, :t + 1])
        assert cache[0].shape == cache[1].shape == (3, H, t + 1, D // H)
        torch.testing.assert_close(out[:, 0], full[:, t], atol=1e-5, rtol=1e-5)


def test_attend_cached_equals_cross_attention_with_padding():
    torch.manual_seed(0)
    mha = MultiHeadAttention(D, H).eval()
    query, memory = torch.randn(2, 3, D), torch.randn(2, 5, D)
    mask = padding_mask(torch.tensor([[4, 5, 6, 7, 8], [4, 5, 0, 0, 0]]), PAD)
    k, v = project_kv(mha, memory)
    assert k.shape == v.shape == (2, H, 5, D // H)
    torch.testing.assert_close(attend_cached(mha, query, k, v, mask), mha(query, memory, memory, mask),
                               atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("norm_first", [True, False])
def test_decoder_layer_step_equals_forward(norm_first):
    torch.manual_seed(0)
    layer = DecoderLayer(D, H, 64, dropout=0.1, norm_first=norm_first).eval()
    x, memory = torch.randn(2, 4, D), torch.randn(2, 5, D)
    memory_mask = padding_mask(torch.tensor([[4, 5, 6, 7, 8], [4, 5, 6, 0, 0]]), PAD)
    full = layer(x, memory, causal_mask(4), memory_mask)
    cross_kv, cache = project_kv(layer.cross_attn, memory), None
    for t in range(4):
        out, cache = layer.step(x[:, t:t + 1], cache, None, cross_kv, memory_mask)
        torch.testing.assert_close(out[:, 0], full[:, t], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("norm_first", [True, False])
def test_decode_step_equals_decoding_the_whole_prefix(norm_first):
    model = random_model(norm_first=norm_first)
    src = padded_source()
    prefix = torch.randint(3, 20, (5, 6))
    prefix[:, 0] = BOS
    prefix[2, 4:] = PAD                                           # a finished beam feeds <pad>
    src_mask = padding_mask(src, PAD)
    expected = model.decode(prefix, model.encode(src, src_mask), src_mask)   # (B, T, V)
    state = model.start_decoding(src, PAD)
    for t in range(prefix.size(1)):
        logits, state = model.decode_step(prefix[:, t], state)
        assert logits.shape == (5, 20) and state.length == t + 1
        torch.testing.assert_close(logits, expected[:, t], atol=1e-5, rtol=1e-5)


def test_decode_step_under_cpu_bf16_autocast():
    model = random_model(seed=1)
    src = padded_source(seed=1)
    prefix = torch.cat([torch.full((5, 1), BOS), torch.randint(3, 20, (5, 5))], 1)
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        src_mask = padding_mask(src, PAD)
        expected = model.decode(prefix, model.encode(src, src_mask), src_mask).float()
        state = model.start_decoding(src, PAD)
        for t in range(prefix.size(1)):
            logits, state = model.decode_step(prefix[:, t], state)
            torch.testing.assert_close(logits.float(), expected[:, t], atol=0.1, rtol=0.05)  # bf16: 3 digits
    assert state.self_kv[0][0].dtype == state.cross_kv[0][0].dtype == torch.bfloat16  # half the memory


def test_cache_memory_and_reordering():
    model = random_model(num_layers=3)
    src = padded_source()[:2]
    state = model.start_decoding(src, PAD)
    state = model.reorder_decoding_state(state, torch.arange(2).repeat_interleave(3))   # 3 beams each
    for y in (BOS, 5, 6, 7):
        _, state = model.decode_step(torch.full((6,), y), state)
    # 2 (K and V) x layers x d_model x (t + S) numbers per row, float32
    assert state.memory_bytes() == 2 * 3 * D * (4 + 7) * 6 * 4
    cross = state.cross_kv[0][0]
    rows = torch.tensor([2, 2, 0, 3, 5, 3])                       # beams stay within their sentence
    before = [kv[0].clone() for kv in state.self_kv]
    state = model.reorder_decoding_state(state, rows)
    assert state.cross_kv[0][0] is cross                          # nothing to copy: same sentences
    assert all(torch.equal(kv[0], b[rows]) for kv, b in zip(state.self_kv, before))
    state = model.reorder_decoding_state(state, torch.tensor([3, 4, 5, 0, 1, 2]))  # sentences swap places
    assert torch.equal(state.cross_kv[0][0], cross[[3, 4, 5, 0, 1, 2]])


# ---- greedy and beam search: the same with and without the cache -----------------------------------
def same_hypotheses(a, b, tol=1e-4):
    for hyps_a, hyps_b in zip(a, b):
        assert [h.tokens for h in hyps_a] == [h.tokens for h in hyps_b]
        assert [h.length for h in hyps_a] == [h.length for h in hyps_b]
        for ha, hb in zip(hyps_a, hyps_b):
            assert ha.score == pytest.approx(hb.score, abs=tol) and ha.log_prob == pytest.approx(hb.log_prob, abs=tol)


@pytest.mark.parametrize("seed,norm_first", [(0, True), (1, True), (2, False)])
def test_random_models_cached_and_uncached_agree(seed, norm_first):
    model = random_model(seed, norm_first=norm_first)
    src = padded_source(seed)
    cached = greedy_decode(model, src, BOS, EOS, PAD, max_len=12)
    assert torch.equal(cached, greedy_decode(model, src, BOS, EOS, PAD, max_len=12, use_cache=False))
    beams = dict(beam_size=4, max_len=12, length_penalty=0.6, n_best=4)
    same_hypotheses(beam_search(model, src, BOS, EOS, PAD, **beams),
                    beam_search(model, src, BOS, EOS, PAD, use_cache=False, **beams))


def test_trained_model_cached_and_uncached_agree_with_early_finishes(trained_model):
    g = torch.Generator().manual_seed(1)
    lengths = torch.tensor([2, 7, 4, 3, 6, 5, 2, 7])
    src = torch.randint(3, 12, (8, 7), generator=g).masked_fill(torch.arange(7) >= lengths[:, None], PAD)
    cached = greedy_decode(trained_model, src, BOS, EOS, PAD, max_len=10)
    assert torch.equal(cached, greedy_decode(trained_model, src, BOS, EOS, PAD, max_len=10, use_cache=False))
    reversed_ok = [cached[i, :n].tolist() == src[i, :n].flip(0).tolist() for i, n in enumerate(lengths)]
    assert sum(reversed_ok) >= 6                                  # it did learn the task
    hyps = beam_search(trained_model, src, BOS, EOS, PAD, beam_size=5, max_len=10, n_best=3)
    same_hypotheses(hyps, beam_search(trained_model, src, BOS, EOS, PAD, beam_size=5, max_len=10, n_best=3,
                                      use_cache=False))
    ends = {h.length for sentence in hyps for h in sentence}
    assert len(ends) >= 3 and max(ends) < 10                      # beams finished at different steps


def test_trained_model_agrees_under_bf16_autocast(trained_model):
    src = torch.tensor([[3, 4, 5, 6, 7, 8, 9], [5, 6, 7, 0, 0, 0, 0], [9, 3, 0, 0, 0, 0, 0]])
    with torch.autocast("cpu", dtype=torch.bfloat16):
        cached = greedy_decode(trained_model, src, BOS, EOS, PAD, max_len=10)
        uncached = greedy_decode(trained_model, src, BOS, EOS, PAD, max_len=10, use_cache=False)
        hyps = beam_search(trained_model, src, BOS, EOS, PAD, beam_size=3, max_len=10)
        plain = beam_search(trained_model, src, BOS, EOS, PAD, beam_size=3, max_len=10, use_cache=False)
    assert torch.equal(cached, uncached)
    same_hypotheses(hyps, plain, tol=0.05)                        # bf16 rounding of the scores


def test_cross_attention_keys_and_values_computed_once_per_sentence(monkeypatch):
    model = random_model()
    calls = []
    monkeypatch.setattr(transformer, "project_kv",
                        lambda attn, memory: (calls.append(memory.size(0)), project_kv(attn, memory))[1])
    beam_search(model, padded_source(), BOS, EOS, PAD, beam_size=3, max_len=8)
    assert calls == [5, 5]                                        # once per layer, for the 5 sentences


def test_greedy_returns_cross_attention_with_stored_weights():
    model = random_model().store_attention(True)
    src = padded_source()
    tokens, weights = greedy_decode(model, src, BOS, EOS, PAD, max_len=6, return_weights=True)
    model.store_attention(False)
    assert weights.shape == (5, tokens.size(1), 7)
    torch.testing.assert_close(weights.sum(-1), torch.ones(5, tokens.size(1)))
    assert torch.all(weights[1, :, 4:] == 0) and torch.all(weights[3, :, 2:] == 0)   # source padding
    _, none = greedy_decode(model, src, BOS, EOS, PAD, max_len=6, return_weights=True)
    assert none is None                                           # not kept without store_attention


def test_sentences_that_finish_leave_the_batch_without_changing_the_others(trained_model):
    """Greedy and beam search drop finished sentences from the batch: each sentence's result is the
    one it gets decoded alone."""
    g = torch.Generator().manual_seed(2)
    lengths = torch.tensor([7, 2, 5, 3, 6, 2])
    src = torch.randint(3, 12, (6, 7), generator=g).masked_fill(torch.arange(7) >= lengths[:, None], PAD)
    batch = greedy_decode(trained_model, src, BOS, EOS, PAD, max_len=10)
    hyps = beam_search(trained_model, src, BOS, EOS, PAD, beam_size=3, max_len=10, n_best=2)
    for i, n in enumerate(lengths.tolist()):
        alone = greedy_decode(trained_model, src[i:i + 1, :n], BOS, EOS, PAD, max_len=10)[0]
        assert batch[i, :alone.numel()].tolist() == alone.tolist() and torch.all(batch[i, alone.numel():] == PAD)
        same_hypotheses([hyps[i]], beam_search(trained_model, src[i:i + 1, :n], BOS, EOS, PAD, beam_size=3,
                                               max_len=10, n_best=2))
    assert len({int((row != PAD).sum()) for row in batch}) >= 3   # they did finish at different steps
