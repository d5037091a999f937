"""Neural Turing Machine (Graves, Wayne & Danihelka, 2014): addressing, memory read/write, the model.

Shapes follow one convention: batch B, memory rows N, row width M, so the memory is (B, N, M);
a weighting over rows is (B, N), or (B, H, N) for H heads. Every addressing function works on
any leading dimensions (..., N), so the same code serves one head, a batch, or batch x heads.

    w_c = content_addressing(k, beta, memory)      softmax_i(beta * cosine(k, memory[i]))
    w_g = interpolate(w_c, w_prev, g)              g * w_c + (1 - g) * w_prev
    w_s = shift(w_g, s)                            circular convolution with s over shifts -R..R
    w   = sharpen(w_s, gamma)                      w_s**gamma / sum_j w_s[j]**gamma
    r   = memory_read(memory, w)                   sum_i w[i] * memory[i]
    memory = memory_write(memory, w, e, a)         erase then add

`NTM` is a controller (LSTM) with one read head and one write head, unrolled over a sequence.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def _check_last(x, size, what, expected):
    if x.shape[-1] != size:
        raise ValueError(f"{what} should have last dimension {size} ({expected}), got shape {tuple(x.shape)}")


def cosine_similarity(k, memory, eps=1e-8):
    """cosine(k, memory[i]) for every row i: k (..., M), memory (..., N, M) -> (..., N).

    `eps` in the denominator keeps a zero row (or a zero key) at similarity 0 instead of NaN.
    """
    _check_last(k, memory.shape[-1], "k", "the memory's row width M")
    dot = (memory @ k.unsqueeze(-1)).squeeze(-1)                  # (..., N)
    norms = memory.norm(dim=-1) * k.norm(dim=-1, keepdim=True)    # (..., N)
    return dot / (norms + eps)


def content_addressing(k, beta, memory, eps=1e-8):
    """w_c(i) = softmax_i(beta * cosine(k, memory[i])): k (..., M), beta (..., 1) -> (..., N)."""
    _check_last(beta, 1, "beta", "one key strength per head")
    return torch.softmax(beta * cosine_similarity(k, memory, eps), dim=-1)


def interpolate(w_c, w_prev, g):
    """w_g = g * w_c + (1 - g) * w_prev: g (..., 1) in [0, 1] is the interpolation gate."""
    _check_last(g, 1, "g", "one gate per head")
    return g * w_c + (1 - g) * w_prev


def shift(w, s):
    """Circular convolution w_s(i) = sum_k s(k) w(i - k), k in -R..R: w (..., N), s (..., 2R+1).

    s[..., 0] is the weight of shift -R, s[..., R] of no shift, s[..., -1] of shift +R;
    a shift of +1 moves the weighting one row down (row N-1 wraps round to row 0).
    """
    if s.shape[-1] % 2 != 1:
        raise ValueError(f"s should have an odd number 2R+1 of shifts (-R..R), got shape {tuple(s.shape)}")
    R = s.shape[-1] // 2
    rolled = torch.stack([torch.roll(w, k, dims=-1) for k in range(-R, R + 1)], dim=-1)  # (..., N, 2R+1)
    return (rolled * s.unsqueeze(-2)).sum(-1)


def sharpen(w, gamma, eps=1e-12):
    """w(i) = w_s(i)**gamma / sum_j w_s(j)**gamma with gamma (..., 1) >= 1 (eps guards 0**gamma)."""
    _check_last(gamma, 1, "gamma", "one sharpening exponent per head")
    w = (w + eps) ** gamma
    return w / w.sum(-1, keepdim=True)


def address(memory, w_prev, k, beta, g, s, gamma, return_stages=False):
    """The four addressing stages in order; with return_stages, also {name: weighting} of each."""
    w_c = content_addressing(k, beta, memory)
    w_g = interpolate(w_c, w_prev, g)
    w_s = shift(w_g, s)
    w = sharpen(w_s, gamma)
    if return_stages:
        return w, {"content": w_c, "interpolated": w_g, "shifted": w_s, "sharpened": w}
    return w


def memory_read(memory, w):
    """r = sum_i w(i) memory(i): memory (..., N, M), w (..., N) -> (..., M)."""
    _check_last(w, memory.shape[-2], "w", "one weight per memory row")
    return (w.unsqueeze(-2) @ memory).squeeze(-2)


def memory_write(memory, w, e, a):
    """Erase then add: memory(i) * (1 - w(i) e) + w(i) a; w (..., N), e and a (..., M) -> (..., N, M)."""
    _check_last(w, memory.shape[-2], "w", "one weight per memory row")
    _check_last(e, memory.shape[-1], "e", "the memory's row width M")
    w = w.unsqueeze(-1)                                   # (..., N, 1)
    erased = memory * (1 - w * e.unsqueeze(-2))           # (..., N, M)
    return erased + w * a.unsqueeze(-2)


def head_sizes(M, num_shifts=3):
    """Sizes of (k, beta, g, s, gamma) that a head's parameter vector is split into."""
    return [M, 1, 1, num_shifts, 1]


def head_parameters(raw, M, num_shifts=3):
    """Split a head's raw controller output (..., M + 3 + num_shifts) and apply the activations.

    k: as is; beta = softplus (>= 0); g = sigmoid (in [0, 1]); s = softmax over the shifts;
    gamma = 1 + softplus (>= 1). Returns (k, beta, g, s, gamma).
    """
    _check_last(raw, sum(head_sizes(M, num_shifts)), "raw", "M + 3 + num_shifts head outputs")
    k, beta, g, s, gamma = torch.split(raw, head_sizes(M, num_shifts), dim=-1)
    return k, F.softplus(beta), torch.sigmoid(g), torch.softmax(s, dim=-1), 1 + F.softplus(gamma)


class NTMCell(nn.Module):
    """One time step of an NTM: an LSTM controller, one read head and one write head.

    The controller sees the input x_t and the previous read vector r_{t-1}; its state h emits
    both heads' parameters. Both heads address the memory M_{t-1}; the read head reads r_t from it,
    then the write head erases and adds. The output is computed from [h, r_t].
    """

    def __init__(self, input_size, output_size, controller_size=100, N=128, M=20, num_shifts=3):
        super().__init__()
        self.N, self.M, self.num_shifts = N, M, num_shifts
        self.head_size = sum(head_sizes(M, num_shifts))
        self.controller = nn.LSTMCell(input_size + M, controller_size)
        self.heads = nn.Linear(controller_size, 2 * self.head_size + 2 * M)  # read, write, e, a
        self.output = nn.Linear(controller_size + M, output_size)
        self.r0 = nn.Parameter(torch.randn(M) * 0.01)     # learned initial read vector
        self.memory_init = 1e-6                           # a small constant (Collier & Beel, 2018)

    def initial_state(self, batch_size):
        """(h, c), r, w (B, 2, N) one-hot on row 0 for the read and write heads, memory (B, N, M)."""
        device = self.r0.device
        zeros = torch.zeros(batch_size, self.controller.hidden_size, device=device)
        w = torch.zeros(batch_size, 2, self.N, device=device)
        w[:, :, 0] = 1.0
        memory = torch.full((batch_size, self.N, self.M), self.memory_init, device=device)
        return (zeros, zeros.clone()), self.r0.expand(batch_size, -1), w, memory

    def forward(self, x, state):
        """x (B, input_size) -> logits (B, output_size), new state, weights (B, 2, N)."""
        (h, c), r, w_prev, memory = state
        h, c = self.controller(torch.cat([x, r], dim=-1), (h, c))
        out = self.heads(h)                                          # (B, 2 * head_size + 2M)
        raw = out[:, :2 * self.head_size].view(-1, 2, self.head_size)  # (B, 2 heads, head_size)
        k, beta, g, s, gamma = head_parameters(raw, self.M, self.num_shifts)
        e = torch.sigmoid(out[:, 2 * self.head_size:2 * self.head_size + self.M])  # (B, M)
        a = out[:, 2 * self.head_size + self.M:]                                  # (B, M)
        w = address(memory.unsqueeze(1), w_prev, k, beta, g, s, gamma)  # (B, 2, N): both heads at once
        r = memory_read(memory, w[:, 0])                                # (B, M) read from M_{t-1}
        memory = memory_write(memory, w[:, 1], e, a)                    # (B, N, M)
        logits = self.output(torch.cat([h, r], dim=-1))
        return logits, ((h, c), r, w, memory), w


class NTM(nn.Module):
    """The NTM cell unrolled over a sequence: x (B, T, input_size) -> logits (B, T, output_size).

    After a forward pass, `self.read_weights` and `self.write_weights` hold the heads'
    weightings over memory rows, (B, T, N) each, for plots (`self.attn_weights`: both, (B, T, 2, N)),
    and `self.memory` the final memory (B, N, M).
    """

    def __init__(self, input_size, output_size, controller_size=100, N=128, M=20, num_shifts=3):
        super().__init__()
        self.cell = NTMCell(input_size, output_size, controller_size, N, M, num_shifts)
        self.attn_weights = self.read_weights = self.write_weights = self.memory = None

    def forward(self, x):
        if x.dim() != 3 or x.shape[-1] != self.cell.controller.input_size - self.cell.M:
            raise ValueError(f"NTM expects x of shape (B, T, {self.cell.controller.input_size - self.cell.M}), "
                             f"got {tuple(x.shape)}")
        state = self.cell.initial_state(x.shape[0])
        logits, weights = [], []
        for t in range(x.shape[1]):
            y, state, w = self.cell(x[:, t], state)
            logits.append(y)
            weights.append(w.detach())
        weights = torch.stack(weights, dim=1)                      # (B, T, 2, N)
        self.attn_weights = weights                                # heads: 0 = read, 1 = write
        self.read_weights, self.write_weights = weights[:, :, 0], weights[:, :, 1]
        self.memory = state[3].detach()
        return torch.stack(logits, dim=1)                          # (B, T, output_size)


def bits_per_sequence(logits, targets):
    """Binary cross-entropy summed over a sequence's output bits, in bits, averaged over the batch."""
    nats = F.binary_cross_entropy_with_logits(logits, targets, reduction="sum") / targets.shape[0]
    return nats / math.log(2)
