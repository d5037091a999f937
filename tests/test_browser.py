"""A learner's path, for real: JupyterLab in headless Chromium, with ipywidgets.

One JupyterLab server runs on a fresh copy of the course; each test opens one notebook in a new
page (a new workspace) and drives it as a learner does, with the keyboard and JupyterLab's menus:

- test_widget_renders_and_responds: runs the cells one by one (Shift+Enter; an exercise cell that
  raises NotImplementedError does not stop the next one) up to and including the first cell that
  builds an ipywidgets slider, checks that the slider renders as a widget (not as text such as
  "Loading widget..." or a model id, which is what a missing or mismatched ipywidgets front end
  looks like) and that moving it with the keyboard changes the output next to it. Targets: a
  minimal widget notebook that the test writes itself (front end only, no course code), the learner
  notebook and the solution notebook of lesson 01.
- test_restart_run_all: lessons 00, 01 and 10 (learner notebooks): Kernel > "Restart Kernel and Run
  All Cells...", then every code cell has run, the last one included, no output shows a traceback
  or a "✘" line, and the check of every open exercise shows its one line "○ <title>: not
  implemented yet. ...". In lesson 10 it then checks the lesson's diagram and types a German
  sentence into the translation widget: the widget shows "translation: ..." and the heatmap of that
  first typed sentence.
- test_exercise_wrong_then_right: lesson 00's first exercise, answered wrong then right: its check
  shows one red "✘ weighted sum: ..." line (no traceback), then only "✔ weighted sum: correct ...".
- test_diagram_renders: lesson 09's diagram (a markdown-cell attachment) loads at the size of its
  PNG in diagrams/png/ and its screenshot is not blank.

    bash .ci/install_browser.sh                 # Debian/Ubuntu: apt-installs chromium if missing
    pytest tests/test_browser.py -x -s          # screenshots in test-artifacts/browser/

Environment:
    CHROMIUM_PATH       the Chromium/Chrome binary (default /usr/bin/chromium); never downloaded
    TEST_ARTIFACTS_DIR  where screenshots and logs go (default <repo>/test-artifacts); files land in
                        its browser/ folder, named <folder>-<notebook>[-<test>]-<n>-<step>.png
    BROWSER_TEST_DISABLE_WIDGETS=1  self-test: disable the ipywidgets front end in JupyterLab; every
                        target of test_widget_renders_and_responds must then FAIL with the "shows as
                        text only" message

Chromium runs off the network (no background networking, component updates, sync) with a new empty
profile; JupyterLab runs on 127.0.0.1 with a random token, no news, no update check, a fresh
workspace, and is stopped by its process id (its kernels too) at the end.
"""
import base64
import contextlib
import importlib
import io
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = Path(os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium"))
ARTIFACTS = Path(os.environ.get("TEST_ARTIFACTS_DIR") or ROOT / "test-artifacts") / "browser"

MINIMAL = "browser_check/minimal_widget.ipynb"  # written by the test into the course copy
TARGETS = [
    pytest.param(MINIMAL, id="minimal-widget"),
    pytest.param("notebooks/01_attention_from_scratch.ipynb", id="lesson01-learner"),
    pytest.param("solutions/01_attention_from_scratch.ipynb", id="lesson01-solution"),
]

# Restart Kernel and Run All Cells: the learner notebook, its budget in s (page load, kernel, every
# cell, and the steps after), what to check after it.
RUN_ALL = [
    pytest.param("notebooks/00_welcome.ipynb", 60, None, id="lesson00"),
    pytest.param("notebooks/01_attention_from_scratch.ipynb", 90, None, id="lesson01"),
    pytest.param("notebooks/10_translation_multi30k.ipynb", 240, "translation-widget", id="lesson10",
                 marks=pytest.mark.multi30k),
]
EXERCISE = "notebooks/00_welcome.ipynb"  # its first exercise, answered wrong then right
EXERCISE_NAME, EXERCISE_TITLE = "weighted_sum", "weighted sum"
WRONG_BODY, RIGHT_BODY = "return vectors.mean(axis=0)", "return weights @ vectors"
DIAGRAM = "notebooks/09_transformer.ipynb"  # a lesson whose markdown embeds a diagram (attachment)
DIAGRAMS = ROOT / "diagrams" / "png"
TYPED_SENTENCE = "Zwei Hunde rennen über eine grüne Wiese."  # typed into lesson 10's translation widget

CHROMIUM_ARGS = [
    "--no-sandbox",  # CI runs as root
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    "--disable-breakpad",
    "--disable-crash-reporter",
    "--disable-domain-reliability",
    "--disable-client-side-phishing-detection",
    "--metrics-recording-only",
    "--no-pings",
    "--password-store=basic",
    "--use-mock-keychain",
    "--disable-features=Translate,OptimizationHints,MediaRouter,AutofillServerCommunication",
]

SERVER_START_TIMEOUT = 90  # s, JupyterLab answering /api/status
NOTEBOOK_BUDGET = 100  # s, everything for one notebook: page load, kernel start, cells, slider
SMALL_BUDGET = 90  # s, the same for the exercise and the diagram tests
KERNEL_TIMEOUT = 60  # s, from the notebook showing to its kernel being idle
CELL_TIMEOUT = 60  # s, one cell
WIDGET_TIMEOUT = 30  # s, from the widget cell finishing to the slider being on screen
CHANGE_TIMEOUT = 20  # s, from the key presses to the output changing
STOPPED_AFTER = 5  # s, the kernel idle, nothing queued and cells without a count: Run All stopped
TRANSLATE_TIMEOUT = 60  # s, from pressing Enter in lesson 10's text box to its heatmap

# How a widget looks when the ipywidgets front end is missing or does not match the kernel's
# ipywidgets: JupyterLab shows a placeholder, an error, the view's JSON or the widget's text repr.
TEXT_ONLY = re.compile(
    r"Loading widget|Error displaying widget|model_id|"
    r"\b\w+\(children=\(|\b(?:Float|Int)(?:Log|Range)?Slider\(value=|interactive\(children")
WIDGET_CELL = re.compile(r"(?:^|[^\w.])(?:interact|interactive|interact_manual|interactive_output)\s*\(|"
                         r"@(?:\w+\.)?interact|\w*Slider\s*\(")
WIDGET_TAGS = {"widget", "browser-check"}
ERROR = re.compile(r"Traceback \(most recent call last\)|^\s*✘", re.M)
STDERR = '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]'  # errors show here
STREAMS = ("application/vnd.jupyter.stdout", "application/vnd.jupyter.stderr")
TRACEBACK = "Traceback (most recent call last)"
CHECK_CALL = re.compile(r"^check\.(\w+)\(\s*(\w+)", re.M)  # check.softmax(softmax)


def _minimal_notebook():
    """A notebook with the smallest interact example, an exercise stub before it, and a plot."""
    import nbformat

    v4 = nbformat.v4
    nb = v4.new_notebook()
    nb.metadata = {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
                   "language_info": {"name": "python"}}
    nb.cells = [
        v4.new_markdown_cell("# Browser check\nA slider whose output must change when it moves."),
        v4.new_code_cell("import matplotlib.pyplot as plt\nimport numpy as np\n"
                         "from ipywidgets import FloatSlider, interact"),
        v4.new_code_cell("def exercise():\n    # YOUR CODE HERE\n    raise NotImplementedError()\n\n"
                         "exercise()"),  # a learner's unfinished exercise must not stop the rest
        v4.new_code_cell(
            "def show(x):\n"
            "    print(f'x = {x:.2f}, x squared = {x * x:.4f}')\n"
            "    t = np.linspace(0, 1, 50)\n"
            "    plt.figure(figsize=(3, 2))\n"
            "    plt.plot(t, np.sin(2 * np.pi * (t + x)))\n"
            "    plt.title(f'x = {x:.2f}')\n"
            "    plt.show()\n\n"
            "interact(show, x=FloatSlider(value=0.5, min=0.0, max=1.0, step=0.05, description='x'));"),
        v4.new_markdown_cell("The end."),
    ]
    return nb


# ---------------------------------------------------------------------------------------------
# JupyterLab
# ---------------------------------------------------------------------------------------------

def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _descendants(pid):
    """Process ids started (directly or not) by `pid`, read from /proc (Linux); [] elsewhere."""
    children = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
        except (OSError, IndexError, ValueError):
            continue
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


class Lab:
    """A JupyterLab server started by this test, with its token, port and course copy."""

    def __init__(self, root, base, token, proc, log_path):
        self.root, self.base, self.token, self.proc, self.log_path = root, base, token, proc, log_path

    def api(self, method, path, timeout=10):
        request = urllib.request.Request(self.base + path, method=method,
                                         headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(request, timeout=timeout) as response:
            body = response.read()
        return json.loads(body) if body else None

    def url(self, notebook, workspace):
        # A new named workspace per page: nothing restored from an earlier page.
        return f"{self.base}/lab/workspaces/{workspace}/tree/{notebook}?token={self.token}"

    def shutdown_sessions(self):
        try:
            for session in self.api("GET", "/api/sessions"):
                self.api("DELETE", f"/api/sessions/{session['id']}")
        except (OSError, ValueError):
            pass

    def log_tail(self, lines=30):
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self):
        """Stop the server by its process id: its process group, then any kernel left over."""
        self.shutdown_sessions()
        started = _descendants(self.proc.pid)  # kernels run in process groups of their own
        for sig, wait in ((signal.SIGTERM, 20), (getattr(signal, "SIGKILL", signal.SIGTERM), 10)):
            if self.proc.poll() is not None:
                break
            try:
                if hasattr(os, "killpg"):
                    os.killpg(self.proc.pid, sig)
                else:  # Windows: no process groups; the server shuts its kernels down itself
                    self.proc.terminate() if sig == signal.SIGTERM else self.proc.kill()
            except ProcessLookupError:
                break
            try:
                self.proc.wait(timeout=wait)
            except subprocess.TimeoutExpired:
                pass
        for pid in started:
            try:
                os.kill(pid, signal.SIGKILL)  # only on Linux: _descendants reads /proc
            except (ProcessLookupError, PermissionError):
                pass


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    pytest.importorskip("jupyterlab", reason="JupyterLab is not installed (pip install -r requirements.txt)")
    pytest.importorskip("ipywidgets", reason="ipywidgets is not installed (pip install -r requirements.txt)")
    if not CHROMIUM.exists():
        pytest.skip(f"no browser: {CHROMIUM} is missing (run `bash .ci/install_browser.sh` on "
                    f"Debian/Ubuntu, or set CHROMIUM_PATH to a Chromium or Chrome binary)")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError as error:
        pytest.skip(f"playwright (Python) is not importable ({error}); pip install playwright "
                    f"(no `playwright install` needed: the test uses {CHROMIUM})")
    import nbformat

    tmp = tmp_path_factory.mktemp("browser")
    course = tmp / "course"
    shutil.copytree(ROOT, course, ignore=shutil.ignore_patterns(
        ".git", "__pycache__", ".ipynb_checkpoints", ".pytest_cache", "*.egg-info", "test-artifacts",
        ".venv", "build", "runs", "data_cache", "*.pt"))
    (course / MINIMAL).parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(_minimal_notebook(), course / MINIMAL)

    # JupyterLab settings: never fetch news or check for updates (no network, no pop-up).
    settings = tmp / "lab-user-settings"
    notification = settings / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings"
    notification.parent.mkdir(parents=True)
    notification.write_text(json.dumps({"fetchNews": "false", "checkForUpdates": False}))
    config = tmp / "jupyter-config"  # empty: the user's own ~/.jupyter does not apply
    config.mkdir()
    if os.environ.get("BROWSER_TEST_DISABLE_WIDGETS") == "1":  # self-test of the failure message
        (config / "labconfig").mkdir()
        (config / "labconfig" / "page_config.json").write_text(
            json.dumps({"disabledExtensions": {"@jupyter-widgets/jupyterlab-manager": True}}))

    env = dict(os.environ)
    env.pop("MPLBACKEND", None)  # conftest sets Agg; a learner's kernel draws inline
    env.update(JUPYTER_CONFIG_DIR=str(config), JUPYTER_RUNTIME_DIR=str(tmp / "runtime"),
               IPYTHONDIR=str(tmp / "ipython"),
               COURSE_PROGRESS_FILE=str(tmp / "progress.json"),  # the progress table: not ~/.attention-course
               PYTHONPATH=os.pathsep.join(filter(None, [str(course), env.get("PYTHONPATH")])))
    token, port = secrets.token_hex(16), _free_port()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    log_path = ARTIFACTS / "jupyterlab.log"
    command = [
        sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
        "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={course}", "--LabApp.news_url=None",
        f"--LabApp.user_settings_dir={settings}", f"--LabApp.workspaces_dir={tmp / 'workspaces'}",
        "--ServerApp.terminals_enabled=False", "--LabApp.extension_manager=readonly",
        # If this test is killed before its teardown, the server still goes away on its own.
        "--MappingKernelManager.cull_idle_timeout=600", "--MappingKernelManager.cull_interval=60",
        "--ServerApp.shutdown_no_activity_timeout=900",
    ] + (["--allow-root"] if hasattr(os, "geteuid") and os.geteuid() == 0 else [])
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(command, cwd=course, env=env, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    server = Lab(course, f"http://127.0.0.1:{port}", token, proc, log_path)
    try:
        deadline = time.monotonic() + SERVER_START_TIMEOUT
        while True:
            if proc.poll() is not None:
                pytest.fail(f"JupyterLab exited with code {proc.returncode} before answering; "
                            f"its log ({log_path}) ends with:\n{server.log_tail()}")
            try:
                server.api("GET", "/api/status", timeout=2)
                break
            except (OSError, ValueError):
                if time.monotonic() > deadline:
                    pytest.fail(f"JupyterLab did not answer on {server.base} within "
                                f"{SERVER_START_TIMEOUT} s; its log ends with:\n{server.log_tail()}")
                time.sleep(0.5)
        yield server
    finally:
        server.stop()


# ---------------------------------------------------------------------------------------------
# Chromium
# ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def browser(lab, tmp_path_factory):
    """A headless Chromium with a new, empty profile, kept off the network."""
    from playwright.sync_api import sync_playwright

    os.environ.setdefault("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")
    profile = tmp_path_factory.mktemp("chromium-profile")
    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            user_data_dir=str(profile), executable_path=str(CHROMIUM), headless=True,
            args=CHROMIUM_ARGS, viewport={"width": 1400, "height": 1000}, timeout=60_000,
            service_workers="block")
        try:
            yield context
        finally:
            context.close()


# ---------------------------------------------------------------------------------------------
# Driving a notebook
# ---------------------------------------------------------------------------------------------

def _widget_cell(cells):
    """Index of the first code cell tagged `widget`/`browser-check`, else the first one calling
    interact(...) or building a slider; None when there is none."""
    code = [(i, c) for i, c in enumerate(cells) if c["cell_type"] == "code"]
    source = {i: "".join(c["source"]) if isinstance(c["source"], list) else c["source"] for i, c in code}
    for i, c in code:
        if WIDGET_TAGS & set(c.get("metadata", {}).get("tags", [])):
            return i
    for i, _ in code:
        if WIDGET_CELL.search(re.sub(r"#.*", "", source[i])):
            return i
    return None


_OUTPUT_STATE = """cell => {
    const area = cell.querySelector('.jp-Cell-outputArea') || cell;
    const copy = area.cloneNode(true);  // what the widget shows, minus the slider and its readout
    copy.querySelectorAll('.widget-slider, .widget-readout, .widget-label, input').forEach(e => e.remove());
    const images = Array.from(copy.querySelectorAll('img')).map(i => i.src.slice(-200));
    return (copy.textContent || '').trim() + ' | ' + images.join(' ');
}"""


_CELL_STATES = """() => Array.from(
    document.querySelectorAll('.jp-NotebookPanel .jp-Notebook .jp-Cell')).map(cell => {
    const prompt = cell.querySelector('.jp-InputPrompt');
    const area = cell.querySelector('.jp-Cell-outputArea');
    const outputs = area ? Array.from(area.children).filter(c => c.classList.contains('jp-OutputArea-child'))
        .map(child => {
            const out = child.querySelector('.jp-OutputArea-output');
            return {mime: out ? out.getAttribute('data-mime-type') || '' : '',
                    text: out ? out.textContent || '' : '',
                    red: out ? out.querySelectorAll('.ansi-red-fg, .ansi-red-intense-fg').length : 0};
        }) : [];
    return {code: cell.classList.contains('jp-CodeCell'), prompt: prompt ? prompt.textContent.trim() : '',
            outputs};
})"""

_KERNEL_STATUS = """() => {
    const indicator = document.querySelector('.jp-Notebook-ExecutionIndicator');
    return indicator ? indicator.getAttribute('data-status') || '' : '';
}"""

_IN_VIEW = """e => {
    const box = e.getBoundingClientRect();
    const view = (e.closest('.jp-WindowedPanel-outer') || document.documentElement).getBoundingClientRect();
    return {top: Math.round(box.top), inView: box.top >= view.top - 1 && box.top < view.bottom - 60};
}"""

_EDITOR_TEXT = "e => Array.from(e.querySelectorAll('.cm-line')).map(line => line.textContent).join('\\n')"

_TRANSLATION_STATE = """cell => {
    const out = cell.querySelector('.widget-output');
    if (!out) return null;
    const images = Array.from(out.querySelectorAll('img')).map(i => ({
        src: i.src, width: i.naturalWidth, height: i.naturalHeight, complete: i.complete}));
    const input = cell.querySelector('.widget-text input');
    return {text: out.textContent || '', images, input: input ? input.value : null,
            outputs: cell.querySelectorAll('.jp-Cell-outputArea > .jp-OutputArea-child').length};
}"""


def _source(cell):
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def _first_line(cell):
    source = _source(cell)
    return source.strip().splitlines()[0] if source.strip() else ""


def _count(prompt):
    """The execution count in a prompt such as '[12]:', else None ('[ ]:', '[*]:')."""
    match = re.search(r"\[(\d+)\]", prompt)
    return int(match.group(1)) if match else None


def _last_line(text):
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:200] if lines else ""


def _image_stats(png):
    """(number of distinct colours, standard deviation of the grey levels) of PNG bytes."""
    from PIL import Image, ImageStat

    image = Image.open(io.BytesIO(png)).convert("RGB")
    colours = image.getcolors(maxcolors=1 << 24) or []
    return len(colours), ImageStat.Stat(image.convert("L")).stddev[0]


class NotebookRun:
    """Drives one notebook in one page; records screenshots, phases and what each cell printed."""

    def __init__(self, page, target, name, cells, budget):
        self.page, self.target, self.name, self.cells_json = page, target, name, cells
        self.started = time.monotonic()
        self.budget, self.deadline = budget, self.started + budget
        self.cells = page.locator(".jp-NotebookPanel .jp-Notebook .jp-Cell")
        self.shots, self.phases = [], {}

    def remaining_ms(self, cap):
        left = self.deadline - time.monotonic()
        if left <= 0:
            self.screenshot("over-budget")
            pytest.fail(f"{self.target}: over the budget of {self.budget} s for this notebook (phases so far: "
                        f"{self.timings()})")
        return int(min(left, cap) * 1000)

    def phase(self, label):
        self.phases[label] = time.monotonic() - self.started - sum(self.phases.values())

    def timings(self):
        return (f"{time.monotonic() - self.started:.1f} s ("
                + ", ".join(f"{k} {v:.1f}" for k, v in self.phases.items()) + ")")

    def screenshot(self, label, element=None):
        """A screenshot of the page (or of `element`), kept as <name>-<n>-<label>.png."""
        path = ARTIFACTS / f"{self.name}-{len(self.shots) + 1}-{label}.png"
        try:
            png = (element or self.page).screenshot(path=str(path), timeout=10_000)
            self.shots.append(path)
            return png
        except Exception as error:  # a screenshot must never hide the real failure
            print(f"screenshot {path.name} failed: {error}")
            return None

    def show(self, element):
        """Scroll `element` into the notebook's view and wait until it stays there.
        (Cells out of view are laid out lazily: when they render, the cells below them move.)"""
        last = None
        for _ in range(20):
            element.scroll_into_view_if_needed(timeout=5_000)
            time.sleep(0.2)
            where = element.evaluate(_IN_VIEW)
            if where["inView"] and where == last:
                return
            last = where
        print(f"{self.name}: could not keep {element} in view ({last})")

    def check_dialog(self):
        dialog = self.page.locator(".jp-Dialog")
        if dialog.count():
            self.screenshot("dialog")
            text = " ".join(dialog.first.inner_text(timeout=5_000).split())
            pytest.fail(f"{self.target}: JupyterLab shows a dialog: {text!r}")

    def output_text(self, i):
        return self.cells.nth(i).locator(".jp-Cell-outputArea").inner_text(timeout=5_000)

    def states(self):
        """For every cell shown: {code, prompt, outputs: [{mime, text, red}]} (from the page's DOM)."""
        return self.page.evaluate(_CELL_STATES)

    def kernel_status(self):
        return self.page.evaluate(_KERNEL_STATUS)

    def open(self, url, log_path):
        """Load the notebook, wait for all its cells and for its kernel to be idle."""
        page, target = self.page, self.target
        page.goto(url, timeout=self.remaining_ms(60))
        self.cells.first.wait_for(timeout=self.remaining_ms(60))
        self.phase("page")
        end = time.monotonic() + self.remaining_ms(60) / 1000  # the cells arrive after the panel
        spinner = page.locator(".jp-NotebookPanel .jp-Spinner")
        while (shown := self.cells.count()) != len(self.cells_json) or spinner.count():
            if time.monotonic() > end:
                self.screenshot("not-loaded")
                pytest.fail(f"{target}: JupyterLab shows {shown} cells after 60 s, the file has "
                            f"{len(self.cells_json)}")
            time.sleep(0.25)
        # The kernel starts on its own (the notebook names it); running a cell before it is ready
        # would pop up "Select Kernel".
        end = time.monotonic() + self.remaining_ms(KERNEL_TIMEOUT) / 1000
        while self.kernel_status() != "idle":
            self.check_dialog()
            if time.monotonic() > end:
                self.screenshot("no-kernel")
                status = page.locator(".jp-StatusBar-Widget").first.inner_text(timeout=5_000)
                pytest.fail(f"{target}: the kernel was not idle within {KERNEL_TIMEOUT} s of opening "
                            f"the notebook (status bar: {' '.join(status.split())!r}); JupyterLab log: "
                            f"{log_path}")
            time.sleep(0.25)
        self.check_dialog()
        self.screenshot("opened")
        self.phase("kernel")

    def run_cell(self, i, cell, before=None):
        """Select cell i in command mode and press Shift+Enter; for a code cell, wait until its prompt
        shows an execution count (other than `before`, its count before this run)."""
        target = self.cells.nth(i)
        if "jp-mod-active" not in (target.get_attribute("class") or ""):
            target.locator(".jp-InputPrompt").first.click(timeout=self.remaining_ms(10))
        self.page.keyboard.press("Escape")  # command mode: Shift+Enter runs, then selects the next
        self.page.keyboard.press("Shift+Enter")
        if cell["cell_type"] != "code":
            return
        prompt = target.locator(".jp-InputPrompt").first
        end = time.monotonic() + self.remaining_ms(CELL_TIMEOUT) / 1000
        retry_at, retries = time.monotonic() + 5, 2
        while True:
            text = prompt.inner_text(timeout=5_000)
            count = _count(text)
            if count is not None and count != before:
                return count
            self.check_dialog()
            if "*" not in text and retries and time.monotonic() > retry_at:
                # Neither queued nor run: a Shift+Enter sent while the kernel connection was still
                # settling can be dropped (seen once in CI). Select the cell and run it again.
                retries, retry_at = retries - 1, time.monotonic() + 5
                target.locator(".jp-InputPrompt").first.click(timeout=self.remaining_ms(10))
                self.page.keyboard.press("Escape")
                self.page.keyboard.press("Shift+Enter")
            if time.monotonic() > end:
                self.screenshot(f"cell{i}-timeout")
                pytest.fail(f"{self.target}: cell {i} did not finish within {CELL_TIMEOUT} s "
                            f"(prompt {text!r}); first line: {_first_line(cell)!r}")
            time.sleep(0.1)

    def set_source(self, i, text):
        """Replace cell i's text by `text`, as one insertion (no auto-indentation), and check it."""
        editor = self.cells.nth(i).locator(".jp-Cell-inputArea .cm-content").first
        editor.click(timeout=self.remaining_ms(10))  # edit mode in that cell
        self.page.keyboard.press("ControlOrMeta+a")  # in the editor: select the cell's whole text
        self.page.keyboard.insert_text(text)
        held = editor.evaluate(_EDITOR_TEXT)
        if held != text:
            self.screenshot(f"cell{i}-edit")
            pytest.fail(f"{self.target}: after setting cell {i}'s text, its editor holds {held!r} instead "
                        f"of {text!r}")

    def restart_and_run_all(self):
        """Kernel > Restart Kernel and Run All Cells..., then the dialog's Restart button."""
        page = self.page
        page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^\s*Kernel\s*$")).first.click(
            timeout=self.remaining_ms(10))
        page.locator(".lm-Menu-item", has_text="Restart Kernel and Run All Cells").first.click(
            timeout=self.remaining_ms(10))
        accept = page.locator(".jp-Dialog .jp-Dialog-button.jp-mod-accept").first
        accept.wait_for(timeout=self.remaining_ms(10))
        label = accept.inner_text(timeout=5_000).strip()
        assert label == "Restart", f"{self.target}: the restart dialog's button says {label!r}, not 'Restart'"
        accept.click(timeout=self.remaining_ms(10))
        accept.wait_for(state="detached", timeout=self.remaining_ms(10))

    def wait_all_ran(self):
        """Wait until every code cell shows an execution count; fail when Run All stops before that."""
        cells = self.cells_json
        code = [i for i, c in enumerate(cells) if c["cell_type"] == "code" and _source(c).strip()]
        started, stopped_since = False, None
        while True:
            states, status = self.states(), self.kernel_status()
            counts = {i: _count(states[i]["prompt"]) for i in code}
            queued = [i for i in code if "*" in states[i]["prompt"]]
            started = started or bool(queued) or any(v is not None for v in counts.values())
            if status == "idle" and not queued and all(v is not None for v in counts.values()):
                return states, counts
            if started and status == "idle" and not queued:
                stopped_since = stopped_since or time.monotonic()
                if time.monotonic() - stopped_since > STOPPED_AFTER:
                    self._stopped(states, counts)
            else:
                stopped_since = None
            left = self.deadline - time.monotonic()
            if left <= 0:
                running = queued[0] if queued else None
                self.screenshot("run-all-timeout")
                pytest.fail(f"{self.target}: Run All did not finish within the budget of {self.budget} s "
                            f"({self.timings()}); "
                            + (f"cell {running} ({_first_line(cells[running])!r}) was still running, "
                               if running is not None else f"kernel {status!r}, ")
                            + f"{sum(v is not None for v in counts.values())} of {len(code)} code cells ran")
            time.sleep(0.5)

    def _stopped(self, states, counts):
        """Run All stopped: name the cell that raised (a notebook failure, not the test's)."""
        not_run = [i for i, v in counts.items() if v is None]
        raised = [(i, _last_line(o["text"])) for i, s in enumerate(states) for o in s["outputs"]
                  if TRACEBACK in o["text"] or (o["mime"] in STREAMS and re.search(r"^\s*✘", o["text"], re.M))]
        where = raised[0][0] if raised else (not_run[0] if not_run else None)
        if where is not None:
            self.show(self.cells.nth(where))
        self.screenshot("run-all-stopped")
        pytest.fail(f"{self.target}: Restart Kernel and Run All stopped before the end: code cells "
                    f"{not_run} did not run. "
                    + ("; ".join(f"The notebook itself fails: cell {i} ({_first_line(self.cells_json[i])!r}) "
                                 f"shows {msg!r}" for i, msg in raised) if raised else
                       "No cell shows an error.")
                    + f" Screenshot: {self.shots[-1] if self.shots else '-'}")

    def check_diagram(self, i, attachment):
        """The diagram `attachment` in markdown cell i: loaded at its PNG's size, and not blank."""
        from PIL import Image

        png = DIAGRAMS / attachment
        assert png.exists(), f"{self.target}: cell {i} embeds {attachment}, which is not in {DIAGRAMS}"
        with Image.open(png) as image:
            expected = image.size
        image = self.cells.nth(i).locator(".jp-RenderedMarkdown img").first
        try:
            image.wait_for(state="attached", timeout=self.remaining_ms(20))
        except Exception:
            self.screenshot(f"cell{i}-no-diagram")
            pytest.fail(f"{self.target}: markdown cell {i} shows no <img> for attachment:{attachment} "
                        f"(its text: {self.cells.nth(i).inner_text(timeout=5_000)[:200]!r})")
        self.show(image)
        end = time.monotonic() + self.remaining_ms(20) / 1000
        while True:
            width, height, complete, shown = image.evaluate(
                "i => [i.naturalWidth, i.naturalHeight, i.complete, i.getBoundingClientRect().width]")
            if complete and width or time.monotonic() > end:
                break
            time.sleep(0.25)
        label = Path(attachment).stem
        element = self.screenshot(f"diagram-{label}", element=image)
        self.screenshot(f"diagram-{label}-page")
        assert (width, height) == expected, (
            f"{self.target}: the diagram {attachment} in markdown cell {i} loaded as {width}x{height} px "
            f"(complete={complete}), the PNG is {expected[0]}x{expected[1]}")
        assert shown >= 300, f"{self.target}: the diagram {attachment} in cell {i} shows only {shown:.0f} px wide"
        assert element is not None, f"{self.target}: no screenshot of the diagram {attachment} in cell {i}"
        colours, spread = _image_stats(element)
        assert colours > 16 and spread > 10, (
            f"{self.target}: the diagram {attachment} in cell {i} looks blank on screen ({colours} colours, "
            f"grey-level standard deviation {spread:.1f}); screenshot {self.shots[-2]}")
        return f"{attachment} {width}x{height}, shown {shown:.0f} px wide, {colours} colours, std {spread:.0f}"


@contextlib.contextmanager
def open_notebook(lab, browser, target, name, budget):
    """A new page with `target` open in JupyterLab and its kernel idle; a screenshot on failure, the
    browser console kept in <name>-console.log, the page closed and the kernel shut down at the end."""
    for old in list(ARTIFACTS.glob(f"{name}-[0-9]*")) + [ARTIFACTS / f"{name}-console.log"]:
        if old.exists():  # files of an earlier run
            old.unlink()
    cells = json.loads((lab.root / target).read_text())["cells"]
    page = browser.new_page()
    console = []
    page.on("console", lambda m: m.type in ("error", "warning") and console.append(f"[{m.type}] {m.text}"))
    page.on("pageerror", lambda e: console.append(f"[pageerror] {e}"))
    blocked = []

    def block(route):  # the page stays on 127.0.0.1 too (e.g. the Colab badge is not fetched)
        blocked.append(route.request.url)
        route.abort()

    page.route(re.compile(r"^(?!" + re.escape(lab.base) + r"[/?]|data:|blob:)"), block)
    run = NotebookRun(page, target, name, cells, budget)
    try:
        run.open(lab.url(target, workspace=f"browser-test-{name}"), lab.log_path)
        yield run
    except BaseException:
        run.screenshot("failure")
        raise
    finally:
        (ARTIFACTS / f"{name}-console.log").write_text(
            "\n".join(console + [f"[blocked, not on 127.0.0.1] {u}" for u in blocked]) + "\n")
        page.close()
        lab.shutdown_sessions()


def _name(target, test=None):
    """Screenshots' prefix: notebooks/00_welcome.ipynb -> notebooks-00_welcome[-test]."""
    return Path(target).parent.name + "-" + Path(target).stem + (f"-{test}" if test else "")


def _notebook(lab, target):
    path = lab.root / target
    if not path.exists():
        pytest.skip(f"{target} does not exist yet")
    return json.loads(path.read_text())["cells"]


# ---------------------------------------------------------------------------------------------
# The tests
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("target", TARGETS)
def test_widget_renders_and_responds(target, lab, browser):
    cells = _notebook(lab, target)
    stop = _widget_cell(cells)
    assert stop is not None, (f"{target}: no code cell builds an ipywidgets slider (no cell tagged "
                              f"{sorted(WIDGET_TAGS)}, none calling interact(...) or ...Slider(...))")
    learner = target.startswith("notebooks/") or target == MINIMAL
    with open_notebook(lab, browser, target, _name(target), NOTEBOOK_BUDGET) as run:
        page = run.page
        errors = []
        for i in range(stop + 1):
            run.run_cell(i, cells[i])
            if cells[i]["cell_type"] == "code":
                text = "\n".join(run.cells.nth(i).locator(STDERR).all_inner_texts())
                if ERROR.search(text):  # an exception (a traceback, or a check's one-line "✘ ...")
                    errors.append((i, _last_line(text)))
        unexpected = [e for e in errors if "NotImplemented" not in e[1] and "not implemented yet" not in e[1]]
        if not learner:
            unexpected = errors
        if unexpected:
            run.screenshot("cell-error")
        run.phase("cells")
        assert not unexpected, (f"{target}: cells before the widget failed: "
                                + "; ".join(f"cell {i}: {msg}" for i, msg in unexpected))

        widget_cell = run.cells.nth(stop)
        slider = widget_cell.locator(".jp-OutputArea .widget-slider").first
        end = time.monotonic() + run.remaining_ms(WIDGET_TIMEOUT) / 1000
        settle = time.monotonic() + 5  # "Loading widget..." may show for a moment; a text repr won't go
        while not slider.is_visible():
            text = run.output_text(stop)
            hit = TEXT_ONLY.search(text)
            final = hit and "Loading widget" not in hit.group(0) and time.monotonic() > settle
            if final or time.monotonic() > end:
                run.screenshot("no-widget")
                if hit:
                    pytest.fail(
                        f"{target}: the widget in cell {stop} shows as text only ({hit.group(0)!r} in "
                        f"{text.strip()[:300]!r}). This is what learners see when JupyterLab's "
                        f"ipywidgets front end (jupyterlab_widgets) is missing or does not match the "
                        f"kernel's ipywidgets: check `pip show ipywidgets jupyterlab_widgets` and "
                        f"`jupyter labextension list`. Screenshot: {run.shots[-1] if run.shots else '-'}")
                pytest.fail(f"{target}: no slider (.widget-slider) appeared in cell {stop} within "
                            f"{WIDGET_TIMEOUT} s; the cell shows {text.strip()[:300]!r}")
            time.sleep(0.25)
        text = run.output_text(stop)
        hit = TEXT_ONLY.search(text)
        assert not hit, (f"{target}: the widget in cell {stop} shows as text only in part "
                         f"({hit.group(0)!r} in {text.strip()[:300]!r}); check that ipywidgets and "
                         f"jupyterlab_widgets match")
        run.show(slider)
        run.screenshot("widget")
        run.phase("widget")

        readout = widget_cell.locator(".widget-readout").first
        value_before = readout.inner_text(timeout=5_000) if readout.count() else "?"
        before = widget_cell.evaluate(_OUTPUT_STATE)
        handle = slider.locator(".noUi-handle, [role=slider]").first
        handle.focus(timeout=5_000)
        for _ in range(3):
            page.keyboard.press("ArrowRight")
            time.sleep(0.1)
        end = time.monotonic() + run.remaining_ms(CHANGE_TIMEOUT) / 1000
        after = before
        while True:
            after = widget_cell.evaluate(_OUTPUT_STATE)
            if after != before and after.strip(" |"):
                time.sleep(0.5)  # let the redraw settle, then take the final state
                settled = widget_cell.evaluate(_OUTPUT_STATE)
                if settled == after:
                    break
                continue
            if time.monotonic() > end:
                break
            time.sleep(0.25)
        value_after = readout.inner_text(timeout=5_000) if readout.count() else "?"
        run.screenshot("slider-moved")
        assert value_after != value_before, (
            f"{target}: pressing ArrowRight on the slider in cell {stop} did not move it "
            f"(readout stays {value_before!r})")
        assert after != before, (
            f"{target}: the slider in cell {stop} moved ({value_before} -> {value_after}) but the output "
            f"next to it did not change within {CHANGE_TIMEOUT} s: the kernel does not answer the "
            f"widget (output: {after[:200]!r})")
        run.phase("slider")
        print(f"\n{target}: slider {value_before} -> {value_after}, output changed; {run.timings()}; "
              + (f"cells {[i for i, _ in errors]} raised NotImplementedError (exercises); " if errors else "")
              + f"screenshots: {', '.join(p.name for p in run.shots)}")


def _check_titles(target):
    """{check name: title} of the lesson's checks (course_utils.checks.lessonNN), {} if unknown."""
    match = re.match(r"(\d\d)_", Path(target).name)
    try:
        module = importlib.import_module(f"course_utils.checks.lesson{match.group(1)}")
    except Exception:  # noqa: BLE001 - the titles only sharpen the messages
        return {}
    return {name: getattr(fn, "title", None) for name, fn in vars(module).items() if hasattr(fn, "title")}


def _open_exercises(cells):
    """Names of the functions/classes that the notebook leaves to the learner (raise NotImplementedError)."""
    names = set()
    for c in cells:
        source = _source(c)
        if c["cell_type"] == "code" and re.search(r"raise NotImplementedError", source):
            names.update(re.findall(r"^(?:def|class)\s+(\w+)", source, re.M))
    return names


@pytest.mark.parametrize("target, budget, then", RUN_ALL)
def test_restart_run_all(target, budget, then, lab, browser):
    cells = _notebook(lab, target)
    code = [i for i, c in enumerate(cells) if c["cell_type"] == "code" and _source(c).strip()]
    with open_notebook(lab, browser, target, _name(target, "run-all"), budget) as run:
        run.restart_and_run_all()
        states, counts = run.wait_all_ran()
        run.phase("run all")
        last = code[-1]
        run.show(run.cells.nth(last))
        run.screenshot("run-all-done")

        order = [counts[i] for i in code]
        assert order == sorted(order) and len(set(order)) == len(order), (
            f"{target}: after Run All the execution counts are not in the cells' order, once each: "
            f"{dict(zip(code, order))}")
        assert counts[last] == max(order), f"{target}: the last code cell ({last}) did not run last: {counts}"

        problems = []
        for i in code:
            for out in states[i]["outputs"]:
                if TRACEBACK in out["text"]:
                    problems.append(f"cell {i} ({_first_line(cells[i])!r}) shows a traceback: "
                                    f"{_last_line(out['text'])!r}")
                elif out["mime"] in STREAMS and (wrong := re.search(r"^\s*(✘.*)$", out["text"], re.M)):
                    problems.append(f"cell {i} ({_first_line(cells[i])!r}) shows {wrong.group(1)[:200]!r}")

        titles, open_names, notices = _check_titles(target), _open_exercises(cells), []
        for i in code:
            for check_name, argument in CHECK_CALL.findall(_source(cells[i])):
                if argument not in open_names:
                    continue  # an exercise the notebook solves itself: the traceback/✘ rule covers it
                title = titles.get(check_name)
                expected = "○ " + (re.escape(title) if title else "[^:]+") + r": not implemented yet\. "
                outs = states[i]["outputs"]
                text = " ".join(o["text"].strip() for o in outs)
                ok = (len(outs) == 1 and outs[0]["mime"] == STREAMS[0] and len(text.splitlines()) == 1
                      and re.match(expected, text))
                if ok:
                    notices.append(i)
                else:
                    problems.append(f"cell {i} ({_first_line(cells[i])!r}) should show the one line "
                                    f"'○ {titles.get(check_name, check_name)}: not implemented yet. ...' and "
                                    f"nothing else; it shows {len(outs)} output(s): {text[:200]!r}")
        if notices:
            run.show(run.cells.nth(notices[0]))
            run.screenshot("not-implemented-notice")
        if problems:
            run.screenshot("problems")
        assert not problems, (f"{target}: after Restart Kernel and Run All ({len(code)} code cells ran): "
                              + "; ".join(problems))
        assert notices or not open_names, f"{target}: no check of an open exercise ({sorted(open_names)}) was found"
        done = [f"{len(code)} code cells ran, the last ({last}) with count {counts[last]}",
                f"'not implemented yet' in cells {notices}"]

        if then == "translation-widget":
            for i, c in enumerate(cells):
                for attachment in c.get("attachments", {}) if c["cell_type"] == "markdown" else ():
                    done.append("diagram " + run.check_diagram(i, attachment))
            run.phase("diagrams")
            done.append(_type_into_translation_widget(run, cells))
            run.phase("widget")
        print(f"\n{target}: {'; '.join(done)}; {run.timings()}; screenshots: "
              + ", ".join(p.name for p in run.shots))


def _type_into_translation_widget(run, cells):
    """Lesson 10's widget shows the heatmap of its default sentence, then of the first one typed."""
    target, page = run.target, run.page
    stop = _widget_cell(cells)
    assert stop is not None, f"{target}: no code cell tagged 'widget' (the translation widget)"
    cell = run.cells.nth(stop)

    def state():
        return cell.evaluate(_TRANSLATION_STATE)

    def shown(s, other_src=None):
        return (s and "translation:" in s["text"] and len(s["images"]) == 1 and s["images"][0]["complete"]
                and s["images"][0]["width"] > 0 and s["images"][0]["src"] != other_src)

    end = time.monotonic() + run.remaining_ms(WIDGET_TIMEOUT) / 1000
    while not shown(s := state()):
        if time.monotonic() > end:
            run.screenshot("widget-missing")
            pytest.fail(f"{target}: the translation widget in cell {stop} shows no 'translation:' and heatmap "
                        f"for its default sentence within {WIDGET_TIMEOUT} s; it shows "
                        f"{(s['text'] if s else run.output_text(stop)).strip()[:300]!r} and "
                        f"{len(s['images']) if s else 0} image(s)")
        time.sleep(0.25)
    default = s
    run.show(cell)
    run.screenshot("widget-default")

    def log_messages():  # JupyterLab's status bar counts the outputs that went to its log console
        return page.evaluate("""() => {
            const item = document.querySelector('.jp-LogConsoleStatusItem');
            const n = item ? parseInt((item.textContent || '').trim(), 10) : 0;
            return Number.isNaN(n) ? 0 : n;
        }""")

    logged = log_messages()
    box = cell.locator(".widget-text input").first
    box.click(timeout=run.remaining_ms(10))
    page.keyboard.press("ControlOrMeta+a")
    page.keyboard.type(TYPED_SENTENCE, delay=5)
    page.keyboard.press("Enter")
    end = time.monotonic() + run.remaining_ms(TRANSLATE_TIMEOUT) / 1000
    while True:
        s = state()
        if shown(s, default["images"][0]["src"]):
            time.sleep(1.0)  # let the output settle, then take the final state
            if state() == s:
                break
        if time.monotonic() > end:
            run.screenshot("widget-typed-timeout")
            pytest.fail(f"{target}: after typing {TYPED_SENTENCE!r} and Enter into the translation widget "
                        f"(cell {stop}), no new 'translation:' and heatmap within {TRANSLATE_TIMEOUT} s: "
                        f"the widget shows {s['text'].strip()[:300]!r} and {len(s['images'])} image(s) "
                        f"({[(i['width'], i['height']) for i in s['images']]})")
        time.sleep(0.25)
    run.show(cell)
    run.screenshot("widget-typed")
    assert s["input"] == TYPED_SENTENCE, (f"{target}: the widget's text box holds {s['input']!r}, "
                                          f"not the sentence typed {TYPED_SENTENCE!r}")
    assert s["outputs"] == 1, (f"{target}: cell {stop} shows {s['outputs']} outputs, expected only the widget "
                               f"(the heatmap must be inside it)")
    assert log_messages() == logged, (
        f"{target}: after typing {TYPED_SENTENCE!r} into the translation widget, JupyterLab's log console "
        f"counts {log_messages() - logged} new message(s): output of the widget's callback (e.g. its figure) "
        f"went there instead of into the widget; screenshot {run.shots[-1]}")
    assert "<Figure size" not in s["text"], (f"{target}: the translation widget shows a figure's text repr "
                                             f"instead of the heatmap: {s['text'].strip()[:300]!r}")
    image = s["images"][0]
    assert image["width"] >= 100 and image["height"] >= 100, (
        f"{target}: the heatmap for {TYPED_SENTENCE!r} is only {image['width']}x{image['height']} px")
    assert image["src"].startswith("data:image/png;base64,"), (
        f"{target}: the heatmap is not an inline PNG: {image['src'][:80]!r}")
    colours, spread = _image_stats(base64.b64decode(image["src"].split(",", 1)[1]))
    assert colours > 16 and spread > 10, (
        f"{target}: the heatmap for the first sentence typed ({TYPED_SENTENCE!r}) is blank "
        f"({colours} colours, grey-level standard deviation {spread:.1f}); screenshot {run.shots[-1]}")
    translation = re.search(r"translation:\s*(.*)", s["text"]).group(1).strip()
    return (f"widget: typed {TYPED_SENTENCE!r} -> translation {translation!r}, heatmap "
            f"{image['width']}x{image['height']} px (default sentence: "
            f"{default['images'][0]['width']}x{default['images'][0]['height']} px)")


def test_exercise_wrong_then_right(lab, browser):
    target = EXERCISE
    cells = _notebook(lab, target)
    code = [i for i, c in enumerate(cells) if c["cell_type"] == "code"]
    exercise = next((i for i in code if re.search(rf"^def {EXERCISE_NAME}\(", _source(cells[i]), re.M)), None)
    assert exercise is not None, f"{target}: no code cell defines {EXERCISE_NAME}(...)"
    check_cell = next((i for i in code if i > exercise), None)
    assert check_cell is not None and f"check.{EXERCISE_NAME}(" in _source(cells[check_cell]), (
        f"{target}: the code cell after the exercise (cell {exercise}) is not check.{EXERCISE_NAME}(...)")
    original = _source(cells[exercise])
    stub = re.compile(r"# YOUR CODE HERE\s*\n\s*raise NotImplementedError\(\)")
    assert stub.search(original), f"{target}: cell {exercise} has no '# YOUR CODE HERE / raise NotImplementedError()'"
    answers = {"wrong": stub.sub(WRONG_BODY, original).rstrip(), "right": stub.sub(RIGHT_BODY, original).rstrip()}

    with open_notebook(lab, browser, target, _name(target, "exercise"), SMALL_BUDGET) as run:
        for i in range(exercise):  # as a learner: read and run the lesson up to the exercise
            run.run_cell(i, cells[i])
        run.phase("cells")
        count = {exercise: None, check_cell: None}
        seen = {}
        for answer in ("wrong", "right"):
            run.set_source(exercise, answers[answer])
            for i in (exercise, check_cell):
                count[i] = run.run_cell(i, cells[i], before=count[i])
            states = run.states()
            run.show(run.cells.nth(check_cell))
            run.screenshot(f"{answer}-answer")
            assert not states[exercise]["outputs"], (
                f"{target}: the exercise cell {exercise} with the {answer} answer shows output: "
                f"{' '.join(o['text'] for o in states[exercise]['outputs'])[:300]!r}")
            outs = states[check_cell]["outputs"]
            text = "\n".join(o["text"].strip() for o in outs)
            lines = text.splitlines()
            seen[answer] = text
            body = answers[answer].splitlines()[-1].strip()
            what = f"{target}: with the {answer} answer ({body!r}), the check in cell {check_cell}"
            if answer == "wrong":
                assert len(outs) == 1 and outs[0]["mime"] == STREAMS[1], (
                    f"{what} should show one error output (stderr); it shows "
                    f"{[(o['mime'], o['text'][:100]) for o in outs]}")
                assert TRACEBACK not in text and "course_utils" not in text, (
                    f"{what} shows a traceback into course_utils instead of one line: {text[:400]!r}")
                assert len(lines) == 1 and lines[0].startswith(f"✘ {EXERCISE_TITLE}:"), (
                    f"{what} should show one line starting with '✘ {EXERCISE_TITLE}:'; it shows {text[:400]!r}")
                assert outs[0]["red"], f"{what} shows its ✘ line, but not in red: {text!r}"
            else:
                assert len(outs) == 1 and outs[0]["mime"] == STREAMS[0] and len(lines) == 1, (
                    f"{what} should show exactly one line '✔ {EXERCISE_TITLE}: correct ...' and nothing else; "
                    f"it shows {[(o['mime'], o['text'][:100]) for o in outs]}")
                assert lines[0].startswith(f"✔ {EXERCISE_TITLE}: correct"), (
                    f"{what} should show '✔ {EXERCISE_TITLE}: correct ...'; it shows {text[:400]!r}")
            run.phase(answer)
        print(f"\n{target}: wrong answer -> {seen['wrong']!r}; right answer -> {seen['right']!r}; "
              f"{run.timings()}; screenshots: {', '.join(p.name for p in run.shots)}")


def test_diagram_renders(lab, browser):
    target = DIAGRAM
    cells = _notebook(lab, target)
    diagrams = [(i, name) for i, c in enumerate(cells) if c["cell_type"] == "markdown"
                for name in c.get("attachments", {}) if f"attachment:{name}" in _source(c)]
    assert diagrams, f"{target}: no markdown cell embeds a diagram (![...](attachment:NN_name.png))"
    with open_notebook(lab, browser, target, _name(target, "diagram"), SMALL_BUDGET) as run:
        done = [run.check_diagram(i, name) for i, name in diagrams]
        run.phase("diagrams")
        print(f"\n{target}: {'; '.join(done)}; {run.timings()}; screenshots: "
              f"{', '.join(p.name for p in run.shots)}")
