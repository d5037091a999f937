"""Private answers: the kernel's copy of the package without the references of the lesson being graded.

    python -m course_utils.checks.grading submissions --withhold-references

For an instructor whose references must stay private (changed exercises, answers not published), the
grader can give each notebook's kernel a copy of course_utils in which the references of that notebook's
lesson are not there at all (the judge, outside the sandbox, still checks against them):
- each exercise's reference, a function or a class of the package, is replaced by a stand-in that runs
  the learner's OWN answer of that exercise (the function or class the notebook defined under the
  exercise's name; `own_answer`; where the lesson then imports the course's name over it, the last one the
  notebook defined, kept after every cell by `keep_own`): the lesson goes on with the learner's work where it
  used the course's reference, and a cell that needs an answer the notebook has not defined raises
  NotImplementedError saying so;
- the lesson's checks (checks/lessonNN/, one module per exercise, with its references and its registry of mistakes)
  is replaced by checks that only say that the instructor grades this exercise (`WithheldCheck`).
What stays: the rest of the package, which includes what earlier lessons taught (a later lesson's
reference, or the same algorithm under another name, e.g. lesson 08's `MultiHeadAttention`); and where a
later exercise of the lesson builds on an earlier one, the learner's own earlier answer is what it runs on.
A check that hands the learner a course model built from a withheld class (lesson 09's Transformer forward
pass, built from `EncoderLayer`) cannot be run in the kernel: that exercise is `error`, saying so.
"""
import ast
import functools
import inspect
import shutil
import sys
from pathlib import Path

STAND_IN = "_course_grader_own_answer"
_OWN = {}   # name -> the last object the notebook itself defined under it (kept after every cell: `keep_own`)


def _namespace():
    """The notebook's namespace: IPython's (a kernel), else the __main__ module's."""
    try:
        from IPython import get_ipython

        shell = get_ipython()
    except ImportError:
        shell = None
    return shell.user_ns if shell is not None else vars(sys.modules.get("__main__", sys))


def keep_own(names):
    """After every cell (IPython), keep what the notebook itself defined under the exercises' `names`: the lesson's
    `from course_utils... import NAME` after an exercise then gives the stand-in, which still finds the learner's
    own NAME (the withheld check module calls this when it is imported, before the exercises)."""
    try:
        from IPython import get_ipython

        shell = get_ipython()
    except ImportError:
        return
    if shell is None:
        return

    def after(*args):
        for name in names:
            obj = shell.user_ns.get(name)
            if obj is not None and getattr(obj, "__module__", None) == "__main__":
                _OWN[name] = obj

    shell.events.register("post_run_cell", after)


def own_answer(name, what):
    """The learner's own `name` (defined by the notebook), standing in for the withheld reference `what`: what the
    name holds now if the notebook defined it, else the last one it defined (before the lesson imported the
    course's name over it)."""
    obj = _namespace().get(name)
    if obj is None or getattr(obj, "__module__", None) != "__main__":
        obj = _OWN.get(name)
    if obj is None:
        raise NotImplementedError(f"{what} is withheld by your instructor while grading: the lesson uses your own "
                                  f"`{name}` in its place. Define it (run its exercise cell) first.")
    return obj


def own_instance(name, what, args, kwargs):
    """An object of the learner's own class `name`, standing in for one of the withheld class `what`."""
    if not args and not kwargs:   # (how pickle remakes an object: a course model handed over by the judge)
        raise NotImplementedError(f"{what} is withheld by your instructor while grading: a course model built from "
                                  "it cannot be handed to this notebook, so this exercise cannot be checked here")
    return own_answer(name, what)(*args, **kwargs)


class WithheldCheck:
    """A check the instructor's grader runs outside the notebook: here it only says so."""

    def __init__(self, lesson, exercise, title, learner_name):
        self.lesson, self.exercise, self.title, self.learner_name = lesson, exercise, title, learner_name
        self.__name__ = exercise

    def __call__(self, fn):
        print(f"○ {self.title}: checked by your instructor's grader, not in this notebook.")

    strict = __call__   # (nbgrader's test cell: `check.NAME.strict(answer)`)

    def hint(self):
        print(f"{self.title}: no hint here: your instructor's grader checks this exercise.")


def _where(reference):
    """(module name, top-level name) of a reference defined at the top of a module of the package, or None."""
    while isinstance(reference, functools.partial):
        reference = reference.func
    module, name = getattr(reference, "__module__", ""), getattr(reference, "__qualname__", "")
    if not module.startswith("course_utils.") or "." in name or "<" in name:
        return None
    if not (inspect.isclass(reference) or inspect.isfunction(reference)):
        return None
    return module, name


def _call(learner_name, what, instance=False):
    """`_course_grader_own_answer("name", "what")(*args, **kwargs)`, importing it first (for a class:
    `_course_grader_own_answer("name", "what", args, kwargs)`, from `own_instance`)."""
    name = "own_instance" if instance else "own_answer"
    load = [ast.ImportFrom(module="course_utils.checks.grading.withhold", names=[ast.alias(name=name, asname=STAND_IN)],
                           level=0)]
    given = [ast.Constant(learner_name), ast.Constant(what)]
    if instance:
        passed = [ast.Name("args", ast.Load()), ast.Name("kwargs", ast.Load())]
        return load + [ast.Return(ast.Call(func=ast.Name(STAND_IN, ast.Load()), args=given + passed, keywords=[]))]
    return load + [ast.Return(ast.Call(
        func=ast.Call(func=ast.Name(STAND_IN, ast.Load()), args=given, keywords=[]),
        args=[ast.Starred(ast.Name("args", ast.Load()), ast.Load())],
        keywords=[ast.keyword(arg=None, value=ast.Name("kwargs", ast.Load()))]))]


def _varargs(with_cls=False):
    return ast.arguments(posonlyargs=[], args=[ast.arg("cls")] if with_cls else [], vararg=ast.arg("args"),
                         kwonlyargs=[], kw_defaults=[], kwarg=ast.arg("kwargs"), defaults=[])


def _stand_in(node, learner_name, what):
    """`node` (a top-level def or class) with its code replaced by a call of the learner's own answer."""
    if isinstance(node, ast.ClassDef):
        new = ast.FunctionDef(name="__new__", args=_varargs(with_cls=True), body=_call(learner_name, what, True),
                              decorator_list=[], returns=None, type_comment=None)
        if sys.version_info >= (3, 12):
            new.type_params = []
        node.body, node.decorator_list = [new], []
    else:
        node.args, node.body, node.decorator_list, node.returns = _varargs(), _call(learner_name, what), [], None
    return node


def _rewrite(path, names):
    """Replace the top-level definitions `names` ({name: (learner_name, what)}) in the module file `path`."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name in names:
            _stand_in(node, *names[node.name])
    path.write_text(ast.unparse(ast.fix_missing_locations(tree)) + "\n", encoding="utf-8")


def _check_module(lesson, checks):
    lines = [f'"""Lesson {lesson}\'s checks: withheld by the instructor\'s grader (it checks outside the notebook)."""',
             "from course_utils.checks.grading.withhold import WithheldCheck, keep_own", ""]
    for check in checks:
        lines.append(f"{check.exercise} = WithheldCheck({lesson!r}, {check.exercise!r}, {check.title!r}, "
                     f"{check.learner_name!r})")
    lines.append(f"keep_own({sorted({check.learner_name for check in checks})!r})")
    return "\n".join(lines) + "\n"


def kernel_copy(source, lesson, checks, into):
    """A copy of the package folder `source` (holding course_utils/) in `into`, for the kernels of lesson
    `lesson`: its checks' references replaced by stand-ins, its check module by `WithheldCheck`s."""
    into = Path(into)
    shutil.copytree(Path(source) / "course_utils", into / "course_utils")
    by_module = {}
    for check in checks:
        where = _where(check.reference)
        if where is not None:
            module, name = where
            by_module.setdefault(module, {})[name] = (check.learner_name, f"{module}.{name}")
    for module, names in by_module.items():
        path = into.joinpath(*module.split(".")).with_suffix(".py")
        if f"lesson{lesson}" not in path.relative_to(into).parts[:3] and path.name != f"lesson{lesson}.py" \
                and path.is_file():
            _rewrite(path, names)
    package = into / "course_utils" / "checks" / f"lesson{lesson}"
    if package.is_dir():             # a lesson's checks as a package, one module per exercise: all of it withheld
        shutil.rmtree(package)
    (into / "course_utils" / "checks" / f"lesson{lesson}.py").write_text(_check_module(lesson, checks),
                                                                          encoding="utf-8")
    return into
