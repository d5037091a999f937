"""The notebooks as files: solutions and learner versions agree, are clean, and learners can run them.

The solution notebooks themselves run under nbval (`pytest` collects solutions/*.ipynb).
"""
import importlib.util
import json
import re
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
SOLUTIONS = sorted((ROOT / "solutions").glob("[0-9][0-9]_*.ipynb"))
LEARNER = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))

_spec = importlib.util.spec_from_file_location("build_notebooks", ROOT / "tools" / "build_notebooks.py")
build_notebooks = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(build_notebooks)


def _ids(paths):
    return [p.stem for p in paths]


def test_there_are_lessons():
    assert SOLUTIONS, "no solutions/NN_*.ipynb found"


def test_every_solution_has_its_learner_twin_and_vice_versa():
    assert [p.name for p in SOLUTIONS] == [p.name for p in LEARNER]
    extra = ({p.name for p in (ROOT / "notebooks").glob("*.ipynb")}
             ^ {p.name for p in (ROOT / "solutions").glob("*.ipynb")})
    assert not extra, f"notebooks without a twin: {sorted(extra)}"


def test_regenerating_changes_nothing():
    stale = build_notebooks.build(check=True)
    assert not stale, f"out of date (run `python tools/build_notebooks.py`): {[str(p) for p in stale]}"


@pytest.mark.parametrize("path", SOLUTIONS + LEARNER, ids=[f"{p.parent.name}/{p.stem}" for p in SOLUTIONS + LEARNER])
def test_committed_clean(path):
    nb = json.loads(path.read_text())
    assert set(nb["metadata"]) <= {"kernelspec", "language_info"}, f"machine-specific metadata: {set(nb['metadata'])}"
    for i, cell in enumerate(nb["cells"]):
        assert not cell.get("outputs"), f"cell {i} has outputs"
        assert cell.get("execution_count") is None, f"cell {i} has an execution count"
        assert set(cell.get("metadata", {})) <= {"tags"}, f"cell {i} has metadata {cell['metadata']}"


@pytest.mark.parametrize("path", LEARNER, ids=_ids(LEARNER))
def test_no_solution_leaks_into_learner_notebook(path):
    text = path.read_text()
    assert "BEGIN SOLUTION" not in text and "END SOLUTION" not in text
    solution = nbformat.read(ROOT / "solutions" / path.name, as_version=4)
    learner = nbformat.read(path, as_version=4)
    exercises = 0
    for sol_cell, cell in zip(solution.cells[2:], learner.cells[2:]):
        for answer in re.findall(r"### BEGIN SOLUTION\n(.*?)### END SOLUTION", sol_cell.source, re.S):
            exercises += 1
            lines = [ln.strip() for ln in answer.splitlines() if len(ln.strip()) > 12]
            for line in lines:
                assert line not in cell.source, f"solution line leaked into the learner notebook: {line!r}"
    stubs = sum(c.source.count("raise NotImplementedError()") for c in learner.cells if c.cell_type == "code")
    assert stubs >= exercises


def test_markers_are_replaced_as_nbgrader_does():
    code = "def f(x):\n    ### BEGIN SOLUTION\n    return x\n    ### END SOLUTION\n"
    assert build_notebooks.clear_solution(code, "code") == \
        "def f(x):\n    # YOUR CODE HERE\n    raise NotImplementedError()"
    assert build_notebooks.clear_solution("Why?\n### BEGIN SOLUTION\nBecause.\n### END SOLUTION", "markdown") == \
        "Why?\nYOUR ANSWER HERE"
    with pytest.raises(ValueError, match="without"):
        build_notebooks.clear_solution("### BEGIN SOLUTION\nx = 1", "code")


def test_badges_and_setup_use_the_one_repository_address():
    repo = build_notebooks.repository()
    for path in SOLUTIONS + LEARNER:
        nb = nbformat.read(path, as_version=4)
        assert "colab.research.google.com" in nb.cells[0].source, f"{path.name}: no Colab badge in the first cell"
        assert repo in nb.cells[1].source and "course_utils" in nb.cells[1].source


# Lessons whose every section must run again after the whole lesson (a later cell must not rebind a
# name that an earlier interactive part still uses); in the others, the widget cells are run again.
RUN_TWICE = {"10_translation_multi30k.ipynb"}


@pytest.mark.parametrize("path", LEARNER, ids=_ids(LEARNER))
def test_learner_notebook_runs_to_the_end_like_run_all(path):
    """As "Run All" does (no errors allowed): every cell runs, the open exercises' checks print their
    one-line notice, and nothing fails. Then the interactive parts run again, as a learner who goes
    back to a widget after finishing the lesson would."""
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=900, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}})
    with client.setup_kernel():
        try:
            for index, cell in enumerate(nb.cells):
                client.execute_cell(cell, index)
        except CellExecutionError as error:
            pytest.fail(f"{path.name}: Run All stops at a cell that fails:\n{str(error)[-1500:]}")
        notices = [o.get("text", "") for c in nb.cells for o in c.get("outputs", []) if o.get("name") == "stdout"]
        again = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and
                 (path.name in RUN_TWICE or "widget" in c.get("metadata", {}).get("tags", []))]
        for index in again:
            try:
                client.execute_cell(nb.cells[index], index)
            except CellExecutionError as error:
                pytest.fail(f"{path.name}: cell {index} fails when run again after the whole lesson (does a "
                            f"later cell rebind a name it uses?):\n{str(error)[-1500:]}")
    expected = sum(len(re.findall(r"^check\.\w+\(", c.source, re.M)) for c in nb.cells if c.cell_type == "code")
    assert sum(t.count("not implemented yet") for t in notices) == expected, \
        f"{path.name}: every check of an open exercise prints its notice ({expected} checks)"
    assert not any("✔" in t or "✘" in t for t in notices), f"{path.name}: a check passed or failed on a stub"


def test_readme_links_every_lesson_with_the_one_repository_address():
    readme = (ROOT / "README.md").read_text()
    repo = build_notebooks.repository().replace("https://github.com/", "")
    for path in LEARNER:
        assert f"colab.research.google.com/github/{repo}/blob/main/notebooks/{path.name}" in readme, \
            f"README has no Colab badge for {path.name} with the repository of pyproject.toml"
