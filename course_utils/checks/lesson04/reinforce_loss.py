"""Lesson 04, exercise 8: the REINFORCE loss of hard attention.

    reinforce_loss(log_alpha (B, T), sampled (B,), reward (B,), baseline ()) -> -(r - b) log alpha[sampled], the mean
    over the batch, a scalar

(r - b) is a constant for the gradient: only log alpha[sampled] is differentiated. The check draws three batches
(binary and real rewards), names the loss's mistakes by their values, and then tests the gradient: it reaches
log_alpha, it does not reach the reward or a (learned) baseline, and it is the expected one.
"""
import torch
import torch.nn.functional as F

from ... import scores as ref
from ..core import Mistake, Mistakes, exercise, expect, expect_shape, randn
from ..evaluation import Evaluation


def wrong_reinforce(slip=None):
    """reinforce_loss written with one `slip` (None: the right answer); the single definition of the mistakes below."""
    def reinforce_loss(log_alpha, sampled, reward, baseline):
        B = len(sampled)
        log_p = log_alpha[torch.arange(B), sampled]                                      # (B,)
        advantage = reward - baseline if slip == "not_detached" else (reward - baseline).detach()
        r, b = reward.detach(), torch.as_tensor(baseline).detach()
        loss = {
            "no_baseline": lambda: -(r * log_p).mean(),
            "baseline_added": lambda: -((r + b) * log_p).mean(),
            "baseline_outside+": lambda: -(r * log_p).mean() + b,
            "baseline_outside-": lambda: -(r * log_p).mean() - b,
            "wrong_sign": lambda: (advantage * log_p).mean(),
            "alpha_not_log": lambda: -(advantage * log_p.exp()).mean(),
            "summed": lambda: -(advantage * log_p).sum(),
            "per_example": lambda: -(advantage * log_p),
            "product_of_means": lambda: -(advantage * log_p[:, None]).mean(),
            "block": lambda: -(advantage * log_alpha[:, sampled]).mean(),
            "all_positions_mean": lambda: -(advantage[:, None] * log_alpha).mean(),
            "all_positions_sum": lambda: -(advantage[:, None] * log_alpha).sum(-1).mean(),
        }.get(slip, lambda: -(advantage * log_p).mean())()
        return torch.tensor(loss.item()) if slip == "no_grad" else loss
    reinforce_loss.__name__ = f"reinforce_loss_{slip}"
    return reinforce_loss


_LOSS = "-(r - b) log alpha[sampled]"


def _slip(key, says, slip=None, hint=""):
    return Mistake(key, says, hint=hint, shows=wrong_reinforce(slip or key))


M = Mistakes(
    _slip("no_baseline", f"the baseline is missing: the loss is {_LOSS}; subtracting b leaves the gradient unbiased "
          "and makes it far less noisy"),
    _slip("baseline_added", f"the baseline is added: the advantage is r - b, so the loss is {_LOSS}, not "
          "-(r + b) log alpha[sampled]"),
    _slip("baseline_outside", "the baseline is {how} the loss, outside the product: it multiplies the "
          f"log-probability, {_LOSS}, not -(r log alpha[sampled]) {{sign}} b", "baseline_outside-"),
    _slip("wrong_sign", f"the loss has the wrong sign: MINIMISE {_LOSS}, so that gradient descent raises the "
          "log-probability of the samples that did better than the baseline"),
    _slip("alpha_not_log", "you used alpha instead of log alpha: REINFORCE weights the gradient of the "
          f"LOG-probability, {_LOSS} (the argument is already log alpha)"),
    _slip("summed", "the loss is summed over the batch: it is the mean over the B examples"),
    _slip("per_example", "you returned one loss per example: the loss is their mean over the batch, a single number"),
    _slip("product_of_means", "the loss is the product of two batch means, mean(r - b) times mean(log "
          "alpha[sampled]): each example's (r - b) multiplies its OWN log-probability, and the products are averaged",
          hint="(r - b) (B,) times log_alpha[torch.arange(B), sampled] (B,); a (B, 1) gather broadcasts to (B, B): "
          "squeeze it"),
    _slip("block", "log_alpha[:, sampled] picks a (B, B) block, every sampled position in every row: each example "
          "takes one entry, log alpha[b, sampled[b]]", hint="log_alpha[torch.arange(B), sampled], or gather"),
    _slip("all_positions_mean", "the log-probabilities of every position are averaged: the loss takes only the "
          "sampled one, log alpha[b, sampled[b]]"),
    _slip("all_positions_sum", "the log-probabilities of every position are summed: the loss takes only the sampled "
          "one, log alpha[b, sampled[b]]"),
    _slip("not_detached", "the gradient flows into the {name}: (r - b) is a constant for REINFORCE (a learned "
          "baseline would be trained by this loss in the wrong direction)", hint="(reward - baseline).detach()"),
    _slip("no_grad", "no gradient reaches log_alpha: the loss is computed from the tensor log_alpha with torch "
          "operations (no `.item()`, `.detach()` or NumPy on it)"),
)
_VALUES = [m for m in M if m.key not in ("baseline_outside", "not_detached", "no_grad")]


def _mistakes(log_alpha, sampled, reward, baseline):
    values = M.variants(_VALUES, log_alpha, sampled, reward, baseline)
    for slip, how, sign in (("baseline_outside-", "subtracted from", "-"), ("baseline_outside+", "added to", "+")):
        values[M.baseline_outside.at(how=how, sign=sign)] = wrong_reinforce(slip)(log_alpha, sampled, reward, baseline)
    return values


def _one_hot(log_alpha, sampled, reward, baseline):
    """A right answer written another way: the one-hot of the samples picks the log-weights; the sum divided by B."""
    picked = (F.one_hot(sampled, log_alpha.shape[-1]) * log_alpha).sum(-1)
    return -((reward - baseline).detach() * picked).sum() / len(sampled)


def _nll(log_alpha, sampled, reward, baseline):
    """A right answer written another way: nll_loss without reduction gives -log alpha[sampled]."""
    with torch.no_grad():
        advantage = reward - baseline
    return (advantage * F.nll_loss(log_alpha, sampled, reduction="none")).mean()


@exercise("REINFORCE loss for hard attention", reference=ref.reinforce_loss, mistakes=M,
          right=[_one_hot, _nll])
def reinforce_loss(ev: Evaluation, answer):
    """answer(log_alpha (B, T), sampled (B,), reward (B,), baseline ()) -> -(r - b) log alpha[sampled], mean."""
    tests = 0
    for seed, (B, T, binary) in enumerate([(5, 6, True), (4, 3, False), (6, 8, True)]):
        g = ev.rng(450 + seed)
        log_alpha = torch.log_softmax(randn(g, B, T, scale=1.5), dim=-1)
        sampled = torch.from_numpy(g.integers(T, size=B))
        reward = torch.tensor([1.0, 0.0] * B)[:B] if binary else randn(g, B)
        reward = reward[torch.from_numpy(g.permutation(B))]
        baseline = torch.tensor(0.35 + 0.1 * seed)
        expected = ref.reinforce_loss(log_alpha, sampled, reward, baseline)
        # a learned baseline (or reward) would carry a gradient: the loss must not send any into them
        la, r, b = (x.clone().requires_grad_() for x in (log_alpha, reward, baseline))
        loss = ev.call(answer, la, sampled.clone(), r, b)
        what = f"the loss (B={B}, T={T})"
        ev.expect_close(loss, expected, what, mistakes=_mistakes(log_alpha, sampled, reward, baseline))
        expect_shape(loss, (), what)
        expect(getattr(loss, "requires_grad", False), M.no_grad)
        loss.backward()
        for name, x in (("reward", r), ("baseline", b)):
            expect(x.grad is None or not torch.any(x.grad != 0), M.not_detached.at(name=name))
        expect(la.grad is not None, M.no_grad)
        grad = torch.zeros(B, T)
        grad[torch.arange(B), sampled] = -(reward - baseline) / B
        ev.expect_close(la.grad, grad, "the gradient of the loss with respect to log_alpha")
        tests += 1
    return tests
