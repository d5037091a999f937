"""The class's results: the grades CSV (one row per exercise, merged run after run), the class view, and the
gradebooks a learning platform imports.

    records = from_rows(rows, submissions, points, graded_at)   # the grader's rows as the CSV holds them
    merged = merge(read("grades.csv"), records)                  # a re-graded notebook replaces its old rows
    write("grades.csv", merged); write_text("grades.html", class_view(merged))
    write_text("canvas.csv", canvas(merged, roster)); write_text("moodle.csv", moodle(merged, roster))

The grades CSV has the columns COLUMNS, every field quoted: per exercise, the learner (their folder, or the name a
platform's download gives), the roster's id and name, the lesson, the exercise, the outcome, the points earned and
the exercise's points, when the notebook was handed in (its file's time, UTC) and whether that was late, when it
was graded, the notebook's path and the check's message; and a row per notebook found but not graded (outcome
`not graded`, the reason in `message`). A text a learner controls (a folder's name, a message quoting their
exception) has its control characters escaped (report.one_line / message_text); a field that starts like a formula
(=, +, -, @, a tab, a carriage return, or an apostrophe) gets a leading apostrophe, and so does one of =, +, -, @
right after a comma, semicolon, tab or line break inside it (`guard`); every field is quoted, so no comma, semicolon
or tab in it starts another cell, and where a program splits it anyway, no piece starts a formula. The CSV holds
these texts as written, and everything after it (merging, the class view, the platforms' files) works on them as
they are: nothing is escaped twice.

Merging: rows are keyed by (learner, lesson) for a graded notebook, by its path for one not graded; the rows of a
key in the newer results replace those of the older (a notebook graded again replaces its rows, the rest of the
class stays); a notebook no longer "not graded" (it is graded now) loses that row.

The platforms' files (a column per lesson, "Lesson NN", holding the points earned; a lesson not handed in is left
empty, which both platforms take as "no grade"):
- Canvas (its gradebook import): Student, ID, SIS User ID, SIS Login ID, Section, then the lessons; a second row
  "Points Possible" gives each lesson's points. A learner is matched by ID (the roster's id; a Canvas download's
  number).
- Moodle (grade import from a CSV file): "ID number", "Full name", then the lessons; map "ID number" to the user
  field your ids are (ID number, email address or username) and each lesson to a grade item.
"""
import csv
import datetime
import html
import io
import re
from pathlib import Path

from .points import number_text
from .report import FORMULA_START, message_text, one_line

COLUMNS = ("learner", "id", "name", "lesson", "exercise", "outcome", "points", "max_points", "submitted", "late",
           "graded", "file", "message")
NOT_GRADED = "not graded"
PASSED = "passed"


class GradebookError(ValueError):
    """A file that is not a grader's CSV; the message names it."""


INNER_START = re.compile(r"([,;\t\r\n])([=+\-@])")


def guard(text):
    """A cell a spreadsheet shows as text, never runs as a formula: a leading ' where it starts like one (and where
    it starts with ' itself, so that the mark is always the grader's); and inside it, a ' before =, +, -, @ right
    after a comma, a semicolon, a tab or a line break, so that a program that splits the cell there (a spreadsheet
    set to another separator, a reader that ignores quotes) does not start a formula either."""
    text = INNER_START.sub(r"\1'\2", str(text))
    return "'" + text if text.startswith(FORMULA_START + ("'",)) else text


def _stamp(seconds):
    return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc).isoformat(timespec="seconds")


def now():
    return _stamp(datetime.datetime.now(datetime.timezone.utc).timestamp())


def submitted_at(path):
    """When the file `path` was handed in, as far as the file tells (its modification time), or ""."""
    try:
        return _stamp(Path(path).lstat().st_mtime)
    except OSError:
        return ""


def parse_time(text):
    """An ISO 8601 time (`2025-05-01T23:59`, `2025-05-01 23:59+02:00`); without a zone: this machine's."""
    value = datetime.datetime.fromisoformat(str(text).strip())
    return value if value.tzinfo is not None else value.astimezone()


def is_late(submitted, due, marked=False):
    if marked:
        return "yes"
    if due is None or not submitted:
        return ""
    return "yes" if datetime.datetime.fromisoformat(submitted) > due else ""


def record(learner, lesson, exercise, outcome, message, points=0, max_points=0, id="", name="", submitted="",
           late="", graded="", file=""):
    """One row of the CSV, as it is written (every learner's text escaped and guarded; numbers as text)."""
    earned = max_points if outcome == PASSED else 0
    return {"learner": guard(one_line(learner)), "id": guard(id), "name": guard(name), "lesson": guard(lesson),
            "exercise": guard(one_line(exercise)), "outcome": guard(outcome),
            "points": number_text(earned) if exercise else "",
            "max_points": number_text(max_points) if exercise else "",
            "submitted": submitted, "late": late, "graded": graded, "file": guard(one_line(file)),
            "message": guard(message_text(message))}


def from_rows(rows, subs=None, points=None, graded="", due=None):
    """The records of the grader's Rows; `subs`: {(learner, lesson): Submission} (id, name, file, handed-in time)."""
    out = []
    for row in rows:
        sub = (subs or {}).get((row.learner, row.lesson))
        submitted = submitted_at(sub.path) if sub is not None else ""
        out.append(record(row.learner, row.lesson, row.exercise, row.outcome, row.message,
                          max_points=points.of(row.lesson, row.exercise) if points is not None else 1,
                          id=sub.id if sub is not None else "", name=sub.name if sub is not None else "",
                          submitted=submitted, late=is_late(submitted, due, bool(sub is not None and sub.late)),
                          graded=graded, file=str(sub.path) if sub is not None else ""))
    return out


def not_graded(files, graded=""):
    """The records of the files found but not graded: [(path, reason)]."""
    return [record("", "", "", NOT_GRADED, reason, submitted=submitted_at(path), graded=graded, file=str(path))
            for path, reason in files]


def _key(rec):
    return ("", rec["file"]) if rec["outcome"] == NOT_GRADED else (rec["learner"], rec["lesson"])


def merge(old, new):
    """`old` records with those of every key of `new` replaced by `new`'s (see the module's docstring)."""
    keys = {_key(rec) for rec in new}
    kept = [rec for rec in old if _key(rec) not in keys] + list(new)
    graded_files = {rec["file"] for rec in kept if rec["outcome"] != NOT_GRADED and rec["file"]}
    kept = [rec for rec in kept if not (rec["outcome"] == NOT_GRADED and rec["file"] in graded_files)]
    order = {}
    for index, rec in enumerate(kept):
        order.setdefault(_key(rec), index)
    return sorted(kept, key=lambda rec: (rec["outcome"] == NOT_GRADED, rec["learner"], rec["lesson"],
                                         rec["file"] if rec["outcome"] == NOT_GRADED else "", order[_key(rec)]))


def text(records):
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, COLUMNS, quoting=csv.QUOTE_ALL, lineterminator="\n", extrasaction="ignore")
    writer.writeheader()
    for rec in records:
        writer.writerow({column: rec.get(column, "") for column in COLUMNS})
    return buffer.getvalue()


def write(path, records):
    from ...files import atomic_write_text

    atomic_write_text(text(records), path)


def write_csv(rows, path):
    """The grades CSV of the grader's `rows` alone (the command merges runs: `merge`)."""
    write(path, from_rows(rows))


def write_text(path, content):
    from ...files import atomic_write_text

    atomic_write_text(content, path)


def read(path):
    """The records of the grader's CSV `path` ([] where there is none); a file that is not one is refused."""
    path = Path(path)
    if not path.exists():
        return []
    try:
        with open(path, newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            header = reader.fieldnames or []
            if not {"learner", "lesson", "exercise", "outcome", "message"} <= set(header):
                raise GradebookError(f"{path} is not a grader's CSV (its header: {', '.join(header) or 'none'}); "
                                     "name another --out, or remove it")
            return [{column: (row.get(column) or "") for column in COLUMNS} for row in reader]
    except (OSError, UnicodeDecodeError, csv.Error) as error:
        raise GradebookError(f"cannot read {path}: {error}") from None


# ---------------------------------------------------------------------------------------------
# Totals, and the files a platform imports
# ---------------------------------------------------------------------------------------------
def _number(value):
    try:
        return float(value)
    except (TypeError, ValueError):
        return 0.0


def learners(records):
    """{learner: {"id", "name", "lessons": {lesson: [records]}}} of the graded records, in the CSV's order."""
    out = {}
    for rec in records:
        if rec["outcome"] == NOT_GRADED:
            continue
        entry = out.setdefault(rec["learner"], {"id": "", "name": "", "lessons": {}})
        entry["id"] = entry["id"] or rec["id"]
        entry["name"] = entry["name"] or rec["name"]
        entry["lessons"].setdefault(rec["lesson"], []).append(rec)
    return out


def lesson_points(records):
    """{lesson: its points (the sum of its exercises' points)}, from the records."""
    exercises = {}
    for rec in records:
        if rec["outcome"] != NOT_GRADED:
            exercises.setdefault(rec["lesson"], {})[rec["exercise"]] = _number(rec["max_points"])
    return {lesson: sum(values.values()) for lesson, values in sorted(exercises.items())}


def totals(records):
    """{learner: {lesson: points earned, ..., "total": points earned}} and {lesson: points, "total": points}."""
    possible = lesson_points(records)
    out = {}
    for learner, entry in learners(records).items():
        earned = {lesson: sum(_number(r["points"]) for r in rows) for lesson, rows in entry["lessons"].items()}
        earned["total"] = sum(earned.values())
        out[learner] = earned
    return out, dict(possible, total=sum(possible.values()))


def _people(records, roster=None):
    """[(learner key or None, id, name, roster extra)] of every learner graded and every roster entry."""
    people, seen = [], set()
    for learner, entry in learners(records).items():
        found = roster.find(number=entry["id"]) if roster and entry["id"] else None
        people.append((learner, entry["id"], entry["name"] or learner, found.extra if found else {}))
        if found is not None:
            seen.add(found.id)
    for entry in (roster.entries if roster else []):
        if entry.id not in seen and guard(entry.id) not in {p[1] for p in people}:
            people.append((None, guard(entry.id), guard(entry.name), entry.extra))
    return people


def _platform_rows(records, roster, head, points_row, person_cells):
    earned, possible = totals(records)
    lessons = [lesson for lesson in possible if lesson != "total"]
    buffer = io.StringIO()
    writer = csv.writer(buffer, quoting=csv.QUOTE_ALL, lineterminator="\n")
    writer.writerow(head + [f"Lesson {lesson}" for lesson in lessons])
    if points_row is not None:
        writer.writerow(points_row + [number_text(possible[lesson]) for lesson in lessons])
    for learner, ident, name, extra in _people(records, roster):
        mine = earned.get(learner, {}) if learner is not None else {}
        writer.writerow(person_cells(ident, name, extra)
                        + [number_text(mine[lesson]) if lesson in mine else "" for lesson in lessons])
    return buffer.getvalue()


def canvas(records, roster=None):
    """The Canvas gradebook import: Student, ID, SIS User ID, SIS Login ID, Section, a column per lesson; the
    second row gives each lesson's points ("Points Possible")."""
    fixed = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
    return _platform_rows(records, roster, fixed, ["    Points Possible", "", "", "", ""],
                          lambda ident, name, extra: [name, ident] + [guard(extra.get(c, "")) for c in fixed[2:]])


def moodle(records, roster=None):
    """Moodle's grade import from a CSV file: "ID number", "Full name", a column per lesson."""
    return _platform_rows(records, roster, ["ID number", "Full name"], None,
                          lambda ident, name, extra: [ident, name])


# ---------------------------------------------------------------------------------------------
# The class view: every learner's ✔ / ✘ / ○ per exercise, in one page
# ---------------------------------------------------------------------------------------------
SYMBOL = {"passed": "✔", "not implemented": "○"}   # anything else: ✘
STYLE = """body{font-family:system-ui,sans-serif;margin:1.5em}table{border-collapse:collapse;font-size:14px}
th,td{border:1px solid #ccc;padding:3px 6px;text-align:center}td.name,th.name{text-align:left}
.passed{background:#e6f4ea;color:#137333}.failed{background:#fce8e6;color:#a50e0e}.open{color:#777}
.none{color:#bbb}.late{font-size:11px;color:#b06000}caption{text-align:left;font-weight:bold;margin:.5em 0}"""


def _symbol(outcome):
    return SYMBOL.get(outcome, "✘")


def _css(outcome):
    return {"passed": "passed", "not implemented": "open"}.get(outcome, "failed")


def class_view(records, title="The class's grades"):
    """One HTML page: a row per learner, a column per exercise (grouped by lesson) with ✔ passed, ✘ not passed
    (wrong, copied, missing, timeout, error: the outcome and message show on hovering), ○ not implemented, – not
    handed in; each lesson's points and the course's total; late notebooks marked; then every file not graded."""
    esc = html.escape
    graded = learners(records)
    exercises = {}
    for rec in records:
        if rec["outcome"] != NOT_GRADED:
            exercises.setdefault(rec["lesson"], [])
            if rec["exercise"] not in exercises[rec["lesson"]]:
                exercises[rec["lesson"]].append(rec["exercise"])
    earned, possible = totals(records)
    lessons = sorted(exercises)
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">', f"<title>{esc(title)}</title>",
           f"<style>{STYLE}</style></head><body>", f"<h1>{esc(title)}</h1>",
           "<p>✔ passed · ✘ not passed (wrong, copied, missing, timeout, error: hover for the message) · ○ not "
           "implemented · – not handed in. Points: earned / possible.</p>", "<table>",
           "<tr><th class=name rowspan=2>learner</th><th rowspan=2>id</th>"
           + "".join(f"<th colspan={len(exercises[lesson]) + 1}>lesson {esc(lesson)}</th>" for lesson in lessons)
           + "<th rowspan=2>total</th></tr>",
           "<tr>" + "".join("".join(f"<th>{esc(exercise)}</th>" for exercise in exercises[lesson]) + "<th>points</th>"
                            for lesson in lessons) + "</tr>"]
    for learner, entry in graded.items():
        cells = [f"<td class=name>{esc(entry['name'] or learner)}"
                 + (f"<br><small>{esc(learner)}</small>" if entry["name"] and entry["name"] != learner else "")
                 + f"</td><td>{esc(entry['id'])}</td>"]
        for lesson in lessons:
            rows = {rec["exercise"]: rec for rec in entry["lessons"].get(lesson, [])}
            for exercise in exercises[lesson]:
                rec = rows.get(exercise)
                if rec is None:
                    cells.append("<td class=none>–</td>")
                else:
                    tip = esc(f"{rec['outcome']}: {rec['message']}", quote=True)
                    cells.append(f'<td class={_css(rec["outcome"])} title="{tip}">{_symbol(rec["outcome"])}</td>')
            late = any(rec["late"] for rec in rows.values())
            points = (f"{number_text(earned[learner][lesson])}/{number_text(possible[lesson])}"
                      if lesson in earned[learner] else "–")
            cells.append(f"<td>{esc(points)}" + (" <span class=late>late</span>" if late else "") + "</td>")
        cells.append(f"<td><b>{number_text(earned[learner]['total'])}/{number_text(possible['total'])}</b></td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</table>")
    skipped = [rec for rec in records if rec["outcome"] == NOT_GRADED]
    if skipped:
        out += ["<table>", f"<caption>Not graded ({len(skipped)})</caption>", "<tr><th class=name>file</th>"
                "<th class=name>why</th></tr>"]
        out += [f"<tr><td class=name>{esc(rec['file'])}</td><td class=name>{esc(rec['message'])}</td></tr>"
                for rec in skipped]
        out.append("</table>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def not_graded_lines(records):
    """One line per file not graded, for the end of the grader's report."""
    return [f"not graded: {rec['file']}: {rec['message']}" for rec in records if rec["outcome"] == NOT_GRADED]
