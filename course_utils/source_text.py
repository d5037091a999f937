"""The source text of a learner's function, for the checks that read code (a Python loop in lesson 00, a Triton
kernel in lesson 13), wherever the function lives.

    source_of(answer)       # the text (for the grader's proxy of a function in the learner's kernel: asked there)

`source_text(fn)` is the function's own source (dedented), then the sources of the Triton kernels it calls and the
number constants it names (a kernel's `tl.constexpr` sizes, a helper `@triton.jit` function), each once. This module
imports nothing of the course: the grader's kernel side loads it by path, in the learner's kernel, to answer the
judge's "source" request (checks/grading/kernel_side.py); there it reads what the notebook defined (IPython keeps a
cell's text for inspect).
"""
import inspect
import textwrap

_KERNELS = ("JITFunction", "InterpretedFunction")


def source_text(fn):
    """The source of `fn` (a function, a class, or a @triton.jit kernel), with the kernels and constants it uses; an
    object that carries its text (`kernel_text`: the course's kernels given to a check as text) gives that."""
    given = getattr(fn, "kernel_text", None)
    if isinstance(given, str):
        return given
    constants, parts, seen = {}, [], set()

    def visit(function):
        inner = getattr(function, "fn", function)
        if id(inner) in seen:
            return
        seen.add(id(inner))
        for name in getattr(getattr(inner, "__code__", None), "co_names", ()):
            value = getattr(inner, "__globals__", {}).get(name)
            if type(value).__name__ in _KERNELS:
                visit(value)
            elif isinstance(value, (int, float)) and not isinstance(value, bool):
                constants[name] = value
        parts.append(textwrap.dedent(inspect.getsource(inner)))

    visit(fn)
    return "".join(f"{name} = {value!r}\n" for name, value in constants.items()) + "\n\n".join(parts)


def source_of(answer):
    """The source text of the learner's `answer`: read here, or, for the grader's proxy of an object in the learner's
    kernel (a type with `__source_text__`), read there. OSError or TypeError where there is none to read."""
    ask = getattr(type(answer), "__source_text__", None)
    return ask(answer) if ask is not None else source_text(answer)
