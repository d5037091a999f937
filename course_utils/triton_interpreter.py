"""A kernel run by Triton's interpreter in a process of its own, on small float32 inputs, with every load and store
it makes seen (lesson 13's check of the forward kernel, and the lesson's count of the tiles a kernel visits).

    reports = run_kernel(source, "flash_forward_kernel", CASES)   # {case name: report}, or {"died": ...}

Why a process of its own: TRITON_INTERPRET=1 must be set before a kernel is defined, and an unmasked pointer makes
the interpreter read or write whatever memory it reaches; a kernel that reaches too far kills its process, not the
notebook. A server process imports torch and triton once (seconds) and forks one child per run (a fraction of a
second); the child defines the kernel from its source text, runs it on each case and sends back what it stored and
what it touched. The server ends with the process that started it (its standard input closes) or after
IDLE_SECONDS without work.

What a run reports, per case: the output and L where the kernel stored them (rows never stored stay NaN), the
program instances that ran, and for each program the tiles of keys it loaded (first and last key of each load of
K), the (batch, head) pairs whose rows it read from q, k, v and wrote to the output and L, every read or write in
the rows past T (each tensor has NaN rows there, inside its own memory), every write into q, k or v, and every
pointer that fell outside all five tensors (into the guard space around them).
"""
import os
import pickle
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time

from .triton_probe import CASES

__all__ = ["CASES", "run_kernel", "IDLE_SECONDS"]

IDLE_SECONDS = 900
RUN_SECONDS = 120                 # one run of all the cases (a few seconds on a loaded 2-core machine)
# ---------------------------------------------------------------------------------------------
# The parent: one server, a run per call
# ---------------------------------------------------------------------------------------------
_server = None
_lock = threading.Lock()


def _start():
    env = dict(os.environ, TRITON_INTERPRET="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.Popen([sys.executable, "-m", "course_utils.triton_interpreter"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, env=env)


def run_kernel(source, name, cases=CASES):
    """Run the kernel `name` defined by `source` on each case in a fresh child of the interpreter's server. Returns
    {case name: report} (module docstring), or {"error": ...} where the source does not define a kernel,
    {"died": ...} where the child died (a pointer far outside the tensors), {"timeout": s}."""
    global _server
    job = {"source": source, "name": name, "cases": list(cases)}
    with _lock:
        for attempt in range(2):
            if _server is None or _server.poll() is not None:
                _server = _start()
            try:
                pickle.dump(job, _server.stdin)
                _server.stdin.flush()
                return pickle.load(_server.stdout)
            except (BrokenPipeError, EOFError, pickle.UnpicklingError):
                _server.kill()
                _server = None
                if attempt:
                    raise RuntimeError("Triton's interpreter process could not be started (is triton installed? "
                                       "`python -m course_utils.triton_interpreter` shows its error)") from None


# ---------------------------------------------------------------------------------------------
# The server: forks a child per run
# ---------------------------------------------------------------------------------------------
def _serve():
    import numpy  # noqa: F401 - imported once, here, for every child
    import torch  # noqa: F401
    import triton  # noqa: F401
    import triton.language  # noqa: F401
    from triton.runtime import interpreter  # noqa: F401

    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    while True:
        ready, _, _ = select.select([stdin], [], [], IDLE_SECONDS)
        if not ready:
            return
        try:
            job = pickle.load(stdin)
        except EOFError:
            return
        pickle.dump(_fork(job), stdout)
        stdout.flush()


def _fork(job):
    read, write = os.pipe()
    log = tempfile.TemporaryFile()
    pid = os.fork()
    if pid == 0:                                               # the child
        os.close(read)
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        try:
            result = _run_job(job)
        except BaseException as error:  # noqa: BLE001 - sent to the parent
            result = {"error": f"{type(error).__name__}: {error}"}
        with os.fdopen(write, "wb") as out:
            pickle.dump(result, out)
        os._exit(0)
    os.close(write)
    data, deadline = b"", time.monotonic() + RUN_SECONDS
    while True:
        ready, _, _ = select.select([read], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            os.close(read)
            return {"timeout": RUN_SECONDS}
        chunk = os.read(read, 1 << 16)
        if not chunk:
            break
        data += chunk
    os.close(read)
    _, status = os.waitpid(pid, 0)
    if data:
        return pickle.loads(data)
    log.seek(0)
    tail = log.read()[-2000:].decode("utf-8", "replace")
    how = f"signal {os.WTERMSIG(status)}" if os.WIFSIGNALED(status) else f"exit code {os.WEXITSTATUS(status)}"
    return {"died": how, "output": tail}


def _run_job(job):
    import torch

    from .triton_probe import define_kernel, run_case

    torch.set_num_threads(1)
    kernel, error = define_kernel(job["source"], job["name"])
    if error:
        return {"error": error}
    try:
        return {case["name"]: run_case(kernel, case) for case in job["cases"]}
    finally:
        os.unlink(kernel.learner_path)


if __name__ == "__main__":
    _serve()
