"""Grade ONE learner notebook, in a worker process: run it in a sandboxed kernel, then judge its answers.

    python -m course_utils.checks.grading.worker SPEC.json      # started by launch.py, one per notebook

The worker runs no learner code: the learner's code runs only in the kernel. It
1. starts a Jupyter kernel in the sandbox (`kernel.py`, `sandbox.py`, `confine.py`), in the sandbox's empty
   home folder; the kernel makes its sockets in a folder of the sandbox's memory (sandbox.IO), which this
   process reaches through the sandbox's root and holds by descriptor once they are made (`pin_sockets`),
   before any of the notebook's code runs; the io folder on the grader's disk (connection file, judge's
   socket) is read-only in the sandbox;
2. runs the grader's first cell (`kernel_side.boot`, loaded by path from the grader's copy of the package:
   it moves the kernel into the learner's folder, a copy of the submission in the sandbox's memory),
   then the notebook's cells, like "Run All" but going on past cells that fail, within the time limits;
   of what the cells print and show it keeps nothing (`kernel.quiet_client`: only a failed cell's error name and
   first 1,000 characters), and it refuses any message over `kernel.MESSAGE_LIMIT` before reading it, so a notebook
   that prints gigabytes cannot make this process grow (zmq's limit is per part of a message: one of many
   parts is received whole, so a worker that holds more than WORKER_MEMORY stops the kernel: `error`);
3. opens the judge's socket, runs the grading cell (`kernel_side.serve_judge`: the kernel connects and
   serves requests), and meanwhile, in a thread of its own, runs `judge.judge` over that socket;
4. writes the result file (atomically: whole, or not at all).
"""
import contextlib
import json
import os
import secrets
import signal
import sys
import threading
import time
from pathlib import Path

from . import judge as judging
from .channel import GRACE, STARTUP, Channel
from .kernel import KernelOutput, box_of, kernel_env, kernel_manager, quiet_client

HERE = Path(__file__).resolve().parent
STAGE = ["starting"]              # what the worker is doing now: every error it reports names it (and its path)


def stage(text):
    STAGE[0] = text
PROGRESS_TAG = "course-progress"  # the progress table at the end of every lesson: not run when grading
WORKER_MEMORY = 2 << 30           # bytes: a worker holding more (a message of many frames, each under the limit,
                                  # is received whole by zmq) stops its kernel and grades the notebook `error`


def boot_cell(store, names, kernel_side=HERE / "kernel_side.py", folder=None):
    """The grader's first cell: load `kernel_side` by path as the module `store`, and boot it (in `folder`)."""
    return (f"import importlib.util as _u; _s = _u.spec_from_file_location({store!r}, {str(kernel_side)!r}); "
            f"_m = _u.module_from_spec(_s); _s.loader.exec_module(_m); "
            f"_m.boot(_m, {list(names)!r}, get_ipython(), {None if folder is None else str(folder)!r}); "
            "del _u, _s, _m")


def serve_cell(store, path, token):
    """The grading cell: the kernel side booted as `store` answers the judge at `path`."""
    return f"__import__('sys').modules[{store!r}].serve_judge({path!r}, {token!r}, get_ipython())"


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
    """Execute one notebook and judge it, in this process (the worker); write the result file.

    result: {"outcomes": {exercise: [status, message]}, "graded": bool, "notes": [...],
             "cut": None or a sentence saying how the notebook ran out of time}"""
    import importlib

    import nbformat
    from nbclient.exceptions import DeadKernelError

    from .. import core

    result = {"outcomes": {}, "graded": False, "notes": [], "cut": None}
    loaded = {}

    def load_checks():  # (meanwhile the kernel starts and the notebook runs)
        try:
            importlib.import_module(f"course_utils.checks.lesson{spec['lesson']}")
            loaded["checks"] = list(core.REGISTRY[spec["lesson"]].values())
        except BaseException as error:  # noqa: BLE001 - reported when the checks are needed
            loaded["error"] = f"{type(error).__name__}: {error}"

    loader = threading.Thread(target=load_checks, daemon=True)
    loader.start()
    stage(f"reading the notebook {spec['notebook']}")
    nb = nbformat.read(spec["notebook"], as_version=4)
    skip = {int(i) + 1 for i in spec.get("skip", ())}   # (cells the caller runs no code of: +1, the first cell)
    store = f"_course_grader_{secrets.token_hex(6)}"
    nb.cells.insert(0, nbformat.v4.new_code_cell(boot_cell(store, spec["names"],
                                                           Path(spec["package"]) / "course_utils" / "checks"
                                                           / "grading" / "kernel_side.py",
                                                           folder=spec["folder"] if spec["sandbox"] else None)))
    box = box_of(spec)
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
            result["graded"] = bool(result["outcomes"] or result["cut"]) or result["graded"]
            result["peak_mib"] = _peak_mib()
            write_result(spec["result"], result)

    stage(f"starting the kernel in its sandbox (the learner's folder {spec['folder']}, a copy in "
          f"{spec['submission']})")
    km = kernel_manager(spec, box)
    client = quiet_client(nb, keep=bool(spec.get("outputs")), km=km, kernel_name=spec["kernel"], allow_errors=True,
                          interrupt_on_timeout=True,
                          startup_timeout=STARTUP, record_timing=False, shutdown_kernel="immediate",
                          resources={"metadata": {"path": str(spec["folder"])}})
    client.timeout_func = lambda cell: max(1, int(min(state["limit"], state["deadline"] - time.monotonic()) + 0.999))
    group = {}

    def kill():
        if group.get("pid"):
            with contextlib.suppress(OSError):
                os.killpg(group["pid"], signal.SIGKILL)

    def watchdog(stop):
        """A kernel that overruns its deadline despite the interrupts is killed (its whole process
        group, and with it the sandbox), and this worker ends at once with what it has. So is one whose
        messages make this process hold more than WORKER_MEMORY: the notebook is graded `error`."""
        while not stop.wait(0.2):
            if (_resident() or 0) > WORKER_MEMORY:
                kill()
                message = (f"the notebook sent the grader more than it keeps (its messages made the grader's worker "
                           f"hold over {WORKER_MEMORY >> 30} GiB); its kernel was stopped")
                with lock:
                    result["outcomes"], result["died"], result["graded"] = {}, message, True
                finish()
                os._exit(0)
            if state["kill_at"] is not None and time.monotonic() > state["kill_at"]:
                kill()
                finish(killed=True)
                os._exit(0)

    stop = threading.Event()
    output = KernelOutput()
    started = False
    try:
        with client.setup_kernel(env=kernel_env(spec, box), stdout=output.write_fd, stderr=output.write_fd):
            started = True
            output.close_writer()
            pid = getattr(getattr(client.km, "provisioner", None), "pid", None)
            if pid:
                group["pid"] = pid
                Path(spec["pid_file"]).write_text(str(pid))
                threading.Thread(target=watchdog, args=(stop,), daemon=True).start()
            try:
                _run_cells(client, nb, spec, state, result, timeout, cell_timeout, skip)
                loader.join()
                if "error" in loaded:
                    raise RuntimeError(f"the checks of lesson {spec['lesson']} could not be imported: "
                                       f"{loaded['error']}")
                _judge_in_kernel(client, nb, spec, loaded["checks"], store, result, state, kill)
            except DeadKernelError:
                if not result["outcomes"]:   # the notebook's doing (a crash, exit(), memory): a grade
                    where = f"in {_cell_name(nb, state['cell'])}" if state["cell"] is not None else "while grading"
                    result["died"] = f"the kernel died {where} (a crash, `os._exit()`, or out of memory?)"
                    result["graded"] = True
            finally:
                stop.set()
    except Exception as error:   # noqa: BLE001 - the kernel did not start: the sandbox's, or the learner's, doing
        if started:
            raise
        log = output.text()
        if "confine: the learner's folder could not be copied" in log:
            result["died"], result["graded"] = log.split("confine: ", 1)[1].splitlines()[0], True
        else:
            raise RuntimeError(f"the kernel did not start ({type(error).__name__}: {error}); its last words: "
                               f"{log[-600:].strip() or 'none'}") from None
    if spec.get("outputs"):
        stage(f"writing the notebook's outputs to {spec['outputs']}")
        _write_outputs(spec["outputs"], nb)
    stage(f"writing the result {spec['result']}")
    finish()


def _write_outputs(path, nb):
    """The outputs the notebook's cells showed (kept within `kernel.OUTPUTS_KEPT`), cell by cell, for nbgrader's
    autograded notebook: [[output, ...] per cell of the learner's notebook] (the grader's cells left out)."""
    from ...files import atomic_write_text
    from .kernel import trimmed

    cells = nb.cells[1:-1] if len(nb.cells) > 1 and "serve_judge(" in nb.cells[-1].source else nb.cells[1:]
    atomic_write_text(json.dumps([[trimmed(o) for o in cell.get("outputs", [])] if cell.cell_type == "code" else []
                                  for cell in cells]), path)


def _run_cells(client, nb, spec, state, result, timeout, cell_timeout, skip=()):
    stage("running the grader's first cell (it moves the kernel into the learner's folder)")
    client.execute_cell(nb.cells[0], 0, store_history=False)
    if _error_of(nb.cells[0]):
        raise RuntimeError("the grader's first cell failed in the kernel: %s: %s" % _error_of(nb.cells[0]))
    state["deadline"], state["limit"] = time.monotonic() + timeout, cell_timeout
    state["kill_at"] = state["deadline"] + GRACE
    for index in range(1, len(nb.cells)):
        cell = nb.cells[index]
        if cell.cell_type != "code" or not cell.source.strip() or PROGRESS_TAG in cell.metadata.get("tags", ()) \
                or index in skip:
            continue
        stage(f"running {_cell_name(nb, index)} of the notebook")
        if time.monotonic() >= state["deadline"]:
            result["cut"] = f"the notebook ran out of time ({timeout:g} s) before {_cell_name(nb, index)}"
            break
        began, state["cell"] = time.monotonic(), index
        limit = client.timeout_func(cell)
        client.execute_cell(cell, index)
        if (_error_of(cell) or ("",))[0] == "KeyboardInterrupt":
            took = time.monotonic() - began
            result["notes"].append(f"{_cell_name(nb, index)} was interrupted after {took:.0f} s (its time ran out)"
                                   if took >= limit - 1 else
                                   f"{_cell_name(nb, index)} raised KeyboardInterrupt itself after {took:.0f} s")
    state["cell"] = None


def _judge_in_kernel(client, nb, spec, checks, store, result, state, kill):
    """The grading cell runs in the kernel (it serves requests) while the judge, in a thread of this
    process, runs the checks over the socket."""
    import nbformat
    from nbclient.exceptions import DeadKernelError

    check_timeout = float(spec["check_timeout"])
    stage(f"listening for the kernel at {Path(spec['io_dir']) / 'judge.sock'}")
    channel = Channel.listen(spec["io_dir"], kill=kill)
    if spec.get("uid") is not None:   # (the kernel, as the sandbox's user, connects to it)
        os.chmod(channel.path, 0o666)
    cell = nbformat.v4.new_code_cell(serve_cell(store, channel.path, channel.token))
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

    stage("judging the answers (the grading cell serves the judge)")
    thread = threading.Thread(target=run_judge, daemon=True)
    thread.start()
    with contextlib.suppress(DeadKernelError):
        client.execute_cell(cell, len(nb.cells) - 1, store_history=False)
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
        result["notes"].append(f"the grader could not run the checks (judging over {channel.path}): "
                               f"{done.get('fault', 'no reply')}")


def _resident():
    """This process's resident memory now, in bytes (None where /proc cannot tell)."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    return None


def _peak_mib():
    """This process's peak memory (resident), in MiB: what the notebook's outputs cost it."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) // 1024
    return None


def write_result(path, result):
    """The result file, whole or not at all (a full disk leaves no half-written file)."""
    from ...files import atomic_write_text

    atomic_write_text(json.dumps(result), path)


def skip_slow_imports():
    """nbformat's validator (jsonschema) compiles dozens of grammars of `rfc3987_syntax` when it is
    installed: seconds per process. The grader validates no IRIs: in its own processes, skip it."""
    if "jsonschema" not in sys.modules:
        sys.modules.setdefault("rfc3987_syntax", None)


def described(error, spec):
    """An error of the worker as the report gives it: the notebook, what the worker was doing, and the error (an
    OSError's path too, where Python's own words leave it out: a socket's, for one)."""
    text = str(error)
    path = getattr(error, "filename", None)
    if isinstance(error, OSError) and path and str(path) not in text:
        text += f": {path}"
    return (f"could not run the notebook {spec.get('notebook')}: while {STAGE[0]}: {type(error).__name__}: "
            f"{text[:400]}")


def main(spec_file):
    skip_slow_imports()
    spec = json.loads(Path(spec_file).read_text())
    try:
        run_notebook(spec)
    except Exception as error:  # noqa: BLE001 - reported to the parent, which marks the notebook
        if not Path(spec["result"]).exists():  # (an error while shutting the kernel down changes nothing)
            result = {"outcomes": {}, "graded": False, "cut": None, "notes": [described(error, spec)]}
            write_result(spec["result"], result)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
