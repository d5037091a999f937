"""Lesson 13's Triton kernel: the course's kernel and launcher (course_utils.triton_attention), the interpreter's
process (course_utils.triton_interpreter) and what the lesson's check does where Triton cannot run.

The tests that run a kernel need the triton package (Linux; `pip install -e '.[triton]'`, which tools/start.py and
.ci/run install) and skip with that reason without it. No GPU here: kernels run in Triton's interpreter on the CPU.
The check's registry (every wrong kernel named by its key, the reference and a right answer written another way
passing) is run by tests/test_exercises.py.
"""
import importlib.util
import sys
import textwrap

import pytest
import torch

from course_utils import efficient_attention as ea
from course_utils import triton_attention as ta
from course_utils.attention_cost import plain_attention
from course_utils.masks import causal_mask

needs_triton = pytest.mark.skipif(not ta.triton_status()[0], reason=f"Triton cannot run here: {ta.triton_status()[1]}")


@pytest.mark.parametrize("system, found, words", [("Darwin", True, "no package for macOS"),
                                                  ("Windows", True, "for Linux"),
                                                  ("Linux", False, "pip install 'triton==")])
def test_where_triton_cannot_run_the_status_is_one_line_with_what_to_do(monkeypatch, system, found, words):
    monkeypatch.setattr(ta.platform, "system", lambda: system)
    real = importlib.util.find_spec
    monkeypatch.setattr(ta.importlib.util, "find_spec", lambda name: real(name) if found else None)
    ok, why = ta.triton_status()
    assert not ok and words in why and "\n" not in why
    assert "Colab" in why or "pip install" in why


def test_without_triton_a_kernel_cell_runs_and_the_check_says_so_in_one_line(monkeypatch):
    from course_utils.checks.lesson13 import triton_forward

    why = "Triton has no package for macOS: run this part on Linux or on Colab."
    monkeypatch.setattr(ta, "triton_status", lambda: (False, why))
    monkeypatch.setattr(triton_forward, "triton_status", lambda: (False, why))
    triton, tl = ta.import_triton()

    @triton.jit
    def flash_forward_kernel(Q, K, D: tl.constexpr, BLOCK_Q: tl.constexpr):   # the cell runs: @jit leaves it as it is
        pid = tl.program_id(0)
        return pid

    outcome = triton_forward.flash_forward_kernel.evaluate(flash_forward_kernel)
    assert outcome.status == "not implemented" and why in outcome.message and "\n" not in outcome.message
    with pytest.raises(RuntimeError, match="Triton cannot run here"):
        tl.program_id(0)


def test_the_launcher_refuses_inputs_the_kernel_cannot_take():
    x = torch.randn(1, 2, 8, 16)
    with pytest.raises(ValueError, match=r"\(B, H, T, D\)"):
        ta.flash_forward(x[0], x[0], x[0])
    with pytest.raises(ValueError, match="power of two"):
        ta.flash_forward(x[..., :12], x[..., :12], x[..., :12])
    with pytest.raises(ValueError, match="one shape"):
        ta.flash_forward(x, x[:, :1], x)


@needs_triton
@pytest.mark.parametrize("causal", [False, True])
def test_the_course_kernel_equals_the_lessons_tiled_attention_in_the_interpreter(causal):
    q, k, v = (torch.randn(2, 2, 40, 16) for _ in range(3))                  # T = 40: a partial last block
    out, lse = ta.flash_forward(q, k, v, causal=causal, block_q=16, block_k=16)
    expected, expected_lse = ea.tiled_attention(q, k, v, 16, causal=causal)
    assert torch.allclose(out, expected, atol=1e-5) and torch.allclose(lse, expected_lse, atol=1e-5)
    with pytest.raises(ValueError, match="no bfloat16"):
        ta.flash_forward(q.bfloat16(), k.bfloat16(), v.bfloat16())


@needs_triton
def test_training_through_the_kernel_gives_autograds_gradients():
    q, k, v = (torch.randn(1, 2, 24, 16, requires_grad=True) for _ in range(3))
    out = ta.TritonFlashAttention.apply(q, k, v, True, None, 16, 8)
    grads = torch.autograd.grad(out, (q, k, v), torch.ones_like(out))
    plain = plain_attention(q, k, v, causal_mask(24))
    expected = torch.autograd.grad(plain, (q, k, v), torch.ones_like(plain))
    assert torch.allclose(out, plain, atol=1e-5)
    assert all(torch.allclose(g, e, atol=1e-4) for g, e in zip(grads, expected))


@needs_triton
def test_the_interpreter_counts_programs_and_tiles_and_a_causal_kernel_visits_about_half():
    from course_utils.checks.lesson13.triton_forward_kernels import WRONG
    from course_utils.triton_interpreter import run_kernel

    case = dict(name="long", B=1, H=1, T=128, D=16, block_q=16, block_k=16, causal=True, scores="random", seed=0)
    tiles = {}
    for name, text in (("reference", ta.reference_source()), ("every tile", WRONG["every_tile"].text)):
        report = run_kernel(text, "flash_forward_kernel", [case])["long"]
        assert len(report["programs"]) == 8                                   # one program per block of queries
        tiles[name] = sum(len(t) for t in report["ktiles"].values())
    assert tiles == {"reference": 36, "every tile": 64}                       # 8·9/2 of 8·8: about half
    assert int((ea.block_pattern(128, 128, 16, causal=True) != ea.SKIP).sum()) == 36


@needs_triton
def test_a_kernel_that_reads_far_outside_its_tensors_kills_its_process_not_the_caller():
    from course_utils.triton_interpreter import run_kernel

    wild = ta.reference_source().replace("k = tl.load(K + b", "k = tl.load(K + 2 ** 40 + b")
    report = run_kernel(wild, "flash_forward_kernel", [dict(name="c", B=1, H=1, T=16, D=16, block_q=16, block_k=16,
                                                            causal=False, scores="random", seed=0)])
    assert "died" in report or report["c"]["stray"] or report["c"].get("error"), report
    again = run_kernel(ta.reference_source(), "flash_forward_kernel")        # the server goes on
    assert all("error" not in r for r in again.values())


@needs_triton
def test_the_check_reads_a_learners_kernel_with_its_helpers_and_passes_it(tmp_path, monkeypatch):
    from course_utils.checks.lesson13 import flash_forward_kernel as check

    source = ta.reference_source().replace("alpha = tl.exp(m - m_new)", "alpha = rescale(m, m_new)")
    module = tmp_path / "learner_cell.py"
    module.write_text("import triton\nimport triton.language as tl\n\nLOG2E = 1.4426950408889634\n\n\n"
                      + textwrap.dedent('''
                      @triton.jit
                      def rescale(m_old, m_new):
                          return tl.exp2((m_old - m_new) * LOG2E)
                      ''') + "\n\n" + source)
    ta.import_triton()                                                        # TRITON_INTERPRET=1 before defining
    monkeypatch.syspath_prepend(str(tmp_path))
    learner = importlib.import_module("learner_cell")
    try:
        text = ta.kernel_source(learner.flash_forward_kernel)
        assert "def rescale" in text and "LOG2E = 1.44" in text
        outcome = check.evaluate(learner.flash_forward_kernel)
        assert outcome.passed, outcome.message
    finally:
        sys.modules.pop("learner_cell", None)
