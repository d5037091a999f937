"""The judge: runs the course's checks, outside the learner's kernel, on what the kernel computes.

    channel = channel.Channel.listen(io_dir, kill=...)   # a unix socket the kernel connects to
    channel.accept(timeout)
    outcomes = judge(channel, checks, check_timeout)     # {exercise: (status, message)}

Every check runs here, from the grader's own copy of the package, with the learner's function or
class replaced by a `Remote`: calling it sends the arguments (data, `wire`) to the kernel, which
runs the learner's code and sends back what it returned (data), or a handle to an object that stays
in the kernel (a module instance, a parameter, a bound method), on which the check may call
methods, read attributes, iterate, `load_state_dict(...)`, `state_dict()`, `parameters()`, and run
`backward()` through a tensor it returned. The comparison with the expected values, and the verdict,
happen here only: what the notebook prints, hooks or patches in its kernel can change what its
functions return, never how that is judged. The inputs are drawn from seeds moved by a secret offset
(`check.evaluate(answer, seed_offset=...)`), so the answers cannot be looked up from a table made in advance.

`copied` is said only when it is certain: the kernel's watch saw the course's reference for the exercise
run while the learner's answer was checked: its own code, or a private helper of its module to which it
hands its whole work (`tiled_attention` is `return _tiled_forward(...)`: running `_tiled_forward`, e.g.
through `sliding_window_attention`, is running the reference). Not the other code a reference uses (a check
of its inputs, a numerically safe maximum, a feature map, another lesson's reference: running those is not
running the exercise's answer). The watch runs in the learner's kernel, so a notebook can blind it: where it
changed Python's trace functions (even for a moment) or ran a thread the watch does not see, the check's own verdict
stands with a note saying so; a notebook that patches the grader's code in its kernel can blind it without a note
(kernel_side.Watch). No `copied` proves nothing.
"""
import ast
import functools
import inspect
import os
import secrets
import textwrap
import time

from .channel import SEED_RANGE, CheckTimeout, GraderFault, KernelGone


# ---------------------------------------------------------------------------------------------
# The reference, as the kernel's watch knows it
# ---------------------------------------------------------------------------------------------
def reference_codes(reference):
    """[(path inside course_utils, first line, name)] of the code of a check's reference: a
    function, the methods of a class, the function of a functools.partial; and the private helpers
    they hand their whole work to (`delegated`)."""
    return [_code_of(function) for function in _reference_functions(reference, helpers=True) if _code_of(function)]


def delegated(function, depth=0):
    """The private functions of `function`'s own module to which it hands its whole work: its body, past its
    docstring, is `return _helper(...)` (or `return _helper(...)[i]`); followed down (a helper that
    delegates in turn)."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    except (OSError, TypeError, SyntaxError, IndentationError):   # no source (a lambda's line may not parse)
        return []
    node = tree.body[0] if tree.body else None
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return []
    body = node.body[1:] if ast.get_docstring(node) is not None else node.body
    value = body[0].value if len(body) == 1 and isinstance(body[0], ast.Return) else None
    value = value.value if isinstance(value, ast.Subscript) else value
    if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id.startswith("_")):
        return []
    helper = getattr(function, "__globals__", {}).get(value.func.id)
    if not inspect.isfunction(helper) or helper.__module__ != function.__module__ or helper is function:
        return []
    return [helper] + (delegated(helper, depth + 1) if depth < 3 else [])


def _reference_functions(reference, helpers):
    """The Python functions of a reference (see `reference_codes`), with their delegated helpers or not."""
    while isinstance(reference, functools.partial):
        reference = reference.func
    functions = []
    if inspect.isclass(reference):
        for klass in reference.__mro__:
            if klass.__module__.split(".")[0] != "course_utils":
                continue
            for value in vars(klass).values():
                value = getattr(value, "__func__", value)
                if isinstance(value, property):
                    value = value.fget
                if inspect.isfunction(value):
                    functions.append(value)
    elif inspect.isfunction(reference) or inspect.ismethod(reference):
        functions.append(getattr(reference, "__func__", reference))
    if helpers:
        functions += [helper for function in functions for helper in delegated(function)]
    return functions


def _code_of(function):
    """(path inside course_utils, first line, name) of a function's code, or None outside the package."""
    code = function.__code__
    path = code.co_filename.replace(os.sep, "/")
    cut = path.rfind("/course_utils/")
    return (path[cut + len("/course_utils/"):], code.co_firstlineno, code.co_name) if cut >= 0 else None


def _describe_reference(reference, hits=()):
    """The reference's name, and the helper it hands its work to when only that one ran (`hits`: the watch's)."""
    own = {_code_of(f) for f in _reference_functions(reference, helpers=False)}
    seen = set()
    for hit in hits:
        try:
            seen.add((str(hit[0]), int(hit[1]), str(hit[2])))
        except (TypeError, ValueError, IndexError):   # (the kernel's data: only ever used to word the message)
            continue
    through = [f for f in _reference_functions(reference, helpers=True)
               if _code_of(f) in seen and _code_of(f) not in own]
    while isinstance(reference, functools.partial):
        reference = reference.func
    module = getattr(reference, "__module__", "course_utils")
    name = getattr(reference, "__qualname__", getattr(reference, "__name__", "the reference"))
    text = f"{module}.{name}" if "<lambda>" not in name else f"the reference of this exercise ({module})"
    if through and not own & seen:
        text += f" (through {through[0].__module__}.{through[0].__qualname__}, the code it hands its whole work to)"
    return text


# ---------------------------------------------------------------------------------------------
# Judging one notebook's exercises
# ---------------------------------------------------------------------------------------------
def judge(channel, checks, check_timeout, offset=None, watch=True):
    """{exercise: (status, message)} for the lesson's `checks`, on the notebook behind `channel`; every
    check's seeds are moved by `offset` (by default a secret one, drawn here). watch=False: the course's
    reference may be run (for the tests, which grade the references)."""
    offset = secrets.randbelow(SEED_RANGE) + 1 if offset is None else offset
    outcomes = {}
    for check in checks:
        title = check.title
        if channel.dead:
            outcomes[check.exercise] = ("timeout" if "interrupt" in channel.dead else "error",
                                        f"{title}: not graded: {channel.dead}.")
            continue
        try:
            outcomes[check.exercise] = _judge_one(channel, check, check_timeout, offset, watch)
        except KernelGone as gone:
            outcomes[check.exercise] = ("error", f"✘ {title}: not graded: {gone}.")
        except GraderFault as fault:
            outcomes[check.exercise] = ("error", f"✘ {title}: not graded: {fault}.")
    return outcomes


BUSY = 0.8   # a check that computed for less than this share of its time limit ran on a busy machine


def timeout_message(title, limit, cpu_before, cpu_after):
    """The words of a check's timeout: an endless loop is named only when the kernel computed for (nearly) the whole
    limit; otherwise the machine was busy, or the answer waited (the grader then grades the notebook again, alone:
    command.py)."""
    used = cpu_after - cpu_before if cpu_before is not None and cpu_after is not None else None
    if used is None:
        return f"✘ {title}: the check did not finish within {limit:g} s."
    if used >= BUSY * limit:
        return (f"✘ {title}: the check did not finish within {limit:g} s, computing all along ({used:.0f} s of CPU "
                "time): an endless loop, or a very slow answer?")
    return (f"✘ {title}: the check did not finish within {limit:g} s, in which its kernel computed for only "
            f"{used:.0f} s (a busy machine, or an answer that waits).")


def _judge_one(channel, check, check_timeout, offset, watch=True):
    title, name = check.title, check.learner_name
    # (the kernel also forgets the last exercise's objects)
    channel.control("watch", codes=reference_codes(check.reference) if watch else [])
    found = channel.control("answer", name=name)
    if found.get("missing"):
        return ("missing", f"{title}: `{name}` is not defined in the notebook (its cell was deleted, renamed or "
                           "failed to run).")
    if found.get("course"):
        return ("missing", f"{title}: `{name}` is the course's reference imported from {found['course']}, not an "
                           "answer written in the notebook.")
    answer = found["answer"]
    channel.deadline, channel.timed_out = time.monotonic() + check_timeout, False
    cpu_before = channel.cpu_seconds()
    try:
        outcome = check.evaluate(answer, seed_offset=offset)
        status, message = outcome.status, outcome.message
    except (CheckTimeout, KernelGone) as error:
        if isinstance(error, KernelGone) and not channel.timed_out:
            raise
        cpu_after = channel.cpu_seconds()
        status, message = "timeout", timeout_message(title, check_timeout, cpu_before, cpu_after)
    finally:
        channel.deadline, channel.timed_out = None, False
        channel.proxies.clear()
    if channel.dead:
        return status, message
    copied = channel.control("copied")
    if copied["hits"]:
        reference = _describe_reference(check.reference, copied["hits"])
        status, message = "copied", (f"✘ {title}: while it was checked, your answer ran the course's own "
                                     f"reference, {reference}, which the exercise asks you to write yourself: it "
                                     "earns nothing (reading the reference is fine; calling it, in any form, is "
                                     "not).")
    elif copied["removed"]:
        how = str(copied.get("how") or "it switched off the trace function (sys.settrace)")[:600]
        message += (f" (Note for the instructor: the notebook blinded the grader's watch on the course's reference "
                    f"({how}): whether it ran the reference is not known.)")
    return status, message
