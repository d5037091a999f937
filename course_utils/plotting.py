"""Pictures the lessons share: attention heatmaps (one map or a grid of heads), learning curves, and the
learning curves of a lesson-10 training run.

A trailing mean (training.smooth, or a run's "mean of the last 50 steps") belongs at the centre of the steps it
averages: `window_centres(steps, window)` gives those x positions (drawn at its last step, a smoothed curve
lags by half its window)."""
import matplotlib.pyplot as plt
import numpy as np

from .tensors import to_numpy


def _heatmap(ax, w, x_labels, y_labels, title, vmax, show_x=True, show_y=True, fontsize=None):
    image = ax.imshow(w, cmap="viridis", vmin=0.0, vmax=vmax, aspect="auto")
    if not show_x:
        ax.set_xticks([])
    elif x_labels is not None:
        ax.set_xticks(range(len(x_labels)), [str(t) for t in x_labels], rotation=90, fontsize=fontsize)
    if not show_y:
        ax.set_yticks([])
    elif y_labels is not None:
        ax.set_yticks(range(len(y_labels)), [str(t) for t in y_labels], fontsize=fontsize)
    if title:
        ax.set_title(title, fontsize=10)
    return image


def show_attention(weights, x_labels=None, y_labels=None, title=None, titles=None,
                   xlabel="keys (attended to)", ylabel="queries", cell_size=0.45, max_cols=4, max_width=9.5):
    """Heatmap of attention weights: rows are queries, columns are keys.

    The figure is sized by the number of keys and queries, at most `max_width` inches wide (a
    notebook shrinks wider pictures, and their labels with them): long sentences get smaller cells
    and tick labels sized to fit them.

    weights: (T_q, T_k) for one map, (num_heads, T_q, T_k) for a row of heads, or
             (num_layers, num_heads, T_q, T_k) for a grid (layers down, heads across).
             NumPy arrays or torch tensors; a leading batch dimension of size 1 is dropped.
    """
    w = to_numpy(weights).astype(np.float64)
    while w.ndim > 2 and w.shape[0] == 1 and w.ndim != 3:
        w = w[0]
    if w.ndim == 3 and w.shape[0] == 1:
        w = w[0]
    if w.ndim not in (2, 3, 4):
        raise ValueError(f"show_attention expects weights of shape (T_q, T_k), (heads, T_q, T_k) or "
                         f"(layers, heads, T_q, T_k); got shape {w.shape}")
    t_q, t_k = w.shape[-2:]
    for labels, size, name in ((x_labels, t_k, "x_labels (keys)"), (y_labels, t_q, "y_labels (queries)")):
        if labels is not None and len(labels) != size:
            raise ValueError(f"{name} has {len(labels)} entries but the weights have {size} along that axis")
    grid = w.reshape((1, 1) + w.shape) if w.ndim == 2 else (w[None] if w.ndim == 3 else w)
    rows, cols = grid.shape[:2]
    min_cell = 0.22                    # inches per query/key: below it, labels cannot be read
    if rows == 1 and cols > 1:         # a row of heads: as many across as fit the width
        across = int(min(max_cols, cols, max(1, (max_width - 1) // (min_cell * max(t_k, 4)))))
        grid = np.concatenate([grid, np.zeros((1, -cols % across, t_q, t_k))], axis=1)
        grid = grid.reshape(-1, across, t_q, t_k)
        rows, cols = grid.shape[:2]
    cell_size = min(cell_size, (max_width - 1.2) / (cols * max(t_k, 4)))
    fontsize = float(np.clip(cell_size * 30, 6, 10))
    scale = max(cell_size * max(t_k, 4), 2.2), max(cell_size * max(t_q, 4), 2.0)
    fig, axes = plt.subplots(rows, cols, figsize=(scale[0] * cols + 1.2, scale[1] * rows + 0.9),
                             squeeze=False, layout="constrained")
    vmax = max(float(grid.max()), 1e-9)
    panels = w.shape[0] if w.ndim == 3 else rows * cols       # a wrapped row of heads ends in empty panels
    for r in range(rows):
        for c in range(cols):
            ax = axes[r, c]
            if r * cols + c >= panels:
                ax.axis("off")
                continue
            if w.ndim == 2:
                name = title
            elif titles is not None:
                name = titles[r * cols + c] if r * cols + c < len(titles) else ""
            else:
                name = f"layer {r + 1}, head {c + 1}" if w.ndim == 4 else f"head {r * cols + c + 1}"
            bottom = (r + 1) * cols + c >= panels                   # no panel below this one
            image = _heatmap(ax, grid[r, c], x_labels, y_labels, name, vmax,
                             show_x=bottom, show_y=c == 0, fontsize=fontsize)
            if bottom:
                ax.set_xlabel(xlabel)
            if c == 0:
                ax.set_ylabel(ylabel)
    if w.ndim != 2 and title:
        fig.suptitle(title)
    fig.colorbar(image, ax=axes, shrink=0.8, label="attention weight")
    return fig


def plot_learning_curves(curves, xlabel="step", ylabel="loss", title=None, logy=False, ax=None):
    """Plot one or more curves: {name: values} or {name: (xs, ys)}; returns the axes."""
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 3.5))
    for name, values in curves.items():
        if isinstance(values, tuple) and len(values) == 2:
            xs, ys = values
        else:
            ys = list(values)
            xs = range(1, len(ys) + 1)
        ax.plot(list(xs), [float(y) for y in ys], label=name, marker="o" if len(ys) < 30 else None)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if logy:
        ax.set_yscale("log")
    if title:
        ax.set_title(title)
    if len(curves) > 1:
        ax.legend()
    ax.grid(alpha=0.3)
    return ax


def window_centres(steps, window):
    """Where to draw trailing means: the mean of the `window` values up to step s (fewer at the start: the
    min(window, s) steps 1..s, as training.smooth) is drawn at the centre of the steps it averages,
    s - (min(window, s) - 1) / 2. steps: 1-based step numbers (a list or an array); returns a float array.

    >>> window_centres([1, 2, 50, 200], 50).tolist()
    [1.0, 1.5, 25.5, 175.5]
    """
    steps = np.asarray(list(steps), dtype=float)
    return steps - (np.minimum(window, steps) - 1) / 2


def smoothed(values, window=50):
    """(x, y) for plot_learning_curves: the trailing mean of the last `window` values (training.smooth), each
    drawn at the centre of the steps it averages (window_centres), so the curve does not lag the raw one."""
    from .training import smooth

    ys = smooth(values, window)
    return window_centres(range(1, len(ys) + 1), window), ys
