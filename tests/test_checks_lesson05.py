"""Lesson 05 checks: the reference passes, planted mistakes are named, stubs say 'not implemented'."""
import pytest
import torch
import torch.nn.functional as F

from course_utils import memory as ref
from course_utils.checks import ExerciseError
from course_utils.checks import lesson05 as check
from tests.checking import named, not_implemented, prints_not_implemented

pytestmark = pytest.mark.usefixtures("any_seed_offset")   # every test under every seed offset

CHECKS = {
    check.memory_read: ref.memory_read,
    check.memory_write: ref.memory_write,
    check.cosine_similarity: ref.cosine_similarity,
    check.content_addressing: ref.content_addressing,
    check.interpolate: ref.interpolate,
    check.shift: ref.shift,
    check.sharpen: ref.sharpen,
    check.head_parameters: ref.head_parameters,
}


@pytest.mark.parametrize("exercise", list(CHECKS), ids=lambda c: c.__name__)
def test_reference_passes(exercise):
    assert exercise(CHECKS[exercise]) is None
@pytest.mark.parametrize("exercise", list(CHECKS), ids=lambda c: c.__name__)
def test_not_implemented(exercise):
    with prints_not_implemented():
        exercise(not_implemented)


def test_not_callable():
    with pytest.raises(ExerciseError, match="expected your function"):
        check.shift(ref.shift(torch.ones(1, 3) / 3, torch.ones(1, 3) / 3))


# ---------------------------------------------------------------- planted mistakes
def read_unweighted(memory, w):
    return memory.sum(-2)


def read_mean(memory, w):
    return (w.unsqueeze(-1) * memory).mean(-2)


def read_broadcasts(memory, w):
    return w @ memory  # (B, N) @ (B, N, M) -> (B, B, M)


def read_crashes(memory, w):
    return memory @ w  # (B, N, M) @ (B, N): wrong shapes


def read_not_summed(memory, w):
    return w.unsqueeze(-1) * memory


def read_sums_columns(memory, w):
    return (w.unsqueeze(-1) * memory).sum(-1)


@pytest.mark.parametrize("fn, match", [
    (read_unweighted, "without weighting them by w"),
    (read_mean, "weighted SUM"),
    (read_broadcasts, "broadcasts the batch"),
    (read_crashes, "your function raised"),
    (read_not_summed, "did not sum them"),
    (read_sums_columns, "summed over the columns"),
])
def test_memory_read_mistakes(fn, match):
    with pytest.raises(ExerciseError, match=match):
        check.memory_read(fn)


def write_add_then_erase(memory, w, e, a):
    W = w.unsqueeze(-1)
    return (memory + W * a.unsqueeze(-2)) * (1 - W * e.unsqueeze(-2))


def write_erase_all(memory, w, e, a):
    return memory * (1 - e.unsqueeze(-2)) + w.unsqueeze(-1) * a.unsqueeze(-2)


def write_no_erase(memory, w, e, a):
    return memory + w.unsqueeze(-1) * a.unsqueeze(-2)


def write_e_a_swapped(memory, w, e, a):
    return ref.memory_write(memory, w, a, e)


def write_subtracts(memory, w, e, a):
    W = w.unsqueeze(-1)
    return memory - W * e.unsqueeze(-2) + W * a.unsqueeze(-2)


def write_add_ignores_w(memory, w, e, a):
    return memory * (1 - w.unsqueeze(-1) * e.unsqueeze(-2)) + a.unsqueeze(-2)


@pytest.mark.parametrize("fn, match", [
    (write_add_then_erase, "added before erasing"),
    (write_erase_all, "erase ignores w"),
    (write_no_erase, "nothing is erased"),
    (write_e_a_swapped, "e and a are swapped"),
    (write_subtracts, "subtracted w e"),
    (write_add_ignores_w, "add ignores w"),
])
def test_memory_write_mistakes(fn, match):
    with pytest.raises(ExerciseError, match=match):
        check.memory_write(fn)


def cosine_no_eps(k, memory):
    dot = (memory @ k.unsqueeze(-1)).squeeze(-1)
    return dot / (memory.norm(dim=-1) * k.norm(dim=-1, keepdim=True))


def cosine_dot_only(k, memory):
    return (memory @ k.unsqueeze(-1)).squeeze(-1)


def cosine_no_eps_nan_only_zero_memory(k, memory):  # eps added but with an `or` that breaks on zero
    norms = memory.norm(dim=-1) * k.norm(dim=-1, keepdim=True)
    return (memory @ k.unsqueeze(-1)).squeeze(-1) / torch.where(norms > 0, norms, torch.zeros_like(norms))


def cosine_k_only(k, memory):
    return (memory @ k.unsqueeze(-1)).squeeze(-1) / (k.norm(dim=-1, keepdim=True) + 1e-8)


def cosine_memory_only(k, memory):
    return (memory @ k.unsqueeze(-1)).squeeze(-1) / (memory.norm(dim=-1) + 1e-8)


def cosine_squared_norms(k, memory):
    return (memory @ k.unsqueeze(-1)).squeeze(-1) / ((memory ** 2).sum(-1) * (k ** 2).sum(-1, keepdim=True) + 1e-8)


@pytest.mark.parametrize("fn, match", [
    (cosine_k_only, "divided by \\|k\\| only"),
    (cosine_memory_only, "divided by \\|M\\(i\\)\\| only"),
    (cosine_squared_norms, "not square-rooted"),
    (cosine_no_eps, "zero memory row gives NaN"),
    (cosine_dot_only, "without dividing by the norms"),
    (cosine_no_eps_nan_only_zero_memory, "NaN"),
])
def test_cosine_mistakes(fn, match):
    with pytest.raises(ExerciseError, match=match):
        check.cosine_similarity(fn)


def content_without_beta(k, beta, memory):
    return torch.softmax(ref.cosine_similarity(k, memory), -1)


def content_beta_as_temperature(k, beta, memory):
    return torch.softmax(ref.cosine_similarity(k, memory) / beta, -1)


def content_wrong_axis(k, beta, memory):
    return torch.softmax(beta * ref.cosine_similarity(k, memory), 0)


def content_cosine_without_eps(k, beta, memory):
    return torch.softmax(beta * cosine_no_eps(k, memory), -1)


def content_divides_by_max(k, beta, memory):
    e = torch.exp(beta * ref.cosine_similarity(k, memory))
    return e / e.amax(-1, keepdim=True)


def content_no_exp(k, beta, memory):
    x = beta * ref.cosine_similarity(k, memory)
    return x / x.sum(-1, keepdim=True)


@pytest.mark.parametrize("fn, match", [
    (content_divides_by_max, "largest exp instead of the sum"),
    (content_no_exp, "without exp"),
    (content_without_beta, "key strength beta is missing"),
    (content_cosine_without_eps, "zero memory row gives NaN"),
    (content_beta_as_temperature, "divided by beta"),
    (content_wrong_axis, "wrong axis"),
])
def test_content_addressing_mistakes(fn, match):
    with pytest.raises(ExerciseError, match=match):
        check.content_addressing(fn)


def interpolate_reversed(w_c, w_prev, g):
    return g * w_prev + (1 - g) * w_c


def interpolate_no_complement(w_c, w_prev, g):
    return g * w_c + w_prev


def interpolate_ignores_prev(w_c, w_prev, g):
    return w_c


@pytest.mark.parametrize("fn, match", [
    (interpolate_reversed, "g is reversed"),
    (interpolate_no_complement, "not multiplied by \\(1 - g\\)"),
    (interpolate_ignores_prev, "w_prev is ignored"),
    (lambda w_c, w_prev, g: (w_c + w_prev) / 2, "averaged w_c and w_prev"),
    (lambda w_c, w_prev, g: g * w_c, "previous weighting is missing"),
])
def test_interpolate_mistakes(fn, match):
    with pytest.raises(ExerciseError, match=match):
        check.interpolate(fn)


def shift_zero_padding(w, s):
    R = s.shape[-1] // 2
    N = w.shape[-1]
    padded = F.pad(w, (R, R))
    return sum(s[..., R + k:R + k + 1] * padded[..., R - k:R - k + N] for k in range(-R, R + 1))


def shift_reversed(w, s):
    return ref.shift(w, s.flip(-1))


def shift_unnormalised_scale(w, s):
    return ref.shift(w, s) * 2


def _rolls(w, s, **dims):
    R = s.shape[-1] // 2
    return torch.stack([torch.roll(w, k, **dims) for k in range(-R, R + 1)], dim=-1)


def shift_unweighted(w, s):
    return _rolls(w, s, dims=-1).mean(-1)


def shift_roll_without_dims(w, s):
    return (_rolls(w, s) * s.unsqueeze(-2)).sum(-1)


def shift_roll_batch_axis(w, s):
    return (_rolls(w, s, dims=0) * s.unsqueeze(-2)).sum(-1)


@pytest.mark.parametrize("fn, match", [
    (shift_zero_padding, "not circular"),
    (shift_reversed, "wrong way"),
    (shift_unnormalised_scale, "must still sum to 1"),
    (shift_unweighted, "not weighted by s"),
    (shift_roll_without_dims, "without dims="),
    (shift_roll_batch_axis, "roll over the wrong axis"),
])
def test_shift_mistakes(fn, match):
    with pytest.raises(ExerciseError, match=match):
        check.shift(fn)


def sharpen_no_renormalise(w, gamma):
    return w ** gamma


def sharpen_times_gamma(w, gamma):
    w = w * gamma
    return w / w.sum(-1, keepdim=True)


def sharpen_softmax(w, gamma):  # a different sharpening: not a power
    return torch.softmax(gamma * w, -1)


@pytest.mark.parametrize("fn, match", [
    (sharpen_no_renormalise, "not renormalised"),
    (sharpen_times_gamma, "multiplied by gamma"),
    (sharpen_softmax, "softmax\\(gamma \\* w\\)"),
    (lambda w, gamma: w ** gamma / (w ** gamma).amax(-1, keepdim=True), "largest w\\(j\\)\\*\\*gamma"),
    (lambda w, gamma: w ** gamma / (w ** gamma).sum(0, keepdim=True), "wrong axis"),
])
def test_sharpen_mistakes(fn, match):
    with pytest.raises(ExerciseError, match=match):
        check.sharpen(fn)


def _heads(raw, M, S, beta_fn=F.softplus, g_fn=torch.sigmoid, gamma_fn=lambda x: 1 + F.softplus(x)):
    k, beta, g, s, gamma = torch.split(raw, [M, 1, 1, S, 1], dim=-1)
    return k, beta_fn(beta), g_fn(g), torch.softmax(s, -1), gamma_fn(gamma)


def heads_gamma_softplus(raw, M, S):
    return _heads(raw, M, S, gamma_fn=F.softplus)


def heads_no_sigmoid(raw, M, S):
    return _heads(raw, M, S, g_fn=lambda x: x)


def heads_beta_raw(raw, M, S):
    return _heads(raw, M, S, beta_fn=lambda x: x)


def heads_s_wrong_axis(raw, M, S):
    k, beta, g, s, gamma = torch.split(raw, [M, 1, 1, S, 1], dim=-1)
    return k, F.softplus(beta), torch.sigmoid(g), torch.softmax(s, 0), 1 + F.softplus(gamma)


def heads_reversed(raw, M, S):
    return _heads(raw, M, S)[::-1]


def heads_four_values(raw, M, S):
    return _heads(raw, M, S)[:4]


@pytest.mark.parametrize("fn, match", [
    (heads_gamma_softplus, "gamma must be >= 1"),
    (heads_no_sigmoid, "apply a sigmoid"),
    (heads_beta_raw, "beta must be >= 0"),
    (heads_s_wrong_axis, "s: softmax over the wrong axis"),
    (heads_reversed, "wrong order"),
    (heads_four_values, "return 5 things"),
])
def test_head_parameters_mistakes(fn, match):
    with pytest.raises(ExerciseError, match=match):
        check.head_parameters(fn)


# ------------------------------------------------- the slips of tests/fresh_slips/lesson05h.py, as families
def _read_squeeze_all(memory, w):
    return (w.unsqueeze(1) @ memory).squeeze()


def _read_untransposed(memory, w):
    return (memory @ w.unsqueeze(-1)).squeeze(-1)


def _read_softmax_w(memory, w):
    return ref.memory_read(memory, torch.softmax(w, -1))


def _read_softmax_sharper(memory, w):            # another change of w: a one-hot w no longer reads its row
    return ref.memory_read(memory, torch.softmax(3 * w, -1))


def _read_argmax(memory, w):
    return memory[torch.arange(memory.shape[0]), w.argmax(-1)]


def _read_squared_weights(memory, w):            # right on a one-hot w, not on a spread one
    return ref.memory_read(memory, w ** 2)


def _read_sum_batch(memory, w):
    return (w.unsqueeze(-1) * memory).sum(0)


@pytest.mark.parametrize("fn, words", [
    (_read_squeeze_all, r"batch of one \(B = 1\).*squeeze\(\) without a dim"),
    (_read_untransposed, r"contracts w with the row width M"),
    (_read_softmax_w, r"applied a softmax to w"),
    (_read_softmax_sharper, r"one-hot weighting w on row i should read exactly row i"),
    (_read_argmax, r"only the most weighted row \(argmax\)"),
    (_read_squared_weights, r"w = 0.5 on two rows.*EVERY row"),
    (_read_sum_batch, r"summed over the batch axis"),
])
def test_memory_read_slips(fn, words):
    named(check.memory_read, fn, words)


def _write_e_not_unsqueezed(memory, w, e, a):
    w = w.unsqueeze(-1)
    return memory * (1 - w * e) + w * a.unsqueeze(-2)


def _write_a_not_unsqueezed(memory, w, e, a):
    w = w.unsqueeze(-1)
    return memory * (1 - w * e.unsqueeze(-2)) + w * a


@pytest.mark.parametrize("fn", [_write_e_not_unsqueezed, _write_a_not_unsqueezed])
def test_memory_write_without_the_rows_axis(fn):
    named(check.memory_write, fn, r"without the rows' axis.*e.unsqueeze\(-2\) and a.unsqueeze\(-2\)")


def _cos(dot, norms, eps=1e-8):
    return dot / (norms + eps)


def _dot(k, memory):
    return (memory @ k.unsqueeze(-1)).squeeze(-1)


def _cos_eps_numerator(k, memory, eps=1e-6):
    return (_dot(k, memory) + eps) / (memory.norm(dim=-1) * k.norm(dim=-1, keepdim=True) + eps)


def _cos_key_norm_all(k, memory, eps=1e-8):
    return _cos(_dot(k, memory), memory.norm(dim=-1) * k.norm())


def _cos_memory_norm_all(k, memory, eps=1e-8):
    return _cos(_dot(k, memory), memory.norm() * k.norm(dim=-1, keepdim=True))


def _cos_k_not_unsqueezed(k, memory, eps=1e-8):
    return _cos((k * memory).sum(-1), memory.norm(dim=-1) * k.norm(dim=-1, keepdim=True))


def _cos_key_norm_no_keepdim(k, memory, eps=1e-8):
    return _cos(_dot(k, memory), memory.norm(dim=-1) * k.norm(dim=-1))


def _cos_squeeze_all(k, memory, eps=1e-8):
    norms = memory.norm(dim=-1, keepdim=True) * k.norm(dim=-1, keepdim=True).unsqueeze(-1)   # (B, N, 1)
    return ((memory @ k.unsqueeze(-1)) / (norms + eps)).squeeze()


@pytest.mark.parametrize("fn, words", [
    (_cos_eps_numerator, r"zero memory row gets similarity 1.*numerator"),
    (_cos_key_norm_all, r"k.norm\(\) without a dim"),
    (_cos_memory_norm_all, r"memory.norm\(\) without a dim"),
    (_cos_k_not_unsqueezed, r"without the rows' axis.*k.unsqueeze\(-2\)"),
    (_cos_key_norm_no_keepdim, r"without the rows' axis.*keepdim=True"),
    (_cos_squeeze_all, r"batch of one \(B = 1\).*squeeze\(\) without a dim"),
])
def test_cosine_slips(fn, words):
    named(check.cosine_similarity, fn, words)


@pytest.mark.parametrize("fn, words", [
    (lambda k, beta, memory: torch.softmax(beta * _dot(k, memory), -1), r"dot product k.M\(i\) instead of the cosine"),
    (lambda k, beta, memory: torch.softmax(F.softplus(beta) * ref.cosine_similarity(k, memory), -1),
     r"applied softplus to beta"),
])
def test_content_addressing_slips(fn, words):
    named(check.content_addressing, fn, words)


@pytest.mark.parametrize("fn, words", [
    (lambda w_c, w_prev, g: torch.where(g > 0.5, w_c, w_prev), r"gate is rounded to 0 or 1"),
    (lambda w_c, w_prev, g: ref.interpolate(w_c, w_prev, torch.round(g)), r"gate is rounded to 0 or 1"),
    (lambda w_c, w_prev, g: torch.softmax(g * w_c + (1 - g) * w_prev, -1), r"applied a softmax to the mix"),
])
def test_interpolate_slips(fn, words):
    named(check.interpolate, fn, words)


def _shift_zeros_accumulator(w, s):
    R = s.shape[-1] // 2
    out = torch.zeros(w.shape)
    for j, k in enumerate(range(-R, R + 1)):
        out += s[:, j:j + 1] * torch.roll(w, k, dims=-1)      # (in place: stays float32)
    return out


def _shift_column_without_axis(w, s):
    R = s.shape[-1] // 2
    return sum(s[:, j] * torch.roll(w, k, dims=-1) for j, k in enumerate(range(-R, R + 1)))


def _shift_from_zero(w, s):
    return sum(s[:, j:j + 1] * torch.roll(w, j, dims=-1) for j in range(s.shape[-1]))


@pytest.mark.parametrize("fn, words", [
    (lambda w, s: ref.shift(w, torch.softmax(s, -1)), r"applied a softmax to s"),
    (_shift_zeros_accumulator, r"float64 weightings returned torch.float32.*zeros_like"),
    (_shift_column_without_axis, r"value per example of shape \(B,\).*s\[:, j:j \+ 1\]"),
    (_shift_from_zero, r"shifts run 0..2R instead of -R..R"),
])
def test_shift_slips(fn, words):
    named(check.shift, fn, words)


def _sharpen_no_keepdim(w, gamma):
    w = w ** gamma
    return w / w.sum(-1)


def _sharpen_square_root(w, gamma):              # any power below 1 flattens
    w = w ** 0.5
    return w / w.sum(-1, keepdim=True)


@pytest.mark.parametrize("fn, words", [
    (_sharpen_no_keepdim, r"value per example of shape \(B,\).*keepdim=True"),
    (lambda w, gamma: torch.softmax(w ** gamma, -1), r"softmax of w\*\*gamma"),
    (lambda w, gamma: ref.sharpen(w, 1 / gamma), r"power 1 / gamma"),
    (_sharpen_square_root, r"lowered the largest weight"),
])
def test_sharpen_slips(fn, words):
    named(check.sharpen, fn, words)


def _heads_split(raw, M, S, sizes, order=("k", "beta", "g", "s", "gamma"), dim=-1):
    parts = dict(zip(order, torch.split(raw, sizes, dim=dim)))
    return (parts["k"], F.softplus(parts["beta"]), torch.sigmoid(parts["g"]), torch.softmax(parts["s"], -1),
            1 + F.softplus(parts["gamma"]))


def _heads_slice_off_by_one(raw, M, S):
    k, beta, g, s, gamma = ref.head_parameters(raw, M, S)
    return k, beta, g, torch.softmax(raw[..., M + 1:M + 1 + S], -1), gamma


def _heads_slices_fixed_three(raw, M, S):
    k, beta, g, _, gamma = ref.head_parameters(raw, M, S)
    return k, beta, g, torch.softmax(raw[..., M + 2:M + 5], -1), gamma


@pytest.mark.parametrize("fn, words", [
    (lambda raw, M, S: _heads(raw, M, S, gamma_fn=lambda x: F.softplus(1 + x)), r"softplus\(1 \+ x\)"),
    (lambda raw, M, S: _heads(raw, M, S, g_fn=torch.tanh), r"g uses tanh"),
    (lambda raw, M, S: _heads_split(raw, M, S, [M, 1, 1, 1, S], order=("k", "beta", "g", "gamma", "s")),
     r"s comes from entries \d+..\d+ of raw's last axis"),
    (_heads_slice_off_by_one, r"s comes from entries \d+..\d+ of raw's last axis"),
    (lambda raw, M, S: _heads_split(raw, M, S, [M, 1, 1, 3, 1]), r"split sizes .* num_shifts"),
    (_heads_slices_fixed_three, r"s has 3 entries where num_shifts = 5"),
    (lambda raw, M, S: _heads_split(raw, M, S, [M, 1, 1, S, 1], dim=1), r"split raw along dim 1.*LAST axis"),
])
def test_head_parameters_slips(fn, words):
    named(check.head_parameters, fn, words)


# ------------------------------------------------- the slips of tests/fresh_slips/lesson05i.py, as families
def _write_subtracts_add(memory, w, e, a):
    W = w.unsqueeze(-1)
    return memory * (1 - W * e.unsqueeze(-2)) - W * a.unsqueeze(-2)


def _write_add_squared_weight(memory, w, e, a):            # another wrong add step
    W = w.unsqueeze(-1)
    return memory * (1 - W * e.unsqueeze(-2)) + W ** 2 * a.unsqueeze(-2)


def _write_erase_sqrt_weight(memory, w, e, a):             # another wrong erase step
    W = w.unsqueeze(-1)
    return memory * (1 - W.sqrt() * e.unsqueeze(-2)) + W * a.unsqueeze(-2)


@pytest.mark.parametrize("fn, words", [
    (_write_subtracts_add, r"subtracted the add term"),
    (_write_add_squared_weight, r"with e = 0 \(nothing erased\).*the add step is wrong"),
    (_write_erase_sqrt_weight, r"with a = 0 \(nothing added\).*the erase step is wrong"),
])
def test_memory_write_steps(fn, words):
    named(check.memory_write, fn, words)


def _cos_norms_added(k, memory, eps=1e-8):
    return _cos(_dot(k, memory), memory.norm(dim=-1) + k.norm(dim=-1, keepdim=True))


def _cos_root_of_norms(k, memory, eps=1e-8):               # any denominator that is not |k| |M(i)|
    return _cos(_dot(k, memory), (memory.norm(dim=-1) * k.norm(dim=-1, keepdim=True)).sqrt())


@pytest.mark.parametrize("fn, words", [
    (_cos_norms_added, r"added the two norms.*PRODUCT"),
    (_cos_root_of_norms, r"scaled by 4 .* only on the directions"),
])
def test_cosine_denominators(fn, words):
    named(check.cosine_similarity, fn, words)


def _content_exp_over_sum(k, beta, memory):
    x = torch.exp(beta * ref.cosine_similarity(k, memory))
    return x / x.sum(-1, keepdim=True)


def test_content_addressing_overflows():
    named(check.content_addressing, _content_exp_over_sum, r"large key strength.*overflows float32")


@pytest.mark.parametrize("fn, words", [
    (lambda w_c, w_prev, g: ref.interpolate(w_c, w_prev, torch.sigmoid(g)), r"applied a sigmoid to g"),
    (lambda w_c, w_prev, g: ref.interpolate(w_c, w_prev, g ** 2), r"another weight than g"),
    (lambda w_c, w_prev, g: g * w_c + (1 - g) * w_prev.roll(1, -1), r"with g = 0 the result should be w_prev"),
])
def test_interpolate_gate(fn, words):
    named(check.interpolate, fn, words)


def _shift_indexed_by_k(w, s):
    R = s.shape[-1] // 2
    return sum(s[..., k, None] * torch.roll(w, k, dims=-1) for k in range(-R, R + 1))


def _shift_two_swapped(w, s):
    order = list(range(s.shape[-1]))
    order[0], order[1] = 1, 0
    return ref.shift(w, s[..., order])


@pytest.mark.parametrize("fn, words", [
    (_shift_indexed_by_k, r"indexed s by the shift k.*k \+ R"),
    (_shift_two_swapped, r"weights of s go with the wrong shifts"),
])
def test_shift_pairings(fn, words):
    named(check.shift, fn, words)


def _heads_s_dim1(raw, M, S):
    k, beta, g, s, gamma = torch.split(raw, [M, 1, 1, S, 1], dim=-1)
    return k, F.softplus(beta), torch.sigmoid(g), torch.softmax(s, 1), 1 + F.softplus(gamma)


@pytest.mark.parametrize("fn, words", [
    (_heads_s_dim1, r"s: softmax over the wrong axis.*LAST axis"),
    (lambda raw, M, S: _heads(raw, M, S, beta_fn=torch.relu), r"beta uses relu.*softplus"),
    (lambda raw, M, S: _heads(raw, M, S, beta_fn=torch.abs), r"beta uses abs.*softplus"),
    (lambda raw, M, S: _heads(raw, M, S, g_fn=lambda x: x.clamp(0, 1)), r"g uses a clamp to \[0, 1\].*sigmoid"),
    (lambda raw, M, S: _heads(raw, M, S, g_fn=lambda x: torch.softmax(x, -1)), r"g uses a softmax.*always 1"),
    (lambda raw, M, S: _heads(raw, M, S, gamma_fn=lambda x: 1 + torch.relu(x)), r"gamma uses 1 \+ relu"),
])
def test_head_activations(fn, words):
    named(check.head_parameters, fn, words)
