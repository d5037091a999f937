"""Lesson 12's figure of a run: the GPT's learning curve beside the smoothed bigram's perplexity.

    fig, ax = learning_curve(history, bigram_ppl, title="the GPT's learning curve")

The legend sits to the right of the plot, outside it, so that it never covers a curve or the bigram's line
(which runs across the whole width of the plot, near its top on a log scale: a legend inside the plot hid it).
"""
import matplotlib.pyplot as plt

from ..plotting import plot_learning_curves, window_centres

__all__ = ["learning_curve"]


def learning_curve(history, bigram_ppl, title="the GPT's learning curve", ax=None):
    """The training perplexity (the mean of the last 50 steps, drawn at their centre) and the validation
    perplexity at every evaluation of `history` (a run's {"eval_step", "train_ppl", "val_ppl"}), on a log
    scale, and the bigram's validation perplexity as a dashed line. Returns (fig, ax)."""
    if ax is None:
        fig, ax = plt.subplots(figsize=(8, 3.8), layout="constrained")
    else:
        fig = ax.figure
    plot_learning_curves({"train (mean of 50 steps, at their centre)": (window_centres(history["eval_step"], 50),
                                                                       history["train_ppl"]),
                          "validation": (history["eval_step"], history["val_ppl"])},
                         ylabel="perplexity", title=title, logy=True, ax=ax)
    ax.axhline(bigram_ppl, color="grey", ls="--", label="smoothed bigram (validation)")
    low, high = ax.get_ylim()
    ax.set_ylim(min(low, bigram_ppl / 1.25), max(high, bigram_ppl * 1.25))   # the bigram's line inside, off the edges
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, fontsize=8)
    return fig, ax
