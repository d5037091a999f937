"""The learner's kernel as the grader's worker starts it and talks to it (worker.py runs the notebook with these):
- `box_of(spec)`: the sandbox of the notebook (sandbox.py), or None when grading without one;
- `kernel_manager(spec, box)`: a Jupyter kernel manager that starts the kernel inside the sandbox
  (`confine.py` first), and reaches the kernel's sockets, made in a folder of the sandbox's memory, through
  the sandbox's root, holding each by descriptor before any of the notebook's code runs (`pin_sockets`);
  its client refuses any message over MESSAGE_LIMIT unread;
- `kernel_env(spec, box)`: the environment it is started with;
- `quiet_client(nb, ...)`: the notebook client, which keeps no output but a failed cell's error;
- `KernelOutput`: the kernel's own standard output and error, of which only the last words are kept.
"""
import contextlib
import json
import os
import threading
import time
from pathlib import Path

from . import sandbox
from .channel import STARTUP

ERROR_KEPT = 1000                 # characters kept of a failed cell's error message
MESSAGE_LIMIT = 64 << 20          # bytes: a larger message from the kernel is dropped unread (zmq's MAXMSGSIZE)
KERNEL_OUTPUT_KEPT = 64 << 10     # bytes kept (in memory) of the kernel's own output: its last words, when it fails


OUTPUTS_KEPT = 256 << 10          # bytes of a cell's outputs kept when they are kept (nbgrader's autograded notebook)
OUTPUT_KEPT = 64 << 10            # bytes of one output's text or image kept (a larger one is replaced by a note)


def _size(output):
    return sum(len(v) if isinstance(v, str) else len(json.dumps(v)) for v in output.values())


def nbformat_stream(text):
    from nbformat import NotebookNode

    return NotebookNode(output_type="stream", name="stdout", text=text)


def trimmed(output):
    """`output` if it is under OUTPUT_KEPT, else a note in its place (an image, a long text: not kept)."""
    if _size(output) <= OUTPUT_KEPT:
        return output
    return nbformat_stream(f"[an output of {_size(output) >> 10} KiB, not kept by the grader]\n")


def quiet_client(nb, keep=False, **kwargs):
    """An nbclient NotebookClient that keeps no output but a failed cell's error (name and a short message); with
    `keep`, also what the cells show, bounded (OUTPUT_KEPT an output, OUTPUTS_KEPT a cell), for nbgrader's feedback."""
    from ...notebook_client import SteadyNotebookClient as NotebookClient

    class QuietClient(NotebookClient):
        def output(self, outs, msg, display_id, cell_index):
            if keep and msg["msg_type"] != "error":
                return self._kept(outs, msg, display_id, cell_index)
            if msg["msg_type"] != "error":
                return None
            content = msg["content"]
            kept = {"output_type": "error", "ename": str(content.get("ename", ""))[:200],
                    "evalue": str(content.get("evalue", ""))[:ERROR_KEPT], "traceback": []}
            outs[:] = [kept]
            return kept

        def _kept(self, outs, msg, display_id, cell_index):
            used = self.__dict__.setdefault("_used", {})
            if used.get(cell_index, 0) >= OUTPUTS_KEPT:
                return None
            output = super().output(outs, msg, display_id, cell_index)
            if output is None:
                return None
            size = _size(output)
            if size > OUTPUT_KEPT:
                output = outs[outs.index(output)] = trimmed(output)
                size = _size(output)
            used[cell_index] = used.get(cell_index, 0) + size
            if used[cell_index] >= OUTPUTS_KEPT:
                outs.append(nbformat_stream(f"[the cell's further outputs are not kept by the grader (over "
                                            f"{OUTPUTS_KEPT >> 10} KiB)]\n"))
            return output

        def handle_comm_msg(self, outs, msg, cell_index):   # widgets: nothing to keep
            return None

    return QuietClient(nb, **kwargs)



def kernel_manager(spec, box):
    import asyncio

    from jupyter_client.manager import AsyncKernelManager

    class SandboxedKernelManager(AsyncKernelManager):
        """In the sandbox, the kernel makes its sockets in a folder of its own memory (sandbox.IO), which its
        connection file names; once it has made them (before any of the notebook's code runs), this process
        holds each of them by descriptor (`pin_sockets`) and connects only through those."""

        def format_kernel_cmd(self, extra_arguments=None):
            argv = super().format_kernel_cmd(extra_arguments)
            if box is None:
                return argv
            here = Path(spec["package"]) / "course_utils" / "checks" / "grading"   # (bound in the sandbox)
            confine = [argv[0], "-I", "-S", str(here / "confine.py"), "--processes", str(box.limits.processes),
                       "--memory", str(box.limits.memory), "--file-size", str(box.limits.scratch),
                       "--copy", sandbox.SUBMISSION, str(box.folder), "--start-in", sandbox.HOME]
            confine += ["--uid", str(box.uid)] if box.uid is not None else []
            return sandbox.start(box) + sandbox.wrap(sandbox.kernel_argv(argv), box, confine + ["--"],
                                                     data=spec.get("data"))

        async def _async_post_start_kernel(self, **kw):
            if box is not None:
                await self.pin_sockets()
            await super()._async_post_start_kernel(**kw)

        async def pin_sockets(self):
            """Wait (STARTUP at most) for the kernel's five sockets in the sandbox's folder IO, reached through
            the sandbox's root; hold each by an O_PATH descriptor, and from now on connect through links to
            them (/proc/self/fd/N) in a folder of this process's own, outside the sandbox."""
            until, io, pinned = time.monotonic() + STARTUP, None, {}
            ports = [self.shell_port, self.iopub_port, self.stdin_port, self.control_port, self.hb_port]
            try:
                while True:
                    if io is None and (info := sandbox.read_info(box.info_file)) is not None:
                        io = sandbox.open_io(info)
                    for port in ports:
                        if io is not None and port not in pinned:
                            fd = sandbox.pin_socket(io, f"k-{port}")
                            if fd is not None:
                                pinned[port] = fd
                    if len(pinned) == len(ports):
                        break
                    if await self.provisioner.poll() is not None:
                        raise RuntimeError("the kernel ended before it made its sockets")
                    if time.monotonic() > until:
                        raise RuntimeError(f"the kernel made no sockets within {STARTUP} s")
                    await asyncio.sleep(0.05)
            except BaseException:
                for fd in pinned.values():
                    os.close(fd)
                raise
            finally:
                if io is not None:
                    os.close(io)
            links = Path(spec["io_dir"]).with_name("zmq")
            links.mkdir(exist_ok=True)
            for port, fd in pinned.items():
                os.symlink(f"/proc/self/fd/{fd}", links / f"k-{port}")
            self.pinned = list(pinned.values())   # (kept open while this process lives)
            self.ip = str(links / "k")

        def client(self, **kwargs):   # (its sockets refuse messages over MESSAGE_LIMIT unread)
            import zmq
            import zmq.asyncio

            context = zmq.asyncio.Context()
            context.setsockopt(zmq.MAXMSGSIZE, MESSAGE_LIMIT)
            return super().client(context=context, **kwargs)

        def write_connection_file(self, **kwargs):
            super().write_connection_file(**kwargs)
            if box is not None and box.uid is not None:   # (the kernel, as box.uid, reads it; it stays root's)
                os.chmod(self.connection_file, 0o644)

    io_dir = Path(spec["io_dir"])
    ip = f"{sandbox.IO}/k" if box is not None else str(io_dir / "k")   # (in the sandbox: in its own memory)
    return SandboxedKernelManager(kernel_name=spec["kernel"], transport="ipc", ip=ip,
                                  connection_file=str(io_dir / "kernel.json"))


def kernel_env(spec, box):
    if box is not None:   # (the sandbox sets the kernel's whole environment; this is bwrap's own)
        return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}
    env = {k: v for k, v in os.environ.items() if k not in ("JPY_SESSION_NAME", "JPY_PARENT_PID", "NBGRADER_EXECUTION")}
    env.update(COURSE_FAST="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", COURSE_PROGRESS="off", MPLBACKEND="Agg",
               PYTHONDONTWRITEBYTECODE="1", PYTHONPATH=spec["package"])
    return env


def box_of(spec):
    if not spec["sandbox"]:
        return None
    tmp = Path(spec["result"]).parent
    box = sandbox.Sandbox(folder=Path(spec["folder"]), submission=Path(spec["submission"]),
                          package=Path(spec["package"]), io_dir=Path(spec["io_dir"]), etc_dir=tmp / "etc",
                          uid=spec.get("uid"), limits=sandbox.Limits(*spec["limits"]), info_file=tmp / "bwrap.json")
    sandbox.write_accounts(box)
    if box.uid is not None:   # (root's, read-only in the sandbox: its user may only walk in and read)
        os.chmod(box.io_dir, 0o755)
    return box


class KernelOutput:
    """The kernel's own standard output and error (bubblewrap's and confine.py's words, the kernel's log, and
    whatever the notebook writes to its descriptors 1 and 2): a pipe this process drains, keeping only the
    last KERNEL_OUTPUT_KEPT bytes, in memory. Nothing of it reaches the disk, however much the notebook writes."""

    def __init__(self):
        self.read_fd, self.write_fd = os.pipe()
        self.kept, self.lock = bytearray(), threading.Lock()
        self.thread = threading.Thread(target=self._drain, daemon=True)
        self.thread.start()

    def _drain(self):
        with contextlib.suppress(OSError):
            while chunk := os.read(self.read_fd, 1 << 16):
                with self.lock:
                    self.kept += chunk
                    del self.kept[:-KERNEL_OUTPUT_KEPT]
        os.close(self.read_fd)

    def close_writer(self):
        """Once the kernel has it (this process writes nothing there)."""
        if self.write_fd is not None:
            os.close(self.write_fd)
            self.write_fd = None

    def text(self):
        """What was kept, once the kernel has ended (or 2 s later)."""
        self.close_writer()
        self.thread.join(2)
        with self.lock:
            return bytes(self.kept).decode("utf-8", "replace").strip()
