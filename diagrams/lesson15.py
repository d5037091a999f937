"""Lesson 15: what multi-head latent attention caches, the patterns of local, global and linear layers with a local
layer's ring buffer, and the delta rule's state update."""
from .style import (
    ACCENT,
    FS,
    FS_SMALL,
    MUTED,
    ROLES,
    arrow,
    box,
    line,
    matrix,
    new_figure,
    note,
    outline,
    panel,
    text,
    vector,
)


def latent_cache():
    W, H = 9.0, 5.6
    fig, ax = new_figure(W, H, "What the cache holds: multi-head attention and latent attention",
                         "per token and layer: every head's key and value (2 h d_h numbers), or one latent c_t and one "
                         "RoPE key (d_c + d_R)")
    # left: multi-head attention, every head's key and value cached
    panel(ax, 0.2, 0.35, 3.35, 4.35, "multi-head attention (h = 4)")
    x = box(ax, 0.75, 2.4, 0.55, 0.42, "h_t", role="op", fs=FS)
    for i in range(4):
        y = 3.75 - 0.5 * i
        k = vector(ax, 2.05, y, 4, cell=0.13, role="key", orient="h")
        v = vector(ax, 2.85, y, 4, cell=0.13, role="value", orient="h")
        text(ax, k.cx, y + 0.2, f"k_{i + 1}", fs=FS_SMALL, color=ROLES["key"].text)
        text(ax, v.cx, y + 0.2, f"v_{i + 1}", fs=FS_SMALL, color=ROLES["value"].text)
        arrow(ax, x.right, (1.35, x.cy), (1.35, y), (k.x0 - 0.05, y), lw=0.9)
    outline(ax, 1.7, 1.95, 1.5, 2.3, color=ACCENT, lw=1.5)
    text(ax, 2.45, 1.65, "cached: 2 h d_h numbers", fs=FS_SMALL, color=ACCENT)
    text(ax, 1.9, 0.75, "DeepSeek-V3's sizes: 32,768 per layer", fs=FS_SMALL, color=MUTED)

    # right: MLA, one latent and one RoPE key cached; keys and values rebuilt (or never built, absorbed)
    panel(ax, 3.7, 0.35, 5.15, 4.35, "multi-head latent attention")
    hx = box(ax, 4.2, 2.4, 0.55, 0.42, "h_t", role="op", fs=FS)
    down = box(ax, 5.2, 3.3, 0.8, 0.38, "W_DKV", role="op", fs=FS_SMALL)
    rope = box(ax, 5.2, 1.45, 0.95, 0.38, "W_KR, RoPE", role="op", fs=FS_SMALL)
    c = vector(ax, 6.2, 3.3, 4, cell=0.15, role="memory", orient="h")
    kr = vector(ax, 6.2, 1.45, 2, cell=0.15, role="key", orient="h")
    text(ax, c.cx, c.y1 + 0.18, "latent c_t (d_c)", fs=FS_SMALL, color=ROLES["memory"].text)
    text(ax, kr.cx, kr.y0 - 0.2, "RoPE key k^R_t (d_R), one for all heads", fs=FS_SMALL, color=ROLES["key"].text)
    arrow(ax, hx.top, (hx.cx, down.cy), down.left, lw=1.0)
    arrow(ax, hx.bottom, (hx.cx, rope.cy), rope.left, lw=1.0)
    arrow(ax, down.right, (c.x0 - 0.05, c.cy), lw=1.0)
    arrow(ax, rope.right, (kr.x0 - 0.05, kr.cy), lw=1.0)
    outline(ax, c.x0 - 0.08, kr.y0 - 0.08, c.w + 0.16, c.y1 - kr.y0 + 0.16, color=ACCENT, lw=1.5)
    text(ax, 6.2, 2.4, "cached:\nd_c + d_R", fs=FS_SMALL, color=ACCENT)
    uk = box(ax, 7.95, 3.9, 1.5, 0.36, "W_UK → keys k^C_i", role="key", fs=FS_SMALL, ls="--")
    uv = box(ax, 7.95, 3.3, 1.5, 0.36, "W_UV → values v_i", role="value", fs=FS_SMALL, ls="--")
    arrow(ax, (c.x1 + 0.05, c.cy + 0.05), (7.0, c.cy + 0.05), (7.0, uk.cy), uk.left, lw=0.9, ls="--")
    arrow(ax, (c.x1 + 0.05, c.cy - 0.03), uv.left, lw=0.9, ls="--")
    note(ax, 6.85, 2.2, "absorbed decoding: W_UK\ngoes into the query, W_UV\ninto W_O: the dashed keys\n"
         "and values are never built", fs=FS_SMALL)
    text(ax, 6.25, 0.75, "DeepSeek-V3's sizes: 512 + 64 = 576 per layer", fs=FS_SMALL, color=MUTED)
    return fig


_KIND = {"F": ("global", "query"), "L": ("local", "key"), "G": ("Gated\nDeltaNet", "value")}


def layer_pattern():
    W, H = 9.0, 5.9
    fig, ax = new_figure(W, H, "Local, global and linear layers, and a local layer's ring buffer",
                         "12 layers, bottom to top from left to right; the cache of a local layer never holds more "
                         "than its window")
    rows = [("all global (lesson 12)", "F" * 12), ("Gemma 3: 5 local : 1 global", "LLLLLF" * 2),
            ("Qwen3-Next: 3 Gated DeltaNet : 1 global", "GGGF" * 3)]
    for r, (name, pattern) in enumerate(rows):
        y = 4.5 - 0.85 * r
        text(ax, 0.25, y + 0.33, name, fs=FS, ha="left")
        for i, kind in enumerate(pattern):
            label, role = _KIND[kind]
            box(ax, 0.55 + 0.66 * i, y - 0.05, 0.58, 0.42, {"F": "G", "L": "L", "G": "D"}[kind], role=role,
                fs=FS_SMALL, weight="bold")
    text(ax, 0.25, 2.4, "G: global attention (its cache grows with the context)    L: local, window W (W positions "
         "cached)    D: Gated DeltaNet (a fixed state)", fs=FS_SMALL, ha="left", color=MUTED)
    # the ring buffer: W = 4 slots after position 9; position 10 goes into slot 10 mod 4 = 2
    text(ax, 0.25, 1.45, "ring buffer, W = 4, after position 9:", fs=FS, ha="left")
    held = [8, 9, 6, 7]
    for s, pos in enumerate(held):
        b = box(ax, 3.75 + 0.72 * s, 1.45, 0.62, 0.42, f"pos {pos}", role="key", fs=FS_SMALL)
        text(ax, b.cx, b.y0 - 0.15, f"slot {s}", fs=FS_SMALL, color=MUTED)
    outline(ax, 3.75 + 0.72 * 2 - 0.34, 1.21, 0.68, 0.48, color=ACCENT, lw=1.6)
    new = box(ax, 7.6, 1.45, 0.75, 0.42, "pos 10", role="key", fs=FS_SMALL, weight="bold")
    arrow(ax, (new.cx, new.y1), (new.cx, 1.9), (3.75 + 0.72 * 2, 1.9), (3.75 + 0.72 * 2, 1.69), color=ACCENT)
    text(ax, 6.3, 2.03, "10 mod 4 = 2: overwrites position 6", fs=FS_SMALL, color=ACCENT)
    note(ax, 0.3, 0.55, "Keys are rotated (RoPE) at their own position before they are cached, so a slot's place "
         "does not matter to the scores;\nthe slot table (which position each slot holds) tells the next query "
         "which slots are in its window.", fs=FS_SMALL)
    return fig


def delta_state():
    W, H = 9.0, 4.5
    fig, ax = new_figure(W, H, "The delta rule: a state that is read, then rewritten",
                         "one head, one token t: S maps keys to values (d_v x d_k), and it is all the layer keeps")
    cell = 0.19
    s0 = matrix(ax, 1.0, 2.5, 4, 5, cell=cell, role="memory")
    text(ax, s0.cx, s0.y1 + 0.22, r"$S_{t-1}$", fs=FS + 1)
    k = vector(ax, 2.2, 2.5, 5, cell=cell, role="key", orient="v")
    text(ax, k.cx, k.y1 + 0.22, r"$k_t$", fs=FS + 1, color=ROLES["key"].text)
    old = vector(ax, 3.3, 2.5, 4, cell=cell, role="memory", orient="v")
    text(ax, old.cx, old.y1 + 0.42, "what S holds\nunder k_t: " + r"$S_{t-1} k_t$", fs=FS_SMALL,
         color=ROLES["memory"].text)
    arrow(ax, (s0.x1 + 0.05, 2.5), (k.x0 - 0.05, 2.5), lw=0.9)
    arrow(ax, (k.x1 + 0.05, 2.5), (old.x0 - 0.05, 2.5), lw=0.9)
    v = vector(ax, 4.45, 2.5, 4, cell=cell, role="value", orient="v")
    text(ax, v.cx, v.y1 + 0.22, r"$v_t$", fs=FS + 1, color=ROLES["value"].text)
    err = box(ax, 5.65, 2.5, 1.35, 0.5, r"$\beta_t\,(v_t - S_{t-1} k_t)$", role="op", fs=FS_SMALL)
    arrow(ax, (old.cx, old.y0 - 0.05), (old.cx, 1.7), (err.cx - 0.2, 1.7), (err.cx - 0.2, err.y0), lw=0.9)
    arrow(ax, (v.x1 + 0.05, 2.5), err.left, lw=0.9)
    s1 = matrix(ax, 7.35, 2.5, 4, 5, cell=cell, role="memory")
    text(ax, s1.cx, s1.y1 + 0.25, r"$S_t = S_{t-1} + \beta_t (v_t - S_{t-1} k_t)\, k_t^\top$", fs=FS_SMALL)
    arrow(ax, err.right, (s1.x0 - 0.05, 2.5), lw=0.9)
    text(ax, 6.65, 2.7, r"$\otimes\, k_t$", fs=FS_SMALL)
    o = box(ax, 8.55, 2.5, 0.6, 0.4, r"$o_t$", role="output", fs=FS)
    arrow(ax, (s1.x1 + 0.05, 2.5), o.left, lw=0.9)
    text(ax, 8.55, 2.05, r"$= S_t\, q_t$", fs=FS_SMALL, color=ROLES["output"].text)
    line(ax, (s0.cx, s0.y0 - 0.1), (s0.cx, 1.2), color=MUTED, lw=0.9)
    text(ax, s0.cx, 1.05, r"Gated DeltaNet: $S_{t-1}$ first decays by $\alpha_t \in (0, 1]$", fs=FS_SMALL,
         color=MUTED, ha="left")
    note(ax, 0.3, 0.45, "Linear attention (lesson 13) only adds v_t k_tᵀ. The delta rule first removes what S held "
         "under k_t:\nwith β_t = 1 and a unit key, S_t k_t = v_t exactly, whatever S held before.", fs=FS_SMALL)
    return fig
