"""Typical learner mistakes (and a few differently written right answers) for lesson 02, the seq2seq
encoder-decoder and its bottleneck.

Exercises, as the checks call them:
    encoder_forward   encoder_forward(encoder, src, lengths) -> (h (B, S, d_hidden), s (B, d_hidden))
                      encoder.embedding, encoder.gru (nn.GRU, batch_first=True); s is the state after the
                      last real token, position lengths[b] - 1; h at padding positions is not checked.
    decoder_step      decoder_step(decoder, y_prev, s_prev) -> (logits (B, vocab), s (B, d_hidden))
                      decoder.embedding, decoder.gru (batch_first, state given as s_prev[None]), decoder.out;
                      logits without softmax.
    sequence_loss     sequence_loss(logits, tgt_out, pad_id=PAD_ID) -> scalar mean cross-entropy over the
                      targets that are not pad_id.

SLIPS: each answer has exactly one thing wrong, marked with a `# slip:` comment on that line.
CORRECT: right answers written differently from the reference solution.
"""
import torch
import torch.nn.functional as F
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from course_utils.data.sequences import PAD_ID

# ---------------------------------------------------------------------------------------------------
# Exercise 1: encoder_forward
# ---------------------------------------------------------------------------------------------------

def encoder_last_column(encoder, src, lengths):
    x = encoder.embedding(src)
    h, _ = encoder.gru(x)
    s = h[:, -1]  # slip: takes the last column, which has read <pad> for the shorter sequences
    return h, s


def encoder_final_hidden_unpacked(encoder, src, lengths):
    x = encoder.embedding(src)
    h, h_n = encoder.gru(x)
    s = h_n[0]  # slip: the GRU's final state h_n without packing has run over the padding too
    return h, s


def encoder_lengths_off_by_one(encoder, src, lengths):
    x = encoder.embedding(src)
    h, _ = encoder.gru(x)
    s = h[torch.arange(src.shape[0]), lengths]  # slip: position lengths instead of lengths - 1
    return h, s


def encoder_missing_arange(encoder, src, lengths):
    x = encoder.embedding(src)
    h, _ = encoder.gru(x)
    s = h[:, lengths - 1]  # slip: ':' instead of arange(B) on the batch axis gives (B, B, d_hidden)
    return h, s


def encoder_time_major(encoder, src, lengths):
    x = encoder.embedding(src).transpose(0, 1)  # slip: makes the input time-major although the GRU is batch_first
    h, _ = encoder.gru(x)
    h = h.transpose(0, 1)
    s = h[torch.arange(src.shape[0]), lengths - 1]
    return h, s


def encoder_pack_no_total_length(encoder, src, lengths):
    x = encoder.embedding(src)
    packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
    out, h_n = encoder.gru(packed)
    h, _ = pad_packed_sequence(out, batch_first=True)  # slip: no total_length, h is only max(lengths) long
    return h, h_n[0]


def encoder_pack_sorted(encoder, src, lengths):
    x = encoder.embedding(src)
    packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True)  # slip: enforce_sorted left True, fails on unsorted lengths
    out, h_n = encoder.gru(packed)
    h, _ = pad_packed_sequence(out, batch_first=True, total_length=src.shape[1])
    return h, h_n[0]


def encoder_swapped_return(encoder, src, lengths):
    x = encoder.embedding(src)
    h, _ = encoder.gru(x)
    s = h[torch.arange(src.shape[0]), lengths - 1]
    return s, h  # slip: returns (s, h) instead of (h, s)


def encoder_first_state(encoder, src, lengths):
    x = encoder.embedding(src)
    h, _ = encoder.gru(x)
    s = h[:, 0]  # slip: takes the state after the first token, not after the last real one
    return h, s


# right answers

def encoder_gather(encoder, src, lengths):
    h, _ = encoder.gru(encoder.embedding(src))
    idx = (lengths - 1).to(h.device).view(-1, 1, 1).expand(-1, 1, h.shape[-1])
    return h, h.gather(1, idx).squeeze(1)


def encoder_packed(encoder, src, lengths):
    x = encoder.embedding(src)
    packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
    out, h_n = encoder.gru(packed)
    h, _ = pad_packed_sequence(out, batch_first=True, total_length=src.shape[1])
    return h, h_n[-1]


def encoder_onehot_select(encoder, src, lengths):
    h, _ = encoder.gru(encoder.embedding(src))
    pos = torch.arange(src.shape[1], device=h.device)
    last = (pos[None, :] == (lengths.to(h.device) - 1)[:, None]).to(h.dtype)   # (B, S) one-hot
    return h, torch.einsum("bs,bsd->bd", last, h)


# ---------------------------------------------------------------------------------------------------
# Exercise 2: decoder_step
# ---------------------------------------------------------------------------------------------------

def decoder_keeps_layer_axis(decoder, y_prev, s_prev):
    x = decoder.embedding(y_prev)[:, None, :]
    _, s = decoder.gru(x, s_prev[None])  # slip: keeps the layer axis, state (1, B, d) and logits (1, B, vocab)
    return decoder.out(s), s


def decoder_squeeze_all(decoder, y_prev, s_prev):
    x = decoder.embedding(y_prev)[:, None, :]
    _, s = decoder.gru(x, s_prev[None])
    s = s.squeeze()  # slip: squeeze() without an axis also drops the batch axis when B == 1
    return decoder.out(s), s


def decoder_no_initial_state(decoder, y_prev, s_prev):
    x = decoder.embedding(y_prev)[:, None, :]
    _, s = decoder.gru(x)  # slip: does not pass s_prev, so the GRU starts from zeros and ignores the context
    s = s[0]
    return decoder.out(s), s


def decoder_softmax(decoder, y_prev, s_prev):
    x = decoder.embedding(y_prev)[:, None, :]
    _, s = decoder.gru(x, s_prev[None])
    s = s[0]
    return decoder.out(s).softmax(dim=-1), s  # slip: returns probabilities instead of logits


def decoder_log_softmax(decoder, y_prev, s_prev):
    x = decoder.embedding(y_prev)[:, None, :]
    _, s = decoder.gru(x, s_prev[None])
    s = s[0]
    return F.log_softmax(decoder.out(s), dim=-1), s  # slip: returns log-probabilities instead of logits


def decoder_returns_old_state(decoder, y_prev, s_prev):
    x = decoder.embedding(y_prev)[:, None, :]
    _, s = decoder.gru(x, s_prev[None])
    s = s[0]
    return decoder.out(s), s_prev  # slip: returns the previous state instead of the new one


def decoder_logits_from_old_state(decoder, y_prev, s_prev):
    x = decoder.embedding(y_prev)[:, None, :]
    _, s = decoder.gru(x, s_prev[None])
    s = s[0]
    return decoder.out(s_prev), s  # slip: computes the logits from s_{t-1} instead of s_t


def decoder_swapped_return(decoder, y_prev, s_prev):
    x = decoder.embedding(y_prev)[:, None, :]
    _, s = decoder.gru(x, s_prev[None])
    s = s[0]
    return s, decoder.out(s)  # slip: returns (s, logits) instead of (logits, s)


def decoder_detached_state(decoder, y_prev, s_prev):
    x = decoder.embedding(y_prev)[:, None, :]
    _, s = decoder.gru(x, s_prev[None])
    s = s[0].detach()  # slip: detaches the new state, so no gradient flows back through time to the encoder
    return decoder.out(s), s


# right answers

def decoder_from_output(decoder, y_prev, s_prev):
    out, _ = decoder.gru(decoder.embedding(y_prev).unsqueeze(1), s_prev.unsqueeze(0).contiguous())
    s = out[:, -1]                                   # (B, d): one step, so the output is the new state
    return decoder.out(s), s


def decoder_functional_linear(decoder, y_prev, s_prev):
    x = decoder.embedding(y_prev.view(-1, 1))        # (B, 1, d_emb)
    _, h_n = decoder.gru(x, s_prev.reshape(1, *s_prev.shape))
    s = h_n.squeeze(0)
    return F.linear(s, decoder.out.weight, decoder.out.bias), s


# ---------------------------------------------------------------------------------------------------
# Exercise 3: sequence_loss
# ---------------------------------------------------------------------------------------------------

def loss_no_ignore_index(logits, tgt_out, pad_id=PAD_ID):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1))  # slip: no ignore_index, the padding counts


def loss_view_instead_of_transpose(logits, tgt_out, pad_id=PAD_ID):
    B, T, V = logits.shape
    return F.cross_entropy(logits.reshape(B, V, T), tgt_out, ignore_index=pad_id)  # slip: reshape instead of transpose to put the classes on axis 1


def loss_sum(logits, tgt_out, pad_id=PAD_ID):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1), ignore_index=pad_id,
                           reduction="sum")  # slip: sums instead of averaging over the real tokens


def loss_mean_of_sequence_means(logits, tgt_out, pad_id=PAD_ID):
    nll = F.cross_entropy(logits.transpose(1, 2), tgt_out, reduction="none")   # (B, T)
    mask = (tgt_out != pad_id).float()
    return ((nll * mask).sum(1) / mask.sum(1)).mean()  # slip: averages per sequence, then over the batch (short sequences weigh more)


def loss_divide_by_all(logits, tgt_out, pad_id=PAD_ID):
    nll = F.cross_entropy(logits.transpose(1, 2), tgt_out, reduction="none")
    mask = (tgt_out != pad_id).float()
    return (nll * mask).sum() / mask.numel()  # slip: divides by all B*T positions instead of the real tokens


def loss_mask_inverted(logits, tgt_out, pad_id=PAD_ID):
    nll = F.cross_entropy(logits.transpose(1, 2), tgt_out, reduction="none")
    mask = (tgt_out == pad_id).float()  # slip: mask inverted, keeps the padding and drops the real tokens
    return (nll * mask).sum() / mask.sum()


def loss_hardcoded_pad(logits, tgt_out, pad_id=PAD_ID):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1),
                           ignore_index=0)  # slip: ignores id 0 instead of the pad_id argument


def loss_extra_shift(logits, tgt_out, pad_id=PAD_ID):
    logits, tgt_out = logits[:, :-1], tgt_out[:, 1:]  # slip: shifts again, but tgt_out is already aligned with the logits
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1), ignore_index=pad_id)


def loss_log_softmax_wrong_axis(logits, tgt_out, pad_id=PAD_ID):
    logp = F.log_softmax(logits, dim=1)  # slip: normalises over the time axis instead of the vocabulary
    mask = tgt_out != pad_id
    nll = -logp.gather(-1, tgt_out.masked_fill(~mask, 0).unsqueeze(-1)).squeeze(-1)
    return nll[mask].mean()


def loss_nll_of_probs(logits, tgt_out, pad_id=PAD_ID):
    probs = F.softmax(logits, dim=-1)  # slip: softmax instead of log_softmax before nll_loss
    return F.nll_loss(probs.reshape(-1, probs.shape[-1]), tgt_out.reshape(-1), ignore_index=pad_id)


# right answers

def loss_transpose(logits, tgt_out, pad_id=PAD_ID):
    return F.cross_entropy(logits.transpose(1, 2), tgt_out, ignore_index=pad_id)


def loss_manual(logits, tgt_out, pad_id=PAD_ID):
    mask = tgt_out != pad_id
    logp = logits.log_softmax(dim=-1)
    nll = -logp.gather(-1, tgt_out.masked_fill(~mask, 0).unsqueeze(-1)).squeeze(-1)   # (B, T)
    return (nll * mask).sum() / mask.sum()


def loss_select_rows(logits, tgt_out, pad_id=PAD_ID):
    keep = tgt_out != pad_id
    return F.cross_entropy(logits[keep], tgt_out[keep])


SLIPS = [
    ("encoder_forward", "takes the last column of the GRU output as the context, which has read padding", encoder_last_column),
    ("encoder_forward", "uses the GRU's final state h_n without packing, so it has run over the padding", encoder_final_hidden_unpacked),
    ("encoder_forward", "picks position lengths instead of lengths - 1 (off by one)", encoder_lengths_off_by_one),
    ("encoder_forward", "indexes h[:, lengths - 1] without arange on the batch axis, giving a (B, B, d) context", encoder_missing_arange),
    ("encoder_forward", "transposes the input to time-major although the GRU is batch_first", encoder_time_major),
    ("encoder_forward", "packs the batch but unpacks without total_length, so h is shorter than S", encoder_pack_no_total_length),
    ("encoder_forward", "packs with enforce_sorted left True, fails when lengths are not sorted", encoder_pack_sorted),
    ("encoder_forward", "returns (s, h) instead of (h, s)", encoder_swapped_return),
    ("encoder_forward", "takes the state after the first token instead of the last real one", encoder_first_state),

    ("decoder_step", "keeps the GRU's layer axis: state (1, B, d) and logits (1, B, vocab)", decoder_keeps_layer_axis),
    ("decoder_step", "squeeze() without an axis drops the batch axis when B == 1", decoder_squeeze_all),
    ("decoder_step", "does not pass s_prev to the GRU, so every step starts from zeros", decoder_no_initial_state),
    ("decoder_step", "applies softmax and returns probabilities instead of logits", decoder_softmax),
    ("decoder_step", "applies log_softmax and returns log-probabilities instead of logits", decoder_log_softmax),
    ("decoder_step", "returns the previous state instead of the new one", decoder_returns_old_state),
    ("decoder_step", "computes the logits from the previous state instead of the new one", decoder_logits_from_old_state),
    ("decoder_step", "returns (s, logits) instead of (logits, s)", decoder_swapped_return),
    ("decoder_step", "detaches the new state, cutting the gradient through time", decoder_detached_state),

    ("sequence_loss", "no ignore_index: padding positions count in the mean", loss_no_ignore_index),
    ("sequence_loss", "reshapes (B, T, V) to (B, V, T) instead of transposing", loss_view_instead_of_transpose),
    ("sequence_loss", "sums the token losses instead of averaging them", loss_sum),
    ("sequence_loss", "averages per sequence, then over the batch, so short sequences weigh more", loss_mean_of_sequence_means),
    ("sequence_loss", "masks the padding but divides by all B*T positions", loss_divide_by_all),
    ("sequence_loss", "mask inverted: averages over the padding positions", loss_mask_inverted),
    ("sequence_loss", "ignores id 0 instead of the pad_id argument", loss_hardcoded_pad),
    ("sequence_loss", "shifts logits and targets again although they are already aligned", loss_extra_shift),
    ("sequence_loss", "log_softmax over the time axis instead of the vocabulary", loss_log_softmax_wrong_axis),
    ("sequence_loss", "feeds softmax probabilities to nll_loss instead of log-probabilities", loss_nll_of_probs),
]

CORRECT = [
    ("encoder_forward", "gathers the state at lengths - 1 with torch.gather", encoder_gather),
    ("encoder_forward", "packs the batch (enforce_sorted=False, total_length) and takes h_n", encoder_packed),
    ("encoder_forward", "selects the last real state with a one-hot mask and einsum", encoder_onehot_select),

    ("decoder_step", "takes the new state from the GRU's output sequence (length 1)", decoder_from_output),
    ("decoder_step", "view/reshape for the axes, squeeze(0), and F.linear with the output layer's weights", decoder_functional_linear),

    ("sequence_loss", "cross_entropy with the classes moved to axis 1 by transpose", loss_transpose),
    ("sequence_loss", "log_softmax, gather and a mask, summed and divided by the number of real tokens", loss_manual),
    ("sequence_loss", "cross_entropy on the rows selected by the non-pad mask", loss_select_rows),
]
