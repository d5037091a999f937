"""Typical learner answers for lesson 15 (attention in today's open models), written from the lesson's text.

Exercises (the `exercise` key): latent_attention, absorbed_step, attention_with_sink, ring_buffer, delta_rule_step,
delta_rule_chunked.

Every answer is what a learner would hand to the lesson's check:
  latent_attention     latent_attention(q_c (B, h, T, d_h), q_r (B, h, T, d_R), c (B, T, d_c), k_r (B, T, d_R),
                       W_uk, W_uv (h, d_h, d_c)) -> (B, h, T, d_h): keys [W_uk[i] c ; k_r] (k_r shared by the heads),
                       values W_uv[i] c, scores / sqrt(d_h + d_R), causal
  absorbed_step        absorbed_step(q_c (B, h, 1, d_h), q_r (B, h, 1, d_R), cache_c (B, t, d_c), cache_kr (B, t, d_R),
                       W_uk, W_uv, W_o (d_model, h d_h)) -> (B, 1, d_model), without per-head keys of the cache
  attention_with_sink  attention_with_sink(q, k, v, sink (h,), mask=None) -> (out, weights): exp(s_h) joins the
                       denominator only
  ring_buffer          ring_buffer_append(cache_k, cache_v (B, h, W, d), slots (W,), k, v (B, h, 1, d), position)
                       -> (cache_k, cache_v, slots): slot position % W, slots[slot] = position
  delta_rule_step      delta_rule_step(S (B, h, d_v, d_k), q, k, v, beta (B, h), alpha=None) -> (o, S_new):
                       S_new = alpha S (I - beta k kᵀ) + beta v kᵀ, o = S_new q
  delta_rule_chunked   delta_rule_chunked(q, k, v, beta, chunk_size) -> (o, S): DeltaNet chunk by chunk

SLIPS holds answers with exactly one typical mistake each (marked `# slip:`), CORRECT holds right answers
written differently from the reference solution.
"""
import math

import torch
import torch.nn.functional as F


# ================================================================================================
# Exercise 1: latent_attention
# ================================================================================================
def _causal(T):
    return torch.ones(T, T, dtype=torch.bool).tril()


def la_values_from_uk(q_c, q_r, c, k_r, W_uk, W_uv):
    k = torch.einsum("btc,hdc->bhtd", c, W_uk)
    v = torch.einsum("btc,hdc->bhtd", c, W_uk)            # slip: copy-paste, the values from W_uk too
    s = (q_c @ k.transpose(-1, -2) + q_r @ k_r.unsqueeze(1).transpose(-1, -2)) / math.sqrt(q_c.shape[-1] + q_r.shape[-1])
    return s.masked_fill(~_causal(c.shape[1]), float("-inf")).softmax(-1) @ v


def la_mask_diagonal_too(q_c, q_r, c, k_r, W_uk, W_uv):
    k = torch.einsum("btc,hdc->bhtd", c, W_uk)
    v = torch.einsum("btc,hdc->bhtd", c, W_uv)
    s = (q_c @ k.transpose(-1, -2) + q_r @ k_r.unsqueeze(1).transpose(-1, -2)) / math.sqrt(q_c.shape[-1] + q_r.shape[-1])
    T = c.shape[1]
    future = torch.ones(T, T, dtype=torch.bool).triu()    # slip: triu(0): the diagonal is masked too
    return s.masked_fill(future, float("-inf")).softmax(-1) @ v


def la_no_rope(q_c, q_r, c, k_r, W_uk, W_uv):
    k = torch.einsum("btc,hdc->bhtd", c, W_uk)
    v = torch.einsum("btc,hdc->bhtd", c, W_uv)
    s = q_c @ k.transpose(-1, -2) / math.sqrt(q_c.shape[-1] + q_r.shape[-1])   # slip: the RoPE part forgotten
    return s.masked_fill(~_causal(c.shape[1]), float("-inf")).softmax(-1) @ v


def la_scale_dh(q_c, q_r, c, k_r, W_uk, W_uv):
    k = torch.einsum("btc,hdc->bhtd", c, W_uk)
    v = torch.einsum("btc,hdc->bhtd", c, W_uv)
    s = (q_c @ k.transpose(-1, -2) + q_r @ k_r.unsqueeze(1).transpose(-1, -2)) / math.sqrt(q_c.shape[-1])  # slip
    return s.masked_fill(~_causal(c.shape[1]), float("-inf")).softmax(-1) @ v


def la_softmax_dim2(q_c, q_r, c, k_r, W_uk, W_uv):
    k = torch.einsum("btc,hdc->bhtd", c, W_uk)
    v = torch.einsum("btc,hdc->bhtd", c, W_uv)
    s = (q_c @ k.transpose(-1, -2) + q_r @ k_r.unsqueeze(1).transpose(-1, -2)) / math.sqrt(q_c.shape[-1] + q_r.shape[-1])
    return s.masked_fill(~_causal(c.shape[1]), float("-inf")).softmax(dim=2) @ v   # slip: dim 2 is the queries


def la_rope_key_per_batch(q_c, q_r, c, k_r, W_uk, W_uv):
    k = torch.einsum("btc,hdc->bhtd", c, W_uk)
    v = torch.einsum("btc,hdc->bhtd", c, W_uv)
    s = (q_c @ k.transpose(-1, -2) + q_r @ k_r.transpose(-1, -2)) / math.sqrt(q_c.shape[-1] + q_r.shape[-1])  # slip
    return s.masked_fill(~_causal(c.shape[1]), float("-inf")).softmax(-1) @ v


def la_concatenated(q_c, q_r, c, k_r, W_uk, W_uv):
    """The lesson's picture: one query [q^C ; q^R] against one key [k^C ; k^R] per head."""
    h = W_uk.shape[0]
    k = torch.cat([torch.einsum("btc,hdc->bhtd", c, W_uk), k_r[:, None].expand(-1, h, -1, -1)], dim=-1)
    q = torch.cat([q_c, q_r], dim=-1)
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    s = s + torch.zeros_like(s).masked_fill(~_causal(c.shape[1]), -1e9)
    return F.softmax(s, dim=-1) @ torch.einsum("btc,hdc->bhtd", c, W_uv)


def la_matmul_transposes(q_c, q_r, c, k_r, W_uk, W_uv):
    k = c.unsqueeze(1) @ W_uk.transpose(1, 2)                         # (B, h, T, d_h)
    v = c.unsqueeze(1) @ W_uv.transpose(1, 2)
    s = torch.matmul(q_c, k.mT) + torch.matmul(q_r, k_r.unsqueeze(1).mT)
    s = s * (q_c.size(-1) + q_r.size(-1)) ** -0.5
    s = torch.where(_causal(c.size(1)), s, torch.tensor(float("-inf")))
    return torch.softmax(s, -1) @ v


# ================================================================================================
# Exercise 2: absorbed_step
# ================================================================================================
def _absorbed(q_c, q_r, cache_c, cache_kr, W_uk, W_uv, W_o, scale=None, rope=True, w_o_heads=None):
    h, d_h, d_c = W_uk.shape
    q_lat = torch.einsum("bhqd,hdc->bhqc", q_c, W_uk)
    s = q_lat @ cache_c.unsqueeze(1).mT
    if rope:
        s = s + q_r @ cache_kr.unsqueeze(1).mT
    s = s / (math.sqrt(d_h + q_r.shape[-1]) if scale is None else scale)
    o_lat = s.softmax(-1) @ cache_c.unsqueeze(1)                          # (B, h, 1, d_c)
    W_o_heads = W_o.T.reshape(h, d_h, -1) if w_o_heads is None else w_o_heads(W_o, h, d_h)   # (h, d_h, d_model)
    W_ov = W_uv.transpose(1, 2) @ W_o_heads                               # (h, d_c, d_model)
    return (o_lat @ W_ov.unsqueeze(0)).sum(1)                             # (B, 1, d_model)


def ab_no_scale(q_c, q_r, cache_c, cache_kr, W_uk, W_uv, W_o):
    return _absorbed(q_c, q_r, cache_c, cache_kr, W_uk, W_uv, W_o, scale=1.0)   # slip: the scores are not scaled


def ab_scale_dc(q_c, q_r, cache_c, cache_kr, W_uk, W_uv, W_o):
    # slip: the scores are now d_c wide, so the learner scales by sqrt(d_c)
    return _absorbed(q_c, q_r, cache_c, cache_kr, W_uk, W_uv, W_o, scale=math.sqrt(cache_c.shape[-1]))


def ab_no_rope(q_c, q_r, cache_c, cache_kr, W_uk, W_uv, W_o):
    return _absorbed(q_c, q_r, cache_c, cache_kr, W_uk, W_uv, W_o, rope=False)  # slip: the cached RoPE keys unused


def ab_w_o_heads_not_transposed(q_c, q_r, cache_c, cache_kr, W_uk, W_uv, W_o):
    # slip: W_o (d_model, h d_h) reshaped as (h, d_h, d_model) without its transpose
    return _absorbed(q_c, q_r, cache_c, cache_kr, W_uk, W_uv, W_o,
                     w_o_heads=lambda W, h, d_h: W.reshape(h, d_h, W.shape[0]))


def ab_keys_rebuilt(q_c, q_r, cache_c, cache_kr, W_uk, W_uv, W_o):
    h, d_h, _ = W_uk.shape
    k = torch.einsum("btc,hdc->bhtd", cache_c, W_uk)                      # slip: every head's keys of the cache
    v = torch.einsum("btc,hdc->bhtd", cache_c, W_uv)
    s = (q_c @ k.mT + q_r @ cache_kr.unsqueeze(1).mT) / math.sqrt(d_h + q_r.shape[-1])
    o = s.softmax(-1) @ v                                                 # (B, h, 1, d_h)
    return o.transpose(1, 2).reshape(o.shape[0], 1, h * d_h) @ W_o.T


def ab_absorbed_swapped(q_c, q_r, cache_c, cache_kr, W_uk, W_uv, W_o):
    # slip: W_uv folded into the query and W_uk into W_O
    return _absorbed(q_c, q_r, cache_c, cache_kr, W_uv, W_uk, W_o)


def ab_values_per_head_after_mix(q_c, q_r, cache_c, cache_kr, W_uk, W_uv, W_o):
    """W_UK absorbed; W_UV applied to the mixed latent (B, h, 1, d_c) -> (B, h, 1, d_h), then W_O on the heads."""
    h, d_h, _ = W_uk.shape
    s = (torch.einsum("bhqd,hdc->bhqc", q_c, W_uk) @ cache_c.unsqueeze(1).mT
         + q_r @ cache_kr.unsqueeze(1).mT) / math.sqrt(d_h + q_r.shape[-1])
    o_lat = s.softmax(-1) @ cache_c.unsqueeze(1)
    o = torch.einsum("bhqc,hdc->bhqd", o_lat, W_uv)                      # (B, h, 1, d_h): one position only
    return o.permute(0, 2, 1, 3).flatten(2) @ W_o.T


def ab_cat_scores(q_c, q_r, cache_c, cache_kr, W_uk, W_uv, W_o):
    """[q^C W_UK ; q^R] against [c ; k^R], heads summed through einsum."""
    h, d_h, _ = W_uk.shape
    q = torch.cat([torch.einsum("bhqd,hdc->bhqc", q_c, W_uk), q_r], -1)
    keys = torch.cat([cache_c, cache_kr], -1)
    w = torch.softmax(torch.einsum("bhqe,bte->bhqt", q, keys) / math.sqrt(d_h + q_r.shape[-1]), -1)
    o_lat = torch.einsum("bhqt,btc->bhqc", w, cache_c)
    return torch.einsum("bhqc,hdc,mhd->bqm", o_lat, W_uv, W_o.view(W_o.shape[0], h, d_h))


# ================================================================================================
# Exercise 3: attention_with_sink
# ================================================================================================
def _scores(q, k, mask):
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    return s if mask is None else s.masked_fill(~mask, float("-inf"))


def ws_sink_added_to_scores(q, k, v, sink, mask=None):
    s = _scores(q, k, mask) + sink.view(1, -1, 1, 1)                     # slip: the sink added to every score
    w = s.softmax(-1)
    return w @ v, w


def ws_exp_by_hand(q, k, v, sink, mask=None):
    e = _scores(q, k, mask).exp()                                         # slip: no maximum subtracted
    w = e / (e.sum(-1, keepdim=True) + sink.exp().view(1, -1, 1, 1))
    return w @ v, w


def ws_mask_inverted(q, k, v, sink, mask=None):
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        s = s.masked_fill(mask, float("-inf"))                            # slip: True means "may attend"
    col = sink.view(1, -1, 1, 1).expand(*s.shape[:-1], 1)
    w = torch.cat([s, col], -1).softmax(-1)[..., :-1]
    return w @ v, w


def ws_sink_scaled(q, k, v, sink, mask=None):
    s = q @ k.transpose(-2, -1)
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    col = sink.view(1, -1, 1, 1).expand(*s.shape[:-1], 1)
    w = (torch.cat([s, col], -1) / math.sqrt(q.shape[-1])).softmax(-1)[..., :-1]   # slip: the sink divided by sqrt(d)
    return w @ v, w


def ws_renormalised(q, k, v, sink, mask=None):
    s = _scores(q, k, mask)
    col = sink.view(1, -1, 1, 1).expand(*s.shape[:-1], 1)
    w = torch.cat([s, col], -1).softmax(-1)[..., :-1]
    w = w / w.sum(-1, keepdim=True)                                       # slip: "the weights must sum to 1"
    return w @ v, w


def ws_sink_prepended_wrong_drop(q, k, v, sink, mask=None):
    s = _scores(q, k, mask)
    col = sink.view(1, -1, 1, 1).expand(*s.shape[:-1], 1)
    w = torch.cat([col, s], -1).softmax(-1)[..., :-1]                    # slip: prepended, but the last column dropped
    return w @ v, w


def ws_big_negative(q, k, v, sink, mask=None):
    """-1e9 for masked scores, the sink prepended then dropped."""
    s = q @ k.transpose(-2, -1) * q.shape[-1] ** -0.5
    if mask is not None:
        s = torch.where(mask, s, torch.full_like(s, -1e9))
    col = sink[None, :, None, None].expand(s.shape[0], -1, s.shape[2], 1)
    w = torch.softmax(torch.cat([col, s], dim=-1), dim=-1)[..., 1:]
    return w @ v, w


def ws_logsumexp(q, k, v, sink, mask=None):
    """Weights from the log of the denominator, computed stably."""
    s = _scores(q, k, mask)
    m = torch.maximum(s.amax(-1, keepdim=True), sink.view(1, -1, 1, 1))
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    e = (s - m).exp()
    w = e / (e.sum(-1, keepdim=True) + (sink.view(1, -1, 1, 1) - m).exp())
    return w @ v, w


def ws_sink_fixed_at_zero(q, k, v, sink, mask=None):
    s = _scores(q, k, mask)
    w = torch.cat([s, torch.zeros_like(s[..., :1])], -1).softmax(-1)[..., :-1]   # slip: a sink logit of 0, `sink` unused
    return w @ v, w


# ================================================================================================
# Exercise 4: ring_buffer (ring_buffer_append)
# ================================================================================================
def rb_previous_slot(cache_k, cache_v, slots, k, v, position):
    slot = (position - 1) % cache_k.shape[2]                              # slip: position - 1
    cache_k[:, :, slot], cache_v[:, :, slot], slots[slot] = k[:, :, 0], v[:, :, 0], position
    return cache_k, cache_v, slots


def rb_feature_size_as_window(cache_k, cache_v, slots, k, v, position):
    slot = position % cache_k.shape[-1]                                   # slip: shape[-1] is d, not W
    cache_k[:, :, slot], cache_v[:, :, slot], slots[slot] = k[:, :, 0], v[:, :, 0], position
    return cache_k, cache_v, slots


def rb_slots_not_updated(cache_k, cache_v, slots, k, v, position):
    slot = position % cache_k.shape[2]
    cache_k[:, :, slot] = k[:, :, 0]
    cache_v[:, :, slot] = v[:, :, 0]                                      # slip: slots never updated
    return cache_k, cache_v, slots


def rb_queue(cache_k, cache_v, slots, k, v, position):
    W = cache_k.shape[2]
    # slip: appended at the end and the oldest cut off: a queue that moves everything
    return (torch.cat([cache_k, k], 2)[:, :, -W:], torch.cat([cache_v, v], 2)[:, :, -W:],
            torch.cat([slots, torch.tensor([position])])[-W:])


def rb_appends(cache_k, cache_v, slots, k, v, position):
    # slip: a plain cache: appends every position and never overwrites
    return torch.cat([cache_k, k], 2), torch.cat([cache_v, v], 2), torch.cat([slots, torch.tensor([position])])


def rb_slot_written_as_index(cache_k, cache_v, slots, k, v, position):
    slot = position % cache_k.shape[2]
    cache_k[:, :, slot], cache_v[:, :, slot] = k[:, :, 0], v[:, :, 0]
    slots[slot] = slot                                                   # slip: the slot's index, not the position
    return cache_k, cache_v, slots


def rb_copies(cache_k, cache_v, slots, k, v, position):
    """Copies, written with index_put on one index."""
    W = cache_k.shape[2]
    slot = torch.tensor(position % W)
    ck, cv, sl = cache_k.clone(), cache_v.clone(), slots.clone()
    ck[:, :, slot] = k.squeeze(2)
    cv[:, :, slot] = v.squeeze(2)
    sl[slot] = position
    return ck, cv, sl


def rb_scatter(cache_k, cache_v, slots, k, v, position):
    """scatter along the slot axis."""
    B, h, W, d = cache_k.shape
    index = torch.full((B, h, 1, d), position % W)
    return (cache_k.scatter(2, index, k), cache_v.scatter(2, index, v),
            slots.scatter(0, torch.tensor([position % W]), torch.tensor([position])))


# ================================================================================================
# Exercise 5: delta_rule_step
# ================================================================================================
def _outer(a, b):
    return a.unsqueeze(-1) * b.unsqueeze(-2)


def dr_no_erase(S, q, k, v, beta, alpha=None):
    if alpha is not None:
        S = alpha[..., None, None] * S
    S = S + beta[..., None, None] * _outer(v, k)                          # slip: linear attention's sum
    return (S @ q.unsqueeze(-1)).squeeze(-1), S


def dr_gate_last(S, q, k, v, beta, alpha=None):
    old = (S @ k.unsqueeze(-1)).squeeze(-1)
    S = S + beta[..., None, None] * _outer(v - old, k)
    if alpha is not None:
        S = alpha[..., None, None] * S                                    # slip: the gate after the update
    return (S @ q.unsqueeze(-1)).squeeze(-1), S


def dr_error_before_decay(S, q, k, v, beta, alpha=None):
    old = (S @ k.unsqueeze(-1)).squeeze(-1)                               # slip: read before the decay
    if alpha is not None:
        S = alpha[..., None, None] * S
    S = S + beta[..., None, None] * _outer(v - old, k)
    return (S @ q.unsqueeze(-1)).squeeze(-1), S


def dr_output_from_old_state(S, q, k, v, beta, alpha=None):
    if alpha is not None:
        S = alpha[..., None, None] * S
    o = (S @ q.unsqueeze(-1)).squeeze(-1)                                 # slip: o read before the write
    old = (S @ k.unsqueeze(-1)).squeeze(-1)
    S = S + beta[..., None, None] * _outer(v - old, k)
    return o, S


def dr_erase_without_beta(S, q, k, v, beta, alpha=None):
    if alpha is not None:
        S = alpha[..., None, None] * S
    old = (S @ k.unsqueeze(-1)).squeeze(-1)
    S = S - _outer(old, k) + beta[..., None, None] * _outer(v, k)         # slip: the erase without beta
    return (S @ q.unsqueeze(-1)).squeeze(-1), S


def dr_alpha_ignored(S, q, k, v, beta, alpha=None):
    old = (S @ k.unsqueeze(-1)).squeeze(-1)                               # slip: alpha never used
    S = S + beta[..., None, None] * _outer(v - old, k)
    return (S @ q.unsqueeze(-1)).squeeze(-1), S


def dr_matrix_form(S, q, k, v, beta, alpha=None):
    """The second formula of the lesson: alpha S (I - beta k kᵀ) + beta v kᵀ, with an identity matrix."""
    b = beta[..., None, None]
    A = torch.eye(k.shape[-1]) - b * _outer(k, k)
    gate = 1.0 if alpha is None else alpha[..., None, None]
    S_new = gate * S @ A + b * _outer(v, k)
    return torch.einsum("bhvk,bhk->bhv", S_new, q), S_new


def dr_loops(S, q, k, v, beta, alpha=None):
    """A loop over the batch rows and heads, on matrices and vectors."""
    S_new, o = torch.empty_like(S), torch.empty_like(v)
    for b in range(S.shape[0]):
        for i in range(S.shape[1]):
            M = S[b, i] * (1.0 if alpha is None else alpha[b, i])
            M = M + beta[b, i] * torch.outer(v[b, i] - M @ k[b, i], k[b, i])
            S_new[b, i], o[b, i] = M, M @ q[b, i]
    return o, S_new


def dr_outer_k_v(S, q, k, v, beta, alpha=None):
    if alpha is not None:
        S = alpha[..., None, None] * S
    old = (S @ k.unsqueeze(-1)).squeeze(-1)
    S = S + _outer(k, beta.unsqueeze(-1) * (v - old))                     # slip: k vᵀ, (d_k, d_v), not v kᵀ
    return (S @ q.unsqueeze(-1)).squeeze(-1), S


# ================================================================================================
# Exercise 6: delta_rule_chunked
# ================================================================================================
def _chunked(q, k, v, beta, C, inner_diag=0, with_intra=True, rhs_beta=True, a_diag=-1, stop=None, full_qk=False):
    B, h, T, d_k = k.shape
    S = torch.zeros(B, h, v.shape[-1], d_k)
    outs = []
    QK = q @ k.mT if full_qk else None                                   # (B, h, T, T) when full_qk
    for s in range(0, T if stop is None else stop, C):
        e = min(s + C, T)
        Q, K, V, b = q[:, :, s:e], k[:, :, s:e], v[:, :, s:e], beta[:, :, s:e]
        n = e - s
        A = torch.eye(n) + (b.unsqueeze(-1) * (K @ K.mT)).tril(a_diag)
        rhs = V - K @ S.mT
        rhs = b.unsqueeze(-1) * rhs if rhs_beta else rhs
        U = torch.linalg.solve_triangular(A, rhs, upper=False)
        o = Q @ S.mT
        if with_intra:
            inner = QK[:, :, s:e, s:e] if full_qk else Q @ K.mT
            o = o + inner.tril(inner_diag) @ U
        outs.append(o)
        S = S + U.mT @ K
    return torch.cat(outs, 2), S


def dc_strict_mask(q, k, v, beta, chunk_size):
    return _chunked(q, k, v, beta, chunk_size, inner_diag=-1)            # slip: tril(-1) inside the chunk


def dc_no_intra(q, k, v, beta, chunk_size):
    return _chunked(q, k, v, beta, chunk_size, with_intra=False)         # slip: only the state of earlier chunks


def dc_rhs_without_beta(q, k, v, beta, chunk_size):
    return _chunked(q, k, v, beta, chunk_size, rhs_beta=False)           # slip: diag(beta) left out of the right side


def dc_diagonal_in_a(q, k, v, beta, chunk_size):
    return _chunked(q, k, v, beta, chunk_size, a_diag=0)                 # slip: tril(0) in the triangular system


def dc_whole_chunks_only(q, k, v, beta, chunk_size):
    T = k.shape[2]
    return _chunked(q, k, v, beta, chunk_size, stop=T - T % chunk_size)  # slip: the shorter last chunk is skipped


def dc_scores_once(q, k, v, beta, chunk_size):
    # slip: Q Kᵀ computed once for the whole sequence (T x T), then cut into chunks: right values, T x T built
    return _chunked(q, k, v, beta, chunk_size, full_qk=True)


def dc_padded(q, k, v, beta, chunk_size):
    """Pads T to a multiple of C with k = v = 0, beta = 0 (positions that change nothing), then cuts them off."""
    B, h, T, _ = k.shape
    pad = (-T) % chunk_size
    qp, kp, vp = (F.pad(x, (0, 0, 0, pad)) for x in (q, k, v))
    bp = F.pad(beta, (0, pad))
    o, S = _chunked(qp, kp, vp, bp, chunk_size)
    return o[:, :, :T], S


def dc_inverse(q, k, v, beta, chunk_size):
    """torch.linalg.inv of the unit triangular matrix, a list of chunks from torch.split."""
    S = torch.zeros(k.shape[0], k.shape[1], v.shape[-1], k.shape[-1])
    outs = []
    for Q, K, V, b in zip(*(x.split(chunk_size, dim=2) for x in (q, k, v, beta))):
        n = K.shape[2]
        T_inv = torch.linalg.inv(torch.eye(n) + torch.tril(b[..., :, None] * (K @ K.transpose(-1, -2)), diagonal=-1))
        U = T_inv @ (b[..., :, None] * (V - K @ S.transpose(-1, -2)))
        outs.append(Q @ S.transpose(-1, -2) + torch.tril(Q @ K.transpose(-1, -2)) @ U)
        S = S + U.transpose(-1, -2) @ K
    return torch.cat(outs, dim=2), S


def dc_eye_of_chunk_size(q, k, v, beta, chunk_size):
    B, h, T, d_k = k.shape
    S, outs = torch.zeros(B, h, v.shape[-1], d_k), []
    for s in range(0, T, chunk_size):
        Q, K, V, b = (x[:, :, s:s + chunk_size] for x in (q, k, v, beta))
        A = torch.eye(chunk_size) + (b.unsqueeze(-1) * (K @ K.mT)).tril(-1)   # slip: eye(C) for the shorter last chunk
        U = torch.linalg.solve_triangular(A, b.unsqueeze(-1) * (V - K @ S.mT), upper=False)
        outs.append(Q @ S.mT + (Q @ K.mT).tril() @ U)
        S = S + U.mT @ K
    return torch.cat(outs, dim=2), S


# ================================================================================================
SLIPS = [
    ("latent_attention", "Copy-paste: the values from W_uk too.", la_values_from_uk),
    ("latent_attention", "Causal mask built with triu(0): the diagonal masked too (row 0 sees nothing).",
     la_mask_diagonal_too),
    ("latent_attention", "The RoPE part of the scores forgotten (scale kept at d_h + d_R).", la_no_rope),
    ("latent_attention", "Scaled by sqrt(d_h) only.", la_scale_dh),
    ("latent_attention", "Softmax over dim 2, the queries.", la_softmax_dim2),
    ("latent_attention", "k_r used without a head axis: its batch axis meets the heads.", la_rope_key_per_batch),

    ("absorbed_step", "Scores not scaled.", ab_no_scale),
    ("absorbed_step", "Scaled by sqrt(d_c): the absorbed scores are d_c wide.", ab_scale_dc),
    ("absorbed_step", "The cached RoPE keys never used.", ab_no_rope),
    ("absorbed_step", "W_o reshaped to (h, d_h, d_model) without its transpose.", ab_w_o_heads_not_transposed),
    ("absorbed_step", "Every head's keys and values rebuilt from the cache (not absorbed).", ab_keys_rebuilt),
    ("absorbed_step", "W_uv folded into the query, W_uk into W_O.", ab_absorbed_swapped),

    ("attention_with_sink", "The sink added to every score: it cancels in the softmax.", ws_sink_added_to_scores),
    ("attention_with_sink", "exp by hand without subtracting the maximum.", ws_exp_by_hand),
    ("attention_with_sink", "masked_fill with the mask itself (True = may attend).", ws_mask_inverted),
    ("attention_with_sink", "The sink's column divided by sqrt(d) with the scores.", ws_sink_scaled),
    ("attention_with_sink", "Weights renormalised to sum to 1 after dropping the sink.", ws_renormalised),
    ("attention_with_sink", "Sink prepended but the last column dropped.", ws_sink_prepended_wrong_drop),
    ("attention_with_sink", "A sink logit of 0 in every head (the off-by-one softmax): `sink` unused.",
     ws_sink_fixed_at_zero),

    ("ring_buffer", "Slot (position - 1) % W.", rb_previous_slot),
    ("ring_buffer", "W read from the last axis (d).", rb_feature_size_as_window),
    ("ring_buffer", "The slot table never updated.", rb_slots_not_updated),
    ("ring_buffer", "A queue: append, keep the last W.", rb_queue),
    ("ring_buffer", "A plain growing cache.", rb_appends),
    ("ring_buffer", "The slot table records the slot index.", rb_slot_written_as_index),

    ("delta_rule_step", "No erase term: linear attention's update.", dr_no_erase),
    ("delta_rule_step", "The gate applied after the update.", dr_gate_last),
    ("delta_rule_step", "What S holds under k read before the decay.", dr_error_before_decay),
    ("delta_rule_step", "The output read from the state before the write.", dr_output_from_old_state),
    ("delta_rule_step", "The erase term without beta.", dr_erase_without_beta),
    ("delta_rule_step", "alpha ignored.", dr_alpha_ignored),
    ("delta_rule_step", "The write as the outer product k vᵀ instead of v kᵀ.", dr_outer_k_v),

    ("delta_rule_chunked", "Strict mask inside the chunk (tril(-1)).", dc_strict_mask),
    ("delta_rule_chunked", "No intra-chunk part.", dc_no_intra),
    ("delta_rule_chunked", "diag(beta) left out of the right-hand side.", dc_rhs_without_beta),
    ("delta_rule_chunked", "tril(0) in the triangular system.", dc_diagonal_in_a),
    ("delta_rule_chunked", "The shorter last chunk skipped.", dc_whole_chunks_only),
    ("delta_rule_chunked", "Q Kᵀ of the whole sequence computed once and cut into chunks.", dc_scores_once),
    ("delta_rule_chunked", "torch.eye(chunk_size) for every chunk, the shorter last one too.",
     dc_eye_of_chunk_size),
]

CORRECT = [
    ("latent_attention", "Queries and keys concatenated, -1e9 added for the future.", la_concatenated),
    ("latent_attention", "Matmuls with .mT and torch.where for the mask.", la_matmul_transposes),

    ("absorbed_step", "W_UK absorbed; W_UV applied to the mixed latent of the one new position.",
     ab_values_per_head_after_mix),
    ("absorbed_step", "[q^C W_UK ; q^R] against [c ; k^R] with einsum, W_UV and W_O in one einsum.", ab_cat_scores),

    ("attention_with_sink", "-1e9 for masked scores, the sink prepended then dropped.", ws_big_negative),
    ("attention_with_sink", "The maximum over the scores and the sink subtracted by hand.", ws_logsumexp),

    ("ring_buffer", "Copies with a tensor index.", rb_copies),
    ("ring_buffer", "scatter along the slot axis.", rb_scatter),

    ("delta_rule_step", "The matrix form with an identity.", dr_matrix_form),
    ("delta_rule_step", "Loops over batch rows and heads.", dr_loops),

    ("delta_rule_chunked", "Padded to whole chunks with positions that change nothing.", dc_padded),
    ("delta_rule_chunked", "torch.split and the inverse of the triangular matrix.", dc_inverse),
]
