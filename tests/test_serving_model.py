"""Lesson 12's GPT run as a server runs it (course_utils.serving_model): several tokens in one pass over a
contiguous cache, and many sequences of different lengths in one pass over a paged cache laid out at random, give
the logits of the plain forward pass, for the three kinds of positions."""
import random

import pytest
import torch

from course_utils.gpt import GPT
from course_utils.serving_engine import cache_for
from course_utils.serving_model import Chunk, forward_chunk, forward_paged, new_state, truncate


def _model(positions="rope", seed=0):
    torch.manual_seed(seed)
    return GPT(40, 32, 4, 2, 64, max_len=48, positions=positions, num_kv_heads=2).double().eval()


@pytest.mark.parametrize("positions", ["rope", "learned", "sinusoidal"])
def test_chunks_over_a_contiguous_cache_give_the_forward_pass(positions):
    model = _model(positions)
    tokens = torch.randint(0, 40, (3, 20))
    full = model(tokens)
    state = new_state(model)
    parts = [forward_chunk(model, state, tokens[:, a:b]) for a, b in ((0, 7), (7, 8), (8, 20))]
    torch.testing.assert_close(torch.cat(parts, 1), full)
    truncate(state, 10)                                    # rejected positions forgotten, then fed again
    torch.testing.assert_close(forward_chunk(model, state, tokens[:, 10:]), full[:, 10:])


@pytest.mark.parametrize("positions", ["rope", "learned", "sinusoidal"])
@pytest.mark.parametrize("seed", [0, 1])
def test_ragged_batches_over_a_random_paged_layout_give_the_forward_pass(positions, seed):
    model = _model(positions, seed)
    rng = random.Random(seed)
    tokens = torch.randint(0, 40, (4, 25))
    full = model(tokens)
    cache = cache_for(model, num_blocks=110, block_size=rng.choice([1, 3, 4]))
    rng.shuffle(cache.free)                                 # blocks handed out in a random order
    tables, lengths, outputs = [[] for _ in range(4)], [0] * 4, [[] for _ in range(4)]
    while min(lengths) < 25:                                # prefill chunks and decode steps, mixed at random
        chunks, who = [], []
        for i in range(4):
            if lengths[i] < 25 and rng.random() < 0.7:
                n = min(rng.choice([1, 1, 2, 6]), 25 - lengths[i])
                tables[i], _ = cache.reserve(tables[i], lengths[i], n)
                chunks.append(Chunk(tokens[i, lengths[i]:lengths[i] + n].tolist(), lengths[i], tables[i]))
                who.append(i)
        for i, chunk, logits in zip(who, chunks, forward_paged(model, cache, chunks)):
            outputs[i].append(logits)
            lengths[i] += len(chunk.tokens)
    for i in range(4):
        torch.testing.assert_close(torch.cat(outputs[i]), full[i])


def test_a_position_beyond_the_context_is_refused():
    model = _model()
    state = new_state(model)
    with pytest.raises(ValueError, match="beyond the model's context"):
        forward_chunk(model, state, torch.zeros(1, 49, dtype=torch.long))
