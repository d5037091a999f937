"""Lesson 02: the GRU encoder-decoder and its fixed-length bottleneck."""
from .style import ACCENT, FS, FS_SMALL, INK, MUTED, ROLES, arrow, box, brace, new_figure, text, vector


def encoder_decoder():
    W, H = 9.0, 4.7
    fig, ax = new_figure(W, H, "Seq2seq: the whole source squeezed into one vector")
    enc, dec = ROLES["encoder"], ROLES["decoder"]
    cw, ch, cy = 0.62, 0.5, 2.1            # GRU cells
    xe = [0.75, 1.65, 2.55, 3.45]          # encoder steps 1, 2, 3, T
    xd = [5.55, 6.45, 7.35, 8.25]          # decoder steps 1, 2, 3, T'+1
    xb = 4.5                               # the bottleneck vector
    y_in, y_out = 1.2, 3.05

    # --- encoder ------------------------------------------------------------------------------
    src = ["$x_1$", "$x_2$", "$x_3$", "$x_T$"]
    states = ["$h_1$", "$h_2$", "$h_3$"]
    cells = []
    for k, x in enumerate(xe):
        c = box(ax, x, cy, cw, ch, "GRU", role="encoder", fs=FS)
        cells.append(c)
        b = box(ax, x, y_in, 0.5, 0.34, src[k], role="op", fs=FS + 1)
        arrow(ax, b.top, c.bottom)
        if k < 3:   # the states the decoder never sees
            v = vector(ax, x, y_out, 4, cell=0.13, role="pruned")
            arrow(ax, c.top, v.bottom, color=MUTED, lw=1.0)
            text(ax, x + 0.14, y_out + 0.2, states[k], fs=FS, color=MUTED, ha="left")
    for k in range(3):
        ls = ":" if k == 2 else "-"
        arrow(ax, cells[k].right, cells[k + 1].left, ls=ls, color=enc.edge)
    text(ax, (cells[2].x1 + cells[3].x0) / 2, cy + 0.16, "⋯", fs=FS, color=enc.edge)
    text(ax, xe[1], y_out + 0.62, "$h_1 \\dots h_{T-1}$: never seen by the decoder",
         fs=FS_SMALL, color=MUTED)

    # --- the bottleneck -----------------------------------------------------------------------
    v = vector(ax, xb, cy, 4, cell=0.16, role="encoder", lw=1.0)
    box(ax, xb, cy, v.w + 0.1, v.h + 0.1, role="op", fill="none", edge=ACCENT, lw=2.0,
        rounding=0.04, zorder=4)
    arrow(ax, cells[3].right, (v.x0 - 0.05, cy), color=enc.edge)
    text(ax, xb, cy - 0.55, "$h_T = s_0$", fs=FS + 1, color=INK)
    text(ax, xb, 4.0, "the bottleneck: one vector of size $d$\nfor the whole sentence",
         fs=FS, color=ACCENT, weight="bold", linespacing=1.3)
    arrow(ax, (xb, 3.68), (xb, v.y1 + 0.05), color=ACCENT, lw=1.4)

    # --- decoder ------------------------------------------------------------------------------
    dec_in = ["⟨bos⟩", "$y_1$", "$y_2$", "$y_{T'}$"]
    dec_out = ["$y_1$", "$y_2$", "$y_3$", "⟨eos⟩"]
    dcells = []
    for k, x in enumerate(xd):
        c = box(ax, x, cy, cw, ch, "GRU", role="decoder", fs=FS)
        dcells.append(c)
        b = box(ax, x, y_in, 0.6, 0.34, dec_in[k], role="op", fs=FS + 1 if k else FS)
        arrow(ax, b.top, c.bottom)
        o = box(ax, x, y_out, 0.6, 0.34, dec_out[k], role="op", fs=FS + 1 if k < 3 else FS,
                edge=dec.edge)
        arrow(ax, c.top, o.bottom, color=dec.edge)
    arrow(ax, (v.x1 + 0.05, cy), dcells[0].left, color=ACCENT, lw=1.4)
    labels = ["$s_1$", "$s_2$", ""]
    for k in range(3):
        ls = ":" if k == 2 else "-"
        arrow(ax, dcells[k].right, dcells[k + 1].left, ls=ls, color=dec.edge)
        if labels[k]:
            text(ax, (dcells[k].x1 + dcells[k + 1].x0) / 2, cy + 0.17, labels[k], fs=FS_SMALL,
                 color=dec.text)
    text(ax, (dcells[2].x1 + dcells[3].x0) / 2, cy + 0.16, "⋯", fs=FS, color=dec.edge)
    text(ax, xd[-1] + 0.35, y_out + 0.4, "output: the target, then ⟨eos⟩", fs=FS_SMALL,
         color=dec.text, ha="right")

    # --- labels -------------------------------------------------------------------------------
    yb = y_in - 0.27
    brace(ax, (xe[0] - 0.3, yb), (xe[-1] + 0.3, yb), depth=0.12, color=enc.edge)
    text(ax, (xe[0] + xe[-1]) / 2, yb - 0.3, "Encoder", fs=FS + 1, weight="bold",
         color=enc.text)
    text(ax, (xe[0] + xe[-1]) / 2, yb - 0.56, "a GRU reads the source $x_1 \\dots x_T$",
         fs=FS_SMALL, color=enc.text)
    brace(ax, (xd[0] - 0.35, yb), (xd[-1] + 0.35, yb), depth=0.12, color=dec.edge)
    text(ax, (xd[0] + xd[-1]) / 2, yb - 0.3, "Decoder", fs=FS + 1, weight="bold",
         color=dec.text)
    text(ax, (xd[0] + xd[-1]) / 2, yb - 0.56,
         "starts from $s_0 = h_T$; reads the target shifted right",
         fs=FS_SMALL, color=dec.text)
    return fig
