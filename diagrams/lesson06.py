"""Lesson 06: the pointer network, sorting four numbers."""
import numpy as np

from .style import (
    ACCENT,
    FS,
    FS_SMALL,
    MUTED,
    ROLES,
    WEIGHT_BAR,
    arrow,
    box,
    curved_arrow,
    legend,
    line,
    new_figure,
    rect,
    text,
)


def pointer_network():
    W, H = 9.0, 5.3
    fig, ax = new_figure(W, H, "Pointer network: the attention weights over the inputs are the output")
    enc, dec, pr = ROLES["encoder"], ROLES["decoder"], ROLES["pruned"]
    x = [0.7, 0.2, 0.9, 0.4]
    order = list(np.argsort(x))                     # 1, 3, 0, 2 (0-based) -> 2, 4, 1, 3
    weights = [[0.07, 0.81, 0.02, 0.10],
               [0.12, None, 0.03, 0.85],
               [0.93, None, 0.07, None],
               [None, None, 1.00, None]]            # None = masked (already chosen)
    cy, cw, ch = 1.55, 0.62, 0.46
    xe = [0.75, 1.65, 2.55, 3.45]
    xd = [4.85, 5.85, 6.85, 7.85]
    y_in = 0.85

    ecells = []
    for j, xx in enumerate(xe):
        c = box(ax, xx, cy, cw, ch, f"$h_{j + 1}$", role="encoder", fs=FS + 1)
        ecells.append(c)
        b = box(ax, xx, y_in, 0.62, 0.32, f"{x[j]}", role="op", fs=FS)
        arrow(ax, b.top, c.bottom)
        text(ax, xx, y_in - 0.3, f"$j = {j + 1}$", fs=FS_SMALL, color=MUTED)
    for j in range(3):
        arrow(ax, ecells[j].right, ecells[j + 1].left, head="both", color=enc.edge, lw=1.1)
    text(ax, (xe[0] + xe[-1]) / 2, y_in - 0.58, "Encoder (bidirectional LSTM) over the inputs",
         fs=FS_SMALL, color=enc.text, weight="bold")

    dcells = []
    dec_in = ["⟨go⟩"] + [f"{x[order[i]]}" for i in range(3)]
    for i, xx in enumerate(xd):
        c = box(ax, xx, cy, cw, ch, f"$s_{i + 1}$", role="decoder", fs=FS + 1)
        dcells.append(c)
        b = box(ax, xx, y_in, 0.62, 0.32, dec_in[i], role="op", fs=FS if i else FS_SMALL)
        arrow(ax, b.top, c.bottom)
    for i in range(3):
        arrow(ax, dcells[i].right, dcells[i + 1].left, color=dec.edge, lw=1.1)
    arrow(ax, ecells[-1].right, dcells[0].left, color=enc.edge, lw=1.1)
    text(ax, (xd[0] + xd[-1]) / 2, y_in - 0.3,
         "input: the number pointed at in the previous step", fs=FS_SMALL, color=MUTED)
    text(ax, (xd[0] + xd[-1]) / 2, y_in - 0.58, "Decoder (LSTM), one step per output",
         fs=FS_SMALL, color=dec.text, weight="bold")

    # the pointer distributions above every decoder step, and the pointers back to the inputs
    y0, bw_tot, bh = 2.35, 0.78, 0.62
    for i, xx in enumerate(xd):
        arrow(ax, dcells[i].top, (xx, y0 - 0.2), color=dec.edge, lw=1.1)
        x0 = xx - bw_tot / 2
        step = bw_tot / 4
        for j, wgt in enumerate(weights[i]):
            xc = x0 + (j + 0.5) * step
            if wgt is None:
                rect(ax, xc - step * 0.35, y0, step * 0.7, 0.1, pr.fill, edge=pr.edge,
                     hatch="////", lw=0.6)
            else:
                col = ACCENT if j == order[i] else WEIGHT_BAR
                rect(ax, xc - step * 0.35, y0, step * 0.7, bh * wgt, col, lw=0.5)
            chosen = j == order[i]
            text(ax, xc, y0 - 0.1, f"{j + 1}", fs=FS_SMALL, color=ACCENT if chosen else MUTED,
                 weight="bold" if chosen else "normal")
        line(ax, (x0 - 0.03, y0), (x0 + bw_tot + 0.03, y0), color=MUTED, lw=0.9)
        jc = order[i]
        xb = x0 + (jc + 0.5) * step
        top = (xb, y0 + bh + 0.12)
        line(ax, (xb, y0 + bh * weights[i][jc]), top, color=ACCENT, lw=1.4)
        curved_arrow(ax, top, (xe[jc] + 0.08 * (i - 1.5), ecells[jc].y1 + 0.02), rad=0.42,
                     color=ACCENT, lw=1.4)
        text(ax, xx - 0.08, (dcells[i].y1 + y0 - 0.2) / 2, f"step {i + 1}", fs=FS_SMALL,
             color=dec.text, ha="right")

    text(ax, 0.2, 4.62,
         r"$p(y_i = j \mid y_{<i}, x) = \alpha_{i,j} = \mathrm{softmax}_j\,(v^\top \tanh(W_h h_j + W_s s_i))$"
         ", over the positions not chosen yet", fs=FS, ha="left")
    text(ax, 0.2, 4.3, "output: positions 2, 4, 1, 3  →  0.2, 0.4, 0.7, 0.9 (sorted)", fs=FS,
         ha="left", weight="bold")
    legend(ax, 8.85, 4.3, [(ACCENT, "chosen"), (WEIGHT_BAR, "weight"),
                           (("hatch", pr.fill, pr.edge, "////"), "masked")], ha="right")
    return fig
