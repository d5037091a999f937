"""Exercise 4's known mistakes of the steps (the sampling distribution): `sampling_variant(logits, temperature,
top_k, top_p, kind)` is the distribution with one typical mistake, the single definition each registry entry's
wrong answer runs; `expect_sampling` compares an answer's distribution with the course's and names the mistake
whose values it gives, or, where none does, what is wrong with the set of tokens top-p keeps."""
import functools

import numpy as np
import torch
import torch.nn.functional as F

from ...decoding import sampling_distribution as ref_sampling
from ..core import Mistake, expect_distribution, expect_shape, to_numpy
from ..evaluation import Evaluation
from ..expectations import explained


def keep_top_p(probs, top_p, kind="ok"):
    """Mask of the nucleus: the most probable tokens until the mass reaches top_p (ties at the end kept);
    kind "drops_crossing" drops the token that crosses p, "p_ascending" takes the LEAST probable first."""
    if kind == "p_ascending":
        ranked = probs.sort(-1).values
        before = (ranked.cumsum(-1) < top_p).sum(-1, keepdim=True)
        return probs <= ranked.gather(-1, before.clamp(max=probs.size(-1) - 1))
    ranked = probs.sort(-1, descending=True).values
    if kind == "cumsum_indices":             # the cumulative sum of the sort's indices (token ids), not its values
        ids = probs.sort(-1, descending=True).indices.to(probs.dtype)
        before = (ids.cumsum(-1) < top_p).sum(-1, keepdim=True)
        return probs >= ranked.gather(-1, before.clamp(max=probs.size(-1) - 1))
    if kind == "unsorted_mask":              # the mask of the sorted row applied to the row as it is
        return (ranked.cumsum(-1) - ranked) < top_p
    if kind == "drops_crossing":             # the tokens whose cumulative mass stays <= p (the first one kept anyway:
        inside = (ranked.cumsum(-1) <= top_p).sum(-1, keepdim=True)         # where it alone crosses p, answers that
        return probs >= ranked.gather(-1, (inside - 1).clamp(min=0))        # keep none give NaN, named before)
    before = (ranked.cumsum(-1) < top_p).sum(-1, keepdim=True)
    return probs >= ranked.gather(-1, before.clamp(max=probs.size(-1) - 1))


def sampling_variant(logits, temperature, top_k, top_p, kind="ok"):
    """The sampling distribution (float64) with the mistake `kind` planted (temperature > 0)."""
    z = logits.double()
    if kind == "temperature_times":
        z = z * temperature
    elif kind == "temperature_twice":
        z = z / temperature ** 2
    elif kind not in ("temperature_after", "temperature_after_filters"):
        z = z / temperature
    if top_k is not None:
        k = min(top_k + (kind == "k_plus_one"), z.size(-1))
        kth = z.topk(k, -1, largest=kind not in ("k_smallest", "kthvalue")).values[..., -1:]
        if kind == "kth_is_max":             # compared with the LARGEST value, not the k-th
            kth = z.max(-1, keepdim=True).values
        if kind == "k_smallest":
            z = z.masked_fill(z > kth, float("-inf"))
        elif kind == "k_minus_one":          # z <= kth removed: the k-th itself goes
            z = z.masked_fill(z <= kth, float("-inf"))
        else:
            z = z.masked_fill(z < kth, 0.0 if kind == "fill_zero" else float("-inf"))
    probs = z.softmax(0 if kind == "softmax_dim0" else -1)
    if kind == "temperature_after":          # the probabilities divided by T: undone by the renormalisation
        probs = probs / temperature
    if top_p is not None and top_p < 1 and not (kind == "top_p_skipped" and top_k is not None):
        base = logits.double().div(temperature).softmax(-1) if kind == "top_p_unfiltered" else probs
        probs = probs * keep_top_p(base, top_p, kind)
    if kind == "temperature_after_filters":  # the filters chose the tokens at T = 1; T applied to what they kept
        kept = probs > 0
        probs = logits.double().div(temperature).softmax(-1) * kept
    if kind == "no_renorm_filtered":         # the softmax's values where a token is kept, else 0
        kept = sampling_variant(logits, temperature, top_k, top_p) > 0
        return logits.double().div(temperature).softmax(-1) * kept
    if kind == "sorted_out":                 # left in the sort's order
        probs = probs.sort(-1, descending=True).values
    if kind == "no_renorm":
        return probs
    if kind == "whole_sum":                  # divided by the sum of the whole tensor, not of each row
        return probs / probs.sum()
    if kind == "softmax_renorm":             # a softmax where a division by the sum was asked
        return probs.softmax(-1)
    return probs / probs.sum(-1, keepdim=True)


def greedy_or(wrong):
    """An answer with the exercise's signature: greedy at temperature 0, `wrong(logits, temperature, top_k, top_p)`
    otherwise."""
    def answer(logits, temperature=1.0, top_k=None, top_p=None):
        if temperature == 0:
            return F.one_hot(logits.argmax(-1), logits.size(-1)).float()
        return wrong(logits, temperature, top_k, top_p)
    return answer


def _variant(kind, says, hint=""):
    return Mistake(kind, says, hint=hint, shows=greedy_or(functools.partial(sampling_variant, kind=kind)))


_UNSORT = ("scatter with the sort's indices, or keep the tokens at least as probable as the last one the sorted row "
           "keeps")
_NUCLEUS = ("the nucleus is the smallest set of most probable tokens whose mass REACHES p, the token that takes the "
            "cumulative sum to p or beyond included")
_KTH = "torch.topk(z, k).values[..., -1:], the last of the k values it returns"
_RENORM = "probs / probs.sum(-1, keepdim=True)"

VARIANTS = [
    _variant("temperature_after", "the temperature has no effect: the LOGITS are divided by T before the softmax "
             "(dividing the probabilities by T is undone when they are renormalised)", "(logits / temperature)"
             ".softmax(-1)"),
    _variant("temperature_times", "the logits are multiplied by the temperature: they are divided by T (T > 1 "
             "flattens the distribution, T < 1 sharpens it)", "logits / temperature"),
    _variant("temperature_after_filters", "top-p chose its tokens from the distribution at T = 1, before the "
             "temperature (the temperature applied after the filters, or top-p reading the raw logits): the logits "
             "are divided by T FIRST, then top-k, then top-p on the distribution they left"),
    _variant("softmax_dim0", "the softmax runs over the rows (axis 0): each row of logits gives its own "
             "distribution, a softmax over the vocabulary, the last axis", "z.softmax(dim=-1)"),
    _variant("temperature_twice", "the temperature is applied twice (the logits divided by T²): they are divided by "
             "T once"),
    _variant("kthvalue", "top-k compares with the k-th SMALLEST logit: the threshold is the k-th largest",
             _KTH + " (torch.kthvalue counts from the smallest)"),
    _variant("k_plus_one", "top-k keeps k+1 tokens: the threshold is the k-th largest logit, counting from 1", _KTH),
    _variant("k_minus_one", "top-k keeps k-1 tokens: it removes the k-th largest logit itself, where only the "
             "logits BELOW it go", "z.masked_fill(z < kth, float('-inf'))"),
    _variant("unsorted_mask", "top-p's mask is in SORTED order (computed on the sorted row and applied to the row as "
             "it is): each token's decision must go back to that token's position", _UNSORT),
    _variant("sorted_out", "top-p's result is in SORTED order (the sorted probabilities returned): each probability "
             "must go back to its token's position", _UNSORT),
    _variant("k_smallest", "top-k keeps the k SMALLEST logits, where it keeps the k largest",
             "torch.topk(z, k) (largest=True, the default)"),
    _variant("kth_is_max", "top-k compares every logit with the LARGEST one: the threshold is the k-th largest",
             "topk(...).values[..., -1:], not [..., 0]"),
    _variant("fill_zero", "top-k sets the removed logits to 0, which still gets probability after the softmax: a "
             "removed logit is -inf", "masked_fill(z < kth, float('-inf'))"),
    _variant("cumsum_indices", "top-p sums the sort's INDICES (the token ids) where it should sum the sorted "
             "probabilities", "probs.sort(...) returns (values, indices): the cumulative sum of the values"),
    _variant("top_p_skipped", "with top-k given, top-p is not applied (one filter or the other): both filters apply, "
             "top-p on the distribution top-k left, renormalised", "if top_k is not None: ...; then, separately, if "
             "top_p is not None and top_p < 1: ..."),
    _variant("drops_crossing", "top-p drops the token that crosses p (it keeps only the tokens whose cumulative mass "
             "stays at most p): " + _NUCLEUS),
    _variant("top_p_unfiltered", "top-p is computed on the distribution before top-k (or applied before top-k, "
             "which gives the same): it filters the distribution top-k left, renormalised, as the order "
             "temperature, top-k, top-p says"),
    _variant("whole_sum", "the probabilities are divided by the sum of the whole tensor: each ROW must sum to 1",
             _RENORM),
    _variant("p_ascending", "top-p keeps the LEAST probable tokens: it keeps the most probable ones, in decreasing "
             "order, until their mass reaches p", "probs.sort(-1, descending=True)"),
    _variant("softmax_renorm", "the kept probabilities are renormalised with a softmax, which gives the removed "
             "tokens probability again: they are divided by their sum", _RENORM),
    _variant("no_renorm_filtered", "the kept probabilities are not renormalised: after the filtered tokens are "
             "zeroed, the rest is divided by its sum so that the distribution sums to 1", _RENORM),
    _variant("no_renorm", "the probabilities top-p keeps are not renormalised: after the tokens outside the nucleus "
             "are zeroed, the rest is divided by its sum so that the distribution sums to 1", _RENORM),
]
VALUE_KEYS = [m.key for m in VARIANTS]


def _cumsum(logits, temperature, top_k, top_p, of="unsorted"):
    """Top-p whose cumulative sum runs over the row as it is (`of` "unsorted"), or over the sorted LOGITS."""
    probs = ref_sampling(logits, temperature, top_k, None)
    if top_p is None or top_p >= 1:
        return probs
    if of == "unsorted":
        keep = (probs.cumsum(-1) - probs) < top_p
    else:
        ranked = (logits / temperature).sort(-1, descending=True).values
        before = (ranked.cumsum(-1) < top_p).sum(-1, keepdim=True)
        keep = probs >= probs.sort(-1, descending=True).values.gather(-1, before.clamp(max=probs.size(-1) - 1))
    probs = probs * keep
    return probs / probs.sum(-1, keepdim=True)


NUCLEUS = [
    Mistake("nucleus_not_most_probable", "{what}: you keep a token of probability {kept:.3f} and drop one of "
            "{dropped:.3f}; the nucleus is the MOST probable tokens, taken in decreasing order until their mass "
            "reaches p", hint="sort the probabilities in decreasing order, take the cumulative sum of the SORTED "
            "ones, and keep tokens until it reaches p", shows=greedy_or(_cumsum)),
    Mistake("nucleus_size", "{what}: you keep the {n} most probable tokens (mass {mass:.3f}); the nucleus is the "
            "smallest such set whose mass reaches p = {top_p}, here {want} tokens", hint="compare the cumulative sum "
            "of the sorted PROBABILITIES with p, and keep the token that crosses it",
            shows=greedy_or(functools.partial(_cumsum, of="logits"))),
]


def nucleus_symptom(M, got, logits, temperature, top_k, top_p, what):
    """What is wrong with the set of tokens `got` keeps under top-p: a token dropped while a less probable one is
    kept, or the wrong number of the most probable tokens. None when that set is the reference's."""
    if top_p is None or top_p >= 1 or temperature == 0 or tuple(np.shape(to_numpy(got))) != tuple(logits.shape):
        return None
    probs = ref_sampling(logits, temperature, top_k, None).double()          # what top-p filters
    kept, want = torch.as_tensor(to_numpy(got)) > 0, ref_sampling(logits, temperature, top_k, top_p) > 0
    for row in range(probs.size(0)):
        p, k = probs[row], kept[row]
        if k.any() and (~k).any() and float(p[~k].max()) > float(p[k].min()) + 1e-9:
            return M.nucleus_not_most_probable.at(what=what, kept=float(p[k].min()), dropped=float(p[~k].max()))
        if int(k.sum()) != int(want[row].sum()):
            return M.nucleus_size.at(what=what, n=int(k.sum()), mass=float(p[k].sum()), top_p=top_p,
                                     want=int(want[row].sum()))
    return None


def _not_offered(top_k, top_p):
    """The mistakes that give another one's values on every input of this kind, or that the check's earlier tests
    name, so that they are not offered here: without top-k, the unrenormalised filters are top-p's alone
    (no_renorm's); with both filters, p_ascending gives top_p_skipped's values on the designed rows, and the top-p
    tests before (on their own) name it."""
    return ("no_renorm_filtered",) if top_k is None else ("p_ascending",) if top_p is not None else ()


def expect_sampling(ev: Evaluation, M, got, logits, temperature, top_k, top_p, what):
    """The learner's distribution `got` equals the reference's, or the mistake it matches is named."""
    expect_shape(got, tuple(logits.shape), what)
    expected = ref_sampling(logits, temperature, top_k, top_p)
    # a softmax over the rows, named where nothing is filtered (the check's first tests): after a filter it may be
    # one-hot like other slips, or NaN in the columns top-k emptied
    unfiltered = top_k is None and (top_p is None or top_p == 1)
    keys = [key for key in VALUE_KEYS if key not in _not_offered(top_k, top_p) and (key != "softmax_dim0" or
                                                                                      unfiltered)]
    with explained(lambda: nucleus_symptom(M, got, logits, temperature, top_k, top_p, what)):
        ev.expect_close(got, expected, what, mistakes=M.variants(keys, logits, temperature, top_k, top_p),
                        atol=1e-5, rtol=1e-4)
    expect_distribution(got, what)
