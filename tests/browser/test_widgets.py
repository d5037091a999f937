"""Widgets respond in a real browser: sliders (a minimal widget notebook, lesson 01 learner and solution,
lesson 13's block widget) and lesson 12's generation widget (a text box).

test_widget_renders_and_responds runs the cells one by one (Shift+Enter; an exercise cell that raises
NotImplementedError does not stop the next one) up to and including the cell that builds an ipywidgets
slider, checks that the slider renders as a widget (not as text such as "Loading widget..." or a model id,
which is what a missing or mismatched ipywidgets front end looks like) and that moving it with the
keyboard changes the output next to it (for lesson 13: the picture).

test_generation_widget types the start of a caption into lesson 12's generation widget and presses Enter:
the continuations (text) and the next-token bars (a picture, or progress bars) must change, inside the
widget, and no output may go to JupyterLab's log console instead.

Lessons 12 and 13 are skipped, with the reason, while their notebook or widget cell does not exist.
"""
import re
import time

import pytest

from tests.browser.driver import (
    CHANGE_TIMEOUT,
    LOG_MESSAGES,
    NOTEBOOK_BUDGET,
    OUTPUT_STATE,
    TEXT_ONLY,
    WIDGET_TAGS,
    WIDGET_TIMEOUT,
    check_not_blank,
    find_widget_cell,
    last_line,
    notebook_cells,
    open_notebook,
    run_up_to,
    shot_name,
    skip_unless_cell,
    type_into,
    wait_until_settled,
)
from tests.browser.server import MINIMAL

pytestmark = pytest.mark.browser

# (notebook, how to find the widget's cell: None = the first slider, else (tags, pattern, what), whether
# the picture must change)
BLOCK_WIDGET = ({"block-widget", "widget"}, re.compile(r"(?is)(?=.*block)(?=.*(?:\binteract\w*\s*\(|Slider\s*\())"),
                "block widget (a slider and a picture of the blocks)")
TARGETS = [
    pytest.param(MINIMAL, None, False, id="minimal-widget"),
    pytest.param("notebooks/01_attention_from_scratch.ipynb", None, False, id="lesson01-learner"),
    pytest.param("solutions/01_attention_from_scratch.ipynb", None, False, id="lesson01-solution"),
    pytest.param("notebooks/13_attention_at_scale.ipynb", BLOCK_WIDGET, True, id="lesson13-block-widget"),
]

GENERATION = "notebooks/12_gpt_from_scratch.ipynb"
GENERATION_WIDGET = ({"generation-widget"}, re.compile(r"\b(?:Text|Textarea|Combobox)\s*\("),
                     "generation widget (a text box for the start of a caption)")
CAPTION_START = "A dog runs"  # typed into lesson 12's generation widget
GENERATION_BUDGET = 300  # s, the lesson's cells up to the widget (a small GPT is trained), then the widget
GENERATE_TIMEOUT = 60  # s, from pressing Enter to new continuations and bars


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
    with open_notebook(lab, browser, target, shot_name(target), NOTEBOOK_BUDGET if cell is None else 240) as run:
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


# What lesson 12's generation widget shows, minus its text box: the text (the continuations), the pictures
# and the progress bars (the next-token bars may be either).
_GENERATION_STATE = """cell => {
    const area = cell.querySelector('.jp-Cell-outputArea');
    if (!area) return null;
    const copy = area.cloneNode(true);
    copy.querySelectorAll('input, textarea, .widget-label').forEach(e => e.remove());
    const box = cell.querySelector('.widget-text input, .widget-textarea textarea, .widget-combobox input');
    const bars = Array.from(area.querySelectorAll('.progress-bar, .widget-progress .progress-bar'))
        .map(b => b.style.width || b.style.height || '');
    const images = Array.from(area.querySelectorAll('img')).map(i => ({
        src: i.src, width: i.naturalWidth, height: i.naturalHeight, complete: i.complete}));
    return {text: (copy.textContent || '').trim(), images, bars, box: box ? box.value : null,
            textarea: box ? box.tagName === 'TEXTAREA' : false,
            outputs: cell.querySelectorAll('.jp-Cell-outputArea > .jp-OutputArea-child').length};
}"""

def _bars(state):
    return [i["src"][-200:] for i in state["images"]] + state["bars"]


def test_generation_widget(lab, browser):
    target = GENERATION
    cells, stop = skip_unless_cell(lab, target, *GENERATION_WIDGET)
    with open_notebook(lab, browser, target, shot_name(target, "generation"), GENERATION_BUDGET) as run:
        page = run.page
        errors = run_up_to(run, cells, stop, learner=True)
        cell = run.cells.nth(stop)

        def state():
            return cell.evaluate(_GENERATION_STATE)

        end = time.monotonic() + run.remaining_ms(WIDGET_TIMEOUT) / 1000
        while not ((s := state()) and s["box"] is not None):
            if time.monotonic() > end:
                run.screenshot("widget-missing")
                text = run.output_text(stop)
                hit = TEXT_ONLY.search(text)
                pytest.fail(f"{target}: the generation widget in cell {stop} shows no text box, continuations and "
                            f"next-token bars within {WIDGET_TIMEOUT} s"
                            + (f"; it shows as text only ({hit.group(0)!r}): check `pip show ipywidgets "
                               f"jupyterlab_widgets`" if hit else "")
                            + f"; the cell shows {text.strip()[:300]!r}")
            time.sleep(0.25)
        settle = time.monotonic() + 10  # the widget may show its default caption's continuations first
        while not (_bars(s) and s["text"]) and time.monotonic() < settle:
            time.sleep(0.25)
            s = state()
        before = s
        run.show(cell)
        run.screenshot("widget-default")
        logged = page.evaluate(LOG_MESSAGES)

        box = cell.locator(".widget-text input, .widget-textarea textarea, .widget-combobox input").first
        # a text area takes Enter as a new line: leave it with Tab to submit
        type_into(run, box, CAPTION_START, submit="Tab" if before["textarea"] else "Enter")

        def timed_out(s):
            run.screenshot("widget-typed-timeout")
            pytest.fail(f"{target}: after typing {CAPTION_START!r} into the generation widget (cell {stop}), "
                        f"the continuations and the next-token bars did not both change within "
                        f"{GENERATE_TIMEOUT} s (text changed: {s['text'] != before['text']}, bars changed: "
                        f"{_bars(s) != _bars(before)}); the widget shows {s['text'][:300]!r}")

        s = wait_until_settled(
            state, lambda s: s and s["text"] and s["text"] != before["text"] and _bars(s) and _bars(s) != _bars(before)
            and all(i["complete"] and i["width"] for i in s["images"]), run.remaining_ms(GENERATE_TIMEOUT) / 1000,
            timed_out)
        run.show(cell)
        png = run.screenshot("widget-typed", element=cell.locator(".jp-Cell-outputArea").first)
        run.phase("widget")

        assert s["box"].strip() == CAPTION_START, (f"{target}: the widget's text box holds {s['box']!r}, not the "
                                                   f"caption start typed {CAPTION_START!r}")
        assert "Traceback" not in s["text"] and not re.search(r"^\s*✘", s["text"], re.M), (
            f"{target}: the generation widget shows an error after typing {CAPTION_START!r}: "
            f"{last_line(s['text'])!r}")
        assert s["outputs"] == 1, (f"{target}: cell {stop} shows {s['outputs']} outputs, expected only the widget "
                                   f"(the continuations and the bars must be inside it)")
        assert page.evaluate(LOG_MESSAGES) == logged, (
            f"{target}: after typing into the generation widget, JupyterLab's log console counts new messages: "
            f"output of the widget's callback went there instead of into the widget")
        assert "<Figure size" not in s["text"], (f"{target}: the generation widget shows a figure's text repr "
                                                 f"instead of the bars: {s['text'][:300]!r}")
        if s["images"]:
            check_not_blank(run, png, f"the generation widget's next-token bars (cell {stop})")
        words = CAPTION_START.lower().split()
        echoed = all(w in s["text"].lower() for w in words)
        print(f"\n{target}: typed {CAPTION_START!r} -> {s['text'][:200]!r} ({len(s['images'])} image(s), "
              f"{len(s['bars'])} progress bar(s); the typed words {'are' if echoed else 'are NOT'} in the output); "
              + (f"cells {[i for i, _ in errors]} raised NotImplementedError (exercises); " if errors else "")
              + f"{run.timings()}; screenshots: {', '.join(p.name for p in run.shots)}")
