"""Lesson 14's checks pass the references and other right answers, report a stub as not implemented, and reject
every named mistake with its named symptom, under every seed offset."""
import copy

import pytest
import torch

from course_utils import attention_sinks, induction, rollout
from course_utils.checks import lesson14 as check
from tests.checking import named, not_implemented, prints_not_implemented

pytestmark = pytest.mark.usefixtures("any_seed_offset")   # every test under every seed offset

CHECKS = [check.head_scores, check.ablation_effect, check.keep_sinks_and_window, check.attention_rollout]


@pytest.mark.parametrize("exercise", CHECKS, ids=lambda c: c.exercise)
def test_reference_passes_and_stub_is_not_implemented(exercise, capsys):
    assert exercise(exercise.reference) is None
    assert "✔" in capsys.readouterr().out
    with prints_not_implemented():
        exercise(not_implemented)


# --- other right answers pass ------------------------------------------------------------------
def scores_by_diagonal(weights, half_length):
    L = half_length
    previous = torch.diagonal(weights, offset=-1, dim1=-2, dim2=-1).mean(-1)
    induction_ = torch.diagonal(weights, offset=-(L - 1), dim1=-2, dim2=-1)[..., 1:].mean(-1)
    return previous, induction_


def ablation_on_a_copy(model, tokens, layer, head, half_length):
    """Zeroes the head's columns of W_O on a deep copy (W_O's bias stays: the same as zeroing the head)."""
    L = half_length
    clean = induction.loss_per_position(model, tokens)[L:2 * L - 1].mean()
    ablated_model = copy.deepcopy(model)
    attn = ablated_model.layers[layer].attn
    with torch.no_grad():
        attn.out_proj.weight[:, head * attn.d_head:(head + 1) * attn.d_head] = 0
    return (induction.loss_per_position(ablated_model, tokens)[L:2 * L - 1].mean() - clean).item()


def sinks_with_index(k, v, sinks, window):
    t = k.size(-2)
    if t <= sinks + window:
        return k, v
    keep = torch.cat([torch.arange(sinks), torch.arange(t - window, t)])
    return k[..., keep, :], v[..., keep, :]


def rollout_with_a_loop(maps):
    T = maps.size(-1)
    result = torch.eye(T).expand(maps.size(1), T, T)
    for layer in range(maps.size(0)):
        a = 0.5 * torch.eye(T) + 0.5 * maps[layer].mean(1)
        result = (a / a.sum(-1, keepdim=True)) @ result
    return result


@pytest.mark.parametrize("exercise, answer", [
    (check.head_scores, scores_by_diagonal),
    (check.ablation_effect, ablation_on_a_copy),
    (check.keep_sinks_and_window, sinks_with_index),
    (check.attention_rollout, rollout_with_a_loop),
])
def test_other_right_answers_pass(exercise, answer):
    outcome = exercise.evaluate(answer)
    assert outcome.passed, outcome.message


# --- exercise 1: the scores ---------------------------------------------------------------------
def _scores(prev_kind=None, ind_kind=None):
    def answer(weights, half_length):
        v = check._score_variants(weights, half_length)
        prev, ind = induction.head_scores(weights, half_length)
        return (v[prev_kind] if prev_kind else prev), (v[ind_kind] if ind_kind else ind)
    return answer


@pytest.mark.parametrize("prev_kind, ind_kind, words", [
    (None, "ind_off", "previous occurrence of the current token itself"),
    (None, "ind_off_2", "two after the previous occurrence"),
    (None, "ind_diagonal", "averaged over the first copy too"),
    (None, "ind_over_all", "averaged over the first copy too"),
    ("prev_self", None, r"diagonal, weights\[t, t\]"),
    ("prev_self_from_1", None, r"diagonal, weights\[t, t\]"),
    ("prev_with_first", None, "query 0 has no token before it"),
    ("prev_second", None, "second copy only"),
    ("prev_swapped", "ind_swapped", "queries and keys are swapped"),
    (None, "ind_swapped", "queries and keys are swapped"),
    ("prev_block", None, "a whole block of weights"),
    (None, "ind_block", "a whole block of weights"),
    ("prev_short", None, "previous-token score leaves out the last query"),
    (None, "ind_short", "induction score leaves out the last query"),
    ("prev_batch", None, "averaged over the batch as well"),
    (None, "ind_batch", "averaged over the batch as well"),
    (None, "ind_heads", "averaged over the heads as well"),
    (None, "ind_early", "induction queries are one position early"),
    (None, "ind_late", "induction score leaves out the second copy's first query, t = L"),
    ("prev_late", None, "previous-token score leaves out the first query, t = 1"),
])
def test_score_mistakes(prev_kind, ind_kind, words):
    named(check.head_scores, _scores(prev_kind, ind_kind), words)


def test_scores_transposed_weights():
    named(check.head_scores, lambda w, L: induction.head_scores(w.transpose(-1, -2), L),
          "queries and keys are swapped")


def test_scores_averaged_over_the_batch():
    named(check.head_scores, lambda w, L: tuple(s.mean(0) for s in induction.head_scores(w, L)),
          "one score per sequence and head")


def test_scores_in_the_wrong_order():
    named(check.head_scores, lambda w, L: induction.head_scores(w, L)[::-1], "wrong order")


# --- exercise 2: ablation -----------------------------------------------------------------------
def _second(model, tokens, L, positions=None):
    return induction.loss_per_position(model, tokens)[positions or slice(L, 2 * L - 1)].mean().item()


def ablation_sign(model, tokens, layer, head, L):
    return -induction.ablation_effect(model, tokens, layer, head, L)


def ablation_without_subtracting(model, tokens, layer, head, L):
    with induction.ablate_heads(model, [(layer, head)]):
        return _second(model, tokens, L)


def ablation_over_the_whole_sequence(model, tokens, layer, head, L):
    everything = slice(0, 2 * L - 1)
    clean = _second(model, tokens, L, everything)
    with induction.ablate_heads(model, [(layer, head)]):
        return _second(model, tokens, L, everything) - clean


def ablation_with_the_first_token(model, tokens, layer, head, L):
    early = slice(L - 1, 2 * L - 1)
    clean = _second(model, tokens, L, early)
    with induction.ablate_heads(model, [(layer, head)]):
        return _second(model, tokens, L, early) - clean


def ablation_of_output_rows(model, tokens, layer, head, L):
    clean = _second(model, tokens, L)
    other = copy.deepcopy(model)
    attn = other.layers[layer].attn
    with torch.no_grad():
        attn.out_proj.weight[head * attn.d_head:(head + 1) * attn.d_head] = 0
        attn.out_proj.bias[head * attn.d_head:(head + 1) * attn.d_head] = 0
    return _second(other, tokens, L) - clean


def ablation_of_values_without_bias(model, tokens, layer, head, L):
    clean = _second(model, tokens, L)
    other = copy.deepcopy(model)
    attn = other.layers[layer].attn
    lo = 2 * attn.d_model + head * attn.d_head
    with torch.no_grad():
        attn.in_proj.weight[lo:lo + attn.d_head] = 0
    return _second(other, tokens, L) - clean


def ablation_counting_layers_from_1(model, tokens, layer, head, L):
    return induction.ablation_effect(model, tokens, layer - 1, head, L)


def ablation_left_in_place(model, tokens, layer, head, L):
    clean = _second(model, tokens, L)
    attn = model.layers[layer].attn
    with torch.no_grad():
        attn.out_proj.weight[:, head * attn.d_head:(head + 1) * attn.d_head] = 0
    return _second(model, tokens, L) - clean


def ablation_hook_not_removed(model, tokens, layer, head, L):
    clean = _second(model, tokens, L)
    attn = model.layers[layer].attn
    lo, hi = head * attn.d_head, (head + 1) * attn.d_head

    def zero(module, args):
        z = args[0].clone()
        z[..., lo:hi] = 0
        return (z,)
    attn.out_proj.register_forward_pre_hook(zero)
    return _second(model, tokens, L) - clean


def _zeroing(lo_hi):
    """The ablation with a pre-hook that zeroes features lo_hi(head, d_head) of W_O's input."""
    def answer(model, tokens, layer, head, L):
        clean = _second(model, tokens, L)
        attn = model.layers[layer].attn
        lo, hi = lo_hi(head, attn.d_head)

        def zero(module, args):
            z = args[0].clone()
            z[..., lo:hi] = 0
            return (z,)
        handle = attn.out_proj.register_forward_pre_hook(zero)
        try:
            return _second(model, tokens, L) - clean
        finally:
            handle.remove()
    return answer


def ablation_unshifted(model, tokens, layer, head, L):
    def loss():
        logits = model(tokens)
        return torch.nn.functional.cross_entropy(logits.transpose(1, 2), tokens, reduction="none")[:, L:2 * L - 1]

    with torch.no_grad():
        clean = loss().mean()
        with induction.ablate_heads(model, [(layer, head)]):
            return float(loss().mean() - clean)


def ablation_in_eval_mode(model, tokens, layer, head, L):
    model.eval()
    return induction.ablation_effect(model, tokens, layer, head, L)


def ablation_in_training_mode(model, tokens, layer, head, L):
    result = induction.ablation_effect(model, tokens, layer, head, L)
    model.train()
    return result


@pytest.mark.parametrize("answer, words", [
    (ablation_sign, "sign is reversed"),
    (_zeroing(lambda j, d: (j, j + d)), "slice of W_O's input is wrong"),
    (_zeroing(lambda j, d: (j * d, j + 1 * d)), "slice of W_O's input is wrong"),
    (ablation_unshifted, "the loss is not shifted"),
    (ablation_in_eval_mode, "left the model in eval mode"),
    (ablation_in_training_mode, "left the model in training mode"),
    (ablation_without_subtracting, "how much it RISES"),
    (ablation_over_the_whole_sequence, "averaged over the whole sequence"),
    (ablation_with_the_first_token, "includes its first token"),
    (ablation_of_output_rows, "W_O's OUTPUT"),
    (ablation_of_values_without_bias, "rows of W_V but not its bias"),
    (ablation_counting_layers_from_1, "another layer's head"),
    (ablation_left_in_place, "changed the model's weights"),
    (ablation_hook_not_removed, "hook is still registered"),
])
def test_ablation_mistakes(answer, words):
    named(check.ablation_effect, answer, words)


# --- exercise 3: sinks and window ----------------------------------------------------------------
def _sinks(kind, dim=-2):
    def answer(k, v, sinks, window):
        if kind == "no_copy_when_short":
            return check._cut(k, sinks, window, "axis"), check._cut(v, sinks, window, "axis")
        t = k.size(dim)
        if t <= sinks + window and kind != "axis":
            return k, v
        return check._cut(k, sinks, window, kind, dim), check._cut(v, sinks, window, kind, dim)
    return answer


@pytest.mark.parametrize("kind, words", [
    ("plain", "plain sliding window"),
    ("plain_total", "you kept the last sinks \\+ window"),
    ("short", "one position short"),
    ("long", "one position too long"),
    ("reversed", "the sinks come after the window"),
    ("oldest", "OLDEST positions"),
    ("no_copy_when_short", "return it unchanged"),
])
def test_sink_cache_mistakes(kind, words):
    named(check.keep_sinks_and_window, _sinks(kind), words)


def test_sink_cache_along_the_heads_axis():
    named(check.keep_sinks_and_window, _sinks("axis", dim=1), "wrong axis")


def test_sink_cache_values_not_cut():
    named(check.keep_sinks_and_window,
          lambda k, v, s, w: (attention_sinks.keep_sinks_and_window(k, v, s, w)[0], v), "are not cut")


def test_sink_cache_in_the_wrong_order():
    named(check.keep_sinks_and_window, lambda k, v, s, w: attention_sinks.keep_sinks_and_window(k, v, s, w)[::-1],
          "wrong order")


# --- exercise 4: rollout ---------------------------------------------------------------------------
@pytest.mark.parametrize("kind, words", [
    ("reversed", "wrong order"),
    ("no_residual", "residual connection is missing"),
    ("unnormalised", "rows that sum to 2"),
    ("residual_once", "added once, to the product"),
    ("max", "by their maximum"),
    ("sum", "heads are summed"),
    ("first", "only the first head"),
    ("last", "last layer's"),
    ("first_layer", "first layer's"),
    ("first_raw", "the first layer has no residual"),
    ("skip_first", "the first layer is left out"),
    ("skip_last", "the last layer is left out"),
    ("columns", "columns of Ã are renormalised instead of its rows"),
    ("half_attention", "not weighted equally"),
    ("half_identity", "not weighted equally"),
    ("elementwise", "element by element"),
    ("no_renorm", "rows of Ã = 0.5·I \\+ 0.5·A are not renormalised"),
    ("renorm_before", "A's rows are renormalised before the identity is added"),
])
def test_rollout_mistakes(kind, words):
    named(check.attention_rollout, lambda maps: check._rollout_variant(maps, kind), words)


def test_rollout_averaged_over_the_batch():
    def answer(maps):
        return rollout.attention_rollout(maps.transpose(1, 2))
    named(check.attention_rollout, answer, "over its HEADS")


# --- the families named since the fresh slips of tests/fresh_slips/lesson14i.py ------------------------
def ablation_one_position_late(model, tokens, layer, head, L):
    clean = _second(model, tokens, L, slice(L + 1, 2 * L))
    with induction.ablate_heads(model, [(layer, head)]):
        return _second(model, tokens, L, slice(L + 1, 2 * L)) - clean


def _zeroing_projection(part):
    """The ablation that zeroes the head's queries (part 0) or keys (part 1) in a copy: rows and bias."""
    def answer(model, tokens, layer, head, L):
        ablated = copy.deepcopy(model)
        attn = ablated.layers[layer].attn
        lo = part * attn.d_model + head * attn.d_head
        with torch.no_grad():
            attn.in_proj.weight[lo:lo + attn.d_head] = 0
            attn.in_proj.bias[lo:lo + attn.d_head] = 0
        return _second(ablated, tokens, L) - _second(model, tokens, L)
    return answer


@pytest.mark.parametrize("answer, words", [
    (ablation_one_position_late, "positions L\\+1 .. 2L-1 of loss_per_position, one too late"),
    (_zeroing_projection(0), "zeroed the head's queries or keys"),
    (_zeroing_projection(1), "zeroed the head's queries or keys"),
])
def test_ablation_mistakes_of_the_fresh_slips(answer, words):
    named(check.ablation_effect, answer, words)


def test_sink_cache_concatenated_along_the_features():
    def answer(k, v, sinks, window):
        t = k.size(-2)
        if t <= sinks + window:
            return k, v
        return tuple(torch.cat([x[..., :sinks, :], x[..., t - window:, :]], dim=-1) for x in (k, v))
    named(check.keep_sinks_and_window, answer, "wrong axis")


@pytest.mark.parametrize("mix, words", [
    (lambda k, v, cut: (cut(k, k), cut(v, k)), "the values v hold positions of k"),
    (lambda k, v, cut: (cut(k, k), cut(k, v)), "the values v hold positions of k"),
    (lambda k, v, cut: (cut(k, v), cut(v, v)), "the keys k hold positions of v"),
    (lambda k, v, cut: (cut(k, k), cut(k, k)), "the values v hold positions of k"),
])
def test_sink_cache_copy_paste_between_k_and_v(mix, words):
    def answer(k, v, sinks, window):
        t = k.size(-2)
        if t <= sinks + window:
            return k, v

        def cut(first, last):
            return torch.cat([first[..., :sinks, :], last[..., t - window:, :]], dim=-2)
        return mix(k, v, cut)
    named(check.keep_sinks_and_window, answer, words)
