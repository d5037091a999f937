"""Typical learner slips (and right answers written differently) for lesson 14, what attention learns.

Exercises (the `exercise` key): head_scores, ablation_effect, keep_sinks_and_window, attention_rollout.

Each entry of SLIPS / CORRECT is (exercise, description, answer); `answer` has the signature of the
lesson's function:
    head_scores(weights, half_length) -> (previous, induction)        weights (B, h, 2L, 2L), each (B, h)
    ablation_effect(model, tokens, layer, head, half_length) -> float
    keep_sinks_and_window(k, v, sinks, window) -> (k, v)              k, v (B, h, t, d_head)
    attention_rollout(maps) -> R                                      maps (N, B, h, T, T), R (B, T, T)
Every slip has one mistake, marked `# slip:` on its line.
"""
import copy
import functools

import torch
import torch.nn.functional as F

from course_utils import induction


# =============================================================================================
# Exercise 1: head_scores
# =============================================================================================
def head_scores_previous_from_zero(weights, half_length):
    L = half_length
    t = torch.arange(0, 2 * L)  # slip: query 0 included (it has no previous token; index -1 wraps to the last key)
    previous = weights[..., t, t - 1].mean(-1)
    t = torch.arange(L, 2 * L)
    induction_ = weights[..., t, t - L + 1].mean(-1)
    return previous, induction_


def head_scores_transposed(weights, half_length):
    L = half_length
    t = torch.arange(1, 2 * L)
    previous = weights[..., t - 1, t].mean(-1)  # slip: [key, query] order, reads one above the diagonal
    t = torch.arange(L, 2 * L)
    induction_ = weights[..., t, t - L + 1].mean(-1)
    return previous, induction_


def head_scores_induction_previous_occurrence(weights, half_length):
    L = half_length
    t = torch.arange(1, 2 * L)
    previous = weights[..., t, t - 1].mean(-1)
    t = torch.arange(L, 2 * L)
    induction_ = weights[..., t, t - L].mean(-1)  # slip: the previous occurrence t - L, not the token after it (t - L + 1)
    return previous, induction_


def head_scores_induction_from_L_plus_1(weights, half_length):
    L = half_length
    t = torch.arange(1, 2 * L)
    previous = weights[..., t, t - 1].mean(-1)
    t = torch.arange(L + 1, 2 * L)  # slip: the second copy's first query (t = L) left out
    induction_ = weights[..., t, t - L + 1].mean(-1)
    return previous, induction_


def head_scores_previous_over_2L(weights, half_length):
    L = half_length
    t = torch.arange(1, 2 * L)
    previous = weights[..., t, t - 1].sum(-1) / (2 * L)  # slip: divides by 2L positions instead of the 2L - 1 queries
    t = torch.arange(L, 2 * L)
    induction_ = weights[..., t, t - L + 1].mean(-1)
    return previous, induction_


def head_scores_whole_diagonal(weights, half_length):
    L = half_length
    previous = torch.diagonal(weights, offset=-1, dim1=-2, dim2=-1).mean(-1)
    induction_ = torch.diagonal(weights, offset=-(L - 1), dim1=-2, dim2=-1).mean(-1)  # slip: the whole stripe, including query L - 1 of the first copy
    return previous, induction_


def head_scores_block_not_diagonal(weights, half_length):
    L = half_length
    t = torch.arange(1, 2 * L)
    previous = weights[..., t, :][..., t - 1].mean((-2, -1))  # slip: indexes the axes one after the other, averaging a (2L-1) x (2L-1) block
    t = torch.arange(L, 2 * L)
    induction_ = weights[..., t, t - L + 1].mean(-1)
    return previous, induction_


def head_scores_mean_everything(weights, half_length):
    L = half_length
    t = torch.arange(1, 2 * L)
    previous = weights[..., t, t - 1].mean()  # slip: averages over the batch and heads too, not over the queries only
    t = torch.arange(L, 2 * L)
    induction_ = weights[..., t, t - L + 1].mean(-1)
    return previous, induction_


# right answers
def head_scores_diagonals(weights, half_length):
    """torch.diagonal with offsets; the induction stripe without its first entry (query L - 1)."""
    L = half_length
    previous = torch.diagonal(weights, offset=-1, dim1=-2, dim2=-1).mean(-1)
    stripe = torch.diagonal(weights, offset=-(L - 1), dim1=-2, dim2=-1)       # queries L-1 .. 2L-1
    return previous, stripe[..., 1:].mean(-1)


def head_scores_selectors(weights, half_length):
    """Boolean selectors of the two sets of (query, key) pairs; sum of the selected weights / their count."""
    L = half_length
    T = 2 * L
    rows, cols = torch.arange(T)[:, None], torch.arange(T)[None, :]
    prev_sel = (cols == rows - 1) & (rows >= 1)
    ind_sel = (cols == rows - L + 1) & (rows >= L)
    previous = (weights * prev_sel).sum((-2, -1)) / prev_sel.sum()
    induction_ = (weights * ind_sel).sum((-2, -1)) / ind_sel.sum()
    return previous, induction_


# =============================================================================================
# Exercise 2: ablation_effect
# =============================================================================================
def _hook_zeroing(lo, hi):
    def zero_head(module, args):
        z = args[0].clone()
        z[..., lo:hi] = 0
        return (z,)
    return zero_head


def ablation_includes_first_of_copy(model, tokens, layer, head, half_length):
    L = half_length
    attn = model.layers[layer].attn
    lo, hi = head * attn.d_head, (head + 1) * attn.d_head
    clean = induction.loss_per_position(model, tokens)[L - 1:2 * L - 1].mean()  # slip: starts at position L - 1, the unpredictable first token of the copy
    handle = attn.out_proj.register_forward_pre_hook(_hook_zeroing(lo, hi))
    try:
        ablated = induction.loss_per_position(model, tokens)[L - 1:2 * L - 1].mean()
    finally:
        handle.remove()
    return float(ablated - clean)


def ablation_target_positions(model, tokens, layer, head, half_length):
    L = half_length
    attn = model.layers[layer].attn
    lo, hi = head * attn.d_head, (head + 1) * attn.d_head
    clean = induction.loss_per_position(model, tokens)[L + 1:2 * L].mean()  # slip: slices by target index (L+1..), one position too late
    handle = attn.out_proj.register_forward_pre_hook(_hook_zeroing(lo, hi))
    try:
        ablated = induction.loss_per_position(model, tokens)[L + 1:2 * L].mean()
    finally:
        handle.remove()
    return float(ablated - clean)


def ablation_slice_not_scaled(model, tokens, layer, head, half_length):
    L = half_length
    attn = model.layers[layer].attn
    lo, hi = head, head + attn.d_head  # slip: slice starts at `head`, not head * d_head
    clean = induction.loss_per_position(model, tokens)[L:2 * L - 1].mean()
    handle = attn.out_proj.register_forward_pre_hook(_hook_zeroing(lo, hi))
    try:
        ablated = induction.loss_per_position(model, tokens)[L:2 * L - 1].mean()
    finally:
        handle.remove()
    return float(ablated - clean)


def ablation_hook_left_on(model, tokens, layer, head, half_length):
    L = half_length
    attn = model.layers[layer].attn
    lo, hi = head * attn.d_head, (head + 1) * attn.d_head
    clean = induction.loss_per_position(model, tokens)[L:2 * L - 1].mean()
    attn.out_proj.register_forward_pre_hook(_hook_zeroing(lo, hi))  # slip: the hook is never removed, the model stays ablated
    ablated = induction.loss_per_position(model, tokens)[L:2 * L - 1].mean()
    return float(ablated - clean)


def ablation_weights_zeroed_in_place(model, tokens, layer, head, half_length):
    L = half_length
    attn = model.layers[layer].attn
    lo, hi = head * attn.d_head, (head + 1) * attn.d_head
    clean = induction.loss_per_position(model, tokens)[L:2 * L - 1].mean()
    with torch.no_grad():
        attn.out_proj.weight[:, lo:hi] = 0  # slip: zeroes W_O's columns in the model itself, never restored
    ablated = induction.loss_per_position(model, tokens)[L:2 * L - 1].mean()
    return float(ablated - clean)


def ablation_rows_of_WO(model, tokens, layer, head, half_length):
    L = half_length
    attn = model.layers[layer].attn
    lo, hi = head * attn.d_head, (head + 1) * attn.d_head
    clean = induction.loss_per_position(model, tokens)[L:2 * L - 1].mean()
    ablated_model = copy.deepcopy(model)
    with torch.no_grad():
        ablated_model.layers[layer].attn.out_proj.weight[lo:hi, :] = 0  # slip: rows of W_O (output features), not its columns (the head's inputs)
    ablated = induction.loss_per_position(ablated_model, tokens)[L:2 * L - 1].mean()
    return float(ablated - clean)


def ablation_zero_output_features(model, tokens, layer, head, half_length):
    L = half_length
    attn = model.layers[layer].attn
    lo, hi = head * attn.d_head, (head + 1) * attn.d_head

    def zero_out(module, args, output):
        output = output.clone()
        output[..., lo:hi] = 0  # slip: zeroes features of out_proj's output, not the head's slice of its input
        return output

    clean = induction.loss_per_position(model, tokens)[L:2 * L - 1].mean()
    handle = attn.out_proj.register_forward_hook(zero_out)
    try:
        ablated = induction.loss_per_position(model, tokens)[L:2 * L - 1].mean()
    finally:
        handle.remove()
    return float(ablated - clean)


def ablation_sign_flipped(model, tokens, layer, head, half_length):
    L = half_length
    attn = model.layers[layer].attn
    lo, hi = head * attn.d_head, (head + 1) * attn.d_head
    clean = induction.loss_per_position(model, tokens)[L:2 * L - 1].mean()
    handle = attn.out_proj.register_forward_pre_hook(_hook_zeroing(lo, hi))
    try:
        ablated = induction.loss_per_position(model, tokens)[L:2 * L - 1].mean()
    finally:
        handle.remove()
    return float(clean - ablated)  # slip: clean minus ablated, the sign reversed


def ablation_layer_from_one(model, tokens, layer, head, half_length):
    L = half_length
    attn = model.layers[layer - 1].attn  # slip: layers counted from 1 (layer 0 becomes the last layer)
    lo, hi = head * attn.d_head, (head + 1) * attn.d_head
    clean = induction.loss_per_position(model, tokens)[L:2 * L - 1].mean()
    handle = attn.out_proj.register_forward_pre_hook(_hook_zeroing(lo, hi))
    try:
        ablated = induction.loss_per_position(model, tokens)[L:2 * L - 1].mean()
    finally:
        handle.remove()
    return float(ablated - clean)


def ablation_zero_queries(model, tokens, layer, head, half_length):
    L = half_length
    lo, hi = head * model.layers[layer].attn.d_head, (head + 1) * model.layers[layer].attn.d_head
    clean = induction.loss_per_position(model, tokens)[L:2 * L - 1].mean()
    ablated_model = copy.deepcopy(model)
    with torch.no_grad():
        proj = ablated_model.layers[layer].attn.in_proj
        proj.weight[lo:hi] = 0  # slip: zeroes the head's query weights (uniform attention) instead of its output
        proj.bias[lo:hi] = 0
    ablated = induction.loss_per_position(ablated_model, tokens)[L:2 * L - 1].mean()
    return float(ablated - clean)


# right answers
def ablation_deepcopy_columns(model, tokens, layer, head, half_length):
    """Zeroes the head's columns of W_O in a copy of the model; the model itself is never touched."""
    L = half_length
    d_head = model.layers[layer].attn.d_head
    ablated_model = copy.deepcopy(model)
    with torch.no_grad():
        ablated_model.layers[layer].attn.out_proj.weight[:, head * d_head:(head + 1) * d_head] = 0
    clean = induction.second_copy_loss(induction.loss_per_position(model, tokens), L)
    ablated = induction.second_copy_loss(induction.loss_per_position(ablated_model, tokens), L)
    return (ablated - clean).item()


def ablation_own_loss(model, tokens, layer, head, half_length):
    """Own cross-entropy on the second copy (positions L..2L-2 predict tokens L+1..2L-1); the hook multiplies
    by a 0/1 vector; eval mode and the hook restored in a finally."""
    L = half_length
    attn = model.layers[layer].attn
    keep = torch.ones(attn.num_heads, attn.d_head)
    keep[head] = 0
    keep = keep.flatten()

    def second_copy():
        logits = model(tokens)
        return F.cross_entropy(logits[:, L:2 * L - 1].reshape(-1, logits.size(-1)).float(),
                               tokens[:, L + 1:2 * L].reshape(-1))

    was_training = model.training
    model.eval()
    handle = None
    try:
        with torch.no_grad():
            clean = second_copy()
            handle = attn.out_proj.register_forward_pre_hook(lambda module, args: (args[0] * keep,) + args[1:])
            ablated = second_copy()
    finally:
        if handle is not None:
            handle.remove()
        model.train(was_training)
    return float(ablated) - float(clean)


# =============================================================================================
# Exercise 3: keep_sinks_and_window
# =============================================================================================
def keep_negative_window_slice(k, v, sinks, window):
    """The window as k[..., -window:, :]. (Moved from SLIPS: it would keep everything for window = 0, but the
    exercise does not cover window = 0, which the course's reference rejects: window >= 1.)"""
    t = k.size(-2)
    if t <= sinks + window:
        return k, v
    return (torch.cat([k[..., :sinks, :], k[..., -window:, :]], dim=-2),
            torch.cat([v[..., :sinks, :], v[..., -window:, :]], dim=-2))


def keep_cat_last_axis(k, v, sinks, window):
    t = k.size(-2)
    if t <= sinks + window:
        return k, v
    return (torch.cat([k[..., :sinks, :], k[..., t - window:, :]], dim=-1),  # slip: concatenated along the features, not the positions
            torch.cat([v[..., :sinks, :], v[..., t - window:, :]], dim=-1))


def keep_no_early_return(k, v, sinks, window):
    t = k.size(-2)
    # slip: no "nothing to evict" case, a short cache gets overlapping or wrapped-around positions
    return (torch.cat([k[..., :sinks, :], k[..., t - window:, :]], dim=-2),
            torch.cat([v[..., :sinks, :], v[..., t - window:, :]], dim=-2))


def keep_window_first(k, v, sinks, window):
    t = k.size(-2)
    if t <= sinks + window:
        return k, v
    return (torch.cat([k[..., t - window:, :], k[..., :sinks, :]], dim=-2),  # slip: the window is put before the sinks
            torch.cat([v[..., t - window:, :], v[..., :sinks, :]], dim=-2))


def keep_window_after_sinks(k, v, sinks, window):
    t = k.size(-2)
    if t <= sinks + window:
        return k, v
    return (torch.cat([k[..., :sinks, :], k[..., sinks:sinks + window, :]], dim=-2),  # slip: keeps the positions right after the sinks, not the last ones
            torch.cat([v[..., :sinks, :], v[..., sinks:sinks + window, :]], dim=-2))


def keep_v_from_k(k, v, sinks, window):
    t = k.size(-2)
    if t <= sinks + window:
        return k, v
    return (torch.cat([k[..., :sinks, :], k[..., t - window:, :]], dim=-2),
            torch.cat([v[..., :sinks, :], k[..., t - window:, :]], dim=-2))  # slip: copy-paste, v's window taken from k


def keep_window_off_by_one(k, v, sinks, window):
    t = k.size(-2)
    if t <= sinks + window:
        return k, v
    return (torch.cat([k[..., :sinks, :], k[..., t - window + 1:, :]], dim=-2),  # slip: t - window + 1, one position short
            torch.cat([v[..., :sinks, :], v[..., t - window + 1:, :]], dim=-2))


def keep_condition_window_only(k, v, sinks, window):
    t = k.size(-2)
    if t <= window:  # slip: compares t with the window alone, forgetting the sinks
        return k, v
    return (torch.cat([k[..., :sinks, :], k[..., t - window:, :]], dim=-2),
            torch.cat([v[..., :sinks, :], v[..., t - window:, :]], dim=-2))


# right answers
def keep_index_select(k, v, sinks, window):
    """One index tensor of the kept positions, index_select on axis -2."""
    t = k.shape[-2]
    if t <= sinks + window:
        return k, v
    idx = torch.cat([torch.arange(sinks), torch.arange(t - window, t)]).to(k.device)
    return k.index_select(-2, idx), v.index_select(-2, idx)


def keep_narrow(k, v, sinks, window):
    """torch.narrow for both parts, a helper applied to k and v."""
    t = k.shape[2]
    if sinks + window >= t:
        return k, v

    def evict(x):
        return torch.cat((x.narrow(2, 0, sinks), x.narrow(2, t - window, window)), dim=2)

    return evict(k), evict(v)


# =============================================================================================
# Exercise 4: attention_rollout
# =============================================================================================
def rollout_order_reversed(maps):
    eye = torch.eye(maps.size(-1))
    R = None
    for layer in maps:
        a = 0.5 * eye + 0.5 * layer.mean(1)
        a = a / a.sum(-1, keepdim=True)
        R = a if R is None else R @ a  # slip: the later layer multiplied on the right
    return R


def rollout_no_renormalise(maps):
    eye = torch.eye(maps.size(-1))
    R = None
    for layer in maps:
        a = 0.5 * eye + 0.5 * layer.mean(1)  # slip: rows never renormalised (wrong when they do not sum to 1, e.g. after dropout)
        R = a if R is None else a @ R
    return R


def rollout_renormalise_columns(maps):
    eye = torch.eye(maps.size(-1))
    R = None
    for layer in maps:
        a = 0.5 * eye + 0.5 * layer.mean(1)
        a = a / a.sum(-2, keepdim=True)  # slip: columns normalised instead of rows
        R = a if R is None else a @ R
    return R


def rollout_no_identity(maps):
    R = None
    for layer in maps:
        a = layer.mean(1)  # slip: no 0.5 I for the residual connection
        a = a / a.sum(-1, keepdim=True)
        R = a if R is None else a @ R
    return R


def rollout_attention_not_halved(maps):
    eye = torch.eye(maps.size(-1))
    R = None
    for layer in maps:
        a = 0.5 * eye + layer.mean(1)  # slip: 0.5 I + A instead of 0.5 I + 0.5 A
        a = a / a.sum(-1, keepdim=True)
        R = a if R is None else a @ R
    return R


def rollout_mean_over_batch(maps):
    eye = torch.eye(maps.size(-1))
    R = None
    for layer in maps:
        a = 0.5 * eye + 0.5 * layer.mean(0)  # slip: averages over the batch axis instead of the heads
        a = a / a.sum(-1, keepdim=True)
        R = a if R is None else a @ R
    return R


def rollout_sum_heads(maps):
    eye = torch.eye(maps.size(-1))
    R = None
    for layer in maps:
        a = 0.5 * eye + 0.5 * layer.sum(1)  # slip: heads summed, not averaged
        a = a / a.sum(-1, keepdim=True)
        R = a if R is None else a @ R
    return R


def rollout_elementwise(maps):
    eye = torch.eye(maps.size(-1))
    R = None
    for layer in maps:
        a = 0.5 * eye + 0.5 * layer.mean(1)
        a = a / a.sum(-1, keepdim=True)
        R = a if R is None else a * R  # slip: element-wise product instead of a matrix product
    return R


def rollout_normalise_before_identity(maps):
    eye = torch.eye(maps.size(-1))
    R = None
    for layer in maps:
        a = layer.mean(1)
        a = 0.5 * eye + 0.5 * (a / a.sum(-1, keepdim=True))  # slip: A renormalised before the identity is added, not Ã
        R = a if R is None else a @ R
    return R


def rollout_first_layer_raw(maps):
    eye = torch.eye(maps.size(-1))
    R = maps[0].mean(1)  # slip: starts from the first layer's raw attention (no identity, no renormalisation)
    for layer in maps[1:]:
        a = 0.5 * eye + 0.5 * layer.mean(1)
        a = a / a.sum(-1, keepdim=True)
        R = a @ R
    return R


# right answers
def rollout_einsum_from_identity(maps):
    """R starts at the identity (in the maps' dtype) and each layer is applied with einsum."""
    N, B, h, T, _ = maps.shape
    eye = torch.eye(T, dtype=maps.dtype, device=maps.device)
    R = eye.expand(B, T, T)
    for l in range(N):
        a = (eye + maps[l].mean(dim=1)) / 2
        a = a / a.sum(dim=-1, keepdim=True)
        R = torch.einsum("bij,bjk->bik", a, R)
    return R


def rollout_reduce(maps):
    """All Ã_l first (F.normalize with p=1 for the rows), then one reduce over the layers, last on the left."""
    T = maps.size(-1)
    eye = torch.eye(T, dtype=maps.dtype)
    tilde = [F.normalize(0.5 * eye + 0.5 * m.mean(1), p=1, dim=-1) for m in maps]
    return functools.reduce(lambda R, a: torch.matmul(a, R), tilde)


# =============================================================================================
SLIPS = [
    ("head_scores", "The previous-token mean starts at query 0 (which wraps to the last key) and averages 2L queries.",
     head_scores_previous_from_zero),
    ("head_scores", "Rows and columns swapped: reads weights[t - 1, t], one above the diagonal.", head_scores_transposed),
    ("head_scores", "Induction score reads the previous occurrence t - L instead of the token after it, t - L + 1.",
     head_scores_induction_previous_occurrence),
    ("head_scores", "Induction queries start at L + 1, leaving out the first query of the second copy.",
     head_scores_induction_from_L_plus_1),
    ("head_scores", "Previous-token sum divided by 2L instead of the 2L - 1 queries.", head_scores_previous_over_2L),
    ("head_scores", "Induction score averages the whole diagonal L - 1 below, including query L - 1 of the first copy.",
     head_scores_whole_diagonal),
    ("head_scores", "Indexes the query and key axes one after the other, averaging a whole block instead of the diagonal.",
     head_scores_block_not_diagonal),
    ("head_scores", "Averages over batch and heads too (.mean() of everything) instead of over the queries only.",
     head_scores_mean_everything),

    ("ablation_effect", "Loss slice starts at position L - 1, including the unpredictable first token of the second copy.",
     ablation_includes_first_of_copy),
    ("ablation_effect", "Loss slice uses the target indices L + 1 .. 2L - 1 as positions, one too late.",
     ablation_target_positions),
    ("ablation_effect", "Zeroes features head .. head + d_head instead of head * d_head .. (head + 1) * d_head.",
     ablation_slice_not_scaled),
    ("ablation_effect", "Never removes the hook, so the model stays ablated afterwards.", ablation_hook_left_on),
    ("ablation_effect", "Zeroes W_O's columns in the model itself and never restores them.",
     ablation_weights_zeroed_in_place),
    ("ablation_effect", "Zeroes rows of W_O (output features) instead of the head's columns.", ablation_rows_of_WO),
    ("ablation_effect", "Zeroes features of out_proj's output instead of the head's slice of its input.",
     ablation_zero_output_features),
    ("ablation_effect", "Returns clean minus ablated: the sign is reversed.", ablation_sign_flipped),
    ("ablation_effect", "Layers counted from 1: uses model.layers[layer - 1].", ablation_layer_from_one),
    ("ablation_effect", "Zeroes the head's query projection (its attention becomes uniform) instead of its output.",
     ablation_zero_queries),

    ("keep_sinks_and_window", "Concatenates along the last axis (features) instead of the positions.", keep_cat_last_axis),
    ("keep_sinks_and_window", "No early return when t <= sinks + window: short caches get duplicated or wrapped positions.",
     keep_no_early_return),
    ("keep_sinks_and_window", "Puts the window before the sinks.", keep_window_first),
    ("keep_sinks_and_window", "Keeps the window positions right after the sinks instead of the last ones.",
     keep_window_after_sinks),
    ("keep_sinks_and_window", "Copy-paste slip: v's window is taken from k.", keep_v_from_k),
    ("keep_sinks_and_window", "Window slice starts at t - window + 1, keeping one position too few.", keep_window_off_by_one),
    ("keep_sinks_and_window", "The no-eviction test compares t with window only, forgetting the sinks.",
     keep_condition_window_only),

    ("attention_rollout", "Multiplication order reversed: the later layer on the right.", rollout_order_reversed),
    ("attention_rollout", "Rows of 0.5 I + 0.5 A are never renormalised.", rollout_no_renormalise),
    ("attention_rollout", "Renormalises columns instead of rows.", rollout_renormalise_columns),
    ("attention_rollout", "Leaves out the identity for the residual connection.", rollout_no_identity),
    ("attention_rollout", "Uses 0.5 I + A instead of 0.5 I + 0.5 A.", rollout_attention_not_halved),
    ("attention_rollout", "Averages over the batch axis instead of the heads.", rollout_mean_over_batch),
    ("attention_rollout", "Sums the heads instead of averaging them.", rollout_sum_heads),
    ("attention_rollout", "Combines layers with an element-wise product instead of a matrix product.", rollout_elementwise),
    ("attention_rollout", "Renormalises A before adding the identity, instead of renormalising Ã.",
     rollout_normalise_before_identity),
    ("attention_rollout", "Starts R from the first layer's raw head-averaged attention, without identity or renormalisation.",
     rollout_first_layer_raw),
]

CORRECT = [
    ("head_scores", "torch.diagonal with offsets; the induction stripe without its first entry.", head_scores_diagonals),
    ("head_scores", "Boolean selectors of the (query, key) pairs; selected sum divided by their count.",
     head_scores_selectors),
    ("ablation_effect", "Zeroes the head's W_O columns in a deepcopy; second_copy_loss for the slice.",
     ablation_deepcopy_columns),
    ("ablation_effect", "Own cross-entropy on the second copy; a hook multiplying by a 0/1 vector, removed in finally.",
     ablation_own_loss),
    ("keep_sinks_and_window", "index_select with one index tensor of the kept positions.", keep_index_select),
    ("keep_sinks_and_window", "torch.narrow for both parts.", keep_narrow),
    ("keep_sinks_and_window", "The window as k[..., -window:, :] (right for window >= 1; window = 0 is not a case of "
     "the exercise).", keep_negative_window_slice),
    ("attention_rollout", "R starts at the identity, layers applied with einsum.", rollout_einsum_from_identity),
    ("attention_rollout", "Ã_l with F.normalize(p=1), then functools.reduce with the later layer on the left.",
     rollout_reduce),
]
