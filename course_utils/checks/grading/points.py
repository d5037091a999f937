"""Points per exercise, from one file an instructor can edit (`points.toml`, beside this module).

    points = load()                      # the course's points.toml (or load("my_points.toml"))
    points.of("01", "softmax")           # 1, unless the file says otherwise
    points.lesson("01", ["softmax", ...])   # the lesson's maximum

The file: `default = N` (every exercise not named), and a table per lesson naming exercises by their check's name:

    default = 1
    [lesson01]
    softmax = 2

A lesson or an exercise the course does not have, or a value that is not a number >= 0, is refused (`PointsError`,
naming the file and the key): a typo must not give an exercise the default in silence.
"""
import re
from pathlib import Path

DEFAULT_FILE = Path(__file__).resolve().with_name("points.toml")


class PointsError(ValueError):
    """A points file that cannot be used; the message names the file and the key."""


class Points:
    def __init__(self, default=1, lessons=None, source=None):
        self.default, self.lessons, self.source = default, dict(lessons or {}), source

    def of(self, lesson, exercise):
        return self.lessons.get(str(lesson), {}).get(str(exercise), self.default)

    def lesson(self, lesson, exercises):
        return sum(self.of(lesson, exercise) for exercise in exercises)


def number_text(value):
    """A number as a gradebook writes it: 2, 1.5 (never 2.0, never a comma)."""
    value = float(value)
    return str(int(value)) if value == int(value) else f"{value:g}"


def _parse(text, source):
    """The TOML of a points file: tomllib (Python 3.11+), tomli, or (without either) the file's own small form:
    `key = number` lines, `[table]` headers and comments."""
    try:
        import tomllib as toml
    except ImportError:   # (Python < 3.11)
        try:
            import tomli as toml
        except ImportError:
            toml = None
    if toml is not None:
        try:
            return toml.loads(text)
        except toml.TOMLDecodeError as error:
            raise PointsError(f"{source}: not a TOML file: {error}") from None
    data, table = {}, None
    for number, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        header = re.fullmatch(r"\[\s*([A-Za-z0-9_-]+)\s*\]", line)
        pair = re.fullmatch(r"([A-Za-z0-9_-]+)\s*=\s*([-+0-9.eE]+)", line)
        if header:
            table = data.setdefault(header[1], {})
        elif pair:
            try:
                value = float(pair[2])
            except ValueError:
                raise PointsError(f"{source}, line {number}: {pair[2]!r} is not a number") from None
            (table if table is not None else data)[pair[1]] = int(value) if value == int(value) else value
        else:
            raise PointsError(f"{source}, line {number}: expected `name = number` or `[lessonNN]`, got {line!r}")
    return data


def _value(value, where):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value or value < 0:
        raise PointsError(f"{where}: points must be a number >= 0, got {value!r}")
    return value


def load(path=None, exercises=None):
    """The Points of the file `path` (default: the course's points.toml). `exercises`: {lesson: [exercise names]}
    the file may name (default: every lesson's checks); anything else is refused."""
    path = Path(path) if path is not None else DEFAULT_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise PointsError(f"cannot read the points file {path}: {error.strerror or error}") from None
    data = _parse(text, path)
    if exercises is None:
        exercises = known_exercises()
    default = _value(data.pop("default", 1), f"{path}: default")
    lessons = {}
    for key, table in data.items():
        found = re.fullmatch(r"lesson(\d\d)", key)
        if not isinstance(table, dict):
            raise PointsError(f"{path}: {key!r}: expected `default = N` or a table [lessonNN] of exercises")
        if not found or found[1] not in exercises:
            raise PointsError(f"{path}: [{key}]: no such lesson (the lessons with checks: "
                              f"{', '.join('lesson' + lesson for lesson in sorted(exercises))})")
        lesson = found[1]
        for exercise, value in table.items():
            if exercise not in exercises[lesson]:
                raise PointsError(f"{path}: [{key}] {exercise}: lesson {lesson} has no such exercise (its exercises: "
                                  f"{', '.join(exercises[lesson])})")
            lessons.setdefault(lesson, {})[exercise] = _value(value, f"{path}: [{key}] {exercise}")
    return Points(default, lessons, path)


def known_exercises():
    """{lesson: [exercise names]} of every lesson with checks (imports them)."""
    import importlib

    from .lessons import available_lessons, module_checks

    out = {}
    for lesson in available_lessons():
        try:
            module = importlib.import_module(f"course_utils.checks.lesson{lesson}")
        except Exception:  # noqa: BLE001 - a lesson whose checks cannot be imported: the grader says so itself
            continue
        out[lesson] = [check.exercise for check in module_checks(module)]
    return out
