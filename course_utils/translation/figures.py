"""Lesson 10's figures of a run: its learning curves (next to the reference run's), the padding of a
batch, and the trained model's cross-attention kept in a reference file.

    plot_history(history, reference=None, path=None)   # three panels; `reference` another run's history
    show_padding({"bucketed": batch.src}, pad_id)      # padding masks of batches, as pictures
    show_reference_attention(reference_run("cpu"))     # the cpu run's cross-attention for two sentences

The sizes and fonts are those of the lessons' other figures (10 inches wide, matplotlib's default fonts).
"""
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.ticker import MaxNLocator

from ..plotting import show_attention


def plot_history(history, reference=None, path=None, label="this run", reference_label="reference run",
                 title=None):
    """Training loss per step, loss per epoch (train, validation) and validation BLEU per epoch.

    `history`: a run's history.json (dict); `reference`: another run's (e.g. reference_run("cpu")["history"])
    drawn beside it, dashed. With `path` the figure is saved there and closed."""
    fig, axes = plt.subplots(1, 3, figsize=(10, 3.2), constrained_layout=True)
    runs = [(history, label, "-")] + ([(reference, reference_label, "--")] if reference is not None else [])
    for run, name, style in runs:
        axes[0].plot(run["step"], run["step_loss"], style, label=name)
        axes[1].plot(run["epoch"], run["train_loss"], style, marker=".", label=f"train ({name})")
        axes[1].plot(run["epoch"], run["val_loss"], style, marker=".", label=f"validation ({name})")
        axes[2].plot(run["epoch"], run["val_bleu"], style, marker=".", label=name)
    for ax, name, xlabel, ylabel in ((axes[0], "training loss", "optimizer step", "label-smoothed loss"),
                                     (axes[1], "loss per epoch", "epoch", "label-smoothed loss"),
                                     (axes[2], "validation BLEU (greedy)", "epoch", "BLEU")):
        ax.set_title(name)
        if xlabel == "epoch":
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    if title:
        fig.suptitle(title)
    if path is not None:
        fig.savefig(path, dpi=100)
        plt.close(fig)
    return fig


def show_padding(batches, pad_id=0):
    """The padding masks `src != pad_id` of batches {name: src (B, S)} as pictures, one above the other, on
    one scale of positions: real tokens dark, padding light."""
    masks = {name: (np.asarray(src) != pad_id).astype(float) for name, src in batches.items()}
    width = max(m.shape[1] for m in masks.values())
    heights = [m.shape[0] for m in masks.values()]
    fig, axes = plt.subplots(len(masks), 1, figsize=(10, 0.9 + 0.25 * sum(heights) + 0.5 * len(masks)),
                             gridspec_kw={"height_ratios": heights}, squeeze=False, constrained_layout=True)
    cmap = plt.get_cmap("Greys").copy()
    cmap.set_bad("#FFF3C4")                                            # outside the batch: not computed at all
    for ax, (name, mask) in zip(axes[:, 0], masks.items()):
        padded = np.full((mask.shape[0], width), np.nan)
        padded[:, :mask.shape[1]] = mask
        image = ax.imshow(np.ma.masked_invalid(padded), cmap=cmap, vmin=0, vmax=1, aspect="auto",
                          interpolation="nearest")
        ax.axvline(mask.shape[1] - 0.5, color="tab:red", lw=1)            # where this batch's rectangle ends
        ax.set_title(f"{name}: {mask.shape[0]} x {mask.shape[1]} positions, {1 - mask.mean():.0%} padding")
        ax.set_ylabel("sentence")
        ax.set_yticks(range(mask.shape[0]))
    axes[-1, 0].set_xlabel("source position (red line: the end of the batch's rectangle; yellow: outside it)")
    bar = fig.colorbar(image, ax=axes[:, 0], ticks=[0, 1], fraction=0.03)
    bar.ax.set_yticklabels(["padding", "real token"])
    return fig


def show_reference_attention(reference, head_average=False):
    """The trained model's cross-attention (last decoder layer) stored in a reference run, one figure
    per sentence: every head (a head's alignment is sharper than the heads' average), or their average."""
    figures = []
    for item in reference["attention"]:
        weights = np.asarray(item["weights"])                            # (heads, T, S)
        shown = weights.mean(0) if head_average else weights
        what = "mean of the heads" if head_average else "every head"
        figures.append(show_attention(shown, x_labels=item["src_pieces"], y_labels=item["out_pieces"],
                                      title=f"trained {reference['report']['preset']} model, last decoder "
                                            f"layer ({what})\n{item['source']} → {item['translation']}",
                                      xlabel="German (keys)", ylabel="English (queries)"))
    return figures
