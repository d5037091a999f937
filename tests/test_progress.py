"""The learner's progress: every check records its outcome in one small file, and a table shows it.

Each test points COURSE_PROGRESS_FILE at its own temporary file (and turns recording on: the test
session turns it off everywhere else).
"""
import json
import os
import re
import subprocess
import sys
import threading
from datetime import datetime
from pathlib import Path

import nbformat
import pytest

from course_utils.checks import ExerciseError, exercises, progress, record
from course_utils.checks import lesson00 as check


def right(weights, vectors):
    return weights @ vectors


def wrong(weights, vectors):
    return vectors.sum(axis=0)


def unfinished(weights, vectors):
    raise NotImplementedError()


@pytest.fixture
def progress_file(tmp_path, monkeypatch):
    path = tmp_path / "progress.json"
    monkeypatch.setenv("COURSE_PROGRESS", "on")
    monkeypatch.setenv("COURSE_PROGRESS_FILE", str(path))
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    return path


def test_every_check_records_lesson_exercise_status_message_and_time(progress_file, capsys):
    check.weighted_sum(unfinished)
    entry = record.load()["00/weighted_sum"]
    assert (entry["lesson"], entry["exercise"], entry["status"], entry["runs"]) == (
        "00", "weighted_sum", "not implemented", 1)
    assert entry["title"] == "weighted sum" and "not implemented yet" in entry["message"]
    assert abs((datetime.now().astimezone() - datetime.fromisoformat(entry["time"])).total_seconds()) < 60

    with pytest.raises(ExerciseError) as error:
        check.weighted_sum(wrong)
    entry = record.load()["00/weighted_sum"]
    assert (entry["status"], entry["message"], entry["runs"]) == ("wrong", str(error.value), 2)

    check.weighted_sum(right)
    entry = json.loads(progress_file.read_text())["outcomes"]["00/weighted_sum"]
    assert (entry["status"], entry["runs"]) == ("passed", 3) and entry["message"].startswith("✔")
    printed = capsys.readouterr()
    assert printed.out.count("weighted sum") == 2 and not printed.err   # the notice and the tick; recording: nothing


def test_course_progress_off_writes_nothing(progress_file, monkeypatch):
    monkeypatch.setenv("COURSE_PROGRESS", "off")
    check.weighted_sum(right)
    assert not progress_file.exists() and not progress_file.parent.joinpath("progress.json.lock").exists()


def test_a_solutions_notebook_is_not_the_learners_work(progress_file, monkeypatch, tmp_path):
    monkeypatch.setenv("JPY_SESSION_NAME", str(tmp_path / "course" / "solutions" / "00_welcome.ipynb"))
    check.weighted_sum(right)
    assert not progress_file.exists()
    monkeypatch.setenv("JPY_SESSION_NAME", str(tmp_path / "course" / "notebooks" / "00_welcome.ipynb"))
    check.weighted_sum(right)
    assert record.load()["00/weighted_sum"]["status"] == "passed"


def test_a_read_only_progress_file_is_respected(progress_file, capsys):
    """chmod 444: never replaced (not even by root), and the table says that nothing is being recorded."""
    check.weighted_sum(unfinished)
    progress_file.chmod(0o444)
    before, inode = progress_file.read_text(), progress_file.stat().st_ino
    record._WARNED.clear()
    check.weighted_sum(right)
    check.weighted_sum(right)
    assert progress_file.read_text() == before and progress_file.stat().st_ino == inode
    assert oct(progress_file.stat().st_mode & 0o777) == "0o444"
    out, err = capsys.readouterr()
    assert out.count("✔ weighted sum") == 2 and err.count("is read-only") == 1
    assert progress.main([]) == 0
    assert capsys.readouterr().out.startswith(f"Nothing is being recorded: {progress_file} is read-only")


def test_a_progress_path_that_is_a_link_is_written_through_it(tmp_path, monkeypatch):
    """A link into a synced folder stays a link, and the file it names gets every outcome, keeping its mode."""
    synced = tmp_path / "synced" / "course-progress.json"
    synced.parent.mkdir()
    link = tmp_path / "home" / ".attention-course" / "progress.json"
    link.parent.mkdir(parents=True)
    link.symlink_to(synced)
    monkeypatch.setenv("COURSE_PROGRESS", "on")
    monkeypatch.setenv("COURSE_PROGRESS_FILE", str(link))
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    check.weighted_sum(unfinished)
    synced.chmod(0o600)
    check.weighted_sum(right)
    assert link.is_symlink() and os.readlink(link) == str(synced)
    entry = json.loads(synced.read_text())["outcomes"]["00/weighted_sum"]
    assert (entry["status"], entry["runs"]) == ("passed", 2) and oct(synced.stat().st_mode & 0o777) == "0o600"
    assert sorted(p.name for p in link.parent.iterdir()) == ["progress.json"]   # (no file beside the link)


def _nbconvert(notebook, progress_path, out):
    env = dict(os.environ, COURSE_PROGRESS="on", COURSE_PROGRESS_FILE=str(progress_path), OMP_NUM_THREADS="1")
    env.pop("JPY_SESSION_NAME", None)
    result = subprocess.run([sys.executable, "-m", "jupyter", "nbconvert", "--to", "notebook", "--execute",
                             str(notebook), "--output-dir", str(out)], capture_output=True, text=True, env=env,
                            timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]


def test_running_a_solution_notebook_outside_jupyterlab_records_nothing(tmp_path):
    """`jupyter nbconvert --execute solutions/...` (as docs/results.md runs them) leaves the learner's table
    alone; the same command on the learner's notebook records its outcomes."""
    root = Path(__file__).resolve().parents[1]
    path = tmp_path / "progress.json"
    _nbconvert(root / "solutions" / "00_welcome.ipynb", path, tmp_path / "out")
    assert record.load(path) == {}
    _nbconvert(root / "notebooks" / "00_welcome.ipynb", path, tmp_path / "out")
    assert record.load(path)["00/weighted_sum"]["status"] == "not implemented"
    assert record.in_solutions_notebook({}, cwd=root / "solutions")
    assert not record.in_solutions_notebook({}, cwd=tmp_path / "solutions")    # (a folder of that name elsewhere)


def test_a_progress_file_that_cannot_be_written_never_breaks_a_check(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("COURSE_PROGRESS", "on")
    (tmp_path / "a_file").write_text("")
    monkeypatch.setenv("COURSE_PROGRESS_FILE", str(tmp_path / "a_file" / "progress.json"))  # no such folder
    check.weighted_sum(right)
    with pytest.raises(ExerciseError):  # a wrong answer still raises its own error, not the disk's
        check.weighted_sum(wrong)

    def read_only(*args, **kwargs):
        raise OSError(30, "Read-only file system")
    monkeypatch.setenv("COURSE_PROGRESS_FILE", str(tmp_path / "progress.json"))
    monkeypatch.setattr(record, "_write", read_only)
    check.weighted_sum(right)
    check.weighted_sum(unfinished)
    out = capsys.readouterr().out
    assert out.count("✔ weighted sum") == 2 and "not implemented yet" in out
    assert not (tmp_path / "progress.json").exists()


@pytest.mark.parametrize("content", ["{not json", "[1, 2]", '{"outcomes": {"00/weighted_sum": 3}}'])
def test_a_damaged_progress_file_never_breaks_a_check_and_is_set_aside(progress_file, content, capsys):
    progress_file.write_text(content)
    assert record.load() == {}
    progress.show_progress()            # the table still shows
    check.weighted_sum(right)
    assert "✔ weighted sum" in capsys.readouterr().out
    assert record.load()["00/weighted_sum"]["status"] == "passed"
    kept = progress_file.with_name("progress.json.damaged").read_text()
    assert kept == content or json.loads(kept)["outcomes"] == {"00/weighted_sum": 3}


BOGUS = {"01/softmax": {"status": "bogus", "message": "x"}, "01/attention": [1, 2],
         "02/decoder_step": {"status": "wrong", "message": ["not", "text"]},
         "02/encoder_forward": {"status": "passed", "runs": "many"},
         "00/weighted_sum": {"status": "passed", "message": "✔ weighted sum: correct.", "title": "weighted sum",
                             "time": "2026-01-01T00:00:00+00:00", "runs": 2}}


def test_wrong_typed_entries_are_set_aside_with_one_warning(progress_file, capsys):
    """A status that is not one, a list, a message that is not text: the table and the command still work,
    the valid entries are kept, the others are kept aside once and named in one warning."""
    progress_file.write_text(json.dumps({"version": 1, "outcomes": BOGUS}))
    record._WARNED.clear()
    assert set(record.load()) == {"00/weighted_sum"}
    progress.show_progress()
    assert progress.main(["01", "02"]) == 0
    out, err = capsys.readouterr()
    assert "in all: 1 of" in out and err.count("course progress:") == 1 and "4 entries of the wrong shape" in err
    check.weighted_sum(right)             # the next record keeps them aside (never overwriting a backup) ...
    kept = json.loads(progress_file.with_name("progress.json.damaged").read_text())["outcomes"]
    assert set(kept) == set(BOGUS) - {"00/weighted_sum"}
    saved = json.loads(progress_file.read_text())["outcomes"]
    assert set(saved) == {"00/weighted_sum"} and saved["00/weighted_sum"]["runs"] == 3   # ... and goes on
    result = subprocess.run([sys.executable, "-m", "course_utils.checks.progress"], capture_output=True, text=True,
                            env=dict(os.environ, PYTHONIOENCODING="utf-8"))
    assert result.returncode == 0, result.stderr


def test_a_second_damaged_file_never_overwrites_the_first_backup(progress_file, capsys):
    for content in ["{first", "{second", "[3]"]:
        progress_file.write_text(content)
        check.weighted_sum(right)
    assert progress_file.with_name("progress.json.damaged").read_text() == "{first"
    assert progress_file.with_name("progress.json.damaged.1").read_text() == "{second"
    assert progress_file.with_name("progress.json.damaged.2").read_text() == "[3]"
    assert record.load()["00/weighted_sum"]["runs"] == 1


def test_an_unwritable_place_warns_once_and_the_table_says_so(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("COURSE_PROGRESS", "on")
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    (tmp_path / "a_file").write_text("")
    monkeypatch.setenv("COURSE_PROGRESS_FILE", str(tmp_path / "a_file" / "progress.json"))   # its folder is a file
    record._WARNED.clear()
    check.weighted_sum(right)
    check.weighted_sum(right)
    out, err = capsys.readouterr()
    assert out.count("✔ weighted sum") == 2
    assert err.count("your progress is not being recorded") == 1 and "a_file" in err
    assert progress.main([]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Nothing is being recorded:") and "is a file, not a folder" in out and "Kept in" not in out


def test_before_the_first_check_the_table_says_nothing_is_recorded_yet(progress_file, capsys):
    assert progress.main([]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"No progress recorded yet: the first check you run starts {progress_file}")
    check.weighted_sum(right)
    capsys.readouterr()
    assert progress.main([]) == 0
    assert capsys.readouterr().out.startswith(f"Kept in {progress_file}.")


def test_two_notebooks_checking_at_once_lose_nothing(progress_file):
    """Each write rereads the file under a lock (two threads here: each opens the lock on its own,
    as two kernels would)."""
    def record_many(lesson):
        for i in range(25):
            record.record(lesson, f"exercise{i}", "t", "passed")

    threads = [threading.Thread(target=record_many, args=(lesson,)) for lesson in ("01", "02")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(record.load()) == 50


def _outcomes():
    return {"00/weighted_sum": {"status": "passed", "message": "✔ weighted sum: correct."},
            "01/softmax": {"status": "wrong", "message": "✘ softmax: weights do not sum to 1 over axis -1.\nmore"},
            "01/attention": {"status": "not implemented",
                             "message": "○ attention in matrix form: not implemented yet."}}


def test_the_text_table_names_every_exercise_and_explains_the_marks():
    rows = progress.summary(_outcomes())
    lines = progress.text_table(rows).splitlines()
    lessons = exercises()
    assert [line.split()[0] for line in lines[1:len(lessons) + 1]] == list(lessons)
    assert lines[1].split() == ["00", "1/1", "✔", "weighted_sum"]
    words = lines[2].split()
    marks = dict(zip(words[3::2], words[2::2]))
    assert list(marks) == [c.exercise for c in lessons["01"]] and words[1] == f"0/{len(lessons['01'])}"
    assert (marks["softmax"], marks["attention"], marks["bahdanau_context"]) == ("✘", "○", "·")
    total = sum(len(checks) for checks in lessons.values())
    assert lines[len(lessons) + 1] == f"in all: 1 of {total} exercises passed"
    assert lines[len(lessons) + 2].startswith("marks: ✔ passed, ✘ checked but not yet right, ○ checked but not written")
    assert "· never checked" in lines[len(lessons) + 2]
    assert lines[-1] == "  ✘ lesson 01, softmax: weights do not sum to 1 over axis -1."   # what to fix, one line


def test_the_lesson_details_list_each_exercise():
    text = progress.lesson_details(progress.summary(_outcomes()), "01", _outcomes())
    assert text.splitlines()[0].startswith("lesson 01: 0 of ")
    assert re.search(r"^ +\d ✘ softmax: weights do not sum to 1 over axis -1\.$", text, re.M)
    assert re.search(r"^ +\d ○ attention in matrix form: not implemented yet$", text, re.M)


def test_the_html_table_names_each_exercise_explains_the_marks_and_how_to_refresh():
    outcomes = _outcomes()
    outcomes["01/softmax"]["message"] = "✘ softmax: <b>'quoted'</b>"
    page = progress.html_table(progress.summary(outcomes))
    assert page.startswith("<table>") and page.count("<tr>") == len(exercises()) + 1
    assert "title='softmax: &lt;b&gt;&#x27;quoted&#x27;&lt;/b&gt;'>✘ softmax</span>" in page
    assert ">· bahdanau_context</span>" in page and ">○ attention</span>" in page
    assert f"1 of {sum(len(c) for c in exercises().values())} exercises passed" in page
    assert "never checked" in page and "not written yet" in page and "run this cell again to refresh" in page


def test_in_a_jupyter_kernel_checks_record_and_the_progress_cell_shows_html(tmp_path):
    from course_utils.notebook_client import SteadyNotebookClient as NotebookClient

    path = tmp_path / "progress.json"
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("from course_utils.checks import lesson00 as check\n"
                                  "check.weighted_sum(lambda weights, vectors: weights @ vectors)"),
        nbformat.v4.new_code_cell("from course_utils.checks.progress import show_progress\nshow_progress()")])
    env = dict(os.environ, COURSE_PROGRESS="on", COURSE_PROGRESS_FILE=str(path), OMP_NUM_THREADS="1")
    env.pop("JPY_SESSION_NAME", None)
    NotebookClient(nb, timeout=300, kernel_name="python3").execute(env=env, cwd=str(tmp_path))
    assert record.load(path)["00/weighted_sum"]["status"] == "passed"
    (shown,) = nb.cells[1].outputs
    page = shown["data"]["text/html"]
    assert shown["output_type"] == "display_data" and page.startswith("<table>")
    assert re.search(r"<td>00</td><td [^>]*>1/1</td><td [^>]*><span [^>]*>✔ weighted_sum</span>", page)
    assert str(path) in page


@pytest.mark.parametrize("module", ["course_utils.checks.progress"])
def test_python_m_progress_prints_the_table(progress_file, module):
    check.weighted_sum(right)
    check_output = subprocess.run([sys.executable, "-m", module], capture_output=True, text=True,
                                  env=dict(os.environ, PYTHONIOENCODING="utf-8"))
    assert check_output.returncode == 0, check_output.stderr
    out = check_output.stdout.splitlines()
    assert out[0] == f"Kept in {progress_file}." and out[1].startswith("lesson  done   exercises")
    assert re.match(r"in all: 1 of \d+ exercises passed", out[-2]) and out[-1].startswith("marks: ")


def test_the_table_says_when_recording_is_off(progress_file, monkeypatch, capsys):
    monkeypatch.setenv("COURSE_PROGRESS", "off")
    assert progress.main(["0"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Recording is off (COURSE_PROGRESS=off)")
    assert re.search(r"^lesson 00: 0 of \d+ exercises passed$", out, re.M)
    assert "Recording is off" in progress.html_table(progress.summary({}))
