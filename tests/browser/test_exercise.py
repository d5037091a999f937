"""An exercise, answered wrong then right, in lesson 00 (learner notebook): its check shows one red
"✘ weighted sum: ..." message (no traceback), then only "✔ weighted sum: correct ...".

The ✘ message, as JupyterLab lays it out, breaks lines only between words: JupyterLab's output area
breaks a line that is too long anywhere (CSS word-break: break-all), so a check wraps its message
between words itself, short enough for a 1400 px wide window; the test compares the lines on screen
with the message's words ("weigh|ts" or "num_|heads" split across two lines fail it). Narrower windows
are measured and printed, not asserted.
"""
import re
import time

import pytest

from tests.browser.driver import (
    SMALL_BUDGET,
    STDERR,
    STREAMS,
    TRACEBACK,
    VISUAL_LINES,
    cell_source,
    notebook_cells,
    open_notebook,
    shot_name,
)
from tests.checking import one_message

pytestmark = pytest.mark.browser

EXERCISE = "notebooks/00_welcome.ipynb"  # its first exercise, answered wrong then right
EXERCISE_NAME, EXERCISE_TITLE = "weighted_sum", "weighted sum"
WRONG_BODY, RIGHT_BODY = "return vectors.mean(axis=0)", "return weights @ vectors"
WINDOW = {"width": 1400, "height": 1000}  # the browser's window (server.launch_browser), where words stay whole
NARROWER = (1024, 800)  # window widths measured for the report only


def _split_words(run, i):
    """(lines on screen, words split across two lines) of the ✘ message in cell i."""
    output = run.cells.nth(i).locator(STDERR).first
    lines = output.evaluate(VISUAL_LINES)
    text = output.evaluate("e => e.textContent")
    whole, on_screen = text.split(), " ".join(lines).split()
    if on_screen == whole:
        return lines, []
    split = []
    for k in range(len(lines) - 1):  # a line that ends inside a word and the next one that goes on with it
        left, right = lines[k].rstrip("\n"), lines[k + 1]
        if left and right and not left[-1].isspace() and not right[0].isspace():
            split.append(left.split()[-1] + "|" + right.split()[0])
    return lines, split or [f"words differ: {on_screen[:20]} vs {whole[:20]}"]


def _words_stay_whole(run, i, what):
    """Assert that no word of the ✘ message in cell i is split across two lines on screen (in the test's
    window); measure narrower windows too (printed). Returns what was seen, for the test's report."""
    lines, split = _split_words(run, i)
    run.screenshot("wrong-answer-message", element=run.cells.nth(i).locator(".jp-Cell-outputArea").first)
    assert not split, (f"{what}: its ✘ message breaks words across lines in a {WINDOW['width']} px wide "
                       f"window: {split}; lines on screen: {lines}; screenshot {run.shots[-1]}")
    seen = [f"{len(lines)} line(s) on screen at {WINDOW['width']} px, no word split"]
    try:
        for width in NARROWER:
            run.page.set_viewport_size({"width": width, "height": WINDOW["height"]})
            time.sleep(1.0)  # let JupyterLab lay the page out again
            narrow_lines, narrow_split = _split_words(run, i)
            run.screenshot(f"wrong-answer-message-{width}px",
                           element=run.cells.nth(i).locator(".jp-Cell-outputArea").first)
            seen.append(f"at {width} px: {len(narrow_lines)} line(s), "
                        + (f"words split: {narrow_split}" if narrow_split else "no word split"))
    finally:
        run.page.set_viewport_size(WINDOW)
        time.sleep(0.5)
    return "; ".join(seen)


def test_exercise_wrong_then_right(lab, browser):
    target = EXERCISE
    cells = notebook_cells(lab, target)
    code = [i for i, c in enumerate(cells) if c["cell_type"] == "code"]
    exercise = next((i for i in code if re.search(rf"^def {EXERCISE_NAME}\(", cell_source(cells[i]), re.M)), None)
    assert exercise is not None, f"{target}: no code cell defines {EXERCISE_NAME}(...)"
    check_cell = next((i for i in code if i > exercise), None)
    assert check_cell is not None and f"check.{EXERCISE_NAME}(" in cell_source(cells[check_cell]), (
        f"{target}: the code cell after the exercise (cell {exercise}) is not check.{EXERCISE_NAME}(...)")
    original = cell_source(cells[exercise])
    stub = re.compile(r"# YOUR CODE HERE\s*\n\s*raise NotImplementedError\(\)")
    assert stub.search(original), f"{target}: cell {exercise} has no '# YOUR CODE HERE / raise NotImplementedError()'"
    answers = {"wrong": stub.sub(WRONG_BODY, original).rstrip(), "right": stub.sub(RIGHT_BODY, original).rstrip()}

    with open_notebook(lab, browser, target, shot_name(target, "exercise"), SMALL_BUDGET) as run:
        for i in range(exercise):  # as a learner: read and run the lesson up to the exercise
            run.run_cell(i, cells[i])
        run.phase("cells")
        count = {exercise: None, check_cell: None}
        seen = {}
        for answer in ("wrong", "right"):
            run.set_source(exercise, answers[answer])
            for i in (exercise, check_cell):
                count[i] = run.run_cell(i, cells[i], before=count[i])
            states = run.states()
            run.show(run.cells.nth(check_cell))
            run.screenshot(f"{answer}-answer")
            assert not states[exercise]["outputs"], (
                f"{target}: the exercise cell {exercise} with the {answer} answer shows output: "
                f"{' '.join(o['text'] for o in states[exercise]['outputs'])[:300]!r}")
            outs = states[check_cell]["outputs"]
            text = "\n".join(o["text"].strip() for o in outs)
            lines = text.splitlines()
            seen[answer] = text
            body = answers[answer].splitlines()[-1].strip()
            what = f"{target}: with the {answer} answer ({body!r}), the check in cell {check_cell}"
            if answer == "wrong":
                assert len(outs) == 1 and outs[0]["mime"] == STREAMS[1], (
                    f"{what} should show one error output (stderr); it shows "
                    f"{[(o['mime'], o['text'][:100]) for o in outs]}")
                assert TRACEBACK not in text and "course_utils" not in text, (
                    f"{what} shows a traceback into course_utils instead of one line: {text[:400]!r}")
                assert one_message(text) and lines[0].startswith(f"✘ {EXERCISE_TITLE}:"), (
                    f"{what} should show one message starting with '✘ {EXERCISE_TITLE}:'; it shows {text[:400]!r}")
                assert outs[0]["red"], f"{what} shows its ✘ line, but not in red: {text!r}"
                wrapping = _words_stay_whole(run, check_cell, what)
            else:
                assert len(outs) == 1 and outs[0]["mime"] == STREAMS[0] and len(lines) == 1, (
                    f"{what} should show exactly one line '✔ {EXERCISE_TITLE}: correct ...' and nothing else; "
                    f"it shows {[(o['mime'], o['text'][:100]) for o in outs]}")
                assert lines[0].startswith(f"✔ {EXERCISE_TITLE}: correct"), (
                    f"{what} should show '✔ {EXERCISE_TITLE}: correct ...'; it shows {text[:400]!r}")
            run.phase(answer)
        print(f"\n{target}: wrong answer -> {seen['wrong']!r} ({wrapping}); right answer -> {seen['right']!r}; "
              f"{run.timings()}; screenshots: {', '.join(p.name for p in run.shots)}")
