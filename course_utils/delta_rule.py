"""Linear attention as a recurrence again: the delta rule (DeltaNet), its gated form (Gated DeltaNet), and the
chunked parallel form that trains them (lesson 15).

    o, S = delta_rule_step(S, q, k, v, beta, alpha=None)         one token: the state update and the read-out
    o, S = delta_rule_recurrent(q, k, v, beta, alpha=None)       T steps of it, one after the other (an RNN)
    o, S = delta_rule_chunked(q, k, v, beta, alpha=None, chunk_size=16)   the same numbers, chunk by chunk
    o, S = linear_attention_recurrent(q, k, v)                   lesson 13's linear attention as the same loop

A head's state S is a d_v x d_k matrix (a "fast weight", Schlag, Irie & Schmidhuber 2021): it maps a key to a
value. Lesson 13's linear attention only ADDS: S_t = S_{t-1} + v_t k_t^T, so an old value stored under a key
stays mixed into every later read of a similar key. The delta rule first READS what S holds under k_t, then
replaces it by a mix of that and the new value (a step of gradient descent on ||S k_t - v_t||^2, rate beta_t):

    S_t = S_{t-1} + beta_t (v_t - S_{t-1} k_t) k_t^T = S_{t-1} (I - beta_t k_t k_t^T) + beta_t v_t k_t^T,
    o_t = S_t q_t.

Gated DeltaNet (Yang, Kautz & Hatamizadeh, ICLR 2025) lets the whole memory decay first, by alpha_t in (0, 1]:

    S_t = S_{t-1} (alpha_t (I - beta_t k_t k_t^T)) + beta_t v_t k_t^T.

Qwen3-Next stacks three Gated DeltaNet layers for every softmax attention layer, Kimi Linear three of its
delta-rule layers (KDA) for every MLA layer.

The chunked form (Yang et al. 2024, "Parallelizing Linear Transformers with the Delta Rule over Sequence Length")
gives the same numbers with matrix products: within a chunk of C positions, with S_0 the state before it, the
writes u_t (S_t = S_0 + sum_{i<=t} u_i k_i^T) solve a C x C unit lower-triangular system,

    (I + tril(diag(beta) K K^T, -1)) U = diag(beta) (V - K S_0^T),
    O = Q S_0^T + (Q K^T masked to i <= t) U,      S_C = S_0 + U^T K,

so the T x T matrix of the parallel form is never built: only C x C blocks, and one state per chunk. With gates,
gamma_t = alpha_1 ... alpha_t inside the chunk scales each term by gamma_t / gamma_i (see _gated_chunk).
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from .efficient_attention import causal_linear_attention
from .modern_block import RMSNorm

__all__ = ["delta_rule_step", "delta_rule_recurrent", "delta_rule_chunked", "linear_attention_step",
           "linear_attention_recurrent", "state_bytes", "DeltaNetMixer", "RULES"]
RULES = ("linear", "deltanet", "gated_deltanet")


def _check(q, k, v, beta, alpha=None):
    if q.shape != k.shape or q.dim() != 4 or v.dim() != 4 or v.shape[:3] != k.shape[:3]:
        raise ValueError(f"q, k must be (B, h, T, d_k) and v (B, h, T, d_v) with the same B, h, T; got "
                         f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
    for name, gate in (("beta", beta), ("alpha", alpha)):
        if gate is not None and gate.shape != k.shape[:3]:
            raise ValueError(f"{name} must be (B, h, T) = {tuple(k.shape[:3])}, one number per head and position, "
                             f"got {tuple(gate.shape)}")


def delta_rule_step(S, q, k, v, beta, alpha=None):
    """One token of (gated) DeltaNet.

    S (B, h, d_v, d_k) the state before; q, k (B, h, d_k); v (B, h, d_v); beta, alpha (B, h) (alpha None: no
    decay, DeltaNet). Returns (o (B, h, d_v), the new state S (B, h, d_v, d_k)):
    S <- alpha S (I - beta k k^T) + beta v k^T, then o = S q (the state after the update).
    """
    if alpha is not None:
        S = alpha[..., None, None] * S
    old = (S @ k[..., None])[..., 0]                                    # (B, h, d_v): what S holds under k
    S = S + (beta[..., None] * (v - old))[..., None] * k[..., None, :]  # replace it: the delta rule
    return (S @ q[..., None])[..., 0], S


def delta_rule_recurrent(q, k, v, beta, alpha=None, S=None):
    """T steps of delta_rule_step: q, k (B, h, T, d_k), v (B, h, T, d_v), beta, alpha (B, h, T).
    Returns (o (B, h, T, d_v), the last state (B, h, d_v, d_k)). S: the state before the first step (zeros)."""
    _check(q, k, v, beta, alpha)
    B, h, T, d_k = k.shape
    S = q.new_zeros(B, h, v.size(-1), d_k) if S is None else S
    out = []
    for t in range(T):
        o, S = delta_rule_step(S, q[:, :, t], k[:, :, t], v[:, :, t], beta[:, :, t],
                               None if alpha is None else alpha[:, :, t])
        out.append(o)
    return torch.stack(out, dim=2), S


def _pad(x, length):
    return F.pad(x, (0, 0) * (x.dim() == 4) + (0, length - x.size(2)))


def delta_rule_chunked(q, k, v, beta, alpha=None, chunk_size=16, S=None):
    """delta_rule_recurrent's numbers, chunk by chunk: C x C blocks inside a chunk, the state between chunks.
    The last chunk may be shorter (padded with k = v = 0, beta = 0, alpha = 1: positions that change nothing)."""
    _check(q, k, v, beta, alpha)
    B, h, T, d_k = k.shape
    d_v, C = v.size(-1), int(chunk_size)
    if C < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    n = -(-T // C)
    shape = lambda x: _pad(x, n * C).reshape(B, h, n, C, *x.shape[3:])    # noqa: E731 (B, h, n, C, ...)
    Q, K, V, b = shape(q), shape(k), shape(v), shape(beta)
    t_ge_i = torch.ones(C, C, dtype=torch.bool, device=q.device).tril()
    if alpha is None:                                                    # DeltaNet: no decay
        g, decay = None, t_ge_i.to(q.dtype)
    else:
        g = shape(alpha.clamp_min(1e-12).log()).cumsum(-1)              # (B, h, n, C): log gamma_t in the chunk
        decay = (g[..., :, None] - g[..., None, :]).masked_fill(~t_ge_i, float("-inf")).exp()   # gamma_t / gamma_i
    A = (b[..., :, None] * (K @ K.transpose(-2, -1)) * decay).tril(-1)   # (B, h, n, C, C), strictly below
    eye = torch.eye(C, dtype=q.dtype, device=q.device)
    gK = K if g is None else g.exp()[..., None] * K
    # (I + A) [W U] = diag(beta) [gamma K, V]: one triangular solve for both
    WU = torch.linalg.solve_triangular(eye + A, b[..., None] * torch.cat([gK, V], -1), upper=False,
                                       unitriangular=True)
    W, U = WU.split([d_k, d_v], dim=-1)                                  # (B, h, n, C, d_k), (B, h, n, C, d_v)
    inner = (Q @ K.transpose(-2, -1)) * decay                            # (B, h, n, C, C), i <= t only
    S = q.new_zeros(B, h, d_v, d_k) if S is None else S
    out = []
    for c in range(n):                                                   # only the state crosses chunks
        u = U[:, :, c] - W[:, :, c] @ S.transpose(-2, -1)                # (B, h, C, d_v): the chunk's writes
        read = Q[:, :, c] @ S.transpose(-2, -1)
        out.append((read if g is None else g[:, :, c].exp()[..., None] * read) + inner[:, :, c] @ u)
        if g is None:
            S = S + u.transpose(-2, -1) @ K[:, :, c]
        else:
            last = g[:, :, c, -1:]                                       # log gamma_C
            S = last.exp()[..., None] * S + u.transpose(-2, -1) @ ((last - g[:, :, c]).exp()[..., None] * K[:, :, c])
    return torch.cat(out, dim=2)[:, :, :T], S


def linear_attention_step(S, z, q, k, v):
    """One token of lesson 13's causal linear attention as a recurrence: phi = elu + 1,
    S <- S + v phi(k)^T (B, h, d_v, d_k), z <- z + phi(k) (B, h, d_k), o = S phi(q) / (z . phi(q))."""
    phi_q, phi_k = F.elu(q) + 1, F.elu(k) + 1
    S = S + v[..., :, None] * phi_k[..., None, :]
    z = z + phi_k
    return (S @ phi_q[..., None])[..., 0] / (z * phi_q).sum(-1, keepdim=True), S, z


def linear_attention_recurrent(q, k, v):
    """T steps of linear_attention_step: equal to course_utils.efficient_attention.causal_linear_attention."""
    B, h, T, d_k = k.shape
    S, z, out = q.new_zeros(B, h, v.size(-1), d_k), q.new_zeros(B, h, d_k), []
    for t in range(T):
        o, S, z = linear_attention_step(S, z, q[:, :, t], k[:, :, t], v[:, :, t])
        out.append(o)
    return torch.stack(out, dim=2), S


def state_bytes(num_heads, d_k, d_v, bytes_per_number=2):
    """Bytes of one delta-rule layer's state: h x d_v x d_k numbers, whatever the number of tokens read."""
    return num_heads * d_v * d_k * bytes_per_number


class DeltaNetMixer(nn.Module):
    """A token mixer with a d_v x d_k state per head, updated by one of three RULES (the rest identical):
    "linear" (lesson 13's linear attention, phi = elu + 1), "deltanet" (the delta rule), "gated_deltanet" (the
    delta rule with a decay alpha_t, Gated DeltaNet).

    As in DeltaNet and Gated DeltaNet (Yang et al. 2024, 2025): q, k, v from linear maps, each through a short causal
    depthwise convolution (`conv_size` positions) and SiLU; q and k divided by their length (the delta rule needs
    ||k|| = 1 to stay stable); beta_t = sigmoid(w_b . x_t) per head; log alpha_t = -softplus(w_a . x_t + a_h) per
    head; the read-out RMS-normalised per head and gated by SiLU(W_g x_t); W_O. No position encoding: the order is
    in the recurrence. forward(x) trains with the chunked form; step(x, cache, position) is one token of the
    recurrence, its cache (the convolution's last inputs, S) of the same size after any number of tokens.
    """

    def __init__(self, d_model, num_heads, rule="gated_deltanet", conv_size=4, chunk_size=16):
        super().__init__()
        if rule not in RULES:
            raise ValueError(f"rule must be one of {RULES}, got {rule!r}")
        if d_model % num_heads:
            raise ValueError(f"d_model={d_model} must be divisible by num_heads={num_heads}")
        self.d_model, self.num_heads, self.d_head = d_model, num_heads, d_model // num_heads
        self.rule, self.conv_size, self.chunk_size = rule, conv_size, chunk_size
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=False)
        self.conv = nn.Conv1d(3 * d_model, 3 * d_model, conv_size, groups=3 * d_model, bias=False)
        self.b_proj = nn.Linear(d_model, num_heads, bias=False)
        self.a_proj = nn.Linear(d_model, num_heads, bias=False) if rule == "gated_deltanet" else None
        # decays from about 0.999 to 0.9 per token across the heads, at the start
        rates = torch.exp(torch.linspace(math.log(1e-3), math.log(0.1), num_heads))
        self.a_bias = nn.Parameter(torch.log(torch.expm1(rates))) if rule == "gated_deltanet" else None
        self.g_proj = nn.Linear(d_model, d_model, bias=False)
        self.out_norm = RMSNorm(self.d_head)
        self.o_proj = nn.Linear(d_model, d_model, bias=False)

    def _heads(self, x):                                                  # (B, T, d_model) -> (B, h, T, d_head)
        return x.view(x.size(0), x.size(1), self.num_heads, self.d_head).transpose(1, 2)

    def _mix(self, qkv, x):
        """The convolved qkv (B, T, 3 d_model) and the layer's input x -> q, k, v, beta, alpha (B, h, T, ...)."""
        q, k, v = (self._heads(t) for t in F.silu(qkv).chunk(3, dim=-1))
        if self.rule != "linear":
            q, k = F.normalize(q, dim=-1), F.normalize(k, dim=-1)
        beta = torch.sigmoid(self.b_proj(x)).transpose(1, 2)                 # (B, h, T)
        alpha = None if self.a_proj is None else \
            torch.exp(-F.softplus(self.a_proj(x) + self.a_bias)).transpose(1, 2)
        return q, k, v, beta, alpha

    def _read_out(self, o, x):
        o = self.out_norm(o).transpose(1, 2).reshape(x.size(0), x.size(1), self.d_model)
        return self.o_proj(o * F.silu(self.g_proj(x)))

    def forward(self, x):
        T = x.size(1)
        qkv = self.conv(F.pad(self.qkv(x).transpose(1, 2), (self.conv_size - 1, 0)))[..., :T].transpose(1, 2)
        q, k, v, beta, alpha = self._mix(qkv, x)
        if self.rule == "linear":
            o = causal_linear_attention(q, k, v)
        else:
            o, _ = delta_rule_chunked(q, k, v, beta, alpha, self.chunk_size)
        return self._read_out(o, x)

    def step(self, x, cache, position):
        """x (B, 1, d_model); cache (the last conv_size - 1 inputs of the convolution (B, 3 d_model, conv_size - 1),
        S (B, h, d_v, d_k)[, z]) or None -> (out (B, 1, d_model), cache)."""
        B = x.size(0)
        if cache is None:
            window = x.new_zeros(B, 3 * self.d_model, self.conv_size - 1)
            S = x.new_zeros(B, self.num_heads, self.d_head, self.d_head)
            cache = (window, S) + ((x.new_zeros(B, self.num_heads, self.d_head),) if self.rule == "linear" else ())
        inputs = torch.cat([cache[0], self.qkv(x).transpose(1, 2)], dim=-1)   # (B, 3 d_model, conv_size)
        qkv = (inputs * self.conv.weight[:, 0]).sum(-1)[:, None]            # (B, 1, 3 d_model)
        q, k, v, beta, alpha = self._mix(qkv, x)
        if self.rule == "linear":
            o, S, z = linear_attention_step(cache[1], cache[2], q[:, :, 0], k[:, :, 0], v[:, :, 0])
            state = (S, z)
        else:
            o, S = delta_rule_step(cache[1], q[:, :, 0], k[:, :, 0], v[:, :, 0], beta[:, :, 0],
                                   None if alpha is None else alpha[:, :, 0])
            state = (S,)
        return self._read_out(o[:, :, None], x), (inputs[..., 1:],) + state

    @staticmethod
    def cache_bytes(cache):
        return 0 if cache is None else sum(t.numel() * t.element_size() for t in cache)

    def extra_repr(self):
        return f"rule={self.rule!r}, heads={self.num_heads}, d_head={self.d_head}, conv_size={self.conv_size}"
