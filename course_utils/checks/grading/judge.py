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
run while the learner's answer was checked. The watch runs in the learner's kernel, so a notebook can
blind it (then the check's own verdict stands, with a note saying so); no `copied` proves nothing.
"""
import functools
import inspect
import os
import secrets
import time

from .channel import SEED_RANGE, CheckTimeout, GraderFault, KernelGone


# ---------------------------------------------------------------------------------------------
# The reference, as the kernel's watch knows it
# ---------------------------------------------------------------------------------------------
def reference_codes(reference):
    """[(path inside course_utils, first line, name)] of the code of a check's reference: a
    function, the methods of a class, the function of a functools.partial."""
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
    codes = []
    for function in functions:
        code = function.__code__
        path = code.co_filename.replace(os.sep, "/")
        cut = path.rfind("/course_utils/")
        if cut >= 0:
            codes.append((path[cut + len("/course_utils/"):], code.co_firstlineno, code.co_name))
    return codes


def _describe_reference(reference):
    while isinstance(reference, functools.partial):
        reference = reference.func
    module = getattr(reference, "__module__", "course_utils")
    name = getattr(reference, "__qualname__", getattr(reference, "__name__", "the reference"))
    return f"{module}.{name}" if "<lambda>" not in name else f"the reference of this exercise ({module})"


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
    try:
        outcome = check.evaluate(answer, seed_offset=offset)
        status, message = outcome.status, outcome.message
    except (CheckTimeout, KernelGone) as error:
        if isinstance(error, KernelGone) and not channel.timed_out:
            raise
        status, message = "timeout", (f"✘ {title}: the check did not finish within {check_timeout:g} s "
                                      "(an endless loop, or a very slow answer?).")
    finally:
        channel.deadline, channel.timed_out = None, False
        channel.proxies.clear()
    if channel.dead:
        return status, message
    copied = channel.control("copied")
    if copied["hits"]:
        status, message = "copied", (f"✘ {title}: while it was checked, your answer ran the course's own "
                                     f"reference, {_describe_reference(check.reference)}, which the exercise asks "
                                     "you to write yourself: it earns nothing (reading the reference is fine; "
                                     "calling it, in any form, is not).")
    elif copied["removed"]:
        message += (" (Note for the instructor: the notebook switched off the grader's watch on the course's "
                    "reference (sys.settrace) while it was checked: whether it ran the reference is not known.)")
    return status, message
