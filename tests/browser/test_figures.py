"""Pictures on screen: a diagram in the text, and figures a lesson draws.

- test_diagram_renders: lesson 09's diagram (a markdown-cell attachment) loads at the size of its PNG in
  diagrams/png/ and its screenshot is not blank.
- test_figure: runs a notebook's cells one by one up to the cell that draws a figure, then keeps a
  screenshot of the figure and checks it is a real picture: lesson 10's reference curves in fast mode (the
  learner notebook shows the reference run's curves next to its own tiny run). Skipped, with the reason,
  while the cell does not exist yet; a lesson may tag the cell ("reference-curves") to make the choice
  explicit. (Lesson 11's fast-mode [CLS] figure: tests/browser/test_lesson11.py.)
"""
import re

import pytest

from tests.browser.driver import (
    SMALL_BUDGET,
    cell_source,
    check_not_blank,
    first_line,
    notebook_cells,
    open_notebook,
    run_up_to,
    shot_name,
    skip_unless_cell,
    wait_for_picture,
)

pytestmark = [pytest.mark.browser, pytest.mark.slow]   # the exhaustive browser tests: RUN_SLOW=1

DIAGRAM = "notebooks/09_transformer.ipynb"  # a lesson whose markdown embeds a diagram (attachment)

# (notebook, (tags, pattern, what the figure is), budget in s, marks)
FIGURES = [
    pytest.param("notebooks/10_translation_multi30k.ipynb",
                 ({"reference-curves"},
                  re.compile(r"(?s)(?=.*\breference)(?=.*(?:\bplot\w*\(|plt\.|\bshow_\w+\())"),
                  "reference curves (the reference run's learning curves, in fast mode)"), SMALL_BUDGET,
                 id="lesson10-reference-curves", marks=pytest.mark.multi30k),
]
MIN_SIZE = (200, 150)  # px, the smallest figure that counts as a figure (naturalWidth, naturalHeight)


def test_diagram_renders(lab, browser):
    target = DIAGRAM
    cells = notebook_cells(lab, target)
    diagrams = [(i, name) for i, c in enumerate(cells) if c["cell_type"] == "markdown"
                for name in c.get("attachments", {}) if f"attachment:{name}" in cell_source(c)]
    assert diagrams, f"{target}: no markdown cell embeds a diagram (![...](attachment:NN_name.png))"
    with open_notebook(lab, browser, target, shot_name(target, "diagram"), SMALL_BUDGET) as run:
        done = [run.check_diagram(i, name) for i, name in diagrams]
        run.phase("diagrams")
        print(f"\n{target}: {'; '.join(done)}; {run.timings()}; screenshots: "
              f"{', '.join(p.name for p in run.shots)}")


@pytest.mark.parametrize("target, cell, budget", FIGURES)
def test_figure(target, cell, budget, lab, browser):
    cells, i = skip_unless_cell(lab, target, *cell)
    what = cell[2]
    label = re.sub(r"\W+", "-", what.split(" (")[0].lower()).strip("-")
    with open_notebook(lab, browser, target, shot_name(target, "figure"), budget) as run:
        errors = run_up_to(run, cells, i, learner=target.startswith("notebooks/"))
        images = wait_for_picture(run, i, what)
        figure = run.cells.nth(i).locator(".jp-Cell-outputArea img").last
        run.show(figure)
        png = run.screenshot(label, element=figure)
        run.screenshot(f"{label}-page")
        run.phase("figure")
        image = images[-1]
        assert image["width"] >= MIN_SIZE[0] and image["height"] >= MIN_SIZE[1], (
            f"{target}: the {what} in cell {i} ({first_line(cells[i])!r}) is only "
            f"{image['width']}x{image['height']} px")
        assert image["shown"] >= 300, f"{target}: the {what} in cell {i} shows only {image['shown']:.0f} px wide"
        colours, spread = check_not_blank(run, png, f"the {what} in cell {i}")
        print(f"\n{target}: {what}: cell {i}, {len(images)} image(s), the last {image['width']}x{image['height']} "
              f"px, {colours} colours, std {spread:.0f}; "
              + (f"cells {[k for k, _ in errors]} raised NotImplementedError (exercises); " if errors else "")
              + f"{run.timings()}; screenshots: {', '.join(p.name for p in run.shots)}")
