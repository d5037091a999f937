"""Speculative decoding (course_utils.speculative): at temperature 0 it gives exactly the target's greedy tokens;
at temperature 1 the distribution of the token it produces is the target's: over 10^4 seeded trials the empirical
distribution lies within the total-variation bound the lesson derives (tv_bound), for the rule alone and for the
whole decoding loop and the engine's speculative steps."""
import collections

import pytest
import torch

from course_utils.decoding import generate
from course_utils.gpt import GPT
from course_utils.serving_engine import Engine, Request
from course_utils.serving_model import forward_chunk, new_state
from course_utils.speculative import (
    plain_generate,
    probabilities,
    speculative_accept,
    speculative_generate,
    speculative_tokens,
    tv_bound,
)

V, PROMPT = 12, [1, 5, 7]


def _models(scale=0.7):
    torch.manual_seed(2)                                  # next-token distributions neither flat nor one-hot
    target = GPT(V, 32, 4, 2, 64, max_len=32).double().eval()
    draft = GPT(V, 16, 2, 1, 32, max_len=32).double().eval()
    with torch.no_grad():
        for p in list(target.parameters()) + list(draft.parameters()):
            p.mul_(scale)
    return target, draft


TARGET, DRAFT = _models()


def _next(model, tokens):
    """The model's next-token distributions after each of the rows `tokens` (N, T): (N, V)."""
    return forward_chunk(model, new_state(model), tokens)[:, -1].softmax(-1)


def _tv(counts, p, n):
    return 0.5 * sum(abs(counts.get(v, 0) / n - float(p[v])) for v in range(len(p)))


@pytest.mark.parametrize("k", [1, 3, 5])
def test_at_temperature_0_the_tokens_are_the_target_greedy_tokens(k):
    for prompt in ([1], PROMPT, [1, 9, 9, 4, 2, 8]):
        want = generate(TARGET, torch.tensor([prompt]), 20, temperature=0)[0].tolist()
        got, stats = speculative_generate(TARGET, DRAFT, prompt, 20, k=k, temperature=0)
        assert got == want
        assert stats["target_passes"] < 20 or stats["accepted"] == 0
    assert plain_generate(TARGET, PROMPT, 20, temperature=0)[0] == \
        generate(TARGET, torch.tensor([PROMPT]), 20, temperature=0)[0].tolist()


def test_the_rule_returns_the_accepted_drafts_and_the_distribution_of_the_last_token():
    p = torch.tensor([[0.5, 0.5, 0.0], [0.2, 0.2, 0.6], [0.1, 0.8, 0.1]])
    q = torch.tensor([[0.25, 0.75, 0.0], [0.1, 0.8, 0.1]])
    accepted, dist = speculative_accept(p, q, torch.tensor([1, 1]), torch.tensor([0.6, 0.1]))  # 0.6 < 2/3, 0.1 < 1/4
    assert accepted == [1, 1] and dist.tolist() == p[2].tolist()                               # the bonus: p_k
    accepted, dist = speculative_accept(p, q, torch.tensor([1, 1]), torch.tensor([0.6, 0.3]))  # 0.3 > 1/4: rejected
    assert accepted == [1] and torch.allclose(dist, torch.tensor([0.1, 0.0, 0.5]) / 0.6)       # norm(max(0, p - q))


def test_the_rule_gives_the_target_distribution_over_ten_thousand_trials():
    """k = 2 drafts after PROMPT, every distribution computed once: p_0 after the prompt, q_1 and p_1 after each
    first draft x, p_2 after each pair (x, y); each trial draws the drafts from the draft's q and runs the rule."""
    g = torch.Generator().manual_seed(0)
    ctx = torch.tensor([PROMPT])
    q0, p0 = _next(DRAFT, ctx)[0], _next(TARGET, ctx)[0]
    ones = torch.arange(V)[:, None]
    q1 = _next(DRAFT, torch.cat([ctx.expand(V, -1), ones], 1))                        # (V, V): after x
    p1 = _next(TARGET, torch.cat([ctx.expand(V, -1), ones], 1))
    pairs = torch.cartesian_prod(torch.arange(V), torch.arange(V))                     # (V², 2)
    p2 = _next(TARGET, torch.cat([ctx.expand(V * V, -1), pairs], 1)).view(V, V, V)     # after (x, y)
    counts, n = collections.Counter(), 10_000

    def sample(dist):
        return int(torch.multinomial(dist, 1, generator=g))
    for _ in range(n):
        x = sample(q0)
        y = sample(q1[x])
        u = torch.rand(2, generator=g, dtype=torch.float64)
        out = speculative_tokens(torch.stack([p0, p1[x], p2[x, y]]), torch.stack([q0, q1[x]]), torch.tensor([x, y]),
                                 u, sample)
        counts[out[0]] += 1
    bound = tv_bound(p0, n)
    assert _tv(counts, p0, n) < bound < 0.05
    assert 0.5 * (p0 - q0).abs().sum() > 3 * bound, "the draft's own distribution is far from the target's"


def test_the_decoding_loop_gives_the_target_distribution():
    """The first token of speculative_generate (600 runs; k = 1, so that the first pass drafts one token) against
    the target's next-token distribution, within the bound for that number of trials."""
    p0 = _next(TARGET, torch.tensor([PROMPT]))[0]
    g = torch.Generator().manual_seed(1)
    n = 600
    counts = collections.Counter(speculative_generate(TARGET, DRAFT, PROMPT, 2, k=1, temperature=1.0,
                                                      generator=g)[0][0] for _ in range(n))
    assert _tv(counts, p0, n) < tv_bound(p0, n)


def test_the_engine_gives_the_target_distribution():
    """The first token of the engine's speculative steps (2,000 requests at once, k = 2) against the target's
    next-token distribution after the prompt and a drawn token, within the bound for that number of trials."""
    p0 = _next(TARGET, torch.tensor([PROMPT]))[0]
    g = torch.Generator().manual_seed(1)
    n = 2_000
    engine = Engine(TARGET, num_blocks=n * 2, block_size=8, max_running=n, draft=DRAFT, k=2, temperature=1.0, seed=2)
    for i in range(n):
        engine.add(Request(i, PROMPT + [int(torch.multinomial(p0, 1, generator=g))], 3))   # a first token drawn,
    while engine.busy:                                                                      # so that it drafts
        engine.step()
    second = collections.Counter(r.output[0] for r in engine.done)
    # the token after PROMPT + [x]: the target's p(. | x) mixed over x ~ p0
    mixed = (p0[:, None] * _next(TARGET, torch.cat([torch.tensor([PROMPT]).expand(V, -1),
                                                   torch.arange(V)[:, None]], 1))).sum(0)
    assert engine.proposed > 0 and _tv(second, mixed, n) < tv_bound(mixed, n)


def test_the_bound_and_the_probabilities():
    p = torch.full((4,), 0.25)
    expected = 0.5 * 4 * (0.25 * 0.75 / 1e4) ** 0.5 + (13.8155 / 2e4) ** 0.5
    assert tv_bound(p, 10_000, delta=1e-6) == pytest.approx(expected, rel=1e-4)
    logits = torch.tensor([1.0, 3.0, 2.0])
    assert probabilities(logits, 0).tolist() == [0, 1, 0]
    torch.testing.assert_close(probabilities(logits, 1.0), logits.softmax(-1))


def test_a_draft_of_another_vocabulary_is_refused():
    other = GPT(V + 1, 16, 2, 1, 32, max_len=32)
    with pytest.raises(ValueError, match="vocabulary"):
        speculative_generate(TARGET, other, PROMPT, 5)
