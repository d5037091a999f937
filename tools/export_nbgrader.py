"""Export the course as an nbgrader course folder: one assignment per lesson, ready for `nbgrader
generate_assignment` and `nbgrader autograde` (docs/instructors.md, "Grading with nbgrader").

    python tools/export_nbgrader.py OUT                 # every lesson -> OUT/source/NN_name/NN_name.ipynb
    python tools/export_nbgrader.py OUT 01 07           # only lessons 01 and 07
    python tools/export_nbgrader.py OUT --points 2      # points per exercise (default 1)

OUT gets nbgrader's layout: `nbgrader_config.py` and `source/<assignment>/<notebook>.ipynb`, the
assignment named after the lesson's notebook (`01_attention_from_scratch`). Each notebook is built from
the solution notebook (the single source), cell by cell:
- an exercise cell (its answer between `### BEGIN SOLUTION` / `### END SOLUTION`) becomes an nbgrader
  solution cell: `generate_assignment` replaces the answer by `raise NotImplementedError()`;
- its check cell `check.NAME(fn)` becomes an autograded test cell worth `--points`, calling
  `check.NAME.strict(fn)`: it raises on a wrong answer AND on an open one (the learner's
  `check.NAME(fn)` prints "○ not implemented yet" and lets Run All go on, which an autograder would
  count as a pass);
- every other cell is locked (read-only; `autograde` restores it from the source);
- the course's header (links to the solved twin) and the progress table at the end are left out; the
  set-up cell also switches on fast mode (`COURSE_FAST=1`, tiny sizes, seconds per lesson) and turns
  the progress file off whenever nbgrader runs the notebook (`NBGRADER_EXECUTION` set by `autograde`
  and the Validate button), so cells that train run the fast mode there and the full size for a
  learner; relative links (`../README.md`) point to the repository on the web.
The export never changes `solutions/` or `notebooks/`.
"""
import argparse
import re
import sys
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
c = get_config()  # noqa: F821 - nbgrader provides get_config

# Lessons run in fast mode under nbgrader (their set-up cell switches it on): a few seconds to a minute
# a lesson on a CPU; give a slow or busy machine room per cell (nbgrader's default is 30 s).
c.Execute.timeout = 300
# The course's stub is nbgrader's: `# YOUR CODE HERE` / `raise NotImplementedError()`.
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\\nraise NotImplementedError()"}
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


def setup_cell():
    """The course's set-up cell, plus nbgrader's fast mode and no progress file while nbgrader runs it."""
    repo = build_notebooks.repository()
    source = (
        "# Set-up: installs the course's helper package where it is missing. When nbgrader runs this notebook\n"
        "# (autograde, or the Validate button), every lesson runs at its tiny sizes (COURSE_FAST=1): cells\n"
        "# that train take seconds, and a figure of a full run is shown from the course's reference files.\n"
        "import importlib.util, os, subprocess, sys\n"
        "if os.environ.get(\"NBGRADER_EXECUTION\"):\n"
        "    os.environ.setdefault(\"COURSE_FAST\", \"1\")\n"
        "    os.environ.setdefault(\"COURSE_PROGRESS\", \"off\")\n"
        "if importlib.util.find_spec(\"course_utils\") is None:\n"
        f"    subprocess.check_call([sys.executable, \"-m\", \"pip\", \"install\", \"-q\", \"git+{repo}\"])")
    cell = nbformat.v4.new_code_cell(source)
    cell.id = "course-setup"
    cell.metadata = {"nbgrader": _meta("course-setup", locked=True)}
    return cell


def header_cell(name, points):
    text = (f"**{name[:2]}: an nbgrader assignment of the attention course.** Fill in every cell marked "
            "`# YOUR CODE HERE` (replace `raise NotImplementedError()`) and run it. The cell after each "
            f"exercise is its test ({points} point{'s' if points != 1 else ''}): it prints one line with ✔ "
            "when your answer is right, and otherwise stops with one red line that says what is wrong, or "
            "that the exercise is not done yet. The other cells are read-only.")
    cell = nbformat.v4.new_markdown_cell(text)
    cell.id = "course-header"
    cell.metadata = {"nbgrader": _meta("course-header", locked=True)}
    return cell


def _absolute_links(source, repo):
    return RELATIVE_LINK.sub(lambda m: f"]({repo}/blob/main/{m.group(1)})", source)


def export_notebook(solution_nb, name, points=1):
    """The nbgrader source notebook of one lesson, from its solution notebook (not changed)."""
    nb = nbformat.reads(nbformat.writes(solution_nb), as_version=4)
    repo = build_notebooks.repository()
    cells, checks = [header_cell(name, points), setup_cell()], []
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
            meta = _meta(cell.id, solution=True, grade=graded, points=points if graded else None)
        elif call and "\n" not in source.strip():
            check, args = call.groups()
            cell.source = f"check.{check}.strict({args})"
            meta = _meta(f"check-{check}", grade=True, locked=True, points=points)
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


def export(out, lessons=None, points=1):
    """Write OUT/nbgrader_config.py and OUT/source/<assignment>/<notebook>.ipynb; return the notebooks written."""
    out = Path(out)
    solutions = sorted((ROOT / "solutions").glob("[0-9][0-9]_*.ipynb"))
    if lessons:
        unknown = sorted(set(lessons) - {p.name[:2] for p in solutions})
        if unknown:
            raise ExportError(f"no lesson {', '.join(unknown)} in solutions/ (lessons: "
                              f"{', '.join(p.name[:2] for p in solutions)})")
        solutions = [p for p in solutions if p.name[:2] in lessons]
    written = []
    for path in solutions:
        nb = export_notebook(nbformat.read(path, as_version=4), path.name, points)
        target = out / "source" / path.stem / path.name
        target.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, target)
        written.append(target)
    (out / "nbgrader_config.py").write_text(CONFIG)
    return written


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out", help="the nbgrader course folder to write (created if missing)")
    parser.add_argument("lessons", nargs="*", help="lesson numbers (default: all), e.g. 01 07")
    parser.add_argument("--points", type=float, default=1, help="points per exercise (default 1)")
    args = parser.parse_args(argv)
    if args.points <= 0:
        parser.error("--points must be positive")
    points = int(args.points) if args.points == int(args.points) else args.points
    try:
        written = export(args.out, args.lessons, points)
    except ExportError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    for path in written:
        print(f"written: {path}")
    print(f"Next, in {args.out}: nbgrader generate_assignment {written[0].parent.name}  (docs/instructors.md)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
