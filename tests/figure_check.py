"""A matplotlib backend for the tests that checks every figure a notebook shows.

    MPLBACKEND=module://tests.figure_check      (set by ../conftest.py for the notebook kernels)

It draws nothing. At every `plt.show()` it inspects the open figures and fails the cell, naming the
figure and what it lacks, unless:
- every panel has a title (or the figure has a suptitle);
- every panel with axes has an x label and a y label (in a grid, one per column / row is enough,
  as are `fig.supxlabel` / `fig.supylabel`);
- every heatmap (imshow, pcolormesh) has a colorbar in its figure, or its values written in its
  cells (panels with their axes switched off, such as pictures of digits, need neither).
"""
from matplotlib._pylab_helpers import Gcf
from matplotlib.backend_bases import FigureManagerBase
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import QuadMesh

FigureCanvas = FigureCanvasAgg
FigureManager = FigureManagerBase


def _has_content(ax):
    return bool(ax.lines or ax.images or ax.collections or ax.patches or ax.texts or ax.tables)


def _grid_position(ax):
    spec = ax.get_subplotspec() if hasattr(ax, "get_subplotspec") else None
    if spec is None:
        return None
    return spec.get_gridspec(), spec.rowspan, spec.colspan


def _name(fig, ax):
    suptitle = fig._suptitle.get_text() if fig._suptitle is not None else ""
    return repr(ax.get_title() or suptitle or f"figure {fig.number}")


def figure_problems(fig):
    """What `fig` lacks, as a list of sentences (empty when it is fine)."""
    problems = []
    suptitle = fig._suptitle is not None and fig._suptitle.get_text().strip()
    supx = getattr(fig, "_supxlabel", None) is not None and fig._supxlabel.get_text().strip()
    supy = getattr(fig, "_supylabel", None) is not None and fig._supylabel.get_text().strip()
    panels = [ax for ax in fig.axes if ax.get_visible() and not hasattr(ax, "_colorbar") and _has_content(ax)]
    has_colorbar = any(hasattr(ax, "_colorbar") for ax in fig.axes)
    for ax in panels:
        name = _name(fig, ax)
        if not (ax.get_title() or ax.get_title("left") or ax.get_title("right") or suptitle):
            problems.append(f"a panel of figure {fig.number} has no title")
        heatmap = bool(ax.images) or any(isinstance(c, QuadMesh) for c in ax.collections)
        if not ax.axison:
            continue
        if ax.name != "polar":
            for axis, sup, label in (("x", supx, ax.get_xlabel()), ("y", supy, ax.get_ylabel())):
                if label or sup:
                    continue
                position = _grid_position(ax)
                if position is not None:   # a grid: one label per column (x) or row (y) is enough
                    grid, rows, cols = position
                    same = [other for other in panels if other is not ax and _grid_position(other)
                            and _grid_position(other)[0] is grid and
                            (set(_grid_position(other)[2]) & set(cols) if axis == "x"
                             else set(_grid_position(other)[1]) & set(rows))]
                    if any((o.get_xlabel() if axis == "x" else o.get_ylabel()) for o in same):
                        continue
                problems.append(f"panel {name} has no {axis} label")
        if heatmap and not has_colorbar and len(ax.texts) < 2:
            problems.append(f"heatmap {name} has neither a colorbar nor its values written in the cells")
    return problems


def show(*args, **kwargs):
    problems = []
    for manager in Gcf.get_all_fig_managers():
        problems += figure_problems(manager.canvas.figure)
    Gcf.destroy_all()
    if problems:
        raise AssertionError("figure check (tests/figure_check.py): " + "; ".join(dict.fromkeys(problems)))
