"""Lesson 02, exercise 1: the encoder's forward pass over a padded batch.

    encoder_forward(encoder, src (B, S), lengths (B,)) -> (h (B, S, d_hidden), s (B, d_hidden))

h holds the GRU's state at every real token (positions past each length are not checked); s, the context, is each
sequence's state after its last real token. The check runs three batches; the first has a column of padding after
its longest sequence (as a padded batch of a larger data set may), so that no row's last real token is in the last
column. It names the crashes of packing (lengths not sorted, a batch read as time-major), states from a GRU run
along the batch axis, and a context taken at the wrong position or pooled over the positions.
"""
import torch
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from ... import recurrent as ref
from ...data.sequences import PAD_ID
from ..core import Mistake, Mistakes, exercise, expect_returns, expect_shape, single_threaded
from ..evaluation import Evaluation, call_naming
from ..torch_errors import ENFORCE_SORTED, NARROW
from .batches import VOCAB, tokens


def _unpacked(encoder, src):
    """The GRU's states run over the padding too, and its last state: (B, S, d_hidden), (1, B, d_hidden)."""
    return encoder.gru(encoder.embedding(src))


def with_s(context):
    """A wrong answer whose h is right and whose s is context(h over the padding too, h zero at the padding, src,
    lengths)."""
    def encoder_forward(encoder, src, lengths):
        h, _ = encoder(src, lengths)
        return h, context(_unpacked(encoder, src)[0], h, src, lengths)
    return encoder_forward


def _packed(enforce_sorted=False, batch_first=True, total_length=True):
    def encoder_forward(encoder, src, lengths):
        x = pack_padded_sequence(encoder.embedding(src), lengths, batch_first=batch_first,
                                 enforce_sorted=enforce_sorted)
        out, h_n = encoder.gru(x)
        h, _ = pad_packed_sequence(out, batch_first=batch_first, total_length=src.shape[1] if total_length else None)
        return h, h_n[0]
    return encoder_forward


def _time_major(encoder, src, lengths):
    h = encoder.gru(encoder.embedding(src).transpose(0, 1))[0].transpose(0, 1)
    return h, h[torch.arange(len(lengths)), lengths - 1]


def _real(src):
    return (src != PAD_ID)[..., None].float()


_ONE_STATE = ("the context is ONE state, the one after each sequence's last real token; the states must not be "
              "pooled over the positions")
_ONE_STATE_HINT = "h[torch.arange(B), lengths - 1], or h_n[-1] of a packed GRU"
M = Mistakes(
    Mistake("enforce_sorted", "packing needs, by default, the lengths sorted from longest to shortest, and a batch "
            "comes in any order", hint="pack_padded_sequence(..., enforce_sorted=False), or no packing and each "
            "sequence's state at index lengths - 1", shows=_packed(enforce_sorted=True)),
    Mistake("packed_time_major", "the packed batch does not fit its lengths: the packing read the embeddings as "
            "time-major, (S, B, d_emb), but they come batch-first, (B, S, d_emb)",
            hint="batch_first=True, in pack_padded_sequence and in pad_packed_sequence",
            shows=_packed(batch_first=False)),
    Mistake("no_total_length", "h stops at the longest sequence: unpacking gives max(lengths) positions, and the "
            "batch has S, padding included", hint="pad_packed_sequence(..., total_length=src.size(1))",
            shows=_packed(total_length=False)),
    Mistake("time_major", "the GRU ran along the batch axis: it is batch-first and reads (B, S, d_emb) as the "
            "embedding gives it; its input must not be transposed to (S, B, d_emb)",
            hint="encoder.gru(encoder.embedding(src)), without a transpose", shows=_time_major),
    Mistake("last_column", "s is the GRU's state at the last column, which is padding for the shorter sequences: "
            "the context is each sequence's state at its last real token", hint="h[torch.arange(B), lengths - 1], "
            "or pack the batch with pack_padded_sequence", shows=with_s(lambda h, h0, src, n: h[:, -1])),
    Mistake("at_lengths", "s is the state at index lengths, one step past the last real token (after the first pad): "
            "the last real token of a sequence of n tokens is at index n - 1", hint="lengths - 1",
            shows=with_s(lambda h, h0, src, n: h[torch.arange(len(n)), n])),
    Mistake("first_state", "s is the state after the FIRST token: the context is the state after the last real token",
            hint="h[torch.arange(B), lengths - 1]", shows=with_s(lambda h, h0, src, n: h[:, 0])),
    Mistake("layers_axis", "s has an extra leading axis, the GRU's number of layers: s is (B, d_hidden)",
            hint="h_n[0]", shows=lambda encoder, src, lengths: tuple(x if i == 0 else x[None] for i, x in
                                                                       enumerate(encoder(src, lengths)))),
    Mistake("batch_index", "s picks every sequence's state at every sequence's last position, (B, B, d_hidden): "
            "sequence b needs its own index, lengths[b] - 1, in its own row", hint="h[torch.arange(B), lengths - 1]",
            shows=with_s(lambda h, h0, src, n: h[:, n - 1])),
    Mistake("mean_all", f"s is the mean of the states over every position, padding included: {_ONE_STATE}",
            hint=_ONE_STATE_HINT, shows=with_s(lambda h, h0, src, n: h.mean(1))),
    Mistake("mean_zeros", f"s is the mean of the states over the positions, the padding counted as zeros: "
            f"{_ONE_STATE}", hint=_ONE_STATE_HINT, shows=with_s(lambda h, h0, src, n: h0.mean(1))),
    Mistake("mean_real", f"s is the mean of the states over each sequence's real tokens: {_ONE_STATE}",
            hint=_ONE_STATE_HINT, shows=with_s(lambda h, h0, src, n: (h * _real(src)).sum(1) / n[:, None])),
    Mistake("sum_all", f"s is the sum of the states over the positions: {_ONE_STATE}", hint=_ONE_STATE_HINT,
            shows=with_s(lambda h, h0, src, n: h.sum(1))),
    Mistake("sum_real", f"s is the sum of the states over each sequence's real tokens: {_ONE_STATE}",
            hint=_ONE_STATE_HINT, shows=with_s(lambda h, h0, src, n: (h * _real(src)).sum(1))),
    Mistake("max_pool", f"s is the largest value of each feature over the positions (a max pooling): {_ONE_STATE}",
            hint=_ONE_STATE_HINT, shows=with_s(lambda h, h0, src, n: h.max(1).values)),
    Mistake("packed_last_column", "s is the last column of the unpacked states: unpacking fills the positions past "
            "each length with zeros, so for every sequence shorter than S it is a zero vector",
            hint="h[torch.arange(B), lengths - 1], or h_n[-1], the packed GRU's final state",
            shows=with_s(lambda h, h0, src, n: h0[:, -1])),
)
CRASHES = [(ENFORCE_SORTED, M.enforce_sorted),
           (NARROW.pattern + r"[\s\S]*(pack_padded_sequence|_VF\.gru)", M.packed_time_major)]
S_MISTAKES = [m for m in M if m.key not in ("enforce_sorted", "packed_time_major", "no_total_length", "time_major")]


def _reference(encoder, src, lengths):
    return encoder(src, lengths)


def _gather(encoder, src, lengths):
    """Running the GRU over the padding and picking the state at lengths - 1 is right too."""
    h, _ = _unpacked(encoder, src)
    return h, h[torch.arange(len(lengths)), lengths - 1]


@exercise("encoder forward pass", reference=_reference, mistakes=M, right=[_gather, _packed()])
@single_threaded
def encoder_forward(ev: Evaluation, answer):
    """answer(encoder, src (B, S), lengths (B,)) -> h (B, S, d_hidden), s (B, d_hidden)."""
    tests = 0
    for seed, (lengths, extra) in enumerate([([5, 3, 4, 1], 1), ([7, 7, 2], 0), ([6], 0)]):
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            encoder = ref.Encoder(VOCAB, 5, 8)
        src, lens = tokens(ev.rng(seed), lengths, extra)
        B, S = src.shape
        with torch.no_grad():
            h_ref, s_ref = encoder(src, lens)
            h, s = expect_returns(call_naming(ev, CRASHES, answer, encoder, src, lens.clone()), (h_ref, s_ref),
                                  ("h", "s"))
            if tuple(getattr(h, "shape", ())) != (B, S, 8):
                ev.expect_close(h, h_ref, "h", mistakes=M.variants([M.no_total_length], encoder, src, lens,
                                                                    pick=lambda r: r[0]))
            expect_shape(h, (B, S, 8), "h")
            keep = (src != PAD_ID)[..., None]
            ev.expect_close(h * keep, h_ref, f"h at the real tokens (lengths {lengths}); positions past each length "
                            "are not checked", mistakes={mistake: h_of * keep for mistake, h_of in M.variants(
                                [M.time_major], encoder, src, lens, pick=lambda r: r[0]).items()})
            ev.expect_close(s, s_ref, f"the final state s (lengths {lengths})",
                            mistakes=M.variants(S_MISTAKES, encoder, src, lens, pick=lambda r: r[1]))
        tests += 1
    return tests
