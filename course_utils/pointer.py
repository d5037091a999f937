"""Pointer networks (lesson 06): the output at each step is a position in the input.

Vinyals, Fortunato & Jaitly (2015). An encoder turns the input x_1..x_T into states h_1..h_T; a
decoder keeps a state s_i; at step i, additive attention scores every input position,

    e_ij = v^T tanh(W_h h_j + W_s s_i)                      (pointer scores, (B, T))
    p(y_i = j | y_<i, x) = softmax_j(e_ij, over positions j that may still be chosen)

and that distribution *is* the output: no context vector, no vocabulary. Positions already chosen
are masked (mask True = may be chosen, False = already taken), so the output is a permutation.

    model = PointerNetwork(d_model=128)
    log_probs, pointers = model(x, targets=y)   # teacher forcing: (B, T, T), (B, T)
    pointers = model.greedy(x)                  # greedy decoding: (B, T)

It has its own small additive scorer (the lesson's exercise) and reuses lesson 03's `masked_softmax`.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

from .masks import masked_log_softmax, masked_softmax  # True = may be chosen, fully masked rows -> 0


def pointer_scores(h, s, W_h, W_s, v):
    """Additive pointer scores e_j = v^T tanh(W_h h_j + W_s s), for every position j.

    h: (B, T, d_h) encoder states; s: (B, d_s) decoder state;
    W_h: (d_h, d_attn); W_s: (d_s, d_attn); v: (d_attn,). Returns (B, T) scores (before softmax).
    """
    if h.dim() != 3 or s.dim() != 2 or h.shape[0] != s.shape[0]:
        raise ValueError(f"expected h of shape (B, T, d_h) and s of shape (B, d_s); got "
                         f"{tuple(h.shape)} and {tuple(s.shape)}")
    hidden = torch.tanh(h @ W_h + (s @ W_s).unsqueeze(1))     # (B, T, d_attn)
    return hidden @ v                                         # (B, T)


class PointerAttention(nn.Module):
    "Additive attention whose weights over the input positions are the output distribution."

    def __init__(self, d_h, d_s, d_attn):
        super().__init__()
        self.W_h = nn.Linear(d_h, d_attn, bias=False)
        self.W_s = nn.Linear(d_s, d_attn, bias=False)
        self.v = nn.Parameter(torch.randn(d_attn) / d_attn ** 0.5)
        self.attn_weights = None

    def scores(self, h, s):
        """Pointer scores e: (B, T), from h (B, T, d_h) and s (B, d_s)."""
        return pointer_scores(h, s, self.W_h.weight.T, self.W_s.weight.T, self.v)

    def forward(self, h, s, mask=None):
        """Pointer distribution over positions (B, T); masked positions get 0."""
        weights = masked_softmax(self.scores(h, s), mask)
        self.attn_weights = weights.detach()
        return weights


def decode_step(model, h, state, inp, mask):
    """One greedy decoding step of a PointerNetwork.

    h: (B, T, d_model) encoder states; state: (s, c) decoder LSTM state, each (B, d_model);
    inp: (B, d_model) decoder input; mask: (B, T) bool, True = may still be chosen.
    Returns weights (B, T), the chosen positions j (B,), the new mask (j now False), new state.
    """
    s, c = model.decoder(inp, state)                 # update the decoder state first ...
    weights = model.pointer(h, s, mask)              # ... then point with the new state s_i
    j = weights.argmax(dim=-1)                       # (B,)
    new_mask = mask & ~F.one_hot(j, mask.shape[-1]).bool()   # j may not be chosen again
    return weights, j, new_mask, (s, c)


class PointerNetwork(nn.Module):
    """Encoder, LSTM decoder and a pointer (additive attention) over the encoder states.

    encoder="lstm": a bidirectional LSTM (every h_j sees the whole sequence);
    encoder="set":  self-attention layers without positions (h_j depends on the set of numbers,
                    not on their order), an option to compare.
    The decoder's input at step i is the embedding of the number chosen at step i-1 (a learned
    start vector at step 1); its initial state is the mean of the encoder states.
    """

    def __init__(self, d_model=128, d_attn=None, encoder="lstm", num_layers=1, num_heads=4, dropout=0.0):
        super().__init__()
        if encoder not in ("lstm", "set"):
            raise ValueError(f"encoder must be 'lstm' or 'set', got {encoder!r}")
        if d_model % 2:
            raise ValueError(f"d_model must be even (two LSTM directions), got {d_model}")
        self.d_model, self.encoder_kind = d_model, encoder
        self.embed = nn.Sequential(nn.Linear(1, d_model), nn.ReLU(), nn.Linear(d_model, d_model))
        if encoder == "lstm":
            self.encoder = nn.LSTM(d_model, d_model // 2, num_layers, batch_first=True,
                                   bidirectional=True, dropout=dropout if num_layers > 1 else 0.0)
        else:
            layer = nn.TransformerEncoderLayer(d_model, num_heads, 2 * d_model, dropout, batch_first=True)
            self.encoder = nn.TransformerEncoder(layer, num_layers, enable_nested_tensor=False)
        self.decoder = nn.LSTMCell(d_model, d_model)
        self.start = nn.Parameter(torch.zeros(d_model))
        self.pointer = PointerAttention(d_model, d_model, d_attn or d_model)

    def embed_values(self, values):
        """Embed numbers: (...) -> (..., d_model)."""
        return self.embed(values.unsqueeze(-1))

    def encode(self, x):
        """x: (B, T) numbers -> encoder states h (B, T, d_model) and the decoder's initial state."""
        if x.dim() != 2:
            raise ValueError(f"x must have shape (B, T), got {tuple(x.shape)}")
        return self._encode_embedded(self.embed_values(x))

    def _encode_embedded(self, emb):
        h = self.encoder(emb)[0] if self.encoder_kind == "lstm" else self.encoder(emb)   # (B, T, d_model)
        s0 = h.mean(dim=1)                                      # (B, d_model)
        return h, (s0, torch.zeros_like(s0))

    def start_input(self, batch_size):
        return self.start.expand(batch_size, -1)                # (B, d_model)

    def next_input(self, x, j):
        """Decoder input after pointing at j: the embedding of the number x[b, j_b]. (B, d_model)"""
        return self.embed_values(x.gather(1, j.unsqueeze(1)).squeeze(1))

    def forward(self, x, targets=None):
        """Log-probabilities (B, T, T) of every step's pointer, and the pointers (B, T).

        With targets (B, T) the decoder is teacher-forced (it is fed the true previous number and
        the true positions are masked); without, it decodes greedily.
        """
        if x.dim() != 2:
            raise ValueError(f"x must have shape (B, T), got {tuple(x.shape)}")
        B, T = x.shape
        if targets is not None and targets.shape != x.shape:
            raise ValueError(f"targets must have the shape of x {tuple(x.shape)}, got {tuple(targets.shape)}")
        emb = self.embed_values(x)                              # (B, T, d_model), embedded once
        h, state = self._encode_embedded(emb)
        Wh_h = self.pointer.W_h(h)                              # (B, T, d_attn), computed once
        batch = torch.arange(B, device=x.device)
        inp, mask = self.start_input(B), torch.ones(B, T, dtype=torch.bool, device=x.device)
        log_probs, pointers = [], []
        for i in range(T):
            s, c = self.decoder(inp, state)
            state = (s, c)
            e = torch.tanh(Wh_h + self.pointer.W_s(s).unsqueeze(1)) @ self.pointer.v   # (B, T)
            logp = masked_log_softmax(e, mask)                  # (B, T)
            j = targets[:, i] if targets is not None else logp.argmax(dim=-1)
            mask = mask & ~F.one_hot(j, T).bool()
            inp = emb[batch, j]                                 # = self.next_input(x, j)
            log_probs.append(logp)
            pointers.append(j)
        return torch.stack(log_probs, dim=1), torch.stack(pointers, dim=1)

    def loss(self, x, targets):
        """Mean cross-entropy of the true pointers under teacher forcing."""
        log_probs, _ = self(x, targets)
        return F.nll_loss(log_probs.flatten(0, 1), targets.flatten())

    @torch.no_grad()
    def greedy(self, x, return_weights=False):
        """Greedy decoding with `decode_step`: pointers (B, T) [and the weights (B, T, T)]."""
        B, T = x.shape
        h, state = self.encode(x)
        inp, mask = self.start_input(B), torch.ones(B, T, dtype=torch.bool, device=x.device)
        pointers, weights = [], []
        for _ in range(T):
            w, j, mask, state = decode_step(self, h, state, inp, mask)
            inp = self.next_input(x, j)
            pointers.append(j)
            weights.append(w)
        pointers = torch.stack(pointers, dim=1)
        return (pointers, torch.stack(weights, dim=1)) if return_weights else pointers


def accuracy(pointers, targets):
    """(per-position accuracy, whole-sequence accuracy) of predicted pointers (B, T)."""
    if pointers.shape != targets.shape:
        raise ValueError(f"pointers {tuple(pointers.shape)} and targets {tuple(targets.shape)} differ in shape")
    correct = pointers == targets
    return correct.float().mean().item(), correct.all(dim=1).float().mean().item()


@torch.no_grad()
def evaluate(model, x, y, batch_size=1000):
    """Greedy-decoding accuracies (per position, whole sequence) of `model` on (x, y)."""
    was_training = model.training
    model.eval()
    pointers = torch.cat([model.greedy(x[i:i + batch_size]) for i in range(0, len(x), batch_size)])
    model.train(was_training)
    return accuracy(pointers, y)
