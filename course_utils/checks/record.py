"""Where every check's outcome is kept: one small JSON file, so that a learner can see what is done.

    ~/.attention-course/progress.json       the default place
    COURSE_PROGRESS_FILE=/some/file.json    another place
    COURSE_PROGRESS=off                     record nothing (the tests and the grader set it)

The file maps "lesson/exercise" (e.g. "01/softmax") to the latest outcome of that check: status
("passed", "wrong" or "not implemented"), the check's message, the time, and how many times it was
run. Checks run in a notebook of the course's `solutions/` folder are not recorded: the solved twin is
not the learner's work (`in_solutions_notebook`: the notebook JupyterLab names, else the kernel's working
folder, which is the notebook's own under JupyterLab, `jupyter nbconvert --execute`, nbclient and nbval).
The file is yours: a progress file you made read-only (no write permission) is never replaced, and
a progress path that is a symbolic link (e.g. into a synced folder) is written THROUGH the link, to
the file it names, keeping that file's permissions. Recording can never break a check, and never loses
anything silently:
- a file that is not valid JSON (or not a progress file) is set aside as `progress.json.damaged` (then
  `.damaged.1`, `.damaged.2`, ...: a backup is never overwritten) and a new one begun;
- entries of the wrong shape (a status that is not one of STATUSES, a message that is not text, ...)
  are left out of what the table shows, and set aside the same way the first time they are found;
- a file or folder that cannot be written: the check still works, and one warning per session says
  that nothing is recorded and why.
Each of these prints one warning (per file and session), never a traceback.
"""
import contextlib
import json
import os
import sys
from datetime import datetime
from pathlib import Path

STATUSES = ("passed", "wrong", "not implemented")


def enabled(environ=None):
    env = os.environ if environ is None else environ
    return env.get("COURSE_PROGRESS", "").strip().lower() not in ("off", "0", "false", "no")


def progress_path(environ=None):
    env = os.environ if environ is None else environ
    if env.get("COURSE_PROGRESS_FILE"):
        return Path(env["COURSE_PROGRESS_FILE"]).expanduser()
    return Path.home() / ".attention-course" / "progress.json"


def in_solutions_notebook(environ=None, cwd=None):
    """True when the kernel runs a notebook of the course's `solutions/` folder: the notebook JupyterLab and
    Jupyter Server name in JPY_SESSION_NAME is in a folder `solutions`; without it (nbconvert, nbclient,
    nbval, VS Code), the kernel's working folder, the notebook's own, is a `solutions` folder beside the
    course's `notebooks` folder."""
    env = os.environ if environ is None else environ
    session = env.get("JPY_SESSION_NAME", "")
    if session.endswith(".ipynb"):
        return Path(session).parent.name == "solutions"
    try:
        folder = Path.cwd() if cwd is None else Path(cwd)
    except OSError:   # (a working folder that was removed)
        return False
    return folder.name == "solutions" and (folder.parent / "notebooks").is_dir()


_WARNED = set()


def warn_once(key, text):
    """One line on stderr, once per session for `key` (a file and what went wrong with it)."""
    if key not in _WARNED:
        _WARNED.add(key)
        print(f"course progress: {text}", file=sys.stderr)


def valid(entry):
    """True for an entry of the shape `record` writes (what the table may show)."""
    return (isinstance(entry, dict) and entry.get("status") in STATUSES
            and isinstance(entry.get("message", ""), str) and isinstance(entry.get("title", ""), str)
            and isinstance(entry.get("time", ""), str)
            and isinstance(entry.get("runs", 0), int) and not isinstance(entry.get("runs", 0), bool)
            and isinstance(entry.get("hinted", False), bool))


def _read_all(path):
    """(valid outcomes, invalid ones) kept in `path`; ({}, {}) for a missing file; ValueError for a damaged one."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}, {}
    data = json.loads(text)
    if not isinstance(data, dict) or not isinstance(data.get("outcomes", {}), dict):
        raise ValueError(f"{path} is not a progress file")
    outcomes = data.get("outcomes", {})
    good = {key: value for key, value in outcomes.items() if valid(value)}
    return good, {key: value for key, value in outcomes.items() if key not in good}


def _read(path):
    return _read_all(path)[0]


def backup_name(path, suffix):
    """The first free `path.suffix`, `path.suffix.1`, ...: a backup is never overwritten."""
    candidate, n = path.with_name(f"{path.name}.{suffix}"), 0
    while candidate.exists():
        n += 1
        candidate = path.with_name(f"{path.name}.{suffix}.{n}")
    return candidate


def _set_aside(path, text, why):
    """Keep `text` (what could not be used) in a new backup beside `path`; say so once."""
    target = backup_name(path, "damaged")
    try:
        with open(target, "x", encoding="utf-8") as f:   # (exclusive: never onto an existing backup)
            f.write(text)
        warn_once((str(path), why), f"{path}: {why}; kept aside in {target.name}, and left out of the table.")
    except OSError as error:
        warn_once((str(path), why), f"{path}: {why}; it could not be kept aside ({error}).")


def load(path=None):
    """{"lesson/exercise": {...}} from the progress file, valid entries only (one warning for the others);
    {} when there is none or it is unreadable."""
    path = Path(path) if path is not None else progress_path()
    try:
        good, bad = _read_all(path)
    except (OSError, RuntimeError) as error:
        if not isinstance(error, FileNotFoundError):
            warn_once((str(path), "unreadable"), f"{path} cannot be read ({error}).")
        return {}
    except ValueError:
        warn_once((str(path), "damaged"), f"{path} is damaged (not a progress file); the next check sets it "
                                          "aside and begins a new one.")
        return {}
    if bad:
        warn_once((str(path), "invalid"), f"{path}: {len(bad)} entr{'y' if len(bad) == 1 else 'ies'} of the wrong "
                                          f"shape ({', '.join(sorted(bad)[:3])}) left out of the table.")
    return good


def target(path):
    """The file a progress path stands for: through a symbolic link, the file it names (a synced folder)."""
    return Path(os.path.realpath(path))


def _read_only(path):
    """True for an existing file nobody may write (e.g. chmod 444): its owner's wish, even for root."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return False
    return not mode & 0o222 or not os.access(path, os.W_OK)


def writable(path=None):
    """None when the progress file can be written; otherwise why not."""
    path = Path(path) if path is not None else progress_path()
    if path.is_symlink() and not target(path).parent.is_dir():
        return f"{path} is a link to {target(path)}, whose folder does not exist"
    path = target(path)
    folder = path if not path.exists() and not path.parent.exists() else path.parent
    while not folder.exists():
        folder = folder.parent
    if path.exists():
        if path.is_dir():
            return f"{path} is a folder"
        return None if not _read_only(path) and os.access(path.parent, os.W_OK) else f"{path} is read-only"
    if not folder.is_dir():
        return f"{folder} is a file, not a folder"
    return None if os.access(folder, os.W_OK) else f"{folder} is read-only"


def _write(text, path):
    """Write `path` whole or not at all (a temporary file renamed onto it), keeping its permissions."""
    import tempfile

    mode = path.stat().st_mode & 0o7777 if path.exists() else None
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")
    try:
        os.chmod(tmp, mode if mode is not None else 0o644)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


@contextlib.contextmanager
def _locked(path):
    """Hold a lock beside `path` while reading and rewriting it (two notebooks may check at once);
    where locking is not available, go on without it."""
    try:
        import fcntl
        handle = open(path.with_name(path.name + ".lock"), "a")
    except (ImportError, OSError):
        yield
        return
    try:
        with contextlib.suppress(OSError):
            fcntl.flock(handle, fcntl.LOCK_EX)
        yield
    finally:
        handle.close()


def record(lesson, exercise, title, status, message="", path=None, hinted=False):
    """Keep the latest outcome of one check; never raises (one warning if nothing can be kept). `hinted`: the
    learner asked for the code-level hint of this exercise (core.Exercise.hint); once set, it stays set, so that
    the table tells an exercise solved with the hint from one solved without."""
    if not enabled() or in_solutions_notebook():
        return
    try:
        path = Path(path) if path is not None else progress_path()
        problem = writable(path) if path.is_symlink() or path.exists() else None
        if problem:
            warn_once((str(path), "unwritable"), f"your progress is not being recorded: {problem}. The checks "
                                                  "still work; make it writable, or set COURSE_PROGRESS_FILE to "
                                                  "another file.")
            return
        path = target(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        with _locked(path):
            try:
                outcomes, bad = _read_all(path)
            except ValueError:  # damaged: keep it aside, start a new file
                _set_aside(path, path.read_text(encoding="utf-8", errors="replace"), "not a progress file")
                outcomes, bad = {}, {}
            if bad:
                _set_aside(path, json.dumps({"version": 1, "outcomes": bad}, indent=1, ensure_ascii=False),
                           f"{len(bad)} entr{'y' if len(bad) == 1 else 'ies'} of the wrong shape")
            key = f"{lesson}/{exercise}"
            before = outcomes.get(key, {})
            if status is None:               # only the hint was asked for: keep the outcome, mark it hinted
                if not before:
                    before = {"lesson": lesson, "exercise": exercise, "title": title, "status": "wrong",
                              "message": message, "time": datetime.now().astimezone().isoformat(timespec="seconds"),
                              "runs": 0}
                outcomes[key] = {**before, "hinted": True}
            else:
                outcomes[key] = {"lesson": lesson, "exercise": exercise, "title": title, "status": status,
                                 "message": message,
                                 "time": datetime.now().astimezone().isoformat(timespec="seconds"),
                                 "runs": before.get("runs", 0) + 1, "hinted": bool(before.get("hinted") or hinted)}
            _write(json.dumps({"version": 1, "outcomes": outcomes}, indent=1, ensure_ascii=False), path)
    except Exception as error:  # noqa: BLE001 - a progress file must never stop a check
        where = path if isinstance(path, Path) else "the progress file"
        warn_once((str(where), "unwritable"), f"your progress is not being recorded: {where} cannot be written "
                                              f"({type(error).__name__}: {error}). The checks still work; set "
                                              "COURSE_PROGRESS_FILE to a file you can write to keep it.")
