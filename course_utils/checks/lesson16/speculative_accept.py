"""Lesson 16, exercise 5: the accept/reject rule of speculative sampling.

    speculative_accept(p (k+1, V), q (k, V), draft (k,), u (k,)) -> (accepted, dist)

Accept draft token x_i when u_i < min(1, p_i(x_i) / q_i(x_i)), in order; at the first rejection stop, and the pass's
last token is drawn from the residual norm(max(0, p_i - q_i)); with every draft accepted, from the bonus distribution
p_(k+1), the last row of p (the rows 0 .. k of p are p_1 .. p_(k+1)). The answer returns the accepted drafts and that
distribution (the caller draws the token: everything is judged from what the answer returns, as the grader runs it in
another process). The check compares both with the course's on seven passes: a rejection in the middle, at the first
draft, none (the bonus), a draft whose target probability exceeds the draft's (the ratio above 1), temperature 0
(one-hot distributions: the rule keeps the drafts that are the target's greedy choice), a draft of one token, and a
rejection at the last draft. The uniforms are drawn on the side of the ratio that the case needs, never near it. A
registered mistake is named only when its wrong answer gives the answer's outcome on EVERY pass (one pass can fit
several causes by chance: a rejection at the first draft is what both a flipped comparison and a ratio read from the
wrong row of p may give). Where no registered mistake matches, it names what breaks: no distribution returned, a
distribution with negative entries or that does not sum to 1, accepted tokens that are not a prefix of the drafts, or
not the prefix the rule accepts.
"""
import numpy as np
import torch

from ... import speculative as ref
from ..core import Mistake, Mistakes, exercise, expect_returns, single_threaded
from ..errors import ExerciseError
from ..evaluation import Evaluation
from ..mistakes import Said
from .outcomes import expect_outcome, same


def _wrong(kind):
    """speculative_accept with one typical mistake."""
    def speculative_accept(p, q, draft, u):
        accepted, k = [], len(draft)
        for i, x in enumerate(draft.tolist()):
            ratio = {"draft_both": q[i, x] / q[i, x], "inverted": q[i, x] / p[i, x],
                     "ratio_row": p[i + 1, x] / q[i, x]}.get(kind, p[i, x] / q[i, x])
            accept = bool(u[i] >= ratio) if kind == "flipped" else bool(u[i] < min(1.0, float(ratio)))
            if kind == "argmax":
                accept = x == int(p[i].argmax())
            if accept:
                accepted.append(x)
                continue
            if kind == "keeps_rejected":
                accepted.append(x)
            if kind == "continues":
                continue
            residual = torch.clamp({"residual_reversed": q[i] - p[i]}.get(kind, p[i] - q[i]), min=0.0)
            return accepted, {"target": p[i], "residual_unnormalised": residual,
                              "residual_softmax": residual.softmax(-1),
                              "residual_unclamped": p[i] - q[i]}.get(kind, residual / residual.sum())
        if kind == "no_bonus":
            return accepted, None
        return accepted, p[k - 1] if kind == "bonus_index" else p[k]
    return speculative_accept


def _by_mask(p, q, draft, u):
    """A right answer written another way: every ratio at once, the first rejection found with a mask."""
    k = len(draft)
    ratio = p[torch.arange(k), draft] / q[torch.arange(k), draft]
    rejected = (u >= ratio.clamp(max=1)).nonzero()
    if len(rejected) == 0:
        return draft.tolist(), p[k]
    i = int(rejected[0])
    residual = (p[i] - q[i]).clamp(min=0)
    return draft[:i].tolist(), residual / residual.sum()


M = Mistakes(
    Mistake("draft_both", "every draft token is accepted: the ratio compares the TARGET's probability of the token "
            "with the draft's, p_i(x_i) / q_i(x_i); with the draft's on both sides it is always 1",
            shows=_wrong("draft_both")),
    Mistake("inverted", "the drafts are accepted with probability q_i(x_i) / p_i(x_i): the ratio is the target's "
            "probability over the draft's, p_i(x_i) / q_i(x_i)", shows=_wrong("inverted")),
    Mistake("flipped", "a draft is accepted when u_i is ABOVE the ratio: accept when u_i < min(1, p/q), which "
            "happens with probability min(1, p/q)", shows=_wrong("flipped")),
    Mistake("target", "after a rejection the distribution returned is the target's p_i: the token in the rejected "
            "one's place comes from the residual norm(max(0, p_i - q_i)), or tokens the draft proposes often come "
            "out too often", shows=_wrong("target")),
    Mistake("residual_reversed", "after a rejection the distribution returned is norm(max(0, q_i - p_i)): the "
            "residual is what the TARGET has in excess of the draft, max(0, p_i - q_i)",
            shows=_wrong("residual_reversed")),
    Mistake("residual_support", "after the rejection of draft {draft}, the distribution returned gives {mass:.3f} of "
            "its weight to tokens where the target's probability is not above the draft's (p <= q in that row): the "
            "residual max(0, p - q) is 0 there, and it is normalised by dividing by its sum",
            shows=_wrong("residual_softmax")),
    Mistake("residual_unnormalised", "the residual returned sums to {total:.3f}, not 1: it must be normalised, "
            "max(0, p_i - q_i) divided by its sum", hint="residual / residual.sum()",
            shows=_wrong("residual_unnormalised")),
    Mistake("residual_unclamped", "the distribution returned after a rejection has negative entries: the residual "
            "is the target's EXCESS over the draft, max(0, p_i - q_i), clamped at 0 before it is normalised",
            hint="torch.clamp(p[i] - q[i], min=0)", shows=_wrong("residual_unclamped")),
    Mistake("ratio_row", "draft x_i was judged with the target's NEXT row, p[i + 1]: row i of p and row i of q are "
            "both models' distributions for the same token x_i, so the ratio is p[i][x_i] / q[i][x_i]",
            hint="p[i, x] / q[i, x]", shows=_wrong("ratio_row")),
    Mistake("no_bonus", "with every draft accepted no distribution was returned: the target's distribution after "
            "the last draft, p_(k+1) (the last row of p), came with the same pass: the bonus token is drawn from it",
            shows=_wrong("no_bonus")),
    Mistake("bonus_index", "the bonus distribution is the target's AT the last draft, p_k (row k - 1 of p): the "
            "bonus token comes from p_(k+1), the last row of p (row k), the one after it",
            shows=_wrong("bonus_index")),
    Mistake("continues", "the pass goes on after a rejection: the drafts after a rejected one were drawn after a "
            "token that is not in the output, so they are dropped", shows=_wrong("continues")),
    Mistake("keeps_rejected", "the rejected draft token is among the accepted ones: a rejected token is replaced by "
            "the one drawn from the residual, not followed by it", shows=_wrong("keeps_rejected")),
    Mistake("argmax", "a draft is accepted when it is the target's most probable token: at temperature > 0 the rule "
            "is random, accept with probability min(1, p_i(x_i) / q_i(x_i))", shows=_wrong("argmax")),
)


def _designed(g, V=8):
    """k = 4, rejected at draft 2, built so that the wrong rules of deciding (draft_both, inverted, flipped, argmax)
    each stop elsewhere: draft 0 is the target's most probable token with p < q (accepted; u above the ratio would
    reject it), draft 1 the target's most probable with p > q (accepted; q/p would reject it), draft 2 the target's
    most probable, rejected, draft 3 not the target's most probable."""
    for _ in range(1000):
        p = torch.as_tensor(g.dirichlet(np.ones(V), size=5), dtype=torch.float64)
        draft = p[:4].argmax(-1)
        draft[3] = int(p[3].argsort()[int(g.integers(V - 1))])          # any token but the most probable
        q = torch.as_tensor(g.dirichlet(np.ones(V), size=4), dtype=torch.float64)
        share = torch.as_tensor(g.uniform(0.3, 0.7, size=4))
        top = p[torch.arange(4), draft]
        want = torch.stack([top[0] + (1 - top[0]) * share[0], top[1] * share[1], top[2] + (1 - top[2]) * share[2],
                            q[3, draft[3]]])
        for i in range(4):                                              # q_i(x_i) = want_i, the rest spread as drawn
            rest = q[i].clone()
            rest[draft[i]] = 0
            q[i] = rest / rest.sum() * (1 - want[i])
            q[i, draft[i]] = want[i]
        ratio = p[torch.arange(4), draft] / q[torch.arange(4), draft]
        if ratio[0] < 0.15 or ratio[2] > 0.85 or want[3] < 0.05:
            continue
        u = torch.as_tensor(g.uniform(size=4))
        u[0] = ratio[0] * g.uniform(0.1, 0.9)
        u[1] = 1 / ratio[1] + (1 - 1 / ratio[1]) * g.uniform(0.2, 0.8)
        u[2] = ratio[2] + (1 - ratio[2]) * g.uniform(0.2, 0.8)
        return p.float(), q.float(), draft, u.float()
    raise RuntimeError("no case found")


def _case(g, k, V, reject_at=None, ratio_above=False, greedy=False, designed=False):
    """p, q, draft, u with the pass rejecting at `reject_at` (None: all accepted); the uniforms on the side of each
    ratio that gives it, at least 0.1 of the way from it. greedy: one-hot p and q (temperature 0), the draft the
    draft's choice, equal to the target's before `reject_at` and not at it. designed: _designed."""
    if designed:
        return _designed(g, V)
    stop = k if reject_at is None else reject_at
    if greedy:
        a = torch.as_tensor(g.integers(V, size=k + 1))
        b = a[:k].clone()
        b[stop:] = torch.as_tensor(g.integers(V, size=k - stop))
        if stop < k:
            b[stop] = (a[stop] + 1 + int(g.integers(V - 1))) % V
        one_hot = torch.nn.functional.one_hot
        return one_hot(a, V).float(), one_hot(b, V).float(), b, torch.as_tensor(g.uniform(size=k), dtype=torch.float32)
    for _ in range(1000):
        p = torch.as_tensor(g.dirichlet(np.full(V, 0.6), size=k + 1), dtype=torch.float32)
        q = torch.as_tensor(g.dirichlet(np.full(V, 0.6), size=k), dtype=torch.float32)
        draft = torch.as_tensor([int(g.choice(V, p=(q[i].double() / q[i].double().sum()).numpy())) for i in range(k)])
        ratio = (p[torch.arange(k), draft] / q[torch.arange(k), draft]).clamp(max=1.0)
        if (ratio[:stop] < 0.15).any() or (stop < k and ratio[stop] > 0.85):
            continue
        if ratio_above and not (p[0, draft[0]] > q[0, draft[0]]):
            continue
        u = torch.as_tensor(g.uniform(size=k), dtype=torch.float32)
        u[:stop] = ratio[:stop] * torch.as_tensor(g.uniform(0, 0.9, size=stop), dtype=torch.float32)
        if stop < k:
            u[stop] = ratio[stop] + (1 - ratio[stop]) * float(g.uniform(0.1, 0.9))
        return p, q, draft, u
    raise RuntimeError("no case found")


CASES = [dict(k=4, V=8, reject_at=2, designed=True), dict(k=3, V=6, reject_at=0), dict(k=3, V=7),
         dict(k=2, V=5, ratio_above=True), dict(k=4, V=6, reject_at=2, greedy=True), dict(k=1, V=5, reject_at=0),
         dict(k=3, V=6, reject_at=2)]


def _outcome(result):
    """(the accepted tokens, the distribution as a list or None), from what an answer returned."""
    accepted, dist = result
    accepted = [int(t) for t in torch.as_tensor(accepted).reshape(-1).tolist()]
    return accepted, None if dist is None else torch.as_tensor(dist, dtype=torch.float64).reshape(-1).tolist()


def _run(fn, p, q, draft, u):
    return _outcome(fn(p.clone(), q.clone(), draft.clone(), u.clone()))


def _probes(got, want, draft, p, q):
    accepted, dist = got
    drafts = draft.tolist()

    def outside_residual():
        i = len(want[0])
        if i == len(drafts) or dist is None or len(dist) != p.shape[-1]:
            return None
        mass = float(sum(w for w, zero in zip(dist, (p[i] <= q[i]).tolist()) if zero))
        return M.residual_support.at(draft=i + 1, mass=mass) if mass > 1e-4 else None

    def no_dist():
        if dist is not None:
            return None
        if want[0] == drafts:
            return M.no_bonus
        return Said("no_dist", "no distribution was returned after the rejection: the token in the rejected one's "
                               "place is drawn from the residual norm(max(0, p_i - q_i)): return it")

    def negative():
        return M.residual_unclamped if min(dist) < -1e-6 else None

    def not_distribution():
        return M.residual_unnormalised.at(total=sum(dist)) if abs(sum(dist) - 1) > 1e-4 else None

    def not_prefix():
        if accepted != drafts[:len(accepted)]:
            return Said("not_prefix", f"the accepted tokens {accepted} are not the first drafts {drafts} in order: "
                                      "the rule keeps x_1 .. x_j up to the first rejection")
        return None

    def how_many():
        if len(accepted) != len(want[0]):
            return Said("accepted", f"{len(accepted)} of the {len(drafts)} drafts accepted where the rule, u_i < "
                                    f"min(1, p_i(x_i) / q_i(x_i)) in order, accepts {len(want[0])}")
        return None
    return no_dist, negative, not_distribution, not_prefix, how_many, outside_residual


@exercise("the accept/reject rule of speculative sampling", name="speculative_accept",
          reference=ref.speculative_accept, mistakes=M, right=[_by_mask])
@single_threaded
def speculative_accept(ev: Evaluation, answer):
    """answer(p, q, draft, u) -> (accepted, dist)."""
    passes = []                                     # (case, inputs, expected, the answer's result or its crash)
    for seed, case in enumerate(CASES):
        p, q, draft, u = _case(ev.rng(seed), **case)
        expected = ref.speculative_accept(p.clone(), q.clone(), draft.clone(), u.clone())
        try:
            result = ev.call(answer, p, q, draft, u)
        except ExerciseError as error:              # told when its pass comes, after the passes before it
            passes.append((case, (p, q, draft, u), expected, error))
            break
        passes.append((case, (p, q, draft, u), expected, result))
    outcomes = [_variants(inputs) for _, inputs, _, _ in passes]
    answered = []
    for _, _, _, result in passes:
        try:
            answered.append(None if isinstance(result, ExerciseError) else _outcome(result))
        except Exception:  # noqa: BLE001 - a return the pass itself will name
            answered.append(None)
    tests = 0
    for n, (case, (p, q, draft, _), expected, result) in enumerate(passes):
        if isinstance(result, ExerciseError):
            raise result
        want = _outcome(expected)
        got = _outcome(expect_returns(result, expected, ("accepted", "dist")))
        variants = {said: outcome for said, outcome in outcomes[n].items()
                    if _fits_every_pass(said.key, outcomes, answered)}
        what = (f"the pass with k = {case['k']} drafts" + (" at temperature 0" if case.get("greedy") else "")
                + (f", draft {case['reject_at']} rejected" if case.get("reject_at") is not None else ", all accepted"))
        expect_outcome(got, want, what, variants, probes=_probes(got, want, draft, p, q),
                       shown=lambda o: f"accepted {o[0]}, then a draw from {_shown(o[1])}")
        tests += 1
    return tests


def _variants(inputs):
    """{each registered mistake, its words filled in: what its wrong answer gives on these inputs}."""
    variants = {}
    for m in M:
        try:
            outcome = _run(m.shows, *inputs)
        except Exception:  # noqa: BLE001 - a mistake that cannot happen on this case
            continue
        try:
            said = m.at(total=sum(outcome[1]) if outcome[1] else 0.0)
        except KeyError:                            # words with fields only a probe fills: named by that probe
            continue
        variants[said] = outcome
    return variants


def _fits_every_pass(key, outcomes, answered):
    """The mistake `key` gives the answer's outcome on every pass where both are known: only then is it named."""
    for variants, got in zip(outcomes, answered):
        mine = [outcome for said, outcome in variants.items() if said.key == key]
        if got is not None and mine and not same(_nan_named(got), _nan_named(mine[0])):
            return False
    return True


def _nan_named(x):
    """An outcome with NaN written "nan", so that two 0/0 residuals compare equal."""
    if isinstance(x, (list, tuple)):
        return [_nan_named(y) for y in x]
    return "nan" if isinstance(x, float) and x != x else x


def _shown(dist):
    return "nothing" if dist is None else "[" + ", ".join(f"{x:.3f}" for x in dist) + "]"
