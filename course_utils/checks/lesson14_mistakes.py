"""Lesson 14's typical mistakes for exercises 1 (head scores) and 4 (attention rollout), written out: the same
formula with one thing wrong (`kind`), and what the check says when an answer gives its values.

    score_variants(w, L)          {kind: scores}: "prev_*" previous-token, "ind_*" induction scores, each (B, h)
    score_mistakes(w, L, "prev")  {message: scores} for `ev.expect_close(..., mistakes=...)`
    rollout_variant(maps, kind)   R (B, T, T) with one mistake; ROLL = {kind: message}
"""
import torch

# ---------------------------------------------------------------------------------------------
# Exercise 1: previous-token and induction scores
# ---------------------------------------------------------------------------------------------
SWAPPED = ("queries and keys are swapped: you read weights[key, query], above the diagonal, where a causal "
           "head's weights are 0; rows are queries: weights[..., t, j] is what query t gives key j")
_BLOCK = ("you averaged a whole block of weights, not a stripe: weights[..., t, :][..., j] takes every pair "
          "(query in t, key in j); index the queries and the keys in ONE step, weights[..., t, t - 1], to get "
          "one key per query")
_BATCH = ("the score is averaged over the batch as well: every sequence gets the same score; average over the "
          "queries only (the last axis of weights[..., t, t - 1]), one score per sequence and head")
_HEADS = ("the score is averaged over the heads as well: every head gets the same score; average over the "
          "queries only (the last axis of weights[..., t, t - 1]), one score per sequence and head")

SAYS = {
    "prev_swapped": SWAPPED,
    "prev_self": "the previous-token score reads the diagonal, weights[t, t] (the token itself): the token before t "
                 "is the key t - 1, one below the diagonal",
    "prev_with_first": "the previous-token score is averaged over 2L queries: query 0 has no token before it; "
                       "average over t = 1 .. 2L-1",
    "prev_second": "the previous-token score is averaged over the second copy only: a previous-token head attends "
                   "to the token before in both copies; average over t = 1 .. 2L-1",
    "prev_short": "the previous-token score leaves out the last query, 2L-1: torch.arange(a, b) stops at b - 1; "
                  "average over t = 1 .. 2L-1, torch.arange(1, 2 * L)",
    "ind_swapped": SWAPPED,
    "ind_off": "the induction stripe is off by one: weights[t, t - L] is the previous occurrence of the current "
               "token itself; an induction head attends to the token AFTER it, key t - L + 1",
    "ind_off_2": "the induction stripe is off by one: key t - L + 2 is two after the previous occurrence; the token "
                 "after it is t - L + 1",
    "ind_diagonal": "the induction score is averaged over the first copy too: only a query in the second copy "
                    "(t = L .. 2L-1) has an earlier occurrence of its token to look back at",
    "ind_short": "the induction score leaves out the last query, 2L-1: torch.arange(a, b) stops at b - 1; average "
                 "over t = L .. 2L-1, torch.arange(L, 2 * L)",
    "prev_late": "the previous-token score leaves out the first query, t = 1 (its key is token 0): average over "
                 "t = 1 .. 2L-1, torch.arange(1, 2 * L)",
    "ind_late": "the induction score leaves out the second copy's first query, t = L (key 1): "
                "average over t = L .. 2L-1, torch.arange(L, 2 * L), L queries",
    "ind_early": "the induction queries are one position early: you read queries L-1 .. 2L-2 (keys 0 .. L-1), and "
                 "query L-1 is still in the first copy; the queries are t = L .. 2L-1, each with key t - L + 1",
}
SAYS.update({"prev_self_from_1": SAYS["prev_self"], "ind_over_all": SAYS["ind_diagonal"],
             "ind_over_all_1": SAYS["ind_diagonal"]})
for _s in ("prev", "ind"):
    SAYS.update({f"{_s}_block": _BLOCK, f"{_s}_batch": _BATCH, f"{_s}_heads": _HEADS})


def score_variants(w, L):
    """{kind: (..)} the mistakes' scores, for weights w (..., 2L, 2L)."""
    t1, t2 = torch.arange(1, 2 * L), torch.arange(L, 2 * L)
    diag = torch.arange(0, 2 * L)
    prev, ind = w[..., t1, t1 - 1].mean(-1), w[..., t2, t2 - L + 1].mean(-1)
    out = {
        "prev_self": w[..., diag, diag].mean(-1), "prev_self_from_1": w[..., t1, t1].mean(-1),
        "prev_with_first": w[..., t1, t1 - 1].sum(-1) / (2 * L), "prev_second": w[..., t2, t2 - 1].mean(-1),
        "prev_swapped": w[..., t1 - 1, t1].mean(-1), "prev_short": w[..., t1[:-1], t1[:-1] - 1].mean(-1),
        "prev_block": w[..., t1, :][..., t1 - 1].mean((-2, -1)),
        "ind_off": w[..., t2, t2 - L].mean(-1), "ind_off_2": w[..., t2[:-1], t2[:-1] - L + 2].mean(-1),
        "ind_diagonal": torch.diagonal(w, offset=-(L - 1), dim1=-2, dim2=-1).mean(-1),
        "ind_over_all": w[..., t2, t2 - L + 1].sum(-1) / (2 * L),
        "ind_over_all_1": w[..., t2, t2 - L + 1].sum(-1) / (2 * L - 1),
        "ind_swapped": w[..., t2 - L + 1, t2].mean(-1), "ind_short": w[..., t2[:-1], t2[:-1] - L + 1].mean(-1),
        "ind_early": w[..., t2 - 1, t2 - L].mean(-1), "ind_late": w[..., t2[1:], t2[1:] - L + 1].mean(-1),
        "prev_late": w[..., t1[1:], t1[1:] - 1].mean(-1), "ind_block": w[..., t2, :][..., t2 - L + 1].mean((-2, -1))}
    for name, score in (("prev", prev), ("ind", ind)):
        if score.dim() >= 2:                                       # (B, h): the same score for a whole axis
            out[f"{name}_batch"] = score.mean(0, keepdim=True).expand_as(score)
            out[f"{name}_heads"] = score.mean(1, keepdim=True).expand_as(score)
    return out


def score_mistakes(w, L, which):
    """{message: scores} of the mistakes of the `which` ("prev" or "ind") score (the swap first)."""
    variants = score_variants(w, L)
    out = {}
    for kind in sorted((k for k in variants if k.startswith(which + "_")), key=lambda k: "swapped" not in k):
        message = SAYS[kind]
        while message in out:                                      # two mistakes, one message: distinct keys
            message += " "
        out[message] = variants[kind]
    return out


# ---------------------------------------------------------------------------------------------
# Exercise 4: attention rollout
# ---------------------------------------------------------------------------------------------
def rollout_variant(maps, kind):
    """R (B, T, T) of `maps` (N, B, h, T, T) with the mistake `kind` (a key of ROLL)."""
    eye = torch.eye(maps.size(-1))
    out = None
    heads = {"max": lambda a: a.amax(1), "sum": lambda a: a.sum(1), "first": lambda a: a[:, 0]}
    layers = {"skip_first": maps[1:], "skip_last": maps[:-1]}.get(kind, maps)
    weights = {"half_attention": (0.5, 1.0), "half_identity": (1.0, 0.5)}.get(kind, (0.5, 0.5))
    for i, layer in enumerate(layers):
        a = heads.get(kind, lambda a: a.mean(1))(layer)
        if kind == "renorm_before":
            a = a / a.sum(-1, keepdim=True)                  # A's rows renormalised, then 0.5·I + 0.5·A
        if kind == "no_residual" or (kind == "first_raw" and i == 0):
            pass
        elif kind == "unnormalised":
            a = eye + a
        elif kind != "residual_once":
            a = weights[0] * eye + weights[1] * a
            if kind != "no_renorm":
                a = a / a.sum(-2 if kind == "columns" else -1, keepdim=True)
        if out is None:
            out = a
        elif kind == "reversed":
            out = out @ a
        elif kind in ("last", "first_layer"):
            out = a if kind == "last" else out
        elif kind == "elementwise":
            out = a * out
        else:
            out = a @ out
    if kind == "residual_once":
        out = 0.5 * eye + 0.5 * out
    return out


_WEIGHTS = ("the residual and the attention are not weighted equally: the 0.5 is on only one of them; each layer "
            "is Ã = 0.5·I + 0.5·A (or I + A: the same once the rows are renormalised)")
ROLL = {
    "reversed": "the layers are multiplied in the wrong order: R = Ã_N ... Ã_2 Ã_1, the last layer on the LEFT "
                "(rollout = Ã_l @ rollout, layer after layer)",
    "no_residual": "the residual connection is missing: each layer is Ã = 0.5·I + 0.5·A (A averaged over the "
                   "heads), not A alone",
    "unnormalised": "Ã = I + A has rows that sum to 2: use 0.5·I + 0.5·A, or renormalise each row to sum to 1",
    "residual_once": "the residual is added once, to the product: it belongs to every layer, Ã_l = 0.5·I + "
                     "0.5·A_l, before the product",
    "max": "the heads are combined by their maximum: average them (mean over the head axis)",
    "sum": "the heads are summed: average them (mean over the head axis)",
    "first": "only the first head is used: average every layer's heads",
    "skip_first": "the first layer is left out: R = Ã_N ... Ã_2 Ã_1 multiplies every layer, maps[0] included",
    "skip_last": "the last layer is left out: R = Ã_N ... Ã_2 Ã_1 multiplies every layer, maps[N-1] included",
    "last": "this is the last layer's Ã alone: roll out through the whole stack, R = Ã_N ... Ã_1",
    "first_layer": "this is the first layer's Ã alone: roll out through the whole stack, R = Ã_N ... Ã_1",
    "first_raw": "the first layer has no residual: R starts from its raw attention A_1; every layer, the first "
                 "included, is Ã = 0.5·I + 0.5·A (or start R from the identity and apply every Ã)",
    "columns": "the columns of Ã are renormalised instead of its rows: divide each ROW of 0.5·I + 0.5·A by its "
               "sum, a / a.sum(-1, keepdim=True)",
    "half_attention": _WEIGHTS,
    "half_identity": _WEIGHTS + " ",
    "elementwise": "the layers are multiplied element by element (*): rollout is a MATRIX product, R = Ã_l @ R",
    "renorm_before": "A's rows are renormalised before the identity is added: renormalise the rows of Ã = 0.5·I + "
                     "0.5·A itself (add the identity, then a / a.sum(-1, keepdim=True)); when A's rows do not sum to 1 "
                     "(here weights after dropout) the two differ",
    "no_renorm": "the rows of Ã = 0.5·I + 0.5·A are not renormalised: when A's rows do not sum to 1 (here attention "
                 "weights after dropout), neither do R's; divide each row by its sum, a / a.sum(-1, keepdim=True)",
}
