"""Lesson 10's planted mistakes and property probes: the learning-rate schedule (`noam_mistakes`, `noam_parts`,
`plain_number`), the label-smoothed loss (`loss_inputs`, built so that the mistakes differ; `loss_mistakes`;
`loss_probes`: a shift of the logits, smoothing 0, no padding) and one beam-search step (`beam_inputs`, drawn
until the mistakes differ; `beam_mistakes`; `beam_probes`: do the indices point at the scores, are they the
best candidates, best first; `integer_indices`)."""
import numpy as np
import torch

from ..training import label_smoothed_loss as ref_loss
from .core import ExerciseError, expect, to_numpy


def _distinct(values, rtol, atol, equal_ok=True):
    """No two of `values` (the right answer and the mistakes) are near each other (within rtol, atol) unless they
    are equal and `equal_ok`: then a check names one mistake, the same one under every seed."""
    arrays = [to_numpy(v).astype(np.float64) for v in values]
    for i, a in enumerate(arrays):
        for b in arrays[i + 1:]:
            if a.shape != b.shape:
                continue
            if np.allclose(a, b, rtol=1e-5, atol=1e-6):
                if not equal_ok:
                    return False
            elif np.allclose(a, b, rtol=rtol, atol=atol):
                return False
    return True


# ---------------------------------------------------------------------------------------------
# Exercise 1: noam_lr
# ---------------------------------------------------------------------------------------------
_PRECEDENCE = ("`{x} ** -{k}/2` is `({x} ** -{k}) / 2` in Python (`**` binds tighter than `/`): write "
               "`{x} ** -{h}` (or `{x} ** (-{k} / 2)`)")


def noam_mistakes(s, d, w):
    """{symptom: the rates it gives} at the steps `s` (a float array) for d_model `d` and warmup_steps `w`."""
    lin = s * w ** -1.5
    return {
        "the warm-up part should grow as step * warmup_steps^-1.5 (exponent -1.5, not -0.5): "
        "at step = warmup_steps both parts of the min must be equal": d ** -0.5 * np.minimum(s ** -0.5, s * w ** -0.5),
        "the learning rate is missing the factor d_model^-0.5 in front": np.minimum(s ** -0.5, lin),
        "use min(...), not max(...): the rate grows during warm-up, then decays as 1/sqrt(step)":
            d ** -0.5 * np.maximum(s ** -0.5, lin),
        "the decay part should be step^-0.5 (inverse square root), not 1/step": d ** -0.5 * np.minimum(1 / s, lin),
        "off by one step: steps count from 1, use `step` as it is given (not step + 1 or step - 1)":
            d ** -0.5 * np.minimum((s + 1) ** -0.5, (s + 1) * w ** -1.5),
        "off by one step: steps count from 1, use `step` as it is given (not step - 1)":
            d ** -0.5 * np.minimum(np.maximum(s - 1, 1e-9) ** -0.5, (s - 1) * w ** -1.5),
        _PRECEDENCE.format(x="step", k=1, h=0.5): d ** -0.5 * np.minimum(1 / s / 2, lin),
        _PRECEDENCE.format(x="warmup_steps", k=3, h=1.5): d ** -0.5 * np.minimum(s ** -0.5, s * w ** -3.0 / 2),
        _PRECEDENCE.format(x="d_model", k=1, h=0.5): 1 / d / 2 * np.minimum(s ** -0.5, lin),
        "the warm-up part is step / warmup_steps, which reaches 1 at the peak: use step * warmup_steps^-1.5, "
        "which equals step^-0.5 at step = warmup_steps": d ** -0.5 * np.minimum(s ** -0.5, s / w),
        "the warm-up part is (step * warmup_steps)^-1.5: only warmup_steps takes the exponent -1.5, the step "
        "multiplies it: step * warmup_steps ** -1.5 (`**` binds tighter than `*`, no parentheses needed)":
            d ** -0.5 * np.minimum(s ** -0.5, (s * w) ** -1.5),
        "the warm-up rises linearly to d_model^-0.5 (step / warmup_steps), so the rate drops suddenly after "
        "step = warmup_steps: during warm-up it is d_model^-0.5 * step * warmup_steps^-1.5, which meets "
        "d_model^-0.5 * step^-0.5 at the peak": d ** -0.5 * np.where(s < w, s / w, s ** -0.5),
    }


def noam_parts(s, got, expected, w):
    """Which part of the schedule is wrong: the warm-up (steps up to warmup_steps / 2), the decay (steps from
    2 warmup_steps on) or only the steps near the peak (or None)."""
    ok = np.isclose(got, expected, rtol=1e-6, atol=1e-12)
    early, late = s <= w / 2, s >= 2 * w

    def at(where):
        bad = int(np.flatnonzero(where & ~ok)[0])
        return f"at step {int(s[bad])} it should be {expected[bad]:.4g}, yours is {got[bad]:.4g}"

    if ok[late].all() and not ok[early].all():
        return (f"after the peak your rate is right, but during warm-up it is not: {at(early)}. The warm-up part "
                "is d_model^-0.5 * step * warmup_steps^-1.5: it grows linearly and meets d_model^-0.5 * step^-0.5 "
                "at step = warmup_steps.")
    if ok[early].all() and not ok[late].all():
        return (f"during warm-up your rate is right, but after the peak it is not: {at(late)}. The decay part is "
                "d_model^-0.5 * step^-0.5 (the inverse square root of the step).")
    if ok[early].all() and ok[late].all():
        return (f"far from the peak your rate is right, but not near step = warmup_steps: {at(~ok)}. The rate is "
                "the min of the two parts, which are equal, d_model^-0.5 * warmup_steps^-0.5, at step = "
                "warmup_steps: it grows until then and decays after.")
    return None


def plain_number(x):
    """The exercise asks for plain Python numbers in and out (the rate an optimizer's param group holds)."""
    kind = f"{type(x).__module__}.{type(x).__qualname__}".replace("builtins.", "")
    expect(isinstance(x, (int, float)) and not isinstance(x, bool),
           f"noam_lr returned a {kind} ({x!r}), not a plain Python number: the exercise asks for plain numbers in "
           "and out. Compute with Python's `min` and `**` on the numbers given (no tensors), or return "
           "`float(...)` of your result.")


# ---------------------------------------------------------------------------------------------
# Exercise 2: label_smoothed_loss
# ---------------------------------------------------------------------------------------------
def _loss_draw(g, B=3, T=6, V=9, pad_id=0):
    logits = torch.tensor(g.normal(0, 2, size=(B, T, V)), dtype=torch.float32)
    target = torch.tensor(g.integers(0, V - 1, size=(B, T)))
    target = target + (target >= pad_id).long()  # every id but pad_id (0 is a real token when pad_id != 0)
    if pad_id:
        target[1, :2] = 0
    target[0, T - 2:] = pad_id                   # sentences of 4, 6 and 1 real tokens
    target[2, 1:] = pad_id
    pad = target == pad_id
    logits[pad] = logits[pad] * 3                # peaked rows at the padding: counting them changes the loss
    logits[2, 0, target[2, 0]] -= 4              # the one-token sentence is a bad prediction: its mean stands out
    return logits, target


def loss_inputs(ev, seed, eps, pad_id=0):
    """(logits (3, 6, 9), target (3, 6)) with padding (pad_id) at the end of two sentences, drawn until the
    right loss and every mistake of `loss_mistakes` are far apart (or equal)."""
    g = ev.rng(seed)
    for _ in range(50):
        logits, target = _loss_draw(g, pad_id=pad_id)
        values = [ref_loss(logits, target, eps, pad_id), *loss_mistakes(logits, target, eps, pad_id).values(),
                  *([ref_loss(logits, target, eps, 0)] if pad_id else [])]
        if _distinct(values, rtol=1e-2, atol=1e-3):
            break
    return logits, target


def _wrong_axis_loss(logits, target, eps, pad_id=0):
    """The loss with log_softmax over the positions (dim 1) instead of the vocabulary."""
    log_p = torch.log_softmax(logits, dim=1)
    nll = -log_p.gather(-1, target[..., None])[..., 0]
    keep = (target != pad_id).float()
    return ((((1 - eps) * nll + eps * -log_p.mean(-1)) * keep).sum() / keep.sum())


def _terms(log_p, target):
    return -log_p.gather(-1, target[..., None])[..., 0], -log_p.mean(-1)


def loss_mistakes(logits, target, eps, pad_id=0):
    """{symptom: the loss it gives}."""
    log_p = torch.log_softmax(logits, -1)
    V = logits.size(-1)
    nll, uniform = _terms(log_p, target)
    keep = (target != pad_id).float()

    def masked_mean(per_token):
        return (per_token * keep).sum() / keep.sum()

    smoothed = (1 - eps) * nll + eps * uniform
    others = (-log_p.sum(-1) - nll) / (V - 1)
    raw_nll, raw_uniform = _terms(logits, target)
    p_nll, p_uniform = _terms(torch.softmax(logits, -1), target)
    no_log = "the logits are used as log-probabilities: take log_softmax over the vocabulary (the last axis) " \
             "first, log p(v) = z_v - log Σ_u exp(z_u)"
    return {
        "padding positions are counted: multiply by the mask (target != pad_id) and average over the "
        "real tokens only": smoothed.mean(),
        "the sum over real tokens is divided by ALL positions: divide by the number of non-padding "
        "tokens": (smoothed * keep).sum() / keep.numel(),
        "the sum over real tokens is divided by the number of sentences B = target.size(0): divide by the "
        "number of non-padding tokens, (target != pad_id).sum()": (smoothed * keep).sum() / target.size(0),
        "the sum over real tokens is divided by the sentence length T = target.size(1): divide by the "
        "number of non-padding tokens, (target != pad_id).sum()": (smoothed * keep).sum() / target.size(1),
        "the loss is the plain cross-entropy: mix in ε times the average of -log p over the "
        "vocabulary": masked_mean(nll),
        "the true-token term is not scaled by (1 - ε)": masked_mean(nll + eps * uniform),
        "ε is spread over the V - 1 wrong tokens only; this lesson (and PyTorch's label_smoothing) "
        "gives ε/V to EVERY token, the true one included": masked_mean((1 - eps) * nll + eps * others),
        "the loss is returned as a sum: return the mean over the non-padding tokens": (smoothed * keep).sum(),
        "the softmax runs over the wrong axis: log_softmax over the LAST axis (the vocabulary, V)":
            _wrong_axis_loss(logits, target, eps),
        no_log: masked_mean((1 - eps) * raw_nll + eps * raw_uniform),
        "the probabilities are used where the loss takes log-probabilities: use log_softmax, not softmax":
            masked_mean((1 - eps) * p_nll + eps * p_uniform),
        "the smoothing term sums -log p(v) over the vocabulary: it is the MEAN, (1/V) Σ_v -log p(v) "
        "(ε/V on every token)": masked_mean((1 - eps) * nll + eps * V * uniform),
        "the weights are swapped: (1 - ε) goes with the true token's -log p(y), ε with the uniform term":
            masked_mean(eps * nll + (1 - eps) * uniform),
        "the loss is averaged per sentence, then over the sentences: average over all the non-padding tokens "
        "of the batch at once (sum of the masked losses / number of real tokens)":
            ((smoothed * keep).sum(1) / keep.sum(1)).mean(),
        "the smoothing term also counts the padding: mask BOTH terms with (target != pad_id) before averaging":
            (1 - eps) * masked_mean(nll) + eps * uniform.mean(),
        "the true-token term also counts the padding: mask BOTH terms with (target != pad_id) before averaging":
            (1 - eps) * nll.mean() + eps * masked_mean(uniform),
    }


def _probe_call(ev, answer, *args):
    try:
        return to_numpy(ev.call(answer, *args)).astype(np.float64)
    except (ExerciseError, TypeError, ValueError):
        return None


def _same(got, expected):
    return got is not None and got.shape == np.shape(expected) and np.allclose(got, to_numpy(expected), rtol=1e-4,
                                                                                 atol=1e-5)


def loss_probes(ev, answer, logits, target, eps):
    """Probes of the properties a wrong loss misses (for `explained`)."""

    def shift():
        shifted = logits + torch.linspace(-3, 5, logits[..., :1].numel()).reshape(logits[..., :1].shape)
        got, before = _probe_call(ev, answer, shifted, target.clone(), eps, 0), _probe_call(
            ev, answer, logits.clone(), target.clone(), eps, 0)
        if got is not None and before is not None and not np.allclose(got, before, rtol=1e-4, atol=1e-4):
            return ("your loss changes when a constant is added to all the logits of a position, which leaves "
                    "the softmax unchanged: turn the logits into log-probabilities first (log_softmax over the "
                    "vocabulary, the last axis).")
        return None

    def unsmoothed():
        plain = _probe_call(ev, answer, logits.clone(), target.clone(), 0.0, 0)
        if eps and _same(plain, ref_loss(logits, target, 0.0)):
            return ("with smoothing = 0 your loss is the right cross-entropy, but with smoothing = ε it is not: "
                    "ℓ_t = (1 - ε)(-log p(y_t)) + ε (1/V) Σ_v (-log p(v)), averaged over the non-padding positions.")
        return None

    def unpadded():
        full = target.clone()
        full[full == 0] = 1
        if _same(_probe_call(ev, answer, logits.clone(), full, eps, 0), ref_loss(logits, full, eps)):
            return ("your loss is right when no position is padding, but not with padding: mask every term of ℓ_t "
                    "with (target != pad_id) and divide the sum by the number of real tokens of the whole batch.")
        return None

    return shift, unsmoothed, unpadded


def confident_logits(logits, g):
    """`logits` with one token of every position 200 above the rest (an over-confident model): the other
    tokens' probabilities underflow to 0 in float32."""
    top = torch.tensor(g.integers(0, logits.size(-1), size=logits.shape[:-1]))
    return logits.scatter_add(-1, top[..., None], torch.full_like(logits[..., :1], 200.0))


LARGE_LOGITS = ("with one logit 200 above the others (an over-confident model) the loss is {got}: the other tokens' "
                "probabilities underflow to 0 in float32, and log(0) = -inf. Compute log p with torch.log_softmax "
                "(z - logsumexp(z)), not log(softmax(z)).")


# ---------------------------------------------------------------------------------------------
# Exercise 3: beam_step
# ---------------------------------------------------------------------------------------------
def _as_out(s, o, t):
    return np.stack([np.asarray(s, np.float64), np.asarray(o, np.float64), np.asarray(t, np.float64)])


def beam_mistakes(scores, log_probs, beam_size):
    """{symptom: the (new_scores, origin, token) rows it gives}."""
    K, V = log_probs.shape
    flat_lp = log_probs.flatten()
    top_lp, idx_lp = flat_lp.topk(beam_size)
    candidates = scores[:, None] + log_probs
    per_beam = candidates.max(-1)
    total = candidates.flatten()
    top, idx = total.topk(beam_size)
    low, idx_low = total.topk(beam_size, largest=False)
    local, local_tok = candidates.topk(min(beam_size, V), dim=-1)
    first = slice(0, beam_size)
    product, idx_prod = (scores[:, None] * log_probs).flatten().topk(beam_size)
    row = (scores[None, :] + log_probs).flatten().topk(beam_size) if K == V else None   # scores as a (K,) row
    return {
        "the previous scores are not added: a candidate's score is scores[k] + log_probs[k, v]":
            _as_out(top_lp, idx_lp // V, idx_lp % V),
        "the new scores are only the new token's log-probability: add the prefix score scores[k]":
            _as_out(flat_lp[idx], idx // V, idx % V),
        "each beam kept only its own best token: choose the beam_size best candidates over ALL "
        "beam_size x V (prefix, token) pairs, so one good prefix may produce several":
            _as_out(per_beam.values, torch.arange(K), per_beam.indices),
        "origin and token are swapped: with the (beam_size, V) scores flattened, origin = index // V and "
        "token = index % V": _as_out(top, idx % V, idx // V),
        "these are the LOWEST scores: take the beam_size largest (torch.topk)": _as_out(low, idx_low // V, idx_low % V),
        "the candidates are each beam's best tokens in beam order, not ranked across beams: flatten the (K, V) "
        "totals and take the beam_size best of all of them (topk), best first":
            _as_out(local.flatten()[first], torch.arange(K).repeat_interleave(local.size(1))[first],
                    local_tok.flatten()[first]),
        "the flat index is decoded with the number of beams K = scores.size(0): the (K, V) candidates have V "
        "per beam, so origin = index // V and token = index % V, with V = log_probs.size(-1)":
            _as_out(top, idx // K, idx % K),
        **({UNSQUEEZE: _as_out(row.values, row.indices // V, row.indices % V)} if row is not None else {}),
        "the prefix score is multiplied by the token's log-probability: probabilities multiply, so their logs "
        "ADD: a candidate's score is scores[k] + log_probs[k, v]": _as_out(product, idx_prod // V, idx_prod % V),
    }


UNSQUEEZE = ("scores (K,) was added to log_probs (K, V) without a token axis: broadcasting lines a (K,) vector up with "
             "the LAST axis (the V tokens), so torch cannot add them unless K == V, and then adds scores[v] to token v "
             "of every beam. Give each beam's score its own row: scores[:, None] + log_probs (scores.unsqueeze(-1)).")


def beam_crashes(K, V):
    """The crashes of beam_step's typical slips (evaluation.call_naming's errors), for scores (K,), log_probs (K, V)."""
    def broadcast(match):
        return UNSQUEEZE if {int(match[1]), int(match[2])} == {K, V} else None
    return [(r"size of tensor a \((\d+)\) must match the size of tensor b \((\d+)\) at non-singleton dimension",
             broadcast)]


def beam_inputs(ev, seed, K, V):
    """(scores (K,) best first, log_probs (K, V)), drawn until the right step and every mistake of
    `beam_mistakes` differ from each other, and no mistake keeps the right candidates in another order (so each
    mistake is named alike under every seed)."""
    g = ev.rng(seed)
    for _ in range(100):
        scores = torch.tensor(np.sort(g.normal(-3, 1.5, size=K))[::-1].copy(), dtype=torch.float32)
        log_probs = torch.log_softmax(torch.tensor(g.normal(0, 2, size=(K, V)), dtype=torch.float32), -1)
        values = [_as_out(*_reference(scores, log_probs, K)), *beam_mistakes(scores, log_probs, K).values()]
        chosen = [{tuple(pair) for pair in v[1:].T.tolist()} for v in values]
        if _distinct(values, rtol=1e-3, atol=1e-3, equal_ok=False) and chosen[0] not in chosen[1:]:
            break
    return scores, log_probs


def _reference(scores, log_probs, beam_size):
    from ..decoding import beam_step
    return beam_step(scores, log_probs, beam_size)


def integer_indices(x, what):
    """`origin` and `token` are integer indices (they pick beams and tokens, e.g. `memory[origin]`)."""
    t = torch.as_tensor(x)
    if t.is_floating_point() or t.is_complex():
        frac = t[t != t.round()]
        if frac.numel():
            expect(False, f"{what} holds fractions (e.g. {float(frac[0]):.4g}): `index / V` is true division. The "
                          "beam of flat index i is i // V (integer division) and its token i % V.")
        expect(False, f"{what} has dtype {t.dtype}: return integer indices (a long tensor, e.g. index // V), "
                      "which can pick the beams and tokens.")


def beam_order(ref, new_scores, origin, token):
    """The beam_size best candidates, with their scores, in another order than best first (or None)."""
    got = list(zip(*(torch.as_tensor(x).tolist() for x in (origin, token, new_scores))))
    right = list(zip(*(r.tolist() for r in (ref[1], ref[2], ref[0]))))
    if [g[:2] for g in got] != [r[:2] for r in right] and \
            np.allclose(sorted(got), sorted(right), atol=1e-4):
        return ("the beam_size best candidates are there, but not best first: return them sorted by new_scores, in "
                "descending order (torch.topk sorts them).")
    return None


def beam_probes(scores, log_probs, beam_size, new_scores, origin, token):
    """Probes of the properties a wrong step misses (for `explained`): do origin and token point at the returned
    scores, are they the beam_size best candidates, best first."""
    K, V = log_probs.shape
    s, o, t = (torch.as_tensor(x).detach().double() for x in (new_scores, origin, token))
    ref_s, ref_o, ref_t = (x.double() for x in _reference(scores, log_probs, beam_size))
    total = (scores[:, None] + log_probs).double()
    inside = bool(((o >= 0) & (o < K) & (o == o.round()) & (t >= 0) & (t < V) & (t == t.round())).all())
    pointed = total[o.long(), t.long()] if inside else None
    consistent = pointed is not None and torch.allclose(pointed, s, rtol=1e-4, atol=1e-5)

    def indices():
        if torch.allclose(s, ref_s, rtol=1e-4, atol=1e-5) and not consistent:
            return ("new_scores are right, but origin and token do not point at them: scores[origin[i]] + "
                    "log_probs[origin[i], token[i]] must be new_scores[i]. With the (K, V) candidates flattened, "
                    "origin = index // V and token = index % V (V = log_probs.size(-1)).")
        return None

    def totals():
        if torch.equal(o, ref_o) and torch.equal(t, ref_t):
            return ("origin and token are right, but new_scores are not the candidates' running totals "
                    "scores[origin] + log_probs[origin, token] (the log-probability of each whole new prefix).")
        return None

    def best():
        if not consistent or len(set(zip(o.tolist(), t.tolist()))) < beam_size:
            return None
        return ("each (origin, token) is a real candidate with its score, but they are not the beam_size best of all "
                "K x V candidates: rank the candidates of every beam together (flatten the (K, V) totals, then "
                "topk), so one good prefix may produce several.")

    return indices, totals, best
