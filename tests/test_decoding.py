"""Greedy and beam search on tiny random Transformers: beam 1 = greedy, exhaustive beam = optimum."""
import itertools

import pytest
import torch

from course_utils.decoding import (
    beam_search,
    beam_step,
    greedy_decode,
    length_penalty_factor,
    sequence_log_prob,
    strip_after_eos,
)
from course_utils.transformer import Transformer

PAD, BOS, EOS = 0, 1, 2


def tiny_model(vocab=6, seed=0, d_model=16, scale=3.0):
    torch.manual_seed(seed)
    model = Transformer(vocab, vocab, d_model=d_model, num_heads=2, num_layers=1, d_ff=32, dropout=0.0,
                        pad_id=PAD).eval()
    with torch.no_grad():  # sharper distributions than at initialisation, so that choices matter
        model.generator.weight.mul_(scale)
    return model


def test_beam_step_picks_best_over_all_beams():
    scores = torch.tensor([0.0, -1.0])
    log_probs = torch.log(torch.tensor([[0.1, 0.2, 0.7], [0.9, 0.05, 0.05]]))
    new, origin, token = beam_step(scores, log_probs, 2)
    # candidates: beam0 -> log .7 = -0.36, log .2 = -1.6; beam1 -> -1 + log .9 = -1.11
    assert origin.tolist() == [0, 1] and token.tolist() == [2, 0]
    assert torch.allclose(new, torch.stack([log_probs[0, 2], -1.0 + log_probs[1, 0]]))
    new_b, origin_b, token_b = beam_step(scores.expand(3, 2), log_probs.expand(3, 2, 3), 2)  # batched
    assert new_b.shape == (3, 2) and torch.equal(origin_b[1], origin) and torch.equal(token_b[2], token)


def test_length_penalty():
    assert length_penalty_factor(torch.tensor(1.0), 0.0) == 1.0
    assert length_penalty_factor(torch.tensor(1.0), 1.0) == 1.0
    assert length_penalty_factor(torch.tensor(7.0), 1.0) == 2.0


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_beam_size_one_equals_greedy(seed):
    model = tiny_model(vocab=20, seed=seed, d_model=32)
    src = torch.randint(3, 20, (5, 7))
    src[1, 4:] = PAD
    greedy = greedy_decode(model, src, BOS, EOS, PAD, max_len=12)
    beams = beam_search(model, src, BOS, EOS, PAD, beam_size=1, max_len=12, length_penalty=0.6)
    for row, hyps in zip(greedy.tolist(), beams):
        assert hyps[0].tokens == strip_after_eos(row, EOS, PAD)


def test_greedy_ignores_padding_of_other_sentences():
    model = tiny_model(vocab=20, seed=3, d_model=32)
    src = torch.randint(3, 20, (3, 6))
    src[0, 3:] = PAD
    batch = greedy_decode(model, src, BOS, EOS, PAD, max_len=10)
    alone = greedy_decode(model, src[:1, :3], BOS, EOS, PAD, max_len=10)
    assert strip_after_eos(batch[0].tolist(), EOS) == strip_after_eos(alone[0].tolist(), EOS)


def all_outputs(tokens, max_len):
    """Every output of at most max_len tokens: ending with <eos>, or cut at max_len."""
    for n in range(max_len):
        for body in itertools.product(tokens, repeat=n):
            yield list(body) + [EOS]
    yield from (list(body) for body in itertools.product(tokens, repeat=max_len))


@pytest.mark.parametrize("seed,alpha", [(0, 0.0), (1, 0.0), (2, 1.0), (3, 0.6)])
def test_exhaustive_beam_finds_the_best_sequence(seed, alpha):
    vocab, max_len = 5, 3                       # tokens 3, 4 and <eos>: 1 + 2 + 4 + 8 + 8 = 23 outputs
    model = tiny_model(vocab=vocab, seed=seed)
    src = torch.tensor([[3, 4, 4, 3]])
    candidates = list(all_outputs([3, 4], max_len))
    scored = []
    for out in candidates:
        lp = sequence_log_prob(model, src, out, BOS, PAD)
        scored.append((lp / float(length_penalty_factor(torch.tensor(float(len(out))), alpha)), out, lp))
    scored.sort(key=lambda t: -t[0])
    hyps = beam_search(model, src, BOS, EOS, PAD, beam_size=32, max_len=max_len, length_penalty=alpha,
                       n_best=5)[0]
    for hyp, (score, out, lp) in zip(hyps, scored[:5]):
        assert hyp.tokens == [t for t in out if t != EOS]
        assert hyp.score == pytest.approx(score, abs=1e-4) and hyp.log_prob == pytest.approx(lp, abs=1e-4)
    # a narrow beam can only do as well as the exhaustive one
    narrow = beam_search(model, src, BOS, EOS, PAD, beam_size=2, max_len=max_len, length_penalty=alpha)[0]
    assert narrow[0].score <= hyps[0].score + 1e-5   # (float rounding: another batch size)


def test_n_best_sorted_and_distinct():
    model = tiny_model(vocab=20, seed=4, d_model=32)
    src = torch.randint(3, 20, (2, 5))
    for hyps in beam_search(model, src, BOS, EOS, PAD, beam_size=4, n_best=4, max_len=8):
        assert len(hyps) == 4
        scores = [h.score for h in hyps]
        assert scores == sorted(scores, reverse=True)
        assert len({tuple(h.tokens) for h in hyps}) == 4
        assert all(PAD not in h.tokens and BOS not in h.tokens and EOS not in h.tokens for h in hyps)
    with pytest.raises(ValueError, match="n_best"):
        beam_search(model, src, BOS, EOS, PAD, beam_size=2, n_best=3)


def test_encoder_runs_once():
    model = tiny_model(vocab=20, seed=5, d_model=32)
    calls = []
    encode = model.encode
    model.encode = lambda *a, **k: (calls.append(1), encode(*a, **k))[1]
    beam_search(model, torch.randint(3, 20, (2, 5)), BOS, EOS, PAD, beam_size=3, max_len=6)
    greedy_decode(model, torch.randint(3, 20, (2, 5)), BOS, EOS, PAD, max_len=6)
    assert len(calls) == 2
