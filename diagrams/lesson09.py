"""Lesson 09: the Transformer encoder-decoder (drawn post-norm, as in the paper)."""
from .style import FS, FS_SMALL, MUTED, ROLES, arrow, box, container, dot, line, new_figure, note, op_circle, text

BW = 2.3          # width of a sub-layer box
RES = 1.38        # distance of the residual paths from the column's centre


def _sublayer(ax, x, y, name, detail=None, h=0.5):
    b = box(ax, x, y, BW, h, "", role="op")
    if detail:
        text(ax, x, y + 0.09, name, fs=FS)
        text(ax, x, y - 0.13, detail, fs=FS_SMALL, color=MUTED)
    else:
        text(ax, x, y, name, fs=FS)
    return b


def _addnorm(ax, x, y):
    return box(ax, x, y, BW, 0.3, "Add & Norm", role="norm", fs=FS_SMALL)


def _qkv_in(ax, x, y_from, b, labels="QKV"):
    """Three arrows (query, key, value) from a junction at y_from into the bottom of box b."""
    cols = {"Q": ROLES["query"], "K": ROLES["key"], "V": ROLES["value"]}
    xs = [x - 0.5, x, x + 0.5]
    line(ax, (xs[0], y_from), (xs[-1], y_from))
    for xx, lab in zip(xs, labels):
        arrow(ax, (xx, y_from), (xx, b.y0), color=cols[lab].edge, lw=1.3)
        text(ax, xx + 0.06, (y_from + b.y0) / 2 - 0.01, f"${lab}$", fs=FS_SMALL,
             color=cols[lab].text, ha="left")


def _residual(ax, x_main, y_branch, target, side):
    """A residual path: from the main line at y_branch, around the sub-layer, into `target`."""
    xr = x_main - RES if side == "left" else x_main + RES
    edge = target.x0 if side == "left" else target.x1
    dot(ax, x_main, y_branch)
    arrow(ax, (x_main, y_branch), (xr, y_branch), (xr, target.cy), (edge, target.cy), lw=1.2)


def transformer():
    W, H = 9.0, 8.3
    fig, ax = new_figure(W, H, "The Transformer (Vaswani et al. 2017)")
    enc, dec, q, k, v = ROLES["encoder"], ROLES["decoder"], ROLES["query"], ROLES["key"], ROLES["value"]
    xe, xd = 2.45, 6.45

    # ---------------- encoder ----------------
    text(ax, xe, 0.38, "source tokens", fs=FS)
    emb_e = box(ax, xe, 0.9, BW, 0.36, r"Embedding $\times \sqrt{d_{model}}$", role="op", fs=FS_SMALL)
    arrow(ax, (xe, 0.52), emb_e.bottom)
    plus_e = op_circle(ax, xe, 1.45, "+", r=0.13, fs=FS + 2)
    arrow(ax, emb_e.top, plus_e.bottom)
    pe_e = op_circle(ax, xe - 0.75, 1.45, "∿", r=0.15, role="norm", fs=FS + 3)
    arrow(ax, pe_e.right, plus_e.left)
    text(ax, pe_e.x0 - 0.08, 1.45, "positional\nencoding", fs=FS_SMALL, ha="right",
         linespacing=1.15)
    container(ax, xe - RES - 0.22, 1.78, 2 * RES + 0.44, 3.0, role="encoder")
    text(ax, xe - RES - 0.32, 3.25, "$N\\times$", fs=FS + 3, ha="right", color=enc.text,
         weight="bold")
    att_e = _sublayer(ax, xe, 2.45, "Multi-head self-attention", "source padding mask")
    _qkv_in(ax, xe, 2.0, att_e)
    line(ax, plus_e.top, (xe, 2.0))
    an1 = _addnorm(ax, xe, 3.0)
    arrow(ax, att_e.top, an1.bottom)
    _residual(ax, xe, 1.9, an1, "left")
    ff_e = _sublayer(ax, xe, 3.75, "Feed-forward", r"$d_{model} \to d_{ff} \to d_{model}$", h=0.48)
    arrow(ax, an1.top, ff_e.bottom)
    an2 = _addnorm(ax, xe, 4.4)
    arrow(ax, ff_e.top, an2.bottom)
    _residual(ax, xe, 3.3, an2, "right")
    text(ax, xe - RES - 0.32, 3.62, "Encoder", fs=FS + 1, weight="bold", color=enc.text,
         ha="right")

    # memory -> decoder's cross-attention
    ym = 5.45
    line(ax, an2.top, (xe, ym), (xd - RES - 0.42, ym), color=enc.edge, lw=1.6)
    text(ax, (xe + xd) / 2 - 0.55, ym + 0.16, r"memory $h_1 \dots h_S$ (the encoder's output)",
         fs=FS_SMALL, color=enc.text)

    # ---------------- decoder ----------------
    text(ax, xd, 0.38, "target tokens, shifted right: ⟨bos⟩, $y_1, y_2, \\dots$", fs=FS)
    emb_d = box(ax, xd, 0.9, BW, 0.36, r"Embedding $\times \sqrt{d_{model}}$", role="op", fs=FS_SMALL)
    arrow(ax, (xd, 0.52), emb_d.bottom)
    plus_d = op_circle(ax, xd, 1.45, "+", r=0.13, fs=FS + 2)
    arrow(ax, emb_d.top, plus_d.bottom)
    pe_d = op_circle(ax, xd + 0.75, 1.45, "∿", r=0.15, role="norm", fs=FS + 3)
    arrow(ax, pe_d.left, plus_d.right)
    text(ax, pe_d.x1 + 0.08, 1.45, "positional\nencoding", fs=FS_SMALL, ha="left",
         linespacing=1.15)
    container(ax, xd - RES - 0.22, 1.78, 2 * RES + 0.44, 4.42, role="decoder")
    text(ax, xd + RES + 0.32, 3.9, "$\\times N$", fs=FS + 3, ha="left", color=dec.text,
         weight="bold")
    att_d = _sublayer(ax, xd, 2.45, "Masked multi-head self-attention", "causal & target padding mask")
    _qkv_in(ax, xd, 2.0, att_d)
    line(ax, plus_d.top, (xd, 2.0))
    dn1 = _addnorm(ax, xd, 3.0)
    arrow(ax, att_d.top, dn1.bottom)
    _residual(ax, xd, 1.9, dn1, "right")
    cross = _sublayer(ax, xd, 3.75, "Multi-head cross-attention", "source padding mask")
    arrow(ax, dn1.top, cross.bottom, color=q.edge)
    text(ax, xd + 0.06, (dn1.y1 + cross.y0) / 2, "$Q$", fs=FS_SMALL, color=q.text, ha="left")
    dn2 = _addnorm(ax, xd, 4.4)
    _residual(ax, xd, 3.3, dn2, "right")
    arrow(ax, cross.top, dn2.bottom)
    # K, V from the memory, into the cross-attention's left side
    xk = xd - RES - 0.42
    arrow(ax, (xk, ym), (xk, cross.cy), (cross.x0, cross.cy), color=enc.edge, lw=1.6)
    xkv = (xk + cross.x0) / 2
    text(ax, xkv - 0.03, cross.cy + 0.14, "$K,$", fs=FS_SMALL, color=k.text, ha="right")
    text(ax, xkv + 0.0, cross.cy + 0.14, "$V$", fs=FS_SMALL, color=v.text, ha="left")
    ff_d = _sublayer(ax, xd, 5.15, "Feed-forward", r"$d_{model} \to d_{ff} \to d_{model}$", h=0.48)
    arrow(ax, dn2.top, ff_d.bottom)
    dn3 = _addnorm(ax, xd, 5.8)
    arrow(ax, ff_d.top, dn3.bottom)
    _residual(ax, xd, 4.7, dn3, "right")
    text(ax, xd + RES + 0.32, 4.27, "Decoder", fs=FS + 1, weight="bold", color=dec.text,
         ha="left")

    lin = box(ax, xd, 6.65, BW, 0.36, "Linear (tied to the embedding)", role="op", fs=FS_SMALL)
    arrow(ax, dn3.top, lin.bottom)
    sm = box(ax, xd, 7.18, BW, 0.36, "Softmax", role="op", fs=FS_SMALL)
    arrow(ax, lin.top, sm.bottom)
    arrow(ax, sm.top, (xd, 7.58))
    text(ax, xd, 7.74, r"next-token probabilities $p(y_t \mid y_{<t}, x)$", fs=FS)

    note(ax, 0.22, 6.85,
         "Drawn as in the paper: post-norm,\n"
         r"$x \leftarrow \mathrm{LayerNorm}(x + \mathrm{Sublayer}(x))$." "\n"
         "The course's default is pre-norm:\n"
         r"$x \leftarrow x + \mathrm{Sublayer}(\mathrm{LayerNorm}(x))$," "\n"
         "plus one LayerNorm after the last layer.", fs=FS_SMALL, va="center", pad=0.4,
         fill="#FFFFFF")
    return fig
