"""Lesson 15, exercise 5: one token of (gated) DeltaNet.

    delta_rule_step(S (B, h, d_v, d_k), q, k (B, h, d_k), v (B, h, d_v), beta (B, h), alpha=None (B, h))
        -> (o (B, h, d_v), S_new (B, h, d_v, d_k)):  S_new = alpha S (I - beta k kᵀ) + beta v kᵀ,  o = S_new q

alpha None: no decay (DeltaNet). The check compares both results with the course's
(course_utils.delta_rule.delta_rule_step) without and with a gate, with d_k != d_v (so that a transposed state
shows), names the mistake whose values the answer gives, and tests the point of the delta rule: with a unit key and
beta = 1 the new state returns exactly the new value under that key (S_new k = v), whatever it held before.
"""
import torch

from ...delta_rule import delta_rule_step as ref_step
from ..core import Mistake, Mistakes, exercise, expect, expect_returns, randn, single_threaded, to_numpy
from ..evaluation import Evaluation, call_naming
from ..mistakes import Said
from ..torch_errors import BROADCAST


def wrong(kind):
    """The step with the mistake `kind`."""
    def delta_rule_step(S, q, k, v, beta, alpha=None):
        a = None if alpha is None or kind == "gate_ignored" else alpha[..., None, None]
        outer = lambda x, y: x[..., :, None] * y[..., None, :]          # noqa: E731 x yᵀ
        read = (S @ k[..., None])[..., 0]                              # S k
        b = beta[..., None, None]
        if kind == "no_erase":                       # S + beta v kᵀ: linear attention's update
            new = S + b * outer(v, k)
        elif kind == "gate_after_update":            # alpha (S (I - beta k kᵀ) + beta v kᵀ)
            new = S - b * outer(read, k) + b * outer(v, k)
            new = new if a is None else a * new
        elif kind == "erase_undecayed":              # alpha S - beta (S k) kᵀ + beta v kᵀ: the read before the decay
            new = (S if a is None else a * S) - b * outer(read, k) + b * outer(v, k)
        elif kind == "erase_without_beta":           # S (I - k kᵀ) + beta v kᵀ
            S1 = S if a is None else a * S
            new = S1 - outer((S1 @ k[..., None])[..., 0], k) + b * outer(v, k)
        elif kind == "write_without_beta":           # S (I - beta k kᵀ) + v kᵀ
            S1 = S if a is None else a * S
            new = S1 - b * outer((S1 @ k[..., None])[..., 0], k) + outer(v, k)
        elif kind == "erase_sign":                   # S (I + beta k kᵀ) + beta v kᵀ
            S1 = S if a is None else a * S
            new = S1 + b * outer((S1 @ k[..., None])[..., 0], k) + b * outer(v, k)
        else:
            S1 = S if a is None else a * S
            new = S1 - b * outer((S1 @ k[..., None])[..., 0], k) + b * outer(v, k)
        source = S if kind == "read_before_update" else new
        return (source @ q[..., None])[..., 0], new
    return delta_rule_step


def _transposed(S, q, k, v, beta, alpha=None):
    """The state kept as d_k x d_v (k vᵀ): the other convention, with the read-out S^T q."""
    St = S.transpose(-2, -1)
    if alpha is not None:
        St = alpha[..., None, None] * St
    err = v - (St.transpose(-2, -1) @ k[..., None])[..., 0]
    St = St + beta[..., None, None] * k[..., :, None] * err[..., None, :]
    return (St.transpose(-2, -1) @ q[..., None])[..., 0], St


def _outer_k_v(S, q, k, v, beta, alpha=None):
    """The update written k (v - S k)ᵀ, (d_k, d_v), added to the (d_v, d_k) state: torch cannot line them up."""
    if alpha is not None:
        S = alpha[..., None, None] * S
    err = v - (S @ k[..., None])[..., 0]
    S = S + k[..., :, None] * (beta[..., None] * err)[..., None, :]
    return (S @ q[..., None])[..., 0], S


def _gate_without_axes(S, q, k, v, beta, alpha=None):
    """beta and alpha (B, h) multiplied as they are: they line up with the state's last axes, not with (B, h)."""
    old = (S @ k[..., None])[..., 0]
    return (S @ q[..., None])[..., 0], S + (beta * (v - old))[..., None] * k[..., None, :]


M = Mistakes(
    Mistake("gate_axes", "β or α (one number per batch row and head, (B, h)) is multiplied as it is, so torch lines it "
            "up with the LAST axes of the state or of v: give it axes of size 1 for those",
            hint="beta[..., None] with v (B, h, d_v); alpha[..., None, None] with S (B, h, d_v, d_k)",
            shows=_gate_without_axes),
    Mistake("no_erase", "the new value is ADDED under k without removing what S held there: that is lesson 13's "
            "linear attention. The delta rule replaces it: S (I - β k kᵀ) + β v kᵀ = S + β (v - S k) kᵀ",
            hint="old = S @ k (what S stores under k); S = S + beta * (v - old) kᵀ", shows=wrong("no_erase")),
    Mistake("gate_after_update", "the gate α scales the whole update, the new value β v kᵀ included: it decays the "
            "OLD state only, S_new = α S (I - β k kᵀ) + β v kᵀ", shows=wrong("gate_after_update")),
    Mistake("erase_undecayed", "the erase term reads the state before its decay: S_new = α S (I - β k kᵀ) + β v kᵀ "
            "erases α S k, what the decayed state holds under k", shows=wrong("erase_undecayed")),
    Mistake("gate_ignored", "the gate α is ignored: when it is given, the old state decays by α first",
            shows=wrong("gate_ignored")),
    Mistake("erase_without_beta", "the erase term has no β: the state forgets S k entirely, then adds β v; both "
            "parts are scaled by β, S + β (v - S k) kᵀ", shows=wrong("erase_without_beta")),
    Mistake("write_without_beta", "the new value is written without β: both the erase and the write are scaled by "
            "β, S + β (v - S k) kᵀ", shows=wrong("write_without_beta")),
    Mistake("erase_sign", "the erase term has the wrong sign: the state loses what it held under k, S - β (S k) kᵀ",
            shows=wrong("erase_sign")),
    Mistake("read_before_update", "the output reads the state BEFORE this token's update: o = S_new q, so that "
            "the token sees what it has just written", shows=wrong("read_before_update")),
    Mistake("state_axes", "an axis of d_k = {d_k} entries meets one of d_v = {d_v}: the state S is (d_v, d_k), "
            "values along its rows and keys along its columns, so an outer product added to it is v kᵀ (d_v x d_k, "
            "not k vᵀ), and S k has d_v entries, like v",
            hint="v[..., :, None] * k[..., None, :] is v kᵀ; (S @ k[..., None])[..., 0] is S k (B, h, d_v)",
            shows=_outer_k_v),
    Mistake("state_transposed", "the state is returned as d_k x d_v, {shape}: S maps keys to values, (B, h, d_v, "
            "d_k), S_new = S + β (v - S k) kᵀ", shows=_transposed),
)
VALUE_KEYS = ["no_erase", "gate_after_update", "erase_undecayed", "gate_ignored", "erase_without_beta",
              "write_without_beta", "erase_sign", "read_before_update"]


def _einsum(S, q, k, v, beta, alpha=None):
    if alpha is not None:
        S = S * alpha[..., None, None]
    err = v - torch.einsum("bhvk,bhk->bhv", S, k)
    S = S + torch.einsum("bh,bhv,bhk->bhvk", beta, err, k)
    return torch.einsum("bhvk,bhk->bhv", S, q), S


def _householder(S, q, k, v, beta, alpha=None):
    eye = torch.eye(k.size(-1))
    A = eye - beta[..., None, None] * k[..., :, None] * k[..., None, :]              # I - β k kᵀ
    S = (S if alpha is None else alpha[..., None, None] * S) @ A
    S = S + beta[..., None, None] * v[..., :, None] * k[..., None, :]
    return (S @ q[..., None]).squeeze(-1), S


def _inputs(ev, seed, B=2, h=3, d_k=5, d_v=4, gated=False):
    g = ev.rng(seed)
    S, q, v = randn(g, B, h, d_v, d_k), randn(g, B, h, d_k), randn(g, B, h, d_v)
    k = torch.nn.functional.normalize(randn(g, B, h, d_k), dim=-1)
    beta = torch.as_tensor(g.uniform(0.2, 0.9, size=(B, h)), dtype=torch.float32)
    alpha = torch.as_tensor(g.uniform(0.5, 0.95, size=(B, h)), dtype=torch.float32) if gated else None
    return (S, q, k, v, beta) + ((alpha,) if gated else ())


_GATE_CRASH = ({3, 5}, {3, 4})                  # (h, d_k), (h, d_v): a gate (B, h) lined up with the wrong axes


@exercise("delta-rule state update", reference=ref_step, mistakes=M, right=[_einsum, _householder])
@single_threaded
def delta_rule_step(ev: Evaluation, answer):
    """answer(S, q, k, v, beta, alpha=None) -> (o, S_new)."""
    tests = 0
    for seed, gated in ((0, False), (1, True), (2, True)):
        args = _inputs(ev, seed, gated=gated)
        expected = ref_step(*args)
        d_k, d_v = args[2].size(-1), args[3].size(-1)
        crashes = [(BROADCAST, lambda m: M.gate_axes if {int(m["a"]), int(m["b"])} in _GATE_CRASH else None),
                   (BROADCAST, lambda m, d_k=d_k, d_v=d_v: M.state_axes.at(d_k=d_k, d_v=d_v)
                    if {int(m["a"]), int(m["b"])} == {d_k, d_v} else None)]
        o, S = expect_returns(call_naming(ev, crashes, answer, *args), expected, ("o", "S_new"))
        shape = tuple(getattr(S, "shape", ()))
        expect(shape != (2, 3, 5, 4), M.state_transposed.at(shape=shape))
        variants = M.variants(VALUE_KEYS, *args)
        what = "with a gate α" if gated else "without a gate (DeltaNet)"
        ev.expect_close(S, expected[1], f"the new state {what}", mistakes={m: r[1] for m, r in variants.items()})
        ev.expect_close(o, expected[0], f"the output {what}", mistakes={m: r[0] for m, r in variants.items()})
        tests += 1
    # beta = 1 and a unit key: the new state holds exactly v under k
    S, q, k, v, _ = _inputs(ev, 3)
    _, new = expect_returns(ev.call(answer, S, q, k, v, torch.ones(2, 3)), ref_step(S, q, k, v, torch.ones(2, 3)),
                            ("o", "S_new"))
    stored = (torch.as_tensor(new) @ k[..., None])[..., 0]
    # (only an answer that gave the right values above reaches this: it names the property, not a cause)
    expect(abs(to_numpy(stored) - to_numpy(v)).max() < 1e-4,
           Said("values", "with β = 1 and a unit key the new state must hold exactly v under k (S_new k = v), "
                          "whatever S held before: yours does not"))
    return tests + 1
