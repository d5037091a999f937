"""Recurrent encoder-decoder models (lessons 02-04): seq2seq with and without attention.

    Encoder            GRU over the source; h (B, S, d_enc) and the final state (B, d_enc)
    bidirectional_states  h_i = [fwd h_i; bwd h_i] and the final states [fwd h_n; bwd h_1] (lesson 03)
    Decoder            GRU decoder started from the encoder's final state (the fixed-length context)
    Seq2Seq            Encoder + Decoder (Sutskever et al. 2014; Cho et al. 2014)
    AttentionDecoder   s_t = GRU(s_{t-1}, [y_{t-1}; c_t]), c_t from attention over h (Bahdanau et al. 2015)
    AttentionSeq2Seq   bidirectional Encoder + AttentionDecoder
    sequence_loss      cross-entropy over the real target tokens (padding masked out)
    accuracy_by_length greedy decoding's token accuracy, per source length

Both models share one interface, so decoding and evaluation work for either:
    h, s, mask = model.encode(src, lengths)            # mask (B, S): True at real source tokens
    logits, s = model.step(y_prev, s, h, mask)         # one decoder step, y_prev (B,)
    logits = model(src, lengths, tgt_in)               # teacher forcing, (B, T, vocab)
and the course's decoding protocol (`course_utils.decoding`), so that the one greedy decoder and
the one beam search of the course decode them like the Transformer:
    state = model.start_decoding(src, pad_id)          # runs the encoder once -> DecodingState
    logits, state = model.decode_step(y_prev, state)   # (N, V); state.attn_weights (N, S) or None
    state = model.reorder_decoding_state(state, rows)  # keep / repeat rows (beams)
"""
from typing import NamedTuple, Optional

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from .data.batch import BOS_ID, EOS_ID, PAD_ID, collate
from .data.sequences import by_length
from .decoding import greedy_decode
from .scores import AdditiveAttention, Attention


def _check_tokens(src, lengths):
    if src.dim() != 2 or src.dtype != torch.long:
        raise TypeError(f"src must be a LongTensor of token ids of shape (B, S), got {src.dtype} "
                        f"of shape {tuple(src.shape)}")
    if lengths.shape != (src.shape[0],):
        raise ValueError(f"lengths must have shape ({src.shape[0]},), one per sequence, got {tuple(lengths.shape)}")
    if len(lengths) and (int(lengths.min()) < 1 or int(lengths.max()) > src.shape[1]):
        raise ValueError(f"lengths must lie in 1..{src.shape[1]} (the padded length), got "
                         f"{int(lengths.min())}..{int(lengths.max())}")


class Encoder(nn.Module):
    """Embedding + GRU; bidirectional=True concatenates the forward and backward states."""

    def __init__(self, vocab_size, d_emb, d_hidden, bidirectional=False, pad_id=PAD_ID):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, d_emb, padding_idx=pad_id)
        self.gru = nn.GRU(d_emb, d_hidden, batch_first=True, bidirectional=bidirectional)
        self.d_out = d_hidden * (2 if bidirectional else 1)

    def forward(self, src, lengths):
        """src (B, S), lengths (B,) -> h (B, S, d_out) (zeros at padding), final state (B, d_out)."""
        _check_tokens(src, lengths)
        x = self.embedding(src)                                            # (B, S, d_emb)
        packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
        out, h_n = self.gru(packed)                                        # h_n (dirs, B, d_hidden)
        h, _ = pad_packed_sequence(out, batch_first=True, total_length=src.shape[1])
        s = torch.cat(list(h_n), dim=-1)            # forward final state [; backward final state]
        return h, s


def bidirectional_states(h_fwd, h_bwd, lengths):
    """The two directions of a bidirectional encoder, put together (lesson 03).

    h_fwd, h_bwd (B, S, d): the forward GRU's state at each position (it has read tokens 1..i) and
    the backward GRU's (it has read tokens n..i), zeros at padding; lengths (B,) the real lengths n.
    -> h (B, S, 2d) with h_i = [fwd h_i; bwd h_i], and the final states (B, 2d) = [fwd h_n; bwd h_1]:
    each direction's state after reading the whole sequence (what nn.GRU's h_n holds).
    """
    h = torch.cat([h_fwd, h_bwd], dim=-1)                                   # (B, S, 2d)
    last = h_fwd[torch.arange(h_fwd.shape[0], device=h_fwd.device), lengths - 1]   # (B, d) at token n
    first = h_bwd[:, 0]                                                     # (B, d) at token 1
    return h, torch.cat([last, first], dim=-1)                              # (B, 2d)


class Decoder(nn.Module):
    """s_t = GRU(s_{t-1}, embed(y_{t-1})), logits_t = W_out s_t; s_0 = the encoder's final state."""

    def __init__(self, vocab_size, d_emb, d_hidden):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, d_emb)
        self.gru = nn.GRU(d_emb, d_hidden, batch_first=True)
        self.out = nn.Linear(d_hidden, vocab_size)

    def step(self, y_prev, s_prev):
        """One step: y_prev (B,) token ids, s_prev (B, d_hidden) -> logits (B, vocab), s (B, d_hidden)."""
        x = self.embedding(y_prev)[:, None, :]              # (B, 1, d_emb)
        _, s = self.gru(x, s_prev[None].contiguous())        # (1, B, d_hidden)
        s = s[0]
        return self.out(s), s

    def forward(self, tgt_in, s0):
        """All steps at once (teacher forcing): tgt_in (B, T), s0 (B, d_hidden) -> logits (B, T, vocab)."""
        states, _ = self.gru(self.embedding(tgt_in), s0[None].contiguous())  # (B, T, d_hidden)
        return self.out(states)


class DecodingState(NamedTuple):
    """What a recurrent model carries from one decoding step to the next (N rows: sentences or beams)."""
    h: torch.Tensor                              # (N, S, d_enc) encoder states, computed once
    s: torch.Tensor                              # (N, d_hidden) decoder state
    mask: torch.Tensor                           # (N, S) True at real source tokens
    attn_weights: Optional[torch.Tensor] = None  # (N, S) the last step's attention (attention models)


class RecurrentDecoding:
    """The decoding protocol of `course_utils.decoding` for a model with `encode` and `step`."""

    def start_decoding(self, src, pad_id=PAD_ID):
        """src (N, S) ids, padded with pad_id at the end -> the state before the first step."""
        mask = src != pad_id                                                    # (N, S)
        h, s, _ = self.encode(src, mask.sum(1))
        return DecodingState(h, s, mask)

    def decode_step(self, y_prev, state):
        """y_prev (N,) ids -> logits (N, V) of the next token, and the new state."""
        logits, s, alpha = self.step_with_weights(y_prev, state.s, state.h, state.mask)
        return logits, state._replace(s=s, attn_weights=alpha)

    def reorder_decoding_state(self, state, rows):
        """Keep / repeat the rows (N',) of every tensor of the state (beam search)."""
        return DecodingState(*(None if x is None else x[rows] for x in state))


class Seq2Seq(RecurrentDecoding, nn.Module):
    """Encoder-decoder whose only link is the encoder's final state: the fixed-length bottleneck."""

    def __init__(self, vocab_size, d_emb=32, d_hidden=128):
        super().__init__()
        self.encoder = Encoder(vocab_size, d_emb, d_hidden)
        self.decoder = Decoder(vocab_size, d_emb, d_hidden)

    def encode(self, src, lengths):
        h, s = self.encoder(src, lengths)
        return h, s, src != PAD_ID

    def step(self, y_prev, s_prev, h=None, mask=None):
        return self.decoder.step(y_prev, s_prev)      # h and mask are not used: no attention

    def step_with_weights(self, y_prev, s_prev, h=None, mask=None):
        logits, s = self.decoder.step(y_prev, s_prev)
        return logits, s, None                        # no attention, no weights

    def forward(self, src, lengths, tgt_in):
        _, s, _ = self.encode(src, lengths)
        return self.decoder(tgt_in, s)


class AttentionDecoder(nn.Module):
    """Bahdanau's decoder: c_t = attention(s_{t-1}, h), s_t = GRU(s_{t-1}, [y_{t-1}; c_t]),
    logits_t = W_out [s_t; c_t]. Keeps the weights of the last forward on `self.attn_weights`."""

    def __init__(self, vocab_size, d_emb, d_hidden, d_enc, attention):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, d_emb)
        self.attention = attention                      # (s (B, d_hidden), h, mask) -> c, alpha
        self.gru = nn.GRUCell(d_emb + d_enc, d_hidden)
        self.out = nn.Linear(d_hidden + d_enc, vocab_size)
        self.attn_weights = None

    def step(self, y_prev, s_prev, h, mask):
        """y_prev (B,), s_prev (B, d_hidden), h (B, S, d_enc), mask (B, S) -> logits, s, alpha (B, S)."""
        c, alpha = self.attention(s_prev, h, mask)                              # (B, d_enc), (B, S)
        s = self.gru(torch.cat([self.embedding(y_prev), c], dim=-1), s_prev)     # (B, d_hidden)
        return self.out(torch.cat([s, c], dim=-1)), s, alpha

    def forward(self, tgt_in, s0, h, mask):
        """Teacher forcing, one step at a time: tgt_in (B, T) -> logits (B, T, vocab)."""
        s, logits, weights = s0, [], []
        for t in range(tgt_in.shape[1]):
            logit, s, alpha = self.step(tgt_in[:, t], s, h, mask)
            logits.append(logit)
            weights.append(alpha)
        self.attn_weights = torch.stack(weights, dim=1).detach()                # (B, T, S)
        return torch.stack(logits, dim=1)


class AttentionSeq2Seq(RecurrentDecoding, nn.Module):
    """Bidirectional encoder + attention decoder. `score` is any module (s, h) -> e (default additive);
    `attention` replaces the whole attention module (e.g. LocalPAttention)."""

    def __init__(self, vocab_size, d_emb=32, d_hidden=128, d_attn=64, score=None, attention=None):
        super().__init__()
        self.encoder = Encoder(vocab_size, d_emb, d_hidden // 2, bidirectional=True)
        d_enc = self.encoder.d_out
        if attention is None:
            attention = AdditiveAttention(d_hidden, d_enc, d_attn) if score is None else Attention(score)
        self.bridge = nn.Linear(d_enc, d_hidden)        # s_0 = tanh(W [h_fwd_last; h_bwd_first])
        self.decoder = AttentionDecoder(vocab_size, d_emb, d_hidden, d_enc, attention)

    def encode(self, src, lengths):
        h, final = self.encoder(src, lengths)
        return h, torch.tanh(self.bridge(final)), src != PAD_ID

    def step(self, y_prev, s_prev, h, mask):
        logits, s, _ = self.decoder.step(y_prev, s_prev, h, mask)
        return logits, s

    def step_with_weights(self, y_prev, s_prev, h, mask):
        return self.decoder.step(y_prev, s_prev, h, mask)          # logits, s, alpha (B, S)

    def forward(self, src, lengths, tgt_in):
        h, s, mask = self.encode(src, lengths)
        return self.decoder(tgt_in, s, h, mask)


def sequence_loss(logits, tgt_out, pad_id=PAD_ID):
    """Mean cross-entropy over the real target tokens: logits (B, T, V), tgt_out (B, T); pads ignored."""
    if logits.shape[:-1] != tgt_out.shape:
        raise ValueError(f"logits {tuple(logits.shape)} and targets {tuple(tgt_out.shape)} do not match: "
                         "expected logits (B, T, V) and targets (B, T)")
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1), ignore_index=pad_id)


def seq2seq_loss(model, batch):
    """The teacher-forced loss of a batch, for `training.train(model, data, seq2seq_loss, ...)`."""
    return sequence_loss(model(batch.src, batch.lengths, batch.tgt_in), batch.tgt_out)


def token_accuracy(pred, tgt):
    """Fraction of target positions predicted right; pred and tgt are 1-D id sequences (EOS excluded)."""
    pred, tgt = np.asarray(pred), np.asarray(tgt)
    n = min(len(pred), len(tgt))
    return float((pred[:n] == tgt[:n]).sum()) / len(tgt)


@torch.no_grad()
def accuracy_by_length(model, pairs, batch_size=500, device="cpu"):
    """{source length: mean token accuracy of greedy decoding} over the (source, target) pairs."""
    result = {}
    for length, group in by_length(pairs).items():
        correct = 0.0
        for start in range(0, len(group), batch_size):
            chunk = group[start:start + batch_size]
            batch = collate(chunk).to(device)
            tokens = greedy_decode(model, batch.src, BOS_ID, EOS_ID, PAD_ID, max_len=length + 1).cpu().numpy()
            for row, (_, tgt) in zip(tokens, chunk):
                eos = np.flatnonzero(row == EOS_ID)
                row = row[:eos[0]] if len(eos) else row
                correct += token_accuracy(row, tgt)
        result[length] = correct / len(group)
    return result
