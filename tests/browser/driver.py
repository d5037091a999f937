"""Driving one notebook in JupyterLab as a learner does: open it, run cells with Shift+Enter, Run All
from the Kernel menu, type into a cell or a widget; and what the tests read back from the page (cell
states, outputs, images, screenshots). Used by every tests/browser/test_*.py."""
import contextlib
import importlib
import io
import json
import re
import time
from pathlib import Path

import pytest

from tests.browser.server import ARTIFACTS, ROOT

DIAGRAMS = ROOT / "diagrams" / "png"

# Every wait is on a state (the kernel idle, a cell's count, an output present, a picture changed); these are only
# the ceilings that stop a test that HANGS, far above what any state takes on a busy machine, so that no test
# depends on the machine's speed (on a busy 2-core machine, budgets of 60-240 s failed 11 times, never on content).
HANG = 1800  # s, everything for one notebook: page load, kernel start, cells, widget
NOTEBOOK_BUDGET = SMALL_BUDGET = HANG
KERNEL_TIMEOUT = 600  # s, from the notebook showing to its kernel being idle
CELL_TIMEOUT = 900  # s, one cell (as the notebook tests)
WIDGET_TIMEOUT = 300  # s, from the widget cell finishing to the slider being on screen
CHANGE_TIMEOUT = 120  # s, from the key presses to the output changing
STOPPED_AFTER = 5  # s, the kernel idle, nothing queued and cells without a count: Run All stopped

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


def find_cell(cells, tags=(), pattern=None):
    """Index of the first code cell tagged with one of `tags`, else the first one whose code (comments
    left out) matches `pattern`; None when there is none. A lesson tags the cell to make the choice
    explicit (cell metadata "tags": [...])."""
    code = [(i, c) for i, c in enumerate(cells) if c["cell_type"] == "code"]
    for i, c in code:
        if set(tags) & set(c.get("metadata", {}).get("tags", [])):
            return i
    if pattern is not None:
        for i, c in code:
            if pattern.search(re.sub(r"#.*", "", cell_source(c))):
                return i
    return None


def find_widget_cell(cells):
    """Index of the first code cell tagged `widget`/`browser-check`, else the first one calling
    interact(...) or building a slider; None when there is none."""
    return find_cell(cells, WIDGET_TAGS, WIDGET_CELL)


OUTPUT_STATE = """cell => {
    const area = cell.querySelector('.jp-Cell-outputArea') || cell;
    const copy = area.cloneNode(true);  // what the widget shows, minus the slider and its readout
    copy.querySelectorAll('.widget-slider, .widget-readout, .widget-label, input').forEach(e => e.remove());
    const images = Array.from(copy.querySelectorAll('img')).map(i => i.src.slice(-200));
    return (copy.textContent || '').trim() + ' | ' + images.join(' ');
}"""


CELL_STATES = """() => Array.from(
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

KERNEL_STATUS = """() => {
    const indicator = document.querySelector('.jp-Notebook-ExecutionIndicator');
    return indicator ? indicator.getAttribute('data-status') || '' : '';
}"""

# The toolbar's kernel name: "No Kernel" until the notebook's session has a kernel. (The execution
# indicator above says "idle" from the start, before any kernel exists: JupyterLab's default state.)
KERNEL_NAME = """() => {
    const name = document.querySelector('.jp-NotebookPanel-toolbar .jp-Toolbar-kernelName');
    return name ? name.innerText.trim() : '';
}"""

IN_VIEW = """e => {
    const box = e.getBoundingClientRect();
    const view = (e.closest('.jp-WindowedPanel-outer') || document.documentElement).getBoundingClientRect();
    return {top: Math.round(box.top), inView: box.top >= view.top - 1 && box.top < view.bottom - 60};
}"""

EDITOR_TEXT = "e => Array.from(e.querySelectorAll('.cm-line')).map(line => line.textContent).join('\\n')"

TRANSLATION_STATE = """cell => {
    const out = cell.querySelector('.widget-output');
    if (!out) return null;
    const images = Array.from(out.querySelectorAll('img')).map(i => ({
        src: i.src, width: i.naturalWidth, height: i.naturalHeight, complete: i.complete}));
    const input = cell.querySelector('.widget-text input');
    return {text: out.textContent || '', images, input: input ? input.value : null,
            outputs: cell.querySelectorAll('.jp-Cell-outputArea > .jp-OutputArea-child').length};
}"""


IMAGES = """cell => Array.from(cell.querySelectorAll('.jp-Cell-outputArea img')).map(i => ({
    src: i.src, width: i.naturalWidth, height: i.naturalHeight, complete: i.complete,
    shown: i.getBoundingClientRect().width}))"""

# The lines of text as the browser lays them out (soft wraps included): every character's box, grouped
# by its vertical position; a newline in the text ends a line too.
VISUAL_LINES = """element => {
    const lines = [];
    let current = '', top = null;
    const walker = document.createTreeWalker(element, NodeFilter.SHOW_TEXT);
    const range = document.createRange();
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
        const text = node.textContent;
        for (let i = 0; i < text.length; i++) {
            if (text[i] === '\\n') { lines.push(current); current = ''; top = null; continue; }
            range.setStart(node, i);
            range.setEnd(node, i + 1);
            const rects = Array.from(range.getClientRects()).filter(r => r.width > 0 || r.height > 0);
            if (!rects.length) { current += text[i]; continue; }
            const y = rects[rects.length - 1].top;
            if (top !== null && y > top + 2) { lines.push(current); current = ''; }
            if (top === null || y > top + 2) top = y;
            current += text[i];
        }
    }
    if (current) lines.push(current);
    return lines;
}"""


LOG_MESSAGES = """() => {
    const item = document.querySelector('.jp-LogConsoleStatusItem');
    const n = item ? parseInt((item.textContent || '').trim(), 10) : 0;
    return Number.isNaN(n) ? 0 : n;
}"""  # JupyterLab's status bar counts the outputs that went to its log console


def type_into(run, box, text, submit="Enter"):
    """Click the text box `box` (a locator), replace what it holds with `text`, then press `submit`."""
    box.click(timeout=run.remaining_ms(10))
    run.page.keyboard.press("ControlOrMeta+a")
    run.page.keyboard.type(text, delay=5)
    run.page.keyboard.press(submit)


def wait_until_settled(state, done, timeout_s, on_timeout, settle_s=1.0):
    """Poll state() until done(s) holds and state() is still s `settle_s` later (the output has
    settled); return s. After timeout_s, on_timeout(last state) is called: it fails the test."""
    end = time.monotonic() + timeout_s
    while True:
        s = state()
        if done(s):
            time.sleep(settle_s)
            if state() == s:
                return s
        if time.monotonic() > end:
            on_timeout(s)
            pytest.fail(f"no settled state within {timeout_s} s")  # on_timeout should have failed already
        time.sleep(0.25)


def cell_source(cell):
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def first_line(cell):
    source = cell_source(cell)
    return source.strip().splitlines()[0] if source.strip() else ""


def count_of(prompt):
    """The execution count in a prompt such as '[12]:', else None ('[ ]:', '[*]:')."""
    match = re.search(r"\[(\d+)\]", prompt)
    return int(match.group(1)) if match else None


def last_line(text):
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:200] if lines else ""


def image_stats(png):
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
            pytest.fail(f"{self.target}: still not done after {self.budget} s, the ceiling for a notebook that "
                        f"hangs (phases so far: {self.timings()})")
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
            where = element.evaluate(IN_VIEW)
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
        return self.page.evaluate(CELL_STATES)

    def kernel_status(self):
        return self.page.evaluate(KERNEL_STATUS)

    def kernel_ready(self, server_kernel):
        """The notebook's kernel is running and idle: on the server (`server_kernel()`: its state, None
        while the notebook has no session with a kernel), in the toolbar (a kernel's name) and in the
        execution indicator. The indicator alone says "idle" before any kernel exists, and a cell run
        then pops up "Select Kernel" (seen in CI under load)."""
        name = self.page.evaluate(KERNEL_NAME)
        return (self.kernel_status() == "idle" and name not in ("", "Kernel", "No Kernel")
                and server_kernel() == "idle")

    def open(self, url, log_path, server_kernel=lambda: "idle"):
        """Load the notebook, wait for all its cells and for its kernel to be idle (see kernel_ready)."""
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
        while not self.kernel_ready(server_kernel):
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
            count = count_of(text)
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
                            f"(prompt {text!r}); first line: {first_line(cell)!r}")
            time.sleep(0.1)

    def set_source(self, i, text):
        """Replace cell i's text by `text`, as one insertion (no auto-indentation), and check it."""
        editor = self.cells.nth(i).locator(".jp-Cell-inputArea .cm-content").first
        editor.click(timeout=self.remaining_ms(10))  # edit mode in that cell
        self.page.keyboard.press("ControlOrMeta+a")  # in the editor: select the cell's whole text
        self.page.keyboard.insert_text(text)
        held = editor.evaluate(EDITOR_TEXT)
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
        code = [i for i, c in enumerate(cells) if c["cell_type"] == "code" and cell_source(c).strip()]
        started, stopped_since = False, None
        while True:
            states, status = self.states(), self.kernel_status()
            counts = {i: count_of(states[i]["prompt"]) for i in code}
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
                            + (f"cell {running} ({first_line(cells[running])!r}) was still running, "
                               if running is not None else f"kernel {status!r}, ")
                            + f"{sum(v is not None for v in counts.values())} of {len(code)} code cells ran")
            time.sleep(0.5)

    def _stopped(self, states, counts):
        """Run All stopped: name the cell that raised (a notebook failure, not the test's)."""
        not_run = [i for i, v in counts.items() if v is None]
        raised = [(i, last_line(o["text"])) for i, s in enumerate(states) for o in s["outputs"]
                  if TRACEBACK in o["text"] or (o["mime"] in STREAMS and re.search(r"^\s*✘", o["text"], re.M))]
        where = raised[0][0] if raised else (not_run[0] if not_run else None)
        if where is not None:
            self.show(self.cells.nth(where))
        self.screenshot("run-all-stopped")
        pytest.fail(f"{self.target}: Restart Kernel and Run All stopped before the end: code cells "
                    f"{not_run} did not run. "
                    + ("; ".join(f"The notebook itself fails: cell {i} ({first_line(self.cells_json[i])!r}) "
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
        colours, spread = image_stats(element)
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
        run.open(lab.url(target, workspace=f"browser-test-{name}"), lab.log_path,
                 lambda: lab.kernel_state(target))
        yield run
    except BaseException:
        run.screenshot("failure")
        raise
    finally:
        (ARTIFACTS / f"{name}-console.log").write_text(
            "\n".join(console + [f"[blocked, not on 127.0.0.1] {u}" for u in blocked]) + "\n")
        page.close()
        lab.shutdown_sessions()


def shot_name(target, test=None):
    """Screenshots' prefix: notebooks/00_welcome.ipynb -> notebooks-00_welcome[-test]."""
    return Path(target).parent.name + "-" + Path(target).stem + (f"-{test}" if test else "")


def notebook_cells(lab, target):
    """The notebook's cells (from the course copy); the test is skipped while the notebook does not exist."""
    path = lab.root / target
    if not path.exists():
        pytest.skip(f"{target} does not exist yet")
    return json.loads(path.read_text())["cells"]



def check_titles(target):
    """{check name: title} of the lesson's checks (course_utils.checks.lessonNN), {} if unknown."""
    match = re.match(r"(\d\d)_", Path(target).name)
    try:
        module = importlib.import_module(f"course_utils.checks.lesson{match.group(1)}")
    except Exception:  # noqa: BLE001 - the titles only sharpen the messages
        return {}
    return {name: getattr(fn, "title", None) for name, fn in vars(module).items() if hasattr(fn, "title")}


def open_exercises(cells):
    """Names of the functions/classes that the notebook leaves to the learner (raise NotImplementedError)."""
    names = set()
    for c in cells:
        source = cell_source(c)
        if c["cell_type"] == "code" and re.search(r"raise NotImplementedError", source):
            names.update(re.findall(r"^(?:def|class)\s+(\w+)", source, re.M))
    return names


def run_up_to(run, cells, stop, learner):
    """Run cells 0..stop one by one with Shift+Enter, as a learner reads a lesson. An open exercise
    (NotImplementedError, a check's "not implemented yet") is allowed in a learner notebook only; any
    other error fails the test, naming the cell."""
    errors = []
    for i in range(stop + 1):
        run.run_cell(i, cells[i])
        if cells[i]["cell_type"] == "code":
            text = "\n".join(run.cells.nth(i).locator(STDERR).all_inner_texts())
            if ERROR.search(text):  # an exception (a traceback, or a check's "✘ ..." message)
                errors.append((i, last_line(text)))
    unexpected = [e for e in errors if "NotImplemented" not in e[1] and "not implemented yet" not in e[1]]
    if not learner:
        unexpected = errors
    if unexpected:
        run.screenshot("cell-error")
    run.phase("cells")
    assert not unexpected, (f"{run.target}: cells before cell {stop} failed: "
                            + "; ".join(f"cell {i}: {msg}" for i, msg in unexpected))
    return errors


def wait_for_picture(run, i, what, timeout=WIDGET_TIMEOUT):
    """The images in cell i's output once they have loaded: [{src, width, height, complete, shown}]."""
    cell = run.cells.nth(i)
    end = time.monotonic() + run.remaining_ms(timeout) / 1000
    while True:
        images = cell.evaluate(IMAGES)
        if images and all(image["complete"] and image["width"] for image in images):
            return images
        if time.monotonic() > end:
            run.show(cell)
            run.screenshot(f"cell{i}-no-picture")
            pytest.fail(f"{run.target}: {what} (cell {i}, {first_line(run.cells_json[i])!r}) shows no picture "
                        f"within {timeout} s; its output: {run.output_text(i).strip()[:300]!r}")
        time.sleep(0.25)


def check_not_blank(run, png, what):
    """A screenshot (PNG bytes) that shows a picture: many colours, grey levels that vary."""
    assert png is not None, f"{run.target}: no screenshot of {what}"
    colours, spread = image_stats(png)
    assert colours > 16 and spread > 10, (
        f"{run.target}: {what} looks blank on screen ({colours} colours, grey-level standard deviation "
        f"{spread:.1f}); screenshot {run.shots[-1] if run.shots else '-'}")
    return colours, spread


def skip_unless_cell(lab, target, tags, pattern, what):
    """The notebook's cells and the index of the cell a test targets; the test is skipped, with the
    reason, while the notebook or the cell does not exist yet (lessons being written)."""
    cells = notebook_cells(lab, target)
    i = find_cell(cells, tags, pattern)
    if i is None:
        pytest.skip(f"{target} has no {what} yet: no code cell tagged {sorted(tags)}"
                    + (f" or matching {pattern.pattern!r}" if pattern is not None else ""))
    return cells, i
