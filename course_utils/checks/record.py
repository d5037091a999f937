"""Where every check's outcome is kept: one small JSON file, so that a learner can see what is done.

    ~/.attention-course/progress.json       the default place
    COURSE_PROGRESS_FILE=/some/file.json    another place
    COURSE_PROGRESS=off                     record nothing (the tests and the grader set it)

The file maps "lesson/exercise" (e.g. "01/softmax") to the latest outcome: status ("passed",
"wrong" or "not implemented"), the check's message, the time, and how many times it was run.
Recording can never break a check: any error (a read-only disk, a damaged file) is swallowed.
"""
import json
import os
import time
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


def load(path=None):
    """{"lesson/exercise": {...}} from the progress file; {} when there is none or it is unreadable."""
    path = Path(path) if path is not None else progress_path()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return data.get("outcomes", {}) if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def record(lesson, exercise, title, status, message="", path=None):
    """Keep the latest outcome of one check; never raises."""
    if not enabled():
        return
    try:
        path = Path(path) if path is not None else progress_path()
        outcomes = load(path)
        key = f"{lesson}/{exercise}"
        runs = outcomes.get(key, {}).get("runs", 0) + 1
        outcomes[key] = {"lesson": lesson, "exercise": exercise, "title": title, "status": status,
                         "message": message, "time": time.strftime("%Y-%m-%dT%H:%M:%S"), "runs": runs}
        atomic_write_text(json.dumps({"version": 1, "outcomes": outcomes}, indent=1, ensure_ascii=False),
                          path)
    except Exception:  # noqa: BLE001 - a progress file must never stop a check
        pass
