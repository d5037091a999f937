"""Your progress through the course: which exercises are done, lesson by lesson.

    python -m course_utils.checks.progress          # the table, in a terminal
    python -m course_utils.checks.progress 03 05    # ... and each exercise of lessons 03 and 05, with its last message
    from course_utils.checks.progress import show_progress; show_progress()   # the table in a notebook (HTML)

Every check you run records its outcome in a small file, `~/.attention-course/progress.json`
(`COURSE_PROGRESS_FILE` moves it, `COURSE_PROGRESS=off` stops recording; see `record.py`). The table
has a row per lesson: each exercise by its name, in the lesson's order, with its mark (LEGEND), and
what is passed, per lesson and in all. It shows the file as it was when it was drawn: run the cell
(or the command) again to see the checks run since.
"""
import argparse
import html
import sys

from . import exercises
from .record import enabled, load, progress_path, writable

SYMBOL = {"passed": "✔", "wrong": "✘", "not implemented": "○", None: "·"}
HINTED = "ʰ"                  # after the mark: the code-level hint was asked for (core.Exercise.hint)
COLOUR = {"passed": "#1a7f37", "wrong": "#cf222e", "not implemented": "#9a6700", None: "#8c959f"}
LEGEND = ("✔ passed, ✘ checked but not yet right, ○ checked but not written yet (it still raises "
          "NotImplementedError), · never checked; ʰ after a mark: the code hint was shown (✔ʰ: solved with it)")
REFRESH = "The table shows your progress when it was drawn: run this cell again to refresh it."


def summary(outcomes=None):
    """[(lesson, [(check, status or None, message)], passed)] for every lesson of the course."""
    outcomes = load() if outcomes is None else outcomes
    rows = []
    for lesson, checks in exercises().items():
        cells = []
        for check in checks:
            got = outcomes.get(f"{lesson}/{check.exercise}", {})
            cells.append((check, got.get("status"), got.get("message", "")))
            HINTS[lesson, check.exercise] = bool(got.get("hinted"))
        rows.append((lesson, cells, sum(status == "passed" for _, status, _ in cells)))
    return rows


HINTS = {}                    # (lesson, exercise) -> the hint was shown (filled by summary)


def mark(lesson, check, status):
    """✔, ✘, ○ or ·, with ʰ where the code-level hint was shown."""
    return SYMBOL[status] + (HINTED if HINTS.get((lesson, check.exercise)) else "")


def _totals(rows):
    return sum(passed for _, _, passed in rows), sum(len(cells) for _, cells, _ in rows)


def _detail(message):
    """The learner's last message for a check, without the check's title, on one line."""
    text = message.split(": ", 1)[1] if message.startswith(("✘ ", "○ ", "✔ ")) and ": " in message else message
    return (text.splitlines() or [""])[0]


def text_table(rows):
    """A line per lesson: passed/total, then each exercise's mark and name, in the lesson's order."""
    lines = ["lesson  done   exercises (in the lesson's order)"]
    for lesson, cells, passed in rows:
        marks = "  ".join(f"{mark(lesson, check, status)} {check.exercise}" for check, status, _ in cells)
        lines.append(f"  {lesson}   {f'{passed}/{len(cells)}':>5}   {marks}")
    done, total = _totals(rows)
    lines.append(f"in all: {done} of {total} exercises passed")
    lines.append(f"marks: {LEGEND}")
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
                lines.append(f"  {i:>2} {mark(lesson, check, status)} {check.title}{detail}"
                             + (f"   [{when}]" if when else ""))
            return "\n".join(lines)
    return f"lesson {lesson}: no such lesson (the lessons are {', '.join(name for name, _, _ in rows)})"


def html_table(rows):
    """The same table for Jupyter: each exercise by name; hover over it for its title and last message."""
    body = []
    for lesson, cells, passed in rows:
        marks = " ".join(
            f"<span style='white-space:nowrap;margin-right:0.8em;color:{COLOUR[status]}' "
            f"title='{html.escape(check.title)}"
            f"{': ' + html.escape(_detail(message)) if message and status != 'passed' else ''}'>"
            f"{mark(lesson, check, status)} {html.escape(check.exercise)}</span>"
            for check, status, message in cells)
        body.append(f"<tr><td>{lesson}</td><td style='text-align:right'>{passed}/{len(cells)}</td>"
                    f"<td style='text-align:left'>{marks}</td></tr>")
    done, total = _totals(rows)
    return (f"<table><thead><tr><th>lesson</th><th>done</th><th style='text-align:left'>exercises, in the lesson's "
            f"order</th></tr></thead><tbody>{''.join(body)}</tbody></table>"
            f"<p>{done} of {total} exercises passed. Marks: {html.escape(LEGEND)} (hover over an exercise for its "
            f"title and last message). {REFRESH} {_where()}</p>")


def _where(markup=True):
    """Where the progress is kept, and the truth about it: off, not writable, or nothing recorded yet."""
    path = progress_path()
    place = f"<code>{html.escape(str(path))}</code>" if markup else str(path)
    if not enabled():
        return f"Recording is off (COURSE_PROGRESS=off): checks do not update {place}."
    problem = writable(path)
    if problem:
        return (f"Nothing is being recorded: {html.escape(problem) if markup else problem} (set COURSE_PROGRESS_FILE "
                f"to a file you can write).")
    if not path.exists():
        return f"No progress recorded yet: the first check you run starts {place}."
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
    parser = argparse.ArgumentParser(prog="python -m course_utils.checks.progress",
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
