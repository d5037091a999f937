"""Lesson 08: multi-head attention, split into heads and merged again."""
from matplotlib.patches import FancyBboxPatch

from .style import FS, FS_SMALL, INK, MUTED, ROLES, WHITE, arrow, box, brace, matrix, mix, new_figure, text

T, DM, NH = 4, 8, 4
DH = DM // NH


def _slabbed(ax, cx, cy, role, cell, shades, gap=0.045):
    """A (T, d_model) matrix drawn as NH slabs of DH columns with small gaps between them.
    Returns the list of slab Boxes."""
    r = ROLES[role]
    slab_w = DH * cell
    total = NH * slab_w + (NH - 1) * gap
    x = cx - total / 2
    boxes = []
    for i in range(NH):
        b = matrix(ax, x + slab_w / 2, cy, T, DH, cell=cell, role=role, fills=shades[i],
                   edge=r.edge)
        boxes.append(b)
        x += slab_w + gap
    return boxes


def _shades(role):
    r = ROLES[role]
    return [mix(r.fill, r.edge, t) for t in (0.0, 0.25, 0.5, 0.75)]


def multihead():
    W, H = 9.0, 5.3
    fig, ax = new_figure(W, H, "Multi-head attention: split into $h$ heads, attend in parallel, merge")
    out = ROLES["output"]
    cell = 0.13
    ymid = 2.72
    ys = {"Q": 3.82, "K": 2.72, "V": 1.62}

    X = matrix(ax, 0.85, ymid, T, DM, cell=cell, role="op", fills=WHITE)
    text(ax, X.cx, X.y1 + 0.17, "$X$", fs=FS + 2)
    text(ax, X.cx, X.y0 - 0.16, r"$(T,\ d_{model})$", fs=FS_SMALL, color=MUTED)

    slabs = {}
    for name, role, wname in [("Q", "query", "W_Q"), ("K", "key", "W_K"), ("V", "value", "W_V")]:
        y = ys[name]
        sl = _slabbed(ax, 2.62, y, role, cell, _shades(role))
        slabs[name] = sl
        x0 = sl[0].x0
        if name == "K":
            arrow(ax, X.right, (x0, y))
        else:
            arrow(ax, (X.x1, ymid), (1.62, ymid), (1.62, y), (x0, y))
        text(ax, 1.83, y + 0.13, f"${wname}$", fs=FS_SMALL, color=ROLES[role].text)
        text(ax, sl[-1].x1 + 0.08, y + 0.2, f"${name}$", fs=FS + 1, ha="left",
             color=ROLES[role].text)
    for i, b in enumerate(slabs["Q"]):
        text(ax, b.cx, b.y1 + 0.12, f"{i + 1}", fs=FS_SMALL, color=MUTED)
    text(ax, slabs["Q"][0].x0 - 0.02, slabs["Q"][0].y1 + 0.36, "head", fs=FS_SMALL,
         color=MUTED, ha="left")
    b0 = slabs["V"][0]
    brace(ax, (b0.x0, b0.y0 - 0.05), (b0.x1, b0.y0 - 0.05), depth=0.08, color=MUTED)
    text(ax, b0.x0 - 0.05, b0.y0 - 0.32, r"$d_{head} = d_{model} / h$", fs=FS_SMALL, ha="left")
    text(ax, 2.62, 0.62, r"$Q, K, V$: each $(T,\ d_{model})$, cut into" "\n" r"$h$ slabs of $d_{head}$ features",
         fs=FS_SMALL, color=MUTED, linespacing=1.3)

    # split
    xs = slabs["Q"][-1].x1 + 0.32
    brace(ax, (xs, ys["V"] - 0.4), (xs, ys["Q"] + 0.4), depth=0.14, color=INK)
    text(ax, xs + 0.08, ys["Q"] + 0.75, "split", fs=FS, weight="bold", ha="center")

    # the heads
    card_y = [4.08, 3.3, 2.52, 1.74]
    card_x0, card_x1 = 3.85, 6.35
    tiny = 0.085
    outs = []
    for i, cy in enumerate(card_y):
        ax.add_patch(FancyBboxPatch((card_x0, cy - 0.31), card_x1 - card_x0, 0.62,
                                    boxstyle="round,pad=0,rounding_size=0.08", facecolor="#F7F7F7",
                                    edgecolor="#B8B8B8", lw=1.0, zorder=1))
        text(ax, card_x0 + 0.08, cy + 0.2, f"head {i + 1}", fs=FS_SMALL, ha="left",
             color=MUTED)
        xx = card_x0 + 0.25
        for j, role in enumerate(["query", "key", "value"]):
            matrix(ax, xx + j * 0.26, cy - 0.05, T, DH, cell=tiny, role=role,
                   fills=_shades(role)[i])
        a = box(ax, card_x0 + 1.47, cy, 0.78, 0.34, "attention", role="op", fs=FS_SMALL)
        arrow(ax, (xx + 2 * 0.26 + tiny + 0.03, cy), a.left)
        o = matrix(ax, card_x1 - 0.3, cy, T, DH, cell=tiny, role="output",
                   fills=_shades("output")[i])
        arrow(ax, a.right, o.left, color=out.edge)
        outs.append(o)
    text(ax, (card_x0 + card_x1) / 2, card_y[-1] - 0.55,
         r"$h$ scaled dot-product attentions, in parallel" "\n"
         r"$\mathrm{head}_i = \mathrm{softmax}(Q_i K_i^\top / \sqrt{d_{head}})\, V_i$",
         fs=FS_SMALL, linespacing=1.5)

    # merge
    xm = card_x1 + 0.14
    tip = brace(ax, (xm, card_y[-1] - 0.31), (xm, card_y[0] + 0.31), depth=0.14, color=INK)
    text(ax, xm + 0.08, ys["Q"] + 0.75, "merge", fs=FS, weight="bold", ha="center")
    yc = 3.75
    cat = _slabbed(ax, 7.75, yc, "output", cell, _shades("output"), gap=0.0)
    arrow(ax, (tip[0] + 0.02, tip[1]), (6.85, tip[1]), (6.85, yc), (cat[0].x0, yc), color=out.edge)
    text(ax, 7.75, yc + 0.45, r"Concat$(\mathrm{head}_1, \dots, \mathrm{head}_h)$", fs=FS_SMALL)
    text(ax, cat[-1].x1 + 0.06, yc - 0.4, r"$(T,\ d_{model})$", fs=FS_SMALL, color=MUTED,
         ha="right")
    wo = box(ax, 7.75, 2.72, 0.7, 0.4, "$W_O$", role="op", fs=FS + 1)
    arrow(ax, (7.75, cat[0].y0 - 0.28), wo.top)
    res = matrix(ax, 7.75, 1.62, T, DM, cell=cell, role="op", fills=mix(out.fill, WHITE, 0.0),
                 edge=INK)
    arrow(ax, wo.bottom, (7.75, res.y1))
    text(ax, 7.75, res.y0 - 0.16, r"output $(T,\ d_{model})$", fs=FS_SMALL, color=MUTED)
    text(ax, 7.75, 0.95, "$W_O$ mixes what\nthe heads found", fs=FS_SMALL, color=MUTED,
         linespacing=1.3)
    text(ax, W / 2, 0.25, r"MultiHead$(X) = \mathrm{Concat}(\mathrm{head}_1, \dots, \mathrm{head}_h)\, W_O$,"
         r"   $Q_i$ = features $i\,d_{head} \dots (i{+}1)\,d_{head}-1$ of $Q = X W_Q$",
         fs=FS_SMALL)
    return fig
