"""Lesson 11 in a real browser, in the package's one JupyterLab session (conftest.py), in fast mode.

- test_fast_mode_cls_map_is_the_full_runs: the solution notebook, run cell by cell up to the fast-mode figure
  of the full run's [CLS] attention (the cell tagged "cls-attention-full-run", which reads the reference file
  course_utils/reference_runs/lesson11_vision.json); the figure is a real picture (a screenshot in the
  artifacts folder), and the cell says it shows the full run.
- test_solution_link_opens_the_solved_twin: the exercise notebook's first cell links to its solved twin;
  clicking it opens solutions/11_... in a new tab. JupyterLab labels a document's tab with the file's name
  alone (DocumentWidget: PathExt.basename), and the two twins have the same name: the test reads both tabs'
  labels and paths.
"""
import re
import time

import pytest

from course_utils.reference_runs import reference_run
from tests.browser.driver import (
    SMALL_BUDGET,
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

SOLUTION = "solutions/11_attention_beyond_text.ipynb"
EXERCISES = "notebooks/11_attention_beyond_text.ipynb"
MIN_SIZE = (200, 150)  # px, the smallest figure that counts as a figure (naturalWidth, naturalHeight)
TABS = """() => Array.from(document.querySelectorAll('#jp-main-dock-panel .lm-TabBar-tab')).map(tab => ({
    label: (tab.querySelector('.lm-TabBar-tabLabel') || tab).textContent.trim(),
    caption: tab.title || '', current: tab.classList.contains('lm-mod-current')}))"""


def test_fast_mode_cls_map_is_the_full_runs(lab, browser):
    assert reference_run("lesson11_vision") is not None, \
        "the reference file is missing: python -m course_utils.vision_training --reference lesson11_vision"
    what = "fast mode's [CLS] attention figure of the full run"
    cells, i = skip_unless_cell(lab, SOLUTION, {"cls-attention-full-run"}, None, what)
    with open_notebook(lab, browser, SOLUTION, shot_name(SOLUTION, "cls-full-run"), 300) as run:
        run_up_to(run, cells, i, learner=False)
        images = wait_for_picture(run, i, what)
        figure = run.cells.nth(i).locator(".jp-Cell-outputArea img").last
        run.show(figure)
        png = run.screenshot("cls-attention-full-run", element=figure)
        run.screenshot("cls-attention-full-run-page")
        run.phase("figure")
        image = images[-1]
        assert image["width"] >= MIN_SIZE[0] and image["height"] >= MIN_SIZE[1], (
            f"{SOLUTION}: the {what} in cell {i} is only {image['width']}x{image['height']} px")
        assert image["shown"] >= 300, f"{SOLUTION}: the {what} in cell {i} shows only {image['shown']:.0f} px wide"
        colours, spread = check_not_blank(run, png, f"the {what} in cell {i}")
        text = run.output_text(i)
        assert "Fast mode" in text and "full run" in text, (
            f"{SOLUTION}: cell {i} ({first_line(cells[i])!r}) does not say that it shows the full run: {text[:300]!r}")
        print(f"\n{SOLUTION}: {what}: cell {i}, {image['width']}x{image['height']} px, {colours} colours, std "
              f"{spread:.0f}; {run.timings()}; screenshots: {', '.join(p.name for p in run.shots)}")


def test_solution_link_opens_the_solved_twin(lab, browser):
    notebook_cells(lab, EXERCISES)
    with open_notebook(lab, browser, EXERCISES, shot_name(EXERCISES, "solution-link"), SMALL_BUDGET) as run:
        link = run.cells.first.locator(".jp-RenderedMarkdown a", has_text="open it here")
        assert link.count() == 1, f"{EXERCISES}: the first cell has no link 'open it here' to the solved twin"
        before = run.page.evaluate(TABS)
        link.dispatch_event("click")          # (the cell's toolbar may lie over the link: no pointer needed)
        end = time.monotonic() + run.remaining_ms(300) / 1000
        while not ((tabs := run.page.evaluate(TABS))[len(before):] and          # a new tab, its document loaded
                   all("Path:" in t["caption"] for t in tabs)):
            if time.monotonic() > end:
                run.screenshot("no-new-tab")
                pytest.fail(f"{EXERCISES}: clicking 'open it here' opened no tab with a document (tabs: {tabs})")
            time.sleep(0.25)
        run.screenshot("solution-opened")
        exercise, solution = before[0], next(t for t in tabs if t["current"])
        path = re.search(r"Path: (\S+)", solution["caption"])
        assert path and path.group(1) == SOLUTION, f"the link opened {solution} instead of {SOLUTION}"
        print(f"\n{EXERCISES}: the solution link opened {path.group(1)} in a tab labelled {solution['label']!r} "
              f"(the exercises' tab: {exercise['label']!r}); {run.timings()}")
