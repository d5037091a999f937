"""Where every check's outcome is kept: one small JSON file, so that a learner can see what is done.

    ~/.attention-course/progress.json       the default place
    COURSE_PROGRESS_FILE=/some/file.json    another place
    COURSE_PROGRESS=off                     record nothing (the tests and the grader set it)

The file maps "lesson/exercise" (e.g. "01/softmax") to the latest outcome of that check: status
("passed", "wrong" or "not implemented"), the check's message, the time, and how many times it was
run. Checks run in a notebook of a `solutions/` folder are not recorded: the solved twin is not the
learner's work. Recording can never break a check: any error (a read-only disk, a damaged file) is
swallowed; a file that is not valid JSON is set aside as `progress.json.damaged` and a new one begun.
"""
import contextlib
import json
import os
from datetime import datetime
from pathlib import Path

from ..files import atomic_write_text

STATUSES = ("passed", "wrong", "not implemented")


def enabled(environ=None):
    env = os.environ if environ is None else environ
    return env.get("COURSE_PROGRESS", "").strip().lower() not in ("off", "0", "false", "no")


def progress_path(environ=None):
    env = os.environ if environ is None else environ
    if env.get("COURSE_PROGRESS_FILE"):
        return Path(env["COURSE_PROGRESS_FILE"]).expanduser()
    return Path.home() / ".attention-course" / "progress.json"


def in_solutions_notebook(environ=None):
    """True when the kernel runs a notebook of a `solutions/` folder (JupyterLab and Jupyter Server
    name the notebook in JPY_SESSION_NAME; elsewhere it is unknown and the outcome is recorded)."""
    env = os.environ if environ is None else environ
    session = env.get("JPY_SESSION_NAME", "")
    return session.endswith(".ipynb") and Path(session).parent.name == "solutions"


def _read(path):
    """The outcomes kept in `path`; {} for a missing file; ValueError for a damaged one."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    data = json.loads(text)
    if not isinstance(data, dict) or not isinstance(data.get("outcomes", {}), dict):
        raise ValueError(f"{path} is not a progress file")
    return {key: value for key, value in data.get("outcomes", {}).items() if isinstance(value, dict)}


def load(path=None):
    """{"lesson/exercise": {...}} from the progress file; {} when there is none or it is unreadable."""
    try:
        return _read(Path(path) if path is not None else progress_path())
    except (OSError, ValueError, RuntimeError):
        return {}


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


def record(lesson, exercise, title, status, message="", path=None):
    """Keep the latest outcome of one check; never raises."""
    if not enabled() or in_solutions_notebook():
        return
    try:
        path = Path(path) if path is not None else progress_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        with _locked(path):
            try:
                outcomes = _read(path)
            except ValueError:  # damaged: keep it aside, start a new file
                os.replace(path, path.with_name(path.name + ".damaged"))
                outcomes = {}
            key = f"{lesson}/{exercise}"
            runs = outcomes.get(key, {}).get("runs", 0)
            outcomes[key] = {"lesson": lesson, "exercise": exercise, "title": title, "status": status,
                             "message": message, "time": datetime.now().astimezone().isoformat(timespec="seconds"),
                             "runs": (runs if isinstance(runs, int) else 0) + 1}
            atomic_write_text(json.dumps({"version": 1, "outcomes": outcomes}, indent=1, ensure_ascii=False), path)
    except Exception:  # noqa: BLE001 - a progress file must never stop a check
        pass
