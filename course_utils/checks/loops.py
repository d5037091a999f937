"""A Python loop where an exercise asks for none (lessons 00 and 01), read in the learner's own code.

The learner's code is read where it lives: a notebook's function here, and under the instructor's grader, in the
learner's kernel (the proxy asks the kernel for the source text: course_utils/source_text.py). A loop over a few
named things (`for a in (q, K, V)`, to convert the inputs) is not a loop over the data and is not counted.
"""
import ast
import inspect
import textwrap

from ..source_text import source_of

LOOP_CALLS = {"map", "vectorize", "apply_along_axis", "fromiter", "frompyfunc"}   # a loop under another name


def _own_function(answer):
    """The ast of `answer`'s own definition, or None where its code cannot be read."""
    if not inspect.isfunction(answer) and getattr(type(answer), "__source_text__", None) is None:
        return None
    try:
        tree = ast.parse(textwrap.dedent(source_of(answer)))
    except Exception:  # noqa: BLE001 - no text (OSError, TypeError), or a lambda's line that does not parse alone
        return None
    kind = ast.Lambda if answer.__name__ == "<lambda>" else (ast.FunctionDef, ast.AsyncFunctionDef)
    own = [n for n in ast.walk(tree) if isinstance(n, kind) and getattr(n, "name", answer.__name__) == answer.__name__]
    return own[0] if len(own) == 1 else None


def python_loop(answer):
    """The first Python loop over the data in `answer`'s own code, as a short text (`for k in K`), or None."""
    own = _own_function(answer)
    if own is None:
        return None
    for node in ast.walk(own):
        if isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
            if isinstance(node.iter, (ast.Tuple, ast.List, ast.Set)):     # over a few named things: (q, K, V)
                continue
            target = node.target.elts if isinstance(node.target, ast.Tuple) else [node.target]
            return f"`for {', '.join(ast.unparse(t) for t in target)} in {ast.unparse(node.iter)}`"
        if isinstance(node, ast.While):
            return f"`while {ast.unparse(node.test)}`"
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in LOOP_CALLS:
                return f"`{ast.unparse(func)}(...)`, a loop in disguise"
    return None
