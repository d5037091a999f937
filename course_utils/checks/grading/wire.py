"""How values cross between the judge and the learner's kernel: JSON, arrays as `.npy` in base64.

    text = encode(value, keep)        # keep(obj) -> handle id, for what is not data (or None: refuse)
    value = decode(text, resolve)     # resolve(kind, payload) -> the object a tagged non-data item stands for

Data is: None, bool, int, float, complex, str, bytes, tuple, list, dict, numpy arrays and scalars
(any dtype but object), torch tensors (dtype kept; bfloat16 and other types numpy lacks travel as
float32 with their dtype's name), torch.Size, torch.dtype and slices. Arrays are read back with
`numpy.load(..., allow_pickle=False)`. Nothing else is data: an object the kernel keeps (a module
instance, a parameter, a bound method) crosses as a handle, {"$": "handle", "id": n, ...}, and
the judge refers to it by that number. Only the judge may send a pickled object (a course model it
hands to the learner's function); `decode(..., allow_pickle=False)`, the judge's side, refuses one.

This module imports only the standard library and numpy (torch when a tensor crosses): the grader
sends its source into the learner's kernel, so that both sides use the same code.
"""
import base64
import io
import json
import math

import numpy as np

TAG = "$"


class WireError(ValueError):
    """A message that is not in the grader's encoding."""


def _torch():
    import sys

    return sys.modules.get("torch")


def _array_bytes(array):
    buffer = io.BytesIO()
    np.save(buffer, array if array.flags.c_contiguous else array.copy(order="C"), allow_pickle=False)  # (0-d stays 0-d)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def _array_from(text):
    try:
        array = np.load(io.BytesIO(base64.b64decode(text.encode("ascii"), validate=True)), allow_pickle=False)
    except Exception as error:  # noqa: BLE001 - anything malformed is a wire error
        raise WireError(f"not an array: {error}") from None
    if array.dtype.hasobject:
        raise WireError("an array of Python objects")
    return array


def _float(x):
    if math.isnan(x) or math.isinf(x):
        return {TAG: "float", "v": repr(x)}
    return x


def to_plain(value, keep, depth=0):
    """`value` as JSON-ready Python (tagged dicts for what JSON lacks); `keep` for non-data objects."""
    if depth > 50:
        raise WireError("the value is nested too deeply")
    torch = _torch()
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int) and type(value) in (int,):
        return value if abs(value) < 2 ** 63 else {TAG: "bigint", "v": str(value)}
    if isinstance(value, float) and type(value) is float:
        return _float(value)
    if type(value) is complex:
        return {TAG: "complex", "re": _float(value.real), "im": _float(value.imag)}
    if type(value) is bytes:
        return {TAG: "bytes", "v": base64.b64encode(value).decode("ascii")}
    if type(value) is slice:
        return {TAG: "slice", "v": [to_plain(p, keep, depth + 1) for p in (value.start, value.stop, value.step)]}
    if torch is not None:
        if isinstance(value, torch.Size):
            return {TAG: "size", "v": [int(n) for n in value]}
        if isinstance(value, torch.dtype):
            return {TAG: "dtype", "v": str(value).replace("torch.", "")}
        if isinstance(value, torch.Tensor) and not isinstance(value, torch.nn.Parameter) and keep.tensors_as_data:
            tensor = value.detach()
            if tensor.layout != torch.strided or tensor.is_quantized:
                tensor = tensor.to_dense() if tensor.layout != torch.strided else tensor.dequantize()
            dtype = str(tensor.dtype).replace("torch.", "")
            tensor = tensor.cpu()
            try:
                array = tensor.numpy()
            except (TypeError, RuntimeError):  # bfloat16 and friends: as float32, with their own dtype's name
                array = tensor.float().numpy()
            plain = {TAG: "tensor", "dtype": dtype, "npy": _array_bytes(array)}
            grad = keep.grad_link(value) if value.requires_grad else None
            if grad is not None:
                plain["grad"] = grad
            return plain
    if isinstance(value, np.ndarray) and type(value) is np.ndarray:
        if value.dtype.hasobject:
            return keep.handle(value)
        return {TAG: "ndarray", "npy": _array_bytes(value)}
    if isinstance(value, np.generic) and not isinstance(value, np.object_):
        return {TAG: "npscalar", "npy": _array_bytes(np.asarray(value))}
    if type(value) is tuple:
        return {TAG: "tuple", "v": [to_plain(v, keep, depth + 1) for v in value]}
    if type(value) is list:
        return [to_plain(v, keep, depth + 1) for v in value]
    if isinstance(value, dict) and type(value).__module__ in ("builtins", "collections"):
        return {TAG: "dict", "v": [[to_plain(k, keep, depth + 1), to_plain(v, keep, depth + 1)]
                                   for k, v in value.items()]}
    return keep.handle(value)


def from_plain(plain, resolve, allow_pickle=False, depth=0):
    """The value `to_plain` made; `resolve(kind, item)` gives the object behind a handle or a pickle."""
    if depth > 60:
        raise WireError("nested too deeply")
    if plain is None or isinstance(plain, (bool, str)):
        return plain
    if isinstance(plain, int):
        return int(plain)
    if isinstance(plain, float):
        return float(plain)
    if isinstance(plain, list):
        return [from_plain(v, resolve, allow_pickle, depth + 1) for v in plain]
    if not isinstance(plain, dict) or not isinstance(plain.get(TAG), str):
        raise WireError(f"an untagged {type(plain).__name__}")
    kind = plain[TAG]
    if kind == "float":
        return float(str(plain["v"]))
    if kind == "bigint":
        return int(str(plain["v"]))
    if kind == "complex":
        return complex(from_plain(plain["re"], resolve, allow_pickle, depth + 1),
                       from_plain(plain["im"], resolve, allow_pickle, depth + 1))
    if kind == "bytes":
        return base64.b64decode(str(plain["v"]).encode("ascii"))
    if kind == "slice":
        return slice(*(from_plain(p, resolve, allow_pickle, depth + 1) for p in plain["v"][:3]))
    if kind == "tuple":
        return tuple(from_plain(v, resolve, allow_pickle, depth + 1) for v in plain["v"])
    if kind == "dict":
        out = {}
        for pair in plain["v"]:
            key = from_plain(pair[0], resolve, allow_pickle, depth + 1)
            try:
                hash(key)
            except TypeError:
                raise WireError("a dict key that cannot be hashed") from None
            out[key] = from_plain(pair[1], resolve, allow_pickle, depth + 1)
        return out
    if kind == "ndarray":
        return _array_from(plain["npy"])
    if kind == "npscalar":
        return _array_from(plain["npy"])[()]
    if kind in ("tensor", "size", "dtype"):
        import torch

        if kind == "size":
            return torch.Size([int(n) for n in plain["v"]])
        if kind == "dtype":
            dtype = getattr(torch, str(plain["v"]), None)
            if not isinstance(dtype, torch.dtype):
                raise WireError(f"no torch dtype {plain['v']!r}")
            return dtype
        dtype = getattr(torch, str(plain["dtype"]), None)
        if not isinstance(dtype, torch.dtype):
            raise WireError(f"no torch dtype {plain['dtype']!r}")
        array = _array_from(plain["npy"])
        tensor = torch.from_numpy(array.copy()) if array.ndim else torch.tensor(array[()])
        tensor = tensor.to(dtype) if tensor.dtype != dtype else tensor
        if "grad" in plain:
            return resolve("grad", {"tensor": tensor, "id": plain["grad"]})
        return tensor
    if kind == "pickle":
        if not allow_pickle:
            raise WireError("a pickled object (refused: only the judge may send one)")
        return resolve("pickle", plain)
    if kind == "handle":
        return resolve("handle", plain)
    raise WireError(f"unknown tag {kind!r}")


class Keep:
    """What `to_plain` does with what is not data: `handle(obj)` gives its tagged handle."""

    tensors_as_data = True

    def handle(self, obj):
        raise WireError(f"{type(obj).__name__} is not data (numbers, strings, arrays, tensors, tuples, lists, dicts)")

    def grad_link(self, tensor):
        return None


def dumps(value, keep=None):
    return json.dumps(to_plain(value, keep or Keep()), allow_nan=False, separators=(",", ":"))


def loads(text, resolve=None, allow_pickle=False):
    def refuse(kind, item):
        raise WireError(f"unexpected {kind}")

    try:
        plain = json.loads(text)
    except (TypeError, ValueError) as error:
        raise WireError(f"not JSON: {error}") from None
    return from_plain(plain, resolve or refuse, allow_pickle)
