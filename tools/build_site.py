"""Build the course as a static website (Jupyter Book 1), offline, with one command.

    python tools/build_site.py                 # the site in build/site/_build/html/ (open index.html)
    python tools/build_site.py --out DIR       # the site in DIR/_build/html/
    python tools/build_site.py --jobs 1        # run the notebooks one at a time (default: 2 at once)
    python tools/build_site.py --no-cache      # run every notebook again
    python tools/build_site.py --no-execute    # the pages without running the notebooks (no outputs; quick)

Needs the `site` extra: `pip install -e ".[site]"` (docs/website.md). What it does:
1. runs every solution notebook (solutions/NN_*.ipynb) in fast mode (COURSE_FAST=1) with nbclient,
   `--jobs` at a time, in a scratch folder of the build (never in solutions/ or notebooks/, whose files
   it only reads); a notebook whose source and helper package are unchanged since the last build
   comes from the cache (build/site-cache/) instead;
2. writes the book into DIR/book/: a page per lesson (tools/website/pages.py: the starter code of every
   exercise, its solution folded), the README as the front page, every docs/*.md page, the table of
   contents and the settings (tools/website/_config.yml, with the repository's address from
   pyproject.toml's [project.urls] Repository);
3. runs `jupyter-book build` with warnings as errors (every warning is listed, then the build fails).
"""
import argparse
import hashlib
import multiprocessing
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOOLS = ROOT / "tools"
WEBSITE = TOOLS / "website"
DEFAULT_OUT = ROOT / "build" / "site"
DEFAULT_CACHE = ROOT / "build" / "site-cache"
CELL_TIMEOUT = 900  # s, one cell (as the notebook tests)
EXECUTION = 3  # bump when the way notebooks are run changes: every cached notebook runs again
# The docs pages in the order of the site's navigation; any other docs/*.md page follows them.
DOCS_ORDER = ["setup", "results", "translation", "scaling-out", "data", "instructors", "development", "website"]

sys.path[:0] = [str(TOOLS), str(WEBSITE), str(ROOT)]   # (ROOT: the checkout's course_utils)
import build_notebooks  # noqa: E402  (tools/build_notebooks.py: the repository's address, the stubs)


class SiteError(RuntimeError):
    """A build that cannot go on; the message says which file and what to do."""


def _lessons():
    return sorted((ROOT / "solutions").glob("[0-9][0-9]_*.ipynb"))


def _fingerprint():
    """What a notebook's outputs depend on besides its own text: the helper package and this runner."""
    digest = hashlib.sha256(f"execution {EXECUTION}\n".encode())
    for path in sorted((ROOT / "course_utils").rglob("*")):
        if path.is_file() and path.suffix in {".py", ".json"} and "__pycache__" not in path.parts:
            digest.update(path.relative_to(ROOT).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def _kernel_environment(scratch):
    """The settings the notebooks run with: fast mode, one thread, no progress file, inline plots,
    training runs in the build's scratch folder, the checkout's course_utils first on the path."""
    env = dict(os.environ)
    env.pop("MPLBACKEND", None)  # the tests' figure-checking backend: the site shows the inline plots
    env.update(COURSE_FAST="1", COURSE_PROGRESS="off", COURSE_RUNS_DIR=str(scratch / "runs"),
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")])))
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


def _execute(source, workdir, env, log):
    """Run one notebook top to bottom in `workdir`, in a worker process: (notebook JSON, seconds) or, when
    a cell fails, (None, the error). The kernel's own messages (not the cells' outputs) go to the file `log`."""
    import logging

    import nbformat
    from nbclient.exceptions import CellExecutionError

    from course_utils.notebook_client import SteadyNotebookClient as NotebookClient

    os.environ.clear()
    os.environ.update(env)
    nb = nbformat.read(source, as_version=4)
    # The cells build_notebooks.py adds (badge, Colab set-up, progress table) are not on the pages: not run.
    nb.cells = [c for c in nb.cells if not set(c.get("metadata", {}).get("tags", [])) & build_notebooks.GENERATED]
    Path(workdir).mkdir(parents=True, exist_ok=True)
    # store_widget_state=True (nbclient 0.11 fails on an Output widget without it): a lesson page shows what
    # a widget's outputs held when the lesson ran (tools/website/pages.py), then drops the state.
    client = NotebookClient(nb, timeout=CELL_TIMEOUT, kernel_name="python3", store_widget_state=True,
                            record_timing=False, resources={"metadata": {"path": str(workdir)}})
    logging.getLogger("asyncio").setLevel(logging.CRITICAL)  # nbclient's kernel poller, cancelled at the end
    start = time.monotonic()
    try:
        with open(log, "wb") as kernel_log:
            client.execute(stderr=kernel_log, stdout=kernel_log)
    except CellExecutionError as error:
        index = next((i for i, c in enumerate(nb.cells) if c.get("cell_type") == "code"
                      and any(o.get("output_type") == "error" for o in c.get("outputs", []))), "?")
        message = re.sub(r"\x1b\[[0-9;]*m", "", str(error))  # the traceback without its colours
        return None, f"{Path(source).name}: cell {index} failed in fast mode:\n{message[-1500:]}"
    return nbformat.writes(nb), time.monotonic() - start


def _execute_task(task):
    source, workdir, env, log = task
    return (Path(source).name, *_execute(source, workdir, env, log))


def execute_all(lessons, cache, jobs, scratch, logs):
    """Every lesson notebook executed: {name: notebook}; from the cache where it is up to date. The
    kernels' own messages go to `logs`/NN_name.log."""
    import nbformat

    fingerprint, results, todo = _fingerprint(), {}, []
    for path in lessons:
        key = hashlib.sha256(fingerprint.encode() + path.read_bytes()).hexdigest()[:16]
        cached = cache / f"{path.stem}-{key}.ipynb" if cache else None
        if cached and cached.exists():
            results[path.name] = nbformat.read(cached, as_version=4)
            print(f"  {path.name}: from the cache", flush=True)
        else:
            todo.append((path, cached))
    if not todo:
        return results
    env = _kernel_environment(scratch)
    start = time.monotonic()
    print(f"running {len(todo)} notebook(s) in fast mode, {jobs} at a time ...", flush=True)
    logs.mkdir(parents=True, exist_ok=True)
    tasks = [(str(path), str(scratch / path.stem), env, str(logs / f"{path.stem}.log"))
             for path, _ in sorted(todo, reverse=True)]  # the later, longer lessons first: both workers stay busy
    cached = {path.name: target for path, target in todo}
    # One fresh process per notebook; on an error or an interruption the workers are stopped at once (a
    # kernel stops on its own when the process that started it is gone). Never forked from this process: the
    # pool replaces a worker from a thread of its own, and a process forked beside running threads inherits
    # their state half-made; its kernel client then missed a reply now and then and waited for the cell's
    # whole timeout (900 s) before it saw it (seen in CI, 2 of 15 notebooks).
    pool = _start_method().Pool(jobs, maxtasksperchild=1)
    try:
        for name, text, seconds in pool.imap_unordered(_execute_task, tasks):
            if text is None:
                raise SiteError(seconds)  # the failing cell and its error
            results[name] = nbformat.reads(text, as_version=4)
            print(f"  {name}: ran in {seconds:.0f} s", flush=True)
            if cached[name]:
                cache.mkdir(parents=True, exist_ok=True)
                for old in cache.glob(f"{Path(name).stem}-*.ipynb"):
                    old.unlink()
                cached[name].write_text(text, encoding="utf-8")
        pool.close()
    except BaseException:
        pool.terminate()
        raise
    finally:
        pool.join()
    print(f"notebooks run in {time.monotonic() - start:.0f} s (load {_load()})", flush=True)
    return results


def _start_method():
    """A clean process for each worker: forked from a server process that runs no threads (forkserver), or
    a new interpreter where there is none (spawn: macOS, Windows)."""
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")


def _load():
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "unknown"


def _docs():
    pages = {p.stem: p for p in (ROOT / "docs").glob("*.md")}
    ordered = [name for name in DOCS_ORDER if name in pages] + sorted(set(pages) - set(DOCS_ORDER))
    return [pages[name] for name in ordered]


def write_book(book, executed, repository):
    """The book's sources: pages, table of contents, settings."""
    import pages
    import yaml

    if book.exists():
        shutil.rmtree(book)
    book.mkdir(parents=True)
    shutil.copytree(WEBSITE / "_static", book / "_static")
    site = pages.Site(book, repository)
    site.add_page("README.md", "index.md")
    docs = _docs()
    for path in docs:
        site.add_page(path.relative_to(ROOT), Path("docs") / path.name)
    for name in executed:
        for folder in ("solutions", "notebooks"):
            site.add_page(f"{folder}/{name}", Path("lessons") / name)
    pages.markdown_page(site, "README.md", "index.md")
    for path in docs:
        pages.markdown_page(site, path.relative_to(ROOT).as_posix(), Path("docs") / path.name)
    for name in sorted(executed):
        pages.lesson_page(site, executed[name], name, build_notebooks.clear_solution)

    toc = {"format": "jb-book", "root": "index", "parts": [
        {"caption": "Lessons", "chapters": [{"file": f"lessons/{Path(n).stem}"} for n in sorted(executed)]},
        {"caption": "Guides", "chapters": [{"file": f"docs/{p.stem}"} for p in docs]}]}
    (book / "_toc.yml").write_text(yaml.safe_dump(toc, sort_keys=False), encoding="utf-8")
    config = yaml.safe_load((WEBSITE / "_config.yml").read_text(encoding="utf-8"))
    config["repository"]["url"] = repository
    config["sphinx"]["local_extensions"] = {"course_site": str(WEBSITE)}  # tools/website/course_site.py
    (book / "_config.yml").write_text(yaml.safe_dump(config, sort_keys=False, allow_unicode=True), encoding="utf-8")


def run_jupyter_book(book, out):
    """`jupyter-book build` with warnings as errors; returns the HTML folder."""
    command = [sys.executable, "-c", "from jupyter_book.cli.main import main; main()", "build", str(book),
               "--path-output", str(out), "--all", "--warningiserror", "--keep-going", "--quiet"]
    result = subprocess.run(command, cwd=out)
    if result.returncode:
        raise SiteError(f"jupyter-book build failed (exit {result.returncode}): the warnings above name the page "
                        "and the line; every warning is an error here, so that broken references fail")
    return out / "_build" / "html"


def _missing(module):
    import importlib.util

    return importlib.util.find_spec(module) is None


def unexecuted(lessons):
    """Every lesson notebook as it is, without outputs (`--no-execute`): the pages' structure, not what they show."""
    import nbformat

    results = {}
    for path in lessons:
        nb = nbformat.read(path, as_version=4)
        nb.cells = [c for c in nb.cells if not set(c.get("metadata", {}).get("tags", [])) & build_notebooks.GENERATED]
        results[path.name] = nb
    print(f"{len(results)} notebook(s) taken as they are, not run (--no-execute)", flush=True)
    return results


def build(out=DEFAULT_OUT, cache=DEFAULT_CACHE, jobs=2, execute=True):
    out = Path(out).resolve()
    for module, package in (("jupyter_book", "jupyter-book"), ("nbclient", "nbclient")):
        if _missing(module):
            raise SiteError(f'{package} is not installed: pip install -e ".[site]" (docs/website.md)')
    lessons = _lessons()
    if not lessons:
        raise SiteError("no solutions/NN_*.ipynb to build the site from")
    out.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    if not execute:
        executed = unexecuted(lessons)
    else:
        with tempfile.TemporaryDirectory(prefix="site-run-", dir=out) as scratch:
            executed = execute_all(lessons, Path(cache).resolve() if cache else None, jobs, Path(scratch),
                                   out / "kernel-logs")
    write_book(out / "book", executed, build_notebooks.repository())
    book_start = time.monotonic()
    html = run_jupyter_book(out / "book", out)
    print(f"site built in {time.monotonic() - start:.0f} s (Jupyter Book {time.monotonic() - book_start:.0f} s; "
          f"load {_load()}): {html / 'index.html'}")
    return html


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=str(DEFAULT_OUT), help="build folder (default: build/site); "
                        "the site goes to OUT/_build/html")
    parser.add_argument("--cache", default=str(DEFAULT_CACHE), help="executed notebooks kept between builds "
                        "(default: build/site-cache)")
    parser.add_argument("--no-cache", action="store_true", help="run every notebook, keep nothing")
    parser.add_argument("--jobs", type=int, default=2, help="notebooks run at once (default: 2)")
    parser.add_argument("--no-execute", action="store_true", help="build the pages from the notebooks as they are, "
                        "without running them (no outputs: the structure only; the tests' quick build)")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))  # stops the workers too
    try:
        build(args.out, None if args.no_cache else args.cache, max(1, args.jobs), execute=not args.no_execute)
    except SiteError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
