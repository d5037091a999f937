"""Typical learner answers for lesson 14 (what attention heads learn).

Exercises (the `exercise` key): head_scores, ablation_effect, keep_sinks_and_window, attention_rollout.

Every answer is what a learner would hand to the lesson's check:
  head_scores            a function head_scores(weights (B, h, 2L, 2L), half_length) -> (previous, induction),
                         each (B, h): mean over t = 1..2L-1 of weights[..., t, t-1], and over t = L..2L-1 of
                         weights[..., t, t-L+1]
  ablation_effect        a function ablation_effect(model, tokens, layer, head, half_length) -> float: the mean
                         loss on the second copy (induction.loss_per_position(...)[L:2L-1]) with head `head` of
                         model.layers[layer].attn zeroed (its slice of out_proj's input), minus the same loss
                         with every head; the model exactly as it was afterwards
  keep_sinks_and_window  a function keep_sinks_and_window(k, v, sinks, window) -> (k, v): the first `sinks`
                         and the last `window` positions (axis -2), unchanged when t <= sinks + window
  attention_rollout      a function attention_rollout(maps (N, B, h, T, T)) -> R (B, T, T) = Ã_N ... Ã_1,
                         Ã = 0.5 I + 0.5 mean over heads, rows renormalised

SLIPS holds answers with exactly one typical mistake each (marked `# slip:`), CORRECT holds right answers
written differently from the reference solution.
"""
import copy
import functools

import torch
import torch.nn.functional as F

from course_utils import induction


# ================================================================================================
# Exercise 1: head_scores
# ================================================================================================
def hs_induction_off_by_one(weights, half_length):
    L = half_length
    t = torch.arange(1, 2 * L)
    previous = weights[..., t, t - 1].mean(-1)
    t = torch.arange(L, 2 * L)
    induction_ = weights[..., t, t - L].mean(-1)   # slip: the previous occurrence t - L, not the token after it (t - L + 1)
    return previous, induction_


def hs_previous_from_zero(weights, half_length):
    L = half_length
    t = torch.arange(0, 2 * L)   # slip: includes query 0, whose "previous" index -1 wraps to the last column (weight 0)
    previous = weights[..., t, t - 1].mean(-1)
    t = torch.arange(L, 2 * L)
    induction_ = weights[..., t, t - L + 1].mean(-1)
    return previous, induction_


def hs_transposed(weights, half_length):
    L = half_length
    t = torch.arange(1, 2 * L)
    previous = weights[..., t - 1, t].mean(-1)   # slip: row and column swapped (one ABOVE the diagonal)
    t = torch.arange(L, 2 * L)
    induction_ = weights[..., t, t - L + 1].mean(-1)
    return previous, induction_


def hs_whole_stripe_diagonal(weights, half_length):
    L = half_length
    previous = torch.diagonal(weights, offset=-1, dim1=-2, dim2=-1).mean(-1)
    induction_ = torch.diagonal(weights, offset=-(L - 1), dim1=-2, dim2=-1).mean(-1)   # slip: the whole diagonal, query L-1 of the first copy included
    return previous, induction_


def hs_sum_not_mean(weights, half_length):
    L = half_length
    t = torch.arange(1, 2 * L)
    previous = weights[..., t, t - 1].sum(-1)   # slip: sums the weights instead of averaging them
    t = torch.arange(L, 2 * L)
    induction_ = weights[..., t, t - L + 1].sum(-1)
    return previous, induction_


def hs_two_step_indexing(weights, half_length):
    L = half_length
    t = torch.arange(1, 2 * L)
    previous = weights[..., t, :][..., t - 1].mean((-2, -1))   # slip: indexing rows then columns takes every (row, column) pair, not the diagonal
    t = torch.arange(L, 2 * L)
    induction_ = weights[..., t, t - L + 1].mean(-1)
    return previous, induction_


def hs_induction_drops_last_query(weights, half_length):
    L = half_length
    t = torch.arange(1, 2 * L)
    previous = weights[..., t, t - 1].mean(-1)
    t = torch.arange(L, 2 * L - 1)   # slip: stops one query early (the last query 2L-1 left out)
    induction_ = weights[..., t, t - L + 1].mean(-1)
    return previous, induction_


def hs_mean_over_batch_too(weights, half_length):
    L = half_length
    t = torch.arange(1, 2 * L)
    previous = weights[..., t, t - 1].mean(-1)
    t = torch.arange(L, 2 * L)
    induction_ = weights[..., t, t - L + 1].mean(-1).mean(0, keepdim=True).expand_as(previous)   # slip: also averages the induction score over the batch
    return previous, induction_


def hs_induction_from_first_copy(weights, half_length):
    L = half_length
    t = torch.arange(1, 2 * L)
    previous = weights[..., t, t - 1].mean(-1)
    t = torch.arange(L - 1, 2 * L - 1)   # slip: queries shifted one back (L-1 .. 2L-2), keys t - L + 1 = 0 .. L-1
    induction_ = weights[..., t, t - L + 1].mean(-1)
    return previous, induction_


# ---- right answers ----
def hs_diagonals(weights, half_length):
    """torch.diagonal for both stripes; the induction stripe without its first entry (query L-1)."""
    L = half_length
    previous = torch.diagonal(weights, offset=-1, dim1=-2, dim2=-1).mean(-1)              # queries 1 .. 2L-1
    stripe = torch.diagonal(weights, offset=-(L - 1), dim1=-2, dim2=-1)                   # queries L-1 .. 2L-1
    return previous, stripe[..., 1:].mean(-1)


def hs_masks(weights, half_length):
    """Boolean masks of the two stripes, a masked sum divided by the number of entries."""
    L = half_length
    n = 2 * L
    q = torch.arange(n).unsqueeze(1)                  # (2L, 1) query index
    k = torch.arange(n).unsqueeze(0)                  # (1, 2L) key index
    prev_mask = (k == q - 1).to(weights.dtype)
    ind_mask = ((k == q - L + 1) & (q >= L)).to(weights.dtype)
    previous = (weights * prev_mask).sum((-2, -1)) / prev_mask.sum()
    induction_ = (weights * ind_mask).sum((-2, -1)) / ind_mask.sum()
    return previous, induction_


def hs_loop(weights, half_length):
    """A plain loop over the queries."""
    L = half_length
    previous = sum(weights[..., t, t - 1] for t in range(1, 2 * L)) / (2 * L - 1)
    induction_ = sum(weights[..., t, t - L + 1] for t in range(L, 2 * L)) / L
    return previous, induction_


# ================================================================================================
# Exercise 2: ablation_effect
# ================================================================================================
def _second_copy(model, tokens, L):
    return induction.loss_per_position(model, tokens)[L:2 * L - 1].mean()


def ab_hook_not_removed(model, tokens, layer, head, half_length):
    L = half_length
    attn = model.layers[layer].attn
    lo, hi = head * attn.d_head, (head + 1) * attn.d_head

    def zero_head(module, args):
        z = args[0].clone()
        z[..., lo:hi] = 0
        return (z,)

    clean = _second_copy(model, tokens, L)
    attn.out_proj.register_forward_pre_hook(zero_head)   # slip: the hook's handle is never removed: the head stays zeroed
    ablated = _second_copy(model, tokens, L)
    return float(ablated - clean)


def ab_zeroes_output_features(model, tokens, layer, head, half_length):
    L = half_length
    attn = model.layers[layer].attn
    lo, hi = head * attn.d_head, (head + 1) * attn.d_head

    def zero_out(module, args, output):
        output = output.clone()
        output[..., lo:hi] = 0   # slip: zeroes a slice of out_proj's OUTPUT (model features), not the head's slice of its input
        return output

    clean = _second_copy(model, tokens, L)
    handle = attn.out_proj.register_forward_hook(zero_out)
    try:
        ablated = _second_copy(model, tokens, L)
    finally:
        handle.remove()
    return float(ablated - clean)


def ab_zeroes_rows(model, tokens, layer, head, half_length):
    L = half_length
    clean = _second_copy(model, tokens, L)
    ablated_model = copy.deepcopy(model)
    attn = ablated_model.layers[layer].attn
    lo, hi = head * attn.d_head, (head + 1) * attn.d_head
    with torch.no_grad():
        attn.out_proj.weight[lo:hi, :] = 0   # slip: zeroes ROWS of W_O (output features) instead of the head's columns
    ablated = _second_copy(ablated_model, tokens, L)
    return float(ablated - clean)


def ab_zeroes_weights_in_place(model, tokens, layer, head, half_length):
    L = half_length
    clean = _second_copy(model, tokens, L)
    attn = model.layers[layer].attn
    lo, hi = head * attn.d_head, (head + 1) * attn.d_head
    with torch.no_grad():
        attn.out_proj.weight[:, lo:hi] = 0   # slip: zeroes the columns in the caller's model (no copy, never restored)
    ablated = _second_copy(model, tokens, L)
    return float(ablated - clean)


def ab_slice_not_scaled(model, tokens, layer, head, half_length):
    L = half_length
    attn = model.layers[layer].attn
    lo, hi = head, head + attn.d_head   # slip: forgets to multiply the head index by d_head

    def zero_head(module, args):
        z = args[0].clone()
        z[..., lo:hi] = 0
        return (z,)

    clean = _second_copy(model, tokens, L)
    handle = attn.out_proj.register_forward_pre_hook(zero_head)
    try:
        ablated = _second_copy(model, tokens, L)
    finally:
        handle.remove()
    return float(ablated - clean)


def _with_hook(model, tokens, layer, head, L, losses_slice):
    attn = model.layers[layer].attn
    lo, hi = head * attn.d_head, (head + 1) * attn.d_head

    def zero_head(module, args):
        z = args[0].clone()
        z[..., lo:hi] = 0
        return (z,)

    clean = losses_slice(induction.loss_per_position(model, tokens))
    handle = attn.out_proj.register_forward_pre_hook(zero_head)
    try:
        ablated = losses_slice(induction.loss_per_position(model, tokens))
    finally:
        handle.remove()
    return clean, ablated


def ab_includes_first_of_second_copy(model, tokens, layer, head, half_length):
    L = half_length
    clean, ablated = _with_hook(model, tokens, layer, head, L,
                                lambda losses: losses[L - 1:].mean())   # slip: starts at position L-1: includes the unpredictable first token of the second copy
    return float(ablated - clean)


def ab_whole_sequence_loss(model, tokens, layer, head, half_length):
    L = half_length
    clean, ablated = _with_hook(model, tokens, layer, head, L,
                                lambda losses: losses.mean())   # slip: the loss over the whole sequence, not the second copy
    return float(ablated - clean)


def ab_sign_flipped(model, tokens, layer, head, half_length):
    L = half_length
    clean, ablated = _with_hook(model, tokens, layer, head, L, lambda losses: losses[L:2 * L - 1].mean())
    return float(clean - ablated)   # slip: clean minus ablated (sign flipped)


def ab_unshifted_loss(model, tokens, layer, head, half_length):
    L = half_length
    attn = model.layers[layer].attn
    lo, hi = head * attn.d_head, (head + 1) * attn.d_head

    def second_copy_loss():
        with torch.no_grad():
            logits = model(tokens)
        losses = F.cross_entropy(logits.transpose(1, 2), tokens, reduction="none").mean(0)   # slip: no shift: position t scored on token t, not t + 1
        return losses[L:2 * L - 1].mean()

    def zero_head(module, args):
        z = args[0].clone()
        z[..., lo:hi] = 0
        return (z,)

    clean = second_copy_loss()
    handle = attn.out_proj.register_forward_pre_hook(zero_head)
    try:
        ablated = second_copy_loss()
    finally:
        handle.remove()
    return float(ablated - clean)


def ab_leaves_eval_mode(model, tokens, layer, head, half_length):
    L = half_length
    model.eval()   # slip: switches the caller's model to eval mode and never restores its training flag
    attn = model.layers[layer].attn
    lo, hi = head * attn.d_head, (head + 1) * attn.d_head

    def second_copy_loss():
        with torch.no_grad():
            logits = model(tokens)
        losses = F.cross_entropy(logits[:, :-1].transpose(1, 2), tokens[:, 1:], reduction="none").mean(0)
        return losses[L:2 * L - 1].mean()

    def zero_head(module, args):
        z = args[0].clone()
        z[..., lo:hi] = 0
        return (z,)

    clean = second_copy_loss()
    handle = attn.out_proj.register_forward_pre_hook(zero_head)
    try:
        ablated = second_copy_loss()
    finally:
        handle.remove()
    return float(ablated - clean)


def ab_one_based_layer(model, tokens, layer, head, half_length):
    L = half_length
    attn = model.layers[layer - 1].attn   # slip: treats the layer as counted from 1 (layer 0 becomes the last layer)
    lo, hi = head * attn.d_head, (head + 1) * attn.d_head

    def zero_head(module, args):
        z = args[0].clone()
        z[..., lo:hi] = 0
        return (z,)

    clean = _second_copy(model, tokens, L)
    handle = attn.out_proj.register_forward_pre_hook(zero_head)
    try:
        ablated = _second_copy(model, tokens, L)
    finally:
        handle.remove()
    return float(ablated - clean)


# ---- right answers ----
def ab_deepcopy_columns(model, tokens, layer, head, half_length):
    """A deep copy of the model with the head's columns of W_O zeroed (the bias kept)."""
    L = half_length
    ablated_model = copy.deepcopy(model)
    attn = ablated_model.layers[layer].attn
    with torch.no_grad():
        attn.out_proj.weight[:, head * attn.d_head:(head + 1) * attn.d_head].zero_()
    losses = induction.loss_per_position(model, tokens)
    losses_ablated = induction.loss_per_position(ablated_model, tokens)
    return (losses_ablated[L:2 * L - 1].mean() - losses[L:2 * L - 1].mean()).item()


def ab_zero_and_restore(model, tokens, layer, head, half_length):
    """Zeroes the columns in place, computes its own shifted loss in eval mode, restores weights and mode."""
    L = half_length
    attn = model.layers[layer].attn
    cols = slice(head * attn.d_head, (head + 1) * attn.d_head)
    was_training = model.training

    def second_copy_loss():
        logits = model(tokens).float()
        nll = F.cross_entropy(logits[:, :-1].reshape(-1, logits.size(-1)), tokens[:, 1:].reshape(-1),
                              reduction="none").view(tokens.size(0), -1)            # (B, T-1)
        return nll[:, L:2 * L - 1].mean()

    saved = attn.out_proj.weight[:, cols].clone()
    model.eval()
    try:
        with torch.no_grad():
            clean = second_copy_loss()
            attn.out_proj.weight[:, cols] = 0
            ablated = second_copy_loss()
    finally:
        with torch.no_grad():
            attn.out_proj.weight[:, cols] = saved
        model.train(was_training)
    return float(ablated - clean)


def ab_context_manager(model, tokens, layer, head, half_length):
    """The course's ablate_heads context manager (a pre-hook, removed on exit) and second_copy_loss."""
    clean = induction.second_copy_loss(induction.loss_per_position(model, tokens), half_length)
    with induction.ablate_heads(model, [(layer, head)]):
        ablated = induction.second_copy_loss(induction.loss_per_position(model, tokens), half_length)
    return float(ablated) - float(clean)


# ================================================================================================
# Exercise 3: keep_sinks_and_window
# ================================================================================================
def kw_window_off_by_one(k, v, sinks, window):
    t = k.size(-2)
    if t <= sinks + window:
        return k, v
    return (torch.cat([k[..., :sinks, :], k[..., t - window - 1:, :]], dim=-2),   # slip: keeps window + 1 recent positions
            torch.cat([v[..., :sinks, :], v[..., t - window - 1:, :]], dim=-2))


def kw_no_early_return(k, v, sinks, window):
    t = k.size(-2)
    start = max(t - window, 0)   # slip: no "nothing to evict" case: a short cache gets its first positions twice
    return (torch.cat([k[..., :sinks, :], k[..., start:, :]], dim=-2),
            torch.cat([v[..., :sinks, :], v[..., start:, :]], dim=-2))


def kw_condition_ignores_sinks(k, v, sinks, window):
    t = k.size(-2)
    if t <= window:   # slip: evicts as soon as t > window, forgetting the sinks: overlapping positions are duplicated
        return k, v
    return (torch.cat([k[..., :sinks, :], k[..., t - window:, :]], dim=-2),
            torch.cat([v[..., :sinks, :], v[..., t - window:, :]], dim=-2))


def kw_window_first(k, v, sinks, window):
    t = k.size(-2)
    if t <= sinks + window:
        return k, v
    return (torch.cat([k[..., t - window:, :], k[..., :sinks, :]], dim=-2),   # slip: the window before the sinks (wrong order)
            torch.cat([v[..., t - window:, :], v[..., :sinks, :]], dim=-2))


def kw_values_from_keys(k, v, sinks, window):
    t = k.size(-2)
    if t <= sinks + window:
        return k, v
    k_new = torch.cat([k[..., :sinks, :], k[..., t - window:, :]], dim=-2)
    v_new = torch.cat([k[..., :sinks, :], k[..., t - window:, :]], dim=-2)   # slip: copy-paste: the values are cut from k
    return k_new, v_new


def kw_window_after_sinks(k, v, sinks, window):
    t = k.size(-2)
    if t <= sinks + window:
        return k, v
    return (k[..., :sinks + window, :], v[..., :sinks + window, :])   # slip: keeps the positions right after the sinks, not the most recent ones


def kw_plain_window(k, v, sinks, window):
    t = k.size(-2)
    if t <= sinks + window:
        return k, v
    return k[..., -(sinks + window):, :], v[..., -(sinks + window):, :]   # slip: keeps the last sinks + window positions: the sinks are dropped


def kw_window_includes_sinks(k, v, sinks, window):
    t = k.size(-2)
    if t <= window:
        return k, v
    recent = window - sinks   # slip: reads `window` as the whole cache size, keeping only window - sinks recent positions
    return (torch.cat([k[..., :sinks, :], k[..., t - recent:, :]], dim=-2),
            torch.cat([v[..., :sinks, :], v[..., t - recent:, :]], dim=-2))


def kw_feature_axis(k, v, sinks, window):
    t = k.size(-2)
    if t <= sinks + window:
        return k, v
    return (torch.cat([k[..., :sinks], k[..., -window:]], dim=-1),   # slip: slices the last axis (features) instead of the positions (axis -2)
            torch.cat([v[..., :sinks], v[..., -window:]], dim=-1))


# ---- right answers ----
def kw_index_select(k, v, sinks, window):
    """One index tensor of the kept positions, index_select on axis -2."""
    t = k.size(-2)
    if t <= sinks + window:
        return k, v
    keep = torch.cat([torch.arange(sinks), torch.arange(t - window, t)]).to(k.device)
    return k.index_select(-2, keep), v.index_select(-2, keep)


def kw_narrow(k, v, sinks, window):
    """narrow() for the two pieces, a helper applied to k and to v."""
    t = k.shape[-2]
    if t > sinks + window:
        def cut(x):
            return torch.cat((x.narrow(-2, 0, sinks), x.narrow(-2, t - window, window)), dim=-2)
        k, v = cut(k), cut(v)
    return k, v


def kw_boolean_mask(k, v, sinks, window):
    """A boolean mask over the positions."""
    t = k.size(2)
    if t <= sinks + window:
        return k, v
    pos = torch.arange(t, device=k.device)
    keep = (pos < sinks) | (pos >= t - window)
    return k[:, :, keep], v[:, :, keep]


# ================================================================================================
# Exercise 4: attention_rollout
# ================================================================================================
def ro_reversed_order(maps):
    eye = torch.eye(maps.size(-1))
    R = None
    for layer in maps:
        a = 0.5 * eye + 0.5 * layer.mean(1)
        a = a / a.sum(-1, keepdim=True)
        R = a if R is None else R @ a   # slip: the later layer on the right (Ã_1 ... Ã_N)
    return R


def ro_no_residual(maps):
    R = None
    for layer in maps:
        a = layer.mean(1)   # slip: no identity for the residual connection (raw attention multiplied through)
        a = a / a.sum(-1, keepdim=True)
        R = a if R is None else a @ R
    return R


def ro_normalise_columns(maps):
    eye = torch.eye(maps.size(-1))
    R = None
    for layer in maps:
        a = 0.5 * eye + 0.5 * layer.mean(1)
        a = a / a.sum(-2, keepdim=True)   # slip: renormalises the columns instead of the rows
        R = a if R is None else a @ R
    return R


def ro_mean_over_batch(maps):
    eye = torch.eye(maps.size(-1))
    A = 0.5 * eye + 0.5 * maps.mean(1)   # slip: averages over the batch axis (1 of the 5-d maps) instead of the heads (2)
    A = A / A.sum(-1, keepdim=True)
    R = A[0]
    for a in A[1:]:
        R = a @ R
    return R


def ro_identity_unweighted(maps):
    eye = torch.eye(maps.size(-1))
    R = None
    for layer in maps:
        a = 0.5 * eye + layer.mean(1)   # slip: forgets the 0.5 on the attention: 1/3 I + 2/3 A after renormalising
        a = a / a.sum(-1, keepdim=True)
        R = a if R is None else a @ R
    return R


def ro_elementwise(maps):
    eye = torch.eye(maps.size(-1))
    R = None
    for layer in maps:
        a = 0.5 * eye + 0.5 * layer.mean(1)
        a = a / a.sum(-1, keepdim=True)
        R = a if R is None else a * R   # slip: element-wise product instead of a matrix product
    return R


def ro_skips_first_layer(maps):
    eye = torch.eye(maps.size(-1))
    R = eye.expand(maps.size(1), -1, -1)
    for layer in maps[1:]:   # slip: starts from the second layer (the first layer's attention is left out)
        a = 0.5 * eye + 0.5 * layer.mean(1)
        a = a / a.sum(-1, keepdim=True)
        R = a @ R
    return R


def ro_max_over_heads(maps):
    eye = torch.eye(maps.size(-1))
    R = None
    for layer in maps:
        a = 0.5 * eye + 0.5 * layer.max(1).values   # slip: fuses the heads with the max instead of the mean
        a = a / a.sum(-1, keepdim=True)
        R = a if R is None else a @ R
    return R


def ro_first_layer_raw(maps):
    eye = torch.eye(maps.size(-1))
    R = maps[0].mean(1)   # slip: starts R with the first layer's raw attention (no residual identity for layer 1)
    for layer in maps[1:]:
        a = 0.5 * eye + 0.5 * layer.mean(1)
        a = a / a.sum(-1, keepdim=True)
        R = a @ R
    return R


def ro_no_renormalisation(maps):
    eye = torch.eye(maps.size(-1))
    R = None
    for layer in maps:
        a = 0.5 * eye + 0.5 * layer.mean(1)   # slip: rows not renormalised (wrong when the maps' rows do not sum to 1)
        R = a if R is None else a @ R
    return R


# ---- right answers ----
def ro_reduce(maps):
    """All layers' Ã at once (mean over axis 2), then functools.reduce from the first layer up."""
    T = maps.size(-1)
    eye = torch.eye(T, dtype=maps.dtype, device=maps.device)
    A = 0.5 * (maps.mean(dim=2) + eye)                         # (N, B, T, T)
    A = A / A.sum(dim=-1, keepdim=True)
    return functools.reduce(lambda R, a: torch.matmul(a, R), list(A))


def ro_from_last(maps):
    """Multiplies from the last layer down: R = Ã_N, then R = R Ã_l for l = N-1 .. 1."""
    N, B, h, T, _ = maps.shape
    eye = torch.eye(T, dtype=maps.dtype)
    R = None
    for l in range(N - 1, -1, -1):
        a = (eye + maps[l].sum(dim=1) / h) / 2
        a = a / a.sum(dim=-1, keepdim=True)
        R = a if R is None else torch.bmm(R, a)
    return R


def ro_einsum_identity_start(maps):
    """R starts as the identity; each layer applied on the left with einsum."""
    B, T = maps.size(1), maps.size(-1)
    eye = torch.eye(T, dtype=maps.dtype)
    R = eye.repeat(B, 1, 1)
    for layer in maps:
        a = 0.5 * eye + 0.5 * torch.einsum("bhij->bij", layer) / layer.size(1)
        a = a / a.sum(-1, keepdim=True)
        R = torch.einsum("bij,bjk->bik", a, R)
    return R


# ================================================================================================
SLIPS = [
    ("head_scores", "Induction stripe at t - L (the previous occurrence itself) instead of t - L + 1.",
     hs_induction_off_by_one),
    ("head_scores", "Previous-token score over queries 0 .. 2L-1: query 0 reads column -1 (the last, weight 0).",
     hs_previous_from_zero),
    ("head_scores", "Row and column swapped: the previous-token score reads one above the diagonal.", hs_transposed),
    ("head_scores", "Induction score over the whole diagonal L-1 below, query L-1 of the first copy included.",
     hs_whole_stripe_diagonal),
    ("head_scores", "Sums the weights on the stripes instead of averaging them.", hs_sum_not_mean),
    ("head_scores", "Indexes rows and then columns in two steps, averaging a whole block instead of the diagonal.",
     hs_two_step_indexing),
    ("head_scores", "Induction score stops one query early (queries L .. 2L-2).", hs_induction_drops_last_query),
    ("head_scores", "Induction score averaged over the batch as well (every sequence gets the batch mean).",
     hs_mean_over_batch_too),
    ("head_scores", "Induction queries shifted one back, L-1 .. 2L-2 (keys 0 .. L-1).", hs_induction_from_first_copy),

    ("ablation_effect", "Registers the pre-hook but never removes it: the head stays zeroed after the call.",
     ab_hook_not_removed),
    ("ablation_effect", "Zeroes the head's slice of out_proj's output (model features) instead of its input.",
     ab_zeroes_output_features),
    ("ablation_effect", "Zeroes rows of W_O (in a copy) instead of the head's columns.", ab_zeroes_rows),
    ("ablation_effect", "Zeroes the head's columns of W_O in the caller's model and never restores them.",
     ab_zeroes_weights_in_place),
    ("ablation_effect", "Slice starts at the head index, not head * d_head.", ab_slice_not_scaled),
    ("ablation_effect", "Second-copy loss starts one position early, including its unpredictable first token.",
     ab_includes_first_of_second_copy),
    ("ablation_effect", "Measures the loss over the whole sequence, not the second copy.", ab_whole_sequence_loss),
    ("ablation_effect", "Returns clean minus ablated (sign flipped).", ab_sign_flipped),
    ("ablation_effect", "Own loss without the shift: position t is scored on token t instead of t + 1.",
     ab_unshifted_loss),
    ("ablation_effect", "Calls model.eval() and leaves the caller's model in eval mode.", ab_leaves_eval_mode),

    ("keep_sinks_and_window", "Keeps window + 1 recent positions (t - window - 1).", kw_window_off_by_one),
    ("keep_sinks_and_window", "No 'nothing to evict' case: a short cache gets its first positions twice.",
     kw_no_early_return),
    ("keep_sinks_and_window", "Evicts as soon as t > window, ignoring the sinks in the condition: positions duplicated.",
     kw_condition_ignores_sinks),
    ("keep_sinks_and_window", "Puts the window before the sinks.", kw_window_first),
    ("keep_sinks_and_window", "Copy-paste: the values are cut from k.", kw_values_from_keys),
    ("keep_sinks_and_window", "Keeps the first sinks + window positions instead of the most recent window.",
     kw_window_after_sinks),
    ("keep_sinks_and_window", "Keeps the last sinks + window positions: the sinks are dropped.", kw_plain_window),
    ("keep_sinks_and_window", "Reads window as the whole cache size: keeps window - sinks recent positions.",
     kw_window_includes_sinks),
    ("keep_sinks_and_window", "Slices the feature axis (last) instead of the positions (axis -2).", kw_feature_axis),

    ("attention_rollout", "Multiplies in the wrong order: the later layer on the right.", ro_reversed_order),
    ("attention_rollout", "No identity for the residual: raw attention multiplied through the layers.", ro_no_residual),
    ("attention_rollout", "Renormalises the columns instead of the rows.", ro_normalise_columns),
    ("attention_rollout", "Averages over the batch axis instead of the heads.", ro_mean_over_batch),
    ("attention_rollout", "0.5 I + A (the 0.5 on the attention forgotten) before renormalising.", ro_identity_unweighted),
    ("attention_rollout", "Element-wise product instead of matrix product.", ro_elementwise),
    ("attention_rollout", "Starts from the second layer: the first layer is left out.", ro_skips_first_layer),
    ("attention_rollout", "Fuses the heads with the max instead of the mean.", ro_max_over_heads),
    ("attention_rollout", "Starts R with the first layer's raw attention, without its residual identity.",
     ro_first_layer_raw),
    ("attention_rollout", "Does not renormalise the rows of 0.5 I + 0.5 A.", ro_no_renormalisation),
]

CORRECT = [
    ("head_scores", "torch.diagonal for both stripes, the induction diagonal without its first entry.", hs_diagonals),
    ("head_scores", "Boolean masks of the two stripes, masked sum over the number of entries.", hs_masks),
    ("head_scores", "A plain loop over the queries.", hs_loop),

    ("ablation_effect", "A deep copy with the head's columns of W_O zeroed.", ab_deepcopy_columns),
    ("ablation_effect", "Zeroes the columns in place, own shifted loss in eval mode, restores weights and mode.",
     ab_zero_and_restore),
    ("ablation_effect", "The course's induction.ablate_heads context manager and second_copy_loss.", ab_context_manager),

    ("keep_sinks_and_window", "index_select with one index tensor of the kept positions.", kw_index_select),
    ("keep_sinks_and_window", "narrow() for the two pieces, one helper for k and v.", kw_narrow),
    ("keep_sinks_and_window", "A boolean mask over the positions.", kw_boolean_mask),

    ("attention_rollout", "All layers at once, then functools.reduce with the later layer on the left.", ro_reduce),
    ("attention_rollout", "From the last layer down, R = R Ã_l with bmm.", ro_from_last),
    ("attention_rollout", "R starts as the identity; einsum for the head mean and the product.", ro_einsum_identity_start),
]
