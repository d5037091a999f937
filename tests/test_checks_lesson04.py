"""Lesson 04 checks: the reference passes, planted mistakes are named, a stub is 'not implemented'."""
import math
import re

import pytest
import torch

from course_utils import scores as ref
from course_utils.checks import ExerciseError, lesson04
from tests.checking import named, not_implemented, prints_not_implemented

pytestmark = pytest.mark.usefixtures("any_seed_offset")   # every test under every seed offset


def additive_split(s, h, W_a, v_a):
    d_s = s.shape[-1]
    return torch.tanh((s @ W_a[:, :d_s].T)[:, None] + h @ W_a[:, d_s:].T) @ v_a


@pytest.mark.parametrize("check, reference", [
    (lesson04.cosine_score, ref.cosine_score),
    (lesson04.additive_score, additive_split),
    (lesson04.location_score, ref.location_score),
    (lesson04.general_score, ref.general_score),
    (lesson04.dot_score, ref.dot_score),
    (lesson04.scaled_dot_score, ref.scaled_dot_score),
    (lesson04.local_p, ref.local_p),
    (lesson04.reinforce_loss, ref.reinforce_loss),
])
def test_reference_passes_and_stub_is_not_implemented(check, reference, capsys):
    assert check(reference) is None
    assert "✔" in capsys.readouterr().out
    with prints_not_implemented():
        check(not_implemented)


def dot(s, h):
    return torch.einsum("bd,btd->bt", s, h)


def test_cosine_mistakes():
    with pytest.raises(ExerciseError, match="plain dot products"):
        lesson04.cosine_score(lambda s, h, beta: beta * dot(s, h))
    with pytest.raises(ExerciseError, match="only h_i is normalised"):
        lesson04.cosine_score(lambda s, h, beta: beta * dot(s, h) / h.norm(dim=-1))
    with pytest.raises(ExerciseError, match="beta is missing"):
        lesson04.cosine_score(lambda s, h, beta: ref.cosine_score(s, h))
    with pytest.raises(ExerciseError, match="only s is normalised"):
        lesson04.cosine_score(lambda s, h, beta: beta * dot(s, h) / s.norm(dim=-1, keepdim=True))
    with pytest.raises(ExerciseError, match="not square-rooted"):
        lesson04.cosine_score(lambda s, h, beta: beta * dot(s, h) / ((s ** 2).sum(-1, keepdim=True)
                                                                     * (h ** 2).sum(-1)))
    with pytest.raises(ExerciseError, match="divided by beta"):
        lesson04.cosine_score(lambda s, h, beta: ref.cosine_score(s, h) / beta)


@pytest.mark.parametrize("norm_s, norm_h, symptom", [
    (-1, 1, r"h is normalised along the time axis"),
    (None, None, r"norm of the whole tensor s .* norm of the whole tensor h"),
    (0, -1, r"s is normalised along the batch axis"),
    (-1, 0, r"h is normalised along the batch axis"),
])
def test_cosine_norms_over_the_wrong_axes(norm_s, norm_h, symptom):
    def cosine(s, h, beta):
        unit_s = s / (s.norm() if norm_s is None else s.norm(dim=norm_s, keepdim=True))
        unit_h = h / (h.norm() if norm_h is None else h.norm(dim=norm_h, keepdim=True))
        return beta * dot(unit_s, unit_h)

    named(lesson04.cosine_score, cosine, symptom + r".*own norm, taken over the features")


@pytest.mark.parametrize("cosine, symptom", [
    (lambda s, h, beta: beta * dot(s, h) / (s.norm(dim=-1) * h.norm(dim=-1)),
     r"shape \(B,\) met one of shape \(B, T\).*T axis.*keepdim=True"),
    (lambda s, h, beta: beta * dot(s / s.norm(dim=-1), h / h.norm(dim=-1, keepdim=True)),
     r"norm taken without keepdim=True .* meets the feature axis"),
    (lambda s, h, beta: beta * dot(s / s.norm(dim=-1, keepdim=True), h / h.norm(dim=-1)),
     r"norm taken without keepdim=True .* meets the feature axis"),
])
def test_cosine_norm_without_keepdim_crash_is_named(cosine, symptom):
    named(lesson04.cosine_score, cosine, symptom)


def test_features_summed_separately():
    """An einsum with different letters for the features of s and of h: (sum_k s_k)(sum_k h_ik)."""
    symptom = r"s and h_i are summed separately.*ONE letter"
    named(lesson04.dot_score, lambda s, h: torch.einsum("bd,bte->bt", s, h), symptom + r", 'bd,btd->bt'")
    named(lesson04.scaled_dot_score, lambda s, h: torch.einsum("bd,bte->bt", s, h) / math.sqrt(s.shape[-1]),
          symptom)
    named(lesson04.cosine_score, lambda s, h, beta: beta * torch.einsum("bd,bte->bt", s, h)
          / (s.norm(dim=-1, keepdim=True) * h.norm(dim=-1)), symptom)
    named(lesson04.general_score, lambda s, h, W: torch.einsum("bd,de,btf->bt", s, W, h),
          symptom + r", 'bd,de,bte->bt'")
    named(lesson04.general_score, lambda s, h, W: torch.einsum("bc,de,bte->bt", s, W, h), symptom)


def test_additive_mistakes():
    def swapped(s, h, W_a, v_a):
        d_h = h.shape[-1]
        return torch.tanh((s @ W_a[:, d_h:].T)[:, None] + h @ W_a[:, :d_h].T) @ v_a

    def no_tanh(s, h, W_a, v_a):
        d_s = s.shape[-1]
        return ((s @ W_a[:, :d_s].T)[:, None] + h @ W_a[:, d_s:].T) @ v_a

    with pytest.raises(ExerciseError, match="blocks of W_a are swapped"):
        lesson04.additive_score(swapped)
    with pytest.raises(ExerciseError, match="tanh is missing"):
        lesson04.additive_score(no_tanh)
    with pytest.raises(ExerciseError, match="tanh is applied after the projection"):
        lesson04.additive_score(lambda s, h, W_a, v_a: torch.tanh(no_tanh(s, h, W_a, v_a)))

    def no_v(s, h, W_a, v_a):
        d_s = s.shape[-1]
        return torch.tanh((s @ W_a[:, :d_s].T)[:, None] + h @ W_a[:, d_s:].T).sum(-1)

    def not_transposed(s, h, W_a, v_a):
        d_s = s.shape[-1]
        return torch.tanh((s @ W_a[:, :d_s])[:, None] + h @ W_a[:, d_s:]) @ v_a

    with pytest.raises(ExerciseError, match="v_a is missing"):
        lesson04.additive_score(no_v)
    with pytest.raises(ExerciseError, match="without transposing"):
        lesson04.additive_score(not_transposed)


def additive_planted(mistake):
    """A learner's additive_score with one `mistake` planted."""
    def additive(s, h, W_a, v_a):
        d_s, d_h = s.shape[-1], h.shape[-1]
        split = d_h if mistake == "split at d_h" else d_s
        W_s, W_h = W_a[:, :split], W_a[:, split:]
        ws = s @ (W_s if mistake == "W_s not transposed" else W_s.T)
        wh = h @ (W_h if mistake == "W_h not transposed" else W_h.T)
        if mistake == "no T axis":
            return torch.tanh(ws + wh) @ v_a
        if mistake == "tanh of each term":
            return (torch.tanh(ws)[:, None] + torch.tanh(wh)) @ v_a
        if mistake == "s summed over the batch":
            return torch.tanh(ws.sum(0)[None, None] + wh) @ v_a
        if mistake == "transposed":
            return (torch.tanh(ws[:, None] + wh) @ v_a).T
        return torch.tanh(ws[:, None] + wh) @ v_a
    return additive


@pytest.mark.parametrize("mistake, symptom", [
    ("split at d_h", r"works when d_s = d_h but fails when they differ.*W_s = W_a\[:, :d_s\][\s\S]*PyTorch"),
    ("no T axis", r"without a T axis, so it broadcasts over the wrong axis"),
    ("tanh of each term", r"tanh is taken of W_s s and of W_h h_i separately"),
    ("W_h not transposed", r"W_h is used without transposing"),
    ("W_s not transposed", r"W_s is used without transposing"),
    ("s summed over the batch", r"s is summed over the batch"),
    ("transposed", r"is transposed: \(T, B\)"),
])
def test_additive_planted_mistakes(mistake, symptom):
    named(lesson04.additive_score, additive_planted(mistake), symptom)


def test_additive_planted_answer_without_mistake_passes():
    assert lesson04.additive_score.evaluate(additive_planted(None)).passed


def test_location_mistakes():
    with pytest.raises(ExerciseError, match="returned weights"):
        lesson04.location_score(lambda s, W, T: torch.softmax((s @ W.T)[:, :T], -1))
    with pytest.raises(ExerciseError, match="all max_len positions"):
        lesson04.location_score(lambda s, W, T: s @ W.T)
    with pytest.raises(ExerciseError, match="LAST T entries"):
        lesson04.location_score(lambda s, W, T: (s @ W.T)[:, -T:])
    with pytest.raises(ExerciseError, match="off by one"):
        lesson04.location_score(lambda s, W, T: (s @ W.T)[:, 1:T + 1])
    named(lesson04.location_score, lambda s, W, T: torch.softmax(s @ W.T, -1)[:, :T],
          r"returned weights \(a softmax over all max_len positions")
    named(lesson04.location_score, lambda s, W, T: (s[:1] @ W.T)[:, :T].expand(len(s), T),
          r"scored with the s of example 0")
    named(lesson04.location_score, lambda s, W, T: (W[None] * s[:, None, :]).sum(dim=1)[:, :T],
          r"summed over the positions i instead of the features k")
    named(lesson04.location_score, lambda s, W, T: torch.einsum("bd,td->bd", s, W)[:, :T],
          r"summed over the positions i instead of the features k")


def test_general_mistakes():
    with pytest.raises(ExerciseError, match="transposed"):
        lesson04.general_score(lambda s, h, W: ref.general_score(s, h, W.T))
    with pytest.raises(ExerciseError, match="W_a is missing"):
        lesson04.general_score(lambda s, h, W: dot(s, h))
    named(lesson04.general_score, lambda s, h, W: torch.einsum("ad,de,bte->bt", s, W, h), r"s is summed over the batch")
    named(lesson04.general_score, lambda s, h, W: torch.einsum("ad,de,bte->bt", s, W, h) / len(s),
          r"s is averaged over the batch")
    named(lesson04.general_score, lambda s, h, W: (h @ (s @ W).T)[:, :, 0], r"scored with the s of example 0")
    named(lesson04.general_score, lambda s, h, W: (h @ (s @ W).T)[:, :, -1], r"scored with the s of the last example")


def test_dot_mistakes():
    with pytest.raises(ExerciseError, match="scaled by 1/sqrt"):
        lesson04.dot_score(lambda s, h: dot(s, h) / math.sqrt(s.shape[-1]))
    with pytest.raises(ExerciseError, match="cosine"):
        lesson04.dot_score(lambda s, h: ref.cosine_score(s, h))
    with pytest.raises(ExerciseError, match="not summed"):
        lesson04.dot_score(lambda s, h: s[:, None, :] * h)
    named(lesson04.dot_score, lambda s, h: (h @ s.T)[:, :, 0], r"scored with the s of example 0")
    named(lesson04.dot_score, lambda s, h: torch.einsum("ad,btd->bt", s, h), r"s is summed over the batch")
    named(lesson04.scaled_dot_score, lambda s, h: (h @ s.T)[:, :, 0] / math.sqrt(s.shape[-1]),
          r"scored with the s of example 0")
    named(lesson04.cosine_score, lambda s, h, beta: ref.cosine_score(s[:1].expand_as(s), h, beta),
          r"scored with the s of example 0")


def test_scaled_dot_mistakes():
    with pytest.raises(ExerciseError, match="not scaled"):
        lesson04.scaled_dot_score(dot)
    with pytest.raises(ExerciseError, match="divided by d:"):
        lesson04.scaled_dot_score(lambda s, h: dot(s, h) / s.shape[-1])
    with pytest.raises(ExerciseError, match="sqrt\\(T\\)"):
        lesson04.scaled_dot_score(lambda s, h: dot(s, h) / math.sqrt(h.shape[1]))
    with pytest.raises(ExerciseError, match="multiplied by sqrt\\(d\\)"):
        lesson04.scaled_dot_score(lambda s, h: dot(s, h) * math.sqrt(s.shape[-1]))


# ---------------------------------------------------------------- local-p attention
def local_p_planted(mistake=None):
    """A learner's local_p, written from the formulas, with one `mistake` planted."""
    def local_p(e, mask, s, W_p, v_p, S, D):
        z = torch.tanh(s @ (W_p if mistake == "W_p transposed" else W_p.T)) @ v_p
        if mistake == "no tanh":
            z = (s @ W_p.T) @ v_p
        scale = {"padded T - 1": e.shape[-1] - 1, "padded T": e.shape[-1],
                 "lengths from the mask": mask.sum(-1) - 1}.get(mistake, S)
        p = torch.sigmoid(z) if mistake == "no sigmoid" else scale * torch.sigmoid(z)
        if mistake == "no sigmoid":
            p = S * z
        if mistake == "not scaled by S":
            p = torch.sigmoid(z)
        if mistake == "p rounded":
            p = p.round()
        positions = torch.arange(e.shape[-1], dtype=e.dtype)
        centre = {"round": p.round(), "floor": p.floor()}.get(mistake, p)
        distance = positions[None, :] - centre[:, None]
        window = {"wide": distance.abs() <= D + 1, "narrow": distance.abs() <= D - 1,
                  "strict": distance.abs() < D,
                  "slice": (positions[None, :] >= p.floor()[:, None] - D)
                  & (positions[None, :] < p.floor()[:, None] + D)}.get(mistake, distance.abs() <= D)
        keep = window if mistake == "mask ignored" else window & mask
        sigma = D if mistake == "sigma = D" else D / 2
        distance = positions[None, :] - p[:, None]
        gauss = torch.exp(-distance ** 2 / ((1 if mistake == "no 2" else 2) * sigma ** 2))
        if mistake == "softmax over all":
            return p, ref.masked_softmax(e, mask) * gauss
        if mistake == "softmax then cut":
            return p, ref.masked_softmax(e, mask) * gauss * window
        if mistake == "gauss before softmax":
            return p, ref.masked_softmax(e * gauss, keep)
        if mistake == "log gauss in scores":
            return p, ref.masked_softmax(e - distance ** 2 / (2 * sigma ** 2), keep)
        if mistake == "divide by max":
            exp = torch.exp(e - e.masked_fill(~keep, -torch.inf).amax(-1, keepdim=True)) * keep
            return p, exp / exp.amax(-1, keepdim=True) * gauss
        weights = ref.masked_softmax(e, keep)
        if mistake == "no gauss":
            return p, weights
        if mistake == "returns alpha, p":
            return weights * gauss, p
        if mistake == "returns alpha only":
            return weights * gauss
        return p, weights * gauss
    return local_p


def test_local_p_planted_answer_without_mistake_passes(capsys):
    lesson04.local_p(local_p_planted())
    assert "✔" in capsys.readouterr().out


@pytest.mark.parametrize("mistake, symptom", [
    ("not scaled by S", "not scaled by S"),
    ("no tanh", "tanh is missing"),
    ("no sigmoid", "sigmoid is missing"),
    ("W_p transposed", "W_p is transposed"),
    ("p rounded", "p_t is rounded"),
    ("softmax over all", "softmax runs over all positions: take it over the window"),
    ("softmax then cut", "cut to the window afterwards"),
    ("sigma = D", "sigma = D:"),
    ("no 2", "factor 2"),
    ("no gauss", "Gaussian is missing"),
    ("gauss before softmax", "before the softmax"),
    ("log gauss in scores", "renormalised after the Gaussian"),
    ("divide by max", "largest term instead of the sum"),
    ("mask ignored", "mask is ignored"),
    ("round", "centred on round"),
    ("floor", "centred on int"),
    ("wide", "too wide"),
    ("narrow", "too narrow"),
    ("slice", "stops before its end"),
    ("strict", "the window test is strict, |i - p_t| < D"),
    ("padded T - 1", "p_t is scaled by the padded length T - 1"),
    ("padded T", "p_t is scaled by the padded length T,"),
    ("lengths from the mask", "p_t is scaled by the last positions computed from the mask"),
    ("returns alpha, p", "wrong order"),
    ("returns alpha only", "return 2 things"),
])
def test_local_p_mistakes(mistake, symptom):
    with pytest.raises(ExerciseError, match=re.escape(symptom)):
        lesson04.local_p(local_p_planted(mistake))


# ---------------------------------------------------------------- REINFORCE
def reinforce_planted(mistake=None):
    """A learner's reinforce_loss with one `mistake` planted."""
    def reinforce_loss(log_alpha, sampled, reward, baseline):
        B = len(sampled)
        log_p = log_alpha[torch.arange(B), sampled]
        advantage = reward - baseline
        if mistake != "not detached":
            advantage = advantage.detach()
        if mistake == "no baseline":
            return -(reward.detach() * log_p).mean()
        if mistake == "baseline added":
            return -((reward + baseline).detach() * log_p).mean()
        if mistake == "baseline outside":
            return -(reward.detach() * log_p - baseline.detach()).mean()
        if mistake == "sign":
            return (advantage * log_p).mean()
        if mistake == "alpha":
            return -(advantage * log_p.exp()).mean()
        if mistake == "sum":
            return -(advantage * log_p).sum()
        if mistake == "per example":
            return -(advantage * log_p)
        if mistake == "gather broadcast":
            return -(advantage * log_alpha.gather(1, sampled[:, None])).mean()
        if mistake == "block":
            return -(advantage * log_alpha[:, sampled]).mean()
        if mistake == "all positions":
            return -(advantage[:, None] * log_alpha).mean()
        if mistake == "item":
            return torch.tensor(-(advantage * log_p).mean().item())
        return -(advantage * log_p).mean()
    return reinforce_loss


def test_reinforce_planted_answer_without_mistake_passes(capsys):
    lesson04.reinforce_loss(reinforce_planted())
    assert "✔" in capsys.readouterr().out


@pytest.mark.parametrize("mistake, symptom", [
    ("no baseline", "baseline is missing"),
    ("baseline outside", "baseline must multiply the log-probability"),
    ("baseline added", "the baseline is added: the advantage is r - b"),
    ("sign", "wrong sign"),
    ("alpha", "alpha instead of log alpha"),
    ("sum", "summed over the batch"),
    ("per example", "one loss per example"),
    ("gather broadcast", "broadcasts to (B, B)"),
    ("block", "(B, B) block"),
    ("all positions", "every position are used"),
    ("not detached", "gradient flows into the reward"),
    ("item", "no gradient reaches log_alpha"),
])
def test_reinforce_mistakes(mistake, symptom):
    with pytest.raises(ExerciseError, match=re.escape(symptom)):
        lesson04.reinforce_loss(reinforce_planted(mistake))


def test_additive_score_built_with_the_concatenation_is_named():
    """Lesson 03's way (the concatenation [s; h_i] for every position) gives the right scores; the exercise is to do
    without it, and the check measures the largest tensor built."""
    named(lesson04.additive_score, ref.additive_score, r"builds the concatenation \[s; h_i\] for every position")
