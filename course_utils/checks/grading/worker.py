"""Grade ONE learner notebook: run it in a sandboxed kernel, then judge its answers from outside.

    rows, graded, notes = grade_notebook(submission, checks, limits, sandboxed=True)

The parent (the `grading` command) calls `grade_notebook`, which starts this module as a worker
process (`_worker(SPEC.json)`, from the grader's own copy of the package) and bounds it in time. The worker:
1. copies the learner's folder to a private folder and starts a Jupyter kernel in the sandbox
   (`sandbox.py`), with that copy in place of the folder;
2. runs `kernel_side.remember` (sent as source), then the notebook's cells, like "Run All" but going
   on past cells that fail, within the time limits;
3. opens the judge's socket, runs the grading cell (the kernel connects and serves requests), and
   meanwhile, in a thread of its own, runs `judge.judge` over that socket; writes the result.
The worker runs no learner code: the learner's code runs only in the kernel.
"""
import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from . import judge as judging
from . import sandbox
from .report import Row

PACKAGE_ROOT = Path(__file__).resolve().parents[3]  # the folder that holds course_utils/ (the grader's copy)
PROGRESS_TAG = "course-progress"  # the progress table at the end of every lesson: not run when grading
STARTUP = 120  # seconds for a kernel to start, and for the grading cell to connect
GRACE = 10     # seconds a kernel gets to stop after an interrupt before it is killed
WORKER = "import sys; from course_utils.checks.grading.worker import _worker; sys.exit(_worker(sys.argv[1]))"
NO_SIGINT = ["sh", "-c", 'trap "" INT; exec "$@"', "sh"]   # bubblewrap must not die of the kernel's interrupts


def _boot_source(names, store):
    """The first cell: the kernel side (sent as source) in a module of its own, remembering answers."""
    here = Path(__file__).resolve().parent
    sources = {name: (here / f"{name}.py").read_text(encoding="utf-8") for name in ("wire", "kernel_side")}
    return f"""\
def _course_grader_boot(sources, names, store):
    import sys, types
    wire = types.ModuleType("course_grader_wire")
    exec(compile(sources["wire"], "<course-grader>/wire.py", "exec"), wire.__dict__)
    side = types.ModuleType(store)
    side.__dict__["wire"] = wire
    exec(compile(sources["kernel_side"], "<course-grader>/kernel_side.py", "exec"), side.__dict__)
    side.defined = side.remember(names, get_ipython())
    sys.modules[store] = side


_course_grader_boot({sources!r}, {list(names)!r}, {store!r})
del _course_grader_boot
"""


def _serve_source(store, path, token):
    return f"""\
import sys as _course_grader_sys
_course_grader_sys.modules[{store!r}].Server(_course_grader_sys.modules[{store!r}].defined,
                                          get_ipython().user_ns).serve({path!r}, {token!r})
del _course_grader_sys
"""


def _kernel_env(progress_file):
    env = dict(os.environ)
    for name in ("JPY_SESSION_NAME", "JPY_PARENT_PID"):
        env.pop(name, None)
    env.update(COURSE_FAST="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", COURSE_PROGRESS="off",
               COURSE_PROGRESS_FILE=str(progress_file), MPLBACKEND="Agg", PYTHONDONTWRITEBYTECODE="1",
               PYTHONPATH=os.pathsep.join(filter(None, [os.environ.get("COURSE_KERNEL_PACKAGE_ROOT",
                                                                        str(PACKAGE_ROOT))])))
    return env


def _error_of(cell):
    for output in cell.get("outputs", []):
        if output.get("output_type") == "error":
            return output.get("ename", ""), output.get("evalue", "")
    return None


def _cell_name(nb, index):
    """How the report names a cell of the learner's notebook (`index` counts the grader's first cell)."""
    first = next((line.strip() for line in nb.cells[index].source.splitlines() if line.strip()), "")
    return f"cell {index} ({first[:50]!r})"


def _kernel_manager(spec, box):
    from jupyter_client.manager import AsyncKernelManager

    class SandboxedKernelManager(AsyncKernelManager):
        def format_kernel_cmd(self, extra_arguments=None):
            argv = super().format_kernel_cmd(extra_arguments)
            return NO_SIGINT + sandbox.wrap(argv, box) if box is not None else argv

    io_dir = Path(spec["io_dir"])
    return SandboxedKernelManager(kernel_name=spec["kernel"], transport="ipc", ip=str(io_dir / "k"),
                                  connection_file=str(io_dir / "kernel.json"))


def run_notebook(spec):
    """Execute one notebook and judge it, in this process (the worker); write the result file.

    result: {"outcomes": {exercise: [status, message]}, "graded": bool, "notes": [...],
             "cut": None or a sentence saying how the notebook ran out of time}"""
    import importlib

    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import DeadKernelError

    from .. import core

    path = Path(spec["notebook"])
    folder = path.parent
    result = {"outcomes": {}, "graded": False, "notes": [], "cut": None}
    names = spec["names"]
    loaded = {}

    def load_checks():  # (meanwhile the kernel starts and the notebook runs)
        try:
            importlib.import_module(f"course_utils.checks.lesson{spec['lesson']}")
            loaded["checks"] = list(core.REGISTRY[spec["lesson"]].values())
        except BaseException as error:  # noqa: BLE001 - reported when the checks are needed
            loaded["error"] = f"{type(error).__name__}: {error}"

    loader = threading.Thread(target=load_checks, daemon=True)
    loader.start()
    nb = nbformat.read(path, as_version=4)
    store = f"_course_grader_{secrets.token_hex(6)}"
    nb.cells.insert(0, nbformat.v4.new_code_cell(_boot_source(names, store)))
    io_dir = Path(spec["io_dir"])
    box = None
    if spec["sandbox"]:
        copy = Path(spec["copy"])
        shutil.copytree(folder, copy, symlinks=True, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
        box = sandbox.Sandbox(folder=folder, copy=copy, hidden=tuple(Path(h) for h in spec["hidden"]), io_dir=io_dir)
    timeout, cell_timeout = float(spec["timeout"]), float(spec["cell_timeout"])
    state = {"deadline": time.monotonic() + STARTUP, "limit": STARTUP, "kill_at": None, "cell": None}
    lock = threading.Lock()

    def finish(killed=False):
        """Write the result (once)."""
        with lock:
            if state.get("finished"):
                return
            state["finished"] = True
            if killed and not result["outcomes"]:
                where = f"in {_cell_name(nb, state['cell'])}" if state["cell"] is not None else "while grading"
                result["cut"] = (f"the notebook ran out of time ({timeout:g} s) {where} and did not stop when "
                                 "interrupted")
            if result["outcomes"] or result["cut"] or result["notes"]:
                result["graded"] = bool(result["outcomes"] or result["cut"]) or result["graded"]
            Path(spec["result"]).write_text(json.dumps(result))

    km = _kernel_manager(spec, box)
    client = NotebookClient(nb, km=km, kernel_name=spec["kernel"], allow_errors=True, interrupt_on_timeout=True,
                            startup_timeout=STARTUP, record_timing=False, shutdown_kernel="immediate",
                            resources={"metadata": {"path": str(folder)}})
    client.timeout_func = lambda cell: max(1, int(min(state["limit"], state["deadline"] - time.monotonic()) + 0.999))
    group = {}

    def kill():
        if group.get("pid"):
            with contextlib.suppress(OSError):
                os.killpg(group["pid"], signal.SIGKILL)

    def watchdog(stop):
        """A kernel that overruns its deadline despite the interrupts is killed (its whole process
        group), and this worker ends at once with what it has."""
        while not stop.wait(0.5):
            if state["kill_at"] is not None and time.monotonic() > state["kill_at"]:
                kill()
                finish(killed=True)
                os._exit(0)

    stop = threading.Event()
    with client.setup_kernel(env=_kernel_env(spec["progress_file"])):
        pid = getattr(getattr(client.km, "provisioner", None), "pid", None)
        if pid:
            group["pid"] = pid
            Path(spec["pid_file"]).write_text(str(pid))
            threading.Thread(target=watchdog, args=(stop,), daemon=True).start()
        try:
            client.execute_cell(nb.cells[0], 0, store_history=False)
            if _error_of(nb.cells[0]):
                raise RuntimeError("the grader's first cell failed in the kernel: %s: %s" % _error_of(nb.cells[0]))
            state["deadline"], state["limit"] = time.monotonic() + timeout, cell_timeout
            state["kill_at"] = state["deadline"] + GRACE
            for index in range(1, len(nb.cells)):
                cell = nb.cells[index]
                if cell.cell_type != "code" or not cell.source.strip() or PROGRESS_TAG in cell.metadata.get("tags", ()):
                    continue
                if time.monotonic() >= state["deadline"]:
                    result["cut"] = f"the notebook ran out of time ({timeout:g} s) before {_cell_name(nb, index)}"
                    break
                began, state["cell"] = time.monotonic(), index
                client.execute_cell(cell, index)
                if (_error_of(cell) or ("",))[0] == "KeyboardInterrupt":
                    result["notes"].append(f"{_cell_name(nb, index)} was interrupted after "
                                           f"{time.monotonic() - began:.0f} s")
            state["cell"] = None
            loader.join()
            if "error" in loaded:
                raise RuntimeError(f"the checks of lesson {spec['lesson']} could not be imported: {loaded['error']}")
            _judge_in_kernel(client, nb, spec, loaded["checks"], store, result, state, kill)
        except DeadKernelError:
            if not result["outcomes"]:
                where = f"in {_cell_name(nb, state['cell'])}" if state["cell"] is not None else "while grading"
                result["notes"].append(f"the kernel died {where} (a crash, `exit()`, or out of memory?)")
        finally:
            stop.set()
    finish()


def _judge_in_kernel(client, nb, spec, checks, store, result, state, kill):
    """The grading cell runs in the kernel (it serves requests) while the judge, in a thread of this
    process, runs the checks over the socket."""
    import nbformat
    from nbclient.exceptions import DeadKernelError

    check_timeout = float(spec["check_timeout"])
    channel = judging.Channel.listen(spec["io_dir"], kill=kill)
    cell = nbformat.v4.new_code_cell(_serve_source(store, channel.path, channel.token))
    nb.cells.append(cell)
    budget = STARTUP + (check_timeout + 2 * GRACE) * len(checks) + 60
    state["deadline"], state["limit"] = time.monotonic() + budget, budget
    state["kill_at"] = state["deadline"] + GRACE
    done = {}

    def run_judge():
        try:
            if not channel.accept(STARTUP):
                done["unreached"] = True
                kill()
                return
            done["outcomes"] = judging.judge(channel, checks, check_timeout)
        except BaseException as error:  # noqa: BLE001 - reported as the grader's fault
            done["fault"] = f"{type(error).__name__}: {error}"
        finally:
            channel.close()

    thread = threading.Thread(target=run_judge, daemon=True)
    thread.start()
    try:
        client.execute_cell(cell, len(nb.cells) - 1, store_history=False)
    except DeadKernelError:
        pass
    channel.give_up()   # (a grading cell that ended without connecting will not connect any more)
    thread.join(budget + GRACE)
    if "outcomes" in done:
        result["outcomes"] = {exercise: list(outcome) for exercise, outcome in done["outcomes"].items()}
        result["graded"] = True
    elif done.get("unreached"):  # the notebook's own doing (e.g. it rewrote or hid the grading cell): graded
        error = _error_of(cell)
        detail = f" (the cell ended with {error[0]}: {error[1]})" if error else ""
        message = ("the notebook kept the grader from reaching its answers: the grading cell never connected "
                   f"(did the notebook change how cells run, or break the kernel?){detail}")
        result["outcomes"] = {c.exercise: ["error", f"✘ {c.title}: not graded: {message}."] for c in checks}
        result["graded"] = True
    else:
        result["notes"].append(f"the grader could not run the checks: {done.get('fault', 'no reply')}")


def _skip_slow_imports():
    """nbformat's validator (jsonschema) compiles dozens of grammars of `rfc3987_syntax` when it is
    installed: seconds per process. The grader validates no IRIs: in its own processes, skip it."""
    if "jsonschema" not in sys.modules:
        sys.modules.setdefault("rfc3987_syntax", None)


def _worker(spec_file):
    _skip_slow_imports()
    spec = json.loads(Path(spec_file).read_text())
    try:
        run_notebook(spec)
    except Exception as error:  # noqa: BLE001 - reported to the parent, which marks the notebook
        if not Path(spec["result"]).exists():  # (an error while shutting the kernel down changes nothing)
            result = {"outcomes": {}, "graded": False, "cut": None,
                      "notes": [f"could not run the notebook: {type(error).__name__}: {str(error)[:300]}"]}
            Path(spec["result"]).write_text(json.dumps(result))
    return 0


# ---------------------------------------------------------------------------------------------
# The parent: one worker process per notebook, bounded in time
# ---------------------------------------------------------------------------------------------
def _kill_group(pid):
    """Kill a process group that this grader started in a new session (a worker, or a kernel)."""
    if pid > 1:  # (never 0: that would be the grader's own group)
        with contextlib.suppress(OSError):
            os.killpg(pid, signal.SIGKILL)


def grade_notebook(sub, checks, timeout=600, cell_timeout=300, check_timeout=60, kernel="python3", sandboxed=True,
                   hidden=(), grader_root=None):
    """([Row] for the lesson's exercises, graded: bool, notes) for one learner's notebook.

    hidden: the folders the sandbox hides (other learners' submissions); grader_root: the folder
    holding the grader's own copy of course_utils (the judge imports the checks from there)."""
    def rows(status, message):
        return [Row(sub.learner, sub.lesson, c.exercise, status, message) for c in checks]

    with tempfile.TemporaryDirectory(prefix="course-grade-") as tmp:
        tmp = Path(tmp)
        (tmp / "io").mkdir()
        spec = {"notebook": str(sub.path.resolve()), "lesson": sub.lesson, "kernel": kernel,
                "timeout": timeout, "cell_timeout": cell_timeout, "check_timeout": check_timeout,
                "result": str(tmp / "result.json"), "pid_file": str(tmp / "kernel.pid"),
                "progress_file": str(tmp / "progress.json"), "io_dir": str(tmp / "io"),
                "copy": str(tmp / "folder"), "sandbox": bool(sandboxed), "names": [c.learner_name for c in checks],
                "hidden": [str(h) for h in hidden]}
        (tmp / "spec.json").write_text(json.dumps(spec))
        root = str(grader_root or PACKAGE_ROOT)
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])),
                   COURSE_KERNEL_PACKAGE_ROOT=str(PACKAGE_ROOT), PYTHONDONTWRITEBYTECODE="1")
        hard_limit = STARTUP + timeout + GRACE + STARTUP + (check_timeout + 2 * GRACE) * len(checks) + 60 + GRACE + 30
        with open(tmp / "worker.log", "wb") as log:
            worker = subprocess.Popen([sys.executable, "-c", WORKER, str(tmp / "spec.json")],
                                      stdout=log, stderr=subprocess.STDOUT, cwd=tmp, env=env, start_new_session=True)
            try:
                worker.wait(timeout=hard_limit)
            except subprocess.TimeoutExpired:
                _kill_group(worker.pid)
                worker.wait()
        if (tmp / "kernel.pid").exists() and worker.returncode != 0:  # the worker could not shut its kernel
            with contextlib.suppress(ValueError):
                _kill_group(int((tmp / "kernel.pid").read_text()))
        if not (tmp / "result.json").exists():
            if worker.returncode == -signal.SIGKILL:
                return rows("timeout", f"the notebook did not finish within {hard_limit:g} s and was stopped"), True, []
            tail = (tmp / "worker.log").read_text(errors="replace")[-600:]
            return rows("error", f"the grader failed on this notebook: {tail}"), False, []
        result = json.loads((tmp / "result.json").read_text())
        if os.environ.get("COURSE_GRADER_DEBUG"):
            print((tmp / "worker.log").read_text(errors="replace")[-3000:], file=sys.stderr)
    out = []
    for check in checks:
        status, message = result["outcomes"].get(check.exercise, (None, ""))
        if status is None or (status == "missing" and result["cut"]):
            if result["cut"]:
                status, message = "timeout", f"{check.title}: not graded: {result['cut']}."
            elif result["graded"]:
                status, message = "error", f"{check.title}: not graded: {'; '.join(result['notes'])}."
            else:
                status, message = "error", "; ".join(result["notes"]) or "not graded"
        out.append(Row(sub.learner, sub.lesson, check.exercise, status, message))
    notes = result["notes"] + ([result["cut"]] if result["cut"] else [])
    return out, result["graded"], notes


if __name__ == "__main__":
    sys.exit(_worker(sys.argv[1]))
