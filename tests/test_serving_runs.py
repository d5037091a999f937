"""Lesson 16's measurements (course_utils.serving_runs), at tiny sizes: the waste fractions, the speculation sweep
(greedy: the same tokens as the target alone), the load sweep (every policy serves every request, with the same
greedy tokens), the headline; and the reference file, written with the lesson's full-mode sizes."""
import pytest
import torch

from course_utils.gpt import GPT
from course_utils.reference_runs import reference_run
from course_utils.serving_runs import (
    POLICY_RUNS,
    SIZES,
    cache_waste,
    draft_model,
    headline,
    load_sweep,
    measure_all,
    speculation_sweep,
)


@pytest.fixture(scope="module")
def models():
    torch.manual_seed(0)
    target = GPT(50, 32, 4, 2, 64, max_len=48, num_kv_heads=2).eval()
    return target, {"1 layer": draft_model(target, 1).eval(), "2 layers": draft_model(target, 2).eval()}


def _captions(n=60, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(4, 50, (int(k),), generator=g).tolist() for k in torch.randint(4, 14, (n,), generator=g)]


def test_cache_waste():
    waste = cache_waste([10, 16, 30], 64, block_sizes=(8, 16))
    assert waste["contiguous"] == pytest.approx(1 - 56 / 192)
    assert waste["paged"] == {8: pytest.approx(1 - 56 / 64), 16: pytest.approx(1 - 56 / 64)}


def test_the_speculation_sweep_keeps_the_greedy_tokens(models):
    target, drafts = models
    rows = speculation_sweep(target, drafts, [[1, 5, 6], [1, 9]], (1, 3), 6)
    assert [(r["draft"], r["k"]) for r in rows] == [("1 layer", 1), ("1 layer", 3), ("2 layers", 1), ("2 layers", 3)]
    assert all(r["same_tokens"] and 0 <= r["acceptance"] <= 1 and r["speedup"] > 0 for r in rows)
    assert all(1 <= r["tokens_per_pass"] <= r["k"] + 1 for r in rows)


def test_every_policy_serves_the_stream_with_the_same_tokens(models):
    target, drafts = models
    from course_utils.request_stream import caption_requests
    sizes = dict(SIZES["fast"], stream_requests=10, loads=(1.0, 8.0))
    requests = caption_requests(_captions(), 10, generator=torch.Generator().manual_seed(1))
    stream = load_sweep(target, drafts["1 layer"], requests, sizes["loads"], 50.0, sizes)
    assert list(stream) == [name for name, _, _ in POLICY_RUNS]
    for runs in stream.values():
        assert [r["load"] for r in runs] == [1.0, 8.0]
        assert all(r["requests"] == 10 and r["same_tokens"] == 1 for r in runs)


def test_measure_all_and_its_headline(models):
    target, drafts = models
    sizes = dict(SIZES["fast"], stream_requests=8, capacity_requests=3, spec_prompts=2, spec_tokens=4, ks=(1, 2),
                 k=2, loads=(1.0, 4.0))
    results = measure_all(target, drafts, _captions(), sizes, log=lambda *a: None)
    result = headline(results)
    assert 0 < result["paged_waste_16"] < result["contiguous_waste"] < 1
    assert result["continuous_over_sequential"] == pytest.approx(result["continuous_throughput"]
                                                                 / result["sequential_throughput"])
    assert results["stream_draft"] in drafts


def test_the_reference_file_was_written_with_the_lessons_full_sizes():
    ref = reference_run("lesson16_serving")
    if ref is None:
        pytest.skip("course_utils/reference_runs/lesson16_serving.json is not written yet")
    settings = {k: v for k, v in ref["settings"].items() if k in SIZES["full"]}
    full = {k: list(v) if isinstance(v, tuple) else v for k, v in SIZES["full"].items()}
    assert settings == full, "the lesson's sizes changed since the reference run: run benchmarks/serving.py again"
    assert ref["written_by"].startswith("python benchmarks/serving.py")
    assert set(ref["stream"]) == {name for name, _, _ in POLICY_RUNS}
    assert all(r["same_tokens"] >= 0.95 for runs in ref["stream"].values() for r in runs)
