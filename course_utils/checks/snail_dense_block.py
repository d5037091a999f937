"""Lesson 11's SNAIL dense block, for its check: the reference with the exercise's signature, the
planted mistakes (a wrong tap, padding on the wrong side, a wrong gate), the PyTorch errors of its slips
(padding the wrong axis, concatenating on the wrong one), and the causality probe."""
import torch
import torch.nn.functional as F

from ..snail import DenseBlock
from .core import ExerciseError, expect, randn
from .evaluation import Evaluation
from .lesson11_mistakes import call


def dense_block_reference(x, W_f, W_g, dilation):
    """The exercise's signature around course_utils.snail.DenseBlock (biases 0).

    x: (B, T, d_in); W_f, W_g: (2, d_in, filters), W[0] on x_t and W[1] on x_{t−d}.
    """
    d_in, filters = W_f.shape[1:]
    with torch.random.fork_rng(devices=[]):          # building the block draws random weights: keep the seed
        block = DenseBlock(d_in, filters, dilation).to(x.dtype)
    with torch.no_grad():
        for conv, W in ((block.conv_f.conv, W_f), (block.conv_g.conv, W_g)):
            conv.weight.copy_(torch.stack([W[1].T, W[0].T], dim=-1))   # nn.Conv1d's tap 0 is x_{t−d}, tap 1 x_t
            conv.bias.zero_()
        return block(x)                                               # (B, T, d_in + filters)


def _delayed(x, d):
    """x_{t−d} along time (B, T, C), zeros where t − d is outside 0..T−1 (d < 0: the future)."""
    T = x.shape[1]
    if d >= 0:
        return F.pad(x, (0, 0, d, 0))[:, :T]
    return F.pad(x, (0, 0, 0, -d))[:, -d:]


def _gated(x, W_f, W_g, past, present=True, taps=(0, 1), act_f=torch.tanh, act_g=torch.sigmoid, combine="product"):
    """The new features tanh(W_f^(0) x_t + W_f^(1) past_t) ⊙ σ(...), or a mistaken variant of them."""
    def conv(W):
        out = past @ W[taps[1]] if past is not None else 0
        return out + (x @ W[taps[0]] if present else 0)
    if combine == "sum":
        return act_f(conv(W_f)) + act_g(conv(W_g))
    return act_f(conv(W_f)) * act_g(conv(W_g))


def _dense_mistakes(x, W_f, W_g, d):
    """{symptom: what a dense block with that mistake returns}, x (B, T, d_in)."""
    past = _delayed(x, d)
    new = _gated(x, W_f, W_g, past)
    cat = lambda features: torch.cat([x, features], dim=-1)
    mistakes = {}
    if d != 1:
        mistakes[f"the dilation is ignored: step t is mixed with x_{{t−1}}, not x_{{t−d}} (d = {d} here); delay x "
                 f"by d steps, with d zeros on the left."] = cat(_gated(x, W_f, W_g, _delayed(x, 1)))
    mistakes[f"the delayed sequence is x itself, not x_{{t−d}}: after padding d = {d} zeros on the left, keep the "
              "FIRST T steps ([:, :T]); the last T steps are x again."] = cat(_gated(x, W_f, W_g, x))
    unzeroed = _delayed(x, d)
    unzeroed[:, :d] = x[:, :d]                          # a shifted copy of x whose first d steps were left as x
    mistakes[f"the first d = {d} steps of x_{{t−d}} are x_t itself, not 0: a copy of x shifted by d (past = x.clone(); "
             "past[:, d:] = x[:, :-d]) keeps x_t at steps 0..d−1, where x_{t−d} lies before the start and is 0; set "
             "past[:, :d] = 0 too, or pad: F.pad(x, (0, 0, d, 0))[:, :T]."] = cat(_gated(x, W_f, W_g, unzeroed))
    mistakes.update({
        f"the past tap is off by one: step t is mixed with x_{{t−d+1}}, not x_{{t−d}} (d = {d} here); pad with "
        f"exactly d zeros on the left and keep the first T steps.": cat(_gated(x, W_f, W_g, _delayed(x, d - 1))),
        f"the past tap is off by one: step t is mixed with x_{{t−d−1}}, not x_{{t−d}} (d = {d} here); pad with "
        f"exactly d zeros on the left and keep the first T steps.": cat(_gated(x, W_f, W_g, _delayed(x, d + 1))),
        "the kernel's two taps are swapped: W[0] multiplies the present x_t and W[1] the past x_{t−d} "
        "(with F.conv1d, whose tap 0 is the older input, the kernel is torch.stack([W[1].T, W[0].T], -1)).":
            cat(_gated(x, W_f, W_g, past, taps=(1, 0))),
        "tanh and σ are swapped (or W_f and W_g): the filter W_f goes through tanh, the gate W_g through σ.":
            cat(_gated(x, W_f, W_g, past, act_f=torch.sigmoid, act_g=torch.tanh)),
        "the gate is missing: multiply tanh(filter) by σ(gate), elementwise.":
            cat(_gated(x, W_f, W_g, past, act_g=lambda z: 1.0)),
        "the gate goes through tanh: the filter W_f goes through tanh, the gate W_g through σ (values in 0..1, "
        "how much of the filter passes).": cat(_gated(x, W_f, W_g, past, act_g=torch.tanh)),
        "the filter goes through σ: the filter W_f goes through tanh (values in -1..1), the gate W_g through σ.":
            cat(_gated(x, W_f, W_g, past, act_f=torch.sigmoid)),
        "the filter goes through ReLU: WaveNet's gate is tanh(filter) ⊙ σ(gate).":
            cat(_gated(x, W_f, W_g, past, act_f=torch.relu)),
        "tanh(filter) and σ(gate) are added: the gate MULTIPLIES the filter, elementwise (⊙).":
            cat(_gated(x, W_f, W_g, past, combine="sum")),
        "the present step is missing: each convolution is W^(0) x_t + W^(1) x_{t−d}, both taps.":
            cat(_gated(x, W_f, W_g, past, present=False)),
        "the past step is missing: each convolution is W^(0) x_t + W^(1) x_{t−d}, both taps.":
            cat(_gated(x, W_f, W_g, None)),
        "the output should be [x, new features] concatenated on the last axis, shape (B, T, d_in + filters): "
        "return torch.cat([x, new], dim=-1).": new,
        "x and the new features are concatenated in the wrong order: torch.cat([x, new], dim=-1), x first.":
            torch.cat([new, x], dim=-1),
        "the block's output starts with the delayed x_{t−d}: concatenate x itself, torch.cat([x, new], dim=-1).":
            torch.cat([past, new], dim=-1),
        "the gate uses W_f: the gate's convolution has weights of its own, σ(W_g^(0) x_t + W_g^(1) x_{t−d}).":
            cat(_gated(x, W_f, W_f, past)),
        "one tap serves both steps, W[0] (x_t + x_{t−d}): W[0] multiplies the present x_t and W[1] the past x_{t−d}.":
            cat(_gated(x, W_f, W_g, past, taps=(0, 0))),
        "tanh wraps the product, tanh(filter ⊙ σ(gate)): the new features are tanh(filter) ⊙ σ(gate), tanh on the "
        "filter alone.": cat(torch.tanh((x @ W_f[0] + past @ W_f[1]) * torch.sigmoid(x @ W_g[0] + past @ W_g[1]))),
        "the hand-written σ is σ(−z): σ(z) = 1 / (1 + exp(−z)) (or torch.sigmoid).":
            cat(_gated(x, W_f, W_g, past, act_g=lambda z: torch.sigmoid(-z))),
        "the delayed sequence is x itself with its first d steps zeroed (x_past[:, d:] = x[:, d:]): x_{t−d} is x "
        "SHIFTED by d steps, x_past[:, d:] = x[:, :-d], or F.pad(x, (0, 0, d, 0))[:, :T].":
            cat(_gated(x, W_f, W_g, torch.cat([torch.zeros_like(x[:, :d]), x[:, d:]], 1))),
        "σ is missing on the gate: the new features are tanh(filter) ⊙ σ(gate); the gate is raw here.":
            cat(_gated(x, W_f, W_g, past, act_g=lambda z: z)),
        "tanh is missing on the filter: the new features are tanh(filter) ⊙ σ(gate) (F.glu computes filter ⊙ "
        "σ(gate), without the tanh).": cat(_gated(x, W_f, W_g, past, act_f=lambda z: z)),
        "the gate's past tap uses W_f[1]: the gate is σ(x_t @ W_g[0] + x_{t−d} @ W_g[1]), all from W_g.":
            cat(torch.tanh(x @ W_f[0] + past @ W_f[1]) * torch.sigmoid(x @ W_g[0] + past @ W_f[1])),
        "the filter's past tap uses W_g[1]: the filter is tanh(x_t @ W_f[0] + x_{t−d} @ W_f[1]), all from W_f.":
            cat(torch.tanh(x @ W_f[0] + past @ W_g[1]) * torch.sigmoid(x @ W_g[0] + past @ W_g[1])),
    })
    both = torch.cat([x, past], dim=-1)                 # (B, T, 2·d_in), [x_t, x_{t−d}]
    interleaved = [W.transpose(0, 1).reshape(2 * W.shape[1], -1) for W in (W_f, W_g)]   # rows (feature, tap)
    mistakes["the stacked taps are interleaved: W.transpose(0, 1).reshape(2·d_in, filters) orders the rows feature by "
             "feature (x_t's feature 0, x_{t−d}'s feature 0, ...), so they no longer line up with [x_t, x_{t−d}] "
             "concatenated. Stack the taps whole, torch.cat([W[0], W[1]], dim=0) (W.reshape(2·d_in, filters)): rows "
             "0..d_in−1 for x_t, the next d_in for x_{t−d}."] = cat(
        torch.tanh(both @ interleaved[0]) * torch.sigmoid(both @ interleaved[1]))
    if x.shape[0] > 1:
        first = _delayed(x[:1], d).expand_as(x)         # every sequence's past taken from the first one's
        mistakes["the delayed sequence comes from the first sequence of the batch for every sequence: build "
                 "x_{t−d} from all of x, (B, T, d_in), e.g. F.pad(x, (0, 0, d, 0))[:, :T]."] = cat(
            _gated(x, W_f, W_g, first))
    return mistakes


def _future_mistakes(x, W_f, W_g, d):
    """The dense blocks that look into the future, and what each one returns."""
    T = x.shape[1]
    rolled = torch.roll(x, d, dims=1)                   # x_{(t−d) mod T}: the last d steps wrap to the start
    return {
        f"the block looks into the future: step t is mixed with x_{{t+d}}, not x_{{t−d}}: the d = {d} zeros "
        "are padded on the right; pad on the LEFT (F.pad(x, (0, 0, d, 0)) for x of shape (B, T, C)).":
            torch.cat([x, _gated(x, W_f, W_g, _delayed(x, -d))], -1),
        f"the block looks into the future: torch.roll wraps the last d = {d} steps round to the start, so steps "
        f"0..{d - 1} see the end of the sequence; pad with d zeros on the left instead.":
            torch.cat([x, _gated(x, W_f, W_g, rolled)], -1) if d < T else None,
    }


def padded_features(ev: Evaluation, answer, x, W_f, W_g, d, out):
    """The symptom when `out` is the block with x_{t−d} replaced by x shifted d places along the FEATURES
    (F.pad(x, (d, 0))[..., :d_in]), else None. Where d >= d_in that shift leaves only zeros, as a missing past
    step does: the answer is then run with d = 1 to tell the two apart."""
    d_in = x.shape[-1]

    def shifted_block(out, dilation):
        wrong = torch.cat([x, _gated(x, W_f, W_g, F.pad(x, (dilation, 0))[..., :d_in])], -1)
        return hasattr(out, "shape") and tuple(out.shape) == tuple(wrong.shape) and torch.allclose(
            torch.as_tensor(out).detach().float(), wrong, atol=1e-5)
    if not shifted_block(out, d) or (d >= d_in and d_in < 2):
        return None
    if d >= d_in:
        try:
            if not shifted_block(ev.call(answer, x, W_f, W_g, 1), 1):
                return None
        except ExerciseError:
            return None
    return (f"x_{{t−d}} is x shifted along the features, not the steps: F.pad(x, (d, 0)) pads the LAST axis (F.pad "
            f"lists the last axis first), so the d = {d} zeros went in front of the features and [..., :d_in] cut "
            "the last ones off. Pad the steps: F.pad(x, (0, 0, d, 0))[:, :T].")


def steps_symptom(steps, T, d):
    """The output has `steps` steps, not T: say which padding gives that."""
    if steps < T:
        return (f"the output has {steps} steps, not T = {T}: the convolution dropped d = {d} steps. Pad x with d "
                "zeros on the left first, so that every step t has an x_{t−d} (zero when t < d).")
    return (f"the output has {steps} steps, not T = {T}: padding on both sides adds steps. Pad x with d = {d} zeros "
            "on the left only.")


def dense_block_errors(T, d_in, d):
    """The PyTorch errors of the dense block's typical slips, named (for lesson11_mistakes.call)."""
    def concatenated(match):
        if int(match.group(1)) != 2:
            return (f"x and the new features are concatenated along axis {match.group(1)}: they go side by side "
                    "along the LAST axis (the features), torch.cat([x, new], dim=-1); batch and steps stay as they "
                    "are.")
        return (f"x and the new features could not be concatenated: they have different numbers of steps. The "
                f"convolution must keep all T steps: pad x with d = {d} zeros on the left (and only on the left) "
                "before it.")

    def matmul(match):
        if int(match.group(2)) == d_in + d:
            return (f"F.pad(x, (d, 0)) pads the LAST axis, the features: x_{{t−d}} then has d_in + d = {d_in + d} "
                    f"features instead of {d_in}. F.pad lists the last axis first: pad the steps with "
                    "F.pad(x, (0, 0, d, 0)).")
        return ("a matrix product has shapes that do not fit: each convolution is x_t @ W[0] + x_{t−d} @ W[1], "
                "with x and x_{t−d} of shape (B, T, d_in) and W[0], W[1] of shape (d_in, filters).")
    def steps(match):
        if {int(match.group(1)), int(match.group(2))} == {T, T + d}:
            return (f"x_{{t−d}} has T + d = {T + d} steps, x has T = {T}: after padding d = {d} zeros on the left, "
                    "keep the FIRST T steps ([:, :T]).")
        return None
    return [
        (r"Sizes of tensors must match except in dimension (\d+)", concatenated),
        (r"size of tensor a \((\d+)\) must match the size of tensor b \((\d+)\) at non-singleton dimension 1", steps),
        (r"cannot be multiplied \((\d+)x(\d+) and (\d+)x(\d+)\)", matmul),
        (r"expected input\[\d+, (\d+), (\d+)\] to have \d+ channels",
         "F.conv1d takes x as (B, channels, T): transpose x to (B, d_in, T) before it, and its output back to "
         "(B, T, filters) after."),
    ]


def _expect_causal(ev: Evaluation, answer, x, W_f, W_g, d, out, t):
    """Changing the inputs after step t leaves the outputs at steps 0..t unchanged; else name the leak."""
    g = ev.rng(1000 + d)
    changed = x.clone()
    changed[:, t + 1:] = randn(g, x.shape[0], x.shape[1] - t - 1, x.shape[2])
    after = ev.call(answer, changed, W_f, W_g, d)
    if not hasattr(after, "shape") or tuple(after.shape) != tuple(out.shape):
        return
    diff = (after[:, :t + 1] - out[:, :t + 1]).detach().abs().amax(dim=(0, 2))     # (t + 1,)
    if not bool(torch.any(diff > 1e-5)):
        return
    for symptom, wrong in _future_mistakes(x, W_f, W_g, d).items():
        if wrong is not None and tuple(wrong.shape) == tuple(out.shape) and torch.allclose(out, wrong, atol=1e-5):
            raise ExerciseError(symptom)
    s = int(torch.nonzero(diff > 1e-5)[0])
    raise ExerciseError(f"the output at step {s} changed when only the inputs after step {t} changed: the block "
                        "looks into the future. Pad with d zeros on the LEFT only (not on the right, not on both "
                        "sides), so that step t mixes x_t with x_{t−d}, zero when t < d.")


def expect_any_dtype(ev: Evaluation, answer):
    """The block in float64: new tensors (the delayed sequence) must take x's dtype and device, as the exercise
    says (torch.zeros(B, T, d_in) is float32 on the CPU whatever x is)."""
    g = ev.rng(129)
    x, W_f, W_g = (randn(g, *shape).double() for shape in ((2, 6, 3), (2, 3, 4), (2, 3, 4)))
    made = ("make new tensors with x's dtype and device: the delayed sequence as F.pad(x, (0, 0, d, 0))[:, :T], "
            "x.new_zeros(...) or torch.zeros_like(x); torch.zeros(B, T, d_in) is float32 on the CPU, whatever x is "
            "(and on a GPU it would be on the wrong device).")
    out = call(ev, answer, x, W_f, W_g, 2, errors=[
        (r"same dtype|dtype .* (!=|but got)|expected scalar type|Float.*Double|Double.*Float",
         f"the block fails on float64 inputs, mixing float32 and float64: {made}")] + dense_block_errors(6, 3, 2))
    dtype = getattr(out, "dtype", type(out).__name__)
    expect(dtype == torch.float64, f"on float64 inputs the block returns {dtype}: {made}")
    ev.expect_close(out, dense_block_reference(x, W_f, W_g, 2), "the block's output on float64 inputs",
                    mistakes=_dense_mistakes(x, W_f, W_g, 2))
