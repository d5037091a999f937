"""Regenerate the learner notebooks from the solutions (the single source).

    python tools/build_notebooks.py           # rewrite solutions' generated cells, regenerate notebooks/
    python tools/build_notebooks.py --check   # exit 1 if anything is out of date (used by tests)
    python tools/build_notebooks.py 04 05     # only lessons 04 and 05

In solutions/NN_*.ipynb, answers sit between nbgrader's markers:

    ### BEGIN SOLUTION
    ...answer...
    ### END SOLUTION

In code cells they become `# YOUR CODE HERE` / `raise NotImplementedError()` (at the marker's
indentation); in markdown cells, "YOUR ANSWER HERE". Every notebook is written without outputs,
execution counts or machine-specific metadata. Generated cells, recognised by their tags:
- at the top, an "Open in Colab" badge with links to the twin notebook (locally and on Colab; the twins
  share a file name, so JupyterLab labels both tabs alike, and the link says so), and a set-up cell that
  installs `course_utils` where it is missing (Colab);
- at the end, a cell that shows the learner's progress through the course.
Diagrams: a markdown cell that shows `![...](attachment:NAME.png)` gets `diagrams/png/NAME.png`
embedded as a cell attachment, so the picture travels with the notebook (Colab, GitHub, offline).
Cell ids are kept from the solution (new cells get one from their content), so that inserting a
cell changes only that cell in the diffs. The repository address comes from one place:
`[project.urls] Repository` in pyproject.toml.
"""
import argparse
import base64
import hashlib
import re
import sys
from pathlib import Path

import nbformat

try:
    import tomllib
except ImportError:  # Python < 3.11
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
DIAGRAMS = ROOT / "diagrams" / "png"
BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
CODE_STUB = ["# YOUR CODE HERE", "raise NotImplementedError()"]
MARKDOWN_STUB = "YOUR ANSWER HERE"
HEADER_TAG, SETUP_TAG, PROGRESS_TAG = "course-header", "course-setup", "course-progress"
GENERATED = {HEADER_TAG, SETUP_TAG, PROGRESS_TAG}
ATTACHMENT = re.compile(r"\(attachment:([\w.\-]+\.png)\)")


class BuildError(ValueError):
    """A solution notebook that cannot be built; the message names the notebook and the cell."""


def repository():
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return data["project"]["urls"]["Repository"].rstrip("/")


def _colab(repo, folder, name):
    path = repo.replace("https://github.com/", "")
    return f"https://colab.research.google.com/github/{path}/blob/main/{folder}/{name}"


def _tagged(source, tag, cell_type="code"):
    make = nbformat.v4.new_code_cell if cell_type == "code" else nbformat.v4.new_markdown_cell
    cell = make(source)
    cell.metadata = {"tags": [tag]}
    cell.id = tag
    return cell


def twin_link(name, learner):
    """The relative link from a notebook to its twin: ../solutions/NAME from the exercises, ../notebooks/NAME
    from the solutions. (Both twins have the same file name, and JupyterLab labels a tab with the file's name
    alone, so the twin opens in a tab labelled as this one; only the tab's tooltip shows the folder.)"""
    return f"../{'solutions' if learner else 'notebooks'}/{name}"


def times(name):
    """(the learner's time, the machine's time) of lesson `name` (NN_x.ipynb) as the README states them: its "Your
    time" estimate in hours (e.g. "1½") and its table's "time on CPU" (the full-mode run); None where it has none."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    lesson = name[:2]
    paragraph = readme.split("**Your time.**", 1)[-1].split("\n\n", 1)[0]
    hours = re.search(rf"\b{lesson} (½|\d+½?)(?= ·|;)", paragraph)
    row = next((line for line in readme.splitlines() if line.startswith("| [") and f"(notebooks/{name})" in line), "")
    cells = [c.strip() for c in row.strip().strip("|").split("|")] if row else []
    return (hours.group(1) if hours else None), (cells[-2] if len(cells) >= 4 else None)


def time_line(name):
    """The header's line on time, from the README (the one source of both figures), or "" without them."""
    hours, machine = times(name)
    if not hours or not machine:
        return ""
    unit = "hour" if hours in ("½", "1") else "hours"
    return (f"\n\n**Your time:** about {hours} {unit} to read, run and solve (the README's estimate from the lesson's "
            f"length) · **the machine's time:** {machine} for the full-mode run on a 2-core CPU (measured; "
            "[results](../docs/results.md)); in fast mode, seconds.")


def header_cells(name, learner):
    repo = repository()
    folder, twin = ("notebooks", "solutions") if learner else ("solutions", "notebooks")
    badge = (f"[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)]"
             f"({_colab(repo, folder, name)})")
    if learner:
        text = (f"{badge} &nbsp; This notebook: **exercises** (fill in the cells marked `# YOUR CODE HERE`). "
                f"Stuck? The solved version: [open it here]({twin_link(name, learner)}) (its tab has this "
                f"notebook's name; its first line says **solutions**) or "
                f"[on Colab]({_colab(repo, twin, name)}).")
    else:
        text = (f"{badge} &nbsp; This notebook: **solutions**. The exercises: "
                f"[open them here]({twin_link(name, learner)}) (their tab has this notebook's name) or "
                f"[on Colab]({_colab(repo, twin, name)}).")
    text += time_line(name)
    setup = ("# Set-up: installs the course's helper package where it is missing (e.g. on Colab).\n"
             "import importlib.util, subprocess, sys\n"
             "if importlib.util.find_spec(\"course_utils\") is None:\n"
             f"    subprocess.check_call([sys.executable, \"-m\", \"pip\", \"install\", \"-q\", \"git+{repo}\"])")
    return [_tagged(text, HEADER_TAG, "markdown"), _tagged(setup, SETUP_TAG)]


def progress_cell():
    return _tagged("# Your progress through the course (the legend under the table explains the marks).\n"
                   "# Every check you run records its outcome (see lesson 00); run this cell again to refresh.\n"
                   "from course_utils.checks.progress import show_progress\n"
                   "show_progress()", PROGRESS_TAG)


def clear_solution(source, cell_type):
    """Replace every BEGIN/END SOLUTION region by the stub; raise on unbalanced markers."""
    lines, out, inside, indent = source.splitlines(), [], False, ""
    for line in lines:
        stripped = line.strip()
        if stripped == BEGIN:
            if inside:
                raise ValueError("nested '### BEGIN SOLUTION'")
            inside, indent = True, line[: len(line) - len(line.lstrip())]
            if cell_type == "code":
                out.extend(indent + stub for stub in CODE_STUB)
            else:
                out.append(MARKDOWN_STUB)
        elif stripped == END:
            if not inside:
                raise ValueError("'### END SOLUTION' without '### BEGIN SOLUTION'")
            inside = False
        elif not inside:
            out.append(line)
    if inside:
        raise ValueError("'### BEGIN SOLUTION' without '### END SOLUTION'")
    return "\n".join(out)


def _where(name, index, cell):
    first = next((ln for ln in cell.source.splitlines() if ln.strip()), "")[:60]
    return f"{name}, cell {index} (id {cell.get('id', '?')}, starting {first!r})"


def _content_id(cell, taken):
    digest = hashlib.sha1((cell.cell_type + cell.source).encode()).hexdigest()
    for start in range(0, len(digest) - 8):
        candidate = digest[start:start + 8]
        if candidate not in taken:
            return candidate
    raise BuildError("could not find a free cell id")


def _stable_ids(nb):
    """Keep every cell's id; give a content-derived one to cells without an id or with a taken one."""
    taken = set()
    for cell in nb.cells:
        if not cell.get("id") or cell.id in taken:
            cell.id = _content_id(cell, taken)
        taken.add(cell.id)


def embed_diagrams(nb, name, folder=DIAGRAMS):
    """Attach diagrams/png/NAME.png to every markdown cell that shows attachment:NAME.png."""
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "markdown":
            continue
        names = ATTACHMENT.findall(cell.source)
        if not names:
            cell.pop("attachments", None)
            continue
        attachments = {}
        for image in names:
            path = folder / image
            if not path.exists():
                raise BuildError(f"{_where(name, index, cell)} shows the diagram {image}, but {path.relative_to(ROOT)} "
                                 "does not exist: draw it (python tools/draw_diagrams.py) or fix the name")
            attachments[image] = {"image/png": base64.b64encode(path.read_bytes()).decode("ascii")}
        cell.attachments = attachments


def _clean(nb):
    """Strip outputs, execution counts and machine-specific metadata."""
    nb.metadata = {
        "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
        "language_info": {"name": "python"},
    }
    nb.nbformat, nb.nbformat_minor = 4, 5
    for cell in nb.cells:
        tags = cell.get("metadata", {}).get("tags")
        cell.metadata = {"tags": tags} if tags else {}
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    return nb


def _body(nb):
    return [c for c in nb.cells if not set(c.get("metadata", {}).get("tags", [])) & GENERATED]


def build_solution(nb, name):
    nb.cells = header_cells(name, learner=False) + _body(nb) + [progress_cell()]
    _stable_ids(nb)
    embed_diagrams(nb, name)
    return _clean(nb)


def build_learner(solution_nb, name):
    nb = nbformat.reads(nbformat.writes(solution_nb), as_version=4)
    body = _body(nb)
    for cell in body:
        if BEGIN in cell.source or END in cell.source:
            try:
                cell.source = clear_solution(cell.source, cell.cell_type)
            except ValueError as error:
                index = solution_nb.cells.index(next(c for c in solution_nb.cells if c.get("id") == cell.id))
                raise BuildError(f"{_where(name, index, cell)}: {error}") from None
    nb.cells = header_cells(name, learner=True) + body + [progress_cell()]
    return _clean(nb)


def build(check=False, lessons=None):
    """Rebuild every notebook (or those of `lessons`, e.g. ["04"]); with check=True, report stale
    files instead of writing them."""
    stale = []
    solutions = sorted((ROOT / "solutions").glob("[0-9][0-9]_*.ipynb"))
    if lessons:
        solutions = [p for p in solutions if p.name[:2] in lessons]
    for path in solutions:
        original = path.read_text()
        solution = build_solution(nbformat.reads(original, as_version=4), path.name)
        text = nbformat.writes(solution) + "\n"
        targets = [(path, text), (ROOT / "notebooks" / path.name,
                                  nbformat.writes(build_learner(solution, path.name)) + "\n")]
        for target, new in targets:
            if not target.exists() or target.read_text() != new:
                stale.append(target.relative_to(ROOT))
                if not check:
                    target.write_text(new)
    if lessons:
        return stale
    orphans = sorted(set(p.name for p in (ROOT / "notebooks").glob("*.ipynb")) - {p.name for p in solutions})
    for name in orphans:
        stale.append(Path("notebooks") / name)
        if not check:
            (ROOT / "notebooks" / name).unlink()
    return stale


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="only report what is out of date")
    parser.add_argument("lessons", nargs="*", help="lesson numbers to build (default: all), e.g. 04 05")
    args = parser.parse_args(argv)
    try:
        stale = build(check=args.check, lessons=args.lessons)
    except BuildError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    verb = "out of date" if args.check else "written"
    for path in stale:
        print(f"{verb}: {path}")
    if args.check and stale:
        print("Run `python tools/build_notebooks.py` to regenerate them.")
        return 1
    if not stale:
        print("All notebooks up to date.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
