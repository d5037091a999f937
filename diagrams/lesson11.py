"""Lesson 11: SAGAN's self-attention block, the Vision Transformer and SNAIL's building blocks."""
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
    container,
    line,
    matrix,
    mix,
    new_figure,
    op_circle,
    outline,
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

    specs = [("g", "query", "$g$: 1×1 conv", "$g(x)$ queries", r"$(\bar{C},\ N)$", 2),
             ("f", "key", "$f$: 1×1 conv", "$f(x)$ keys", r"$(\bar{C},\ N)$", 2),
             ("h", "value", "$h$: 1×1 conv", "$h(x)$ values", r"$(\bar{C},\ N)$", 2)]
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
    text(ax, sc.cx, sc.cy + 0.12, r"$g(x)^\top f(x) / \sqrt{\bar{C}}$", fs=FS_SMALL)
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

    # read-out, then the output map v back to C channels
    mm = box(ax, 6.95, ys["h"], 0.5, 0.4, "", role="op")
    text(ax, mm.cx, mm.cy, r"$\Sigma_i$", fs=FS)
    arrow(ax, flat["h"].right, mm.left, color=v.edge)
    arrow(ax, A.bottom, mm.top)
    vb = box(ax, 7.77, ys["h"], 0.88, 0.46, "$v$: 1×1 conv\n" r"$\bar{C} \to C$", role="op", fs=FS_SMALL,
             linespacing=1.1)
    arrow(ax, mm.right, vb.left, color=out.edge)
    gm = op_circle(ax, 8.6, ys["h"], "×γ", r=0.2, fs=FS_SMALL)
    arrow(ax, vb.right, gm.left, color=out.edge)
    text(ax, (vb.x1 + gm.x0) / 2, ys["h"] + 0.16, "$o$", fs=FS, color=out.text)
    text(ax, vb.cx, vb.y0 - 0.16, "$o$: $C \\times H \\times W$", fs=FS_SMALL, color=out.text)
    plus = op_circle(ax, 8.6, ymid + 0.35, "+", r=0.14, fs=FS + 2)
    arrow(ax, gm.top, plus.bottom)
    # residual from x
    yr = 4.55
    arrow(ax, (xb.cx, xb.y1), (xb.cx, yr), (plus.cx, yr), plus.top, lw=1.3)
    text(ax, 4.7, yr + 0.14, "residual: $x$ goes round the block", fs=FS_SMALL, color=MUTED)
    text(ax, plus.x0 - 0.06, plus.cy + 0.22, "$y$", fs=FS + 2, ha="right")

    text(ax, W / 2, 0.62,
         r"$\alpha_{j,i} = \mathrm{softmax}_i\,(g(x_j)^\top f(x_i) / \sqrt{\bar{C}})$,    "
         r"$o_j = v\,(\Sigma_i\, \alpha_{j,i}\, h(x_i))$,    $y = \gamma\, o + x$", fs=FS)
    text(ax, W / 2, 0.3,
         r"$\gamma$: learned, initialised at 0 (the block starts as the identity);   $\bar{C} = C/8$ "
         r"(Zhang et al., ICML 2019; the paper: no $\sqrt{\bar{C}}$)", fs=FS_SMALL, color=MUTED)
    return fig


def _image_with_patches(ax, x0, y0, size, pixels=8, patch=2):
    """An 8×8 image (a rough digit) with its P×P patches outlined and numbered in row-major order."""
    digit = ["..####..", ".#....#.", ".#....#.", "..####..", ".#....#.", ".#....#.", ".#....#.", "..####.."]
    px = size / pixels
    for i in range(pixels):
        for j in range(pixels):
            shade = "#9A9A9A" if digit[i][j] == "#" else WHITE
            rect(ax, x0 + j * px, y0 + (pixels - 1 - i) * px, px, px, shade, edge="#D8D8D8", lw=0.4, zorder=3)
    n = pixels // patch
    for k in range(n + 1):
        line(ax, (x0 + k * patch * px, y0), (x0 + k * patch * px, y0 + size), color=INK, lw=1.0, zorder=5)
        line(ax, (x0, y0 + k * patch * px), (x0 + size, y0 + k * patch * px), color=INK, lw=1.0, zorder=5)
    for r in range(n):
        for c in range(n):
            text(ax, x0 + (c + 0.5) * patch * px, y0 + size - (r + 0.5) * patch * px, str(r * n + c),
                 fs=FS_SMALL, color=ACCENT, weight="bold", zorder=6)
    return Box(x0 + size / 2, y0 + size / 2, size, size)


def vit():
    W, H = 9.0, 5.2
    fig, ax = new_figure(W, H, "The Vision Transformer: an image as a sequence of patches")
    enc, norm = ROLES["encoder"], ROLES["norm"]
    ym = 2.85
    N = 16

    img = _image_with_patches(ax, 0.22, ym - 0.6, 1.2)
    text(ax, img.cx, img.y0 - 0.16, "image $(C, H, W)$", fs=FS_SMALL)
    text(ax, img.cx, img.y0 - 0.4, "$P \\times P$ patches,", fs=FS_SMALL, color=MUTED)
    text(ax, img.cx, img.y0 - 0.62, "numbered row by row", fs=FS_SMALL, color=MUTED)

    # patchify: one column per patch, (P, P, C) inside
    fills = [[WHITE] * N for _ in range(4)]
    Xp = matrix(ax, 3.0, ym, 4, N, cell=0.1, role="op", fills=fills)
    arrow(ax, img.right, Xp.left)
    text(ax, (img.x1 + Xp.x0) / 2, ym + 0.17, "patchify", fs=FS_SMALL)
    text(ax, Xp.cx, Xp.y1 + 0.3, "patches $x_p^1, \\dots, x_p^N$", fs=FS_SMALL)
    text(ax, Xp.cx, Xp.y1 + 0.1, "columns in order 0, 1, ..., 15", fs=FS_SMALL, color=MUTED)
    text(ax, Xp.cx, Xp.y0 - 0.14, "$(P \\cdot P \\cdot C,\\ N)$", fs=FS_SMALL, color=MUTED)
    text(ax, Xp.cx, Xp.y0 - 0.38, "each: $(P, P, C)$ flattened", fs=FS_SMALL, color=MUTED)

    E = box(ax, 4.3, ym, 0.6, 0.44, "$E$", role="op", fs=FS)
    arrow(ax, Xp.right, E.left)
    text(ax, E.cx, E.y0 - 0.14, "linear", fs=FS_SMALL, color=MUTED)
    text(ax, E.cx, E.y0 - 0.36, "= $P \\times P$ conv.,", fs=FS_SMALL, color=MUTED)
    text(ax, E.cx, E.y0 - 0.56, "stride $P$", fs=FS_SMALL, color=MUTED)

    # tokens: [CLS] first, then the N embedded patches; learned positions added
    cls_fill = mix(ACCENT, WHITE, 0.75)
    fills = [[cls_fill] + [enc.fill] * N for _ in range(6)]
    Z = matrix(ax, 5.75, ym, 6, N + 1, cell=0.1, role="encoder", fills=fills)
    arrow(ax, E.right, (Z.x0 + 0.1, ym))
    outline(ax, Z.x0, Z.y0, 0.1, Z.h, color=ACCENT, lw=1.6, zorder=6)
    text(ax, Z.x0 + 0.05, Z.y1 + 0.14, "[CLS]", fs=FS_SMALL, color=ACCENT, weight="bold")
    text(ax, Z.cx + 0.3, Z.y1 + 0.14, "$x_p^n E$", fs=FS_SMALL, color=enc.text)
    P = matrix(ax, 5.75, ym - 0.95, 1, N + 1, cell=0.1, role="norm")
    plus = op_circle(ax, 5.75, ym - 0.55, "+", r=0.12, fs=FS + 1, role="norm")
    arrow(ax, P.top, plus.bottom, color=norm.edge)
    line(ax, plus.top, (5.75, Z.y0), color=norm.edge)
    text(ax, P.cx, P.y0 - 0.16, "learned positions $E_{pos}$", fs=FS_SMALL, color=norm.text)
    text(ax, Z.cx, P.y0 - 0.42, "$z_0$: $(d_{model},\\ N + 1)$", fs=FS_SMALL, color=MUTED)

    # lesson 09's encoder
    cont = container(ax, 6.95, ym - 1.05, 1.75, 2.1, role="encoder")
    text(ax, cont.cx, cont.y1 - 0.22, "encoder", fs=FS, weight="bold", color=enc.text)
    text(ax, cont.cx, cont.y1 - 0.45, "(lesson 09) × $L$", fs=FS_SMALL, color=enc.text)
    box(ax, cont.cx, ym + 0.12, 1.2, 0.42, "multi-head\nself-attention", role="op", fs=FS_SMALL, linespacing=1.05)
    box(ax, cont.cx, ym - 0.5, 1.2, 0.36, "feed-forward", role="op", fs=FS_SMALL)
    text(ax, cont.cx, cont.y0 + 0.2, "pre-norm, then LayerNorm", fs=FS_SMALL, color=MUTED)
    arrow(ax, Z.right, (cont.x0, ym))

    # the head reads [CLS]
    head = box(ax, cont.cx, 4.42, 1.2, 0.38, "head: linear", role="op", fs=FS_SMALL)
    arrow(ax, (cont.cx, cont.y1), head.bottom, color=ACCENT)
    text(ax, cont.cx + 0.08, (cont.y1 + head.y0) / 2, "$z_L^0$ ([CLS] only)", fs=FS_SMALL, color=ACCENT, ha="left")
    text(ax, head.x0 - 0.1, head.cy, "10 logits", fs=FS_SMALL, ha="right")

    text(ax, W / 2, 0.58, r"$z_0 = [\,x_{cls};\ x_p^1 E;\ \dots;\ x_p^N E\,] + E_{pos}$,    "
         r"$z_L = \mathrm{Encoder}(z_0)$,    logits $= z_L^0\, W_{head} + b_{head}$", fs=FS)
    text(ax, W / 2, 0.28, "no convolution but $E$: [CLS] gathers the image through attention over the patches "
         "(Dosovitskiy et al., ICLR 2021)", fs=FS_SMALL, color=MUTED)
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
    panel(ax, 0.12, 0.15, 8.76, 3.12, "TC block: $\\lceil \\log_2 T \\rceil$ dense blocks, dilations 1, 2, 4, ...   "
          "(the paper's pseudocode: 2, 4, 8, ...)")
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
