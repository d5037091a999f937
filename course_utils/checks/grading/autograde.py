"""nbgrader's autograde, graded as the course's own grader grades: each submission in the sandbox, its exercises
judged outside the kernel.

    # nbgrader_config.py (tools/export_nbgrader.py writes it):
    from course_utils.checks.grading.autograde import configure
    configure(c)

`configure(c)` puts `SandboxedExecute` where nbgrader's `Execute` stands among autograde's preprocessors (nbgrader's
own extension point, `Autograde.autograde_preprocessors`; the others are kept). For each submitted notebook,
`SandboxedExecute`:
1. runs it as `course-grade` runs one (`launch.grade_notebook`): a fresh kernel in the sandbox (sandbox.py: a copy of
   the submission's folder, which nbgrader made in autograded/, and nothing else of the course folder: not
   gradebook.db, not another student's folder), the grader's copy of course_utils first on its path, in fast mode,
   going on past cells that fail; the test cells are NOT run in the kernel;
2. judges every exercise outside the kernel (`judge.py`), from the grader's own copy of the package (taken when
   autograde starts), on inputs drawn from seeds moved by a secret offset;
3. gives the autograded notebook the cells' outputs (bounded: kernel.OUTPUTS_KEPT a cell), and each test cell the
   judge's verdict as its only output: the check's ✔ line when it passed, an error with the check's message
   otherwise. nbgrader's SaveAutoGrades then scores the test cells as it always does (no error: the cell's points).
No output of the kernel ever reaches a test cell, and a grade cell the grader does not know
(`check.NAME.strict(answer)`) gets an error: no points.

If the grader itself fails on a notebook (no kernel could start, ...), the preprocessor raises: nbgrader reports
that submission as failed, it never scores it 0 in silence. Settings, in nbgrader_config.py:
`c.SandboxedExecute.timeout` (a cell, 300 s), `.notebook_timeout` (600), `.check_timeout` (60), `.memory` (GiB per
process, 4), `.processes` (256), `.withhold_references` (False: the kernel's copy without the lesson's references,
as `course-grade --withhold-references`), `.sandbox` (True; False grades without one, with the notebooks running
with nbgrader's rights: only where no sandbox can start).
"""
import atexit
import re
import shutil
import tempfile
from pathlib import Path

from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Bool, Float, Integer, Unicode

from . import launch, sandbox, withhold
from .submissions import Submission

TEST_CELL = re.compile(r"^\s*check\.(\w+)\.strict\((\w*)\)\s*$")
ENAME = {"wrong": "WrongAnswer", "copied": "CopiedReference", "not implemented": "NotImplemented",
         "missing": "MissingAnswer", "timeout": "Timeout", "error": "NotGraded"}
_OWN = {}   # the grader's copy of the package (and the kernels' withheld copies), made once per autograde process


def configure(c):
    """nbgrader's autograde with SandboxedExecute in the place of its Execute (nbgrader_config.py: `configure(c)`)."""
    from nbgrader.converters import Autograde

    default = list(Autograde.class_traits()["autograde_preprocessors"].default())
    names = [getattr(p, "__name__", str(p).rsplit(".", 1)[-1]) for p in default]
    if "Execute" not in names:
        raise RuntimeError(f"this nbgrader's autograde has no Execute preprocessor to replace ({names}): the course's "
                           "sandboxed autograde needs nbgrader 0.9")
    c.Autograde.autograde_preprocessors = [SandboxedExecute if name == "Execute" else p
                                           for p, name in zip(default, names)]


def _own():
    """(folder holding the grader's copy of course_utils, its temporary folder): made once, removed at exit."""
    if "root" not in _OWN:
        from .command import _snapshot

        folder = tempfile.mkdtemp(prefix="course-autograde-")
        atexit.register(shutil.rmtree, folder, True)
        _OWN["root"], _OWN["tmp"] = _snapshot(folder), Path(folder)
    return _OWN["root"], _OWN["tmp"]


def _checks(lesson):
    import importlib

    from .lessons import module_checks

    return list(module_checks(importlib.import_module(f"course_utils.checks.lesson{lesson}")))


def _verdict(status, message):
    """A test cell's outputs for the judge's verdict: the ✔ line, or an error (nbgrader: no points)."""
    from nbformat import NotebookNode

    if status == "passed":
        return [NotebookNode(output_type="stream", name="stdout", text=message + "\n")]
    name = ENAME.get(status, "NotGraded")
    return [NotebookNode(output_type="error", ename=name, evalue=message, traceback=[f"{name}: {message}"])]


class SandboxedExecute(NbGraderPreprocessor):
    """Runs a submission in the course's sandbox and fills its test cells with the verdicts of the judge (module
    docstring)."""

    timeout = Float(300, help="seconds before a cell is interrupted").tag(config=True)
    notebook_timeout = Float(600, help="seconds for all the notebook's cells together").tag(config=True)
    check_timeout = Float(60, help="seconds for one exercise's check").tag(config=True)
    memory = Float(4, help="GiB of address space for each process of a notebook").tag(config=True)
    processes = Integer(256, help="processes and threads a notebook may run at once").tag(config=True)
    kernel = Unicode("python3", help="the Jupyter kernel the notebooks run in").tag(config=True)
    withhold_references = Bool(False, help="the kernel's copy of the package without the lesson's references "
                                           "(as course-grade --withhold-references)").tag(config=True)
    sandbox = Bool(True, help="run the notebooks in the sandbox (False: with nbgrader's rights)").tag(config=True)

    def preprocess(self, nb, resources):
        import nbformat

        notebook = resources["nbgrader"]["notebook"]
        student = resources["nbgrader"]["student"]
        folder = Path(resources.get("metadata", {}).get("path") or ".").resolve()
        found = re.match(r"(\d\d)_", notebook)
        if not found:
            raise RuntimeError(f"{folder / notebook}.ipynb: not a lesson notebook of the course (NN_name)")
        lesson = found[1]
        if self.sandbox:
            problem = sandbox.unavailable()
            if problem:
                raise RuntimeError(f"no sandbox: {problem}; the course's autograde runs submissions only in a "
                                   "sandbox (c.SandboxedExecute.sandbox = False grades without one, with nbgrader's "
                                   "rights)")
        checks = _checks(lesson)
        tests = {}
        for index, cell in enumerate(nb.cells):
            if cell.cell_type == "code" and cell.get("metadata", {}).get("nbgrader", {}).get("grade"):
                match = TEST_CELL.match(cell.source)
                tests[index] = match[1] if match else None
        root, tmp = _own()
        package = None
        if self.withhold_references:
            package = _OWN.get(f"kernel-{lesson}")
            if package is None:
                package = withhold.kernel_copy(root, lesson, checks, tmp / f"kernel-{lesson}")
                _OWN[f"kernel-{lesson}"] = package
        limits = sandbox.Limits(processes=self.processes, memory=int(self.memory * (1 << 30)))
        with tempfile.TemporaryDirectory(prefix="course-autograde-nb-") as work:
            path = Path(work) / f"{notebook}.ipynb"
            nbformat.write(nb, path)
            sub = Submission(student, lesson, path)
            self.log.info("grading %s in the course's sandbox (%s), the checks outside it", path.name, folder)
            try:
                cell_timeout = min(self.timeout, self.notebook_timeout)
                got = launch.grade_notebook(sub, checks, self.notebook_timeout, cell_timeout, self.check_timeout,
                                            self.kernel, sandboxed=self.sandbox, grader_root=root, package=package,
                                            limits=limits, folder=folder, skip=sorted(tests), keep_outputs=True)
            except KeyboardInterrupt:
                launch.stop_all()
                raise
        if not got.graded:
            problem = next((row.message for row in got.rows if row.outcome == "error"), "it wrote no result")
            raise RuntimeError(f"the course's grader failed on {folder / notebook}.ipynb: {problem}")
        for note in got.notes:
            self.log.warning("%s: %s", notebook, note)
        verdicts = {row.exercise: (row.outcome, row.message) for row in got.rows}
        outputs = got.outputs or []
        for index, cell in enumerate(nb.cells):
            if cell.cell_type != "code":
                continue
            cell.execution_count = None
            if index in tests:
                name = tests[index]
                status, message = verdicts.get(name, ("error", f"✘ this test cell is not one the course's grader "
                                                               f"knows (`check.NAME.strict(answer)`, NAME an exercise "
                                                               f"of lesson {lesson}): no points"))
                cell.outputs = _verdict(status, message)
            else:
                cell.outputs = [nbformat.from_dict(output) for output in outputs[index]] \
                    if index < len(outputs) else []
        return nb, resources
