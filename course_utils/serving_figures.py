"""Lesson 16's pictures: the pool and its block tables, a stream stepping through the scheduler (and its widget),
speculative decoding against k, latency against load.

    draw_pool(ax, tables, num_blocks, block_size, lengths)      # every block of the pool, coloured by its owner
    draw_trace(ax, trace, upto)                                 # who waited, ran, was preempted, step by step
    scheduler_widget(trace, num_blocks, block_size)             # a slider over the steps: the two pictures above
    plot_speculation(rows, title)                               # acceptance and speed-up against k, one line per draft
    plot_load(stream, title)                                    # TTFT and TPOT (p50, p99) and throughput against load
"""
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import ListedColormap

__all__ = ["draw_pool", "draw_trace", "scheduler_widget", "plot_speculation", "plot_load", "POLICY_STYLE"]

COLORS = plt.get_cmap("tab20").colors
POLICY_STYLE = {"sequential": dict(color="#6B6B6B", marker="o"), "static": dict(color="#E08A1E", marker="s"),
                "continuous": dict(color="#3C7DC4", marker="^"),
                "continuous + speculative": dict(color="#C2185B", marker="D")}


def draw_pool(ax, tables, num_blocks, block_size, lengths=None, title="the pool", per_row=16):
    """Block b of the pool as a cell, coloured by the request whose table lists it (hatched: two or more tables),
    the slots it fills written as n/block_size; white: free. tables: {request id: [block ids]}."""
    owner = np.full(num_blocks, -1)
    count = np.zeros(num_blocks, dtype=int)
    filled = np.zeros(num_blocks, dtype=int)
    for rid, table in tables.items():
        n = (lengths or {}).get(rid, len(table) * block_size)
        for i, b in enumerate(table):
            owner[b], count[b] = rid, count[b] + 1
            filled[b] = max(filled[b], min(block_size, n - i * block_size))
    rows = -(-num_blocks // per_row)
    grid = np.full((rows, per_row), np.nan)
    for b in range(num_blocks):
        grid[b // per_row, b % per_row] = -1 if owner[b] < 0 else owner[b] % len(COLORS)
    cmap = ListedColormap(["#FFFFFF"] + list(COLORS))
    image = ax.imshow(grid + 1, cmap=cmap, vmin=0, vmax=len(COLORS), aspect="auto")
    for b in range(num_blocks):
        r, c = divmod(b, per_row)
        ax.add_patch(plt.Rectangle((c - 0.5, r - 0.5), 1, 1, fill=False, lw=0.5, ec="#BBBBBB"))
        if owner[b] >= 0:
            ax.text(c, r, f"r{owner[b]}\n{filled[b]}/{block_size}", ha="center", va="center", fontsize=6)
            if count[b] > 1:
                ax.add_patch(plt.Rectangle((c - 0.5, r - 0.5), 1, 1, fill=False, hatch="///", lw=0))
        else:
            ax.text(c, r, "free", ha="center", va="center", fontsize=5, color="#9A9A9A")
    ax.set_xticks(range(per_row))
    ax.set_yticks(range(rows), [f"{r * per_row}" for r in range(rows)])
    ax.set_xlabel("block (+ row start)")
    ax.set_ylabel("first block of the row")
    ax.set_title(title, fontsize=10)
    return image


def draw_trace(ax, trace, upto=None, title="the stream, step by step"):
    """One row per request, one column per step: waiting, prefill, decode (a colour each), preempted (x), retired
    (|). trace: Engine(trace=True).trace."""
    upto = len(trace) if upto is None else upto
    ids = sorted({i for t in trace for i in t["waiting"] + t["prefill"] + t["decode"] + t["preempted"]})
    row = {i: n for n, i in enumerate(ids)}
    grid = np.zeros((len(ids), len(trace)))
    for s, t in enumerate(trace[:upto]):
        for i in t["waiting"]:
            grid[row[i], s] = 1
        for i in t["decode"]:
            grid[row[i], s] = 2
        for i in t["prefill"]:
            grid[row[i], s] = 3
    cmap = ListedColormap(["#FFFFFF", "#E6E6E6", "#9EC5EA", "#1D4F8C"])
    image = ax.imshow(grid, cmap=cmap, vmin=-0.5, vmax=3.5, aspect="auto", interpolation="nearest")
    bar = ax.figure.colorbar(image, ax=ax, ticks=[0, 1, 2, 3], fraction=0.04)
    bar.ax.set_yticklabels(["not yet", "waiting", "decode", "prefill"], fontsize=7)
    for s, t in enumerate(trace[:upto]):
        for i in t["preempted"]:
            ax.plot(s, row[i], "x", color="#C2185B", ms=7, mew=2)
        for i in t["retired"]:
            ax.plot(s - 0.5, row[i], "|", color="#2B2B2B", ms=9, mew=2)
    ax.axvline(upto - 0.5, color="#C2185B", lw=1)
    ax.set_yticks(range(len(ids)), [f"request {i}" for i in ids], fontsize=7)
    ax.set_xlabel("step (x: preempted, |: retired)")
    ax.set_ylabel("request")
    ax.set_title(title, fontsize=10)


def scheduler_widget(trace, num_blocks, block_size, note=None):
    """A slider over the steps of `trace`: the stream up to that step, and the pool after it."""
    import ipywidgets as widgets

    slider = widgets.IntSlider(value=1, min=1, max=len(trace), description="step", continuous_update=False)
    out = widgets.Output()

    def show(change=None):
        with out:
            out.clear_output(wait=True)
            t = trace[slider.value - 1]
            fig, axes = plt.subplots(1, 2, figsize=(12, 4.2), gridspec_kw=dict(width_ratios=[1.3, 1]))
            draw_trace(axes[0], trace, slider.value)
            draw_pool(axes[1], t["tables"], num_blocks, block_size, t["lengths"],
                      title=f"the pool after step {slider.value}: {sum(map(len, t['tables'].values()))} of "
                            f"{num_blocks} blocks held")
            words = [f"{k}: {t[k]}" for k in ("prefill", "decode", "retired", "preempted") if t[k]]
            fig.suptitle((note + "\n" if note else "") + "; ".join(words), fontsize=9)
            plt.tight_layout()
            plt.show()

    slider.observe(show, names="value")
    show()
    return widgets.VBox([slider, out])


def plot_speculation(rows, title=""):
    """Acceptance rate and speed-up against k, one line per draft (rows: serving_runs.speculation_sweep)."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.6))
    for name in dict.fromkeys(r["draft"] for r in rows):
        mine = [r for r in rows if r["draft"] == name]
        ks = [r["k"] for r in mine]
        axes[0].plot(ks, [r["acceptance"] for r in mine], marker="o", label=f"draft: {name}")
        axes[1].plot(ks, [r["speedup"] for r in mine], marker="o", label=f"draft: {name}")
    axes[1].axhline(1, color="#6B6B6B", ls=":", lw=1)
    for ax, what in zip(axes, ("acceptance rate of drafted tokens", "speed-up over the target alone (CPU time)")):
        ax.set_xlabel("k, tokens drafted per pass")
        ax.set_ylabel(what)
        ax.set_title(f"{what}{(' — ' + title) if title else ''}", fontsize=9)
        ax.legend(fontsize=8)
    plt.tight_layout()
    return fig


def plot_load(stream, title=""):
    """Time to first token and time per output token (p50 solid, p99 dashed) and throughput against the load, one
    colour per policy (stream: serving_runs.load_sweep)."""
    fig, axes = plt.subplots(1, 3, figsize=(14, 3.8))
    for name, runs in stream.items():
        style = POLICY_STYLE.get(name, {})
        loads = [r["load"] for r in runs]
        for ax, key in ((axes[0], "ttft"), (axes[1], "tpot")):
            ax.plot(loads, [r[f"{key}_p50"] for r in runs], label=f"{name} p50", **style)
            ax.plot(loads, [r[f"{key}_p99"] for r in runs], ls="--", label=f"{name} p99", **style)
        axes[2].plot(loads, [r["throughput"] for r in runs], label=name, **style)
    labels = ("time to first token (s)", "time per output token (s)", "throughput (tokens / s)")
    for ax, label in zip(axes, labels):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("load (arrival rate / what sequential decoding serves)")
        ax.set_ylabel(label)
        ax.set_title(f"{label}{(' — ' + title) if title else ''}", fontsize=9)
    axes[0].set_yscale("log")
    axes[1].set_yscale("log")
    axes[0].legend(fontsize=6, ncol=2)
    axes[2].legend(fontsize=7)
    plt.tight_layout()
    return fig
