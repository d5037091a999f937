"""Exercise 4 beyond random rows (the sampling distribution): temperature 0 (`greedy`: a float one-hot row, one
token even where the largest logits tie; temperature -> 0 tends to it), ties at the k-th logit and at the top-p
boundary (`ties`), p = 1 with many small probabilities (`top_p_one`), top_k larger than the vocabulary
(`large_top_k`: nothing is filtered, as in the course's decoding.sampling_distribution), rows judged alone
(`rows_alone`); each with its mistakes and the wrong answers that show them."""
import numpy as np
import torch
import torch.nn.functional as F

from ...decoding import sampling_distribution as ref_sampling
from ..core import Mistake, expect, expect_shape, randn, to_numpy
from ..evaluation import Evaluation, call_naming
from ..torch_errors import BROADCAST, RETURN_TYPES
from .sampling_mistakes import expect_sampling, greedy_or

_GREEDY = "if temperature == 0: return F.one_hot(logits.argmax(-1), V).float()"


def _at_zero(how):
    """The reference, with temperature 0 handled the way `how` says."""
    def answer(logits, temperature=1.0, top_k=None, top_p=None):
        if how == "tiny" and temperature == 0:                 # no case for 0: a tiny temperature in its place
            temperature = 1e-8
        if temperature == 0:
            V = logits.size(-1)
            if how == "indices":
                return logits.argmax(-1)
            if how == "uniform":
                return torch.full_like(logits, 1.0 / V)
            if how == "int":
                return F.one_hot(logits.argmax(-1), V)
            if how == "all_tied":                               # every largest logit gets 1
                return (logits == logits.max(-1, keepdim=True).values).float()
            if how == "max_pair":
                return F.one_hot(logits.max(dim=-1), V).float()
            return F.one_hot(logits.argmax(-1), V).float()
        if how == "powers":                                    # p^(1/T): right in exact arithmetic, underflows
            probs = logits.double().softmax(-1) ** (1 / temperature)
            return ref_sampling((probs / probs.sum(-1, keepdim=True)).log().float(), 1.0, top_k, top_p)
        return ref_sampling(logits, temperature, top_k, top_p)
    return answer


def _ties_split(logits, temperature, top_k, top_p):
    """Ties broken by the sort: top-k keeps exactly the k indices topk returns, top-p the tokens a sort puts first."""
    z = logits / temperature
    if top_k is not None:
        values, indices = torch.topk(z, min(top_k, z.size(-1)), dim=-1)
        z = torch.full_like(z, float("-inf")).scatter(-1, indices, values)
    probs = z.softmax(-1)
    if top_p is not None and top_p < 1:
        ranked, order = probs.sort(-1, descending=True)
        probs = probs.scatter(-1, order, ranked.masked_fill(ranked.cumsum(-1) - ranked >= top_p, 0.0))
    return probs / probs.sum(-1, keepdim=True)


def _top_p_ties_split(logits, temperature, top_k, top_p):
    """Ties at the k-th logit kept, ties at the top-p boundary broken by the sort."""
    if top_p is None or top_k is not None:
        return ref_sampling(logits, temperature, top_k, top_p)
    return _ties_split(logits, temperature, None, top_p)


def _no_keepdim(logits, temperature, top_k, top_p):
    """The k-th largest logit taken without its last axis."""
    z = logits / temperature
    if top_k is not None:
        z = z.masked_fill(z < z.sort(-1, descending=True).values[..., top_k - 1], float("-inf"))
    return ref_sampling(z, 1.0, None, top_p)


def _filters_at_one(logits, temperature, top_k, top_p):
    """Top-p applied whenever it is given, p = 1 included."""
    probs = ref_sampling(logits, temperature, top_k, None)
    if top_p is not None:
        ranked = probs.sort(-1, descending=True).values
        before = (ranked.cumsum(-1) < top_p).sum(-1, keepdim=True)
        probs = probs * (probs >= ranked.gather(-1, before.clamp(max=probs.size(-1) - 1)))
    return probs / probs.sum(-1, keepdim=True)


def _no_min(logits, temperature, top_k, top_p):
    if top_k is not None:
        torch.topk(logits, top_k, dim=-1)                       # min(top_k, V) forgotten: raises when top_k > V
    return ref_sampling(logits, temperature, top_k, top_p)


def _batch_count(logits, temperature, top_k, top_p):
    """Top-p counting the tokens below p over the whole batch, not per row."""
    probs = ref_sampling(logits, temperature, top_k, None)
    if top_p is None or top_p >= 1:
        return probs
    ranked = probs.sort(-1, descending=True).values
    before = int((ranked.cumsum(-1) < top_p).sum()) // probs.size(0)
    probs = probs * (probs >= ranked[..., min(before, probs.size(-1) - 1)][..., None])
    return probs / probs.sum(-1, keepdim=True)


EDGES = [
    Mistake("indices_at_zero", "temperature 0 returns the one-hot DISTRIBUTION (N, V), all the mass on the argmax, "
            "not the indices of the argmax", hint=_GREEDY, shows=_at_zero("indices")),
    Mistake("not_greedy", "temperature 0 means greedy decoding: all the mass on the most probable token (a one-hot "
            "row), handled before any division by T", hint=_GREEDY, shows=_at_zero("uniform")),
    Mistake("int_one_hot", "at temperature 0 your one-hot row is of integers ({dtype}): probabilities are floats, as "
            "at every other temperature (and sampling refuses integers)", hint="F.one_hot(...).float()",
            shows=_at_zero("int")),
    Mistake("not_greedy_small_t", "at temperature 0.001 your distribution is not (almost) one-hot on the most "
            "probable token: as T -> 0 it tends to greedy decoding (dividing the LOGITS by T keeps that exact, where "
            "powers of probabilities, p^(1/T), underflow to 0)", hint="(logits / temperature).softmax(-1)",
            shows=_at_zero("powers")),
    Mistake("shared_at_zero", "at temperature 0, where the largest logits tie, your row shares the mass among the "
            "tied tokens (as a tiny temperature in place of 0 does): temperature 0 is greedy decoding, ONE token "
            "gets all the mass", hint=_GREEDY + " first (argmax picks the first of the tied tokens)",
            shows=_at_zero("tiny")),
    Mistake("not_one_hot_at_tie", "at temperature 0, where the largest logits tie, your row is not one-hot on one "
            "of the tied tokens: temperature 0 is greedy decoding, all the mass on ONE of the largest logits",
            hint=_GREEDY + " (argmax picks the first of the tied tokens)", shows=_at_zero("all_tied")),
    Mistake("max_returns_pair", "the maximum along an axis returns two things, (values, indices), where one tensor "
            "was expected", hint="logits.argmax(-1) (or .max(-1).indices)", shows=_at_zero("max_pair")),
    Mistake("lost_keepdim", "a value of each row (the k-th largest logit, the probability that reaches p, or the "
            "row's sum) lost its last axis: shape (N,) does not line up with the rows (N, V)",
            hint="keep it: values[..., -1:], sum(-1, keepdim=True)", shows=greedy_or(_no_keepdim)),
    Mistake("top_k_tie", "{what}: a tie at the k-th largest logit, and your answer keeps only some of the tied "
            "tokens; every token whose logit is at least the k-th largest is kept, so that the result does not "
            "depend on how a sort orders equal values", hint="z.masked_fill(z < kth, float('-inf')): z >= kth "
            "stays", shows=greedy_or(_ties_split)),
    Mistake("top_p_tie", "a tie at the top-p boundary: tokens 1, 2 and 3 are equally probable, and some are kept but "
            "not all; every token at least as probable as the one that reaches p is kept (the result must not "
            "depend on how a sort orders equal values)", hint="keep probs >= the probability of the token that "
            "reaches p", shows=greedy_or(_top_p_ties_split)),
    Mistake("top_k_over_v", "with top_k={top_k} larger than the vocabulary (V={V}) your function fails: top_k may "
            "exceed V, and then nothing is filtered", hint="torch.topk(z, min(top_k, V)) (torch.topk raises for "
            "k > V)", shows=greedy_or(_no_min)),
    Mistake("top_p_one_drops", "with top_p=1.0 your answer keeps {kept} of the {n} tokens: p = 1 keeps them all, but "
            "the cumulative sum of float probabilities reaches 1 before the last, small ones",
            hint="filter only when top_p < 1", shows=greedy_or(_filters_at_one)),
    Mistake("rows_mixed", "with top_p={top_p} a row's distribution changes when the other rows are in the batch: the "
            "rows are mixed (a sum or a count over the whole batch)", hint="count and sum along each row, dim=-1",
            shows=greedy_or(_batch_count)),
]


def crashes(N, V, M):
    """The typical crashes of a sampler given logits (N, V), named where torch's words single the slip out."""
    return [(RETURN_TYPES, M.max_returns_pair),
            (BROADCAST, lambda match: M.lost_keepdim if {int(match["a"]), int(match["b"])} == {N, V} else None)]


def greedy(ev: Evaluation, M, call):
    """Temperature 0 is greedy exactly: a one-hot row of floats on the argmax, ONE token even where the largest
    logits tie; temperature -> 0 tends to it. `call(logits, ...)` is the learner's function, its crashes named."""
    logits = randn(ev.rng(5), 3, 8, scale=2.0)
    logits[torch.arange(3), logits.argmax(-1)] += 0.5           # a clear winner, whatever the seed
    one_hot = F.one_hot(logits.argmax(-1), 8).float()
    got = call(logits, 0.0, None, None)
    expect(not (hasattr(got, "shape") and tuple(got.shape) == tuple(logits.shape[:-1])), M.indices_at_zero)
    expect_shape(got, tuple(logits.shape), "the distribution at temperature 0 (a one-hot row per row of logits)")
    expect(got is not None and np.allclose(to_numpy(got), to_numpy(one_hot), atol=1e-6), M.not_greedy)
    dtype = to_numpy(got).dtype
    expect(np.issubdtype(dtype, np.floating), M.int_one_hot.at(dtype=getattr(got, "dtype", dtype)))
    # with a flat-ish row too (largest probability 0.24, a clear winner by 0.5 in the logits): p^(1/T) = 0.24^1000
    # underflows to 0 even in float64, so powers of probabilities give 0/0 there, whatever the random rows
    flat = torch.tensor([[0.4, 0.0, 0.5, 1.0, 0.2, -0.1, 0.3, 0.1]])
    rows = torch.cat([logits, flat])
    got = call(rows, 1e-3, None, None)
    expect(np.allclose(to_numpy(got), to_numpy(F.one_hot(rows.argmax(-1), 8).float()), atol=1e-4),
           M.not_greedy_small_t)
    tied = torch.tensor([[1.0, 3.0, 3.0, 0.5, -1.0, 0.0], [2.0, 2.0, -1.0, 2.0, 1.0, 0.0]])   # the largest tie
    got = call(tied, 0.0, None, None)
    expect_shape(got, tuple(tied.shape), "the distribution at temperature 0 with tied largest logits")
    got, top = to_numpy(got).astype(np.float64), to_numpy(tied == tied.max(-1, keepdim=True).values)
    expect(not np.allclose(got, top / top.sum(-1, keepdims=True), atol=1e-4), M.shared_at_zero)
    expect(bool(np.all(np.isclose(got, 0.0, atol=1e-6) | np.isclose(got, 1.0, atol=1e-6))
                and np.allclose(got.sum(-1), 1.0) and np.all(got[~top] == 0)), M.not_one_hot_at_tie)
    return 3


def ties(ev: Evaluation, M, call):
    """Ties at the k-th largest logit (top-k alone, then with top-p) and at the top-p boundary: every tied token
    is kept, or none."""
    tied = torch.tensor([[3.0, 2.0, 1.0, 1.0, 1.0, 0.0, -1.0], [1.0, 1.0, 1.0, 2.0, -1.0, 0.5, 0.5]])
    for top_k, top_p in ((3, None), (3, 0.95), (2, None)):
        what = f"the distribution with top_k={top_k}" + (f", top_p={top_p}" if top_p else "") + " and tied logits"
        got = call(tied, 1.0, top_k, top_p)
        expect_shape(got, tuple(tied.shape), what)
        kept = to_numpy(got) > 0
        expect(bool(np.all(kept[0, 2:5] == kept[0, 2]) and np.all(kept[1, :3] == kept[1, 0])),
               M.top_k_tie.at(what=what))
        expect_sampling(ev, M, got, tied, 1.0, top_k, top_p, what)
    tied = torch.tensor([[2.0, 1.0, 1.0, 1.0, -1.0, -2.0]])
    got = call(tied, 1.0, None, 0.5)
    expect(got is not None and np.all((to_numpy(got)[0, 1:4] > 0) == (to_numpy(got)[0, 1] > 0)), M.top_p_tie)
    expect_sampling(ev, M, got, tied, 1.0, None, 0.5, "the distribution with ties at the top-p boundary")
    return 4


def large_top_k(ev: Evaluation, M, answer):
    """top_k larger than the vocabulary V filters nothing (the course's sampling_distribution); a crash there,
    after every other test passed, is named."""
    V, top_k = 6, 9
    logits = randn(ev.rng(6), 3, V, scale=2.0)
    got = call_naming(ev, [(r"", M.top_k_over_v.at(top_k=top_k, V=V))], answer, logits, 1.0, top_k, None)
    expect_sampling(ev, M, got, logits, 1.0, top_k, None, f"the distribution with top_k={top_k} > V={V} (nothing "
                                                          "filtered)")
    return 1


def top_p_one(ev: Evaluation, M, call):
    """p = 1 keeps every token, even where the float cumulative sum reaches 1 before the last (many small ones): on
    random rows, and on a row whose most probable token alone is 1.0 in float32 (2999 others at 4e-18 each)."""
    tail = torch.full((1, 3000), -40.0)
    tail[0, 0] = 0.0
    logits = torch.cat([randn(ev.rng(7), 2, 3000, scale=4.0), tail])
    got = call(logits, 1.0, None, 1.0)
    kept = int((torch.as_tensor(to_numpy(got)) > 0).sum()) if hasattr(got, "shape") else None
    expect(kept in (None, logits.numel()), M.top_p_one_drops.at(kept=kept, n=logits.numel()))
    expect_sampling(ev, M, got, logits, 1.0, None, 1.0, "the distribution with top_p=1.0 (nothing filtered)")
    return 1


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
