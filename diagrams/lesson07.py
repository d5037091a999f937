"""Lesson 07: self-attention with queries, keys and values; the padding and causal masks."""
import numpy as np

from .style import (
    FS,
    FS_SMALL,
    INK,
    MUTED,
    ROLES,
    WHITE,
    arrow,
    box,
    legend,
    matrix,
    mix,
    new_figure,
    outline,
    text,
    weight_color,
)


def _shape(ax, b, s, dy=0.16):
    text(ax, b.cx, b.y0 - dy, s, fs=FS_SMALL, color=MUTED)


def qkv():
    W, H = 9.0, 5.0
    fig, ax = new_figure(W, H, r"Self-attention: $Z = \mathrm{softmax}(QK^\top / \sqrt{d_k})\,V$")
    q, k, v, out = ROLES["query"], ROLES["key"], ROLES["value"], ROLES["output"]
    words = ["the", "cat", "sat", "down"]
    T, dm, dk = 4, 6, 3
    ys = {"Q": 3.7, "K": 2.45, "V": 1.2}
    cell = 0.18

    # X
    X = matrix(ax, 1.2, ys["K"], T, dm, cell=cell, role="op", fills=WHITE)
    for i, wd in enumerate(words):
        text(ax, X.x0 - 0.08, X.y1 - (i + 0.5) * cell, wd, fs=FS_SMALL, ha="right")
    text(ax, X.cx, X.y1 + 0.17, "$X$", fs=FS + 2)
    _shape(ax, X, r"$(T,\ d_{model})$")
    text(ax, X.cx, X.y1 + 0.5, "one row per word", fs=FS_SMALL, color=MUTED)

    # projections
    xw, xq = 2.55, 3.65
    mats = {}
    for name, r, wname, shape in [("Q", q, "W_Q", r"$(d_{model},\ d_k)$"),
                                  ("K", k, "W_K", r"$(d_{model},\ d_k)$"),
                                  ("V", v, "W_V", r"$(d_{model},\ d_v)$")]:
        y = ys[name]
        role = {"Q": "query", "K": "key", "V": "value"}[name]
        Wm = matrix(ax, xw, y, dm, dk, cell=0.105, role=role, fills=mix(r.fill, WHITE, 0.55))
        text(ax, Wm.x0 - 0.08, Wm.y1 - 0.02, f"${wname}$", fs=FS, ha="right", va="top")
        _shape(ax, Wm, shape)
        if name == "K":
            arrow(ax, X.right, Wm.left)
        else:
            arrow(ax, (X.x1, ys["K"]), (X.x1 + 0.3, ys["K"]), (X.x1 + 0.3, y), Wm.left)
        M = matrix(ax, xq, y, T, dk, cell=cell, role=role)
        arrow(ax, Wm.right, M.left, color=r.edge)
        text(ax, M.x1 + 0.06, M.y1 + 0.02, f"${name}$", fs=FS + 2, ha="left", va="bottom",
             color=r.text)
        _shape(ax, M, r"$(T,\ d_k)$" if name != "V" else r"$(T,\ d_v)$")
        mats[name] = M

    # scores
    rng = np.random.default_rng(7)
    e = rng.normal(0, 1.1, size=(T, T)) + 1.2 * np.eye(T)
    alpha = np.exp(e) / np.exp(e).sum(1, keepdims=True)
    ymid = (ys["Q"] + ys["K"]) / 2
    sc = box(ax, 4.85, ymid, 1.0, 0.52, r"$QK^\top / \sqrt{d_k}$", role="op", fs=FS)
    arrow(ax, mats["Q"].right, (sc.cx, ys["Q"]), sc.top, color=q.edge)
    arrow(ax, mats["K"].right, (sc.cx, ys["K"]), sc.bottom, color=k.edge)
    emin, emax = e.min(), e.max()
    S = matrix(ax, 5.9, ymid, T, T, cell=cell, role="weight",
               fills=[[weight_color(0.55 * (e[i, j] - emin) / (emax - emin)) for j in range(T)]
                      for i in range(T)], edge="#9A9A9A")
    arrow(ax, sc.right, S.left)
    text(ax, S.cx, S.y1 + 0.17, "scores", fs=FS_SMALL)
    _shape(ax, S, r"$(T,\ T)$")
    mk = box(ax, 6.7, ymid, 0.52, 0.36, "mask", role="op", fs=FS_SMALL, ls="--")
    text(ax, mk.cx, mk.y0 - 0.14, "(optional)", fs=FS_SMALL, color=MUTED)
    arrow(ax, S.right, mk.left)
    sm = box(ax, 7.4, ymid, 0.66, 0.36, "softmax", role="op", fs=FS_SMALL)
    arrow(ax, mk.right, sm.left)
    A = matrix(ax, 8.3, ymid, T, T, cell=cell, role="weight",
               fills=[[weight_color(alpha[i, j]) for j in range(T)] for i in range(T)],
               edge="#9A9A9A")
    arrow(ax, sm.right, A.left)
    text(ax, A.cx, A.y1 + 0.17, r"weights $\alpha$", fs=FS_SMALL)
    _shape(ax, A, r"$(T,\ T)$")
    text(ax, A.cx, A.y0 - 0.38, "each row sums to 1", fs=FS_SMALL, color=MUTED)

    # weights times V
    mm = box(ax, 6.2, ys["V"], 0.62, 0.4, r"$\alpha\, V$", role="op", fs=FS)
    arrow(ax, mats["V"].right, mm.left, color=v.edge)
    arrow(ax, (A.cx, A.y0 - 0.52), (A.cx, 1.85), (mm.cx, 1.85), mm.top)
    Z = matrix(ax, 7.4, ys["V"], T, dk, cell=cell, role="output")
    arrow(ax, mm.right, Z.left, color=out.edge)
    text(ax, Z.x1 + 0.08, Z.cy, "$Z$", fs=FS + 2, ha="left", color=out.text)
    _shape(ax, Z, r"$(T,\ d_v)$")
    text(ax, 4.5, 0.3, r"row $t$:   $q_t = x_t W_Q,\ \ k_t = x_t W_K,\ \ v_t = x_t W_V$,   "
         r"$\alpha_{t,j} = \mathrm{softmax}_j(q_t \cdot k_j / \sqrt{d_k})$,   $z_t = \Sigma_j\, \alpha_{t,j}\, v_j$",
         fs=FS_SMALL)
    return fig


def masks():
    W, H = 9.0, 4.5
    fig, ax = new_figure(W, H, "Masks are boolean grids: True = may attend (row = query, column = key)")
    tokens = ["the", "cat", "sat", "⟨pad⟩", "⟨pad⟩"]
    T, n_real = 5, 3
    pad = np.array([[j < n_real for j in range(T)] for i in range(T)])
    causal = np.array([[j <= i for j in range(T)] for i in range(T)])
    both = pad & causal
    cell = 0.36
    allowed, blocked = "#7A7A7A", ROLES["pruned"].fill
    hatch_edge = "#B5B5B5"
    centres = [1.95, 4.8, 7.65]
    yc = 2.05
    grids = [(pad, "padding mask", "True where key j is a real token", "(B, 1, 1, T): hides pad keys"),
             (causal, "causal mask", "True where key j ≤ query t", "(T, T): hides the future"),
             (both, "combined (decoder)", "True where both are True", "(B, 1, T, T)")]
    for g, (m, title, code, shape) in enumerate(grids):
        cx = centres[g]
        fills = [[allowed if m[i, j] else blocked for j in range(T)] for i in range(T)]
        hatch = [[None if m[i, j] else "////" for j in range(T)] for i in range(T)]
        b = matrix(ax, cx, yc, T, T, cell=cell, role="op", fills=fills, hatch=hatch,
                   edge=hatch_edge, lw=0.8)
        outline(ax, b.x0, b.y0, b.w, b.h)
        for j, tk in enumerate(tokens):
            text(ax, b.x0 + (j + 0.5) * cell, b.y1 + 0.07, tk, fs=FS_SMALL, rotation=90,
                 va="bottom", color=MUTED if j >= n_real else INK)
        text(ax, cx, b.y1 + 0.72, title, fs=FS + 1, weight="bold")
        text(ax, cx, b.y0 - 0.2, code, fs=FS_SMALL)
        text(ax, cx, b.y0 - 0.44, shape, fs=FS_SMALL, color=MUTED)
        if g == 0:
            for i, tk in enumerate(tokens):
                text(ax, b.x0 - 0.08, b.y1 - (i + 0.5) * cell, tk, fs=FS_SMALL, ha="right",
                     color=MUTED if i >= n_real else INK)
            text(ax, b.x0 - 0.75, b.cy, "queries", fs=FS, rotation=90, color=MUTED)
            text(ax, b.x0 - 0.05, b.y1 + 0.5, "keys →", fs=FS, color=MUTED, ha="right")
    text(ax, (centres[0] + centres[1]) / 2, yc, "&", fs=FS + 8, weight="bold")
    text(ax, (centres[1] + centres[2]) / 2, yc, "=", fs=FS + 8, weight="bold")
    legend(ax, W / 2, 0.3, [(allowed, "True: may attend"),
                            (("hatch", blocked, hatch_edge, "////"), "False: blocked (score set to $-\\infty$)")],
           ha="center")
    return fig
