"""Your progress through the course: which exercises are done, lesson by lesson.

    python -m course_utils.progress          # a table in the terminal
    from course_utils.progress import show_progress; show_progress()   # the same in a notebook

Every check you run records its outcome (✔ passed, ✘ not yet right, ○ not started) in a small
file, `~/.attention-course/progress.json` (`COURSE_PROGRESS_FILE` moves it, `COURSE_PROGRESS=off`
stops recording). The table has a row per lesson and a column per exercise, in the lesson's order.
"""
import html
import sys

from .checks import exercises
from .checks.record import load, progress_path

SYMBOL = {"passed": "✔", "wrong": "✘", "not implemented": "○", None: "○"}
COLOUR = {"passed": "#1a7f37", "wrong": "#cf222e", "not implemented": "#9a6700", None: "#6e7781"}


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


def text_table(rows):
    width = max(len(cells) for _, cells, _ in rows)
    lines = ["lesson  " + " ".join(f"{i + 1:>2}" for i in range(width)) + "   done"]
    for lesson, cells, passed in rows:
        marks = " ".join(f"{SYMBOL[status]:>2}" for _, status, _ in cells)
        lines.append(f"  {lesson}    {marks}{'   ' * (width - len(cells))}   {passed}/{len(cells)}")
    total = sum(len(cells) for _, cells, _ in rows)
    done = sum(passed for _, _, passed in rows)
    lines.append(f"in all: {done} of {total} exercises passed   (✔ passed, ✘ not yet right, ○ not started)")
    wrong = [(lesson, check, message) for lesson, cells, _ in rows for check, status, message in cells
             if status == "wrong"]
    for lesson, check, message in wrong:
        detail = message.removeprefix(f"✘ {check.title}: ").splitlines()[0] if message else ""
        lines.append(f"  ✘ lesson {lesson}, {check.title}: {detail[:150]}")
    return "\n".join(lines)


def html_table(rows):
    width = max(len(cells) for _, cells, _ in rows)
    head = "".join(f"<th style='text-align:center'>{i + 1}</th>" for i in range(width))
    body = []
    for lesson, cells, passed in rows:
        tds = "".join(
            f"<td style='text-align:center;color:{COLOUR[status]}' title='{html.escape(check.title)}"
            f"{': ' + html.escape(message) if message and status != 'passed' else ''}'>{SYMBOL[status]}</td>"
            for check, status, message in cells) + "<td></td>" * (width - len(cells))
        body.append(f"<tr><td>{lesson}</td>{tds}<td style='text-align:right'>{passed}/{len(cells)}</td></tr>")
    total = sum(len(cells) for _, cells, _ in rows)
    done = sum(passed for _, _, passed in rows)
    return (f"<table><thead><tr><th>lesson</th>{head}<th>done</th></tr></thead><tbody>{''.join(body)}</tbody>"
            f"</table><p>{done} of {total} exercises passed: ✔ passed, ✘ not yet right, ○ not started "
            f"(hover over a mark for the exercise). Kept in <code>{html.escape(str(progress_path()))}</code>.</p>")


def show_progress(outcomes=None):
    """The progress table: HTML in Jupyter, plain text elsewhere."""
    rows = summary(outcomes)
    try:
        from IPython import get_ipython
        from IPython.display import HTML, display
        if get_ipython() is not None and "IPKernelApp" in get_ipython().config:
            display(HTML(html_table(rows)))
            return
    except ImportError:
        pass
    print(text_table(rows))


def main(argv=None):
    print(f"Progress kept in {progress_path()}")
    print(text_table(summary()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
