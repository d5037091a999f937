"""Export the course as an nbgrader course folder: one assignment per lesson, ready for `nbgrader
generate_assignment` and `nbgrader autograde` (docs/instructors.md, "Grading with nbgrader").

    python tools/export_nbgrader.py OUT                 # every lesson -> OUT/source/NN_name/NN_name.ipynb
    python tools/export_nbgrader.py OUT 01 07           # only lessons 01 and 07
    python tools/export_nbgrader.py OUT --points FILE   # points per exercise (default: checks/grading/points.toml)
    python tools/export_nbgrader.py OUT --keep-references   # the learners' package keeps the lessons' references

OUT gets nbgrader's layout: `nbgrader_config.py` and `source/<assignment>/<notebook>.ipynb`, the
assignment named after the lesson's notebook (`01_attention_from_scratch`). `nbgrader_config.py` makes autograde
grade as the course's grader does (`course_utils/checks/grading/autograde.py`: each submission in the sandbox, its
test cells filled with the verdicts of the checks run outside the kernel, with a secret seed offset). Each notebook
is built from the solution notebook (the single source), cell by cell:
- an exercise cell (its answer between `### BEGIN SOLUTION` / `### END SOLUTION`) becomes an nbgrader
  solution cell: `generate_assignment` replaces the answer by `raise NotImplementedError()`;
- its check cell `check.NAME(fn)` becomes an autograded test cell worth the exercise's points (the points file),
  calling `check.NAME.strict(fn)`: in Validate, it raises on a wrong answer AND on an open one (the learner's
  `check.NAME(fn)` prints "○ not implemented yet" and lets Run All go on); under autograde it is not run: the
  judge's verdict is its output;
- every other cell is locked (read-only; `autograde` restores it from the source);
- the course's header (links to the solved twin) and the progress table at the end are left out; the
  set-up cell switches on fast mode and turns the progress file off under Validate, and stops a kernel that
  nbgrader's own autograde started (the course's nbgrader_config.py not used: the notebook would run with the
  grader's rights and be checked in its own kernel): nbgrader then reports the submission failed, never graded;
- references withheld (the default): each assignment's folder gets the package as `course-grade
  --withhold-references` gives a kernel (`withhold.kernel_copy`): the lesson's references replaced by stand-ins
  that run the learner's own answer, its checks by ones that say the instructor grades them. The release carries
  it beside the notebook (the notebook imports it first), so the learners need no other copy of the course.
The export never changes `solutions/` or `notebooks/`.
"""
import argparse
import importlib
import re
import shutil
import sys
import tempfile
from pathlib import Path

import nbformat

sys.path.insert(0, str(Path(__file__).resolve().parent))
import build_notebooks  # noqa: E402 - the builder in this folder: markers, generated cells, the repository

ROOT = build_notebooks.ROOT
BEGIN, END = build_notebooks.BEGIN, build_notebooks.END
CHECK_CALL = re.compile(r"check\.(\w+)\((.*)\)")
RELATIVE_LINK = re.compile(r"\]\(\.\./([^)\s]+)\)")

CONFIG = '''\
"""nbgrader's settings for the attention course (written by tools/export_nbgrader.py)."""
from course_utils.checks.grading.autograde import configure

c = get_config()  # noqa: F821 - nbgrader provides get_config

# autograde grades as the course's grader does: each submission runs in the course's sandbox (bubblewrap: a copy of
# its folder, nothing else of this folder), its test cells get the verdicts of the checks run OUTSIDE the kernel,
# with a secret seed offset (course_utils/checks/grading/autograde.py; docs/instructors.md).
configure(c)
c.SandboxedExecute.timeout = 300             # seconds a cell (lessons run in fast mode: seconds to a minute)
c.SandboxedExecute.notebook_timeout = 600    # seconds all its cells together
c.SandboxedExecute.check_timeout = 60        # seconds one exercise's check
c.SandboxedExecute.withhold_references = {withhold}   # True: the kernel's copy without the lesson's references
# Validate (in the learner's notebook) runs nbgrader's own Execute: give a busy hub room (its default is 30 s).
c.Execute.timeout = 300
# The course's stub is nbgrader's: `# YOUR CODE HERE` / `raise NotImplementedError()`.
c.ClearSolutions.code_stub = {{"python": "# YOUR CODE HERE\\nraise NotImplementedError()"}}
c.ClearSolutions.text_stub = "YOUR ANSWER HERE"
# With JupyterHub and nbgrader's exchange, name the course here, e.g.:
# c.CourseDirectory.course_id = "attention-course"
'''


class ExportError(ValueError):
    """A solution notebook that cannot be exported; the message names the notebook and the cell."""


def _meta(grade_id, *, solution=False, grade=False, locked=False, points=None):
    meta = {"grade": grade, "grade_id": grade_id, "locked": locked, "schema_version": 3, "solution": solution,
            "task": False}
    if grade:
        meta["points"] = points
    return meta


REFUSAL = ("this notebook was started by nbgrader's own autograde, which runs it with the grader's rights and checks "
           "it in its own kernel: the course's nbgrader_config.py (tools/export_nbgrader.py) grades it in the course's "
           "sandbox instead. Is course_utils installed where nbgrader runs?")


def setup_cell():
    """The course's set-up cell, plus nbgrader's fast mode and no progress file while nbgrader runs it, and the
    refusal of nbgrader's own autograde kernel."""
    repo = build_notebooks.repository()
    source = (
        "# Set-up: installs the course's helper package where it is missing. When nbgrader's Validate runs this\n"
        "# notebook, every lesson runs at its tiny sizes (COURSE_FAST=1): cells that train take seconds, and a\n"
        "# figure of a full run is shown from the course's reference files. Autograde runs it in the sandbox.\n"
        "import importlib.util, os, subprocess, sys\n"
        "if os.environ.get(\"NBGRADER_EXECUTION\") == \"autograde\":\n"
        f"    sys.stderr.write({REFUSAL!r} + \"\\n\")\n"
        "    os._exit(1)\n"
        "if os.environ.get(\"NBGRADER_EXECUTION\"):\n"
        "    os.environ.setdefault(\"COURSE_FAST\", \"1\")\n"
        "    os.environ.setdefault(\"COURSE_PROGRESS\", \"off\")\n"
        "if importlib.util.find_spec(\"course_utils\") is None:\n"
        f"    subprocess.check_call([sys.executable, \"-m\", \"pip\", \"install\", \"-q\", \"git+{repo}\"])")
    cell = nbformat.v4.new_code_cell(source)
    cell.id = "course-setup"
    cell.metadata = {"nbgrader": _meta("course-setup", locked=True)}
    return cell


def header_cell(name, withheld=False):
    test = ("is its test: your instructor's grader checks it (this notebook holds no reference to check it with)"
            if withheld else
            "is its test: it prints one line with ✔ when your answer is right, and otherwise stops with one red "
            "line that says what is wrong, or that the exercise is not done yet")
    text = (f"**{name[:2]}: an nbgrader assignment of the attention course.** Fill in every cell marked "
            "`# YOUR CODE HERE` (replace `raise NotImplementedError()`) and run it. The cell after each "
            f"exercise {test}. The other cells are read-only.")
    cell = nbformat.v4.new_markdown_cell(text)
    cell.id = "course-header"
    cell.metadata = {"nbgrader": _meta("course-header", locked=True)}
    return cell


def _absolute_links(source, repo):
    return RELATIVE_LINK.sub(lambda m: f"]({repo}/blob/main/{m.group(1)})", source)


def _points_of(points, lesson, check):
    if points is None:
        return 1
    if isinstance(points, (int, float)):
        return points
    return points.of(lesson, check)


def export_notebook(solution_nb, name, points=None, withheld=False):
    """The nbgrader source notebook of one lesson, from its solution notebook (not changed). points: a points.Points
    (each test cell: its exercise's points), a number (every one), or None (1)."""
    nb = nbformat.reads(nbformat.writes(solution_nb), as_version=4)
    repo = build_notebooks.repository()
    cells, checks = [header_cell(name, withheld), setup_cell()], []
    taken = {"course-header", "course-setup"}
    for index, cell in enumerate(nb.cells):
        if set(cell.get("metadata", {}).get("tags", [])) & build_notebooks.GENERATED:
            continue  # the course's header, set-up and progress cells
        where = build_notebooks._where(name, index, cell)
        source = cell.source
        call = CHECK_CALL.fullmatch(source.strip()) if cell.cell_type == "code" else None
        if BEGIN in source or END in source:
            try:
                build_notebooks.clear_solution(source, cell.cell_type)
            except ValueError as error:
                raise ExportError(f"{where}: {error}") from None
            graded = cell.cell_type == "markdown"  # nbgrader grades a written answer by hand
            worth = points.default if hasattr(points, "of") else _points_of(points, name[:2], "")
            meta = _meta(cell.id, solution=True, grade=graded, points=worth if graded else None)
        elif call and "\n" not in source.strip():
            check, args = call.groups()
            cell.source = f"check.{check}.strict({args})"
            meta = _meta(f"check-{check}", grade=True, locked=True, points=_points_of(points, name[:2], check))
            checks.append(check)
        elif re.search(r"\bcheck\.\w+\(", source) and cell.cell_type == "code":
            raise ExportError(f"{where}: a check cell must hold only `check.NAME(answer)` to become a test cell")
        else:
            cell.source = _absolute_links(source, repo) if cell.cell_type == "markdown" else source
            meta = _meta(cell.id, locked=True)
        if meta["grade_id"] in taken:
            raise ExportError(f"{where}: the nbgrader id {meta['grade_id']!r} is taken twice")
        taken.add(meta["grade_id"])
        cell.metadata = {"nbgrader": meta}
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
        cells.append(cell)
    if not checks:
        raise ExportError(f"{name}: no check cell (`check.NAME(answer)`): nothing to grade")
    nb.cells = cells
    nb.metadata = {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
                   "language_info": {"name": "python"}}
    return nb


def withheld_package(lesson, into):
    """OUT/source/<assignment>/course_utils: the package without lesson `lesson`'s references and checks, as
    `course-grade --withhold-references` gives a kernel (withhold.kernel_copy)."""
    sys.path.insert(0, str(ROOT))
    from course_utils.checks.grading import command, lessons, withhold

    checks = list(lessons.module_checks(importlib.import_module(f"course_utils.checks.lesson{lesson}")))
    with tempfile.TemporaryDirectory(prefix="course-export-") as tmp:
        snapshot = command._snapshot(tmp)
        target = Path(into) / "course_utils"
        if target.exists():
            shutil.rmtree(target)
        withhold.kernel_copy(snapshot, lesson, checks, Path(tmp) / "kernel")
        shutil.copytree(Path(tmp) / "kernel" / "course_utils", target,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return target


def export(out, lessons=None, points=None, withhold=True):
    """Write OUT/nbgrader_config.py and OUT/source/<assignment>/<notebook>.ipynb (and, withholding the references,
    OUT/source/<assignment>/course_utils/); return the notebooks written. points: see export_notebook (None: the
    course's points file)."""
    out = Path(out)
    if points is None:
        sys.path.insert(0, str(ROOT))
        from course_utils.checks.grading import points as pointfiles

        points = pointfiles.load()
    solutions = sorted((ROOT / "solutions").glob("[0-9][0-9]_*.ipynb"))
    if lessons:
        unknown = sorted(set(lessons) - {p.name[:2] for p in solutions})
        if unknown:
            raise ExportError(f"no lesson {', '.join(unknown)} in solutions/ (lessons: "
                              f"{', '.join(p.name[:2] for p in solutions)})")
        solutions = [p for p in solutions if p.name[:2] in lessons]
    written = []
    for path in solutions:
        nb = export_notebook(nbformat.read(path, as_version=4), path.name, points, withheld=withhold)
        target = out / "source" / path.stem / path.name
        target.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, target)
        if withhold:
            withheld_package(path.name[:2], target.parent)
        written.append(target)
    (out / "nbgrader_config.py").write_text(CONFIG.format(withhold=False))
    return written


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out", help="the nbgrader course folder to write (created if missing)")
    parser.add_argument("lessons", nargs="*", help="lesson numbers (default: all), e.g. 01 07")
    parser.add_argument("--points", help="the points file (default: course_utils/checks/grading/points.toml)")
    parser.add_argument("--keep-references", action="store_true",
                        help="do not withhold the lessons' references from the release (the learners' checks then "
                             "work in their notebooks, and the references are in their package)")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from course_utils.checks.grading import points as pointfiles

    try:
        points = pointfiles.load(args.points)
        written = export(args.out, args.lessons, points, withhold=not args.keep_references)
    except (ExportError, pointfiles.PointsError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    for path in written:
        print(f"written: {path}")
    print(f"Next, in {args.out}: nbgrader generate_assignment {written[0].parent.name}  (docs/instructors.md)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
