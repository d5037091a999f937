"""Lesson 02 checks: the reference passes, planted mistakes are named, a stub is 'not implemented'."""

import pytest
import torch
import torch.nn.functional as F

from course_utils import recurrent as ref
from course_utils.checks import lesson02
from tests.checking import named, not_implemented, prints_not_implemented

pytestmark = pytest.mark.usefixtures("any_seed_offset")   # every test under every seed offset


def encoder_forward(encoder, src, lengths):
    return encoder(src, lengths)


def decoder_step(decoder, y_prev, s_prev):
    return decoder.step(y_prev, s_prev)


@pytest.mark.parametrize("check, reference", [
    (lesson02.encoder_forward, encoder_forward),
    (lesson02.decoder_step, decoder_step),
    (lesson02.sequence_loss, ref.sequence_loss),
])
def test_reference_passes_and_stub_is_not_implemented(check, reference, capsys):
    assert check(reference) is None and check.evaluate(check.reference).passed
    assert "✔" in capsys.readouterr().out
    with prints_not_implemented():
        check(not_implemented)


def test_encoder_gather_solution_passes():
    """Running the GRU over the padding and picking the state at lengths - 1 is also right."""
    def gather(encoder, src, lengths):
        h, _ = encoder.gru(encoder.embedding(src))
        return h, h[torch.arange(len(lengths)), lengths - 1]

    assert lesson02.encoder_forward.evaluate(gather).passed


def test_encoder_mistakes():
    def last_column(encoder, src, lengths):
        h, h_n = encoder.gru(encoder.embedding(src))
        return h, h_n[0]

    def at_lengths(encoder, src, lengths):
        h, _ = encoder.gru(encoder.embedding(src))
        return h, h[torch.arange(len(lengths)), lengths.clamp(max=src.shape[1] - 1)]

    def first_state(encoder, src, lengths):
        h, s = encoder(src, lengths)
        return h, h[:, 0]

    def raw_h_n(encoder, src, lengths):
        h, s = encoder(src, lengths)
        return h, s[None]

    named(lesson02.encoder_forward, last_column, "last column")
    named(lesson02.encoder_forward, at_lengths, "one step past the last real token")
    named(lesson02.encoder_forward, first_state, "FIRST token")
    named(lesson02.encoder_forward, raw_h_n, "extra leading axis")
    named(lesson02.encoder_forward, lambda enc, src, lengths: enc(src, lengths)[1], "return 2 things")
    named(lesson02.encoder_forward, lambda enc, src, lengths: enc(src, lengths)[::-1],
          r"wrong order: you return \(s, h\)")


def test_decoder_step_mistakes():
    def old_state_logits(decoder, y_prev, s_prev):
        _, s = decoder.step(y_prev, s_prev)
        return decoder.out(s_prev), s

    def probabilities(decoder, y_prev, s_prev):
        logits, s = decoder.step(y_prev, s_prev)
        return torch.softmax(logits, -1), s

    def no_update(decoder, y_prev, s_prev):
        logits, _ = decoder.step(y_prev, s_prev)
        return logits, s_prev

    def from_zeros(decoder, y_prev, s_prev):
        _, s = decoder.gru(decoder.embedding(y_prev)[:, None, :])
        return decoder.out(s[0]), s[0]

    def unsqueezed(decoder, y_prev, s_prev):
        out, s = decoder.gru(decoder.embedding(y_prev)[:, None, :], s_prev[None])
        return decoder.out(out), s[0]                      # out is (B, 1, d_hidden)

    def three_d_state(decoder, y_prev, s_prev):
        logits, s = decoder.step(y_prev, s_prev)
        return logits, s[None]

    named(lesson02.decoder_step, old_state_logits, "previous state s_prev")
    named(lesson02.decoder_step, probabilities, "probabilities")
    named(lesson02.decoder_step, no_update, "s is the previous state")
    named(lesson02.decoder_step, from_zeros, "started from zeros")
    named(lesson02.decoder_step, unsqueezed, "extra axis of length 1")
    named(lesson02.decoder_step, three_d_state, r"extra leading axis .*s\[0\]")
    named(lesson02.decoder_step, lambda *a: decoder_step(*a)[::-1], r"wrong order: you return \(s, logits\)")


def test_sequence_loss_mistakes():
    def flat(logits, tgt):
        return logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1)

    def with_padding(logits, tgt, pad_id):
        return F.cross_entropy(*flat(logits, tgt))

    def summed(logits, tgt, pad_id):
        return F.cross_entropy(*flat(logits, tgt), ignore_index=pad_id, reduction="sum")

    def per_sequence(logits, tgt, pad_id):
        loss = F.cross_entropy(logits.transpose(1, 2), tgt, ignore_index=pad_id, reduction="none")
        real = (tgt != pad_id).float()
        return ((loss * real).sum(1) / real.sum(1)).mean()

    def masked_mean(logits, tgt, pad_id):
        loss = F.cross_entropy(logits.transpose(1, 2), tgt, reduction="none")
        return (loss * (tgt != pad_id)).mean()

    def softmax_first(logits, tgt, pad_id):
        return F.cross_entropy(*flat(torch.softmax(logits, -1), tgt), ignore_index=pad_id)

    named(lesson02.sequence_loss, with_padding, "padding positions count")
    named(lesson02.sequence_loss, summed, "is a sum")
    named(lesson02.sequence_loss, per_sequence, "averages each sequence first")
    named(lesson02.sequence_loss, masked_mean, "divided by every position, padding included")
    named(lesson02.sequence_loss, softmax_first, "softmax before F.cross_entropy")
    named(lesson02.sequence_loss, lambda logits, tgt, pad_id: F.cross_entropy(
        logits.transpose(1, 2), tgt, ignore_index=pad_id, reduction="none"), "one number")


def test_encoder_crashes_and_axes_are_named():
    from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

    def packed(sorted_lengths=False, batch_first=True):
        def encoder_forward(encoder, src, lengths):
            x = pack_padded_sequence(encoder.embedding(src), lengths, batch_first=batch_first,
                                     enforce_sorted=sorted_lengths)
            out, h_n = encoder.gru(x)
            return pad_packed_sequence(out, batch_first=batch_first, total_length=src.shape[1])[0], h_n[0]
        return encoder_forward

    def time_major(encoder, src, lengths):
        h = encoder.gru(encoder.embedding(src).transpose(0, 1))[0].transpose(0, 1)
        return h, h[torch.arange(len(lengths)), lengths - 1]

    named(lesson02.encoder_forward, packed(sorted_lengths=True), r"enforce_sorted=False")
    named(lesson02.encoder_forward, packed(batch_first=False), r"time-major.*batch_first=True")
    named(lesson02.encoder_forward, time_major, r"ran along the batch axis.*do not transpose")


def test_decoder_step_crashes_and_cut_gradients_are_named():
    def flat_state(decoder, y_prev, s_prev):
        _, s = decoder.gru(decoder.embedding(y_prev)[:, None, :], s_prev)
        return decoder.out(s[0]), s[0]

    def no_sequence_axis(decoder, y_prev, s_prev):
        _, s = decoder.gru(decoder.embedding(y_prev), s_prev[None])
        return decoder.out(s[0]), s[0]

    def detached(decoder, y_prev, s_prev):
        logits, s = decoder.step(y_prev, s_prev)
        return logits, s.detach()

    def under_no_grad(decoder, y_prev, s_prev):
        with torch.no_grad():
            return decoder.step(y_prev, s_prev)

    def logits_of_detached(decoder, y_prev, s_prev):
        logits, s = decoder.step(y_prev, s_prev)
        return decoder.out(s.detach()), s

    named(lesson02.decoder_step, flat_state, r"\(1, B, d_hidden\).*s_prev\[None\]")
    named(lesson02.decoder_step, no_sequence_axis, r"sequences of length 1")
    named(lesson02.decoder_step, detached, r"new state s carries no gradient")
    named(lesson02.decoder_step, under_no_grad, r"new state s carries no gradient")
    named(lesson02.decoder_step, logits_of_detached, r"no gradient flows from the logits back to s_prev")


def test_sequence_loss_axes_masks_shifts_and_pad_id():
    def flat(logits, tgt):
        return logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1)

    def reshaped(logits, tgt, pad_id):
        B, T, V = logits.shape
        return F.cross_entropy(logits.view(B, V, T), tgt, ignore_index=pad_id)

    def targets_transposed(logits, tgt, pad_id):
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt.T.reshape(-1), ignore_index=pad_id)

    def inverted(logits, tgt, pad_id):
        nll = F.cross_entropy(logits.transpose(1, 2), tgt, reduction="none")
        return nll[tgt == pad_id].mean()

    def zero_is_pad(logits, tgt, pad_id):
        return F.cross_entropy(*flat(logits, tgt), ignore_index=0)

    def shifted(logits, tgt, pad_id):
        return F.cross_entropy(*flat(logits[:, :-1], tgt[:, 1:]), ignore_index=pad_id)

    def shifted_back(logits, tgt, pad_id):
        return F.cross_entropy(*flat(logits[:, 1:], tgt[:, :-1]), ignore_index=pad_id)

    def log_softmax_over(axis):
        def loss(logits, tgt, pad_id):
            logp = F.log_softmax(logits, dim=axis)
            keep = tgt != pad_id
            return -logp.gather(-1, tgt[..., None])[..., 0][keep].mean()
        return loss

    def nll_of_probabilities(logits, tgt, pad_id):
        return F.nll_loss(*flat(torch.softmax(logits, -1), tgt), ignore_index=pad_id)

    def classes_last(logits, tgt, pad_id):
        return F.cross_entropy(logits, tgt, ignore_index=pad_id)

    def only_logits_flat(logits, tgt, pad_id):
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt, ignore_index=pad_id)

    def as_number(logits, tgt, pad_id):
        return torch.tensor(ref.sequence_loss(logits, tgt, pad_id).item())

    named(lesson02.sequence_loss, reshaped, r"reshaped to \(B, V, T\).*transpose\(1, 2\)")
    named(lesson02.sequence_loss, targets_transposed, r"targets are flattened in another order")
    named(lesson02.sequence_loss, inverted, r"mask is inverted.*PADDING")
    named(lesson02.sequence_loss, zero_is_pad, r"ignores the targets equal to 0.*argument pad_id")
    named(lesson02.sequence_loss, shifted, r"shifted by one more step.*without slicing")
    named(lesson02.sequence_loss, shifted_back, r"shifted against each other.*without slicing")
    named(lesson02.sequence_loss, log_softmax_over(1), r"log-softmax is over axis 1, the time axis")
    named(lesson02.sequence_loss, log_softmax_over(0), r"log-softmax is over axis 0, the batch axis")
    named(lesson02.sequence_loss, nll_of_probabilities, r"nll_loss got probabilities.*LOG-probabilities")
    named(lesson02.sequence_loss, classes_last, r"classes on axis 1.*transpose\(1, 2\)")
    named(lesson02.sequence_loss, only_logits_flat, r"flatten BOTH")
    named(lesson02.sequence_loss, as_number, r"gradients flow through.*\.item\(\)")


def test_sequence_loss_right_answers_with_another_pad_id_pass():
    def manual(logits, tgt, pad_id):
        keep = tgt != pad_id
        return F.cross_entropy(logits[keep], tgt[keep])

    def transposed(logits, tgt, pad_id=0):
        return F.cross_entropy(logits.transpose(1, 2), tgt, ignore_index=pad_id)

    for answer in (manual, transposed):
        outcome = lesson02.sequence_loss.evaluate(answer)
        assert outcome.passed, outcome.message


# --- fresh slips (lesson02i): a pooled context, an extra function in the step, an unstable or capped loss ------
def test_a_context_pooled_over_the_positions_is_named():
    def mean_all(encoder, src, lengths):
        h, _ = encoder.gru(encoder.embedding(src))
        return h, h.mean(dim=1)

    def mean_real(encoder, src, lengths):
        h, _ = encoder(src, lengths)                      # zeros at the padding
        return h, h.sum(1) / lengths[:, None]

    def max_pool(encoder, src, lengths):
        h, _ = encoder.gru(encoder.embedding(src))
        return h, h.max(dim=1).values

    def packed_last_column(encoder, src, lengths):
        h, _ = encoder(src, lengths)
        return h, h[:, -1]

    named(lesson02.encoder_forward, mean_all, r"mean of the states over every position.*ONE state")
    named(lesson02.encoder_forward, mean_real, r"mean of the states over each sequence's real tokens")
    named(lesson02.encoder_forward, max_pool, r"max pooling.*ONE state")
    named(lesson02.encoder_forward, packed_last_column, r"last column of the unpacked states.*zero vector")


def test_a_function_between_the_embedding_and_the_gru_or_the_state_and_out_is_named():
    def on_embedding(f):
        def step(decoder, y_prev, s_prev):
            _, s = decoder.gru(f(decoder.embedding(y_prev))[:, None, :], s_prev[None])
            return decoder.out(s[0]), s[0]
        return step

    named(lesson02.decoder_step, on_embedding(F.relu), r"not the embedding of y_prev as it is: you put a ReLU")
    named(lesson02.decoder_step, on_embedding(torch.tanh), r"you put a tanh on it.*E y_\{t-1\}")
    named(lesson02.decoder_step, on_embedding(lambda x: x * x.shape[-1] ** 0.5), r"a scale by sqrt\(d_emb\)")

    def tanh_state(decoder, y_prev, s_prev):
        _, s = decoder.step(y_prev, s_prev)
        return decoder.out(torch.tanh(s)), s

    named(lesson02.decoder_step, tanh_state, r"logits come from a tanh of the new state.*decoder.out\(s\)")


def test_an_unstable_or_capped_log_of_the_softmax_is_named():
    def log_of_softmax(logits, tgt_out, pad_id=0):
        log_p = torch.log(F.softmax(logits, dim=-1)).gather(-1, tgt_out[..., None])[..., 0]
        return -log_p[tgt_out != pad_id].mean()

    def plus_eps(logits, tgt_out, pad_id=0):
        log_p = torch.log(F.softmax(logits, dim=-1) + 1e-9).gather(-1, tgt_out[..., None])[..., 0]
        return -log_p[tgt_out != pad_id].mean()

    def clamped(logits, tgt_out, pad_id=0):
        p = F.softmax(logits, dim=-1).clamp(min=1e-12)
        return F.nll_loss(p.log().transpose(1, 2), tgt_out, ignore_index=pad_id)

    named(lesson02.sequence_loss, log_of_softmax, r"inf \(or NaN\) on confident logits.*F.log_softmax")
    named(lesson02.sequence_loss, plus_eps, r"capped.*-log\(eps\)")
    named(lesson02.sequence_loss, clamped, r"capped.*-log\(eps\)")


def test_a_loss_in_float64_passes():
    """In float64 a probability of exp(-200) is not 0: the log of the softmax stays finite and right there."""
    def float64(logits, tgt_out, pad_id=0):
        log_p = torch.log(F.softmax(logits.double(), dim=-1)).gather(-1, tgt_out[..., None])[..., 0]
        return -log_p[tgt_out != pad_id].mean().float()

    assert lesson02.sequence_loss.evaluate(float64).passed
