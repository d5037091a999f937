"""Lesson 12's sampling distribution (exercise 4): the planted mistakes (`sampling_variant`, named by
`expect_sampling`), the rows built to tell the orders of the steps apart (`designed_logits`), and the tests
beyond random rows: temperature 0 (`greedy`: a float one-hot row, one token even where the largest logits tie),
ties at the k-th logit and at the top-p boundary (`ties`), and top_k larger than the vocabulary (`large_top_k`:
nothing is filtered, as in the course's decoding.sampling_distribution)."""
import numpy as np
import torch
import torch.nn.functional as F

from ..decoding import sampling_distribution as ref_sampling
from .core import expect, expect_distribution, expect_shape, randn, to_numpy
from .evaluation import Evaluation
from .expectations import explained
from .lesson12_setup import call_naming


# ---------------------------------------------------------------------------------------------
# Sampling: temperature, top-k, top-p
# ---------------------------------------------------------------------------------------------
def _keep_top_p(probs, top_p, kind="ok"):
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
    if kind in ("drops_crossing", "drops_crossing_keep1"):   # the tokens whose cumulative mass stays <= p: maybe
        inside = (ranked.cumsum(-1) <= top_p).sum(-1, keepdim=True)          # none (or the first one, kept anyway)
        keep = probs >= ranked.gather(-1, (inside - 1).clamp(min=0))
        return keep if kind == "drops_crossing_keep1" else keep & (inside > 0)
    before = (ranked.cumsum(-1) < top_p).sum(-1, keepdim=True)
    return probs >= ranked.gather(-1, before.clamp(max=probs.size(-1) - 1))


def sampling_variant(logits, temperature, top_k, top_p, kind="ok"):
    """The sampling distribution (float64) with the mistake `kind` planted."""
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
    if top_p is not None and top_p < 1:
        base = logits.double().div(temperature).softmax(-1) if kind == "top_p_unfiltered" else probs
        probs = probs * _keep_top_p(base, top_p, kind)
    if kind == "temperature_after_filters":  # the filters chose the tokens at T = 1; T applied to what they kept
        kept = probs > 0
        probs = logits.double().div(temperature).softmax(-1) * kept
    if kind == "sorted_out":                 # left in the sort's order
        probs = probs.sort(-1, descending=True).values
    if kind == "no_renorm":
        return probs
    if kind == "whole_sum":                  # divided by the sum of the whole tensor, not of each row
        return probs / probs.sum()
    if kind == "softmax_renorm":             # a softmax where a division by the sum was asked
        return probs.softmax(-1)
    return probs / probs.sum(-1, keepdim=True)


def _unnormalised(logits, temperature, top_k, top_p):
    """What forgetting the renormalisation gives: the softmax's values where the token is kept, else 0."""
    kept = sampling_variant(logits, temperature, top_k, top_p) > 0
    return logits.double().div(temperature).softmax(-1) * kept


_UNSORT = ("put it back at each token's position (scatter with the sort's indices), or keep the tokens at least as "
           "probable as the last one the sorted row keeps")
SAMPLING_MISTAKES = {
    "temperature_after": "the temperature has no effect: divide the LOGITS by T before the softmax (dividing "
                         "the probabilities by T is undone when they are renormalised)",
    "temperature_times": "the logits are multiplied by the temperature: divide them by T (T > 1 flattens the "
                         "distribution, T < 1 sharpens it)",
    "temperature_after_filters": "top-p chose its tokens from the distribution at T = 1, before the temperature (the "
                                 "temperature is applied after the filters, or top-p reads the raw logits): divide "
                                 "the logits by T FIRST, then top-k, then top-p on the distribution they left",
    "softmax_dim0": "the softmax runs over the rows (dim=0): take it over the vocabulary, the last axis "
                    "(z.softmax(dim=-1)), so that each row of logits gives its own distribution",
    "temperature_twice": "the temperature is applied twice (the logits divided by T²): divide the logits by T once",
    "kthvalue": "top-k compares with the k-th SMALLEST logit (torch.kthvalue counts from the smallest): the threshold "
                "is the k-th largest, torch.topk(z, k).values[..., -1:]",
    "k_plus_one": "top-k keeps k+1 tokens: the k-th largest logit is sorted[..., k-1] (counting from 0), the last of "
                  "the k values torch.topk returns (values[..., -1:])",
    "k_minus_one": "top-k keeps k-1 tokens: it removes the k-th largest logit itself; remove only the logits BELOW it "
                   "(z < kth), so that the k-th is kept",
    "unsorted_mask": "top-p's mask is in SORTED order (computed on the sorted row and applied to the row as it is, or "
                     "the sorted probabilities returned): " + _UNSORT,
    "sorted_out": "top-p's result is in SORTED order (the sorted probabilities returned, or the sorted row's mask "
                  "applied to the row as it is): " + _UNSORT,
    "k_smallest": "top-k keeps the k SMALLEST logits: keep the k largest (torch.topk(z, k) gives the largest)",
    "kth_is_max": "top-k compares every logit with the LARGEST one (topk(...).values[..., 0]): compare with the "
                  "k-th largest, the last of the k values topk returns",
    "fill_zero": "top-k sets the removed logits to 0, which still gets probability after the softmax: set them "
                 "to -inf (masked_fill(..., float('-inf')))",
    "cumsum_indices": "top-p sums the sort's INDICES (the token ids) where it should sum the sorted probabilities: "
                      "probs.sort(...) returns (values, indices); take the cumulative sum of the values",
    "drops_crossing": "top-p drops the token that crosses p: keep the smallest set of most probable tokens whose "
                      "mass REACHES p, the token that takes the cumulative sum to p or beyond included",
    "top_p_unfiltered": "top-p is computed on the distribution before top-k (or applied before top-k, which "
                        "gives the same): apply it to the distribution top-k left, renormalised, as the order "
                        "temperature -> top-k -> top-p says",
    "drops_crossing_keep1": "top-p drops the token that crosses p (keeping only the tokens whose cumulative mass "
                            "stays <= p): keep the smallest set of most probable tokens whose mass REACHES p, the "
                            "token that takes the cumulative sum to p or beyond included",
    "whole_sum": "the probabilities are divided by the sum of the whole tensor: each ROW must sum to 1, divide by "
                 "probs.sum(-1, keepdim=True)",
    "p_ascending": "top-p keeps the LEAST probable tokens: sort the probabilities in descending order "
                   "(sort(descending=True)) and keep the most probable ones until their mass reaches p",
    "softmax_renorm": "the kept probabilities are renormalised with a softmax, which gives the removed tokens "
                      "probability again: divide the kept probabilities by their sum",
}


def expect_sampling(ev: Evaluation, got, logits, temperature, top_k, top_p, what):
    """The learner's distribution `got` equals the reference's, or the mistake it matches is named."""
    expect_shape(got, tuple(logits.shape), what)
    expected = ref_sampling(logits, temperature, top_k, top_p)
    # a softmax over the rows, named where nothing is filtered (the check's first tests): after a filter it may be
    # one-hot like other slips, or NaN in the columns top-k emptied
    unfiltered = top_k is None and (top_p is None or top_p == 1)
    kinds = [kind for kind in SAMPLING_MISTAKES if kind != "softmax_dim0" or unfiltered]
    mistakes = {SAMPLING_MISTAKES[kind]: sampling_variant(logits, temperature, top_k, top_p, kind) for kind in kinds}
    mistakes["the kept probabilities are not renormalised: after zeroing the filtered tokens, divide by the sum "
             "of what is kept so that the distribution sums to 1"] = _unnormalised(logits, temperature, top_k, top_p)
    mistakes["the probabilities top-p keeps are not renormalised: after zeroing the tokens outside the nucleus, "
             "divide by the sum of what is kept so that the distribution sums to 1"] = \
        sampling_variant(logits, temperature, top_k, top_p, "no_renorm")
    mistakes = {k: v for k, v in mistakes.items() if not torch.allclose(v.float(), expected, atol=1e-5,
                                                                         equal_nan=True)}
    with explained(lambda: nucleus_symptom(got, logits, temperature, top_k, top_p, what)):
        ev.expect_close(got, expected, what, mistakes=mistakes, atol=1e-5, rtol=1e-4)
    expect_distribution(got, what)


def nucleus_symptom(got, logits, temperature, top_k, top_p, what):
    """What is wrong with the set of tokens `got` keeps under top-p: a token dropped while a less probable one is
    kept, or the wrong number of the most probable tokens. None when that set is the reference's."""
    if top_p is None or top_p >= 1 or temperature == 0 or tuple(np.shape(to_numpy(got))) != tuple(logits.shape):
        return None
    probs = ref_sampling(logits, temperature, top_k, None).double()          # what top-p filters
    kept, want = torch.as_tensor(to_numpy(got)) > 0, ref_sampling(logits, temperature, top_k, top_p) > 0
    for row in range(probs.size(0)):
        p, k = probs[row], kept[row]
        if k.any() and (~k).any() and float(p[~k].max()) > float(p[k].min()) + 1e-9:
            return (f"{what}: you keep a token of probability {float(p[k].min()):.3f} and drop one of "
                    f"{float(p[~k].max()):.3f}. The nucleus is the MOST probable tokens: sort the probabilities in "
                    "decreasing order, take the cumulative sum of the SORTED ones, and keep tokens until it reaches p")
        if int(k.sum()) != int(want[row].sum()):
            return (f"{what}: you keep the {int(k.sum())} most probable tokens (mass {float(p[k].sum()):.3f}); the "
                    f"nucleus is the smallest such set whose mass reaches p = {top_p}, here {int(want[row].sum())} "
                    "tokens. Compare the cumulative sum of the sorted PROBABILITIES with p (and keep the token that "
                    "crosses it)")
    return None


SAMPLING_ERRORS = [
    (r"must be Tensor, not torch\.return_types\.max",
     "x.max(dim=-1) returns two things, (values, indices): take logits.argmax(-1) (or .max(-1).indices)"),
    (r"size of tensor a \(\d+\) must match the size of tensor b \(\d+\) at non-singleton dimension 1",
     "a value of each row (the k-th largest logit, the probability that reaches p, or the row's sum) lost its last "
     "axis: shape (N,) does not line up with the rows (N, V); keep it, values[..., -1:], sum(-1, keepdim=True)"),
]


def designed_logits(temperature=0.7):
    """Two rows on which every planted sampling mistake of the combined test (T = 0.7, top_k = 5, top_p = 0.8)
    gives values of its own (p_ascending coincides with top_p_unfiltered here: the top-p tests before name it):
    p at T = 0.7 is [.30, .25, .15, .09, .06, then .15 over 5 tokens]; top-5 keeps .85, top-p on it keeps 3
    tokens, top-p on the unfiltered distribution 5, top-p at T = 1 on top-5's 4; and the row's mirror image."""
    p = torch.tensor([0.30, 0.25, 0.15, 0.09, 0.06, 0.045, 0.035, 0.03, 0.025, 0.015], dtype=torch.float64)
    row = p.log() * temperature
    return torch.stack([row, row.flip(0)]).float()


def top_k_ties(tokens_kept, what):
    """A property: the tied logits at the k-th place are all kept (or all dropped)."""
    expect(tokens_kept, f"{what}: a tie at the k-th largest logit, and your answer keeps only some of the tied "
                        "tokens. Keep every token whose logit is at least the k-th largest (z >= kth), so that the "
                        "result does not depend on how torch.topk orders equal values.")


# ---------------------------------------------------------------------------------------------
# Beyond random rows: temperature 0, ties, top_k > V
# ---------------------------------------------------------------------------------------------
INT_ONE_HOT = ("at temperature 0 your one-hot row is of integers ({dtype}): return probabilities in floats, as at "
               "every other temperature (torch.multinomial refuses integers): F.one_hot(logits.argmax(-1), V).float()")
SHARED_AT_ZERO = ("at temperature 0, where the largest logits tie, your row shares the mass among the tied tokens (a "
                  "tiny temperature in place of 0?): temperature 0 is greedy decoding, ONE token gets all the mass. "
                  "Handle temperature == 0 first: F.one_hot(logits.argmax(-1), V).float() (argmax picks the first of "
                  "the tied tokens)")
NOT_ONE_HOT_AT_TIE = ("at temperature 0, where the largest logits tie, your row is not one-hot on one of the tied "
                      "tokens: temperature 0 is greedy decoding, all the mass on ONE of the largest logits, "
                      "F.one_hot(logits.argmax(-1), V).float() (argmax picks the first of the tied tokens)")


def greedy(ev: Evaluation, call):
    """Temperature 0 is greedy exactly: a one-hot row of floats on the argmax, ONE token even where the largest
    logits tie; temperature -> 0 tends to it. `call` is the learner's function with its crashes named."""
    logits = randn(ev.rng(5), 3, 8, scale=2.0)
    logits[torch.arange(3), logits.argmax(-1)] += 0.5           # a clear winner, whatever the seed
    one_hot = F.one_hot(logits.argmax(-1), 8).float()
    got = call(logits, 0.0, None, None)
    expect(not (hasattr(got, "shape") and tuple(got.shape) == tuple(logits.shape[:-1])), "temperature=0 returns the "
           "one-hot DISTRIBUTION (N, V), all the mass on the argmax (F.one_hot(logits.argmax(-1), V).float()), not "
           "the indices of the argmax")
    expect_shape(got, tuple(logits.shape), "the distribution at temperature 0 (a one-hot row per row of logits)")
    expect(got is not None and np.allclose(to_numpy(got), to_numpy(one_hot), atol=1e-6),
           "temperature=0 means greedy decoding: all the mass on the most probable token (a one-hot row); "
           "handle it before dividing by T.")
    dtype = to_numpy(got).dtype
    expect(np.issubdtype(dtype, np.floating), INT_ONE_HOT.format(dtype=getattr(got, "dtype", dtype)))
    # with a flat-ish row too (largest probability 0.24, a clear winner by 0.5 in the logits): p^(1/T) = 0.24^1000
    # underflows to 0 even in float64, so powers of probabilities give 0/0 there, whatever the random rows
    flat = torch.tensor([[0.4, 0.0, 0.5, 1.0, 0.2, -0.1, 0.3, 0.1]])
    rows = torch.cat([logits, flat])
    got = call(rows, 1e-3, None, None)
    expect(np.allclose(to_numpy(got), to_numpy(F.one_hot(rows.argmax(-1), 8).float()), atol=1e-4),
           "at temperature 0.001 the distribution should be (almost) one-hot on the most probable token (divide the "
           "LOGITS by T before the softmax: it stays exact, where powers of probabilities, p^(1/T), underflow to 0).")
    tied = torch.tensor([[1.0, 3.0, 3.0, 0.5, -1.0, 0.0], [2.0, 2.0, -1.0, 2.0, 1.0, 0.0]])   # the largest tie
    got = call(tied, 0.0, None, None)
    expect_shape(got, tuple(tied.shape), "the distribution at temperature 0 with tied largest logits")
    got, top = to_numpy(got).astype(np.float64), to_numpy(tied == tied.max(-1, keepdim=True).values)
    expect(not np.allclose(got, top / top.sum(-1, keepdims=True), atol=1e-4), SHARED_AT_ZERO)
    expect(bool(np.all(np.isclose(got, 0.0, atol=1e-6) | np.isclose(got, 1.0, atol=1e-6))
                and np.allclose(got.sum(-1), 1.0) and np.all(got[~top] == 0)), NOT_ONE_HOT_AT_TIE)
    return 3


def ties(ev: Evaluation, call):
    """Ties at the k-th largest logit (top-k alone, then with top-p) and at the top-p boundary: every tied token
    is kept, or none."""
    tied = torch.tensor([[3.0, 2.0, 1.0, 1.0, 1.0, 0.0, -1.0], [1.0, 1.0, 1.0, 2.0, -1.0, 0.5, 0.5]])
    for top_k, top_p in ((3, None), (3, 0.95), (2, None)):
        what = f"the distribution with top_k={top_k}" + (f", top_p={top_p}" if top_p else "") + " and tied logits"
        got = call(tied, 1.0, top_k, top_p)
        expect_shape(got, tuple(tied.shape), what)
        kept = to_numpy(got) > 0
        top_k_ties(bool(np.all(kept[0, 2:5] == kept[0, 2]) and np.all(kept[1, :3] == kept[1, 0])), what)
        expect_sampling(ev, got, tied, 1.0, top_k, top_p, what)
    tied = torch.tensor([[2.0, 1.0, 1.0, 1.0, -1.0, -2.0]])
    got = call(tied, 1.0, None, 0.5)
    expect(got is not None and np.all((to_numpy(got)[0, 1:4] > 0) == (to_numpy(got)[0, 1] > 0)),
           "a tie at the top-p boundary: tokens 1, 2 and 3 are equally probable, and some are kept but not all. "
           "Keep every token at least as probable as the one that reaches p (the result must not depend on how "
           "a sort orders equal values).")
    expect_sampling(ev, got, tied, 1.0, None, 0.5, "the distribution with ties at the top-p boundary")
    return 4


def large_top_k(ev: Evaluation, answer):
    """top_k larger than the vocabulary V filters nothing (the course's sampling_distribution); a crash there,
    after every other test passed, is named."""
    V, top_k = 6, 9
    logits = randn(ev.rng(6), 3, V, scale=2.0)
    crash = (f"with top_k={top_k} larger than the vocabulary (V={V}) your function fails: top_k may exceed V, and "
             "then nothing is filtered; take the k-th largest of min(top_k, V) (torch.topk(z, k) raises for k > V)")
    got = call_naming(ev, [(r"", crash)], answer, logits, 1.0, top_k, None)
    expect_sampling(ev, got, logits, 1.0, top_k, None, f"the distribution with top_k={top_k} > V={V} (nothing "
                                                       "filtered)")
    return 1


def top_p_one(ev: Evaluation, call):
    """p = 1 keeps every token, even where the float cumulative sum reaches 1 before the last (many small ones)."""
    logits = randn(ev.rng(7), 2, 3000, scale=4.0)
    got = call(logits, 1.0, None, 1.0)
    kept = int((torch.as_tensor(to_numpy(got)) > 0).sum()) if hasattr(got, "shape") else None
    expect(kept in (None, logits.numel()),
           f"with top_p=1.0 your answer keeps {kept} of the {logits.numel()} tokens: p = 1 keeps them all, but the "
           "cumulative sum of float probabilities reaches 1 before the last, small ones; filter only when top_p < 1")
    expect_sampling(ev, got, logits, 1.0, None, 1.0, "the distribution with top_p=1.0 (nothing filtered)")
    return 1


ROWS_MIXED = ("with top_p={top_p} a row's distribution changes when the other rows are in the batch: the rows are "
              "mixed (a sum or a count without dim=, over the whole batch); count and sum along each row, dim=-1")


def rows_alone(call, got, logits, top_p):
    """Each row of `got` is what the answer gives for that row alone."""
    if not hasattr(got, "shape") or tuple(got.shape) != tuple(logits.shape):
        return True
    rows = torch.as_tensor(to_numpy(got))
    for n in range(logits.shape[0]):
        alone = call(logits[n:n + 1], 1.0, None, top_p)
        if hasattr(alone, "shape") and not np.allclose(to_numpy(alone).reshape(-1), rows[n].numpy(), atol=1e-6,
                                                  equal_nan=True):
            return False
    return True
