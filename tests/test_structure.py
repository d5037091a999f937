"""The helper package keeps its shape (docs/development.md, "The helper package"): small modules, imports
that run one way, no cycle. Everything is read with `ast`, nothing is imported.

The layers of `course_utils`, from the bottom up:

    0. the basics and the lesson references: every module at the top of `course_utils/` (`config`,
       `masks`, `attention`, `transformer`, `decoding`, ...), the data sets in `course_utils/data/` and the
       reference runs' reader and writer, `course_utils/reference_runs/`;
    1. the training pipeline every long run goes through, `course_utils/pipeline/` (the task interface, the
       trainer, checkpoints, processes, runs, reports, the command line);
    2. its tasks, one subpackage per model: lesson 10's translator `course_utils/translation/` and lesson
       12's language model `course_utils/language_model/`, lesson 14's attention-only model
       `course_utils/induction_heads/` (a task imports the pipeline, never another task);
    3. the exercise machinery, `course_utils/checks/` (framework, records, progress, `grading/`): it checks
       every lesson, lesson 10's pipeline included.

An import runs UPWARD when a module imports from a higher layer than its own: a lesson reference or a data
module importing from the pipeline, a task or `course_utils.checks`; the pipeline importing from a task; a
task importing from `course_utils.checks`. A task never imports another task (they sit side by side in
layer 2). Inside a layer a module may import any module of its own subpackage and any module of a lower
layer. On top of that:

- no import cycle among the modules of `course_utils` (every `import` counts, at module level or inside a
  function, except under `if TYPE_CHECKING:`; a module importing its own package's `__init__` does not);
- no module of `course_utils` imports the course's folders around it (`tests`, `tools`, `benchmarks`,
  `diagrams`, `notebooks`, `solutions`): the package must work when installed on its own (Colab);
- no module of `course_utils` is over 400 lines: one concern per module, readable in a sitting.
"""
import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "course_utils"
MAX_LINES = 400
# subpackage -> layer; else 0
LAYERS = {"pipeline": 1, "translation": 2, "language_model": 2, "induction_heads": 2, "open_models": 2,
          "checks": 3}
OUTSIDE = {"tests", "tools", "benchmarks", "diagrams", "notebooks", "solutions"}


def _modules():
    """{dotted name: path} of every module of course_utils (a package is its __init__.py)."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


MODULES = _modules()


def _layer(name):
    parts = name.split(".")
    return LAYERS.get(parts[1], 0) if len(parts) > 1 else 0


def _type_checking(node):
    test = node.test
    return isinstance(test, ast.Name) and test.id == "TYPE_CHECKING" or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _import_nodes(tree):
    """Every Import/ImportFrom of the module, with its line, skipping `if TYPE_CHECKING:` blocks."""
    todo = [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.If) and _type_checking(node):
            todo.extend(node.orelse)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        todo.extend(ast.iter_child_nodes(node))


def _imports(name, path):
    """[(line, imported dotted name)] of one module: relative imports resolved, `from pkg import mod`
    read as the module `pkg.mod` when it is one."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for node in _import_nodes(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
            continue
        if node.level:
            base = package.split(".")
            base = base[:len(base) - node.level + 1]
            target = ".".join(base + ([node.module] if node.module else []))
        else:
            target = node.module
        for alias in node.names:
            sub = f"{target}.{alias.name}"
            found.append((node.lineno, sub if sub in MODULES else target))
    return sorted(set(found))


def _graph():
    """{module: {imported course_utils module: first line}} (a package import is its __init__)."""
    graph = {}
    for name, path in MODULES.items():
        edges = {}
        for line, target in _imports(name, path):
            while target and target not in MODULES and target.startswith("course_utils"):
                target = target.rpartition(".")[0]  # `import course_utils.data.x.y` -> the module it names
            if target in MODULES and target != name and not name.startswith(target + "."):
                edges.setdefault(target, line)
        graph[name] = edges
    return graph


def _where(name, line=None):
    return f"{MODULES[name].relative_to(ROOT)}" + (f":{line}" if line else "")


def test_no_module_is_over_400_lines():
    long = {name: len(path.read_text(encoding="utf-8").splitlines()) for name, path in MODULES.items()}
    long = {name: n for name, n in long.items() if n > MAX_LINES}
    assert not long, (f"modules over {MAX_LINES} lines (split each by concern): "
                      + ", ".join(f"{_where(name)} ({n})" for name, n in sorted(long.items(), key=lambda x: -x[1])))


def _subpackage(name):
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else None


def test_no_import_runs_upward():
    upward = []
    for name, edges in _graph().items():
        for target, line in edges.items():
            if _layer(target) > _layer(name):
                upward.append(f"{_where(name, line)} imports {target} (layer {_layer(target)} above "
                              f"{_layer(name)})")
            elif _layer(target) == _layer(name) == 2 and _subpackage(target) != _subpackage(name):
                upward.append(f"{_where(name, line)} imports {target}: a task imports another task")
    assert not upward, ("imports that run upward (layers: lesson references and data 0, pipeline 1, tasks "
                        "(translation, language_model, induction_heads) 2, checks 3; see this file's docstring):\n  "
                        + "\n  ".join(upward))


def test_the_package_imports_nothing_around_it():
    found = []
    for name, path in MODULES.items():
        for line, target in _imports(name, path):
            if target.split(".")[0] in OUTSIDE:
                found.append(f"{_where(name, line)} imports {target}")
    assert not found, "course_utils imports the course's folders around it:\n  " + "\n  ".join(found)


def _cycles(graph):
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(graph) + 100))
    try:
        for v in sorted(graph):
            if v not in index:
                visit(v)
    finally:
        sys.setrecursionlimit(limit)
    return found


def test_no_import_cycle():
    graph = _graph()
    described = []
    for component in _cycles(graph):
        members = set(component)
        edges = [f"{_where(a, line)} -> {b}" for a in component for b, line in graph[a].items() if b in members]
        described.append(" <-> ".join(component) + ":\n      " + "\n      ".join(edges))
    assert not described, "import cycles in course_utils:\n  " + "\n  ".join(described)


def test_the_graph_sees_the_imports():
    """The test reads imports as Python does: relative ones and `from package import module` included."""
    graph = _graph()
    assert "course_utils.checks.core" in graph["course_utils.checks"], graph["course_utils.checks"]
    assert any(target.startswith("course_utils.") for edges in graph.values() for target in edges)
    assert _cycles({"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1}, "d": {"a": 1}}) == [["a", "b", "c"]]


def test_bare_pytest_without_the_test_tools_says_what_to_install():
    """pyproject's addopts name nbval's options: without nbval, pytest says what to install (conftest.py)
    instead of stopping on an unknown option."""
    result = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:nbval", "--collect-only", "-q",
                             "tests/test_config.py"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert "unrecognized arguments" not in output, output
    assert "pip install -r requirements.txt" in output and "nbval" in output, output


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
