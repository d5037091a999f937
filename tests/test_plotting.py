"""Attention heatmaps and learning curves draw, and say clearly what shapes they expect."""
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from course_utils.plotting import plot_learning_curves, show_attention, window_centres  # noqa: E402
from course_utils.training import smooth  # noqa: E402
from tests.figure_check import figure_problems  # noqa: E402


@pytest.mark.parametrize("shape, panels", [((3, 5), 1), ((1, 3, 5), 1), ((2, 3, 5), 2), ((6, 3, 5), 6),
                                           ((2, 4, 3, 5), 8)])
def test_show_attention_grids_pass_the_figure_check(shape, panels):
    fig = show_attention(torch.rand(shape), x_labels=list("abcde"), y_labels=list("xyz"), title="t")
    assert len([ax for ax in fig.axes if ax.images]) == panels
    assert figure_problems(fig) == []
    plt.close(fig)


def test_long_sentences_keep_the_figure_within_a_notebook_width():
    words = [f"w{i}" for i in range(40)]
    fig = show_attention(torch.rand(30, 40), x_labels=words, y_labels=words[:30], title="long")
    assert fig.get_size_inches()[0] <= 9.5 + 1e-6
    labels = fig.axes[0].get_xticklabels()
    assert labels and labels[0].get_fontsize() >= 6
    plt.close(fig)


def test_show_attention_rejects_bad_input():
    with pytest.raises(ValueError, match="x_labels"):
        show_attention(np.random.rand(3, 5), x_labels=list("ab"))
    with pytest.raises(ValueError, match="expects weights of shape"):
        show_attention(np.random.rand(5))


def test_learning_curves():
    ax = plot_learning_curves({"train": [3, 2, 1], "val": ([1, 3], [2.5, 1.5])}, logy=True)
    assert len(ax.lines) == 2
    plt.close(ax.figure)


def test_a_trailing_mean_is_drawn_at_the_centre_of_its_window():
    """On a straight line, the mean of the steps up to s equals the line at the centre of those steps: drawn at
    window_centres, a smoothed curve lies on the raw one (drawn at s it would lag by half its window)."""
    steps = np.arange(1, 301)
    line = 2.0 * steps + 1.0
    for window in (1, 25, 50):
        centres = window_centres(steps, window)
        np.testing.assert_allclose(smooth(line, window), 2.0 * centres + 1.0)
    assert window_centres([200], 50).tolist() == [175.5]      # lesson 12: the mean of steps 151-200


def test_smoothed_curves_sit_at_the_centre_of_their_window():
    """A linear loss smoothed and drawn by `smoothed` lies on the raw line (no lag of half a window)."""
    from course_utils.plotting import smoothed

    values = np.arange(1.0, 201.0)                   # the loss at step s is s
    xs, ys = smoothed(values, window=50)
    np.testing.assert_allclose(ys, xs)
