"""The class's results, without a kernel: the points file, the roster and a platform's bulk-download names, the
grades CSV (every field quoted, no formula under any separator, merged run after run), the Canvas and Moodle
gradebooks (parsed as those platforms document their imports), the class view, shards joined into the one-process
result, a timed-out notebook graded again alone, and errors that name their path. Grading is faked here (one
function standing for the sandboxed run of a notebook); test_grade_class.py grades a small class for real."""
import csv
import html
import importlib
import io
import json
import os
import re
import sys
import threading
import time
from pathlib import Path

import nbformat
import pytest

from course_utils.checks import grading as G
from course_utils.checks.grading import command, gradebook, judge, kernel_side, launch, sandbox, worker
from course_utils.checks.grading import points as pointfiles
from course_utils.checks.grading import roster as rosters
from course_utils.checks.grading.report import Row

ROOT = Path(__file__).resolve().parents[1]
FORMULA = ("=", "+", "-", "@")


def _notebook(path, *cells):
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells]), path)
    return path


# ---------------------------------------------------------------------------------------------
# Points
# ---------------------------------------------------------------------------------------------
def test_the_points_file_gives_each_exercise_its_points_and_refuses_what_the_course_has_not(tmp_path, monkeypatch):
    course = pointfiles.load()
    exercises = pointfiles.known_exercises()
    assert course.source == pointfiles.DEFAULT_FILE and course.default == 1
    assert all(course.of(lesson, exercise) == 1 for lesson, names in exercises.items() for exercise in names)
    mine = tmp_path / "points.toml"
    mine.write_text("default = 2\n[lesson01]\nsoftmax = 5  # the first one counts more\nattention = 0.5\n")
    points = pointfiles.load(mine)
    assert (points.of("01", "softmax"), points.of("01", "attention"), points.of("00", "weighted_sum")) == (5, 0.5, 2)
    assert points.lesson("01", exercises["01"]) == 5 + 0.5 + 2 * (len(exercises["01"]) - 2)
    for text, words in (("[lesson99]\nx = 1\n", "[lesson99]: no such lesson"),
                        ("[lesson01]\nsoftmx = 1\n", "[lesson01] softmx: lesson 01 has no such exercise"),
                        ("[lesson01]\nsoftmax = -1\n", "points must be a number >= 0"),
                        ("default = \"one\"\n", "points must be a number >= 0"), ("[lesson01\n", "not a TOML file")):
        mine.write_text(text)
        with pytest.raises(pointfiles.PointsError, match=re.escape(words)) as raised:
            pointfiles.load(mine)
        assert str(mine) in str(raised.value)
    monkeypatch.setitem(sys.modules, "tomllib", None)   # (Python < 3.11 without tomli: the file's own small form)
    monkeypatch.setitem(sys.modules, "tomli", None)
    mine.write_text("# comment\ndefault = 1\n\n[lesson01]\nsoftmax = 3\n")
    assert pointfiles.load(mine).of("01", "softmax") == 3
    assert pointfiles.load().of("01", "softmax") == 1


# ---------------------------------------------------------------------------------------------
# The roster, and the names of a platform's bulk download
# ---------------------------------------------------------------------------------------------
def test_bulk_download_names_are_recognised():
    got = rosters.platform_name("doejane_12345_678_02_seq2seq_bottleneck.ipynb")
    assert got == rosters.Download("Canvas", "doejane", "12345", "02_seq2seq_bottleneck.ipynb", False)
    late = rosters.platform_name("doe_jane_LATE_12345_678_02_seq2seq_bottleneck-1.ipynb")
    assert (late.person, late.number, late.original, late.late) == ("doe_jane", "12345",
                                                                   "02_seq2seq_bottleneck-1.ipynb", True)
    moodle = rosters.platform_name("Jane Doe_4321_assignsubmission_file_07_self_attention.ipynb")
    assert (moodle.platform, moodle.person, moodle.number, moodle.original) == (
        "Moodle", "Jane Doe", "4321", "07_self_attention.ipynb")
    assert rosters.platform_folder("Jane Doe_4321_assignsubmission_file_").person == "Jane Doe"
    for name in ("02_seq2seq_bottleneck.ipynb", "notes.ipynb", "doejane_12345_notes.ipynb"):
        assert rosters.platform_name(name) is None, name


def test_a_roster_maps_folders_and_downloads_to_ids_and_names(tmp_path):
    path = tmp_path / "roster.csv"
    path.write_text("\ufeffStudent;ID;SIS User ID;SIS Login ID;Section;folder\n    Points Possible;;;;;\n"
                    "\"Doe, Jane\";12345;S-1;jdoe;A;\nÜnal Şahin;777;S-2;unal;B;the_unal_folder\n"
                    "=HYPERLINK(\"x\");888;;;;\n", encoding="utf-8")
    roster = rosters.load(path)
    assert [e.id for e in roster.entries] == ["12345", "777", "888"] and roster.canvas_extra() == list(
        rosters.CANVAS_COLUMNS)
    assert roster.find(number="12345").name == "Doe, Jane"                 # a Canvas download's number
    assert roster.find(folder="doejane").id == "12345"                     # Canvas's name part: "lastfirst"
    assert roster.find(folder="the_unal_folder").name == "Ünal Şahin"      # the folder column
    assert roster.find(folder="777").name == "Ünal Şahin"                  # a folder named by the id
    assert roster.find(folder="nobody") is None and roster.find(number="1") is None
    for text, words in (("name,email\nx,y\n", "needs a header row with the columns `id` and `name`"),
                        ("id,name\n1,a\n1,b\n", "the id '1' twice"), ("id,name\n,a\n", "'a' has no id")):
        path.write_text(text)
        with pytest.raises(rosters.RosterError, match=re.escape(words)):
            rosters.load(path)


def test_a_bulk_download_is_graded_per_learner_and_every_other_file_is_listed(tmp_path):
    lessons = G.available_lessons()
    klass = tmp_path / "download"
    for name in ("doejane_12345_678_00_welcome.ipynb", "smithjo_LATE_222_9_01_attention_from_scratch.ipynb",
                 "doejane_12345_679_notes.ipynb", "doejane_12345_601_01_attention_from_scratch.ipynb",
                 "doejane_12345_602_01_attention_from_scratch-1.ipynb",
                 "Jane Roe_31_assignsubmission_file_00_welcome.ipynb", "readme.ipynb"):
        _notebook(klass / name)
        time.sleep(0.01)   # (mtimes in order: the resubmission is the newest)
    _notebook(klass / "Max Mu_32_assignsubmission_file_" / "00_welcome.ipynb")
    _notebook(klass / "alice" / "00_welcome.ipynb")
    roster = rosters.Roster([rosters.Entry("12345", "Doe, Jane"), rosters.Entry("31", "Jane Roe", "jroe")])
    found, notes, problems = G.find_submissions([str(klass)], lessons, roster)
    assert not problems
    got = {(s.learner, s.lesson): (s.path.name, s.id, s.name, s.late) for s in found}
    assert got == {
        ("doejane", "00"): ("doejane_12345_678_00_welcome.ipynb", "12345", "Doe, Jane", False),
        ("doejane", "01"): ("doejane_12345_602_01_attention_from_scratch-1.ipynb", "12345", "Doe, Jane", False),
        ("smithjo", "01"): ("smithjo_LATE_222_9_01_attention_from_scratch.ipynb", "222", "", True),
        ("jroe", "00"): ("Jane Roe_31_assignsubmission_file_00_welcome.ipynb", "31", "Jane Roe", False),
        ("Max Mu", "00"): ("00_welcome.ipynb", "32", "", False),
        ("alice", "00"): ("00_welcome.ipynb", "", "", False)}
    skipped = {path.name: reason for note in notes for path, reason in getattr(note, "files", ())}
    assert "whose own file name ('notes.ipynb') is not a lesson's" in skipped["doejane_12345_679_notes.ipynb"]
    assert "an older Canvas download" in skipped["doejane_12345_601_01_attention_from_scratch.ipynb"]
    assert "nor named like a platform's download" in skipped["readme.ipynb"]


# ---------------------------------------------------------------------------------------------
# The grades CSV
# ---------------------------------------------------------------------------------------------
NASTY = ["=HYPERLINK(\"http://x\";\"click\")", "x;=1+1", "tab\t=2+2", "-3", "@SUM(A1)", "+cmd", "'quoted", "a,b"]


def _records():
    rows = [Row(name, "00", "weighted_sum", "wrong", f"raised ValueError: {name}") for name in NASTY]
    rows.append(Row("alice", "00", "weighted_sum", "passed", "✔ weighted sum: correct."))
    return gradebook.from_rows(rows, graded="2025-01-01T00:00:00+00:00") + gradebook.not_graded(
        [(Path("/class/=evil;x.ipynb"), "not named NN_*.ipynb")])


def test_every_field_is_quoted_and_no_separator_makes_a_formula(tmp_path):
    """Every field quoted; read with a comma, a semicolon or a tab as the separator (as a spreadsheet of another
    locale would), no cell starts like a formula; names and messages come back as written."""
    path = tmp_path / "grades.csv"
    gradebook.write(path, _records())
    raw = path.read_text(encoding="utf-8")
    for line in csv.reader(io.StringIO(raw)):
        assert len(line) == len(gradebook.COLUMNS)
    again = io.StringIO()
    csv.writer(again, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(csv.reader(io.StringIO(raw)))
    assert again.getvalue() == raw, "a field that is not quoted"
    for delimiter in (",", ";", "\t"):
        for fields in csv.reader(io.StringIO(raw), delimiter=delimiter):
            for field in fields:
                assert not field.startswith(FORMULA), (delimiter, field)
    records = gradebook.read(path)
    assert records == _records()
    assert [r["learner"] for r in records[:len(NASTY)]] == [
        "'=HYPERLINK(\"http://x\";\"click\")", "x;'=1+1", "tab\\t=2+2", "'-3", "'@SUM(A1)", "'+cmd", "''quoted", "a,b"]


def test_a_regraded_notebook_replaces_its_rows_and_the_class_stays():
    def rec(learner, lesson, outcome, exercise="weighted_sum", file=""):
        return gradebook.record(learner, lesson, exercise, outcome, "", max_points=1, file=file)

    old = [rec("alice", "00", "wrong", file="/c/alice/00.ipynb"), rec("bob", "00", "passed"),
           rec("bob", "01", "passed", "softmax"), rec("bob", "01", "passed", "attention"),
           gradebook.not_graded([(Path("/c/carol/00_x.ipynb"), "a link")])[0]]
    new = [rec("bob", "01", "wrong", "softmax"), rec("bob", "01", "passed", "attention"),
           rec("carol", "00", "passed", file="/c/carol/00_x.ipynb")]
    merged = gradebook.merge(old, new)
    assert [(r["learner"], r["lesson"], r["exercise"], r["outcome"]) for r in merged] == [
        ("alice", "00", "weighted_sum", "wrong"), ("bob", "00", "weighted_sum", "passed"),
        ("bob", "01", "softmax", "wrong"), ("bob", "01", "attention", "passed"),
        ("carol", "00", "weighted_sum", "passed")]                     # (carol's "not graded" row is gone)
    assert gradebook.merge(merged, []) == merged and gradebook.merge([], merged) == merged


# ---------------------------------------------------------------------------------------------
# Canvas and Moodle, as they document their imports
# ---------------------------------------------------------------------------------------------
def _graded_class():
    points = pointfiles.Points(1, {"01": {"softmax": 2}})
    subs, rows = {}, []
    for learner, ident, name, lessons in (("doejane", "12345", "Doe, Jane", {"00": ["passed"],
                                                                                "01": ["passed", "wrong", "passed",
                                                                                       "passed"]}),
                                          ("=x", "", "", {"00": ["wrong"]})):
        for lesson, outcomes in lessons.items():
            subs[(learner, lesson)] = G.Submission(learner, lesson, Path(f"/c/{learner}/{lesson}.ipynb"), None,
                                                   ident, name)
            exercises = pointfiles.known_exercises()[lesson]
            rows += [Row(learner, lesson, exercise, outcome, "") for exercise, outcome in zip(exercises, outcomes)]
    roster = rosters.Roster([rosters.Entry("12345", "Doe, Jane", "", {"SIS User ID": "S1", "SIS Login ID": "jdoe",
                                                                      "Section": "A"}),
                             rosters.Entry("999", "Ünal Şahin", "", {"SIS Login ID": "unal"})],
                            columns=("Student", "ID", "SIS User ID", "SIS Login ID", "Section"))
    return gradebook.from_rows(rows, subs, points), roster


def test_the_canvas_gradebook_is_what_canvas_imports():
    """Canvas's import: the columns Student, ID, SIS User ID, SIS Login ID, Section, then one per assignment; a row
    "Points Possible"; a student is matched by ID. Lesson 01's points: softmax 2 + three exercises of 1."""
    records, roster = _graded_class()
    table = list(csv.reader(io.StringIO(gradebook.canvas(records, roster))))
    assert table[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "Lesson 00", "Lesson 01"]
    assert table[1][0].strip() == "Points Possible" and table[1][5:] == ["1", "5"]
    rows = {row[1]: row for row in table[2:]}
    assert rows["12345"] == ["Doe, Jane", "12345", "S1", "jdoe", "A", "1", "4"]   # (softmax 2 + 1 + 1; one wrong)
    assert rows["999"] == ["Ünal Şahin", "999", "", "unal", "", "", ""]            # on the roster, nothing handed in
    assert rows[""][0] == "'=x" and rows[""][5:] == ["0", ""]                      # no roster entry: its folder
    for row in table[2:]:
        assert all(cell == "" or float(cell) >= 0 for cell in row[5:])


def test_the_moodle_gradebook_is_what_moodle_imports():
    """Moodle's CSV import: a header row, a column to map to a user field (here "ID number"), a column per grade
    item, numbers with a decimal point."""
    records, roster = _graded_class()
    table = list(csv.reader(io.StringIO(gradebook.moodle(records, roster))))
    assert table[0] == ["ID number", "Full name", "Lesson 00", "Lesson 01"]
    assert {row[0]: row[2:] for row in table[1:]} == {"12345": ["1", "4"], "999": ["", ""], "": ["0", ""]}


def test_the_class_view_shows_every_learner_and_exercise_in_one_page():
    records, _ = _graded_class()
    records += gradebook.from_rows([Row("<script>x</script>", "00", "weighted_sum", "not implemented", "<b>")])
    records += gradebook.not_graded([(Path("/c/notes.ipynb"), "not named NN_*.ipynb")])
    page = gradebook.class_view(gradebook.merge([], records))
    assert "<script>x</script>" not in page and html.escape("<script>x</script>") in page
    rows = re.findall(r"<tr>(.*?)</tr>", page, re.S)
    jane = next(row for row in rows if "Doe, Jane" in row)
    assert re.findall(r"<td class=\w+ title=\"[^\"]*\">(.)</td>", jane) == ["✔", "✔", "✘", "✔", "✔"]
    assert "1/1" in jane and "4/5" in jane and "<b>5/6</b>" in jane
    script = next(row for row in rows if "script" in row)
    assert "○" in script and script.count("–") >= 4
    assert "Not graded (1)" in page and "/c/notes.ipynb" in page


# ---------------------------------------------------------------------------------------------
# The command with grading faked: shards, merging, timeouts graded again, exports
# ---------------------------------------------------------------------------------------------
class FakeGrading:
    """Stands for launch.grade_notebook: an exercise passes when its notebook says "RIGHT", is a timeout when it
    says "SLOW" the first time it is graded; it records which notebooks ran, and how many at once."""

    def __init__(self):
        self.calls, self.lock, self.running, self.most = [], threading.Lock(), 0, 0

    def __call__(self, sub, checks, *args, **kwargs):
        with self.lock:
            self.running += 1
            self.most = max(self.most, self.running)
            first = not any(call[0] == sub.path for call in self.calls)
            self.calls.append((sub.path, time.monotonic()))
        try:
            time.sleep(0.05)
            text = sub.path.read_text()
            if "SLOW" in text and first:
                outcome, message = "timeout", "✘ the check did not finish within 60 s"
            else:
                outcome, message = ("passed", "✔ right") if "RIGHT" in text or "SLOW" in text else ("wrong", "✘ no")
            return launch.Graded([Row(sub.learner, sub.lesson, c.exercise, outcome, message) for c in checks],
                                 True, [])
        finally:
            with self.lock:
                self.running -= 1


@pytest.fixture
def fake(monkeypatch):
    grading = FakeGrading()
    monkeypatch.setattr(launch, "grade_notebook", grading)
    monkeypatch.setattr(sandbox, "unavailable", lambda: None)
    return grading


def _class(base, learners=12):
    klass = base / "class"
    for index in range(learners):
        for lesson, name in (("00", "00_welcome.ipynb"), ("01", "01_attention_from_scratch.ipynb")):
            _notebook(klass / f"learner{index:02d}" / name, "RIGHT" if (index + int(lesson)) % 3 else "wrong")
    _notebook(klass / "notes.ipynb")
    return klass


def _without_times(records):
    return [{k: v for k, v in rec.items() if k != "graded"} for rec in records]


def test_shards_joined_give_the_one_process_gradebook(tmp_path, fake):
    """--shard K/N on N "machines" (here one), then --merge: the same rows, the same Canvas gradebook, as one
    process grading the whole class; every notebook in exactly one shard."""
    klass, lines = _class(tmp_path), []
    assert command.grade([str(klass)], out=str(tmp_path / "one.csv"), log=lines.append) == 0
    one = gradebook.read(tmp_path / "one.csv")
    fake.calls.clear()
    for k in (1, 2, 3):
        assert command.grade([str(klass)], out=str(tmp_path / f"shard{k}.csv"), shard=(k, 3), log=lines.append) == 0
    graded = [path for path, _ in fake.calls]
    assert sorted(graded) == sorted(set(graded)) and len(graded) == 24           # each notebook once
    assert all(1 <= len(gradebook.read(tmp_path / f"shard{k}.csv")) for k in (1, 2, 3))
    assert command.main(["--merge", *(str(tmp_path / f"shard{k}.csv") for k in (1, 2, 3)), "--out",
                         str(tmp_path / "merged.csv"), "--canvas", str(tmp_path / "merged-canvas.csv")]) == 0
    merged = gradebook.read(tmp_path / "merged.csv")
    assert _without_times(merged) == _without_times(one)
    assert gradebook.canvas(merged) == gradebook.canvas(one) == (tmp_path / "merged-canvas.csv").read_text()
    assert sum(r["outcome"] == "not graded" for r in merged) == 1                  # listed once, not N times
    assert [command.shard_of("learner03", "01", 3)] * 2 == [command.shard_of("learner03", "01", 3)
                                                             for _ in range(2)]


def test_a_timed_out_notebook_is_graded_again_alone_after_the_others(tmp_path, fake):
    klass = _class(tmp_path, learners=4)
    _notebook(klass / "learner00" / "00_welcome.ipynb", "SLOW")
    lines = []
    assert command.grade([str(klass)], out=str(tmp_path / "g.csv"), jobs=3, log=lines.append) == 0
    slow = klass / "learner00" / "00_welcome.ipynb"
    times = [t for path, t in fake.calls if path == slow]
    assert len(times) == 2 and fake.most == 3
    assert all(t < times[1] for path, t in fake.calls if path != slow)           # after every other notebook
    row = next(r for r in gradebook.read(tmp_path / "g.csv") if r["learner"] == "learner00" and r["lesson"] == "00")
    assert row["outcome"] == "passed" and "Graded again, alone, after the others" in row["message"]
    assert any("ran out of time: grading them again, one at a time" in line for line in lines)
    assert any(line.startswith("[again, alone] 'learner00'") for line in lines)


def test_grading_one_learner_again_merges_into_the_class_file(tmp_path, fake):
    klass = _class(tmp_path, learners=3)
    out = tmp_path / "grades.csv"
    assert command.grade([str(klass)], out=str(out), log=lambda line: None) == 0
    before = gradebook.read(out)
    _notebook(klass / "learner00" / "00_welcome.ipynb", "RIGHT, handed in again")
    assert command.grade([str(klass / "learner00")], out=str(out), log=lambda line: None) == 0
    after = gradebook.read(out)
    assert len(after) == len(before)
    changed = [(b["learner"], b["lesson"], b["outcome"], a["outcome"]) for b, a in zip(before, after)
               if b["outcome"] != a["outcome"]]
    assert changed == [("learner00", "00", "wrong", "passed")]
    assert out.with_suffix(".html").read_text().split("</table>")[0].count("<tr><td class=name>") == 3
    assert command.grade([str(klass / "learner01")], out=str(out), fresh=True, log=lambda line: None) == 0
    assert {r["learner"] for r in gradebook.read(out)} == {"learner01"}


def test_the_command_exports_the_class_without_grading_and_refuses_what_it_cannot_use(tmp_path, fake, capsys):
    klass = _class(tmp_path, learners=2)
    out = tmp_path / "grades.csv"
    assert command.grade([str(klass)], out=str(out), log=lambda line: None) == 0
    roster = tmp_path / "roster.csv"
    roster.write_text("id,name,folder\n1,Learner Zero,learner00\n2,Learner One,learner01\n")
    assert command.main(["--out", str(out), "--roster", str(roster), "--moodle", str(tmp_path / "m.csv")]) == 0
    table = list(csv.reader(open(tmp_path / "m.csv", newline="", encoding="utf-8")))
    assert table[0] == ["ID number", "Full name", "Lesson 00", "Lesson 01"] and len(table) == 3 + 2   # (+ the
    assert {row[1] for row in table[1:]} >= {"Learner Zero", "Learner One"}                            # roster's)
    (tmp_path / "other.csv").write_text("a,b\n1,2\n")
    assert command.main(["--out", str(tmp_path / "other.csv"), "--moodle", str(tmp_path / "x.csv")]) == 2
    assert "is not a grader's CSV" in capsys.readouterr().out
    (tmp_path / "bad.toml").write_text("[lesson01]\nnope = 1\n")
    assert command.main([str(klass), "--points", str(tmp_path / "bad.toml")]) == 2
    assert "lesson 01 has no such exercise" in capsys.readouterr().err
    assert command.main([str(klass), "--due", "tomorrow"]) == 2
    assert "is not an ISO 8601 time" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        command.main(["--shard", "4/3", str(klass)])


def test_late_work_is_marked_from_its_time_and_the_platforms_mark(tmp_path, fake):
    klass = _class(tmp_path, learners=2)
    old = time.time() - 3 * 86400
    os.utime(klass / "learner00" / "00_welcome.ipynb", (old, old))
    due = gradebook.parse_time(time.strftime("%Y-%m-%dT%H:%M", time.localtime(time.time() - 86400)))
    assert command.grade([str(klass)], out=str(tmp_path / "g.csv"), due=due, log=lambda line: None) == 0
    late = {(r["learner"], r["lesson"]): r["late"] for r in gradebook.read(tmp_path / "g.csv") if r["lesson"]}
    assert late[("learner00", "00")] == "" and late[("learner00", "01")] == "yes" == late[("learner01", "00")]
    submitted = next(r["submitted"] for r in gradebook.read(tmp_path / "g.csv") if r["learner"] == "learner00")
    assert abs(gradebook.parse_time(submitted).timestamp() - old) < 2


# ---------------------------------------------------------------------------------------------
# Errors name their path and what the grader was doing; a timeout says whether the answer computed
# ---------------------------------------------------------------------------------------------
def test_every_error_names_the_path_and_what_the_grader_was_doing(tmp_path):
    missing = tmp_path / "gone" / "00_welcome.ipynb"
    spec = {"notebook": str(missing), "folder": str(missing.parent), "lesson": "00", "result": str(tmp_path / "r.json")}
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    assert worker.main(str(tmp_path / "spec.json")) == 0
    note = json.loads((tmp_path / "r.json").read_text())["notes"][0]
    assert f"could not run the notebook {missing}: while reading the notebook {missing}: FileNotFoundError" in note
    server = kernel_side.Server({}, {})
    with pytest.raises(OSError, match=re.escape(f"could not connect to the judge's socket {tmp_path / 'no.sock'}")):
        server.serve(str(tmp_path / "no.sock"), "token")
    error = FileNotFoundError(2, "No such file or directory")   # (as a socket gives it: no path)
    error.filename = None
    assert worker.described(error, {"notebook": "/n.ipynb"}).startswith("could not run the notebook /n.ipynb: while ")
    error.filename = "/x/y"
    assert "/x/y" in launch._with_path(error)
    sub = G.Submission("alice", "00", tmp_path / "vanished" / "00_welcome.ipynb")
    checks = list(G.module_checks(importlib.import_module("course_utils.checks.lesson00")))
    got = launch.grade_notebook(sub, checks)
    assert got.rows[0].outcome == "error" and str(tmp_path / "vanished") in got.rows[0].message, got.rows[0]


def test_a_timeout_is_called_an_endless_loop_only_when_the_answer_computed_all_along():
    assert "an endless loop" in judge.timeout_message("softmax", 60, 10.0, 69.0)
    busy = judge.timeout_message("softmax", 60, 10.0, 22.0)
    assert "endless" not in busy and "computed for only 12 s (a busy machine, or an answer that waits)" in busy
    assert "endless" not in judge.timeout_message("softmax", 60, None, None)
