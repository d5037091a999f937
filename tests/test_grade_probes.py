"""Lesson 13's "nothing of size T_q x T_k" under the instructor's grader, and its copy watch on the code a
reference hands its whole work to.

- In this process, the judge and the kernel side over their real socket, the kernel side serving from a
  thread of its own (torch's function modes are per thread: only a measure taken where the learner's code
  runs sees its tensors, as in the sandbox): `ev.call_measured` of the grader's proxy gets the kernel's
  measurement with the result (and the inputs changed in place); the three quadratic answers are `wrong`,
  naming the T_q x T_k tensor; `_tiled_forward` (what `tiled_attention` hands its work to), reached directly
  or through `sliding_window_attention`, is `copied`; the reference's other helpers are not.
- slow (RUN_SLOW=1): ONE sandboxed grading run (two notebooks at a time), as `course-grade` grades a class: a
  notebook whose tiled forward pass, backward pass and linear attention give the right values, skip the causal
  tiles, and each build one T_q x T_k tensor is `wrong` on all three with the quadratic message; the same
  notebook without those tensors passes them.
"""
import contextlib
import csv
import re
import tempfile
import textwrap
import threading

import nbformat
import pytest
import torch
import torch.nn.functional as F

from course_utils import efficient_attention as ea
from course_utils.checks import Evaluation, exercises
from course_utils.checks import grading as G
from course_utils.checks.grading import channel as channels
from course_utils.checks.grading import judge, kernel_side

QUADRATIC = {"tiled_attention": r"your tiled_attention built a tensor of shape \((1, 2, )?64, 64\).*ONE tile",
             "tiled_attention_backward": r"your backward pass built a tensor of shape \(1, 2, 64, 64\).*P or S of the",
             "linear_attention": r"your function built a tensor of shape \(1, 256, 256\).*never forms"}

# A learner's lesson 13, written from the lesson's text: with QUADRATIC = True each function also builds the one
# T_q x T_k tensor a learner might (the whole causal mask, sliced; a buffer of P for every tile; the weights
# of the quadratic form), the values and the tiles skipped staying right: only a measure of its tensors sees it.
LESSON13 = '''
import math
import torch
import torch.nn.functional as F


def tiled_attention(q, k, v, block_q, block_k, causal=False, mask=None):
    *lead, T_q, d_k = q.shape
    T_k, d_v = k.shape[-2], v.shape[-1]
    whole = torch.ones(T_q, T_k, dtype=torch.bool).tril() if causal and QUADRATIC else None   # T_q x T_k
    if mask is not None:
        mask = torch.broadcast_to(mask, (*lead, T_q, T_k))
    out, lse = q.new_zeros(*lead, T_q, d_v), q.new_zeros(*lead, T_q)
    for i0 in range(0, T_q, block_q):
        i1 = min(i0 + block_q, T_q)
        q_i = q[..., i0:i1, :] / math.sqrt(d_k)
        m, l = q.new_full((*lead, i1 - i0), float("-inf")), q.new_zeros(*lead, i1 - i0)
        acc = q.new_zeros(*lead, i1 - i0, d_v)
        for j0 in range(0, T_k, block_k):
            j1 = min(j0 + block_k, T_k)
            if causal and j0 > i1 - 1:
                continue
            s = q_i @ k[..., j0:j1, :].transpose(-2, -1)
            keep = None
            if causal and j1 - 1 > i0:
                keep = (whole[i0:i1, j0:j1] if whole is not None
                        else torch.arange(j0, j1)[None, :] <= torch.arange(i0, i1)[:, None])
            if mask is not None:
                keep = mask[..., i0:i1, j0:j1] if keep is None else keep & mask[..., i0:i1, j0:j1]
            if keep is not None:
                s = s.masked_fill(~keep, float("-inf"))
            m_new = torch.maximum(m, s.amax(dim=-1))
            safe = torch.where(torch.isneginf(m_new), 0.0, m_new)
            p = torch.exp(s - safe[..., None])
            rescale = torch.exp(m - safe)
            l = l * rescale + p.sum(dim=-1)
            acc = acc * rescale[..., None] + p @ v[..., j0:j1, :]
            m = m_new
        seen = l > 0
        out[..., i0:i1, :] = torch.where(seen[..., None], acc / torch.where(seen, l, 1.0)[..., None], 0.0)
        lse[..., i0:i1] = torch.where(seen, m + torch.log(torch.where(seen, l, 1.0)), float("-inf"))
    return out, lse


def tiled_attention_backward(q, k, v, out, lse, grad_out, block_q, block_k, causal=False):
    T_q, T_k = q.shape[-2], k.shape[-2]
    scale = 1 / math.sqrt(q.shape[-1])
    dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    kept = q.new_zeros(*q.shape[:-2], T_q, T_k) if QUADRATIC else None        # P of every tile: T_q x T_k
    D = (grad_out * out).sum(dim=-1)
    for i0 in range(0, T_q, block_q):
        i1 = min(i0 + block_q, T_q)
        q_i, do_i = q[..., i0:i1, :], grad_out[..., i0:i1, :]
        for j0 in range(0, T_k, block_k):
            j1 = min(j0 + block_k, T_k)
            if causal and j0 > i1 - 1:
                continue
            s = q_i @ k[..., j0:j1, :].transpose(-2, -1) * scale
            if causal and j1 - 1 > i0:
                s = s.masked_fill(torch.arange(j0, j1)[None, :] > torch.arange(i0, i1)[:, None], float("-inf"))
            p = torch.exp(s - lse[..., i0:i1, None])
            if kept is not None:
                kept[..., i0:i1, j0:j1] = p
            dv[..., j0:j1, :] += p.transpose(-2, -1) @ do_i
            ds = p * (do_i @ v[..., j0:j1, :].transpose(-2, -1) - D[..., i0:i1, None])
            dq[..., i0:i1, :] += ds @ k[..., j0:j1, :] * scale
            dk[..., j0:j1, :] += ds.transpose(-2, -1) @ q_i * scale
    return dq, dk, dv


def linear_attention(q, k, v):
    phi_q, phi_k = F.elu(q) + 1, F.elu(k) + 1
    if QUADRATIC:
        weights = phi_q @ phi_k.transpose(-2, -1)                                # T_q x T_k
        return weights / weights.sum(-1, keepdim=True) @ v
    return (phi_q @ (phi_k.transpose(-2, -1) @ v)) / (phi_q @ phi_k.sum(dim=-2)[..., None])
'''
ANSWERS = ("tiled_attention", "tiled_attention_backward", "linear_attention")


def learner_functions(quadratic):
    """The notebook's three functions, defined in this process (module "__main__", as a notebook's are)."""
    space = {"QUADRATIC": quadratic, "__name__": "__main__"}
    exec(compile(LESSON13, "<notebook>", "exec"), space)   # noqa: S102 - the test's own learner code
    return {name: space[name] for name in ANSWERS}


def lesson13_checks():
    return [c for c in exercises()["13"] if c.learner_name in ANSWERS]


@contextlib.contextmanager
def served(defined):
    """A judge's channel to a kernel side serving `defined` (the notebook's answers) from a thread."""
    with tempfile.TemporaryDirectory() as io_dir:
        channel = channels.Channel.listen(io_dir, kill=lambda: None)
        server = kernel_side.Server(defined, dict(defined))
        thread = threading.Thread(target=server.serve, args=(channel.path, channel.token), daemon=True)
        thread.start()
        assert channel.accept(30)
        try:
            yield channel
        finally:
            channel.close()
            thread.join(30)


def judged(answers, offset=3):
    with served(answers) as channel:
        return judge.judge(channel, lesson13_checks(), check_timeout=120, offset=offset)


# ---------------------------------------------------------------------------------------------
# In this process, over the socket
# ---------------------------------------------------------------------------------------------
def test_a_measured_call_of_the_grader_s_proxy_is_measured_in_the_kernel():
    def scores_then_scaled_in_place(q, k):
        s = q @ k.transpose(-2, -1)                   # (1, 32, 48)
        q.mul_(2)
        return s.sum(-1)

    q, k = torch.randn(1, 32, 8), torch.randn(1, 48, 8)
    before = q.clone()
    with served({"f": scores_then_scaled_in_place}) as channel:
        answer = channel.control("answer", name="f")["answer"]
        ev = Evaluation()
        result, elements, shape = ev.call_measured(answer, q, k)
    assert elements == 32 * 48 and shape == (1, 32, 48)
    assert torch.allclose(result, (q @ k.transpose(-2, -1)).sum(-1), atol=1e-4)
    assert ev.modified == ["q"] and torch.equal(q, before) and len(ev.calls) == 1   # (it changed a copy)


def test_quadratic_answers_are_wrong_through_the_grader_and_right_ones_pass():
    outcomes = judged(learner_functions(quadratic=True))
    for name, words in QUADRATIC.items():
        status, message = outcomes[name]
        assert status == "wrong" and re.search(words, message), (name, message)
    outcomes = judged(learner_functions(quadratic=False))
    assert {name: status for name, (status, _) in outcomes.items()} == dict.fromkeys(ANSWERS, "passed"), outcomes


def test_the_code_the_reference_hands_its_work_to_is_watched():
    """`tiled_attention` is `return _tiled_forward(...)`: running it (directly, or through the sliding window
    with a window over everything) is running the reference; its other helpers are not watched."""
    forms = {
        "the helper": lambda q, k, v, bq, bk, causal=False, mask=None: ea._tiled_forward(q, k, v, bq, bk, causal,
                                                                                          mask, None),
        "the sliding window": lambda q, k, v, bq, bk, causal=False, mask=None: (   # (lse wrong: copied all the same)
            ea.sliding_window_attention(q, k, v, (k.shape[-2], k.shape[-2]), bq, bk, causal=causal, mask=mask),
            torch.zeros(q.shape[:-1])),
    }
    for form, answer in forms.items():
        status, message = judged({"tiled_attention": answer})["tiled_attention"]
        assert status == "copied", f"{form}: {status}: {message}"
        assert "course_utils.efficient_attention.tiled_attention (through course_utils.efficient_attention." \
               "_tiled_forward, the code it hands its whole work to)" in message, message

    def own_with_the_helpers(q, k, v):     # the lesson's checks of its inputs and its feature map: not the answer
        ea._check_qkv(q, k, v)
        phi_q, phi_k = ea.elu_feature_map(q), F.elu(k) + 1
        return (phi_q @ (phi_k.transpose(-2, -1) @ v)) / (phi_q @ phi_k.sum(dim=-2)[..., None])

    assert judged({"linear_attention": own_with_the_helpers})["linear_attention"][0] == "passed"
    assert judge.reference_codes(ea.tiled_attention_backward) == [
        ("efficient_attention.py", ea.tiled_attention_backward.__code__.co_firstlineno, "tiled_attention_backward")]


# ---------------------------------------------------------------------------------------------
# In the sandbox, as `course-grade` grades a class
# ---------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_the_sandboxed_grader_rejects_the_T_by_T_tensor_and_passes_the_tiles(tmp_path):
    klass = tmp_path / "class"
    for learner, quadratic in (("quadratic", True), ("tiles", False)):
        cells = [f"QUADRATIC = {quadratic}", textwrap.dedent(LESSON13)]
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
        (klass / learner).mkdir(parents=True)
        nbformat.write(nb, klass / learner / "13_attention_at_scale.ipynb")
    lines = []
    status = G.grade([str(klass)], out=str(tmp_path / "grades.csv"), log=lines.append, jobs=2, timeout=300,
                     cell_timeout=120, check_timeout=120)
    assert status == 0, "\n".join(lines)
    with open(tmp_path / "grades.csv", newline="", encoding="utf-8") as f:
        got = {(r["learner"], r["exercise"]): (r["outcome"], r["message"]) for r in csv.DictReader(f)}
    for name, words in QUADRATIC.items():
        outcome, message = got[("quadratic", name)]
        assert outcome == "wrong" and re.search(words, message), (name, outcome, message)
        assert got[("tiles", name)][0] == "passed", (name, got[("tiles", name)])


def test_a_measurement_not_of_its_form_counts_as_nothing_measured():
    """The kernel's reply is its data: a forged or broken measurement never crashes the judge (and claims no
    more than a kernel that reports 0 could)."""
    from course_utils.checks.grading.remote import _measurement

    assert _measurement([1.5, 12, [3, 4]]) == (1.5, 12, (3, 4)) and _measurement([1.5, 0, None]) == (1.5, 0, None)
    for forged in ([1.5, "12", None], [1.5, -1, None], [1.5, 12, ["a"]], [1.5, True, None], 1.5, [1.5, 12]):
        assert _measurement(forged)[1:] == (0, None), forged
