"""Lesson 01: attention as a soft dictionary lookup (a query against keys, weights, values)."""
import numpy as np

from .style import (
    ACCENT,
    FS,
    FS_SMALL,
    INK,
    MUTED,
    ROLES,
    WEIGHT_BAR,
    arrow,
    bars,
    box,
    line,
    new_figure,
    op_circle,
    text,
)

KEYS = ["cat", "sat", "mat", "on"]          # the dictionary's keys (one per row)
SCORES = np.array([2.1, 0.3, 1.2, -0.6])    # q · k_i for the query "a cat-like word"


def lookup_weights():
    """The weights the picture shows: softmax of its four scores."""
    e = np.exp(SCORES - SCORES.max())
    return e / e.sum()


def lookup():
    W, H = 9.0, 4.9
    fig, ax = new_figure(W, H, "Attention is a soft dictionary lookup",
                         "a dictionary returns the one value whose key equals the query; "
                         "attention returns a blend of all the values")
    q, k, v, out = ROLES["query"], ROLES["key"], ROLES["value"], ROLES["output"]
    alpha = lookup_weights()
    n = len(KEYS)
    top, step = 3.55, 0.62                                   # y of the first row, row spacing
    ys = [top - i * step for i in range(n)]

    # the query, compared with every key
    qb = box(ax, 0.75, (ys[0] + ys[-1]) / 2, 0.9, 0.5, "query $q$", role="query", fs=FS, weight="bold")
    x_key, x_score, x_bar, x_val = 2.55, 3.8, 4.55, 6.75
    for i, y in enumerate(ys):
        kb = box(ax, x_key, y, 0.95, 0.4, f"$k_{i + 1}$  {KEYS[i]}", role="key", fs=FS)
        arrow(ax, (qb.x1, qb.cy), (1.55, qb.cy), (1.55, y), kb.left, color=q.edge, lw=1.1)
        text(ax, x_score, y, f"{SCORES[i]:+.1f}", fs=FS)
        arrow(ax, kb.right, (x_score - 0.3, y), color=MUTED, lw=1.0)
        arrow(ax, (x_score + 0.3, y), (x_bar - 0.06, y), color=MUTED, lw=1.0)
        vb = box(ax, x_val, y, 0.95, 0.4, f"$v_{i + 1}$", role="value", fs=FS)
        op_circle(ax, x_val - 0.8, y, r"$\times$", r=0.12, fs=FS)
        line(ax, (x_val - 0.68, y), (vb.x0, y), color=v.edge, lw=1.0)
    # the weights, a bar per key (the largest in the accent colour)
    colors = [ACCENT if a == alpha.max() else WEIGHT_BAR for a in alpha]
    bars(ax, x_bar, ys[-1] - step / 2, alpha, 1.0, n * step, vmax=1.0, orient="h", gap=0.45, colors=colors)
    for i, y in enumerate(ys):
        text(ax, x_bar + alpha[i] + 0.06, y, f"{alpha[i]:.2f}", fs=FS_SMALL, ha="left")
        arrow(ax, (x_bar + 1.1, y), (x_val - 0.93, y), color=MUTED, lw=0.9)
    text(ax, x_key, top + 0.45, "keys", fs=FS, color=k.text, weight="bold")
    text(ax, x_score, top + 0.45, r"score $q \cdot k_i$", fs=FS)
    text(ax, x_bar + 0.5, top + 0.45, r"weights $\alpha_i$", fs=FS)
    text(ax, x_val, top + 0.45, "values", fs=FS, color=v.text, weight="bold")
    text(ax, x_bar + 0.3, ys[-1] - 0.45, "softmax over the keys: the weights sum to 1",
         fs=FS_SMALL, color=MUTED)

    # the weighted sum
    s = op_circle(ax, 7.85, qb.cy, r"$\Sigma$", r=0.17, fs=FS + 1)
    for y in ys:
        arrow(ax, (x_val + 0.48, y), (7.55, y), (7.55, qb.cy), (7.68, qb.cy), color=v.edge, lw=1.0)
    z = box(ax, 8.55, qb.cy, 0.62, 0.46, "$z$", role="output", fs=FS + 1, weight="bold")
    arrow(ax, (8.02, qb.cy), z.left, color=out.edge)
    text(ax, z.cx, z.y0 - 0.2, "output", fs=FS_SMALL, color=out.text)
    del s

    # the formula and the hard lookup it softens
    text(ax, W / 2, 0.62, r"$z = \Sigma_i\ \alpha_i\, v_i, \qquad \alpha = \mathrm{softmax}(q \cdot k_1, \dots, "
         r"q \cdot k_T)$", fs=FS + 1, color=INK)
    text(ax, W / 2, 0.25, "hard lookup (a dict): weight 1 on the matching key, 0 elsewhere.   "
         r"Bahdanau (lesson 03): query = $s_{t-1}$, keys = values = $h_i$", fs=FS_SMALL, color=MUTED)
    return fig
