"""Restart Kernel and Run All, as a learner does first: lessons 00, 01 and 10 (learner notebooks).

Kernel > "Restart Kernel and Run All Cells...", then every code cell has run, the last one included, no
output shows a traceback or a "✘" line, and the check of every open exercise shows its one message
"○ <title>: not implemented yet. ..." (wrapped between words when long). In lesson 10 it then checks the
lesson's diagrams and types a German sentence into the translation widget: the widget shows
"translation: ..." and the heatmap of that first typed sentence, inside the widget.
"""
import base64
import re
import time

import pytest

from tests.browser.driver import (
    CHECK_CALL,
    HANG,
    LOG_MESSAGES,
    STREAMS,
    TRACEBACK,
    TRANSLATION_STATE,
    WIDGET_TIMEOUT,
    cell_source,
    check_titles,
    find_widget_cell,
    first_line,
    image_stats,
    last_line,
    notebook_cells,
    open_exercises,
    open_notebook,
    shot_name,
    type_into,
    wait_until_settled,
)
from tests.checking import one_message

pytestmark = [pytest.mark.browser, pytest.mark.slow]   # the exhaustive browser tests: RUN_SLOW=1

# Restart Kernel and Run All Cells: the learner notebook, the ceiling for a hang (driver.py), what to check after it.
RUN_ALL = [
    pytest.param("notebooks/00_welcome.ipynb", HANG, None, id="lesson00"),
    pytest.param("notebooks/01_attention_from_scratch.ipynb", HANG, None, id="lesson01"),
    pytest.param("notebooks/10_translation_multi30k.ipynb", HANG, "translation-widget", id="lesson10",
                 marks=pytest.mark.multi30k),
]
TYPED_SENTENCE = "Zwei Hunde rennen über eine grüne Wiese."  # typed into lesson 10's translation widget
TRANSLATE_TIMEOUT = 300  # s, from pressing Enter in lesson 10's text box to its heatmap (a ceiling: waits on it)


@pytest.mark.parametrize("target, budget, then", RUN_ALL)
def test_restart_run_all(target, budget, then, lab, browser):
    cells = notebook_cells(lab, target)
    code = [i for i, c in enumerate(cells) if c["cell_type"] == "code" and cell_source(c).strip()]
    with open_notebook(lab, browser, target, shot_name(target, "run-all"), budget) as run:
        run.restart_and_run_all()
        states, counts = run.wait_all_ran()
        run.phase("run all")
        last = code[-1]
        run.show(run.cells.nth(last))
        run.screenshot("run-all-done")

        order = [counts[i] for i in code]
        assert order == sorted(order) and len(set(order)) == len(order), (
            f"{target}: after Run All the execution counts are not in the cells' order, once each: "
            f"{dict(zip(code, order))}")
        assert counts[last] == max(order), f"{target}: the last code cell ({last}) did not run last: {counts}"

        problems = []
        for i in code:
            for out in states[i]["outputs"]:
                if TRACEBACK in out["text"]:
                    problems.append(f"cell {i} ({first_line(cells[i])!r}) shows a traceback: "
                                    f"{last_line(out['text'])!r}")
                elif out["mime"] in STREAMS and (wrong := re.search(r"^\s*(✘.*)$", out["text"], re.M)):
                    problems.append(f"cell {i} ({first_line(cells[i])!r}) shows {wrong.group(1)[:200]!r}")

        titles, open_names, notices = check_titles(target), open_exercises(cells), []
        for i in code:
            for check_name, argument in CHECK_CALL.findall(cell_source(cells[i])):
                if argument not in open_names:
                    continue  # an exercise the notebook solves itself: the traceback/✘ rule covers it
                title = titles.get(check_name)
                expected = "○ " + (re.escape(title) if title else "[^:]+") + r": not implemented yet\.(?:\s|$)"
                outs = states[i]["outputs"]
                text = " ".join(o["text"].strip() for o in outs)
                ok = (len(outs) == 1 and outs[0]["mime"] == STREAMS[0] and one_message(text)
                      and re.match(expected, text))
                if ok:
                    notices.append(i)
                else:
                    problems.append(f"cell {i} ({first_line(cells[i])!r}) should show the one message "
                                    f"'○ {titles.get(check_name, check_name)}: not implemented yet. ...' and "
                                    f"nothing else; it shows {len(outs)} output(s): {text[:200]!r}")
        if notices:
            run.show(run.cells.nth(notices[0]))
            run.screenshot("not-implemented-notice")
        if problems:
            run.screenshot("problems")
        assert not problems, (f"{target}: after Restart Kernel and Run All ({len(code)} code cells ran): "
                              + "; ".join(problems))
        assert notices or not open_names, f"{target}: no check of an open exercise ({sorted(open_names)}) was found"
        done = [f"{len(code)} code cells ran, the last ({last}) with count {counts[last]}",
                f"'not implemented yet' in cells {notices}"]

        if then == "translation-widget":
            for i, c in enumerate(cells):
                for attachment in c.get("attachments", {}) if c["cell_type"] == "markdown" else ():
                    done.append("diagram " + run.check_diagram(i, attachment))
            run.phase("diagrams")
            done.append(_type_into_translation_widget(run, cells))
            run.phase("widget")
        print(f"\n{target}: {'; '.join(done)}; {run.timings()}; screenshots: "
              + ", ".join(p.name for p in run.shots))


def _type_into_translation_widget(run, cells):
    """Lesson 10's widget shows the heatmap of its default sentence, then of the first one typed."""
    target, page = run.target, run.page
    stop = find_widget_cell(cells)
    assert stop is not None, f"{target}: no code cell tagged 'widget' (the translation widget)"
    cell = run.cells.nth(stop)

    def state():
        return cell.evaluate(TRANSLATION_STATE)

    def shown(s, other_src=None):
        return (s and "translation:" in s["text"] and len(s["images"]) == 1 and s["images"][0]["complete"]
                and s["images"][0]["width"] > 0 and s["images"][0]["src"] != other_src)

    end = time.monotonic() + run.remaining_ms(WIDGET_TIMEOUT) / 1000
    while not shown(s := state()):
        if time.monotonic() > end:
            run.screenshot("widget-missing")
            pytest.fail(f"{target}: the translation widget in cell {stop} shows no 'translation:' and heatmap "
                        f"for its default sentence within {WIDGET_TIMEOUT} s; it shows "
                        f"{(s['text'] if s else run.output_text(stop)).strip()[:300]!r} and "
                        f"{len(s['images']) if s else 0} image(s)")
        time.sleep(0.25)
    default = s
    run.show(cell)
    run.screenshot("widget-default")

    logged = page.evaluate(LOG_MESSAGES)
    type_into(run, cell.locator(".widget-text input").first, TYPED_SENTENCE)

    def timed_out(s):
        run.screenshot("widget-typed-timeout")
        pytest.fail(f"{target}: after typing {TYPED_SENTENCE!r} and Enter into the translation widget "
                    f"(cell {stop}), no new 'translation:' and heatmap within {TRANSLATE_TIMEOUT} s: "
                    f"the widget shows {s['text'].strip()[:300]!r} and {len(s['images'])} image(s) "
                    f"({[(i['width'], i['height']) for i in s['images']]})")

    s = wait_until_settled(state, lambda s: shown(s, default["images"][0]["src"]),
                           run.remaining_ms(TRANSLATE_TIMEOUT) / 1000, timed_out)
    run.show(cell)
    run.screenshot("widget-typed")
    assert s["input"] == TYPED_SENTENCE, (f"{target}: the widget's text box holds {s['input']!r}, "
                                          f"not the sentence typed {TYPED_SENTENCE!r}")
    assert s["outputs"] == 1, (f"{target}: cell {stop} shows {s['outputs']} outputs, expected only the widget "
                               f"(the heatmap must be inside it)")
    new_messages = page.evaluate(LOG_MESSAGES) - logged
    assert new_messages == 0, (
        f"{target}: after typing {TYPED_SENTENCE!r} into the translation widget, JupyterLab's log console "
        f"counts {new_messages} new message(s): output of the widget's callback (e.g. its figure) "
        f"went there instead of into the widget; screenshot {run.shots[-1]}")
    assert "<Figure size" not in s["text"], (f"{target}: the translation widget shows a figure's text repr "
                                             f"instead of the heatmap: {s['text'].strip()[:300]!r}")
    image = s["images"][0]
    assert image["width"] >= 100 and image["height"] >= 100, (
        f"{target}: the heatmap for {TYPED_SENTENCE!r} is only {image['width']}x{image['height']} px")
    assert image["src"].startswith("data:image/png;base64,"), (
        f"{target}: the heatmap is not an inline PNG: {image['src'][:80]!r}")
    colours, spread = image_stats(base64.b64decode(image["src"].split(",", 1)[1]))
    assert colours > 16 and spread > 10, (
        f"{target}: the heatmap for the first sentence typed ({TYPED_SENTENCE!r}) is blank "
        f"({colours} colours, grey-level standard deviation {spread:.1f}); screenshot {run.shots[-1]}")
    translation = re.search(r"translation:\s*(.*)", s["text"]).group(1).strip()
    return (f"widget: typed {TYPED_SENTENCE!r} -> translation {translation!r}, heatmap "
            f"{image['width']}x{image['height']} px (default sentence: "
            f"{default['images'][0]['width']}x{default['images'][0]['height']} px)")
