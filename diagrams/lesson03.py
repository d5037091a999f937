"""Lesson 03: one step of Bahdanau's attention decoder."""
import numpy as np

from .style import (
    FS,
    FS_SMALL,
    INK,
    MUTED,
    ROLES,
    WHITE,
    arrow,
    bars,
    box,
    dot,
    mix,
    new_figure,
    op_circle,
    text,
    vector,
)


def _badge(ax, x, y, k):
    """A numbered step marker."""
    op_circle(ax, x, y, str(k), r=0.12, fs=FS_SMALL, role="op", lw=0)
    ax.patches[-1].set_facecolor(INK)
    ax.texts[-1].set_color(WHITE)
    ax.texts[-1].set_fontweight("bold")


def attention_step():
    W, H = 9.0, 5.9
    fig, ax = new_figure(W, H, "One step of the attention decoder (Bahdanau et al. 2015)")
    enc, dec, out = ROLES["encoder"], ROLES["decoder"], ROLES["output"]
    rows = [3.3, 2.7, 2.1, 1.5]                       # source positions i = 1..4
    ymid = (rows[0] + rows[-1]) / 2
    cell = 0.13
    e = np.array([0.3, 2.4, 0.9, -0.6])               # scores e_{t,i}
    alpha = np.exp(e) / np.exp(e).sum()
    fwd, bwd = enc.fill, mix(enc.fill, enc.edge, 0.4)
    y_head = 3.8

    # --- encoder states h_i = [fwd; bwd] ------------------------------------------------------
    xh = 1.05
    hvecs = []
    for k, y in enumerate(rows):
        v = vector(ax, xh, y, 6, cell=cell, role="encoder", orient="h", fills=[fwd] * 3 + [bwd] * 3)
        hvecs.append(v)
        text(ax, v.x0 - 0.1, y, f"$h_{k + 1}$", fs=FS + 1, ha="right", color=enc.text)
    text(ax, xh - 1.5 * cell, y_head, r"$\overrightarrow{h}_i$", fs=FS, color=enc.text)
    text(ax, xh + 1.5 * cell, y_head, r"$\overleftarrow{h}_i$", fs=FS, color=enc.text)
    text(ax, xh - 0.1, 1.0, "bidirectional encoder:\n" + r"$h_i = [\overrightarrow{h}_i;\ \overleftarrow{h}_i]$",
         fs=FS_SMALL, color=enc.text, linespacing=1.5)

    # --- 1: scores ----------------------------------------------------------------------------
    sc = box(ax, 2.1, ymid, 0.78, rows[0] - rows[-1] + 0.55, "additive\nscore", fs=FS_SMALL)
    for v in hvecs:
        arrow(ax, v.right, (sc.x0, v.cy), color=enc.edge, lw=1.1)
    xe = 2.9
    ecells = []
    for k, y in enumerate(rows):
        c = box(ax, xe, y, 0.46, 0.32, f"{e[k]:.1f}", role="op", fs=FS_SMALL, rounding=0.04)
        ecells.append(c)
        arrow(ax, (sc.x1, y), c.left, lw=1.1)
    text(ax, xe, y_head, "$e_{t,i}$", fs=FS + 1)

    # --- 2: softmax ---------------------------------------------------------------------------
    sm = box(ax, 3.52, ymid, 0.42, sc.h, "", fs=FS_SMALL)
    text(ax, sm.cx, sm.cy, "softmax over $i$", fs=FS_SMALL, rotation=90)
    for c in ecells:
        arrow(ax, c.right, (sm.x0, c.cy), lw=1.1)
    xa = 3.95
    bw_max = 0.6
    for y in rows:
        arrow(ax, (sm.x1, y), (xa - 0.02, y), lw=1.1)
    bars(ax, xa, rows[-1] - 0.3, alpha, bw_max, rows[0] - rows[-1] + 0.6, vmax=1.0,
         orient="h", gap=0.55)
    for k, y in enumerate(rows):
        text(ax, xa + bw_max * alpha[k] + 0.05, y, f"{alpha[k]:.2f}", fs=FS_SMALL, ha="left")
    text(ax, xa + 0.3, y_head, r"$\alpha_{t,i}$", fs=FS + 1)

    # --- 3: weighted sum ----------------------------------------------------------------------
    xw = 5.6
    wvecs = []
    for k, y in enumerate(rows):
        text(ax, xw - 0.6, y, "×", fs=FS + 1, color=MUTED)
        t = alpha[k] / alpha.max()
        fills = [mix(WHITE, fwd, t)] * 3 + [mix(WHITE, bwd, t)] * 3
        v = vector(ax, xw, y, 6, cell=cell, role="encoder", orient="h", fills=fills,
                   edge=mix("#CFCFCF", enc.edge, t))
        wvecs.append(v)
    text(ax, xw, y_head, r"$\alpha_{t,i}\, h_i$", fs=FS + 1)
    sig = op_circle(ax, 6.35, ymid, "Σ", r=0.17, fs=FS + 2)
    for v in wvecs:
        arrow(ax, v.right, (sig.x0 + 0.03, ymid + (v.cy - ymid) * 0.25), lw=1.1)
    cvec = vector(ax, 6.95, ymid, 6, cell=cell, role="output")
    arrow(ax, sig.right, cvec.left)
    text(ax, cvec.cx, cvec.y0 - 0.17, "$c_t$", fs=FS + 2, color=out.text)

    # --- 4: decoder GRU and output ------------------------------------------------------------
    yt = 4.55
    svec = vector(ax, 0.95, yt, 6, cell=cell, role="decoder", orient="h")
    text(ax, svec.x0 - 0.1, yt, "$s_{t-1}$", fs=FS + 1, ha="right", color=dec.text)
    gru = box(ax, cvec.cx, yt, 0.75, 0.5, "GRU", role="decoder", fs=FS)
    arrow(ax, svec.right, gru.left, color=dec.edge)
    dot(ax, sc.cx, yt, color=dec.edge)
    arrow(ax, (sc.cx, yt), sc.top, color=dec.edge)
    arrow(ax, cvec.top, gru.bottom, color=out.edge)
    yin = box(ax, gru.cx, 5.22, 0.62, 0.32, "$y_{t-1}$", role="op", fs=FS)
    arrow(ax, yin.bottom, gru.top)
    st = vector(ax, 7.78, yt, 6, cell=cell, role="decoder", orient="v")
    arrow(ax, gru.right, st.left, color=dec.edge)
    text(ax, st.cx, st.y0 - 0.14, "$s_t$", fs=FS + 1, color=dec.text)
    ob = box(ax, 8.5, yt, 0.62, 0.5, "out", role="op", fs=FS_SMALL)
    arrow(ax, st.right, ob.left, color=dec.edge)
    yout = box(ax, ob.cx, 5.22, 0.5, 0.32, "$y_t$", role="op", fs=FS, edge=dec.edge)
    arrow(ax, ob.top, yout.bottom, color=dec.edge)
    arrow(ax, cvec.right, (ob.cx, ymid), ob.bottom, color=out.edge)

    # step markers and the formulas
    _badge(ax, sc.cx, sc.y0 - 0.2, 1)
    _badge(ax, sm.cx, sm.y0 - 0.2, 2)
    _badge(ax, sig.cx, sc.y0 - 0.2, 3)
    _badge(ax, gru.x0 - 0.22, gru.y1 + 0.1, 4)
    f = [r"$e_{t,i} = v_a^\top \tanh(W_a\, s_{t-1} + U_a\, h_i)$",
         r"$\alpha_{t,i} = \exp(e_{t,i}) \,/\, \Sigma_j \exp(e_{t,j})$",
         r"$c_t = \Sigma_i\, \alpha_{t,i}\, h_i$",
         r"$s_t = \mathrm{GRU}(s_{t-1}, [E\,y_{t-1};\ c_t])$,   $p(y_t) = \mathrm{softmax}(W_{out}[s_t;\ c_t])$"]
    pos = [(0.55, 0.62), (3.95, 0.62), (0.55, 0.27), (3.95, 0.27)]
    for k, ((x, y), s) in enumerate(zip(pos, f)):
        _badge(ax, x - 0.2, y, k + 1)
        text(ax, x, y, s, fs=FS, ha="left")
    return fig
