"""Regenerate the learner notebooks from the solutions (the single source).

    python tools/build_notebooks.py           # rewrite solutions' headers, regenerate notebooks/
    python tools/build_notebooks.py --check   # exit 1 if anything is out of date (used by tests)

In solutions/NN_*.ipynb, answers sit between nbgrader's markers:

    ### BEGIN SOLUTION
    ...answer...
    ### END SOLUTION

In code cells they become `# YOUR CODE HERE` / `raise NotImplementedError()` (at the marker's
indentation); in markdown cells, "YOUR ANSWER HERE". Every notebook is written without outputs,
execution counts or machine-specific metadata, and starts with two generated cells: an
"Open in Colab" badge and a set-up cell that installs `course_utils` where it is missing (Colab).
The repository address comes from one place: `[project.urls] Repository` in pyproject.toml.
"""
import argparse
import re
import sys
from pathlib import Path

import nbformat

try:
    import tomllib
except ImportError:  # Python < 3.11
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
CODE_STUB = ["# YOUR CODE HERE", "raise NotImplementedError()"]
MARKDOWN_STUB = "YOUR ANSWER HERE"
HEADER_TAG, SETUP_TAG = "course-header", "course-setup"


def repository():
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return data["project"]["urls"]["Repository"].rstrip("/")


def _colab(repo, folder, name):
    path = repo.replace("https://github.com/", "")
    return f"https://colab.research.google.com/github/{path}/blob/main/{folder}/{name}"


def header_cells(name, learner):
    repo = repository()
    folder = "notebooks" if learner else "solutions"
    badge = (f"[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)]"
             f"({_colab(repo, folder, name)})")
    other = ("[solution](" + _colab(repo, "solutions", name) + ")" if learner
             else "[exercises](" + _colab(repo, "notebooks", name) + ")")
    kind = "exercises (fill in the cells marked `# YOUR CODE HERE`)" if learner else "solutions"
    header = nbformat.v4.new_markdown_cell(f"{badge} &nbsp; This notebook: {kind}. Also open: {other}.")
    header.metadata = {"tags": [HEADER_TAG]}
    setup = nbformat.v4.new_code_cell(
        "# Set-up: installs the course's helper package where it is missing (e.g. on Colab).\n"
        "import importlib.util, subprocess, sys\n"
        "if importlib.util.find_spec(\"course_utils\") is None:\n"
        f"    subprocess.check_call([sys.executable, \"-m\", \"pip\", \"install\", \"-q\", \"git+{repo}\"])")
    setup.metadata = {"tags": [SETUP_TAG]}
    return [header, setup]


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


def _clean(nb):
    """Strip outputs, execution counts, ids that vary, and machine-specific metadata."""
    nb.metadata = {
        "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
        "language_info": {"name": "python"},
    }
    nb.nbformat, nb.nbformat_minor = 4, 5
    for i, cell in enumerate(nb.cells):
        tags = cell.get("metadata", {}).get("tags")
        cell.metadata = {"tags": tags} if tags else {}
        cell.id = f"cell-{i:02d}"
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    return nb


def build_solution(nb, name):
    body = [c for c in nb.cells if not set(c.get("metadata", {}).get("tags", [])) & {HEADER_TAG, SETUP_TAG}]
    nb.cells = header_cells(name, learner=False) + body
    return _clean(nb)


def build_learner(solution_nb, name):
    nb = nbformat.reads(nbformat.writes(solution_nb), as_version=4)
    body = nb.cells[2:]
    for cell in body:
        if BEGIN in cell.source or END in cell.source:
            cell.source = clear_solution(cell.source, cell.cell_type)
    nb.cells = header_cells(name, learner=True) + body
    return _clean(nb)


def build(check=False):
    """Rebuild every notebook; with check=True, report stale files instead of writing them."""
    stale = []
    solutions = sorted((ROOT / "solutions").glob("[0-9][0-9]_*.ipynb"))
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
    orphans = sorted(set(p.name for p in (ROOT / "notebooks").glob("*.ipynb")) - {p.name for p in solutions})
    for name in orphans:
        stale.append(Path("notebooks") / name)
        if not check:
            (ROOT / "notebooks" / name).unlink()
    return stale


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="only report what is out of date")
    args = parser.parse_args(argv)
    stale = build(check=args.check)
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
