"""What lesson 13's checks say, mistake by mistake, in the lesson's notation: {kind: symptom} for each exercise
(the kinds are those of lesson13_mistakes.py, plus the properties the probes test: two passes, tiles above the
diagonal computed, a T_q x T_k tensor built); and `name(...)`, which says the symptom of the first mistake
whose values an answer has (the crashes of typical slips are named in lesson13_crashes.py)."""
import numpy as np

from .core import ExerciseError, to_numpy
from .lesson13_linear_symptoms import DENOMINATOR, LINEAR  # noqa: F401 - read as say.LINEAR


def same(a, b, atol=1e-5, rtol=1e-4):
    """Equal values, NaN and inf included (a mistake's NaN falls where the answer's does)."""
    if a is None or b is None or not hasattr(a, "shape") or not hasattr(b, "shape"):
        return False
    a, b = to_numpy(a).astype(np.float64), to_numpy(b).astype(np.float64)
    return a.shape == b.shape and np.allclose(a, b, atol=atol, rtol=rtol, equal_nan=True)


def variant(function, *args, **kwargs):
    """A mistake's values, or None where that mistake cannot even run on these inputs (a shape mismatch)."""
    try:
        with np.errstate(all="ignore"):
            return function(*args, **kwargs)
    except (RuntimeError, ValueError, IndexError):
        return None


def name(actual, expected, symptoms, values, atol=1e-5, rtol=1e-4):
    """Raise the symptom of the first mistake (`symptoms`: {kind: message}) whose values (`values(kind)`,
    computed only when the answer is wrong) the answer has. actual/expected may be tuples, compared whole."""
    pack = actual if isinstance(actual, tuple) else (actual,)
    want = expected if isinstance(expected, tuple) else (expected,)
    if all(same(a, e, atol, rtol) for a, e in zip(pack, want)):
        return
    for kind, symptom in symptoms.items():
        got = values(kind)
        got = got if isinstance(got, tuple) else (got,)
        if got[0] is not None and all(same(a, w, atol, rtol) for a, w in zip(pack, got)):
            raise ExerciseError(symptom)


NO_GUARD = ("NaN where a whole block is −∞ (a masked row, or its first block): there m_new = −∞ and exp(−∞ − (−∞)) "
            "is NaN. Subtract a 'safe' maximum, 0 where m_new = −∞ (torch.where(torch.isneginf(m_new), 0, m_new)): "
            "exp(−∞ − 0) = 0 as it should")
ONLINE = {
    "max_wrong_axis": ("m has one value per COLUMN of a block: take each row's maximum over the block's columns "
                       "(dim=-1)"),
    "max_all": ("m is one number for the whole block: take each ROW's maximum over the block's columns "
                "(block.amax(dim=-1)), one value per row"),
    "stale_max": ("m is not the running maximum: after each block set m = m_new = max(m, max of the block) (the "
                  "maximum is never updated, so the next rescaling uses a stale m)"),
    "no_guard": NO_GUARD,
    "no_rescale": ("l is too large: when a block raises the maximum, the old normaliser must be rescaled, "
                   "l = l·e^(m_old − m_new) + Σ exp(x_block − m_new) (it was a sum of exponentials measured from the "
                   "old maximum)"),
    "flipped": ("l is rescaled by e^(m_new − m_old): the factor is e^(m_old − m_new) ≤ 1, since the old terms "
                "exp(x − m_old) become exp(x − m_new) = exp(x − m_old)·e^(m_old − m_new)"),
    "old_max": ("l is inf or NaN: the block's terms are measured from the OLD maximum, exp(x − m_old) (−∞ before the "
                "first block): measure them from the new one, exp(x_block − m_new)"),
    "init_zero": ("m starts at 0: start from m = −∞ (a row whose entries are all negative has a negative maximum, and "
                  "a row with nothing allowed keeps m = −∞)"),
    "no_shift": ("l is Σ exp(x), not measured from the maximum: keep l = Σ exp(x − m), rescaled by e^(m_old − m_new) "
                 "when the maximum grows (exp of a large score overflows)"),
    "two_loops": ("your function went over the blocks a second time (a second loop): the online softmax is ONE pass. "
                  "Update m and l together from each block as it arrives; when a block raises the maximum, rescale l "
                  "by e^(m_old − m_new)"),
    "list": ("m or l came out NaN because a block was read again after the next one had arrived (a block is gone "
             "once passed), yet your function is right when it may keep every block: that is two passes over the "
             "row (e.g. the whole row's maximum first, or the blocks gathered with list() or torch.cat). The online "
             "softmax reads each block ONCE, as it arrives: update m and l from it, then take the next"),
}
ONLINE["sum_wrong_axis"] = ("l sums the exponentials over the wrong axis: each row's l adds up the block's COLUMNS, "
                            "Σ exp(x_block − m_new) over dim=-1, one number per row")
ONLINE["no_guard_zeroed"] = NO_GUARD + " (turning the NaN into 0 afterwards loses the rest of the row)"
ONLINE["flipped_safe"] = ONLINE["flipped"]
ONLINE["block_max"] = ("each block's terms are measured from the block's OWN maximum, exp(x_block − max of the "
                       "block): measure them from the running maximum after this block, exp(x_block − m_new), the "
                       "one the old l is rescaled to, l = l·e^(m_old − m_new) + Σ exp(x_block − m_new)")
ONLINE["block_max_no_rescale"] = ("l adds sums measured from different maxima: each block's Σ exp(x − max of the "
                                  "block) is measured from that block's own maximum and added as it is; measure "
                                  "every term from the running maximum, l = l·e^(m_old − m_new) + "
                                  "Σ exp(x_block − m_new)")
ONLINE["lse"] = ("l is the log-sum-exp m + log l: return the normaliser itself, l = Σ exp(x − m) (0 for a row of "
                 "−∞ only); the log-sum-exp L = m + log l is what the tiled forward pass returns later")


ONLINE["block_max_only"] = ("m is the maximum of the LAST block only (the running maximum is forgotten): update it "
                            "with every block, m_new = max(m, max of the block) = torch.maximum(m, "
                            "block.amax(dim=-1)), so that m ends as the maximum of the whole row, even when that lies "
                            "in an earlier block")
ONLINE["old_max_safe"] = ("each block's terms are measured from the PREVIOUS maximum, exp(x_block − m_old), while the "
                          "old l is rescaled to the new one: measure them from the maximum after this block, "
                          "exp(x_block − m_new), l = l·e^(m_old − m_new) + Σ exp(x_block − m_new)")
ONLINE["sum_rows_mean"] = ("l adds the same number to every row: the block's terms are summed over ALL its rows and "
                           "averaged; each row's l adds up its OWN terms, Σ exp(x_block − m_new) over the block's "
                           "columns (dim=-1), one number per row")
ONLINE["sum_all"] = ("l adds the same number to every row: .sum() without dim= adds up every term of the block, all "
                     "its rows together; each row's l adds up its OWN terms, Σ exp(x_block − m_new) over the block's "
                     "columns (.sum(dim=-1)), one number per row")
ONLINE["forgets_max"] = ("m ends below the row's maximum in the row whose maximum lies in its first block (sorted in "
                         "descending order), and is right in the row whose maximum comes last: m forgets the maxima "
                         "of earlier blocks. Keep the running maximum, m = torch.maximum(m, block.amax(dim=-1)) at "
                         "every block")
ONLINE["shift_columns"] = ("the running maximum is subtracted along the block's COLUMNS: m_new has one value per "
                           "row, (R,), and block − m_new lines it up with the columns; give it its axis, "
                           "exp(block − m_new[..., None])")
ONLINE["clamp_safe"] = ("l is measured from max(m, 0), not from m, in the rows whose maximum is negative: the safe "
                        "maximum replaces only −∞ by 0, torch.where(torch.isneginf(m_new), 0, m_new) (clamp(min=0) "
                        "moves every negative maximum too)")
ONLINE["rescale_new"] = ("the factor e^(m_old − m_new) multiplies the NEW block's sum: it belongs to the OLD l, "
                         "measured from the old maximum, l = l·e^(m_old − m_new) + Σ exp(x_block − m_new)")
ONLINE["safe_block"] = ("the safe maximum tests the BLOCK's maximum, not m_new: after finite blocks a block of −∞ "
                        "has m_new finite, and your l is measured from 0 there; torch.where(torch.isneginf(m_new), 0, "
                        "m_new)")
ONLINE["safe_old"] = ("the safe maximum tests the OLD m (−∞ before the first block), so the first block is measured "
                      "from 0: test the new maximum, torch.where(torch.isneginf(m_new), 0, m_new)")
ONLINE["first_block_only"] = ("m and l are those of the FIRST block only: the function returned after one block (a "
                              "`return` indented into the loop?); go over every block, return after the loop")
ROWS = ("random entries", "sorted in ascending order: its maximum in the last block", "with −∞ entries",
        "its first 4 entries −∞", "−∞ everywhere: m = −∞", "sorted in descending order: its maximum in the first block")


def online_max_rows(got, expected):
    """What the rows of the online softmax's check (online_inputs) say about a wrong m: a maximum of earlier blocks
    forgotten, else the first wrong row, what it holds, got and expected (never a NaN difference of −∞ and −∞)."""
    g, e = to_numpy(got).astype(np.float64), to_numpy(expected).astype(np.float64)
    wrong = np.flatnonzero(~np.isclose(g, e, atol=1e-5, rtol=1e-4))
    if not wrong.size:
        return None
    if 5 in wrong and 1 not in wrong and g[5] < e[5]:
        return ONLINE["forgets_max"]
    r = int(wrong[0])
    return (f"m is wrong in row {r} ({ROWS[r] if r < len(ROWS) else 'of the input'}): got {g[r]:.4g}, expected "
            f"{e[r]:.4g}. m must end as the maximum of the row: m = max(m, max of the block) at every block")


def online_rows(got, expected):
    """What the rows of the online softmax's check (online_inputs: rows 2 and 3 hold blocks of −∞, row 4 is −∞
    everywhere) say about a wrong l, when only some of them are wrong; else None."""
    wrong = set(np.flatnonzero(~np.isclose(to_numpy(got), to_numpy(expected), atol=1e-5, rtol=1e-4)).tolist())
    if wrong and wrong <= {2, 3}:
        return ("l is wrong only in the rows that hold blocks of −∞ (row 3 starts with a whole block of them): there "
                "m_new can be −∞, and exp(−∞ − (−∞)) is NaN; " + NO_GUARD.split(". ", 1)[1])
    if wrong == {4}:
        return "l is wrong only in the row that is −∞ everywhere: that row ends with m = −∞ and l = 0 (no NaN)"
    return None
MERGE = {
    "first_max": "m is not max(m1, m2): the merged maximum is the larger of the two",
    "no_rescale": ("l = l1 + l2 adds normalisers measured from different maxima: rescale each to the common maximum "
                   "m = max(m1, m2), l = l1·e^(m1 − m) + l2·e^(m2 − m)"),
    "flipped": ("the normalisers are rescaled by e^(m − m1) and e^(m − m2): the factors are e^(m1 − m) and "
                "e^(m2 − m), both ≤ 1"),
    "no_guard": NO_GUARD,
}
MERGE["one_rescaled"] = ("only one of the two normalisers is rescaled: both were measured from their own maximum, so "
                         "both move to the common m = max(m1, m2), l = l1·e^(m1 − m) + l2·e^(m2 − m)")
MERGE["other_rescaled"] = MERGE["one_rescaled"]
MERGE["flipped_safe"] = MERGE["flipped"]
MERGE["to_min"] = ("the normalisers are moved to the SMALLER maximum, min(m1, m2): the common maximum is the larger, "
                   "m = max(m1, m2), and both move to it, l = l1·e^(m1 − m) + l2·e^(m2 − m) (factors ≤ 1)")
MERGE["from_m1"] = ("one normaliser is moved to the OTHER part's maximum, l2·e^(m2 − m1) (or l1·e^(m1 − m2)), not "
                    "to the merged maximum: where the other maximum is the smaller, that factor exceeds 1 and the "
                    "other normaliser is never rescaled; move both to m = max(m1, m2), l = l1·e^(m1 − m) + "
                    "l2·e^(m2 − m)")
MERGE["from_m2"] = MERGE["from_m1"]
MERGE["same_factor_m1"] = ("both normalisers are rescaled by the same factor (e^(m1 − m) for both, or e^(m2 − m): a "
                           "copy-paste?): each moves from its OWN maximum to m = max(m1, m2), l = l1·e^(m1 − m) + "
                           "l2·e^(m2 − m)")
MERGE["same_factor_m2"] = MERGE["same_factor_m1"]
MERGE["lse"] = ("l is the merged log-sum-exp, m + log l: return the normaliser itself, l = l1·e^(m1 − m) + "
                "l2·e^(m2 − m), measured from m = max(m1, m2)")
MERGE["l1_twice"] = ("l1 appears in both terms (a copy-paste?): l = l1·e^(m1 − m) + l2·e^(m2 − m), the second "
                     "part's normaliser l2 in the second term")
MERGE["clamp_safe"] = ("l is measured from max(m, 0), not from m, in the row whose maximum is negative: the safe "
                       "maximum replaces only −∞ by 0, torch.where(torch.isneginf(m), 0, m) (clamp(min=0) moves every "
                       "negative maximum too)")
MERGE["product"] = ("the two rescaled normalisers are multiplied: they are sums of exponentials over two parts of a "
                    "row, so ADD them, l = l1·e^(m1 − m) + l2·e^(m2 − m)")


def merge_rows(got, expected, m1, m2):
    """What the rows of the merge's check say about a wrong l when only rows with ONE part empty (m = −∞, l = 0)
    are wrong; else None."""
    wrong = ~np.isclose(to_numpy(got), to_numpy(expected), atol=1e-5, rtol=1e-4)
    one_empty = np.isneginf(to_numpy(m1)) != np.isneginf(to_numpy(m2))
    if not wrong.any() or (wrong & ~one_empty).any():
        return None
    return ("l is wrong only where one part is empty (m = −∞, l = 0): merging with an empty part must give the other "
            "part back unchanged, l = l_other; the common maximum is then the other part's m, and only where BOTH are "
            "−∞ does the safe maximum replace it by 0")
_SKIP_RULE = "skip a tile when its first key comes after the block's last query, j0 > i1 − 1"
TILED = {
    "acc_not_rescaled": ("the accumulator is not rescaled: when the maximum grows, acc = acc·e^(m_old − m_new) + "
                         "P V_j, exactly as l is (acc holds Σ exp(s − m_old) v, measured from the old maximum)"),
    "l_not_rescaled": ("l is not rescaled: when the maximum grows, l = l·e^(m_old − m_new) + rowsum(P), exactly as acc "
                       "is (both are sums measured from the running maximum)"),
    "divide_inside": ("the output is divided by l inside the loop over the key blocks (normalising at every step): "
                      "keep acc unnormalised while the key blocks come in, and divide once, out = acc / l, after the "
                      "last one"),
    "scale_d": "the scores are divided by d_k instead of √d_k: S_ij = Q_i K_jᵀ / √d_k",
    "no_scale": "the scores are not scaled: S_ij = Q_i K_jᵀ / √d_k",
    "scale_times": "the scores are multiplied by √d_k: divide them, S_ij = Q_i K_jᵀ / √d_k",
    "drop_tail": ("the last positions are missing: when the block size does not divide T, the last block is shorter; "
                  "loop with range(0, T, block) and slice up to min(start + block, T)"),
    "no_guard": ("a query whose every key is masked gives NaN (0/0, or exp(−∞ − (−∞))): such a query has l = 0; "
                 "subtract a safe maximum (0 where m = −∞) and give it a zero output"),
    "wrong_side": ("the tiles BELOW the diagonal are skipped: with a causal mask, " + _SKIP_RULE + " (above the "
                   "diagonal); the tiles below it are fully visible"),
    "skip_ge": ("the causal test is off by one at a block edge: a tile whose first key j0 is the block's LAST query "
                "i1 − 1 was skipped, though that query sees that key (j ≤ i): " + _SKIP_RULE),
    "skip_diag": ("the tiles on the diagonal are skipped: a tile that holds both earlier and later keys must be "
                  "computed, with the element-wise causal mask; " + _SKIP_RULE),
    "diag_full": ("the tiles on the diagonal are treated as fully visible: a tile that holds both earlier and later "
                  "keys needs the element-wise causal mask (key j visible from query i iff j ≤ i) before the softmax"),
    "local_idx": ("the element-wise causal mask is built from positions within the tile (0, 1, ...) instead of the "
                  "whole sequence: compare the "
                  "GLOBAL positions, key j0 + c against query i0 + r (they differ when the tiles are not square "
                  "or not aligned)"),
    "inverted_causal": ("the causal mask is inverted: key j is visible from query i iff j ≤ i (on and below the "
                        "diagonal), and masked_fill puts −∞ where the mask is False"),
    "causal_ignored": ("with causal=True the queries see later keys: skip the tiles above the diagonal and mask the "
                       "diagonal tiles element-wise"),
    "empty_rows": ("only the rows of queries with no key allowed are wrong: their output must be zeros (they have "
                   "l = 0: give them 0, not acc / l)"),
    "mask_not_broadcast": ("your function failed with a mask of shape {shape}: a mask only has to BROADCAST to "
                           "(..., T_q, T_k) (a padding mask has size 1 on the query axis): torch.broadcast_to(mask, "
                           "(..., T_q, T_k)) first, a view, then slice its tile [..., i0:i1, j0:j1], the queries' "
                           "rows, then the keys' columns"),
    "mask_ignored": "the mask is ignored: set the scores of masked keys to −∞ in every tile (mask[..., i0:i1, j0:j1])",
    "inverted_mask": ("the mask is inverted: True means 'may attend', so −∞ goes where the mask is False "
                      "(s.masked_fill(~mask_tile, −∞))"),
    "lse_m": "lse is the running maximum m alone: the log-sum-exp is L = m + log l",
    "lse_log_l": "lse is log l alone: add the maximum it was measured from, L = m + log l",
    "lse_l": "lse is m + l: the log-sum-exp is L = m + log l",
    "lse_empty_zero": ("the log-sum-exp of a query with no key allowed must be −∞ (the log of a sum of nothing: "
                       "m = −∞, l = 0), not a number"),
    "leak": ("with causal=True the outputs of earlier positions change when only later keys and values change: "
             "query i must see keys j ≤ i only (skip the tiles above the diagonal, mask the diagonal ones)"),
    "all_tiles": ("with causal=True the tiles above the diagonal are computed (and masked): the outputs of queries "
                  "{rows} turned NaN or changed when only the values of later keys, which they may not see, were set "
                  "to inf (0 · inf = NaN: their weights of 0 were multiplied by those values). Never compute such a "
                  "tile, that is the point of the causal part: " + _SKIP_RULE),
    "extra_tile": ("the causal test is off by one at a block edge: the tile just above the diagonal (first key "
                   "j0 = i1, right after the block's last query) is computed, {rows} (found by setting those keys' "
                   "values to inf: 0 · inf = NaN): " + _SKIP_RULE),
    "quadratic": ("{symptom}: compute ONE tile of scores at a time (block_q x block_k), and build the causal mask of "
                  "a tile from its positions; nothing of size T_q x T_k may exist (the point of tiling: memory that "
                  "grows as T, not T²)"),
    "returns_P": ("your forward pass returns a T_q x T_k tensor besides out and lse: keep nothing of that size for "
                  "the backward pass; L, one number per query, is enough to recompute P tile by tile"),
}
TILED["no_safe"] = ("the queries whose first tiles of keys are all masked lose the keys they do see: at such a tile "
                    "m_new = −∞ and exp(−∞ − (−∞)) is NaN, which spoils l and acc for the rest of the row; subtract "
                    "a safe maximum, 0 where m_new = −∞ (torch.where(torch.isneginf(m_new), 0, m_new))")
TILED["lse_nan"] = ("the log-sum-exp of a query with no key allowed is NaN: at its tiles m_new = −∞, and "
                    "exp(−∞ − (−∞)) is NaN; subtract a safe maximum, 0 where m_new = −∞ (torch.where("
                    "torch.isneginf(m_new), 0, m_new)), so that l stays 0 and L = m + log l = −∞ there")
TILED["dtype"] = ("with float64 inputs your function returns {what} in {dtype}: create its tensors in q's dtype, "
                  "q.new_zeros(...), q.new_full(...) (torch.zeros and torch.full make float32; section 4 runs your "
                  "function in float64)")
TILED["tk_from_q"] = ("only the first T_q keys are read: the number of keys is T_k = k.shape[-2], not q.shape[-2] "
                      "(they differ in cross-attention, where the keys come from another sequence): loop over the "
                      "keys with range(0, T_k, block_k)")
TILED["block_k_ignored"] = ("your tiles are block_q x block_q, a tensor of shape {shape} with block_q={bq} and "
                            "block_k={bk}: the blocks of keys have block_k keys, k[..., j0:j1, :] with j0 in "
                            "range(0, T_k, block_k) and j1 = min(j0 + block_k, T_k), so that each tile of scores is "
                            "block_q x block_k")
TILED["p_old_max"] = ("P is measured from the OLD maximum, exp(S − m_old): measure it from the maximum after this "
                      "tile, P = exp(S − m_new), the one l and acc are rescaled to")
TILED["strict_causal"] = ("the element-wise causal mask leaves out the diagonal: key j is visible from query i iff "
                          "j ≤ i, the query's own position included (cols <= rows, not <)")
TILED["skipped_visible"] = ("the causal test skips tiles that hold keys their queries may see: {tiles} (found by "
                            "changing those keys' values: the outputs of the queries that see them did not move). "
                            + _SKIP_RULE + ", the tiles on the diagonal included")
TILED["divide_inside_twice"] = TILED["divide_inside_reset"] = TILED["divide_inside"]
TILED["wrong_side_unmasked"] = TILED["wrong_side"]
TILED["local_idx_diag"] = TILED["local_idx"]
TILED["state_outside"] = ("m, l and acc are not started afresh for each block of queries (created once before the "
                          "loop, then only sliced): the next block inherits the last one's running statistics. "
                          "Inside the loop over the blocks of queries, before the loop over the keys, start again "
                          "from m = −∞, l = 0, acc = 0 for the block's i1 − i0 queries")
TILED["m_first"] = ("neither l nor acc is rescaled when the maximum grows: their factor e^(m_old − m_new) comes out 1, "
                    "as it does when m is set to m_new before the factor is computed. Compute rescale = exp(m − m_new) "
                    "from the OLD m (with the safe m_new), rescale l and acc with it, and only then set m = m_new")
TILED["drop_last_q"] = ("no output is computed for the last queries ({rows}: all 0): the loop over the blocks of "
                        "queries stops before them, as range(0, T_q − block_q, block_q) does; loop with range(0, T_q, "
                        "block_q) and i1 = min(i0 + block_q, T_q), so that every query is in a block (the last one "
                        "shorter when block_q does not divide T_q)")
TILED["drop_last_keys"] = ("the last, shorter block of keys is never visited (only T_k // block_k full blocks): loop "
                           "j0 over range(0, T_k, block_k) and clip j1 = min(j0 + block_k, T_k)")
TILED["k_query_range"] = ("the keys are sliced with the QUERIES' range, k[..., i0:i1, :]: a tile's keys are "
                          "k[..., j0:j1, :], the same block as its values")
TILED["m_not_updated"] = ("m is never updated (m = m_new forgotten): it stays −∞, so e^(m − m_new) = 0 wipes acc and "
                          "l at every tile; set m = m_new after each tile")
TILED["scale_half_d"] = ("the scores are scaled by 1/(2·d_k): d_k ** -1 / 2 is (1/d_k)/2 by precedence; write d_k ** "
                         "-0.5, or 1 / math.sqrt(d_k)")
TILED["scale_dv"] = ("the scores are divided by √d_v, the width of the values: divide them by √d_k, the width of q "
                     "and k (q.shape[-1])")
BACKWARD = {
    "no_D": ("dS = P ∘ dP: the term D_i is missing. dS = P ∘ (dP − D_i), with D_i = rowsum(dO_i ∘ O_i), one number "
             "per query (the softmax subtracts the weighted mean of dP)"),
    "D_wrong_axis": ("D is summed over the wrong axis: D_i = Σ_c dO_ic O_ic is one number per QUERY, the sum over the "
                     "features (dim=-1), shape (..., T_q)"),
    "D_no_axis": ("D_i is subtracted along the wrong axis: D holds one number per QUERY, so it is subtracted from "
                  "each ROW of dP_ij; give it a last axis, D[..., i0:i1, None] (without it, it runs along the keys)"),
    "lse_no_axis": ("L_i is subtracted along the wrong axis: P_ij = exp(S_ij − L_i) subtracts each query's L from its "
                    "ROW; give lse a last axis, lse[..., i0:i1, None] (without it, it runs along the keys)"),
    "D_tile": ("D is computed from one tile, rowsum(P_ij ∘ dP_ij): D_i sums over ALL the keys of the row; compute it "
               "once per query from the output, D_i = rowsum(dO_i ∘ O_i)"),
    "no_scale": "dq and dk miss the factor 1/√d_k: S = QKᵀ/√d_k, so dQ = dS K/√d_k and dK = dSᵀ Q/√d_k",
    "scale_twice": ("dq and dk are scaled by 1/d_k: the factor 1/√d_k is applied twice (once is right: "
                    "dQ = dS K/√d_k, dK = dSᵀ Q/√d_k)"),
    "dq_no_scale": "dq misses the factor 1/√d_k: dQ_i = dS_ij K_j / √d_k (dk has it)",
    "dk_scale_twice": ("dk is scaled by 1/√d_k twice: dK = dSᵀ Q/√d_k (if you scaled q before the product, do not "
                       "scale dk again)"),
    "p_no_scale": ("the recomputed P leaves out the scale: P_ij = exp(Q_i K_jᵀ/√d_k − L_i), the same scores as in "
                   "the forward pass"),
    "p_softmax_tile": ("P is recomputed as the softmax of one tile: each row's weights are normalised over ALL its "
                       "keys; use the forward pass's log-sum-exp, P_ij = exp(S_ij − L_i)"),
    "no_diag_mask": ("with causal=True the tiles on the diagonal are used unmasked: recompute P with the same "
                     "element-wise causal mask as the forward pass (key j visible from query i iff j ≤ i)"),
    "dv_no_transpose": ("dV_j = P_ijᵀ dO_i: P is not transposed (each key gathers the gradients of the queries that "
                        "read it)"),
    "dk_no_transpose": "dK_j = dS_ijᵀ Q_i: dS is not transposed",
    "D_all": ("D is one number for the whole batch: D_i = Σ_c dO_ic O_ic is one number per QUERY, the sum over "
              "the features only (dim=-1), shape (..., T_q)"),
    "local_idx": ("the element-wise causal mask of a diagonal tile is built from positions within the tile (0, 1, "
                  "...): compare the GLOBAL positions, key j0 + c against query i0 + r, as in the forward pass"),
    "D_plus": "dS = P ∘ (dP + D_i): D_i is SUBTRACTED, dS = P ∘ (dP − D_i) (the softmax removes the weighted mean)",
    "dv_from_out": "dV_j = P_ijᵀ dO_i: you used O (out) where the gradient dO (grad_out) goes",
    "dk_from_dO": "dK_j = dS_ijᵀ Q_i / √d_k: you multiplied dSᵀ by dO (grad_out) instead of by Q",
    "D_dO": ("D = rowsum(dO ∘ dO), the gradient times itself: D_i = rowsum(dO_i ∘ O_i), the gradient times the "
             "OUTPUT O (out), one number per query"),
    "lse_sign": ("P is recomputed as exp(S + L): SUBTRACT each query's log-sum-exp, P_ij = exp(S_ij − L_i) "
                 "(= exp(S_ij) / Σ_j exp(S_ij), the softmax of the forward pass)"),
    "overwrite_dq": ("dq is overwritten by each tile (it ends as the share of the last block of keys only): ACCUMULATE "
                     "it over the blocks of keys, dq[..., i0:i1, :] += ..., as dk and dv"),
    "overwrite_dk": ("dk is overwritten by each tile (it ends as the share of the last block of queries only): "
                     "ACCUMULATE it over the blocks of queries, dk[..., j0:j1, :] += ..., as dq and dv"),
    "overwrite_dv": ("dv is overwritten by each tile (it ends as the share of the last block of queries only): "
                     "ACCUMULATE it over the blocks of queries, dv[..., j0:j1, :] += ..., as dq and dk"),
    "overwrite_dq_dk": ("dq and dk are overwritten by each tile: ACCUMULATE them over the tiles (dq[..., i0:i1, :] += "
                        "..., dk[..., j0:j1, :] += ...), as dv is"),
    "overwrite": ("dq, dk and dv are overwritten by each tile: ACCUMULATE them over the tiles (dq[..., i0:i1, :] += "
                  "..., likewise dk and dv)"),
    "all_tiles": ("with causal=True the backward pass computes the tiles above the diagonal: dq of queries {rows} "
                  "turned NaN or changed when only the values of later keys, which they may not see, were set to inf "
                  "(0 · inf = NaN). Skip those tiles as the forward pass does: " + _SKIP_RULE),
    "skipped_visible": ("the causal test of the backward pass skips tiles that hold keys their queries may see: "
                        "{tiles} (their dq did not move when those keys' values changed): " + _SKIP_RULE),
    "quadratic": ("{symptom}: that is P or S of the whole sequence. Recompute P one tile at a time from q, k and L, "
                  "use it for the tile's share of dq, dk, dv, and drop it: nothing of size T_q x T_k is kept between "
                  "the passes or built in the backward one"),
}
BACKWARD["dv_dO_keys"] = ("dV_j = P_ijᵀ dO_i: the gradient's rows are those of the block of QUERIES, "
                          "grad_out[..., i0:i1, :] (dO_i), not of the block of keys [..., j0:j1, :]")
BACKWARD["lse_keys"] = ("L is sliced with the block of KEYS, lse[..., j0:j1, None]: L_i = m_i + log l_i belongs to "
                        "the QUERIES (one number per query), so P_ij = exp(S_ij − L_i) takes lse[..., i0:i1, None]")
BACKWARD["inplace"] = ("scaling a slice of q in place (q_i *= scale, where q_i = q[..., i0:i1, :] is a view of q) "
                       "scales those queries again at every block of keys, so the scores, dq and dk use a q scaled "
                       "many times; scale a new tensor, q_i = q[..., i0:i1, :] * scale, or the scores, "
                       "s = q_i @ k_jᵀ * scale")
BACKWARD["D_rows"] = ("with dO zero at every query but one, dq of the other queries should be 0 (their dP = "
                      "dO_i V_jᵀ and D_i = rowsum(dO_i ∘ O_i) are 0), and yours is not at queries {rows}: each "
                      "query's dS_i = P_i ∘ (dP_i − D_i) must use its OWN row, dO_i = grad_out[..., i0:i1, :] and "
                      "D_i from (grad_out * out).sum(dim=-1), one number per query")
BACKWARD["ds_D_outside"] = ("dS = P ∘ dP − D_i: D_i must be multiplied by P too, dS = P ∘ (dP − D_i) (the bracket "
                            "matters: the softmax's Jacobian is P_ij (dP_ij − D_i))")
BACKWARD["keys_short"] = ("the last block of keys is never visited: the key loop stops at T_k − block_k; loop j0 over "
                          "range(0, T_k, block_k) and clip j1 = min(j0 + block_k, T_k)")
BACKWARD["bw_scale_times"] = ("the scale is √d_k, multiplied: S = Q Kᵀ / √d_k, so multiply by 1 / math.sqrt(d_k) "
                              "(in S, dq and dk)")
BACKWARD["dq_from_v"] = "dQ_i += dS_ij V_j: the keys go there, dQ_i += dS_ij K_j (times 1/√d_k)"
BACKWARD["dv_query_rows"] = ("dV is accumulated at the QUERIES' rows, dv[..., i0:i1]: dV_j belongs to the block of "
                             "keys, dv[..., j0:j1, :] += P_ijᵀ dO_i")
BACKWARD["dv_from_ds"] = ("dV is accumulated with dS: dV_j += P_ijᵀ dO_i, the PROBABILITIES (dS goes into dq and dk)")
