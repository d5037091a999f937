"""A stream of requests and its figures (course_utils.request_stream): Poisson arrivals at the asked rate, caption
requests that ask for the rest of their caption, a served stream stamped on the engine's clock, the figures of
`summarize`, and the two waste fractions on lengths whose answers are known."""
import pytest
import torch

from course_utils.gpt import GPT
from course_utils.request_stream import (
    caption_requests,
    contiguous_waste,
    paged_waste,
    percentile,
    poisson_arrivals,
    serve,
    summarize,
)
from course_utils.serving_engine import Engine


def test_poisson_arrivals_come_at_the_asked_rate():
    times = poisson_arrivals(20_000, rate=4.0, generator=torch.Generator().manual_seed(0))
    assert times == sorted(times) and times[0] > 0
    assert times[-1] / len(times) == pytest.approx(0.25, rel=0.03)
    with pytest.raises(ValueError, match="rate"):
        poisson_arrivals(3, rate=0)


def test_caption_requests_ask_for_the_rest_of_their_caption():
    captions = [list(range(start, start + n)) for start, n in ((10, 3), (20, 8), (40, 15))]
    for r in caption_requests(captions, 50, generator=torch.Generator().manual_seed(0), prompt_words=(2, 6)):
        caption = next(c for c in captions if c[:len(r.prompt) - 1] == r.prompt[1:])
        m = len(r.prompt) - 1
        assert r.prompt[0] == 1 and 2 <= m <= 6 and m < len(caption)
        assert r.max_new_tokens == len(caption) - m + 1                 # the rest and its <eos>
    with pytest.raises(ValueError, match="no caption longer"):
        caption_requests([[5, 6]], 3, prompt_words=(2, 4))


def test_a_served_stream_is_stamped_and_summarized():
    torch.manual_seed(0)
    model = GPT(30, 16, 2, 1, 32, max_len=40).eval()
    captions = [list(range(4, 4 + n)) for n in (6, 9, 12)]
    requests = caption_requests(captions, 12, generator=torch.Generator().manual_seed(1))
    arrivals = poisson_arrivals(12, rate=50.0, generator=torch.Generator().manual_seed(2))
    engine = Engine(model, num_blocks=40, block_size=4, max_running=4)
    served = serve(engine, requests, arrivals)
    for r in served:
        assert r.arrival <= r.first_token <= r.finished and len(r.output) == r.max_new_tokens
    figures = summarize(served, engine)
    assert figures["tokens"] == sum(r.max_new_tokens for r in requests) and figures["throughput"] > 0
    assert figures["ttft_p50"] <= figures["ttft_p99"] and figures["tpot_p50"] <= figures["tpot_p99"]
    assert 0 < figures["peak_paged_bytes"] <= figures["peak_contiguous_bytes"]
    assert 0 <= figures["paged_unused"] < figures["contiguous_unused"] < 1


def test_the_waste_fractions():
    assert contiguous_waste([10, 30], 40) == pytest.approx(0.5)
    assert contiguous_waste([10, 30], [20, 40]) == pytest.approx(1 / 3)
    assert paged_waste([10, 16, 17], 16) == pytest.approx(1 - 43 / 64)
    assert paged_waste([8, 16], 8) == 0
    with pytest.raises(ValueError, match="longer than"):
        contiguous_waste([50], 40)
    assert percentile([1, 2, 3, 4], 50) == 2.5
