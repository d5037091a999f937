"""Lesson 10, exercise 2: the label-smoothed cross-entropy.

    label_smoothed_loss(logits (B, T, V), target (B, T), smoothing ε, pad_id) -> a scalar tensor,
        ℓ_t = (1 - ε)(-log p(y_t)) + ε (1/V) Σ_v (-log p(v)), averaged over the non-padding positions of the batch

The check compares the loss with the course's on random logits and targets (drawn until the registered mistakes
give values far apart) for ε = 0.1, 0.2 and 0, then with a pad id other than 0, then with one logit 200 above the
others (an over-confident model). It names each registered slip by the loss it gives, else the property the loss
misses (invariance to a shift of a position's logits, the plain cross-entropy at ε = 0, no padding), and a loss
that is not one number.
"""
import numpy as np
import torch

from ...training import label_smoothed_loss as ref_loss
from ..core import ExerciseError, Mistake, Mistakes, exercise, expect, single_threaded, to_numpy
from ..evaluation import Evaluation
from ..expectations import explained
from .distinct import distinct

PAD = 5     # a pad id other than 0 (the course's PAD_ID): the learner's function must use its pad_id argument


def _loss(log_p=lambda z: torch.log_softmax(z, -1), terms=lambda nll, uni, eps, V: (1 - eps) * nll + eps * uni,
          reduce=lambda loss, keep: (loss * keep).sum() / keep.sum(), logits_of=lambda z: z):
    """The loss with one of its steps written another way (the one definition of the slips in a step): log_p turns
    the logits into log-probabilities, terms mixes -log p(y) and the mean of -log p over the vocabulary per position,
    reduce averages them with the mask of the real tokens."""
    def label_smoothed_loss(logits, target, smoothing, pad_id):
        lp = log_p(logits_of(logits))                               # (B, T, V)
        nll = -lp.gather(-1, target[..., None])[..., 0]             # (B, T)
        uniform = -lp.mean(-1)                                      # (B, T)
        return reduce(terms(nll, uniform, smoothing, logits.size(-1)), (target != pad_id).float())
    return label_smoothed_loss


def _split(nll_reduce, uniform_reduce):
    """The two terms averaged apart: the true token's by nll_reduce, the smoothing term by uniform_reduce."""
    def label_smoothed_loss(logits, target, smoothing, pad_id):
        lp = torch.log_softmax(logits, -1)
        keep = (target != pad_id).float()
        nll, uniform = -lp.gather(-1, target[..., None])[..., 0], -lp.mean(-1)
        return (1 - smoothing) * nll_reduce(nll, keep) + smoothing * uniform_reduce(uniform, keep)
    return label_smoothed_loss


def _masked(t, keep):
    return (t * keep).sum() / keep.sum()


def _others(nll, uniform, eps, V):
    """ε spread over the V - 1 other tokens: Σ_v≠y -log p(v) / (V - 1)."""
    return (1 - eps) * nll + eps * (V * uniform - nll) / (V - 1)


_MASK = "multiply by the mask (target != pad_id), divide by its sum"
M = Mistakes(
    Mistake("not_a_loss", "the loss is a {kind}: it is returned as a scalar tensor", hint="return the loss tensor",
            shows=lambda *args: [ref_loss(*args)]),
    Mistake("not_one_number", "the loss has shape {shape}: it is ONE number, the mean over the non-padding positions",
            hint=_MASK, shows=lambda logits, target, eps, pad_id: torch.nn.functional.cross_entropy(
                logits.transpose(1, 2), target, ignore_index=pad_id, label_smoothing=eps, reduction="none")),
    Mistake("padding_counted", "the padding positions are counted: the loss averages over the real tokens only",
            hint=_MASK, shows=_loss(reduce=lambda loss, keep: loss.mean())),
    Mistake("divided_by_all", "the sum over the real tokens is divided by the number of ALL positions, B · T: it is "
            "divided by the number of real tokens", hint=_MASK,
            shows=_loss(reduce=lambda loss, keep: (loss * keep).sum() / keep.numel())),
    Mistake("divided_by_batch", "the sum over the real tokens is divided by the number of sentences B: it is divided "
            "by the number of real tokens", hint=_MASK,
            shows=_loss(reduce=lambda loss, keep: (loss * keep).sum() / keep.size(0))),
    Mistake("divided_by_length", "the sum over the real tokens is divided by the sentence length T: it is divided by "
            "the number of real tokens", hint=_MASK,
            shows=_loss(reduce=lambda loss, keep: (loss * keep).sum() / keep.size(1))),
    Mistake("no_smoothing", "the loss is the plain cross-entropy: ε times the mean of -log p over the vocabulary is "
            "mixed in", shows=_loss(terms=lambda nll, uni, eps, V: nll)),
    Mistake("true_term_unscaled", "the true token's term is not scaled by (1 - ε)",
            shows=_loss(terms=lambda nll, uni, eps, V: nll + eps * uni)),
    Mistake("spread_over_others", "ε is spread over the V - 1 wrong tokens only; this lesson (and PyTorch's "
            "label_smoothing) gives ε/V to EVERY token, the true one included", shows=_loss(terms=_others)),
    Mistake("summed", "the loss is the sum over the real tokens: it is their mean", hint=_MASK,
            shows=_loss(reduce=lambda loss, keep: (loss * keep).sum())),
    Mistake("softmax_axis", "the softmax runs over the positions: the log-probabilities are over the vocabulary, the "
            "last axis (V)", hint="torch.log_softmax(logits, dim=-1)",
            shows=_loss(log_p=lambda z: torch.log_softmax(z, dim=1))),
    Mistake("logits_as_log_probs", "the logits are used as log-probabilities: log p(v) = z_v - log Σ_u exp(z_u), the "
            "log-softmax over the vocabulary", hint="torch.log_softmax(logits, dim=-1)",
            shows=_loss(log_p=lambda z: z)),
    Mistake("probabilities", "the probabilities are used where the loss takes log-probabilities",
            hint="torch.log_softmax, not torch.softmax", shows=_loss(log_p=lambda z: torch.softmax(z, -1))),
    Mistake("smoothing_summed", "the smoothing term sums -log p(v) over the vocabulary: it is the MEAN, (1/V) Σ_v "
            "-log p(v) (ε/V on every token)",
            shows=_loss(terms=lambda nll, uni, eps, V: (1 - eps) * nll + eps * V * uni)),
    Mistake("weights_swapped", "the weights are swapped: (1 - ε) goes with the true token's -log p(y), ε with the "
            "smoothing term", shows=_loss(terms=lambda nll, uni, eps, V: eps * nll + (1 - eps) * uni)),
    Mistake("per_sentence", "the loss is averaged per sentence, then over the sentences: it is averaged over all the "
            "real tokens of the batch at once", hint="(loss * keep).sum() / keep.sum()",
            shows=_loss(reduce=lambda loss, keep: ((loss * keep).sum(1) / keep.sum(1)).mean())),
    Mistake("smoothing_counts_padding", "the smoothing term also counts the padding: BOTH terms are averaged over the "
            "real tokens only", shows=_split(_masked, lambda t, keep: t.mean())),
    Mistake("true_term_counts_padding", "the true token's term also counts the padding: BOTH terms are averaged over "
            "the real tokens only", shows=_split(lambda t, keep: t.mean(), _masked)),
    Mistake("pad_id_ignored", "with pad_id = {pad} your loss leaves out the positions holding 0 and counts those "
            "holding {pad}: the padding id is the argument, not 0", hint="(target != pad_id), or ignore_index=pad_id",
            shows=lambda logits, target, eps, pad_id: ref_loss(logits, target, eps, 0)),
    Mistake("not_shift_invariant", "your loss changes when a constant is added to all the logits of a position, which "
            "leaves the softmax unchanged: the logits are turned into log-probabilities first (over the vocabulary, "
            "the last axis)", hint="torch.log_softmax(logits, dim=-1)",
            shows=_loss(log_p=torch.nn.functional.logsigmoid)),
    Mistake("smoothing_term", "with smoothing = 0 your loss is the right cross-entropy, but with smoothing = ε it is "
            "not: ℓ_t = (1 - ε)(-log p(y_t)) + ε (1/V) Σ_v (-log p(v)), averaged over the non-padding positions",
            shows=_loss(terms=lambda nll, uni, eps, V: (1 - eps) * nll + eps * uni * (1 + eps))),
    Mistake("padding", "your loss is right when no position is padding, but not with padding: every term of ℓ_t is "
            "masked with the real tokens, and the sum is divided by the number of real tokens of the whole batch",
            hint=_MASK,
            shows=_loss(reduce=lambda loss, keep: (loss * keep).sum() / (keep.sum() + (1 - keep).sum() / 2))),
    Mistake("large_logits", "with one logit 200 above the others (an over-confident model) the loss is {got}: the "
            "other tokens' probabilities underflow to 0 in float32, and log(0) = -inf",
            hint="torch.log_softmax (z - logsumexp(z)), not torch.log(torch.softmax(z))",
            shows=_loss(log_p=lambda z: torch.softmax(z, -1).log())),
)
_VALUES = ["padding_counted", "divided_by_all", "divided_by_batch", "divided_by_length", "no_smoothing",
           "true_term_unscaled", "spread_over_others", "summed", "softmax_axis", "logits_as_log_probs", "probabilities",
           "smoothing_summed", "weights_swapped", "per_sentence", "smoothing_counts_padding",
           "true_term_counts_padding"]


def _draw(g, B=3, T=6, V=9, pad_id=0):
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


def _inputs(ev, seed, eps, pad_id=0):
    """(logits (3, 6, 9), target (3, 6)) with padding (pad_id) at the end of two sentences, drawn until the right
    loss and every registered mistake's are far apart (or equal)."""
    g = ev.rng(seed)
    for _ in range(50):
        logits, target = _draw(g, pad_id=pad_id)
        keys = _VALUES + (["pad_id_ignored"] if pad_id else [])
        values = [ref_loss(logits, target, eps, pad_id), *M.variants(keys, logits, target, eps, pad_id).values()]
        if distinct(values, rtol=1e-2, atol=1e-3):
            break
    return logits, target


def _probe_call(ev, answer, *args):
    try:
        return to_numpy(ev.call(answer, *args)).astype(np.float64)
    except (ExerciseError, TypeError, ValueError):
        return None


def _same(got, expected):
    return got is not None and got.shape == np.shape(expected) and np.allclose(got, to_numpy(expected), rtol=1e-4,
                                                                                 atol=1e-5)


def _probes(ev, answer, logits, target, eps):
    """Probes of the properties a wrong loss misses (for `explained`)."""
    def shift():
        shifted = logits + torch.linspace(-3, 5, logits[..., :1].numel()).reshape(logits[..., :1].shape)
        got, before = _probe_call(ev, answer, shifted, target.clone(), eps, 0), _probe_call(
            ev, answer, logits.clone(), target.clone(), eps, 0)
        changed = got is not None and before is not None and not np.allclose(got, before, rtol=1e-4, atol=1e-4)
        return M.not_shift_invariant if changed else None

    def unsmoothed():
        plain = _probe_call(ev, answer, logits.clone(), target.clone(), 0.0, 0)
        return M.smoothing_term if eps and _same(plain, ref_loss(logits, target, 0.0)) else None

    def unpadded():
        full = target.clone()
        full[full == 0] = 1
        return M.padding if _same(_probe_call(ev, answer, logits.clone(), full, eps, 0), ref_loss(logits, full, eps)) \
            else None

    return shift, unsmoothed, unpadded


def _confident(logits, g):
    """`logits` with one token of every position 200 above the rest (an over-confident model): the other
    tokens' probabilities underflow to 0 in float32."""
    top = torch.tensor(g.integers(0, logits.size(-1), size=logits.shape[:-1]))
    return logits.scatter_add(-1, top[..., None], torch.full_like(logits[..., :1], 200.0))


def _one_number(got):
    expect(torch.is_tensor(got) or np.isscalar(got), M.not_a_loss.at(kind=type(got).__name__))
    shape = tuple(got.shape) if torch.is_tensor(got) else np.shape(got)
    expect(np.size(got.detach().numpy() if torch.is_tensor(got) else got) == 1, M.not_one_number.at(shape=shape))


def _smoothed_target(logits, target, smoothing, pad_id):
    """A right answer written another way: the smoothed target distribution q, -Σ q log p, a boolean-mask mean."""
    V = logits.size(-1)
    q = torch.full_like(logits, smoothing / V).scatter_add(-1, target[..., None],
                                                           torch.full_like(logits[..., :1], 1 - smoothing))
    per_token = -(q * torch.log_softmax(logits, -1)).sum(-1)
    return per_token[target != pad_id].mean()


@exercise("label-smoothed loss", reference=ref_loss, mistakes=M, right=[_smoothed_target])
@single_threaded
def label_smoothed_loss(ev: Evaluation, answer):
    """answer(logits (B, T, V), target (B, T), smoothing, pad_id) -> the loss, a scalar tensor."""
    tests = 0
    for seed, eps in ((0, 0.1), (1, 0.2), (2, 0.0)):
        logits, target = _inputs(ev, seed, eps)
        got = ev.call(answer, logits.clone(), target.clone(), eps, 0)
        _one_number(got)
        with explained(*_probes(ev, answer, logits, target, eps)):
            ev.expect_close(got, ref_loss(logits, target, eps, 0), f"label_smoothed_loss(logits, target, "
                            f"smoothing={eps})", mistakes=M.variants(_VALUES, logits, target, eps, 0),
                            rtol=1e-4, atol=1e-5)
        tests += 1
    logits, target = _inputs(ev, 4, 0.1, pad_id=PAD)
    got = ev.call(answer, logits.clone(), target.clone(), 0.1, PAD)
    _one_number(got)
    mistakes = M.variants(["pad_id_ignored"] + _VALUES, logits, target, 0.1, PAD)
    mistakes[M.pad_id_ignored.at(pad=PAD)] = mistakes.pop(M.pad_id_ignored)
    ev.expect_close(got, ref_loss(logits, target, 0.1, PAD), f"label_smoothed_loss(logits, target, 0.1, pad_id={PAD})",
                    mistakes=mistakes, rtol=1e-4, atol=1e-5)
    logits, target = _inputs(ev, 3, 0.1)
    logits = _confident(logits, ev.rng(3))
    got = ev.call(answer, logits.clone(), target.clone(), 0.1, 0)
    value = float(got.detach().double()) if torch.is_tensor(got) else float(got)
    expect(np.isfinite(value), M.large_logits.at(got=value))
    expected = ref_loss(logits, target, 0.1, 0)
    with explained(lambda: M.large_logits.at(got=f"{value:.6g}, expected {float(expected):.6g}")):
        ev.expect_close(got, expected, "label_smoothed_loss with large logits", rtol=1e-4, atol=1e-4)
    return tests + 2
