"""The judge's end of the unix socket the learner's kernel connects to: one request at a time, with
a deadline, an interrupt of the kernel's own process when it passes, and a kill after a grace period.

The grader's two fixed times are defined here, once: STARTUP (a kernel starting, the grading cell
connecting, a request of the grader's own) and GRACE (a kernel stopping after an interrupt)."""
import contextlib
import json
import os
import secrets
import signal
import socket
import struct
import sys
import time
from pathlib import Path

from . import wire
from .remote import Remote, _grad_link, _learner_exception, _Sender, _write_back, remote  # noqa: F401

GRACE = 10              # seconds the kernel gets to answer an interrupt before it is killed
STARTUP = 120           # seconds for a kernel to start, and for the grading cell to connect
SEED_RANGE = 2 ** 30    # the secret seed offset is drawn below this
REPLY_LIMIT = 64 << 20  # bytes: a longer line from the kernel is refused (the kernel is stopped), never kept


class CheckTimeout(BaseException):
    """The check ran out of time (a BaseException: no check or `call` may swallow it)."""


class KernelGone(BaseException):
    """The kernel stopped answering, or died; nothing more can be graded in it."""


class GraderFault(BaseException):
    """The grader could not do its part (a value that could not cross, a broken reply)."""


def process_cpu_seconds(pid):
    """utime + stime + cutime + cstime of the process `pid` (as this process sees it), in seconds, or None."""
    if not pid:
        return None
    try:
        with open(f"/proc/{int(pid)}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
        return sum(int(v) for v in fields[11:15]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


# ---------------------------------------------------------------------------------------------
# The channel to the kernel
# ---------------------------------------------------------------------------------------------
class Channel:
    """One request at a time to the kernel's `kernel_side.Server`, one reply each, within a deadline."""

    def __init__(self, server, path, token, kill):
        self.server, self.path, self.token, self.kill = server, path, token, kill
        self.connection, self.buffer, self.number, self.pid = None, bytearray(), 0, None
        self.deadline, self.limit = None, None
        self.proxies = {}
        self.dead = None
        self.rng_sent = None
        self.leaves = []
        self.timed_out = False      # the judge interrupted the learner's code (its time ran out)

    @classmethod
    def listen(cls, io_dir, kill):
        path = str(Path(io_dir) / "judge.sock")
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(path)
        server.listen(1)
        return cls(server, path, secrets.token_hex(16), kill)

    def accept(self, timeout=STARTUP):
        """Wait for the kernel; True once it connected and said the token (False at once after `give_up`)."""
        self.server.settimeout(timeout)
        try:
            connection, _ = self.server.accept()
        except OSError:
            return False
        with contextlib.suppress(OSError):  # the kernel's process, as this process sees it (to interrupt it)
            creds = connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
            self.pid = struct.unpack("3i", creds)[0] or None
        self.connection = connection
        try:
            line = self._line(time.monotonic() + timeout)
        except KernelGone:   # (it hung up, or sent more than a token)
            return False
        return line is not None and line.decode("utf-8", "replace").strip() == self.token

    def give_up(self):
        """The grading cell ended without connecting: stop waiting for it."""
        if self.connection is None:
            with contextlib.suppress(OSError):
                self.server.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                self.server.close()

    def close(self):
        with contextlib.suppress(OSError):
            if self.connection is not None and self.dead is None:
                self.connection.sendall(b'{"op":"bye"}\n')
        for sock in (self.connection, self.server):
            with contextlib.suppress(OSError, AttributeError):
                sock.close()

    def _line(self, until):
        """The next line from the kernel, or None when `until` (monotonic) passed or it hung up. A line longer
        than REPLY_LIMIT is not kept: the kernel is stopped (KernelGone), so what it sends cannot make this
        process grow."""
        scanned = 0
        while True:
            end = self.buffer.find(b"\n", scanned)
            if end >= 0:
                break
            scanned = len(self.buffer)
            if scanned > REPLY_LIMIT:
                self.buffer = bytearray()
                self._stop(f"sent the grader a reply over {REPLY_LIMIT >> 20} MiB (refused)")
            left = until - time.monotonic()
            if left <= 0:
                return None
            self.connection.settimeout(left)
            try:
                chunk = self.connection.recv(1 << 20)
            except socket.timeout:
                return None
            except OSError:
                chunk = b""
            if not chunk:
                self.dead = self.dead or "the kernel hung up (it died, or the notebook closed the grader's connection)"
                raise KernelGone(self.dead)
            self.buffer += chunk
        line = bytes(self.buffer[:end])
        del self.buffer[:end + 1]
        return line

    def _send(self, request):
        if self.dead:
            raise KernelGone(self.dead)
        self.number += 1
        request["id"] = self.number
        try:
            self.connection.sendall(json.dumps(request, allow_nan=False, separators=(",", ":")).encode() + b"\n")
        except OSError:
            self.dead = "the kernel hung up"
            raise KernelGone(self.dead) from None
        return self.number

    def _reply(self, number, until, interruptible=True):
        while True:
            line = self._line(until)
            if line is None:
                if not interruptible:
                    self._stop("did not answer the grader")
                self.timed_out = True
                with contextlib.suppress(KernelGone):   # (the check is a timeout either way)
                    self._interrupt(number)
                raise CheckTimeout()
            try:
                message = json.loads(line)
                if int(message.get("id", -1)) != number:
                    continue  # a reply to a request the judge gave up on
                return message["reply"]
            except (ValueError, TypeError, KeyError, AttributeError):
                raise GraderFault("a reply from the kernel was not in the grader's format") from None

    def _interrupt(self, number):
        """The learner's code ran out of time: interrupt it; if it does not stop, kill the kernel."""
        if self.pid:
            with contextlib.suppress(OSError):
                os.kill(self.pid, signal.SIGINT)
        until = time.monotonic() + GRACE
        while True:
            try:
                line = self._line(until)
            except KernelGone:
                return
            if line is None:
                self._stop("ignored the interrupt")
                return
            with contextlib.suppress(ValueError, TypeError, AttributeError):
                if int(json.loads(line).get("id", -1)) == number:
                    return

    def cpu_seconds(self):
        """The CPU time the kernel's process has used so far (its threads, and its children it has waited for), in
        seconds; None where /proc cannot tell (the judge then words a timeout without it)."""
        return process_cpu_seconds(self.pid)

    def _stop(self, why):
        self.dead = f"the kernel {why} and was stopped"
        self.kill()
        raise KernelGone(self.dead)

    def control(self, op, **fields):
        """A request of the grader's own (not the learner's code): a few seconds at most."""
        number = self._send(dict(fields, op=op))
        reply = self._reply(number, time.monotonic() + STARTUP, interruptible=False)
        if "ok" not in reply:
            raise GraderFault(f"the kernel could not do {op}: {reply}")
        return wire.from_plain(reply["ok"], self._resolve)

    def request(self, op, target, name=None, args=(), kwargs=None):
        """Run the learner's code in the kernel: `op` on the object `target` (a Remote)."""
        if self.timed_out:   # (e.g. the check's `finally` asking for the function's signature)
            raise CheckTimeout()
        torch = sys.modules.get("torch")
        keep = _Sender()
        try:
            request = {"op": op, "target": target._id, "args": wire.to_plain(list(args), keep),
                       "kwargs": wire.to_plain(dict(kwargs or {}), keep),
                       "grad": bool(torch is not None and torch.is_grad_enabled())}
            if name is not None:
                request["name"] = name
            if torch is not None and op in ("call", "measure"):   # the learner's randomness follows the check's seeds
                state = torch.get_rng_state()
                if self.rng_sent is None or not torch.equal(state, self.rng_sent):
                    request["rng"] = wire.to_plain(state, keep)
                    self.rng_sent = state
        except Exception as error:  # noqa: BLE001 - the check passed something that cannot cross
            raise GraderFault(f"the check passed a value that cannot be sent to the kernel: {error}") from None
        number = self._send(request)
        self.leaves = keep.leaves
        until = self.deadline if self.deadline is not None else time.monotonic() + STARTUP
        reply = self._reply(number, until)
        if "ok" in reply:
            try:
                if "changed" in reply:
                    _write_back(wire.from_plain(reply["changed"], self._resolve), args, kwargs or {})
                return wire.from_plain(reply["ok"], self._resolve)
            except wire.WireError as error:
                raise GraderFault(f"the kernel's reply is not data: {error}") from None
        if "raised" in reply:
            raise _learner_exception(reply["raised"])
        if "interrupted" in reply:   # not the judge's interrupt (that reply is read by _interrupt): the learner's own
            raise _learner_exception(reply.get("raised") or {"type": "KeyboardInterrupt", "message": ""})
        raise GraderFault(f"the kernel could not answer: {reply.get('failed', reply)}")

    def _resolve(self, kind, item):
        if kind == "handle":
            number = int(item["id"])
            if number not in self.proxies:
                self.proxies[number] = remote(self, item)
            return self.proxies[number]
        if kind == "grad":
            return _grad_link(self, item["tensor"], int(item["id"]), self.leaves)
        raise wire.WireError(f"unexpected {kind}")
