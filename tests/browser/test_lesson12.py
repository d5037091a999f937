"""Lesson 12 in a real browser, as a learner works through it, in ONE JupyterLab session (the learner notebook,
fast mode):

1. the GPT exercise (MyGPT): the learner reads and runs the lesson up to it (open exercises say "not implemented
   yet" and the lesson goes on), answers it with a typical mistake (no final LayerNorm) and runs its check: one
   red "✘ the GPT: ..." line naming the mistake, no traceback; then answers it right: exactly one line
   "✔ the GPT: ... correct". The screenshots of both are kept (…-gpt-exercise-wrong.png, …-gpt-exercise-right.png);
2. the generation widget: the learner runs the rest of the lesson up to it, types the start of a caption and
   presses Enter: the continuations (text) and the next-token bars (a picture) change, inside the widget, with
   nothing sent to JupyterLab's log console. Then a prompt the full run kept ("Two dogs"): in fast mode the
   widget shows the full run's continuations of it, from the reference file (checked when the reference file
   holds them: lesson12_full.json's report["samples"]).

The test is skipped, with the reason, while the notebook, the exercise or the widget cell does not exist.
"""
import re
import time

import pytest

from course_utils.reference_runs import reference_run
from tests.browser.driver import (
    ERROR,
    HANG,
    LOG_MESSAGES,
    STDERR,
    STREAMS,
    TEXT_ONLY,
    TRACEBACK,
    WIDGET_TIMEOUT,
    cell_source,
    check_not_blank,
    last_line,
    open_notebook,
    shot_name,
    skip_unless_cell,
    type_into,
    wait_until_settled,
)
from tests.checking import one_message

pytestmark = [pytest.mark.browser, pytest.mark.slow]   # the exhaustive browser tests: RUN_SLOW=1

TARGET = "notebooks/12_gpt_from_scratch.ipynb"
EXERCISE = ({"gpt-exercise"}, re.compile(r"^class MyGPT\(", re.M), "GPT exercise (class MyGPT)")
WIDGET = ({"generation-widget"}, re.compile(r"\b(?:Text|Textarea|Combobox)\s*\("),
          "generation widget (a text box for the start of a caption)")
CHECK_TITLE = "the GPT"
STUB = re.compile(r"# YOUR CODE HERE\n(\s*)raise NotImplementedError\(\)")
TIE = "self.head.weight = self.embed.weight"
FORWARD = ("x = self.pos(self.embed(tokens) * math.sqrt(self.d_model))\n{i}mask = causal_mask(tokens.size(1))\n"
           "{i}for layer in self.layers:\n{i}    x = layer(x, mask)\n{i}return self.head({last})")
RIGHT, WRONG = "self.norm(x)", "x"      # the wrong answer leaves out the final LayerNorm
WRONG_WORDS = "final LayerNorm is missing"
CAPTION_START = "A dog runs"            # typed into the generation widget
KEPT_PROMPT = "Two dogs"                # a prompt whose full-run continuations the reference file keeps
BUDGET = HANG                           # s: only the ceiling for a test that hangs (driver.py)
GENERATE_TIMEOUT = 60                   # s, from pressing Enter to new continuations and bars

# What the generation widget shows, minus its text box: the text, the pictures, the progress bars.
GENERATION_STATE = """cell => {
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


def _answer(source, last):
    """The exercise cell with its two stubs answered: the tie in __init__, forward with `last` at the end."""
    stubs = list(STUB.finditer(source))
    assert len(stubs) == 2, f"{TARGET}: the MyGPT cell should have two stubs (__init__, forward), has {len(stubs)}"
    indent = stubs[1].group(1)
    forward = FORWARD.format(i=indent, last=last)
    return source[:stubs[0].start()] + TIE + source[stubs[0].end():stubs[1].start()] + forward + source[stubs[1].end():]


def _run_range(run, cells, start, stop):
    """Run cells start..stop one by one (Shift+Enter); open exercises may say "not implemented yet", nothing
    else may fail."""
    unexpected = []
    for i in range(start, stop + 1):
        run.run_cell(i, cells[i])
        if cells[i]["cell_type"] == "code":
            text = "\n".join(run.cells.nth(i).locator(STDERR).all_inner_texts())
            if ERROR.search(text) and "NotImplemented" not in text and "not implemented yet" not in text:
                unexpected.append((i, last_line(text)))
    if unexpected:
        run.screenshot("cell-error")
    assert not unexpected, f"{TARGET}: cells failed: " + "; ".join(f"cell {i}: {msg}" for i, msg in unexpected)


def _check_output(run, i):
    state = run.states()[i]
    outs = state["outputs"]
    return outs, "\n".join(o["text"].strip() for o in outs)


def _gpt_exercise(run, cells, exercise):
    """Answer MyGPT wrong, then right; returns what the check said each time."""
    check_cell = exercise + 1
    assert "check.gpt(MyGPT)" in cell_source(cells[check_cell]), (
        f"{TARGET}: the cell after the GPT exercise (cell {exercise}) is not check.gpt(MyGPT)")
    original = cell_source(cells[exercise])
    seen, count = {}, {exercise: None, check_cell: None}
    for answer, last in (("wrong", WRONG), ("right", RIGHT)):
        run.set_source(exercise, _answer(original, last))
        for i in (exercise, check_cell):
            count[i] = run.run_cell(i, cells[i], before=count[i])
        outs, text = _check_output(run, check_cell)
        run.show(run.cells.nth(exercise))
        run.show(run.cells.nth(check_cell))
        run.screenshot(f"gpt-exercise-{answer}")
        run.screenshot(f"gpt-exercise-{answer}-check", element=run.cells.nth(check_cell))
        what = f"{TARGET}: with the {answer} answer to the GPT exercise, its check (cell {check_cell})"
        if answer == "wrong":
            assert len(outs) == 1 and outs[0]["mime"] == STREAMS[1], (
                f"{what} should show one error output; it shows {[(o['mime'], o['text'][:100]) for o in outs]}")
            assert TRACEBACK not in text and "course_utils" not in text, f"{what} shows a traceback: {text[:400]!r}"
            assert one_message(text) and text.startswith(f"✘ {CHECK_TITLE}"), f"{what} shows {text[:400]!r}"
            assert WRONG_WORDS in " ".join(text.split()), f"{what} does not name the mistake: {text[:400]!r}"
            assert outs[0]["red"], f"{what} shows its ✘ line, but not in red: {text!r}"
        else:
            assert len(outs) == 1 and outs[0]["mime"] == STREAMS[0] and "correct" in text and text.startswith(
                f"✔ {CHECK_TITLE}"), f"{what} should show one '✔ {CHECK_TITLE}... correct' message; it shows {text!r}"
        seen[answer] = " ".join(text.split())
        run.phase(f"exercise {answer}")
    return seen


def test_lesson12_gpt_exercise_and_generation_widget(lab, browser):
    cells, exercise = skip_unless_cell(lab, TARGET, *EXERCISE)
    _, widget = skip_unless_cell(lab, TARGET, *WIDGET)
    assert exercise < widget
    with open_notebook(lab, browser, TARGET, shot_name(TARGET, "lesson12"), BUDGET) as run:
        page = run.page
        _run_range(run, cells, 0, exercise - 1)
        run.phase("cells before the exercise")
        seen = _gpt_exercise(run, cells, exercise)
        _run_range(run, cells, exercise + 2, widget)
        run.phase("cells up to the widget")
        cell = run.cells.nth(widget)

        def state():
            return cell.evaluate(GENERATION_STATE)

        def bars(s):
            return [i["src"][-200:] for i in s["images"]] + s["bars"]

        end = time.monotonic() + run.remaining_ms(WIDGET_TIMEOUT) / 1000
        while not ((s := state()) and s["box"] is not None and bars(s) and s["text"]):
            if time.monotonic() > end:
                run.screenshot("widget-missing")
                text = run.output_text(widget)
                hit = TEXT_ONLY.search(text)
                pytest.fail(f"{TARGET}: the generation widget in cell {widget} shows no text box, continuations and "
                            f"next-token bars within {WIDGET_TIMEOUT} s"
                            + (f"; it shows as text only ({hit.group(0)!r}): check `pip show ipywidgets "
                               f"jupyterlab_widgets`" if hit else "") + f"; the cell shows {text.strip()[:300]!r}")
            time.sleep(0.25)
        before = s
        run.show(cell)
        run.screenshot("widget-default")
        logged = page.evaluate(LOG_MESSAGES)
        box = cell.locator(".widget-text input, .widget-textarea textarea, .widget-combobox input").first
        typed = {}
        for caption in (CAPTION_START, KEPT_PROMPT):
            type_into(run, box, caption, submit="Tab" if before["textarea"] else "Enter")

            def timed_out(s, caption=caption, before=before):
                run.screenshot("widget-typed-timeout")
                pytest.fail(f"{TARGET}: after typing {caption!r} into the generation widget (cell {widget}), the "
                            f"continuations and the next-token bars did not both change within {GENERATE_TIMEOUT} s "
                            f"(text changed: {s['text'] != before['text']}, bars changed: "
                            f"{bars(s) != bars(before)}); the widget shows {s['text'][:300]!r}")

            s = wait_until_settled(
                state, lambda s, before=before: s and s["text"] and s["text"] != before["text"] and bars(s)
                and bars(s) != bars(before) and all(i["complete"] and i["width"] for i in s["images"]),
                run.remaining_ms(GENERATE_TIMEOUT) / 1000, timed_out)
            run.show(cell)
            png = run.screenshot(f"widget-typed-{len(typed) + 1}", element=cell.locator(".jp-Cell-outputArea").first)
            assert s["box"].strip() == caption, f"{TARGET}: the widget's text box holds {s['box']!r}, not {caption!r}"
            assert "Traceback" not in s["text"] and not re.search(r"^\s*✘", s["text"], re.M), (
                f"{TARGET}: the generation widget shows an error after typing {caption!r}: {last_line(s['text'])!r}")
            assert s["outputs"] == 1, (f"{TARGET}: cell {widget} shows {s['outputs']} outputs, expected only the "
                                       f"widget (the continuations and the bars must be inside it)")
            assert "<Figure size" not in s["text"], f"{TARGET}: the widget shows a figure's text repr: {s['text']!r}"
            assert caption.lower() in s["text"].lower(), f"{TARGET}: the continuations do not start from {caption!r}"
            check_not_blank(run, png, f"the generation widget's next-token bars (cell {widget})")
            typed[caption], before = s["text"], s
        assert page.evaluate(LOG_MESSAGES) == logged, (
            f"{TARGET}: after typing into the generation widget, JupyterLab's log console counts new messages: "
            f"output of the widget's callback went there instead of into the widget")
        full_run = "the full run's model" in typed[KEPT_PROMPT]
        kept = "samples" in ((reference_run("lesson12_full") or {}).get("report") or {})
        run.phase("widget")
        print(f"\n{TARGET}: GPT exercise, wrong answer -> {seen['wrong'][:160]!r}; right answer -> "
              f"{seen['right']!r}; widget: typed {CAPTION_START!r} -> {typed[CAPTION_START][:120]!r}, "
              f"{KEPT_PROMPT!r} -> the full run's continuations {'shown' if full_run else 'NOT shown'}"
              f"{'' if kept else ' (the reference file keeps none yet: not checked)'}; "
              f"{run.timings()}; screenshots: {', '.join(p.name for p in run.shots)}")
        assert full_run or not kept, (f"{TARGET}: in fast mode, typing {KEPT_PROMPT!r} should show the full run's "
                                      f"continuations (the reference file's samples); the widget shows "
                                      f"{typed[KEPT_PROMPT][:300]!r}")
