"""One visual style for every diagram of the course: the palette and the drawing primitives.

Every diagram draws on one axes that covers the whole figure, in inches: x runs from 0 to the
figure's width, y from 0 to its height (y up). A font size of 10 pt is 10/72 inch tall, so text
and boxes can be laid out together. Only matplotlib is used (patches, paths, text, mathtext).
"""
import io
from dataclasses import dataclass

import matplotlib
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Circle, FancyArrowPatch, FancyBboxPatch, PathPatch, Polygon, Rectangle
from matplotlib.path import Path

DPI = 110          # a 9-inch-wide diagram is 990 pixels wide
FS = 10            # base font size (points)
FS_SMALL = 9       # the smallest text of any diagram
FS_TITLE = 13
FONT = "DejaVu Sans"
MONO = "DejaVu Sans Mono"

INK = "#2B2B2B"        # text, arrows, outlines of plain boxes
MUTED = "#6B6B6B"      # secondary text (shapes, captions)
WHITE = "#FFFFFF"
ACCENT = "#C2185B"     # the one thing to look at (the bottleneck, the greedy path, a pointer)


@dataclass(frozen=True)
class Role:
    """Colours of one kind of thing: light fill, darker outline, dark text."""
    fill: str
    edge: str
    text: str
    meaning: str


ROLES = {
    "query":   Role("#E2D4F4", "#7E57C2", "#4B2C86", "queries q, Q (and the decoder state when it asks)"),
    "key":     Role("#FFDDB8", "#E08A1E", "#8A4B00", "keys k, K (what a query is compared with)"),
    "value":   Role("#CFE2F7", "#3C7DC4", "#1D4F8C", "values v, V (what is read out)"),
    "output":  Role("#CDEDE8", "#2A9D8F", "#155E55", "read-outs: context c_t, z, r_t, o (weighted sums)"),
    "encoder": Role("#D5EDD8", "#3E9B57", "#1F5E31", "encoder and its states h_i"),
    "decoder": Role("#FAD5CE", "#D35B4C", "#8C2A1E", "decoder and its states s_t"),
    "memory":  Role("#ECE5D8", "#8D7B5E", "#5A4B32", "NTM memory M_t"),
    "weight":  Role("#BDBDBD", "#525252", "#252525", "attention weights (light = small, dark = large)"),
    "op":      Role("#FFFFFF", "#5F5F5F", "#2B2B2B", "operations (linear maps, softmax, GRU cells, ...)"),
    "norm":    Role("#FFF3C4", "#C9A227", "#6B5400", "Add & Norm, positional encoding"),
    "pruned":  Role("#EFEFEF", "#C8C8C8", "#A3A3A3", "pruned, masked or unused elements"),
}

# Attention weights: a sequential grey ramp, 7 levels (ColorBrewer Greys), so PNGs stay small.
WEIGHT_LEVELS = ["#F7F7F7", "#D9D9D9", "#BDBDBD", "#969696", "#737373", "#525252", "#252525"]
WEIGHT_BAR = "#5A5A5A"   # bars of a weighting


def role(name):
    return ROLES[name]


def weight_color(a, vmax=1.0):
    """Grey level of a weight a in [0, vmax] (0 -> almost white, vmax -> almost black)."""
    a = float(np.clip(a / vmax, 0.0, 1.0))
    return WEIGHT_LEVELS[int(round(a * (len(WEIGHT_LEVELS) - 1)))]


def weight_text_color(a, vmax=1.0):
    return WHITE if a / vmax > 0.55 else INK


def mix(c1, c2, t):
    """Colour between c1 (t=0) and c2 (t=1), as a hex string."""
    a = np.array(matplotlib.colors.to_rgb(c1))
    b = np.array(matplotlib.colors.to_rgb(c2))
    return matplotlib.colors.to_hex((1 - t) * a + t * b)


# ---------------------------------------------------------------------------------------------
# Figure
# ---------------------------------------------------------------------------------------------

def new_figure(width, height, title=None, subtitle=None):
    """A white figure of width x height inches with one axes in inch coordinates."""
    fig = Figure(figsize=(width, height), dpi=DPI, facecolor=WHITE)
    FigureCanvasAgg(fig)
    ax = fig.add_axes([0, 0, 1, 1])
    ax.set_xlim(0, width)
    ax.set_ylim(0, height)
    ax.set_aspect("equal")
    ax.axis("off")
    ax.set_facecolor(WHITE)
    if title:
        ax.text(0.18, height - 0.2, title, fontsize=FS_TITLE, fontweight="bold", color=INK,
                ha="left", va="top", family=FONT)
    if subtitle:
        ax.text(0.18, height - 0.5, subtitle, fontsize=FS, color=MUTED, ha="left", va="top",
                family=FONT)
    return fig, ax


def save_png(fig, path, dpi=DPI, colors=256):
    """Save deterministically and small; returns (width_px, height_px, bytes).

    The figure is rendered by matplotlib, then reduced to an adaptive palette of `colors`
    colours with Pillow (a dependency of matplotlib), without dithering. The diagrams use a few
    flat colours, so nothing visible is lost (the largest change of any pixel is about 20/765 in
    RGB) and the file is three times smaller. (Median-cut quantisation is NOT used: it merges
    the colours of thin lines, e.g. turns a purple arrow grey.) The PNG
    carries no date or software metadata, so the same code gives the same bytes."""
    from PIL import Image

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, facecolor=WHITE, metadata={"Software": None})
    buf.seek(0)
    img = Image.open(buf).convert("RGB")
    if colors:
        img = img.quantize(colors=colors, method=Image.Quantize.MAXCOVERAGE,
                           dither=Image.Dither.NONE)
    out = io.BytesIO()
    img.save(out, format="PNG", optimize=True)
    data = out.getvalue()
    with open(path, "wb") as f:
        f.write(data)
    return img.size[0], img.size[1], len(data)


# ---------------------------------------------------------------------------------------------
# Boxes
# ---------------------------------------------------------------------------------------------

@dataclass
class Box:
    """A rectangle given by its centre and size, with anchor points on its sides."""
    cx: float
    cy: float
    w: float
    h: float

    @property
    def left(self):
        return (self.cx - self.w / 2, self.cy)

    @property
    def right(self):
        return (self.cx + self.w / 2, self.cy)

    @property
    def top(self):
        return (self.cx, self.cy + self.h / 2)

    @property
    def bottom(self):
        return (self.cx, self.cy - self.h / 2)

    @property
    def x0(self):
        return self.cx - self.w / 2

    @property
    def x1(self):
        return self.cx + self.w / 2

    @property
    def y0(self):
        return self.cy - self.h / 2

    @property
    def y1(self):
        return self.cy + self.h / 2

    def at(self, fx, fy):
        """Point at fractions (fx, fy) of the box, (0, 0) = bottom left, (1, 1) = top right."""
        return (self.x0 + fx * self.w, self.y0 + fy * self.h)


def box(ax, cx, cy, w, h, text="", role="op", fs=FS, weight="normal", ls="-", lw=1.2,
        rounding=0.07, fill=None, edge=None, text_color=None, hatch=None, zorder=3,
        linespacing=1.25, family=FONT):
    """A rounded box centred at (cx, cy) in the colours of `role`, with centred text."""
    r = ROLES[role]
    patch = FancyBboxPatch((cx - w / 2, cy - h / 2), w, h,
                           boxstyle=f"round,pad=0,rounding_size={min(rounding, w / 2, h / 2)}",
                           facecolor=fill or r.fill, edgecolor=edge or r.edge, lw=lw, ls=ls,
                           hatch=hatch, zorder=zorder)
    ax.add_patch(patch)
    if text:
        ax.text(cx, cy, text, fontsize=fs, fontweight=weight, color=text_color or r.text,
                ha="center", va="center", zorder=zorder + 1, linespacing=linespacing,
                family=family)
    return Box(cx, cy, w, h)


def rect(ax, x0, y0, w, h, fill, edge=None, lw=0.8, hatch=None, zorder=3, ls="-"):
    """A plain (square-cornered) rectangle from its lower-left corner."""
    ax.add_patch(Rectangle((x0, y0), w, h, facecolor=fill, edgecolor=edge or fill, lw=lw,
                           hatch=hatch, zorder=zorder, ls=ls))
    return Box(x0 + w / 2, y0 + h / 2, w, h)


def container(ax, x0, y0, w, h, role="encoder", label=None, label_side="left", fs=FS,
              lw=1.2, zorder=1):
    """A large, light rounded region that groups several boxes (an encoder layer, a panel)."""
    r = ROLES[role]
    fill = mix(r.fill, WHITE, 0.45)
    ax.add_patch(FancyBboxPatch((x0, y0), w, h, boxstyle="round,pad=0,rounding_size=0.12",
                                facecolor=fill, edgecolor=r.edge, lw=lw, zorder=zorder))
    if label:
        if label_side == "left":
            ax.text(x0 - 0.1, y0 + h / 2, label, fontsize=fs, color=r.text, ha="right",
                    va="center", fontweight="bold", family=FONT)
        elif label_side == "right":
            ax.text(x0 + w + 0.1, y0 + h / 2, label, fontsize=fs, color=r.text, ha="left",
                    va="center", fontweight="bold", family=FONT)
        elif label_side == "top":
            ax.text(x0 + 0.1, y0 + h - 0.08, label, fontsize=fs, color=r.text, ha="left",
                    va="top", fontweight="bold", family=FONT)
    return Box(x0 + w / 2, y0 + h / 2, w, h)


def panel(ax, x0, y0, w, h, title=None, fs=FS, fill="#FBFBFB", edge="#C8C8C8", zorder=0):
    """A light frame around one panel of a multi-panel diagram, with a bold title at its top left."""
    ax.add_patch(FancyBboxPatch((x0, y0), w, h, boxstyle="round,pad=0,rounding_size=0.1",
                                facecolor=fill, edgecolor=edge, lw=1.0, zorder=zorder))
    if title:
        ax.text(x0 + 0.14, y0 + h - 0.2, title, fontsize=fs, fontweight="bold", color=INK,
                ha="left", va="center", family=FONT, zorder=zorder + 5)
    return Box(x0 + w / 2, y0 + h / 2, w, h)


def outline(ax, x0, y0, w, h, color=INK, lw=1.2, ls="-", zorder=5):
    """An unfilled rectangle (to frame or highlight part of a matrix)."""
    ax.add_patch(Rectangle((x0, y0), w, h, facecolor="none", edgecolor=color, lw=lw, ls=ls,
                           zorder=zorder))


def dot(ax, x, y, color=INK, r=0.035, zorder=4):
    """A junction dot where a line branches."""
    ax.add_patch(Circle((x, y), r, color=color, zorder=zorder))


def marker(ax, x, y, color=ACCENT, size=0.08, zorder=5):
    """A small triangle pointing up at (x, y) (its tip)."""
    ax.add_patch(Polygon([(x, y), (x - size, y - 1.7 * size), (x + size, y - 1.7 * size)],
                         closed=True, color=color, zorder=zorder))


def op_circle(ax, cx, cy, symbol, r=0.13, role="op", fs=FS + 2, lw=1.2, zorder=3):
    """A small circle with an operator inside (+, ×, ⊙, ~)."""
    ro = ROLES[role]
    ax.add_patch(Circle((cx, cy), r, facecolor=ro.fill, edgecolor=ro.edge, lw=lw, zorder=zorder))
    ax.text(cx, cy, symbol, fontsize=fs, ha="center", va="center", color=ro.text,
            zorder=zorder + 1, family=FONT)
    return Box(cx, cy, 2 * r, 2 * r)


def text(ax, x, y, s, fs=FS, color=INK, ha="center", va="center", weight="normal",
         style="normal", rotation=0, zorder=5, family=FONT, **kw):
    return ax.text(x, y, s, fontsize=fs, color=color, ha=ha, va=va, fontweight=weight,
                   fontstyle=style, rotation=rotation, zorder=zorder, family=family, **kw)


def note(ax, x, y, s, fs=FS_SMALL, ha="left", va="center", color=INK, fill="#F6F6F6",
         edge="#BDBDBD", pad=0.25, zorder=5, linespacing=1.35):
    """A short remark in a light grey rounded frame."""
    return ax.text(x, y, s, fontsize=fs, color=color, ha=ha, va=va, zorder=zorder, family=FONT,
                   linespacing=linespacing,
                   bbox=dict(boxstyle=f"round,pad={pad}", facecolor=fill, edgecolor=edge, lw=0.9))


# ---------------------------------------------------------------------------------------------
# Arrows and lines
# ---------------------------------------------------------------------------------------------

def _arrowstyle(head, head_size):
    if head == "end":
        return f"-|>,head_length={0.55 * head_size},head_width={0.27 * head_size}"
    if head == "both":
        return f"<|-|>,head_length={0.55 * head_size},head_width={0.27 * head_size}"
    return "-"


def arrow(ax, *points, color=INK, lw=1.3, ls="-", head="end", head_size=1.0, zorder=2):
    """An arrow along a polyline through `points` (two or more (x, y) pairs); the tip is at the
    last point. Route arrows with right-angle corners so that they never cross a box."""
    pts = np.asarray(points, dtype=float)
    codes = [Path.MOVETO] + [Path.LINETO] * (len(pts) - 1)
    patch = FancyArrowPatch(path=Path(pts, codes), arrowstyle=_arrowstyle(head, head_size),
                            mutation_scale=12, color=color, lw=lw, ls=ls, zorder=zorder,
                            joinstyle="miter", capstyle="butt")
    ax.add_patch(patch)
    return patch


def curved_arrow(ax, p, q, rad=0.3, color=INK, lw=1.3, ls="-", head="end", head_size=1.0,
                 zorder=2):
    """A curved arrow from p to q (rad > 0 bends to the left of the direction p -> q)."""
    patch = FancyArrowPatch(p, q, connectionstyle=f"arc3,rad={rad}",
                            arrowstyle=_arrowstyle(head, head_size), mutation_scale=12,
                            color=color, lw=lw, ls=ls, zorder=zorder, shrinkA=0, shrinkB=0)
    ax.add_patch(patch)
    return patch


def line(ax, *points, color=INK, lw=1.2, ls="-", zorder=2):
    pts = np.asarray(points, dtype=float)
    ax.plot(pts[:, 0], pts[:, 1], color=color, lw=lw, ls=ls, zorder=zorder,
            solid_capstyle="butt", dash_capstyle="butt")


def brace(ax, p0, p1, depth=0.12, color=MUTED, lw=1.1, label=None, fs=FS_SMALL, gap=0.06,
          label_color=None, zorder=3, **text_kw):
    """A curly brace from p0 to p1; its tip points to the right of the direction p0 -> p1
    (so a brace drawn left to right points down). The label is placed beyond the tip."""
    p0, p1 = np.asarray(p0, float), np.asarray(p1, float)
    L = np.linalg.norm(p1 - p0)
    u = (p1 - p0) / L                      # along the brace
    n = np.array([u[1], -u[0]])            # towards the tip
    d = depth

    def P(s, t):                            # local (along, towards tip) -> data coordinates
        return p0 + s * u + t * n

    m = L / 2
    verts = [P(0, 0), P(0, d / 2), P(min(d, m / 2), d / 2), P(m - min(d, m / 2), d / 2),
             P(m, d / 2), P(m, d), P(m, d / 2), P(m + min(d, m / 2), d / 2),
             P(L - min(d, m / 2), d / 2), P(L, d / 2), P(L, 0)]
    codes = [Path.MOVETO, Path.CURVE3, Path.CURVE3, Path.LINETO, Path.CURVE3, Path.CURVE3,
             Path.CURVE3, Path.CURVE3, Path.LINETO, Path.CURVE3, Path.CURVE3]
    ax.add_patch(PathPatch(Path(verts, codes), facecolor="none", edgecolor=color, lw=lw,
                           zorder=zorder))
    if label is not None:
        tip = P(m, d + gap)
        kw = dict(ha="center", va="center")
        if abs(n[1]) > 0.7:                 # tip up or down
            kw["va"] = "top" if n[1] < 0 else "bottom"
        else:
            kw["ha"] = "left" if n[0] > 0 else "right"
        kw.update(text_kw)
        text(ax, tip[0], tip[1], label, fs=fs, color=label_color or color, **kw)
    return P(m, d)


# ---------------------------------------------------------------------------------------------
# Vectors, matrices, bars
# ---------------------------------------------------------------------------------------------

def vector(ax, cx, cy, n, cell=0.16, role="encoder", orient="v", fills=None, edge=None,
           lw=0.9, hatch=None, zorder=3):
    """A vector drawn as n touching cells (orient 'v': a column, 'h': a row), centred at
    (cx, cy). `fills` may give one colour per cell. Returns its bounding Box."""
    r = ROLES[role]
    edge = edge or r.edge
    if orient == "v":
        w, h = cell, n * cell
    else:
        w, h = n * cell, cell
    x0, y0 = cx - w / 2, cy - h / 2
    for k in range(n):
        f = fills[k] if fills is not None else r.fill
        if orient == "v":
            xy = (x0, y0 + (n - 1 - k) * cell)
        else:
            xy = (x0 + k * cell, y0)
        ax.add_patch(Rectangle(xy, cell, cell, facecolor=f, edgecolor=edge, lw=lw, hatch=hatch,
                               zorder=zorder))
    return Box(cx, cy, w, h)


def matrix(ax, cx, cy, rows, cols, cell=0.16, role="op", fills=None, edge=None, lw=0.8,
           cell_h=None, hatch=None, zorder=3, texts=None, fs=FS_SMALL, text_colors=None):
    """A rows x cols matrix of cells centred at (cx, cy). `fills` is None (role colour), one
    colour, or a rows x cols nested list of colours. `texts` optionally writes in the cells."""
    r = ROLES[role]
    ch = cell_h or cell
    edge = edge or r.edge
    w, h = cols * cell, rows * ch
    x0, y0 = cx - w / 2, cy - h / 2
    for i in range(rows):
        for j in range(cols):
            if fills is None:
                f = r.fill
            elif isinstance(fills, str):
                f = fills
            else:
                f = fills[i][j]
            hh = hatch[i][j] if isinstance(hatch, (list, tuple)) else hatch
            ax.add_patch(Rectangle((x0 + j * cell, y0 + (rows - 1 - i) * ch), cell, ch,
                                   facecolor=f, edgecolor=edge, lw=lw, hatch=hh, zorder=zorder))
            if texts is not None and texts[i][j] not in (None, ""):
                tc = text_colors[i][j] if text_colors is not None else INK
                text(ax, x0 + (j + 0.5) * cell, y0 + (rows - 0.5 - i) * ch, texts[i][j], fs=fs,
                     color=tc, zorder=zorder + 1)
    return Box(cx, cy, w, h)


def cell_center(b, rows, cols, i, j):
    """Centre of cell (i, j) (row i from the top) of a matrix drawn in Box b."""
    cw, ch = b.w / cols, b.h / rows
    return (b.x0 + (j + 0.5) * cw, b.y1 - (i + 0.5) * ch)


def bars(ax, x0, y0, values, width, height, vmax=None, color=WEIGHT_BAR, gap=0.25,
         colors=None, baseline=True, orient="v", hatches=None, edge=None, zorder=3, lw=0.6):
    """A small bar chart: bars grow up from (x0, y0) (orient 'v') or right from x0 (orient 'h',
    bars stacked downwards from y0 + height). Returns the bar centres along the axis."""
    values = np.asarray(values, float)
    n = len(values)
    vmax = vmax or max(values.max(), 1e-9)
    centres = []
    if orient == "v":
        step = width / n
        bw = step * (1 - gap)
        for k, v in enumerate(values):
            c = colors[k] if colors is not None else color
            xb = x0 + k * step + (step - bw) / 2
            hb = height * v / vmax
            ax.add_patch(Rectangle((xb, y0), bw, hb, facecolor=c, edgecolor=edge or c, lw=lw,
                                   hatch=hatches[k] if hatches else None, zorder=zorder))
            centres.append(xb + bw / 2)
        if baseline:
            line(ax, (x0, y0), (x0 + width, y0), color=MUTED, lw=0.9, zorder=zorder + 1)
    else:
        step = height / n
        bh = step * (1 - gap)
        for k, v in enumerate(values):
            c = colors[k] if colors is not None else color
            yb = y0 + height - (k + 1) * step + (step - bh) / 2
            wb = width * v / vmax
            ax.add_patch(Rectangle((x0, yb), wb, bh, facecolor=c, edgecolor=edge or c, lw=lw,
                                   hatch=hatches[k] if hatches else None, zorder=zorder))
            centres.append(yb + bh / 2)
        if baseline:
            line(ax, (x0, y0), (x0, y0 + height), color=MUTED, lw=0.9, zorder=zorder + 1)
    return centres


# ---------------------------------------------------------------------------------------------
# Legend
# ---------------------------------------------------------------------------------------------

def text_width(ax, t):
    """Width in inches of a drawn Text artist."""
    fig = ax.figure
    renderer = fig.canvas.get_renderer()
    return t.get_window_extent(renderer).width / fig.dpi


def legend(ax, x, y, items, fs=FS_SMALL, gap=0.3, swatch=0.2, ha="left"):
    """A one-line legend starting at (x, y). Each item is (style, label) where style is a role
    name, a colour, ('line', colour, linestyle, lw) or ('hatch', fill, edge, hatch).
    ha='center' or 'right' places the whole line relative to x."""
    drawn = []
    cursor = 0.0
    for style, lbl in items:
        t = text(ax, 0, y, lbl, fs=fs, ha="left", color=INK)
        w = text_width(ax, t)
        drawn.append((style, t, cursor))
        cursor += swatch + 0.08 + w + gap
    total = cursor - gap
    if ha == "center":
        x = x - total / 2
    elif ha == "right":
        x = x - total
    for style, t, off in drawn:
        xs = x + off
        if isinstance(style, tuple) and style[0] == "line":
            _, c, ls, lw = style
            line(ax, (xs, y), (xs + swatch, y), color=c, ls=ls, lw=lw, zorder=5)
        elif isinstance(style, tuple) and style[0] == "hatch":
            _, f, e, h = style
            rect(ax, xs, y - swatch / 2, swatch, swatch, f, edge=e, hatch=h, zorder=5)
        else:
            if style in ROLES:
                f, e = ROLES[style].fill, ROLES[style].edge
            else:
                f, e = style, style
            rect(ax, xs, y - swatch / 2, swatch, swatch, f, edge=e, lw=0.9, zorder=5)
        t.set_x(xs + swatch + 0.08)
    return total
