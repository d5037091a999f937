"""Lesson 04: the score functions, and global vs local-p attention."""
import numpy as np
from matplotlib.patches import Arc

from .style import (
    ACCENT,
    FS,
    FS_SMALL,
    INK,
    MUTED,
    ROLES,
    WEIGHT_BAR,
    arrow,
    box,
    brace,
    legend,
    line,
    marker,
    matrix,
    new_figure,
    op_circle,
    panel,
    rect,
    text,
    vector,
)

CELL = 0.14


def _panel_frame(ax, x0, y0, w, h, name, formula, params):
    panel(ax, x0, y0, w, h, name)
    text(ax, x0 + 0.14, y0 + h - 0.52, formula, fs=FS + 1, ha="left")
    text(ax, x0 + 0.14, y0 + 0.2, params, fs=FS_SMALL, ha="left", color=MUTED)


def _inputs(ax, x0, y0, s=True, h=True, h_role="key"):
    """The query s (purple) at the upper left and the key h_i (orange) at the lower left."""
    q, k = ROLES["query"], ROLES[h_role]
    sv = vector(ax, x0 + 0.45, y0 + 1.5, 3, cell=CELL, role="query") if s else None
    hv = vector(ax, x0 + 0.45, y0 + 0.85, 3, cell=CELL, role=h_role)
    text(ax, x0 + 0.28, y0 + 1.5, "$s$", fs=FS + 1, color=q.text, ha="right")
    text(ax, x0 + 0.28, y0 + 0.85, "$h_i$", fs=FS + 1, color=k.text, ha="right")
    return sv, hv


def _score(ax, x, y, label="$e_i$", w=0.42):
    return box(ax, x, y, w, 0.32, label, role="op", fs=FS, edge=INK, lw=1.4)


def score_functions():
    W, H = 9.0, 5.95
    fig, ax = new_figure(W, H, "Six score functions: how well does a key $h_i$ match the query $s$?")
    PW, PH = 2.82, 2.4
    cols = [0.15, 3.09, 6.03]
    rows = [3.0, 0.48]
    q, k = ROLES["query"], ROLES["key"]
    ym = 1.17   # middle of the schematic, relative to the panel

    # 1. dot
    x0, y0 = cols[0], rows[0]
    _panel_frame(ax, x0, y0, PW, PH, "dot (Luong 2015)", r"$e_i = s^\top h_i$", "no parameters")
    sv, hv = _inputs(ax, x0, y0)
    c = op_circle(ax, x0 + 1.35, y0 + ym, "·", fs=FS + 6)
    arrow(ax, sv.right, (c.x0 + 0.02, c.cy + 0.05), color=q.edge)
    arrow(ax, hv.right, (c.x0 + 0.02, c.cy - 0.05), color=k.edge)
    e = _score(ax, x0 + 2.3, y0 + ym)
    arrow(ax, c.right, e.left)
    text(ax, x0 + 1.35, y0 + ym - 0.32, "sum of products", fs=FS_SMALL, color=MUTED)

    # 2. scaled dot
    x0, y0 = cols[1], rows[0]
    _panel_frame(ax, x0, y0, PW, PH, "scaled dot (Vaswani 2017)", r"$e_i = s^\top h_i \,/ \sqrt{d}$",
                 "no parameters; keeps Var$(e_i) \\approx 1$")
    sv, hv = _inputs(ax, x0, y0)
    c = op_circle(ax, x0 + 1.1, y0 + ym, "·", fs=FS + 6)
    arrow(ax, sv.right, (c.x0 + 0.02, c.cy + 0.05), color=q.edge)
    arrow(ax, hv.right, (c.x0 + 0.02, c.cy - 0.05), color=k.edge)
    b = box(ax, x0 + 1.72, y0 + ym, 0.58, 0.34, r"$\div\sqrt{d}$", fs=FS)
    arrow(ax, c.right, b.left)
    e = _score(ax, x0 + 2.45, y0 + ym)
    arrow(ax, b.right, e.left)

    # 3. general
    x0, y0 = cols[2], rows[0]
    _panel_frame(ax, x0, y0, PW, PH, "general (Luong 2015)", r"$e_i = s^\top W_a\, h_i$",
                 "parameters: $W_a$")
    sv, hv = _inputs(ax, x0, y0)
    m = matrix(ax, x0 + 1.0, y0 + 0.85, 3, 3, cell=0.12, role="op")
    text(ax, m.cx, m.y0 - 0.13, "$W_a$", fs=FS)
    arrow(ax, hv.right, m.left, color=k.edge)
    c = op_circle(ax, x0 + 1.6, y0 + ym, "·", fs=FS + 6)
    arrow(ax, sv.right, (c.x0 + 0.02, c.cy + 0.05), color=q.edge)
    arrow(ax, m.right, (c.x0 + 0.02, c.cy - 0.05), color=k.edge)
    e = _score(ax, x0 + 2.35, y0 + ym)
    arrow(ax, c.right, e.left)

    # 4. additive
    x0, y0 = cols[0], rows[1]
    _panel_frame(ax, x0, y0, PW, PH, "additive (Bahdanau 2015)",
                 r"$e_i = v_a^\top \tanh(W_a s + U_a h_i)$", "parameters: $W_a, U_a, v_a$")
    sv, hv = _inputs(ax, x0, y0)
    bw = box(ax, x0 + 0.92, sv.cy, 0.4, 0.3, "$W_a$", fs=FS_SMALL)
    bu = box(ax, x0 + 0.92, hv.cy, 0.4, 0.3, "$U_a$", fs=FS_SMALL)
    arrow(ax, sv.right, bw.left, color=q.edge)
    arrow(ax, hv.right, bu.left, color=k.edge)
    c = op_circle(ax, x0 + 1.38, y0 + ym, "+", fs=FS + 1, r=0.12)
    arrow(ax, bw.right, (c.x0 + 0.02, c.cy + 0.05), color=q.edge)
    arrow(ax, bu.right, (c.x0 + 0.02, c.cy - 0.05), color=k.edge)
    bt = box(ax, x0 + 1.83, y0 + ym, 0.46, 0.3, "tanh", fs=FS_SMALL)
    arrow(ax, c.right, bt.left)
    bv = box(ax, x0 + 2.28, y0 + ym, 0.3, 0.3, r"$v_a^\top$", fs=FS_SMALL)
    arrow(ax, bt.right, bv.left)
    e = _score(ax, x0 + 2.28, y0 + ym - 0.55, w=0.38)
    arrow(ax, bv.bottom, e.top)

    # 5. cosine
    x0, y0 = cols[1], rows[1]
    _panel_frame(ax, x0, y0, PW, PH, "cosine (Graves 2014)", r"$e_i = \beta \cos(s, h_i)$",
                 r"parameter: the key strength $\beta$")
    o = (x0 + 0.3, y0 + 0.55)
    ps, ph = (x0 + 0.85, y0 + 1.65), (x0 + 1.35, y0 + 0.95)
    arrow(ax, o, ps, color=q.edge, lw=1.8)
    arrow(ax, o, ph, color=k.edge, lw=1.8)
    text(ax, ps[0] + 0.08, ps[1] - 0.02, "$s$", fs=FS + 1, color=q.text, ha="left")
    text(ax, ph[0] + 0.04, ph[1] + 0.12, "$h_i$", fs=FS + 1, color=k.text, ha="left")
    a1 = np.degrees(np.arctan2(ph[1] - o[1], ph[0] - o[0]))
    a2 = np.degrees(np.arctan2(ps[1] - o[1], ps[0] - o[0]))
    ax.add_patch(Arc(o, 0.7, 0.7, theta1=a1, theta2=a2, color=INK, lw=1.0, zorder=3))
    am = np.radians((a1 + a2) / 2)
    text(ax, o[0] + 0.47 * np.cos(am), o[1] + 0.47 * np.sin(am), r"$\theta$", fs=FS)
    b = box(ax, x0 + 1.88, y0 + ym + 0.2, 0.66, 0.34, r"$\beta\cos\theta$", fs=FS)
    e = _score(ax, x0 + 2.5, y0 + ym + 0.2, w=0.36)
    arrow(ax, b.right, e.left)
    text(ax, x0 + 2.1, y0 + 0.68, "only the angle counts,\nnot the lengths", fs=FS_SMALL,
         color=MUTED, linespacing=1.2, ha="center")

    # 6. location
    x0, y0 = cols[2], rows[1]
    _panel_frame(ax, x0, y0, PW, PH, "location (Luong 2015)", r"$e_i = (W_a\, s)_i$",
                 "parameters: $W_a$, one row per position")
    sv, hv = _inputs(ax, x0, y0, h_role="pruned")
    text(ax, hv.right[0] + 0.1, hv.cy, "not used", fs=FS_SMALL, color=MUTED, ha="left")
    m = matrix(ax, x0 + 1.3, y0 + ym + 0.22, 5, 3, cell=0.11, role="op")
    text(ax, m.cx, m.y0 - 0.13, "$W_a$", fs=FS)
    arrow(ax, sv.right, (m.x0, sv.cy), color=q.edge)
    ev = matrix(ax, x0 + 2.05, m.cy, 5, 1, cell=0.11, role="op", edge=INK)
    arrow(ax, m.right, ev.left)
    text(ax, ev.x1 + 0.08, ev.y1 - 0.06, "$e_1$", fs=FS_SMALL, ha="left")
    text(ax, ev.x1 + 0.08, ev.y0 + 0.06, "$e_T$", fs=FS_SMALL, ha="left")
    text(ax, x0 + 1.95, y0 + 0.62, "where to look,\nfrom $s$ alone", fs=FS_SMALL, color=MUTED,
         linespacing=1.2)

    legend(ax, W / 2, 0.22, [("query", "query side: decoder state $s$"),
                             ("key", "key side: encoder state $h_i$"),
                             ("op", "learned parameters"),
                             ("pruned", "not used")], ha="center")
    return fig


def global_local():
    W, H = 9.0, 5.6
    fig, ax = new_figure(W, H, "Global attention vs local-p attention (Luong et al. 2015)")
    S, D = 12, 2
    sigma = D / 2
    p_t = 6.4
    e = np.array([0.2, -0.5, 0.1, 0.6, 1.2, 2.0, 1.6, 0.4, -0.3, 0.0, 0.5, -0.2])
    pos = np.arange(1, S + 1)
    glob = np.exp(e) / np.exp(e).sum()
    win = np.abs(pos - p_t) <= D
    ew = np.where(win, np.exp(e), 0.0)
    gauss = np.exp(-(pos - p_t) ** 2 / (2 * sigma ** 2))
    local = ew / ew.sum() * gauss
    k, q = ROLES["key"], ROLES["query"]
    pr = ROLES["pruned"]

    x0, step = 1.75, 0.44                      # position i sits at x0 + (i - 1) * step
    xs = x0 + (pos - 1) * step
    bar_w = 0.28
    hmax = 1.25
    vmax = max(glob.max(), local.max())

    def src_row(y, active):
        for i, x in zip(pos, xs):
            role = "key" if active[i - 1] else "pruned"
            box(ax, x, y, 0.38, 0.28, f"$h_{{{i}}}$", role=role, fs=FS_SMALL, rounding=0.04)

    def panel_bars(ybase, w, active):
        for i, x in zip(pos, xs):
            if active[i - 1]:
                rect(ax, x - bar_w / 2, ybase, bar_w, hmax * w[i - 1] / vmax, WEIGHT_BAR)
            else:
                text(ax, x, ybase + 0.1, "0", fs=FS_SMALL, color=pr.text)
        line(ax, (xs[0] - 0.3, ybase), (xs[-1] + 0.3, ybase), color=MUTED, lw=0.9)

    # --- global ---------------------------------------------------------------------------------
    yb1 = 3.55
    text(ax, 0.18, 4.95, "global", fs=FS + 1, weight="bold", ha="left")
    text(ax, 0.18, 4.7, "a weight for every\nsource position:\ncost $O(S)$ per step", fs=FS_SMALL,
         ha="left", va="top", color=MUTED, linespacing=1.3)
    panel_bars(yb1, glob, np.ones(S, bool))
    src_row(yb1 - 0.25, np.ones(S, bool))
    text(ax, xs[-1] + 0.35, yb1 + 0.5, r"$\alpha_{t,i} = \mathrm{softmax}_i(e_{t,i})$"
         "\nover all $i$", fs=FS_SMALL, ha="left", linespacing=1.3)

    # --- local-p --------------------------------------------------------------------------------
    yb2 = 0.95
    text(ax, 0.18, 2.75, "local-p", fs=FS + 1, weight="bold", ha="left")
    text(ax, 0.18, 2.5, "predict a centre $p_t$,\nattend to the window\n$[p_t - D,\\ p_t + D]$ only",
         fs=FS_SMALL, ha="left", va="top", color=MUTED, linespacing=1.3)
    # window shading
    xl, xr = x0 + (p_t - D - 1) * step, x0 + (p_t + D - 1) * step
    rect(ax, xl, yb2 - 0.45, xr - xl, hmax + 0.75, "#FFF6E9", edge=k.edge, lw=0.9, zorder=1, ls="--")
    # Gaussian
    xx = np.linspace(xs[0] - 0.25, xs[-1] + 0.25, 300)
    ii = (xx - x0) / step + 1
    gg = np.exp(-(ii - p_t) ** 2 / (2 * sigma ** 2))
    ax.plot(xx, yb2 + hmax * gg * 0.95, color=ACCENT, lw=1.4, ls="--", zorder=4)
    panel_bars(yb2, local, win)
    src_row(yb2 - 0.25, win)
    xp = x0 + (p_t - 1) * step
    marker(ax, xp, yb2 - 0.43)
    text(ax, xp + 0.14, yb2 - 0.52, f"$p_t = {p_t}$", fs=FS, color=ACCENT, ha="left")
    brace(ax, (xr, yb2 + hmax + 0.35), (xl, yb2 + hmax + 0.35), depth=0.1, color=k.edge,
          label=f"window $[p_t - D,\\ p_t + D]$, $D = {D}$", label_color=k.text)
    text(ax, xs[-1] + 0.35, yb2 + 0.75,
         r"$\alpha_{t,i} = \mathrm{softmax}_{i \in \mathrm{window}}(e_{t,i})$" "\n"
         r"$\qquad \times\ \exp(-(i - p_t)^2 / 2\sigma^2)$" "\n" r"$\sigma = D/2$",
         fs=FS_SMALL, ha="left", linespacing=1.6)
    text(ax, xs[-1] + 0.35, yb2 - 0.28,
         r"$p_t = S \cdot \mathrm{sigmoid}(v_p^\top \tanh(W_p\, s_t))$" "\n" "a real number in $[0, S]$",
         fs=FS_SMALL, ha="left", linespacing=1.5, color=q.text)
    legend(ax, W / 2, 0.18, [(WEIGHT_BAR, "weight $\\alpha_{t,i}$"),
                             (("line", ACCENT, "--", 1.4), "Gaussian centred on $p_t$"),
                             ("pruned", "outside the window: weight 0, not scored")],
           ha="center")
    return fig
