"""Widgets respond in a real browser: sliders (a minimal widget notebook, lesson 01 learner and solution,
lesson 13's block widget). Lesson 12's generation widget (a text box) is tested in test_lesson12.py, in the
same JupyterLab session as lesson 12's GPT exercise.

test_widget_renders_and_responds runs the cells one by one (Shift+Enter; an exercise cell that raises
NotImplementedError does not stop the next one) up to and including the cell that builds an ipywidgets
slider, checks that the slider renders as a widget (not as text such as "Loading widget..." or a model id,
which is what a missing or mismatched ipywidgets front end looks like) and that moving it with the
keyboard changes the output next to it (for lesson 13: the picture).

Lesson 13 is skipped, with the reason, while its notebook or widget cell does not exist.
"""
import re
import time

import pytest

from tests.browser.driver import (
    CHANGE_TIMEOUT,
    NOTEBOOK_BUDGET,
    OUTPUT_STATE,
    TEXT_ONLY,
    WIDGET_TAGS,
    WIDGET_TIMEOUT,
    check_not_blank,
    find_widget_cell,
    notebook_cells,
    open_notebook,
    run_up_to,
    shot_name,
    skip_unless_cell,
)
from tests.browser.server import MINIMAL

pytestmark = pytest.mark.browser

# (notebook, how to find the widget's cell: None = the first slider, else (tags, pattern, what), whether
# the picture must change)
BLOCK_WIDGET = ({"block-widget", "widget"}, re.compile(r"(?is)(?=.*block)(?=.*(?:\binteract\w*\s*\(|Slider\s*\())"),
                "block widget (a slider and a picture of the blocks)")
# The default run opens lesson 01's learner notebook (one path through the browser with test_exercise.py); the
# others are the exhaustive browser tests (RUN_SLOW=1).
TARGETS = [
    pytest.param(MINIMAL, None, False, id="minimal-widget", marks=pytest.mark.slow),
    pytest.param("notebooks/01_attention_from_scratch.ipynb", None, False, id="lesson01-learner"),
    pytest.param("solutions/01_attention_from_scratch.ipynb", None, False, id="lesson01-solution",
                 marks=pytest.mark.slow),
    pytest.param("notebooks/13_attention_at_scale.ipynb", BLOCK_WIDGET, True, id="lesson13-block-widget",
                 marks=pytest.mark.slow),
]



@pytest.mark.parametrize("target, cell, picture", TARGETS)
def test_widget_renders_and_responds(target, cell, picture, lab, browser):
    if cell is None:
        cells = notebook_cells(lab, target)
        stop = find_widget_cell(cells)
        assert stop is not None, (f"{target}: no code cell builds an ipywidgets slider (no cell tagged "
                                  f"{sorted(WIDGET_TAGS)}, none calling interact(...) or ...Slider(...))")
    else:
        cells, stop = skip_unless_cell(lab, target, *cell)
    learner = target.startswith("notebooks/") or target == MINIMAL
    with open_notebook(lab, browser, target, shot_name(target), NOTEBOOK_BUDGET) as run:
        page = run.page
        errors = run_up_to(run, cells, stop, learner)

        widget_cell = run.cells.nth(stop)
        slider = widget_cell.locator(".jp-OutputArea .widget-slider").first
        end = time.monotonic() + run.remaining_ms(WIDGET_TIMEOUT) / 1000
        settle = time.monotonic() + 5  # "Loading widget..." may show for a moment; a text repr won't go
        while not slider.is_visible():
            text = run.output_text(stop)
            hit = TEXT_ONLY.search(text)
            final = hit and "Loading widget" not in hit.group(0) and time.monotonic() > settle
            if final or time.monotonic() > end:
                run.screenshot("no-widget")
                if hit:
                    pytest.fail(
                        f"{target}: the widget in cell {stop} shows as text only ({hit.group(0)!r} in "
                        f"{text.strip()[:300]!r}). This is what learners see when JupyterLab's "
                        f"ipywidgets front end (jupyterlab_widgets) is missing or does not match the "
                        f"kernel's ipywidgets: check `pip show ipywidgets jupyterlab_widgets` and "
                        f"`jupyter labextension list`. Screenshot: {run.shots[-1] if run.shots else '-'}")
                pytest.fail(f"{target}: no slider (.widget-slider) appeared in cell {stop} within "
                            f"{WIDGET_TIMEOUT} s; the cell shows {text.strip()[:300]!r}")
            time.sleep(0.25)
        text = run.output_text(stop)
        hit = TEXT_ONLY.search(text)
        assert not hit, (f"{target}: the widget in cell {stop} shows as text only in part "
                         f"({hit.group(0)!r} in {text.strip()[:300]!r}); check that ipywidgets and "
                         f"jupyterlab_widgets match")
        run.show(slider)
        run.screenshot("widget")
        run.phase("widget")

        readout = widget_cell.locator(".widget-readout").first
        value_before = readout.inner_text(timeout=5_000) if readout.count() else "?"
        before = widget_cell.evaluate(OUTPUT_STATE)
        handle = slider.locator(".noUi-handle, [role=slider]").first
        handle.focus(timeout=5_000)
        for _ in range(3):
            page.keyboard.press("ArrowRight")
            time.sleep(0.1)
        end = time.monotonic() + run.remaining_ms(CHANGE_TIMEOUT) / 1000
        after = before
        while True:
            after = widget_cell.evaluate(OUTPUT_STATE)
            if after != before and after.strip(" |"):
                time.sleep(0.5)  # let the redraw settle, then take the final state
                settled = widget_cell.evaluate(OUTPUT_STATE)
                if settled == after:
                    break
                continue
            if time.monotonic() > end:
                break
            time.sleep(0.25)
        value_after = readout.inner_text(timeout=5_000) if readout.count() else "?"
        run.screenshot("slider-moved")
        assert value_after != value_before, (
            f"{target}: pressing ArrowRight on the slider in cell {stop} did not move it "
            f"(readout stays {value_before!r})")
        assert after != before, (
            f"{target}: the slider in cell {stop} moved ({value_before} -> {value_after}) but the output "
            f"next to it did not change within {CHANGE_TIMEOUT} s: the kernel does not answer the "
            f"widget (output: {after[:200]!r})")
        if picture:
            run.show(widget_cell)
            png = run.screenshot("slider-moved-picture", element=widget_cell.locator(".jp-Cell-outputArea").first)
            pictures = [part.rsplit(" | ", 1)[-1] for part in (before, after)]
            assert pictures[0].strip() and pictures[1] != pictures[0], (
                f"{target}: the slider in cell {stop} moved ({value_before} -> {value_after}) but the picture "
                f"did not change (only the text did); images before: {pictures[0][-80:]!r}")
            check_not_blank(run, png, f"the picture of the widget in cell {stop}")
        run.phase("slider")
        print(f"\n{target}: slider {value_before} -> {value_after}, output changed; {run.timings()}; "
              + (f"cells {[i for i, _ in errors]} raised NotImplementedError (exercises); " if errors else "")
              + f"screenshots: {', '.join(p.name for p in run.shots)}")
