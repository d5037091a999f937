"""Typical learner answers for lesson 02 (02_seq2seq_bottleneck.ipynb), torch.

Exercises (the `exercise` keys) and their signatures, as in the solution notebook:
    encoder_forward(encoder, src, lengths) -> h (B, S, d_hidden), s (B, d_hidden)
        encoder.embedding, encoder.gru (nn.GRU(batch_first=True)); s is the state after each
        sequence's last real token (position lengths[b] - 1); h at padding positions is not checked.
    decoder_step(decoder, y_prev, s_prev) -> logits (B, vocab), s (B, d_hidden)
        decoder.embedding, decoder.gru (batch_first, fed a length-1 sequence and s_prev[None]),
        decoder.out; logits without softmax; the new state stays in the graph.
    sequence_loss(logits, tgt_out, pad_id=PAD_ID) -> scalar mean cross-entropy over the targets != pad_id
        (any pad_id, not only 0).

SLIPS: one typical mistake each (marked `# slip:`); CORRECT: right answers written differently from
the reference.
"""
import torch
import torch.nn.functional as F
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from course_utils.data.sequences import PAD_ID

# ============================================================================= encoder_forward: slips

def enc_last_column(encoder, src, lengths):
    x = encoder.embedding(src)
    h, _ = encoder.gru(x)
    s = h[:, -1]  # slip: state at the last column, which has read the padding of short sequences
    return h, s


def enc_final_hidden(encoder, src, lengths):
    x = encoder.embedding(src)
    h, h_n = encoder.gru(x)
    s = h_n[0]  # slip: the GRU's final state of an unpacked batch, which ran over the padding
    return h, s


def enc_index_broadcast(encoder, src, lengths):
    x = encoder.embedding(src)
    h, _ = encoder.gru(x)
    s = h[:, lengths - 1]  # slip: indexes every row with every length: (B, B, d) instead of (B, d)
    return h, s


def enc_off_by_one(encoder, src, lengths):
    x = encoder.embedding(src)
    h, _ = encoder.gru(x)
    s = h[torch.arange(src.shape[0]), lengths]  # slip: position lengths instead of lengths - 1
    return h, s


def enc_first_position(encoder, src, lengths):
    x = encoder.embedding(src)
    h, _ = encoder.gru(x)
    s = h[:, 0]  # slip: takes the state after the first token as the context
    return h, s


def enc_swapped_return(encoder, src, lengths):
    x = encoder.embedding(src)
    h, _ = encoder.gru(x)
    s = h[torch.arange(src.shape[0]), lengths - 1]
    return s, h  # slip: returns (s, h) instead of (h, s)


def enc_mean_pool(encoder, src, lengths):
    x = encoder.embedding(src)
    h, _ = encoder.gru(x)
    s = h.mean(dim=1)  # slip: averages the states over all positions (padding included) as the context
    return h, s


def enc_pack_sorted(encoder, src, lengths):
    x = encoder.embedding(src)
    packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True)  # slip: no enforce_sorted=False, fails on unsorted lengths
    out, h_n = encoder.gru(packed)
    h, _ = pad_packed_sequence(out, batch_first=True, total_length=src.shape[1])
    return h, h_n[0]


def enc_pack_no_total_length(encoder, src, lengths):
    x = encoder.embedding(src)
    packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
    out, h_n = encoder.gru(packed)
    h, _ = pad_packed_sequence(out, batch_first=True)  # slip: no total_length: h is only max(lengths) long, not S
    return h, h_n[0]


def enc_pack_last_column(encoder, src, lengths):
    x = encoder.embedding(src)
    packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
    out, _ = encoder.gru(packed)
    h, _ = pad_packed_sequence(out, batch_first=True, total_length=src.shape[1])
    return h, h[:, -1]  # slip: last column of the unpacked states: zeros for the shorter sequences


# ============================================================================= encoder_forward: correct

def enc_packed(encoder, src, lengths):
    x = encoder.embedding(src)
    packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
    out, h_n = encoder.gru(packed)
    h, _ = pad_packed_sequence(out, batch_first=True, total_length=src.shape[1])
    return h, h_n[-1]


def enc_gather(encoder, src, lengths):
    h, _ = encoder.gru(encoder.embedding(src))
    index = (lengths - 1).to(h.device).view(-1, 1, 1).expand(-1, 1, h.shape[-1])
    return h, h.gather(1, index).squeeze(1)


def enc_mask_select(encoder, src, lengths):
    h, _ = encoder.gru(encoder.embedding(src))
    positions = torch.arange(src.shape[1], device=h.device)
    last = (positions[None, :] == (lengths.to(h.device) - 1)[:, None]).to(h.dtype)   # (B, S) one-hot
    return h, torch.einsum("bs,bsd->bd", last, h)


# ============================================================================= decoder_step: slips

def dec_detach(decoder, y_prev, s_prev):
    x = decoder.embedding(y_prev)[:, None, :]
    _, s = decoder.gru(x, s_prev[None])
    s = s[0].detach()  # slip: detaches the new state, cutting the gradient to s_prev
    return decoder.out(s), s


def dec_softmax(decoder, y_prev, s_prev):
    x = decoder.embedding(y_prev)[:, None, :]
    _, s = decoder.gru(x, s_prev[None])
    s = s[0]
    return F.softmax(decoder.out(s), dim=-1), s  # slip: returns probabilities instead of logits


def dec_log_softmax(decoder, y_prev, s_prev):
    x = decoder.embedding(y_prev)[:, None, :]
    _, s = decoder.gru(x, s_prev[None])
    s = s[0]
    return F.log_softmax(decoder.out(s), dim=-1), s  # slip: returns log-probabilities instead of logits


def dec_no_initial_state(decoder, y_prev, s_prev):
    x = decoder.embedding(y_prev)[:, None, :]
    _, s = decoder.gru(x)  # slip: does not pass s_prev, the GRU starts from zeros
    s = s[0]
    return decoder.out(s), s


def dec_logits_from_old_state(decoder, y_prev, s_prev):
    x = decoder.embedding(y_prev)[:, None, :]
    _, s = decoder.gru(x, s_prev[None])
    s = s[0]
    return decoder.out(s_prev), s  # slip: logits from the previous state instead of the new one


def dec_state_keeps_layer_axis(decoder, y_prev, s_prev):
    x = decoder.embedding(y_prev)[:, None, :]
    _, s = decoder.gru(x, s_prev[None])
    return decoder.out(s[0]), s  # slip: returns the state as (1, B, d_hidden) instead of (B, d_hidden)


def dec_logits_keep_time_axis(decoder, y_prev, s_prev):
    x = decoder.embedding(y_prev)[:, None, :]
    out, s = decoder.gru(x, s_prev[None])
    return decoder.out(out), s[0]  # slip: logits of shape (B, 1, vocab) instead of (B, vocab)


def dec_swapped_return(decoder, y_prev, s_prev):
    x = decoder.embedding(y_prev)[:, None, :]
    _, s = decoder.gru(x, s_prev[None])
    s = s[0]
    return s, decoder.out(s)  # slip: returns (s, logits) instead of (logits, s)


def dec_relu_embedding(decoder, y_prev, s_prev):
    x = F.relu(decoder.embedding(y_prev))[:, None, :]  # slip: adds a ReLU on the embedding
    _, s = decoder.gru(x, s_prev[None])
    s = s[0]
    return decoder.out(s), s


# ============================================================================= decoder_step: correct

def dec_output_sequence(decoder, y_prev, s_prev):
    x = decoder.embedding(y_prev.unsqueeze(1))                    # (B, 1, d_emb)
    out, _ = decoder.gru(x, s_prev.unsqueeze(0).contiguous())     # out (B, 1, d_hidden)
    s = out[:, 0]                                                  # one layer, one step: out == h_n
    return decoder.out(s), s


def dec_squeeze(decoder, y_prev, s_prev):
    x = decoder.embedding(y_prev).unsqueeze(1)
    _, h_n = decoder.gru(x, s_prev.unsqueeze(0))
    s = h_n.squeeze(0)
    logits = F.linear(s, decoder.out.weight, decoder.out.bias)
    return logits, s


# ============================================================================= sequence_loss: slips

def loss_no_ignore(logits, tgt_out, pad_id=PAD_ID):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1))  # slip: no ignore_index, padding counts


def loss_ignore_zero(logits, tgt_out, pad_id=PAD_ID):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1),
                           ignore_index=0)  # slip: ignores id 0 instead of the pad_id argument


def loss_reshape_not_transpose(logits, tgt_out, pad_id=PAD_ID):
    B, T, V = logits.shape
    return F.cross_entropy(logits.reshape(B, V, T), tgt_out, ignore_index=pad_id)  # slip: reshape to (B, V, T) instead of transpose


def loss_sum(logits, tgt_out, pad_id=PAD_ID):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1),
                           ignore_index=pad_id, reduction="sum")  # slip: sum over the tokens instead of the mean


def loss_divide_all_tokens(logits, tgt_out, pad_id=PAD_ID):
    nll = F.cross_entropy(logits.transpose(1, 2), tgt_out, reduction="none")  # (B, T)
    mask = (tgt_out != pad_id).float()
    return (nll * mask).sum() / mask.numel()  # slip: divides by all B*T positions, padding included


def loss_mean_of_sequences(logits, tgt_out, pad_id=PAD_ID):
    nll = F.cross_entropy(logits.transpose(1, 2), tgt_out, reduction="none")  # (B, T)
    mask = (tgt_out != pad_id).float()
    return ((nll * mask).sum(1) / mask.sum(1)).mean()  # slip: mean of per-sequence means, not over all real tokens


def loss_mask_inverted(logits, tgt_out, pad_id=PAD_ID):
    nll = F.cross_entropy(logits.transpose(1, 2), tgt_out, reduction="none")
    mask = (tgt_out == pad_id).float()  # slip: mask keeps the padding and drops the real tokens
    return (nll * mask).sum() / mask.sum()


def loss_nll_on_logits(logits, tgt_out, pad_id=PAD_ID):
    return F.nll_loss(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1),
                      ignore_index=pad_id)  # slip: nll_loss on raw logits, no log_softmax


def loss_shifts_again(logits, tgt_out, pad_id=PAD_ID):
    logits, tgt_out = logits[:, :-1], tgt_out[:, 1:]  # slip: shifts the targets once more (already shifted)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1), ignore_index=pad_id)


def loss_log_of_softmax(logits, tgt_out, pad_id=PAD_ID):
    logp = torch.log(F.softmax(logits, dim=-1))  # slip: log of softmax, -inf for very confident logits
    nll = -logp.gather(-1, tgt_out.unsqueeze(-1)).squeeze(-1)
    mask = tgt_out != pad_id
    return nll[mask].mean()


# ============================================================================= sequence_loss: correct

def loss_transpose(logits, tgt_out, pad_id=PAD_ID):
    return F.cross_entropy(logits.transpose(1, 2), tgt_out, ignore_index=pad_id)


def loss_manual_mask(logits, tgt_out, pad_id=PAD_ID):
    logp = F.log_softmax(logits, dim=-1)
    nll = -logp.gather(-1, tgt_out.unsqueeze(-1)).squeeze(-1)     # (B, T)
    mask = (tgt_out != pad_id).to(nll.dtype)
    return (nll * mask).sum() / mask.sum()


def loss_select_then_mean(logits, tgt_out, pad_id=PAD_ID):
    keep = tgt_out != pad_id
    return F.cross_entropy(logits[keep], tgt_out[keep])


SLIPS = [
    ("encoder_forward", "takes the last column h[:, -1] as the context, which read the padding", enc_last_column),
    ("encoder_forward", "takes the GRU's final hidden state h_n of the padded (unpacked) batch", enc_final_hidden),
    ("encoder_forward", "indexes h[:, lengths - 1], giving a (B, B, d) block instead of one state per row",
     enc_index_broadcast),
    ("encoder_forward", "picks position lengths instead of lengths - 1", enc_off_by_one),
    ("encoder_forward", "takes the state after the first token as the context", enc_first_position),
    ("encoder_forward", "returns (s, h) instead of (h, s)", enc_swapped_return),
    ("encoder_forward", "averages all states, padding included, as the context", enc_mean_pool),
    ("encoder_forward", "packs the batch without enforce_sorted=False", enc_pack_sorted),
    ("encoder_forward", "unpacks without total_length, so h is shorter than S when no row is full",
     enc_pack_no_total_length),
    ("encoder_forward", "packs the batch but then takes the last column of the unpacked states",
     enc_pack_last_column),

    ("decoder_step", "detaches the new state", dec_detach),
    ("decoder_step", "returns softmax probabilities instead of logits", dec_softmax),
    ("decoder_step", "returns log-softmax instead of logits", dec_log_softmax),
    ("decoder_step", "does not pass the previous state to the GRU", dec_no_initial_state),
    ("decoder_step", "computes the logits from the previous state", dec_logits_from_old_state),
    ("decoder_step", "returns the new state with its leading layer axis, (1, B, d)", dec_state_keeps_layer_axis),
    ("decoder_step", "returns logits with the length-1 time axis, (B, 1, vocab)", dec_logits_keep_time_axis),
    ("decoder_step", "returns (s, logits) instead of (logits, s)", dec_swapped_return),
    ("decoder_step", "adds a ReLU on the embedding before the GRU", dec_relu_embedding),

    ("sequence_loss", "forgets ignore_index: padding is counted in the mean", loss_no_ignore),
    ("sequence_loss", "ignores id 0 instead of the pad_id argument", loss_ignore_zero),
    ("sequence_loss", "reshapes the logits to (B, V, T) instead of transposing them", loss_reshape_not_transpose),
    ("sequence_loss", "sums the token losses instead of averaging", loss_sum),
    ("sequence_loss", "masks the padding but divides by all B*T positions", loss_divide_all_tokens),
    ("sequence_loss", "averages per sequence, then over sequences, instead of over all real tokens",
     loss_mean_of_sequences),
    ("sequence_loss", "inverted mask: keeps the padding, drops the real tokens", loss_mask_inverted),
    ("sequence_loss", "uses nll_loss on the raw logits (no log_softmax)", loss_nll_on_logits),
    ("sequence_loss", "shifts logits and targets by one more position", loss_shifts_again),
    ("sequence_loss", "takes the log of the softmax (numerically unstable, inf for large logits)",
     loss_log_of_softmax),
]

CORRECT = [
    ("encoder_forward", "packs the batch; the GRU's final state is the context", enc_packed),
    ("encoder_forward", "gather along the time axis at lengths - 1", enc_gather),
    ("encoder_forward", "one-hot mask of the last position, summed with einsum", enc_mask_select),

    ("decoder_step", "uses the GRU's output sequence (one step, one layer) as the new state", dec_output_sequence),
    ("decoder_step", "unsqueeze/squeeze and F.linear with the out layer's parameters", dec_squeeze),

    ("sequence_loss", "classes on axis 1 by transposing the logits", loss_transpose),
    ("sequence_loss", "log_softmax, gather, masked mean", loss_manual_mask),
    ("sequence_loss", "boolean-select the real tokens, then plain cross-entropy", loss_select_then_mean),
]
