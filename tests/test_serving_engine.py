"""The serving engine (course_utils.serving_engine): whatever the policy, the batch, the preemptions and the
drafts, every request gets exactly the tokens that decoding it alone gives (greedy, lesson 10's `generate` with
lesson 12's contiguous cache as the independent form); every block comes back; bad requests are refused."""
import copy
import random

import pytest
import torch

from course_utils.decoding import generate
from course_utils.gpt import GPT
from course_utils.serving_engine import Engine, Request


def _models():
    torch.manual_seed(0)
    target = GPT(40, 32, 4, 2, 64, max_len=64, num_kv_heads=2).double().eval()
    draft = GPT(40, 16, 2, 1, 32, max_len=64).double().eval()
    with torch.no_grad():                                  # sharper distributions: outputs that vary with the prompt
        for p in list(target.parameters()) + list(draft.parameters()):
            p.mul_(3)
    return target, draft


TARGET, DRAFT = _models()


def _requests(n=14, seed=0):
    rng = random.Random(seed)
    return [(i, [1] + [rng.randrange(4, 40) for _ in range(rng.randint(1, 9))], rng.randint(1, 14)) for i in range(n)]


ALONE = {i: generate(TARGET, torch.tensor([p]), n, temperature=0)[0].tolist() for i, p, n in _requests()}


def _serve(**kwargs):
    engine = Engine(TARGET, **kwargs)
    for i, p, n in _requests():
        engine.add(Request(i, p, n))
    while engine.busy:
        engine.step()
    return engine


@pytest.mark.parametrize("policy, blocks, draft", [("sequential", 40, None), ("static", 40, None),
                                                   ("continuous", 40, None), ("continuous", 7, None),
                                                   ("continuous", 40, "draft"), ("continuous", 9, "draft"),
                                                   ("continuous", 9, "target")])
def test_every_request_gets_the_tokens_it_gets_alone(policy, blocks, draft):
    drafts = {None: None, "draft": DRAFT, "target": copy.deepcopy(TARGET)}   # the target as its own draft: all accepted
    engine = _serve(num_blocks=blocks, block_size=4, max_running=5, policy=policy, draft=drafts[draft], k=3)
    assert len(engine.done) == len(ALONE)
    assert {r.id: r.output for r in engine.done} == ALONE
    assert engine.cache.num_free == blocks and engine.cache.refs.sum() == 0, "every block came back"
    if blocks < 10:
        assert engine.preemptions > 0, "the tight pools must preempt"
    if draft == "target":
        assert engine.accepted == engine.proposed > 0


def test_continuous_batching_runs_fewer_steps_than_static_and_static_than_sequential():
    steps = {p: _serve(num_blocks=40, block_size=4, max_running=5, policy=p).steps
             for p in ("sequential", "static", "continuous")}
    assert steps["continuous"] < steps["static"] < steps["sequential"]


def test_bad_requests_and_drafts_are_refused_with_a_clear_error():
    engine = Engine(TARGET, num_blocks=4, block_size=4, max_running=2)
    with pytest.raises(ValueError, match="longer than the model's context"):
        engine.add(Request(0, [1] * 60, 10))
    with pytest.raises(ValueError, match="could never be served"):
        engine.add(Request(1, [1] * 10, 10))
    other = GPT(41, 16, 2, 1, 32, max_len=64)
    with pytest.raises(ValueError, match="vocabulary"):
        Engine(TARGET, num_blocks=4, block_size=4, max_running=2, draft=other)
    with pytest.raises(ValueError, match="policy"):
        Engine(TARGET, num_blocks=4, block_size=4, max_running=2, policy="fifo")
