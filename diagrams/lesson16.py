"""Lesson 16: serving attention — a paged key/value cache (block tables, a shared prefix, copy-on-write),
static against continuous batching, and a step of speculative decoding."""
from .style import (
    ACCENT,
    FS,
    FS_SMALL,
    INK,
    MUTED,
    ROLES,
    arrow,
    box,
    legend,
    line,
    new_figure,
    note,
    rect,
    text,
)

SEQ_A, SEQ_B = ROLES["query"], ROLES["encoder"]       # two sequences, one colour each
SHARED = ROLES["key"]                                 # a block two tables list
FREE = ROLES["pruned"]


def paged_cache():
    W, H = 9.0, 5.4
    fig, ax = new_figure(W, H, "A paged key/value cache: block tables into one pool of blocks",
                         "blocks of 4 positions; two requests forked from one prompt, <bos> A man in a")
    bs, cell = 4, 0.25
    a = ["<bos>", "A", "man", "in", "a", "red", "shirt"]          # request A: the prompt, then "red shirt"
    b = ["<bos>", "A", "man", "in", "a", "blue"]                 # request B: the prompt, then "blue"
    step = cell * 2.1
    for tokens, r, name, y in ((a, SEQ_A, "request A", 4.25), (b, SEQ_B, "request B", 3.4)):
        text(ax, 0.25, y + cell / 2, name, fs=FS, ha="left", color=r.text, weight="bold")
        for t, tok in enumerate(tokens):
            x = 1.35 + (t + 0.3 * (t // bs)) * step
            fill, edge = (SHARED.fill, SHARED.edge) if t < bs else (r.fill, r.edge)
            rect(ax, x, y, cell * 2, cell, fill, edge=edge, lw=0.9)
            text(ax, x + cell, y + cell / 2, tok, fs=FS_SMALL - 1, color=INK)
        for blk in range((len(tokens) + bs - 1) // bs):
            text(ax, 1.35 + blk * (bs + 0.3) * step + 2 * cell, y - 0.15, f"logical block {blk}",
                 fs=FS_SMALL - 1, color=MUTED)
    tables = (("table A", [5, 2], SEQ_A, 4.25), ("table B", [5, 7], SEQ_B, 3.4))
    for name, entries, r, y in tables:
        text(ax, 6.2, y + cell / 2, name, fs=FS_SMALL, ha="left", color=r.text)
        for i, e in enumerate(entries):
            box(ax, 7.05 + i * 0.45, y + cell / 2, 0.38, 0.3, str(e), role="op", fs=FS_SMALL)
    y0 = 1.2
    text(ax, 0.25, y0 + 0.55, "the pool\n(physical blocks)", fs=FS, ha="left", color=INK, va="center")
    owners = {5: (SHARED, "shared: count 2"), 2: (SEQ_A, "A's copy"), 7: (SEQ_B, "B's")}
    for blk in range(10):
        x = 1.75 + blk * 0.72
        r, label = owners.get(blk, (FREE, "free"))
        box(ax, x, y0 + 0.55, 0.62, 0.5, str(blk), role="op", fill=r.fill, edge=r.edge, fs=FS)
        text(ax, x, y0 + 0.12, label, fs=FS_SMALL - 1, color=r.text if blk in owners else MUTED)
    for _, entries, r, y in tables:
        for i, e in enumerate(entries):
            arrow(ax, (7.05 + i * 0.45, y + cell / 2 - 0.16), (1.75 + e * 0.72, y0 + 0.8), color=r.edge, lw=1.0)
    note(ax, 0.3, 0.72, "After the fork both tables listed blocks 5 and 7. A wrote 'red' first, into block 7, which B "
                        "shared:\nA got a copy of it (block 2: copy-on-write) and wrote there; B, now alone in "
                        "block 7, wrote 'blue' in place.", fs=FS_SMALL)
    legend(ax, 0.3, 0.22, [(SHARED.fill, "a block both tables list"), (SEQ_A.fill, "A's own"),
                           (SEQ_B.fill, "B's own"), (FREE.fill, "on the free list")])
    return fig


def continuous_batching():
    W, H = 9.0, 5.0
    fig, ax = new_figure(W, H, "Static against continuous batching (4 rows, the same 7 requests)",
                         "a bar is a request decoding, one step a column; hatched: a row that computes nothing useful")
    lengths = [5, 2, 7, 3, 4, 6, 2]
    colors = ["#E2D4F4", "#CFE2F7", "#FFDDB8", "#D5EDD8", "#FAD5CE", "#ECE5D8", "#CDEDE8"]
    step, rows, x0 = 0.36, 4, 1.55

    def lane(y, schedule, title):
        text(ax, 0.2, y + rows * 0.3 / 2, title, fs=FS, ha="left", weight="bold")
        for (row, start, n, req, pad) in schedule:
            yy = y + (rows - 1 - row) * 0.3
            rect(ax, x0 + start * step, yy, n * step, 0.24, colors[req], edge="#8A8A8A", lw=0.7)
            text(ax, x0 + (start + n / 2) * step, yy + 0.12, f"r{req}", fs=FS_SMALL - 1)
            if pad:
                rect(ax, x0 + (start + n) * step, yy, pad * step, 0.24, FREE.fill, edge=FREE.edge, hatch="////",
                     lw=0.6)
        return max(s + n + p for _, s, n, _, p in schedule)

    # static: requests 0-3 together until the longest (7) ends, then 4-6
    first, second = lengths[:4], lengths[4:]
    static = [(i, 0, n, i, max(first) - n) for i, n in enumerate(first)]
    static += [(i, max(first), n, 4 + i, max(second) - n) for i, n in enumerate(second)]
    end_static = lane(2.55, static, "static")
    # continuous: a row takes the next request at the step after its last one ends
    free_at, cont = [0] * rows, []
    for req, n in enumerate(lengths):
        row = min(range(rows), key=lambda i: free_at[i])
        cont.append((row, free_at[row], n, req, 0))
        free_at[row] += n
    end_cont = lane(0.75, cont, "continuous")
    for y, end in ((2.55, end_static), (0.75, end_cont)):
        line(ax, (x0 + end * step, y - 0.08), (x0 + end * step, y + rows * 0.3), color=ACCENT, lw=1.6)
        text(ax, x0 + end * step + 0.08, y + rows * 0.3 - 0.1, f"all done: {end} steps", fs=FS_SMALL, ha="left",
             color=ACCENT)
    arrow(ax, (x0, 0.45), (x0 + 14 * step, 0.45), color=MUTED, lw=1.0)
    text(ax, x0 + 14 * step + 0.1, 0.45, "decoding steps", fs=FS_SMALL, ha="left", color=MUTED)
    note(ax, 6.9, 3.2, "static: a new batch only\nwhen the longest request\nof the last one ends", fs=FS_SMALL)
    note(ax, 6.9, 1.35, "continuous: the scheduler\nruns every step; a freed\nrow is filled at once", fs=FS_SMALL)
    return fig


def speculative():
    W, H = 9.0, 4.6
    fig, ax = new_figure(W, H, "Speculative decoding: k = 4 drafted tokens, checked in one target pass",
                         "accept x_i with probability min(1, p_i(x_i) / q_i(x_i)); at the first rejection, draw "
                         "from norm(max(0, p_i − q_i))")
    ctx = ["A", "man", "in"]
    drafts = ["a", "red", "hat", "on"]
    x0, w = 1.75, 0.72
    text(ax, 0.2, 3.35, "draft model:\n4 small passes", fs=FS_SMALL, ha="left", color=ROLES["query"].text)
    for i, t in enumerate(ctx):
        box(ax, x0 + i * w, 2.55, 0.66, 0.34, t, role="op", fs=FS_SMALL)
    for i, t in enumerate(drafts):
        x = x0 + (len(ctx) + i) * w
        box(ax, x, 3.35, 0.66, 0.34, t, role="query", fs=FS_SMALL)
        text(ax, x, 3.68, f"x{i + 1} ~ q{i + 1}", fs=FS_SMALL - 1, color=ROLES["query"].text)
        arrow(ax, (x, 3.17), (x, 2.74), color=ROLES["query"].edge, lw=1.0)
        box(ax, x, 2.55, 0.66, 0.34, t, role="op", fs=FS_SMALL)
    text(ax, 0.2, 1.75, "target model:\nONE pass over\nall k + 1", fs=FS_SMALL, ha="left", color=ROLES["value"].text)
    rect(ax, x0 - 0.38, 1.45, (len(ctx) + len(drafts)) * w + 0.1, 0.6, ROLES["value"].fill,
         edge=ROLES["value"].edge, lw=1.0)
    for i in range(len(drafts) + 1):
        x = x0 + (len(ctx) - 1 + i) * w
        text(ax, x, 1.75, f"p{i + 1}", fs=FS_SMALL, color=ROLES["value"].text)
    verdict = [("✓", "accepted", "#2A9D8F"), ("✓", "accepted", "#2A9D8F"), ("✗", "rejected", ACCENT)]
    for i, (mark, word, color) in enumerate(verdict):
        x = x0 + (len(ctx) + i) * w
        text(ax, x, 1.1, mark, fs=FS + 3, color=color, weight="bold")
        text(ax, x, 0.82, word, fs=FS_SMALL - 1, color=color)
    x = x0 + (len(ctx) + 2) * w
    box(ax, x, 0.4, 1.1, 0.32, "'cap' ~ residual", role="output", fs=FS_SMALL - 1)
    text(ax, x0 + (len(ctx) + 3) * w, 1.0, "(dropped)", fs=FS_SMALL - 1, color=MUTED)
    note(ax, 7.0, 2.7, "this pass yields 3 tokens:\n'a', 'red' and 'cap'\n(between 1 and k + 1)\n\n"
                       "all 4 accepted: a 5th,\nthe bonus, drawn from p5", fs=FS_SMALL)
    return fig
