"""Lesson 16's pictures (course_utils.serving_figures) draw what they say, with titles, axis labels and a colorbar
or values where a heatmap needs one (tests/figure_check.py); the widget steps through a stream."""
import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402

from course_utils import serving_figures as figures  # noqa: E402
from course_utils.gpt import GPT  # noqa: E402
from course_utils.serving_engine import Engine, Request  # noqa: E402
from tests.figure_check import figure_problems  # noqa: E402


def _trace():
    torch.manual_seed(0)
    model = GPT(30, 16, 2, 1, 32, max_len=40).eval()
    engine = Engine(model, num_blocks=6, block_size=4, max_running=3, trace=True)
    for i in range(5):
        engine.add(Request(i, [1, 5 + i, 7], 8))
    while engine.busy:
        engine.step()
    return engine


def test_the_pool_and_the_trace():
    engine = _trace()
    assert engine.preemptions > 0
    fig, axes = plt.subplots(1, 2)
    figures.draw_trace(axes[0], engine.trace, 4)
    step = engine.trace[3]
    figures.draw_pool(axes[1], step["tables"], 6, 4, step["lengths"])
    assert not figure_problems(fig)
    plt.close("all")


def test_the_widget_steps_through_the_trace():
    engine = _trace()
    box = figures.scheduler_widget(engine.trace, 6, 4)
    slider = box.children[0]
    assert slider.max == len(engine.trace)
    slider.value = slider.max                                   # redraws without error
    plt.close("all")


def test_the_sweeps_plots():
    rows = [dict(draft=d, k=k, acceptance=0.5, speedup=1.2) for d in ("a", "b") for k in (1, 2)]
    assert not figure_problems(figures.plot_speculation(rows, "x"))
    run = dict(load=1.0, ttft_p50=0.1, ttft_p99=0.2, tpot_p50=0.01, tpot_p99=0.02, throughput=100.0)
    stream = {name: [dict(run), dict(run, load=2.0)] for name in figures.POLICY_STYLE}
    assert not figure_problems(figures.plot_load(stream, "x"))
    plt.close("all")
