"""The copy watch, in the learner's kernel (loaded by path with `kernel_side.py`): which runs of the course's
reference for the exercise being graded happened while the learner's answer was checked, and how the notebook
may have kept the watch from seeing them. It is a witness, not a guard (docs/instructors.md, "What the grader
guarantees"). It imports only the standard library.
"""
import os
import sys
import threading

PACKAGE_DIR = "course_utils"


class Watch:
    """Notes every call of a code object that is one of `codes`: (path inside course_utils, first
    line, name). A trace function (sys.settrace: it sees each Python call, and asks for no line
    events) is on while the learner's code runs in this thread, and, from boot on (`install`), in every
    thread the notebook starts (threading.settrace), so a thread started in an earlier cell is watched too.

    `blinded()` says how the notebook may have kept it from seeing (None: it saw everything it watches):
    - the notebook's code changed Python's trace function (`sys.settrace`, or the C function behind it, through
      ctypes) while an answer was checked, even if it put it back, or at any time in a thread of its own (an audit
      hook, installed at boot, before the notebook's first cell, sees every call: audit hooks cannot be removed);
    - the hook that gives new threads the trace function (threading.settrace) is not the watch's;
    - a thread the notebook started runs without the trace function (started while the hook was off).
    Without `install` (the tests, which serve from a thread of their own), only a trace function found removed
    after a call is noticed."""

    def __init__(self):
        self.codes, self.hits, self.removed = set(), [], False
        self._known = {}
        self.installed, self.changes, self.sticky = False, [], None
        self.traced, self.before = set(), set()   # threads that ran under the trace; threads there at boot
        self.main = threading.main_thread().ident   # (install: the thread that runs the notebook's cells)
        self._own = {Watch._set.__code__}

    def install(self):
        """At boot, before the notebook's first cell (once)."""
        if self.installed:
            return
        self.installed, self.main = True, threading.get_ident()
        self.before = {thread.ident for thread in threading.enumerate()}
        self._set_threads(self.trace)
        sys.addaudithook(self._audit)

    def watching(self, codes):
        self.codes = {(str(p), int(line), str(name)) for p, line, name in codes}
        self.hits, self.removed, self._known, self.changes = [], False, {}, []

    def _identity(self, code):
        known = self._known.get(code)
        if known is None:
            path = code.co_filename.replace(os.sep, "/")
            cut = path.rfind("/" + PACKAGE_DIR + "/")
            rel = path[cut + len(PACKAGE_DIR) + 2:] if cut >= 0 else None
            known = (rel, code.co_firstlineno, code.co_name) if rel else False
            self._known[code] = known
        return known

    def trace(self, frame, event, arg):
        if event == "call":
            ident = threading.get_ident()
            if ident not in self.traced:
                self.traced.add(ident)
            if self.codes:
                identity = self._identity(frame.f_code)
                if identity and identity in self.codes and len(self.hits) < 20:
                    self.hits.append(identity)
        return None

    def _audit(self, event, args):
        """Every call of sys.settrace (audit hooks see the C function too) by code that is not the watch's: noted
        while an answer is checked, and in any thread but the kernel's main one at any time (a thread that switches
        its trace off stays unwatched). The main thread's trace is set again before each call of the learner's code."""
        if event != "sys.settrace":
            return
        try:   # (an audit hook that raises would make the notebook's own call fail: it never does)
            self._noted()
        except Exception:  # noqa: BLE001
            if self.codes:
                self.changes.append("it called sys.settrace while it was checked")

    def _noted(self):
        try:
            caller = sys._getframe(2)   # (0: this method, 1: the hook, 2: the code that called sys.settrace)
        except ValueError:
            caller = None
        code = caller.f_code if caller is not None else None
        if code in self._own:
            return
        if code is not None and code.co_name == "_bootstrap_inner" and code.co_filename == threading.__file__ \
                and getattr(threading, "_trace_hook", None) == self.trace:   # (a new thread taking the watch's)
            return
        where = f"{code.co_name} ({code.co_filename}:{caller.f_lineno})" if code is not None else "C code"
        if threading.get_ident() != self.main and self.sticky is None:
            self.sticky = f"a thread of the notebook changed Python's trace function (sys.settrace, in {where})"
        if self.codes and len(self.changes) < 5:
            self.changes.append(f"it called sys.settrace while it was checked (in {where})")

    def blinded(self):
        """None, or how the watch may have been kept from seeing the reference run (see the class)."""
        found = list(self.changes)
        if self.removed:
            found.append("it switched off the trace function (sys.settrace)")
        if self.installed:
            if getattr(threading, "_trace_hook", None) != self.trace:   # (a bound method: equal, not the same)
                found.append("it replaced the trace function of new threads (threading.settrace)")
            unwatched = [t.name for t in threading.enumerate()
                         if t.ident not in self.before and t.ident not in self.traced and t.is_alive()
                         and t.ident != threading.get_ident()]
            if unwatched:
                found.append(f"its thread(s) {', '.join(unwatched[:3])} ran without the watch's trace function")
            if self.sticky:
                found.append(self.sticky)
        return "; ".join(found) or None

    def _set(self, function):
        """The only place the watch sets this thread's trace function (its audit hook knows this code)."""
        sys.settrace(function)

    def _set_threads(self, function):
        threading.settrace(function)

    def start(self):
        """Before the learner's code runs (and for the threads it starts)."""
        if not self.installed:
            self._set_threads(self.trace)
        self._set(self.trace)

    def stop(self):
        """After it ran: note whether it removed the trace."""
        if sys.gettrace() != self.trace:
            self.removed = True
        self._set(None)
