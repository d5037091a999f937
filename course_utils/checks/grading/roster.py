"""Who is who on a learning platform: the roster file, and the names a platform's bulk download gives files.

    roster = load("roster.csv")                    # Roster (an empty one: load(None))
    entry = roster.find(folder="jdoe")             # Entry(id, name, folder, extra) or None
    download = platform_name("doejane_12345_678_02_seq2seq_bottleneck.ipynb")   # Download(...) or None

The roster is a CSV file with a header row (comma, semicolon or tab; UTF-8, with or without a BOM). Its columns,
in any order (names as written here, any case; other columns are kept):
- `id`: the learner's id on the platform: the column the platform's import matches (Canvas: its user ID, the
  number its bulk download puts in a file's name; Moodle: the field you map it to on import: ID number, email
  address or username);
- `name`: the learner's name as the platform has it; it is written as it is (quoted, and with a leading ' where
  it starts like a formula: =, +, -, @);
- `folder` (optional): the learner's folder in the class folder, or the name part the platform's download gives
  (`doejane`, `Jane Doe`).
A Canvas gradebook export is a roster as it is: `Student` is the name, `ID` the id; its `SIS User ID`,
`SIS Login ID` and `Section` are kept for the Canvas export, and its "Points Possible" row is skipped.

A learner is found by, in this order: the download's number equal to `id`; the folder (or the download's name
part) equal to `folder` or to `id`; the folder or name part equal to `name` once both are lower-cased and
stripped of everything but letters and digits (Canvas names files `doejane` for "Doe, Jane").

Bulk downloads (`Download`): Canvas names each file `<name>[_LATE]_<user id>_<submission id>_<the learner's file
name>` (a resubmission's file name gets `-1`, `-2`); Moodle names it `<Full Name>_<participant id>_assignsubmission_
file_<file name>`, or puts the files in a folder `<Full Name>_<participant id>_assignsubmission_file_`.
"""
import csv
import io
import re
from pathlib import Path
from typing import NamedTuple

CANVAS = re.compile(r"^(?P<person>.+?)(?P<late>_LATE)?_(?P<number>\d+)_(?P<submission>\d+)_(?P<original>.+)$",
                    re.IGNORECASE)
MOODLE_FILE = re.compile(r"^(?P<person>.+)_(?P<number>\d+)_assignsubmission_file_(?P<original>.+)$")
MOODLE_FOLDER = re.compile(r"^(?P<person>.+)_(?P<number>\d+)_assignsubmission_file_?$")
CANVAS_COLUMNS = ("SIS User ID", "SIS Login ID", "Section")


class RosterError(ValueError):
    """A roster that cannot be used; the message names the file and what is wrong."""


class Entry(NamedTuple):
    id: str
    name: str
    folder: str = ""
    extra: dict = {}     # the roster's other columns (Canvas: SIS User ID, SIS Login ID, Section)


class Download(NamedTuple):
    platform: str        # "Canvas" or "Moodle"
    person: str          # the name part ("doejane", "Jane Doe")
    number: str          # Canvas: the user ID; Moodle: the participant id
    original: str        # the learner's own file name ("" for a Moodle folder)
    late: bool = False   # Canvas marked the submission late (`_LATE_`)


def simple(text):
    """`text` lower-cased, with only its letters and digits: how names are compared."""
    return "".join(char for char in str(text).lower() if char.isalnum())


def platform_name(name):
    """The Download a platform's bulk download names `name` (a file's name), or None."""
    found = MOODLE_FILE.match(name)
    if found:
        return Download("Moodle", found["person"], found["number"], found["original"])
    found = CANVAS.match(name)
    if found and name.lower().endswith(".ipynb"):
        return Download("Canvas", found["person"], found["number"], found["original"], bool(found["late"]))
    return None


def platform_folder(name):
    """The Download of a Moodle submission folder's name (`Jane Doe_123_assignsubmission_file_`), or None."""
    found = MOODLE_FOLDER.match(name)
    return Download("Moodle", found["person"], found["number"], "") if found else None


class Roster:
    def __init__(self, entries=(), source=None, columns=()):
        self.entries, self.source, self.columns = list(entries), source, tuple(columns)

    def __bool__(self):
        return bool(self.entries)

    def find(self, folder=None, number=None):
        """The entry of the learner whose folder (or download name part) is `folder`, or whose platform id (a
        download's number) is `number`; None when the roster has none."""
        if number:
            for entry in self.entries:
                if entry.id == str(number):
                    return entry
        if folder:
            for entry in self.entries:
                if folder in (entry.folder, entry.id) and folder:
                    return entry
            key = simple(folder)
            matches = [entry for entry in self.entries if key and simple(entry.name) == key]
            if len(matches) == 1:
                return matches[0]
        return None

    def canvas_extra(self):
        """The Canvas columns the roster has (for the Canvas export)."""
        return [column for column in CANVAS_COLUMNS if column in self.columns]


def _dialect(text):
    first = text.split("\n", 1)[0]
    delimiter = max(",;\t", key=first.count)
    return delimiter


def load(path):
    """The Roster of the CSV file `path` (None: an empty roster)."""
    if path is None:
        return Roster()
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as error:
        raise RosterError(f"cannot read the roster {path}: {getattr(error, 'strerror', None) or error}") from None
    reader = csv.DictReader(io.StringIO(text, newline=""), delimiter=_dialect(text))
    header = [str(name or "").strip() for name in (reader.fieldnames or [])]
    lower = {name.lower(): name for name in header}
    id_column = lower.get("id")
    name_column = lower.get("name") or lower.get("student")
    folder_column = lower.get("folder")
    if id_column is None or name_column is None:
        raise RosterError(f"the roster {path} needs a header row with the columns `id` and `name` (or a Canvas "
                          f"gradebook export's `ID` and `Student`); its header is {', '.join(header) or 'empty'}")
    entries, seen = [], {}
    for number, row in enumerate(reader, 2):
        row = {str(k or "").strip(): (v or "").strip() for k, v in row.items() if k is not None}
        name, ident = row.get(name_column, ""), row.get(id_column, "")
        if "points possible" in name.lower() and not ident:   # (a Canvas export's second row)
            continue
        if not ident and not name:
            continue
        if not ident:
            raise RosterError(f"the roster {path}, line {number}: {name!r} has no id")
        if ident in seen:
            raise RosterError(f"the roster {path}, lines {seen[ident]} and {number}: the id {ident!r} twice")
        seen[ident] = number
        extra = {k: v for k, v in row.items() if k not in (id_column, name_column, folder_column)}
        entries.append(Entry(ident, name, row.get(folder_column, "") if folder_column else "", extra))
    return Roster(entries, path, header)
