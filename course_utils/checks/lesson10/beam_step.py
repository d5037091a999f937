"""Lesson 10, exercise 3: one step of beam search.

    beam_step(scores (K,), log_probs (K, V), beam_size) -> (new_scores (beam_size,), origin (beam_size,),
    token (beam_size,)): the beam_size best of the K · V candidates scores[k] + log_probs[k, v], best first; origin
    the beam each extends, token the token appended (integer indices).

The check compares the three rows with the course's beam_step on four random (K, V, beam_size) (drawn until the
registered mistakes give rows apart, and none keeps the right candidates in another order; the last has K = V). It
names each registered slip by the rows it gives (or, for scores added without a token axis, by torch's crash), indices
that are not integers, the right candidates in another order, else the property the rows miss (do origin and token
point at new_scores, are they the best candidates).
"""
import numpy as np
import torch

from ...decoding import beam_step as ref_beam_step
from ..core import Mistake, Mistakes, exercise, expect, expect_returns, expect_shape, single_threaded
from ..evaluation import Evaluation, call_naming
from ..expectations import explained
from ..torch_errors import BROADCAST
from .distinct import distinct


def _beam(combine=lambda s, lp: s[:, None] + lp, decode=lambda idx, K, V: (idx // V, idx % V),
          out=lambda top, idx, s, lp: top, largest=True):
    """The step with one of its parts written another way (the one definition of the slips in a part): combine
    gives the (K, V) candidates' scores, decode the flat index's (origin, token), out the new scores."""
    def beam_step(scores, log_probs, beam_size):
        K, V = log_probs.shape
        top, idx = combine(scores, log_probs).flatten().topk(beam_size, largest=largest)
        return (out(top, idx, scores, log_probs), *decode(idx, K, V))
    return beam_step


def _best_per_beam(scores, log_probs, beam_size):
    best = (scores[:, None] + log_probs).max(-1)
    return best.values, torch.arange(len(scores)), best.indices


def _beams_in_order(scores, log_probs, beam_size):
    """Each beam's best tokens, beam after beam, the first beam_size of them kept."""
    top, tok = (scores[:, None] + log_probs).topk(min(beam_size, log_probs.size(-1)), dim=-1)
    origin = torch.arange(len(scores))[:, None].expand_as(tok)
    return top.flatten()[:beam_size], origin.flatten()[:beam_size], tok.flatten()[:beam_size]


def _not_best_first(scores, log_probs, beam_size):
    top, origin, token = ref_beam_step(scores, log_probs, beam_size)
    order = torch.arange(beam_size).roll(1)
    order[[0, 1]] = order[[1, 0]]
    return top[order], origin[order], token[order]


def _ranked_by_difference(scores, log_probs, beam_size):
    """The candidates ranked by log_probs[k, v] - scores[k] (the prefix score taken for a cost), with their totals."""
    V = log_probs.size(-1)
    _, idx = (log_probs - scores[:, None]).flatten().topk(beam_size)
    return (scores[:, None] + log_probs).flatten()[idx], idx // V, idx % V


_DECODE = "origin = index // V and token = index % V, V = log_probs.size(-1)"
M = Mistakes(
    Mistake("scores_not_added", "the previous scores are not added: a candidate's score is scores[k] + "
            "log_probs[k, v], the log-probability of the whole new prefix",
            shows=_beam(combine=lambda s, lp: lp)),
    Mistake("only_token_score", "the new scores are only the new token's log-probability: the prefix's score "
            "scores[k] is added", shows=_beam(out=lambda top, idx, s, lp: lp.flatten()[idx])),
    Mistake("best_per_beam", "each beam kept only its own best token: the beam_size best candidates are chosen over "
            "ALL K · V (prefix, token) pairs, so one good prefix may produce several", shows=_best_per_beam),
    Mistake("lowest", "these are the LOWEST scores: the step keeps the beam_size largest", hint="torch.topk",
            shows=_beam(largest=False)),
    Mistake("beams_in_order", "the candidates are each beam's best tokens in beam order, not ranked across beams: the "
            "beam_size best of all K · V candidates, best first", hint="flatten the (K, V) totals, then topk",
            shows=_beams_in_order),
    Mistake("decoded_with_k", "the flat index is decoded with the number of beams K: the (K, V) candidates have V per "
            "beam, so the beam is the index divided by V and the token its remainder", hint=_DECODE,
            shows=_beam(decode=lambda idx, K, V: (idx // K, idx % K))),
    Mistake("no_token_axis", "the scores (K,) met log_probs (K, V) without a token axis: broadcasting lines a (K,) "
            "vector up with the LAST axis (the V tokens), so the two do not fit unless K = V, and then scores[v] goes "
            "to token v of every beam; each beam's score belongs to its own row",
            hint="scores[:, None] + log_probs (scores.unsqueeze(-1))", shows=_beam(combine=lambda s, lp: s + lp)),
    Mistake("multiplied", "the prefix score is multiplied by the token's log-probability: probabilities multiply, so "
            "their logs ADD: a candidate's score is scores[k] + log_probs[k, v]",
            shows=_beam(combine=lambda s, lp: s[:, None] * lp)),
    Mistake("fractional_index", "{what} holds fractions (e.g. {value}): a true division. The beam of flat index i is "
            "the integer division of i by V, its token the remainder", hint=_DECODE,
            shows=_beam(decode=lambda idx, K, V: (idx / V, idx % V))),
    Mistake("float_index", "{what} has dtype {dtype}: the indices pick beams and tokens, so they are integers",
            hint="index // V, a long tensor", shows=_beam(decode=lambda idx, K, V: ((idx // V).float(), idx % V))),
    Mistake("not_best_first", "the beam_size best candidates are there, but not best first: they are sorted by "
            "new_scores, in descending order", hint="torch.topk sorts them", shows=_not_best_first),
    Mistake("indices_off", "new_scores are right, but origin and token do not point at them: scores[origin[i]] + "
            "log_probs[origin[i], token[i]] must be new_scores[i]", hint=_DECODE,
            shows=_beam(decode=lambda idx, K, V: (idx // V, (idx + 1) % V))),
    Mistake("not_totals", "origin and token are right, but new_scores are not the candidates' running totals "
            "scores[origin] + log_probs[origin, token] (the log-probability of each whole new prefix)",
            shows=_beam(out=lambda top, idx, s, lp: s[idx // lp.size(-1)])),
    Mistake("not_the_best", "each (origin, token) is a real candidate with its score, but they are not the beam_size "
            "best of all K · V candidates (the candidates of every beam ranked together by their totals)",
            hint="flatten the (K, V) totals, then topk", shows=_ranked_by_difference),
)
_VALUES = ["scores_not_added", "only_token_score", "best_per_beam", "lowest", "beams_in_order", "decoded_with_k",
           "no_token_axis", "multiplied"]


def _rows(result):
    """(new_scores, origin, token) stacked as the rows of one float64 array (3, beam_size)."""
    return np.stack([torch.as_tensor(np.asarray(r) if not torch.is_tensor(r) else r).detach().double().numpy()
                     for r in result])


def _inputs(ev, seed, K, V):
    """(scores (K,) best first, log_probs (K, V)), drawn until the right step and every registered mistake differ from
    each other, and no mistake keeps the right candidates in another order (so each is named alike under every
    seed)."""
    g = ev.rng(seed)
    for _ in range(100):
        scores = torch.tensor(np.sort(g.normal(-3, 1.5, size=K))[::-1].copy(), dtype=torch.float32)
        log_probs = torch.log_softmax(torch.tensor(g.normal(0, 2, size=(K, V)), dtype=torch.float32), -1)
        values = [_rows(ref_beam_step(scores, log_probs, K)), *M.variants(_VALUES, scores, log_probs, K,
                                                                         pick=_rows).values()]
        chosen = [{tuple(pair) for pair in v[1:].T.tolist()} for v in values]
        if distinct(values, rtol=1e-3, atol=1e-3, equal_ok=False) and chosen[0] not in chosen[1:]:
            break
    return scores, log_probs


def _crashes(K, V):
    """The crashes of the typical slips (evaluation.call_naming's errors), for scores (K,), log_probs (K, V)."""
    def broadcast(match):
        return M.no_token_axis if {int(match["a"]), int(match["b"])} == {K, V} else None
    return [(BROADCAST, broadcast)]


def _integer_indices(x, what):
    """`origin` and `token` are integer indices (they pick beams and tokens, e.g. `memory[origin]`)."""
    t = torch.as_tensor(x)
    if t.is_floating_point() or t.is_complex():
        frac = t[t != t.round()]
        if frac.numel():
            expect(False, M.fractional_index.at(what=what, value=f"{float(frac[0]):.4g}"))
        expect(False, M.float_index.at(what=what, dtype=t.dtype))


def _order(ref, new_scores, origin, token):
    """M.not_best_first where the beam_size best candidates, with their scores, come in another order (or None)."""
    got = list(zip(*(torch.as_tensor(x).tolist() for x in (origin, token, new_scores))))
    right = list(zip(*(r.tolist() for r in (ref[1], ref[2], ref[0]))))
    if [g[:2] for g in got] != [r[:2] for r in right] and np.allclose(sorted(got), sorted(right), atol=1e-4):
        return M.not_best_first
    return None


def _probes(scores, log_probs, beam_size, new_scores, origin, token):
    """Probes of the properties a wrong step misses (for `explained`): do origin and token point at the returned
    scores, are they the beam_size best candidates."""
    K, V = log_probs.shape
    s, o, t = (torch.as_tensor(x).detach().double() for x in (new_scores, origin, token))
    ref_s, ref_o, ref_t = (x.double() for x in ref_beam_step(scores, log_probs, beam_size))
    total = (scores[:, None] + log_probs).double()
    inside = bool(((o >= 0) & (o < K) & (o == o.round()) & (t >= 0) & (t < V) & (t == t.round())).all())
    pointed = total[o.long(), t.long()] if inside else None
    consistent = pointed is not None and torch.allclose(pointed, s, rtol=1e-4, atol=1e-5)

    def indices():
        return M.indices_off if torch.allclose(s, ref_s, rtol=1e-4, atol=1e-5) and not consistent else None

    def totals():
        return M.not_totals if torch.equal(o, ref_o) and torch.equal(t, ref_t) else None

    def best():
        return M.not_the_best if consistent and len(set(zip(o.tolist(), t.tolist()))) == beam_size else None

    return indices, totals, best


def _unravelled(scores, log_probs, beam_size):
    """A right answer written another way: a descending sort of all candidates, torch.unravel_index."""
    total = scores.unsqueeze(-1) + log_probs
    values, flat = total.flatten().sort(descending=True)
    origin, token = torch.unravel_index(flat[:beam_size], total.shape)
    return values[:beam_size], origin, token


@exercise("one beam-search step (beam_step)", reference=ref_beam_step, mistakes=M, right=[_unravelled])
@single_threaded
def beam_step(ev: Evaluation, answer):
    """answer(scores (K,), log_probs (K, V), beam_size) -> (new_scores, origin, token), each (beam_size,)."""
    tests = 0
    for seed, beam_size, V in ((0, 3, 7), (1, 4, 5), (2, 2, 11), (3, 4, 4)):
        scores, log_probs = _inputs(ev, seed, beam_size, V)
        ref = ref_beam_step(scores, log_probs, beam_size)
        new_scores, origin, token = expect_returns(
            call_naming(ev, _crashes(beam_size, V), answer, scores.clone(), log_probs.clone(), beam_size), ref,
            ("new_scores", "origin", "token"))
        for x, what in ((new_scores, "new_scores"), (origin, "origin"), (token, "token")):
            expect_shape(x, (beam_size,), what)
        _integer_indices(origin, "origin")
        _integer_indices(token, "token")
        unsorted = _order(ref, new_scores, origin, token)
        expect(unsorted is None, unsorted)
        with explained(*_probes(scores, log_probs, beam_size, new_scores, origin, token)):
            ev.expect_close(_rows((new_scores, origin, token)), _rows(ref),
                            "(new_scores, origin, token) stacked as rows",
                            mistakes=M.variants(_VALUES, scores, log_probs, beam_size, pick=_rows),
                            rtol=1e-5, atol=1e-5)
        tests += 1
    return tests
