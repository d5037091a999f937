"""FlashAttention-2's forward pass as a Triton kernel (lesson 13): compiled on a GPU, or on any Linux CPU run by
Triton's interpreter; its backward pass is the lesson's tiled backward (`efficient_attention`).

    ok, why = triton_status()              # can Triton run here? (False, one line: why, and what to do)
    triton, tl = import_triton()           # the real modules (TRITON_INTERPRET=1 set first without a GPU), or
                                           # stand-ins where Triton cannot run, so that a notebook's @triton.jit runs
    kernel()                               # the course's kernel (course_utils.triton_kernel), defined for this machine
    out, lse = flash_forward(q, k, v, causal=False, kernel=None, block_q=16, block_k=16)
    out = TritonFlashAttention.apply(q, k, v, causal, kernel)   # autograd: the tiled backward from q, k, v, out, L
    kernel_source(fn)                      # a kernel's source text (what the lesson's check sends to the interpreter)

q, k, v are (B, H, T, D): batch, heads, positions, head width; D and the block sizes are powers of two (tl.arange),
at least 16 on a GPU (tl.dot). The kernel's arguments, in order (`kernel_arguments`): the pointers Q, K, V, O, L,
the strides (batch, head, position) of q, k, v and out in elements, those (batch, head) of L, then H, T and the
scale 1/sqrt(D); as constants D, BLOCK_Q, BLOCK_K, CAUSAL. The grid is (cdiv(T, BLOCK_Q), B * H).

**The interpreter** (TRITON_INTERPRET=1, set before a kernel is defined) runs the program instances one after
another, each operation on NumPy arrays, on the CPU. It is for correctness, never speed: the same kernel is
thousands of times slower than compiled, and a time measured there says nothing about a GPU. It has no bfloat16,
reads no pointer loaded from memory, and reads or writes whatever memory an unmasked pointer reaches (a GPU would
fault or return garbage too). Triton ships Linux wheels only: macOS has none, Windows a separate community fork.
"""
import importlib.util
import math
import os
import platform
import types
from pathlib import Path

import torch

from .efficient_attention import tiled_attention_backward
from .source_text import source_of

__all__ = ["TRITON_VERSION", "triton_status", "import_triton", "kernel", "kernel_source", "reference_source",
           "kernel_arguments", "flash_forward", "TritonFlashAttention", "interpreting"]

TRITON_VERSION = "3.7.1"        # the version pinned by the [triton] extra: the one torch 2.13 itself requires on Linux
_INSTALL = f"pip install 'triton=={TRITON_VERSION}' (or `pip install -e '.[triton]'`)"


def triton_status():
    """(True, "triton X, compiled for the GPU" or "... interpreter") where Triton can run; else (False, one line saying
    why and what to do)."""
    system = platform.system()
    elsewhere = ("run this part on Linux or on Colab (the badge at the top of the lesson); the rest of the lesson "
                 "runs here")
    if system == "Darwin":
        return False, f"Triton has no package for macOS: {elsewhere}."
    if system == "Windows":
        return False, f"Triton's packages are for Linux (Windows has only a separate community fork): {elsewhere}."
    if importlib.util.find_spec("triton") is None:
        return False, f"Triton is not installed in this Python: {_INSTALL}, then restart the kernel; or {elsewhere}."
    _interpret_without_gpu()                      # before triton is imported: its own library's kernels too
    try:
        import triton
    except Exception as error:  # noqa: BLE001 - a broken install says why
        return False, f"Triton is installed but does not import ({type(error).__name__}: {error}); {_INSTALL}."
    where = ("run by its interpreter on the CPU (correctness, not speed)" if interpreting()
             else "compiled for the GPU")
    return True, f"triton {triton.__version__}, kernels {where}"


def interpreting():
    """Whether kernels defined now run in Triton's interpreter: no CUDA GPU, or TRITON_INTERPRET=1 set by hand."""
    return os.environ.get("TRITON_INTERPRET", "0") == "1" or not torch.cuda.is_available()


class _Missing(types.ModuleType):
    """A stand-in for `triton` / `triton.language` where Triton cannot run: `@triton.jit` leaves the function as it
    is, so that a notebook's kernel cell still runs (and the check says in one line why it cannot run it)."""

    def jit(self, fn=None, **options):
        return fn if fn is not None else (lambda f: f)

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Missing(f"{self.__name__}.{name}")

    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"{self.__name__}: Triton cannot run here ({triton_status()[1]})")


def _interpret_without_gpu():
    if not torch.cuda.is_available():
        os.environ["TRITON_INTERPRET"] = "1"


def import_triton():
    """(triton, triton.language), with TRITON_INTERPRET=1 set first where there is no CUDA GPU: a kernel is compiled
    or interpreted as it is DEFINED, and Triton's own library (tl.zeros, ...) as triton is IMPORTED; stand-ins where
    Triton cannot run (triton_status says why)."""
    _interpret_without_gpu()
    if not triton_status()[0]:
        return _Missing("triton"), _Missing("triton.language")
    import triton
    import triton.language as tl
    return triton, tl


def kernel():
    """The course's FlashAttention-2 forward kernel, defined for this machine (the interpreter without a GPU)."""
    ok, why = triton_status()                     # (sets TRITON_INTERPRET=1 first where there is no GPU)
    if not ok:
        raise RuntimeError(why)
    from .triton_kernel import flash_forward_kernel
    return flash_forward_kernel


def kernel_source(fn):
    """The source text of a kernel: a @triton.jit function (compiled or interpreted), or a plain function; with the
    number constants and the other @triton.jit functions it uses from its module (a notebook), theirs too; read where
    the kernel lives (under the grader, in the learner's kernel: source_text.source_of)."""
    return source_of(fn)


def reference_source():
    """The source text of the course's kernel (course_utils/triton_kernel.py), read without importing triton."""
    text = Path(__file__).with_name("triton_kernel.py").read_text(encoding="utf-8")
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("@triton.jit"))
    return "\n".join(lines[start:]) + "\n"


def _power_of_two(n):
    return isinstance(n, int) and n > 0 and n & (n - 1) == 0


def _check(q, k, v, block_q, block_k):
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not torch.is_tensor(t) or t.dim() != 4:
            got = tuple(t.shape) if torch.is_tensor(t) else type(t).__name__
            raise ValueError(f"{name} must be a tensor (B, H, T, D): batch, heads, positions, head width; got {got}")
    if not q.shape == k.shape == v.shape:
        raise ValueError(f"this kernel is self-attention with d_v = d_k: q, k, v of one shape (B, H, T, D), got "
                         f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
    for name, n in (("D (the head width)", q.shape[-1]), ("block_q", block_q), ("block_k", block_k)):
        if not _power_of_two(n):
            raise ValueError(f"{name} must be a power of two (tl.arange needs one), got {n}")
    if interpreting():
        if q.dtype == torch.bfloat16:
            raise ValueError("Triton's interpreter has no bfloat16: use float32 on the CPU (bfloat16 on a GPU)")
        if q.is_cuda:
            raise ValueError("TRITON_INTERPRET=1 runs kernels on the CPU: move q, k, v to the CPU")
    elif not q.is_cuda:
        raise ValueError("the kernel was compiled for the GPU: q, k, v must be on it (q.cuda())")


def kernel_arguments(q, k, v, out, lse):
    """The kernel's arguments in order, before its constants: pointers, strides (elements), H, T, the scale."""
    B, H, T, D = q.shape
    return [q, k, v, out, lse, *q.stride()[:3], *k.stride()[:3], *v.stride()[:3], *out.stride()[:3],
            *lse.stride()[:2], H, T, 1.0 / math.sqrt(D)]


def flash_forward(q, k, v, causal=False, kernel_fn=None, block_q=16, block_k=16):
    """(out (B, H, T, D), lse (B, H, T) in float32) from one launch of `kernel_fn` (the course's by default): one
    program per block of block_q queries of one (batch, head)."""
    _check(q, k, v, block_q, block_k)
    kernel_fn = kernel() if kernel_fn is None else kernel_fn
    q, k, v = (t if t.stride(-1) == 1 else t.contiguous() for t in (q, k, v))   # the kernel reads rows of D
    B, H, T, D = q.shape
    out = torch.empty_like(q)
    lse = torch.empty(B, H, T, dtype=torch.float32, device=q.device)
    grid = (-(-T // block_q), B * H)
    kernel_fn[grid](*kernel_arguments(q, k, v, out, lse), D=D, BLOCK_Q=block_q, BLOCK_K=block_k, CAUSAL=bool(causal))
    return out, lse


class TritonFlashAttention(torch.autograd.Function):
    """softmax(q kᵀ/√d) v by the Triton kernel; the backward pass is the lesson's tiled backward, recomputed from
    q, k, v, the output and L alone (tiles of `backward_block`, in Python). apply(q, k, v, causal=False,
    kernel_fn=None, block=16, backward_block=64)."""

    @staticmethod
    def forward(ctx, q, k, v, causal=False, kernel_fn=None, block=16, backward_block=64):
        out, lse = flash_forward(q, k, v, causal, kernel_fn, block, block)
        ctx.save_for_backward(q, k, v, out, lse)                         # nothing of size T x T
        ctx.causal, ctx.backward_block = causal, backward_block
        return out

    @staticmethod
    def backward(ctx, grad_out):
        q, k, v, out, lse = ctx.saved_tensors
        dq, dk, dv = tiled_attention_backward(q, k, v, out, lse.to(q.dtype), grad_out, ctx.backward_block,
                                              causal=ctx.causal)
        return dq, dk, dv, None, None, None, None
