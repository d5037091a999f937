"""course_utils.data.sequences: the reverse task, its splits, batches and padding."""
import numpy as np
import pytest

from course_utils.data import sequences as D


def test_task_is_seeded_and_targets_are_reversed():
    a = D.make_reverse_task(num_train=300, test_per_length=5, min_len=3, max_len=8, num_tokens=6, seed=1)
    b = D.make_reverse_task(num_train=300, test_per_length=5, min_len=3, max_len=8, num_tokens=6, seed=1)
    assert all(np.array_equal(x[0], y[0]) for x, y in zip(a.train, b.train))
    assert len(a.train) == 300 and len(a.test) == 6 * 5
    for src, tgt in a.train + a.test:
        assert 3 <= len(src) <= 8 and np.array_equal(tgt, src[::-1])
        assert src.min() >= 3 and src.max() < 3 + 6
    assert sorted(D.by_length(a.test)) == list(range(3, 9))
    test_sources = {s.tobytes() for s, _ in a.test}
    assert not any(s.tobytes() in test_sources for s, _ in a.train)


def test_copy_task_and_bad_arguments():
    task = D.make_reverse_task(num_train=10, test_per_length=1, min_len=2, max_len=3, task="copy")
    assert all(np.array_equal(s, t) for s, t in task.train)
    with pytest.raises(ValueError, match="reverse"):
        D.make_reverse_task(task="sort")
    with pytest.raises(ValueError, match="min_len"):
        D.make_reverse_task(min_len=5, max_len=4)


def test_batch_shift_and_padding():
    pairs = [(np.array([3, 4, 5]), np.array([5, 4, 3])), (np.array([6]), np.array([6]))]
    batch = D.collate(pairs)
    assert batch.src.tolist() == [[3, 4, 5], [6, D.PAD_ID, D.PAD_ID]]
    assert batch.lengths.tolist() == [3, 1]
    assert batch.tgt_in.tolist() == [[D.BOS_ID, 5, 4, 3], [D.BOS_ID, 6, 0, 0]]
    assert batch.tgt_out.tolist() == [[5, 4, 3, D.EOS_ID], [6, D.EOS_ID, 0, 0]]


def test_loader_covers_every_pair_once_per_epoch():
    task = D.make_reverse_task(num_train=50, test_per_length=1, min_len=2, max_len=5)
    loader = D.BatchLoader(task.train, batch_size=16, seed=0)
    assert len(loader) == 4
    for _ in range(2):
        assert sum(len(b.lengths) for b in loader) == 50


def test_vocab_decode():
    vocab = D.Vocab(4)
    assert len(vocab) == 7 and vocab.decode([3, 4, 0, D.EOS_ID, 5]) == ["a", "b"]


def test_one_way_to_batch_for_the_whole_course():
    """Lessons 02-04 and lesson 10 batch with the same padding id, pad function, Batch type and collate."""
    from course_utils import tokenization
    from course_utils.data import batch
    from course_utils.translation import data as translation_data
    assert D.collate is batch.collate is translation_data.collate and D.pad is batch.pad and D.Batch is batch.Batch
    assert (tokenization.PAD_ID, tokenization.BOS_ID, tokenization.EOS_ID) == (batch.PAD_ID, batch.BOS_ID, batch.EOS_ID)
    b = batch.collate([([7, 8, 9], [5, 6]), ([7], [5])])             # lesson 10's pairs: plain id lists
    assert b.tgt_in.tolist() == [[batch.BOS_ID, 5, 6], [batch.BOS_ID, 5, 0]]
    assert b.tgt_out.tolist() == [[5, 6, batch.EOS_ID], [5, batch.EOS_ID, 0]]
    assert (b.src_tokens, b.tgt_tokens) == (4, 5)
