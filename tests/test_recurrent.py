"""course_utils.recurrent and training: shapes, padding, teacher forcing = step by step, learning."""
import numpy as np
import pytest
import torch

from course_utils import recurrent as R
from course_utils.data import sequences as D
from course_utils.decoding import beam_search, greedy_decode, strip_after_eos
from course_utils.scores import DotScore
from course_utils.training import smooth, train

V = 13


def batch(seed=0):
    task = D.make_reverse_task(num_train=8, test_per_length=1, min_len=2, max_len=6, seed=seed)
    return D.collate(task.train)


@pytest.mark.parametrize("bidirectional", [False, True])
def test_encoder_ignores_padding(bidirectional):
    torch.manual_seed(0)
    encoder = R.Encoder(V, 5, 8, bidirectional=bidirectional)
    b = batch()
    h, s = encoder(b.src, b.lengths)
    assert h.shape == (8, b.src.shape[1], encoder.d_out) and s.shape == (8, encoder.d_out)
    for i in range(8):                        # the same as running each sequence alone
        n = int(b.lengths[i])
        h1, s1 = encoder(b.src[i:i + 1, :n], b.lengths[i:i + 1])
        assert torch.allclose(h[i, :n], h1[0], atol=1e-5) and torch.allclose(s[i], s1[0], atol=1e-5)
        assert torch.all(h[i, n:] == 0)


@pytest.mark.parametrize("make", [lambda: R.Seq2Seq(V, 8, 16), lambda: R.AttentionSeq2Seq(V, 8, 16, 8),
                                  lambda: R.AttentionSeq2Seq(V, 8, 16, score=DotScore())])
def test_teacher_forcing_equals_step_by_step(make):
    torch.manual_seed(0)
    model, b = make(), batch()
    logits = model(b.src, b.lengths, b.tgt_in)
    assert logits.shape == (*b.tgt_in.shape, V)
    h, s, mask = model.encode(b.src, b.lengths)
    for t in range(b.tgt_in.shape[1]):
        step, s = model.step(b.tgt_in[:, t], s, h, mask)
        assert torch.allclose(step, logits[:, t], atol=1e-5)


def test_attention_weights_are_kept_and_masked():
    torch.manual_seed(0)
    model, b = R.AttentionSeq2Seq(V, 8, 16, 8), batch()
    model(b.src, b.lengths, b.tgt_in)
    w = model.decoder.attn_weights
    assert w.shape == (8, b.tgt_in.shape[1], b.src.shape[1])
    assert torch.allclose(w.sum(-1), torch.ones(8, b.tgt_in.shape[1]), atol=1e-5)
    assert torch.all(w.masked_select(~(b.src != 0)[:, None, :].expand_as(w)) == 0)


def test_bidirectional_states_are_the_encoders_output():
    """The lesson-03 reference puts nn.GRU(bidirectional=True)'s two directions together as it does."""
    torch.manual_seed(0)
    encoder, b = R.Encoder(V, 5, 8, bidirectional=True), batch()
    h, final = encoder(b.src, b.lengths)
    h2, final2 = R.bidirectional_states(h[..., :8], h[..., 8:], b.lengths)
    assert torch.equal(h2, h) and torch.allclose(final2, final, atol=1e-6)


def models():
    torch.manual_seed(0)
    return [R.Seq2Seq(V, 8, 16), R.AttentionSeq2Seq(V, 8, 16, 8), R.AttentionSeq2Seq(V, 8, 16, score=DotScore())]


def sharpened(model, scale=4.0):
    """Sharper output distributions than at initialisation, so that <eos> and every choice matter."""
    with torch.no_grad():
        model.decoder.out.weight.mul_(scale)
    return model.eval()


@pytest.mark.parametrize("index", [0, 1, 2])
def test_greedy_decode_follows_the_protocol_and_equals_step_by_step(index):
    model, b = sharpened(models()[index]), batch()
    tokens = greedy_decode(model, b.src, D.BOS_ID, D.EOS_ID, D.PAD_ID, max_len=7)
    assert tokens.dim() == 2 and tokens.shape[0] == 8 and tokens.shape[1] <= 7
    h, s, mask = model.encode(b.src, b.lengths)                     # the same, written out with `step`
    y = torch.full((8,), D.BOS_ID)
    for t in range(tokens.shape[1]):
        logits, s = model.step(y, s, h, mask)
        logits[:, [D.PAD_ID, D.BOS_ID]] = float("-inf")             # never generated
        y = logits.argmax(-1)
        ended = (tokens[:, :t] == D.EOS_ID).any(1)
        assert torch.equal(tokens[~ended, t], y[~ended]) and torch.all(tokens[ended, t] == D.PAD_ID)
    assert not (tokens == D.BOS_ID).any()
    finished = (tokens == D.EOS_ID).any(1)
    assert tokens.shape[1] == 7 or finished.all()                   # stops when every row has ended


def test_greedy_decode_returns_the_attention_weights():
    model, b = sharpened(models()[1]), batch()
    tokens, weights = greedy_decode(model, b.src, D.BOS_ID, D.EOS_ID, D.PAD_ID, max_len=5, return_weights=True)
    assert weights.shape == (*tokens.shape, b.src.shape[1])
    assert torch.allclose(weights.sum(-1), torch.ones(tokens.shape), atol=1e-5)
    assert torch.all(weights.masked_select((b.src == D.PAD_ID)[:, None, :].expand_as(weights)) == 0)
    assert greedy_decode(models()[0], b.src, D.BOS_ID, D.EOS_ID, D.PAD_ID, max_len=5, return_weights=True)[1] is None


@pytest.mark.parametrize("index", [0, 1])
def test_greedy_decode_of_a_batch_equals_each_sentence_alone(index):
    model, b = sharpened(models()[index]), batch()
    together = greedy_decode(model, b.src, D.BOS_ID, D.EOS_ID, D.PAD_ID, max_len=7)
    for i in range(8):
        n = int(b.lengths[i])
        alone = greedy_decode(model, b.src[i:i + 1, :n], D.BOS_ID, D.EOS_ID, D.PAD_ID, max_len=7)
        assert strip_after_eos(alone[0], D.EOS_ID) == strip_after_eos(together[i], D.EOS_ID)


@pytest.mark.parametrize("index", [0, 1, 2])
def test_beam_search_of_size_one_equals_greedy(index):
    model, b = sharpened(models()[index]), batch()
    greedy = greedy_decode(model, b.src, D.BOS_ID, D.EOS_ID, D.PAD_ID, max_len=9)
    beams = beam_search(model, b.src, D.BOS_ID, D.EOS_ID, D.PAD_ID, beam_size=1, max_len=9)
    for row, hyps in zip(greedy.tolist(), beams):
        assert hyps[0].tokens == strip_after_eos(row, D.EOS_ID)


@pytest.mark.parametrize("index", [0, 1])
def test_beam_search_of_a_batch_equals_each_sentence_alone(index):
    """The state is repeated and reordered with the beams, row by row, without mixing sentences."""
    model, b = sharpened(models()[index], scale=2.0), batch()
    together = beam_search(model, b.src, D.BOS_ID, D.EOS_ID, D.PAD_ID, beam_size=3, max_len=7, n_best=3)
    for i in (0, 3, 7):
        alone = beam_search(model, b.src[i:i + 1, :int(b.lengths[i])], D.BOS_ID, D.EOS_ID, D.PAD_ID,
                            beam_size=3, max_len=7, n_best=3)[0]
        assert [h.tokens for h in alone] == [h.tokens for h in together[i]]
        assert np.allclose([h.score for h in alone], [h.score for h in together[i]], atol=1e-4)


def test_sequence_loss_ignores_padding():
    logits = torch.randn(2, 3, V)
    tgt = torch.tensor([[4, 5, 2], [6, 2, 0]])
    per = torch.nn.functional.cross_entropy(logits.transpose(1, 2), tgt, reduction="none")
    assert torch.isclose(R.sequence_loss(logits, tgt), per.flatten()[:5].mean())


def test_token_accuracy():
    assert R.token_accuracy([3, 4, 5], [3, 4, 6]) == pytest.approx(2 / 3)
    assert R.token_accuracy([3], [3, 4]) == 0.5


def test_training_lowers_the_loss_and_accuracy_by_length():
    torch.manual_seed(0)
    task = D.make_reverse_task(num_train=256, test_per_length=4, min_len=2, max_len=4, num_tokens=4)
    model = R.Seq2Seq(len(task.vocab), 8, 16)
    history = train(model, D.BatchLoader(task.train, 64), R.seq2seq_loss, 12, lr=2e-2, progress=False)
    assert len(history) == 12 and np.mean(history[-3:]) < np.mean(history[:3])
    accuracy = R.accuracy_by_length(model, task.test)
    assert list(accuracy) == [2, 3, 4] and all(0 <= a <= 1 for a in accuracy.values())


@pytest.mark.slow
def test_attention_learns_short_reversal():
    torch.manual_seed(0)
    task = D.make_reverse_task(num_train=2000, test_per_length=20, min_len=2, max_len=4, num_tokens=4)
    model = R.AttentionSeq2Seq(len(task.vocab), 16, 32, 16)
    train(model, D.BatchLoader(task.train, 64), R.seq2seq_loss, 150, lr=1e-2, progress=False)
    assert min(R.accuracy_by_length(model, task.test).values()) > 0.8


def test_train_cycles_data_and_smooth():
    model = torch.nn.Linear(2, 1)
    data = [torch.randn(4, 2) for _ in range(3)]
    history = train(model, data, lambda m, x: (m(x) ** 2).mean(), 7, progress=False)
    assert len(history) == 7
    assert np.allclose(smooth([1, 2, 3, 4], window=2), [1, 1.5, 2.5, 3.5])
    with pytest.raises(ValueError, match="without any batch"):
        train(model, [], lambda m, x: x, 1, progress=False)


def test_bad_inputs_are_named():
    encoder = R.Encoder(V, 5, 8)
    with pytest.raises(TypeError, match="LongTensor"):
        encoder(torch.zeros(2, 3), torch.tensor([3, 2]))
    with pytest.raises(ValueError, match="lengths must lie"):
        encoder(torch.ones(2, 3, dtype=torch.long), torch.tensor([4, 2]))
    with pytest.raises(ValueError, match="do not match"):
        R.sequence_loss(torch.zeros(2, 3, V), torch.zeros(2, 4, dtype=torch.long))
