"""Lesson 11: SAGAN's self-attention block and SNAIL's building blocks."""
import numpy as np
from matplotlib.patches import Circle

from .style import (
    ACCENT,
    FS,
    FS_SMALL,
    INK,
    MUTED,
    ROLES,
    WHITE,
    Box,
    arrow,
    box,
    line,
    matrix,
    mix,
    new_figure,
    op_circle,
    panel,
    rect,
    text,
    weight_color,
)


def _feature_map(ax, cx, cy, size, role="op", n=3, off=0.09, grid=4, fill=None, edge=None):
    """A C x H x W feature map drawn as n stacked square sheets; returns the front sheet's Box."""
    r = ROLES[role]
    fill = fill or (WHITE if role == "op" else r.fill)
    edge = edge or (INK if role == "op" else r.edge)
    for k in reversed(range(n)):
        x0 = cx - size / 2 + k * off
        y0 = cy - size / 2 + k * off
        rect(ax, x0, y0, size, size, fill, edge=edge, lw=1.0, zorder=3 + (n - k))
    front = (cx - size / 2, cy - size / 2)
    step = size / grid
    for i in range(1, grid):
        line(ax, (front[0] + i * step, front[1]), (front[0] + i * step, front[1] + size),
             color=mix(edge, WHITE, 0.5), lw=0.6, zorder=3 + n + 1)
        line(ax, (front[0], front[1] + i * step), (front[0] + size, front[1] + i * step),
             color=mix(edge, WHITE, 0.5), lw=0.6, zorder=3 + n + 1)
    return Box(cx + (n - 1) * off / 2, cy + (n - 1) * off / 2, size + (n - 1) * off,
               size + (n - 1) * off)


def sagan():
    W, H = 9.0, 5.3
    fig, ax = new_figure(W, H, "SAGAN's self-attention block: every pixel attends to every pixel")
    q, k, v, out = ROLES["query"], ROLES["key"], ROLES["value"], ROLES["output"]
    ys = {"g": 3.75, "f": 2.6, "h": 1.45}
    ymid = ys["f"]

    xb = _feature_map(ax, 0.85, ymid, 0.8)
    text(ax, 0.85, ymid - 0.62, "$x$:  $C \\times H \\times W$", fs=FS_SMALL)
    text(ax, 0.85, ymid - 0.85, "feature map", fs=FS_SMALL, color=MUTED)

    specs = [("g", "query", "$g$: 1×1 conv", "$g(x)$ queries", r"$(d_{key},\ N)$", 2),
             ("f", "key", "$f$: 1×1 conv", "$f(x)$ keys", r"$(d_{key},\ N)$", 2),
             ("h", "value", "$h$: 1×1 conv", "$h(x)$ values", r"$(C,\ N)$", 4)]
    flat = {}
    for name, role, conv, lbl, shape, rows in specs:
        y = ys[name]
        r = ROLES[role]
        b = box(ax, 2.45, y, 1.0, 0.4, conv, role=role, fs=FS_SMALL)
        if name == "f":
            arrow(ax, (xb.x1 + 0.02, ymid), b.left)
        else:
            arrow(ax, (xb.x1 + 0.02, ymid), (1.7, ymid), (1.7, y), b.left)
        m = matrix(ax, 3.95, y, rows, 8, cell=0.12, role=role)
        arrow(ax, b.right, m.left, color=r.edge)
        text(ax, m.cx, m.y1 + 0.14, lbl, fs=FS_SMALL, color=r.text)
        text(ax, m.x1 + 0.06, m.y0 - 0.02, shape, fs=FS_SMALL, color=MUTED, ha="left",
             va="top")
        flat[name] = m
    text(ax, 3.95, 0.98, "flattened over the $N = H \\cdot W$ pixels", fs=FS_SMALL,
         color=MUTED)

    # attention map
    ya = (ys["g"] + ys["f"]) / 2
    sc = box(ax, 5.55, ya, 1.15, 0.62, "", role="op")
    text(ax, sc.cx, sc.cy + 0.12, r"$g(x)^\top f(x) / \sqrt{d_{key}}$", fs=FS_SMALL)
    text(ax, sc.cx, sc.cy - 0.14, "softmax over $i$", fs=FS_SMALL)
    arrow(ax, flat["g"].right, (sc.cx, ys["g"]), sc.top, color=q.edge)
    arrow(ax, flat["f"].right, (sc.cx, ys["f"]), sc.bottom, color=k.edge)
    rng = np.random.default_rng(11)
    a = rng.gamma(0.6, 1.0, size=(8, 8))
    a /= a.sum(1, keepdims=True)
    A = matrix(ax, 6.95, ya, 8, 8, cell=0.1, role="weight",
               fills=[[weight_color(a[i, j], vmax=0.5) for j in range(8)] for i in range(8)],
               edge="#A0A0A0", lw=0.5)
    arrow(ax, sc.right, A.left)
    text(ax, A.cx, A.y1 + 0.28, r"attention map $\alpha$", fs=FS_SMALL)
    text(ax, A.cx, A.y1 + 0.1, r"$(N,\ N)$, row $j$ = query pixel", fs=FS_SMALL, color=MUTED)

    # read-out
    mm = box(ax, 6.95, ys["h"], 0.62, 0.4, "", role="op")
    text(ax, mm.cx, mm.cy, r"$\Sigma_i$", fs=FS)
    arrow(ax, flat["h"].right, mm.left, color=v.edge)
    arrow(ax, A.bottom, mm.top)
    o = _feature_map(ax, 7.75, ys["h"], 0.5, role="output", off=0.06)
    arrow(ax, mm.right, (o.x0, ys["h"]), color=out.edge)
    text(ax, 7.8, ys["h"] - 0.5, "$o$: $C \\times H \\times W$", fs=FS_SMALL, color=out.text)
    gm = op_circle(ax, 8.6, ys["h"], "×γ", r=0.2, fs=FS_SMALL)
    arrow(ax, (o.x1 + 0.02, ys["h"]), gm.left, color=out.edge)
    plus = op_circle(ax, 8.6, ymid + 0.35, "+", r=0.14, fs=FS + 2)
    arrow(ax, gm.top, plus.bottom)
    # residual from x
    yr = 4.55
    arrow(ax, (xb.cx, xb.y1), (xb.cx, yr), (plus.cx, yr), plus.top, lw=1.3)
    text(ax, 4.7, yr + 0.14, "residual: $x$ goes round the block", fs=FS_SMALL, color=MUTED)
    text(ax, plus.x0 - 0.06, plus.cy + 0.22, "$y$", fs=FS + 2, ha="right")

    text(ax, W / 2, 0.62,
         r"$\alpha_{j,i} = \mathrm{softmax}_i\,(g(x_j)^\top f(x_i) / \sqrt{d_{key}})$,    "
         r"$o_j = \Sigma_i\, \alpha_{j,i}\, h(x_i)$,    $y = \gamma\, o + x$", fs=FS)
    text(ax, W / 2, 0.3,
         r"$\gamma$: a learned scalar, initialised at 0, so the block starts as the identity;   "
         r"$d_{key} = C/8$   (the paper: no $\sqrt{d_{key}}$)", fs=FS_SMALL, color=MUTED)
    return fig


def snail():
    W, H = 9.0, 6.7
    fig, ax = new_figure(W, H, "SNAIL: causal temporal convolutions and causal attention, concatenated")
    q, k, v, out = ROLES["query"], ROLES["key"], ROLES["value"], ROLES["output"]
    T = 6
    xcell = 0.11

    # ---------------- (a) dense block ----------------
    px, py, pw, ph = 0.12, 3.45, 4.42, 2.75
    panel(ax, px, py, pw, ph, "Dense block (dilation $d$)")
    ym = 4.72
    X = matrix(ax, 0.62, ym, 3, T, cell=xcell, role="op", fills=WHITE)
    text(ax, X.cx, X.y1 + 0.14, "$x$", fs=FS + 1)
    text(ax, X.cx, X.y0 - 0.14, "$(T, D)$", fs=FS_SMALL, color=MUTED)
    cf = box(ax, 1.72, ym + 0.5, 1.0, 0.4, "causal conv", fs=FS_SMALL)
    cg = box(ax, 1.72, ym - 0.5, 1.0, 0.4, "causal conv", fs=FS_SMALL)
    arrow(ax, X.right, (1.07, ym), (1.07, cf.cy), cf.left)
    arrow(ax, (1.07, ym), (1.07, cg.cy), cg.left)
    th = box(ax, 2.62, cf.cy, 0.55, 0.36, "tanh", fs=FS_SMALL)
    sg = box(ax, 2.62, cg.cy, 0.55, 0.36, r"$\sigma$", fs=FS)
    arrow(ax, cf.right, th.left)
    arrow(ax, cg.right, sg.left)
    dot = op_circle(ax, 3.2, ym, "⊙", r=0.14, fs=FS + 1)
    arrow(ax, th.right, (dot.cx, th.cy), dot.top)
    arrow(ax, sg.right, (dot.cx, sg.cy), dot.bottom)
    fills = [[WHITE] * T] * 3 + [[out.fill] * T] * 2
    C = matrix(ax, 4.05, ym, 5, T, cell=xcell, role="op", fills=fills)
    arrow(ax, dot.right, C.left, color=out.edge)
    yskip = 5.55
    arrow(ax, (X.cx, X.y1 + 0.25), (X.cx, yskip), (C.cx, yskip), C.top)
    text(ax, 2.35, yskip + 0.13, "the input is kept", fs=FS_SMALL, color=MUTED)
    text(ax, C.cx, C.y0 - 0.14, "$(T, D + F)$", fs=FS_SMALL, color=MUTED)
    text(ax, C.cx, C.y0 - 0.36, "concatenate", fs=FS_SMALL, color=INK)
    text(ax, 2.25, 3.7, r"$[\,x_t,\ \tanh(W_f * x)_t \odot \sigma(W_g * x)_t\,]$, kernel 2:"
         "\n" r"$W * x$ mixes $x_t$ and $x_{t-d}$ only (causal)", fs=FS_SMALL, linespacing=1.4)

    # ---------------- (c) attention block ----------------
    px, pw = 4.66, 4.22
    panel(ax, px, py, pw, ph, "Attention block (causal)")
    X2 = matrix(ax, 5.12, ym, 3, T, cell=xcell, role="op", fills=WHITE)
    text(ax, X2.cx, X2.y1 + 0.14, "$x$", fs=FS + 1)
    specs = [(ym + 0.55, "query", "$W_q$"), (ym, "key", "$W_k$"), (ym - 0.55, "value", "$W_v$")]
    pb = {}
    for y, role, lbl in specs:
        b = box(ax, 6.0, y, 0.46, 0.32, lbl, role=role, fs=FS_SMALL)
        if role == "key":
            arrow(ax, X2.right, b.left)
        else:
            arrow(ax, (X2.x1, ym), (5.58, ym), (5.58, y), b.left)
        pb[role] = b
    # causal attention weights
    rng = np.random.default_rng(5)
    a = np.tril(rng.gamma(0.8, 1.0, size=(T, T)) + 0.05)
    a /= a.sum(1, keepdims=True)
    fills = [[weight_color(a[i, j], vmax=0.7) if j <= i else ROLES["pruned"].fill for j in range(T)]
             for i in range(T)]
    hatch = [[None if j <= i else "////" for j in range(T)] for i in range(T)]
    A = matrix(ax, 7.0, ym, T, T, cell=0.09, role="weight", fills=fills, hatch=hatch,
               edge="#A8A8A8", lw=0.5)
    arrow(ax, pb["query"].right, (A.cx, pb["query"].cy), A.top, color=q.edge)
    arrow(ax, pb["key"].right, (A.x0, pb["key"].cy), color=k.edge)
    text(ax, A.x1 + 0.06, A.y1 - 0.02, "softmax,\ncausal\nmask", fs=FS_SMALL, ha="left",
         va="top", color=MUTED, linespacing=1.1)
    rd = box(ax, 7.0, ym - 0.55, 0.46, 0.32, r"$\Sigma_s$", role="op", fs=FS_SMALL)
    arrow(ax, A.bottom, rd.top)
    arrow(ax, pb["value"].right, rd.left, color=v.edge)
    fills = [[WHITE] * T] * 3 + [[out.fill] * T] * 2
    C2 = matrix(ax, 8.3, ym, 5, T, cell=xcell, role="op", fills=fills)
    arrow(ax, rd.right, (7.62, rd.cy), (7.62, C2.y0 + 0.1), (C2.x0, C2.y0 + 0.1), color=out.edge)
    arrow(ax, (X2.cx, X2.y1 + 0.25), (X2.cx, yskip), (C2.cx, yskip), C2.top)
    text(ax, 6.7, yskip + 0.13, "the input is kept", fs=FS_SMALL, color=MUTED)
    text(ax, C2.cx, C2.y0 - 0.14, "concatenate", fs=FS_SMALL)
    text(ax, 6.75, 3.7, r"$\alpha_{t,s} = \mathrm{softmax}_{s \leq t}(q_t^\top k_s / \sqrt{d_{key}})$,"
         "\n" r"out$_t = [\,x_t,\ \Sigma_{s \leq t}\, \alpha_{t,s}\, v_s\,]$", fs=FS_SMALL,
         linespacing=1.5)

    # ---------------- (b) TC block: receptive field ----------------
    panel(ax, 0.12, 0.15, 8.76, 3.12, "TC block: dense blocks with dilations 1, 2, 4 "
           "(up to $2^{n-1}$, $n = \\lceil \\log_2 T \\rceil$)")
    n_t = 8
    xs = [1.75 + 0.78 * t for t in range(n_t)]
    layers = [(0.75, "input", None), (1.38, "$d = 1$", 1), (2.01, "$d = 2$", 2), (2.64, "$d = 4$", 4)]
    # which nodes feed the last output
    need = {3: {n_t - 1}}
    for li in (3, 2, 1):
        d = layers[li][2]
        need[li - 1] = set()
        for t in need[li]:
            need[li - 1] |= {t, t - d} if t - d >= 0 else {t}
    for li in range(1, 4):
        yb, ya = layers[li - 1][0], layers[li][0]
        d = layers[li][2]
        for t in range(n_t):
            for src in (t, t - d):
                if src < 0:
                    continue
                hot = t in need[li] and src in need[li - 1]
                line(ax, (xs[src], yb), (xs[t], ya), color=INK if hot else "#D2D2D2",
                     lw=1.6 if hot else 0.9, zorder=2 if hot else 1)
    for li, (y, lbl, _) in enumerate(layers):
        text(ax, 0.95, y, lbl, fs=FS_SMALL, ha="right")
        for t in range(n_t):
            hot = t in need[li]
            last = li == 3 and t == n_t - 1
            ax.add_patch(Circle((xs[t], y), 0.085, facecolor=ACCENT if last else (INK if hot else WHITE),
                                edgecolor=ACCENT if last else (INK if hot else "#B0B0B0"), lw=1.0,
                                zorder=4))
    for t in range(n_t):
        text(ax, xs[t], 0.5, f"{t + 1}", fs=FS_SMALL, color=MUTED)
    text(ax, 0.95, 0.5, "step", fs=FS_SMALL, color=MUTED, ha="right")
    for li, span in [(1, 2), (2, 4), (3, 8)]:
        text(ax, xs[-1] + 0.3, layers[li][0], f"sees {span} steps", fs=FS_SMALL, ha="left",
             color=INK)
    text(ax, xs[-1] + 0.3, layers[0][0], "(no future step)", fs=FS_SMALL, ha="left", color=MUTED)
    return fig
