"""The pages of the course's website, made from the repository's files (used by tools/build_site.py).

- A lesson page is its solution notebook, executed in fast mode, with the generated cells of the
  notebooks (Colab badge, set-up, progress table) replaced by one line of links (the exercises on
  Colab, both notebooks in the repository). Every exercise shows the learner's starter code (the
  answer replaced as `tools/build_notebooks.py` does), then the solution folded under "Show the
  solution" (the cell's input hidden by myst-nb's `hide-input` tag; its outputs stay visible).
- A markdown page (the README as the front page, docs/*.md) is copied with its links rewritten: a
  link to a page of the site goes to that page, a picture is copied into the book's _static/, anything
  else of the repository goes to the file on GitHub.
- Interactive widgets need a running kernel: a widget's output becomes a note that says where to run it,
  followed by what it drew at its first settings (from the widget state nbclient recorded); a progress
  bar is dropped.
"""
import base64
import os
import re
import shutil
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[2]
BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
GENERATED = {"course-header", "course-setup", "course-progress"}
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
COLAB_BADGE = "https://colab.research.google.com/assets/colab-badge.svg"
LOCAL_BADGE = "_static/colab-badge.svg"
IMAGE = {".png", ".jpg", ".jpeg", ".gif", ".svg", ".webp"}
# [text](target "title") and ![alt](target); the text may hold one level of brackets (a badge in a link).
LINK = re.compile(r"(\]\()([^()\s]+)((?:\s+\"[^\"]*\")?\))")
HTML_SRC = re.compile(r"""((?:src|href)=")([^"]+)(")""")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)
WIDGET_NOTE = ("▶ **An interactive widget** is here: it needs a running Python kernel. Open this lesson in "
               "Colab (the link at the top of the page) or in JupyterLab to use it.")


class Site:
    """Where every page of the book lives: `pages` maps a repository file (relative path) to its
    page in the book (relative path), e.g. docs/setup.md -> docs/setup.md, README.md -> index.md,
    solutions/01_x.ipynb and notebooks/01_x.ipynb -> lessons/01_x.ipynb."""

    def __init__(self, book, repository, branch="main"):
        self.book, self.repository, self.branch = Path(book), repository.rstrip("/"), branch
        self.pages = {}

    def add_page(self, source, page):
        self.pages[Path(source).as_posix()] = Path(page)

    def github(self, rel, is_dir=False):
        return f"{self.repository}/{'tree' if is_dir else 'blob'}/{self.branch}/{rel}"

    def colab(self, rel):
        return f"https://colab.research.google.com/github/{self.repository.removeprefix('https://github.com/')}" \
               f"/blob/{self.branch}/{rel}"

    def target(self, link, source_dir, page, html=False):
        """The link `link`, written in a file of `source_dir` (repository-relative), for the page
        `page` of the book; `html`: the link is in raw HTML (Sphinx leaves it as it is, so a page is
        linked by its .html name)."""
        here = (self.book / page).parent
        if link == COLAB_BADGE:
            return os.path.relpath(self.book / LOCAL_BADGE, here).replace(os.sep, "/")
        if re.match(r"[a-z][a-z0-9+.-]*:", link) or link.startswith("#") or link.startswith("attachment:"):
            return link
        file, hash_, anchor = link.partition("#")
        path = (ROOT / source_dir / file).resolve()
        try:
            rel = path.relative_to(ROOT).as_posix()
        except ValueError:
            return link  # outside the repository: left as it is
        if rel in self.pages:
            target = self.book / self.pages[rel]
            target = target.with_suffix(".html") if html else target
            return os.path.relpath(target, here).replace(os.sep, "/") + hash_ + anchor
        if path.suffix.lower() in IMAGE and path.is_file():
            # into _static/, which Sphinx copies whole: a picture of a raw <img> is there too
            copy = self.book / "_static" / "repository" / rel
            copy.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, copy)
            return os.path.relpath(copy, here).replace(os.sep, "/")
        return self.github(rel, path.is_dir()) + hash_ + anchor

    def rewrite(self, text, source_dir, page):
        """Markdown `text` with every link and picture pointing where it works on the site (fenced code
        blocks are left as they are)."""
        def fix(match, html=False):
            return match.group(1) + self.target(match.group(2), source_dir, page, html) + match.group(3)

        def fix_all(chunk):
            return HTML_SRC.sub(lambda m: fix(m, html=True), LINK.sub(fix, chunk))

        out, last = [], 0
        for fence in FENCE.finditer(text):
            out.append(fix_all(text[last:fence.start()]))
            out.append(fence.group(0))
            last = fence.end()
        out.append(fix_all(text[last:]))
        return "".join(out)


def markdown_page(site, source, page):
    """Copy the markdown file `source` (repository-relative) to `page` in the book, links rewritten."""
    text = (ROOT / source).read_text(encoding="utf-8")
    target = site.book / page
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(site.rewrite(text, Path(source).parent, page), encoding="utf-8")


def _tags(cell):
    return list(cell.get("metadata", {}).get("tags", []))


def _without_markers(source):
    return "\n".join(line for line in source.splitlines() if line.strip() not in (BEGIN, END))


def _markdown_answer(source):
    """A markdown cell's answers folded under a "Show the answer" dropdown."""
    out, inside = [], False
    for line in source.splitlines():
        if line.strip() == BEGIN:
            inside = True
            out.append("\n::::{dropdown} Show the answer")
        elif line.strip() == END:
            inside = False
            out.append("::::\n")
        else:
            out.append(line)
    if inside:
        raise ValueError("'### BEGIN SOLUTION' without '### END SOLUTION'")
    return "\n".join(out)


def _attachments(site, cell, page):
    """Write a markdown cell's attachments (the diagrams) next to the page; return the cell's text with
    `attachment:NAME` replaced by their paths (myst-nb does not read cell attachments)."""
    source = cell.source
    for name, data in (cell.pop("attachments", None) or {}).items():
        mime, payload = next(iter(data.items()))
        target = site.book / page.parent / "attachments" / page.stem / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(base64.b64decode(payload) if not mime.startswith("text/") else payload.encode())
        source = source.replace(f"(attachment:{name})", f"(attachments/{page.stem}/{name})")
    return source


def _widget_shown(state, model_id):
    """What the widget `model_id` showed when the lesson ran: the outputs of its Output widgets."""
    shown, todo, seen = [], [model_id], set()
    while todo:
        model_id = todo.pop(0)
        if model_id in seen or model_id not in state:
            continue
        seen.add(model_id)
        model = state[model_id]
        if model.get("model_name") == "OutputModel":
            shown.extend(nbformat.from_dict(output) for output in model.get("state", {}).get("outputs", []))
        todo.extend(child.removeprefix("IPY_MODEL_") for child in model.get("state", {}).get("children", [])
                    if isinstance(child, str))
    return shown


def _widget_outputs(outputs, state):
    """Outputs with every widget replaced by a note and what it showed at its first settings (a progress
    bar is dropped: its last state means nothing on a page)."""
    out = []
    for output in outputs:
        data = output.get("data", {})
        if WIDGET_VIEW not in data:
            out.append(output)
            continue
        text = data.get("text/plain", "")
        text = "".join(text) if isinstance(text, list) else text
        if re.search(r"\d+%\|", text) and "children=" not in text:
            continue  # a tqdm bar
        shown = _widget_shown(state, data[WIDGET_VIEW].get("model_id"))
        note = WIDGET_NOTE + (" What it showed at its first settings:" if shown else "")
        out.append(nbformat.v4.new_output("display_data", data={"text/markdown": note, "text/plain": note}))
        out.extend(shown)
    return out


def _links_line(site, name):
    learner, solution = f"notebooks/{name}", f"solutions/{name}"
    return (f"[![Open the exercises in Colab](../{LOCAL_BADGE})]({site.colab(learner)}) &nbsp; "
            f"the notebooks in the repository: [exercises]({site.github(learner)}) · "
            f"[solutions]({site.github(solution)}) &nbsp; "
            "*This page shows the solved lesson run in fast mode (tiny sizes; where a lesson shows a full "
            "run's results, they come from its reference file). Each exercise shows the code you start from, "
            "with its solution folded under **Show the solution**.*")


def lesson_page(site, executed, name, clear_solution):
    """The lesson page of `name` (e.g. 01_x.ipynb) from its executed solution notebook; writes
    lessons/`name` in the book. `clear_solution(source, cell_type)` is the builder's stub maker."""
    page = Path("lessons") / name
    nb = nbformat.reads(nbformat.writes(executed), as_version=4)
    state = nb.metadata.pop("widgets", {}).get("application/vnd.jupyter.widget-state+json", {}).get("state", {})
    cells, linked = [], False
    for cell in nb.cells:
        if set(_tags(cell)) & GENERATED:
            continue
        cell.get("metadata", {}).pop("execution", None)
        if cell.cell_type == "markdown":
            source = cell.source
            if BEGIN in source:
                source = _markdown_answer(source)
            cell.source = site.rewrite(source, "solutions", page)
            source = _attachments(site, cell, page)
            if not linked and re.match(r"#\s", source):  # the links go under the lesson's title
                title, _, rest = source.partition("\n")
                source = f"{title}\n\n{_links_line(site, name)}\n\n{rest}"
                linked = True
            cell.source = source
            cells.append(cell)
            continue
        if cell.cell_type != "code":
            cells.append(cell)
            continue
        cell.outputs = _widget_outputs(cell.get("outputs", []), state)
        if BEGIN in cell.source:
            starter = nbformat.v4.new_code_cell(clear_solution(cell.source, "code"))
            starter.metadata = {"tags": ["exercise"]}
            starter.id = f"{cell.id}-starter"[:64]
            cells.append(starter)
            cell.source = _without_markers(cell.source)
            cell.metadata["tags"] = _tags(cell) + ["solution", "hide-input"]
        cells.append(cell)
    if not linked:
        cells.insert(0, nbformat.v4.new_markdown_cell(_links_line(site, name)))
    nb.cells = cells
    target = site.book / page
    target.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, target)
    return page
