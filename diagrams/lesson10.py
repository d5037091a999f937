"""Lesson 10: beam search with beam size 2 on a toy model (the lesson computes the same trace)."""
import math

from .style import ACCENT, FS, FS_SMALL, INK, MUTED, ROLES, box, legend, line, new_figure, text, text_width

# the toy model: p(next token | prefix)
TOY = {
    (): {"A": 0.5, "The": 0.4, "One": 0.1},
    ("A",): {"dog": 0.4, "cat": 0.35, "<eos>": 0.25},
    ("The",): {"dog": 0.9, "cat": 0.05, "<eos>": 0.05},
    ("A", "dog"): {"runs": 0.5, "<eos>": 0.3, "sits": 0.2},
    ("The", "dog"): {"runs": 0.7, "sits": 0.2, "<eos>": 0.1},
}
BEAM = 2


def beam_trace():
    """Run beam search on TOY; returns {prefix: (prob, kept)} for every candidate, and the
    greedy path."""
    nodes = {}
    beam = [((), 1.0)]
    for _ in range(3):
        cands = []
        for prefix, p in beam:
            if prefix and prefix[-1] == "<eos>":
                continue
            for tok, q in TOY.get(prefix, {}).items():
                cands.append((prefix + (tok,), p * q))
        cands.sort(key=lambda c: -c[1])
        for i, (pre, p) in enumerate(cands):
            nodes[pre] = (p, i < BEAM)
        beam = cands[:BEAM]
    greedy, p = (), 1.0
    while greedy in TOY:
        tok, q = max(TOY[greedy].items(), key=lambda kv: kv[1])
        greedy, p = greedy + (tok,), p * q
    return nodes, greedy, p


def _minus(x):
    return f"{x:.2f}".replace("-", "−")


def beam_search():
    W, H = 9.0, 6.4
    fig, ax = new_figure(W, H, "Beam search, beam size 2: keep the 2 most probable prefixes at every step")
    nodes, greedy, p_greedy = beam_trace()
    pr = ROLES["pruned"]
    xs = [0.62, 2.3, 4.45, 6.6]
    nw, nh = 0.66, 0.3

    # rows, top to bottom (leaves), then parents at the middle of their children
    leaves = [("A", "dog", "runs"), ("A", "dog", "<eos>"), ("A", "dog", "sits"), ("A", "cat"),
              ("A", "<eos>"), ("The", "dog", "runs"), ("The", "dog", "sits"),
              ("The", "dog", "<eos>"), ("The", "cat"), ("The", "<eos>"), ("One",)]
    y_top, dy = 5.0, 0.36
    ypos, y = {}, y_top
    for k, lf in enumerate(leaves):
        if k in (5, 10):
            y -= 0.12                       # a little air between the subtrees
        ypos[lf] = y
        y -= dy

    def place(prefix):
        if prefix in ypos:
            return ypos[prefix]
        n = len(prefix)
        kids = list(dict.fromkeys(lf[:n + 1] for lf in leaves if lf[:n] == prefix and len(lf) > n))
        ys = [place(c) for c in kids]
        ypos[prefix] = (max(ys) + min(ys)) / 2
        return ypos[prefix]

    for pre in list(nodes):
        place(pre)
    place(())

    def pos(pre):
        return xs[len(pre)], ypos[pre]

    best = max((pre for pre in nodes if len(pre) == 3), key=lambda pre: nodes[pre][0])
    on_best = {best[:k] for k in range(4)}
    on_greedy = {greedy[:k] for k in range(4)}

    # edges
    for pre, (_, kept) in nodes.items():
        parent = pre[:-1]
        x0, y0 = pos(parent)
        x1, y1 = pos(pre)
        a = (x0 + (0.7 if parent == () else nw) / 2, y0)
        b = (x1 - nw / 2, y1)
        if kept:
            line(ax, a, b, color=INK, lw=2.4 if pre in on_best else 1.6, zorder=2)
        else:
            line(ax, a, b, color="#C9C9C9", lw=1.0, zorder=2)
        q = TOY[parent][pre[-1]]
        t = 0.8
        text(ax, a[0] + t * (b[0] - a[0]), a[1] + t * (b[1] - a[1]) + 0.1, f"{q:g}",
             fs=FS_SMALL, color=INK if kept else pr.text, zorder=6,
             bbox=dict(boxstyle="square,pad=0.05", facecolor="white", edgecolor="none"))
        if pre in on_greedy:
            off = 0.07
            line(ax, (a[0], a[1] - off), (b[0], b[1] - off), color=ACCENT, lw=1.8, ls=(0, (3, 2)),
                 zorder=3)

    # nodes
    box(ax, *pos(()), 0.7, nh, "⟨bos⟩", role="op", fs=FS_SMALL, edge=INK, lw=1.6)
    for pre, (p, kept) in nodes.items():
        x, y = pos(pre)
        tok = pre[-1].replace("<eos>", "⟨eos⟩")
        lp = math.log(p)
        if kept:
            box(ax, x, y, nw, nh, tok, role="op", fs=FS_SMALL, weight="bold", edge=INK,
                lw=2.2 if pre in on_best else 1.4)
            col = INK
        else:
            box(ax, x, y, nw, nh, tok, role="pruned", fs=FS_SMALL)
            col = pr.text
        label = f"{_minus(lp)}  ({p:.3g})"
        if pre in TOY:      # an inner node: its label goes under it, out of the edges' way
            text(ax, x - nw / 2, y - 0.26, label, fs=FS_SMALL, ha="left", color=col,
                 weight="bold")
        else:
            t = text(ax, x + nw / 2 + 0.06, y, label, fs=FS_SMALL, ha="left", color=col,
                     weight="bold" if kept else "normal")
            tag = "best" if pre == best else ("greedy" if pre == greedy else "")
            if tag:
                text(ax, x + nw / 2 + 0.06 + text_width(ax, t) + 0.12, y, "← " + tag,
                     fs=FS_SMALL, ha="left", weight="bold", color=INK if tag == "best" else ACCENT)

    # column headers
    heads = ["", "step 1: keep 2 of 3", "step 2: keep 2 of 6", "step 3: keep 2 of 6"]
    for k in range(1, 4):
        text(ax, xs[k] + 0.35, y_top + 0.55, heads[k], fs=FS, weight="bold")
    text(ax, xs[3] + 0.35, y_top + 0.3, "node: token, then the prefix's total ln p (and p)",
         fs=FS_SMALL, color=MUTED)

    # result
    p_best = nodes[best][0]
    yb = 0.45
    text(ax, 0.25, yb + 0.2, f"beam search:  {' '.join(best)}   ln p = {_minus(math.log(p_best))}"
         f"  (p = {p_best:.3g})", fs=FS, ha="left", weight="bold")
    text(ax, 0.25, yb - 0.1, f"greedy search:  {' '.join(greedy)}   ln p = {_minus(math.log(p_greedy))}"
         f"  (p = {p_greedy:.3g}):  the best first word led to a worse sentence",
         fs=FS, ha="left", color=ACCENT)
    legend(ax, W - 0.2, yb + 0.2, [(("line", INK, "-", 2.0), "kept in the beam"),
                                   (("line", "#C9C9C9", "-", 1.0), "pruned")], ha="right")
    legend(ax, W - 0.2, yb - 0.1, [(("line", ACCENT, (0, (3, 2)), 1.8), "greedy path")], ha="right")
    return fig


def data_parallel():
    """Data parallelism: the global batch shared out to N replicas, gradients all-reduced, one step everywhere."""
    from .style import arrow, container, rect

    W, H = 9.0, 5.9
    fig, ax = new_figure(W, H, "Data parallelism: N processes, N identical replicas, one averaged gradient")
    cols = [1.75, 4.5, 7.25]
    # the global batch, cut into the processes' parts
    text(ax, W / 2, 5.22, "the global batch: batch_tokens padded tokens per optimizer step, cut into N parts",
         fs=FS_SMALL, color=MUTED)
    cell_w = 0.5
    for r, cx in enumerate(cols):
        for j in range(4):
            rect(ax, cx - 2 * cell_w + j * cell_w + 0.02, 4.3, cell_w - 0.04, 0.3,
                 fill=ROLES["encoder"].fill, edge=ROLES["encoder"].edge)
        text(ax, cx, 4.82, f"part $\\mathcal{{B}}_{r}$ (micro-batches)", fs=FS_SMALL, color=ROLES["encoder"].text)
        arrow(ax, (cx, 4.28), (cx, 3.98))
        # one process: a replica of the model
        container(ax, cx - 1.22, 2.02, 2.44, 1.92, role="decoder", label=f"process {r} (GPU {r})",
                  label_side="top", fs=FS_SMALL)
        box(ax, cx, 3.2, 1.9, 0.42, "replica of the model θ", role="op", fs=FS_SMALL)
        box(ax, cx, 2.45, 1.9, 0.42, f"forward + backward: $g_{r}$", role="output", fs=FS_SMALL)
        arrow(ax, (cx, 2.98), (cx, 2.67))
        arrow(ax, (cx, 2.23), (cx, 1.72))
        arrow(ax, (cx, 1.08), (cx, 0.78))
        box(ax, cx, 0.55, 1.9, 0.42, "θ ← AdamW(θ, g)", role="op", fs=FS_SMALL)
    # the all-reduce that averages the gradients
    box(ax, W / 2, 1.4, W - 1.0, 0.62, "", role="norm")
    text(ax, W / 2, 1.5, "all-reduce: every process receives   g = (g₀ + g₁ + g₂) / N", fs=FS, weight="bold",
         color=ROLES["norm"].text)
    text(ax, W / 2, 1.22, "(DDP, during backward, in buckets of ~25 MB; N = 3 here)", fs=FS_SMALL, color=MUTED)
    line(ax, (cols[0] - 1.0, 0.24), (cols[-1] + 1.0, 0.24), color=ACCENT, lw=1.2)
    text(ax, W / 2, 0.12, "the same g and the same step everywhere: the replicas stay identical",
         fs=FS_SMALL, color=ACCENT)
    return fig
