"""Lesson 03 checks: the reference passes, planted mistakes are named, a stub is 'not implemented'."""

import pytest
import torch

from course_utils import recurrent
from course_utils import scores as ref
from course_utils.checks import ExerciseError, lesson03
from tests.checking import named, not_implemented, prints_not_implemented

pytestmark = pytest.mark.usefixtures("any_seed_offset")   # every test under every seed offset


def attention_decoder_step(decoder, y_prev, s_prev, h, mask):
    return decoder.step(y_prev, s_prev, h, mask)


@pytest.mark.parametrize("check, reference", [
    (lesson03.bidirectional_states, recurrent.bidirectional_states),
    (lesson03.additive_score, ref.additive_score),
    (lesson03.masked_softmax, ref.masked_softmax),
    (lesson03.context_vector, ref.context_vector),
    (lesson03.attention_decoder_step, attention_decoder_step),
])
def test_reference_passes_and_stub_is_not_implemented(check, reference, capsys):
    assert check(reference) is None and check.evaluate(check.reference).passed
    assert "✔" in capsys.readouterr().out
    with prints_not_implemented():
        check(not_implemented)


def test_checks_are_defined_in_the_lessons_order():
    from course_utils.checks.core import REGISTRY
    assert list(REGISTRY["03"]) == ["bidirectional_states", "additive_score", "masked_softmax", "context_vector",
                                    "attention_decoder_step"]


def _final(h_fwd, h_bwd, fwd_at, bwd_at):
    rows = torch.arange(h_fwd.shape[0])
    return torch.cat([h_fwd[rows, fwd_at], h_bwd[rows, bwd_at]], -1)


def test_bidirectional_states_mistakes():
    def answer(h=lambda f, b: torch.cat([f, b], -1), fwd_at=lambda n, S: n - 1, bwd_at=lambda n, S: 0 * n,
               order=lambda f, b: [f, b]):
        def fn(h_fwd, h_bwd, lengths):
            S = h_fwd.shape[1]
            last = h_fwd[torch.arange(len(lengths)), fwd_at(lengths, S)]
            first = h_bwd[torch.arange(len(lengths)), bwd_at(lengths, S)]
            return h(h_fwd, h_bwd), torch.cat(order(last, first), -1)
        return fn

    assert lesson03.bidirectional_states.evaluate(answer()).passed
    named(lesson03.bidirectional_states, answer(h=lambda f, b: torch.cat([b, f], -1)), "directions are swapped")
    named(lesson03.bidirectional_states, answer(h=lambda f, b: f + b), "added the two directions")
    named(lesson03.bidirectional_states, answer(h=lambda f, b: torch.stack([f, b], -2)), "stacked the two directions")
    named(lesson03.bidirectional_states, answer(h=lambda f, b: torch.stack([f, b], -1)), "stacked the two directions")
    named(lesson03.bidirectional_states, answer(h=lambda f, b: torch.cat([f, b], 1)), "along the positions")
    named(lesson03.bidirectional_states, answer(fwd_at=lambda n, S: torch.full_like(n, S - 1)),
          "forward final state is taken at the last column")
    named(lesson03.bidirectional_states, answer(bwd_at=lambda n, S: n - 1),
          "backward final state is taken at the last real token.*position 0")
    named(lesson03.bidirectional_states, answer(bwd_at=lambda n, S: torch.full_like(n, S - 1)),
          "backward final state is taken at the last column")
    named(lesson03.bidirectional_states, answer(fwd_at=lambda n, S: torch.full_like(n, S - 1),
                                                bwd_at=lambda n, S: torch.full_like(n, S - 1)),
          "h at the last column")
    named(lesson03.bidirectional_states, answer(fwd_at=lambda n, S: 0 * n, bwd_at=lambda n, S: n - 1),
          "two final states are swapped")
    named(lesson03.bidirectional_states, answer(order=lambda f, b: [b, f]), "final states are in the wrong order")
    named(lesson03.bidirectional_states, lambda f, b, n: (torch.cat([f, b], -1), torch.stack(
        [f[torch.arange(len(n)), n - 1], b[:, 0]])), r"stacked as \(2, B, d\)")
    named(lesson03.bidirectional_states, lambda f, b, n: recurrent.bidirectional_states(f, b, n)[::-1],
          r"wrong order: you return \(final, h\)")
    named(lesson03.bidirectional_states, lambda f, b, n: recurrent.bidirectional_states(f, b, n)[0],
          "return 2 things")


def _concat(s, h):
    return torch.cat([s[:, None, :].expand(-1, h.shape[1], -1), h], -1)


def test_additive_score_mistakes():
    with pytest.raises(ExerciseError, match="tanh is missing"):
        lesson03.additive_score(lambda s, h, W, v: _concat(s, h) @ W.T @ v)
    with pytest.raises(ExerciseError, match="tanh is applied after"):
        lesson03.additive_score(lambda s, h, W, v: torch.tanh(_concat(s, h) @ W.T @ v))
    with pytest.raises(ExerciseError, match="wrong order"):
        lesson03.additive_score(lambda s, h, W, v: torch.tanh(
            torch.cat([h, s[:, None, :].expand(-1, h.shape[1], -1)], -1) @ W.T) @ v)


def test_additive_score_more_mistakes():
    named(lesson03.additive_score, lambda s, h, W, v: torch.tanh(_concat(s, h) @ W.T).sum(-1), "v_a is missing")
    named(lesson03.additive_score, lambda s, h, W, v: torch.tanh(_concat(s, h) @ W.T), "keeps the d_a hidden units")


def test_masked_softmax_mistakes():
    with pytest.raises(ExerciseError, match="mask is ignored"):
        lesson03.masked_softmax(lambda e, m: torch.softmax(e, -1))
    with pytest.raises(ExerciseError, match="mask is inverted"):
        lesson03.masked_softmax(lambda e, m: ref.masked_softmax(e, ~m))
    with pytest.raises(ExerciseError, match="gives NaN"):
        lesson03.masked_softmax(lambda e, m: torch.softmax(e.masked_fill(~m, float("-inf")), -1))
    with pytest.raises(ExerciseError, match="uniform weights"):
        lesson03.masked_softmax(lambda e, m: torch.softmax(e.masked_fill(~m, -1e9), -1))
    with pytest.raises(ExerciseError, match="without renormalising"):
        lesson03.masked_softmax(lambda e, m: torch.softmax(e, -1) * m)
    named(lesson03.masked_softmax, lambda e, m: torch.softmax(e.masked_fill(~m, 0.0), -1), "set to 0")
    named(lesson03.masked_softmax, lambda e, m: ref.masked_softmax(e, m, dim=0), "wrong axis")


def test_context_vector_mistakes():
    with pytest.raises(ExerciseError, match="ignores the weights"):
        lesson03.context_vector(lambda w, h: h.mean(1))
    with pytest.raises(ExerciseError, match="feature axis"):
        lesson03.context_vector(lambda w, h: (w[..., None] * h).sum(-1))
    with pytest.raises(ExerciseError, match="keeps the source axis"):
        lesson03.context_vector(lambda w, h: w[..., None] * h)
    with pytest.raises(ExerciseError, match="mean of"):
        lesson03.context_vector(lambda w, h: (w[..., None] * h).mean(1))
    named(lesson03.context_vector, lambda w, h: w @ h, "mixes the sequences of the batch")


def test_attention_decoder_step_mistakes():
    def no_mask(decoder, y_prev, s_prev, h, mask):
        return decoder.step(y_prev, s_prev, h, torch.ones_like(mask))

    def swapped_input(decoder, y_prev, s_prev, h, mask):
        c, alpha = decoder.attention(s_prev, h, mask)
        s = decoder.gru(torch.cat([c, decoder.embedding(y_prev)], -1), s_prev)
        return decoder.out(torch.cat([s, c], -1)), s, alpha

    def old_state_logits(decoder, y_prev, s_prev, h, mask):
        c, alpha = decoder.attention(s_prev, h, mask)
        s = decoder.gru(torch.cat([decoder.embedding(y_prev), c], -1), s_prev)
        return decoder.out(torch.cat([s_prev, c], -1)), s, alpha

    with pytest.raises(ExerciseError, match="weight to padding"):
        lesson03.attention_decoder_step(no_mask)
    with pytest.raises(ExerciseError, match="GRU input"):
        lesson03.attention_decoder_step(swapped_input)
    with pytest.raises(ExerciseError, match="previous state"):
        lesson03.attention_decoder_step(old_state_logits)
    with pytest.raises(ExerciseError, match="return 3 things, as `return logits, s, alpha`"):
        lesson03.attention_decoder_step(lambda *a: attention_decoder_step(*a)[:2])

    def inverted_mask(decoder, y_prev, s_prev, h, mask):
        return decoder.step(y_prev, s_prev, h, ~mask)

    named(lesson03.attention_decoder_step, inverted_mask, "padding only")
    named(lesson03.attention_decoder_step, lambda *a: attention_decoder_step(*a)[::-1],
          r"wrong order: you return \(alpha, s, logits\)")
    named(lesson03.attention_decoder_step, lambda *a: tuple(attention_decoder_step(*a)[i] for i in (1, 0, 2)),
          r"wrong order: you return \(s, logits, alpha\)")


def test_bidirectional_states_fresh_mistakes():
    def with_h(make_h):
        def fn(h_fwd, h_bwd, lengths):
            return make_h(h_fwd, h_bwd, lengths), recurrent.bidirectional_states(h_fwd, h_bwd, lengths)[1]
        return fn

    def gathered_at_lengths(h_fwd, h_bwd, lengths):          # the off-by-one, through gather
        B, _, d = h_fwd.shape
        last = h_fwd.gather(1, lengths.view(B, 1, 1).expand(B, 1, d))[:, 0]
        return torch.cat([h_fwd, h_bwd], -1), torch.cat([last, h_bwd[:, 0]], -1)

    def reversed_real_tokens(f, b, n):
        b = b.clone()
        for i, length in enumerate(n.tolist()):
            b[i, :length] = b[i, :length].flip(0)
        return torch.cat([f, b], -1)

    def at_lengths(h_fwd, h_bwd, lengths):
        return torch.cat([h_fwd, h_bwd], -1), torch.cat([h_fwd[torch.arange(len(lengths)), lengths], h_bwd[:, 0]], -1)

    named(lesson03.bidirectional_states, at_lengths, "one past the last position.*lengths - 1")
    named(lesson03.bidirectional_states, gathered_at_lengths, "one past the last position.*lengths - 1")
    named(lesson03.bidirectional_states, with_h(lambda f, b, n: torch.stack([f, b], -1).flatten(2)),
          "features of the two directions are interleaved")
    named(lesson03.bidirectional_states, with_h(lambda f, b, n: torch.stack([b, f], -1).flatten(2)),
          "interleaved, backward first")
    named(lesson03.bidirectional_states, with_h(lambda f, b, n: torch.cat([f, b.flip(1)], -1)),
          "backward states are reversed along the positions")
    named(lesson03.bidirectional_states, with_h(reversed_real_tokens), "backward states are reversed")
    named(lesson03.bidirectional_states, with_h(lambda f, b, n: torch.cat([f.flip(1), b], -1)),
          "forward states are reversed")


def test_additive_score_fresh_mistakes():
    def split_at(width_of):
        def fn(s, h, W, v):
            d = width_of(s, h)
            return torch.tanh((s @ W[:, :d].T)[:, None, :] + h @ W[:, d:].T) @ v
        return fn

    def repeat_view(s, h, W, v):
        B, T, _ = h.shape
        return torch.tanh(torch.cat([s.repeat(T, 1).view(B, T, -1), h], -1) @ W.T) @ v

    def h_mixed(s, h, W, v):
        B, T, _ = h.shape
        return ref.additive_score(s, h.transpose(0, 1).reshape(B, T, -1), W, v)

    named(lesson03.additive_score, lambda s, h, W, v: torch.tanh(_concat(s, h) @ W) @ v, "W_a is not transposed")
    named(lesson03.additive_score, split_at(lambda s, h: h.shape[-1]), "W_a is split at the wrong column")
    named(lesson03.additive_score, repeat_view, "another sequence's s changes")
    named(lesson03.additive_score, h_mixed, "another sequence's h changes")


def test_masked_softmax_fresh_mistakes():
    def by_hand(clamp=None):
        def fn(e, m):
            e = e if clamp is None else e.clamp(max=clamp)
            w = torch.exp(e) * m
            total = w.sum(-1, keepdim=True)
            return w / torch.where(total > 0, total, torch.ones_like(total))
        return fn

    named(lesson03.masked_softmax, lambda e, m: torch.softmax(e.masked_fill(~m, -1e30), 1) * m,
          "softmax over axis 1 instead of the last one")
    named(lesson03.masked_softmax, by_hand(), "NaN or inf for large scores.*subtract each row's maximum")
    named(lesson03.masked_softmax, by_hand(clamp=80.0), "exp underflows.*subtract each row's maximum")


def test_context_vector_fresh_mistakes():
    named(lesson03.context_vector, lambda w, h: ref.context_vector(torch.softmax(w, -1), h),
          "softmax again")
    named(lesson03.context_vector, lambda w, h: ref.context_vector(w / w.sum(-1, keepdim=True), h),
          "NaN for a row of zero weights.*divided by their sum")


def test_attention_decoder_step_fresh_mistakes():
    def luong(alpha_too):
        def fn(decoder, y_prev, s_prev, h, mask):
            c, alpha = decoder.attention(s_prev, h, mask)
            s = decoder.gru(torch.cat([decoder.embedding(y_prev), c], -1), s_prev)
            c, new_alpha = decoder.attention(s, h, mask)
            return decoder.out(torch.cat([s, c], -1)), s, new_alpha if alpha_too else alpha
        return fn

    named(lesson03.attention_decoder_step, luong(alpha_too=True), "read with the NEW state.*return that alpha_t")
    named(lesson03.attention_decoder_step, luong(alpha_too=False), "read with the NEW state")


def test_lesson03i_mistakes():
    def nonlinearity(f):
        return lambda s, h, W, v: f(_concat(s, h) @ W.T) @ v

    def mask_reshaped(e, m):
        return ref.masked_softmax(e, m.reshape(e.shape))

    def mask_indexes(e, m):
        e = e.clone()
        e[~m] = torch.finfo(e.dtype).min
        return torch.softmax(e, -1) * m

    def h_reshaped(w, h):
        B, T, d = h.shape
        return (h.reshape(B, d, T) @ w[..., None])[..., 0]

    def h_scrambled(w, h):
        B, T, d = h.shape
        return (w[..., None] * h.transpose(1, 2).reshape(B, T, d)).sum(1)

    def state_through(f, logits_too=None):
        def fn(decoder, y_prev, s_prev, h, mask):
            c, alpha = decoder.attention(s_prev, h, mask)
            s = f(decoder.gru(torch.cat([decoder.embedding(y_prev), c], -1), s_prev))
            logits = decoder.out(torch.cat([s, c], -1))
            return (logits_too or (lambda x: x))(logits), s, alpha
        return fn

    named(lesson03.additive_score, nonlinearity(torch.relu), "nonlinearity is relu instead of tanh")
    named(lesson03.additive_score, nonlinearity(torch.sigmoid), "nonlinearity is sigmoid instead of tanh")
    named(lesson03.masked_softmax, mask_reshaped, r"mask has shape \(2, 1, 5\), broadcastable.*masked_fill")
    named(lesson03.masked_softmax, mask_indexes, r"mask has shape \(2, 1, 5\), broadcastable.*nor index")
    named(lesson03.context_vector, h_reshaped, r"h is reshaped to \(B, d_h, T\) instead of transposed")
    named(lesson03.context_vector, h_scrambled, "features are mixed.*transpose")
    named(lesson03.attention_decoder_step, state_through(torch.tanh), "new state s went through an extra tanh")
    named(lesson03.attention_decoder_step, state_through(torch.relu), "new state s went through an extra relu")
    named(lesson03.attention_decoder_step, state_through(lambda x: x, lambda x: torch.log_softmax(x, -1)),
          "returned log-probabilities")
    named(lesson03.attention_decoder_step, state_through(lambda x: x, torch.tanh), "logits went through a tanh")
