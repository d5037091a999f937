"""Lesson 11, exercise 4: SNAIL's dense block, a gated causal dilated convolution.

    dense_block(x (B, T, d_in), W_f (2, d_in, filters), W_g (2, d_in, filters), dilation d)
        -> [x, tanh(x_t W_f[0] + x_(t−d) W_f[1]) ⊙ σ(x_t W_g[0] + x_(t−d) W_g[1])]  (B, T, d_in + filters)

x_(t−d) is 0 where t < d. The check runs three blocks with d_in ≠ filters (a missing concatenation shows in the shape,
one on another axis raises) and dilations 4, 2, 1 with T > d, the first with a batch larger than d: the number of
steps, causality (the inputs after step T // 2 changed), then the values; then float64 inputs (the dtype kept) and a
dilation longer than the sequence.
"""
import torch

from ...snail import DenseBlock
from ..core import ExerciseError, exercise, expect, expect_shape, randn, single_threaded
from ..evaluation import Evaluation
from ..expectations import explained, fail
from ..torch_errors import BMM, BROADCAST, CAT, CONV_CHANNELS, MATMUL
from .crashes import call, raised
from .dense_block_mistakes import FUTURE, VALUES, M, conv1d_block, delayed, wrong
from .float64 import expect_dtype, mixed


def dense_block_reference(x, W_f, W_g, dilation):
    """The exercise's signature around course_utils.snail.DenseBlock (biases 0).

    x: (B, T, d_in); W_f, W_g: (2, d_in, filters), W[0] on x_t and W[1] on x_(t−d)."""
    d_in, filters = W_f.shape[1:]
    with torch.random.fork_rng(devices=[]):          # building the block draws random weights: keep the seed
        block = DenseBlock(d_in, filters, dilation).to(x.dtype)
    with torch.no_grad():
        for conv, W in ((block.conv_f.conv, W_f), (block.conv_g.conv, W_g)):
            conv.weight.copy_(torch.stack([W[1].T, W[0].T], dim=-1))   # nn.Conv1d's tap 0 is x_(t−d), tap 1 x_t
            conv.bias.zero_()
        return block(x)                                               # (B, T, d_in + filters)


def crashes(T, d_in, filters, d):
    """The crashes of the typical slips, named (for crashes.call)."""
    def product(inner, transposed):
        """What x_t or x_(t−d) with `inner` features times a matrix that does not fit (a tap (filters, d_in) if
        `transposed`) comes from."""
        if inner == d_in + d:
            return M.padded_features.at(width=d_in + d, d_in=d_in)
        return M.taps_transposed if transposed and filters != d_in else M.product_shapes

    def bmm(m):          # a batched product: the second factor should start (B, inner), it starts (B, rows)
        inner, rows = int(m["want"].split(",")[-1]), int(m["got"].split(",")[-1])
        return product(inner, (inner, rows) == (d_in, filters))
    return [
        (MATMUL, lambda m: product(int(m["c1"]), (int(m["r2"]), int(m["c2"])) == (filters, d_in))),
        (BMM, bmm),
        (CAT, lambda m: M.concat_axis.at(axis=m["dim"]) if m["dim"] != "2" else M.concat_steps.at(d=d)),
        (BROADCAST, lambda m: M.past_not_cut.at(Td=T + d, T=T, d=d) if m["dim"] == "1" and {int(m["a"]), int(m["b"])}
         == {T, T + d} else None),
        (CONV_CHANNELS, lambda m: M.conv1d_layout if int(m["got"]) == T else None),
    ]


def _expect_causal(ev: Evaluation, answer, x, W_f, W_g, d, out, t):
    """Changing the inputs after step t leaves the outputs at steps 0..t unchanged; else name the leak."""
    changed = x.clone()
    changed[:, t + 1:] = randn(ev.rng(1000 + d), x.shape[0], x.shape[1] - t - 1, x.shape[2])
    after = ev.call(answer, changed, W_f, W_g, d)
    if not hasattr(after, "shape") or tuple(after.shape) != tuple(out.shape):
        return
    diff = (after[:, :t + 1] - out[:, :t + 1]).detach().abs().amax(dim=(0, 2))     # (t + 1,)
    if not bool(torch.any(diff > 1e-5)):
        return
    for mistake, leak in M.variants(FUTURE, x, W_f, W_g, d).items():
        if tuple(leak.shape) == tuple(out.shape) and torch.allclose(out, leak, atol=1e-5):
            fail(mistake)
    fail(M.future_leak.at(s=int(torch.nonzero(diff > 1e-5)[0]), t=t))


def _shifted_features(ev: Evaluation, answer, x, W_f, W_g, d, out):
    """M.shifted_features when `out` is the block with x_(t−d) shifted along the FEATURES; where d >= d_in that shift
    leaves only zeros, as a missing past step does: the answer is then run with d = 1 to tell the two apart."""
    def shifted(out, dilation):
        wrong_out = M.shifted_features.run(x, W_f, W_g, dilation)
        return hasattr(out, "shape") and tuple(out.shape) == tuple(wrong_out.shape) and torch.allclose(
            torch.as_tensor(out).detach().float(), wrong_out.float(), atol=1e-5)
    d_in = x.shape[-1]
    if not shifted(out, d) or (d >= d_in and d_in < 2):
        return None
    if d >= d_in:
        try:
            if not shifted(ev.call(answer, x, W_f, W_g, 1), 1):
                return None
        except ExerciseError:             # the answer cannot run with d = 1: the values say what it gives
            return None
    return M.shifted_features


def _stacked(x, W_f, W_g, d):
    """[x_t, x_(t−d)] times the taps stacked tap by tap, (2·d_in, filters)."""
    both = torch.cat([x, delayed(x, d)], -1)
    return torch.cat([x, torch.tanh(both @ W_f.reshape(-1, W_f.shape[-1])) * torch.sigmoid(
        both @ W_g.reshape(-1, W_g.shape[-1]))], -1)


def _rolled(x, d):
    """x_(t−d) as x rolled by d steps, the d steps wrapped round to the start set to 0."""
    past = torch.roll(x, d, dims=1)
    past[:, :d] = 0
    return past


@exercise("dense_block (SNAIL's gated causal convolution)", reference=dense_block_reference, mistakes=M,
          right=[wrong(), _stacked, wrong(past=_rolled), conv1d_block(lambda d: (d, 0)),
                 conv1d_block(lambda d: (d, d), keep=lambda out, T: out[:, :T])])
@single_threaded
def dense_block(ev: Evaluation, answer):
    """answer(x (B, T, d_in), W_f, W_g, dilation) -> (B, T, d_in + filters)."""
    tests = 0
    for seed, (B, T, d_in, filters, d) in enumerate([(5, 11, 3, 5, 4), (1, 9, 4, 2, 2), (3, 6, 5, 3, 1)]):
        g = ev.rng(125 + seed)
        x = randn(g, B, T, d_in)
        W_f, W_g = randn(g, 2, d_in, filters), randn(g, 2, d_in, filters)
        out = call(ev, answer, x, W_f, W_g, d, errors=crashes(T, d_in, filters, d))
        if not hasattr(out, "shape"):
            expect_shape(out, (B, T, d_in + filters), "the block's output")
        if len(out.shape) == 3 and out.shape[1] != T:
            fail((M.steps_dropped if out.shape[1] < T else M.steps_added).at(steps=out.shape[1], T=T, d=d))
        expected = dense_block_reference(x, W_f, W_g, d)
        mistakes = M.variants(VALUES, x, W_f, W_g, d)
        what = f"the block's output (x of shape {(B, T, d_in)}, {filters} filters, d = {d})"
        if tuple(out.shape) != tuple(expected.shape):      # names a missing concatenation, else the shapes
            ev.expect_close(out, expected, what, mistakes=mistakes)
        _expect_causal(ev, answer, x, W_f, W_g, d, out, t=T // 2)
        symptom = _shifted_features(ev, answer, x, W_f, W_g, d, out)
        expect(symptom is None, symptom)
        ev.expect_close(out, expected, what, mistakes=mistakes)
        tests += 1
    _in_float64(ev, answer)
    _long_dilation(ev, answer)
    return tests + 3


def _in_float64(ev: Evaluation, answer):
    """The block in float64: new tensors (the delayed sequence) take x's dtype (and device)."""
    g = ev.rng(129)
    x, W_f, W_g = (randn(g, *shape).double() for shape in ((2, 6, 3), (2, 3, 4), (2, 3, 4)))
    out = call(ev, answer, x, W_f, W_g, 2, errors=[mixed(M)] + crashes(6, 3, 4, 2))
    expect_dtype(out, "output", M)
    ev.expect_close(out, dense_block_reference(x, W_f, W_g, 2), "the block's output on float64 inputs",
                    mistakes=M.variants(VALUES, x, W_f, W_g, 2))


def _long_dilation(ev: Evaluation, answer):
    """d = 8 > T = 5: x_(t−d) is 0 at every step."""
    g = ev.rng(127)
    x, W_f, W_g = randn(g, 2, 5, 3), randn(g, 2, 3, 4), randn(g, 2, 3, 4)
    try:
        out = ev.call(answer, x, W_f, W_g, 8)
    except ExerciseError as error:
        fail(M.long_dilation.at(d=8, T=5, what=f"raises ({raised(error)})"))
    with explained(lambda: M.long_dilation.at(d=8, T=5, what="gives other values")):
        ev.expect_close(out, dense_block_reference(x, W_f, W_g, 8), "the block's output with d = 8, T = 5")

