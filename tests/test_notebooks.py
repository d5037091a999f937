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


def test_every_header_gives_the_learner_s_time_and_the_machine_s_from_the_readme():
    """The times a learner reads agree: each notebook's first cell states the README's estimate of the learner's time
    and the README's measured time of the full-mode run, each said to be which; no lesson states a time of its own
    in its opening cells."""
    for path in SOLUTIONS + LEARNER:
        hours, machine = build_notebooks.times(path.name)
        assert hours and machine, f"README has no 'Your time' or no table row with a time for {path.name}"
        cells = nbformat.read(path, as_version=4).cells
        assert f"**Your time:** about {hours} " in cells[0].source and machine in cells[0].source, \
            f"{path}: its header does not give the README's times (run python tools/build_notebooks.py)"
        opening = "\n".join(c.source for c in cells[1:4] if c.cell_type == "markdown")
        assert not re.search(r"\*\*?Time( on a CPU| on CPU)?:", opening), f"{path}: a time of its own at its start"


def test_every_notebook_links_to_its_twin_and_back():
    """The first cell of an exercise notebook links to its solved twin, the solution's back to the exercises:
    a relative link that resolves, from the notebook's folder, to the twin (never to the notebook itself)."""
    link = re.compile(r"\[open (?:it|them) here\]\(([^)]+)\)")
    for path in SOLUTIONS + LEARNER:
        learner = path.parent.name == "notebooks"
        found = link.findall(nbformat.read(path, as_version=4).cells[0].source)
        assert found == [build_notebooks.twin_link(path.name, learner)], f"{path}: its twin link is {found}"
        twin = (path.parent / found[0]).resolve()
        assert twin.exists() and twin != path.resolve(), f"{path}: the link {found[0]} does not reach its twin"
        assert twin.parent.name == ("solutions" if learner else "notebooks") and twin.name == path.name
    assert build_notebooks.twin_link("11_x.ipynb", learner=True) == "../solutions/11_x.ipynb"
    assert build_notebooks.twin_link("11_x.ipynb", learner=False) == "../notebooks/11_x.ipynb"


# After the whole lesson, the widget cells run again: a later cell must not rebind a name that an earlier
# interactive part still uses. (Lesson 10 once ran whole twice for this: 25 s of the test command, for what its
# widget cells, run again, already show.)


def _needs_data(paths):
    """The notebooks that load Multi30k carry the multi30k marker (tests/multi30k_rule.py)."""
    return [pytest.param(p, id=p.stem, marks=[pytest.mark.multi30k] if "load_multi30k(" in p.read_text() else [])
            for p in paths]


@pytest.mark.parametrize("path", _needs_data(LEARNER))
def test_learner_notebook_runs_to_the_end_like_run_all(path):
    """As "Run All" does (no errors allowed): every cell runs, the open exercises' checks print their
    one-line notice, and nothing fails. Then the interactive parts run again, as a learner who goes
    back to a widget after finishing the lesson would."""
    from nbclient.exceptions import CellExecutionError

    from course_utils.notebook_client import SteadyNotebookClient as NotebookClient

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
                 "widget" in c.get("metadata", {}).get("tags", [])]
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


def test_cell_ids_stay_stable_when_a_cell_is_inserted():
    nb = nbformat.read(SOLUTIONS[1], as_version=4)
    before = [c.id for c in build_notebooks.build_solution(nbformat.reads(nbformat.writes(nb), as_version=4),
                                                            SOLUTIONS[1].name).cells]
    nb.cells.insert(5, nbformat.v4.new_markdown_cell("A new paragraph."))
    del nb.cells[5]["id"]
    after = [c.id for c in build_notebooks.build_solution(nb, SOLUTIONS[1].name).cells]
    assert len(after) == len(before) + 1 and [i for i in after if i not in before] == [after[5]]
    assert [i for i in after if i in before] == before


def test_a_broken_marker_names_the_notebook_and_the_cell():
    nb = nbformat.read(SOLUTIONS[1], as_version=4)
    cell = next(c for c in nb.cells if "### END SOLUTION" in c.source)
    cell.source = cell.source.replace("### END SOLUTION", "")
    with pytest.raises(build_notebooks.BuildError, match=rf"{SOLUTIONS[1].name}, cell \d+ \(id {cell.id}.*without"):
        build_notebooks.build_learner(build_notebooks.build_solution(nb, SOLUTIONS[1].name), SOLUTIONS[1].name)


def test_every_diagram_a_lesson_shows_exists_and_is_embedded_in_both_twins():
    shown = 0
    for solution in SOLUTIONS:
        learner = ROOT / "notebooks" / solution.name
        for path in (solution, learner):
            for cell in nbformat.read(path, as_version=4).cells:
                for name in build_notebooks.ATTACHMENT.findall(cell.source if cell.cell_type == "markdown" else ""):
                    png = ROOT / "diagrams" / "png" / name
                    assert png.exists(), f"{path.name} shows {name}, which diagrams/png/ does not hold"
                    data = cell.get("attachments", {}).get(name, {}).get("image/png")
                    assert data, f"{path.name}: {name} is not embedded (run python tools/build_notebooks.py)"
                    import base64
                    assert base64.b64decode(data) == png.read_bytes(), f"{path.name}: {name} is stale"
                    shown += path == solution
    names = {p.name for p in (ROOT / "diagrams" / "png").glob("*.png")}
    used = {n for s in SOLUTIONS for c in nbformat.read(s, as_version=4).cells if c.cell_type == "markdown"
            for n in build_notebooks.ATTACHMENT.findall(c.source)}
    assert names <= used, f"diagrams no lesson shows: {sorted(names - used)}"
    assert shown >= 14
