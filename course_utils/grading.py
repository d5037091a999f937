"""Grade ONE learner notebook: run it in a fresh kernel, then the course's checks inside that kernel.

    rows, graded, notes = grade_notebook(submission, checks, timeout=600, cell_timeout=300, check_timeout=60)

`grade.py` (the command) finds the notebooks and calls this for each. Here: the code the grader puts
into the learner's kernel (before the notebook: remember what the notebook itself defines under the
exercises' names; after it: fresh checks from this package, one outcome per line), the worker process
that runs one notebook (`python -m course_utils.grading SPEC.json`), and the parent's side, which
bounds it in time and kills what does not stop.
"""
import contextlib
import json
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import NamedTuple

PACKAGE_ROOT = Path(__file__).resolve().parents[1]  # the folder that holds course_utils/
OUTCOMES = ("passed", "wrong", "not implemented", "missing", "timeout", "error")
PROGRESS_TAG = "course-progress"  # the progress table at the end of every lesson: not run when grading
STARTUP = 120  # seconds for a kernel to start and the grading cell to import the checks
GRACE = 10     # seconds a kernel gets to stop after an interrupt before it is killed


class Submission(NamedTuple):
    learner: str
    lesson: str
    path: Path


class Row(NamedTuple):
    learner: str
    lesson: str
    exercise: str
    outcome: str
    message: str


# ---------------------------------------------------------------------------------------------
# Code run inside the learner's kernel
# ---------------------------------------------------------------------------------------------
# Before the notebook: after every cell, remember the objects that the notebook itself defined
# (module "__main__") under the exercises' names, so that a later `from course_utils... import name`
# in the lesson cannot stand in for the learner's answer.
_REMEMBER = """\
def _course_grader_install(names, store_name):
    import sys, types
    store = types.ModuleType(store_name)
    store.defined = {}
    sys.modules[store_name] = store
    shell = get_ipython()

    def remember(*args):
        for name in names:
            obj = shell.user_ns.get(name)
            if obj is not None and getattr(obj, "__module__", None) == "__main__":
                store.defined[name] = obj

    shell.events.register("post_run_cell", remember)


_course_grader_install(%(names)r, %(store)r)
del _course_grader_install
"""

# After the notebook: fresh checks from the package, one outcome per line (tagged with a nonce
# the notebook never saw; what the learner's code prints meanwhile is swallowed).
_GRADE = """\
def _course_grader_run(package_root, lesson, store_name, nonce, check_timeout):
    import contextlib, importlib, importlib.util, io, json, os, signal, sys
    out = sys.stdout

    def emit(exercise, status, message):
        print(nonce, json.dumps({"exercise": exercise, "status": status, "message": message}), file=out, flush=True)

    for module in [m for m in list(sys.modules) if m == "course_utils" or m.startswith("course_utils.")]:
        del sys.modules[module]
    folder = os.path.join(package_root, "course_utils")
    spec = importlib.util.spec_from_file_location("course_utils", os.path.join(folder, "__init__.py"),
                                                  submodule_search_locations=[folder])
    package = importlib.util.module_from_spec(spec)
    sys.modules["course_utils"] = package
    spec.loader.exec_module(package)
    importlib.import_module("course_utils.checks.lesson" + lesson)
    checks = sys.modules["course_utils.checks.core"].REGISTRY[lesson]
    defined = sys.modules[store_name].defined
    user_ns = get_ipython().user_ns

    class CheckTimeout(BaseException):
        pass

    armed = []

    def on_alarm(signum, frame):
        if armed:
            raise CheckTimeout()

    signal.signal(signal.SIGALRM, on_alarm)
    for exercise, check in checks.items():
        name, title = check.learner_name, check.title
        answer = defined.get(name, user_ns.get(name))
        if answer is None:
            emit(exercise, "missing", f"{title}: `{name}` is not defined in the notebook (its cell was deleted, "
                                      "renamed or failed to run).")
            continue
        if name not in defined and str(getattr(answer, "__module__", "")).startswith("course_utils"):
            emit(exercise, "missing", f"{title}: `{name}` is the course's reference imported from "
                                      "course_utils, not an answer written in the notebook.")
            continue
        try:
            try:
                armed.append(True)
                signal.setitimer(signal.ITIMER_REAL, check_timeout)
                with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                    outcome = check.evaluate(answer)
            finally:
                armed.clear()
                signal.setitimer(signal.ITIMER_REAL, 0)
            emit(exercise, outcome.status, outcome.message)
        except CheckTimeout:
            emit(exercise, "timeout", f"✘ {title}: the check did not finish within {check_timeout:g} s "
                                      "(an endless loop, or a very slow answer?).")
        except BaseException as error:
            emit(exercise, "error", f"✘ {title}: grading stopped with {type(error).__name__}: {error}")


_course_grader_run(%(root)r, %(lesson)r, %(store)r, %(nonce)r, %(check_timeout)r)
del _course_grader_run
"""


def _kernel_env(progress_file):
    env = dict(os.environ)
    env.pop("JPY_SESSION_NAME", None)
    env.update(COURSE_FAST="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", COURSE_PROGRESS="off",
               COURSE_PROGRESS_FILE=str(progress_file), MPLBACKEND="Agg")
    return env


def _stdout_of(cell):
    return "".join(o.get("text", "") for o in cell.get("outputs", []) if o.get("name") == "stdout")


def _error_of(cell):
    for output in cell.get("outputs", []):
        if output.get("output_type") == "error":
            return output.get("ename", ""), output.get("evalue", "")
    return None


def _cell_name(nb, index):
    """How the report names a cell of the learner's notebook (`index` counts the grader's first cell)."""
    first = next((line.strip() for line in nb.cells[index].source.splitlines() if line.strip()), "")
    return f"cell {index} ({first[:50]!r})"


def run_notebook(spec):
    """Execute one notebook and grade it, in this process (the worker); write the result file.

    result: {"outcomes": {exercise: [status, message]}, "graded": bool, "notes": [...],
             "cut": None or a sentence saying how the notebook ran out of time}"""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import DeadKernelError

    path = Path(spec["notebook"])
    result = {"outcomes": {}, "graded": False, "notes": [], "cut": None}
    nb = nbformat.read(path, as_version=4)
    nonce, store = secrets.token_hex(12), f"_course_grader_{secrets.token_hex(6)}"
    nb.cells.insert(0, nbformat.v4.new_code_cell(_REMEMBER % {"names": spec["names"], "store": store}))
    grade_cell = nbformat.v4.new_code_cell(_GRADE % {
        "root": str(PACKAGE_ROOT), "lesson": spec["lesson"], "store": store, "nonce": nonce,
        "check_timeout": float(spec["check_timeout"])})
    nb.cells.append(grade_cell)
    timeout, cell_timeout = float(spec["timeout"]), float(spec["cell_timeout"])
    state = {"deadline": time.monotonic() + STARTUP, "limit": STARTUP, "kill_at": None, "cell": None}
    lock = threading.Lock()

    def finish(killed=False):
        """Read the outcomes the grading cell printed and write the result (once)."""
        with lock:
            if state.get("finished"):
                return
            state["finished"] = True
            if killed:
                where = f"in {_cell_name(nb, state['cell'])}" if state["cell"] is not None else "while grading"
                result["cut"] = (f"the notebook ran out of time ({timeout:g} s) {where} and did not stop when "
                                 "interrupted")
            for line in _stdout_of(grade_cell).splitlines():
                if line.startswith(nonce + " "):
                    record = json.loads(line[len(nonce) + 1:])
                    result["outcomes"][record["exercise"]] = [record["status"], record["message"]]
            error = _error_of(grade_cell)
            if error and not result["outcomes"] and not result["cut"]:
                result["notes"].append(f"the grader could not run the checks: {error[0]}: {error[1]}")
            elif result["outcomes"] or result["cut"] or result["notes"]:
                result["graded"] = True
            Path(spec["result"]).write_text(json.dumps(result))

    client = NotebookClient(nb, kernel_name=spec["kernel"], allow_errors=True, interrupt_on_timeout=True,
                            startup_timeout=STARTUP, record_timing=False, shutdown_kernel="immediate",
                            resources={"metadata": {"path": str(path.parent)}})
    client.timeout_func = lambda cell: max(1, int(min(state["limit"], state["deadline"] - time.monotonic()) + 0.999))

    def watchdog(pid, stop):
        """A kernel that overruns its deadline despite the interrupts is killed (its whole process
        group), and this worker ends at once with what it has."""
        while not stop.wait(0.5):
            if state["kill_at"] is not None and time.monotonic() > state["kill_at"]:
                with contextlib.suppress(OSError):
                    os.killpg(pid, signal.SIGKILL)
                finish(killed=True)
                os._exit(0)

    stop = threading.Event()
    with client.setup_kernel(env=_kernel_env(spec["progress_file"])):
        pid = getattr(getattr(client.km, "provisioner", None), "pid", None)
        if pid:
            Path(spec["pid_file"]).write_text(str(pid))
            threading.Thread(target=watchdog, args=(pid, stop), daemon=True).start()
        try:
            client.execute_cell(nb.cells[0], 0, store_history=False)
            state["deadline"], state["limit"] = time.monotonic() + timeout, cell_timeout
            state["kill_at"] = state["deadline"] + GRACE
            for index in range(1, len(nb.cells) - 1):
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
            budget = STARTUP + float(spec["check_timeout"]) * len(spec["names"])
            state["deadline"], state["limit"] = time.monotonic() + budget, budget
            state["kill_at"] = state["deadline"] + GRACE
            client.execute_cell(grade_cell, len(nb.cells) - 1, store_history=False)
        except DeadKernelError:
            where = f"in {_cell_name(nb, state['cell'])}" if state["cell"] is not None else "while grading"
            result["notes"].append(f"the kernel died {where} (a crash, `exit()`, or out of memory?)")
        finally:
            stop.set()
    finish()


def _worker(spec_file):
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
# The parent: one worker process per notebook, bounded in time, run `jobs` at a time
# ---------------------------------------------------------------------------------------------
def _kill_group(pid):
    """Kill a process group that this grader started in a new session (a worker, or a kernel)."""
    if pid > 1:  # (never 0: that would be the grader's own group)
        with contextlib.suppress(OSError):
            os.killpg(pid, signal.SIGKILL)


def grade_notebook(sub, checks, timeout=600, cell_timeout=300, check_timeout=60, kernel="python3"):
    """([Row] for the lesson's exercises, graded: bool, notes) for one learner's notebook."""
    def rows(status, message):
        return [Row(sub.learner, sub.lesson, c.exercise, status, message) for c in checks]

    with tempfile.TemporaryDirectory(prefix="course-grade-") as tmp:
        tmp = Path(tmp)
        spec = {"notebook": str(sub.path.resolve()), "lesson": sub.lesson, "kernel": kernel,
                "names": [c.learner_name for c in checks], "timeout": timeout, "cell_timeout": cell_timeout,
                "check_timeout": check_timeout, "result": str(tmp / "result.json"),
                "pid_file": str(tmp / "kernel.pid"), "progress_file": str(tmp / "progress.json")}
        (tmp / "spec.json").write_text(json.dumps(spec))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(PACKAGE_ROOT),
                                                                          os.environ.get("PYTHONPATH")])))
        hard_limit = STARTUP + timeout + GRACE + STARTUP + check_timeout * len(checks) + GRACE + 30
        with open(tmp / "worker.log", "wb") as log:
            worker = subprocess.Popen([sys.executable, "-m", "course_utils.grading", str(tmp / "spec.json")],
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
