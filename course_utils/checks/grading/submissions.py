"""Which notebooks the grader grades, and every notebook it does not grade, with the reason.

A lesson notebook is a file named NN_*.ipynb (any case: `00_Welcome.IPYNB` too), NN a lesson that
has checks. A folder that holds lesson notebooks is one learner's (learner = the folder's name); a
folder without any, but with sub-folders that hold some, is a class (one learner per sub-folder); a
file is one notebook (learner = its folder's name). Nothing else is graded, and each notebook file
left out is named in a note: in a hidden folder (`.bob`, `.ipynb_checkpoints`), in a sub-folder of a
learner's folder, not named NN_*.ipynb, a lesson without checks, or an older copy of a lesson.

A platform's bulk download is recognised too (`roster.py`): in a class folder, a file named as Canvas names it
(`doejane_12345_678_02_seq2seq_bottleneck.ipynb`, `doejane_LATE_12345_...`) or as Moodle does (`Jane Doe_123_
assignsubmission_file_02_....ipynb`) is that learner's notebook, and a Moodle folder `Jane Doe_123_assignsubmission_
file_` is that learner's folder; the learner is the roster's (matched by the platform's number or the name), else
the name the platform gives. A downloaded file whose own name is not a lesson's is not graded, with that reason.
Every file left out is also given to the caller as data (`Note.files`: [(path, reason)]), so that the grades can
list it.

Links are never followed out of a learner's folder: a lesson notebook that is a symbolic link (to the
course's solutions, to another learner's notebook, to itself), and a learner's folder in a class folder
that is a link (to another learner's folder), are graded `error` with the reason (`Submission.problem`);
a link that cannot be read at all (a loop) is named in a note. Only what the instructor names on the
command line is taken as it is, links included.
"""
import os
import re
from pathlib import Path
from typing import NamedTuple, Optional

from . import roster as rosters

NOTEBOOK_NAME = re.compile(r"^(\d\d)_.*\.ipynb$", re.IGNORECASE)


class Submission(NamedTuple):
    learner: str
    lesson: str
    path: Path
    problem: Optional[str] = None   # why it is graded `error` without being run (a link)
    id: str = ""                    # the learner's id on the platform (the roster's, or the download's number)
    name: str = ""                  # the learner's name, as the roster has it
    late: bool = False              # the platform marked it late (Canvas: `_LATE_` in its name)


class Note(str):
    """A note for the instructor; `files`: the notebooks it says are not graded, [(path, reason)]."""

    def __new__(cls, text, files=()):
        note = super().__new__(cls, text)
        note.files = list(files)
        return note


def _identity(folder_name, roster, download=None):
    """(learner, id, name) of a learner's folder or a download, through the roster when it knows them."""
    person = download.person if download is not None else folder_name
    entry = roster.find(folder=person, number=download.number if download is not None else None) if roster else None
    if entry is not None:
        return entry.folder or person, entry.id, entry.name
    return person, download.number if download is not None else "", ""


def _is_notebook(path):
    return path.name.lower().endswith(".ipynb")


def _absolute(path):
    """`path` made absolute WITHOUT following links (a learner's link is never resolved)."""
    return Path(os.path.abspath(path))


def _link(path, what="the notebook"):
    """Why `path` is not graded when it is a symbolic link (None when it is not one)."""
    if not path.is_symlink():
        return None
    try:
        target = os.readlink(path)
    except OSError:
        target = "?"
    return (f"{what} {path.name} is a symbolic link (to {target}): the grader never follows links out of a "
            "learner's folder")


def _lesson_of(path, lessons):
    match = NOTEBOOK_NAME.match(path.name)
    return match.group(1) if match and match.group(1) in lessons else None


def _lesson_notebooks(folder, lessons, notes):
    """{lesson: path} for the lesson notebooks directly in `folder` (the newest one if several; links count)."""
    by_lesson = {}
    for path in sorted(p for p in folder.iterdir() if (p.is_symlink() or p.is_file()) and _is_notebook(p)):
        lesson = _lesson_of(path, lessons)
        if lesson:
            by_lesson.setdefault(lesson, []).append(path)
    chosen = {}
    for lesson, paths in sorted(by_lesson.items()):
        chosen[lesson] = max(paths, key=lambda p: p.lstat().st_mtime)
        if len(paths) > 1:
            others = ", ".join(p.name for p in paths if p != chosen[lesson])
            notes.append(f"{folder}: several notebooks for lesson {lesson}; grading the newest, "
                         f"{chosen[lesson].name} (not {others}); name a file to grade another one")
    return chosen


def _why_not(path, root, lessons, learner_dirs):
    """Why the notebook `path` (found under the argument `root`) is not graded."""
    rel = path.relative_to(root)
    if path.is_symlink() and not path.exists():
        return "a symbolic link that leads nowhere (or to itself)"
    hidden = [part for part in rel.parts[:-1] if part.startswith(".")]
    if hidden:
        return f"in the hidden folder {hidden[0]!r} (name the folder or file to grade it)"
    download = rosters.platform_name(path.name)
    if download is not None and path.parent == root:
        match = NOTEBOOK_NAME.match(download.original)
        if not match:
            return (f"a {download.platform} download of {download.person!r} whose own file name "
                    f"({download.original!r}) is not a lesson's (NN_*.ipynb)")
        if match.group(1) not in lessons:
            return f"a {download.platform} download of {download.person!r}: lesson {match.group(1)} has no checks"
        return (f"an older {download.platform} download of {download.person!r} for the same lesson (the newest is "
                "graded)")
    if path.parent not in learner_dirs:
        return ("in a sub-folder, not directly in a learner's folder (name it to grade it), nor named like a "
                "platform's download (name_12345_678_NN_....ipynb)")
    match = NOTEBOOK_NAME.match(path.name)
    if not match:
        return "not named NN_*.ipynb like a lesson notebook"
    if match.group(1) not in lessons:
        return f"lesson {match.group(1)} has no checks"
    return "an older notebook of the same lesson (the newest is graded)"


def _unlisted(root, graded, lessons, learner_dirs):
    """Notes naming every notebook under the folder `root` that is not graded, grouped by reason."""
    by_reason = {}
    for folder, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted(files):
            path = Path(folder) / name
            if _is_notebook(path) and _absolute(path) not in graded:
                reason = _why_not(path, root, lessons, learner_dirs)
                by_reason.setdefault(reason, []).append(str(path.relative_to(root)))
    notes = [Note(f"{root}: not graded, {reason}: {', '.join(paths)}", [(root / path, reason) for path in paths])
             for reason, paths in by_reason.items()]
    for folder, dirs, _ in os.walk(root):   # (os.walk lists links to folders among the folders, never enters them)
        for name in sorted(dirs):
            link = Path(folder) / name
            if link.is_symlink() and Path(folder) != root:
                reason = _link(link, 'the folder')
                notes.append(Note(f"{root}: not graded, {reason}: {link.relative_to(root)}", [(link, reason)]))
    return notes


def _member(member, lessons, notes, roster):
    """The Submissions of one member of a class folder: a learner's folder (a Moodle download's too), or a link
    (graded `error`)."""
    learner, ident, name = _identity(member.name, roster, rosters.platform_folder(member.name))
    link = _link(member, "the learner's folder")
    if link is None:
        return [Submission(learner, lesson, p, _link(p), ident, name)
                for lesson, p in _lesson_notebooks(member, lessons, notes).items()]
    try:   # (the names only, to give each of its lessons its row)
        names = sorted(os.listdir(member))
    except OSError as error:
        notes.append(Note(f"{member}: not graded, {link} ({error.strerror or error})", [(member, link)]))
        return []
    subs = {}
    for entry in names:
        lesson = _lesson_of(Path(entry), lessons)
        if lesson and lesson not in subs:
            subs[lesson] = Submission(learner, lesson, member / entry, link, ident, name)
    if not subs:
        notes.append(Note(f"{member}: not graded, {link}", [(member, link)]))
    return list(subs.values())


def _downloads(folder, lessons, notes, roster):
    """The Submissions of the files of a platform's bulk download directly in the class folder `folder`: each the
    learner's notebook of its lesson (the newest, where one learner has several of a lesson)."""
    by_key = {}
    for path in sorted(p for p in folder.iterdir() if (p.is_symlink() or p.is_file()) and _is_notebook(p)):
        download = rosters.platform_name(path.name)
        lesson = _lesson_of(Path(download.original), lessons) if download is not None else None
        if lesson is None:
            continue
        learner, ident, name = _identity(path.name, roster, download)
        by_key.setdefault((learner, lesson), []).append(
            Submission(learner, lesson, path, _link(path), ident, name, download.late))
    chosen = []
    for _, subs in sorted(by_key.items()):
        chosen.append(max(subs, key=lambda sub: sub.path.lstat().st_mtime))
    return chosen


def find_submissions(args, lessons, roster=None):
    """([Submission], notes, problems) for the command-line arguments; `roster`: who is who (roster.py)."""
    roster = roster if roster is not None else rosters.Roster()
    found, notes, problems = [], [], []
    known = f"NN one of {', '.join(lessons)}"
    for arg in args:
        path = _absolute(arg)
        if path.is_file() or path.is_symlink() and _is_notebook(path):
            lesson = _lesson_of(path, lessons)
            download = rosters.platform_name(path.name)
            if lesson is None and download is not None:
                lesson = _lesson_of(Path(download.original), lessons)
            if lesson:
                learner, ident, name = (_identity(path.name, roster, download) if download is not None
                                        else _identity(path.parent.name, roster))
                found.append(Submission(learner, lesson, path, _link(path), ident, name,
                                        bool(download and download.late)))
            else:
                problems.append(f"{arg}: not a lesson notebook (expected a file named NN_*.ipynb, {known})")
            continue
        if not path.is_dir():
            problems.append(f"{arg}: no such file or folder")
            continue
        mine = _lesson_notebooks(path, lessons, notes)
        members = [d for d in sorted(path.iterdir()) if (d.is_symlink() or d.is_dir()) and not d.name.startswith(".")]
        if mine:
            learner, ident, name = _identity(path.resolve().name, roster)
            theirs = [Submission(learner, lesson, p, _link(p), ident, name) for lesson, p in mine.items()]
            learner_dirs = {path}
        else:
            theirs = _downloads(path, lessons, notes, roster)
            for member in members:
                theirs += _member(member, lessons, notes, roster)
            learner_dirs = {m for m in members if not m.is_symlink()}
            if not theirs:
                problems.append(f"{arg}: no lesson notebooks (NN_*.ipynb, {known}) in it or in its sub-folders")
        found += theirs
        notes += _unlisted(path, {s.path for s in theirs}, lessons, learner_dirs)
    seen = {}
    for sub in found:
        key = (sub.learner, sub.lesson)
        if key in seen and seen[key] != sub.path:
            problems.append(f"two notebooks for learner {sub.learner!r}, lesson {sub.lesson}: {seen[key]} and "
                            f"{sub.path} (learners are named after their folders: rename one)")
        seen.setdefault(key, sub.path)
    unique = {(s.learner, s.lesson): s for s in found}
    return sorted(unique.values()), notes, problems
