"""Inside the interpreter's child process (`triton_interpreter`): a kernel defined from its source text, run on
one case laid out in memory so that every pointer it makes can be read back as (tensor, batch, head, position).

    kernel, error = define_kernel(source, "flash_forward_kernel")
    report = run_case(kernel, case)

The five tensors sit in one block of float32 memory, each in its own layout (LAYOUTS below), with
PAD rows past T (NaN in q, k, v; SENTINEL in the output and L) and GUARD floats of NaN between them, so that a
read past the last position finds NaN inside a tensor's own memory and a stray pointer lands in the guard space.
Imports triton: run only where the interpreter runs (TRITON_INTERPRET=1 before the kernel is defined).
"""
import importlib.util
import os
import sys
import tempfile
import traceback

import numpy as np
import torch

from .triton_attention import kernel_arguments

__all__ = ["CASES", "LAYOUTS", "inputs", "define_kernel", "run_case"]

PAD, GUARD = 16, 4096            # rows past T in every tensor; float32s of guard space between the tensors
SENTINEL = 7777.0                 # the output's and L's padding rows hold this until a kernel writes there

# The inputs of the lesson's check: small sizes (the interpreter runs ~1e4 times slower than a GPU), T not a
# multiple of the blocks, batch and heads of 2 laid out differently in q, k and v, and scores that need the running
# maximum (growing along the keys), that sit far below zero, or normal ones.
CASES = (
    dict(name="random", B=2, H=2, T=24, D=16, block_q=16, block_k=16, causal=False, scores="random", seed=1),
    dict(name="random_causal", B=1, H=2, T=40, D=16, block_q=16, block_k=8, causal=True, scores="random", seed=2),
    dict(name="growing", B=1, H=1, T=48, D=16, block_q=16, block_k=16, causal=False, scores="growing", seed=3),
    dict(name="growing_causal", B=1, H=1, T=48, D=16, block_q=16, block_k=16, causal=True, scores="growing", seed=3),
    dict(name="negative", B=1, H=1, T=32, D=16, block_q=16, block_k=16, causal=False, scores="negative", seed=4),
)

# Each tensor in memory: its axes in storage order (b batch, h head, t position, d width), so that the strides of
# batch and head differ between q, k and v (a kernel that takes one for the other reads another (batch, head)).
LAYOUTS = {"Q": "bthd", "K": "bhtd", "V": "hbtd", "O": "bhtd", "L": "bht"}


def inputs(case):
    """q, k, v (B, H, T, D) float32 of a case, the same in every process (seeded)."""
    B, H, T, D = case["B"], case["H"], case["T"], case["D"]
    g = torch.Generator().manual_seed(case["seed"])
    q, k, v = (torch.randn(B, H, T, D, generator=g) for _ in range(3))
    if case["scores"] == "growing":            # s_tj ~ 8 j: the maximum grows with every block of keys
        q = 0.1 * q
        q[..., 0] = 1.0
        k = 0.1 * k
        k[..., 0] = 8.0 * torch.arange(T, dtype=torch.float32) * D ** 0.5
    elif case["scores"] == "negative":         # s_tj ~ -150 + N(0, 1): every score of every row far below 0
        q[..., 0] = 1.0
        k[..., 0] = -150.0 * D ** 0.5
    return q, k, v


HEADER = "import math\n\nimport triton\nimport triton.language as tl\n\n\n"


def define_kernel(source, name):
    """(the kernel named `name` defined by `source` under the interpreter, None) or (None, what went wrong)."""
    import triton
    from triton.runtime.jit import KernelInterface

    handle, path = tempfile.mkstemp(suffix=".py", prefix="learner_kernel_")
    with os.fdopen(handle, "w", encoding="utf-8") as file:
        file.write(HEADER + source)
    spec = importlib.util.spec_from_file_location(f"learner_kernel_{os.getpid()}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as error:  # noqa: BLE001 - the learner's definition fails: say where
        os.unlink(path)
        return None, _described(error, path)
    fn = getattr(module, name, None)
    if fn is None:
        os.unlink(path)
        return None, f"the cell defines no function named {name}"
    if not isinstance(fn, KernelInterface):
        fn = triton.jit(fn)                       # a plain function: the interpreter runs it as a kernel
    fn.learner_path = path
    return fn, None


def _described(error, path):
    """'TypeName: message (line N of your kernel)', N counted in the learner's source."""
    cause = error.__cause__ or error
    line = None
    for frame in traceback.extract_tb(cause.__traceback__):
        if frame.filename == path:
            line = frame.lineno - HEADER.count("\n")
    if isinstance(cause, SyntaxError) and cause.filename == path and cause.lineno:
        line = cause.lineno - HEADER.count("\n")
    text = f"{type(cause).__name__}: {str(cause).splitlines()[0] if str(cause) else ''}"
    return text + (f" (line {line} of your kernel)" if line and line > 0 else "")


class _Memory:
    """The five tensors of a case in one block of float32 memory, and the reading back of any address in it."""

    def __init__(self, case):
        B, H, T, D = case["B"], case["H"], case["T"], case["D"]
        sizes = {"b": B, "h": H, "t": T + PAD, "d": D}
        shapes = {name: [sizes[c] for c in layout] for name, layout in LAYOUTS.items()}
        counts = {name: int(np.prod(shape)) for name, shape in shapes.items()}
        self.starts, offset = {}, GUARD
        for name in LAYOUTS:
            self.starts[name] = offset
            offset += counts[name] + GUARD
        self.block = torch.full((offset,), float("nan"))
        self.base, self.T = self.block.data_ptr(), T
        self.full, self.coords = {}, {}
        for name, layout in LAYOUTS.items():
            stored = self.block[self.starts[name]:self.starts[name] + counts[name]].view(shapes[name])
            order = "bhtd" if "d" in layout else "bht"
            self.full[name] = stored.permute([layout.index(c) for c in order])   # (B, H, T + PAD[, D])
            grids = np.indices(shapes[name]).reshape(len(layout), -1)
            self.coords[name] = {c: grids[layout.index(c)] for c in "bht"}
        q, k, v = inputs(case)
        for name, x in (("Q", q), ("K", k), ("V", v)):
            self.full[name][:, :, :T] = x
        for name in ("O", "L"):
            self.full[name][:, :, T:] = SENTINEL                 # rows past T; rows < T stay NaN until stored
        self.names = list(LAYOUTS)
        self.ends = {n: self.starts[n] + counts[n] for n in self.names}

    def tensor(self, name):
        return self.full[name][:, :, :self.T]

    def locate(self, addresses):
        """{tensor name: (b, h, t) arrays} of the addresses inside a tensor, and how many fell outside all five."""
        index = (addresses.astype(np.int64) - self.base) // 4
        found, inside = {}, np.zeros(index.shape, bool)
        for name in self.names:
            hit = (index >= self.starts[name]) & (index < self.ends[name])
            if hit.any():
                offsets = index[hit] - self.starts[name]
                found[name] = tuple(self.coords[name][c][offsets] for c in "bht")
                inside |= hit
        return found, int((~inside).sum())


class _Recorder:
    """Wraps the interpreter's loads and stores: each event's program and the tensors, rows and pairs it touched."""

    def __init__(self, memory):
        from triton.runtime import interpreter

        self.builder, self.memory = interpreter.interpreter_builder, memory
        self.programs, self.ktiles, self.pairs = set(), {}, {}
        self.pad_reads, self.pad_writes, self.input_writes, self.stray = [], [], 0, 0
        self.load, self.store = self.builder.create_masked_load, self.builder.create_masked_store

    def __enter__(self):
        self.builder.create_masked_load = lambda ptrs, mask, *a, **kw: self._seen(
            "read", ptrs, mask) or self.load(ptrs, mask, *a, **kw)
        self.builder.create_masked_store = lambda ptrs, value, mask, *a, **kw: self._seen(
            "write", ptrs, mask) or self.store(ptrs, value, mask, *a, **kw)
        return self

    def __exit__(self, *exc):
        self.builder.create_masked_load, self.builder.create_masked_store = self.load, self.store

    def _seen(self, kind, ptrs, mask):
        program = tuple(self.builder.grid_idx[:2])
        self.programs.add(program)
        addresses = np.asarray(ptrs.data)
        active = np.broadcast_to(np.asarray(getattr(mask, "data", mask), bool), addresses.shape)
        everywhere, _ = self.memory.locate(addresses.ravel())
        if kind == "read" and "K" in everywhere:                # a tile of keys: its first and last position
            t = everywhere["K"][2]
            self.ktiles.setdefault(program, []).append((int(t.min()), int(t.max())))
        found, stray = self.memory.locate(addresses[active])
        self.stray += stray
        for name, (b, h, t) in found.items():
            past = t >= self.memory.T
            if past.any():
                (self.pad_reads if kind == "read" else self.pad_writes).append(
                    (program, name, int(t[past].min())))
            if kind == "write" and name in "QKV":
                self.input_writes += int((~past).sum())
            pairs = self.pairs.setdefault(program, {}).setdefault(name, set())
            pairs.update(zip(b[~past].tolist(), h[~past].tolist()))


def run_case(kernel, case):
    """Run `kernel` on one case (grid (cdiv(T, block_q), B * H)); what it stored and touched (triton_interpreter)."""
    memory = _Memory(case)
    B, H, T, D = case["B"], case["H"], case["T"], case["D"]
    q, k, v, out, lse = (memory.tensor(n) for n in LAYOUTS)
    grid = (-(-T // case["block_q"]), B * H)
    report = {"grid": grid}
    with _Recorder(memory) as seen:
        try:
            kernel[grid](*kernel_arguments(q, k, v, out, lse), D=D, BLOCK_Q=case["block_q"],
                         BLOCK_K=case["block_k"], CAUSAL=case["causal"])
        except Exception as error:  # noqa: BLE001 - the learner's kernel raised: say where
            report["error"] = _described(error, getattr(kernel, "learner_path", ""))
    report.update(out=out.numpy().copy(), lse=lse.numpy().copy(), programs=sorted(seen.programs),
                  ktiles=seen.ktiles, pairs=seen.pairs, pad_reads=seen.pad_reads[:20],
                  pad_writes=seen.pad_writes[:20], input_writes=seen.input_writes, stray=seen.stray)
    return report
