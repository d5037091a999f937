"""Your progress through the course: which exercises are done, lesson by lesson.

    python -m course_utils.progress          # the table, in a terminal
    python -m course_utils.progress 03 05    # ... and each exercise of lessons 03 and 05, with its last message
    from course_utils.progress import show_progress; show_progress()   # the table in a notebook (HTML)

Every check you run records its outcome (✔ passed, ✘ not yet right, ○ not started) in a small
file, `~/.attention-course/progress.json` (`COURSE_PROGRESS_FILE` moves it, `COURSE_PROGRESS=off`
stops recording; see `checks/record.py`). The table has a row per lesson and a column per
exercise, in the lesson's order, and counts what is passed, per lesson and in all.
"""
import argparse
import html
import sys

from .checks import exercises
from .checks.record import enabled, load, progress_path

SYMBOL = {"passed": "✔", "wrong": "✘", "not implemented": "○", None: "○"}
COLOUR = {"passed": "#1a7f37", "wrong": "#cf222e", "not implemented": "#9a6700", None: "#8c959f"}
LEGEND = "✔ passed, ✘ not yet right, ○ not started"


def summary(outcomes=None):
    """[(lesson, [(check, status or None, message)], passed)] for every lesson of the course."""
    outcomes = load() if outcomes is None else outcomes
    rows = []
    for lesson, checks in exercises().items():
        cells = []
        for check in checks:
            got = outcomes.get(f"{lesson}/{check.exercise}", {})
            cells.append((check, got.get("status"), got.get("message", "")))
        rows.append((lesson, cells, sum(status == "passed" for _, status, _ in cells)))
    return rows


def _totals(rows):
    return sum(passed for _, _, passed in rows), sum(len(cells) for _, cells, _ in rows)


def _detail(message):
    """The learner's last message for a check, without the check's title, on one line."""
    text = message.split(": ", 1)[1] if message.startswith(("✘ ", "○ ", "✔ ")) and ": " in message else message
    return (text.splitlines() or [""])[0]


def text_table(rows):
    """Lessons down, exercises across (numbered in the lesson's order), passed/total per lesson."""
    width = max(len(cells) for _, cells, _ in rows)
    lines = ["lesson  " + " ".join(f"{i + 1:>2}" for i in range(width)) + "   done"]
    for lesson, cells, passed in rows:
        marks = " ".join(f"{SYMBOL[status]:>2}" for _, status, _ in cells)
        lines.append(f"  {lesson}    {marks}{'   ' * (width - len(cells))}   {passed}/{len(cells)}")
    done, total = _totals(rows)
    lines.append(f"in all: {done} of {total} exercises passed   ({LEGEND})")
    for lesson, cells, _ in rows:
        for check, status, message in cells:
            if status == "wrong":
                lines.append(f"  ✘ lesson {lesson}, {check.title}: {_detail(message)[:150]}")
    return "\n".join(lines)


def lesson_details(rows, lesson, outcomes=None):
    """Each exercise of one lesson: its number, mark, title, last message and when it was checked."""
    outcomes = load() if outcomes is None else outcomes
    for name, cells, passed in rows:
        if name == lesson:
            lines = [f"lesson {lesson}: {passed} of {len(cells)} exercises passed"]
            for i, (check, status, message) in enumerate(cells, 1):
                when = outcomes.get(f"{lesson}/{check.exercise}", {}).get("time", "")
                detail = {"wrong": f": {_detail(message)[:150]}",
                          "not implemented": ": not implemented yet"}.get(status, "")
                lines.append(f"  {i:>2} {SYMBOL[status]} {check.title}{detail}" + (f"   [{when}]" if when else ""))
            return "\n".join(lines)
    return f"lesson {lesson}: no such lesson (the lessons are {', '.join(name for name, _, _ in rows)})"


def html_table(rows):
    """The same table for Jupyter: hover over a mark to read the exercise and its last message."""
    width = max(len(cells) for _, cells, _ in rows)
    head = "".join(f"<th style='text-align:center'>{i + 1}</th>" for i in range(width))
    body = []
    for lesson, cells, passed in rows:
        tds = "".join(
            f"<td style='text-align:center;color:{COLOUR[status]}' title='{html.escape(check.title)}"
            f"{': ' + html.escape(_detail(message)) if message and status != 'passed' else ''}'>"
            f"{SYMBOL[status]}</td>"
            for check, status, message in cells) + "<td></td>" * (width - len(cells))
        body.append(f"<tr><td>{lesson}</td>{tds}<td style='text-align:right'>{passed}/{len(cells)}</td></tr>")
    done, total = _totals(rows)
    return (f"<table><thead><tr><th>lesson</th>{head}<th>done</th></tr></thead><tbody>{''.join(body)}</tbody>"
            f"</table><p>{done} of {total} exercises passed: {LEGEND} (hover over a mark for the exercise). "
            f"{_where()}</p>")


def _where(markup=True):
    path = html.escape(str(progress_path())) if markup else str(progress_path())
    place = f"<code>{path}</code>" if markup else path
    if not enabled():
        return f"Recording is off (COURSE_PROGRESS=off): checks do not update {place}."
    return f"Kept in {place}."


def _in_jupyter():
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and "IPKernelApp" in shell.config


def show_progress(outcomes=None):
    """The progress table: HTML in Jupyter, plain text elsewhere."""
    rows = summary(outcomes)
    if _in_jupyter():
        from IPython.display import HTML, display

        display(HTML(html_table(rows)))
    else:
        print(text_table(rows))


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m course_utils.progress",
                                     description="Show which exercises of the course you have done.")
    parser.add_argument("lessons", nargs="*", metavar="NN", help="also list each exercise of these lessons")
    options = parser.parse_args(argv)
    outcomes = load()
    rows = summary(outcomes)
    print(_where(markup=False))
    print(text_table(rows))
    for lesson in options.lessons:
        print()
        print(lesson_details(rows, lesson.zfill(2), outcomes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
