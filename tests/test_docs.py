"""The front page and docs/ say only what is true of this repository: every relative link (and its #anchor)
resolves, every command they name exists (`python -m course_utils.X`, `python tools/X`, `python
benchmarks/X`, `bash .ci/X`, `pytest tests/X`), and every file of the repository they name is there.
The README stays a front page (at most about 150 lines, the lesson table from 00 to the last lesson)."""
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))
README_MAX_LINES = 160

LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^()\s]+)(?:\s+\"[^\"]*\")?\)")
MODULE = re.compile(r"(?<![\w.-])-m\s+(course_utils(?:\.\w+)*)")  # python -m X, torchrun ... -m X
SCRIPT = re.compile(r"(?:python3?|py|bash|sh)\s+(?:-\S+\s+)*((?:tools|benchmarks|\.ci)[/\\][\w./\\-]+)")
TEST_PATH = re.compile(r"pytest\s+((?:tests|solutions|notebooks)/[\w./-]*)")
REPO_PATH = re.compile(r"(?<![\w./~$-])((?:course_utils|tests|tools|benchmarks|diagrams|solutions|notebooks|docs|\.ci)"
                       r"/[\w./-]*[\w/])")


def _fenced(text):
    """The text with fenced code blocks blanked (links inside code are not links)."""
    return re.sub(r"^```.*?^```", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.M | re.S)


def _anchors(path):
    """GitHub's anchors of a markdown file's headings."""
    anchors = set()
    for line in _fenced(path.read_text(encoding="utf-8")).splitlines():
        match = re.match(r"#{1,6}\s+(.*)", line)
        if match:
            title = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", r"\1", match.group(1)).strip().lower()
            anchors.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return anchors


def _name(path):
    return str(path.relative_to(ROOT))


@pytest.mark.parametrize("doc", DOCS, ids=_name)
def test_relative_links_resolve(doc):
    broken = []
    for target in LINK.findall(_fenced(doc.read_text(encoding="utf-8"))):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:, ...
            continue
        file, _, anchor = target.partition("#")
        path = (doc.parent / file).resolve() if file else doc
        if not path.exists():
            broken.append(f"{target} (no {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path})")
        elif anchor and path.suffix == ".md" and anchor not in _anchors(path):
            broken.append(f"{target} (no heading #{anchor} in {_name(path)})")
    assert not broken, f"{_name(doc)}: links that do not resolve: " + "; ".join(broken)


def _module_exists(name, runnable):
    path = ROOT.joinpath(*name.split("."))
    if path.with_suffix(".py").is_file():
        return True
    return path.is_dir() and (path / ("__main__.py" if runnable else "__init__.py")).is_file()


@pytest.mark.parametrize("doc", DOCS, ids=_name)
def test_commands_exist(doc):
    text = doc.read_text(encoding="utf-8")
    missing = []
    for match in MODULE.finditer(text):
        module = match.group(1)
        if not _module_exists(module, runnable=True):
            missing.append(f"python -m {module} (no {module.replace('.', '/')}.py or "
                           f"{module.replace('.', '/')}/__main__.py)")
    for script in SCRIPT.findall(text):
        if not (ROOT / script.replace("\\", "/")).is_file():
            missing.append(f"{script} (no such file)")
    for path in TEST_PATH.findall(text):
        if not (ROOT / path).exists():
            missing.append(f"pytest {path} (no such file or folder)")
    assert not missing, f"{_name(doc)} names commands that do not exist: " + "; ".join(sorted(set(missing)))


@pytest.mark.parametrize("doc", DOCS, ids=_name)
def test_files_named_exist(doc):
    """A path of the repository written in the text (e.g. `tests/test_translate.py`) is there; patterns
    such as `solutions/NN_*.ipynb` or `runs/<preset>` are not paths."""
    missing = []
    for path in REPO_PATH.findall(doc.read_text(encoding="utf-8")):
        if re.search(r"NN|\*|<|\.\.\.|…", path):
            continue
        if not (ROOT / path.rstrip("/")).exists():
            missing.append(path)
    assert not missing, f"{_name(doc)} names files that are not in the repository: " + ", ".join(sorted(set(missing)))


def test_readme_is_a_front_page():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    lines = text.splitlines()
    assert len(lines) <= README_MAX_LINES, (f"README.md has {len(lines)} lines: keep it to what a newcomer needs "
                                            f"first and move the rest to docs/ (at most {README_MAX_LINES})")
    lessons = sorted({int(n) for n in re.findall(r"^\| \[(\d\d) — ", text, re.M)})
    solutions = sorted(int(p.name[:2]) for p in (ROOT / "solutions").glob("[0-9][0-9]_*.ipynb"))
    assert lessons == list(range(len(lessons))), f"the README's lesson table has lessons {lessons}"
    assert set(solutions) <= set(lessons), (f"lessons {sorted(set(solutions) - set(lessons))} are in solutions/ "
                                            f"but not in the README's lesson table")
    assert "COURSE_FAST=1 python -m pytest" in text, "the README's test command is not the one .ci/run runs"
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "COURSE_FAST=1 python -m pytest" in ci, ".ci/run no longer runs the README's test command"


def test_the_checks_find_what_they_look_for():
    """The patterns above read the commands as written in the docs."""
    assert MODULE.search("python -m course_utils.checks.progress 03").group(1) == "course_utils.checks.progress"
    assert MODULE.search("torchrun --standalone -m course_utils.translation --preset gpu").group(1) == \
        "course_utils.translation"
    assert SCRIPT.findall("python3 tools/start.py; py tools\\start.py; bash .ci/run") == \
        ["tools/start.py", "tools\\start.py", ".ci/run"]
    assert LINK.findall("[a](docs/setup.md#the-tests) ![b](x.png) [c [d]](e.md)") == \
        ["docs/setup.md#the-tests", "x.png", "e.md"]
    assert "check-the-widgets-in-a-real-browser" in _anchors(ROOT / "docs" / "development.md")
