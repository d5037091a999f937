"""The JupyterLab server and the headless Chromium the browser tests drive (fixtures in conftest.py).

JupyterLab runs on a fresh copy of the course, on 127.0.0.1 with a random token, no news, no update
check, an empty config, and is stopped by its process id (its kernels too) at the end. Chromium runs off
the network (no background networking, component updates, sync) with a new empty profile.
"""
import json
import os
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

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path(os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium"))
ARTIFACTS = Path(os.environ.get("TEST_ARTIFACTS_DIR") or ROOT / "test-artifacts") / "browser"
MINIMAL = "browser_check/minimal_widget.ipynb"  # written by the test into the course copy

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

    def kernel_state(self, notebook):
        """The execution state of the kernel of `notebook`'s session (a path in the course copy), as
        the server knows it; None while it has no session with a kernel or the server does not answer."""
        try:
            for session in self.api("GET", "/api/sessions"):
                if session.get("path") == notebook and session.get("kernel"):
                    return session["kernel"].get("execution_state")
        except (OSError, ValueError):
            pass
        return None

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


def start_lab(tmp_path_factory):
    """Start JupyterLab on a copy of the course; yield the Lab; stop it (a generator for a fixture)."""
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


def launch_browser(tmp_path_factory):
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
