"""Lesson 12: lesson 09's encoder-decoder beside the decoder-only stack of a GPT (both pre-norm)."""
from .style import FS, FS_SMALL, MUTED, ROLES, arrow, box, container, line, new_figure, note, op_circle, text

BW = 1.95       # width of a sub-layer box
RES = 1.1       # distance of the residual path from a column's centre


def _residual(ax, x, y_from, y_to, side):
    """A residual path: branches off the main line at y_from, rejoins at the ⊕ at y_to."""
    xr = x - RES if side == "left" else x + RES
    line(ax, (x, y_from), (xr, y_from), (xr, y_to))
    arrow(ax, (xr, y_to), (x - 0.11 if side == "left" else x + 0.11, y_to))


def _block(ax, x, y, name, detail=None, role="op", h=0.46, ls="-"):
    b = box(ax, x, y, BW, h, "", role=role, ls=ls)
    color = ROLES[role].text
    if detail:
        text(ax, x, y + 0.09, name, fs=FS, color=color)
        text(ax, x, y - 0.12, detail, fs=FS_SMALL, color=MUTED if role != "pruned" else color)
    else:
        text(ax, x, y, name, fs=FS, color=color)
    return b


def _sublayer(ax, x, y0, name, detail, side="right", role="op", extra=None):
    """LayerNorm -> sub-layer -> ⊕ with its residual, from y0 upwards; returns the ⊕'s top y."""
    ln = box(ax, x, y0 + 0.2, BW * 0.62, 0.26, "LayerNorm", role="norm", fs=FS_SMALL)
    sub = _block(ax, x, y0 + 0.75, name, detail, role=role)
    arrow(ax, ln.top, sub.bottom, color=ROLES["query"].edge if extra == "q" else "#2B2B2B")
    plus = op_circle(ax, x, y0 + 1.3, "+", r=0.11, fs=FS + 1)
    arrow(ax, sub.top, plus.bottom)
    _residual(ax, x, y0 - 0.05, y0 + 1.3, side)
    line(ax, (x, y0 - 0.05), ln.bottom)
    return sub, plus.y1


def _head(ax, x, y, tied="Linear (tied to the embedding)"):
    ln = box(ax, x, y, BW * 0.62, 0.26, "final LayerNorm", role="norm", fs=FS_SMALL)
    lin = box(ax, x, y + 0.5, BW, 0.32, tied, role="op", fs=FS_SMALL)
    arrow(ax, ln.top, lin.bottom)
    sm = box(ax, x, y + 0.95, BW, 0.3, "Softmax", role="op", fs=FS_SMALL)
    arrow(ax, lin.top, sm.bottom)
    return ln, sm


def _embed(ax, x, y, label, positions):
    emb = box(ax, x, y, BW, 0.34, r"Embedding $\times \sqrt{d_{model}}$" + positions, role="op", fs=FS_SMALL)
    text(ax, x, y - 0.45, label, fs=FS_SMALL)
    arrow(ax, (x, y - 0.33), emb.bottom)
    return emb


def decoder_only():
    W, H = 9.0, 8.7
    fig, ax = new_figure(W, H, "From encoder-decoder to decoder-only",
                         "left: lesson 09 (pre-norm, as the course builds it); right: the GPT of lesson 12")
    enc, dec = ROLES["encoder"], ROLES["decoder"]
    line(ax, (5.6, 0.2), (5.6, H - 0.85), color="#D0D0D0", lw=1.0, ls="--")

    # ---------------- lesson 09: encoder and decoder ----------------
    xe, xd = 1.35, 3.95
    emb_e = _embed(ax, xe, 0.8, "source tokens", " + PE")
    line(ax, emb_e.top, (xe, 1.45))
    _, top = _sublayer(ax, xe, 1.5, "Self-attention", "padding mask", side="left")
    _, top = _sublayer(ax, xe, top + 0.05, "Feed-forward", None, side="left")
    container(ax, xe - RES - 0.12, 1.25, 2 * RES + 0.24, top + 0.1 - 1.25, role="encoder")
    text(ax, xe - 0.6, top + 0.32, "encoder  $\\times N$", fs=FS, color=enc.text, weight="bold")
    xm = xe + RES + 0.2                                                    # the memory's way up and across
    y_mem = top + 0.6
    line(ax, (xe, top), (xe, y_mem), (xm, y_mem), color=enc.edge, lw=1.5)
    text(ax, xe + 0.08, y_mem + 0.15, "memory", fs=FS_SMALL, color=enc.text, ha="left")

    emb_d = _embed(ax, xd, 0.8, "target, shifted right", " + PE")
    line(ax, emb_d.top, (xd, 1.45))
    _, top = _sublayer(ax, xd, 1.5, "Masked self-attention", "causal mask")
    cross, top = _sublayer(ax, xd, top + 0.05, "Cross-attention", "K, V from the memory", extra="q")
    arrow(ax, (xm, y_mem), (xm, cross.cy), (cross.x0, cross.cy), color=enc.edge, lw=1.5)
    _, top = _sublayer(ax, xd, top + 0.05, "Feed-forward", None)
    container(ax, xd - RES - 0.12, 1.25, 2 * RES + 0.24, top + 0.1 - 1.25, role="decoder")
    text(ax, xd, top + 0.28, "decoder  $\\times N$", fs=FS, color=dec.text, weight="bold")
    ln, sm = _head(ax, xd, top + 0.75)
    line(ax, (xd, top), ln.bottom)
    text(ax, xd, sm.y1 + 0.22, r"$p(y_t \mid y_{<t}, x)$", fs=FS)

    # ---------------- lesson 12: decoder-only ----------------
    xg = 7.3
    emb_g = _embed(ax, xg, 0.8, r"text tokens $x_0 \dots x_{T-1}$", "")
    line(ax, emb_g.top, (xg, 1.45))
    _, top = _sublayer(ax, xg, 1.5, "Masked self-attention", "causal; RoPE; GQA")
    _, top = _sublayer(ax, xg, top + 0.05, "Feed-forward", None)
    container(ax, xg - RES - 0.12, 1.25, 2 * RES + 0.24, top + 0.1 - 1.25, role="decoder")
    text(ax, xg, top + 0.28, "decoder-only layer  $\\times N$", fs=FS, color=dec.text, weight="bold")
    ln, sm = _head(ax, xg, top + 0.75)
    line(ax, (xg, top), ln.bottom)
    text(ax, xg, sm.y1 + 0.22, r"$p(x_{t+1} \mid x_{\leq t})$ at every $t$", fs=FS)
    box(ax, xg, 7.0, BW + 0.9, 0.5, "no encoder, no cross-attention:\nnothing to translate from",
        role="pruned", fs=FS_SMALL, ls="--")
    note(ax, xg, 7.75, "RoPE rotates Q and K inside the attention:\nno position vector is added to the embedding",
         fs=FS_SMALL, ha="center", pad=0.2)
    return fig
