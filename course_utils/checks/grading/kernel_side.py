"""What the grader runs inside the learner's kernel: it computes, it never judges.

The grader loads this module (and `wire.py` and `watch.py` beside it) BY PATH from its own copy of the package, before
the notebook's first cell, into a module of a random name (a module the notebook replaces or shadows in
`sys.modules` or on `sys.path` is not used); its cells only call it:
- `boot(module, names, shell, folder)`, before the notebook: `remember(names)`: after every cell, keep what the
  notebook itself defined (module "__main__") under the exercises' names, so that a later
  `from course_utils... import name` in the lesson cannot stand in for the learner's answer; install the watch
  (`Watch.install`); then move into the learner's folder (in the sandbox the kernel starts in its empty home
  folder), where the notebook runs and imports from, as in Jupyter, but after the grader's copy of course_utils (a
  `course_utils/` folder of the learner's is not imported);
- `serve_judge(path, token, shell)`, after the notebook: connect to the judge, then answer its requests one
  by one until it says goodbye. A request names a function, class or object of the notebook (by
  handle) and what to do with it: call it with these arguments (data), read an attribute, iterate
  it, read its source text (for the checks that read code), run backward() through a tensor it returned, or call it
  under the measure of the largest tensor it
  creates (`checks/measure.py`, loaded by path like `wire.py`, at the first such request: lesson 13's
  "nothing of size T_q x T_k"; the measurement goes back with the result). The reply is data (`wire`), or a
  handle to an object that stays here. Nothing here compares anything with an expected value: the judge does.
- while serving, `Watch` notes every run of the course's reference for the exercise being graded
  (its code, however it is reached: imported, aliased, wrapped, partially applied, reloaded, run in a thread
  started while it is checked or in an earlier cell), which the judge reports as `copied`. It is a witness,
  not a guard: code that runs in this kernel can blind it. What it notices (`Watch.blinded`): Python's trace
  function changed by the notebook's code (sys.settrace, even switched off and back on inside an answer, and
  however it is called: an audit hook installed at boot, which cannot be removed, sees every call), the hook
  for new threads replaced (threading.settrace), a thread started unwatched. What it cannot notice: the
  notebook patching this module or its objects, or writing the interpreter's memory (ctypes)
  (docs/instructors.md, "What the grader guarantees").
"""
import builtins
import contextlib
import json
import os
import socket
import sys
import traceback


def _load_beside(name, up=0):
    """The module `name`.py of this module's folder (`up` folders above), loaded by path (no package, no sys.path)."""
    import importlib.util

    path = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), *[os.pardir] * up, f"{name}.py"))
    spec = importlib.util.spec_from_file_location(f"{__name__}_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


try:  # imported as a module of the package (the tests, the linter) ...
    from . import watch as watching
    from . import wire
except ImportError:  # ... or loaded by path into the kernel (the grader's first cell)
    wire, watching = _load_beside("wire"), _load_beside("watch")

Watch = watching.Watch
WATCH = Watch()   # the kernel's one watch (installed at boot)

PACKAGE_DIR = "course_utils"
defined = {}   # what the notebook defined under the exercises' names (boot)
_measure = []  # checks/measure.py, once a call is measured (it imports torch)


def source_text(obj):
    """The source of the notebook's `obj`, with the kernels and constants it uses (course_utils/source_text.py: from the
    package, else by path): a check that reads code (a loop, a Triton kernel) asks it of the kernel."""
    try:
        from ...source_text import source_text as read
    except ImportError:
        read = _load_beside("source_text", up=2).source_text
    return read(obj)


def measure():
    """checks/measure.py: from the package (the tests, the linter), else by path (the grader's kernel)."""
    if not _measure:
        try:
            from .. import measure as module
        except ImportError:
            module = _load_beside("measure", up=1)
        _measure.append(module)
    return _measure[0]


# ---------------------------------------------------------------------------------------------
# What the grader's two cells call
# ---------------------------------------------------------------------------------------------
def boot(module, names, shell, folder=None):
    """The grader's first cell: keep `module` (this one, loaded by path) under its own name, remember what
    the notebook defines under the exercises' `names`, and go into the learner's `folder` (None: stay)."""
    module.defined = remember(names, shell)
    module.WATCH.install()
    sys.modules[module.__name__] = module
    if folder is not None:
        os.chdir(folder)
    if os.getcwd() not in sys.path:   # (started elsewhere, or with -P) it imports from its folder, as in Jupyter,
        grader = [i for i, p in enumerate(sys.path)   # but after the grader's copy of course_utils: a course_utils/
                  if p and os.path.isfile(os.path.join(p, PACKAGE_DIR, "__init__.py"))]   # beside it is not imported
        sys.path.insert(grader[0] + 1 if grader else 0, os.getcwd())


def serve_judge(path, token, shell):
    """The grader's last cell: answer the judge at the unix socket `path`."""
    Server(defined, shell.user_ns, WATCH).serve(path, token)


# ---------------------------------------------------------------------------------------------
# Before the notebook: remember what the notebook defines under the exercises' names
# ---------------------------------------------------------------------------------------------
def remember(names, shell=None):
    """After every cell, keep the objects the notebook defined (module "__main__") under `names`."""
    shell = shell or get_ipython()  # noqa: F821 - the kernel's IPython
    defined = {}

    def after_cell(*args):
        for name in names:
            obj = shell.user_ns.get(name)
            if obj is not None and getattr(obj, "__module__", None) == "__main__":
                defined[name] = obj

    shell.events.register("post_run_cell", after_cell)
    return defined


# ---------------------------------------------------------------------------------------------
# After the notebook: answer the judge's requests
# ---------------------------------------------------------------------------------------------
class Table(wire.Keep):
    """The objects that stay in the kernel, by handle; everything else crosses as data."""

    def __init__(self):
        self.objects, self.ids, self.grads = {}, {}, False
        self.leaves, self.links = [], {}   # the tensors of this request that the judge differentiates

    def handle(self, obj):
        key = id(obj)
        if key not in self.ids:
            self.ids[key] = len(self.objects) + 1
            self.objects[self.ids[key]] = obj
        mro = []
        for klass in type(obj).__mro__:
            mro.append(f"{getattr(klass, '__module__', '?')}.{getattr(klass, '__qualname__', '?')}")
        try:
            name = obj.__name__ if isinstance(obj, type) or callable(obj) else None
        except Exception:  # noqa: BLE001 - a learner's object whose name cannot be read
            name = None
        return {wire.TAG: "handle", "id": self.ids[key], "type": type(obj).__name__, "mro": mro[:30],
                "callable": callable(obj), "params": _parameters(obj),
                "name": name if isinstance(name, str) else None}

    def grad_link(self, tensor):
        """A tensor the learner's code returned with a graph behind it: the judge may run backward()
        through it, and get the gradients of the inputs it sent as needing them."""
        if not self.grads:
            return None
        number = self.handle(tensor)["id"]
        self.links[number] = list(self.leaves)
        return number

    def resolve(self, kind, item):
        if kind == "handle":
            try:
                return self.objects[int(item["id"])]
            except (KeyError, TypeError, ValueError):
                raise wire.WireError(f"no object {item.get('id')!r} here") from None
        if kind == "grad":  # an input the judge will want the gradient of
            tensor = item["tensor"]
            if tensor.is_floating_point() or tensor.is_complex():
                tensor.requires_grad_()
                self.leaves.append((item["id"], tensor))
            return tensor
        if kind == "pickle":  # a course object the judge hands to the learner's function
            import base64
            import pickle

            return pickle.loads(base64.b64decode(item["v"]))
        raise wire.WireError(f"unexpected {kind}")


def _parameters(obj):
    """The names of the positional parameters of a callable (of its forward, for a module), or None."""
    if not callable(obj):
        return None
    try:
        import inspect

        target = getattr(obj, "forward", obj) if not isinstance(obj, type) else obj
        return [p.name for p in inspect.signature(target).parameters.values()
                if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)][:50]
    except Exception:  # noqa: BLE001 - no signature: the judge says "argument 1", ...
        return None


def _snapshot(value):
    """A copy of the arrays and tensors in `value` (nested in tuples, lists, dicts), to see what changed."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        return value.detach().clone()
    if hasattr(value, "copy") and type(value).__module__ == "numpy":
        return value.copy()
    if isinstance(value, (tuple, list)):
        return [_snapshot(v) for v in value]
    if isinstance(value, dict):
        return {k: _snapshot(v) for k, v in value.items()}
    return None


def _same(before, after):
    torch = sys.modules.get("torch")
    if before is None:
        return True
    if torch is not None and isinstance(before, torch.Tensor):
        return isinstance(after, torch.Tensor) and before.shape == after.shape and bool(
            (before == after.detach()).logical_or(before.isnan() & after.detach().isnan()).all()
            if before.is_floating_point() else (before == after.detach()).all())
    if isinstance(before, list):
        return isinstance(after, (tuple, list)) and len(before) == len(after) and all(
            _same(b, a) for b, a in zip(before, after))
    if isinstance(before, dict):
        return isinstance(after, dict) and all(_same(before[k], after.get(k)) for k in before)
    import numpy

    return numpy.array_equal(before, after, equal_nan=before.dtype.kind in "fc")


def _changed(snapshots, args, kwargs):
    """{"args": [[index, value after]], "kwargs": [[name, value after]]} for the inputs changed in place."""
    out = {"args": [[i, a] for i, (b, a) in enumerate(zip(snapshots[0], args)) if not _same(b, a)],
           "kwargs": [[k, kwargs[k]] for k, b in snapshots[1].items() if k in kwargs and not _same(b, kwargs[k])]}
    return out if out["args"] or out["kwargs"] else None


def _learner_frames(tb):
    frames = [f for f in traceback.extract_tb(tb)
              if f"/{PACKAGE_DIR}/" not in f.filename.replace(os.sep, "/") and "<course-grader>" not in f.filename]
    return "".join(traceback.format_list(frames[-3:]))


def _raised(error):
    kind = type(error)
    return {"raised": {"type": kind.__name__, "builtin": getattr(builtins, kind.__name__, None) is kind,
                       "message": str(error)[:4000], "where": _learner_frames(error.__traceback__)[:2000],
                       "not_implemented": isinstance(error, NotImplementedError)}}


class Server:
    def __init__(self, defined, user_ns, watch=None):
        self.defined, self.user_ns = defined, user_ns
        self.table, self.watch = Table(), watch or Watch()

    def answer(self, name, course_prefix):
        """The learner's answer under `name`: the last object the notebook defined, else what the name
        holds now (not the course's own object that the lesson imported under that name)."""
        obj = self.defined.get(name, self.user_ns.get(name))
        if obj is None:
            return {"ok": {"missing": True}}
        if name not in self.defined and str(getattr(obj, "__module__", "")).startswith(course_prefix):
            return {"ok": {"course": str(getattr(obj, "__module__", ""))}}
        return {"ok": {"answer": obj}}

    def run(self, request):
        op = request.get("op")
        torch = sys.modules.get("torch")
        if op == "answer":
            return self.answer(str(request["name"]), "course_utils")
        if op == "watch":
            self.table = Table()
            self.watch.watching(request.get("codes", []))
            return {"ok": None}
        if op == "copied":
            blinded = self.watch.blinded()
            return {"ok": {"hits": [list(h) for h in self.watch.hits], "removed": bool(blinded),
                           "how": str(blinded or "")}}
        target = self.table.resolve("handle", {"id": request.get("target")})
        self.table.leaves = []
        args = wire.from_plain(request.get("args", []), self.table.resolve, allow_pickle=True)
        kwargs = wire.from_plain(request.get("kwargs", {wire.TAG: "dict", "v": []}), self.table.resolve,
                                 allow_pickle=True)
        state = request.get("rng")
        if torch is not None and state is not None:
            torch.set_rng_state(wire.from_plain(state, self.table.resolve))
        grad = bool(request.get("grad", False))
        self.table.grads = grad
        context = torch.set_grad_enabled(grad) if torch is not None else contextlib.nullcontext()
        measured = measure().measured if op == "measure" else None   # (loaded before the learner's code runs)
        self.watch.start()
        try:
            with context:
                if op in ("call", "measure"):   # measure: [result, elements, shape] (checks/measure.py)
                    snapshots = [_snapshot(a) for a in args], {k: _snapshot(v) for k, v in kwargs.items()}
                    result = list(measured(target, *args, **kwargs)) if measured else target(*args, **kwargs)
                    changed = _changed(snapshots, args, kwargs)
                    if changed:   # the inputs the learner's code changed in place: the judge sees it too
                        return {"ok": result, "changed": changed}
                elif op == "getattr":
                    result = getattr(target, str(request["name"]))
                elif op == "source":
                    result = source_text(target)
                elif op == "setattr":
                    setattr(target, str(request["name"]), args[0])
                    result = None
                elif op == "iter":
                    result = list(target)
                elif op == "len":
                    result = len(target)
                elif op == "getitem":
                    result = target[args[0]]
                elif op == "contains":
                    result = args[0] in target
                elif op == "backward":
                    leaves = self.table.links.get(int(request["target"]), [])
                    for _, leaf in leaves:
                        leaf.grad = None
                    torch.autograd.backward(target, args[0])
                    result = [[number, leaf.grad] for number, leaf in leaves]
                else:
                    raise wire.WireError(f"unknown request {op!r}")
        except KeyboardInterrupt as error:   # the grader's interrupt, or the learner's own: the judge knows which
            return dict(_raised(error), interrupted=True)
        except BaseException as error:  # noqa: BLE001 - the learner's code raised: the judge decides
            return _raised(error)
        finally:
            self.watch.stop()
        return {"ok": result}

    def reply(self, request):
        """The reply to one request, as JSON text."""
        try:
            reply = self.run(request)
            if "ok" in reply:
                reply = dict(reply, ok=wire.to_plain(reply["ok"], self.table))
                if "changed" in reply:
                    reply["changed"] = wire.to_plain(reply["changed"], self.table)
            text = json.dumps(reply, allow_nan=False, separators=(",", ":"))
        except KeyboardInterrupt:
            text = '{"interrupted":true}'
        except Exception as error:  # noqa: BLE001 - e.g. a value that cannot cross
            text = json.dumps({"failed": f"{type(error).__name__}: {error}"[:1000]})
        return text

    def serve(self, path, token):
        """Answer the judge (a unix socket at `path`) until it says goodbye or hangs up."""
        connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            connection.connect(path)
        except OSError as error:   # (a socket's error names no path: this one does)
            connection.close()
            raise OSError(error.errno, f"the grading cell could not connect to the judge's socket {path}: "
                                       f"{error.strerror}") from None
        reader = connection.makefile("r", encoding="utf-8", newline="\n")
        writer = connection.makefile("w", encoding="utf-8", newline="\n")
        writer.write(token + "\n")
        writer.flush()
        try:
            while True:
                try:
                    line = reader.readline()
                except KeyboardInterrupt:  # an interrupt that came late: the judge has moved on
                    continue
                if not line:
                    break
                try:
                    request = json.loads(line)
                    number = int(request.get("id", 0))
                except (ValueError, AttributeError, TypeError):
                    break
                if request.get("op") == "bye":
                    break
                text = self.reply(request)
                while True:
                    try:
                        writer.write(f'{{"id":{number},"reply":{text}}}\n')
                        writer.flush()
                        break
                    except KeyboardInterrupt:
                        continue
        finally:
            self.watch.codes = set()
            self.watch._set(None)
            if not self.watch.installed:
                self.watch._set_threads(None)
            connection.close()
