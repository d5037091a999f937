"""Lesson 14: the induction circuit (a previous-token head and an induction head, K-composition), and attention
rollout as a product of matrices."""
import numpy as np

from .style import (
    ACCENT,
    FS,
    FS_SMALL,
    INK,
    MUTED,
    ROLES,
    arrow,
    box,
    cell_center,
    curved_arrow,
    line,
    matrix,
    new_figure,
    note,
    outline,
    text,
    weight_color,
)

TOKENS = ["C", "A", "B", "D", "…", "C", "A"]      # a repeated segment: … A B … then A again
COL = 1.05                                         # distance between two token columns


def induction_circuit():
    W, H = 9.0, 7.3
    fig, ax = new_figure(W, H, "The induction circuit: two heads in two layers",
                         "the second A looks back for the token that followed the first A, and copies it")
    x0 = 1.3
    xs = [x0 + COL * i for i in range(len(TOKENS))]
    ia, ib, it = 1, 2, len(TOKENS) - 1                # the first A, the B after it, the current token (second A)
    y_tok, y_l0, y_l1, y_out = 1.45, 2.95, 4.75, 6.2
    names = {ia: "t − L", ib: "t − L + 1", it: "t"}
    for i, (x, tok) in enumerate(zip(xs, TOKENS)):
        line(ax, (x, y_tok + 0.25), (x, y_out - 0.3), color="#D5D5D5", lw=2.2, zorder=1)   # residual stream
        box(ax, x, y_tok, 0.5, 0.4, tok, role="op", fs=FS + 1, weight="bold" if i in (ia, ib, it) else "normal")
        text(ax, x, y_tok - 0.36, names.get(i, ""), fs=FS_SMALL, color=MUTED)
    text(ax, xs[0] - 0.55, y_tok, "tokens", fs=FS_SMALL, color=MUTED, ha="right")
    text(ax, xs[0] - 0.55, (y_l0 + y_l1) / 2, "residual\nstream", fs=FS_SMALL, color=MUTED, ha="right")

    # layer 0: the previous-token head, at B, attends to the token before (A) and writes "previous: A" into B
    text(ax, xs[0] - 0.55, y_l0 - 0.25, "layer 0", fs=FS, color=INK, ha="right", weight="bold")
    q0 = box(ax, xs[ib], y_l0 - 0.25, 0.62, 0.3, "query", role="query", fs=FS_SMALL)
    k0 = box(ax, xs[ia], y_l0 - 0.25, 0.62, 0.3, "key", role="key", fs=FS_SMALL)
    curved_arrow(ax, (q0.x0, q0.cy - 0.05), (k0.x1, k0.cy - 0.05), rad=0.5, color=ROLES["query"].edge)
    text(ax, (xs[ia] + xs[ib]) / 2, y_l0 - 0.72, "previous-token head", fs=FS_SMALL, color=ROLES["query"].text)
    wrote = box(ax, xs[ib], y_l0 + 0.55, 0.95, 0.42, "writes:\nprevious = A", role="output", fs=FS_SMALL)
    line(ax, (xs[ib], q0.y1), wrote.bottom, color=ROLES["output"].edge)

    # layer 1: the induction head, at the second A: its query "my token is A" meets B's key "my previous was A"
    text(ax, xs[0] - 0.55, y_l1, "layer 1", fs=FS, color=INK, ha="right", weight="bold")
    k1 = box(ax, xs[ib], y_l1, 0.95, 0.42, "key:\nprevious = A?", role="key", fs=FS_SMALL)
    v1 = box(ax, xs[ib], y_l1 + 0.75, 0.95, 0.34, "value: B", role="value", fs=FS_SMALL)
    q1 = box(ax, xs[it], y_l1, 0.95, 0.42, "query:\nmy token = A", role="query", fs=FS_SMALL)
    arrow(ax, wrote.top, k1.bottom, color=ACCENT, lw=1.8)
    text(ax, xs[ib] - 0.1, (wrote.y1 + k1.y0) / 2, "K-composition: the key\nreads what the head\nbelow wrote",
         fs=FS_SMALL, color=ACCENT, ha="right")
    curved_arrow(ax, (q1.x0, q1.cy - 0.08), (k1.x1, k1.cy - 0.08), rad=-0.22, color=ROLES["query"].edge, lw=1.6)
    text(ax, (xs[ib] + xs[it]) / 2 + 0.6, y_l1 - 0.75, "induction head: query and key match: attend there",
         fs=FS_SMALL, color=ROLES["query"].text)
    line(ax, k1.top, v1.bottom, color=ROLES["value"].edge)
    out = box(ax, xs[it], y_out, 1.2, 0.42, "predict: B", role="output", fs=FS, weight="bold")
    arrow(ax, v1.right, (xs[it] - 0.35, v1.cy), (xs[it] - 0.35, out.y0), color=ROLES["value"].edge, lw=1.5)
    text(ax, xs[it] - 0.45, (v1.cy + out.y0) / 2, "copies B", fs=FS_SMALL, color=ROLES["value"].text, ha="right")
    line(ax, (xs[it], q1.y1), out.bottom, color=ROLES["output"].edge)
    outline(ax, xs[ib] - 0.3, y_tok - 0.24, 0.6, 0.48, color=ACCENT, lw=1.6)
    note(ax, 0.3, 0.45, "On [r, r] (L random tokens, then the same L again) the current token at t occurred at "
         "t − L: the induction head\nattends to t − L + 1, the token after that occurrence. In its attention map: "
         "a stripe L − 1 below the diagonal.", fs=FS_SMALL)
    return fig


def _example_maps(layers=3, T=5, seed=4):
    """Attention maps (mean over heads) of a small ViT-like stack: [CLS] first, then 4 patches."""
    g = np.random.default_rng(seed)
    maps = []
    for _ in range(layers):
        s = g.normal(size=(T, T)) * 1.6
        a = np.exp(s - s.max(1, keepdims=True))
        maps.append(a / a.sum(1, keepdims=True))
    return maps


def rollout():
    W, H = 9.0, 4.6
    fig, ax = new_figure(W, H, "Attention rollout: the layers' matrices, multiplied",
                         r"each layer $\tilde A_l = 0.5\,I + 0.5\,A_l$ ($A_l$: mean over its heads; rows sum to 1); "
                         r"$R = \tilde A_3\,\tilde A_2\,\tilde A_1$")
    T, cell = 5, 0.26
    maps = _example_maps(T=T)
    mixed = [0.5 * np.eye(T) + 0.5 * a for a in maps]
    R = mixed[2] @ mixed[1] @ mixed[0]
    labels = ["CLS", "p1", "p2", "p3", "p4"]

    def draw(cx, m, name, mark=False):
        fills = [[weight_color(v, 0.8) for v in row] for row in m]
        b = matrix(ax, cx, 2.2, T, T, cell=cell, fills=fills, edge="#BDBDBD")
        text(ax, cx, b.y1 + 0.25, name, fs=FS)
        if mark:
            outline(ax, b.x0 - 0.03, b.y1 - cell - 0.03, b.w + 0.06, cell + 0.06, color=ACCENT, lw=1.8)
        return b

    b3 = draw(1.0, mixed[2], r"$\tilde A_3$")
    text(ax, 1.87, 2.2, "·", fs=FS + 10)
    draw(2.75, mixed[1], r"$\tilde A_2$")
    text(ax, 3.62, 2.2, "·", fs=FS + 10)
    b1 = draw(4.5, mixed[0], r"$\tilde A_1$")
    text(ax, 5.37, 2.2, "=", fs=FS + 6)
    bR = draw(6.25, R, r"$R$", mark=True)
    for i, lab in enumerate(labels):
        x, y = cell_center(b3, T, T, i, 0)
        text(ax, b3.x0 - 0.08, y, lab, fs=FS_SMALL - 1, color=MUTED, ha="right")
        x, y = cell_center(bR, T, T, T - 1, i)
        text(ax, x, bR.y0 - 0.14, lab, fs=FS_SMALL - 1, color=MUTED, rotation=90, va="top")
    text(ax, (b3.x0 + b1.x1) / 2, 0.95, "last layer on the left: the input passes layer 1 first", fs=FS_SMALL,
         color=MUTED)
    note(ax, 7.2, 2.2, "R's [CLS] row: how\nmuch of the classifier's\ninput comes from each\npatch, through the\n"
         "whole stack", fs=FS_SMALL)
    arrow(ax, (7.12, bR.y1 - cell / 2), (bR.x1 + 0.05, bR.y1 - cell / 2), color=ACCENT)
    note(ax, 0.3, 0.35, "raw attention reads the last layer's [CLS] row of A_3 alone; rollout follows the residual "
         "connections and every layer below", fs=FS_SMALL)
    return fig
