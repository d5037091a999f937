"""Lesson 14 in a real browser, in the package's one JupyterLab session (conftest.py), in fast mode.

test_widget_shows_the_induction_stripe: the solution notebook, run cell by cell up to its widget (the cell
tagged "widget": a layer and a head to pick, the head's attention on a repeated random sequence beside the loss
per position). In fast mode the widget shows the full run's heads, from the reference file
course_utils/reference_runs/lesson14_induction.json, and opens on the induction head. The test picks another
head (the picture must change), picks the induction head again (the picture must come back), and keeps a
screenshot of the induction stripe in the artifacts folder (…-induction-stripe.png).
"""
import time

import pytest

from course_utils.reference_runs import reference_run
from tests.browser.driver import (
    CHANGE_TIMEOUT,
    HANG,
    check_not_blank,
    first_line,
    image_stats,
    open_notebook,
    run_up_to,
    shot_name,
    skip_unless_cell,
    wait_for_picture,
)

pytestmark = [pytest.mark.browser, pytest.mark.slow]   # the exhaustive browser tests: RUN_SLOW=1

SOLUTION = "solutions/14_what_attention_learns.ipynb"
BUDGET = HANG                           # s: only the ceiling for a test that hangs (driver.py)


def _picture(run, i):
    """The src of the last image in cell i's widget output (the head's figure)."""
    return run.cells.nth(i).locator(".jp-OutputArea img").last.get_attribute("src", timeout=10_000)


def _pick(run, i, index, label, before, what):
    """Choose `label` in the widget's dropdown number `index` (0: layer, 1: head); wait for a new picture."""
    run.cells.nth(i).locator(".widget-dropdown select").nth(index).select_option(label=label)
    end = time.monotonic() + run.remaining_ms(CHANGE_TIMEOUT) / 1000
    while (now := _picture(run, i)) == before:
        if time.monotonic() > end:
            run.screenshot("no-change")
            pytest.fail(f"{SOLUTION}: choosing {label!r} in the widget (cell {i}) did not change {what}")
        time.sleep(0.25)
    return now


def test_widget_shows_the_induction_stripe(lab, browser):
    ref = reference_run("lesson14_induction")
    assert ref is not None, ("the reference file is missing: python -m course_utils.induction_heads --preset full "
                             "--reference lesson14_induction")
    layer, head = ref["report"]["induction_head"]
    cells, i = skip_unless_cell(lab, SOLUTION, {"widget"}, None, "head widget")
    with open_notebook(lab, browser, SOLUTION, shot_name(SOLUTION, "induction-widget"), BUDGET) as run:
        run_up_to(run, cells, i, learner=False)
        wait_for_picture(run, i, "the head widget")
        widget = run.cells.nth(i).locator(".jp-OutputArea").first
        run.show(widget)
        selected = run.cells.nth(i).locator(".widget-dropdown select")
        assert selected.count() == 2, f"{SOLUTION}: the widget in cell {i} should offer a layer and a head to pick"
        shown = (selected.nth(0).input_value(), selected.nth(1).input_value())
        assert shown == (f"layer {layer}", f"head {head}"), (
            f"{SOLUTION}: the widget should open on the induction head, layer {layer}, head {head}; it shows {shown}")
        stripe = _picture(run, i)
        other = f"head {(head + 1) % len(ref['final_maps'][layer])}"
        elsewhere = _pick(run, i, 1, other, stripe, "the picture")
        run.screenshot("another-head", element=widget)
        back = _pick(run, i, 1, f"head {head}", elsewhere, "the picture")
        png = run.screenshot("induction-stripe", element=widget)
        run.phase("widget")
        colours, spread = check_not_blank(run, png, f"the head widget in cell {i}")
        assert back == stripe, f"{SOLUTION}: the induction head's picture is not the same after picking it again"
        assert image_stats(png)[0] > 100, f"{SOLUTION}: cell {i} ({first_line(cells[i])!r}) shows too few colours"
        print(f"\n{SOLUTION}: head widget in cell {i}: layer {layer}, head {head}, {colours} colours, std "
              f"{spread:.0f}; {run.timings()}; screenshots: {', '.join(p.name for p in run.shots)}")
