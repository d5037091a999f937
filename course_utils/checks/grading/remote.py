"""The learner's objects as the judge sees them: `Remote` handles whose calls, attribute reads and
methods go through the channel to the kernel (data crosses, objects stay there), exceptions rebuilt by
name, inputs changed in place written back, gradients carried back through `backward()`, and calls
measured in the kernel (`__call_measured__`, for `Evaluation.call_measured`)."""
import builtins
import inspect
import re
import sys

import numpy as np

from . import wire


class _Sender(wire.Keep):
    """The judge's arguments: data, handles to the kernel's own objects, and course objects (pickled);
    the tensors that need a gradient are noted (`leaves`): backward() through the reply fills their .grad."""

    def __init__(self):
        self.leaves = []

    def grad_link(self, tensor):
        import torch

        if not torch.is_grad_enabled():
            return None
        self.leaves.append(tensor)
        return len(self.leaves) - 1

    def handle(self, obj):
        if isinstance(obj, Remote):
            return {wire.TAG: "handle", "id": object.__getattribute__(obj, "_id")}
        import base64
        import pickle

        return {wire.TAG: "pickle", "v": base64.b64encode(pickle.dumps(obj)).decode("ascii")}


_BUILTIN_ERRORS = {name: obj for name, obj in vars(builtins).items()
                   if isinstance(obj, type) and issubclass(obj, Exception)}
_OTHER_ERRORS = {}


def _learner_exception(raised):
    """The learner's exception, as the judge raises it (the kernel's type by name: data only)."""
    name = str(raised.get("type", "Exception"))
    message = str(raised.get("message", ""))
    if raised.get("not_implemented"):
        error = NotImplementedError(message)
    elif raised.get("builtin") and name in _BUILTIN_ERRORS:
        try:
            error = _BUILTIN_ERRORS[name](message)
        except Exception:  # noqa: BLE001 - an exception type that wants other arguments
            error = Exception(message)
    else:
        safe = re.sub(r"\W", "_", name)[:60] or "Exception"
        safe = safe if safe[0].isalpha() else "E" + safe
        kind = _OTHER_ERRORS.setdefault(safe, type(safe, (Exception,), {"__module__": "learner"}))
        error = kind(message)
    error.learner_where = str(raised.get("where", ""))
    return error


# ---------------------------------------------------------------------------------------------
# Objects that stay in the kernel
# ---------------------------------------------------------------------------------------------
def _judge_class(mro):
    """The first class of the object's MRO that the judge knows (torch's, or a builtin), for isinstance."""
    torch = sys.modules.get("torch")
    for name in mro:
        module, _, qualname = str(name).rpartition(".")
        if not (module == "torch" or module.startswith("torch.")) or "<" in qualname:
            continue
        obj = sys.modules.get(module)
        for part in qualname.split("."):
            obj = getattr(obj, part, None)
        if isinstance(obj, type) and not (torch is not None and issubclass(obj, torch.Tensor)):
            return obj
    return None


class Remote:
    """An object in the learner's kernel; everything done to it is a request to the kernel."""

    __slots__ = ("_channel", "_id", "_class", "_params", "_name", "__weakref__")

    def __init__(self, channel, item):
        object.__setattr__(self, "_channel", channel)
        object.__setattr__(self, "_id", int(item["id"]))
        object.__setattr__(self, "_class", _judge_class(item.get("mro", [])))
        params = item.get("params")
        object.__setattr__(self, "_params", params if isinstance(params, list) else None)
        name = item.get("name")
        object.__setattr__(self, "_name", name[:200] if isinstance(name, str) else None)

    @property
    def __class__(self):
        return object.__getattribute__(self, "_class") or type(self)

    @property
    def __name__(self):
        """The name of the learner's function or class (as the kernel reported it), for messages."""
        name = object.__getattribute__(self, "_name")
        if name is None:
            raise AttributeError("__name__")
        return name

    @property
    def __signature__(self):
        """The parameters the kernel reported (names only), for messages that name an argument."""
        params = object.__getattribute__(self, "_params")
        if params is None:
            raise AttributeError("__signature__")
        kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
        return inspect.Signature([inspect.Parameter(str(p), kind) for p in params
                                  if isinstance(p, str) and p.isidentifier()])

    def __source_text__(self):
        """The source text of the learner's function, read in the kernel (course_utils/source_text.py)."""
        text = object.__getattribute__(self, "_channel").request("source", self)
        if not isinstance(text, str):
            raise TypeError("the kernel sent no source text")
        return text

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return object.__getattribute__(self, "_channel").request("getattr", self, name=name)

    def __setattr__(self, name, value):
        object.__getattribute__(self, "_channel").request("setattr", self, name=name, args=(value,))

    def __iter__(self):
        return iter(object.__getattribute__(self, "_channel").request("iter", self))

    def __len__(self):
        return object.__getattribute__(self, "_channel").request("len", self)

    def __getitem__(self, key):
        return object.__getattribute__(self, "_channel").request("getitem", self, args=(key,))

    def __contains__(self, item):
        return object.__getattribute__(self, "_channel").request("contains", self, args=(item,))

    def __bool__(self):
        return True

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self

    def __reduce__(self):
        raise TypeError("an object of the learner's kernel cannot be pickled")

    def __repr__(self):
        return f"<{type(self).__name__} in the learner's kernel>"


def _write_back(changed, args, kwargs):
    """Write the kernel's values of the inputs the learner's code changed in place into the check's own
    copies (the check then sees the change, as if the code had run here)."""
    def into(mine, theirs):
        import torch

        if isinstance(mine, torch.Tensor) and isinstance(theirs, torch.Tensor) and mine.shape == theirs.shape:
            with torch.no_grad():
                mine.copy_(theirs.to(mine.dtype))
        elif isinstance(mine, np.ndarray) and isinstance(theirs, np.ndarray) and mine.shape == theirs.shape:
            mine[...] = theirs
        elif isinstance(mine, list) and isinstance(theirs, (list, tuple)) and len(mine) == len(theirs):
            for i, (m, t) in enumerate(zip(mine, theirs)):
                if isinstance(m, (int, float, str, bool)) or m is None:
                    mine[i] = t
                else:
                    into(m, t)
        elif isinstance(mine, tuple) and isinstance(theirs, (list, tuple)) and len(mine) == len(theirs):
            for m, t in zip(mine, theirs):
                into(m, t)
        elif isinstance(mine, dict) and isinstance(theirs, dict):
            for key in mine.keys() & theirs.keys():
                into(mine[key], theirs[key])

    if not isinstance(changed, dict):
        return
    for index, value in changed.get("args", []):
        if isinstance(index, int) and 0 <= index < len(args):
            into(args[index], value)
    for name, value in changed.get("kwargs", []):
        if name in kwargs:
            into(kwargs[name], value)


class RemoteCallable(Remote):
    __slots__ = ()

    def __call__(self, *args, **kwargs):
        return object.__getattribute__(self, "_channel").request("call", self, args=args, kwargs=kwargs)

    def __call_measured__(self, *args, **kwargs):
        """The call, measured in the kernel, where the learner's code runs (`Evaluation.call_measured`,
        checks/measure.py): (result, elements of the largest tensor it created, that tensor's shape or None)."""
        reply = object.__getattribute__(self, "_channel").request("measure", self, args=args, kwargs=kwargs)
        return _measurement(reply)


def _measurement(reply):
    """(result, elements, shape) from the kernel's reply to "measure". It is the learner's kernel's data, as the
    measure is its witness: a reply not of that form counts as nothing measured (0, None), which a kernel
    could claim anyway (docs/instructors.md, "What the grader guarantees")."""
    if not (isinstance(reply, (list, tuple)) and len(reply) == 3):
        return reply, 0, None
    result, elements, shape = reply
    if type(elements) is not int or elements < 0 or not (shape is None or isinstance(shape, (list, tuple)) and all(
            type(n) is int for n in shape)):
        return result, 0, None
    return result, elements, None if shape is None else tuple(shape)


_KINDS = {}


def remote(channel, item):
    """A Remote for the handle `item`, of a class named after the kernel's type (for messages)."""
    name = re.sub(r"\W", "_", str(item.get("type", "object")))[:60] or "object"
    name = name if name[0].isalpha() else "T" + name
    base = RemoteCallable if item.get("callable") else Remote
    kind = _KINDS.setdefault((name, base), type(name, (base,), {"__slots__": (), "__module__": "learner"}))
    return kind(channel, item)


def _grad_link(channel, tensor, number, leaves):
    """`tensor` (the kernel's output, as data) joined to the kernel's autograd graph: backward()
    through it runs backward() in the kernel, and the gradients of the judge's tensors that the
    call was given (`leaves`) come back into their .grad."""
    import torch

    if not torch.is_grad_enabled():
        return tensor

    class Backward(torch.autograd.Function):
        @staticmethod
        def forward(ctx, anchor, value, *inputs):
            return value.clone()

        @staticmethod
        def backward(ctx, grad):
            got = channel.request("backward", remote(channel, {"id": number}), args=(grad,))
            grads = [None] * len(leaves)
            for index, value in got if isinstance(got, list) else []:
                if isinstance(index, int) and 0 <= index < len(leaves) and isinstance(value, torch.Tensor) \
                        and tuple(value.shape) == tuple(leaves[index].shape):
                    grads[index] = value.to(leaves[index].dtype)
            return (None, None, *grads)

    anchor = torch.zeros((), requires_grad=True)
    return Backward.apply(anchor, tensor, *leaves)
