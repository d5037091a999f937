"""Lesson 13's notebook: no reference is within reach before its exercise (issue 39: `ea.tiled_attention??` showed
the answer), and the Triton part reads as a learner on any machine needs it.

A reference is "within reach" in a code cell that imports it by name, or imports the module that holds it
(`from course_utils import efficient_attention as ea` puts every answer of the lesson one `??` away)."""
import ast
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "solutions" / "13_attention_at_scale.ipynb"
# exercise (the learner's function) -> the modules and names that hold its reference
REFERENCES = {
    "online_softmax": ("course_utils.efficient_attention", "online_softmax"),
    "merge_softmax_stats": ("course_utils.efficient_attention", "merge_softmax_stats"),
    "tiled_attention": ("course_utils.efficient_attention", "tiled_attention"),
    "tiled_attention_backward": ("course_utils.efficient_attention", "tiled_attention_backward"),
    "flash_forward_kernel": ("course_utils.triton_kernel", "flash_forward_kernel"),
    "linear_attention": ("course_utils.efficient_attention", "linear_attention"),
}
# names that hand over the Triton kernel's reference: the kernel itself and its source text
TRITON_GIVEAWAYS = {"kernel", "reference_source"}


def _cells():
    return [c for c in nbformat.read(NOTEBOOK, as_version=4).cells if c.cell_type == "code"]


def _reaches(source, exercise):
    """The import statements of a cell that put `exercise`'s reference within reach."""
    module, name = REFERENCES[exercise]
    package, _, leaf = module.rpartition(".")
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import) and any(a.name == module for a in node.names):
            found.append(ast.unparse(node))
        elif isinstance(node, ast.ImportFrom):
            names = {a.name for a in node.names}
            if node.module == module and (name in names or "*" in names):
                found.append(ast.unparse(node))
            elif node.module == package and leaf in names:                      # the whole module
                found.append(ast.unparse(node))
            elif (exercise == "flash_forward_kernel" and node.module == "course_utils.triton_attention"
                  and names & TRITON_GIVEAWAYS):
                found.append(ast.unparse(node))
    return found


@pytest.mark.parametrize("exercise", list(REFERENCES))
def test_a_reference_is_imported_only_after_its_exercise(exercise):
    cells = _cells()
    where = next(i for i, c in enumerate(cells) if f"def {exercise}(" in c.source)
    early = [(i, found) for i, c in enumerate(cells[:where]) for found in _reaches(c.source, exercise)]
    assert not early, (f"{exercise}: its reference is imported before the exercise (code cell {where}), so `??` shows "
                       f"the answer: {early}")
    assert any(_reaches(c.source, exercise) for c in cells[where + 1:]) or exercise in ("online_softmax",
                                                                                        "merge_softmax_stats")


def test_the_triton_part_defines_its_kernel_after_the_interpreter_is_switched_on():
    cells = [c.source for c in _cells()]
    switch = next(i for i, s in enumerate(cells) if "import_triton()" in s)
    kernel = next(i for i, s in enumerate(cells) if "@triton.jit" in s)
    assert switch < kernel, "TRITON_INTERPRET=1 must be set (import_triton) before any kernel is defined"
    text = "\n".join(c.source for c in nbformat.read(NOTEBOOK, as_version=4).cells if c.cell_type == "markdown")
    for words in ("correctness, never speed", "no bfloat16", "TRITON_INTERPRET=1", "macOS", "Colab",
                  "Mistral 7B\nv0.1", "Gemma 2", "gpt-oss", "W + 1", "cuDNN", "activate_flash_attention_impl"):
        assert words in text, f"lesson 13's text no longer says {words!r}"
