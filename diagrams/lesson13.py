"""Lesson 13: tiled (FlashAttention-style) attention — query blocks x key blocks, the running
statistics of one block of queries, and the causal tiles that are never computed."""
from matplotlib.patches import Polygon

from .style import (
    ACCENT,
    FS,
    FS_SMALL,
    INK,
    MUTED,
    ROLES,
    arrow,
    box,
    legend,
    new_figure,
    note,
    outline,
    rect,
    text,
)

N = 6                      # tiles per side in the picture
ROW = 3                    # the block of queries followed on the right (0-based)
FULL_FILL = "#737373"      # a tile computed in full (a dark weight grey)
PART_FILL = "#BDBDBD"      # the visible half of a diagonal tile
HATCH_EDGE = "#B5B5B5"


def tiling():
    W, H = 9.0, 5.3
    fig, ax = new_figure(W, H, "Tiled attention: one tile of scores at a time (causal)")
    q, k, v, out = ROLES["query"], ROLES["key"], ROLES["value"], ROLES["output"]
    skipped = ROLES["pruned"]
    cell = 0.5
    x0, y1 = 1.05, 3.95                  # top-left corner of the tile grid
    # key blocks K_j, V_j along the top, query blocks Q_i down the left
    for j in range(N):
        cx = x0 + (j + 0.5) * cell
        rect(ax, cx - 0.2, y1 + 0.08, 0.18, 0.2, k.fill, edge=k.edge, lw=0.9)
        rect(ax, cx + 0.02, y1 + 0.08, 0.18, 0.2, v.fill, edge=v.edge, lw=0.9)
        text(ax, cx, y1 + 0.42, f"$K_{j + 1}V_{j + 1}$", fs=FS_SMALL, color=k.text)
    for i in range(N):
        cy = y1 - (i + 0.5) * cell
        rect(ax, x0 - 0.3, cy - 0.2, 0.2, 0.4, q.fill, edge=q.edge, lw=0.9)
        text(ax, x0 - 0.36, cy, f"$Q_{i + 1}$", fs=FS_SMALL, ha="right", color=q.text)
    text(ax, x0 + N * cell / 2, y1 + 0.7, "key blocks (block_k keys each) →", fs=FS_SMALL, color=MUTED)
    text(ax, x0 - 0.8, y1 - N * cell / 2, "query blocks (block_q each) →", fs=FS_SMALL, color=MUTED, rotation=-90)
    # the tiles
    for i in range(N):
        for j in range(N):
            tx, ty = x0 + j * cell, y1 - (i + 1) * cell
            if j < i:
                rect(ax, tx, ty, cell, cell, FULL_FILL, edge="#FFFFFF", lw=1.0)
            elif j > i:
                rect(ax, tx, ty, cell, cell, skipped.fill, edge=HATCH_EDGE, hatch="////", lw=0.8)
            else:                                    # diagonal: lower triangle visible, upper masked
                rect(ax, tx, ty, cell, cell, skipped.fill, edge=HATCH_EDGE, hatch="////", lw=0.8)
                ax.add_patch(Polygon([(tx, ty + cell), (tx, ty), (tx + cell, ty)], closed=True,
                                     facecolor=PART_FILL, edgecolor="#FFFFFF", lw=1.0, zorder=4))
    outline(ax, x0, y1 - N * cell, N * cell, N * cell, color=INK, lw=1.0)
    # the followed row of tiles
    ry = y1 - (ROW + 1) * cell
    outline(ax, x0 - 0.04, ry - 0.04, (ROW + 1) * cell + 0.08, cell + 0.08, color=ACCENT, lw=2.0, zorder=7)
    ay = ry + cell / 2
    arrow(ax, (x0 + N * cell + 0.08, ay), (4.72, ay), (4.72, 3.46), (5.02, 3.46), color=ACCENT, lw=1.4)
    text(ax, x0 + N * cell + 0.1, ay - 0.17, "its row of", fs=FS_SMALL, color=ACCENT, ha="left")
    text(ax, x0 + N * cell + 0.1, ay - 0.39, "tiles, in order", fs=FS_SMALL, color=ACCENT, ha="left")
    # right panel: what one block of queries keeps
    px = 5.0
    text(ax, px, 4.35, f"for the queries of $Q_{ROW + 1}$ (block_q rows):", fs=FS, ha="left", weight="bold")
    state = [("$m$", "running max (block_q)"), ("$\\ell$", "normaliser (block_q)"),
             ("acc", "unnormalised output (block_q × $d_v$)")]
    for n, (sym, what) in enumerate(state):
        b = box(ax, px + 0.35, 3.88 - n * 0.42, 0.6, 0.32, sym, role="output", fs=FS)
        text(ax, b.x1 + 0.12, b.cy, what, fs=FS_SMALL, ha="left", color=MUTED)
    text(ax, px, 2.55, "for each key block $j$ (a tile not skipped):", fs=FS, ha="left")
    eqs = ("$S = Q_i K_j^\\top/\\sqrt{d_k}$  (masked on the diagonal)\n"
           "$m_{new} = \\max(m,\\ \\mathrm{rowmax}(S))$\n"
           "$P = e^{S - m_{new}}$\n"
           "$\\ell = \\ell\\, e^{m - m_{new}} + \\mathrm{rowsum}(P)$\n"
           "acc $=$ acc$\\, e^{m - m_{new}} + P\\,V_j$,   $m = m_{new}$")
    note(ax, px + 0.1, 1.65, eqs, fs=FS_SMALL, va="center", linespacing=1.5)
    last = "after the last tile: $O_i = $ acc $/\\ \\ell$,  keep $L_i = m + \\log\\ell$"
    b = box(ax, px + 1.75, 0.55, 3.6, 0.42, last, role="output", fs=FS_SMALL)
    arrow(ax, (px + 1.75, 0.98), b.top, color=out.edge)
    legend(ax, x0 - 0.75, 0.42, [(FULL_FILL, "computed"), (PART_FILL, "masked element-wise"),
                                 (("hatch", skipped.fill, HATCH_EDGE, "////"), "never computed")])
    return fig
