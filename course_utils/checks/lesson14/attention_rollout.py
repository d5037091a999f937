"""Lesson 14, exercise 4: attention rollout (Abnar & Zuidema 2020).

    attention_rollout(maps (N, B, h, T, T)) -> R (B, T, T) = Ã_N ... Ã_2 Ã_1,
        Ã_l = 0.5·I + 0.5·(maps[l] averaged over its heads), each row renormalised to sum to 1

The check draws four stacks of softmax weights (the last one after dropout, whose rows do not sum to 1, so that
renormalising matters) and compares R with the reference; the lesson's typical mistakes are named by their values,
each computed by running its own wrong answer (`rollout`, below). Where none matches, it names the property that
fails, found by running the answer on the stack's first layers alone: one layer's R (which must be that layer's Ã),
or the first layer whose product with the layers before goes wrong.
"""
import functools

import torch

from ...rollout import attention_rollout as reference
from ..core import Mistake, Mistakes, exercise, expect, randn, single_threaded
from ..errors import ExerciseError
from ..evaluation import Evaluation
from ..mistakes import GENERIC
from .properties import by_property


def rollout(maps, kind):
    """R (B, T, T) of `maps` (N, B, h, T, T) written with the mistake `kind` (a key of the registry, below)."""
    eye = torch.eye(maps.size(-1))
    out = None
    heads = {"heads_max": lambda a: a.amax(1), "heads_sum": lambda a: a.sum(1), "heads_first": lambda a: a[:, 0]}
    layers = {"skip_first": maps[1:], "skip_last": maps[:-1]}.get(kind, maps)
    weights = {"attention_not_halved": (0.5, 1.0), "identity_not_halved": (1.0, 0.5)}.get(kind, (0.5, 0.5))
    for i, layer in enumerate(layers):
        a = heads.get(kind, lambda a: a.mean(1))(layer)
        if kind == "renorm_before":
            a = a / a.sum(-1, keepdim=True)                  # A's rows renormalised, then 0.5·I + 0.5·A
        if kind == "no_residual" or (kind == "first_raw" and i == 0):
            pass
        elif kind == "rows_sum_2":
            a = eye + a
        elif kind != "residual_once":
            a = weights[0] * eye + weights[1] * a
            if kind == "softmax_rows":
                a = a.softmax(-1)                            # renormalised by a softmax, not by the sum
            elif kind != "no_renorm":
                a = a / a.sum(-2 if kind == "columns" else -1, keepdim=True)
        if out is None:
            out = a
        elif kind == "order_reversed":
            out = out @ a
        elif kind in ("last_only", "first_only"):
            out = a if kind == "last_only" else out
        elif kind == "elementwise":
            out = a * out
        elif kind == "halfway":
            out = 0.5 * (a @ out) + 0.5 * out                # each step half the product, half what came before
        else:
            out = a @ out
    if kind == "residual_once":
        out = 0.5 * eye + 0.5 * out
    return out


def _wrong(kind):
    return functools.partial(rollout, kind=kind)


_EVERY = "R = Ã_N ... Ã_2 Ã_1 multiplies every layer's Ã"
M = Mistakes(
    Mistake("order_reversed", "the layers are multiplied in the wrong order: R = Ã_N ... Ã_2 Ã_1, each later layer "
            "on the LEFT of the product of the layers before it", hint="R = a @ R, layer after layer",
            shows=_wrong("order_reversed")),
    Mistake("no_residual", "the residual connection is missing: each layer is Ã = 0.5·I + 0.5·A (A averaged over "
            "the heads), not A alone", shows=_wrong("no_residual")),
    Mistake("rows_sum_2", "each layer's I + A has rows that sum to 2: Ã = 0.5·I + 0.5·A, or I + A with each row "
            "renormalised to sum to 1", shows=_wrong("rows_sum_2")),
    Mistake("residual_once", "the residual is added once, to the product: it belongs to every layer, Ã_l = 0.5·I + "
            "0.5·A_l, before the product", shows=_wrong("residual_once")),
    Mistake("heads_max", "the heads are combined by their maximum: each layer's A is the MEAN of its heads",
            shows=_wrong("heads_max")),
    Mistake("heads_sum", "the heads are summed: each layer's A is the MEAN of its heads", shows=_wrong("heads_sum")),
    Mistake("heads_first", "only the first head is used: each layer's A is the mean of ALL its heads",
            shows=_wrong("heads_first")),
    Mistake("skip_first", "the first layer is left out: " + _EVERY + ", the first included",
            shows=_wrong("skip_first")),
    Mistake("skip_last", "the last layer is left out: " + _EVERY + ", the last included", shows=_wrong("skip_last")),
    Mistake("last_only", "this is the last layer's Ã alone: " + _EVERY, shows=_wrong("last_only")),
    Mistake("first_only", "this is the first layer's Ã alone: " + _EVERY, shows=_wrong("first_only")),
    Mistake("first_raw", "the first layer has no residual: R starts from its raw attention A_1; every layer, the "
            "first included, is Ã = 0.5·I + 0.5·A", hint="start R from the identity and apply every Ã",
            shows=_wrong("first_raw")),
    Mistake("columns", "the COLUMNS of each Ã are renormalised to sum to 1: its ROWS must (row i: how token i's "
            "state is mixed from the tokens)", hint="a / a.sum(-1, keepdim=True)", shows=_wrong("columns")),
    Mistake("attention_not_halved", "the attention is not halved: Ã = 0.5·I + A puts twice the residual's weight on "
            "the attention; each layer is 0.5·I + 0.5·A", shows=_wrong("attention_not_halved")),
    Mistake("identity_not_halved", "the residual is not halved: Ã = I + 0.5·A puts twice the attention's weight on "
            "the residual; each layer is 0.5·I + 0.5·A", shows=_wrong("identity_not_halved")),
    Mistake("elementwise", "the layers are multiplied element by element: rollout is a MATRIX product of the "
            "layers' Ã", hint="R = a @ R", shows=_wrong("elementwise")),
    Mistake("renorm_before", "A's rows are renormalised before the identity is added: it is the rows of Ã = 0.5·I + "
            "0.5·A itself that are renormalised; when A's rows do not sum to 1 (weights after dropout) the two "
            "differ", hint="a = 0.5 * eye + 0.5 * A; a / a.sum(-1, keepdim=True)", shows=_wrong("renorm_before")),
    Mistake("no_renorm", "the rows of Ã = 0.5·I + 0.5·A are not renormalised: when A's rows do not sum to 1 "
            "(weights after dropout), neither do R's", hint="a / a.sum(-1, keepdim=True)", shows=_wrong("no_renorm")),
    Mistake("transposed_R", "R is transposed: row i of R says how much of token i's final state comes from each "
            "input token; the product Ã_N ... Ã_1 gives it as it is",
            shows=lambda maps: reference(maps).transpose(-2, -1)),
    Mistake("batch_mean", "the rollout has shape {got}, (h, T, T): each layer is averaged over the BATCH; A is the "
            "mean over the HEADS (axis 1 of a layer's (B, h, T, T)), one R per input",
            shows=lambda maps: reference(maps.transpose(1, 2))),
    Mistake("per_layer", "the rollout has shape {got}, one (T, T) matrix per layer: R is the PRODUCT of the layers' "
            "Ã, one (T, T) per input, (B, T, T)",
            shows=lambda maps: torch.stack([reference(maps[i:i + 1]) for i in range(maps.size(0))])),
    Mistake("one_layer", "with a stack of ONE layer (maps[:1]), R must be that layer's Ã = 0.5·I + 0.5·(its weights "
            "averaged over the heads), each row renormalised to sum to 1; yours differs most at input {b}, row {i}"
            "{sums}", shows=_wrong("softmax_rows")),
    Mistake("product", "with one layer your R is that layer's Ã, as it must be{upto}, but with the first {n} layers it "
            "is not Ã_{n} times the rollout of the {before}: each new layer multiplies the product so far, on the "
            "left", shows=_wrong("halfway")),
)
_BY_VALUES = [key for key in M.keys() if key not in ("batch_mean", "per_layer", "one_layer", "product")]


def _run(ev, answer, maps):
    """The answer's R on `maps`, as float64, or None where it cannot give one."""
    try:
        got = ev.call(answer, maps)
        return torch.as_tensor(got).detach().double()
    except (ExerciseError, TypeError, ValueError, RuntimeError):
        return None


def _layers(ev, answer, maps):
    """A probe: the first sub-stack maps[:n] whose rollout the answer gets wrong, named (one_layer, product)."""
    def probe():
        N, B, _, T, _ = maps.shape
        for n in range(1, N + 1):
            got, want = _run(ev, answer, maps[:n]), reference(maps[:n]).double()
            if got is None or got.shape != want.shape:
                return None
            if torch.allclose(got, want, atol=1e-5, rtol=1e-4):
                continue
            if n == 1:
                b, i = divmod(int((got - want).abs().amax(-1).argmax()), T)
                sums = got[b, i].sum()
                return M.one_layer.at(b=b, i=i, sums="" if abs(sums - 1) < 1e-4 else f" (its row sums to {sums:.4g})")
            return M.product.at(n=n, upto=f" and with the first {n - 1} layers" if n > 2 else "",
                                before=f"first {n - 1} layers" if n > 2 else "first layer")
        return None
    return probe


def _right_from_the_last(maps):
    """From the last layer down: R = Ã_N, then R = R Ã_l for l = N-1 .. 1."""
    N, B, h, T, _ = maps.shape
    eye = torch.eye(T, dtype=maps.dtype)
    R = None
    for layer in range(N - 1, -1, -1):
        a = (eye + maps[layer].sum(dim=1) / h) / 2
        a = a / a.sum(dim=-1, keepdim=True)
        R = a if R is None else torch.bmm(R, a)
    return R


@exercise("attention rollout", name="attention_rollout", reference=reference, mistakes=M, right=[_right_from_the_last])
@single_threaded
def attention_rollout(ev: Evaluation, answer):
    """answer(maps (N, B, h, T, T)) -> R (B, T, T) = Ã_N ... Ã_1, Ã = 0.5 I + 0.5 mean over heads, rows
    renormalised (the last maps are weights after dropout, whose rows do not sum to 1)."""
    tests = 0
    for seed, (N, B, h, T) in enumerate([(3, 2, 4, 5), (2, 3, 2, 6), (4, 1, 3, 4), (3, 2, 3, 5)]):
        g = ev.rng(seed)
        maps = randn(g, N, B, h, T, T, scale=2.0).softmax(-1)
        if seed == 3:                                   # dropout (p = 0.2) on the weights: rows sum to 0.4 .. 1.6
            maps = maps * torch.as_tensor(g.random(size=maps.shape) > 0.2, dtype=maps.dtype) / 0.8
        want = reference(maps)
        got = ev.call(answer, maps)
        shape = tuple(got.shape) if hasattr(got, "shape") else None
        expect(shape != (h, T, T), M.batch_mean.at(got=shape))
        expect(shape != (N, B, T, T), M.per_layer.at(got=shape))
        with by_property(_layers(ev, answer, maps), keys=set(GENERIC)):
            ev.expect_close(got, want, f"the rollout (N = {N} layers)", mistakes=M.variants(_BY_VALUES, maps))
        tests += 1
    return tests
