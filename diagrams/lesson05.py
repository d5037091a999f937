"""Lesson 05: the Neural Turing Machine and its four addressing stages."""
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
    dot,
    line,
    matrix,
    mix,
    new_figure,
    outline,
    text,
    vector,
    weight_color,
)


def ntm():
    W, H = 9.0, 5.4
    fig, ax = new_figure(W, H, "The Neural Turing Machine: a controller with a memory it reads and writes")
    mem, out = ROLES["memory"], ROLES["output"]
    N, M, cell = 8, 6, 0.26
    gx, gy = 6.3, 2.65                                   # memory grid centre
    rng = np.random.default_rng(3)
    shades = rng.choice([0.0, 0.22, 0.45], size=(N, M))
    fills = [[mix(mem.fill, mem.edge, shades[i, j]) for j in range(M)] for i in range(N)]
    g = matrix(ax, gx, gy, N, M, cell=cell, role="memory", fills=fills, lw=0.8)
    row_y = [g.y1 - (i + 0.5) * cell for i in range(N)]

    w_read = np.array([0.0, 0.03, 0.12, 0.75, 0.08, 0.02, 0.0, 0.0])
    w_write = np.array([0.0, 0.0, 0.0, 0.02, 0.06, 0.85, 0.07, 0.0])
    xr, xw = 5.05, 4.65
    vector(ax, xw, gy, N, cell=cell, role="weight", fills=[weight_color(a) for a in w_write])
    vector(ax, xr, gy, N, cell=cell, role="weight", fills=[weight_color(a) for a in w_read])
    for i, y in enumerate(row_y):
        text(ax, g.x1 + 0.1, y, f"{i}", fs=FS_SMALL, color=MUTED, ha="left")

    # controller, and the output layer that reads [h_t, r_t]
    c = box(ax, 1.5, 2.65, 1.2, 1.2, "controller\n(LSTM)", role="op", fs=FS + 1, weight="bold")
    xin = box(ax, 0.38, 2.65, 0.44, 0.34, "$x_t$", fs=FS + 1)
    arrow(ax, xin.right, c.left)
    o = box(ax, 1.22, 3.82, 1.0, 0.36, "output layer", role="op", fs=FS_SMALL)
    arrow(ax, (o.cx, c.y1), o.bottom)
    text(ax, o.cx - 0.06, (c.y1 + o.y0) / 2, "$h_t$", fs=FS_SMALL, ha="right")
    yout = box(ax, 0.3, 3.82, 0.36, 0.34, "$y_t$", fs=FS + 1)
    arrow(ax, o.left, yout.right)

    # heads
    rh = box(ax, 3.42, 3.95, 1.6, 0.62, "", role="op")
    text(ax, rh.cx, rh.cy + 0.12, "read head", fs=FS, weight="bold")
    text(ax, rh.cx, rh.cy - 0.14, r"$k_t, \beta_t, g_t, s_t, \gamma_t$", fs=FS_SMALL)
    wh = box(ax, 3.42, 1.35, 1.6, 0.62, "", role="op")
    text(ax, wh.cx, wh.cy + 0.12, "write head", fs=FS, weight="bold")
    text(ax, wh.cx, wh.cy - 0.14, r"$k_t, \beta_t, g_t, s_t, \gamma_t,\ e_t, a_t$", fs=FS_SMALL)
    arrow(ax, (c.x1, 3.0), (2.35, 3.0), (2.35, rh.cy), rh.left)
    arrow(ax, (c.x1, 2.3), (2.35, 2.3), (2.35, wh.cy), wh.left)
    # head -> weighting over the rows
    arrow(ax, rh.right, (xr, rh.cy), (xr, g.y1))
    text(ax, xr + 0.08, rh.cy + 0.14, "$w^r_t$", fs=FS + 1, ha="left")
    arrow(ax, wh.right, (xw, wh.cy), (xw, g.y0))
    text(ax, xw - 0.08, g.y0 - 0.16, "$w^w_t$", fs=FS + 1, ha="right")

    # read: r_t above the grid, back to the controller
    r = vector(ax, gx, 4.55, M, cell=cell, role="output", orient="h")
    arrow(ax, g.top, r.bottom, color=out.edge, lw=1.5)
    xr_in = 1.85                                          # r_t: to the output layer now ...
    arrow(ax, r.left, (o.cx, r.cy), o.top, color=out.edge)
    arrow(ax, (xr_in, r.cy), (xr_in, c.y1), color=out.edge)  # ... and to the controller at t+1
    dot(ax, xr_in, r.cy, color=out.edge)
    text(ax, xr_in + 0.07, (r.cy + c.y1) / 2 + 0.12, "at $t+1$", fs=FS_SMALL, color=out.text, ha="left")
    text(ax, r.cx, r.y1 + 0.15, "$r_t$", fs=FS + 1, color=out.text)
    text(ax, r.x1 + 0.12, r.cy, "read:\n" + r"$r_t = \Sigma_i\, w^r_t(i)\,\mathbf{M}_t(i)$",
         fs=FS_SMALL, ha="left", color=out.text, linespacing=1.4)
    text(ax, 0.12, r.cy + 0.1, r"$y_t$ = linear($[h_t, r_t]$)", fs=FS_SMALL, color=MUTED, ha="left")

    # write: erase and add vectors below the grid
    ye = 1.18
    ev = vector(ax, gx - 0.42, ye, M, cell=0.12, role="op", orient="h", edge=INK)
    av = vector(ax, gx + 0.42, ye, M, cell=0.12, role="op", orient="h", edge=INK)
    arrow(ax, ev.top, (ev.cx, g.y0))
    arrow(ax, av.top, (av.cx, g.y0))
    text(ax, ev.x0 - 0.08, ye, "erase $e_t$", fs=FS_SMALL, ha="right")
    text(ax, av.x1 + 0.08, ye, "add $a_t$", fs=FS_SMALL, ha="left")
    yb = 0.78
    line(ax, (wh.cx, wh.y0), (wh.cx, yb), (av.cx, yb))
    dot(ax, ev.cx, yb)
    arrow(ax, (ev.cx, yb), ev.bottom)
    arrow(ax, (av.cx, yb), av.bottom)
    text(ax, 4.6, 0.38, "write:  " + r"$\mathbf{M}_t(i) = \mathbf{M}_{t-1}(i)\,[\mathbf{1} - w^w_t(i)\,e_t]"
         r" + w^w_t(i)\,a_t$", fs=FS, ha="center")

    # memory labels
    text(ax, g.x1 + 0.35, g.y1 - 0.2, "memory $\\mathbf{M}_t$", fs=FS, weight="bold", ha="left",
         color=mem.text)
    text(ax, g.x1 + 0.35, g.y1 - 0.5, f"$N = {N}$ rows (locations)\n$M = {M}$ columns",
         fs=FS_SMALL, ha="left", va="top", color=mem.text, linespacing=1.4)
    text(ax, g.x1 + 0.1, g.y1 + 0.12, "$i$", fs=FS_SMALL, color=MUTED, ha="left")
    # the rows the two heads mostly use
    for i, role_edge, ls in [(3, out.edge, "-"), (5, INK, "--")]:
        outline(ax, g.x0 - 0.03, row_y[i] - cell / 2 - 0.02, g.w + 0.06, cell + 0.04,
                color=role_edge, lw=1.8, ls=ls)
    text(ax, g.x1 + 0.35, row_y[3] - 0.05, "read mostly from row 3", fs=FS_SMALL, color=out.text,
         ha="left")
    text(ax, g.x1 + 0.35, row_y[5] - 0.05, "write mostly to row 5", fs=FS_SMALL, color=INK,
         ha="left")
    return fig


def _ntm_addressing_numbers():
    """A consistent example of the four stages over N = 8 rows (rows 0..7)."""
    cos = np.array([0.05, -0.2, 0.15, 0.1, 0.35, 0.95, 0.3, -0.1])   # K(k_t, M_t(i))
    beta = 5.0
    wc = np.exp(beta * cos)
    wc /= wc.sum()
    w_prev = np.array([0.02, 0.06, 0.84, 0.06, 0.005, 0.005, 0.005, 0.005])
    w_prev /= w_prev.sum()
    g = 0.8
    wg = g * wc + (1 - g) * w_prev
    s = np.array([0.1, 0.2, 0.7])                                     # shifts -1, 0, +1
    wt = sum(s[k] * np.roll(wg, k - 1) for k in range(3))
    gamma = 3.0
    w = wt ** gamma / (wt ** gamma).sum()
    return dict(cos=cos, beta=beta, wc=wc, w_prev=w_prev, g=g, wg=wg, s=s, wt=wt, gamma=gamma, w=w)


def addressing():
    W, H = 9.0, 5.0
    fig, ax = new_figure(W, H, "NTM addressing: four stages turn the head's parameters into $w_t$")
    n = _ntm_addressing_numbers()
    colw = 2.2
    xs = [0.2 + colw * k for k in range(4)]                 # left edges of the four columns
    cw, chh = 1.6, 1.15                                     # chart width, height
    yc = 0.95                                               # chart baseline
    yb = 2.85                                               # stage boxes
    rows = np.arange(8)
    names = ["1  content", "2  interpolation", "3  circular shift", "4  sharpening"]
    outs = [("wc", "$w^c_t$"), ("wg", "$w^g_t$"), ("wt", r"$\tilde{w}_t$"), ("w", "$w_t$")]
    formulas = [r"$w^c_t(i) = \mathrm{softmax}_i(\beta_t \cos(k_t, \mathbf{M}_t(i)))$",
                r"$w^g_t = g_t\, w^c_t + (1 - g_t)\, w_{t-1}$",
                r"$\tilde{w}_t(i) = \Sigma_k\, s_t(k)\, w^g_t(i - k)$",
                r"$w_t(i) = \tilde{w}_t(i)^{\gamma_t} / \Sigma_j \tilde{w}_t(j)^{\gamma_t}$"]
    q = ROLES["query"]
    boxes, charts = [], []
    for k in range(4):
        x0 = xs[k]
        cx = x0 + cw / 2 + 0.1
        b = box(ax, cx, yb, 1.5, 0.42, names[k], role="op", fs=FS, weight="bold")
        boxes.append(b)
        key, lbl = outs[k]
        vals = n[key]
        colors = [ACCENT if (k == 3 and v == vals.max()) else WEIGHT_BAR for v in vals]
        bars(ax, cx - cw / 2, yc, vals, cw, chh, vmax=1.0, gap=0.3, colors=colors)
        for i in rows:
            text(ax, cx - cw / 2 + (i + 0.5) * cw / 8, yc - 0.13, str(i), fs=FS_SMALL,
                 color=MUTED)
        text(ax, cx - cw / 2 + 0.02, yc + chh + 0.05, lbl, fs=FS + 2, ha="left")
        top = int(np.argmax(vals))
        text(ax, cx - cw / 2 + (top + 0.5) * cw / 8, yc + chh * vals[top] + 0.1,
             f"{vals[top]:.2f}", fs=FS_SMALL)
        arrow(ax, b.bottom, (cx, yc + chh + 0.22))
        charts.append(cx)
        text(ax, cx, 0.38, formulas[k], fs=FS_SMALL)
    text(ax, W / 2, 0.12, "each chart: a weighting over the memory rows $i$ = 0 … 7 (it sums to 1)",
         fs=FS_SMALL, color=MUTED)
    # chart k -> stage k+1
    for k in range(3):
        x_gap = (charts[k] + charts[k + 1]) / 2
        arrow(ax, (charts[k] + cw / 2 + 0.04, yc + 0.55), (x_gap, yc + 0.55), (x_gap, yb),
              boxes[k + 1].left, color=INK)

    # the parameters of each stage, above its box
    yp = 3.9
    b = boxes[0]
    text(ax, b.cx, yp + 0.1, r"key $k_t$, strength $\beta_t = %g$" % n["beta"], fs=FS_SMALL, color=q.text)
    text(ax, b.cx, yp - 0.17, r"row 5 of $\mathbf{M}_t$ matches $k_t$", fs=FS_SMALL, color=MUTED)
    arrow(ax, (b.cx, yp - 0.33), b.top)
    b = boxes[1]
    xg = b.cx + 0.38
    text(ax, xg, yp + 0.1, r"gate $g_t = %g$" % n["g"], fs=FS_SMALL, color=q.text)
    arrow(ax, (xg, yp - 0.05), (xg, b.y1))
    mw = 0.96                                            # small chart of w_{t-1}, with its row axis
    mx0 = b.cx - 0.62 - mw / 2
    bars(ax, mx0, yp - 0.2, n["w_prev"], mw, 0.45, vmax=1.0, gap=0.3, color=MUTED)
    for i in rows:
        text(ax, mx0 + (i + 0.5) * mw / 8, yp - 0.3, str(i), fs=FS_SMALL - 1.5, color=MUTED)
    text(ax, mx0 - 0.04, yp - 0.3, "row", fs=FS_SMALL - 1.5, color=MUTED, ha="right")
    text(ax, mx0 + mw / 2, yp + 0.38, "$w_{t-1}$", fs=FS_SMALL)
    arrow(ax, (b.x0 + 0.12, yp - 0.4), (b.x0 + 0.12, b.y1))
    b = boxes[2]
    sx0 = b.cx - 0.6
    bars(ax, sx0, yp - 0.35, n["s"], 0.5, 0.5, vmax=1.0, gap=0.3, color=q.edge)
    for j, lbl in enumerate(["−1", "0", "+1"]):
        text(ax, sx0 + (j + 0.5) * 0.5 / 3, yp - 0.47, lbl, fs=FS_SMALL, color=MUTED)
    text(ax, sx0 + 0.25, yp + 0.3, "$s_t$", fs=FS_SMALL, color=q.text)
    text(ax, b.cx + 0.05, yp + 0.0, "shift weighting:\n$+1$ moves down a row", fs=FS_SMALL,
         color=q.text, linespacing=1.2, ha="left")
    arrow(ax, (sx0 + 0.25, yp - 0.58), (sx0 + 0.25, b.y1))
    b = boxes[3]
    text(ax, b.cx, yp + 0.1, r"exponent $\gamma_t = %g$" % n["gamma"], fs=FS_SMALL, color=q.text)
    arrow(ax, (b.cx, yp - 0.05), b.top)
    return fig
